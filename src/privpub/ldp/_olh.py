"""Optimised local hashing (OLH)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import Accountant, RNGLike, as_generator, check_array, check_positive_int
from privpub.errors import DomainError, ParameterError
from privpub.ldp._base import FrequencyOracle, threshold_down, uniform32

__all__ = ["OLH"]

#: the Mersenne prime 2**31 - 1 of the universal hash family ((a x + b) mod P) mod g
_PRIME = (1 << 31) - 1


def _hash(a: NDArray[np.int64], b: NDArray[np.int64], x: NDArray[np.int64], g: int) -> NDArray[np.int64]:
    return ((a * x + b) % _PRIME) % g


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
    reported by GRR over ``g`` buckets with ratio ``p / q' = e^eps``.
    The support count of ``v`` for users not holding ``v`` is ``Bin(., 1/g)`` up to the hash
    family's ``O(g / P)`` non-uniformity. :meth:`simulate_support` draws each cell's exact
    marginal (independent binomials); cross-cell correlations of real reports are not modelled.

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
            raise ParameterError(f"domain_size must be < {_PRIME} for OLH, got {self.domain_size}")
        if self.g is not None:
            object.__setattr__(self, "g", check_positive_int(self.g, "g", minimum=2))

    def buckets(self, epsilon: float | None = None) -> int:
        """The number of hash buckets ``g`` used at this epsilon."""
        if self.g is not None:
            return self.g
        return max(2, round(math.exp(self._epsilon(epsilon))) + 1)

    def _bucket_probabilities(self, epsilon: float | None) -> tuple[float, float]:
        eps = self._epsilon(epsilon)
        g = self.buckets(eps)
        p = threshold_down(math.exp(eps) / (math.exp(eps) + g - 1)) / 2**32
        return p, (1.0 - p) / (g - 1)

    def probabilities(self, epsilon: float | None = None) -> tuple[float, float]:
        """``(p, 1/g)``: support probability for the own value and for any other value."""
        p, _ = self._bucket_probabilities(epsilon)
        return p, 1.0 / self.buckets(epsilon)

    def _epsilon_of(self, p: float, q: float) -> float:  # q here is 1/g; use bucket ratio instead
        g = round(1.0 / q)
        return math.log(p * (g - 1) / (1.0 - p))

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
        p, _ = self._bucket_probabilities(epsilon)
        g = self.buckets(epsilon)
        gen = as_generator(rng)
        self._charge(epsilon, v.size, accountant, note)
        n = v.size
        a = gen.integers(1, _PRIME, size=n, dtype=np.int64)
        b = gen.integers(0, _PRIME, size=n, dtype=np.int64)
        h = _hash(a, b, v, g)
        keep = uniform32(gen, n) < np.uint32(threshold_down(p))
        other = gen.integers(0, g - 1, size=n, dtype=np.int64)
        other += other >= h
        return np.stack([a, b, np.where(keep, h, other)], axis=1)

    def aggregate(self, reports: ArrayLike, *, epsilon: float | None = None) -> NDArray[np.int64]:
        """Support counts: user ``(a, b, y)`` supports every ``v`` with ``h(v) == y``. Cost O(n d),
        done in blocks of values."""
        r = check_array(reports, "reports", ndim=2)
        if r.shape[1] != 3 or r.dtype.kind not in "iu":
            raise ParameterError(f"OLH reports must be an (n, 3) integer array, got shape {r.shape}")
        g = self.buckets(epsilon)
        r = r.astype(np.int64)
        if np.any(r[:, 2] < 0) or np.any(r[:, 2] >= g):
            raise DomainError(f"OLH report buckets must lie in [0, {g - 1}]")
        a, b, y = r[:, 0:1], r[:, 1:2], r[:, 2:3]
        d = self.domain_size
        out = np.empty(d, dtype=np.int64)
        block = max(1, (1 << 22) // max(1, r.shape[0]))
        for start in range(0, d, block):
            vs = np.arange(start, min(d, start + block), dtype=np.int64)[None, :]
            out[start : start + vs.shape[1]] = np.count_nonzero(_hash(a, b, vs, g) == y, axis=0)
        return out

    def n_reports(self, reports: ArrayLike) -> int:
        return int(np.asarray(reports).shape[0])
