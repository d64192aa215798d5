"""The exponential mechanism over a large integer domain whose scores are constant on ranges.

Choosing a split point, a quantile or a threshold among ``T`` integers with the exponential
mechanism costs ``O(T)`` if every integer is scored. When the score is constant on ranges (it
only changes where a record lies), the mechanism can pick a range with probability proportional
to ``length * exp(epsilon * score / (2 sensitivity))`` and then a uniform integer inside it: the
same distribution over the integers, in time proportional to the number of ranges.

References
----------
.. [MT07] McSherry, Talwar. Mechanism design via differential privacy. FOCS 2007.
.. [MCFY11] Mohammed, Chen, Fung, Yu. Differentially private data release for data mining.
   KDD 2011 (split points of numeric attributes drawn this way).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from privpub.core._accountant import Accountant, charge
from privpub.core._mechanisms import _check_scale, _check_sensitivity, _logits
from privpub.core._rng import RNGLike, as_generator
from privpub.core._validation import INT_LIMIT, check_array, check_epsilon
from privpub.errors import ParameterError

__all__ = ["exponential_mechanism_ranges"]


def exponential_mechanism_ranges(
    starts: ArrayLike,
    stops: ArrayLike,
    scores: ArrayLike,
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    monotone: bool = False,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> int:
    """The exponential mechanism over the integers of disjoint ranges with one score per range.

    Returns an integer ``x`` in ``[starts[j], stops[j])`` for some ``j``, with
    ``P[x] proportional to exp(epsilon * scores[j] / (2 * sensitivity))`` (``monotone``:
    ``epsilon * scores[j] / sensitivity``).

    Parameters
    ----------
    starts, stops : array_like of int, shape (k,)
        The ranges ``[starts[j], stops[j])``, non-empty and pairwise disjoint (any order).
    scores : array_like of float, shape (k,)
        The utility shared by every integer of range ``j`` (higher is better), finite.
    epsilon : float
        Privacy parameter.
    sensitivity : float
        Largest change of the score of any single integer between neighbouring datasets.
    monotone : bool
        As for :func:`~privpub.core.exponential_mechanism`.
    rng : int, Generator or None
        Randomness.
    accountant : Accountant, optional
        The accountant to charge (default: the active one, if any).
    note : str
        Recorded with the charge.

    Returns
    -------
    int
        The chosen integer.

    Notes
    -----
    **Privacy:** the output distribution is exactly the exponential mechanism [MT07]_ over the
    union of the ranges with utility ``u(x) = scores[j]`` for ``x`` in range ``j``: a range is
    drawn with weight ``length_j * exp(logit_j)`` (Gumbel-max on ``logit_j + log length_j``)
    and the integer uniformly inside it. It is epsilon-DP when that union (the candidate set) is
    the same for neighbouring datasets and every integer's utility has sensitivity at most
    ``sensitivity``; how the union is cut into ranges may depend on the data. Charges
    ``epsilon`` once, as ``exponential_mechanism``, before drawing.

    Examples
    --------
    >>> x = exponential_mechanism_ranges([1, 5], [5, 10**9], [50.0, 0.0], epsilon=1.0, rng=0)
    >>> 1 <= x < 10**9
    True
    """
    lo = check_array(starts, "starts", ndim=1)
    hi = check_array(stops, "stops", ndim=1)
    u = check_array(scores, "scores", ndim=1).astype(np.float64)
    if not lo.shape == hi.shape == u.shape:
        raise ParameterError(f"starts, stops and scores must have the same length, got {lo.size}, {hi.size}, {u.size}")
    for arr, name in ((lo, "starts"), (hi, "stops")):
        if arr.dtype.kind not in "iu" or float(np.max(np.abs(arr))) > INT_LIMIT:
            raise ParameterError(f"{name} must be integers of magnitude <= 2**62, got dtype {arr.dtype}", param=name)
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    if np.any(hi <= lo):
        raise ParameterError("every range must be non-empty (starts < stops)")
    order = np.argsort(lo, kind="stable")
    if np.any(lo[order][1:] < hi[order][:-1]):
        raise ParameterError("the ranges must be pairwise disjoint")
    eps = check_epsilon(epsilon)
    sens = _check_sensitivity(sensitivity)
    _check_scale(eps, sens)
    logits = _logits(u, eps, sens, monotone) + np.log((hi - lo).astype(np.float64))
    gen = as_generator(rng)
    charge("exponential_mechanism", eps, sensitivity=sens, note=note, accountant=accountant)
    j = int(np.argmax(logits + gen.gumbel(size=u.shape[0])))
    return int(gen.integers(lo[j], hi[j]))
