"""BT and BTH: the textbook binary-tree continual counters as stream baselines (spec §6.1).

References
----------
.. [DNPR10] Dwork, Naor, Pitassi, Rothblum. Differential privacy under continual observation.
   STOC 2010.
.. [CSS11] Chan, Shi, Song. Private and continual release of statistics. ACM TISSEC 14(3), 2011.
.. [Hon15] Honaker. Efficient use of differentially private binary trees. TPDP 2015.
.. [HRMS10] Hay, Rastogi, Miklau, Suciu. Boosting the accuracy of differentially private
   histograms through consistency. PVLDB 3(1), 2010.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from privpub.core import RNGLike, check_positive_int
from privpub.stream import _kernels as K
from privpub.stream._base import StreamPublisher

__all__ = ["BT", "BTH"]


def _level_of(x: NDArray[np.int64], cap: int) -> NDArray[np.int64]:
    """Trailing-zero count of ``x`` (``cap`` for 0), capped at ``cap``."""
    lb = x & -x
    out = np.where(x == 0, cap, np.frexp(lb.astype(np.float64))[1] - 1)
    return np.minimum(out, cap).astype(np.int64)


class _BinaryTreePublisher(StreamPublisher):
    """Blocks of ``T = 2**(k-1)`` items, each a complete binary tree of all ``2T - 1`` dyadic nodes."""

    _lsq: ClassVar[bool] = False
    _P: NDArray[np.float64]  # running sums by time
    _H: NDArray[np.float64]  # BTH: cumulative least-squares leaf estimates of complete blocks
    _R: NDArray[np.float64]  # cumulative noisy roots (at block ends)
    _Y: NDArray[np.float64]  # (k, time): noisy node of level l completed at that time
    _Z: NDArray[np.float64]  # BTH: up-pass estimates
    _G: NDArray[np.float64]  # BTH: within-subtree cumulative leaf estimates per forest level

    def __init__(
        self,
        *,
        window: int,
        epsilon: float,
        rng: RNGLike = None,
        sensitivity: float = 1.0,
        height: int | None = None,
        noise: str = "discrete",
    ) -> None:
        super().__init__(window=window, epsilon=epsilon, rng=rng, sensitivity=sensitivity, noise=noise,
                         mechanism="complete binary-tree nodes")
        if height is None:
            height = K.optimal_height_bth(self.window) if self._lsq else K.optimal_height_bt(self.window)
        self.height = check_positive_int(height, "height")
        k = self.height
        self._k = k
        self._Tb = 1 << (k - 1)
        self._eps_arg = self.epsilon
        self._sens_arg = k * self.sensitivity
        self._scale = self._sens_arg / self._eps_arg
        # per-level variance factor of the least-squares up pass (v_0 = 1, v = vc / (vc + 1))
        v = [1.0]
        for _ in range(1, k):
            vc = 2.0 * v[-1]
            v.append(vc / (vc + 1.0))
        self._v = v
        self._cap = 0
        self._base = 0
        self._alloc(1024)

    # -- storage ----------------------------------------------------------------------------------
    def _alloc(self, cap: int, keep_from: int | None = None) -> None:
        k = self._k
        names = ("_P", "_H", "_R")
        names2 = ("_Y", "_Z", "_G") if self._lsq else ("_Y",)
        if self._cap == 0:
            for nm in names:
                setattr(self, nm, np.zeros(cap))
            for nm in names2:
                setattr(self, nm, np.zeros((k, cap)))
            self._cap = cap
            return
        assert keep_from is not None
        shift = keep_from - self._base
        used = self._cap - shift
        for nm in names:
            new = np.zeros(cap)
            new[:used] = getattr(self, nm)[shift:]
            setattr(self, nm, new)
        for nm in names2:
            new2 = np.zeros((k, cap))
            new2[:, :used] = getattr(self, nm)[:, shift:]
            setattr(self, nm, new2)
        self._base = keep_from
        self._cap = cap

    def _compact(self, n: int) -> None:
        t = self._t
        if t + n - self._base < self._cap:
            return
        block_start = (t // self._Tb) * self._Tb  # time before the open block
        keep_from = max(self._base, min(t - self.window, block_start))
        need = t + n - keep_from + 1
        cap = self._cap if need <= self._cap else max(2 * self._cap, need + need // 4)
        self._alloc(cap, keep_from)

    @property
    def trees(self) -> list[tuple[int, int]]:
        lo = max(1, self._t - self.window + 1)
        first = ((lo - 1) // self._Tb) * self._Tb + 1
        return [(s, self._k) for s in range(first, self._t + 1, self._Tb)]

    # -- ingestion ----------------------------------------------------------------------------------
    def _node_noise(self, count: int) -> NDArray[np.float64]:
        if self._discrete:
            e = np.full(count, self._eps_arg)
            return self._noise.discrete_many(e, np.full(count, self._sens_arg)).astype(np.float64)
        return self._scale * self._noise.z_many(count)

    def _push(self, x: float) -> None:
        self._ingest(np.array([x]))

    def _ingest(self, x: NDArray[np.float64], layout: Any = None) -> None:
        n = x.shape[0]
        if n == 0:
            return
        self._compact(n)
        t0, base, k = self._t, self._base, self._k
        times = np.arange(t0 + 1, t0 + n + 1, dtype=np.int64)
        csum = np.cumsum(np.concatenate([[self._p_last], x]))
        self._P[t0 + 1 - base : t0 + n + 1 - base] = csum[1:]
        top = _level_of(times, k - 1)  # highest level completed by each item
        counts = top + 1
        offs = np.concatenate([[0], np.cumsum(counts)[:-1]])
        noise = self._node_noise(int(counts.sum()))
        for lev in range(k):
            sel = top >= lev
            if not sel.any():
                break
            tt = times[sel]
            val = self._P[tt - base] - self._P[tt - (1 << lev) - base]
            self._Y[lev, tt - base] = val + noise[offs[sel] + lev]
        roots = times[top >= k - 1]
        if roots.size:
            carry = self._R[roots[0] - self._Tb - base]
            self._R[roots - base] = np.cumsum(np.concatenate([[carry], self._Y[k - 1, roots - base]]))[1:]
        self._t = t0 + n
        self._p_last = float(csum[-1])
        if self._lsq:
            self._lsq_complete(times, top)

    def _lsq_complete(self, times: NDArray[np.int64], top: NDArray[np.int64]) -> None:
        """Up pass for the nodes completed at ``times``; leaf estimates of every newly complete subtree."""
        base, k = self._base, self._k
        Y, Z, G = self._Y, self._Z, self._G
        for lev in range(k):
            tt = times[top >= lev] - base
            if tt.size == 0:
                break
            if lev == 0:
                Z[0, tt] = Y[0, tt]
            else:
                vc = 2.0 * self._v[lev - 1]
                zc = Z[lev - 1, tt - (1 << (lev - 1))] + Z[lev - 1, tt]
                Z[lev, tt] = (vc * Y[lev, tt] + zc) / (vc + 1.0)
        for lev in range(k):
            roots = times[top >= lev]
            if roots.size == 0:
                break
            X = Z[lev, roots - base][:, None]
            PT = roots[:, None]
            for m in range(lev - 1, -1, -1):
                right = PT
                left = PT - (1 << m)
                Zl = Z[m, left - base]
                Zr = Z[m, right - base]
                D = 0.5 * ((X - Zl) - Zr)
                Xn = np.empty((X.shape[0], 2 * X.shape[1]))
                Xn[:, 0::2] = Zl + D
                Xn[:, 1::2] = Zr + D
                CT = np.empty((PT.shape[0], 2 * PT.shape[1]), dtype=np.int64)
                CT[:, 0::2] = left
                CT[:, 1::2] = right
                X, PT = Xn, CT
            G[lev, PT - base] = np.cumsum(X, axis=1)
            if lev == k - 1:
                start = int(PT[0, 0]) - 1
                flat = np.cumsum(np.concatenate([[self._H[start - base]], X.reshape(-1)]))
                self._H[PT.reshape(-1) - base] = flat[1:]

    # -- answers ----------------------------------------------------------------------------------
    def _answer_checked(self, l: NDArray[np.int64], r: NDArray[np.int64]) -> NDArray[np.float64]:
        return self._answer_at(l, r, np.full(l.shape, self._t, dtype=np.int64))

    def _answer_at(self, l: NDArray[np.int64], r: NDArray[np.int64], t: NDArray[np.int64]) -> NDArray[np.float64]:
        raise NotImplementedError  # pragma: no cover

    def _cover(self, l: NDArray[np.int64], r: NDArray[np.int64]) -> tuple[list[NDArray[Any]], ...]:
        """Greedy maximal dyadic cover of ``[l, r]`` (levels <= k-1): per step (query idx, level, time)."""
        lo = l - 1
        hi = r.copy()
        steps_i, steps_l, steps_t = [], [], []
        idx = np.arange(l.shape[0])
        while idx.size:
            a = lo[idx]
            lev = np.minimum(_level_of(a, self._k - 1), np.frexp((hi[idx] - a).astype(np.float64))[1] - 1)
            tau = a + (np.int64(1) << lev)
            steps_i.append(idx)
            steps_l.append(lev)
            steps_t.append(tau)
            lo[idx] = tau
            idx = idx[lo[idx] < hi[idx]]
        return steps_i, steps_l, steps_t

    def replay(self, items: Any, queries: Any) -> NDArray[np.float64]:
        arr = self._check_items(items)
        q = np.asarray(queries)
        if q.size == 0:
            q = np.zeros((0, 3), dtype=np.int64)
        if q.ndim != 2 or q.shape[1] != 3:
            from privpub.errors import ParameterError

            raise ParameterError(f"queries must be an integer array of shape (q, 3), got shape {q.shape}")
        q = q.astype(np.int64)
        qt, l, r = q[:, 0], q[:, 1], q[:, 2]
        out = np.empty(q.shape[0])
        done = 0
        step = 1 << 18
        from privpub.errors import ParameterError

        if q.shape[0] and (np.any(np.diff(qt) < 0) or qt[0] < self._t or qt[-1] > self._t + arr.shape[0]):
            raise ParameterError("query times must be sorted and within the replayed range")
        bad = ~((l >= 1) & (l > qt - self.window) & (l <= r) & (r <= qt))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ParameterError(f"queries[{i}] must satisfy time - window < l <= r <= time, got "
                                 f"time={qt[i]}, l={l[i]}, r={r[i]}")
        j = int(np.searchsorted(qt, self._t, side="right"))
        if j:
            out[:j] = self._answer_at(l[:j], r[:j], qt[:j])
            done = j
        for a in range(0, arr.shape[0], step):
            self._ingest(arr[a : a + step])
            j = int(np.searchsorted(qt, self._t, side="right"))
            if j > done:
                out[done:j] = self._answer_at(l[done:j], r[done:j], qt[done:j])
                done = j
        return out


class BT(_BinaryTreePublisher):
    """BT: the binary-tree (binary mechanism) counter with greedy dyadic answers [CSS11]_ [DNPR10]_.

    The stream is cut into blocks of ``T = 2**(k-1)`` items; each block stores all ``2T - 1``
    nodes of its complete binary tree, released with noise ``Lap(kΔ/ε)`` when their last item
    arrives. A range is answered by its greedy cover with maximal dyadic nodes (no subtraction).
    Default height ``k*_BT(W)``.

    Parameters
    ----------
    window, epsilon, rng, sensitivity, noise
        As in :class:`privpub.stream.RTP`.
    height : int, optional
        Block height ``k`` (default ``k*_BT(W)``).

    Notes
    -----
    **Privacy:** ε-DP at event level: every item lies in exactly ``k`` nodes of its block, each
    with ``Lap(kΔ/ε)`` (sequential composition inside a block, parallel across blocks).

    Examples
    --------
    >>> pub = BT(window=16, epsilon=1.0, rng=0, height=3)
    >>> pub.extend([1, 2, 3, 4, 5, 6])
    >>> pub.query(1, 4)  # the root of block 1 (true sum 10)
    12.0
    """

    method = "bt"

    def _answer_at(self, l: NDArray[np.int64], r: NDArray[np.int64], t: NDArray[np.int64]) -> NDArray[np.float64]:
        # greedy maximal dyadic cover; runs of whole blocks are read off the root prefix sums R
        base, k, T = self._base, self._k, self._Tb
        out = np.zeros(l.shape[0])
        lo = l - 1
        hi = r.copy()
        idx = np.arange(l.shape[0])
        while idx.size:
            a, b = lo[idx], hi[idx]
            jump = (a % T == 0) & (b - a >= T)
            if jump.any():
                ji = idx[jump]
                bhi = (hi[ji] // T) * T
                out[ji] += self._R[bhi - base] - self._R[lo[ji] - base]
                lo[ji] = bhi
            step = ~jump
            si = idx[step]
            a = lo[si]
            lev = np.minimum(_level_of(a, k - 1), np.frexp((hi[si] - a).astype(np.float64))[1] - 1)
            tau = a + (np.int64(1) << lev)
            out[si] += self._Y[lev, tau - base]
            lo[si] = tau
            idx = idx[lo[idx] < hi[idx]]
        return out

    def answer_variance(self, l: int, r: int) -> float:
        """Exact variance of the answer to ``[l, r]`` (number of cover nodes times one node's variance)."""
        l_, r_ = self._check_query(l, r)
        steps = self._cover(np.array([l_]), np.array([r_]))[0]
        return len(steps) * _node_var(self)


class BTH(_BinaryTreePublisher):
    """BTH: Honaker's least-squares (minimum-variance unbiased) binary tree [Hon15]_ [HRMS10]_.

    Same release as :class:`BT`; answers sum the least-squares leaf estimates, computed by one up
    and one down pass over every complete subtree. Inside the open block the completed nodes form
    complete subtrees rooted at ``path(u)``, and the estimate uses those only, so an answer can
    change when later nodes of its block complete (it is fixed for a given time ``t``).
    Default height: the minimiser of the offline error at ``L = W``.

    Parameters
    ----------
    window, epsilon, rng, sensitivity, noise
        As in :class:`privpub.stream.RTP`.
    height : int, optional
        Block height ``k``.

    Notes
    -----
    **Privacy:** ε-DP at event level, as :class:`BT`; least squares is post-processing.

    Examples
    --------
    >>> pub = BTH(window=16, epsilon=1.0, rng=0, height=3, noise="laplace")
    >>> pub.extend([1, 2, 3, 4])
    >>> abs(pub.query(1, 4) - 10) < 15
    True
    """

    method = "bth"
    _lsq = True

    def _answer_at(self, l: NDArray[np.int64], r: NDArray[np.int64], t: NDArray[np.int64]) -> NDArray[np.float64]:
        base, k, T = self._base, self._k, self._Tb
        B = (t // T) * T
        out = np.zeros(l.shape[0])
        y1 = np.minimum(r, B)
        has1 = l <= y1
        out[has1] = self._H[y1[has1] - base] - self._H[l[has1] - 1 - base]
        u = t - B
        for lev in range(k - 2, -1, -1):
            bit = ((u >> lev) & 1) == 1
            start = B + ((u >> (lev + 1)) << (lev + 1))  # subtree covers (start, start + 2**lev]
            end = start + (1 << lev)
            x = np.maximum(l, start + 1)
            y = np.minimum(r, end)
            sel = bit & (x <= y)
            if not sel.any():
                continue
            xs, ys, ss = x[sel], y[sel], start[sel]
            head = np.where(xs - 1 >= ss + 1, self._G[lev, np.maximum(xs - 1, ss + 1) - base], 0.0)
            out[sel] += self._G[lev, ys - base] - head
        return out

    def answer_variance(self, l: int, r: int) -> float:
        """Exact variance of the answer to ``[l, r]`` at the current time (Haar formula per piece)."""
        l_, r_ = self._check_query(l, r)
        T, k, t = self._Tb, self._k, self._t
        B = (t // T) * T
        total = 0.0
        s = ((l_ - 1) // T) * T
        while s < min(r_, B):
            a, b = max(l_, s + 1) - s, min(r_, s + T) - s
            total += float(K.bth_piece_variance(k, np.array([a]), np.array([b]))[0])
            s += T
        u = t - B
        for lev in range(k - 2, -1, -1):
            if not (u >> lev) & 1:
                continue
            start = B + ((u >> (lev + 1)) << (lev + 1))
            a, b = max(l_, start + 1), min(r_, start + (1 << lev))
            if a <= b:
                total += float(K.bth_piece_variance(lev + 1, np.array([a - start]), np.array([b - start]))[0])
        return total * _node_var(self)


def _node_var(pub: _BinaryTreePublisher) -> float:
    if pub._discrete:
        from privpub.core import rational_scale

        t_, s_ = rational_scale(pub._eps_arg, pub._sens_arg)
        p = math.exp(-s_ / t_)
        return 2.0 * p / (1.0 - p) ** 2
    return 2.0 * pub._scale**2
