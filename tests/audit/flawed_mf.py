"""TEST FIXTURE -- NOT PRIVATE. A faithful copy of ``src/privpub/stream/_mf.py`` at commit 014b44c:
the matrix-factorisation counters of issue 34, which add integer discrete-Gaussian noise ``z`` to
the NON-integer vector ``R x`` and release ``L (R x + z)`` (``L`` public), so that
``y = L^-1 answers = R x + z`` shows ``R x mod 1``. Kept as the negative control of the lattice
check (``tests/audit/test_structure.py``): the structural audit must tell ``0^16`` from
``(1, 0, ..., 0)`` on these classes. Changes from the original: the ``method`` names (prefixed
``flawed_``, so they never shadow the real publishers in ``StreamPublisher.from_state``), this
docstring, and :meth:`MFSqrt.lattice_coordinates` (the public decoder: solve ``L y = answers``
with the old ``L``, the Toeplitz matrix of the ``c`` coefficients). Never import it from ``src``.

The original module docstring follows.

Matrix-factorisation continual counters under rho-zCDP: the square-root factorisation.

The prefix-sum matrix ``A`` (lower-triangular all-ones, ``T x T``) factors as ``A = L L`` with
``L`` the lower-triangular Toeplitz matrix of ``c_k = binom(2k, k) / 4^k`` (the coefficients of
``(1 - x)^(-1/2)``, whose square is ``(1 - x)^(-1)``). The mechanism releases
``L (L x + z) = A x + L z``: Gaussian noise ``z`` is added to ``R x = L x``, whose L2
sensitivity to one item changing by ``Δ`` is ``Δ`` times the largest column norm of ``L``,
``sqrt(sum_{k<T} c_k^2)`` (about ``sqrt(1 + ln(T) / π)``). Its largest prefix variance is
``Δ² (sum_{k<T} c_k^2)² / (2ρ)``, a constant factor below the Gaussian binary tree's at every
horizon ([HUU23]_, [FHU23]_).

References
----------
.. [HUU23] Henzinger, Upadhyay, Upadhyay. Almost tight error bounds on differentially private
   continual counting. SODA 2023, arXiv:2211.05006.
.. [FHU23] Fichtenberger, Henzinger, Upadhyay. Constant matters: fine-grained error bound on
   differentially private continual observation. ICML 2023, arXiv:2202.11205.
.. [CKS20] Canonne, Kamath, Steinke. The discrete Gaussian for differential privacy. NeurIPS 2020.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy.signal import fftconvolve, lfilter

from privpub.core import (
    PrivacyUnit,
    RNGLike,
    Session,
    check_positive_int,
    discrete_gaussian_sigma2,
    discrete_gaussian_variance,
)
from privpub.errors import DomainError, ParameterError
from privpub.stream._base import NEIGHBOURS, StreamPublisher

# the factorisations themselves did not change with the fix (only where the noise is added): the
# control takes them, and the block noise's draw, from the package
from privpub.stream._mf import (  # noqa: F401  (re-exported for the tests)
    _BlockNoise,
    _blt_columns,
    _blt_polys,
    _range_units,
    _right_column,
    blt_max_variance,
    blt_parameters,
    mf_range_coefficients,
    mf_range_error,
    mf_sqrt_coefficients,
    mf_sqrt_max_variance,
)

__all__ = ["BLT", "MFRange", "MFSqrt", "blt_parameters", "mf_range_coefficients", "mf_range_error",
           "mf_sqrt_coefficients", "mf_sqrt_max_variance"]

#: largest horizon (items per factorised block): 16 bytes of noise per item of the open block
MAX_HORIZON = 1 << 28
#: noisy prefix sums beyond this lose the noise to float64 rounding
_NP_LIMIT = 2.0**52
#: the matrix-factorisation state format: 2 = exact grid noise on the integer query ``R~ x``.
#: States without it (privpub 0.1.0 before issue 34) hold a flawed mechanism and are refused.
MF_FORMAT = 2
#: the reason a flawed (format 1) matrix-factorisation state is refused; ``{method}`` is filled in
RETIRED_MF_REASON = (
    "this {method} stream was stored by a privpub version whose matrix-factorisation counters "
    "(mf_sqrt, blt, mf_range: privpub 0.1.0 before the issue-34 fix) added integer noise to a "
    "non-integer query, so anyone holding two of its answers can read parities of the raw "
    "counts (see the security note in CHANGELOG.md); it cannot be continued. The answers it "
    "already published stay as they were and remain exposed; create a new stream (same spec) to "
    "go on publishing, and delete or close this one")








class MFSqrt(StreamPublisher):
    __doc__ = f"""mf_sqrt: the square-root matrix-factorisation counter under ρ-zCDP [HUU23]_ [FHU23]_.

    The stream is cut into blocks of ``horizon`` items (default: the window). When a block
    opens, its noise ``z`` (``horizon`` exact discrete Gaussian draws [CKS20]_) is drawn once and
    ``w = L z`` is computed by FFT convolution with ``c_k = binom(2k, k) / 4^k``; the noisy
    prefix sum at each step is the true in-block prefix plus ``w`` at that step, plus the noisy
    total of the previous blocks. A range ``[l, r]`` is answered by ``NP(r) - NP(l - 1)``.
    Memory: ``O(horizon + window)``; work per item: ``O(log horizon)`` amortised.

    Parameters
    ----------
    window : int
        Sliding window W of the answerable ranges (as the other stream publishers).
    rho : float
        Event-level ρ of the whole stream (zCDP). ``epsilon=`` is refused: under pure DP the
        factorisation loses to the binary tree (convert with
        :func:`privpub.core.pure_dp_to_zcdp` to compare).
    rng : int, Generator or None
        Randomness of the noise.
    sensitivity : float
        Δ, the largest change of one item between neighbouring streams (default 1).
    horizon : int, optional
        Items per factorised block (default ``window``); the noise grows like ``log(horizon)``.
    max_item : float, optional
        Declared bound of one item (larger items are refused).
    session : Session, optional
        A zCDP budget session: ``rho`` is reserved in it once, at construction.
    memory_limit : int, optional
        Bytes the publisher's state may need (checked before allocating).
    epsilon, height, noise, real
        Accepted for the registry's shared signature and refused unless left at their
        defaults (``None``, ``None``, ``"discrete"``, ``False``).

    Notes
    -----
    **Privacy:** ρ-zCDP at event level: {NEIGHBOURS}. Inside a block, changing one item by Δ
    changes ``L x`` by at most ``Δ sqrt(sum_{{k<T}} c_k^2)`` in L2 norm (the largest column norm of
    ``L``), and ``z`` is the discrete Gaussian of that L2 sensitivity at ρ (ρ-zCDP [CKS20]_);
    everything released is ``L (L x + z)`` plus earlier blocks' releases (post-processing).
    Blocks hold disjoint items (parallel composition): the ledger, in measure ``"zcdp"``, holds
    one branch kind charged ρ. The releases are real numbers computed in float64 from the exact
    draws (the guarantee is that of the real-arithmetic mechanism, as for continuous Laplace).
    Answers are float64.

    Examples
    --------
    >>> pub = MFSqrt(window=16, rho=0.5, rng=0)
    >>> pub.extend([1, 2, 3, 4, 5, 6])
    >>> round(pub.query(1, 4), 2)  # true sum 10
    9.81
    >>> pub.ledger.measure, pub.ledger.total
    ('zcdp', 0.5)
    """

    method = "flawed_mf_sqrt"
    _takes_rho: ClassVar[bool] = True
    measures: ClassVar[tuple[str, ...]] = ("zcdp",)

    def __init__(
        self,
        *,
        window: int,
        rho: float | None = None,
        rng: RNGLike = None,
        sensitivity: float = 1.0,
        horizon: int | None = None,
        max_item: float | None = None,
        session: Session | None = None,
        memory_limit: int | None = None,
        epsilon: float | None = None,
        height: int | None = None,
        noise: str = "discrete",
        real: bool = False,
        privacy_unit: PrivacyUnit | None = None,
    ) -> None:
        # the shared stream keywords are accepted (registry, CLI and service callers pass them);
        # only their defaults are meaningful here
        if height is not None:
            raise ParameterError(f"{self.method} has no tree height (its block length is horizon=), got "
                                 f"height={height!r}", param="height")
        if noise != "discrete" or real is not False:
            raise ParameterError(f"{self.method} adds exact discrete Gaussian noise to integer streams: leave "
                                 f"noise='discrete' and real=False, got noise={noise!r}, real={real!r}", param="noise")
        if epsilon is not None:
            raise ParameterError(
                f"{self.method} is a zCDP mechanism (Gaussian noise): give rho=, not epsilon= (under pure DP "
                "the factorisation loses to the binary tree; privpub.core.pure_dp_to_zcdp converts)", param="epsilon")
        self._init(window=window, rho=rho, rng=rng, sensitivity=sensitivity, horizon=horizon, max_item=max_item,
                   session=session, memory_limit=memory_limit, restoring=False, privacy_unit=privacy_unit)

    def _init(self, *, window: Any, rho: Any, rng: RNGLike, sensitivity: Any, horizon: Any, max_item: Any,
              session: Session | None, memory_limit: Any, restoring: bool, privacy_unit: Any = None,
              **extra: Any) -> None:
        if rho is None:
            raise ParameterError(f"{self.method} needs rho= (zCDP)", param="rho")
        self._check_common(window=window, epsilon=None, rho=rho, sensitivity=sensitivity, noise="discrete",
                           real=False, max_item=max_item, memory_limit=memory_limit, privacy_unit=privacy_unit)
        H = self.window if horizon is None else check_positive_int(horizon, "horizon")
        if H > MAX_HORIZON:
            raise ParameterError(f"horizon must be at most 2**28, got {H}", param="horizon")
        self.horizon = H
        # open block: z (8), w (8), coefficients (8), FFT temporaries (about 64); window: NP (8)
        self._check_memory(88.0 * H + 8.0 * 1.3 * (2 * self.window + 1024), f"horizon={H}, window={self.window}",
                           "lower horizon or window")
        self._factor(H, **extra)
        self._col2 = math.fsum(self._c * self._c)  # Var(w[H-1]) / Var(z)
        self._node_sens = self.sensitivity * math.sqrt(self._sens2)
        _ = self.sigma2  # a usable variance (raises) before anything is reserved
        self._start(rng, session, restoring=restoring)
        self._z: NDArray[np.int64] | None = None  # noise of the open block
        self._w: NDArray[np.float64] = np.zeros(0)
        self._u = H  # items of the open block (H: none open)
        self._p: int = 0  # exact in-block prefix sum
        self._R = 0.0  # noisy prefix at the end of the last complete block
        self._NP: NDArray[np.float64] = np.zeros(1024)  # NP[time - base]
        self._base = 0  # NP[0] is time 0 (NP(0) = 0)

    def _factor(self, H: int) -> None:
        """``self._c`` (first column of the left factor ``L``) and ``self._sens2`` (squared largest
        column norm of the right factor ``R = L^-1 A``); here ``R = L``."""
        self._c = mf_sqrt_coefficients(H)
        self._sens2 = math.fsum(self._c * self._c)

    def _block_noise(self, u: int, m: int) -> NDArray[np.float64]:
        """``w[u : u + m]`` of the open block (``u`` is the number of its items already received)."""
        return self._w[u : u + m]

    def _make_noise(self, rng: RNGLike) -> Any:
        return _BlockNoise(self._acc, rng, self._node_budget, self._node_sens,  # budget: rho (zCDP only), per event
                           f"z of one block of {self.horizon} items: L2 sensitivity Δ sqrt(sum c_k^2) "
                           f"= {self._node_sens:.6g}")

    @property
    def sigma2(self) -> float:
        """The variance parameter of ``z``: ``Δ² sum_{k<T} c_k^2 / (2ρ)`` (rounded up)."""
        # the per-event rho (rho / k^2 for k events per person and step)
        return discrete_gaussian_sigma2(rho=self._node_budget, sensitivity=self._node_sens)

    def max_variance(self) -> float:
        """Largest variance of a prefix answer inside one block (at its last item), exactly.

        ``Var(z) sum_{k<T} c_k^2`` with ``Var(z)`` the discrete Gaussian's exact variance
        (at most :func:`mf_sqrt_max_variance`).
        """
        return discrete_gaussian_variance(self.sigma2) * self._col2

    # -- ingest -------------------------------------------------------------------------------
    def _open_block(self) -> None:
        z = self._noise.draw(self.horizon)
        self._set_block_noise(z)
        self._u = 0
        self._p = 0

    def _set_block_noise(self, z: NDArray[np.int64]) -> None:
        self._z = z
        zf = z.astype(np.float64)
        # the same w either way (up to float rounding); direct convolution is faster for short blocks
        self._w = (np.convolve(zf, self._c)[: self.horizon] if self.horizon <= 256
                   else fftconvolve(zf, self._c)[: self.horizon])

    def _room(self, n: int) -> None:
        """Keep NP from time ``t - window`` on and make room for ``n`` more times."""
        keep = max(self._base, self._t - self.window)
        need = self._t + n - keep + 1
        if need > self._NP.shape[0] or keep - self._base > self._NP.shape[0] // 2:
            cap = max(1024, need + need // 4)
            new = np.zeros(cap)
            used = self._t - keep + 1
            new[:used] = self._NP[keep - self._base : keep - self._base + used]
            self._NP, self._base = new, keep

    @property
    def trees(self) -> list[tuple[int, int]]:
        """``(start, 0)`` of the blocks of ``horizon`` items that meet the window, oldest first
        (a block is one flat draw of ``z``, not a tree: height 0)."""
        lo = max(1, self._t - self.window + 1)
        first = ((lo - 1) // self.horizon) * self.horizon + 1
        return [(s, 0) for s in range(first, self._t + 1, self.horizon)]

    def _push(self, x: Any) -> None:
        self._ingest(np.array([x], dtype=np.int64))

    def _ingest(self, x: NDArray[Any], layout: Any = None) -> None:
        n = x.shape[0]
        if n == 0:
            return
        self._room(n)
        a = 0
        while a < n:
            if self._u == self.horizon:
                self._open_block()
            m = min(n - a, self.horizon - self._u)
            local = self._p + np.cumsum(x[a : a + m], dtype=np.int64)
            if int(local[-1]) > self._sum_limit:
                raise DomainError("the items of one block sum to more than 2**61; lower horizon or rescale")
            vals = self._R + (local.astype(np.float64) + self._block_noise(self._u, m))
            if not np.all(np.abs(vals) <= _NP_LIMIT):
                raise DomainError("the stream's noisy running total exceeds 2**52; float64 would round the noise away")
            i = self._t + 1 - self._base
            self._NP[i : i + m] = vals
            self._t += m
            self._u += m
            self._p = int(local[-1])
            a += m
            if self._u == self.horizon:
                self._R = float(vals[-1])
                self._z, self._w = None, np.zeros(0)  # the block's noise is fully released

    def _replay_step(self) -> int:
        return max(1, min(self.window, 1 << 20))

    # -- answers ------------------------------------------------------------------------------
    def _answer_dtype(self) -> type:
        return np.float64

    def _answer_checked(self, l: NDArray[np.int64], r: NDArray[np.int64]) -> NDArray[Any]:
        out: NDArray[np.float64] = self._NP[r - self._base] - self._NP[l - 1 - self._base]
        return out

    def _var_diff(self, i: int, j: int) -> float:
        """``Var(w[i] - w[j])`` in units of ``Var(z)`` (same block, ``-1 <= j < i``; ``w[-1] = 0``)."""
        c = self._c
        head = math.fsum(c[: i - j] ** 2)  # z_{j+1..i} enter w[i] only
        if j < 0:
            return head
        d = c[i - j : i + 1] - c[: j + 1]  # z_m, m <= j: coefficient c[i-m] - c[j-m]
        return head + math.fsum(d * d)

    def answer_variance(self, l: int, r: int) -> float:
        """Exact variance of the answer to ``[l, r]`` (in the window), from the block structure.

        ``NP(t)`` carries the noise ``sum_{j<b} w_j[H-1] + w_b[i]`` (item ``t`` is item ``i``
        of block ``b``), so ``NP(r) - NP(l-1)`` carries the noise of at most two partial
        blocks and of the whole blocks between them.
        """
        l_, r_ = self._check_query(l, r)
        H = self.horizon
        lo = l_ - 1
        b_r, i_r = divmod(r_ - 1, H)
        if lo == 0:
            units = b_r * self._col2 + self._var_diff(i_r, -1)
        else:
            b_l, i_l = divmod(lo - 1, H)
            if b_l == b_r:
                units = self._var_diff(i_r, i_l)
            else:
                units = self._var_diff(H - 1, i_l) + (b_r - b_l - 1) * self._col2 + self._var_diff(i_r, -1)
        return units * discrete_gaussian_variance(self.sigma2)

    # -- the public decoder (added for the audit fixture) ----------------------------------------
    def lattice_coordinates(self, answers: Any) -> NDArray[np.float64]:
        """``y`` solving ``L y = answers`` for prefix answers ``q(1, t)``, ``t = 1..n`` (``n <= horizon``):
        ``y = R x + z`` with ``z`` integer, whose fractional parts are those of ``R x``."""
        from scipy.linalg import solve_triangular, toeplitz

        a = np.asarray(answers, dtype=np.float64).ravel()
        n = a.shape[0]
        if n > self.horizon:
            raise ParameterError(f"at most horizon={self.horizon} answers, got {n}", param="answers")
        L = toeplitz(self._c[:n], np.zeros(n))
        out: NDArray[np.float64] = solve_triangular(L, a, lower=True)
        return out

    # -- persistence --------------------------------------------------------------------------
    @classmethod
    def _retired(cls, state: dict[str, Any]) -> str | None:
        if state.get("mf_format") == MF_FORMAT:
            return None
        return RETIRED_MF_REASON.format(method=cls.method)

    def _params(self) -> dict[str, Any]:
        return {"window": self.window, "rho": self.rho, "sensitivity": self.sensitivity, "horizon": self.horizon,
                "max_item": self.max_item, "memory_limit": self.memory_limit, **self._unit_params()}

    def _get_state(self, since: int | None = None) -> dict[str, Any]:
        # ``since`` (incremental persistence, where the base class offers it): NP is written once per
        # time, so a delta holds the times after ``since`` only
        lo = max(self._base, self._t - self.window)
        start = lo if since is None else max(lo, since + 1)
        ob: dict[str, Any] = {"items": self._u, "local_sum": self._p, "R": self._R}
        # the open block's noise, drawn once when it opened: a delta leaves it out when the block
        # opened before ``since`` (unchanged; split_state keeps it in the part that brought it)
        if since is None or self._z is None or self._t - self._u + 1 > since:
            ob["z"] = None if self._z is None else self._z.copy()
        out: dict[str, Any] = {
            "mf_format": MF_FORMAT,
            "store_from": lo, "NP": self._NP[start - self._base : self._t - self._base + 1].copy(),
            "open_block": ob}
        if since is not None:
            out["arrays_from"] = start
        return out

    def _set_state(self, state: dict[str, Any]) -> None:
        lo, t = int(state["store_from"]), int(state["t"])
        NP = np.asarray(state["NP"], dtype=np.float64)
        if NP.shape != (t - lo + 1,):
            raise ParameterError("state is damaged: the stored noisy prefixes do not match its time range", param="state")
        self._NP = np.zeros(max(1024, 2 * NP.shape[0]))
        self._NP[: NP.shape[0]] = NP
        self._base = lo
        ob = state["open_block"]
        self._u, self._p, self._R = int(ob["items"]), int(ob["local_sum"]), float(ob["R"])
        if ob["z"] is not None:
            z = np.asarray(ob["z"], dtype=np.int64)
            if z.shape != (self.horizon,):
                raise ParameterError("state is damaged: the open block's noise has the wrong length", param="state")
            self._set_block_noise(z)
        elif self._u != self.horizon:
            raise ParameterError("state is damaged: an open block without its noise", param="state")


# ---------------------------------------------------------------------------------------------
# BLT: buffered linear Toeplitz factorisation (O(d) noise state per step)
# ---------------------------------------------------------------------------------------------














class BLT(MFSqrt):
    __doc__ = f"""blt: the buffered-linear-Toeplitz matrix-factorisation counter under ρ-zCDP [DMPS24]_.

    As :class:`MFSqrt`, with the left factor ``L`` the lower-triangular Toeplitz matrix of
    ``c_k = sum_i theta_i omega_i^k`` (``d = buffers`` decaying exponentials, fitted for the
    horizon by :func:`blt_parameters`), and ``z`` calibrated to the largest column norm of the
    right factor ``R = L^-1 A``. The correlated noise ``w = L z`` is produced step by step by a
    linear recurrence with ``d`` buffers (``scipy.signal.lfilter`` of ``P/Q``, ``L(x) = P(x)/Q(x)``):
    O(d) work and O(d) noise state per step. ``z`` of the open block is drawn at once when it opens
    (8 bytes per item of the block), as in :class:`MFSqrt`, so that one block is one charged draw.

    Parameters are those of :class:`MFSqrt`, plus ``buffers`` (``d``, default 4, at most 8).

    Notes
    -----
    **Privacy:** ρ-zCDP at event level: {NEIGHBOURS}; the proof of :class:`MFSqrt` with the
    sensitivity ``Δ sqrt(sum_{{k<T}} r_k^2)`` of ``R x`` (column 0 of the Toeplitz ``R`` has the
    largest norm). The fitted parameters are public (they depend only on the horizon).

    References
    ----------
    .. [DMPS24] Dvijotham, McMahan, Pillutla, Steinke, Thakurta. Efficient and near-optimal noise
       generation for streaming differential privacy. FOCS 2024, arXiv:2404.16706.

    Examples
    --------
    >>> pub = BLT(window=64, rho=0.5, rng=0)
    >>> pub.extend([1, 2, 3, 4])
    >>> pub.ledger.measure, pub.ledger.total
    ('zcdp', 0.5)
    """

    method = "flawed_blt"

    def __init__(self, *, window: int, rho: float | None = None, rng: RNGLike = None, sensitivity: float = 1.0,
                 horizon: int | None = None, buffers: int = 4, max_item: float | None = None,
                 session: Session | None = None, memory_limit: int | None = None, epsilon: float | None = None,
                 height: int | None = None, noise: str = "discrete", real: bool = False,
                 privacy_unit: PrivacyUnit | None = None) -> None:
        self._buffers = check_positive_int(buffers, "buffers")
        super().__init__(window=window, rho=rho, rng=rng, sensitivity=sensitivity, horizon=horizon,
                         max_item=max_item, session=session, memory_limit=memory_limit, epsilon=epsilon,
                         height=height, noise=noise, real=real, privacy_unit=privacy_unit)

    def _factor(self, H: int, buffers: int | None = None) -> None:
        if buffers is not None:
            self._buffers = check_positive_int(buffers, "buffers")
        theta, omega = blt_parameters(H, self._buffers)
        self._theta, self._omega = np.array(theta), np.array(omega)
        self._P, self._Q = _blt_polys(self._theta, self._omega)
        self._c, r = _blt_columns(self._theta, self._omega, H)
        self._sens2 = math.fsum(r * r)

    def _set_block_noise(self, z: NDArray[np.int64]) -> None:
        self._z = z
        self._zi = np.zeros(self._Q.shape[0] - 1)  # the d buffers
        self._wpos = 0

    def _block_noise(self, u: int, m: int) -> NDArray[np.float64]:
        assert self._z is not None
        if u != self._wpos:  # restored: replay the buffers over the block's first u draws
            _, self._zi = lfilter(self._P, self._Q, self._z[self._wpos : u].astype(np.float64), zi=self._zi)
        w, self._zi = lfilter(self._P, self._Q, self._z[u : u + m].astype(np.float64), zi=self._zi)
        self._wpos = u + m
        out: NDArray[np.float64] = w
        return out

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "buffers": self._buffers}


# ---------------------------------------------------------------------------------------------
# mf_range: a Toeplitz factorisation optimised for the all-ranges workload
# ---------------------------------------------------------------------------------------------
#: largest horizon whose factorisation mf_range optimises (about a minute of L-BFGS at 2**20)
MAX_RANGE_HORIZON = 1 << 20
#: largest |L R - A| entry accepted from the power-series inverse (else the sensitivity is refused)
_FACTOR_TOL = 1e-9
















class MFRange(MFSqrt):
    __doc__ = f"""mf_range: a matrix-factorisation counter optimised for range queries, under ρ-zCDP.

    As HDMM [MMHM18]_ optimises a strategy for a batch workload, the left factor ``L`` here is
    optimised for the workload the stream paper answers: **every range** ``[l, r]`` of a block of
    ``horizon = T`` items (uniform weights; the paper's queries are ranges inside the window).
    The range workload is ``W = D A`` (``A`` the prefix-sum matrix, ``D`` the differences of
    prefix sums), so with ``A = L R`` and ``z`` Gaussian at the L2 sensitivity of ``R x``, the
    expected total squared error is ``Δ² max_j ||R e_j||² / (2ρ) · ||D L||_F²``.
    :func:`mf_range_coefficients` minimises it over lower-triangular Toeplitz ``L`` (the
    parameterisation of [DMPS24]_, here fitted to ranges instead of prefixes; ``L`` lower-triangular
    keeps the noise of each step a function of the past only). The all-range error is 12-22 % below
    the square-root factorisation's (:class:`MFSqrt`, the optimum for prefixes) for T = 2^4 .. 2^15,
    and within about 4 % of the unconstrained optimum of ``tr(G X^-1)`` at T = 256 [DMRST22]_.

    Ingest, answers, blocks, persistence and costs are those of :class:`MFSqrt` (``w = L z`` by FFT
    convolution when a block opens: ``O(log horizon)`` amortised work per item). Parameters are
    those of :class:`MFSqrt`; ``horizon`` is at most ``2**20`` (the optimisation takes a
    few seconds at ``2**15``, once per horizon and process).

    Notes
    -----
    **Privacy:** ρ-zCDP at event level: {NEIGHBOURS} (adding or removing one event changes one
    step's count by 1 = Δ). Inside a block, ``L (R x + z)`` is released with ``z`` exact discrete
    Gaussian at L2 sensitivity ``Δ max_j ||R e_j||`` ([CKS20]_); ``R = L^-1 A`` is computed in code
    from ``c`` (a power-series inverse, checked against ``L R = A`` to 1e-9) and, being lower-
    triangular Toeplitz, has its largest column at ``j = 0``: ``sqrt(sum_{{k<T}} r_k^2)``.
    ``L`` depends only on the horizon (public). Blocks hold disjoint items (parallel composition);
    the ledger, in measure ``"zcdp"``, holds one branch kind charged ρ. Releases are float64
    computed from the exact draws (the guarantee is that of the real-arithmetic mechanism).

    References
    ----------
    .. [MMHM18] McKenna, Miklau, Hay, Machanavajjhala. Optimizing error of high-dimensional
       statistical queries under differential privacy. VLDB 2018, arXiv:1808.03537.
    .. [DMRST22] Denisov, McMahan, Rush, Smith, Thakurta. Improved differential privacy for SGD via
       optimal private linear operators on adaptive streams. NeurIPS 2022, arXiv:2202.08312.

    Examples
    --------
    >>> pub = MFRange(window=16, rho=0.5, rng=0)
    >>> pub.extend([1, 2, 3, 4, 5, 6])
    >>> pub.ledger.measure, pub.ledger.total
    ('zcdp', 0.5)
    """

    method = "flawed_mf_range"

    def _factor(self, H: int) -> None:
        """``self._c`` (the optimised ``L``) and ``self._sens2`` (squared largest column norm of
        ``R = L^-1 A``, from the checked series inverse)."""
        self._c = np.array(mf_range_coefficients(H))
        self._sens2 = math.fsum(_right_column(self._c) ** 2)

    def range_error(self) -> float:
        """Mean expected squared error over every range of one block (discrete Gaussian ``z``):
        ``Var(z) ||D L||_F^2 / (T (T + 1) / 2)``, the quantity ``L`` is optimised for."""
        T = self.horizon
        return discrete_gaussian_variance(self.sigma2) * _range_units(self._c) / (T * (T + 1) / 2.0)
