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
    Checks,
    DataLabelOption,
    EpsilonOption,
    ForceOption,
    check_out_dir,
    check_output,
    echo_session,
    handle_errors,
    open_session,
    output_file,
    publish_kwargs,
)
from privpub.cli._tables import HeaderOption, NamesOption, read_records, resolve_table
from privpub.core import check_epsilon
from privpub.errors import DomainError, ParameterError

METHODS = ("kdght", "ug", "gtr", "rappor", "hdg", "ahead")
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
    if not all(np.isfinite(vals)):
        raise ParameterError(f"{name} must be four finite numbers x0,y0,x1,y1, got {text!r}")
    if vals[0] > vals[2] or vals[1] > vals[3]:
        raise ParameterError(f"{name} must have x0 <= x1 and y0 <= y1, got {text!r}")
    return vals[0], vals[1], vals[2], vals[3]


def _parse_query(text: str, box: tuple[float, float, float, float] | None) -> tuple[float, float, float, float]:
    rect = _parse_box(text, "--query")
    if box is not None and (rect[0] < box[0] or rect[1] < box[1] or rect[2] > box[2] or rect[3] > box[3]):
        raise ParameterError(f"--query {text!r} must lie inside --bounds {','.join(f'{v:g}' for v in box)}")
    return rect


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub spatial`` and ``privpub reproduce spatial``."""

    @app.command("spatial")
    @handle_errors
    def spatial(
        input: Annotated[Path, typer.Argument(help="CSV or Parquet file, one row per user.")],
        x: Annotated[str, typer.Option("--x", help="Column holding the x coordinate.")],
        y: Annotated[str, typer.Option("--y", help="Column holding the y coordinate.")],
        epsilon: EpsilonOption,
        output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the release (.json).")],
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
        seed: Annotated[int | None, typer.Option("--seed", help=SEED_HELP)] = None,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="Also draw the leaves over the point density into this .png/.svg/.pdf (shows "
            "the raw data: for the curator only).")] = None,
        query: Annotated[list[str] | None, typer.Option(
            "--query", "-q", help="Answer a range query x0,y0,x1,y1 inside --bounds (repeatable).")] = None,
        header: HeaderOption = None,
        names: NamesOption = None,
        force: ForceOption = False,
        budget_file: BudgetFileOption = None,
        budget_total: BudgetTotalOption = None,
        data_label: DataLabelOption = None,
    ) -> None:
        """Publish 2-D points under local DP as leaves with noisy counts (KDG-HT, HDG, AHEAD or a baseline).

        --epsilon is each user's local budget. Every argument (queries included) is checked before the
        input is read or any budget is reserved.
        """
        from privpub.spatial import PUBLISHERS

        checks = Checks()
        checks(check_epsilon, epsilon, "--epsilon")
        if method not in PUBLISHERS:
            checks.add(f"--method must be one of {', '.join(sorted(PUBLISHERS))}, got {method!r}")
        if mode not in ("simulate", "per_user"):
            checks.add(f"--mode must be simulate or per_user, got {mode!r}")
        box = None
        if bounds is None:
            checks.add("--bounds must be given as x0,y0,x1,y1: the domain is public and fixed in advance "
                       "(taking the data's min/max would leak the extreme locations)")
        else:
            box = checks(_parse_box, bounds, "--bounds")
            if box is not None and (box[0] == box[2] or box[1] == box[3]):
                checks.add(f"--bounds must have x0 < x1 and y0 < y1, got {bounds!r}")
        rects = [checks(_parse_query, text, box) for text in query or []]
        checks(check_output, output, force=force, inputs=[input], supported=FORMATS)
        if plot is not None:
            checks(check_output, plot, force=force, inputs=[input, output], option="--plot", supported=PLOT_FORMATS)
        publisher = checks(PUBLISHERS[method], clip=clip) if method in PUBLISHERS else None
        checks.done()
        assert box is not None and publisher is not None
        session = open_session(budget_file, budget_total, data_label or input.name)
        extra = publish_kwargs(publisher.publish, session, "spatial")
        frame = read_records(input, resolve_table(schema_path=None, dataset_schema=None, names=names, required=False),
                             header=header, needed=[x, y])
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
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory.")] = None,
        data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Data directory "
                                                      "(default: $PRIVPUB_DATA).")] = None,
        n_points: Annotated[int | None, typer.Option(
            "--n-points", help="Points per dataset, >= 1 (default: all in full mode, 10^6 in quick).")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    ) -> None:
        """Reproduce paper 002 (KDG-HT, with HDG and AHEAD beside it): Fig. 4-5 (RE), Fig. 6 (NE), Table 2."""
        from privpub.experiments import default_out_dir
        from privpub.experiments import spatial as exp

        if n_points is not None and n_points < 1:
            raise ParameterError(f"--n-points must be >= 1, got {n_points}")
        target = check_out_dir(out if out is not None else default_out_dir("spatial"))
        summary = exp.reproduce(target, quick=quick, data_dir=data_dir, rng=seed, n_points=n_points,
                                progress=True)
        typer.echo(f"summary -> {summary}")
