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
    Checks,
    DataLabelOption,
    ForceOption,
    check_out_dir,
    check_output,
    echo_session,
    handle_errors,
    open_session,
    publish_kwargs,
    write_table,
)
from privpub.cli._tables import (
    DatasetSchemaOption,
    HeaderOption,
    NamesOption,
    SchemaOption,
    TableInput,
    read_records,
    resolve_table,
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


def _synth_schema(table: TableInput, columns: str | None) -> Schema:
    """The schema the synthesizer encodes with (a built-in dataset: its coarse public encoding)."""
    assert table.fmt is not None
    schema = table.fmt.synth_schema
    if columns:
        names = [c.strip() for c in columns.split(",") if c.strip()]
        missing = [c for c in names if c not in schema.names]
        if missing:
            raise ParameterError(f"--columns names columns not in {table.source} ({', '.join(schema.names)}): "
                                 f"{missing}")
        if len(set(names)) != len(names):
            raise ParameterError(f"--columns must be distinct, got {columns!r}")
        schema = schema.with_attributes(names)
    return schema


def _check_model(schema: Schema, epsilon: float | None, flip_prob: float | None, degree: int | None) -> int:
    """Check epsilon / f and the degree against the number of attributes; return the degree."""
    from privpub.ldp_synth import resolve_flip_prob

    d = len(schema)
    problems = Checks()
    if (epsilon is None) == (flip_prob is None):
        problems.add("give exactly one of --epsilon (total per user) or --flip-prob")
    else:
        problems(resolve_flip_prob, epsilon, flip_prob, d)
    if d < 2:
        problems.add(f"synth needs at least 2 attributes, the schema has {d}")
    chosen = degree if degree is not None else max(1, min(2, d - 1))
    if degree is not None and not 1 <= degree < max(d, 2):
        problems.add(f"--degree (max parents k) must be in [1, {max(d - 1, 1)}] (below the number of attributes "
                     f"{d}), got {degree}")
    problems.done()
    return chosen


#: ``--method auto`` runs EM only if its predicted worst case fits in this many seconds on one core
AUTO_EM_SECONDS = 60.0


def choose_method(method: str, sizes: tuple[int, ...], n_users: int, epsilon: float | None,
                  flip_prob: float | None, degree: int) -> tuple[str, str]:
    """Resolve ``--method auto`` from public metadata only (schema sizes, N, f, degree).

    EM's worst case (every joint of the network search running ``max_iter = 1000`` iterations) is
    predicted from :func:`privpub.ldp_synth._store.em_work_bound`; above ``AUTO_EM_SECONDS`` on one
    reference core the fast linear estimator is used instead. Returns the method and a note for
    the user (empty when the method was given explicitly).
    """
    from privpub.ldp_synth import EM_RATE, METHODS, em_work_bound, resolve_flip_prob

    if method not in ("auto", *METHODS):
        raise ParameterError(f"--method must be one of {['auto', *METHODS]}, got {method!r}")
    if method != "auto":
        return method, ""

    d = len(sizes)
    f, _ = resolve_flip_prob(epsilon, flip_prob, d)
    if not 1 <= degree < d:
        return "em", ""  # the publisher reports the bad degree
    work, cells = em_work_bound(sizes, n_users, f, degree)
    seconds = work * 1000 / EM_RATE
    if seconds <= AUTO_EM_SECONDS:
        return "em", f"estimator: em (the paper's EM; worst case about {max(seconds, 1):.0f} s)"
    return "linear", (
        f"estimator: linear. EM could take up to {seconds / 60:.0f} min here (f = {f:.3g}, {n_users} reports, "
        f"joints of up to {cells} cells, up to 1000 iterations each; the limit for the automatic choice is "
        f"{AUTO_EM_SECONDS:.0f} s). The linear estimator is unbiased but noisier, most of all at large f; "
        "pass --method em to run EM anyway"
    )


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add this part's commands to the application."""

    @app.command("synth")
    @handle_errors
    def synth(
        input: Annotated[Path, typer.Argument(
            help="Input table, one row per user: CSV (with or without a header line), Parquet or JSON.")],
        output: Annotated[Path, typer.Option(
            "-o", "--output", help="Where to write the synthetic table: .csv, .json or .parquet (from the suffix).")],
        schema_path: SchemaOption = None,
        dataset_schema: DatasetSchemaOption = None,
        header: HeaderOption = None,
        names: NamesOption = None,
        epsilon: float | None = typer.Option(None, "--epsilon", "-e", help="Total per-user epsilon (LDP)."),
        flip_prob: float | None = typer.Option(None, "--flip-prob", help="Bit flip probability f in (0, 1)."),
        degree: int | None = typer.Option(
            None, "--degree", "-k", help="Max parents per node of the Bayesian network (default 2, or 1 with two "
            "attributes)."),
        columns: str | None = typer.Option(None, "--columns", help="Comma-separated subset of columns."),
        method: str = typer.Option(
            "auto", "--method", help="Joint estimator: auto (em unless its predicted worst case exceeds 60 s, then "
            "linear; says which), em (paper), linear (fast), hybrid."
        ),
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

        Give exactly one of --epsilon or --flip-prob; the report's epsilon is 2 d ln((2 - f)/f). With
        --dataset-schema the raw files are read as they come and coarsened by the dataset's public
        encoding (Adult: the 15 attributes of the LoPub reproduction). Every argument is checked before the
        input is read.
        """
        from tqdm import tqdm

        from privpub.ldp_synth import LDPBayesSynthesizer

        checks = Checks()
        checks(check_output, output, force=force, inputs=[input, schema_path], supported=FORMATS)
        if network_out is not None:
            checks(check_output, network_out, force=force, inputs=[input, schema_path, output],
                   option="--network-out", supported=("json",))
        if rows is not None and rows < 1:
            checks.add(f"--rows must be >= 1, got {rows}")
        table = checks(resolve_table, schema_path=schema_path, dataset_schema=dataset_schema, names=names,
                       required=True, what="the attributes' categories")
        schema = checks(_synth_schema, table, columns) if table is not None else None
        k = checks(_check_model, schema, epsilon, flip_prob, degree) if schema is not None else None
        from privpub.ldp_synth import METHODS

        if method not in ("auto", *METHODS):
            checks.add(f"--method must be one of {['auto', *METHODS]}, got {method!r}")
            method = "em"
        synthesizer = checks(LDPBayesSynthesizer, degree=k if k is not None else 1,
                             method="em" if method == "auto" else method, start=start)
        checks.done()
        assert table is not None and table.fmt is not None and schema is not None and synthesizer is not None
        session = open_session(budget_file, budget_total, data_label or input.name)
        extra = publish_kwargs(synthesizer.publish, session, "synth")
        frame = read_records(input, table, header=header, needed=list(schema.names),
                             echo=lambda m: typer.echo(m, err=True))
        if dataset_schema is not None:
            frame = table.fmt.to_synth(frame)
        if columns:
            frame = frame[list(schema.names)]
        check_sizes(schema, len(frame), int(synthesizer.degree), rows if rows is not None else len(frame))
        method, note = choose_method(method, schema.sizes, len(frame), epsilon, flip_prob, int(synthesizer.degree))
        if note and not quiet:
            typer.echo(note, err=True)
        synthesizer = LDPBayesSynthesizer(degree=int(synthesizer.degree), method=method, start=start)
        bar = None if quiet else tqdm(total=len(schema), desc=f"network ({method})", unit="node")

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
            f"degree {synthesizer.degree}; estimator {method})"
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
        from privpub.experiments import default_out_dir
        from privpub.experiments import ldp_synth as exp

        summary = exp.reproduce(check_out_dir(out or default_out_dir("ldp_synth")), quick=quick, data_dir=data_dir,
                                rng=seed)
        typer.echo(f"wrote {summary}")
