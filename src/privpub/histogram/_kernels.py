"""Pure array kernels of privpub.histogram: optimal grouping (DPCluster), AHP clustering, publishing.

Nothing here draws randomness or touches a budget, except :func:`publish_groups`, which takes
already-drawn noise. The grouping kernels operate on a sorted (non-decreasing) vector ``x`` and
return half-open boundaries ``b_0 = 0 < b_1 < ... < b_K = n``: group ``g`` is ``x[b_g:b_{g+1}]``.

Segment cost (histogram spec section 2.4): for ``x[i:j]`` of length ``L = j - i``,
``w(i, j) = SSE(x[i:j]) + c / L + gamma`` with ``SSE`` the sum of squared deviations from the
segment mean (exactly 0 when ``L == 1``).
"""

from __future__ import annotations

import functools
import math
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import add_int_noise
from privpub.errors import ParameterError

__all__ = [
    "ahp_clusters",
    "ahp_min_error",
    "dp_group",
    "dp_group_deque",
    "dp_group_fast",
    "dp_group_quadratic",
    "dp_group_wavefront",
    "partition_cost",
    "publish_groups",
    "segment_cost",
    "stable_order",
]


@functools.cache
def _jit() -> ModuleType:
    """The compiled kernels (:mod:`privpub.histogram._jit`), imported on first use only.

    Numba is imported here rather than with the package, so ``import privpub`` stays fast. The
    kernels are cached on disk (``cache=True``): the first call in a fresh environment compiles
    them (about 2 s, once), later processes load them from the cache (tens of milliseconds).
    """
    from privpub.histogram import _jit as jit

    return jit


