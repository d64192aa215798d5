"""Noisy counts of every cell of a large partition, materialising only the cells that come out >= 1.

A histogram over ``n_cells`` disjoint cells (a contingency table, the leaves of a partition)
is released by adding noise to *every* cell, empty ones included: noising only the non-empty
cells would reveal which cells are empty, which is not differentially private. When
``n_cells`` is large (10^9 cells of a generalised table) but the release keeps only the cells
whose rounded noisy count is >= 1, the empty cells need not be noised one by one:

* an empty cell comes out >= 1 with probability ``p = P[Z >= 1]`` (discrete Laplace) or
  ``P[rint(g Z) >= 1] = P[Z >= h + 1]``, ``h = floor(1 / (2 g))`` (``noise="laplace"``: the exact
  Laplace ``g Z`` on the grid ``g`` of :func:`~privpub.core.laplace_noise`), independently of the
  other cells;
* given that it does, its value is ``1 + Geometric`` (discrete: ``Z - 1 | Z >= 1`` is geometric)
  or ``rint(g (h + 1 + Geometric))`` (grid Laplace: its tail is memoryless too).

So the number of released empty cells is ``Binomial(N0, p)``, they form a uniform random subset
of the ``N0`` empty cells, and their values are i.i.d. tail draws: :func:`sparse_noisy_counts`
samples exactly this, in time and memory proportional to the output. Below ``dense_limit``
cells it simply noises every cell.

References
----------
.. [CKS20] Canonne, Kamath, Steinke. The discrete Gaussian for differential privacy. NeurIPS
   2020, arXiv:2004.00010 (exact discrete Laplace and geometric sampling).
.. [CPSSY12] Cormode, Procopiuc, Srivastava, Shen, Yu. Differentially private summaries for
   sparse data. ICDT 2012 (releasing sparse noisy histograms through the noise tail).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core._accountant import Accountant, charge
from privpub.core._mechanisms import (
    _bernoulli_exp_unit,
    _check_scale,
    _check_sensitivity,
    _discrete_laplace_exact,
    _geometric_exp1,
    _grid_draws,
    _grid_scale,
    add_int_noise,
    check_float_exact,
    laplace_grid,
    rational_scale,
)
from privpub.core._rng import RNGLike, as_generator
from privpub.core._validation import INT_LIMIT, check_array, check_counts, check_epsilon, check_real
from privpub.errors import ParameterError

__all__ = ["DENSE_CELL_LIMIT", "sparse_noisy_counts", "sparse_release_probability"]

I64 = NDArray[np.int64]

#: up to this many cells :func:`sparse_noisy_counts` noises every cell (a dense array); above it,
#: the empty cells are drawn through the noise tail (the same distribution)
DENSE_CELL_LIMIT = 1 << 20


def sparse_release_probability(epsilon: float, *, sensitivity: float = 1.0, noise: str = "discrete") -> float:
    """Probability that an empty cell comes out >= 1 in :func:`sparse_noisy_counts`.

    ``q / (1 + q)`` with ``q = exp(-1/scale)`` for the discrete Laplace (scale
    :func:`~privpub.core.rational_scale`); for ``noise="laplace"``, the exact Laplace on the grid
    ``g = laplace_grid(epsilon, sensitivity)`` rounded to the nearest integer (half to even):
    ``P[g Z > 1/2] = q^(h + 1) / (1 + q)`` with ``h = floor(1 / (2 g))`` and ``q = exp(-s / t)``
    for the scale ``t / s`` in grid steps (about ``exp(-1 / (2 b)) / 2``, ``b = sensitivity / epsilon``).

    Examples
    --------
    >>> round(sparse_release_probability(1.0), 6)
    0.268941
    >>> round(sparse_release_probability(1.0, noise="laplace"), 6)
    0.303265
    """
    eps = check_epsilon(epsilon)
    sens = _check_sensitivity(sensitivity)
    _check_scale(eps, sens)
    if _check_noise(noise) == "laplace":
        _, (t, s), h = _grid_laplace_params(eps, sens)
        q = math.exp(-s / t)
        return math.exp(-(h + 1) * s / t) / (1.0 + q)
    t, s = rational_scale(eps, sens)
    q = math.exp(-s / t)
    return q / (1.0 + q)


def _grid_laplace_params(eps: float, sens: float) -> tuple[float, tuple[int, int], int]:
    """``noise="laplace"``: the grid ``g``, the scale ``(t, s)`` in grid steps, and ``h = floor(1 / (2 g))``
    (an empty cell is released when its noise ``g Z`` exceeds 1/2, i.e. ``Z >= h + 1``)."""
    g = laplace_grid(eps, sens)
    return g, _grid_scale(eps, sens / g, "sparse_noisy_counts"), math.floor(0.5 / g)


def _check_noise(noise: Any) -> str:
    if noise not in ("discrete", "laplace"):
        raise ParameterError(f"noise must be 'discrete' or 'laplace', got {noise!r}", param="noise")
    return str(noise)


def _geometric_exact(size: int, t: int, s: int, gen: np.random.Generator) -> I64:
    """``size`` exact draws of ``Y`` with ``P[Y = k] = (1 - q) q^k``, ``q = exp(-s/t)``, k >= 0.

    [CKS20]_'s construction without the sign: ``X = U + t V`` (``U`` uniform on ``{0..t-1}``
    kept with probability ``exp(-U/t)``, ``V`` geometric with ratio ``exp(-1)``) is geometric
    with ratio ``exp(-1/t)``, so ``floor(X / s)`` is geometric with ratio ``exp(-s/t)``.
    """
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        u = gen.integers(0, t, size=pending.size, dtype=np.int64)
        keep = np.ones(pending.size, dtype=bool) if t == 1 else _bernoulli_exp_unit(u, t, gen)
        idx = pending[keep]
        v = _geometric_exp1(idx.size, gen)
        out[idx] = (u[keep] + t * v) // s
        pending = pending[~keep]
    return out


def _distinct_uniform(n: int, m: int, gen: np.random.Generator) -> I64:
    """``m`` distinct integers forming a uniformly random ``m``-subset of ``{0, ..., n-1}``.

    The first ``m`` distinct values of an i.i.d. uniform sequence (rejection of repeats): by
    symmetry their set is uniform over the ``m``-subsets. Memory and expected time are
    ``O(m log m)`` for ``m <= n / 2``; never allocates ``n``.
    """
    chosen = np.empty(0, dtype=np.int64)
    while chosen.size < m:
        need = m - chosen.size
        draw = gen.integers(0, n, size=need + need // 2 + 16, dtype=np.int64)
        _, first = np.unique(draw, return_index=True)
        draw = draw[np.sort(first)]  # first occurrences, in draw order
        draw = draw[~np.isin(draw, chosen)]
        chosen = np.concatenate([chosen, draw[:need]])
    return chosen


def _empty_ids(ranks: I64, listed: I64) -> I64:
    """Cell ids of the empty cells of rank ``ranks`` (0-based among the ids not in sorted ``listed``)."""
    below = listed - np.arange(listed.size, dtype=np.int64)  # empty ids below each listed id
    return ranks + np.searchsorted(below, ranks, side="right").astype(np.int64)


def _rint(values: NDArray[np.float64]) -> I64:
    out: I64 = np.rint(values).astype(np.int64)
    return out


#: numpy's binomial sampler is exact up to this n; before numpy 2.4 it returned half the mean for
#: n >= 2**56, so larger n is drawn as a sum of binomials of at most this size (an exact identity)
_BINOMIAL_CHUNK = 2**52


def _binomial(n: int, p: float, gen: np.random.Generator) -> int:
    """One Binomial(n, p) draw for any ``n`` < 2**63 and any ``p`` in [0, 1], on every numpy we support.

    Before numpy 2.4, ``Generator.binomial`` returned 0 whenever ``1 - p`` rounds to 1 (its inversion
    uses ``log(1 - p)``) and half the mean for ``n >= 2**56``: the empty cells of a huge domain
    would never be released, which tells that a released cell was not empty. A ``p`` that small is
    drawn from its Geometric(p) waiting times (inverted through ``log1p``); a huge ``n`` as a sum of
    binomials of at most 2**52 trials.

    Examples
    --------
    >>> g = np.random.default_rng(0)
    >>> bool(10 < np.mean([_binomial(2**62, 20 / 2**62, g) for _ in range(50)]) < 30)  # mean 20, sd 0.6
    True
    >>> bool(abs(_binomial(2**60, 0.25, g) - 2**58) < 2**32)  # mean 2**58, sd 2**29.2
    True
    """
    if n <= 0 or p <= 0.0:
        return 0
    if 1.0 - p == 1.0:  # the successes are where the Geometric(p) gaps land inside the n trials
        rate = -math.log1p(-p)
        count, position = 0, 0.0
        while True:
            gaps = np.ceil(gen.exponential(1.0 / rate, size=64))
            ends = position + np.cumsum(gaps)
            inside = int(np.count_nonzero(ends <= n))
            count += inside
            if inside < gaps.size:
                return count
            position = float(ends[-1])
    if n <= _BINOMIAL_CHUNK:
        return int(gen.binomial(n, p))
    full, rest = divmod(n, _BINOMIAL_CHUNK)
    sizes = np.full(full, _BINOMIAL_CHUNK, dtype=np.int64)
    if rest:
        sizes = np.append(sizes, np.int64(rest))
    return int(gen.binomial(sizes, p).sum())


def sparse_noisy_counts(
    cells: ArrayLike,
    counts: ArrayLike,
    *,
    n_cells: int,
    epsilon: float,
    sensitivity: float = 1.0,
    noise: str = "discrete",
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
    dense_limit: int = DENSE_CELL_LIMIT,
    max_released: float = 5e7,
) -> tuple[I64, I64]:
    """Noisy counts of all ``n_cells`` cells of a partition; only the cells whose rounded noisy count is >= 1.

    Parameters
    ----------
    cells : array_like of int, shape (m,)
        Ids of the cells with a (true) count, distinct, in ``[0, n_cells)``. Every other cell
        has count 0 and is noised too.
    counts : array_like of int, shape (m,)
        Their true counts (non-negative integers; zeros are allowed).
    n_cells : int
        Number of cells of the partition (public), ``1 <= n_cells <= 2**62``.
    epsilon : float
        Privacy parameter, finite and > 0.
    sensitivity : float
        L1 sensitivity of the whole count vector (1 when each record lies in one cell and
        neighbours add or remove one record).
    noise : {"discrete", "laplace"}
        Exact discrete Laplace (default; integers throughout) or Laplace drawn exactly on the
        grid of :func:`~privpub.core.laplace_noise` rounded to the nearest integer
        (``numpy.rint``, half to even).
    rng : int, Generator or None
        Randomness.
    accountant : Accountant, optional
        The accountant to charge (default: the active one, if any).
    note : str
        Recorded with the charge (default: the number of cells).
    dense_limit : int
        Noise every cell when ``n_cells <= dense_limit``; above it, draw the empty cells through
        the noise tail. Both give the same distribution.
    max_released : float
        Refuse (before charging or drawing) when the expected number of released *empty*
        cells, ``(n_cells - m) * p``, exceeds this: the output would not fit in memory.

    Returns
    -------
    cells : numpy.ndarray of int64
        Ids of the released cells, ascending.
    counts : numpy.ndarray of int64
        Their noisy counts, all >= 1.

    Raises
    ------
    ParameterError
        Bad ``n_cells``, ``epsilon``, ``noise``; cell ids repeated or outside ``[0, n_cells)``;
        an expected output above ``max_released`` (the message gives the size).
    DomainError
        Negative or non-integer counts; counts above 2**52 with continuous noise.
    BudgetExceededError
        If the charge would take the accountant over its budget (nothing is drawn).

    Notes
    -----
    **Privacy:** the output has exactly the distribution of ``c + Z`` over all ``n_cells``
    cells (``Z`` i.i.d. discrete Laplace with scale ``sensitivity / epsilon``, or continuous
    Laplace rounded), followed by keeping the cells with value >= 1 -- post-processing of the
    (discrete) Laplace mechanism on the full count vector. It is therefore epsilon-DP for any
    neighbouring relation under which the vector of all ``n_cells`` counts has L1 sensitivity
    at most ``sensitivity``; in particular, which cells are empty is protected. Charges
    ``epsilon`` once, as ``discrete_laplace`` (or ``laplace``), before drawing.

    Above ``dense_limit`` cells: each empty cell comes out >= 1 independently with probability
    ``p`` (:func:`sparse_release_probability`), so ``M ~ Binomial(N0, p)`` uniformly chosen empty
    cells are released, with i.i.d. values from the conditional tail: ``1 + Geometric(q)`` with
    ``q = exp(-1/scale)`` (sampled exactly with integers, [CKS20]_), or, for ``noise="laplace"``,
    ``rint(g (h + 1 + Geometric(q)))`` in the grid's steps (``h = floor(1 / (2 g))``). Every value
    is exact; ``M`` comes from numpy's binomial sampler (floating point), the only approximation.

    Examples
    --------
    A billion cells, two of them non-empty: the output holds those two and the few empty cells
    whose noise reached 1 (about ``10**9 * p``, ``p = 2e-9`` here).

    >>> ids, noisy = sparse_noisy_counts([2, 5], [40, 7], n_cells=10**9, epsilon=20.0, rng=0)
    >>> ids.dtype, noisy.dtype, bool((noisy >= 1).all()), bool(np.isin([2, 5], ids).all()), len(ids) < 12
    (dtype('int64'), dtype('int64'), True, True, True)
    """
    eps = check_epsilon(epsilon)
    sens = _check_sensitivity(sensitivity)
    _check_scale(eps, sens)
    kind = _check_noise(noise)
    if isinstance(n_cells, bool) or not isinstance(n_cells, int | np.integer) or not 1 <= int(n_cells) <= INT_LIMIT:
        raise ParameterError(f"n_cells must be an integer in [1, 2**62], got {n_cells!r}", param="n_cells")
    n = int(n_cells)
    if isinstance(dense_limit, bool) or not isinstance(dense_limit, int | np.integer) or dense_limit < 0:
        raise ParameterError(f"dense_limit must be an integer >= 0, got {dense_limit!r}", param="dense_limit")
    limit = check_real(max_released, "max_released")
    ids = check_array(cells, "cells", ndim=1, allow_empty=True)
    if ids.size and ids.dtype.kind not in "iu":
        if ids.dtype.kind != "f" or not np.all(ids == np.round(ids)):
            raise ParameterError(f"cells must be integer cell ids, got dtype {ids.dtype}", param="cells")
    if ids.size and (float(ids.min()) < 0 or float(ids.max()) >= n):
        raise ParameterError(f"cells must be ids in [0, n_cells={n}), got values in [{ids.min()}, {ids.max()}]", param="cells")
    ids = ids.astype(np.int64)
    vals = check_counts(counts, "counts", ndim=1) if np.size(counts) else np.zeros(0, dtype=np.int64)
    if vals.shape != ids.shape:
        raise ParameterError(f"cells and counts must have the same length, got {ids.size} and {vals.size}")
    order = np.argsort(ids, kind="stable")
    ids, vals = ids[order], vals[order]
    if ids.size > 1 and np.any(ids[1:] == ids[:-1]):
        raise ParameterError("cells must be distinct (give each cell's total count once)", param="cells")
    if kind == "laplace":
        check_float_exact(vals, "counts")
    n_empty = n - ids.size
    dense = n <= dense_limit
    p = sparse_release_probability(eps, sensitivity=sens, noise=kind)
    expected = n_empty * p
    if not dense and expected > limit:
        raise ParameterError(
            f"n_cells={n}: at epsilon={eps:g} about {expected:.3g} empty cells would come out >= 1 and be "
            f"released (> max_released={limit:g}); use fewer cells or a larger epsilon"
        )
    gen = as_generator(rng)
    charge("laplace" if kind == "laplace" else "discrete_laplace", eps, sensitivity=sens,
           note=note or f"sparse_noisy_counts: all {n} cells (disjoint), cells >= 1 released", accountant=accountant)
    if kind == "laplace":
        g, (t, s), h = _grid_laplace_params(eps, sens)
    else:
        t, s = rational_scale(eps, sens)
    if dense:
        full = np.zeros(n, dtype=np.int64)
        full[ids] = vals
        if kind == "discrete":
            noisy = add_int_noise(full, _discrete_laplace_exact(n, t, s, gen))
        else:  # exact: the float sum of a count and g Z is the rounded exact sum, then rint
            noisy = _rint(full.astype(np.float64) + _grid_draws(n, t, s, g, gen))
        keep = np.flatnonzero(noisy >= 1)
        return keep.astype(np.int64), noisy[keep]
    # sparse: the listed cells get their noise; the empty ones are drawn through the tail
    if kind == "discrete":
        listed = add_int_noise(vals, _discrete_laplace_exact(ids.size, t, s, gen))
    else:
        listed = _rint(vals.astype(np.float64) + _grid_draws(ids.size, t, s, g, gen))
    m = _binomial(n_empty, p, gen) if n_empty else 0
    empty = _empty_ids(_distinct_uniform(n_empty, m, gen), ids)
    if kind == "discrete":
        tail = 1 + _geometric_exact(m, t, s, gen)
    else:  # Z >= h + 1 (g Z > 1/2): Z = h + 1 + Geometric(q) by memorylessness, released as rint(g Z)
        tail = _rint((h + 1 + _geometric_exact(m, t, s, gen)).astype(np.float64) * g)
    all_ids = np.concatenate([ids, empty])
    all_vals = np.concatenate([listed, tail])
    positive = all_vals >= 1
    all_ids, all_vals = all_ids[positive], all_vals[positive]
    order = np.argsort(all_ids, kind="stable")
    return all_ids[order], all_vals[order]
