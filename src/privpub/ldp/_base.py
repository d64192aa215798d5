"""The shared shape of local-DP frequency oracles: client ``perturb``, server ``aggregate`` /
``estimate``, analytic ``variance`` and exact aggregated ``simulate``.

Randomised responses are drawn with exact dyadic thresholds: a response probability is realised
as a :class:`Dyadic` ``T / 2**k`` with a 32-bit numerator ``2**31 <= T < 2**32`` (32 significant
bits, so ``k`` grows as the probability shrinks: ``1 / (1 + e^40)`` is still resolved to a
relative 2**-31), and a uniform ``U`` on ``[0, 1)`` read lazily from the generator's raw 64-bit
words decides ``U < T / 2**k`` exactly. The *effective* probabilities returned by
:meth:`FrequencyOracle.probabilities` are those dyadic values, with the small response
probability rounded up (and the large one down), so the realised privacy loss never exceeds
``epsilon`` and tracks it to about ``2**-31`` relative at every accepted epsilon; the
estimators use the same values, so they stay exactly unbiased.
"""

from __future__ import annotations

import decimal
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import (
    Accountant,
    RNGLike,
    as_generator,
    check_array,
    check_counts,
    check_epsilon,
    check_in_domain,
    check_positive_int,
    check_real,
)
from privpub.core import charge as charge_accountant
from privpub.errors import ParameterError

__all__ = [
    "Dyadic",
    "FrequencyOracle",
    "bernoulli_exact",
    "dyadic_down",
    "dyadic_up",
    "exp_decimal",
    "flip_probability",
    "ln_ratio",
    "run_chunks",
]

#: largest epsilon accepted by the local randomisers
MAX_LOCAL_EPSILON = 40.0

#: worker threads for chunked client kernels (numpy releases the GIL in them)
N_THREADS = max(1, min(4, os.cpu_count() or 1))


def run_chunks(work: Callable[[int], None], n_chunks: int) -> None:
    """Run ``work(k)`` for every chunk ``k``; threads only schedule, results do not depend on them."""
    if n_chunks <= 1 or N_THREADS == 1:
        for k in range(n_chunks):
            work(k)
        return
    with ThreadPoolExecutor(max_workers=N_THREADS) as pool:
        list(pool.map(work, range(n_chunks)))


#: significant bits of every response threshold (the numerator of ``T / 2**k`` has 32 bits)
SIGNIFICANT_BITS = 32
#: working precision (decimal digits) of the exact threshold and epsilon computations
_DIGITS = 80
#: relative margin that makes a rounding of a DIGITS-digit approximation directed for sure
_MARGIN = Decimal(10) ** -(_DIGITS - 10)


