"""Statistical helpers for tests: exact binomial confidence bounds and ratio checks."""

from __future__ import annotations

import numpy as np
from scipy import stats


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 - alpha) Clopper-Pearson interval for a binomial proportion."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def ratio_lower_bound(k1: int, n1: int, k2: int, n2: int, alpha: float = 1e-4) -> float:
    """A lower confidence bound on p1 / p2 (p1's lower bound over p2's upper bound)."""
    lo1, _ = clopper_pearson(k1, n1, alpha)
    _, hi2 = clopper_pearson(k2, n2, alpha)
    return lo1 / hi2


def max_ratio_lower_bound(out1: np.ndarray, out2: np.ndarray, alpha: float = 1e-4) -> float:
    """Largest lower confidence bound of P[M(D1)=o]/P[M(D2)=o] (both directions) over outputs o."""
    n1, n2 = out1.size, out2.size
    best = 0.0
    for o in np.union1d(out1, out2):
        k1 = int(np.count_nonzero(out1 == o))
        k2 = int(np.count_nonzero(out2 == o))
        best = max(best, ratio_lower_bound(k1, n1, k2, n2, alpha), ratio_lower_bound(k2, n2, k1, n1, alpha))
    return best


def chisquare_pvalue(observed: np.ndarray, expected_prob: np.ndarray) -> float:
    """Chi-square goodness-of-fit p-value, pooling cells with expected count < 5 into one."""
    n = observed.sum()
    exp = expected_prob * n
    small = exp < 5
    obs_c = np.append(observed[~small], observed[small].sum())
    exp_c = np.append(exp[~small], exp[small].sum())
    keep = exp_c > 0
    obs_c, exp_c = obs_c[keep], exp_c[keep]
    exp_c = exp_c * obs_c.sum() / exp_c.sum()
    return float(stats.chisquare(obs_c, exp_c).pvalue)
