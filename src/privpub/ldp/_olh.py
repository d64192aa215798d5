"""Optimised local hashing (OLH)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import (
    Accountant,
    RNGLike,
    as_generator,
    check_allocation,
    check_array,
    check_positive_int,
    frame_backend,
    require_operation,
)
from privpub.errors import DomainError, ParameterError
from privpub.ldp._base import N_THREADS, Dyadic, FrequencyOracle, flip_probability, run_chunks
from privpub.ldp._grr import randomised_response

__all__ = ["OLH", "OLH_PRIME"]

#: the Mersenne prime 2**31 - 1 of the universal hash family ((a x + b) mod P) mod g
_PRIME = (1 << 31) - 1
#: the Mersenne prime of OLH's universal hash family ((a x + b) mod P) mod g, public for backends
OLH_PRIME = _PRIME
#: cost of one pre-image element of the enumerating aggregator, in values of the scanning one
_ENUMERATE_COST = 4
#: cost of a user's modular inverse (enumerating aggregator), in values of the scanning one
_INVERSE_COST = 256


def _hash(a: NDArray[np.int64], b: NDArray[np.int64], x: NDArray[np.int64] | np.int64, g: int) -> NDArray[np.int64]:
    return ((a * x + b) % _PRIME) % g


def collision_probability(g: int, prime: int = _PRIME) -> Fraction:
    """``P[h(x) == h(v)]`` for ``x != v`` and a uniform hash ``h(x) = ((a x + b) mod prime) mod g``
    (``a`` uniform in ``[1, prime)``, ``b`` in ``[0, prime)``), exactly.

    For ``x != v`` the pair ``((a x + b) mod P, (a v + b) mod P)`` is uniform over the ordered
    pairs of *distinct* residues (``(a, b) -> pair`` is a bijection), so the probability is the
    number of ordered distinct pairs in the same residue class mod ``g`` over ``P (P - 1)``: not
    quite ``1/g``, and 0 once ``g >= P``.

    Examples
    --------
    >>> abs(float(collision_probability(4)) - 1 / 4) < 1e-9, collision_probability(2**31)
    (True, Fraction(0, 1))
    """
    m, extra = divmod(prime, g)  # `extra` classes hold m + 1 residues, the others m
    same = extra * (m + 1) * m + (g - extra) * m * (m - 1)
    return Fraction(same, prime * (prime - 1))


@dataclass(frozen=True, kw_only=True)
class OLH(FrequencyOracle):
    """Optimised local hashing: hash the value into ``g`` buckets with a per-user random hash,
    then apply randomised response over the ``g`` buckets.

    Reports are ``(n, 3)`` int64 arrays ``(a, b, y)``: the user's hash ``h(x) = ((a x + b) mod P)
    mod g`` with ``P = 2**31 - 1``, and the randomised bucket ``y``.

    Parameters
    ----------
    domain_size : int
        Number of values (at most ``2**31 - 1``).
    g : int or None
        Number of hash buckets; None uses the optimal ``round(e^eps) + 1`` at call time.

    Notes
    -----
    **Privacy:** epsilon-LDP: the hash is chosen independently of the value and the bucket is
    reported by GRR over ``g`` buckets with ratio ``p / q' = e^eps``; the probability
    ``r = 1 - p`` of reporting another bucket is a dyadic threshold with 32 significant bits,
    rounded up, so the realised loss (:meth:`effective_epsilon`) is at most epsilon and within
    about ``2**-31`` of it at every accepted epsilon, whatever ``g``.

    The support probability of ``v`` for a user not holding ``v`` is computed exactly for this
    hash family (:func:`collision_probability`; it is ``1/g`` only up to ``O(1/P)``, and 0
    collisions once ``g >= P``), so :meth:`estimate` is exactly unbiased.
    :meth:`simulate_support` draws each cell's exact marginal (independent binomials);
    cross-cell correlations of real reports are not modelled.

    References
    ----------
    Wang, Blocki, Li, Jha. USENIX Security 2017.

    Examples
    --------
    >>> OLH(domain_size=16).perturb([3, 5], epsilon=1.0, rng=0).shape
    (2, 3)
    """

    g: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.domain_size >= _PRIME:
            raise ParameterError(f"domain_size must be < {_PRIME} for OLH, got {self.domain_size}", param="domain_size")
        if self.g is not None:
            object.__setattr__(self, "g", check_positive_int(self.g, "g", minimum=2))

    def buckets(self, epsilon: float | None = None) -> int:
        """The number of hash buckets ``g`` used at this epsilon."""
        if self.g is not None:
            return self.g
        return max(2, round(math.exp(self._epsilon(epsilon))) + 1)

    def _flip(self, epsilon: float | None) -> Dyadic:
        """The realised probability ``r = 1 - p`` of reporting another bucket than ``h(x)``."""
        eps = self._epsilon(epsilon)
        g = self.buckets(eps)
        r = flip_probability(eps, g)
        if r.fraction >= Fraction(g - 1, g):
            raise ParameterError(f"epsilon={eps} is too small for OLH with {g} buckets (p would be <= 1/g)")
        return r

    def _bucket_probabilities(self, epsilon: float | None) -> tuple[float, float]:
        """``(p, q')``: probability of reporting the own bucket / one given other bucket."""
        r = self._flip(epsilon).fraction
        return float(1 - r), float(r / (self.buckets(epsilon) - 1))

    def _exact_probabilities(self, epsilon: float | None) -> tuple[Fraction, Fraction]:
        # a user holding x supports v != x when its (possibly randomised) bucket is h(v):
        # either y = h(x) and h(v) = h(x) (collision c), or y is another bucket that h(v) hits
        r = self._flip(epsilon).fraction
        g = self.buckets(epsilon)
        c = collision_probability(g)
        return 1 - r, (1 - r) * c + r * (1 - c) / (g - 1)

    def _worst_ratio(self, epsilon: float | None) -> Fraction:
        # the hash is public and independent of the value: the ratio is the bucket randomiser's
        r = self._flip(epsilon).fraction
        return (1 - r) * (self.buckets(epsilon) - 1) / r

    def perturb(
        self,
        values: ArrayLike,
        *,
        epsilon: float | None = None,
        rng: RNGLike = None,
        accountant: Accountant | None = None,
        note: str = "",
    ) -> NDArray[np.int64]:
        """Client side: ``(n, 3)`` reports ``(a, b, y)``."""
        v = self._values(values)
        r = self._flip(epsilon)
        g = self.buckets(epsilon)
        gen = as_generator(rng)
        self._charge(epsilon, v.size, accountant, note)
        n = v.size
        a = gen.integers(1, _PRIME, size=n, dtype=np.int64)
        b = gen.integers(0, _PRIME, size=n, dtype=np.int64)
        y = randomised_response(_hash(a, b, v, g), g, r, gen)
        return np.stack([a, b, y], axis=1)

    def aggregate(self, reports: ArrayLike, *, epsilon: float | None = None) -> NDArray[np.int64]:
        """Support counts: user ``(a, b, y)`` supports every ``v`` with ``h(v) == y``.

        Compiled and threaded over users; per user either a scan of the ``d`` values (a
        vectorised divisibility test per value) or, when buckets are large
        (``P / g`` well below ``d``), an enumeration of the pre-image of its bucket. A
        ``pyspark.sql.DataFrame`` with columns ``a``, ``b``, ``y`` is counted in Spark.
        """
        from privpub.ldp import _kernels

        backend = frame_backend(reports)
        if backend is not None:  # e.g. a Spark DataFrame: counted where it lives (privpub.spark)
            counts: NDArray[np.int64] = require_operation(backend, "ldp_aggregate")(self, reports, epsilon=epsilon)
            return counts

        r = check_array(reports, "reports", ndim=2)
        if r.shape[1] != 3 or r.dtype.kind not in "iu":
            raise ParameterError(f"OLH reports must be an (n, 3) integer array, got shape {r.shape}")
        g = self.buckets(epsilon)
        r = r.astype(np.int64)
        if np.any(r[:, 2] < 0) or np.any(r[:, 2] >= g):
            raise DomainError(f"OLH report buckets must lie in [0, {g - 1}]")
        if np.any(r[:, 0] < 1) or np.any(r[:, 0] >= _PRIME) or np.any(r[:, 1] < 0) or np.any(r[:, 1] >= _PRIME):
            raise DomainError(f"OLH report hashes (a, b) must lie in [1, {_PRIME - 1}] x [0, {_PRIME - 1}]")
        a, b, y = (np.ascontiguousarray(r[:, j]) for j in range(3))
        d = self.domain_size
        n = a.size
        scan = not (g >= _PRIME or -(-_PRIME // g) * _ENUMERATE_COST + _INVERSE_COST < d)
        bounds = np.linspace(0, n, min(n, N_THREADS) + 1).astype(np.int64)
        check_allocation((bounds.size - 1 + 1) * d, 8, "OLH's support counts (one row per thread, and their sum)",
                         "domain_size", unit="counts")
        partial = np.zeros((bounds.size - 1, d), dtype=np.int64)

        def count(k: int) -> None:
            s, e = bounds[k], bounds[k + 1]
            if scan:
                acc = np.zeros(_kernels.OLH_BLOCK, dtype=np.uint32)
                _kernels.olh_support_scan(a[s:e], b[s:e], y[s:e], g, d, partial[k], acc)
            else:
                _kernels.olh_support_enumerate(a[s:e], b[s:e], y[s:e], g, d, partial[k])

        run_chunks(count, bounds.size - 1)
        out: NDArray[np.int64] = partial.sum(axis=0)
        return out

    def n_reports(self, reports: ArrayLike) -> int:
        backend = frame_backend(reports)
        if backend is not None:
            return int(require_operation(backend, "ldp_n_reports")(reports))
        return int(np.asarray(reports).shape[0])
