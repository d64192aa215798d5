# mypy: disable-error-code="no-untyped-def,no-untyped-call"
"""Numba kernels of privpub.histogram (compiled on first use, cached on disk).

Imported lazily by :mod:`privpub.histogram._kernels`, so ``import privpub`` never loads Numba.
The functions are pure array code: no randomness, no validation (the callers validate).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from privpub.core import prepare_numba_cache as prepare

prepare()  # before the decorators: where the kernels are cached (see privpub.core._jitcache)


@njit(cache=True, nogil=True)
def _beats(s1, s2, e, c, j, b, t):
    """``cost(j, t) <= cost(b, t)`` (without the common gamma), in the deque's exact float order."""
    lj = t - j
    a = s1[t] - s1[j]
    sj = s2[t] - s2[j] - a * a / lj
    if sj < 0.0 or lj == 1:
        sj = 0.0
    lb = t - b
    a = s1[t] - s1[b]
    sb = s2[t] - s2[b] - a * a / lb
    if sb < 0.0:
        sb = 0.0
    return e[j] + sj + c / lj <= e[b] + sb + c / lb


@njit(cache=True, nogil=True)
def deque_group(s1, s2, c, gamma, e, back, qi, qs):
    """Exact optimal grouping of a sorted vector from its centred prefix sums ``s1``, ``s2``.

    The deque algorithm of :func:`privpub.histogram.dp_group_deque` (Hirschberg and Larmore
    1987; Galil and Giancarlo 1989), statement for statement: the same floating-point
    expressions in the same order and the same galloping search, so it returns the same
    boundaries (ties included) as the pure-Python kernel it replaced. Returns ``(Q[n], back)``.
    The caller gives the work arrays, zeros of ``s1.size`` entries (allocating them here would
    compile NumPy's allocators into the kernel, half its compile time): ``e`` (float64), the
    back-pointers ``back``, the deque of candidates ``qi`` and the first target from which each
    is the best ``qs`` (int64).
    """
    n = s1.size - 1
    head = 0
    tail = 1
    qs[0] = 1
    guess = 1
    for j in range(1, n + 1):
        while tail - head >= 2 and qs[head + 1] <= j:
            head += 1
        b = qi[head]
        length = j - b
        a = s1[j] - s1[b]
        sse = s2[j] - s2[b] - a * a / length
        if sse < 0.0 or length == 1:
            sse = 0.0
        e[j] = e[b] + sse + c / length + gamma
        back[j] = b
        if j == n:
            break
        while tail > head:
            b = qi[tail - 1]
            s = qs[tail - 1]
            if s <= j:
                s = j + 1
            if _beats(s1, s2, e, c, j, b, s):
                tail -= 1
                continue
            # smallest t in (s, n] with beats(j, b, t): gallop, then bisect
            lo = s
            hi = -1
            step = guess  # start near the previous take-over distance
            while True:
                t = s + step
                if t >= n:
                    if _beats(s1, s2, e, c, j, b, n):
                        hi = n
                    break
                if _beats(s1, s2, e, c, j, b, t):
                    hi = t
                    break
                lo = t
                step += step
            if hi > 0:
                while hi - lo > 1:
                    mid = (lo + hi) >> 1
                    if _beats(s1, s2, e, c, j, b, mid):
                        hi = mid
                    else:
                        lo = mid
                qi[tail] = j
                qs[tail] = hi
                tail += 1
                guess = (hi - s + 1) >> 1
                if guess == 0:
                    guess = 1
            break
        if tail == head:
            qi[tail] = j
            qs[tail] = j + 1
            tail += 1
    return e[n], back


@njit(cache=True, nogil=True)
def backtrack(back, n):
    """Boundaries ``0 = b_0 < ... < b_K = n`` from the back-pointers."""
    k = 1
    j = n
    while j > 0:
        j = back[j]
        k += 1
    out = np.empty(k, dtype=np.int64)
    j = n
    for i in range(k - 1, -1, -1):
        out[i] = j
        if j > 0:
            j = back[j]
    return out


_RADIX_BITS = 11
_RADIX = 1 << _RADIX_BITS
_SIGN = np.uint64(1) << np.uint64(63)
_NAN_KEY = np.uint64(0xFFF8000000000000)  # above the key of +inf


