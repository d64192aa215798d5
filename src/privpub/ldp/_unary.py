"""Unary encodings: symmetric (basic one-hot RAPPOR, SUE) and optimised (OUE)."""

from __future__ import annotations

import functools
import math
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import (
    Accountant,
    RNGLike,
    as_generator,
    check_epsilon,
    check_probability,
    check_working_set,
    frame_backend,
    require_operation,
)
from privpub.errors import DomainError, ParameterError
from privpub.ldp._base import (
    N_THREADS,
    Dyadic,
    FrequencyOracle,
    bernoulli_exact,
    dyadic_up,
    flip_probability,
    run_chunks,
)

__all__ = ["OUE", "SUE", "UnaryEncoding", "sue_epsilon", "sue_flip_probability"]

#: report bytes per work chunk (each chunk has its own spawned generator; threads share chunks)
_CHUNK_BYTES = 1 << 19
#: packed rows per chunk of the column counter
_COUNT_ROWS = 1 << 16
#: count packed reports of at most this many bytes in NumPy (a byte histogram per column, a few
#: ms) instead of the compiled kernel, whose first compilation costs about 3 s of CPU
_NUMPY_COUNT_BYTES = 1 << 21
#: the bits of every byte value, little-endian: ``_BYTE_BITS[b, j]`` is bit ``j`` of ``b``
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little").astype(np.int64)
#: refinement words drawn up front: this multiple of the expected number of ambiguous bytes, plus
#: _FALLBACK_WORDS (the size of each further draw when they run out)
_FALLBACK_SCALE = 2.0
_FALLBACK_WORDS = 64
#: raw words per block of the byte sampler (fast pass, then refinement of that block)
_BLOCK_WORDS = 8192
#: reports of at most this many bytes are drawn in NumPy, larger ones by the Numba kernels (the
#: same bytes from the same stream): a device's few reports never import or compile Numba (issue 27)
_NUMPY_MAX_BYTES = 1 << 16


@dataclass(frozen=True)
class _ByteSampler:
    """Tables of the exact 8-cells-at-a-time Bernoulli(q) sampler (see ``_kernels``)."""

    table: NDArray[np.uint16]  # 16-bit prefix -> byte, or 256 + index of an ambiguous prefix
    table8: NDArray[np.uint8]  # the same as bytes, ambiguous prefixes -> 0xFF (check `table`)
    amb_base: NDArray[np.uint16]  # byte at the start of each ambiguous prefix's interval
    amb_off: NDArray[np.int64]  # boundaries of ambiguous prefix a: amb_off[a] ... amb_off[a + 1]
    amb_bounds: NDArray[np.uint64]  # the boundaries below the prefix, as 64-bit words (MSB first)
    ambiguous: float  # fraction of prefixes that need fallback bits


