"""CLI of privpub.histogram: ``privpub histogram INPUT ...`` and ``privpub reproduce histogram``."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer

from privpub.cli._common import (
    SEED_HELP,
    BudgetFileOption,
    BudgetTotalOption,
    Checks,
    DataLabelOption,
    EngineOption,
    EpsilonOption,
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
from privpub.core import check_allocation, check_epsilon, check_probability
from privpub.errors import DataNotFoundError, DomainError, ParameterError, PrivacyWarning, PrivpubError

PRIVATE_METHODS = ("hphp", "ahp", "laplace", "hphp_unattributed", "dawa")
NON_PRIVATE_METHODS = ("hphp_paper", "optimal")
#: output formats of ``privpub histogram``
FORMATS = ("csv", "json", "parquet", "npy")
#: peak bytes per bin of a histogram publish (input, noise, sort, groups and the output), measured as max RSS
#: of the CLI at 10^7 bins (benchmarks/cli_memory.py, docs/benchmarks.md): Laplace 112, HPHP 149
BYTES_PER_BIN = {"laplace": 120, "hphp": 160, "hphp_unattributed": 160, "hphp_paper": 160, "ahp": 160,
                 "optimal": 160, "dawa": 400}
#: largest number of reproduction trials per cell
MAX_TRIALS = 10_000


def _split_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _check_bins(n_bins: int, method: str, option: str) -> None:
    check_allocation(n_bins, BYTES_PER_BIN.get(method, 160), "the histogram", option, unit="bins")


def _integer_range(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in str(text).split(":"))
    except ValueError as exc:
        raise ParameterError(f"--integer-range must be LO:HI with integers, got {text!r}") from exc
    if hi < lo:
        raise ParameterError(f"--integer-range must have LO <= HI, got {text!r}")
    return lo, hi


def _declared_domain(
    *,
    column: str | None,
    counts_column: str | None,
    categories: str | None,
    bins: str | None,
    integer_range: str | None,
    table: TableInput | None,
    method: str,
) -> Any:
    """Check the domain options before any data is read; return the schema attribute of --column, if any."""
    if (column is None) == (counts_column is None):
        raise ParameterError("give exactly one of --column (raw records) or --counts-column (one bin per row)")
    declared = [v for v in (categories, bins, integer_range) if v is not None]
    if counts_column is not None:
        if declared:
            raise ParameterError("--categories/--bins/--integer-range apply to --column, not --counts-column")
        return None
    fmt = table.fmt if table is not None else None
    if fmt is not None and not declared:
        schema = fmt.schema
        attr: Any = schema.class_attribute if column == schema.class_name else None
        if attr is None:
            if column not in schema.names:
                raise ParameterError(f"--column {column!r} is not an attribute of {fmt.name} "
                                     f"({', '.join(schema.names)}); declare its domain with --categories, --bins or "
                                     "--integer-range")
            attr = schema[str(column)]
        _check_bins(attr.size, method, "--column's domain in the schema")
        return attr
    if len(declared) != 1:
        raise ParameterError(
            "--column needs exactly one declared domain: --categories a,b,c, --bins e0,e1,...,ek, "
            "--integer-range LO:HI, or a schema (--dataset-schema NAME / --schema FILE) declaring the column "
            "(the bins are public and fixed in advance; reading them from the data would leak)"
        )
    if categories is not None:
        _check_bins(len(_split_list(categories)), method, "--categories")
    elif bins is not None:
        try:
            edges = [float(v) for v in _split_list(bins)]
        except ValueError as exc:
            raise ParameterError(f"--bins must be comma-separated numbers, got {bins!r}") from exc
        if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
            raise ParameterError(f"--bins must be at least two increasing edges, got {bins!r}")
        _check_bins(len(edges) - 1, method, "--bins")
    else:
        lo, hi = _integer_range(str(integer_range))
        _check_bins(hi - lo + 1, method, "--integer-range")
    return None


def _counts_from_frame(
    frame: pd.DataFrame,
    *,
    column: str | None,
    counts_column: str | None,
    categories: str | None,
    bins: str | None,
    integer_range: str | None,
    attribute: Any,
    method: str,
) -> tuple[np.ndarray, Any]:
    """Return (counts, bin labels) from either a raw column with a declared domain or a counts column."""
    from privpub.core import NumericAttribute
    from privpub.histogram import counts_from_records

    if counts_column is not None:
        _check_bins(len(frame), method, "the number of rows of the input")
        return frame[counts_column].to_numpy(), None
    name = str(column)
    values = frame[name].to_numpy()
    if attribute is not None:
        codes = attribute.encode(values)
        counts = np.bincount(codes, minlength=attribute.size).astype(np.int64)
        if isinstance(attribute, NumericAttribute):
            e = attribute.bin_edges
            labels = [f"[{a:g}, {b:g})" for a, b in itertools.pairwise(e)]
            labels[-1] = labels[-1][:-1] + "]"
            return counts, labels
        return counts, list(attribute.categories)
    if categories is not None:
        cats = _split_list(categories)
        return counts_from_records(values.astype(str), categories=cats), cats
    if bins is not None:
        edges = [float(v) for v in _split_list(bins)]
        return counts_from_records(values, bins=edges), [f"[{a:g}, {b:g})" for a, b in itertools.pairwise(edges)]
    lo, hi = _integer_range(str(integer_range))
    numeric = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=np.float64)
    if np.any(np.isnan(numeric)) or np.any(numeric != np.round(numeric)):
        raise DomainError(f"column {name!r} must hold integers for --integer-range")
    outside = (numeric < lo) | (numeric > hi)
    if np.any(outside):
        raise DomainError(f"column {name!r} has values outside the declared --integer-range {lo}:{hi}, e.g. "
                          f"{numeric[outside][0]:g}")
    counts = np.bincount((numeric - lo).astype(np.int64), minlength=hi - lo + 1).astype(np.int64)
    return counts, range(lo, hi + 1)


def _check_privacy_id(privacy_id: str | None, max_contributions: int | None, *, column: str | None,
                      engine: str) -> None:
    """``--privacy-id`` and ``--max-contributions`` come together, with raw records (``--column``)."""
    if (privacy_id is None) != (max_contributions is None):
        missing = "--max-contributions" if max_contributions is None else "--privacy-id"
        raise ParameterError(f"give --privacy-id COLUMN and --max-contributions K together (each person's rows "
                             f"are bounded to K); {missing} is missing",
                             param="max_contributions" if max_contributions is None else "privacy_id")
    if max_contributions is not None and max_contributions < 1:
        raise ParameterError(f"--max-contributions must be an integer >= 1, got {max_contributions}",
                             param="max_contributions")
    if privacy_id is not None and column is None:
        raise ParameterError("--privacy-id bounds the rows of raw records: it needs --column (counts have no ids)",
                             param="privacy_id")
    if privacy_id is not None and engine == "spark":
        from inspect import signature

        from privpub.spark import counts

        if "privacy_id" not in signature(counts).parameters:
            raise ParameterError("--privacy-id is not supported with --engine spark by this privpub; use the pandas "
                                 "engine", param="privacy_id")


def _bound_frame(frame: pd.DataFrame, *, column: str, privacy_id: str, max_contributions: int,
                 gen: np.random.Generator) -> pd.DataFrame:
    """Keep at most ``max_contributions`` rows per ``privacy_id`` (privpub.core.bound_contributions,
    hashing the id and the ``column`` value as privpub.histogram.counts_from_records does)."""
    from privpub.core import bound_contributions, contribution_key

    if privacy_id not in frame.columns:
        raise DomainError(f"--privacy-id column {privacy_id!r} is not in the input (columns: "
                          f"{', '.join(map(str, frame.columns))})", param="privacy_id")
    mask = bound_contributions(frame[privacy_id], max_contributions, key=contribution_key(gen),
                               content=frame[column].to_numpy())
    return frame.loc[mask]


def _spark_counts(input: Path, *, column: str | None, categories: str | None, bins: str | None,
                  integer_range: str | None, counts_column: str | None, method: str,
                  privacy_id: str | None = None, max_contributions: int | None = None,
                  seed: int | None = None) -> tuple[np.ndarray, Any]:
    """``--engine spark``: counts per declared bin of ``--column``, computed in Spark (privpub.spark.counts);
    with ``privacy_id`` the rows are bounded inside Spark."""
    from privpub.spark import counts

    if column is None or counts_column is not None or integer_range is not None or (bins is None) == (categories is None):
        raise ParameterError("--engine spark counts raw records: give --column with exactly one of --bins or "
                             "--categories")
    frame = read_spark_table(input)
    if column not in frame.columns:
        raise DomainError(f"column {column!r} is not in {str(input)!r} (columns: {', '.join(frame.columns)})")
    bounding: dict[str, Any] = {}
    if privacy_id is not None:  # bounded inside Spark (privpub.spark.counts takes the id and k)
        from inspect import signature

        accepted = signature(counts).parameters
        bounding = {"privacy_id": privacy_id, "max_contributions": max_contributions}
        if "rng" in accepted:
            bounding["rng"] = seed
        elif "key" in accepted:
            from privpub.core import contribution_key

            bounding["key"] = contribution_key(seed)
    if categories is not None:
        cats = _split_list(categories)
        _check_bins(len(cats), method, "--categories")
        return counts(frame, column, categories=cats, **bounding), cats
    try:
        edges = [float(v) for v in _split_list(str(bins))]
    except ValueError as exc:
        raise ParameterError(f"--bins must be comma-separated numbers, got {bins!r}") from exc
    _check_bins(max(len(edges) - 1, 0), method, "--bins")
    return counts(frame, column, edges, **bounding), [f"[{a:g}, {b:g})" for a, b in itertools.pairwise(edges)]


def _read_counts(input: Path, column: str | None, counts_column: str | None, table: TableInput,
                 header: bool | None, privacy_id: str | None = None) -> pd.DataFrame | np.ndarray:
    """The input table, or the counts themselves for a plain 1-D .npy file or a .txt file of one count per
    line (one bin per entry, as the Hay et al. files come)."""
    if input.suffix.lower() == ".txt" and column is None and counts_column is None:
        from privpub.datasets import load_counts

        if not input.is_file():
            raise DataNotFoundError(f"input file {str(input)!r} does not exist or is not a file")
        try:
            return load_counts(input)
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            if isinstance(exc, PrivpubError):
                raise
            raise ParameterError(f"could not read {str(input)!r} as counts (one per line): "
                                 f"{' '.join(str(exc).split())[:200]}") from exc
    if input.suffix.lower() == ".npy" and column is None and counts_column is None:
        from privpub._io import read_npy

        arr = read_npy(input)
        if arr.dtype.names is None:
            if arr.ndim != 1:
                raise ParameterError(f"a .npy input of counts must be 1-D, got shape {arr.shape}")
            return arr
    needed = [c for c in (column, counts_column, privacy_id) if c is not None]
    return read_records(input, table, header=header, needed=needed, echo=lambda m: typer.echo(m, err=True))


def _publisher(method: str, split: float | None, noise: str) -> Any:
    from privpub.histogram import AHP, DAWA, HPHP, LaplaceHistogram, OptimalGrouping

    if noise not in ("discrete", "laplace"):
        raise ParameterError(f"--noise must be discrete or laplace, got {noise!r}")
    if split is not None:
        check_probability(split, "--split")
    if method == "hphp":
        return HPHP(split=split, noise=noise)
    if method == "hphp_unattributed":
        return HPHP(variant="unattributed", split=split, noise=noise)
    if method == "hphp_paper":
        return HPHP(variant="paper", split=split, noise=noise)
    if method == "ahp":
        return AHP(noise=noise) if split is None else AHP(ratio=split, noise=noise)
    if method == "optimal":
        return OptimalGrouping(noise=noise) if split is None else OptimalGrouping(split=split, noise=noise)
    if method == "dawa":
        if noise != "laplace":
            raise ParameterError("--method dawa draws Laplace noise on a dyadic grid (its bucket costs and weighted "
                                 "sums are real numbers, not counts); pass --noise laplace")
        return DAWA() if split is None else DAWA(ratio=split)
    if split is not None:
        raise ParameterError("--split does not apply to --method laplace (one step, whole budget)")
    return LaplaceHistogram(noise=noise)


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub histogram`` and ``privpub reproduce histogram``."""

    @app.command("histogram")
    @handle_errors
    def histogram(
        input: Annotated[Path, typer.Argument(
            help="CSV (with or without a header line), Parquet, JSON, .npy or .txt file (a 1-D .npy array or a "
            ".txt of one count per line is the histogram itself).")],
        epsilon: EpsilonOption,
        output: Annotated[Path, typer.Option(
            "--output", "-o", help="Where to write the release: .csv, .json, .parquet or .npy (from the suffix).")],
        column: Annotated[str | None, typer.Option(
            "--column", help="Column of raw records (one row per record; with --privacy-id, one person may have "
            "many); needs a declared domain (options below, or a schema declaring the column).")] = None,
        counts_column: Annotated[str | None, typer.Option(
            "--counts-column", help="Column holding the histogram itself (one bin per row, in bin order; a .txt "
            "file of one count per line or a 1-D .npy needs neither option).")]
            = None,
        categories: Annotated[str | None, typer.Option(
            "--categories", help="Declared categories a,b,c (one bin each) for --column.")] = None,
        bins: Annotated[str | None, typer.Option(
            "--bins", help="Declared numeric bin edges e0,e1,...,ek for --column.")] = None,
        integer_range: Annotated[str | None, typer.Option(
            "--integer-range", help="Declared integer domain LO:HI (one bin per value) for --column.")] = None,
        dataset_schema: DatasetSchemaOption = None,
        schema: SchemaOption = None,
        header: HeaderOption = None,
        names: NamesOption = None,
        method: Annotated[str, typer.Option(
            "--method", "-m", help="hphp (default), ahp, laplace, hphp_unattributed or dawa (range queries; "
            "needs --noise laplace); with --non-private "
            "also hphp_paper or optimal.")] = "hphp",
        split: Annotated[float | None, typer.Option(
            "--split", help="Fraction of epsilon for the structure, in (0, 1) (default 0.85 for "
            "hphp/ahp, 0.5 for hphp_paper/optimal, 0.25 for dawa).")] = None,
        noise: Annotated[str, typer.Option("--noise", help="discrete (default) or laplace.")] = "discrete",
        seed: Annotated[int | None, typer.Option("--seed", help=SEED_HELP)] = None,
        non_private: Annotated[bool, typer.Option(
            "--non-private", help="Allow the NON-private reproductions hphp_paper and optimal.")] = False,
        force: ForceOption = False,
        budget_file: BudgetFileOption = None,
        budget_total: BudgetTotalOption = None,
        data_label: DataLabelOption = None,
        quiet: Annotated[bool, typer.Option("--quiet", help="No progress messages.")] = False,
        engine: EngineOption = "pandas",
        privacy_id: Annotated[str | None, typer.Option(
            "--privacy-id", help="Column identifying the person of each row: protect whole people, not rows "
            "(each person's rows are bounded to --max-contributions, a seeded random subset).")] = None,
        max_contributions: Annotated[int | None, typer.Option(
            "--max-contributions", help="The public bound K on one person's rows with --privacy-id (a person "
            "keeps min(rows, K); the noise is that of K rows).")] = None,
    ) -> None:
        """Publish a histogram under epsilon-DP with HPHP or a baseline; writes bin, count, group.

        Every argument is checked before the input is read or any budget is reserved. With
        --privacy-id COLUMN --max-contributions K the release protects one person (all their rows).
        """
        checks = Checks()
        checks(check_epsilon, epsilon, "--epsilon")
        if method in NON_PRIVATE_METHODS and not non_private:
            checks.add(f"--method {method} is NOT differentially private (it reads the true sort order); "
                       "pass --non-private to run it for a paper reproduction")
        if method not in PRIVATE_METHODS + NON_PRIVATE_METHODS:
            checks.add(f"--method must be one of {', '.join(PRIVATE_METHODS)}, got {method!r}")
            method = "hphp"
        if split is not None:
            checks(check_probability, split, "--split")
        pub = checks(_publisher, method, split, noise)
        checks(check_engine, engine)
        checks(check_output, output, force=force, inputs=[input, schema], supported=FORMATS)
        table = checks(resolve_table, schema_path=schema, dataset_schema=dataset_schema, names=names,
                       required=False)
        plain_npy = input.suffix.lower() in (".npy", ".txt") and column is None and counts_column is None
        attribute = None if plain_npy else checks(
            _declared_domain, column=column, counts_column=counts_column, categories=categories, bins=bins,
            integer_range=integer_range, table=table, method=method)
        checks(_check_privacy_id, privacy_id, max_contributions, column=column, engine=engine)
        checks.done()
        unit = None
        gen: Any = seed  # record-level runs keep drawing from the seed as before
        if privacy_id is not None:
            from privpub.core import PrivacyUnit, as_generator

            unit = PrivacyUnit.person(privacy_id, max_contributions=int(max_contributions or 0))
            gen = as_generator(seed)  # the bounding key, then the noise, from one generator
        session = open_session(budget_file, budget_total, data_label or input.name)
        extra = publish_kwargs(pub.publish, session, "histogram")
        data: Any
        if engine == "spark":
            data = _spark_counts(input, column=column, categories=categories, bins=bins,
                                 integer_range=integer_range, counts_column=counts_column, method=method,
                                 privacy_id=privacy_id, max_contributions=max_contributions, seed=seed)
        else:
            data = _read_counts(input, column, counts_column, table, header, privacy_id)
            if unit is not None and isinstance(data, pd.DataFrame):
                # every row's value is checked against the declared domain first (a bad value is reported
                # even when bounding would drop its row), then each person is bounded to k rows
                _counts_from_frame(data, column=column, counts_column=None, categories=categories, bins=bins,
                                   integer_range=integer_range, attribute=attribute, method=method)
                data = _bound_frame(data, column=str(column), privacy_id=str(privacy_id),
                                    max_contributions=unit.factor, gen=gen)
        if column is not None and not plain_npy:
            notice = unit_notice(table, privacy_id, epsilon)
            if notice is not None and (notice.startswith("WARNING") or not quiet):
                typer.echo(notice, err=True)
        if isinstance(data, tuple):
            counts, labels = data
        elif isinstance(data, np.ndarray):
            if categories or bins or integer_range:
                raise ParameterError("--categories/--bins/--integer-range apply to --column of a table")
            _check_bins(len(data), method, "the length of the .npy input")
            counts, labels = data, None
        else:
            if plain_npy:
                raise ParameterError(f"{str(input)!r} is a structured .npy table: give --column or --counts-column")
            counts, labels = _counts_from_frame(
                data, column=column, counts_column=counts_column, categories=categories, bins=bins,
                integer_range=integer_range, attribute=attribute, method=method,
            )
        del data
        if not quiet and len(counts) >= 10**6:
            typer.echo(f"publishing {len(counts):,} bins with {method} ...", err=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)  # the CLI prints its own notice below
            release = pub.publish(counts, epsilon=epsilon, rng=gen, privacy_unit=unit, **extra)
        del counts
        n = release.n_bins
        columns: dict[str, Any] = {("bin" if release.attributed else "rank"): range(n)}
        if labels is not None and release.attributed:
            columns["label"] = labels
        columns["count"] = release.counts
        identity = release.group_order is None and release.group_boundaries is None
        columns["group"] = range(n) if identity else release.group_labels  # every bin its own group: lazy
        write_table(columns, output, force=force, formats=FORMATS,
                    progress=None if quiet or n < 10**6 else "writing")
        if not release.private:
            typer.echo("WARNING: this release is NOT differentially private (paper reproduction only)", err=True)
        typer.echo(f"{release.method}: {release.n_bins} bins, {release.n_groups} groups, "
                   f"epsilon={release.epsilon:g} -> {output}")
        if release.ledger.unit.kind == "record":  # a person-level ledger states its unit itself
            typer.echo(f"protects: {release.ledger.unit}")
        typer.echo(str(release.ledger))
        echo_session(session, budget_file)

    @reproduce_app.command("histogram")
    @handle_errors
    def reproduce_histogram(
        quick: Annotated[bool, typer.Option("--quick", help="Small run (3 trials, ~1-2 minutes).")] = False,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory.")] = None,
        data_dir: Annotated[Path | None, typer.Option(
            "--data-dir", help="Data directory (default: $PRIVPUB_DATA).")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Base random seed.")] = 0,
        trials: Annotated[int | None, typer.Option(
            "--trials", help=f"Trials per cell, 1..{MAX_TRIALS} (default 20, quick 3).")] = None,
    ) -> None:
        """Reproduce paper 001 (HPHP): Fig. 2 (KLD) and Fig. 3 (LNMSE vs range size).

        Includes the paper's leaky HPHP and the Optimal reference, both labelled NON-private.
        """
        from privpub.experiments import default_out_dir
        from privpub.experiments import histogram as exp

        if trials is not None and not 1 <= trials <= MAX_TRIALS:
            raise ParameterError(f"--trials must be in [1, {MAX_TRIALS}], got {trials}")
        target = out if out is not None else default_out_dir("histogram")
        check_out_dir(target)
        summary = exp.reproduce(target, quick=quick, data_dir=data_dir, rng=seed, trials=trials, progress=True)
        typer.echo(f"summary -> {summary}")

