"""``privpub datasets list | info``: which of the papers' datasets are present, and where to get them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privpub.cli._common import handle_errors
from privpub.datasets import (
    DATA_ENV,
    CountsDataset,
    SeriesDataset,
    TableDataset,
    available,
    data_directory,
    info,
    list_datasets,
    load,
)

_DATA_DIR_HELP = f"Data directory (default: ${DATA_ENV})."
DataDirOption = Annotated[Path | None, typer.Option("--data-dir", help=_DATA_DIR_HELP)]


def _table_rows(data_dir: Path | None) -> list[tuple[str, str, str, str]]:
    root = data_directory(data_dir)
    present = set(available(root))
    rows = []
    for name in list_datasets():
        entry = info(name)
        if name in present and root is not None:
            where = ", ".join(str(root / f) for f in entry.files)
            rows.append((name, entry.kinds, "present", where))
        else:
            rows.append((name, entry.kinds, "missing", entry.source))
    return rows


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub datasets`` to the application."""
    datasets_app = typer.Typer(help="The papers' datasets: what is present and where to get it.",
                               no_args_is_help=True)
    app.add_typer(datasets_app, name="datasets")

    @datasets_app.command("list")
    @handle_errors
    def list_command(
        data_dir: DataDirOption = None,
    ) -> None:
        """Show every registered dataset: kind, present/missing, and its path or public source."""
        root = data_directory(data_dir)
        rows = _table_rows(data_dir)
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        header = ("name", "kind", "status", "path / source")
        widths = [max(w, len(h)) for w, h in zip(widths, header)]
        typer.echo("  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  " + header[3])
        for r in rows:
            typer.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)) + "  " + r[3])
        n_present = sum(r[2] == "present" for r in rows)
        where = str(root) if root is not None else f"no data directory (pass --data-dir or set ${DATA_ENV})"
        typer.echo(f"{n_present} of {len(rows)} present in {where}")

    @datasets_app.command("info")
    @handle_errors
    def info_command(
        name: Annotated[str, typer.Argument(help="Dataset name, e.g. adult or dpbench_1d/HEPTH.")],
        data_dir: DataDirOption = None,
    ) -> None:
        """Describe one dataset; when its files are present, load it and print its size."""
        entry = info(name)
        typer.echo(f"name:        {entry.name}")
        typer.echo(f"kind:        {entry.kinds}")
        typer.echo(f"files:       {', '.join(entry.files)}")
        typer.echo(f"source:      {entry.source}")
        typer.echo(f"description: {entry.description}")
        if entry.name not in available(data_dir):
            typer.echo("status:      missing")
            return
        ds = load(entry.name, data_dir)
        if isinstance(ds, TableDataset):
            split = ""
            if ds.train is not None and ds.test is not None:
                split = f" ({len(ds.train)} train + {len(ds.test)} test)"
            typer.echo(f"status:      present: {len(ds.frame)} records x {ds.frame.shape[1]} columns{split}")
        elif isinstance(ds, CountsDataset):
            typer.echo(f"status:      present: counts of shape {ds.counts.shape}, total {ds.total}")
        elif isinstance(ds, SeriesDataset):
            typer.echo(f"status:      present: series of length {len(ds.series)}, total {ds.total}")
