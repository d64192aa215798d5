"""Generalised randomised response (k-RR)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import Accountant, RNGLike, as_generator, check_allocation, check_in_domain
from privpub.errors import ParameterError
from privpub.ldp._base import Dyadic, FrequencyOracle, bernoulli_exact, flip_probability

__all__ = ["GRR", "randomised_response"]


def randomised_response(
    values: NDArray[np.int64], k: int, flip: Dyadic, gen: np.random.Generator
) -> NDArray[np.int64]:
    """Keep each value with probability ``1 - flip``, else report a uniform *other* value of
    ``{0, ..., k - 1}`` (exact: a dyadic Bernoulli, then a uniform integer for the flipped users)."""
    out = values.copy()
    flipped = np.flatnonzero(bernoulli_exact(flip, values.size, gen))
    other = gen.integers(0, k - 1, size=flipped.size, dtype=np.int64)
    other += other >= values[flipped]
    out[flipped] = other
    return out


@dataclass(frozen=True, kw_only=True)
class GRR(FrequencyOracle):
    """Generalised randomised response over ``domain_size`` values.

    Each user reports its true value with probability ``p = e^eps / (e^eps + d - 1)`` and each
    other value with probability ``q = 1 / (e^eps + d - 1)``.

    Notes
    -----
    **Privacy:** epsilon-LDP: for any two inputs and any output the probability ratio is at most
    ``p / q = e^eps``. The randomiser realises ``r = 1 - p = (d - 1) q`` as a dyadic threshold
    with 32 significant bits, rounded up, so ``p / q <= e^eps`` holds exactly and the realised
    epsilon (:meth:`effective_epsilon`) is within about ``2**-31`` of the requested one at every
    accepted epsilon (up to 40). :meth:`probabilities`, :meth:`estimate` and :meth:`simulate`
    use these realised values. Each user reports once; the server's estimates are
    post-processing.

    References
    ----------
    Wang, Blocki, Li, Jha. Locally differentially private protocols for frequency estimation.
    USENIX Security 2017.

    Examples
    --------
    >>> oracle = GRR(domain_size=4)
    >>> reports = oracle.perturb([0, 1, 1, 3], epsilon=2.0, rng=0)
    >>> reports.shape
    (4,)
    """

    def _flip(self, epsilon: float | None) -> Dyadic:
        """The realised probability ``r = 1 - p`` of reporting another value (rounded up)."""
        eps = self._epsilon(epsilon)
        d = self.domain_size
        r = flip_probability(eps, d)
        if r.fraction >= Fraction(d - 1, d):
            raise ParameterError(f"epsilon={eps} is too small for GRR on {d} values (p would be <= 1/d)")
        return r

    def _exact_probabilities(self, epsilon: float | None) -> tuple[Fraction, Fraction]:
        r = self._flip(epsilon).fraction
        return 1 - r, r / (self.domain_size - 1)

    def _worst_ratio(self, epsilon: float | None) -> Fraction:
        p, q = self._exact_probabilities(epsilon)
        return p / q

    def perturb(
        self,
        values: ArrayLike,
        *,
        epsilon: float | None = None,
        rng: RNGLike = None,
        accountant: Accountant | None = None,
        note: str = "",
    ) -> NDArray[np.int64]:
        """Client side: each value is kept with probability ``p``, else replaced by a uniform other value."""
        v = self._values(values)
        r = self._flip(epsilon)
        gen = as_generator(rng)
        self._charge(epsilon, v.size, accountant, note)
        return randomised_response(v, self.domain_size, r, gen)

    def aggregate(self, reports: ArrayLike, *, epsilon: float | None = None) -> NDArray[np.int64]:
        r = check_in_domain(reports, "reports", self.domain_size)
        check_allocation(self.domain_size, 16, "GRR's support counts (one per domain value)", "domain_size",
                         unit="values")  # bincount's int64 output and its copy
        return np.bincount(r.reshape(-1), minlength=self.domain_size).astype(np.int64)

    def n_reports(self, reports: ArrayLike) -> int:
        return int(np.asarray(reports).size)

    def simulate_support(
        self,
        true_counts: ArrayLike,
        *,
        epsilon: float | None = None,
        rng: RNGLike = None,
        accountant: Accountant | None = None,
        note: str = "",
    ) -> NDArray[np.int64]:
        """Exact report counts: GRR is the mixture "report the truth w.p. ``p - q``, else a uniform
        value of the whole domain", so counts are ``Bin(n_v, p - q) + Multinomial(rest, 1/d)``."""
        counts = self._true_counts(true_counts)
        p, q = self._exact_probabilities(epsilon)
        gen = as_generator(rng)
        self._charge(epsilon, int(counts.sum()), accountant, note)
        keep = gen.binomial(counts, float(p - q))
        rest = int(counts.sum() - keep.sum())
        d = self.domain_size
        return keep + gen.multinomial(rest, np.full(d, 1.0 / d))
