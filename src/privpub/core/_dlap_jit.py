# mypy: disable-error-code="no-untyped-def,no-untyped-call"
"""Numba kernel of the exact discrete Laplace sampler (see :mod:`privpub.core._dlap`).

Integer arithmetic only: every random decision compares a uniform integer with an integer
threshold. The randomness is the caller's ``numpy.random.Generator``: its bit generator's
64-bit words are read directly (Numba's binding of NumPy's bit-generator interface), so the
same seed gives the same draws and the generator's state advances as with any NumPy call.

A word is used as 63 uniform bits ``w`` (the top bit is dropped), so all arithmetic stays in
signed 64-bit integers. ``w`` uniform on ``[0, L)`` with ``L = k * D`` gives ``R = w // k``
uniform on ``[0, D)``, and ``R < T`` exactly when ``w < k * T``: thresholds are stored
pre-multiplied by ``k`` and no division is needed (a word ``>= L`` is rejected and redrawn).
Small uniforms come from pools: sign bits 63 to a word, and the base-720 digits that decide
Bernoulli(exp(-1)) six to a word.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.np.random.generator_core import next_uint64

from privpub.core._jitcache import prepare

prepare()  # before the decorators: where the kernels are cached (see privpub.core._jitcache)

_ONE = np.uint64(1)
_TOP = np.int64(1) << np.int64(62)  # 2**62: bound on the denominators and on |draws|
_MAXW = np.int64(0x7FFFFFFFFFFFFFFF)  # 2**63 - 1, the largest 63-bit word
# Bernoulli(exp(-1)) digits: R uniform on [0, 6!) decides the first 6 steps of the loop
_E1_BASE = np.int64(720)
_E1_PER_WORD = 6
_E1_LIM = (_MAXW // _E1_BASE**6) * _E1_BASE**6  # a kept word holds 6 independent digits
# steps of a loop decided without branches (the rest has probability <= 1/6!)
_BRANCHLESS = 6


@njit(cache=True, inline="always")
def _word(bitgen):
    """63 uniform bits as a non-negative int64."""
    return np.int64(next_uint64(bitgen) >> _ONE)


@njit(cache=True, inline="always")
def _bernoulli_ratio(bitgen, num, den):
    """Bernoulli(num / den) for integers ``0 <= num <= den <= 2**62``: ``w // k < num``."""
    k = _MAXW // den
    lim = k * den
    while True:
        w = _word(bitgen)
        if w < lim:
            return w < num * k


@njit(cache=True)
def _loop_from(bitgen, u, t, k):
    """[CKS20]_ Alg. 1 for gamma = u / t, from step ``k`` (all steps before it succeeded).

    Step ``k`` succeeds with probability ``gamma / k``; returns the first failing ``k``. For
    ``t * k`` beyond 2**62 the step is the product of Bernoulli(u / t) and Bernoulli(1 / k).
    """
    while True:
        if t <= _TOP // k:
            ok = _bernoulli_ratio(bitgen, u, t * k)
        else:
            ok = _bernoulli_ratio(bitgen, u, t) and _bernoulli_ratio(bitgen, 1, k)
        if not ok:
            return k
        k += 1


@njit(cache=True, inline="always")
def _bernoulli_exp1(bitgen, pool, left):
    """Exact Bernoulli(exp(-1)) from one base-720 digit ([CKS20]_ Alg. 1 at gamma = 1).

    ``P[K > j] = 1 / j!``; with ``R`` uniform on ``[0, 6!)``, ``K > j`` exactly when
    ``R < 720 / j!`` (``j <= 6``; always for ``j = 1``). The result is ``K`` odd; ``R = 0``
    (``K > 6``, probability 1/720) continues the loop exactly from step 7. The digit pool
    ``(pool, left)`` is passed in and returned (six digits to a word).
    """
    if left == 0:
        while True:
            pool = _word(bitgen)
            if pool < _E1_LIM:
                break
        left = _E1_PER_WORD
    d = pool % _E1_BASE
    pool //= _E1_BASE
    left -= 1
    if d == 0:
        return (_loop_from(bitgen, 1, 1, 7) & 1) == 1, pool, left
    return _exp1_odd(d), pool, left


