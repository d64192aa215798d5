"""Server-side sums of local-DP reports stored in a Spark DataFrame (OUE/SUE bits, OLH supports).

The reports are already randomised on the users' devices (epsilon-LDP each); summing them is
post-processing. The data-sized step -- one pass over all reports -- runs in Spark: each
partition is counted by the oracle's own compiled kernel (``mapInArrow``, the same code as
:meth:`~privpub.ldp.OUE.aggregate` in memory), and the per-partition counts are summed in Spark,
so only ``domain_size`` integers reach the driver.

Report tables:

* unary encodings (OUE, SUE): one ``BinaryType`` column of packed reports, ``ceil(d / 8)``
  bytes each with the bits in little-endian order (what ``perturb(..., packed=True)`` returns
  row by row: ``bytes(row)``);
* OLH: three integer columns ``a``, ``b``, ``y`` (the rows of ``OLH.perturb``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from privpub.errors import DomainError, ParameterError
from privpub.spark._frame import check_columns, check_frame, collect_arrays, require_pyspark

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["aggregate_reports", "n_reports"]

#: default column names of the report tables
UE_COLUMN = "report"
OLH_COLUMNS = ("a", "b", "y")


def _partial_counts(frame: DataFrame, count_batch: Any, d: int) -> NDArray[np.int64]:
    """Sum over partitions of ``count_batch(arrow_batch) -> (d,) int64``, reduced in Spark."""
    F = require_pyspark()
    import pyarrow as pa

    out_schema = pa.schema([pa.field("c", pa.list_(pa.int64()))])

    def per_partition(batches: Iterator[Any]) -> Iterator[Any]:
        total = np.zeros(d, dtype=np.int64)
        for batch in batches:
            if batch.num_rows:
                total += count_batch(batch)
        yield pa.RecordBatch.from_arrays([pa.array([total.tolist()], type=pa.list_(pa.int64()))], schema=out_schema)

    partial = frame.mapInArrow(per_partition, "c array<long>")
    summed = (partial.select(F.posexplode("c").alias("i", "n")).groupBy("i").agg(F.sum("n").alias("n")))
    got = collect_arrays(summed, ["i", "n"])
    out = np.zeros(d, dtype=np.int64)
    out[got["i"]] = got["n"]
    return out


def _ue_counter(oracle: Any, width: int) -> Any:
    def count_batch(batch: Any) -> NDArray[np.int64]:
        col = batch.column(0)
        if col.offset or col.null_count:  # not produced by Spark's Arrow batches; be safe
            col = col.take(np.arange(len(col)))
        offsets = np.frombuffer(col.buffers()[1], dtype=np.int32)[: len(col) + 1]
        data = np.frombuffer(col.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
        packed = data.reshape(len(col), width)
        counts: NDArray[np.int64] = oracle._count_packed(packed)
        return counts

    return count_batch


def _olh_counter(oracle: Any, epsilon: float | None) -> Any:
    def count_batch(batch: Any) -> NDArray[np.int64]:
        rows = np.stack([np.asarray(batch.column(j).to_numpy(), dtype=np.int64) for j in range(3)], axis=1)
        counts: NDArray[np.int64] = oracle.aggregate(rows, epsilon=epsilon)
        return counts

    return count_batch


def aggregate_reports(oracle: Any, reports: Any, *, epsilon: float | None = None,
                      columns: Sequence[str] | None = None) -> NDArray[np.int64]:
    """Support counts of the reports in a Spark DataFrame, as ``oracle.aggregate`` computes them.

    Called by :meth:`privpub.ldp.OUE.aggregate` (and SUE, OLH) when ``reports`` is a
    ``pyspark.sql.DataFrame``. The reports are validated in Spark first (one job: wrong widths,
    nulls, out-of-range OLH fields raise :class:`~privpub.errors.DomainError`), then counted (one
    job). Exact int64.
    """
    from privpub.ldp import OLH, OLH_PRIME, UnaryEncoding

    F = require_pyspark()
    frame = check_frame(reports, "reports")
    d = int(oracle.domain_size)
    if isinstance(oracle, UnaryEncoding):
        (name,) = tuple(columns or (UE_COLUMN,))
        check_columns(frame, [name], "reports")
        from pyspark.sql.types import BinaryType

        if not isinstance(frame.schema[name].dataType, BinaryType):
            raise DomainError(f"column {name!r} of the reports must hold packed reports (binary), got "
                              f"{frame.schema[name].dataType.simpleString()}")
        width = oracle.packed_width
        bad = frame.where(F.col(name).isNull() | (F.length(F.col(name)) != width)).count()
        if bad:
            raise DomainError(f"{bad} reports are missing or not {width} bytes long (packed reports of a "
                              f"{type(oracle).__name__} with domain_size={d})")
        return _partial_counts(frame.select(name), _ue_counter(oracle, width), d)
    if isinstance(oracle, OLH):
        cols = tuple(columns or OLH_COLUMNS)
        if len(cols) != 3:
            raise ParameterError(f"columns must name the three OLH fields (a, b, y), got {cols!r}", param="columns")
        check_columns(frame, cols, "reports")
        g = oracle.buckets(epsilon)
        a, b, y = (F.col(c).cast("long") for c in cols)
        nulls = a.isNull() | b.isNull() | y.isNull()
        stats = frame.agg(
            F.sum(F.when(nulls, 1).otherwise(0)).alias("nulls"),
            F.sum(F.when(~nulls & ((y < 0) | (y >= g)), 1).otherwise(0)).alias("bucket"),
            F.sum(F.when(~nulls & ((a < 1) | (a >= OLH_PRIME) | (b < 0) | (b >= OLH_PRIME)), 1).otherwise(0)).alias("hash"),
        ).collect()[0]
        if stats["nulls"]:
            raise DomainError(f"{stats['nulls']} OLH reports have missing fields")
        if stats["bucket"]:
            raise DomainError(f"OLH report buckets must lie in [0, {g - 1}]")
        if stats["hash"]:
            raise DomainError(f"OLH report hashes (a, b) must lie in [1, {OLH_PRIME - 1}] x [0, {OLH_PRIME - 1}]")
        return _partial_counts(frame.select(a.alias("a"), b.alias("b"), y.alias("y")), _olh_counter(oracle, epsilon), d)
    raise ParameterError(f"Spark report tables are supported for OUE, SUE and OLH, not {type(oracle).__name__}")


def n_reports(reports: Any) -> int:
    """Number of reports (rows) of a Spark DataFrame (one job)."""
    return int(check_frame(reports, "reports").count())
