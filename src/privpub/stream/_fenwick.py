"""RTP, RTPMM, HQRTP and HQRTPMM: real-time stream publishing with sequences of Fenwick trees.

References
----------
.. [WHGS19] Wu Yingjie, Huang Xin, Ge Chen, Sun Lan. Adaptive parameter optimization for
   real-time differential privacy streaming data publication. Computer Science 46(9), 2019.
   DOI 10.11896/j.issn.1002-137X.2019.09.013.
.. [GWS17] Ge Chen, Wu Yingjie, Sun Lan. A real-time publishing method of differential privacy
   streaming data (RTP, RTP_MM), 2017.
.. [CSS11] Chan, Shi, Song. Private and continual release of statistics. ACM TISSEC 14(3), 2011.
.. [LHR+10] Li, Hay, Rastogi, Miklau, McGregor. Optimizing linear counting queries under
   differential privacy. PODS 2010 (the matrix mechanism behind RTP_MM).
"""

from __future__ import annotations

import bisect
import math
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import MAX_TREE_HEIGHT, PrivacyUnit, RNGLike, Session, TreePlan, check_positive_int
from privpub.errors import DomainError, ParameterError
from privpub.stream import _kernels as K
from privpub.stream._base import (
    _CHUNK,
    COMMON_PARAMS,
    INT_NOISE_LIMIT,
    INT_NP_LIMIT,
    NEIGHBOURS,
    StreamPublisher,
    _Store,
    _Trees,
)
from privpub.stream._predictors import EWMA, SMA, predictor_from_state

__all__ = ["HQRTP", "HQRTPMM", "RTP", "RTPMM"]


class TreeConfig:
    """One tree configuration: row ``row`` of a :class:`~privpub.core.TreePlan` (height ``k``,
    ``T = 2**(k-1)`` items, node noise), and ``length``, the query length it was tuned for."""

    __slots__ = ("T", "k", "length", "plan", "row")

    def __init__(self, plan: TreePlan, row: int, length: float) -> None:
        self.plan, self.row, self.length = plan, row, length
        self.k, self.T = plan.height, plan.T


class _MultiConfig:
    """Consecutive trees of one height with per-tree node budgets (HQ_RTPMM replay)."""

    def __init__(self, plan: TreePlan, rows: list[TreeConfig]) -> None:
        self.plan = plan
        self.rows = rows
        self.k = plan.height
        self.T = plan.T

    def skip(self, n: int) -> _MultiConfig:
        plan = self.plan.take(slice(n, None))
        return _MultiConfig(plan, [TreeConfig(plan, i, c.length) for i, c in enumerate(self.rows[n:])])


AnyConfig = TreeConfig | _MultiConfig


class _Run(NamedTuple):
    """A run of equal trees that one ingestion fills: ``m`` trees of ``cfg`` from time ``s``."""

    s: int
    cfg: AnyConfig
    m: int
    n_old: int  # items the first tree already holds
    a: int  # the run's first and last items, 1-based positions in the ingested array
    b: int
    Pm: NDArray[Any]  # (m, T + 1) local prefix sums of the trees' items


def _mem_height(height: int | None, kmax: int, default: int, adaptive: bool) -> int:
    """The largest tree height a publisher can use (adaptive: up to ``kmax``, which is
    ``k*_MM(W)`` for the MM ones: the MM optimum is non-decreasing and lengths are <= W)."""
    k = default if height is None else height
    return max(k, kmax) if adaptive else k


#: tree configurations cached per publisher (MM: one per predicted length)
_CONFIG_CACHE = 32