@njit(cache=True, inline="always")
def _exp1_odd(d):
    """For a digit ``1 <= d < 720``: is ``K = 1 + #{j <= 6: d < 720 / j!}`` odd? (No branches.)"""
    # K = 2 + [d < 360] + [d < 120] + [d < 30] + [d < 6]  (d < 720 always, d < 1 never)
    return ((np.int64(d < 360) + np.int64(d < 120) + np.int64(d < 30) + np.int64(d < 6)) & 1) == 1


@njit(cache=True, inline="always")
def _bernoulli_exp_frac(bitgen, r, t, kt, lim_t, lim, thr):
    """Exact Bernoulli(exp(-r / t)) for a fixed ``0 <= r < t``: the first ``m`` steps in one word.

    ``P[K > j] = (r / t)^j / j!``; with ``R`` uniform on ``[0, t^m m!)``, ``K > j`` exactly
    when ``R < r^j t^(m-j) m! / j!`` (``thr[j - 1]``, pre-multiplied). ``m = 0`` (``t`` beyond
    about 2**28): step 1 against ``r * kt``, then the plain loop.
    """
    m = thr.size
    if m == 0:
        while True:
            w = _word(bitgen)
            if w < lim_t:
                break
        k = 1 if w >= r * kt else _loop_from(bitgen, r, t, 2)
        return (k & 1) == 1
    while True:
        w = _word(bitgen)
        if w < lim:
            break
    k = 1
    for j in range(min(m, _BRANCHLESS)):
        k += np.int64(w < thr[j])
    if k > _BRANCHLESS:
        while k <= m and w < thr[k - 1]:
            k += 1
    if k > m:
        k = _loop_from(bitgen, r, t, m + 1)
    return (k & 1) == 1


@njit(cache=True, inline="always")
def _low_part(bitgen, t, kt, lim_t, lim_u, kd, kc):
    """``U`` on ``[0, t)`` with ``P[U = u]`` proportional to ``exp(-u / t)``, exactly ([CKS20]_ Alg. 2).

    One word gives both the uniform proposal ``u = w // (k t^m m!)`` and the remainder that
    decides the first ``m`` steps of the Bernoulli(exp(-u / t)) acceptance loop: ``K > j``
    exactly when the remainder is below ``u^j * kc[j - 1]`` with
    ``kc[j - 1] = k t^(m-j) m! / j!``. ``m = 0`` (``t`` beyond about 2**28): ``u = w // kt``
    from one word, step 1 from a second, then the plain loop.
    """
    m = kc.size
    while True:
        if m == 0:
            while True:
                w = _word(bitgen)
                if w < lim_t:
                    break
            u = w // kt
            while True:
                w = _word(bitgen)
                if w < lim_t:
                    break
            k = 1 if w >= u * kt else _loop_from(bitgen, u, t, 2)
        else:
            w = _word(bitgen)
            if w >= lim_u:
                continue
            u = w // kd
            rem = w - u * kd
            # K = 1 + #{j <= m: rem < u^j kc[j - 1]} (the thresholds fall with j); the first
            # min(m, 6) comparisons without branches, the rest (probability <= 1/720) in a loop
            k = 1
            power = u
            for j in range(min(m, _BRANCHLESS)):
                k += np.int64(rem < power * kc[j])
                power *= u  # u^(j+1) <= t^m: no overflow (t^(m+1) m! k <= 2**63)
            if k > _BRANCHLESS:
                while k <= m and rem < power * kc[k - 1]:
                    k += 1
                    power *= u
            if k > m:
                k = _loop_from(bitgen, u, t, m + 1)
        if k & 1:
            return u