def _prefix(x: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Prefix sums of the centred values and their squares (length n + 1)."""
    d = x - x.mean()
    s1 = np.concatenate([[0.0], np.cumsum(d)])
    s2 = np.concatenate([[0.0], np.cumsum(d * d)])
    return s1, s2


def _check_grouping_args(x: ArrayLike, c: float, gamma: float) -> tuple[NDArray[np.float64], float, float]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ParameterError(f"x must be a non-empty 1-D array, got shape {arr.shape}", param="x")
    if not np.all(np.isfinite(arr)):
        raise ParameterError("x must be finite, got NaN or infinity", param="x")
    if arr.size > 1 and np.any(np.diff(arr) < 0):
        raise ParameterError("x must be sorted non-decreasing (the grouping cost is Monge only on sorted input)", param="x")
    c = float(c)
    gamma = float(gamma)
    if not (math.isfinite(c) and c >= 0):
        raise ParameterError(f"c must be finite and >= 0, got {c}", param="c")
    if not (math.isfinite(gamma) and gamma >= 0):
        raise ParameterError(f"gamma must be finite and >= 0, got {gamma}", param="gamma")
    return arr, c, gamma


def segment_cost(x: ArrayLike, lo: ArrayLike, hi: ArrayLike, c: float, gamma: float = 0.0) -> NDArray[np.float64]:
    """Vectorised segment costs ``w(lo, hi)`` of ``x[lo:hi]`` (half-open, ``lo < hi``).

    Examples
    --------
    >>> segment_cost([0.0, 1.0, 2.0], [0, 0], [1, 3], c=6.0).tolist()
    [6.0, 4.0]
    """
    arr = np.asarray(x, dtype=np.float64)
    s1, s2 = _prefix(arr)
    lo_a = np.asarray(lo, dtype=np.int64)
    hi_a = np.asarray(hi, dtype=np.int64)
    length = (hi_a - lo_a).astype(np.float64)
    a = s1[hi_a] - s1[lo_a]
    sse = np.maximum(s2[hi_a] - s2[lo_a] - a * a / length, 0.0)
    sse = np.where(length == 1, 0.0, sse)
    return np.asarray(sse + c / length + gamma, dtype=np.float64)


def partition_cost(x: ArrayLike, boundaries: ArrayLike, c: float, gamma: float = 0.0) -> float:
    """Total cost of the partition of ``x`` given by ``boundaries`` (``0 = b_0 < ... < b_K = n``).

    Examples
    --------
    >>> partition_cost([0.0, 0.0, 5.0], [0, 2, 3], c=2.0)
    3.0
    """
    b = np.asarray(boundaries, dtype=np.int64)
    n = np.asarray(x).size
    if b.ndim != 1 or b.size < 2 or b[0] != 0 or b[-1] != n or np.any(np.diff(b) <= 0):
        raise ParameterError(f"boundaries must increase strictly from 0 to n={n}, got {b.tolist()[:10]}", param="boundaries")
    return float(np.sum(segment_cost(x, b[:-1], b[1:], c, gamma)))


def dp_group_quadratic(x: ArrayLike, c: float, gamma: float = 0.0) -> tuple[float, NDArray[np.int64]]:
    """Optimal grouping of sorted ``x`` by the O(n^2) dynamic programme (test oracle).

    ``Q[0] = 0``, ``Q[j] = min_{i < j} Q[i] + w(i, j)``; O(n) memory, one vectorised row per
    target ``j``; ties go to the smallest ``i``.

    Returns
    -------
    cost : float
        ``Q[n]``.
    boundaries : ndarray of int64
        Group boundaries ``0 = b_0 < ... < b_K = n``.

    Examples
    --------
    >>> cost, b = dp_group_quadratic([0.0, 0.0, 0.0, 10.0], c=1.0)
    >>> round(cost, 6), b.tolist()
    (1.333333, [0, 3, 4])
    """
    arr, c, gamma = _check_grouping_args(x, c, gamma)
    n = arr.size
    s1, s2 = _prefix(arr)
    q = np.zeros(n + 1)
    back = np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        length = j - np.arange(j, dtype=np.float64)
        a = s1[j] - s1[:j]
        sse = np.maximum(s2[j] - s2[:j] - a * a / length, 0.0)
        sse[-1] = 0.0
        f = q[:j] + sse + c / length + gamma
        k = int(np.argmin(f))
        q[j] = f[k]
        back[j] = k
    return float(q[n]), _backtrack(back.tolist(), n)


#: sort vectors up to this size with NumPy's stable argsort (a few ms) rather than compile the
#: radix sort (about 0.8 s of CPU the first time); back-pointers of groupings up to this size are
#: followed in Python rather than by the compiled walk
_NUMPY_SORT_MAX = 1 << 17


def _backtrack(back: list[int], n: int) -> NDArray[np.int64]:
    out = [n]
    j = n
    while j > 0:
        j = back[j]
        out.append(j)
    return np.asarray(out[::-1], dtype=np.int64)


def dp_group_deque(x: ArrayLike, c: float, gamma: float = 0.0) -> tuple[float, NDArray[np.int64]]:
    """Optimal grouping of sorted ``x`` in O(n log n) time and O(n) memory (exact), deque version.

    On sorted input the segment cost satisfies the quadrangle inequality (histogram spec
    section 4), so a later candidate start that beats an earlier one for some target keeps
    beating it for every later target. A deque holds the candidate starts together with the
    first target from which each is best (Hirschberg and Larmore 1987; Galil and Giancarlo
    1989); a new candidate's take-over point is found by galloping (from the previous
    take-over distance) + binary search. The prefix sums are numpy; the sequential recurrence
    is compiled with Numba (:mod:`privpub.histogram._jit`): 0.10-0.14 s of CPU time for
    10^6 bins on each of the benchmarked count families (``docs/benchmarks.md``), where the
    pure-Python loop it replaces took seconds; it reproduces that loop's boundaries exactly
    (same floating-point expressions, same search, same ties).

    Returns the same optimal cost as :func:`dp_group_quadratic` (up to floating-point rounding
    of the prefix sums); on ties between equal-cost partitions the boundaries may differ (the
    later start wins a tie here, the earlier one in the reference).

    Examples
    --------
    >>> cost, b = dp_group_deque([0.0, 0.0, 0.0, 10.0], c=1.0)
    >>> round(cost, 6), b.tolist()
    (1.333333, [0, 3, 4])
    """
    arr, c, gamma = _check_grouping_args(x, c, gamma)
    return _deque(arr, c, gamma)


def _deque(arr: NDArray[np.float64], c: float, gamma: float) -> tuple[float, NDArray[np.int64]]:
    jit = _jit()
    s1, s2 = _prefix(arr)
    work = [np.zeros(s1.size)] + [np.zeros(s1.size, dtype=np.int64) for _ in range(3)]
    cost, back = jit.deque_group(s1, s2, float(c), float(gamma), *work)
    if arr.size <= _NUMPY_SORT_MAX:  # a short walk: no kernel to compile
        return float(cost), _backtrack(back.tolist(), arr.size)
    return float(cost), jit.backtrack(back, arr.size)


# ------------------------------------------------------------------------------------------
# wavefront: the same recurrence advanced a window of targets at a time, with numpy
# ------------------------------------------------------------------------------------------
def _row_minima(
    val: NDArray[np.float64],
    s1: NDArray[np.float64],
    s2: NDArray[np.float64],
    c: float,
    gamma: float,
    t_lo: int,
    t_hi: int,
    a0: int,
    b0: int,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Row minima of ``M[j, i] = val[i] + w(i, j)`` for targets ``j`` in ``[t_lo, t_hi)`` over
    candidates ``i`` in ``[a0, min(b0, j - 1)]`` (requires ``a0 < t_lo``); smallest argmin.

    ``w`` satisfies the quadrangle inequality on sorted input and adding ``val[i]`` keeps it,
    so the argmins are monotone in ``j``: divide and conquer on the rows, one numpy pass over
    all row intervals of a level (O((rows + candidates) log rows) work, log rows passes).
    """
    m = t_hi - t_lo
    best = np.empty(m)
    arg = np.empty(m, dtype=np.int64)
    rl = np.zeros(1, dtype=np.int64)
    rr = np.full(1, m, dtype=np.int64)
    ca = np.full(1, a0, dtype=np.int64)
    cb = np.full(1, b0, dtype=np.int64)
    while rl.size:
        mid = (rl + rr) >> 1
        j = mid + t_lo
        lens = np.minimum(cb, j - 1) - ca + 1
        starts = np.cumsum(lens) - lens
        idx = np.arange(int(lens.sum())) - np.repeat(starts - ca, lens)
        jr = np.repeat(j, lens)
        length = (jr - idx).astype(np.float64)
        a = s1[jr] - s1[idx]
        sse = s2[jr] - s2[idx] - a * a / length
        sse[(sse < 0.0) | (length == 1.0)] = 0.0
        f = val[idx] + sse + c / length + gamma
        mins = np.minimum.reduceat(f, starts)
        hit = np.flatnonzero(f <= np.repeat(mins, lens))
        am = idx[hit[np.searchsorted(hit, starts)]]
        best[mid] = mins
        arg[mid] = am
        left = mid > rl
        right = mid + 1 < rr
        rl, rr, ca, cb = (
            np.concatenate([rl[left], mid[right] + 1]),
            np.concatenate([mid[left], rr[right]]),
            np.concatenate([ca[left], am[right]]),
            np.concatenate([am[left], cb[right]]),
        )
    return best, arg