@dataclass(frozen=True)
class Dyadic:
    """A response probability realised exactly as ``numerator / 2**bits``.

    Examples
    --------
    >>> q = dyadic_up(Fraction(1, 3))
    >>> q.numerator, q.bits, float(q) >= 1 / 3
    (2863311531, 33, True)
    """

    numerator: int
    bits: int

    def __float__(self) -> float:
        return self.numerator / (1 << self.bits)  # correctly rounded (exact below 2**53)

    @property
    def fraction(self) -> Fraction:
        return Fraction(self.numerator, 1 << self.bits)

    def complement(self) -> Dyadic:
        """``1 - self``, exactly."""
        return Dyadic((1 << self.bits) - self.numerator, self.bits)

    def words(self) -> NDArray[np.uint64]:
        """The threshold as 64-bit words, most significant first: ``U < self`` iff the words of a
        uniform ``U`` (read as a base-2**64 fraction) are lexicographically smaller."""
        n_words = max(1, -(-self.bits // 64))
        value = self.numerator << (64 * n_words - self.bits)
        return np.array([(value >> (64 * (n_words - 1 - i))) & 0xFFFFFFFFFFFFFFFF for i in range(n_words)],
                        dtype=np.uint64)


def _context() -> decimal.Context:
    return decimal.Context(prec=_DIGITS)


def exp_decimal(x: float) -> Decimal:
    """``e**x`` to 80 significant digits."""
    return _context().exp(Decimal(x))


def _to_dyadic(x: Decimal | Fraction, up: bool) -> Dyadic:
    """``x`` in (0, 1) rounded up / down to 32 significant bits (directed even when ``x`` is an
    80-digit approximation: a relative margin of 1e-70 is applied in the rounding direction)."""
    if not 0 < x < 1:
        raise ValueError(f"a response probability must lie in (0, 1), got {x}")
    if isinstance(x, Decimal):
        ctx = _context()
        x = Fraction(ctx.multiply(x, ctx.add(1, _MARGIN) if up else ctx.subtract(1, _MARGIN)))
    lead = max(0, math.floor(-math.log2(x)) - 1)  # leading zero bits, adjusted below
    while x < Fraction(1, 1 << (lead + 1)):
        lead += 1
    bits = SIGNIFICANT_BITS + lead
    scaled = x * (1 << bits)
    num = math.ceil(scaled) if up else math.floor(scaled)
    if num == 1 << SIGNIFICANT_BITS:  # rounded up to the next power of two
        num, bits = num >> 1, bits - 1
    return Dyadic(num, bits)


def dyadic_up(x: Decimal | Fraction) -> Dyadic:
    """The smallest 32-significant-bit dyadic ``>= x`` (``x`` in (0, 1))."""
    return _to_dyadic(x, up=True)


def dyadic_down(x: Decimal | Fraction) -> Dyadic:
    """The largest 32-significant-bit dyadic ``<= x`` (``x`` in (0, 1))."""
    return _to_dyadic(x, up=False)


def flip_probability(epsilon: float, k: int) -> Dyadic:
    """Randomised response over ``k`` outputs: the probability ``r = (k - 1) / (e^eps + k - 1)``
    of reporting another output than the true one, rounded *up* to a dyadic threshold, so that
    the realised ratio ``(1 - r) (k - 1) / r`` never exceeds ``e^eps``.

    The smaller of ``r`` and ``1 - r`` carries the 32 significant bits (``1 - r`` is rounded
    down when ``r > 1/2``, as for GRR on a large domain at a small epsilon), so the realised
    ratio is within about ``2**-31`` of ``e^eps`` relative in every regime.

    Examples
    --------
    >>> r = flip_probability(1.0, 2)  # 1 / (1 + e)
    >>> float(r) >= 1 / (1 + math.e) > float(r) - 2**-33
    True
    """
    ctx = _context()
    km1 = Decimal(k - 1)
    e = exp_decimal(epsilon)
    total = ctx.add(e, km1)
    if km1 <= e:
        return dyadic_up(ctx.divide(km1, total))
    return dyadic_down(ctx.divide(e, total)).complement()


def ln_ratio(ratio: Fraction) -> float:
    """``ln(ratio)`` of an exact rational, correctly rounded to a float (via 80 digits)."""
    ctx = _context()
    return float(ctx.ln(Decimal(ratio.numerator)) - ctx.ln(Decimal(ratio.denominator)))


def bernoulli_exact(threshold: Dyadic, size: int, gen: np.random.Generator) -> NDArray[np.bool_]:
    """``size`` independent exact Bernoulli(``threshold``) draws, one 64-bit word per draw.

    ``U < T / 2**k`` is decided on the first 64-bit word of ``U`` unless it equals the
    threshold's first word (probability 2**-64), in which case the next words decide.
    """
    words = threshold.words()
    u = gen.bit_generator.random_raw(size)
    out = u < words[0]
    tied = np.flatnonzero(u == words[0])
    for w in words[1:]:
        if tied.size == 0:
            break
        u = gen.bit_generator.random_raw(tied.size)
        out[tied] = u < w
        tied = tied[u == w]
    return out  # still tied after the last word: U >= T, so False


@dataclass(frozen=True, kw_only=True)
class FrequencyOracle(ABC):
    """A local-DP frequency oracle over the domain ``{0, ..., domain_size - 1}``.

    Subclasses implement the client randomiser and the support function; this base class gives
    the unbiased estimator ``(support - n q) / (p - q)``, its variance and the exact simulation.
    """

    domain_size: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "domain_size", check_positive_int(self.domain_size, "domain_size", minimum=2))

    # -- parameters ----------------------------------------------------------------------------
    def probabilities(self, epsilon: float | None = None) -> tuple[float, float]:
        """Effective ``(p, q)``: probability that a user's report supports its own value / another.

        These are the probabilities the randomiser realises (the nearest doubles of the exact
        dyadic values), and the ones the estimators use.
        """
        p, q = self._exact_probabilities(epsilon)
        return float(p), float(q)

    @abstractmethod
    def _exact_probabilities(self, epsilon: float | None) -> tuple[Fraction, Fraction]:
        """The realised ``(p, q)`` as exact fractions."""

    def effective_epsilon(self, epsilon: float | None = None) -> float:
        """The privacy loss the quantised randomiser really has (``<= epsilon``).

        The log of the largest ratio of the randomiser's output probabilities over two inputs,
        computed exactly from its dyadic response probabilities.
        """
        return ln_ratio(self._worst_ratio(epsilon))

    @abstractmethod
    def _worst_ratio(self, epsilon: float | None) -> Fraction:
        """The largest ``P[R(x) = o] / P[R(x') = o]`` of the realised randomiser, exactly."""

    def _epsilon(self, epsilon: float | None) -> float:
        if epsilon is None:
            raise ParameterError(f"epsilon must be given to {type(self).__name__}, got None", param="epsilon")
        eps = check_epsilon(epsilon)
        if eps > MAX_LOCAL_EPSILON:
            raise ParameterError(
                f"epsilon must be <= {MAX_LOCAL_EPSILON:g} for a local randomiser (a larger one is "
                f"no meaningful guarantee: e^40 is about 2e17), got {eps:g}"
            , param="epsilon")
        return eps

    def _pq_for_estimation(self, epsilon: float | None) -> tuple[float, float]:
        p, q = self.probabilities(epsilon)
        if not p > q:
            raise ParameterError(
                f"epsilon={epsilon!r} is too small: the randomiser's p and q coincide, so nothing "
                "can be estimated"
            )
        return p, q

    # -- accounting ----------------------------------------------------------------------------
    def _charge(self, epsilon: float | None, n_users: int, accountant: Accountant | None, note: str) -> None:
        """Charge the accountant (explicit or active) for ``n_users`` epsilon-LDP reports.

        Under local DP the neighbouring relation is one user's value; every user in the call sends
        one report, so the call costs ``epsilon`` for each of them (parallel over users).
        """
        eps = epsilon if epsilon is not None else self._declared_epsilon()
        charge_accountant(type(self).__name__, eps,
                          note=note or f"{n_users} users, one epsilon-LDP report each", accountant=accountant)

    def _declared_epsilon(self) -> float:
        """The epsilon an oracle configured without a per-call epsilon guarantees (see SUE's ``f``)."""
        return self.effective_epsilon(None)

    # -- client --------------------------------------------------------------------------------
    def _values(self, values: ArrayLike) -> NDArray[np.int64]:
        codes = check_in_domain(values, "values", self.domain_size)
        if codes.ndim > 1:
            raise ParameterError(f"values must be 1-dimensional (one value per user), got shape {codes.shape}", param="values")
        return codes.reshape(-1)

    @abstractmethod
    def perturb(
        self,
        values: ArrayLike,
        *,
        epsilon: float | None = None,
        rng: RNGLike = None,
        accountant: Accountant | None = None,
        note: str = "",
    ) -> NDArray[Any]:
        """Client side: randomise each user's value (vectorised over all users).

        Charges ``accountant`` (or the active one) ``epsilon`` for the users' reports before drawing.
        """

    # -- server --------------------------------------------------------------------------------
    @abstractmethod
    def aggregate(self, reports: ArrayLike, *, epsilon: float | None = None) -> NDArray[np.int64]:
        """Server side: support count of every domain value, shape ``(domain_size,)``."""

    @abstractmethod
    def n_reports(self, reports: ArrayLike) -> int:
        """Number of users behind ``reports``."""

    def estimate_from_support(
        self, support: ArrayLike, n: int, *, epsilon: float | None = None
    ) -> NDArray[np.float64]:
        """Unbiased counts ``(support - n q) / (p - q)`` from support counts of ``n`` users."""
        p, q = self._pq_for_estimation(epsilon)
        sup = check_array(support, "support").astype(np.float64)
        if sup.shape != (self.domain_size,):
            raise ParameterError(f"support must have shape ({self.domain_size},), got {sup.shape}", param="support")
        return (sup - n * q) / (p - q)

    def estimate(self, reports: ArrayLike, *, epsilon: float | None = None) -> NDArray[np.float64]:
        """Unbiased estimate of the true count of every value from the users' reports."""
        support = self.aggregate(reports, epsilon=epsilon)
        return self.estimate_from_support(support, self.n_reports(reports), epsilon=epsilon)

    def variance(self, n: int, *, epsilon: float | None = None, frequency: float = 0.0) -> float:
        """Variance of one estimated count for ``n`` users, a fraction ``frequency`` of whom hold the value.

        ``Var = n (f p (1 - p) + (1 - f) q (1 - q)) / (p - q)**2``; ``frequency=0`` gives the
        usual approximation (Wang et al. 2017).
        """
        nn = check_positive_int(n, "n")
        freq = check_real(frequency, "frequency")
        if not 0.0 <= freq <= 1.0:
            raise ParameterError(f"frequency must be in [0, 1], got {freq}", param="frequency")
        frequency = freq
        p, q = self._pq_for_estimation(epsilon)
        return nn * (frequency * p * (1 - p) + (1 - frequency) * q * (1 - q)) / (p - q) ** 2

    # -- simulation ----------------------------------------------------------------------------
    def _true_counts(self, true_counts: ArrayLike) -> NDArray[np.int64]:
        counts = check_counts(true_counts, "true_counts")
        if counts.shape != (self.domain_size,):
            raise ParameterError(f"true_counts must have shape ({self.domain_size},), got {counts.shape}", param="true_counts")
        return counts

    def simulate_support(
        self,
        true_counts: ArrayLike,
        *,
        epsilon: float | None = None,
        rng: RNGLike = None,
        accountant: Accountant | None = None,
        note: str = "",
    ) -> NDArray[np.int64]:
        """Draw the support counts that ``perturb`` + ``aggregate`` would give, without per-user work.

        Default (unary encodings): independent binomials per cell, ``Bin(n_v, p) + Bin(n - n_v, q)``,
        which is the exact joint distribution when cells are randomised independently. Charges the
        accountant exactly as :meth:`perturb` of the same users would.
        """
        counts = self._true_counts(true_counts)
        p, q = self.probabilities(epsilon)
        gen = as_generator(rng)
        n = int(counts.sum())
        self._charge(epsilon, n, accountant, note)
        return gen.binomial(counts, p) + gen.binomial(n - counts, q)

    def simulate(
        self,
        true_counts: ArrayLike,
        *,
        epsilon: float | None = None,
        rng: RNGLike = None,
        accountant: Accountant | None = None,
        note: str = "",
    ) -> NDArray[np.float64]:
        """Unbiased estimated counts for users with histogram ``true_counts``, simulated exactly
        at the aggregate level (cost O(domain_size), independent of the number of users)."""
        counts = self._true_counts(true_counts)
        support = self.simulate_support(counts, epsilon=epsilon, rng=rng, accountant=accountant, note=note)
        return self.estimate_from_support(support, int(counts.sum()), epsilon=epsilon)
