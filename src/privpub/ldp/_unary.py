"""Unary encodings: symmetric (basic one-hot RAPPOR, SUE) and optimised (OUE)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import Accountant, RNGLike, as_generator, check_epsilon, check_probability
from privpub.errors import DomainError, ParameterError
from privpub.ldp._base import FrequencyOracle, run_chunks, threshold_up, uniform32
from privpub.ldp._bits import bernoulli_words, column_bit_counts, unpack_bits

__all__ = ["OUE", "SUE", "UnaryEncoding", "sue_epsilon", "sue_flip_probability"]

#: 64-bit words per work chunk (about 512 KB: cache-friendly, threads share the work)
_CHUNK_WORDS = 1 << 16


def sue_flip_probability(epsilon: float) -> float:
    """RAPPOR flip probability ``f = 2 / (1 + e^(eps/2))`` giving epsilon-LDP for a one-hot vector."""
    half = check_epsilon(epsilon) / 2.0
    return 2.0 * math.exp(-half) / (1.0 + math.exp(-half))


def sue_epsilon(f: float) -> float:
    """The LDP epsilon of one-hot RAPPOR with flip probability ``f``: ``2 ln((1 - f/2) / (f/2))``."""
    ff = check_probability(f, "f")
    if ff / 2.0 == 0.0:
        raise ParameterError(f"f must be a flip probability whose half is representable, got {ff!r}")
    return 2.0 * math.log((1.0 - ff / 2.0) / (ff / 2.0))


@dataclass(frozen=True, kw_only=True)
class UnaryEncoding(FrequencyOracle):
    """One-hot encode the value, then report each bit independently: a 1 stays 1 with probability
    ``p``, a 0 becomes 1 with probability ``q``. Reports are ``(n, domain_size)`` bool arrays."""

    def _epsilon_of(self, p: float, q: float) -> float:
        return math.log(p * (1 - q) / ((1 - p) * q))

    def _thresholds(self, epsilon: float | None) -> tuple[int, int]:
        p, q = self.probabilities(epsilon)
        return round(p * 2**32), round(q * 2**32)

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
        packed: bool = False,
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
            False: an ``(n, domain_size)`` bool array. True: an ``(n, ceil(domain_size / 8))``
            uint8 array with the bits in little-endian bit order (``np.unpackbits(...,
            bitorder="little")``), 8x smaller; :meth:`aggregate` accepts both.
        accountant : Accountant, optional
            Charged ``epsilon`` for the users' reports before drawing (default: the active one).
        note : str
            Recorded with the charge.
        """
        v = self._values(values)
        tp, tq = self._thresholds(epsilon)
        gen = as_generator(rng)
        self._charge(epsilon, v.size, accountant, note)
        d = self.domain_size
        n_words = (d + 63) // 64
        n = v.size
        words = np.empty((n, n_words), dtype=np.uint64)
        out = None if packed else np.empty((n, d), dtype=bool)
        rows = max(1, _CHUNK_WORDS // n_words)
        starts = list(range(0, n, rows))
        gens = gen.spawn(len(starts))
        tail = np.uint64((1 << (d % 64)) - 1) if d % 64 else np.uint64(0xFFFFFFFFFFFFFFFF)

        def work(k: int) -> None:
            s = starts[k]
            e = min(n, s + rows)
            g = gens[k]
            blk = bernoulli_words((e - s) * n_words, tq, 32, g).reshape(e - s, n_words)
            blk[:, -1] &= tail
            vv = v[s:e]
            widx = vv // 64
            shift = (vv % 64).astype(np.uint64)
            keep = (uniform32(g, e - s) < np.uint32(min(tp, 2**32 - 1))).astype(np.uint64)
            r = np.arange(e - s)
            cur = blk[r, widx]
            blk[r, widx] = (cur & ~(np.uint64(1) << shift)) | (keep << shift)
            words[s:e] = blk
            if out is not None:
                out[s:e] = unpack_bits(blk, d)

        run_chunks(work, len(starts))
        if out is not None:
            return out
        return np.ascontiguousarray(words.view(np.uint8)[:, : self.packed_width])

    def aggregate(self, reports: ArrayLike, *, epsilon: float | None = None) -> NDArray[np.int64]:
        """Support counts (ones per column) of bool ``(n, d)`` or packed ``(n, ceil(d/8))`` reports."""
        try:
            r = np.asarray(reports)
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"reports must be an (n, {self.domain_size}) array of bits") from exc
        d = self.domain_size
        if r.ndim == 2 and r.dtype == np.uint8 and r.shape[1] == self.packed_width and r.shape[1] != d:
            n_words = (d + 63) // 64
            if r.shape[1] == n_words * 8 and r.flags.c_contiguous:
                words = r.view(np.uint64)
            else:
                buf = np.zeros((r.shape[0], n_words * 8), dtype=np.uint8)
                buf[:, : r.shape[1]] = r
                words = buf.view(np.uint64)
            rows = 255 * 256
            starts = list(range(0, words.shape[0], rows))
            partial = np.zeros((len(starts), d), dtype=np.int64)

            def count(k: int) -> None:
                partial[k] = column_bit_counts(words[starts[k] : starts[k] + rows], d)

            run_chunks(count, len(starts))
            return partial.sum(axis=0)
        if r.ndim != 2 or r.shape[1] != d:
            raise ParameterError(
                f"reports must have shape (n, {d}) (bool) or (n, {self.packed_width}) (packed uint8), "
                f"got {r.shape}"
            )
        if r.dtype != bool:
            if not np.isin(r, (0, 1)).all():
                raise DomainError("reports of a unary encoding must be 0/1 bits")
            r = r.astype(bool)
        return np.asarray(np.count_nonzero(r, axis=0), dtype=np.int64)

    def n_reports(self, reports: ArrayLike) -> int:
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
    bits of the one-hot vector, each contributing a factor ``p / q``.

    References
    ----------
    Erlingsson, Pihur, Korolova. RAPPOR. CCS 2014. Wang et al. USENIX Security 2017.

    Examples
    --------
    >>> SUE(domain_size=3, f=0.5).perturb([0, 2], rng=0).shape
    (2, 3)
    """

    f: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.f is not None:
            object.__setattr__(self, "f", check_probability(self.f, "f"))

    def _declared_epsilon(self) -> float:
        # configured by f: the guarantee is the nominal 2 ln((1 - f/2) / (f/2)); the quantised
        # randomiser realises at most that (effective_epsilon)
        return sue_epsilon(self.f) if self.f is not None else self.effective_epsilon(None)

    def probabilities(self, epsilon: float | None = None) -> tuple[float, float]:
        if self.f is not None:
            if epsilon is not None and not math.isclose(check_epsilon(epsilon), sue_epsilon(self.f), rel_tol=1e-9):
                raise ParameterError(
                    f"epsilon={epsilon} disagrees with f={self.f} (which gives epsilon={sue_epsilon(self.f):.6g})"
                )
            f = self.f
        else:
            f = sue_flip_probability(self._epsilon(epsilon))
        q = threshold_up(f / 2.0) / 2**32
        return 1.0 - q, q


@dataclass(frozen=True, kw_only=True)
class OUE(UnaryEncoding):
    """Optimised unary encoding: ``p = 1/2``, ``q = 1 / (1 + e^eps)``.

    Notes
    -----
    **Privacy:** epsilon-LDP: two inputs differ in two bits; the worst-case output ratio is
    ``p (1 - q) / ((1 - p) q) = e^eps`` (``q`` is rounded up to a multiple of 2**-32, so the
    realised loss is at most epsilon).

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

    def probabilities(self, epsilon: float | None = None) -> tuple[float, float]:
        eps = self._epsilon(epsilon)
        return 0.5, threshold_up(math.exp(-eps) / (1.0 + math.exp(-eps))) / 2**32

