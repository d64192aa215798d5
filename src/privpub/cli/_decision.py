"""CLI of privpub.decision: ``privpub decision INPUT ...`` and ``privpub reproduce decision``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from privpub.cli._common import (
    SEED_HELP,
    BudgetFileOption,
    BudgetTotalOption,
    Checks,
    DataLabelOption,
    EngineOption,
    ForceOption,
    check_engine,
    check_out_dir,
    check_output,
    echo_session,
    handle_errors,
    open_session,
    publish_kwargs,
    read_spark_table,
    unit_notice,
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
from privpub.core import check_positive_int
from privpub.errors import DataNotFoundError, ParameterError

#: output formats of the released cells / synthetic rows and of the ledger
FORMATS = ("csv", "json", "parquet")
#: most repetitions of the reproduction
MAX_REPS = 1000


def _target_schema(table: TableInput, target: str | None, classes: str | None) -> Any:
    """The public schema with its class: ``--classes`` adds one to a schema file that has none."""
    from privpub.core import Schema

    assert table.fmt is not None
    schema = table.fmt.schema
    if classes is not None:
        if target is None:
            raise ParameterError("--classes names the labels of --target: give --target COLUMN too")
        labels = [c.strip() for c in classes.split(",") if c.strip()]
        schema = Schema(schema.attributes, class_name=target, classes=labels)
    if schema.class_name is None:
        raise ParameterError(f"{table.source} declares no class: give --target COLUMN and --classes a,b, or add "
                             "class_name and classes to the schema file")
    if target is not None and schema.class_name != target:
        raise ParameterError(f"--target {target!r} differs from the class {schema.class_name!r} of {table.source}")
    return schema


def _load_taxonomies(path: Path) -> dict[str, Any]:
    """The taxonomy file, read by privpub.decision; any failure to read it is a privpub error naming it."""
    from privpub.decision import load_taxonomies

    if not path.is_file():
        raise DataNotFoundError(f"taxonomy file {str(path)!r} does not exist or is not a file")
    try:
        return dict(load_taxonomies(path))
    except UnicodeDecodeError as exc:
        raise ParameterError(f"taxonomy file {str(path)!r} is not UTF-8 text (a binary file?): {exc}") from exc
    except RecursionError as exc:
        raise ParameterError(f"taxonomy file {str(path)!r} is nested too deeply") from exc
    except OSError as exc:
        raise ParameterError(f"taxonomy file {str(path)!r} cannot be read: {exc.strerror}") from exc


def _check_levels(publisher: Any, epsilon: float, levels: int) -> None:
    """Compute the per-level budgets before reading the data: too many levels for epsilon is an error."""
    budgets = getattr(publisher, "level_budgets", None)
    if budgets is None:
        return
    try:
        budgets(epsilon)
    except (OverflowError, ZeroDivisionError) as exc:
        raise ParameterError(f"--levels {levels} is too many for epsilon={epsilon:g}: the per-level budgets "
                             f"underflow ({exc}); lower --levels") from exc


def _check_unit(privacy_id: str | None, max_contributions: int | None, schema: Any) -> Any:
    """The person unit of ``--privacy-id``/``--max-contributions`` (None: one record), checked
    against the public schema before anything is read."""
    from privpub.core import PrivacyUnit
    from privpub.decision.model import resolve_unit

    if (privacy_id is None) != (max_contributions is None):
        given, missing, param = (("--privacy-id", "--max-contributions", "max_contributions")
                                 if max_contributions is None else ("--max-contributions", "--privacy-id", "privacy_id"))
        raise ParameterError(f"{given} needs {missing} too (each person's rows are bounded to K)", param=param)
    if privacy_id is None:
        return None
    if isinstance(max_contributions, bool) or not isinstance(max_contributions, int) or max_contributions < 1:
        raise ParameterError(f"--max-contributions must be an integer >= 1, got {max_contributions!r}",
                             param="max_contributions")
    unit: PrivacyUnit = resolve_unit(None, privacy_id, max_contributions, schema)  # errors carry param=
    return unit


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub decision`` and ``privpub reproduce decision``."""

    @app.command("decision")
    @handle_errors
    def decision(
        input: Annotated[Path, typer.Argument(
            help="CSV (with or without a header line), Parquet or JSON table with the predictors and the target.")],
        output: Annotated[Path, typer.Option(
            "-o", "--output", help="Output of the released cells: .csv, .json or .parquet (from the suffix).")],
        epsilon: Annotated[float | None, typer.Option(
            "--epsilon", "-e", help="Total privacy budget (> 0) of maxgddp and diffgen (epsilon-DP).")] = None,
        rho: Annotated[float | None, typer.Option(
            "--rho", help="zCDP budget (> 0) of aim and mst (rho-zCDP synthetic data; exactly one of --epsilon "
            "and --rho).")] = None,
        levels: Annotated[int | None, typer.Option(
            "--levels", help="Specialisation levels h (>= 1) of maxgddp and diffgen.")] = None,
        target: Annotated[str | None, typer.Option(
            "--target", help="The class column (default: the schema's class).")] = None,
        schema: SchemaOption = None,
        dataset_schema: DatasetSchemaOption = None,
        header: HeaderOption = None,
        names: NamesOption = None,
        classes: Annotated[str | None, typer.Option(
            "--classes", help="Comma-separated class labels of --target, if the schema file has none.")] = None,
        taxonomy: Annotated[Path | None, typer.Option(
            "--taxonomy", help="JSON object of taxonomy trees per attribute (nested JSON or brace form; default: "
            "the built-in dataset's trees, else balanced trees).")] = None,
        method: Annotated[str, typer.Option(
            "--method", help="maxgddp or diffgen (--epsilon, --levels); aim or mst (--rho).")] = "maxgddp",
        seed: Annotated[int | None, typer.Option("--seed", help=SEED_HELP)] = None,
        synthetic: Annotated[bool, typer.Option(
            "--synthetic", help="Write the synthetic rows (each cell repeated count times) instead of the cells.")] = False,
        ledger: Annotated[Path | None, typer.Option(
            "--ledger", help="Also write the budget ledger (.csv, .json or .parquet).")] = None,
        force: ForceOption = False,
        budget_file: BudgetFileOption = None,
        budget_total: BudgetTotalOption = None,
        data_label: DataLabelOption = None,
        engine: EngineOption = "pandas",
        privacy_id: Annotated[str | None, typer.Option(
            "--privacy-id", metavar="COLUMN",
            help="Column identifying each person: protect people, not rows (with --max-contributions). Each "
                 "person's rows are bounded to K; the column is not published.")] = None,
        max_contributions: Annotated[int | None, typer.Option(
            "--max-contributions", metavar="K",
            help="Public bound K on each person's rows (with --privacy-id); epsilon then protects one person.")] = None,
    ) -> None:
        """Release a decision table (MAXGDDP, paper 003; or DiffGen) under epsilon-DP, or AIM / MST under rho-zCDP.

        Writes the generalised contingency table: one row per cell with a noisy count >= 1 (AIM and
        MST: the synthetic records counted over the finest public cut). Every argument is checked
        before the input is read or any budget is reserved. With --privacy-id and
        --max-contributions the release protects one person (all of their rows) at epsilon (rho).
        """
        from privpub.decision import PUBLISHERS

        checks = Checks()
        checks.budget(epsilon, rho, which="maxgddp, diffgen: epsilon-DP | aim, mst: rho-zCDP")
        zcdp = False
        if method not in PUBLISHERS:
            checks.add(f"--method must be one of {', '.join(sorted(PUBLISHERS))}, got {method!r}")
        else:
            zcdp = "pure-dp" not in PUBLISHERS[method].measures
            if zcdp and epsilon is not None:
                checks.add(f"--method {method} is rho-zCDP synthetic data, not epsilon-DP: it takes --rho, not "
                           "--epsilon (rho = epsilon^2 / 2 is the zCDP that epsilon-DP implies)", param="--rho")
            if not zcdp and rho is not None:
                checks.add(f"--method {method} is epsilon-DP: it takes --epsilon, not --rho", param="--epsilon")
        if zcdp:
            if levels is not None:
                checks.add(f"--levels applies to maxgddp and diffgen, not to --method {method}", param="--levels")
        elif levels is None:
            checks.add(f"--levels is required with --method {method}", param="--levels")
        else:
            checks(check_positive_int, levels, "--levels")
        checks(check_engine, engine)
        checks(check_output, output, force=force, inputs=[input, schema, taxonomy], supported=FORMATS)
        if ledger is not None:
            checks(check_output, ledger, force=force, inputs=[input, schema, taxonomy, output], option="--ledger",
                   supported=FORMATS)
        table = checks(resolve_table, schema_path=schema, dataset_schema=dataset_schema, names=names, required=True,
                       what="the predictors' domains and the classes")
        sch = checks(_target_schema, table, target, classes) if table is not None else None
        taxes: dict[str, Any] | None = None
        if taxonomy is not None:
            taxes = checks(_load_taxonomies, taxonomy)
        elif table is not None and table.fmt is not None and table.fmt.taxonomies is not None:
            taxes = dict(table.fmt.taxonomies)
        publisher = None
        if method in PUBLISHERS and zcdp:
            publisher = checks(PUBLISHERS[method], taxonomies=taxes)
        elif method in PUBLISHERS and levels is not None and levels >= 1:
            publisher = checks(PUBLISHERS[method], levels=levels, taxonomies=taxes)
        unit = None
        if sch is not None:
            unit = checks(_check_unit, privacy_id, max_contributions, sch)
        if publisher is not None and checks.ok and not zcdp:
            assert epsilon is not None and levels is not None
            record_eps = epsilon if unit is None else unit.record_amount(epsilon)
            checks(_check_levels, publisher, record_eps, levels)
        checks.done()
        assert table is not None and sch is not None and publisher is not None
        # with --rho a new budget file is a zCDP session (--budget-total a rho); an existing one keeps its measure
        session = open_session(budget_file, budget_total, data_label or input.name, zcdp=zcdp)
        extra = publish_kwargs(publisher.publish, session, "decision")
        needed = [*sch.names, str(sch.class_name), *([privacy_id] if privacy_id is not None else [])]
        if engine == "spark":
            frame = read_spark_table(input)
        else:
            frame = read_records(input, table, header=header, needed=needed, echo=lambda m: typer.echo(m, err=True))
        if privacy_id is not None:
            extra.update(privacy_id=privacy_id, max_contributions=max_contributions)
        budget = rho if zcdp else epsilon
        assert budget is not None
        notice = unit_notice(table, privacy_id, budget, zcdp=zcdp)  # the public schema only, never the data
        if notice is not None:
            typer.echo(notice, err=True)
        if zcdp:
            release = publisher.publish(frame, schema=sch, rho=rho, rng=seed, **extra)
        else:
            release = publisher.publish(frame, schema=sch, epsilon=epsilon, rng=seed, **extra)
        table = release.synthetic() if synthetic else release.cells
        write_table(table, output, force=force, formats=FORMATS)
        if ledger is not None:
            write_table(release.ledger.to_frame(), ledger, force=force, formats=FORMATS, option="--ledger")
        typer.echo(f"{method}: {len(release.history)} specialisations, {release.n_cells} cells, "
                   f"{len(release.counts)} released (total count {int(release.counts.sum())}) -> {output}", err=True)
        for step in release.history:
            typer.echo(f"  {step}", err=True)
        typer.echo(str(release.ledger), err=True)
        echo_session(session, budget_file, err=True)

    @reproduce_app.command("decision")
    @handle_errors
    def reproduce_decision(
        quick: Annotated[bool, typer.Option("--quick", help="Small run (2 repetitions, fewer points).")] = False,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory.")] = None,
        data_dir: Annotated[Path | None, typer.Option(
            "--data-dir", help="Data directory (default: $PRIVPUB_DATA).")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Base random seed.")] = 0,
        reps: Annotated[int | None, typer.Option(
            "--reps", help=f"Repetitions, 1..{MAX_REPS} (default 10, quick 2).")] = None,
    ) -> None:
        """Reproduce paper 003 (MAXGDDP vs DiffGen): Figs. 3-6 on Iris, Adult and Census-Income."""
        from privpub.experiments import decision as exp
        from privpub.experiments import default_out_dir

        if reps is not None and not 1 <= reps <= MAX_REPS:
            raise ParameterError(f"--reps must be in [1, {MAX_REPS}], got {reps}")
        target = check_out_dir(out if out is not None else default_out_dir("decision"))
        summary = exp.reproduce(target, quick=quick, data_dir=data_dir, rng=seed, reps=reps, progress=True)
        typer.echo(f"summary -> {summary}")
