"""CLI of privpub.decision: ``privpub decision INPUT ...`` and ``privpub reproduce decision``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from privpub.cli._common import (
    SEED_HELP,
    BudgetFileOption,
    BudgetTotalOption,
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
    read_json,
    read_spark_table,
    read_table,
    write_table,
)
from privpub.errors import DataNotFoundError, ParameterError

_DATASET_SCHEMAS = ("adult", "iris", "census_income_kdd")
#: output formats of the released cells / synthetic rows and of the ledger
FORMATS = ("csv", "json", "parquet")
#: most repetitions of the reproduction
MAX_REPS = 1000


def _load_schema(schema_path: Path | None, dataset: str | None, target: str, classes: str | None) -> Any:
    """The public schema: a JSON file (``Schema.to_dict`` format) or a built-in dataset's metadata."""
    from privpub.core import Schema

    if (schema_path is None) == (dataset is None):
        raise ParameterError(
            "give exactly one of --schema schema.json (public domains, never read from the data) or "
            f"--dataset-schema NAME (one of {', '.join(_DATASET_SCHEMAS)})"
        )
    if schema_path is not None:
        spec = read_json(schema_path, "schema")
        if classes is not None:
            spec = {**spec, "class_name": target, "classes": [c.strip() for c in classes.split(",") if c.strip()]}
        schema = Schema.from_dict(spec)
    else:
        from privpub.experiments.decision import dataset_schema

        schema = dataset_schema(str(dataset))
    if schema.class_name is None:
        raise ParameterError("the schema declares no target: add class_name and classes, or pass --classes a,b")
    if schema.class_name != target:
        raise ParameterError(f"--target {target!r} differs from the schema's class_name {schema.class_name!r}")
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


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub decision`` and ``privpub reproduce decision``."""

    @app.command("decision")
    @handle_errors
    def decision(
        input: Annotated[Path, typer.Argument(help="CSV or Parquet table with the predictors and the target.")],
        target: Annotated[str, typer.Option("--target", help="The class column.")],
        epsilon: Annotated[float, typer.Option("--epsilon", help="Total privacy budget (> 0).")],
        levels: Annotated[int, typer.Option("--levels", help="Specialisation levels h (>= 1).")],
        output: Annotated[Path, typer.Option(
            "-o", "--output", help="Output of the released cells: .csv, .json or .parquet (from the suffix).")],
        schema: Annotated[Path | None, typer.Option(
            "--schema", help="Public schema JSON (Schema.to_dict format: attributes with lo/hi or categories).")] = None,
        dataset_schema: Annotated[str | None, typer.Option(
            "--dataset-schema", help="Use the public schema of a built-in dataset: adult, iris, census_income_kdd.")] = None,
        classes: Annotated[str | None, typer.Option(
            "--classes", help="Comma-separated class labels, if the schema file has none.")] = None,
        taxonomy: Annotated[Path | None, typer.Option(
            "--taxonomy", help="JSON object of taxonomy trees per attribute (nested JSON or brace form).")] = None,
        method: Annotated[str, typer.Option("--method", help="maxgddp or diffgen.")] = "maxgddp",
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
    ) -> None:
        """Release a decision table (MAXGDDP, paper 003; or DiffGen) under epsilon-DP.

        Writes the generalised contingency table: one row per cell with a noisy count >= 1.
        """
        from privpub.decision import PUBLISHERS

        if method not in PUBLISHERS:
            raise ParameterError(f"--method must be one of {sorted(PUBLISHERS)}, got {method!r}")
        check_engine(engine)
        check_output(output, force=force, inputs=[input, schema, taxonomy], supported=FORMATS)
        if ledger is not None:
            check_output(ledger, force=force, inputs=[input, schema, taxonomy, output], option="--ledger",
                         supported=FORMATS)
        sch = _load_schema(schema, dataset_schema, target, classes)
        taxes: dict[str, Any] | None = None
        if taxonomy is not None:
            taxes = _load_taxonomies(taxonomy)
        elif dataset_schema is not None:
            from privpub.experiments.decision import dataset_taxonomies

            taxes = dataset_taxonomies(dataset_schema)
        publisher = PUBLISHERS[method](levels=levels, taxonomies=taxes)
        _check_levels(publisher, epsilon, levels)
        session = open_session(budget_file, budget_total, data_label or input.name)
        extra = publish_kwargs(publisher.publish, session, "decision")
        frame = read_spark_table(input) if engine == "spark" else read_table(input)
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
        out: Annotated[Path | None, typer.Option("--out", help="Output directory.")] = None,
        data_dir: Annotated[Path | None, typer.Option(
            "--data-dir", help="Data directory (default: $PRIVPUB_DATA).")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Base random seed.")] = 0,
        reps: Annotated[int | None, typer.Option(
            "--reps", help=f"Repetitions, 1..{MAX_REPS} (default 10, quick 2).")] = None,
    ) -> None:
        """Reproduce paper 003 (MAXGDDP vs DiffGen): Figs. 3-6 on Iris, Adult and Census-Income."""
        from privpub.experiments import decision as exp
        from privpub.experiments._common import default_out_dir

        if reps is not None and not 1 <= reps <= MAX_REPS:
            raise ParameterError(f"--reps must be in [1, {MAX_REPS}], got {reps}")
        target = check_out_dir(out if out is not None else default_out_dir("decision"))
        summary = exp.reproduce(target, quick=quick, data_dir=data_dir, rng=seed, reps=reps, progress=True)
        typer.echo(f"summary -> {summary}")
