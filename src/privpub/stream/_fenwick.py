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
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import RNGLike, check_positive_int
from privpub.stream import _kernels as K
from privpub.stream._base import StreamPublisher
from privpub.stream._predictors import EWMA, SMA

__all__ = ["HQRTP", "HQRTPMM", "RTP", "RTPMM"]


class TreeConfig:
    """Layout and node noise of one tree: height ``k``; per local node (v = 1..T) the noise
    parameters ``eps[v-1]``, ``sens[v-1]`` (scale ``sens / eps``); ``length``: the query length
    the tree was tuned for (informative)."""

    __slots__ = ("T", "eps", "k", "length", "scale", "sens")

    def __init__(self, k: int, eps: NDArray[np.float64], sens: NDArray[np.float64],
                 scale: NDArray[np.float64], length: float) -> None:
        self.k, self.eps, self.sens, self.scale, self.length = k, eps, sens, scale, length
        self.T = 1 << (k - 1)

    @property
    def uniform(self) -> bool:
        """True when every node has the same noise parameters."""
        return bool(np.all(self.eps == self.eps[0]) and np.all(self.sens == self.sens[0]))


class _MultiConfig:
    """Consecutive trees of one height with per-tree node parameters (HQ_RTPMM replay)."""

    uniform = False

    def __init__(self, rows: list[TreeConfig], eps, sens, scale) -> None:  # type: ignore[no-untyped-def]
        self.rows = rows
        self.k = rows[0].k
        self.T = rows[0].T
        self.eps, self.sens, self.scale = eps, sens, scale

    def skip(self, n: int) -> _MultiConfig:
        return _MultiConfig(self.rows[n:], self.eps[n:], self.sens[n:], self.scale[n:])