def _wavefront(arr: NDArray[np.float64], c: float, gamma: float) -> tuple[float, NDArray[np.int64]]:
    """Exact DP advanced by windows of targets.

    Invariant: ``E`` is final on ``[0, F]``. For the window ``(F, F + W]``, ``cross[j]`` is the
    exact best cost with the last group starting at ``<= F`` (candidates ``>= back[F]``, by
    monotonicity). Taking ``cross`` as tentative values, the best in-window start is computed
    for every target; targets before the first strict improvement ``p`` are final (their
    in-window candidates held exact values), and so is ``p`` itself. Each step finalises at
    least one target, about one group in practice.
    """
    n = arr.size
    s1, s2 = _prefix(arr)
    e = np.zeros(n + 1)
    back = np.zeros(n + 1, dtype=np.int64)
    val = np.empty(n + 1)
    final, width = 0, 64
    while final < n:
        hi = min(n, final + width)
        cross, carg = _row_minima(e, s1, s2, c, gamma, final + 1, hi + 1, int(back[final]), final)
        p = -1
        if hi - final >= 2:
            val[final + 1 : hi + 1] = cross
            inw, iarg = _row_minima(val, s1, s2, c, gamma, final + 2, hi + 1, final + 1, hi - 1)
            better = np.flatnonzero(inw < cross[1:])
            if better.size:
                p = final + 2 + int(better[0])
        if p < 0:
            e[final + 1 : hi + 1] = cross
            back[final + 1 : hi + 1] = carg
            width *= 2
            final = hi
        else:
            k = p - final
            e[final + 1 : p] = cross[: k - 1]
            back[final + 1 : p] = carg[: k - 1]
            e[p] = inw[k - 2]
            back[p] = iarg[k - 2]
            width = max(64, 2 * k)
            final = p
    return float(e[n]), _backtrack(back.tolist(), n)


