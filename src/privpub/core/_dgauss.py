"""Exact sampling of the discrete Gaussian with a rational variance (integer arithmetic only).

The sampler behind :func:`privpub.core.discrete_gaussian_noise`: ``P[Z = z]`` proportional to
``exp(-z^2 / (2 sigma^2))`` on the integers, by Canonne, Kamath and Steinke's Algorithm 3
[CKS20]_: propose ``Y`` from the discrete Laplace of scale ``t = floor(sigma) + 1`` and accept
it with probability ``exp(-(|Y| - sigma^2 / t)^2 / (2 sigma^2))``. The stages are the exact
ones of the discrete Laplace (:mod:`privpub.core._dlap`, compiled): the proposals are
:func:`~privpub.core._dlap.discrete_laplace_exact` draws, and the acceptance
``Bernoulli(exp(-gamma))`` with ``gamma = g0 + r / B`` is ``G >= g0`` for ``G`` the exact count
of Bernoulli(exp(-1)) successes (:func:`~privpub.core._dlap.geometric_exact`) and one exact
Bernoulli(exp(-r / B)) (:func:`~privpub.core._dlap.bernoulli_exp_exact`). Rejected proposals
are redrawn in vectorised rounds.

The variance is the rational ``sigma^2 = t m / q`` (:func:`rational_sigma2`): with it
``sigma^2 / t = m / q`` and ``gamma = (|Y| q - m)^2 / (2 t m q)``, a ratio of integers whose
denominator ``B = 2 t m q`` stays below 2**62. It is rounded *up* from the requested
``sensitivity^2 / (2 rho)`` (relative excess below about 2**-25 for the usual scales), so the
guarantee holds for the requested rho.

References
----------
.. [CKS20] Canonne, Kamath, Steinke. The discrete Gaussian for differential privacy. NeurIPS
   2020, arXiv:2004.00010, Algorithms 1-3.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from privpub.core._dlap import bernoulli_exp_exact, discrete_laplace_exact, geometric_exact
from privpub.errors import DomainError, ParameterError

__all__ = ["GaussianScale", "discrete_gaussian_exact", "rational_sigma2"]

_TOP = 1 << 62
#: largest power-of-two denominator q of sigma^2 = t m / q
_MAX_Q_BITS = 40
#: largest sigma^2 the exact sampler accepts (B = 2 t m q must stay below 2**62 with q = 1)
MAX_SIGMA2 = 2.0**40
#: acceptance exponents above this are outside any plausible draw (probability below 2**-1000)
_MAX_GAMMA = 2.0**40


class GaussianScale(NamedTuple):
    """``sigma^2 = t * m / q`` with integers ``t = floor(sigma) + 1``, ``m`` and ``q = 2**k``."""

    t: int
    m: int
    q: int

    @property
    def sigma2(self) -> float:
        return self.t * self.m / self.q

    @property
    def fraction(self) -> Fraction:
        return Fraction(self.t * self.m, self.q)


def rational_sigma2(sigma2: Fraction | float) -> GaussianScale:
    """The sampler's rational variance for a requested ``sigma2`` (never below it).

    ``t = floor(sqrt(sigma2)) + 1``, ``q`` the largest power of two up to 2**40 with
    ``2 t m q <= 2**62`` for ``m = ceil(sigma2 q / t)``; ``t m / q >= sigma2``.
    """
    target = Fraction(sigma2)
    if not 0 < target <= MAX_SIGMA2:
        raise ParameterError(f"the discrete Gaussian variance must be in (0, 2**40], got {float(target):g}")
    t = math.isqrt(math.floor(target)) + 1
    while Fraction(t - 1) ** 2 > target:  # isqrt of the floor may overshoot for a fraction below 1
        t -= 1
    for k in range(_MAX_Q_BITS, -1, -1):
        q = 1 << k
        m = -((-target.numerator * q) // (target.denominator * t))  # ceil(target q / t)
        if 2 * t * m * q <= _TOP:
            return GaussianScale(t, m, q)
    raise ParameterError(f"the discrete Gaussian variance {float(target):g} is too large for the exact sampler")


def _acceptance_parts(x: NDArray[np.int64], big_b: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(g0, r)`` with ``x^2 = g0 B + r``, ``0 <= r < B`` (exact, in wrapping uint64 arithmetic)."""
    g0 = np.floor(x.astype(np.float64) ** 2 / big_b).astype(np.int64)
    # x^2 - g0 B is exact modulo 2**64 and lies in [-B, 2B) (the float quotient is off by <= 1)
    xu = x.astype(np.uint64)
    r = (xu * xu - g0.astype(np.uint64) * np.uint64(big_b)).view(np.int64)
    low = r < 0
    g0[low] -= 1
    r[low] += big_b
    high = r >= big_b
    g0[high] += 1
    r[high] -= big_b
    return g0, r


def discrete_gaussian_exact(size: int, scale: GaussianScale, gen: np.random.Generator) -> NDArray[np.int64]:
    """``size`` exact draws of the discrete Gaussian of variance parameter ``scale.sigma2``.

    [CKS20]_ Algorithm 3 in vectorised rounds; consumes ``gen``'s bit stream (same seed, same
    draws).
    """
    t, m, q = scale
    big_b = 2 * t * m * q
    out = np.empty(size, dtype=np.int64)
    filled = 0
    rate = 0.5  # acceptance rate guess; updated from the rounds
    while filled < size:
        need = size - filled
        n = min(max(64, int(need / rate * 1.1) + 16), max(need, 1 << 20) * 2)
        y = discrete_laplace_exact(n, t, 1, gen)
        ay = np.abs(y)
        if int(ay.max()) > _TOP // q:
            raise DomainError("a discrete Gaussian proposal exceeded 2**62 / q (probability below 2**-1000)")
        x = ay * q - m
        if float(np.max(x.astype(np.float64) ** 2)) / big_b > _MAX_GAMMA:
            raise DomainError("a discrete Gaussian proposal was beyond 2**20 sigma (probability below 2**-1000)")
        g0, r = _acceptance_parts(x, big_b)
        ok = geometric_exact(n, 1, 1, gen) >= g0
        ok &= bernoulli_exp_exact(r, big_b, gen)
        acc = y[ok]
        rate = max(0.05, acc.shape[0] / n)
        take = min(acc.shape[0], need)
        out[filled : filled + take] = acc[:take]
        filled += take
    return out
