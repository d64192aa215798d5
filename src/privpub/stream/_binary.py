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

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from privpub.core import MAX_TREE_HEIGHT, PrivacyUnit, RNGLike, Session, check_positive_int
from privpub.errors import DomainError, ParameterError
from privpub.stream import _kernels as K
from privpub.stream._base import _CHUNK, COMMON_PARAMS, INT_NP_LIMIT, NEIGHBOURS, StreamPublisher

__all__ = ["BT", "BTH"]

_REPLAY_STEP = 1 << 18
#: peak bytes per window item of optimal_height_bth (340 measured with tracemalloc), with a margin
_BTH_SEARCH_BYTES = 400


def _level_of(x: NDArray[np.int64], cap: int) -> NDArray[np.int64]:
    """Trailing-zero count of ``x`` (``cap`` for 0), capped at ``cap``."""
    lb = x & -x
    out = np.where(x == 0, cap, np.frexp(lb.astype(np.float64))[1] - 1)
    return np.minimum(out, cap).astype(np.int64)


class _BinaryTreePublisher(StreamPublisher):
    """Blocks of ``T = 2**(k-1)`` items, each a complete binary tree of all ``2T - 1`` dyadic nodes."""

    _structure: ClassVar[str] = "binary"
    _takes_rho: ClassVar[bool] = True
    measures: ClassVar[tuple[str, ...]] = ("pure-dp", "zcdp")
    _lsq: ClassVar[bool] = False
    _Y: NDArray[Any]  # (k, time): noisy node of level l completed at that time
    _R: NDArray[Any]  # cumulative noisy roots (at block ends)
    _H: NDArray[np.float64]  # BTH: cumulative least-squares leaf estimates of complete blocks
    _Z: NDArray[np.float64]  # BTH: up-pass estimates
    _G: NDArray[np.float64]  # BTH: within-subtree cumulative leaf estimates per forest level
    _Gdone: NDArray[np.bool_]  # BTH: [l, end]: G of the level-l subtree ending at ``end`` is computed

    def __init__(
        self,
        *,
        window: int,
        epsilon: float | None = None,
        rng: RNGLike = None,
        sensitivity: float = 1.0,
        height: int | None = None,
        noise: str = "discrete",
        real: bool = False,
        max_item: float | None = None,
        session: Session | None = None,
        memory_limit: int | None = None,
        rho: float | None = None,
        privacy_unit: PrivacyUnit | None = None,
    ) -> None:
        self._init(window=window, epsilon=epsilon, rng=rng, sensitivity=sensitivity, height=height, noise=noise,
                   real=real, max_item=max_item, session=session, memory_limit=memory_limit, restoring=False,
                   rho=rho, privacy_unit=privacy_unit)

    def _init(self, *, window: Any, epsilon: Any, rng: RNGLike, sensitivity: Any, height: Any, noise: Any,
              real: Any, max_item: Any, session: Session | None, memory_limit: Any, restoring: bool,
              rho: Any = None, privacy_unit: Any = None) -> None:
        self._check_common(window=window, epsilon=epsilon, sensitivity=sensitivity, noise=noise, real=real,
                           max_item=max_item, memory_limit=memory_limit, rho=rho, privacy_unit=privacy_unit)
        if height is None:
            # the window alone (at the smallest height) must fit before the height search, whose
            # BT_H error model (optimal_height_bth) works on arrays up to twice the window (measured
            # peak: 340 bytes per window item at 2**16 and 2**20, tracemalloc)
            search = _BTH_SEARCH_BYTES * self.window if self._lsq else 0.0
            self._check_memory(max(self._state_bytes(1), search), f"window={self.window}", "lower window")
            gauss = self.measure == "zcdp"
            height = (K.optimal_height_bth(self.window, gaussian=gauss) if self._lsq
                      else K.optimal_height_bt(self.window, gaussian=gauss))
        self.height = check_positive_int(height, "height")
        if self.height > MAX_TREE_HEIGHT:
            raise ParameterError(f"height must be at most {MAX_TREE_HEIGHT}, got {self.height}", param="height")
        k = self.height
        Tb = 1 << (k - 1)
        self._check_memory(self._state_bytes(k), f"window={self.window} with blocks of 2**{k - 1} items (height {k})",
                           "lower height (each block holds 2**(height-1) items)" if Tb >= self.window
                           else "lower window")
        self._start(rng, session, restoring=restoring)
        self._k = k
        self._Tb = Tb
        self._plan = self._noise.plan(k)
        # per-level variance factor of the least-squares up pass (v_0 = 1, v = vc / (vc + 1))
        v = [1.0]
        for _ in range(1, k):
            vc = 2.0 * v[-1]
            v.append(vc / (vc + 1.0))
        self._v = v
        self._vc = [0.0] + [2.0 * v[lev - 1] for lev in range(1, k)]
        self._cap = 0
        self._base = 0
        self._alloc(1024)
        self._u = Tb  # items of the open block (Tb: no block open)
        self._T = Tb
        self._p: Any = 0
        self._anchors: list[Any] = [0] * k

    def _state_bytes(self, k: int) -> float:
        """Bytes of the publisher's state at height ``k`` (its time-indexed arrays and block buffers)."""
        Tb = 1 << (k - 1)
        per_time = 8 * (k * (3 if self._lsq else 1) + 3) + (k if self._lsq else 0)
        return per_time * (self.window + Tb + _CHUNK) * 1.3 + 8.0 * 12 * (Tb + _CHUNK) + 8.0 * 3 * (2 * Tb)

    # -- storage ----------------------------------------------------------------------------------
    def _names(self) -> tuple[tuple[str, Any], ...]:
        dt = self._dtype
        out: tuple[tuple[str, Any], ...] = (("_Y", dt), ("_R", dt))
        if self._lsq:
            out += (("_Z", np.float64), ("_G", np.float64), ("_Gdone", np.bool_), ("_H", np.float64))
        return out

    def _alloc(self, cap: int, keep_from: int | None = None) -> None:
        k = self._k
        shift = 0 if keep_from is None else keep_from - self._base
        used = max(0, self._cap - shift)
        for nm, dt in self._names():
            two_d = nm in ("_Y", "_Z", "_G", "_Gdone")
            new = np.zeros((k, cap) if two_d else cap, dtype=dt)
            if self._cap:
                old = getattr(self, nm)
                n_keep = min(used, cap)
                if two_d:
                    new[:, :n_keep] = old[:, shift : shift + n_keep]
                else:
                    new[:n_keep] = old[shift : shift + n_keep]
            setattr(self, nm, new)
        if keep_from is not None:
            self._base = keep_from
        self._cap = cap

    def _compact(self, n: int) -> None:
        t = self._t
        if t + n - self._base < self._cap:
            return
        block_start = (t // self._Tb) * self._Tb  # time before the open block
        keep_from = max(self._base, min(t - self.window, block_start))
        need = t + n - keep_from + 1
        cap = max(1024, need + need // 4)
        self._alloc(cap, keep_from)

    @property
    def trees(self) -> list[tuple[int, int]]:
        """``(start, height)`` of the blocks that meet the window, oldest first."""
        lo = max(1, self._t - self.window + 1)
        first = ((lo - 1) // self._Tb) * self._Tb + 1
        return [(s, self._k) for s in range(first, self._t + 1, self._Tb)]

    def _noisy_total(self) -> float:
        end = (self._t // self._Tb) * self._Tb  # the last completed block's end
        carried = float(self._R[end - self._base]) if end else 0.0
        return abs(carried) + (abs(float(self._p)) if self._u < self._Tb else 0.0)

    # -- online -----------------------------------------------------------------------------------
    def _push(self, x: Any) -> None:
        if self._u == self._Tb:
            self._noise.open(self._plan, 1)
            self._u = 0
            self._p = 0 if not self.real else 0.0
            self._anchors = [self._p] * self._k
        t = self._t + 1
        if t - self._base >= self._cap:
            self._compact(1)
        i = t - self._base
        u = self._u + 1
        p = self._p + x
        if p > self._sum_limit:
            raise self._sum_error()
        k = self._k
        top = min((u & -u).bit_length() - 1, k - 1)
        anchors = self._anchors
        Y = self._Y
        draw = self._noise.draw_one
        plan = self._plan
        ys = []
        for lev in range(top + 1):
            y = p - anchors[lev] + draw(plan, 0)
            Y[lev, i] = y
            anchors[lev] = p
            ys.append(y)
        if u == self._Tb:
            r = self._R[i - self._Tb].item() + ys[k - 1]
            if self._exact and abs(r) > INT_NP_LIMIT:
                raise DomainError("the stream's noisy running total exceeds 2**62; int64 sums would overflow")
            self._R[i] = r
        self._t, self._u, self._p = t, u, p
        if self._lsq:  # the up pass of the completed nodes, as in the batch (same float operations)
            Z = self._Z
            z = float(ys[0])
            Z[0, i] = z
            vcs = self._vc
            for lev in range(1, top + 1):
                vc = vcs[lev]
                zc = Z[lev - 1, i - (1 << (lev - 1))].item() + z
                z = (vc * ys[lev] + zc) / (vc + 1.0)
                Z[lev, i] = z
            if u == self._Tb:
                self._complete_blocks(np.array([t], dtype=np.int64))

    # -- batch ------------------------------------------------------------------------------------
    def _ingest(self, x: NDArray[Any], layout: Any = None) -> None:
        n = x.shape[0]
        if n == 0:
            return
        k, Tb = self._k, self._Tb
        n_old = self._u if self._u < Tb else 0
        m = (n_old + n + Tb - 1) // Tb
        p0 = float(self._p) if n_old else 0.0
        if self._exact and p0 + float(np.sum(x, dtype=np.float64)) > 2.0**62:
            X = np.zeros(m * Tb)
            X[n_old : n_old + n] = x
            sums = X.reshape(m, Tb).sum(axis=1)
            sums[0] += p0
            if float(sums.max()) > 2.0**62:  # int64 running sums could overflow
                raise self._sum_error()
        # block-local running sums: Q[f] after flat item f, Q0[f] before it
        X = np.zeros(m * Tb, dtype=x.dtype)
        X[n_old : n_old + n] = x
        Pm = np.empty((m, Tb + 1), dtype=x.dtype)
        Pm[:, 0] = 0
        np.cumsum(X.reshape(m, Tb), axis=1, out=Pm[:, 1:])
        if n_old:
            row0 = x[: Tb - n_old]
            Pm[0, n_old : n_old + row0.shape[0] + 1] = np.cumsum(
                np.concatenate([np.array([self._p], dtype=x.dtype), row0]))
            Pm[0, n_old + row0.shape[0] + 1 :] = Pm[0, n_old + row0.shape[0]]
            for lev in range(k):
                Pm[0, (n_old >> lev) << lev] = self._anchors[lev]
        if Pm[:, Tb].max() > self._sum_limit:  # items are >= 0: a row's largest sum is its last
            raise self._sum_error()
        Q = Pm[:, 1:].reshape(-1)
        Q0 = Pm[:, :-1].reshape(-1)
        # charge the blocks that open here, then draw the nodes' noise in completion order
        new_blocks = m - (1 if n_old else 0)
        if new_blocks:
            self._noise.open(self._plan, new_blocks)
        f = np.arange(n_old, n_old + n, dtype=np.int64)
        top = _level_of(f + 1, k - 1)  # highest level completed by each item (local u = f % Tb + 1)
        counts = top + 1
        offs = np.concatenate([[0], np.cumsum(counts)[:-1]])
        noise = self._noise.draw(self._plan, int(counts.sum()))
        self._compact(n)
        t0, base = self._t, self._base
        for lev in range(k):
            step = 1 << lev
            first = n_old + ((step - 1 - n_old) % step)  # first flat f >= n_old with f % step == step - 1
            if first >= n_old + n:
                break
            ff = np.arange(first, n_old + n, step, dtype=np.int64)
            vals = Q[ff] - Q0[ff - step + 1]
            self._Y[lev, t0 + 1 - n_old + ff - base] = vals + noise[offs[ff - n_old] + lev]
        times = t0 + 1 + np.arange(n, dtype=np.int64)
        roots = times[top >= k - 1]
        if roots.size:
            carry = self._R[roots[0] - Tb - base]
            r = np.cumsum(np.concatenate([np.array([carry], dtype=self._dtype), self._Y[k - 1, roots - base]]))[1:]
            if self._exact and float(np.abs(r.astype(np.float64)).max()) > INT_NP_LIMIT:
                raise DomainError("the stream's noisy running total exceeds 2**62; int64 sums would overflow")
            self._R[roots - base] = r
        u_last = (n_old + n - 1) % Tb + 1
        self._p = Pm[-1, u_last].item()
        self._anchors = [Pm[-1, (u_last >> lev) << lev].item() for lev in range(k)]
        self._u = u_last
        self._t = t0 + n
        if self._lsq:
            self._up_pass(times, top)
            if roots.size:
                self._complete_blocks(roots)

    def _up_pass(self, times: NDArray[np.int64], top: NDArray[np.int64]) -> None:
        base = self._base
        Y, Z = self._Y, self._Z
        for lev in range(self._k):
            tt = times[top >= lev] - base
            if tt.size == 0:
                break
            if lev == 0:
                Z[0, tt] = Y[0, tt]
            else:
                vc = 2.0 * self._v[lev - 1]
                zc = Z[lev - 1, tt - (1 << (lev - 1))] + Z[lev - 1, tt]
                Z[lev, tt] = (vc * Y[lev, tt] + zc) / (vc + 1.0)

    def _down_pass(self, lev: int, ends: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """Least-squares leaf estimates of the complete level-``lev`` subtrees ending at ``ends``:
        ``(X, leaf_times)``, both of shape (len(ends), 2**lev)."""
        base, Z = self._base, self._Z
        X = Z[lev, ends - base][:, None]
        PT = ends[:, None]
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
        return X, PT

    def _complete_blocks(self, ends: NDArray[np.int64]) -> None:
        """Cumulative least-squares leaf estimates ``H`` of the blocks that just completed."""
        X, PT = self._down_pass(self._k - 1, ends)
        base = self._base
        start = int(PT[0, 0]) - 1
        flat = np.cumsum(np.concatenate([[self._H[start - base]], X.reshape(-1)]))
        self._H[PT.reshape(-1) - base] = flat[1:]

    def _ensure_forest(self, lev: int, ends: NDArray[np.int64]) -> None:
        """Compute (once) ``G`` for the open-block subtrees of level ``lev`` ending at ``ends``."""
        base = self._base
        todo = np.unique(ends[~self._Gdone[lev, ends - base]])
        if todo.size == 0:
            return
        X, PT = self._down_pass(lev, todo)
        self._G[lev, PT - base] = np.cumsum(X, axis=1)
        self._Gdone[lev, todo - base] = True

    # -- answers ----------------------------------------------------------------------------------
    def _answer_checked(self, l: NDArray[np.int64], r: NDArray[np.int64]) -> NDArray[Any]:
        return self._answer_at(l, r, np.full(l.shape, self._t, dtype=np.int64))

    def _replay_step(self) -> int:
        return _REPLAY_STEP

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

    # -- persistence ----------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "height": self.height}

    def _get_state(self, since: int | None = None) -> dict[str, Any]:
        t = self._t
        lo = max(self._base, min(t - self.window, (t // self._Tb) * self._Tb))
        start = lo
        if since is not None:
            # BTH writes a block's leaf estimates when the block completes: from the block of since + 1
            start = max(lo, (since // self._Tb) * self._Tb if self._lsq else since + 1)
        a, b = start - self._base, t - self._base + 1
        out: dict[str, Any] = {
            "store_from": lo,
            "Y": self._Y[:, a:b].copy(),
            "R": self._R[a:b].copy(),
            "open_block": {"items": self._u, "local_sum": self._p, "anchors": list(self._anchors)},
        }
        if self._lsq:
            out["Z"] = self._Z[:, a:b].copy()
            out["H"] = self._H[a:b].copy()
        if since is not None:
            out["arrays_from"] = start
        return out

    def _set_state(self, state: dict[str, Any]) -> None:
        lo, t = int(state["store_from"]), int(state["t"])
        Y: NDArray[Any] = np.asarray(state["Y"], dtype=self._dtype)
        if Y.shape != (self._k, t - lo + 1):
            raise ParameterError("state is damaged: the stored arrays do not match its time range", param="state")
        self._cap = 0
        self._base = lo
        self._alloc(max(1024, 2 * Y.shape[1]))
        n = Y.shape[1]
        self._Y[:, :n] = Y
        self._R[:n] = np.asarray(state["R"], dtype=self._dtype)
        if self._lsq:
            self._Z[:, :n] = np.asarray(state["Z"], dtype=np.float64)
            self._H[:n] = np.asarray(state["H"], dtype=np.float64)
        ob = state["open_block"]
        conv = float if self.real else int
        self._u = int(ob["items"])
        self._p = conv(ob["local_sum"])
        self._anchors = [conv(a) for a in ob["anchors"]]

    def _sum_error(self) -> DomainError:
        return DomainError("the items of one block sum to more than "
                           f"{'2**61 (int64 sums)' if self._exact else '2**52 (float64 resolution)'}; "
                           "lower height or rescale the stream")

    def _node_var(self) -> float:
        return float(self._plan.variances[0, 0])


class BT(_BinaryTreePublisher):
    __doc__ = f"""BT: the binary-tree (binary mechanism) counter with greedy dyadic answers [CSS11]_ [DNPR10]_.

    The stream is cut into blocks of ``T = 2**(k-1)`` items; each block stores all ``2T - 1``
    nodes of its complete binary tree, released with noise ``Lap(kΔ/ε)`` when their last item
    arrives. A range is answered by its greedy cover with maximal dyadic nodes (no subtraction).
    Default height ``k*_BT(W)``.
    {COMMON_PARAMS}
    Notes
    -----
    **Privacy:** ε-DP at event level: {NEIGHBOURS}. Every item lies in exactly ``k`` nodes of its
    block, each with ``Lap(kΔ/ε)`` (sequential composition inside a block, parallel across
    blocks); the ledger shows one branch kind of ``k`` charges of ``ε/k``.

    **Gaussian variant** (``rho=`` instead of ``epsilon=``): ρ-zCDP at event level, same
    neighbours. Each node gets exact discrete Gaussian noise ``N_Z(0, kΔ²/(2ρ))`` (one item's
    ``k`` nodes have L2 sensitivity ``Δ√k``; ``k`` charges of ``ρ/k`` compose to ρ in zCDP);
    the ledger's measure is ``"zcdp"``. With ``window=T`` and ``height=log2(T)+1`` (one block
    over the horizon) the largest prefix-sum variance is ``log2(T) (log2(T)+1) Δ²/(2ρ)``
    (:func:`privpub.stream.bt_gaussian_max_variance`), the baseline of ``mf_sqrt``.

    Examples
    --------
    >>> pub = BT(window=16, epsilon=1.0, rng=0, height=3)
    >>> pub.extend([1, 2, 3, 4, 5, 6])
    >>> pub.query(1, 4)  # the root of block 1 (true sum 10)
    14
    >>> gauss = BT(window=16, rho=0.5, rng=0, height=3)  # the Gaussian binary tree (zCDP)
    >>> gauss.extend([1, 2, 3, 4]); gauss.ledger.measure, gauss.ledger.total
    ('zcdp', 0.5)
    """

    method = "bt"

    def _answer_at(self, l: NDArray[np.int64], r: NDArray[np.int64], t: NDArray[np.int64]) -> NDArray[Any]:
        # greedy maximal dyadic cover; runs of whole blocks are read off the root prefix sums R
        base, k, T = self._base, self._k, self._Tb
        out: NDArray[Any] = np.zeros(l.shape[0], dtype=self._dtype)
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
        return self._variance_checked(l_, r_)

    def _variance_checked(self, l: int, r: int) -> float:
        # the greedy cover of :meth:`_cover`, counted with Python ints (one range: no arrays)
        cap = self._k - 1
        a, n = l - 1, 0
        while a < r:
            a += 1 << min(((a & -a).bit_length() - 1) if a else cap, cap, (r - a).bit_length() - 1)
            n += 1
        return n * self._node_var()


class BTH(_BinaryTreePublisher):
    __doc__ = f"""BTH: Honaker's least-squares (minimum-variance unbiased) binary tree [Hon15]_ [HRMS10]_.

    Same release as :class:`BT`; answers sum the least-squares leaf estimates, computed by one up
    and one down pass over every complete subtree. Inside the open block the completed nodes form
    complete subtrees rooted at ``path(u)``, and the estimate uses those only, so an answer can
    change when later nodes of its block complete (it is fixed for a given time ``t``).
    Default height: the minimiser of the offline error at ``L = W``. Answers are real numbers
    (least squares), also for integer streams.
    {COMMON_PARAMS}
    Notes
    -----
    **Privacy:** ε-DP at event level, as :class:`BT` ({NEIGHBOURS}); least squares is
    post-processing. With ``rho=`` instead of ``epsilon=``: ρ-zCDP with discrete Gaussian node
    noise, as the Gaussian :class:`BT`.

    Examples
    --------
    >>> pub = BTH(window=16, epsilon=1.0, rng=0, height=3, noise="laplace")
    >>> pub.extend([1, 2, 3, 4])
    >>> abs(pub.query(1, 4) - 10) < 15
    True
    """

    method = "bth"
    _lsq = True

    def _answer_dtype(self) -> type:
        return np.float64

    def _answer_at(self, l: NDArray[np.int64], r: NDArray[np.int64], t: NDArray[np.int64]) -> NDArray[Any]:
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
            self._ensure_forest(lev, end[sel])
            head = np.where(xs - 1 >= ss + 1, self._G[lev, np.maximum(xs - 1, ss + 1) - base], 0.0)
            out[sel] += self._G[lev, ys - base] - head
        return out

    def answer_variance(self, l: int, r: int) -> float:
        """Exact variance of the answer to ``[l, r]`` at the current time (Haar formula per piece)."""
        l_, r_ = self._check_query(l, r)
        return self._variance_checked(l_, r_)

    def _variance_checked(self, l_: int, r_: int) -> float:
        T, k, t = self._Tb, self._k, self._t
        B = (t // T) * T
        total = 0.0
        s = ((l_ - 1) // T) * T
        while s < min(r_, B):
            a, b = max(l_, s + 1) - s, min(r_, s + T) - s
            total += K.bth_piece_variance_one(k, a, b)
            s += T
        u = t - B
        for lev in range(k - 2, -1, -1):
            if not (u >> lev) & 1:
                continue
            start = B + ((u >> (lev + 1)) << (lev + 1))
            a, b = max(l_, start + 1), min(r_, start + (1 << lev))
            if a <= b:
                total += K.bth_piece_variance_one(lev + 1, a - start, b - start)
        return total * self._node_var()