@njit(cache=True, nogil=True)
def stable_argsort(y):
    """``np.argsort(y, kind="stable")`` for float64 ``y``: least-significant-digit radix sort.

    Each value is mapped to an unsigned key with the same order (sign-magnitude to offset
    binary; -0.0 is keyed as 0.0 and every NaN as one key above +inf, as NumPy orders them);
    LSD radix sort on 11-bit digits is stable, so equal values keep their index order. Digits
    on which all keys agree are skipped (integer-valued floats need about three passes).
    """
    n = y.size
    keys = np.empty(n, dtype=np.uint64)
    for i in range(n):
        v = y[i]
        if np.isnan(v):
            keys[i] = _NAN_KEY
            continue
        bits = np.float64(v + 0.0).view(np.uint64)  # v + 0.0 turns -0.0 into 0.0
        keys[i] = ~bits if bits & _SIGN else bits | _SIGN
    order = np.arange(n, dtype=np.int64)
    if n < 2:
        return order
    spread = np.uint64(0)  # the bits on which the keys differ
    k0 = keys[0]
    for i in range(n):
        spread |= keys[i] ^ k0
    order_buf = np.empty(n, dtype=np.int64)
    keys_buf = np.empty(n, dtype=np.uint64)
    count = np.empty(_RADIX, dtype=np.int64)
    mask = np.uint64(_RADIX - 1)
    for shift in range(0, 64, _RADIX_BITS):
        sh = np.uint64(shift)
        if (spread >> sh) & mask == 0:
            continue
        count[:] = 0
        for i in range(n):
            count[(keys[i] >> sh) & mask] += 1
        total = 0
        for d in range(_RADIX):
            cnt = count[d]
            count[d] = total
            total += cnt
        for i in range(n):
            k = keys[i]
            d = (k >> sh) & mask
            pos = count[d]
            count[d] = pos + 1
            keys_buf[pos] = k
            order_buf[pos] = order[i]
        keys, keys_buf = keys_buf, keys
        order, order_buf = order_buf, order
    return order


# ---------------------------------------------------------------------------------------------
# DAWA's stage 2 (privpub.histogram._dawa): the tree over the buckets, Greedy-H, least squares
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def dawa_tree(k):
    """Breadth-first binary tree over ``k`` buckets: ``spans[v] = (lo, hi)``, ``children[v] = (c1, c2)``
    (``(-1, -1)`` for a leaf); the left child holds ``ceil((hi - lo) / 2)`` buckets."""
    m = 2 * k - 1
    spans = np.empty((m, 2), dtype=np.int64)
    children = np.full((m, 2), -1, dtype=np.int64)
    spans[0, 0] = 0
    spans[0, 1] = k
    count = 1
    for v in range(m):
        lo = spans[v, 0]
        hi = spans[v, 1]
        if hi - lo > 1:
            mid = lo + (hi - lo + 1) // 2
            children[v, 0] = count
            children[v, 1] = count + 1
            spans[count, 0] = lo
            spans[count, 1] = mid
            spans[count + 1, 0] = mid
            spans[count + 1, 1] = hi
            count += 2
    return spans, children


@njit(cache=True, nogil=True)
def _range_gram(n, b, u, lo, hi):
    """``g^T (W^T W) g`` for all ranges of ``n`` bins, ``g`` = ``u[t]`` on the bins of bucket ``t``, ``lo <= t < hi``."""
    start = b[lo]
    end = b[hi]
    length = end - start
    g = np.empty(length)
    for t in range(lo, hi):
        for i in range(b[t], b[t + 1]):
            g[i - start] = u[t]
    right = np.empty(length)  # sum_{j > i} (n - j) g_j
    acc = 0.0
    for i in range(length - 1, -1, -1):
        right[i] = acc
        acc += (n - (start + i)) * g[i]
    left = 0.0  # sum_{j <= i} (j + 1) g_j
    total = 0.0
    for i in range(length):
        pos = start + i
        left += (pos + 1.0) * g[i]
        total += g[i] * ((n - pos) * left + (pos + 1.0) * right[i])
    return total


@njit(cache=True, nogil=True)
def subtree_heights(children):
    """Levels of each node's subtree (a leaf: 1); nodes in breadth-first order, children after parents."""
    m = children.shape[0]
    h = np.ones(m)
    for v in range(m - 1, -1, -1):
        c1 = children[v, 0]
        if c1 >= 0:
            h[v] = 1.0 + max(h[c1], h[children[v, 1]])
    return h


