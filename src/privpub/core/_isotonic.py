"""Isotonic regression by pool-adjacent-violators (O(n))."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import isotonic_regression as _scipy_isotonic

from privpub.core._validation import check_array
from privpub.errors import ParameterError

__all__ = ["isotonic_regression"]


def isotonic_regression(
    y: ArrayLike, weights: ArrayLike | None = None, *, increasing: bool = True
) -> NDArray[np.float64]:
    """Least-squares fit of a monotone sequence to ``y`` (pool-adjacent-violators, O(n)).

    Minimises ``sum_i w_i (x_i - y_i)^2`` subject to ``x_1 <= x_2 <= ... <= x_n`` (or ``>=``
    when ``increasing`` is False). The solution is the block-average of ``y`` over maximal
    pooled blocks. Pure post-processing: no privacy cost.

    Parameters
    ----------
    y : array_like, shape (n,)
        Values to fit, finite.
    weights : array_like, shape (n,), optional
        Positive weights (default all ones).
    increasing : bool
        Direction of the constraint.

    Examples
    --------
    >>> isotonic_regression([1.0, 3.0, 2.0, 4.0]).tolist()
    [1.0, 2.5, 2.5, 4.0]
    """
    arr = check_array(y, "y", ndim=1).astype(np.float64)
    w = None
    if weights is not None:
        w = check_array(weights, "weights", ndim=1).astype(np.float64)
        if w.shape != arr.shape:
            raise ParameterError(f"weights must have the shape of y {arr.shape}, got {w.shape}", param="weights")
        if np.any(w <= 0):
            raise ParameterError("weights must all be > 0", param="weights")
    res = _scipy_isotonic(arr, weights=w, increasing=increasing)
    return np.asarray(res.x, dtype=np.float64)
