"""The stateful stream-publisher base: validation, window store, ledger, append/extend/query/answer."""

from __future__ import annotations

import math
import numbers
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import BudgetLedger, RNGLike, as_generator, check_array, check_epsilon, check_positive_int
from privpub.core._validation import check_real
from privpub.errors import DomainError, ParameterError
from privpub.stream._noise import NOISE_KINDS, NoiseStream

__all__ = ["StreamPublisher"]

_CHUNK = 1 << 20


class _Store:
    """Time-indexed arrays (index ``time - base``): running sum P, local prefix LP, node value Y
    (node completed at that time) and the noisy prefix NP."""

    def __init__(self, capacity: int) -> None:
        self.base = 0
        self.capacity = capacity
        self.P = np.zeros(capacity)
        self.LP = np.zeros(capacity)
        self.Y = np.zeros(capacity)
        self.NP = np.zeros(capacity)

    def reserve(self, keep_from: int, last: int) -> None:
        """Drop times before ``keep_from`` and make room up to time ``last``."""
        keep_from = max(keep_from, self.base)
        shift = keep_from - self.base
        need = last - keep_from + 1
        cap = self.capacity
        if need > cap:
            cap = max(2 * cap, need + need // 4)
        used = self.capacity - shift
        for name in ("P", "LP", "Y", "NP"):
            old = getattr(self, name)
            if cap != self.capacity:
                new = np.zeros(cap)
                new[:used] = old[shift:]
                setattr(self, name, new)
            elif shift:
                old[:used] = old[shift:].copy()
        self.base = keep_from
        self.capacity = cap


class _Trees:
    """Start times and configurations of the stored trees (sorted by start)."""

    def __init__(self) -> None:
        self.starts = np.zeros(64, dtype=np.int64)
        self.cfg_ids = np.zeros(64, dtype=np.int64)
        self.n = 0
        self.table: dict[int, Any] = {}

    def _grow(self, extra: int) -> None:
        if self.n + extra > self.starts.shape[0]:
            cap = max(2 * self.starts.shape[0], self.n + extra)
            self.starts = np.concatenate([self.starts[: self.n], np.zeros(cap - self.n, dtype=np.int64)])
            self.cfg_ids = np.concatenate([self.cfg_ids[: self.n], np.zeros(cap - self.n, dtype=np.int64)])

    def append(self, start: int, cfg: Any) -> None:
        self._grow(1)
        self.table[id(cfg)] = cfg
        self.starts[self.n] = start
        self.cfg_ids[self.n] = id(cfg)
        self.n += 1

    def extend(self, starts: NDArray[np.int64], cfg: Any) -> None:
        m = starts.shape[0]
        if m == 0:
            return
        self._grow(m)
        self.table[id(cfg)] = cfg
        self.starts[self.n : self.n + m] = starts
        self.cfg_ids[self.n : self.n + m] = id(cfg)
        self.n += m

    def extend_rows(self, starts: NDArray[np.int64], cfgs: list[Any]) -> None:
        """Append trees with one configuration each."""
        m = starts.shape[0]
        if m == 0:
            return
        self._grow(m)
        ids = [id(c) for c in cfgs]
        self.table.update(zip(ids, cfgs))
        self.starts[self.n : self.n + m] = starts
        self.cfg_ids[self.n : self.n + m] = ids
        self.n += m

    def first_overlapping(self, time: int) -> int:
        """Index of the tree containing ``time`` (or the first tree after it)."""
        return max(0, int(np.searchsorted(self.starts[: self.n], time, side="right")) - 1)

    def trim_before(self, time: int) -> None:
        """Forget trees that end before ``time`` (keep the one containing it)."""
        i = self.first_overlapping(time)
        if i > 0 and i > self.n // 2:
            keep = self.n - i
            self.starts[:keep] = self.starts[i : self.n].copy()
            self.cfg_ids[:keep] = self.cfg_ids[i : self.n].copy()
            self.n = keep
            live = set(np.unique(self.cfg_ids[: self.n]).tolist())
            self.table = {k: v for k, v in self.table.items() if k in live}

    def overlapping(self, l: int, r: int) -> tuple[NDArray[np.int64], list[Any]]:
        lo = self.first_overlapping(l)
        hi = int(np.searchsorted(self.starts[: self.n], r, side="right"))
        ids = self.cfg_ids[lo:hi]
        return self.starts[lo:hi].copy(), [self.table[int(i)] for i in ids]

    def listing(self, from_time: int) -> list[tuple[int, int]]:
        lo = self.first_overlapping(from_time)
        return [(int(s), int(self.table[int(c)].k)) for s, c in zip(self.starts[lo : self.n], self.cfg_ids[lo : self.n])]


class StreamPublisher:
    """Base class of the stateful stream publishers (see the subclasses)."""

    method: ClassVar[str] = ""
    _T = 0  # items per tree of the open tree (Fenwick publishers)
    _u = 0  # items received by the open tree

    def __init__(
        self,
        *,
        window: int,
        epsilon: float,
        rng: RNGLike,
        sensitivity: float,
        noise: str,
        mechanism: str,
    ) -> None:
        self.window = check_positive_int(window, "window")
        self.epsilon = check_epsilon(epsilon)
        sens = check_real(sensitivity, "sensitivity")
        if sens <= 0:
            raise ParameterError(f"sensitivity must be > 0, got {sens}")
        self.sensitivity = sens
        if noise not in NOISE_KINDS:
            raise ParameterError(f"noise must be one of {NOISE_KINDS}, got {noise!r}")
        self.noise = noise
        self._discrete = noise == "discrete"
        self._noise = NoiseStream(noise, as_generator(rng))
        ledger = BudgetLedger(self.epsilon)
        ledger.spend(
            "stream nodes",
            ("discrete_laplace" if self._discrete else "laplace") + f" on {mechanism}",
            self.epsilon,
            composition="parallel",
            parts=1,
            note="event-level: each item's nodes spend at most epsilon (sequential) inside its own "
            "tree; trees hold disjoint items (parallel composition over an unbounded stream)",
        )
        self._ledger = ledger.freeze()
        self._t = 0
        self._p_last = 0.0
        self._store = _Store(1024)
        self._trees = _Trees()

    # -- read-only state ------------------------------------------------------------------------
    @property
    def ledger(self) -> BudgetLedger:
        """The (frozen) budget ledger: event-level epsilon for the whole stream."""
        return self._ledger

    @property
    def t(self) -> int:
        """Number of items received so far (the current time)."""
        return self._t

    @property
    def trees(self) -> list[tuple[int, int]]:
        """``(start, height)`` of the stored trees that meet the window, oldest first."""
        return self._trees.listing(max(1, self._t - self.window + 1))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(window={self.window}, epsilon={self.epsilon}, "
                f"noise={self.noise!r}, t={self._t})")

    # -- input validation -----------------------------------------------------------------------
    def _check_item(self, x: Any) -> float:
        if type(x) is int:
            if x < 0:
                raise DomainError(f"items must be >= 0 (counts), got {x}")
            return float(x)
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise DomainError(f"items must be real numbers, got {x!r}")
        v = float(x)
        if not math.isfinite(v) or v < 0:
            raise DomainError(f"items must be finite and >= 0, got {v}")
        if self._discrete and v != math.floor(v):
            raise DomainError(
                f"items must be integers with noise='discrete', got {v}; use noise='laplace' for reals"
            )
        return v

    def _check_items(self, items: ArrayLike) -> NDArray[np.float64]:
        try:
            arr = check_array(items, "items", ndim=1, allow_empty=True)
        except DomainError as exc:
            raise DomainError(f"items must be finite and >= 0: {exc}") from None
        arr = arr.astype(np.float64)
        if arr.size and np.min(arr) < 0:
            raise DomainError(f"items must be >= 0 (counts), got {float(np.min(arr))}")
        if self._discrete and arr.size and not np.all(arr == np.floor(arr)):
            raise DomainError("items must be integers with noise='discrete'; use noise='laplace' for reals")
        return arr

    def _check_query(self, l: Any, r: Any) -> tuple[int, int]:
        for name, v in (("l", l), ("r", r)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ParameterError(f"{name} must be an integer time index, got {v!r}")
        l_, r_ = int(l), int(r)
        if not (self._t - self.window < l_ <= r_ <= self._t and l_ >= 1):
            raise ParameterError(self._query_msg(l_, r_))
        return l_, r_

    def _query_msg(self, l: int, r: int) -> str:
        return (f"query must satisfy max(1, t - window + 1) <= l <= r <= t with t={self._t}, "
                f"window={self.window}, got l={l}, r={r}")

    def _check_queries(self, queries: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        q = np.asarray(queries)
        if q.ndim == 1 and q.shape[0] == 2:
            q = q.reshape(1, 2)
        if q.ndim != 2 or q.shape[1] != 2:
            raise ParameterError(f"queries must have shape (q, 2) of (l, r), got shape {q.shape}")
        if q.size and q.dtype.kind not in "iu":
            raise ParameterError(f"queries must be integer time indices, got dtype {q.dtype}")
        q = q.astype(np.int64)
        l, r = q[:, 0], q[:, 1]
        bad = ~((l >= 1) & (l > self._t - self.window) & (l <= r) & (r <= self._t))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ParameterError(f"queries[{i}]: " + self._query_msg(int(l[i]), int(r[i])))
        return l, r

    # -- public API -----------------------------------------------------------------------------
    def append(self, x: float) -> None:
        """Receive one item (a count for the next time slot)."""
        self._push(self._check_item(x))

    def extend(self, items: ArrayLike) -> None:
        """Receive many items at once (vectorised; same result as appending them one by one)."""
        arr = self._check_items(items)
        for a in range(0, arr.shape[0], _CHUNK):
            self._ingest(arr[a : a + _CHUNK])

    def query(self, l: int, r: int) -> float:
        """Noisy sum of items ``l..r`` (1-based, inclusive, inside the window)."""
        l_, r_ = self._check_query(l, r)
        out = float(self._answer_checked(np.array([l_]), np.array([r_]))[0])
        self._record(np.array([r_ - l_ + 1]))
        return out

    def answer(self, queries: ArrayLike, *, record: bool = True) -> NDArray[np.float64]:
        """Noisy answers to a (q, 2) array of ranges ``(l, r)`` at the current time.

        Adaptive publishers record the lengths in order (as if :meth:`query` were called in a
        loop) unless ``record=False``.
        """
        l, r = self._check_queries(queries)
        out = self._answer_checked(l, r)
        if record:
            self._record(r - l + 1)
        return out

    def replay(self, items: ArrayLike, queries: ArrayLike) -> NDArray[np.float64]:
        """Ingest ``items`` while answering ``queries`` asked along the way, vectorised.

        ``queries`` is a (q, 3) integer array of ``(time, l, r)``, sorted by ``time``, where
        ``time`` is the number of items received when the query is asked. Same answers and same
        final state as appending the items one by one and calling :meth:`query` at those times.
        """
        arr = self._check_items(items)
        q = np.asarray(queries)
        if q.size == 0:
            q = np.zeros((0, 3), dtype=np.int64)
        if q.ndim != 2 or q.shape[1] != 3 or (q.size and q.dtype.kind not in "iu"):
            raise ParameterError(f"queries must be an integer array of shape (q, 3), got shape {q.shape}")
        q = q.astype(np.int64)
        qt, l, r = q[:, 0], q[:, 1], q[:, 2]
        t0, n = self._t, arr.shape[0]
        if q.shape[0]:
            if np.any(np.diff(qt) < 0) or qt[0] < t0 or qt[-1] > t0 + n:
                raise ParameterError(f"query times must be sorted and within [{t0}, {t0 + n}]")
            bad = ~((l >= 1) & (l > qt - self.window) & (l <= r) & (r <= qt))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ParameterError(
                    f"queries[{i}] must satisfy max(1, time - window + 1) <= l <= r <= time "
                    f"(window={self.window}), got time={qt[i]}, l={l[i]}, r={r[i]}"
                )
        lengths = r - l + 1
        layout = self._replay_layout(t0, n, qt, lengths)
        out = np.empty(q.shape[0])
        done = 0
        # queries asked before any new item
        j = int(np.searchsorted(qt, t0, side="right"))
        if j:
            out[:j] = self._answer_checked(l[:j], r[:j])
            done = j
        for a in range(0, n, _CHUNK):
            chunk = arr[a : a + _CHUNK]
            self._ingest(chunk, self._cut_layout(layout))
            j = int(np.searchsorted(qt, self._t, side="right"))
            if j > done:
                out[done:j] = self._answer_checked(l[done:j], r[done:j])
                done = j
        self._record(lengths)
        return out

    # -- hooks ----------------------------------------------------------------------------------
    def _cut_layout(self, layout: Any) -> Any:
        """The part of a replay layout that starts after the open tree."""
        first_new = self._t + 1 + (self._T - self._u if getattr(self, "_cfg", None) is not None else 0)
        out = []
        for s, nt, cfg in layout:
            end = s + nt * cfg.T
            if end <= first_new:
                continue
            if s < first_new:
                skip = (first_new - s) // cfg.T
                s, nt = s + skip * cfg.T, nt - skip
                if hasattr(cfg, "skip"):
                    cfg = cfg.skip(skip)
            out.append((s, nt, cfg))
        return out

    def _compact(self, n: int) -> None:
        """Make room for ``n`` more items, dropping what the window no longer needs."""
        t = self._t
        oldest = self._trees.starts[self._trees.first_overlapping(max(1, t - self.window + 1))] \
            if self._trees.n else 1
        keep_from = min(t - self.window, int(oldest) - 1, getattr(self, "_s", t + 1) - 1)
        self._trees.trim_before(max(1, t - self.window + 1))
        st = self._store
        if t + n - st.base < st.capacity:
            return
        st.reserve(max(0, keep_from), t + n)

    def _record(self, lengths: NDArray[np.int64]) -> None:  # pragma: no cover - overridden
        return None

    def _push(self, x: float) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _ingest(self, x: NDArray[np.float64], layout: Any = None) -> None:  # pragma: no cover
        raise NotImplementedError

    def _answer_checked(self, l: NDArray[np.int64], r: NDArray[np.int64]) -> NDArray[np.float64]:
        raise NotImplementedError  # pragma: no cover

    def _replay_layout(self, t0: int, n: int, q_times: NDArray[np.int64], lengths: NDArray[np.int64]) -> Any:
        return None