@njit(cache=True, nogil=True)
def greedy_h(b, n, spans, children, grid, fixed, decay):
    """Greedy-H's per-node split ``p`` (bottom-up), the resulting query weights and their exact
    all-ranges error; see :func:`privpub.histogram.greedy_h_weights`.

    ``fixed[v] >= 0`` imposes node ``v``'s split instead of searching the grid. ``decay`` applies
    DPBench's heuristic (the parent's own query counts ``2^(-depth/2)`` in the search, and the
    decayed objective is carried up, as ``greedyH.py``). The returned error is exact for fixed
    splits and for the search without decay; re-run with ``fixed = p_choice`` for the exact error
    of a decayed search.
    """
    m = spans.shape[0]
    k = b.size - 1
    u = np.ones(k)  # u of each processed node, stored on its buckets (children are disjoint)
    err = np.zeros(m)
    kk = np.zeros(m)
    p_choice = np.ones(m)
    ones = np.ones(k)
    depth = np.zeros(m)
    for v in range(m):
        if children[v, 0] >= 0:
            depth[children[v, 0]] = depth[v] + 1.0
            depth[children[v, 1]] = depth[v] + 1.0
    for v in range(m - 1, -1, -1):
        lo = spans[v, 0]
        hi = spans[v, 1]
        c1 = children[v, 0]
        if c1 < 0:
            err[v] = _range_gram(n, b, ones, lo, hi)
            kk[v] = 1.0
            continue
        c2 = children[v, 1]
        ks = kk[c1] + kk[c2]
        t = err[c1] + err[c2]
        q = _range_gram(n, b, u, lo, hi)
        searched = fixed[v] < 0
        best = 0.0
        if not searched:
            pj = fixed[v]
        else:
            dec = 2.0 ** (-depth[v] / 2.0) if decay else 1.0
            qd = q
            if decay:  # only the cross-children part of q is decayed (DPBench's greedyH.py)
                q1 = _range_gram(n, b, u, spans[c1, 0], spans[c1, 1]) + _range_gram(n, b, u, spans[c2, 0],
                                                                                    spans[c2, 1])
                qd = (q - q1) * dec + q1
            best = np.inf
            pj = 1.0
            for j in range(grid.size):
                p = grid[j]
                a2 = (1.0 - p) * (1.0 - p) * dec
                e = (t - a2 * qd / (p * p + a2 * ks)) / (p * p)
                if e < best:
                    best = e
                    pj = p
        a2 = (1.0 - pj) * (1.0 - pj)
        denom = pj * pj + a2 * ks
        # a searched node carries the searched objective up (with decay: DPBench's decayed one)
        err[v] = best if searched else (t - a2 * q / denom) / (pj * pj)
        kk[v] = ks / denom
        for s in range(lo, hi):
            u[s] /= denom
        p_choice[v] = pj
    weights = np.zeros(m)
    scale = np.ones(m)
    for v in range(m):
        c1 = children[v, 0]
        if c1 < 0:
            weights[v] = scale[v]
        else:
            weights[v] = scale[v] * (1.0 - p_choice[v])
            scale[c1] = scale[v] * p_choice[v]
            scale[children[v, 1]] = scale[v] * p_choice[v]
    return weights, err[0], p_choice


@njit(cache=True, nogil=True)
def tree_least_squares(children, w, y):
    """Two-pass generalised least squares on a tree; see :func:`privpub.histogram.tree_least_squares`."""
    m = w.size
    est = np.zeros(m)
    var = np.zeros(m)
    for v in range(m - 1, -1, -1):
        c1 = children[v, 0]
        if c1 < 0:
            est[v] = y[v] / w[v]
            var[v] = 1.0 / (w[v] * w[v])
            continue
        c2 = children[v, 1]
        se = est[c1] + est[c2]
        sv = var[c1] + var[c2]
        if w[v] > 0:
            prec = 1.0 / sv + w[v] * w[v]
            est[v] = (se / sv + y[v] * w[v]) / prec
            var[v] = 1.0 / prec
        else:
            est[v] = se
            var[v] = sv
    final = est.copy()
    for v in range(m):
        c1 = children[v, 0]
        if c1 < 0:
            continue
        c2 = children[v, 1]
        r = final[v] - est[c1] - est[c2]
        tot = var[c1] + var[c2]
        final[c1] = est[c1] + r * var[c1] / tot
        final[c2] = est[c2] + r * var[c2] / tot
    return final
