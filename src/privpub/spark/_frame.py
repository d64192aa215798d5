"""Shared Spark helpers: the lazy PySpark import, a local session, column encoders and collection.

Nothing here reads data on the driver beyond aggregates: every function that runs a job
returns integer aggregates whose size is bounded by a public domain, never by the number of
records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from privpub.core import CategoricalAttribute, NumericAttribute
from privpub.errors import DomainError, ParameterError
from privpub.spark._detect import is_spark_frame

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "check_frame",
    "collect_arrays",
    "local_session",
    "require_pyspark",
    "searchsorted_expr",
]

INSTALL_HINT = "install the Spark extra: python -m pip install 'privpub[spark]'"


def require_pyspark() -> Any:
    """Import and return ``pyspark.sql.functions``; a clear ImportError names the extra if absent."""
    try:
        import pyspark.sql.functions as F
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(f"privpub's Spark engine needs PySpark: {INSTALL_HINT}") from exc
    return F


def check_frame(df: Any, name: str = "df") -> DataFrame:
    """``df`` if it is a ``pyspark.sql.DataFrame``, else a ParameterError naming the argument."""
    if not is_spark_frame(df):
        raise ParameterError(f"{name} must be a pyspark.sql.DataFrame, got {type(df).__name__}", param=name)
    return df  # type: ignore[no-any-return]


def check_columns(df: DataFrame, columns: Sequence[str], what: str = "data") -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DomainError(f"{what} is missing the columns {missing} (it has {list(df.columns)})", param=what)


def local_session(cores: int = 2, *, app_name: str = "privpub", shuffle_partitions: int | None = None,
                  driver_memory: str | None = None) -> SparkSession:
    """A local Spark session (``local[cores]``) bound to 127.0.0.1 with the web UI off.

    For tests, the CLI's ``--engine spark`` and benchmarks on one machine; on a cluster, build
    your own session (``spark-submit`` does) and pass its DataFrames to privpub. Returns the
    active session if one exists (Spark allows one per process).
    """
    require_pyspark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = (
        SparkSession.builder.master(f"local[{int(cores)}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(2, 2 * int(cores))))
        .config("spark.sql.adaptive.enabled", "true")
    )
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def collect_arrays(df: DataFrame, columns: Sequence[str]) -> dict[str, NDArray[np.int64]]:
    """Collect the (small, aggregated) ``df`` to int64 NumPy arrays, one per column (via Arrow)."""
    table = df.select(*columns).toArrow()
    out: dict[str, NDArray[np.int64]] = {}
    for c in columns:
        col = table.column(c)
        if col.null_count:
            raise AssertionError(f"aggregate column {c!r} has nulls")  # internal invariant
        out[c] = np.asarray(col.to_numpy(), dtype=np.int64).reshape(-1)
    return out


def searchsorted_expr(x: Column, edges: Sequence[float]) -> Column:
    """The index ``i`` with ``edges[i] <= x < edges[i + 1]`` (``x`` at or above ``edges[0]``).

    A balanced tree of comparisons: ``O(log len(edges))`` per row and no UDF (Spark generates
    code for it). The last index ``len(edges) - 2`` also takes ``x >= edges[-1]``. Integer edges
    stay integers, float edges doubles (compared exactly, as NumPy's ``searchsorted``).
    """
    F = require_pyspark()
    e = [int(v) if isinstance(v, int | np.integer) else float(v) for v in edges]

    def node(lo: int, hi: int) -> Column:  # answer in [lo, hi)
        if hi - lo == 1:
            leaf: Column = F.lit(lo).cast("long")
            return leaf
        mid = (lo + hi) // 2
        branch: Column = F.when(x < F.lit(e[mid]), node(lo, mid)).otherwise(node(mid, hi))
        return branch

    return node(0, len(e) - 1)


# ---------------------------------------------------------------------------------------------
# validation of declared domains, in Spark (same errors as the in-memory encoders)
# ---------------------------------------------------------------------------------------------
def numeric_value(df: DataFrame, name: str) -> Column:
    """Column ``name`` as double (the in-memory encoders' ``np.asarray(values, float64)``)."""
    F = require_pyspark()
    col: Column = F.col(name).cast("double")
    return col


def is_numeric_column(df: DataFrame, name: str) -> bool:
    from pyspark.sql.types import BooleanType, NumericType

    dtype = df.schema[name].dataType
    return isinstance(dtype, NumericType) or isinstance(dtype, BooleanType)


def category_code(name: str, categories: Sequence[str], codes: Sequence[int] | None = None) -> Column:
    """Code of each value of column ``name`` (cast to string) among the declared ``categories``;
    null for missing or undeclared values. ``codes`` (optional) relabels position ``i`` as ``codes[i]``."""
    F = require_pyspark()
    pairs: list[Any] = []
    for i, c in enumerate(categories):
        pairs += [F.lit(str(c)), F.lit(int(codes[i] if codes is not None else i)).cast("long")]
    code: Column = F.try_element_at(F.create_map(*pairs), F.col(name).cast("string"))
    return code


def numeric_stats_exprs(name: str, tag: str) -> list[Column]:
    """Aggregates for :func:`raise_numeric`: bad (null/NaN/inf) count, min and max of column ``name``."""
    F = require_pyspark()
    x = F.col(name).cast("double")
    bad = x.isNull() | F.isnan(x) | (x == F.lit(math.inf)) | (x == F.lit(-math.inf))
    return [
        F.sum(F.when(bad, 1).otherwise(0)).alias(f"{tag}_bad"),
        F.min(F.when(~bad, x)).alias(f"{tag}_min"),
        F.max(F.when(~bad, x)).alias(f"{tag}_max"),
    ]


def raise_numeric(attr: NumericAttribute, stats: dict[str, Any], tag: str) -> None:
    """The :meth:`NumericAttribute.check` errors from Spark aggregates."""
    bad = int(stats[f"{tag}_bad"] or 0)
    if bad:
        raise DomainError(f"column {attr.name!r} has {bad} NaN or "
                          "infinite values; drop or impute them before publishing")
    lo_v, hi_v = stats[f"{tag}_min"], stats[f"{tag}_max"]
    if lo_v is not None and (lo_v < attr.lo or hi_v > attr.hi):
        raise DomainError(
            f"column {attr.name!r} has values outside its declared range [{attr.lo}, {attr.hi}] "
            f"(min {np.float64(lo_v)}, max {np.float64(hi_v)}); widen the range or clip explicitly"
        )


def is_missing(df: DataFrame, name: str) -> Column:
    """Null, or NaN in a floating column (what pandas' ``isna`` calls missing)."""
    F = require_pyspark()
    from pyspark.sql.types import DoubleType, FloatType

    raw = F.col(name)
    missing: Column = raw.isNull()
    if isinstance(df.schema[name].dataType, DoubleType | FloatType):
        missing = missing | F.isnan(raw)
    return missing


def categorical_stats_exprs(df: DataFrame, attr: CategoricalAttribute, tag: str) -> list[Column]:
    """Aggregates for :func:`raise_categorical`: missing and undeclared counts."""
    F = require_pyspark()
    missing = is_missing(df, attr.name)
    code = category_code(attr.name, attr.categories)
    return [
        F.sum(F.when(missing, 1).otherwise(0)).alias(f"{tag}_null"),
        F.sum(F.when(~missing & code.isNull(), 1).otherwise(0)).alias(f"{tag}_unknown"),
    ]


def raise_categorical(df: DataFrame, attr: CategoricalAttribute, stats: dict[str, Any], tag: str) -> None:
    """The :meth:`CategoricalAttribute.encode` errors from Spark aggregates (examples: a second, small job)."""
    F = require_pyspark()
    missing = int(stats[f"{tag}_null"] or 0)
    if missing:
        raise DomainError(f"column {attr.name!r} has {missing} missing values; "
                          "drop or impute them before publishing")
    if int(stats[f"{tag}_unknown"] or 0):
        code = category_code(attr.name, attr.categories)
        rows = (df.where(~is_missing(df, attr.name) & code.isNull())
                .select(F.col(attr.name).cast("string").alias("v")).distinct().orderBy("v").limit(5).collect())
        bad = [r["v"] for r in rows]
        raise DomainError(
            f"column {attr.name!r} has values outside its declared categories: {bad}; "
            "add them to the schema or map them to a declared category"
        )
