"""``privpub reproduce all`` (every paper, one HTML report) and ``privpub report DIR`` (rebuild it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privpub.cli._common import check_out_dir, handle_errors
from privpub.errors import ParameterError


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub reproduce all`` and ``privpub report`` to the application."""

    @reproduce_app.command("all")
    @handle_errors
    def reproduce_all_command(
        quick: bool = typer.Option(False, "--quick", help="Each part's quick mode (under 10 minutes in all)."),
        out: Annotated[Path, typer.Option(
            "--out", "-o", help="Output directory: one folder per part and report.html.")] = Path("privpub-results"),
        data_dir: Annotated[Path | None, typer.Option(
            "--data-dir", help="Data directory (default: $PRIVPUB_DATA).")] = None,
        seed: int = typer.Option(0, "--seed", help="Random seed passed to every part."),
        part: Annotated[list[str] | None, typer.Option(
            "--part", help="Run only this part (repeatable): histogram, ldp_synth, spatial, decision, "
                           "stream.")] = None,
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
    ) -> None:
        """Run every paper's reproduction and write one self-contained HTML report.

        Missing datasets are listed with their public source and the rest still runs; a part that fails is reported, the others continue, and the command exits with code 1.
        """
        from privpub.experiments.all import PARTS, reproduce_all

        if part:
            bad = [p for p in part if p not in PARTS]
            if bad:
                raise ParameterError(f"--part must be one of {', '.join(PARTS)}, got {', '.join(bad)}")
        report = reproduce_all(check_out_dir(out), quick=quick, data_dir=data_dir, rng=seed, parts=part or None,
                               progress=progress, echo=typer.echo)
        if _echo_verdicts(report.parent / "claims_all.csv"):
            raise typer.Exit(code=1)

    @app.command("report")
    @handle_errors
    def report_command(
        results: Annotated[Path, typer.Argument(
            help="Directory holding one folder per part (as written by reproduce).")] = Path("privpub-results"),
    ) -> None:
        """Rebuild report.html from part folders already in RESULTS (runs no experiment)."""
        from privpub.experiments.all import build_report_from_dir

        if not results.is_dir():
            raise ParameterError(f"RESULTS {str(results)!r} is not a directory of part folders (as written by "
                                 "privpub reproduce)")
        path = build_report_from_dir(results)
        typer.echo(f"report: {path}")
        _echo_verdicts(path.parent / "claims_all.csv")


def _echo_verdicts(path: Path) -> list[str]:
    """Print the verdict counts; return the parts whose run failed (the command then exits 1)."""
    import pandas as pd

    if not path.is_file():
        return []
    frame = pd.read_csv(path, keep_default_na=False)
    if frame.empty:
        return []
    counts = frame.groupby("verdict").size()
    typer.echo("claims: " + ", ".join(f"{int(n)} {v}" for v, n in counts.items()))
    failed = sorted(set(frame.loc[frame.status == "failed", "part"]))
    if failed:
        typer.echo(f"failed: {', '.join(failed)} (see the report)", err=True)
    return failed