class _FenwickPublisher(StreamPublisher):
    """Shared engine: the push kernel, the vectorised batch kernel and the window store."""

    _adaptive: ClassVar[bool] = False
    _mm: ClassVar[bool] = False
    method: ClassVar[str] = ""

    def __init__(
        self,
        *,
        window: int,
        epsilon: float,
        rng: RNGLike = None,
        sensitivity: float = 1.0,
        height: int | None = None,
        noise: str = "discrete",
        real: bool = False,
        max_item: float | None = None,
        predictor: SMA | EWMA | None = None,
        history: ArrayLike = (),
        session: Session | None = None,
        memory_limit: int | None = None,
        privacy_unit: PrivacyUnit | None = None,
    ) -> None:
        self._init(window=window, epsilon=epsilon, rng=rng, sensitivity=sensitivity, height=height, noise=noise,
                   real=real, max_item=max_item, predictor=predictor, history=history, session=session,
                   memory_limit=memory_limit, restoring=False, privacy_unit=privacy_unit)

    def _init(self, *, window: Any, epsilon: Any, rng: RNGLike, sensitivity: Any, height: Any, noise: Any,
              real: Any, max_item: Any, predictor: Any, history: ArrayLike, session: Session | None,
              memory_limit: Any, restoring: bool, privacy_unit: Any = None) -> None:
        self._check_common(window=window, epsilon=epsilon, sensitivity=sensitivity, noise=noise, real=real,
                           max_item=max_item, memory_limit=memory_limit, privacy_unit=privacy_unit)
        self._kmax = K.max_height(self.window)
        if height is not None:
            height = check_positive_int(height, "height")
            if height > MAX_TREE_HEIGHT:
                raise ParameterError(f"height must be at most {MAX_TREE_HEIGHT}, got {height}", param="height")
        self.height = height
        if self._adaptive:
            if predictor is None:
                predictor = SMA(100)
            if not isinstance(predictor, SMA | EWMA):
                raise_param("predictor must be an SMA or EWMA instance", predictor)
            hist = np.asarray(history, dtype=np.float64).reshape(-1)
            if hist.size and (not np.all(np.isfinite(hist)) or np.any(hist < 1) or np.any(hist != np.round(hist))):
                raise_param("history must hold integer query lengths >= 1", history)
        else:
            if predictor is not None:
                raise_param(f"predictor is only used by adaptive (HQ) publishers, not {self.method}", predictor)
            if len(np.asarray(history).reshape(-1)):
                raise_param(f"history is only used by adaptive (HQ) publishers, not {self.method}", history)
        # memory, before anything is allocated or reserved
        cap = K.optimal_height_mm_scalar(float(self.window), self._kmax) if self._mm else self._kmax
        kmem = _mem_height(height, cap, self._default_height(), self._adaptive)
        Tm = 1 << (kmem - 1)
        W = self.window
        if self._mm:  # per-node arrays of the cached configurations and one sampler pool per scale
            words = _CONFIG_CACHE * 6 * Tm + min(Tm, 4096) * 16384
        else:
            words = 6 * Tm + 65536
        nbytes = 8.0 * (2 * (W + Tm + _CHUNK) + 10 * (Tm + _CHUNK) + words)
        what = f"window={W} with trees of up to 2**{kmem - 1} items (height {kmem})"
        if self._adaptive and (height is None or height <= self._kmax):
            option = "lower window (adaptive trees grow up to the window)"
        else:
            option = "lower height (each tree holds 2**(height-1) items)" if Tm >= W else "lower window"
        self._check_memory(nbytes, what, option)
        if self._adaptive:
            assert isinstance(predictor, SMA | EWMA)
            predictor.update_many(int(h) for h in hist)
            self.predictor: SMA | EWMA | None = predictor
        else:
            self.predictor = None
        self._start(rng, session, restoring=restoring)
        self._configs: dict[object, TreeConfig] = {}
        self._store = _Store(1024, self._dtype)
        self._trees = _Trees()
        # open tree: start, items so far, local running sum p and the local sums at the starts of
        # its open nodes (anchors[l] = local sum at (u >> (l+1)) << (l+1)), local noisy prefixes
        self._cfg: TreeConfig | None = None
        self._s = 1
        self._u = 0
        self._T = 0
        self._p: Any = 0
        self._anchors: list[Any] = []
        self._open_lp: list[Any] = [0]
        self._rc: Any = 0 if self._exact else 0.0
        self._hi: float = math.inf

    # -- height policy ------------------------------------------------------------------------
    def _default_height(self) -> int:
        if self.height is not None:
            return int(self.height)
        if self._mm:
            return K.optimal_height_mm_scalar(float(self.window), self._kmax)
        return K.optimal_height_scalar(float(self.window), self._kmax)

    def _config(self, k: int, length: float) -> TreeConfig:
        if self._mm and k == 1:
            length = 1.0  # one node holding one item: budget epsilon whatever the length
        key = (k, length) if self._mm else k
        cfg = self._configs.get(key)
        if cfg is None:
            if self._mm:
                plan = self._noise.plan(k, K.mm_budgets(k, length, 1.0))
            else:
                plan = self._noise.plan(k)
            cfg = TreeConfig(plan, 0, length)
            if len(self._configs) > _CONFIG_CACHE:
                self._configs.clear()
            self._configs[key] = cfg
        return cfg

    def _mm_length(self, value: float) -> float:
        return round(min(max(float(value), 1.0), float(self.window)), 6)

    def _choose(self, value: float | None) -> TreeConfig:
        """The configuration of a tree opened when the predictor shows ``value``."""
        W = float(self.window)
        if value is None or not self._adaptive:
            return self._config(self._default_height(), W)
        q = min(max(float(value), 1.0), W)
        if self._mm:
            q = self._mm_length(value)
            return self._config(K.optimal_height_mm_scalar(q, self._kmax), q)
        return self._config(K.optimal_height_scalar(q, self._kmax), q)

    def _definitely_one(self, values: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Mask of predictor values for which the chosen height is surely 1 (fast replay scan)."""
        out = np.zeros(len(values), dtype=bool)
        if not self._adaptive:
            return out
        limit = 100.0 if self._mm else 880.0  # below the first crossing (113.x and 896)
        out = np.asarray(values) <= limit  # NaN (no prediction yet) compares False
        if len(values) and np.isnan(values[0]):
            out[0] = self._default_height() == 1
        return out

    def _predict(self) -> float | None:
        return self.predictor.value if self.predictor is not None else None

    def _record(self, lengths: NDArray[np.int64]) -> None:
        if self.predictor is not None:
            self.predictor.update_many(lengths)

    @property
    def trees(self) -> list[tuple[int, int]]:
        """``(start, height)`` of the stored trees that meet the window, oldest first."""
        return self._trees.listing(max(1, self._t - self.window + 1))

    # -- online ---------------------------------------------------------------------------------
    def _open_tree(self) -> None:
        if self._cfg is not None:
            rc = self._rc + self._store.Y[self._t - self._store.base].item()
            if self._exact and abs(rc) > INT_NP_LIMIT:
                raise DomainError("the stream's noisy running total exceeds 2**62; int64 sums would overflow")
            self._rc = rc
        cfg = self._choose(self._predict())
        self._noise.open(cfg.plan, 1, cfg.row)
        self._cfg = cfg
        self._s = self._t + 1
        self._u = 0
        self._T = cfg.T
        self._p = 0 if not self.real else 0.0
        self._anchors = [self._p] * cfg.k
        self._open_lp = [0] * (cfg.T + 1)
        self._trees.append(self._s, cfg)

    def _push(self, x: Any) -> None:
        if self._u == self._T:
            self._open_tree()
        st = self._store
        t = self._t + 1
        i = t - st.base
        if i >= st.capacity:
            self._compact_to(t)
            i = t - st.base
        u = self._u + 1
        lb = u & -u
        lv = lb.bit_length() - 1
        p = self._p + x
        if p > self._sum_limit:
            raise self._sum_error()
        anchors = self._anchors
        val = p - anchors[lv]
        cfg = self._cfg
        assert cfg is not None
        z = self._noise.draw_one(cfg.plan, u - 1, cfg.row)
        if self._exact and abs(z) > INT_NOISE_LIMIT:  # pragma: no cover - needs a scale near 2**52
            raise DomainError("a node's noise exceeds 2**54; int64 sums could overflow (lower the noise scale)")
        y = val + z
        lp = y if lb == u else y + self._open_lp[u - lb]
        for j in range(lv):
            anchors[j] = p
        self._open_lp[u] = lp
        st.Y[i] = y
        st.NP[i] = self._rc + lp
        self._t = t
        self._u = u
        self._p = p

    def _noisy_total(self) -> float:
        st = self._store
        return float(st.NP[self._t - st.base]) if self._t else 0.0

    def _limit_name(self) -> str:
        return "2**61 (int64 sums)" if self._exact else "2**52 (float64 resolution)"

    # -- batch ------------------------------------------------------------------------------------
    def _local_sums(self, xs: NDArray[Any], m: int, T: int, n_old: int) -> NDArray[Any]:
        """Tree-local running sums of shape (m, T + 1): row j, column c = sum of the first c items
        of the j-th tree of the run (row 0 continues the open tree when ``n_old > 0``; of its old
        columns only the open-node anchors are set, the only old sums later nodes use)."""
        cnt = xs.shape[0]
        Pm = np.empty((m, T + 1), dtype=xs.dtype)
        Pm[:, 0] = 0
        r0 = pos = 0
        if n_old:
            row0 = xs[: T - n_old]
            e = n_old + row0.shape[0]
            Pm[0, 1:n_old] = 0
            Pm[0, n_old : e + 1] = np.cumsum(np.concatenate([np.array([self._p], dtype=xs.dtype), row0]))
            Pm[0, e + 1 :] = Pm[0, e]
            for lev in range(T.bit_length()):
                Pm[0, (n_old >> (lev + 1)) << (lev + 1)] = self._anchors[lev]
            r0, pos = 1, row0.shape[0]
        full = (cnt - pos) // T
        if full:
            np.cumsum(xs[pos : pos + full * T].reshape(full, T), axis=1, out=Pm[r0 : r0 + full, 1:])
        rest = cnt - pos - full * T
        if rest:
            r = r0 + full
            np.cumsum(xs[cnt - rest :], out=Pm[r, 1 : rest + 1])
            Pm[r, rest + 1 :] = Pm[r, rest]
        return Pm

    def _sums(self, xs: NDArray[Any], m: int, T: int, n_old: int) -> NDArray[Any]:
        """:meth:`_local_sums` after refusing (before anything changes) tree-local sums beyond the
        exact range (2**61 for exact integer streams, 2**52 otherwise)."""
        p0 = float(self._p) if n_old else 0.0
        if self._exact and p0 + self._hi * min(T, xs.shape[0]) > 2.0**62 \
                and p0 + float(np.sum(xs, dtype=np.float64)) > 2.0**62:
            X = np.zeros(m * T)
            X[n_old : n_old + xs.shape[0]] = xs
            sums = X.reshape(m, T).sum(axis=1)
            sums[0] += p0
            if float(sums.max()) > 2.0**62:  # int64 running sums could overflow
                raise self._sum_error()
        Pm = self._local_sums(xs, m, T, n_old)
        if Pm[:, T].max() > self._sum_limit:  # items are >= 0: a row's largest sum is its last
            raise self._sum_error()
        return Pm

    def _sum_error(self) -> DomainError:
        return DomainError(f"the items of one tree sum to more than {self._limit_name()}; "
                           "lower height or rescale the stream")

    def _ingest(self, x: NDArray[Any], layout: list[tuple[int, int, AnyConfig]] | None = None) -> None:
        """Vectorised ingestion of ``x`` (bit-identical to pushing the items one at a time).

        ``layout`` lists the trees that open during this call as ``(start, n_trees, cfg)`` runs;
        None means every new tree uses the configuration chosen now (no query arrives meanwhile).
        Each run of equal trees is processed as an (m, T) matrix, one row per tree, written in
        place into the window store (times past the last item are scratch space).
        """
        n = x.shape[0]
        if n == 0:
            return
        t0 = self._t
        open_rem = self._T - self._u if self._cfg is not None else 0
        runs = self._runs(x, self._segments(n, open_rem, layout))
        self._compact_to(max(r.s + r.m * r.cfg.T - 1 for r in runs))
        # the root of the open tree when it is full: it joins the running total when the next tree opens
        finished_root = self._store.Y[t0 - self._store.base].item() if (self._cfg is not None and open_rem == 0) \
            else None
        rc = self._rc
        rc_f = abs(float(rc))  # a bound on |running total| that never rounds down (overflow checks)
        for run in runs:
            rc, rc_f, finished_root = self._ingest_run(run, t0, rc, rc_f, finished_root)
        self._t = t0 + n
        self._rc = rc

    def _segments(self, n: int, open_rem: int,
                  layout: list[tuple[int, int, AnyConfig]] | None) -> list[tuple[int, int, AnyConfig]]:
        """The trees ``n`` new items fill, as ``(start, n_trees, cfg)``: the open tree, then the new ones."""
        segs: list[tuple[int, int, AnyConfig]] = []
        if open_rem > 0:
            assert self._cfg is not None
            segs.append((self._s, 1, self._cfg))
        if n > open_rem:
            if layout is None:
                cfg_new = self._choose(self._predict())
                segs.append((self._t + open_rem + 1, -(-(n - open_rem) // cfg_new.T), cfg_new))
            else:
                segs.extend(layout)
        return segs

    def _runs(self, x: NDArray[Any], segs: list[tuple[int, int, AnyConfig]]) -> list[_Run]:
        """The segments the items of ``x`` reach, with their items' local prefix sums (checked)."""
        t0 = self._t
        last = t0 + x.shape[0]
        runs = []
        for s, nt, cfg in segs:
            first = max(s, t0 + 1)
            if first > last:
                break
            seg_last = min(s + nt * cfg.T - 1, last)
            m = (seg_last - s) // cfg.T + 1
            n_old = first - s
            a, b = first - t0, seg_last - t0
            runs.append(_Run(s, cfg, m, n_old, a, b, self._sums(x[a - 1 : b], m, cfg.T, n_old)))
        return runs

    def _ingest_run(self, run: _Run, t0: int, rc: Any, rc_f: float, finished_root: Any) -> tuple[Any, float, Any]:
        """Noise, store and index the nodes of one run of equal trees; open its trees.

        ``rc`` is the noisy running total before the run (``rc_f`` its overflow bound) and
        ``finished_root`` the noisy root of a full tree not yet added to it; returns the three after
        the run.
        """
        s, cfg, m, n_old, a, b, Pm = run
        T = cfg.T
        cnt = b - a + 1
        val = K.fenwick_node_values(Pm).reshape(-1)
        first_new_tree = 0 if n_old == 0 else 1
        sl = slice(n_old, n_old + cnt)
        noise = self._run_noise(cfg, m, n_old, cnt, first_new_tree)
        st = self._store
        lo = s - st.base
        yflat = st.Y[lo : lo + m * T]
        np.add(val[sl], noise, out=yflat[sl])  # old nodes of the open tree are already there
        yflat[n_old + cnt :] = 0  # scratch past the last item
        y = yflat.reshape(m, T)
        LP = K.fenwick_local_prefix(y)
        if n_old == 0 and finished_root is not None:
            rc = rc + finished_root  # the previous (full) tree's root joins rc as this tree opens
            rc_f = abs(float(rc))
            self._check_running_total(rc_f)  # pragma: no cover - _check_total refuses first
        roots = y[:-1, T - 1]
        if self._exact and roots.size:
            rc_f = rc_f + float(np.abs(roots).sum(dtype=np.float64))
            self._check_running_total(rc_f)
        rc_rows = np.cumsum(np.concatenate([np.array([rc], dtype=self._dtype), roots]))
        np.add(LP, rc_rows[:, None], out=st.NP[lo : lo + m * T].reshape(m, T))
        if isinstance(cfg, _MultiConfig):
            self._trees.extend_rows(s + T * np.arange(first_new_tree, m, dtype=np.int64),
                                    cfg.rows[first_new_tree:m])
        elif m > first_new_tree:
            self._trees.extend(s + T * np.arange(first_new_tree, m, dtype=np.int64), cfg)
        # state after this run: its last tree is the open one
        u_last = (b + t0 - s) % T + 1
        self._cfg = cfg.rows[m - 1] if isinstance(cfg, _MultiConfig) else cfg
        self._T = T
        self._u = u_last
        self._s = s + (m - 1) * T
        self._p = Pm[-1, u_last].item()
        self._anchors = [Pm[-1, (u_last >> (lev + 1)) << (lev + 1)].item() for lev in range(cfg.k)]
        self._open_lp = [0, *LP[-1].tolist()]
        return rc_rows[-1].item(), rc_f, (y[-1, T - 1].item() if u_last == T else None)

    def _run_noise(self, cfg: AnyConfig, m: int, n_old: int, cnt: int, first_new_tree: int) -> NDArray[Any]:
        """Charge the trees that open in a run, then draw its nodes' noise (completion order)."""
        plan = cfg.plan
        noise: NDArray[Any]
        if isinstance(cfg, _MultiConfig):
            if m > first_new_tree:
                self._noise.open(plan.take(slice(first_new_tree, m)))
            pos = np.arange(n_old, n_old + cnt)
            noise = self._noise.draw(plan, cnt, pos % cfg.T, pos // cfg.T)
        else:
            if m > first_new_tree:
                self._noise.open(plan, m - first_new_tree, cfg.row)
            noise = self._noise.draw_span(plan, n_old, cnt, cfg.row)
        if self._exact and float(plan.scales.max()) > 2.0**40 and noise.size \
                and int(np.abs(noise).max()) > INT_NOISE_LIMIT:  # pragma: no cover
            raise DomainError("a node's noise exceeds 2**54; int64 sums could overflow (lower the noise scale)")
        return noise

    def _check_running_total(self, rc_f: float) -> None:
        if self._exact and rc_f > INT_NP_LIMIT:
            raise DomainError("the stream's noisy running total exceeds 2**62; int64 sums would overflow")

    def _compact_to(self, end: int) -> None:
        """Make room for times up to ``end``, dropping what the window no longer needs."""
        t = self._t
        oldest = self._trees.starts[self._trees.first_overlapping(max(1, t - self.window + 1))] \
            if self._trees.n else 1
        keep_from = min(t - self.window, int(oldest) - 1, self._s - 1)
        self._trees.trim_before(max(1, t - self.window + 1))
        st = self._store
        if end - st.base < st.capacity:
            return
        st.reserve(max(0, keep_from), end)

    def extend(self, items: ArrayLike) -> None:
        arr = self._check_items(items)
        self._check_total(float(np.sum(arr, dtype=np.float64)))
        self._hi = float(arr.max()) if arr.size else 0.0
        for a in range(0, arr.shape[0], _CHUNK):
            self._ingest(arr[a : a + _CHUNK])

    extend.__doc__ = StreamPublisher.extend.__doc__

    def replay(self, items: ArrayLike, queries: ArrayLike) -> NDArray[Any]:
        arr = np.asarray(items)
        self._hi = float(arr.max()) if arr.size and arr.dtype.kind in "iuf" else math.inf
        return super().replay(items, queries)

    replay.__doc__ = StreamPublisher.replay.__doc__

    def _cut_layout(self, layout: Any) -> Any:
        """The part of a replay layout that starts after the open tree."""
        first_new = self._t + 1 + (self._T - self._u if self._cfg is not None else 0)
        out = []
        for s, nt, cfg in layout:
            end = s + nt * cfg.T
            if end <= first_new:
                continue
            if s < first_new:
                skip = (first_new - s) // cfg.T
                s, nt = s + skip * cfg.T, nt - skip
                if isinstance(cfg, _MultiConfig):
                    cfg = cfg.skip(skip)
            out.append((s, nt, cfg))
        return out

    # -- answers ----------------------------------------------------------------------------------
    def query(self, l: int, r: int) -> Any:
        """Noisy sum of items ``l..r`` (1-based, inclusive, inside the window); O(1).

        An ``int`` for integer streams with exact noise, else a ``float``.
        """
        if type(l) is int and type(r) is int and 0 < l <= r <= self._t and l > self._t - self.window:
            st = self._store
            out = (st.NP[r - st.base] - st.NP[l - 1 - st.base]).item()
            if self.predictor is not None:
                self.predictor.update(r - l + 1)
            return out
        return super().query(l, r)

    def _answer_checked(self, l: NDArray[np.int64], r: NDArray[np.int64]) -> NDArray[Any]:
        st = self._store
        out: NDArray[Any] = st.NP[r - st.base] - st.NP[l - 1 - st.base]
        return out

    def support(self, l: int, r: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The stored nodes whose signed sum answers ``[l, r]``: ``(times, coefs)``.

        Node ``v`` of the tree starting at ``s`` is identified by its completion time ``s + v - 1``.
        """
        l_, r_ = self._check_query(l, r)
        starts, cfgs = self._trees.overlapping(l_, r_)
        times: list[int] = []
        coefs: list[int] = []
        for s, cfg in zip(starts, cfgs):
            for _, v, c in K.decompose(l_, r_, [int(s)], [cfg.k]):
                times.append(int(s) + v - 1)
                coefs.append(c)
        return np.array(times, dtype=np.int64), np.array(coefs, dtype=np.int64)

    def node_values(self, times: ArrayLike) -> NDArray[Any]:
        """Released (noisy) node values by completion time (must still be stored)."""
        tt = np.asarray(times, dtype=np.int64)
        st = self._store
        if tt.size and (tt.min() <= st.base or tt.max() > self._t):
            raise ParameterError(f"times must be released nodes still stored, i.e. in [{st.base + 1}, {self._t}]", param="times")
        return st.Y[tt - st.base].copy()

    def answer_variance(self, l: int, r: int) -> float:
        """Exact variance of the answer to ``[l, r]``: the sum of its support's node variances."""
        if not (type(l) is int and type(r) is int and 0 < l <= r <= self._t and l > self._t - self.window):
            l, r = self._check_query(l, r)
        return self._variance_checked(l, r)

    def _variance_checked(self, l: int, r: int) -> float:
        # The support in a tree holding local items a..b is path(b) Δ path(a-1) (see
        # ``K.decompose``). Both paths descend (clearing the lowest set bit) to the longest
        # common prefix of b and a-1; walking the larger of the two until they meet visits
        # exactly the symmetric difference, with no sets and no sorting.
        trees = self._trees
        starts, ids, table = trees.starts, trees.cfg_ids, trees.table
        n = trees.n
        i = max(0, bisect.bisect_right(starts, l, 0, n) - 1)  # trees.first_overlapping(l), faster for few trees
        total = 0.0
        while i < n:
            s = int(starts[i])
            if s > r:
                break
            i += 1
            cfg = table[int(ids[i - 1])]
            x = min(r - s + 1, cfg.T)
            y = max(l - s, 0)
            if y >= x:  # the tree ends before l
                continue
            nv = cfg.plan.variances[cfg.row]
            while x != y:
                if x > y:
                    total += nv[x - 1]
                    x &= x - 1
                else:
                    total += nv[y - 1]
                    y &= y - 1
        return float(total)

    def _answer_one(self, l: int, r: int, t: int) -> Any:
        st = self._store
        return (st.NP[r - st.base] - st.NP[l - 1 - st.base]).item()

    # -- replay -----------------------------------------------------------------------------------
    def _replay_layout(
        self, t0: int, n: int, q_times: NDArray[np.int64], lengths: NDArray[np.int64]
    ) -> list[tuple[int, int, AnyConfig]]:
        """Tree layout of items ``t0+1 .. t0+n`` when the queries (asked after item ``q_times``)
        are recorded as they come; scans tree openings, jumping runs of height-1 trees."""
        if not self._adaptive:
            cfg0 = self._choose(None)
            return [(t0 + (self._T - self._u if self._cfg is not None else 0) + 1, n // cfg0.T + 2, cfg0)]
        assert self.predictor is not None
        values = self.predictor.values_after(lengths)
        surely_one = self._definitely_one(values)
        # next index c' >= c where surely_one is False
        nxt = np.arange(len(values))
        nxt[surely_one] = len(values)
        nxt = np.minimum.accumulate(nxt[::-1])[::-1]
        layout: list[tuple[int, int, AnyConfig]] = []
        pending: list[tuple[int, int, float]] = []
        end = t0 + n
        qt_list = q_times.tolist()
        vals = values.tolist()
        one = surely_one.tolist()
        nxt_list = nxt.tolist()
        bisect_right = bisect.bisect_right
        isnan = math.isnan
        s = t0 + 1 + (self._T - self._u if self._cfg is not None else 0)
        cfg_one = None
        while s <= end:
            c = bisect_right(qt_list, s - 1)  # queries asked before item s
            if one[c]:
                c2 = nxt_list[c]
                s2 = end + 1 if c2 >= len(vals) else min(end + 1, qt_list[c2 - 1] + 1)
                if cfg_one is None:
                    cfg_one = self._config(1, 1.0)
                layout.append((s, s2 - s, cfg_one))
                s = s2
                continue
            value = vals[c]
            if isnan(value):
                value = None
            if self._mm and value is not None:
                q = self._mm_length(value)
                k = K.optimal_height_mm_scalar(q, self._kmax)
                if k > 1:
                    pending.append((s, k, q))
                    s += 1 << (k - 1)
                    continue
                cfg = self._config(1, 1.0)
            else:
                cfg = self._choose(value)
            if layout and layout[-1][2] is cfg and layout[-1][0] + layout[-1][1] * cfg.T == s:
                layout[-1] = (layout[-1][0], layout[-1][1] + 1, cfg)
            else:
                layout.append((s, 1, cfg))
            s += cfg.T
        if pending:
            layout = sorted(layout + self._mm_runs(pending), key=lambda e: e[0])
        return layout

    def _mm_runs(self, trees: list[tuple[int, int, float]]) -> list[tuple[int, int, AnyConfig]]:
        """Group consecutive MM trees of one height; budgets for all their lengths at once."""
        runs: list[tuple[int, int, AnyConfig]] = []
        i = 0
        while i < len(trees):
            j = i
            s0, k, _ = trees[i]
            T = 1 << (k - 1)
            while j + 1 < len(trees) and trees[j + 1][1] == k and trees[j + 1][0] == trees[j][0] + T:
                j += 1
            qs = np.array([q for _, _, q in trees[i : j + 1]])
            plan = self._noise.plan(k, K.mm_budget_rows(k, qs, 1.0))
            rows = [TreeConfig(plan, r, float(qs[r])) for r in range(qs.shape[0])]
            runs.append((s0, qs.shape[0], _MultiConfig(plan, rows)))
            i = j + 1
        return runs

    # -- persistence ----------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "height": self.height}

    def _get_state(self, since: int | None = None) -> dict[str, Any]:
        st, t = self._store, self._t
        lo = min(t - self.window, self._s - 1)
        if self._trees.n:
            oldest = int(self._trees.starts[self._trees.first_overlapping(max(1, t - self.window + 1))])
            lo = min(lo, oldest - 1)
        lo = max(st.base, lo)
        i0 = self._trees.first_overlapping(lo + 1) if self._trees.n else 0
        trees_from = int(self._trees.starts[i0]) if self._trees.n else 1
        a = lo
        if since is not None:  # a delta: the values of times after ``since`` (they never change later)
            a = max(lo, since + 1)
            i0 = max(i0, int(np.searchsorted(self._trees.starts[: self._trees.n], since, side="right")))
        cfgs = [self._trees.table[int(c)] for c in self._trees.cfg_ids[i0 : self._trees.n]]
        open_tree: dict[str, Any] | None = {
            "start": self._s, "items": self._u, "local_sum": self._p, "anchors": list(self._anchors),
            "local_prefix": list(self._open_lp[: self._u + 1]), "noisy_total_before": self._rc,
        } if self._cfg is not None else None
        out: dict[str, Any] = {
            "store_from": lo,
            "Y": st.Y[a - st.base : t - st.base + 1].copy(),
            "NP": st.NP[a - st.base : t - st.base + 1].copy(),
            "trees": {"start": self._trees.starts[i0 : self._trees.n].tolist(),
                      "height": [c.k for c in cfgs], "length": [float(c.length) for c in cfgs]},
            "open_tree": open_tree,
            "predictor": None if self.predictor is None else self.predictor.get_state(),
        }
        if since is not None:
            out["arrays_from"], out["trees_from"] = a, trees_from
            # the open tree's local noisy prefixes as a time-indexed array (times before it: 0)
            LP: NDArray[Any] = np.zeros(t - a + 1, dtype=self._dtype)
            if open_tree is not None:
                first = max(a, self._s)
                LP[first - a :] = self._open_lp[first - self._s + 1 : self._u + 1]
                open_tree["local_prefix"] = None
            out["LP"] = LP
        return out

    @classmethod
    def _restoring(cls, params: dict[str, Any], rng: RNGLike, state: dict[str, Any]) -> StreamPublisher:
        pub = cls.__new__(cls)
        pred = state.get("predictor")
        predictor = None if pred is None else predictor_from_state(pred)
        pub._init(rng=rng, predictor=predictor, history=(), session=None, restoring=True, **params)
        return pub

    def _set_state(self, state: dict[str, Any]) -> None:
        lo, t = int(state["store_from"]), int(state["t"])
        Y: NDArray[Any] = np.asarray(state["Y"], dtype=self._dtype)
        NPa: NDArray[Any] = np.asarray(state["NP"], dtype=self._dtype)
        if Y.shape != (t - lo + 1,) or NPa.shape != Y.shape:
            raise ParameterError("state is damaged: the stored arrays do not match its time range", param="state")
        st = self._store
        st.base = lo
        st.capacity = max(1024, 2 * Y.shape[0])
        st.Y = np.zeros(st.capacity, dtype=self._dtype)
        st.NP = np.zeros(st.capacity, dtype=self._dtype)
        st.Y[: Y.shape[0]] = Y
        st.NP[: Y.shape[0]] = NPa
        tr = state["trees"]
        for s, k, length in zip(tr["start"], tr["height"], tr["length"]):
            self._trees.append(int(s), self._config(int(k), float(length)))
        ot = state["open_tree"]
        if ot is not None:
            cfg = self._trees.table[int(self._trees.cfg_ids[self._trees.n - 1])]
            conv = int if self._exact or not self.real else float
            self._cfg, self._T = cfg, cfg.T
            self._s, self._u = int(ot["start"]), int(ot["items"])
            self._p = conv(ot["local_sum"])
            self._anchors = [conv(a) for a in ot["anchors"]]
            lp_conv = int if self._exact else float
            self._open_lp = [lp_conv(v) for v in ot["local_prefix"]] + [0] * (cfg.T - self._u)
            self._rc = lp_conv(ot["noisy_total_before"])


def raise_param(msg: str, value: object) -> None:
    raise ParameterError(f"{msg}, got {value!r}")


# -------------------------------------------------------------------------------------------------
# public classes
# -------------------------------------------------------------------------------------------------
class RTP(_FenwickPublisher):
    __doc__ = f"""RTP: the stream cut into Fenwick trees of one fixed height (Ge et al.) [GWS17]_.

    Each item opens or joins the current tree; Fenwick node ``v`` (local items
    ``(v - lowbit(v), v]``) is released with noise ``Lap(k Δ / ε)`` exactly once, when item ``v``
    arrives. A range query is a difference of two noisy prefix sums, O(1). The default height
    ``k*(W)`` minimises the expected error of length-``W`` queries (spec §3).
    {COMMON_PARAMS}
    Notes
    -----
    **Privacy:** ε-DP at event level: {NEIGHBOURS}. Items must be non-negative, at most
    ``max_item``, and integers unless ``real=True``. An item lies in at most ``k`` nodes of its
    own tree (its up-path), each with ``Lap(kΔ/ε)``, so its nodes spend ε (sequential
    composition); trees cover disjoint items (parallel composition), so the whole unbounded
    stream is ε-DP. The window only bounds memory; it does not renew the budget. The noise
    comes only from :class:`privpub.core.TreeNoise`, which charges the publisher's accountant
    per tree configuration before drawing: ``ledger`` shows one parallel block whose branch
    kind "height-k trees" has ``k`` charges of ``ε/k`` (one per level), total ε. RTP with one
    huge tree is the binary mechanism of Chan, Shi and Song [CSS11]_.

    Persistence: :meth:`state` / :meth:`from_state` (the state keeps, of the raw data, only the
    open tree's partial sums).

    References
    ----------
    .. [GWS17] Ge, Wu, Sun. A real-time publishing method of differential privacy streaming data. 2017.
    .. [CSS11] Chan, Shi, Song. Private and continual release of statistics. ACM TISSEC 2011.

    Examples
    --------
    >>> pub = RTP(window=64, epsilon=1.0, rng=0, height=3)
    >>> pub.extend([3, 0, 5, 2, 7, 1, 0, 4])
    >>> pub.t, pub.trees
    (8, [(1, 3), (5, 3)])
    >>> pub.query(2, 5)  # true sum 14; exact discrete Laplace noise keeps answers integral
    8
    >>> len(pub.support(2, 5)[0])  # node 4 minus node 1 of tree 1, plus node 1 of tree 2
    3
    >>> [(e.step, e.parts) for e in pub.ledger], pub.ledger.total
    ([('level 0', 2), ('level 1', 2), ('level 2', 2)], 1.0)
    """
    method = "rtp"


class HQRTP(_FenwickPublisher):
    __doc__ = f"""HQ_RTP: RTP whose next tree height adapts to the predicted query length [WHGS19]_.

    Query lengths are recorded after each answer; a moving average (``SMA(100)`` by default, or
    ``EWMA``) predicts the next length ``q``, and each new tree gets height ``k*(q)``, the
    minimiser of the exact expected error ``2 Δ² k² N(k, q) / ε²`` (spec §3, which corrects the
    paper's Eq. 12-16).
    {COMMON_PARAMS}
    predictor : SMA or EWMA, optional
        Query-length predictor (default ``SMA(100)``); it is updated in place.
    history : array_like of int
        Public past query lengths fed to the predictor before the stream starts.

    Notes
    -----
    **Privacy:** ε-DP at event level, as :class:`RTP` ({NEIGHBOURS}); each height in use is a
    branch kind of the ledger's parallel block. A tree's height depends only on query
    lengths asked before the tree opened; as long as queries do not depend on the raw stream
    (they may depend on released answers), the layout is a function of earlier outputs of
    disjoint trees (adaptive parallel composition), so the guarantee is unchanged.

    Examples
    --------
    >>> pub = HQRTP(window=1024, epsilon=1.0, rng=0, noise="laplace", history=[4] * 10)
    >>> pub.extend(np.ones(16, dtype=int))
    >>> pub.trees[0][1]  # predicted length 4: height 1, i.e. per-item Laplace
    1
    >>> abs(pub.query(13, 16) - 4.0) < 20
    True
    """
    method = "hq_rtp"
    _adaptive = True


class RTPMM(_FenwickPublisher):
    __doc__ = f"""RTP_MM: RTP with matrix-mechanism node budgets (spec §5 reconstruction) [LHR+10]_.

    Every tree has height ``k*_MM(W)``; node ``v`` gets budget ``eps_v`` (noise ``Lap(Δ/eps_v)``)
    from the closed-form optimum for length-``W`` queries, with every item's up-path summing to at
    most ε.
    {COMMON_PARAMS}
    Notes
    -----
    **Privacy:** ε-DP at event level ({NEIGHBOURS}): each item's nodes spend at most ε in total
    (sequential composition; items at odd positions spend exactly ε), trees are disjoint
    (parallel composition), and the budgets depend only on public parameters. The ledger
    charges each tree configuration once, with the largest per-item total (ε). Exact noise
    rounds each node's scale up to 7 significant bits (at most 1/64 more noise).

    Examples
    --------
    >>> pub = RTPMM(window=256, epsilon=1.0, rng=0)
    >>> pub.extend(np.arange(10))
    >>> pub.trees[0][1]  # k*_MM(256) = 4
    4
    """
    method = "rtp_mm"
    _mm = True


class HQRTPMM(_FenwickPublisher):
    __doc__ = f"""HQ_RTPMM: RTP_MM whose tree height and budgets adapt to the predicted query length.

    At each tree opening the prediction ``q`` (rounded to 6 decimals) gives the height
    ``k*_MM(q)`` and the budgets ``mm_budgets(k, q, ε)`` [WHGS19]_.
    {COMMON_PARAMS}
    predictor : SMA or EWMA, optional
        Query-length predictor (default ``SMA(100)``).
    history : array_like of int
        Public past query lengths fed to the predictor first.

    Notes
    -----
    **Privacy:** ε-DP at event level, as :class:`RTPMM` and :class:`HQRTP` ({NEIGHBOURS};
    budgets and heights depend only on query lengths, which must not depend on the raw stream).

    Examples
    --------
    >>> pub = HQRTPMM(window=4096, epsilon=1.0, rng=0, history=[300] * 5)
    >>> pub.extend(np.ones(32, dtype=int))
    >>> pub.trees[0][1]
    4
    """
    method = "hq_rtpmm"
    _adaptive = True
    _mm = True

