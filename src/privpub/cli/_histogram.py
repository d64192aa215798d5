"""CLI of privpub.histogram: ``privpub histogram INPUT ...`` and ``privpub reproduce histogram``."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer

from privpub.cli._common import handle_errors, read_table, write_table
from privpub.errors import DomainError, ParameterError, PrivacyWarning

PRIVATE_METHODS = ("hphp", "ahp", "laplace", "hphp_unattributed")
NON_PRIVATE_METHODS = ("hphp_paper", "optimal")


def _split_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _counts_from_frame(
    frame: pd.DataFrame,
    *,
    column: str | None,
    counts_column: str | None,
    categories: str | None,
    bins: str | None,
    integer_range: str | None,
    source: Path,
) -> tuple[np.ndarray, list[Any] | None]:
    """Return (counts, bin labels) from either a raw column with a declared domain or a counts column."""
    from privpub.histogram import counts_from_records

    if (column is None) == (counts_column is None):
        raise ParameterError("give exactly one of --column (raw records) or --counts-column (one bin per row)")
    name = column if column is not None else counts_column
    if name not in frame.columns:
        raise DomainError(f"column {name!r} is not in {str(source)!r} (columns: {', '.join(map(str, frame.columns))})")
    if counts_column is not None:
        if categories or bins or integer_range:
            raise ParameterError("--categories/--bins/--integer-range apply to --column, not --counts-column")
        return frame[counts_column].to_numpy(), None
    declared = [v for v in (categories, bins, integer_range) if v is not None]
    if len(declared) != 1:
        raise ParameterError(
            "--column needs exactly one declared domain: --categories a,b,c, --bins e0,e1,...,ek or "
            "--integer-range LO:HI (the bins are public and fixed in advance; reading them from the "
            "data would leak)"
        )
    values = frame[name].to_numpy()
    if categories is not None:
        cats = _split_list(categories)
        return counts_from_records(values.astype(str), categories=cats), cats
    if bins is not None:
        try:
            edges = [float(v) for v in _split_list(bins)]
        except ValueError as exc:
            raise ParameterError(f"--bins must be comma-separated numbers, got {bins!r}") from exc
        return counts_from_records(values, bins=edges), [f"[{a:g}, {b:g})" for a, b in itertools.pairwise(edges)]
    try:
        lo, hi = (int(v) for v in str(integer_range).split(":"))
    except ValueError as exc:
        raise ParameterError(f"--integer-range must be LO:HI with integers, got {integer_range!r}") from exc
    if hi < lo:
        raise ParameterError(f"--integer-range must have LO <= HI, got {integer_range!r}")
    cats_int = list(range(lo, hi + 1))
    numeric = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=np.float64)
    if np.any(np.isnan(numeric)) or np.any(numeric != np.round(numeric)):
        raise DomainError(f"column {name!r} must hold integers for --integer-range")
    return counts_from_records(numeric.astype(np.int64), categories=cats_int), cats_int


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub histogram`` and ``privpub reproduce histogram``."""

    @app.command("histogram")
    @handle_errors
    def histogram(
        input: Annotated[Path, typer.Argument(help="CSV or Parquet file.")],
        epsilon: Annotated[float, typer.Option("--epsilon", "-e", help="Total privacy budget (> 0).")],
        output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the release (CSV).")],
        column: Annotated[str | None, typer.Option(
            "--column", help="Column of raw records (one row per person); needs a declared domain.")] = None,
        counts_column: Annotated[str | None, typer.Option(
            "--counts-column", help="Column holding the histogram itself (one bin per row, in bin order).")]
            = None,
        categories: Annotated[str | None, typer.Option(
            "--categories", help="Declared categories a,b,c (one bin each) for --column.")] = None,
        bins: Annotated[str | None, typer.Option(
            "--bins", help="Declared numeric bin edges e0,e1,...,ek for --column.")] = None,
        integer_range: Annotated[str | None, typer.Option(
            "--integer-range", help="Declared integer domain LO:HI (one bin per value) for --column.")] = None,
        method: Annotated[str, typer.Option(
            "--method", "-m", help="hphp (default), ahp, laplace or hphp_unattributed; with --non-private "
            "also hphp_paper or optimal.")] = "hphp",
        split: Annotated[float | None, typer.Option(
            "--split", help="Fraction of epsilon for the structure, in (0, 1) (default 0.85 for "
            "hphp/ahp, 0.5 for hphp_paper/optimal).")] = None,
        noise: Annotated[str, typer.Option("--noise", help="discrete (default) or laplace.")] = "discrete",
        seed: Annotated[int | None, typer.Option("--seed", help="Random seed (default: fresh entropy).")]
            = None,
        non_private: Annotated[bool, typer.Option(
            "--non-private", help="Allow the NON-private reproductions hphp_paper and optimal.")] = False,
    ) -> None:
        """Publish a histogram under epsilon-DP with HPHP or a baseline; writes bin, count, group."""
        from privpub.histogram import AHP, HPHP, LaplaceHistogram, OptimalGrouping

        if method in NON_PRIVATE_METHODS and not non_private:
            raise ParameterError(
                f"method {method!r} is NOT differentially private (it reads the true sort order); "
                "pass --non-private to run it for a paper reproduction"
            )
        if method not in PRIVATE_METHODS + NON_PRIVATE_METHODS:
            raise ParameterError(f"method must be one of {', '.join(PRIVATE_METHODS)}, got {method!r}")
        frame = read_table(input)
        counts, labels = _counts_from_frame(
            frame, column=column, counts_column=counts_column, categories=categories, bins=bins,
            integer_range=integer_range, source=input,
        )
        pub: Any
        if method == "hphp":
            pub = HPHP(split=split, noise=noise)
        elif method == "hphp_unattributed":
            pub = HPHP(variant="unattributed", split=split, noise=noise)
        elif method == "hphp_paper":
            pub = HPHP(variant="paper", split=split, noise=noise)
        elif method == "ahp":
            pub = AHP(noise=noise) if split is None else AHP(ratio=split, noise=noise)
        elif method == "optimal":
            pub = OptimalGrouping(noise=noise) if split is None else OptimalGrouping(split=split, noise=noise)
        else:
            if split is not None:
                raise ParameterError("--split does not apply to --method laplace (one step, whole budget)")
            pub = LaplaceHistogram(noise=noise)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)  # the CLI prints its own notice below
            release = pub.publish(counts, epsilon=epsilon, rng=seed)
        out = release.to_frame()
        if labels is not None and release.attributed:
            out.insert(1, "label", labels)
        write_table(out, output)
        if not release.private:
            typer.echo("WARNING: this release is NOT differentially private (paper reproduction only)", err=True)
        typer.echo(f"{release.method}: {release.n_bins} bins, {release.n_groups} groups, "
                   f"epsilon={release.epsilon:g} -> {output}")
        typer.echo(str(release.ledger))

    @reproduce_app.command("histogram")
    @handle_errors
    def reproduce_histogram(
        quick: Annotated[bool, typer.Option("--quick", help="Small run (3 trials, ~1-2 minutes).")] = False,
        out: Annotated[Path | None, typer.Option("--out", help="Output directory.")] = None,
        data_dir: Annotated[Path | None, typer.Option(
            "--data-dir", help="Data directory (default: $PRIVPUB_DATA).")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Base random seed.")] = 0,
        trials: Annotated[int | None, typer.Option(
            "--trials", help="Trials per cell (default 20, quick 3).")] = None,
    ) -> None:
        """Reproduce paper 001 (HPHP): Fig. 2 (KLD) and Fig. 3 (LNMSE vs range size).

        Includes the paper's leaky HPHP and the Optimal reference, both labelled NON-private.
        """
        from privpub.experiments import histogram as exp
        from privpub.experiments._common import default_out_dir

        target = out if out is not None else default_out_dir("histogram")
        summary = exp.reproduce(target, quick=quick, data_dir=data_dir, rng=seed, trials=trials, progress=True)
        typer.echo(f"summary -> {summary}")
