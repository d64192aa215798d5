"""CLI commands of privpub.ldp_synth: ``privpub synth`` and ``privpub reproduce ldp_synth``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from privpub._io import write_json
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
    publish_kwargs,
    read_json,
    read_table,
    write_table,
)
from privpub.core import Schema, check_allocation
from privpub.errors import ParameterError

#: output formats of the synthetic table
FORMATS = ("csv", "json", "parquet")


def check_sizes(schema: Schema, n_users: int, degree: int, rows: int) -> None:
    """Refuse a run whose reports, joint tables or synthetic rows would not fit in memory."""
    sizes = sorted(schema.sizes, reverse=True)
    check_allocation(n_users * sum(sizes), 0.25, "the users' reports (one bit per user and domain value)",
                     "the schema's domains (fewer categories, a coarser numeric resolution) or --columns",
                     unit="bits")
    if degree >= 1 and len(sizes) > degree:
        check_allocation(math.prod(sizes[: degree + 1]), 32,
                         f"the largest joint distribution of {degree + 1} attributes", "--degree or the largest "
                         "domains of the schema", unit="cells")
    check_allocation(rows * max(len(sizes), 1), 24, "the synthetic table", "--rows", unit="cells")


def _load_schema(path: Path) -> Schema:
    data = read_json(path, "schema")
    if not isinstance(data, dict):
        raise ParameterError(f"schema file {str(path)!r} must hold a JSON object with 'attributes'")
    return Schema.from_dict(data)


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add this part's commands to the application."""

    @app.command("synth")
    @handle_errors
    def synth(
        input: Annotated[Path, typer.Argument(help="Input table (CSV or Parquet), one row per user.")],
        schema_path: Annotated[Path, typer.Option(
            "--schema", help="JSON schema declaring every column's public categories "
            "(privpub.core.Schema.to_dict format). Never inferred from the data."
        )],
        output: Annotated[Path, typer.Option(
            "-o", "--output", help="Where to write the synthetic table: .csv, .json or .parquet (from the suffix).")],
        epsilon: float | None = typer.Option(None, "--epsilon", help="Total per-user epsilon (LDP)."),
        flip_prob: float | None = typer.Option(None, "--flip-prob", help="Bit flip probability f in (0, 1)."),
        degree: int = typer.Option(2, "--degree", "-k", help="Max parents per node of the Bayesian network."),
        columns: str | None = typer.Option(None, "--columns", help="Comma-separated subset of columns."),
        method: str = typer.Option("em", "--method", help="Joint estimator: em (paper), linear (fast), hybrid."),
        start: str = typer.Option("entropy", "--start", help="First node: entropy (Alg. 4) or random (Alg. 3)."),
        rows: int | None = typer.Option(None, "--rows", help="Synthetic rows, >= 1 (default: as many as the input)."),
        seed: int | None = typer.Option(None, "--seed", help=SEED_HELP),
        network_out: Annotated[Path | None, typer.Option("--network-out", help="Write the network (.json).")] = None,
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
        force: ForceOption = False,
        budget_file: BudgetFileOption = None,
        budget_total: BudgetTotalOption = None,
        data_label: DataLabelOption = None,
    ) -> None:
        """Local-DP synthetic data: simulate each user's RAPPOR report, fit a Bayesian network, sample.

        Give exactly one of --epsilon or --flip-prob; the report's epsilon is 2 d ln((2 - f)/f).
        """
        from tqdm import tqdm

        from privpub.ldp_synth import LDPBayesSynthesizer

        check_output(output, force=force, inputs=[input, schema_path], supported=FORMATS)
        if network_out is not None:
            check_output(network_out, force=force, inputs=[input, schema_path, output], option="--network-out",
                         supported=("json",))
        if rows is not None and rows < 1:
            raise ParameterError(f"--rows must be >= 1, got {rows}")
        schema = _load_schema(schema_path)
        synthesizer = LDPBayesSynthesizer(degree=degree, method=method, start=start)
        session = open_session(budget_file, budget_total, data_label or input.name)
        extra = publish_kwargs(synthesizer.publish, session, "synth")
        frame = read_table(input)
        if columns:
            names = [c.strip() for c in columns.split(",") if c.strip()]
            missing = [c for c in names if c not in frame.columns]
            if missing:
                raise ParameterError(f"--columns names columns not in the input: {missing}")
            frame = frame[names]
            schema = schema.with_attributes(names)
        check_sizes(schema, len(frame), degree, rows if rows is not None else len(frame))
        bar = None if quiet else tqdm(total=len(schema), desc="network", unit="node", leave=False)

        def progress(i: int, d: int) -> None:
            if bar is not None:
                bar.n = i
                bar.refresh()

        try:
            release = synthesizer.publish(
                frame, schema=schema, epsilon=epsilon, flip_prob=flip_prob, rng=seed, progress=progress, **extra
            )
        finally:
            if bar is not None:
                bar.close()
        synthetic = release.sample(rows, rng=seed)
        write_table(synthetic, output, force=force, formats=FORMATS)
        if network_out is not None:
            write_json(release.to_dict(), network_out, force=force, option="--network-out")
        typer.echo(
            f"wrote {len(synthetic)} synthetic rows to {output} (f = {release.flip_prob:.6g}, "
            f"epsilon = {release.epsilon:.6g} per user, {release.epsilon_attribute:.6g} per attribute; "
            f"degree {degree})"
        )
        echo_session(session, budget_file)

    @reproduce_app.command("ldp_synth")
    @handle_errors
    def reproduce_ldp_synth(
        quick: bool = typer.Option(False, "--quick", help="Small grid (about 1-2 minutes)."),
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory.")] = None,
        data_dir: Annotated[
            Path | None, typer.Option("--data-dir", help="Datasets directory (default $PRIVPUB_DATA).")
        ] = None,
        seed: int = typer.Option(0, "--seed", help="Base random seed."),
    ) -> None:
        """Reproduce paper 000's Figs. 5-7, 9 and 10 on NLTCS and Adult (CSV, PNG, markdown)."""
        from privpub.experiments import ldp_synth as exp
        from privpub.experiments._common import default_out_dir

        summary = exp.reproduce(check_out_dir(out or default_out_dir("ldp_synth")), quick=quick, data_dir=data_dir,
                                rng=seed)
        typer.echo(f"wrote {summary}")