def dp_group_wavefront(x: ArrayLike, c: float, gamma: float = 0.0) -> tuple[float, NDArray[np.int64]]:
    """Optimal grouping of sorted ``x``: exact, numpy-vectorised, about one numpy step per group.

    Each step solves the row minima of a window of targets by monotone divide and conquer
    (the cost is Monge on sorted input), so the Python-level work is proportional to the number
    of groups rather than to n. Fast when groups are long (large n, small epsilon); slower than
    :func:`dp_group_deque` when groups hold a handful of bins.

    Examples
    --------
    >>> cost, b = dp_group_wavefront([0.0, 0.0, 0.0, 10.0], c=1.0)
    >>> round(cost, 6), b.tolist()
    (1.333333, [0, 3, 4])
    """
    arr, c, gamma = _check_grouping_args(x, c, gamma)
    return _wavefront(arr, c, gamma)


def dp_group_fast(x: ArrayLike, c: float, gamma: float = 0.0) -> tuple[float, NDArray[np.int64]]:
    """Optimal grouping of sorted ``x`` (exact): the compiled deque (:func:`dp_group_deque`).

    O(n log n) in compiled code, so its time barely depends on the data (the numpy wavefront,
    which the ``"fast"`` path used above 5 * 10^4 bins until the deque was compiled, is fast
    only when groups are long). Returns the optimal cost of the O(n^2) reference
    :func:`dp_group_quadratic` (up to rounding).

    Examples
    --------
    >>> cost, b = dp_group_fast([0.0, 0.0, 0.0, 10.0], c=1.0)
    >>> round(cost, 6), b.tolist()
    (1.333333, [0, 3, 4])
    """
    arr, c, gamma = _check_grouping_args(x, c, gamma)
    return _deque(arr, c, gamma)


def stable_order(y: ArrayLike) -> NDArray[np.int64]:
    """``np.argsort(y, kind="stable")`` for a 1-D float vector, by a compiled radix sort.

    The order HPHP and AHP sort the noisy histogram by: ascending, equal values in bin order.
    Identical to NumPy's stable argsort (-0.0 equals 0.0, NaNs last in index order), 2-4x
    faster on 10^6 values; O(n) per 11-bit digit on which the values differ. Vectors of up to
    ``_NUMPY_SORT_MAX`` values go to NumPy's sort (nothing to compile).

    Examples
    --------
    >>> stable_order([2.0, -1.0, 2.0, 0.0]).tolist()
    [1, 3, 0, 2]
    """
    arr = np.ascontiguousarray(y, dtype=np.float64)
    if arr.ndim != 1:
        raise ParameterError(f"y must be a 1-D array, got shape {arr.shape}", param="y")
    if arr.size <= _NUMPY_SORT_MAX:  # NumPy's own sort: no compilation for small vectors
        small: NDArray[np.int64] = np.argsort(arr, kind="stable").astype(np.int64, copy=False)
        return small
    order: NDArray[np.int64] = _jit().stable_argsort(arr)
    return order