@njit(cache=True, inline="always")
def _magnitude(bitgen, pool, left, vmax, t, s, s_shift, kt, lim_t, lim_u, kd, kc, g0, r, lim_f, thr_f):
    """One exact draw of ``Y >= 0`` with ``P[Y >= y] = exp(-y s / t)``; returns ``(y, pool, left)``,
    ``y = -1`` if ``V > vmax`` (``U + t V`` would pass 2**62: probability below 2**-1000). Two
    exact routes:

    * ``s < t`` (scale above 1, [CKS20]_ Alg. 2): ``Y = (U + t V) // s`` with ``U`` from
      :func:`_low_part` and ``V`` the number of successes of Bernoulli(exp(-1)) before a failure.
    * ``s >= t``: ``Y`` is the number of successes of Bernoulli(exp(-s / t)) before a failure,
      with ``s / t = g0 + r / t``: ``g0`` Bernoulli(exp(-1)) and one Bernoulli(exp(-r / t)),
      stopping at the first failure.
    """
    if s < t:
        u = 0 if t == 1 else _low_part(bitgen, t, kt, lim_t, lim_u, kd, kc)
        v = 0
        while True:
            ok, pool, left = _bernoulli_exp1(bitgen, pool, left)
            if not ok:
                break
            v += 1
        if v > vmax:
            return -1, pool, left
        x = u + t * v
        if s == 1:
            return x, pool, left
        if s_shift >= 0:
            return x >> s_shift, pool, left
        return x // s, pool, left
    y = 0
    while True:
        ok = True
        for _ in range(g0):
            ok, pool, left = _bernoulli_exp1(bitgen, pool, left)
            if not ok:
                break
        if ok and r != 0:
            ok = _bernoulli_exp_frac(bitgen, r, t, kt, lim_t, lim_f, thr_f)
        if not ok:
            return y, pool, left
        y += 1


@njit(cache=True)
def fill(gen, out, t, s, s_shift, kt, lim_t, lim_u, kd, kc, g0, r, lim_f, thr_f):
    """Fill ``out`` with exact discrete Laplace draws of scale ``t / s`` (``P[Z = z]`` proportional
    to ``exp(-|z| s / t)``); returns False if a draw overflowed int64 (probability below 2**-1000).

    Each draw: a sign bit (63 to a word) and a magnitude ``Y`` drawn as in :func:`_magnitude`
    (written out here: the inlined call costs about 10% in speed); ``(-, 0)`` is rejected and
    redrawn ([CKS20]_ Alg. 2).
    """
    bitgen = gen.bit_generator
    pool = np.int64(0)  # base-720 digits for Bernoulli(exp(-1)) ...
    left = 0  # ... and how many are left in it
    bits = np.int64(0)  # sign bits ...
    nbits = 0  # ... and how many are left
    cks = s < t
    vmax = (_TOP - t) // t  # U + t V stays below 2**62
    for i in range(out.size):
        while True:
            if nbits == 0:
                bits = _word(bitgen)
                nbits = 63
            negative = (bits & 1) == 1
            bits >>= 1
            nbits -= 1
            if cks:
                u = 0 if t == 1 else _low_part(bitgen, t, kt, lim_t, lim_u, kd, kc)
                v = 0
                while True:
                    ok, pool, left = _bernoulli_exp1(bitgen, pool, left)
                    if not ok:
                        break
                    v += 1
                if v > vmax:
                    return False
                x = u + t * v
                if s == 1:
                    y = x
                elif s_shift >= 0:
                    y = x >> s_shift
                else:
                    y = x // s
            else:
                y = 0
                while True:
                    ok = True
                    for _ in range(g0):
                        ok, pool, left = _bernoulli_exp1(bitgen, pool, left)
                        if not ok:
                            break
                    if ok and r != 0:
                        ok = _bernoulli_exp_frac(bitgen, r, t, kt, lim_t, lim_f, thr_f)
                    if not ok:
                        break
                    y += 1
            if not (negative and y == 0):
                break
        out[i] = -y if negative else y
    return True


@njit(cache=True)
def fill_geometric(gen, out, t, s, s_shift, kt, lim_t, lim_u, kd, kc, g0, r, lim_f, thr_f):
    """Fill ``out`` with exact draws of ``Y >= 0``, ``P[Y = y] = (1 - q) q^y``, ``q = exp(-s / t)``
    (:func:`_magnitude`); returns False on an int64 overflow (probability below 2**-1000)."""
    bitgen = gen.bit_generator
    pool = np.int64(0)
    left = 0
    vmax = (_TOP - t) // t
    for i in range(out.size):
        y, pool, left = _magnitude(bitgen, pool, left, vmax, t, s, s_shift, kt, lim_t, lim_u, kd, kc, g0,
                                   r, lim_f, thr_f)
        if y < 0:
            return False
        out[i] = y
    return True


