"""The shared shape of local-DP frequency oracles: client ``perturb``, server ``aggregate`` /
``estimate``, analytic ``variance`` and exact aggregated ``simulate``.

Randomised responses are drawn with exact integer thresholds on 32-bit uniform words: a
probability ``p`` is realised as ``P[U < T] = T / 2**32`` with ``U`` uniform on 32 bits. The
*effective* probabilities returned by :meth:`FrequencyOracle.probabilities` are those ratios
(``p`` rounded down and ``q`` rounded up, so the realised privacy loss never exceeds
``epsilon``); the estimators use the same values, so they stay exactly unbiased.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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

__all__ = ["FrequencyOracle", "run_chunks", "threshold_down", "threshold_up", "uniform32"]

_TWO32 = 1 << 32
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


def threshold_down(p: float) -> int:
    """Largest ``T`` with ``T / 2**32 <= p``."""
    return math.floor(p * _TWO32)


def threshold_up(p: float) -> int:
    """Smallest ``T`` with ``T / 2**32 >= p``."""
    return math.ceil(p * _TWO32)


def uniform32(gen: np.random.Generator, size: int) -> NDArray[np.uint32]:
    """``size`` independent uniform 32-bit words from the generator's raw bit stream."""
    raw = gen.bit_generator.random_raw((size + 1) // 2)
    return np.asarray(raw, dtype=np.uint64).view(np.uint32)[:size]


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
    @abstractmethod
    def probabilities(self, epsilon: float | None = None) -> tuple[float, float]:
        """Effective ``(p, q)``: probability that a user's report supports its own value / another."""

    def effective_epsilon(self, epsilon: float | None = None) -> float:
        """The privacy loss the quantised randomiser really has (``<= epsilon``)."""
        return self._epsilon_of(*self.probabilities(epsilon))

    @abstractmethod
    def _epsilon_of(self, p: float, q: float) -> float: ...

    def _epsilon(self, epsilon: float | None) -> float:
        if epsilon is None:
            raise ParameterError(f"epsilon must be given to {type(self).__name__}, got None")
        eps = check_epsilon(epsilon)
        if eps > MAX_LOCAL_EPSILON:
            raise ParameterError(
                f"epsilon must be <= {MAX_LOCAL_EPSILON:g} for a local randomiser (beyond that the "
                f"32-bit response probabilities cannot represent it), got {eps:g}"
            )
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
            raise ParameterError(f"values must be 1-dimensional (one value per user), got shape {codes.shape}")
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
            raise ParameterError(f"support must have shape ({self.domain_size},), got {sup.shape}")
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
            raise ParameterError(f"frequency must be in [0, 1], got {freq}")
        frequency = freq
        p, q = self._pq_for_estimation(epsilon)
        return nn * (frequency * p * (1 - p) + (1 - frequency) * q * (1 - q)) / (p - q) ** 2

    # -- simulation ----------------------------------------------------------------------------
    def _true_counts(self, true_counts: ArrayLike) -> NDArray[np.int64]:
        counts = check_counts(true_counts, "true_counts")
        if counts.shape != (self.domain_size,):
            raise ParameterError(f"true_counts must have shape ({self.domain_size},), got {counts.shape}")
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