@functools.lru_cache(maxsize=64)
def _byte_sampler(numerator: int, bits: int) -> _ByteSampler:
    """Inversion tables for a byte of 8 i.i.d. Bernoulli(``numerator / 2**bits``) bits.

    The cumulative sums ``C_o`` of ``P[byte = o] = q^|o| (1 - q)^(8 - |o|)`` are exact integers
    over ``2**(8 bits)``.
    """
    if bits < 2:  # at least 16 bits of cumulative sums: the table reads 16-bit prefixes
        numerator, bits = numerator << (2 - bits), 2
    one = 1 << bits
    weight = [numerator**c * (one - numerator) ** (8 - c) for c in range(9)]
    cdf = [0]
    for o in range(256):
        cdf.append(cdf[-1] + weight[o.bit_count()])
    assert cdf[-1] == 1 << (8 * bits)
    shift = 8 * bits - 16  # bits of U below its 16-bit prefix
    inner = cdf[1:256]
    # prefix i starts in byte #{o >= 1 : C_o <= i * 2**shift}
    first = np.array([-(-c >> shift) for c in inner], dtype=np.int64)
    table = np.searchsorted(first, np.arange(1 << 16), side="right").astype(np.uint16)
    by_prefix: dict[int, list[int]] = {}
    for c in inner:
        rem = c & ((1 << shift) - 1)
        if rem:  # a boundary strictly inside prefix c >> shift
            by_prefix.setdefault(c >> shift, []).append(rem)
    n_words = -(-shift // 64)
    pad = 64 * n_words - shift
    base, off, bounds = [], [0], []
    for a, (prefix, rems) in enumerate(sorted(by_prefix.items())):
        base.append(int(table[prefix]))
        table[prefix] = 256 + a
        for rem in rems:
            v = rem << pad
            bounds.append([(v >> (64 * (n_words - 1 - w))) & 0xFFFFFFFFFFFFFFFF for w in range(n_words)])
        off.append(len(bounds))
    return _ByteSampler(
        table,
        np.where(table < 256, table, 255).astype(np.uint8),
        np.array(base, dtype=np.uint16),
        np.array(off, dtype=np.int64),
        np.array(bounds, dtype=np.uint64).reshape(len(bounds), n_words),
        len(by_prefix) / (1 << 16),
    )


def _fill_bytes(out: NDArray[np.uint8], q: Dyadic, gen: np.random.Generator, *, compiled: bool | None = None) -> None:
    """Fill a contiguous byte array with i.i.d. bytes of 8 Bernoulli(q) bits, exactly.

    Draws ``ceil(size / 4)`` raw words (16 bits per byte), then the refinement words in order of
    the bytes that need them; the output depends only on ``gen``'s stream. ``compiled`` chooses
    the Numba kernel (True) or the NumPy sampler (False; the same bytes from the same stream);
    None takes NumPy up to :data:`_NUMPY_MAX_BYTES` (a device's reports: no Numba import).
    """
    smp = _byte_sampler(q.numerator, q.bits)
    flat = out.reshape(-1)
    raw = gen.bit_generator.random_raw((flat.size + 3) // 4)
    fallback = gen.bit_generator.random_raw(int(_FALLBACK_SCALE * smp.ambiguous * flat.size) + _FALLBACK_WORDS)
    if not (flat.size > _NUMPY_MAX_BYTES if compiled is None else compiled):
        _fill_bytes_numpy(flat, smp, raw, fallback, gen)
        return
    from privpub.ldp import _kernels

    vbuf = np.empty(smp.amb_bounds.shape[1], dtype=np.uint64)
    pending = np.empty(_BLOCK_WORDS + 1, dtype=np.int64)
    total = (flat.size + 3) // 4
    word = 0
    while True:
        word, used = _kernels.ue_bytes(raw, smp.table8, smp.table, smp.amb_base, smp.amb_off, smp.amb_bounds,
                                       fallback, flat, word, pending, vbuf)
        fallback = fallback[used:]
        if word == total:
            return
        fallback = np.concatenate([fallback, gen.bit_generator.random_raw(_FALLBACK_WORDS)])


def _fill_bytes_numpy(flat: NDArray[np.uint8], smp: _ByteSampler, raw: NDArray[np.uint64],
                      fallback: NDArray[np.uint64], gen: np.random.Generator) -> int:
    """:func:`_fill_bytes` without Numba: the table in one NumPy pass, the ambiguous bytes in order.

    Byte ``c`` reads the 16-bit prefix ``c % 4`` of ``raw[c // 4]`` (the little-endian 16-bit
    view); each ambiguous byte, in increasing ``c``, reads further words of ``U`` from the
    fallback stream, lazily, as :func:`privpub.ldp._kernels.ue_bytes` does, and the stream is
    extended by ``_FALLBACK_WORDS`` fresh words whenever it runs out, so both draw the same words
    from ``gen`` and write the same bytes. Ambiguous prefixes are at most 255 of 65536, so the
    Python loop is short for a device's reports. Returns the number of fallback words read.
    """
    prefixes = raw.astype("<u8", copy=False).view("<u2")[: flat.size]
    t = smp.table[prefixes]
    flat[:] = t.astype(np.uint8)  # ambiguous bytes are overwritten below
    words: list[int] = fallback.tolist()
    fb = 0
    n_words = smp.amb_bounds.shape[1]
    for c in np.flatnonzero(t >= 256).tolist():
        a = int(t[c]) - 256
        u: list[int] = []  # the words of U read so far, most significant first
        count = 0
        for bound in smp.amb_bounds[smp.amb_off[a] : smp.amb_off[a + 1]].tolist():
            ge = True
            for w in range(n_words):
                if w == len(u):
                    while fb + len(u) >= len(words):
                        words += gen.bit_generator.random_raw(_FALLBACK_WORDS).tolist()
                    u.append(words[fb + len(u)])
                if u[w] != bound[w]:
                    ge = u[w] > bound[w]
                    break
            if not ge:
                break
            count += 1
        fb += len(u)
        flat[c] = int(smp.amb_base[a]) + count
    return fb


def _own_cells_numpy(out: NDArray[np.uint8], values: NDArray[np.int64], own: NDArray[np.uint8], complement: bool,
                     tail: int) -> None:
    """:func:`privpub.ldp._kernels.ue_own_cells` in NumPy (one row per user, so no index repeats)."""
    rows = np.arange(out.shape[0])
    col = values >> 3
    shift = (values & 7).astype(np.uint8)
    bit = np.left_shift(np.uint8(1), shift)
    if complement:
        out[rows, col] ^= bit
    else:
        out[rows, col] = (out[rows, col] & ~bit) | np.left_shift(own.astype(np.uint8), shift)
    out[:, -1] &= np.uint8(tail)


def sue_flip_probability(epsilon: float) -> float:
    """RAPPOR flip probability ``f = 2 / (1 + e^(eps/2))`` giving epsilon-LDP for a one-hot vector."""
    half = check_epsilon(epsilon) / 2.0
    return 2.0 * math.exp(-half) / (1.0 + math.exp(-half))


def sue_epsilon(f: float) -> float:
    """The LDP epsilon of one-hot RAPPOR with flip probability ``f``: ``2 ln((1 - f/2) / (f/2))``."""
    ff = check_probability(f, "f")
    if ff / 2.0 == 0.0:
        raise ParameterError(f"f must be a flip probability whose half is representable, got {ff!r}", param="f")
    return 2.0 * math.log((1.0 - ff / 2.0) / (ff / 2.0))


@dataclass(frozen=True, kw_only=True)
class UnaryEncoding(FrequencyOracle):
    """One-hot encode the value, then report each bit independently: a 1 stays 1 with probability
    ``p``, a 0 becomes 1 with probability ``q``.

    Reports are bit-packed by default: an ``(n, ceil(domain_size / 8))`` uint8 array, bit ``j``
    of a row (little-endian bit order, ``np.unpackbits(..., bitorder="little")``) is cell ``j``;
    ``perturb(..., packed=False)`` gives the ``(n, domain_size)`` bool array instead (8x the
    memory, same draws). :meth:`aggregate` and :meth:`estimate` accept both, and also rows
    packed into uint64 words (``(n, ceil(domain_size / 64))``, the same bits in little-endian
    words).
    """

    @abstractmethod
    def _dyadic(self, epsilon: float | None) -> tuple[Dyadic, Dyadic]:
        """The realised ``(p, q)`` as exact dyadic thresholds."""

    def _exact_probabilities(self, epsilon: float | None) -> tuple[Fraction, Fraction]:
        p, q = self._dyadic(epsilon)
        return p.fraction, q.fraction

    def _worst_ratio(self, epsilon: float | None) -> Fraction:
        p, q = self._exact_probabilities(epsilon)
        return p * (1 - q) / ((1 - p) * q)

    @property
    def packed_width(self) -> int:
        """Bytes per user of a packed report: ``ceil(domain_size / 8)``."""
        return (self.domain_size + 7) // 8

    def perturb(
        self,
        values: ArrayLike,
        *,
        epsilon: float | None = None,
        rng: RNGLike = None,
        packed: bool = True,
        accountant: Accountant | None = None,
        note: str = "",
    ) -> NDArray[Any]:
        """Client side: randomised one-hot vectors of all users.

        Parameters
        ----------
        values : array_like of int, shape (n,)
            Each user's value in ``{0, ..., domain_size - 1}``.
        epsilon : float
            Privacy parameter (SUE: may be omitted when ``f`` was given).
        rng : int, Generator or None
            Randomness. The output depends only on the seed, not on the number of threads.
        packed : bool
            True (default): an ``(n, ceil(domain_size / 8))`` uint8 array with the bits in
            little-endian bit order (``np.unpackbits(..., bitorder="little")``); padding bits
            are 0. False: the same reports as an ``(n, domain_size)`` bool array (8x larger).

        accountant : Accountant, optional
            Charged ``epsilon`` for the users' reports before drawing (default: the active one).
        note : str
            Recorded with the charge.

        Notes
        -----
        Every cell is an exact Bernoulli draw with the dyadic probabilities of
        :meth:`probabilities`: other cells 8 at a time by exact inversion of their joint law
        (16 random bits per byte plus rare refinement bits), the own cell by an exact
        Bernoulli(``p``) bit (OUE: one fair bit; SUE: the complement of a Bernoulli(``q``)
        bit, since ``p = 1 - q``).
        """
        v = self._values(values)
        p, q = self._dyadic(epsilon)
        # peak per user (tracemalloc, 10^4..10^6 cells): the packed report plus chunk temporaries,
        # 0.13-0.27 bytes per cell packed and 1.13 unpacked (the bool copy); with a margin
        check_working_set(v.size, self.packed_width * (2.5 if packed else 10.0) + 8,
                          f"{type(self).__name__}(domain_size={self.domain_size}).perturb", "domain_size or the number of values",
                          unit="users", fixed=2 * N_THREADS * _CHUNK_BYTES)
        gen = as_generator(rng)
        self._charge(epsilon, v.size, accountant, note)
        reports = self._randomise(v, p, q, gen)
        if packed:
            return reports
        return np.unpackbits(reports, axis=1, count=self.domain_size, bitorder="little").view(bool)

    def _randomise(self, v: NDArray[np.int64], p: Dyadic, q: Dyadic, gen: np.random.Generator) -> NDArray[np.uint8]:
        """Packed reports of the users holding ``v`` (chunks of rows, one spawned generator each)."""
        width = self.packed_width
        v = np.ascontiguousarray(v)  # one layout: the kernel compiles once (a column view would add an 'A' variant)
        n = v.size
        out = np.empty((n, width), dtype=np.uint8)
        compiled = out.size > _NUMPY_MAX_BYTES
        own_cells: Callable[[NDArray[np.uint8], NDArray[np.int64], NDArray[np.uint8], bool, int], None]
        if compiled:
            from privpub.ldp import _kernels

            own_cells = _kernels.ue_own_cells
        else:
            own_cells = _own_cells_numpy
        rows = max(1, _CHUNK_BYTES // width)
        starts = list(range(0, n, rows))
        gens = gen.spawn(len(starts))
        complement = p == q.complement()
        fair = p == Dyadic(1, 1)
        _byte_sampler(q.numerator, q.bits)  # build the tables once, before the threads
        tail = (1 << (self.domain_size % 8 or 8)) - 1

        def work(k: int) -> None:
            s, g = starts[k], gens[k]
            e = min(n, s + rows)
            block = out[s:e]
            _fill_bytes(block, q, g, compiled=compiled)
            if complement:
                own = np.empty(0, dtype=np.uint8)
            elif fair:
                words = g.bit_generator.random_raw((e - s + 63) // 64)
                own = np.unpackbits(words.view(np.uint8), count=e - s, bitorder="little")
            else:
                own = bernoulli_exact(p, e - s, g).view(np.uint8)
            own_cells(block, v[s:e], own, complement, tail)

        run_chunks(work, len(starts))
        return out

    def aggregate(self, reports: ArrayLike, *, epsilon: float | None = None) -> NDArray[np.int64]:
        """Support counts (ones per column) of the users' reports.

        Accepts packed ``(n, ceil(d / 8))`` uint8 rows (the default of :meth:`perturb`), packed
        ``(n, ceil(d / 64))`` uint64 rows, or ``(n, d)`` bool / 0-1 integer rows. Padding bits
        of packed rows are ignored. A ``pyspark.sql.DataFrame`` with a binary column ``report``
        of packed rows is counted in Spark (``privpub[spark]``, :mod:`privpub.spark`).
        """
        backend = frame_backend(reports)
        if backend is not None:  # e.g. a Spark DataFrame: counted where it lives (privpub.spark)
            counts: NDArray[np.int64] = require_operation(backend, "ldp_aggregate")(self, reports, epsilon=epsilon)
            return counts
        try:
            r = np.asarray(reports)
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"reports must be an (n, {self.domain_size}) array of bits", param="reports") from exc
        d = self.domain_size
        if r.ndim == 2 and r.shape[1] != d:
            if r.dtype == np.uint8 and r.shape[1] == self.packed_width:
                return self._count_packed(r)
            if r.dtype == np.uint64 and r.shape[1] == (d + 63) // 64:
                return self._count_packed(np.ascontiguousarray(r, dtype="<u8").view(np.uint8))
        if r.ndim != 2 or r.shape[1] != d:
            raise ParameterError(
                f"reports must have shape (n, {d}) (bool), (n, {self.packed_width}) (packed uint8) or "
                f"(n, {(d + 63) // 64}) (packed uint64), got {r.shape}"
            , param="reports")
        if r.dtype != bool:
            if not np.isin(r, (0, 1)).all():
                raise DomainError("reports of a unary encoding must be 0/1 bits")
            r = r.astype(bool)
        if r.shape[0] * self.packed_width <= _NUMPY_COUNT_BYTES:
            small: NDArray[np.int64] = r.sum(axis=0, dtype=np.int64)
            return small
        counts = np.zeros(d, dtype=np.int64)
        for s in range(0, r.shape[0], _COUNT_ROWS):  # pack in blocks, then count the packed bits
            counts += self._count_packed(np.packbits(r[s : s + _COUNT_ROWS], axis=1, bitorder="little"), kernel=True)
        return counts

    def _count_packed(self, packed: NDArray[np.uint8], *, kernel: bool = False) -> NDArray[np.int64]:
        """Ones per cell of ``(n, B)`` packed rows (threads over blocks of rows); up to
        ``_NUMPY_COUNT_BYTES`` (unless ``kernel``) by a histogram of each byte column in NumPy."""
        width = packed.shape[1]
        if not kernel and packed.size <= _NUMPY_COUNT_BYTES:
            keys = packed.astype(np.intp) + 256 * np.arange(width, dtype=np.intp)
            hist = np.bincount(keys.reshape(-1), minlength=256 * width).reshape(width, 256)
            small: NDArray[np.int64] = (hist @ _BYTE_BITS).reshape(-1)[: self.domain_size]
            return small
        from privpub.ldp import _kernels

        flat = np.ascontiguousarray(packed).reshape(-1)
        if flat.ctypes.data % 8:  # the kernel reads 64-bit words: align them
            flat = flat.copy()
        rows = _COUNT_ROWS  # a multiple of 8: every chunk starts on a 64-bit word
        starts = list(range(0, packed.shape[0], rows))
        partial = np.zeros((max(1, len(starts)), 8 * width), dtype=np.int64)

        def count(k: int) -> None:
            _kernels.column_counts(flat[starts[k] * width : (starts[k] + rows) * width], width, partial[k])

        run_chunks(count, len(starts))
        out: NDArray[np.int64] = partial.sum(axis=0)[: self.domain_size]
        return out

    def n_reports(self, reports: ArrayLike) -> int:
        backend = frame_backend(reports)
        if backend is not None:
            return int(require_operation(backend, "ldp_n_reports")(reports))
        return int(np.asarray(reports).shape[0])


@dataclass(frozen=True, kw_only=True)
class SUE(UnaryEncoding):
    """Symmetric unary encoding: basic one-hot RAPPOR with flip probability ``f``.

    Each bit is replaced by a fair coin with probability ``f`` and kept otherwise, so
    ``p = 1 - f/2`` and ``q = f/2``. Give either ``f`` here or ``epsilon`` per call
    (``f = 2 / (1 + e^(eps/2))``).

    Parameters
    ----------
    domain_size : int
        Number of values.
    f : float or None
        Flip probability in (0, 1). When given, calls may omit ``epsilon``; a given epsilon
        must then equal ``sue_epsilon(f)``.

    Notes
    -----
    **Privacy:** epsilon-LDP with ``epsilon = 2 ln((1 - f/2) / (f/2))``: two inputs differ in two
    bits of the one-hot vector, each contributing a factor ``p / q``. ``q = f/2`` is realised as a
    dyadic threshold with 32 significant bits rounded up (``p = 1 - q`` exactly), so the realised
    loss (:meth:`effective_epsilon`) is at most epsilon and within about ``2**-30`` of it.

    References
    ----------
    Erlingsson, Pihur, Korolova. RAPPOR. CCS 2014. Wang et al. USENIX Security 2017.

    Examples
    --------
    >>> oracle = SUE(domain_size=3, f=0.5)
    >>> oracle.perturb([0, 2], rng=0).shape  # packed: one byte per user
    (2, 1)
    >>> oracle.perturb([0, 2], rng=0, packed=False).shape
    (2, 3)
    """

    f: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.f is not None:
            object.__setattr__(self, "f", check_probability(self.f, "f"))
            sue_epsilon(self.f)  # f / 2 must be representable (5e-324 is not): a ParameterError naming f

    def _declared_epsilon(self) -> float:
        # configured by f: the guarantee is the nominal 2 ln((1 - f/2) / (f/2)); the quantised
        # randomiser realises at most that (effective_epsilon)
        return sue_epsilon(self.f) if self.f is not None else self.effective_epsilon(None)

    def _dyadic(self, epsilon: float | None) -> tuple[Dyadic, Dyadic]:
        if self.f is not None:
            if epsilon is not None and not math.isclose(check_epsilon(epsilon), sue_epsilon(self.f), rel_tol=1e-9):
                raise ParameterError(
                    f"epsilon={epsilon} disagrees with f={self.f} (which gives epsilon={sue_epsilon(self.f):.6g})"
                )
            q = dyadic_up(Fraction(self.f) / 2)
        else:
            # f / 2 = 1 / (1 + e^(eps / 2)): randomised response over 2 outputs at eps / 2
            q = flip_probability(self._epsilon(epsilon) / 2.0, 2)
        return q.complement(), q


@dataclass(frozen=True, kw_only=True)
class OUE(UnaryEncoding):
    """Optimised unary encoding: ``p = 1/2``, ``q = 1 / (1 + e^eps)``.

    Notes
    -----
    **Privacy:** epsilon-LDP: two inputs differ in two bits; the worst-case output ratio is
    ``p (1 - q) / ((1 - p) q) = e^eps``. ``q`` is realised as a dyadic threshold with 32
    significant bits rounded up, so the realised loss (:meth:`effective_epsilon`) is at most
    epsilon and within about ``2**-31`` of it at every accepted epsilon (up to 40).

    References
    ----------
    Wang, Blocki, Li, Jha. USENIX Security 2017.

    Examples
    --------
    >>> oracle = OUE(domain_size=8)
    >>> counts = oracle.simulate([100, 0, 0, 0, 0, 0, 0, 900], epsilon=1.0, rng=0)
    >>> counts.shape
    (8,)
    """

    def _dyadic(self, epsilon: float | None) -> tuple[Dyadic, Dyadic]:
        # q = 1 / (1 + e^eps), rounded up
        return Dyadic(1, 1), flip_probability(self._epsilon(epsilon), 2)
