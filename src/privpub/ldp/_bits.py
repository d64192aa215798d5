"""Packed-bit kernels for unary encodings: exact Bernoulli bits 64 at a time, and column counts.

Pure functions on arrays; no validation.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["bernoulli_words", "column_bit_counts", "unpack_bits"]

_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_LANE = np.uint64(0x0101010101010101)


def bernoulli_words(n_words: int, threshold: int, bits: int, gen: np.random.Generator) -> NDArray[np.uint64]:
    """``n_words`` words whose bits are i.i.d. Bernoulli(``threshold / 2**bits``), exactly.

    Each bit compares a lazily drawn uniform ``U`` with ``threshold`` most-significant bit first;
    a bit is decided at the first position where they differ, so on average about two random
    bits per output bit are consumed (one 64-bit word per level and per still-undecided word).
    """
    res = np.zeros(n_words, dtype=np.uint64)
    und = np.full(n_words, _ONES, dtype=np.uint64)
    active: NDArray[np.intp] | None = None
    for level in range(bits):
        rest = threshold & ((1 << (bits - level)) - 1)
        if rest == 0:  # every remaining U >= threshold: undecided bits are 0
            break
        bit = (threshold >> (bits - 1 - level)) & 1
        # w is this level's bit of U for every cell (uniform, so w and ~w are interchangeable):
        # bit 1: cells with U-bit 0 are decided 1 (und & ~w == und ^ (und & w)), the rest go on;
        # bit 0: cells with U-bit 1 are decided 0, the rest go on.
        if active is None:
            w = gen.bit_generator.random_raw(n_words)
            np.bitwise_and(w, und, out=w)
            if bit:
                np.bitwise_xor(und, w, out=und)
                res |= und
            und = w
            if np.count_nonzero(und) < n_words // 8:
                active = np.flatnonzero(und)
        else:
            if active.size == 0:
                break
            w = gen.bit_generator.random_raw(active.size)
            u = und[active]
            nu = u & w
            if bit:
                res[active] |= u ^ nu
            und[active] = nu
            active = active[nu != 0]
    return res


def column_bit_counts(words: NDArray[np.uint64], n_bits: int) -> NDArray[np.int64]:
    """Per-bit-position counts of ones over the rows of a ``(n, W)`` uint64 array (SWAR).

    Rows are summed 255 at a time in byte lanes (no lane can overflow), then the lanes are
    widened and added up.
    """
    n, n_words = words.shape
    counts = np.zeros((n_words * 8, 8), dtype=np.int64)  # [byte position, bit in byte]
    group = 255
    n_full = n // group
    step = 256  # blocks of 255 rows per pass (bounds temporaries to ~256*255*W words)
    for b0 in range(0, n_full, step):
        b1 = min(n_full, b0 + step)
        blocks = words[b0 * group : b1 * group].reshape(b1 - b0, group, n_words)
        for b in range(8):
            lanes = ((blocks >> np.uint64(b)) & _LANE).sum(axis=1, dtype=np.uint64)
            counts[:, b] += lanes.view(np.uint8).sum(axis=0, dtype=np.int64)
    rest = words[n_full * group :]
    if rest.shape[0]:
        for b in range(8):
            lanes = ((rest >> np.uint64(b)) & _LANE).sum(axis=0, dtype=np.uint64)
            counts[:, b] += lanes.view(np.uint8)
    return counts.reshape(-1)[:n_bits]


def unpack_bits(words: NDArray[np.uint64], n_bits: int) -> NDArray[np.bool_]:
    """``(n, W)`` uint64 words to an ``(n, n_bits)`` bool array (bit ``j`` of the row is cell ``j``)."""
    as_bytes = np.ascontiguousarray(words).view(np.uint8)
    return np.unpackbits(as_bytes, axis=1, count=n_bits, bitorder="little").view(bool)
