"""Query-length predictors of HQ_RTP / HQ_RTPMM (paper §3.2, spec §4): SMA and EWMA."""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpub.core import check_positive_int, check_probability

__all__ = ["EWMA", "SMA", "predictor_from_state"]


class SMA:
    """Simple moving average of the last ``n`` query lengths (paper Eq. 8/9).

    An integer running sum is kept, so the value ``S / m`` is exact and O(1) to update; while
    fewer than ``n`` lengths are held, the mean of those ``m`` is used.

    Parameters
    ----------
    n : int
        Window of the average (default 100; the paper gives no value).

    Examples
    --------
    >>> p = SMA(3)
    >>> for L in (1, 2, 3, 10):
    ...     p.update(L)
    >>> p.value
    5.0
    """

    def __init__(self, n: int = 100) -> None:
        self.n = check_positive_int(n, "n")
        self._q: deque[int] = deque()
        self._sum = 0

    def update(self, length: int) -> None:
        """Record one query length."""
        L = int(length)
        self._q.append(L)
        self._sum += L
        if len(self._q) > self.n:
            self._sum -= self._q.popleft()

    def update_many(self, lengths: Iterable[int]) -> None:
        """Record lengths in order (same state as repeated :meth:`update`)."""
        if isinstance(lengths, np.ndarray):
            arr = lengths[-self.n :].astype(np.int64).tolist() if lengths.shape[0] >= self.n else lengths.tolist()
        else:
            arr = [int(L) for L in lengths]
        if len(arr) >= self.n:
            self._q = deque(arr[len(arr) - self.n :])
            self._sum = sum(self._q)
            return
        for L in arr:
            self.update(L)

    @property
    def value(self) -> float | None:
        """The prediction, or None before any length was recorded."""
        return self._sum / len(self._q) if self._q else None

    def values_after(self, lengths: NDArray[np.int64]) -> NDArray[np.float64]:
        """Predictions after recording 0, 1, ..., len(lengths) further lengths (NaN: no prediction
        yet); the predictor itself is unchanged. Same values as :attr:`value` after each update."""
        held = np.array(list(self._q), dtype=np.int64)
        allq = np.concatenate([held, np.asarray(lengths, dtype=np.int64)])
        csum = np.concatenate([[0], np.cumsum(allq)])
        c = np.arange(held.size, allq.size + 1)
        m = np.minimum(self.n, c)
        vals: NDArray[np.float64] = (csum[c] - csum[c - m]) / np.maximum(m, 1)
        if held.size == 0:
            vals[0] = np.nan
        return vals

    def copy(self) -> SMA:
        return copy.deepcopy(self)

    def get_state(self) -> dict[str, Any]:
        """The predictor as plain data (see :func:`predictor_from_state`)."""
        return {"kind": "sma", "n": self.n, "lengths": list(self._q)}

    def __repr__(self) -> str:
        return f"SMA(n={self.n})"


class EWMA:
    """Exponentially weighted moving average of the last ``n`` lengths (weights ``p**i``).

    Implements the corrected O(1) recurrence of spec §4 (the paper's Eq. 11 mixes the
    normalised and unnormalised sums): ``S <- p S - p**n q_old + q_new``, value ``S / Z_m``
    with ``Z_m = sum_{i<m} p**i``; ``S`` is recomputed from the held lengths every ``n``
    updates to bound floating-point drift.

    Examples
    --------
    >>> p = EWMA(2, 0.5)
    >>> p.update(4); p.update(1)
    >>> round(p.value, 6)  # (1 + 0.5 * 4) / 1.5
    2.0
    """

    def __init__(self, n: int = 100, p: float = 0.9) -> None:
        self.n = check_positive_int(n, "n")
        self.p = check_probability(p, "p", closed="right")
        self._q: deque[int] = deque()
        self._s = 0.0
        self._count = 0
        self._pn = self.p**self.n

    def update(self, length: int) -> None:
        L = int(length)
        self._q.append(L)
        if len(self._q) > self.n:
            old = self._q.popleft()
            self._s = self.p * self._s - self._pn * old + L
        else:
            self._s = self.p * self._s + L
        self._count += 1
        if self._count % self.n == 0:
            s = 0.0
            for i, q in enumerate(reversed(self._q)):
                s += self.p**i * q
            self._s = s

    def update_many(self, lengths: Iterable[int]) -> None:
        for L in lengths:
            self.update(L)

    @property
    def value(self) -> float | None:
        m = len(self._q)
        if m == 0:
            return None
        z = float(m) if self.p == 1.0 else (1.0 - self.p**m) / (1.0 - self.p)
        return self._s / z

    def values_after(self, lengths: NDArray[np.int64]) -> NDArray[np.float64]:
        """Predictions after 0, 1, ... further lengths (NaN: none yet; scalar recurrence on a copy)."""
        other = self.copy()
        out = [other.value]
        for L in np.asarray(lengths, dtype=np.int64).tolist():
            other.update(L)
            out.append(other.value)
        return np.array([np.nan if v is None else v for v in out], dtype=np.float64)

    def copy(self) -> EWMA:
        return copy.deepcopy(self)

    def get_state(self) -> dict[str, Any]:
        """The predictor as plain data (see :func:`predictor_from_state`)."""
        return {"kind": "ewma", "n": self.n, "p": self.p, "lengths": list(self._q), "sum": self._s,
                "count": self._count}

    def __repr__(self) -> str:
        return f"EWMA(n={self.n}, p={self.p})"


def predictor_from_state(state: dict[str, Any]) -> SMA | EWMA:
    """Rebuild an :class:`SMA` or :class:`EWMA` from its ``get_state()``."""
    kind = state.get("kind")
    lengths = [int(v) for v in state.get("lengths", [])]
    if kind == "sma":
        sma = SMA(int(state["n"]))
        sma._q = deque(lengths)
        sma._sum = sum(lengths)
        return sma
    if kind == "ewma":
        ew = EWMA(int(state["n"]), float(state["p"]))
        ew._q = deque(lengths)
        ew._s = float(state["sum"])
        ew._count = int(state["count"])
        return ew
    from privpub.errors import ParameterError

    raise ParameterError(f"predictor state must be of kind 'sma' or 'ewma', got {kind!r}")
