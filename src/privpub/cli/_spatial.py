"""CLI of privpub.spatial: ``privpub spatial INPUT ...`` and ``privpub reproduce spatial``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from privpub.cli._common import (
    SEED_HELP,
    BudgetFileOption,
    BudgetTotalOption,
    DataLabelOption,
    ForceOption,
    check_out_dir,
    check_output,
    echo_session,
    handle_errors,
    open_session,
    output_file,
    publish_kwargs,
    read_table,
)
from privpub.errors import DomainError, ParameterError

METHODS = ("kdght", "ug", "gtr", "rappor")
#: formats of the release (--output) and of the diagnostic plot (--plot)
FORMATS = ("json",)
PLOT_FORMATS = ("png", "svg", "pdf")


def _parse_box(text: str, name: str) -> tuple[float, float, float, float]:
    parts = [p for p in text.replace(" ", "").split(",") if p]
    try:
        vals = tuple(float(p) for p in parts)
    except ValueError as exc:
        raise ParameterError(f"{name} must be four numbers x0,y0,x1,y1, got {text!r}") from exc
    if len(vals) != 4:
        raise ParameterError(f"{name} must be four numbers x0,y0,x1,y1, got {text!r}")
    return vals[0], vals[1], vals[2], vals[3]


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub spatial`` and ``privpub reproduce spatial``."""

    @app.command("spatial")
    @handle_errors
    def spatial(
        input: Annotated[Path, typer.Argument(help="CSV or Parquet file, one row per user.")],
        x: Annotated[str, typer.Option("--x", help="Column holding the x coordinate.")],
        y: Annotated[str, typer.Option("--y", help="Column holding the y coordinate.")],
        epsilon: Annotated[float, typer.Option("--epsilon", "-e", help="Per-user LDP budget (> 0).")],
        output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the release (.json).")],
        bounds: Annotated[str | None, typer.Option(
            "--bounds", help="Public domain x0,y0,x1,y1, fixed in advance (required; never taken from "
            "the data).")] = None,
        method: Annotated[str, typer.Option("--method", "-m", help="kdght, ug, gtr or rappor.")] = "kdght",
        mode: Annotated[str, typer.Option(
            "--mode", help="simulate (exact aggregated law, fast) or per_user (each user's client).")]
            = "simulate",
        clip: Annotated[bool, typer.Option(
            "--clip/--no-clip", help="Clamp points outside the bounds instead of failing.")] = False,
        seed: Annotated[int | None, typer.Option("--seed", help=SEED_HELP)] = None,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="Also draw the leaves over the point density into this .png/.svg/.pdf (shows "
            "the raw data: for the curator only).")] = None,
        query: Annotated[list[str] | None, typer.Option(
            "--query", "-q", help="Answer a range query x0,y0,x1,y1 (repeatable).")] = None,
        force: ForceOption = False,
        budget_file: BudgetFileOption = None,
        budget_total: BudgetTotalOption = None,
        data_label: DataLabelOption = None,
    ) -> None:
        """Publish 2-D points under local DP as leaves with noisy counts (KDG-HT or a baseline)."""
        from privpub.spatial import PUBLISHERS

        if method not in PUBLISHERS:
            raise ParameterError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if bounds is None:
            raise ParameterError(
                "--bounds must be given as x0,y0,x1,y1: the domain is public and fixed in advance "
                "(taking the data's min/max would leak the extreme locations)"
            )
        box = _parse_box(bounds, "--bounds")
        rects = [_parse_box(text, "--query") for text in query or []]
        check_output(output, force=force, inputs=[input], supported=FORMATS)
        if plot is not None:
            check_output(plot, force=force, inputs=[input, output], option="--plot", supported=PLOT_FORMATS)
        publisher = PUBLISHERS[method](clip=clip)
        session = open_session(budget_file, budget_total, data_label or input.name)
        extra = publish_kwargs(publisher.publish, session, "spatial")
        frame = read_table(input)
        for col in (x, y):
            if col not in frame.columns:
                raise DomainError(f"column {col!r} is not in {str(input)!r} (columns: {', '.join(frame.columns)})")
        try:
            pts = frame[[x, y]].to_numpy(dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DomainError(f"columns {x!r} and {y!r} must hold numbers: {exc}") from exc
        del frame
        release = publisher.publish(pts, bounds=box, epsilon=epsilon, rng=seed, mode=mode, **extra)
        with output_file(output, force=force) as tmp:
            release.to_json(tmp)
        typer.echo(f"{method}: {release.n_leaves} leaves from {release.n_users} users, "
                   f"epsilon={release.epsilon:g} -> {output}")
        typer.echo(str(release.ledger))
        echo_session(session, budget_file)
        for text, rect in zip(query or [], rects):
            typer.echo(f"query {text}: {release.range_count([rect])[0]:.1f}")
        if plot is not None:
            with output_file(plot, force=force, option="--plot") as tmp:
                release.plot(points=pts, path=tmp)
            typer.echo(f"plot -> {plot}")

    @reproduce_app.command("spatial")
    @handle_errors
    def reproduce_spatial(
        quick: Annotated[bool, typer.Option("--quick", help="Small run (~1-2 minutes).")] = False,
        out: Annotated[Path | None, typer.Option("--out", help="Output directory.")] = None,
        data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Data directory "
                                                      "(default: $PRIVPUB_DATA).")] = None,
        n_points: Annotated[int | None, typer.Option(
            "--n-points", help="Points per dataset, >= 1 (default: all in full mode, 10^6 in quick).")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    ) -> None:
        """Reproduce paper 002 (KDG-HT): Fig. 4-5 (RE), Fig. 6 (NE), Table 2 (runtime)."""
        from privpub.experiments import spatial as exp
        from privpub.experiments._common import default_out_dir

        if n_points is not None and n_points < 1:
            raise ParameterError(f"--n-points must be >= 1, got {n_points}")
        target = check_out_dir(out if out is not None else default_out_dir("spatial"))
        summary = exp.reproduce(target, quick=quick, data_dir=data_dir, rng=seed, n_points=n_points,
                                progress=True)
        typer.echo(f"summary -> {summary}")
