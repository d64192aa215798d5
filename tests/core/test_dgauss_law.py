"""The law of :func:`privpub.core.discrete_gaussian_noise` against its rho, directly.

The sampler's own tests (``test_zcdp.py``) check :func:`~privpub.core._dgauss.discrete_gaussian_exact`
at a given rational ``sigma^2``; nothing there ties the *public* mechanism's ``rho`` and
``sensitivity`` to that ``sigma^2``. Here the reference law is written out from the definition,
``P[Z = z] = exp(-z^2 / (2 sigma^2)) / sum_k exp(-k^2 / (2 sigma^2))`` with
``sigma^2 = sensitivity^2 / (2 rho)`` (independently of :func:`discrete_gaussian_sigma2` and
:func:`discrete_gaussian_pmf`), and the draws are tested against it three ways:

* a chi-square goodness-of-fit test (cells of expected count >= 5, tails pooled), at
  ``p > 1e-6``;
* a two-sided bound on the sample variance: ``|s^2 - Var Z| <= 5 sqrt((m4 - Var^2) / n)``
  (the standard deviation of the sample second moment, from the exact fourth moment);
* the exact zCDP Renyi bound on a two-point domain: the Renyi divergence of order ``alpha``
  between the reference laws at ``0`` and at ``sensitivity`` (integer) is at most
  ``alpha rho`` [BS16]_, and the *empirical* law's plug-in divergence cannot be far above it.

A sampler drawing for ``4 rho`` (half the standard deviation) fails all three: the 1 in
``issue 34`` that passed every test in ``tests/core`` (see the CHANGELOG).

References
----------
.. [CKS20] Canonne, Kamath, Steinke. The discrete Gaussian for differential privacy. NeurIPS 2020.
.. [BS16] Bun, Steinke. Concentrated differential privacy: simplifications, extensions, and lower
   bounds. TCC 2016 (Definition 1.1: ``D_alpha(M(x) || M(x')) <= alpha rho``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from privpub.core import discrete_gaussian_noise

#: (rho, sensitivity): sigma^2 = 1, 0.5, 12.5, 4 and 50
CASES = [(0.5, 1.0), (1.0, 1.0), (0.04, 1.0), (0.5, 2.0), (0.09, 3.0)]
N = 200_000
SEED = 20261207


def _reference(sigma2: float) -> tuple[np.ndarray, np.ndarray]:
    """Integers ``|k| <= 60 sigma + 60`` and the exact pmf on them (the rest is below 1e-700)."""
    half = int(60 * math.sqrt(sigma2)) + 60
    k = np.arange(-half, half + 1)
    w = np.exp(-(k.astype(np.float64) ** 2) / (2 * sigma2))
    return k, w / math.fsum(w)


def _chi_square_pvalue(z: np.ndarray, k: np.ndarray, p: np.ndarray) -> float:
    """Goodness of fit of draws ``z`` to the pmf ``p`` on ``k``: cells of expected count >= 5,
    the two tails pooled into the outermost cells (so every draw is counted)."""
    n = z.size
    keep = np.flatnonzero(p * n >= 5)
    lo, hi = int(k[keep[0]]), int(k[keep[-1]])
    inner = np.arange(lo, hi + 1)
    exp_p = p[(k >= lo) & (k <= hi)].copy()
    exp_p[0] += p[k < lo].sum()
    exp_p[-1] += p[k > hi].sum()
    obs = np.bincount(np.clip(z, lo, hi) - lo, minlength=inner.size)
    chi2 = float((((obs - n * exp_p) ** 2) / (n * exp_p)).sum())
    return float(stats.chi2.sf(chi2, df=inner.size - 1))


@pytest.mark.statistical
@pytest.mark.parametrize(("rho", "sensitivity"), CASES)
def test_law_matches_the_exact_pmf_of_rho(rho: float, sensitivity: float) -> None:
    sigma2 = sensitivity**2 / (2 * rho)
    k, p = _reference(sigma2)
    z = discrete_gaussian_noise(N, rho=rho, sensitivity=sensitivity, rng=SEED)
    assert z.dtype == np.int64 and z.shape == (N,)
    assert _chi_square_pvalue(z, k, p) > 1e-6
    var = float((p * k.astype(np.float64) ** 2).sum())  # the exact variance (mean 0), below sigma^2
    m4 = float((p * k.astype(np.float64) ** 4).sum())
    assert abs(float(z.mean())) <= 5 * math.sqrt(var / N)
    s2 = float((z.astype(np.float64) ** 2).mean())  # second moment about the true mean 0
    assert abs(s2 - var) <= 5 * math.sqrt((m4 - var**2) / N)


def _renyi_shift(sigma2: float, shift: int, alpha: float) -> float:
    """``D_alpha(N_Z(0, sigma2) || N_Z(shift, sigma2))`` exactly, in log space (no underflow):
    ``log(sum_k exp(alpha l(k) + (1 - alpha) l(k - shift)) / Z) / (alpha - 1)``, ``l(k) = -k^2 / (2 sigma2)``."""
    half = int(60 * math.sqrt(sigma2)) + 60 + shift
    k = np.arange(-half, half + 1, dtype=np.float64)
    lw = -(k**2) / (2 * sigma2)
    lw_shift = -((k - shift) ** 2) / (2 * sigma2)
    return float((logsumexp(alpha * lw + (1 - alpha) * lw_shift) - logsumexp(lw)) / (alpha - 1))


@pytest.mark.statistical
@pytest.mark.parametrize(("rho", "sensitivity"), [(0.5, 1.0), (0.5, 2.0)])
def test_renyi_divergence_of_neighbours_is_alpha_rho(rho: float, sensitivity: float) -> None:
    """The two neighbouring outputs ``Z`` and ``Z + sensitivity``: exact bound, then the draws.

    The reference laws' divergence is at most ``alpha rho`` ([CKS20]_ Prop. 5: equal to it up to
    the discretisation). The empirical law (the draws on the cells the reference gives expected
    count >= 50, conditioned on them) gives a plug-in divergence; its error is bounded here by the delta
    method: ``D`` is a smooth function of the cell frequencies, so its standard deviation is
    ``sqrt(sum_i (dD/dp_i)^2 p_i / n - (sum_i dD/dp_i p_i)^2 / n)``; 5 of them are allowed.
    """
    sigma2 = sensitivity**2 / (2 * rho)
    shift = int(sensitivity)
    k, p = _reference(sigma2)
    for alpha in (2.0, 4.0, 16.0):
        assert _renyi_shift(sigma2, shift, alpha) <= alpha * rho * (1 + 1e-12)
    z = discrete_gaussian_noise(N, rho=rho, sensitivity=sensitivity, rng=SEED + 1)
    cells = k[p * N >= 50]
    lo, hi = int(cells[0]), int(cells[-1])
    inside = z[(z >= lo) & (z <= hi)]  # the law conditioned on [lo, hi]: multinomial with n draws
    n = inside.size
    emp = np.bincount(inside - lo, minlength=hi - lo + 1).astype(np.float64) / n
    ref = p[(k >= lo) & (k <= hi)]
    ref = ref / ref.sum()
    alpha = 2.0
    # empirical P vs its own shift: D_2 = log(sum_i P_i^2 / P_{i - shift}) on cells where both exist
    a, b = emp[shift:], emp[:-shift]
    ra, rb = ref[shift:], ref[:-shift]
    with np.errstate(divide="ignore", invalid="ignore"):  # an empty cell beside a full one: infinite
        terms = np.where(a > 0, a**alpha * b ** (1 - alpha), 0.0)
    d_emp = math.log(float(terms.sum())) / (alpha - 1)
    d_ref = math.log(float((ra**alpha * rb ** (1 - alpha)).sum())) / (alpha - 1)
    # delta method: S = sum_i f_i with f_i = P_{i+s}^2 / P_i; dS/dP_j = 2 P_j / P_{j-s} - P_{j+s}^2 / P_j^2
    s_ref = float((ra**2 / rb).sum())
    grad = np.zeros(ref.size)
    grad[shift:] += 2 * ra / rb
    grad[:-shift] -= ra**2 / rb**2
    var_s = (float((grad**2 * ref).sum()) - float((grad * ref).sum()) ** 2) / n
    sd_d = math.sqrt(var_s) / s_ref  # D = log S (alpha = 2)
    assert abs(d_emp - d_ref) <= 5 * sd_d
    assert d_emp <= alpha * rho + 5 * sd_d