def dp_group(
    x: ArrayLike, c: float, gamma: float = 0.0, *, method: str = "fast"
) -> tuple[float, NDArray[np.int64]]:
    """Optimal grouping of sorted ``x`` with group cost ``SSE + c / |G| + gamma``.

    Parameters
    ----------
    x : array_like, shape (n,)
        Sorted (non-decreasing) finite values.
    c : float
        Laplace-error constant (``2 / epsilon2**2`` for continuous Laplace noise on a group sum).
    gamma : float
        Per-group constant (noise correction of the private HPHP), default 0.
    method : {"fast", "deque", "wavefront", "quadratic"}
        ``"fast"`` (default) and ``"deque"``: the compiled O(n log n) deque; ``"wavefront"``: the
        numpy wavefront (exact, fast only on long groups); ``"quadratic"``: the O(n^2) reference.

    Returns
    -------
    cost : float
    boundaries : ndarray of int64
    """
    if method == "fast":
        return dp_group_fast(x, c, gamma)
    if method == "deque":
        return dp_group_deque(x, c, gamma)
    if method == "wavefront":
        return dp_group_wavefront(x, c, gamma)
    if method == "quadratic":
        return dp_group_quadratic(x, c, gamma)
    raise ParameterError(f"method must be 'fast', 'deque', 'wavefront' or 'quadratic', got {method!r}", param="method")


# ------------------------------------------------------------------------------------------
# AHP greedy clustering (DPComp's ahp_fast.pyx, histogram spec section 5)
# ------------------------------------------------------------------------------------------
def ahp_min_error(
    prefix: list[float], run: list[int], j: int, n: int, c: float, *, use_runs: bool = True
) -> float:
    """AHP's optimistic cost ``err*(j)`` of opening a cluster at sorted position ``j``.

    ``min_L (x_j - mean(x[j:j+L]))**2 + c / L**2`` scanned over ``L = 1, 2, ...`` with DPComp's
    early-termination rule; with ``use_runs`` the run of values equal to ``x_j`` is skipped
    in one step (exact: inside the run the first term is 0 and the rule cannot fire).
    """
    xj = prefix[j + 1] - prefix[j]
    bound = c / float(n - j + 1) ** 2
    if use_runs:
        r = run[j]
        best = c / float(r * r)
        e1_prev = 0.0
        e2_prev = best
        length = r + 1
    else:
        best = c
        e1_prev = 0.0
        e2_prev = c
        length = 2
    while length <= n - j:
        mean = (prefix[j + length] - prefix[j]) / length
        e1 = (xj - mean) ** 2
        if e1 - e1_prev >= e2_prev - bound:
            break
        e2 = c / float(length * length)
        if e1 + e2 < best:
            best = e1 + e2
        e1_prev = e1
        e2_prev = e2
        length += 1
    return best


