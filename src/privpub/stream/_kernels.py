"""Pure formulas and array kernels of privpub.stream (no validation, no I/O).

Notation follows the spec (shared/specs/stream.md): a tree of height ``k`` holds ``T = 2**(k-1)``
items; local Fenwick node ``v`` in ``1..T`` covers the local items ``(v - lowbit(v), v]``.
"""

from __future__ import annotations

import bisect
import math
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.errors import ParameterError

__all__ = [
    "brute_force_nodes",
    "bt_gaussian_max_variance",
    "decompose",
    "expected_error",
    "expected_error_bt",
    "expected_error_bth",
    "expected_error_mm",
    "expected_error_mm_at",
    "expected_nodes",
    "expected_nodes_bt",
    "bth_piece_variance",
    "mm_budgets",
    "optimal_height",
    "optimal_height_bt",
    "optimal_height_bth",
    "optimal_height_mm",
    "paper_eq16",
]


# ---------------------------------------------------------------------------------------------
# bit helpers
# ---------------------------------------------------------------------------------------------
def lowbit(x: NDArray[np.int64]) -> NDArray[np.int64]:
    """``x & -x`` elementwise."""
    return x & -x


def popcount(x: NDArray[np.int64]) -> NDArray[np.int64]:
    """Number of set bits of non-negative int64 values."""
    return np.bitwise_count(x).astype(np.int64)


def fenwick_path(x: int) -> list[int]:
    """``path(x)``: the Fenwick nodes whose sum is the local prefix ``1..x`` (``path(0) = []``)."""
    out = []
    while x > 0:
        out.append(x)
        x -= x & -x
    return out


def fenwick_uppath(m: int, T: int) -> list[int]:
    """``uppath(m)``: the Fenwick nodes of a tree of ``T`` items that hold local item ``m``."""
    out = []
    while m <= T:
        out.append(m)
        m += m & -m
    return out


def max_height(length: float) -> int:
    """``i = floor(log2 L) + 1``, the largest height the paper searches for a query length ``L >= 1``."""
    return math.floor(math.log2(max(1.0, float(length)))) + 1


# ---------------------------------------------------------------------------------------------
# RTP error model (spec §3)
# ---------------------------------------------------------------------------------------------
def expected_nodes(k: int, length: ArrayLike) -> NDArray[np.float64] | float:
    """Exact expected support size ``N(k, L)`` of a length-``L`` query on height-``k`` Fenwick trees.

    ``N(k, L) = L / 2**(k-1) + sum_{l=0}^{k-2} min(1, L / 2**l)`` (start offset uniform modulo T).

    Examples
    --------
    >>> expected_nodes(3, 8)
    4.0
    """
    L = np.asarray(length, dtype=np.float64)
    out = L / 2.0 ** (k - 1)
    for lev in range(k - 1):
        out = out + np.minimum(1.0, L / 2.0**lev)
    return float(out) if out.ndim == 0 else out


def expected_error(
    k: int, length: ArrayLike, epsilon: float, sensitivity: float = 1.0
) -> NDArray[np.float64] | float:
    """Expected squared error of RTP with height ``k``: ``2 Δ² k² N(k, L) / ε²``."""
    n = np.asarray(expected_nodes(k, length))
    out = 2.0 * sensitivity**2 * k**2 * n / epsilon**2
    return float(out) if out.ndim == 0 else out


def paper_eq16(k: int, length: float) -> float:
    """The paper's Eq. 16 read literally (kept only to record that it always picks ``k = 1``)."""
    s = sum((-1) ** j * 2.0**-j * (length - 2**j + 1) for j in range(k))
    return float(s * k**2 / 2.0)


def optimal_height(length: ArrayLike, kmax: int | None = None) -> NDArray[np.int64] | int:
    """``k*(L)``: the height minimising ``k² N(k, L)`` over ``1 <= k <= floor(log2 L) + 1``.

    ``length`` is clipped below at 1 (a real predictor value is allowed). ``kmax`` caps the
    search (e.g. ``floor(log2 W) + 1``). Ties go to the smaller height.

    Examples
    --------
    >>> int(optimal_height(896)), int(optimal_height(897)), int(optimal_height(32768))
    (1, 8, 14)
    """
    L = np.maximum(np.asarray(length, dtype=np.float64), 1.0)
    flat = L.reshape(-1)
    km = -1 if kmax is None else int(kmax)
    out = np.array([optimal_height_scalar(float(x), km) for x in flat], dtype=np.int64).reshape(L.shape)
    return int(out) if out.ndim == 0 else out


