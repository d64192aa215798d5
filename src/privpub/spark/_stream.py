"""Stream items from Spark: counts per time step (batch) and a Structured Streaming sink.

Reference for the publishers fed here: Wu, Huang, Ge, Sun, Computer Science 46(9), 2019
(privpub.stream). The data-sized step is counting events per declared time step; the
publisher (its trees, noise and ledger) is the in-memory one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from privpub.core import check_positive_int
from privpub.errors import DomainError, ParameterError
from privpub.spark._frame import check_columns, check_frame, collect_arrays, require_pyspark
from privpub.stream import time_grid

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = ["StreamSink", "step_counts"]

log = logging.getLogger(__name__)

_VALID, _MISSING, _BEFORE = 0, 1, 2


def _indexed(frame: DataFrame, column: str, unit: str, s0: int | float, width: int | float) -> DataFrame:
    """``(k, i)``: kind (valid / missing / before the grid) and step index of every event."""
    F = require_pyspark()
    from pyspark.sql.types import IntegralType, NumericType, TimestampNTZType, TimestampType

    dtype = frame.schema[column].dataType
    raw = F.col(column)
    if unit == "us":
        if isinstance(dtype, TimestampNTZType):
            raw = raw.cast("timestamp")  # interpreted in the session time zone
        elif not isinstance(dtype, TimestampType):
            raise DomainError(f"column {column!r} must be a timestamp for a datetime start, got "
                              f"{dtype.simpleString()}")
        t: Column = F.unix_micros(raw)
        integral = True
    elif isinstance(dtype, NumericType):
        integral = isinstance(dtype, IntegralType) and isinstance(s0, int) and isinstance(width, int)
        t = raw.cast("long") if integral else raw.cast("double")
    else:
        raise DomainError(f"column {column!r} must be numeric for a numeric start, got {dtype.simpleString()}")
    if integral:
        rel = t - F.lit(int(s0)).cast("long")
        missing = t.isNull()
        step_idx = F.expr(f"rel__ div {int(width)}")  # exact integer division (rel__ >= 0 here)
        return (frame.select(rel.alias("rel__"), missing.alias("m__"))
                .select(F.when(F.col("m__"), _MISSING).when(F.col("rel__") < 0, _BEFORE).otherwise(_VALID).alias("k"),
                        F.when(~F.col("m__") & (F.col("rel__") >= 0), step_idx).otherwise(-1).alias("i")))
    rel_f = t - F.lit(float(s0))
    missing = t.isNull() | F.isnan(t) | (t == F.lit(float("inf"))) | (t == F.lit(float("-inf")))
    return frame.select(
        F.when(missing, _MISSING).when(rel_f < 0, _BEFORE).otherwise(_VALID).alias("k"),
        F.when(~missing & (rel_f >= 0), F.floor(rel_f / F.lit(float(width)))).otherwise(-1).cast("long").alias("i"),
    )


def _aggregate(frame: DataFrame, column: str, unit: str, s0: int | float, width: int | float
               ) -> tuple[int, int, NDArray[np.int64], NDArray[np.int64]]:
    """One job: ``(missing, before, step indices, counts)`` of the events of ``frame``."""
    F = require_pyspark()
    agg = _indexed(frame, column, unit, s0, width).groupBy("k", "i").agg(F.count(F.lit(1)).alias("n"))
    got = collect_arrays(agg, ["k", "i", "n"])
    missing = int(got["n"][got["k"] == _MISSING].sum())
    before = int(got["n"][got["k"] == _BEFORE].sum())
    valid = got["k"] == _VALID
    return missing, before, got["i"][valid], got["n"][valid]


def step_counts(df: Any, column: str, *, start: Any, step: Any, steps: int) -> NDArray[np.int64]:
    """Number of events per declared time step of ``column``, computed in Spark (one job).

    Same semantics, arithmetic and errors as :func:`privpub.stream.step_counts`: step ``i`` is
    ``[start + i*step, start + (i+1)*step)``; ``column`` is a timestamp (``start`` a datetime or
    ISO string, ``step`` a timedelta; compared in integer microseconds) or a number (``start`` and
    ``step`` numbers). Events outside the declared grid, or missing, raise
    :class:`~privpub.errors.DomainError`: nothing is dropped. Only ``steps`` integers reach the
    driver. Feed the result to a stream publisher: ``pub.extend(step_counts(df, "ts", ...))``.
    """
    frame = check_frame(df)
    check_columns(frame, [column], "df")
    n = check_positive_int(steps, "steps")
    unit, s0, width = time_grid(start, step)
    missing, before, idx, cnt = _aggregate(frame, column, unit, s0, width)
    if missing:
        raise DomainError(f"times must be datetimes or numbers; {missing} missing or unparsable values", param="times")
    after = int(cnt[idx >= n].sum())
    if before or after:
        raise DomainError(f"times must lie in the declared grid of {n} steps from {start!r} by {step!r}; "
                          f"{before} events before it and {after} after it", param="times")
    out = np.zeros(n, dtype=np.int64)
    out[idx] = cnt
    return out


class StreamSink:
    """A Structured Streaming ``foreachBatch`` sink that feeds a running stream publisher.

    ``query = events.writeStream.foreachBatch(StreamSink(pub, "ts", start=..., step=...)).start()``

    Every micro-batch is aggregated in Spark (one job: events per time step of ``column``), and
    the counts wait on the driver (one integer per open step) until their step is *closed*; closed
    steps are appended to ``publisher`` in time order with ``publisher.extend`` (an empty step is a
    0). A step closes when the public ``clock`` passes its end plus ``lateness``, or on
    :meth:`flush`. Which steps close, and when, never depends on the events -- only on the clock
    and the declared grid -- so the publisher's time axis is public and each event still adds 1
    to one item (event-level DP with the publisher's epsilon; the ledger is the publisher's).

    Parameters
    ----------
    publisher : StreamPublisher
        A :mod:`privpub.stream` publisher (RTP, HQRTP, BT, ...), fed from its current time on.
    column : str
        The event-time column (timestamp, or number on the clock's scale).
    start, step
        The declared grid (see :func:`step_counts`); step ``i`` is published as the
        publisher's item ``t0 + i + 1`` where ``t0`` is its time when the sink was made.
    lateness : float
        Seconds (or clock units) a step stays open after its end, for late events (default 0).
    on_late : {"raise", "drop"}
        An event whose step is already closed, or that lies before ``start``: ``"raise"`` stops
        the query with a DomainError (default); ``"drop"`` leaves it out of the items and counts it
        in :attr:`dropped` (a policy fixed in advance: each event still moves one item by at most 1).
    clock : callable, optional
        Returns the current time in the grid's unit as epoch seconds for datetimes (default
        ``time.time``), or in the column's unit for numbers.
    """

    def __init__(self, publisher: Any, column: str, *, start: Any, step: Any, lateness: float = 0.0,
                 on_late: str = "raise", clock: Callable[[], float] | None = None) -> None:
        if not hasattr(publisher, "extend") or not hasattr(publisher, "t"):
            raise ParameterError(f"publisher must be a privpub.stream publisher, got {type(publisher).__name__}", param="publisher")
        if on_late not in ("raise", "drop"):
            raise ParameterError(f"on_late must be 'raise' or 'drop', got {on_late!r}", param="on_late")
        if not isinstance(column, str):
            raise ParameterError(f"column must be a column name, got {column!r}", param="column")
        self.publisher = publisher
        self.column = column
        self.start, self.step = start, step
        self._unit, self._s0, self._width = time_grid(start, step)
        lat = float(lateness)
        if not (np.isfinite(lat) and lat >= 0):
            raise ParameterError(f"lateness must be finite and >= 0, got {lateness!r}", param="lateness")
        self.lateness = lat
        self.on_late = on_late
        self.clock = clock or time.time
        self.closed = 0  # steps 0..closed-1 are published
        self.dropped = 0
        self.batches = 0
        self._pending: dict[int, int] = {}

    def _scale(self) -> float:
        return 1e6 if self._unit == "us" else 1.0

    def _closable(self, now: float) -> int:
        """Number of steps whose end + lateness is at or before ``now`` (public)."""
        end = (now - self.lateness) * self._scale() - float(self._s0)
        return max(self.closed, int(np.floor(end / float(self._width))))

    def __call__(self, batch: Any, batch_id: int) -> None:
        """Aggregate one micro-batch (one Spark job) and publish the steps the clock has closed."""
        frame = check_frame(batch, "batch")
        missing, before, idx, cnt = _aggregate(frame, self.column, self._unit, self._s0, self._width)
        late = before + int(cnt[idx < self.closed].sum())
        if missing:
            raise DomainError(f"column {self.column!r} has {missing} missing event times (batch {batch_id})")
        if late and self.on_late == "raise":
            raise DomainError(f"{late} events of batch {batch_id} fall before the grid's start or in steps already "
                              f"published (steps < {self.closed}); raise lateness= or use on_late='drop'")
        self.dropped += late
        for i, c in zip(idx.tolist(), cnt.tolist()):
            if i >= self.closed:
                self._pending[i] = self._pending.get(i, 0) + c
        self.batches += 1
        self._publish(self._closable(self.clock()))

    def flush(self, steps: int) -> None:
        """Close and publish every step below ``steps`` (e.g. at the end of a bounded stream)."""
        self._publish(check_positive_int(steps, "steps"))

    def _publish(self, upto: int) -> None:
        if upto <= self.closed:
            return
        items = np.zeros(upto - self.closed, dtype=np.int64)
        for i in [i for i in self._pending if i < upto]:
            items[i - self.closed] = self._pending.pop(i)
        self.publisher.extend(items)
        log.info("published steps %d..%d", self.closed, upto - 1)
        self.closed = upto
