"""Generalised randomised response (k-RR)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import Accountant, RNGLike, as_generator, check_in_domain
from privpub.errors import ParameterError
from privpub.ldp._base import FrequencyOracle, threshold_down, uniform32

__all__ = ["GRR"]


@dataclass(frozen=True, kw_only=True)
class GRR(FrequencyOracle):
    """Generalised randomised response over ``domain_size`` values.

    Each user reports its true value with probability ``p = e^eps / (e^eps + d - 1)`` and each
    other value with probability ``q = 1 / (e^eps + d - 1)``.

    Notes
    -----
    **Privacy:** epsilon-LDP: for any two inputs and any output the probability ratio is at most
    ``p / q = e^eps`` (exactly, up to the 2**-32 quantisation that rounds ``p`` down). Each user
    reports once; the server's estimates are post-processing.

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

    def probabilities(self, epsilon: float | None = None) -> tuple[float, float]:
        eps = self._epsilon(epsilon)
        d = self.domain_size
        p = threshold_down(math.exp(eps) / (math.exp(eps) + d - 1)) / 2**32
        if p <= 1.0 / d:
            raise ParameterError(f"epsilon={eps} is too small for GRR on {d} values (p would be <= 1/d)")
        return p, (1.0 - p) / (d - 1)

    def _epsilon_of(self, p: float, q: float) -> float:
        return math.log(p / q)

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
        p, _ = self.probabilities(epsilon)
        gen = as_generator(rng)
        self._charge(epsilon, v.size, accountant, note)
        keep = uniform32(gen, v.size) < np.uint32(min(threshold_down(p), 2**32 - 1))
        other = gen.integers(0, self.domain_size - 1, size=v.size, dtype=np.int64)
        other += other >= v
        return np.where(keep, v, other)

    def aggregate(self, reports: ArrayLike, *, epsilon: float | None = None) -> NDArray[np.int64]:
        r = check_in_domain(reports, "reports", self.domain_size)
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
        p, q = self.probabilities(epsilon)
        gen = as_generator(rng)
        self._charge(epsilon, int(counts.sum()), accountant, note)
        keep = gen.binomial(counts, p - q)
        rest = int(counts.sum() - keep.sum())
        d = self.domain_size
        return keep + gen.multinomial(rest, np.full(d, 1.0 / d))