@lru_cache(maxsize=65536)
def optimal_height_scalar(length: float, kmax: int = -1) -> int:
    """Scalar ``k*(L)`` used by both the online and the batch paths (``kmax < 1``: no cap)."""
    L = max(1.0, length)
    km = max_height(L)
    if kmax > 0:
        km = min(km, kmax)
    best_k, best = 1, L  # k = 1: N = L
    head = 0.0  # sum_{l <= k-2} min(1, L / 2**l)
    for k in range(2, km + 1):
        head += min(1.0, L / 2.0 ** (k - 2))
        e = k * k * (L / 2.0 ** (k - 1) + head)
        if e < best:
            best_k, best = k, e
    return best_k


# ---------------------------------------------------------------------------------------------
# RTP_MM: optimal per-node budgets (spec §5)
# ---------------------------------------------------------------------------------------------
def _mm_levels_rows(k: int, lengths: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(F, rho)`` of shape (k, n): per level, for height ``k`` and each query length (unit budget)."""
    T = 2.0 ** (k - 1)
    L = np.asarray(lengths, dtype=np.float64)
    F = np.empty((k, L.shape[0]))
    rho = np.empty((k, L.shape[0]))
    G = np.zeros(L.shape[0])
    for lev in range(k):
        c = 2.0 * np.minimum(2.0**lev, L) / T if lev < k - 1 else L / T
        cc = np.cbrt(c)
        cg = np.cbrt(G)
        F[lev] = (cc + cg) ** 3
        rho[lev] = 1.0 if lev == 0 else cc / (cc + cg)
        G = G + F[lev]
    return F, rho


def _mm_levels(k: int, length: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(F, rho)`` per level for height ``k`` and query length ``L`` (unit budget)."""
    F, rho = _mm_levels_rows(k, np.array([float(length)]))
    return F[:, 0], rho[:, 0]


def mm_budget_rows(k: int, lengths: ArrayLike, epsilon: float) -> NDArray[np.float64]:
    """Optimal node budgets for several query lengths at once: shape (n, T) (see :func:`mm_budgets`)."""
    L = np.asarray(lengths, dtype=np.float64).reshape(-1)
    _, rho = _mm_levels_rows(k, L)
    T = 1 << (k - 1)
    v = np.arange(1, T + 1, dtype=np.int64)
    lev = np.log2(v & -v).astype(np.int64)
    b = np.zeros((L.shape[0], T + 1))
    eps_v = np.zeros((L.shape[0], T + 1))
    b[:, T] = epsilon
    for level in range(k - 1, -1, -1):
        nodes = v[lev == level]
        if level < k - 1:
            par = nodes + (nodes & -nodes)
            b[:, nodes] = b[:, par] * (1.0 - rho[lev[par - 1]].T)
        eps_v[:, nodes] = rho[level][:, None] * b[:, nodes]
    out: NDArray[np.float64] = eps_v[:, 1:]
    return out


@lru_cache(maxsize=4096)
def _mm_budgets_cached(k: int, length: float, epsilon: float) -> NDArray[np.float64]:
    out: NDArray[np.float64] = mm_budget_rows(k, [length], epsilon)[0]
    out.flags.writeable = False
    return out


def mm_budgets(k: int, length: float, epsilon: float) -> NDArray[np.float64]:
    """Optimal node budgets ``eps_v`` (v = 1..T) of RTP_MM for height ``k`` and query length ``L``.

    Each item's nodes (its up-path) spend at most ``epsilon`` in total; odd positions spend
    exactly ``epsilon``. The result is cached and read-only.

    Examples
    --------
    >>> [round(float(e), 3) for e in mm_budgets(3, 4.0, 1.0)]
    [0.287, 0.361, 0.648, 0.352]
    """
    return _mm_budgets_cached(int(k), float(length), float(epsilon))


def expected_error_mm(k: int, length: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Expected squared error of RTP_MM: ``2 Δ² F_{k-1} / ε²``."""
    F, _ = _mm_levels(int(k), float(length))
    return float(2.0 * sensitivity**2 * F[-1] / epsilon**2)


def expected_error_mm_at(
    k: int, length: float, tuned_for: float, epsilon: float, sensitivity: float = 1.0
) -> float:
    """Expected squared error of a length-``L`` query on RTP_MM trees whose budgets were tuned for
    ``tuned_for`` (RTP_MM uses ``tuned_for = W``): ``2 Δ² sum_v c_v(L) / eps_v²``."""
    T = 1 << (int(k) - 1)
    eps_v = mm_budgets(k, tuned_for, epsilon)
    v = np.arange(1, T + 1, dtype=np.int64)
    lev = np.log2(v & -v)
    c = np.where(v == T, length / T, 2.0 * np.minimum(2.0**lev, length) / T)
    return float(2.0 * sensitivity**2 * np.sum(c / eps_v**2))


def optimal_height_mm(length: ArrayLike, kmax: int | None = None) -> NDArray[np.int64] | int:
    """``k*_MM(L)``: the height minimising the RTP_MM error (ties to the smaller k).

    Examples
    --------
    >>> int(optimal_height_mm(113)), int(optimal_height_mm(114)), int(optimal_height_mm(32768))
    (1, 2, 11)
    """
    L = np.maximum(np.asarray(length, dtype=np.float64), 1.0)
    flat = L.reshape(-1)
    out = np.empty(flat.shape, dtype=np.int64)
    for i, x in enumerate(flat):
        out[i] = optimal_height_mm_scalar(float(x), -1 if kmax is None else int(kmax))
    shaped = out.reshape(L.shape)
    return int(shaped) if shaped.ndim == 0 else shaped


def _optimal_height_mm_direct(length: float) -> int:
    km = max_height(length)
    F = [_mm_levels(k, length)[0][-1] for k in range(1, km + 1)]
    return int(np.argmin(F)) + 1


_MM_TABLE_K = 20


@lru_cache(maxsize=1)
def _mm_thresholds() -> NDArray[np.float64]:
    """``th[j]``: the smallest float L with ``k*_MM(L) >= j + 2`` (k*_MM is non-decreasing)."""
    th = []
    lo = 1.0
    for k in range(2, _MM_TABLE_K + 1):
        hi = max(lo, 2.0)
        while _optimal_height_mm_direct(hi) < k:
            lo, hi = hi, hi * 2.0
        while True:  # bisection down to adjacent floats: direct(lo) < k <= direct(hi)
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            if _optimal_height_mm_direct(mid) >= k:
                hi = mid
            else:
                lo = mid
        th.append(hi)
        lo = hi
    return np.array(th)


def optimal_height_mm_scalar(length: float, kmax: int = -1) -> int:
    """Scalar ``k*_MM(L)`` shared by the online and batch paths (``kmax < 1``: no cap).

    Looked up in a table of the exact float crossing points (built once by bisection).
    """
    L = max(1.0, float(length))
    th = _mm_threshold_list()
    k = bisect.bisect_right(th, L) + 1 if L < th[-1] else _optimal_height_mm_direct(L)
    return min(k, kmax) if kmax > 0 else k


@lru_cache(maxsize=1)
def _mm_threshold_list() -> list[float]:
    return [float(v) for v in _mm_thresholds()]


# ---------------------------------------------------------------------------------------------
# BT and BT_H (spec §6.1)
# ---------------------------------------------------------------------------------------------
def expected_nodes_bt(k: int, length: ArrayLike) -> NDArray[np.float64] | float:
    """Expected number of dyadic nodes of a greedy cover, ``N_BT(k, L)``, on height-``k`` blocks."""
    L = np.asarray(length, dtype=np.float64)
    out = L.copy()
    for j in range(1, k):
        out = out - np.maximum(0.0, L + 1.0 - 2.0**j) / 2.0**j
    return float(out) if out.ndim == 0 else out


def expected_error_bt(k: int, length: ArrayLike, epsilon: float, sensitivity: float = 1.0) -> float:
    """Expected squared error of BT: ``2 Δ² k² N_BT(k, L) / ε²``."""
    return float(2.0 * sensitivity**2 * k**2 * np.asarray(expected_nodes_bt(k, length)) / epsilon**2)


def optimal_height_bt(length: float, kmax: int | None = None, *, gaussian: bool = False) -> int:
    """``k*_BT(L)``: the BT height minimising ``k² N_BT(k, L)`` (ties to the smaller k).

    ``gaussian=True``: the Gaussian (zCDP) tree, whose node variance ``k Δ²/(2ρ)`` grows like
    ``k`` (not ``k²``): the height minimising ``k N_BT(k, L)``.

    Examples
    --------
    >>> optimal_height_bt(769), optimal_height_bt(770), optimal_height_bt(32768)
    (1, 8, 14)
    """
    L = max(1.0, float(length))
    km = max_height(L) + 1 if kmax is None else min(int(kmax), max_height(L) + 1)
    errs = [k ** (1 if gaussian else 2) * float(expected_nodes_bt(k, L)) for k in range(1, km + 1)]
    return int(np.argmin(errs)) + 1


def bt_gaussian_max_variance(horizon: int, rho: float, sensitivity: float = 1.0) -> float:
    """Largest prefix-sum variance of the Gaussian binary tree over ``horizon = 2**m`` steps.

    One complete tree of height ``k = m + 1``, node noise of variance ``k Δ²/(2ρ)`` (real
    Gaussian; the discrete Gaussian's is at most this). The prefix ``[1, t]`` is covered by
    ``popcount(t)`` nodes for ``t < 2**m`` and by the root at ``t = 2**m``; the largest is
    ``m`` nodes (``t = 2**m - 1``): ``m (m + 1) Δ²/(2ρ)``.

    Examples
    --------
    >>> bt_gaussian_max_variance(16, 0.5)
    20.0
    """
    T = int(horizon)
    if T < 1 or T & (T - 1):
        raise ParameterError(f"horizon must be a power of two, got {horizon!r}", param="horizon")
    m = T.bit_length() - 1
    return float(max(m, 1) * (m + 1) * sensitivity**2 / (2.0 * rho))


def bth_piece_variance(k: int, a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    """Offline least-squares variance of the range ``[a, b]`` (local, 1-based) of one complete block.

    In units of one node's noise variance (Haar-basis formula of spec §6.1).
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    T = 1 << (k - 1)
    n = (b - a + 1).astype(np.float64)
    var: NDArray[np.float64] = n * n / (T * (2.0 * T - 1.0))
    lo = a - 1  # 0-based half-open [lo, hi)
    hi = b
    for lev in range(1, k):
        size = 1 << lev
        half = size >> 1
        for pos in (lo, b - 1):
            node = pos // size
            if pos is lo:
                use = np.ones(node.shape, dtype=bool)
            else:
                use = node != (lo // size)  # do not count the same node twice
            start = node * size
            mid = start + half
            end = start + size
            left = np.maximum(0, np.minimum(hi, mid) - np.maximum(lo, start))
            right = np.maximum(0, np.minimum(hi, end) - np.maximum(lo, mid))
            d = (left - right).astype(np.float64)
            var = var + np.where(use, d * d / (size * (size - 1.0)), 0.0)
    return var


def expected_error_bth(k: int, length: int, epsilon: float, sensitivity: float = 1.0) -> float:
    """Expected offline squared error of BT_H (least squares on complete blocks), uniform offset.

    Examples
    --------
    >>> round(expected_error_bth(15, 32768, 1.0) / 2, 1)
    818.3
    """
    T = 1 << (k - 1)
    L = int(length)
    a1 = np.arange(1, T + 1, dtype=np.int64)
    b1 = np.minimum(T, a1 - 1 + L)
    rest = L - (b1 - a1 + 1)
    full = rest // T
    tail = rest % T
    v_full = float(bth_piece_variance(k, np.array([1]), np.array([T]))[0])
    var = bth_piece_variance(k, a1, b1) + full * v_full
    has_tail = tail > 0
    if has_tail.any():
        var = var + np.where(has_tail, bth_piece_variance(k, np.ones_like(tail), np.maximum(tail, 1)), 0.0)
    return float(2.0 * sensitivity**2 * k**2 * var.mean() / epsilon**2)


def optimal_height_bth(length: int, kmax: int | None = None, *, gaussian: bool = False) -> int:
    """The BT_H height minimising the offline error at query length ``L`` (used with ``L = W``).

    ``gaussian=True``: for Gaussian node noise, whose variance grows like ``k`` (not ``k²``).
    """
    L = max(1, int(length))
    km = max_height(L) + 1 if kmax is None else min(int(kmax), max_height(L) + 1)
    errs = [expected_error_bth(k, L, 1.0) / (k if gaussian else 1) for k in range(1, km + 1)]
    return int(np.argmin(errs)) + 1


# ---------------------------------------------------------------------------------------------
# Reference decomposition and brute force (tests)
# ---------------------------------------------------------------------------------------------
def decompose(l: int, r: int, starts: list[int], heights: list[int]) -> list[tuple[int, int, int]]:
    """Signed Fenwick nodes ``(tree index m, local node v, coef ±1)`` whose sum is the range ``[l, r]``.

    ``starts``/``heights`` describe consecutive trees (tree m covers
    ``starts[m] .. starts[m] + 2**(heights[m]-1) - 1``).
    """
    out: list[tuple[int, int, int]] = []
    for m, (s, h) in enumerate(zip(starts, heights)):
        T = 1 << (h - 1)
        if s + T - 1 < l or s > r:
            continue
        a = max(l, s) - s + 1
        b = min(r, s + T - 1) - s + 1
        pb = set(fenwick_path(b))
        pa = set(fenwick_path(a - 1))
        out.extend((m, v, 1) for v in sorted(pb - pa))
        out.extend((m, v, -1) for v in sorted(pa - pb))
    return out


def bth_piece_variance_one(k: int, a: int, b: int) -> float:
    """:func:`bth_piece_variance` of one range, in plain Python (the same operations in the same
    order, hence the same float): the service's one-range path, where NumPy's per-call overhead
    on length-1 arrays dominates."""
    T = 1 << (k - 1)
    n = float(b - a + 1)
    var = n * n / (T * (2.0 * T - 1.0))
    lo, hi = a - 1, b
    for lev in range(1, k):
        size = 1 << lev
        half = size >> 1
        for second, pos in ((False, lo), (True, b - 1)):
            if second and pos // size == lo // size:
                continue  # do not count the same node twice
            start = (pos // size) * size
            mid = start + half
            end = start + size
            d = float(max(0, min(hi, mid) - max(lo, start)) - max(0, min(hi, end) - max(lo, mid)))
            var = var + d * d / (size * (size - 1.0))
    return var


def brute_force_nodes(k: int, length: int) -> float:
    """Mean support size of a length-``L`` query over the ``T`` start offsets, by enumeration."""
    T = 1 << (k - 1)
    ntrees = (T + length) // T + 2
    starts = [1 + m * T for m in range(ntrees)]
    heights = [k] * ntrees
    total = sum(len(decompose(s, s + length - 1, starts, heights)) for s in range(1, T + 1))
    return total / T


# ---------------------------------------------------------------------------------------------
# batch kernels on (trees, T) matrices (strided views, no fancy indexing)
# ---------------------------------------------------------------------------------------------
def fenwick_node_values(Pm: NDArray[Any]) -> NDArray[Any]:
    """True node values ``P[v] - P[v - lowbit(v)]`` for v = 1..T, from running sums ``Pm``
    of shape (m, T + 1) (column j = the sum up to local item j, column 0 = before the tree)."""
    T = Pm.shape[1] - 1
    out = np.empty((Pm.shape[0], T), dtype=Pm.dtype)
    if T == 1:
        out[:, 0] = Pm[:, 1] - Pm[:, 0]
        return out
    out[:, 0::2] = Pm[:, 1::2] - Pm[:, 0:-1:2]  # odd v: parent offset 1
    out[:, 1::2] = fenwick_node_values(Pm[:, 0::2])  # even v = 2w: same rule on w
    return out


def fenwick_local_prefix(y: NDArray[Any]) -> NDArray[Any]:
    """Noisy local prefixes ``LP[v] = y[v] + LP[v - lowbit(v)]`` (``LP[0] = 0``) of shape (m, T)."""
    T = y.shape[1]
    out = np.empty(y.shape, dtype=y.dtype)
    if T == 1:
        out[:, 0] = y[:, 0]
        return out
    out[:, 1::2] = fenwick_local_prefix(y[:, 1::2])  # even v = 2w
    out[:, 0] = y[:, 0]
    out[:, 2::2] = y[:, 2::2] + out[:, 1:-1:2]  # odd v = 2w + 1: parent 2w
    return out
