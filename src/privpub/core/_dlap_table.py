"""Table-driven exact sampling of the discrete Laplace and the geometric law (inversion by integer thresholds).

For ``q = exp(-s / t)`` the magnitude ``Y`` of the discrete Laplace and the geometric ``G``
have the survival functions

* ``P[|Z| >= k] = 2 q^k / (1 + q)`` (``k >= 1``) and
* ``P[G >= k] = q^k`` (``k >= 0``).

With ``X = (w + u) / 2**63`` uniform on ``[0, 1)`` (``w`` a uniform 63-bit word, ``u`` the
uniform real of the bits that would follow it), ``|Z| >= k`` exactly when
``w + u < c_k = 2**63 P[|Z| >= k]``, i.e. when ``w < floor(c_k)``, or ``w == floor(c_k)`` and
``u < frac(c_k)``. The integers ``T_k = floor(c_k)`` (``k = 1..L``) are computed once per scale
with integer interval arithmetic (:func:`exp_neg_bounds`), so that one word and a table look-up
give the draw; the event ``w == T_k`` (probability ``2**-63`` per threshold) is resolved exactly
by :func:`resolve_tie`, which draws the following bits of ``X`` and compares them with ``c_k``
computed to as many bits as needed (``c_k`` is irrational, so this ends with probability 1,
after about two more words). ``|Z| >= L`` (probability about ``2**-5``) continues with the
geometric ``|Z| - L`` (memoryless), drawn from the second table in the same way.

No floating-point number is used: the output law is exactly the discrete Laplace (geometric) of
the rational scale ``t / s``. :mod:`privpub.core._dlap_jit` holds the compiled look-up.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

__all__ = ["InverseTables", "exp_neg_bounds", "guide_bits", "inverse_tables", "resolve_tie", "table_length",
           "threshold_bounds"]

_WORD_BITS = 63
_WORD_LIMIT = 1 << _WORD_BITS
#: guard bits of the first attempt (a threshold within 2**-40 of an integer retries with more)
_GUARD = 96
#: table length: L ~ _TAIL_NUM / _TAIL_DEN * t / s gives P[tail] = exp(-L s / t) <= 2**-5
_TAIL_NUM, _TAIL_DEN = 3466, 1000
#: longest table (scales t / s above about _MAX_LEN / 3.5 use the loop sampler of _dlap_jit)
MAX_LEN = 1 << 13
#: look-up cells: the top GUIDE_BITS bits of a word index the first candidate
GUIDE_BITS = 10


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def exp_neg_bounds(num: int, den: int, prec: int) -> tuple[int, int]:
    """Integers ``lo <= 2**prec * exp(-num / den) <= hi`` for integers ``num >= 0, den >= 1``.

    ``exp(num / den)`` is bracketed by its Taylor series at ``z = num / (den 2**r) <= 1/2``
    (partial sum below, partial sum plus twice the next term above), inverted, and squared
    ``r`` times, every operation rounded outwards in fixed point with ``prec + r + 64`` bits.
    """
    if num == 0:
        return 1 << prec, 1 << prec
    r = 0
    while num * 2 > den << r:  # z = num / (den 2**r) <= 1/2
        r += 1
    wbits = prec + 2 * r + 64
    one = 1 << wbits
    z_lo = (num << wbits) // (den << r)
    z_hi = _ceil_div(num << wbits, den << r)
    s_lo = s_hi = one
    term_lo = term_hi = one
    j = 1
    while True:
        term_lo = (term_lo * z_lo) // (j * one)
        term_hi = _ceil_div(term_hi * z_hi, j * one)
        if term_hi <= 1:  # the tail after this term is at most 2 * term_hi
            s_lo += term_lo
            s_hi += 3 * term_hi
            break
        s_lo += term_lo
        s_hi += term_hi
        j += 1
    lo = (one * one) // s_hi  # exp(-z) in [one^2 / s_hi, one^2 / s_lo]
    hi = _ceil_div(one * one, s_lo)
    for _ in range(r):
        lo = (lo * lo) >> wbits
        hi = _ceil_div(hi * hi, one)
    shift = wbits - prec
    return lo >> shift, _ceil_div(hi, 1 << shift)


def threshold_bounds(kind: int, k: int, t: int, s: int, prec: int, bits: int = _WORD_BITS) -> tuple[int, int]:
    """Integers ``lo <= 2**prec c_k <= hi`` for ``c_k = 2**bits P[|Z| >= k]`` (``kind`` 0, ``k >= 1``)
    or ``c_k = 2**bits q^k`` (``kind`` 1), ``q = exp(-s / t)``."""
    q_lo, q_hi = exp_neg_bounds(k * s, t, prec + 8)
    big = 1 << (prec + 8)
    if kind == 1:
        return q_lo << bits >> 8, _ceil_div(q_hi << bits, 1 << 8)
    p_lo, p_hi = exp_neg_bounds(s, t, prec + 8)
    # 2 q^k / (1 + q), scaled by 2**(63 + prec): outward-rounded quotients
    lo = (q_lo << (bits + 1 + prec)) // (big + p_hi)
    hi = _ceil_div(q_hi << (bits + 1 + prec), big + p_lo)
    return lo, hi


def _thresholds(kind: int, t: int, s: int, length: int, bits: int) -> list[int]:
    """``[floor(c_k) for k = 1..]`` while strictly decreasing and positive (at least one, at most ``length``).

    ``q^k`` is bracketed by powers of the bounds on ``q`` (outward-rounded products), so a table
    costs one exponential; a floor left undecided by the bounds retries with twice the bits.
    """
    prec = _GUARD + length.bit_length()
    while True:
        wbits = prec + bits + 1
        one = 1 << wbits
        q_lo, q_hi = exp_neg_bounds(s, t, wbits)
        if kind == 0:  # c_k = q^k 2**(bits + 1) / (1 + q)
            f_lo = (one << (bits + 1 + prec)) // (one + q_hi)
            f_hi = _ceil_div(one << (bits + 1 + prec), one + q_lo)
        else:  # c_k = q^k 2**bits
            f_lo = f_hi = 1 << (bits + prec)
        out: list[int] = []
        ok = True
        pk_lo, pk_hi = one, one
        for k in range(1, length + 1):
            pk_lo = (pk_lo * q_lo) >> wbits
            pk_hi = _ceil_div(pk_hi * q_hi, one)
            lo, hi = (pk_lo * f_lo) >> wbits, _ceil_div(pk_hi * f_hi, one)  # 2**prec c_k in [lo, hi]
            floor = lo >> prec  # c_k is irrational: lo <= 2**prec c_k < hi
            if floor != (hi - 1) >> prec:  # the floor is not yet decided
                ok = False
                break
            if k > 1 and (floor < 1 or floor >= out[-1]):
                break
            out.append(floor)
        if ok:
            return out
        prec *= 2


class InverseTables(NamedTuple):
    """Thresholds of the magnitude (``lap``) and geometric (``geo``) tables with their guides.

    ``lap[k] = floor(2**63 P[|Z| >= k])`` and ``geo[k] = floor(2**63 q^k)`` for ``k = 1..L``,
    with ``[0]`` unused and a sentinel ``-1`` at ``[L + 1]``; ``guide[i]`` is the number of
    thresholds at or above the end of look-up cell ``i`` (``(i + 1) 2**(63 - GUIDE_BITS)``).
    """

    lap: NDArray[np.int64]
    lap_guide: NDArray[np.int64]
    geo: NDArray[np.int64]
    geo_guide: NDArray[np.int64]


def guide_bits(bits: int) -> int:
    """Bits of a word that index the guide table."""
    return min(GUIDE_BITS, bits)


def _table(values: list[int], bits: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    arr = np.array([0, *values, -1], dtype=np.int64)
    asc = np.array(values[::-1], dtype=np.int64)
    g = guide_bits(bits)
    ends = np.arange(1, 1 << g, dtype=np.int64) << (bits - g)  # the last cell ends at 2**bits
    guide = np.zeros(1 << g, dtype=np.int64)
    guide[:-1] = asc.size - np.searchsorted(asc, ends, side="left")
    return arr, guide


def table_length(t: int, s: int) -> int:
    """The number of thresholds wanted for scale ``t / s`` (tail probability about ``2**-5``)."""
    return max(1, _ceil_div(_TAIL_NUM * t, _TAIL_DEN * s))


@functools.lru_cache(maxsize=64)
def inverse_tables(t: int, s: int, bits: int = _WORD_BITS) -> InverseTables:
    """The two tables of scale ``t / s`` (``table_length(t, s) <= MAX_LEN``; cached) for uniform
    words of ``bits`` bits (63; tests use short words, whose ties are frequent)."""
    length = table_length(t, s)
    lap, lap_guide = _table(_thresholds(0, t, s, length, bits), bits)
    geo, geo_guide = _table(_thresholds(1, t, s, length, bits), bits)
    return InverseTables(lap, lap_guide, geo, geo_guide)


def resolve_tie(gen: np.random.Generator, kind: int, k: int, whole: int, t: int, s: int,
                bits: int = _WORD_BITS) -> bool:
    """Is ``u < c_k - whole``, for ``u`` the uniform real of fresh 63-bit words drawn from ``gen``?

    Called when a word equals ``whole = floor(c_k)``; draws words and computes ``c_k`` to more bits
    until the comparison is decided (``c_k`` is irrational: never equal).
    """
    ubits, un = 0, 0
    prec = 2 * _WORD_BITS
    while True:
        ubits = (ubits << _WORD_BITS) | int(gen.integers(0, _WORD_LIMIT, dtype=np.uint64))
        un += _WORD_BITS
        while True:
            lo, hi = threshold_bounds(kind, k, t, s, prec, bits)
            f_lo, f_hi = lo - (whole << prec), hi - (whole << prec)  # frac(c_k) 2**prec in [f_lo, f_hi]
            u_lo, u_hi = ubits << (prec - un), (ubits + 1) << (prec - un)  # u 2**prec in [u_lo, u_hi)
            if u_hi <= f_lo:
                return True
            if u_lo >= f_hi:
                return False
            if f_hi - f_lo < (1 << (prec - un)):  # c_k is known better than u: draw more bits
                break
            prec *= 2
        prec = max(prec, un + 2 * _WORD_BITS)
