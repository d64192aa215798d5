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
