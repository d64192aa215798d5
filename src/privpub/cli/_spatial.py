"""CLI of privpub.spatial: ``privpub spatial INPUT ...`` and ``privpub reproduce spatial``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from privpub.cli._common import handle_errors, read_table
from privpub.errors import DomainError, ParameterError

METHODS = ("kdght", "ug", "gtr", "rappor", "hdg", "ahead")


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
        output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the release (JSON).")],
        bounds: Annotated[str | None, typer.Option(
            "--bounds", help="Public domain x0,y0,x1,y1, fixed in advance (required; never taken from "
            "the data).")] = None,
        method: Annotated[str, typer.Option("--method", "-m", help="kdght, ug, gtr, rappor, hdg or ahead.")]
            = "kdght",
        mode: Annotated[str, typer.Option(
            "--mode", help="simulate (exact aggregated law, fast) or per_user (each user's client).")]
            = "simulate",
        clip: Annotated[bool, typer.Option(
            "--clip/--no-clip", help="Clamp points outside the bounds instead of failing.")] = False,
        seed: Annotated[int | None, typer.Option("--seed", help="Random seed (default: fresh entropy).")]
            = None,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="Also draw the leaves over the point density into this PNG (shows the raw "
            "data: for the curator only).")] = None,
        query: Annotated[list[str] | None, typer.Option(
            "--query", "-q", help="Answer a range query x0,y0,x1,y1 (repeatable).")] = None,
    ) -> None:
        """Publish 2-D points under local DP as leaves with noisy counts (KDG-HT, HDG, AHEAD or a baseline)."""
        from privpub.spatial import PUBLISHERS

        if method not in PUBLISHERS:
            raise ParameterError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if bounds is None:
            raise ParameterError(
                "--bounds must be given as x0,y0,x1,y1: the domain is public and fixed in advance "
                "(taking the data's min/max would leak the extreme locations)"
            )
        box = _parse_box(bounds, "--bounds")
        frame = read_table(input)
        for col in (x, y):
            if col not in frame.columns:
                raise DomainError(f"column {col!r} is not in {str(input)!r} (columns: {', '.join(frame.columns)})")
        try:
            pts = frame[[x, y]].to_numpy(dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DomainError(f"columns {x!r} and {y!r} must hold numbers: {exc}") from exc
        release = PUBLISHERS[method](clip=clip).publish(pts, bounds=box, epsilon=epsilon, rng=seed, mode=mode)
        release.to_json(output)
        typer.echo(f"{method}: {release.n_leaves} leaves from {release.n_users} users, "
                   f"epsilon={release.epsilon:g} -> {output}")
        typer.echo(str(release.ledger))
        for text in query or []:
            rect = _parse_box(text, "--query")
            typer.echo(f"query {text}: {release.range_count([rect])[0]:.1f}")
        if plot is not None:
            release.plot(points=pts, path=plot)
            typer.echo(f"plot -> {plot}")

    @reproduce_app.command("spatial")
    @handle_errors
    def reproduce_spatial(
        quick: Annotated[bool, typer.Option("--quick", help="Small run (~1-2 minutes).")] = False,
        out: Annotated[Path | None, typer.Option("--out", help="Output directory.")] = None,
        data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Data directory "
                                                      "(default: $PRIVPUB_DATA).")] = None,
        n_points: Annotated[int | None, typer.Option(
            "--n-points", help="Points per dataset (default: all in full mode, 10^6 in quick).")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    ) -> None:
        """Reproduce paper 002 (KDG-HT, with HDG and AHEAD beside it): Fig. 4-5 (RE), Fig. 6 (NE), Table 2."""
        from privpub.experiments import spatial as exp
        from privpub.experiments._common import default_out_dir

        target = out if out is not None else default_out_dir("spatial")
        summary = exp.reproduce(target, quick=quick, data_dir=data_dir, rng=seed, n_points=n_points,
                                progress=True)
        typer.echo(f"summary -> {summary}")
