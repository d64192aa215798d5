"""Post-processing of noisy frequency estimates (no privacy cost)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import check_array, check_real, isotonic_regression
from privpub.errors import DomainError, ParameterError

__all__ = ["clip_renormalise", "isotonic_regression", "norm_sub"]


def _total(total: float | None, est: NDArray[np.float64]) -> float:
    with np.errstate(over="ignore"):
        if not np.isfinite(np.abs(est).sum()):
            raise DomainError("estimates are too large to normalise (their sum overflows)", param="estimates")
    t = float(est.sum()) if total is None else check_real(total, "total")
    if t < 0:
        raise ParameterError(f"total must be >= 0, got {t}", param="total")
    return t


def clip_renormalise(estimates: ArrayLike, total: float | None = None) -> NDArray[np.float64]:
    """Clip negative estimates to 0 and rescale so they sum to ``total`` (default: the sum of the
    unclipped estimates, i.e. the known number of users).

    Examples
    --------
    >>> clip_renormalise([-1.0, 2.0, 3.0], total=10.0).tolist()
    [0.0, 4.0, 6.0]
    """
    est = check_array(estimates, "estimates", ndim=1).astype(np.float64)
    t = _total(total, est)
    clipped = np.clip(est, 0.0, None)
    s = clipped.sum()
    if s == 0:
        return np.full_like(est, t / est.size)
    return np.asarray(clipped * (t / s), dtype=np.float64)


def norm_sub(estimates: ArrayLike, total: float | None = None) -> NDArray[np.float64]:
    """Norm-Sub (Wang et al. 2020): the non-negative vector ``max(est - delta, 0)`` summing to
    ``total``; ``delta`` found exactly by sorting (O(d log d)).

    Examples
    --------
    >>> norm_sub([5.0, 3.0, -2.0], total=6.0).tolist()
    [4.0, 2.0, 0.0]
    """
    est = check_array(estimates, "estimates", ndim=1).astype(np.float64)
    t = _total(total, est)
    if t == 0:
        return np.zeros_like(est)
    s = np.sort(est)[::-1]
    csum = np.cumsum(s)
    k = np.arange(1, s.size + 1)
    deltas = (csum - t) / k
    # largest k such that s[k-1] - delta_k > 0
    valid = s - deltas > 0
    kk = int(np.flatnonzero(valid)[-1]) if valid.any() else 0
    delta = deltas[kk]
    return np.asarray(np.clip(est - delta, 0.0, None), dtype=np.float64)
