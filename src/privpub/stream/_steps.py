"""Items of a count stream from raw event times: the number of events per declared time step."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from privpub.core import check_positive_int
from privpub.errors import DomainError, ParameterError

__all__ = ["step_counts", "time_grid"]


def time_grid(start: Any, step: Any) -> tuple[str, int | float, int | float]:
    """Normalise a declared (public) time grid: ``(unit, start, step)``.

    Datetimes (``datetime``, ``pandas.Timestamp`` or an ISO string) with a ``timedelta`` step
    become integer microseconds since the epoch (unit ``"us"``); numbers stay numbers (unit
    ``"number"``, int if both are integers). Naive datetimes are taken as UTC.
    """
    if isinstance(start, str | dt.datetime | pd.Timestamp | np.datetime64):
        try:
            ts = pd.Timestamp(start)
        except (ValueError, TypeError) as exc:
            raise ParameterError(f"start must be a datetime or a number, got {start!r}", param="start") from exc
        ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
        try:
            width = pd.Timedelta(step)
        except (ValueError, TypeError) as exc:
            raise ParameterError(f"step must be a timedelta for a datetime start, got {step!r}", param="step") from exc
        us = int(width / pd.Timedelta(microseconds=1))
        if us <= 0:
            raise ParameterError(f"step must be a positive duration of at least 1 microsecond, got {step!r}", param="step")
        return "us", int(ts.value // 1000), us
    for name, v in (("start", start), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
            raise ParameterError(f"{name} must be a number (or start a datetime, step a timedelta), got {v!r}", param=name)
        if not np.isfinite(float(v)):
            raise ParameterError(f"{name} must be finite, got {v!r}", param=name)
    if not float(step) > 0:
        raise ParameterError(f"step must be > 0, got {step!r}", param="step")
    if isinstance(start, int | np.integer) and isinstance(step, int | np.integer):
        return "number", int(start), int(step)
    return "number", float(start), float(step)


def _as_grid_values(times: Any, unit: str) -> NDArray[Any]:
    if unit == "us":
        ser = pd.to_datetime(pd.Series(times), utc=True, errors="coerce")
        if ser.isna().any():
            raise DomainError(f"times must be datetimes; {int(ser.isna().sum())} missing or unparsable values", param="times")
        return np.asarray(ser.astype("datetime64[us, UTC]").astype("int64"), dtype=np.int64)
    arr = np.asarray(times)
    if arr.dtype.kind not in "iuf":
        raise DomainError(f"times must be numbers for a numeric start, got dtype {arr.dtype}", param="times")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise DomainError(f"times must be finite; {int(np.sum(~np.isfinite(arr)))} NaN or infinite values", param="times")
    return arr


def step_counts(times: ArrayLike, *, start: Any, step: Any, steps: int) -> NDArray[np.int64]:
    """Number of events in each declared time step ``[start + i*step, start + (i+1)*step)``.

    The grid (``start``, ``step``, ``steps``) is public and declared, never read from the data.
    Every event must fall inside it: an event before ``start``, at or after the grid's end, or
    missing raises :class:`~privpub.errors.DomainError` (nothing is dropped). The result is the
    item sequence of a stream publisher (``pub.extend(step_counts(...))``); each event adds 1 to
    exactly one item, so it has L1 sensitivity 1 under add/remove-one-event neighbours.
    ``privpub.spark.step_counts`` computes the same integers in Spark.

    Examples
    --------
    >>> step_counts([0.5, 1.0, 1.5, 3.9], start=0, step=1, steps=4).tolist()
    [1, 2, 0, 1]
    """
    n = check_positive_int(steps, "steps")
    unit, s0, width = time_grid(start, step)
    values = _as_grid_values(times, unit)
    if values.dtype.kind in "iu" and isinstance(s0, int) and isinstance(width, int):
        rel = values.astype(np.int64) - s0
        before = int(np.sum(rel < 0))
        idx = np.floor_divide(rel, width)
    else:
        rel_f = values.astype(np.float64) - float(s0)
        before = int(np.sum(rel_f < 0))
        idx = np.floor(rel_f / float(width)).astype(np.int64)
    after = int(np.sum(idx >= n))
    if before or after:
        raise DomainError(f"times must lie in the declared grid of {n} steps from {start!r} by {step!r}; "
                          f"{before} events before it and {after} after it", param="times")
    return np.bincount(idx, minlength=n).astype(np.int64)
