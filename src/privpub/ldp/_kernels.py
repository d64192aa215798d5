"""Numba kernels of the local-DP oracles: unary-encoding reports 8 cells at a time, column counts
of packed reports, and OLH support counts. Pure functions on arrays; no validation.

Imported lazily (numba costs about half a second to import), compiled once and cached on disk.

Unary-encoding sampler
----------------------
Every non-own cell of a report is an independent Bernoulli(``q``) with ``q = T / 2**k`` exactly.
Eight cells form one byte ``o`` (bit ``b`` = cell ``8 j + b``), whose exact law is
``P[o] = q^|o| (1 - q)^(8 - |o|)``. The byte is drawn by inversion: with the exact cumulative
sums ``C_0 = 0 < C_1 < ... < C_256 = 1`` (integers over ``2**(8k)``), the byte is the ``o`` with
``C_o <= U < C_(o+1)`` for a uniform ``U`` read lazily, most significant bits first. The first 16
bits of ``U`` index a table: when the interval ``[i, i + 1) / 2**16`` lies inside one byte's
cell the table holds that byte (at most 255 of the 65536 intervals contain a boundary); otherwise
the following bits of ``U`` are drawn word by word from a *fallback* stream and compared with the
boundaries inside the interval, exactly, until the comparison is decided. The sampler therefore
consumes 16 bits per 8 cells (2 per cell, the expected cost of deciding one Bernoulli with a
lone comparison) plus rare fallback words, and its output law is exactly the product law.

Two passes per block of words keep the hot loop small: :func:`_bytes_fast` writes every word
whose four prefixes are unambiguous and records the others; :func:`_bytes_refine` resolves those
in increasing order, so the fallback words are consumed in an order that depends only on the
random stream.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from privpub.core import prepare_numba_cache as prepare

prepare()  # before the decorators: where the kernels are cached (see privpub.core._jitcache)

__all__ = [
    "OLH_BLOCK",
    "column_counts",
    "olh_support_enumerate",
    "olh_support_scan",
    "ue_bytes",
    "ue_own_cells",
]

_P = np.uint64((1 << 31) - 1)
_MASK16 = np.uint64(0xFFFF)


@njit(cache=True, nogil=True)
def _refine(
    a: int | np.int64,
    amb_off: NDArray[np.int64],
    amb_bounds: NDArray[np.uint64],
    fallback: NDArray[np.uint64],
    fb: int,
    vbuf: NDArray[np.uint64],
) -> tuple[int, int]:
    """Resolve ambiguous prefix ``a``: ``(number of its boundaries <= U, fallback words used)``,
    or ``(-1, 0)`` when the fallback stream runs out. ``U``'s next words are read lazily, most
    significant first, and compared lexicographically with the boundaries (sorted ascending);
    ``U`` equal to a boundary on every word is ``>=`` it (its remaining bits are >= 0)."""
    n_words = amb_bounds.shape[1]
    nv = 0
    count = 0
    for bi in range(amb_off[a], amb_off[a + 1]):
        ge = True
        for w in range(n_words):
            if w == nv:
                if fb + nv == fallback.size:
                    return -1, 0
                vbuf[nv] = fallback[fb + nv]
                nv += 1
            if vbuf[w] != amb_bounds[bi, w]:
                ge = vbuf[w] > amb_bounds[bi, w]
                break
        if not ge:
            break
        count += 1
    return count, nv


@njit(cache=True, nogil=True)
def _bytes_fast(
    raw: NDArray[np.uint64], table8: NDArray[np.uint8], out: NDArray[np.uint8], w0: int, w1: int,
    pending: NDArray[np.int64],
) -> int:
    """Write the four bytes of each whole word ``w0 <= w < w1`` of ``raw`` straight from ``table8``
    (the byte of each 16-bit prefix, ``0xFF`` for an ambiguous one); a word with a byte read as
    ``0xFF`` is not written but recorded in ``pending``. Returns the number recorded. Kept free of
    calls: refinement code inside this loop would cost it a good part of its speed."""
    k = 0
    for w in range(w0, w1):
        x = raw[w]
        t0 = table8[x & _MASK16]
        t1 = table8[(x >> np.uint64(16)) & _MASK16]
        t2 = table8[(x >> np.uint64(32)) & _MASK16]
        t3 = table8[x >> np.uint64(48)]
        if (t0 == 255) | (t1 == 255) | (t2 == 255) | (t3 == 255):
            pending[k] = w
            k += 1
            continue
        c = w << 2
        out[c] = t0
        out[c + 1] = t1
        out[c + 2] = t2
        out[c + 3] = t3
    return k


@njit(cache=True, nogil=True)
def _bytes_refine(
    raw: NDArray[np.uint64],
    table: NDArray[np.uint16],
    amb_base: NDArray[np.uint16],
    amb_off: NDArray[np.int64],
    amb_bounds: NDArray[np.uint64],
    fallback: NDArray[np.uint64],
    fb: int,
    out: NDArray[np.uint8],
    words: NDArray[np.int64],
    k: int,
    vbuf: NDArray[np.uint64],
) -> tuple[bool, int]:
    """Write the bytes of ``words[:k]`` (increasing; bytes past ``out.size`` skipped) from
    ``table``, refining ambiguous ones with ``fallback[fb:]``. Returns ``(done, fb)``; ``done`` is
    False when the fallback stream ran out."""
    n = out.size
    for i in range(k):
        w = words[i]
        x = raw[w]
        for j in range(4):
            c = 4 * w + j
            if c >= n:
                break
            t = np.int64(table[(x >> np.uint64(16 * j)) & _MASK16])
            if t >= 256:
                count, used = _refine(t - 256, amb_off, amb_bounds, fallback, fb, vbuf)
                if count < 0:
                    return False, fb
                fb += used
                t = np.int64(amb_base[t - 256]) + count
            out[c] = np.uint8(t)
    return True, fb


@njit(cache=True, nogil=True)
def ue_bytes(
    raw: NDArray[np.uint64],
    table8: NDArray[np.uint8],
    table: NDArray[np.uint16],
    amb_base: NDArray[np.uint16],
    amb_off: NDArray[np.int64],
    amb_bounds: NDArray[np.uint64],
    fallback: NDArray[np.uint64],
    out: NDArray[np.uint8],
    w_start: int,
    pending: NDArray[np.int64],
    vbuf: NDArray[np.uint64],
) -> tuple[int, int]:
    """Fill ``out`` with i.i.d. bytes of the product law (see the module docstring), from word
    ``w_start`` of ``raw`` on (byte ``c`` takes bits ``16 (c % 4) ... 16 (c % 4) + 15`` of
    ``raw[c // 4]`` as the first 16 bits of its uniform).

    Blocks of ``pending.size - 1`` words go through a fast pass (:func:`_bytes_fast`) and then a
    refinement of the words it set aside (:func:`_bytes_refine`), while they are still in cache.
    Returns ``(w, f)``: ``w`` is the number of raw words (``ceil(out.size / 4)``) when done, else
    the first word of the block whose refinement ran out of fallback words (call again from ``w``
    with ``fallback[f:]`` followed by fresh words: the block is redone from its first fallback
    word); ``f`` fallback words were consumed by the finished blocks.
    """
    n = out.size
    full = n >> 2
    total = (n + 3) >> 2
    block = pending.size - 1
    # an int64, not the literal 0: type inference would also compile the callees for Literal[int](0)
    fb: int = np.int64(0)  # type: ignore[assignment]
    for b0 in range(w_start, total, block):
        b1 = min(total, b0 + block)
        k = _bytes_fast(raw, table8, out, b0, min(b1, full), pending)
        if b1 > full:  # the last, partial word
            pending[k] = full
            k += 1
        done, fb_next = _bytes_refine(raw, table, amb_base, amb_off, amb_bounds, fallback, fb, out, pending, k, vbuf)
        if not done:
            return b0, fb
        fb = fb_next
    return total, fb


@njit(cache=True, nogil=True)
def ue_own_cells(
    out: NDArray[np.uint8],
    values: NDArray[np.int64],
    own: NDArray[np.uint8],
    complement: bool,
    tail: int,
) -> None:
    """Set each row's own cell: to ``own[i]`` (a Bernoulli(p) bit), or, when ``complement``, to the
    complement of the Bernoulli(q) bit already drawn there (``p = 1 - q``); clear the padding bits
    of the last byte (``tail`` is the mask of its valid bits)."""
    last = out.shape[1] - 1
    pad = np.uint8(tail)
    if complement:
        for i in range(out.shape[0]):
            v = values[i]
            out[i, v >> 3] ^= np.uint8(1 << (v & 7))
            out[i, last] &= pad
    else:
        for i in range(out.shape[0]):
            v = values[i]
            j = v >> 3
            sh = v & 7
            out[i, j] = (out[i, j] & np.uint8(~(1 << sh) & 0xFF)) | np.uint8(own[i] << sh)
            out[i, last] &= pad


_LANE = np.uint64(0x0101010101010101)
#: largest period (64-bit words per phase cycle) for which the carry-save counter is used
_CSA_MAX_PERIOD = 64


@njit(cache=True, nogil=True, inline="always")
def _csa(a: np.uint64, b: np.uint64, c: np.uint64) -> tuple[np.uint64, np.uint64]:
    """Carry-save adder of three bit vectors: ``(carry, sum)``."""
    u = a ^ b
    return (a & b) | (u & c), u ^ c


@njit(cache=True, nogil=True)
def _flush_lanes(acc: NDArray[np.uint64], width: int, weight: int, counts: NDArray[np.int64]) -> None:
    """Add byte-lane counters ``acc[bit, phase]`` (times ``weight``) to the column counts."""
    for b in range(8):
        for ph in range(acc.shape[1]):
            x = acc[b, ph]
            for j in range(8):
                counts[8 * ((8 * ph + j) % width) + b] += weight * np.int64((x >> np.uint64(8 * j)) & np.uint64(0xFF))
            acc[b, ph] = 0


@njit(cache=True, nogil=True)
def _add_plane(plane: NDArray[np.uint64], width: int, weight: int, counts: NDArray[np.int64]) -> None:
    """Add one bit plane of the carry-save counters (times ``weight``) to the column counts."""
    for ph in range(plane.size):
        x = plane[ph]
        for bit in range(64):
            if (x >> np.uint64(bit)) & np.uint64(1):
                counts[8 * ((8 * ph + (bit >> 3)) % width) + (bit & 7)] += weight


@njit(cache=True, nogil=True)
def column_counts(flat: NDArray[np.uint8], width: int, counts: NDArray[np.int64]) -> None:
    """Add the per-bit-position counts of ones of packed rows of ``width`` bytes, given as the flat
    byte stream ``flat`` (whole rows), to ``counts`` (length ``8 * width``).

    The stream is read as 64-bit words. Byte lane ``j`` of word ``k`` is column
    ``(8 k + j) mod width``, which depends only on the phase ``k mod P`` with
    ``P = width / gcd(width, 8)``: counters are kept per phase. For ``P <= 64`` a Harley-Seal
    carry-save tree folds 16 words of a phase into bit planes (ones, twos, fours, eights) and a
    carry of weight 16, which byte-lane counters (8 shifts, masks and adds) sum 255 times before
    they are flushed; for longer periods the byte-lane counters take every word directly.
    """
    g = 8
    while width % g:
        g //= 2
    period = width // g
    n_words = flat.size // 8
    words = flat[: 8 * n_words].view(np.uint64)
    acc = np.zeros((8, period), dtype=np.uint64)
    done = 0  # words counted
    if period <= _CSA_MAX_PERIOD:
        ones = np.zeros(period, dtype=np.uint64)
        twos = np.zeros(period, dtype=np.uint64)
        fours = np.zeros(period, dtype=np.uint64)
        eights = np.zeros(period, dtype=np.uint64)
        p = period
        adds = 0
        while done + 16 * p <= n_words:
            for ph in range(p):
                k = done + ph
                o, t, f, e = ones[ph], twos[ph], fours[ph], eights[ph]
                ta, o = _csa(o, words[k], words[k + p])
                tb, o = _csa(o, words[k + 2 * p], words[k + 3 * p])
                fa, t = _csa(t, ta, tb)
                ta, o = _csa(o, words[k + 4 * p], words[k + 5 * p])
                tb, o = _csa(o, words[k + 6 * p], words[k + 7 * p])
                fb, t = _csa(t, ta, tb)
                ea, f = _csa(f, fa, fb)
                ta, o = _csa(o, words[k + 8 * p], words[k + 9 * p])
                tb, o = _csa(o, words[k + 10 * p], words[k + 11 * p])
                fa, t = _csa(t, ta, tb)
                ta, o = _csa(o, words[k + 12 * p], words[k + 13 * p])
                tb, o = _csa(o, words[k + 14 * p], words[k + 15 * p])
                fb, t = _csa(t, ta, tb)
                eb, f = _csa(f, fa, fb)
                sixteens, e = _csa(e, ea, eb)
                ones[ph], twos[ph], fours[ph], eights[ph] = o, t, f, e
                for b in range(8):
                    acc[b, ph] += (sixteens >> np.uint64(b)) & _LANE
            done += 16 * p
            adds += 1
            if adds == 255:
                _flush_lanes(acc, width, 16, counts)
                adds = 0
        _flush_lanes(acc, width, 16, counts)
        _add_plane(ones, width, 1, counts)
        _add_plane(twos, width, 2, counts)
        _add_plane(fours, width, 4, counts)
        _add_plane(eights, width, 8, counts)
    while done < n_words:
        groups = min(255, (n_words - done) // period)
        if groups == 0:
            break
        for k in range(done, done + groups * period, period):
            row = words[k : k + period]
            for b in range(8):
                accb = acc[b]
                for ph in range(period):
                    accb[ph] += (row[ph] >> np.uint64(b)) & _LANE
        done += groups * period
        _flush_lanes(acc, width, 1, counts)
    for c in range(8 * done, flat.size):  # the last, partial period of words
        x = flat[c]
        col = c % width
        for b in range(8):
            counts[8 * col + b] += (x >> b) & 1


@njit(cache=True, nogil=True)
def _mod_p(x: np.uint64) -> np.uint64:
    """``x mod (2**31 - 1)`` for ``x < 2**63`` (two Mersenne folds, then one subtraction)."""
    s = (x & _P) + (x >> np.uint64(31))
    s = (s & _P) + (s >> np.uint64(31))
    return s - _P if s >= _P else s


#: values per block of :func:`olh_support_scan` (its uint32 counters stay in the L1 cache)
OLH_BLOCK = 2048


@njit(cache=True, nogil=True)
def olh_support_scan(
    a: NDArray[np.int64], b: NDArray[np.int64], y: NDArray[np.int64], g: int, d: int, counts: NDArray[np.int64],
    acc: NDArray[np.uint32],
) -> None:
    """Add the OLH support counts of users ``(a, b, y)`` to ``counts`` (``g < 2**31``, fewer than
    ``2**32`` users).

    User ``u`` supports ``v`` iff ``((a v + b) mod P) mod g == y``, tested as ``g`` divides
    ``s + g - y`` with ``s = (a v + b) mod P`` (Lemire's divisibility test: ``x * M <= M - 1``
    modulo 2**64 with ``M = floor((2**64 - 1) / g) + 1``, exact for ``x < 2**32``). Values are
    visited in blocks of ``acc.size`` (zeros, ``OLH_BLOCK``; given by the caller, since allocating
    it here would compile an allocator for the dtype too) whose counters stay in cache; the loop
    over a block vectorises. ``acc`` is left at zero.
    """
    gg = np.uint64(g)
    m = np.uint64(0xFFFFFFFFFFFFFFFF) // gg + np.uint64(1)
    lim = m - np.uint64(1)
    block = acc.size
    for v0 in range(0, d, block):
        width = min(d, v0 + block) - v0
        for u in range(a.size):
            au = np.uint64(a[u])
            bu = np.uint64(b[u]) + au * np.uint64(v0)  # < 2**62 + 2**31
            off = gg - np.uint64(y[u])
            for i in range(width):
                s = _mod_p(au * np.uint64(i) + bu)
                acc[i] += np.uint32((s + off) * m <= lim)
        for i in range(width):
            counts[v0 + i] += acc[i]
            acc[i] = 0


@njit(cache=True, nogil=True)
def _inverse_mod_p(a: np.uint64) -> np.uint64:
    """``a**(P - 2) mod P``, the inverse of ``a`` modulo the prime ``P`` (``0 < a < P``)."""
    result = np.uint64(1)
    base = a
    e = (1 << 31) - 3
    while e:
        if e & 1:
            result = _mod_p(result * base)
        base = _mod_p(base * base)
        e >>= 1
    return result


@njit(cache=True, nogil=True)
def olh_support_enumerate(
    a: NDArray[np.int64], b: NDArray[np.int64], y: NDArray[np.int64], g: int, d: int, counts: NDArray[np.int64]
) -> None:
    """Add the OLH support counts by enumerating each user's hash pre-image of its bucket.

    ``h(v) == y`` iff ``t = (a v + b) mod P`` is one of ``y, y + g, ... < P``, i.e.
    ``v = a^-1 (t - b) mod P``; cost ``ceil(P / g)`` per user instead of ``d``.
    """
    p = np.uint64((1 << 31) - 1)
    gg = np.uint64(g)
    dd = np.uint64(d)
    for u in range(a.size):
        inv = _inverse_mod_p(np.uint64(a[u]))
        bu = np.uint64(b[u])
        t = np.uint64(y[u])
        while t < p:
            v = _mod_p(inv * ((t + p - bu) if t < bu else (t - bu)))
            if v < dd:
                counts[v] += 1
            t += gg