@njit(cache=True)
def fill_bernoulli_exp(gen, out, num, den):
    """``out[i]`` = an exact Bernoulli(exp(-num[i] / den)) draw, ``0 <= num[i] <= den <= 2**62``
    ([CKS20]_ Alg. 1: ``K`` odd, every step from a fresh word)."""
    bitgen = gen.bit_generator
    for i in range(out.size):
        out[i] = (_loop_from(bitgen, num[i], den, 1) & 1) == 1


# ---------------------------------------------------------------------------------------------
# Inversion by integer thresholds (privpub.core._dlap_table): one word and a table look-up a draw
# ---------------------------------------------------------------------------------------------
#: state of fill_table between calls: sign pool, its count, pending phase and value, tie table and index
ST_BITS, ST_NBITS, ST_PHASE, ST_VALUE, ST_KIND, ST_K = 0, 1, 2, 3, 4, 5
#: ST_PHASE: a fresh draw; the magnitude is ST_VALUE plus a geometric draw; the magnitude is ST_VALUE
PHASE_FRESH, PHASE_TAIL, PHASE_KNOWN = 0, 1, 2


@njit(cache=True, inline="always")
def _look_up(w, thr, guide, shift):
    """``m = #{k >= 1: w < thr[k]}`` (thresholds decreasing, sentinel -1 after the last); the
    second value is True when ``w == thr[m + 1]`` (a tie: the next bits of the uniform decide)."""
    m = guide[w >> shift]
    while w < thr[m + 1]:
        m += 1
    return m, w == thr[m + 1]


@njit(cache=True)
def fill_table(gen, out, start, st, laplace, lap, lap_guide, geo, geo_guide, drop, shift):
    """Fill ``out[start:]`` with exact discrete Laplace draws (``laplace``) or geometric draws
    from the threshold tables of :func:`privpub.core._dlap_table.inverse_tables`.

    Returns the index of the draw interrupted by a tie (``st[ST_KIND]`` table, ``st[ST_K]``
    threshold, ``st[ST_VALUE]`` the magnitude so far), ``out.size`` when done, or -1 on an int64
    overflow (probability below 2**-1000). A call resumes draw ``start`` in phase ``st[ST_PHASE]``.
    The uniform words are ``63 - drop`` bits (``drop`` 0 but in tests); ``shift`` leaves a
    word's guide index.
    """
    bitgen = gen.bit_generator
    bits = st[ST_BITS]
    nbits = st[ST_NBITS]
    n_lap = lap.size - 2
    n_geo = geo.size - 2
    for i in range(start, out.size):
        phase = st[ST_PHASE]
        st[ST_PHASE] = PHASE_FRESH
        acc = st[ST_VALUE]
        st[ST_VALUE] = 0
        if phase == PHASE_FRESH:
            acc = 0
            if laplace:
                m, tie = _look_up(_word(bitgen) >> drop, lap, lap_guide, shift)
                if tie:
                    st[ST_BITS], st[ST_NBITS], st[ST_KIND], st[ST_K], st[ST_VALUE] = bits, nbits, 0, m + 1, 0
                    return i
                if m < n_lap:
                    phase = PHASE_KNOWN
                    acc = m
                else:
                    phase = PHASE_TAIL
                    acc = n_lap
            else:
                phase = PHASE_TAIL
        if phase == PHASE_TAIL:
            while True:
                m, tie = _look_up(_word(bitgen) >> drop, geo, geo_guide, shift)
                if tie:
                    st[ST_BITS], st[ST_NBITS], st[ST_KIND], st[ST_K], st[ST_VALUE] = bits, nbits, 1, m + 1, acc
                    return i
                acc += m
                if m < n_geo:
                    break
                if acc > _TOP:
                    return -1
        if laplace and acc != 0:
            if nbits == 0:
                bits = _word(bitgen)
                nbits = 63
            if bits & 1:
                acc = -acc
            bits >>= 1
            nbits -= 1
        out[i] = acc
    st[ST_BITS], st[ST_NBITS] = bits, nbits
    return out.size
