"""Histogram counts of a Spark DataFrame column over declared (public) bins or categories."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import check_array
from privpub.errors import DomainError, ParameterError
from privpub.spark._frame import (
    category_code,
    check_columns,
    check_frame,
    collect_arrays,
    is_missing,
    require_pyspark,
    searchsorted_expr,
)

__all__ = ["counts"]

#: above this many edges the bin of a value is found with Spark ML's Bucketizer (binary search)
#: instead of a generated comparison tree
TREE_EDGES = 64

_VALID, _NAN, _BELOW, _ABOVE = 0, 1, 2, 3


def counts(
    df: Any,
    column: str,
    bins: ArrayLike | None = None,
    *,
    categories: Sequence[Any] | None = None,
) -> NDArray[np.int64]:
    """Counts per declared bin of ``column``, computed in Spark (one job); exact int64.

    The Spark counterpart of :func:`privpub.histogram.counts_from_records`, with the same
    semantics and errors: exactly one of ``bins`` (strictly increasing numeric edges; bin ``k`` is
    ``[edges[k], edges[k+1])``, the last bin closed) or ``categories`` (the declared values, one
    bin each, compared as strings). The bins are public parameters, never derived from the data.

    Values outside the domain are never dropped and never used to choose anything: the same job
    counts them, and any (a missing or non-numeric value, one below ``edges[0]`` or above
    ``edges[-1]``, or an undeclared category) raises :class:`~privpub.errors.DomainError` with
    how many there were, before anything is published. Only ``len(bins) - 1`` (or
    ``len(categories)``) integers and four violation counts reach the driver.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The records, one per row.
    column : str
        The column to count.
    bins : array_like, optional
        Numeric bin edges.
    categories : sequence, optional
        Declared categories.

    Returns
    -------
    numpy.ndarray of int64, shape (n_bins,)
        Feed it to any histogram publisher: ``HPHP().publish(counts(df, "age", edges), epsilon=1.0)``.

    Examples
    --------
    >>> from privpub.spark import counts  # doctest: +SKIP
    >>> counts(spark.range(10).toDF("x"), "x", [0, 5, 9]).tolist()  # doctest: +SKIP
    [5, 5]
    """
    F = require_pyspark()
    frame = check_frame(df)
    if not isinstance(column, str):
        raise ParameterError(f"column must be a column name, got {column!r}", param="column")
    if (bins is None) == (categories is None):
        raise ParameterError("give exactly one of bins (numeric edges) or categories (declared values)")
    check_columns(frame, [column], "df")
    if categories is not None:
        cats = [str(c) for c in categories]
        if not cats or len(set(cats)) != len(cats):
            raise ParameterError("categories must be non-empty and unique", param="categories")
        missing = is_missing(frame, column)
        code = category_code(column, cats)
        kind = F.when(missing, _NAN).when(code.isNull(), _ABOVE).otherwise(_VALID)
        got = _aggregate(frame.select(kind.alias("k"), F.coalesce(code, F.lit(0).cast("long")).alias("b")))
        if got[_NAN]:
            raise DomainError(f"values must not contain missing entries (NaN/None); {got[_NAN]} of them", param="values")
        if got[_ABOVE]:
            rows = (frame.where(~missing & code.isNull()).select(F.col(column).cast("string").alias("v"))
                    .distinct().orderBy("v").limit(1).collect())
            raise DomainError(f"values must lie in the declared categories, got {rows[0]['v']!r} "
                              f"({got[_ABOVE]} undeclared values)", param="values")
        return _dense(got["bins"], len(cats))
    assert bins is not None
    edges = check_array(bins, "bins", ndim=1).astype(np.float64)
    if edges.size < 2 or np.any(np.diff(edges) <= 0):
        raise ParameterError("bins must be at least two strictly increasing edges", param="bins")
    x = F.col(column).try_cast("double")
    kind = (F.when(x.isNull() | F.isnan(x), _NAN).when(x < F.lit(float(edges[0])), _BELOW)
            .when(x > F.lit(float(edges[-1])), _ABOVE).otherwise(_VALID))
    safe = F.when(kind == _VALID, x).otherwise(F.lit(float(edges[0])))
    selected = frame.select(kind.alias("k"), safe.alias("x"))
    if edges.size <= TREE_EDGES:
        binned = selected.select("k", searchsorted_expr(F.col("x"), edges.tolist()).alias("b"))
    else:
        from pyspark.ml.feature import Bucketizer

        binned = Bucketizer(splits=edges.tolist(), inputCol="x", outputCol="bd").transform(selected).select(
            "k", F.col("bd").cast("long").alias("b"))
    got = _aggregate(binned)
    if got[_NAN]:
        raise DomainError(f"values must be numeric and not NaN; {got[_NAN]} missing or non-numeric values", param="values")
    if got[_BELOW] or got[_ABOVE]:
        raise DomainError(f"values must lie in the declared range [{edges[0]}, {edges[-1]}]; "
                          f"{got[_BELOW]} below and {got[_ABOVE]} above it", param="values")
    return _dense(got["bins"], edges.size - 1)


def _aggregate(frame: Any) -> dict[Any, Any]:
    """``(kind, bin) -> count`` in one job; returns violation counts by kind and the valid bins."""
    F = require_pyspark()
    agg = frame.groupBy("k", F.when(F.col("k") == _VALID, F.col("b")).otherwise(-1).alias("b")).agg(
        F.count(F.lit(1)).alias("n"))
    got = collect_arrays(agg, ["k", "b", "n"])
    out: dict[Any, Any] = {k: int(got["n"][got["k"] == k].sum()) for k in (_NAN, _BELOW, _ABOVE)}
    valid = got["k"] == _VALID
    out["bins"] = (got["b"][valid], got["n"][valid])
    return out


def _dense(pairs: tuple[NDArray[np.int64], NDArray[np.int64]], size: int) -> NDArray[np.int64]:
    out = np.zeros(size, dtype=np.int64)
    out[pairs[0]] = pairs[1]  # bins are distinct group keys
    return out