def ahp_clusters(x: ArrayLike, c: float, *, use_runs: bool = True) -> NDArray[np.int64]:
    """AHP's greedy clustering of sorted ``x``; returns boundaries ``0 = b_0 < ... < b_K = n``.

    ``err(s..j) = SSE(x[s..j]) + c / L``; cluster ``[s, j)`` is closed when extending it costs at
    least as much as opening a new one at its optimistic cost ``err*(j)``
    (:func:`ahp_min_error`).

    Examples
    --------
    >>> ahp_clusters([0.0, 0.0, 0.0, 50.0, 50.0], c=2.0).tolist()
    [0, 3, 5]
    """
    arr = np.asarray(x, dtype=np.float64)
    n = arr.size
    prefix = np.concatenate([[0.0], np.cumsum(arr)]).tolist()
    s1a, s2a = _prefix(arr)
    s1: list[float] = s1a.tolist()
    s2: list[float] = s2a.tolist()
    # run[j]: length of the run of values equal to x[j] starting at j
    run_a = np.ones(n, dtype=np.int64)
    if n > 1:
        eq = arr[1:] == arr[:-1]
        # right-to-left accumulation of equal neighbours
        idx = np.arange(n)
        brk = np.concatenate([~eq, [True]])  # True where a run ends at position k
        ends = np.flatnonzero(brk)
        end_of = ends[np.searchsorted(ends, idx)]
        run_a = end_of - idx + 1
    run: list[int] = run_a.tolist()
    bounds = [0]
    s = 0
    last = c
    for j in range(1, n):
        length = j - s + 1
        a = s1[j + 1] - s1[s]
        sse = s2[j + 1] - s2[s] - a * a / length
        if sse < 0.0:
            sse = 0.0
        now = sse + c / length
        if now >= last + ahp_min_error(prefix, run, j, n, c, use_runs=use_runs):
            bounds.append(j)
            s = j
            last = c
        else:
            last = now
    bounds.append(n)
    return np.asarray(bounds, dtype=np.int64)


# ------------------------------------------------------------------------------------------
# publishing
# ------------------------------------------------------------------------------------------
def publish_groups(
    values: ArrayLike,
    order: ArrayLike,
    boundaries: ArrayLike,
    noise: ArrayLike,
    *,
    clamp: bool = True,
) -> NDArray[np.float64]:
    """Spread noisy group sums evenly over each group's bins (post-processing of the noise).

    Parameters
    ----------
    values : array_like, shape (n,)
        The counts ``H`` (bin order).
    order : array_like, shape (n,)
        A permutation of ``range(n)``; group ``g`` is the bin set ``order[b_g:b_{g+1}]``.
    boundaries : array_like
        ``0 = b_0 < ... < b_K = n``.
    noise : array_like, shape (K,)
        One noise draw per group, added to the group sum.
    clamp : bool
        Clamp the published values at 0 (never increases the error, since ``H >= 0``).

    Returns
    -------
    ndarray of float64, shape (n,)
        ``(sum_G H + noise_G) / |G|`` on every bin of ``G``.

    Examples
    --------
    >>> publish_groups([4, 0, 2], [1, 2, 0], [0, 2, 3], [1.0, -5.0]).tolist()
    [0.0, 1.5, 1.5]
    """
    h = np.asarray(values)
    perm = np.asarray(order, dtype=np.int64)
    b = np.asarray(boundaries, dtype=np.int64)
    n = h.shape[0]
    if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
        raise ParameterError("order must be a permutation of range(n): the groups must partition the bins", param="order")
    if b.ndim != 1 or b.size < 2 or b[0] != 0 or b[-1] != n or np.any(np.diff(b) <= 0):
        raise ParameterError("boundaries must increase strictly from 0 to n: the groups must partition the bins", param="boundaries")
    z = np.asarray(noise)
    if z.shape != (b.size - 1,):
        raise ParameterError(f"noise must have one entry per group ({b.size - 1}), got shape {z.shape}", param="noise")
    sizes = np.diff(b)
    if z.dtype.kind in "iu" and h.dtype.kind in "iu":
        # integer noise on integer counts: exact group sums in int64, then the means (post-processing)
        sums = add_int_noise(np.add.reduceat(h[perm].astype(np.int64), b[:-1]), z.astype(np.int64))
        means = sums / sizes
    else:
        means = (np.add.reduceat(h[perm].astype(np.float64), b[:-1]) + z.astype(np.float64)) / sizes
    if clamp:
        means = np.maximum(means, 0.0)
    out = np.empty(n, dtype=np.float64)
    out[perm] = np.repeat(means, sizes)
    return out