AnyConfig = TreeConfig | _MultiConfig


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
        predictor: SMA | EWMA | None = None,
        history: ArrayLike = (),
    ) -> None:
        super().__init__(window=window, epsilon=epsilon, rng=rng, sensitivity=sensitivity, noise=noise,
                         mechanism="Fenwick-tree nodes")
        self._kmax = K.max_height(self.window)
        if height is not None:
            height = check_positive_int(height, "height")
        self.height = height
        self._configs: dict[object, TreeConfig] = {}
        if self._adaptive:
            if predictor is None:
                predictor = SMA(100)
            if not isinstance(predictor, SMA | EWMA):
                raise_param("predictor must be an SMA or EWMA instance", predictor)
            self.predictor: SMA | EWMA | None = predictor
            hist = np.asarray(history, dtype=np.float64).reshape(-1)
            if hist.size and (not np.all(np.isfinite(hist)) or np.any(hist < 1) or np.any(hist != np.round(hist))):
                raise_param("history must hold integer query lengths >= 1", history)
            predictor.update_many(int(h) for h in hist)
        else:
            if len(np.asarray(history).reshape(-1)):
                raise_param(f"history is only used by adaptive (HQ) publishers, not {self.method}", history)
            self.predictor = None
        # open tree state
        self._cfg: TreeConfig | None = None
        self._s = 1  # start time of the open tree
        self._u = 0  # items in the open tree
        self._T = 0
        self._rc = 0.0
        self._eps_l: list[float] = []
        self._sens_l: list[float] = []
        self._scale_l: list[float] = []

    # -- height policy ------------------------------------------------------------------------
    def _default_height(self) -> int:
        if self.height is not None:
            return self.height
        if self._mm:
            return K.optimal_height_mm_scalar(float(self.window), self._kmax)
        return K.optimal_height_scalar(float(self.window), self._kmax)

    def _config(self, k: int, length: float) -> TreeConfig:
        key = (k, length) if self._mm else k
        cfg = self._configs.get(key)
        if cfg is None:
            T = 1 << (k - 1)
            if self._mm:
                eps, sens = self._mm_params(np.asarray(K.mm_budgets(k, length, self.epsilon))[None, :])
                eps, sens = eps[0], sens[0]
            else:
                eps = np.full(T, self.epsilon)
                sens = np.full(T, k * self.sensitivity)
            cfg = TreeConfig(k, eps, sens, sens / eps, length)
            if len(self._configs) > 256:
                self._configs.clear()
            self._configs[key] = cfg
        return cfg

    def _mm_params(self, budgets: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Node noise parameters ``(eps, sens)`` (scale = sens / eps) from MM budgets (rows = trees)."""
        if self._discrete:
            # exact discrete sampling needs one sampler per distinct scale: round each node's
            # scale *up* to 7 significant bits (at most 1/64 more noise; budgets only shrink)
            mant, expo = np.frexp(self.sensitivity / budgets)
            return np.ones(budgets.shape), np.ldexp(np.ceil(mant * 128.0) / 128.0, expo)
        return np.array(budgets, dtype=np.float64), np.full(budgets.shape, self.sensitivity)

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

    # -- online ---------------------------------------------------------------------------------
    def _open_tree(self) -> None:
        if self._cfg is not None:
            self._rc = self._rc + float(self._store.Y[self._t - self._store.base])
        cfg = self._choose(self._predict())
        self._cfg = cfg
        self._s = self._t + 1
        self._u = 0
        self._T = cfg.T
        self._eps_l = cfg.eps.tolist()
        self._sens_l = cfg.sens.tolist()
        self._scale_l = cfg.scale.tolist()
        self._trees.append(self._s, cfg)

    def _push(self, x: float) -> None:
        if self._u == self._T:
            self._open_tree()
        st = self._store
        t = self._t + 1
        i = t - st.base
        if i >= st.capacity:
            self._compact(1)
            i = t - st.base
        u = self._u + 1
        lb = u & -u
        P = st.P
        p = self._p_last + x
        val = p - P[i - lb]
        if self._discrete:
            y = val + self._noise.discrete_one(self._eps_l[u - 1], self._sens_l[u - 1])
        else:
            y = val + self._scale_l[u - 1] * self._noise.z_one()
        lp = y if lb == u else y + st.LP[i - lb]
        P[i] = p
        st.LP[i] = lp
        st.Y[i] = y
        st.NP[i] = self._rc + lp
        self._t = t
        self._u = u
        self._p_last = p

    # -- batch ------------------------------------------------------------------------------------
    def _ingest(self, x: NDArray[np.float64], layout: list[tuple[int, int, AnyConfig]] | None = None) -> None:
        """Vectorised ingestion of ``x`` (bit-identical to pushing the items one at a time).

        ``layout`` lists the trees that open during this call as ``(start, n_trees, cfg)`` runs;
        None means every new tree uses the configuration chosen now (no query arrives meanwhile).
        Each run of equal trees is processed as an (m, T) matrix, one row per tree.
        """
        n = x.shape[0]
        if n == 0:
            return
        t0 = self._t
        st = self._store
        open_rem = self._T - self._u if self._cfg is not None else 0
        segs: list[tuple[int, int, AnyConfig]] = []
        if open_rem > 0:
            assert self._cfg is not None
            segs.append((self._s, 1, self._cfg))
        if n > open_rem:
            if layout is None:
                cfg_new = self._choose(self._predict())
                segs.append((t0 + open_rem + 1, -(-(n - open_rem) // cfg_new.T), cfg_new))
            else:
                segs.extend(layout)
        csum = np.cumsum(np.concatenate([[self._p_last], x]))  # P at times t0 .. t0+n
        Y_new = np.empty(n)
        LP_new = np.empty(n)
        NP_new = np.empty(n)
        z = None if self._discrete else self._noise.z_many(n)
        rc = self._rc
        finished_root = float(st.Y[t0 - st.base]) if (self._cfg is not None and open_rem == 0) else None
        last = t0 + n
        for s, nt, cfg in segs:
            T = cfg.T
            first = max(s, t0 + 1)
            if first > last:
                break
            seg_last = min(s + nt * T - 1, last)
            m = (seg_last - s) // T + 1
            span = m * T
            # running sums at times s-1 .. s+span-1 (old ones from the store, padding after the data)
            P_seg = np.empty(span + 1)
            n_old = first - s  # items of the open tree received before this call
            if n_old:
                P_seg[: n_old + 1] = st.P[s - 1 - st.base : first - st.base]
            else:
                P_seg[0] = csum[s - 1 - t0]
            a, b = first - t0, seg_last - t0  # indices into x (1-based: csum[a..b])
            P_seg[n_old + 1 : n_old + 1 + b - a + 1] = csum[a : b + 1]
            P_seg[n_old + 1 + b - a + 1 :] = csum[b]
            Pm = np.empty((m, T + 1))
            Pm[:, 0] = P_seg[0:span:T]
            Pm[:, 1:] = P_seg[1:].reshape(m, T)
            val = K.fenwick_node_values(Pm)
            y = np.zeros((m, T))
            yf = y.reshape(-1)
            sl = slice(n_old, n_old + b - a + 1)
            uniform = cfg.uniform
            if isinstance(cfg, _MultiConfig):
                if self._discrete:
                    noise = self._noise.discrete_many(
                        cfg.eps[:m].reshape(-1)[sl], cfg.sens[:m].reshape(-1)[sl]
                    ).astype(np.float64)
                else:
                    assert z is not None
                    noise = cfg.scale[:m].reshape(-1)[sl] * z[a - 1 : b]
            elif self._discrete:
                if uniform:
                    cnt = b - a + 1
                    dnoise = self._noise.discrete_many(np.full(cnt, cfg.eps[0]), np.full(cnt, cfg.sens[0]))
                else:
                    u_new = np.arange(n_old, n_old + b - a + 1) % T  # local index v-1 of each new item
                    dnoise = self._noise.discrete_many(cfg.eps[u_new], cfg.sens[u_new])
                noise = dnoise.astype(np.float64)
            else:
                assert z is not None
                zz = z[a - 1 : b]
                if uniform:
                    noise = cfg.scale[0] * zz
                else:
                    noise = cfg.scale[np.arange(n_old, n_old + b - a + 1) % T] * zz
            yf[sl] = val.reshape(-1)[sl] + noise
            if n_old:
                yf[:n_old] = st.Y[s - st.base : first - st.base]
            LP = K.fenwick_local_prefix(y)
            if n_old == 0 and finished_root is not None:
                rc = rc + finished_root  # the open (full) tree's root joins rc as this tree opens
            rc_rows = np.cumsum(np.concatenate([[rc], y[:-1, T - 1]]))
            NP = rc_rows[:, None] + LP
            Y_new[a - 1 : b] = yf[sl]
            LP_new[a - 1 : b] = LP.reshape(-1)[sl]
            NP_new[a - 1 : b] = NP.reshape(-1)[sl]
            first_new_tree = 0 if n_old == 0 else 1
            if isinstance(cfg, _MultiConfig):
                self._trees.extend_rows(s + T * np.arange(first_new_tree, m, dtype=np.int64),
                                        cfg.rows[first_new_tree:m])
            elif m > first_new_tree:
                self._trees.extend(s + T * np.arange(first_new_tree, m, dtype=np.int64), cfg)
            # state after this run
            rc = float(rc_rows[-1])
            u_last = (seg_last - s) % T + 1
            finished_root = float(y[-1, T - 1]) if u_last == T else None
            self._cfg = cfg.rows[m - 1] if isinstance(cfg, _MultiConfig) else cfg
            self._T = T
            self._u = u_last
            self._s = seg_last - u_last + 1
        self._compact(n)
        bpos = t0 + 1 - st.base
        st.P[bpos : bpos + n] = csum[1:]
        st.LP[bpos : bpos + n] = LP_new
        st.Y[bpos : bpos + n] = Y_new
        st.NP[bpos : bpos + n] = NP_new
        self._t = t0 + n
        self._rc = rc
        self._p_last = float(csum[-1])
        cfg_last = self._cfg
        assert cfg_last is not None
        self._eps_l = cfg_last.eps.tolist()
        self._sens_l = cfg_last.sens.tolist()
        self._scale_l = cfg_last.scale.tolist()

    # -- answers ----------------------------------------------------------------------------------
    def query(self, l: int, r: int) -> float:
        """Noisy sum of items ``l..r`` (1-based, inclusive, inside the window); O(1)."""
        if type(l) is int and type(r) is int and 0 < l <= r <= self._t and l > self._t - self.window:
            st = self._store
            out = float(st.NP[r - st.base] - st.NP[l - 1 - st.base])
            if self.predictor is not None:
                self.predictor.update(r - l + 1)
            return out
        return super().query(l, r)

    def _answer_checked(self, l: NDArray[np.int64], r: NDArray[np.int64]) -> NDArray[np.float64]:
        st = self._store
        return st.NP[r - st.base] - st.NP[l - 1 - st.base]

    def _node_variance(self, cfg: TreeConfig) -> NDArray[np.float64]:
        if self._discrete:
            from privpub.core import rational_scale

            out = np.empty(cfg.T)
            for i in range(cfg.T):
                t_, s_ = rational_scale(float(cfg.eps[i]), float(cfg.sens[i]))
                p = math.exp(-s_ / t_)
                out[i] = 2.0 * p / (1.0 - p) ** 2
            return out
        return 2.0 * cfg.scale**2

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

    def node_values(self, times: ArrayLike) -> NDArray[np.float64]:
        """Released (noisy) node values by completion time (must still be stored)."""
        tt = np.asarray(times, dtype=np.int64)
        return self._store.Y[tt - self._store.base].copy()

    def answer_variance(self, l: int, r: int) -> float:
        """Exact variance of the answer to ``[l, r]``: the sum of its support's node variances."""
        l_, r_ = self._check_query(l, r)
        starts, cfgs = self._trees.overlapping(l_, r_)
        total = 0.0
        for s, cfg in zip(starts, cfgs):
            nv = self._node_variance(cfg)
            for _, v, _c in K.decompose(l_, r_, [int(s)], [cfg.k]):
                total += float(nv[v - 1])
        return total

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
            eps, sens = self._mm_params(K.mm_budget_rows(k, qs, self.epsilon))
            scale = sens / eps
            rows = [TreeConfig(k, eps[r], sens[r], scale[r], float(qs[r])) for r in range(qs.shape[0])]
            runs.append((s0, qs.shape[0], _MultiConfig(rows, eps, sens, scale)))
            i = j + 1
        return runs


def raise_param(msg: str, value: object) -> None:
    from privpub.errors import ParameterError

    raise ParameterError(f"{msg}, got {value!r}")


# -------------------------------------------------------------------------------------------------
# public classes
# -------------------------------------------------------------------------------------------------
_COMMON_PARAMS = """
    Parameters
    ----------
    window : int
        Sliding window W: queries ``[l, r]`` must satisfy ``t - W < l <= r <= t``.
    epsilon : float
        Event-level privacy parameter.
    rng : int, Generator or None
        Randomness for the node noise.
    sensitivity : float
        Largest change of one item between neighbouring streams (default 1: one record).
    height : int or None
        Tree height (HQ variants: the initial height, used while no query length is known).
    noise : {"discrete", "laplace"}
        Exact discrete Laplace (default; items must then be integers) or continuous Laplace
        (the paper's choice; IEEE floating-point sampling, Mironov 2012 applies).
"""


class RTP(_FenwickPublisher):
    __doc__ = f"""RTP: the stream cut into Fenwick trees of one fixed height (Ge et al.) [GWS17]_.

    Each item opens or joins the current tree; Fenwick node ``v`` (local items
    ``(v - lowbit(v), v]``) is released with noise ``Lap(k Δ / ε)`` exactly once, when item ``v``
    arrives. A range query is a difference of two noisy prefix sums, O(1). The default height
    ``k*(W)`` minimises the expected error of length-``W`` queries (spec §3).
    {_COMMON_PARAMS}
    Notes
    -----
    **Privacy:** ε-DP at event level: neighbouring streams have the same length and differ in one
    item by at most ``sensitivity``. An item lies in at most ``k`` nodes of its own tree (its
    up-path), each with ``Lap(kΔ/ε)``, so its nodes spend ε (sequential composition); trees
    cover disjoint items (parallel composition), so the whole unbounded stream is ε-DP. The
    window only bounds memory; it does not renew the budget. RTP with one huge tree is the
    binary mechanism of Chan, Shi and Song [CSS11]_.

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
    >>> pub.query(2, 5)  # true sum 14; discrete Laplace noise keeps answers integral
    14.0
    >>> len(pub.support(2, 5)[0])  # node 4 minus node 1 of tree 1, plus node 1 of tree 2
    3
    """
    method = "rtp"


class HQRTP(_FenwickPublisher):
    __doc__ = f"""HQ_RTP: RTP whose next tree height adapts to the predicted query length [WHGS19]_.

    Query lengths are recorded after each answer; a moving average (``SMA(100)`` by default, or
    ``EWMA``) predicts the next length ``q``, and each new tree gets height ``k*(q)``, the
    minimiser of the exact expected error ``2 Δ² k² N(k, q) / ε²`` (spec §3, which corrects the
    paper's Eq. 12-16).
    {_COMMON_PARAMS}
    predictor : SMA or EWMA, optional
        Query-length predictor (default ``SMA(100)``); it is updated in place.
    history : array_like of int
        Public past query lengths fed to the predictor before the stream starts.

    Notes
    -----
    **Privacy:** ε-DP at event level, as :class:`RTP`. A tree's height depends only on query
    lengths asked before the tree opened; as long as queries do not depend on the raw stream
    (they may depend on released answers), the layout is a function of earlier outputs of
    disjoint trees (adaptive parallel composition), so the guarantee is unchanged.

    Examples
    --------
    >>> pub = HQRTP(window=1024, epsilon=1.0, rng=0, noise="laplace", history=[4] * 10)
    >>> pub.extend(np.ones(16))
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
    {_COMMON_PARAMS}
    Notes
    -----
    **Privacy:** ε-DP at event level: each item's nodes spend at most ε in total (sequential
    composition), trees are disjoint (parallel composition), and the budgets depend only on
    public parameters.

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
    {_COMMON_PARAMS}
    predictor : SMA or EWMA, optional
        Query-length predictor (default ``SMA(100)``).
    history : array_like of int
        Public past query lengths fed to the predictor first.

    Notes
    -----
    **Privacy:** ε-DP at event level, as :class:`RTPMM` and :class:`HQRTP` (budgets and heights
    depend only on query lengths, which must not depend on the raw stream).

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

