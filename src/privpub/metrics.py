"""Accuracy metrics and range-query helpers shared by every part of privpub.

Distribution distances (:func:`total_variation` / :func:`avd`, :func:`kl_divergence`), error
measures (:func:`mse`, :func:`lnmse`, :func:`relative_error`), exact range-query answering on
1-D histograms (prefix sums) and 2-D grids (summed-area tables), and seeded random range
workloads. Every function is vectorised and validates its input at the boundary: a wrong shape,
NaN, a range outside the domain or an invalid parameter raises a
:class:`~privpub.errors.ParameterError` or :class:`~privpub.errors.DomainError`.

Metrics are evaluation tools: they read the true data and are **not** differentially private.
Never publish their values about private data without accounting for them.

References
----------
.. [HRMS10] M. Hay, V. Rastogi, G. Miklau, D. Suciu. "Boosting the Accuracy of Differentially
   Private Histograms Through Consistency". PVLDB 3(1), 2010. doi:10.14778/1920841.1920970
.. [ZCP+14] J. Zhang, G. Cormode, C. M. Procopiuc, D. Srivastava, X. Xiao. "PrivBayes: Private Data
   Release via Bayesian Networks". SIGMOD 2014 (average variation distance).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import RNGLike, as_generator, check_array, check_bounds_2d, check_positive_int, check_real
from privpub.errors import DomainError, ParameterError

__all__ = [
    "all_ranges_1d",
    "avd",
    "box_sums_2d",
    "kl_divergence",
    "lnmse",
    "mse",
    "random_boxes_2d",
    "random_ranges_1d",
    "random_rectangles_2d",
    "range_sums_1d",
    "range_sums_2d",
    "relative_error",
    "summed_area_table",
    "total_variation",
]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _pair(true: ArrayLike, estimate: ArrayLike, names: tuple[str, str] = ("true", "estimate")
          ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    t = check_array(true, names[0]).astype(np.float64)
    e = check_array(estimate, names[1]).astype(np.float64)
    if t.shape != e.shape:
        raise ParameterError(f"{names[1]} must have the same shape as {names[0]} {t.shape}, got {e.shape}")
    return t, e


def _axis(axis: int | None, ndim: int) -> int | None:
    if axis is None:
        return None
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or not -ndim <= int(axis) < ndim:
        raise ParameterError(f"axis must be None or an integer in [{-ndim}, {ndim - 1}], got {axis!r}", param="axis")
    return int(axis)


def _as_distribution(values: NDArray[np.float64], name: str, axis: int | None, *,
                     reference: bool) -> NDArray[np.float64]:
    """Normalise non-negative weights to sum 1 along ``axis`` (None: all entries).

    The reference (true) side must be non-negative with a positive sum. The estimate side is
    clipped at 0 first (noisy counts may be negative) and becomes uniform where its sum is 0.
    """
    if reference:
        if np.any(values < 0):
            raise DomainError(f"{name} must be non-negative, got minimum {values.min()}", param=name)
    else:
        values = np.maximum(values, 0.0)
    with np.errstate(over="ignore"):
        total = values.sum(axis=axis, keepdims=True)
    if not np.all(np.isfinite(total)):
        raise DomainError(f"{name} is too large to normalise (its sum overflows float64)", param=name)
    if reference and np.any(total <= 0):
        raise DomainError(f"{name} must have a positive sum, got 0", param=name)
    size = values.size if axis is None else values.shape[axis]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(total > 0, values / np.where(total > 0, total, 1.0), 1.0 / size)
    return out


# --------------------------------------------------------------------------------------------
# distribution distances
# --------------------------------------------------------------------------------------------
def total_variation(
    true: ArrayLike, estimate: ArrayLike, *, normalize: bool = True, axis: int | None = None
) -> Any:
    r"""Total variation distance :math:`\tfrac12 \sum_i |p_i - q_i|` between two distributions.

    Parameters
    ----------
    true : array_like
        Reference counts or probabilities (non-negative, positive sum).
    estimate : array_like
        Estimated counts or probabilities, same shape. Negative entries (noisy counts) are
        clipped at 0 before normalising; an all-zero estimate counts as uniform.
    normalize : bool, default True
        Divide each side by its sum first (so counts can be passed directly). With False the
        inputs are used as they are (they should already sum to 1) and nothing is clipped.
    axis : int or None, default None
        None compares the arrays as one distribution over all cells (any shape, e.g. a
        contingency table); an int compares distributions along that axis and returns an array.

    Returns
    -------
    float or ndarray
        Distance in [0, 1] for normalised inputs.

    Examples
    --------
    >>> total_variation([3, 1, 0], [1, 1, 2])
    0.5
    >>> total_variation([[1, 0], [0, 1]], [[1, 0], [1, 0]], axis=1).tolist()
    [0.0, 1.0]
    """
    t, e = _pair(true, estimate)
    ax = _axis(axis, t.ndim)
    if normalize:
        t = _as_distribution(t, "true", ax, reference=True)
        e = _as_distribution(e, "estimate", ax, reference=False)
    out = 0.5 * np.abs(t - e).sum(axis=ax)
    return float(out) if ax is None else out


def avd(true: ArrayLike, estimate: ArrayLike, *, axis: int | None = None) -> Any:
    r"""Average variation distance (AVD) of PrivBayes / LoPub: :math:`\tfrac12 \lVert P - \hat P\rVert_1`.

    The same quantity as :func:`total_variation` with ``normalize=True``: both sides are turned
    into distributions (the estimate clipped at 0) and half their L1 distance is returned. The
    "average" in the papers is over attribute subsets: compute one AVD per marginal and average.

    Examples
    --------
    >>> round(avd([10, 30, 60], [20, 20, 60]), 12)
    0.1
    """
    return total_variation(true, estimate, normalize=True, axis=axis)


def kl_divergence(
    true: ArrayLike,
    estimate: ArrayLike,
    *,
    smoothing: float = 1e-4,
    pseudo_count: float = 0.0,
    axis: int | None = None,
) -> Any:
    r"""Kullback-Leibler divergence :math:`\mathrm{KL}(p \,\|\, q) = \sum_{i: p_i > 0} p_i \ln(p_i / q_i)`.

    Parameters
    ----------
    true : array_like
        Reference counts :math:`H` (non-negative, positive sum).
    estimate : array_like
        Estimated counts :math:`\hat H`, same shape; may be negative (noisy).
    smoothing : float in [0, 1), default 1e-4
        Mixture weight :math:`\lambda` of the uniform distribution in :math:`q` (see Notes).
    pseudo_count : float >= 0, default 0
        Added to every cell of *both* sides before normalising (e.g. 0.5 for the LoPub
        evaluation). Zero by default: add-one style smoothing distorts sparse histograms.
    axis : int or None, default None
        As in :func:`total_variation`.

    Returns
    -------
    float or ndarray
        The divergence in nats; ``inf`` only when ``smoothing == 0`` and :math:`q_i = 0 < p_i`.

    Notes
    -----
    **Smoothing rule for zeros** (histogram spec §6.3): with :math:`n` cells,
    :math:`p = (H + c) / \sum (H + c)`, :math:`q_0 = (\max(\hat H, 0) + c) / \sum(\max(\hat H, 0) + c)`
    (uniform if that sum is 0), and :math:`q = (1 - \lambda) q_0 + \lambda / n`, where
    :math:`c` is ``pseudo_count`` and :math:`\lambda` is ``smoothing``. Cells with
    :math:`p_i = 0` contribute nothing. Only :math:`q` is smoothed, so the divergence stays
    finite (at most :math:`\ln(n / \lambda)`), is 0 up to :math:`-\ln(1 - \lambda)` when
    :math:`\hat H = H`, and is invariant to rescaling either side.

    Examples
    --------
    >>> round(kl_divergence([1, 1], [1, 3], smoothing=0.0), 6)
    0.143841
    >>> kl_divergence([5, 0, 5], [5, 0, 5]) <= -math.log(1 - 1e-4)
    True
    """
    t, e = _pair(true, estimate)
    ax = _axis(axis, t.ndim)
    lam = _check_unit_interval(smoothing, "smoothing")
    c = check_real(pseudo_count, "pseudo_count")
    if c < 0:
        raise ParameterError(f"pseudo_count must be >= 0, got {c}", param="pseudo_count")
    if np.any(t < 0):
        raise DomainError(f"true must be non-negative, got minimum {t.min()}", param="true")
    p = _as_distribution(t + c, "true", ax, reference=True)
    q0 = _as_distribution(np.maximum(e, 0.0) + c, "estimate", ax, reference=False)
    size = t.size if ax is None else t.shape[ax]
    q = (1.0 - lam) * q0 + lam / size
    pos = p > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(pos, p * (np.log(np.where(pos, p, 1.0)) - np.log(np.where(pos, q, 1.0))), 0.0)
        terms = np.where(pos & (q <= 0), np.inf, terms)
    out = terms.sum(axis=ax)
    return float(out) if ax is None else out


def _check_unit_interval(value: Any, name: str) -> float:
    """Return ``value`` as a float in [0, 1)."""
    out = check_real(value, name)
    if not 0.0 <= out < 1.0:
        raise ParameterError(f"{name} must be in [0, 1), got {out}", param=name)
    return out


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
def mse(true: ArrayLike, estimate: ArrayLike, *, axis: int | None = None) -> Any:
    """Mean squared error ``mean((estimate - true) ** 2)``.

    Parameters
    ----------
    true, estimate : array_like
        Same shape, finite.
    axis : int or None, default None
        Axis to average over (None: all entries).

    Examples
    --------
    >>> mse([1, 2, 3], [1, 4, 0])
    4.333333333333333
    """
    t, e = _pair(true, estimate)
    ax = _axis(axis, t.ndim)
    out = np.mean((e - t) ** 2, axis=ax)
    return float(out) if ax is None else out


def lnmse(true: ArrayLike, estimates: ArrayLike, range_length: int | Sequence[int]) -> Any:
    r"""Log of the normalised (mean) squared error of all contiguous range queries of one length.

    Histogram spec §6.4: for range length :math:`r`, the queries are all :math:`n - r + 1`
    contiguous ranges :math:`Q_a = \sum_{i=a}^{a+r-1} x_i` (:math:`a = 0..n-r`) in the given bin
    order, and over :math:`T` released histograms :math:`\hat H_t`

    .. math:: \mathrm{LNMSE}_r = \ln\Big(\frac{1}{T (n - r + 1)} \sum_t \sum_a
              (Q_a(H) - Q_a(\hat H_t))^2\Big),

    the log of the mean (not the mean of logs); ``-inf`` when the error is exactly 0. Computed
    with prefix sums in :math:`O(T n)` per length.

    Parameters
    ----------
    true : array_like, shape (n,)
        True histogram.
    estimates : array_like, shape (n,) or (T, n)
        One release or T releases (trials).
    range_length : int or sequence of int
        Range length(s) :math:`r` in ``[1, n]``.

    Returns
    -------
    float or ndarray
        One value per range length.

    Examples
    --------
    >>> lnmse([0, 0, 0, 0], [1, 0, 1, 0], 2)
    0.0
    >>> lnmse([1, 2, 3], [[1, 2, 3], [1, 2, 3]], [1, 3]).tolist()
    [-inf, -inf]
    """
    t = check_array(true, "true", ndim=1).astype(np.float64)
    e = check_array(estimates, "estimates").astype(np.float64)
    if e.ndim == 1:
        e = e[None, :]
    if e.ndim != 2 or e.shape[1] != t.shape[0]:
        raise ParameterError(f"estimates must have shape ({t.shape[0]},) or (T, {t.shape[0]}), got {e.shape}", param="estimates")
    scalar = isinstance(range_length, int | np.integer)
    if not scalar and (isinstance(range_length, str | bytes) or not hasattr(range_length, "__iter__")):
        raise ParameterError(f"range_length must be a positive int or a sequence of them, got {range_length!r}", param="range_length")
    lengths: list[Any] = [range_length] if scalar else list(range_length)
    if not lengths:
        raise ParameterError("range_length must not be empty", param="range_length")
    n = t.shape[0]
    diff = np.concatenate([np.zeros((e.shape[0], 1)), np.cumsum(e - t[None, :], axis=1)], axis=1)
    out = np.empty(len(lengths))
    for k, r in enumerate(lengths):
        r = check_positive_int(r, "range_length")
        if r > n:
            raise ParameterError(f"range_length must be <= the number of bins {n}, got {r}", param="range_length")
        err = diff[:, r:] - diff[:, : n - r + 1]
        m = float(np.mean(err**2))
        out[k] = math.log(m) if m > 0 else -math.inf
    return float(out[0]) if scalar else out


def relative_error(true: ArrayLike, estimate: ArrayLike, rho: float) -> NDArray[np.float64]:
    r"""Elementwise relative error with a floor: :math:`|\hat y - y| / \max(y, \rho)`.

    The floor :math:`\rho > 0` keeps small true answers from dominating (e.g.
    :math:`\rho = 0.001 N` for spatial range queries). Take ``.mean()`` for the usual MRE.

    Examples
    --------
    >>> relative_error([100, 0, 5], [110, 2, 5], rho=10).tolist()
    [0.1, 0.2, 0.0]
    """
    t, e = _pair(true, estimate)
    r = check_real(rho, "rho")
    if r <= 0:
        raise ParameterError(f"rho must be > 0, got {r}", param="rho")
    return np.abs(e - t) / np.maximum(t, r)


# --------------------------------------------------------------------------------------------
# range queries: 1-D
# --------------------------------------------------------------------------------------------
def _check_int_array(values: ArrayLike, name: str, cols: int) -> NDArray[np.int64]:
    arr = check_array(values, name, allow_empty=True)
    if arr.ndim == 1 and arr.size == cols:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != cols:
        raise ParameterError(f"{name} must have shape (q, {cols}), got {arr.shape}", param=name)
    if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
        raise DomainError(f"{name} must hold integer bin indices, got non-integral values", param=name)
    return arr.astype(np.int64)


def range_sums_1d(counts: ArrayLike, ranges: ArrayLike) -> NDArray[Any]:
    """Answer inclusive 1-D range queries ``sum(counts[lo:hi + 1])`` with prefix sums.

    Parameters
    ----------
    counts : array_like, shape (..., n)
        One histogram, or a stack of them (e.g. T trials): ranges apply to the last axis.
    ranges : array_like of int, shape (q, 2)
        Rows ``[lo, hi]`` with ``0 <= lo <= hi < n`` (both ends inclusive).

    Returns
    -------
    ndarray, shape (..., q)
        Range sums; int64 for integer counts, float64 otherwise (exact for integers).

    Examples
    --------
    >>> range_sums_1d([1, 2, 3, 4], [[0, 3], [1, 2], [3, 3]]).tolist()
    [10, 5, 4]
    """
    x = check_array(counts, "counts")
    if x.ndim == 0:
        raise ParameterError(f"counts must be at least 1-dimensional, got shape {x.shape}", param="counts")
    q = _check_int_array(ranges, "ranges", 2)
    n = x.shape[-1]
    lo, hi = q[:, 0], q[:, 1]
    if q.size and (lo.min() < 0 or hi.max() >= n or np.any(lo > hi)):
        bad = q[(lo < 0) | (hi >= n) | (lo > hi)][0].tolist()
        raise DomainError(f"ranges must satisfy 0 <= lo <= hi < {n}, got {bad}", param="ranges")
    work = x.astype(np.int64) if x.dtype.kind in "biu" else x.astype(np.float64)
    pre = np.concatenate([np.zeros((*x.shape[:-1], 1), dtype=work.dtype), np.cumsum(work, axis=-1)], axis=-1)
    return np.asarray(pre[..., hi + 1] - pre[..., lo])


def all_ranges_1d(n_bins: int, length: int) -> NDArray[np.int64]:
    """Every contiguous range of one length: rows ``[a, a + length - 1]``, ``a = 0..n_bins-length``.

    Examples
    --------
    >>> all_ranges_1d(4, 3).tolist()
    [[0, 2], [1, 3]]
    """
    n = check_positive_int(n_bins, "n_bins")
    r = check_positive_int(length, "length")
    if r > n:
        raise ParameterError(f"length must be <= n_bins ({n}), got {r}", param="length")
    a = np.arange(n - r + 1, dtype=np.int64)
    return np.stack([a, a + r - 1], axis=1)


def random_ranges_1d(
    n_bins: int, n_queries: int, *, length: int | None = None, rng: RNGLike = None
) -> NDArray[np.int64]:
    """A random 1-D range workload of shape (n_queries, 2), inclusive ``[lo, hi]``.

    Without ``length`` each range's two ends are independent uniform bins, sorted (so every
    pair ``lo <= hi`` has probability proportional to 2, or 1 when ``lo == hi``). With
    ``length`` the start is uniform on ``0..n_bins-length``.

    Examples
    --------
    >>> w = random_ranges_1d(100, 5, rng=0)
    >>> w.shape, bool(((0 <= w[:, 0]) & (w[:, 0] <= w[:, 1]) & (w[:, 1] < 100)).all())
    ((5, 2), True)
    >>> (np.diff(random_ranges_1d(100, 3, length=10, rng=0), axis=1) == 9).all()
    np.True_
    """
    n = check_positive_int(n_bins, "n_bins")
    m = check_positive_int(n_queries, "n_queries")
    gen = as_generator(rng)
    if length is None:
        ends = np.sort(gen.integers(0, n, size=(m, 2)), axis=1)
        return ends.astype(np.int64)
    r = check_positive_int(length, "length")
    if r > n:
        raise ParameterError(f"length must be <= n_bins ({n}), got {r}", param="length")
    lo = gen.integers(0, n - r + 1, size=m)
    return np.stack([lo, lo + r - 1], axis=1).astype(np.int64)


# --------------------------------------------------------------------------------------------
# range queries: 2-D
# --------------------------------------------------------------------------------------------
def summed_area_table(grid: ArrayLike) -> NDArray[Any]:
    """Zero-padded summed-area table ``S`` of shape (nx + 1, ny + 1): ``S[i, j] = grid[:i, :j].sum()``.

    Examples
    --------
    >>> summed_area_table([[1, 2], [3, 4]]).tolist()
    [[0, 0, 0], [0, 1, 3], [0, 4, 10]]
    """
    g = check_array(grid, "grid", ndim=2)
    work = g.astype(np.int64) if g.dtype.kind in "biu" else g.astype(np.float64)
    sat = np.zeros((g.shape[0] + 1, g.shape[1] + 1), dtype=work.dtype)
    np.cumsum(np.cumsum(work, axis=0), axis=1, out=sat[1:, 1:])
    return sat


def range_sums_2d(grid: ArrayLike, rectangles: ArrayLike) -> NDArray[Any]:
    """Answer inclusive rectangle counts on a grid with a summed-area table.

    Parameters
    ----------
    grid : array_like, shape (nx, ny)
        Cell counts; the first axis is x.
    rectangles : array_like of int, shape (q, 4)
        Rows ``[x_lo, y_lo, x_hi, y_hi]`` of cell indices, both ends inclusive:
        ``grid[x_lo:x_hi + 1, y_lo:y_hi + 1].sum()``.

    Returns
    -------
    ndarray, shape (q,)

    Examples
    --------
    >>> g = np.arange(12).reshape(3, 4)
    >>> range_sums_2d(g, [[0, 0, 2, 3], [1, 1, 2, 2], [2, 3, 2, 3]]).tolist()
    [66, 30, 11]
    """
    sat = summed_area_table(grid)
    nx, ny = sat.shape[0] - 1, sat.shape[1] - 1
    r = _check_int_array(rectangles, "rectangles", 4)
    x0, y0, x1, y1 = r[:, 0], r[:, 1], r[:, 2], r[:, 3]
    bad = (x0 < 0) | (y0 < 0) | (x1 >= nx) | (y1 >= ny) | (x0 > x1) | (y0 > y1)
    if np.any(bad):
        raise DomainError(
            f"rectangles must satisfy 0 <= x_lo <= x_hi < {nx} and 0 <= y_lo <= y_hi < {ny}, "
            f"got {r[bad][0].tolist()}"
        , param="rectangles")
    return np.asarray(sat[x1 + 1, y1 + 1] - sat[x0, y1 + 1] - sat[x1 + 1, y0] + sat[x0, y0])


def box_sums_2d(grid: ArrayLike, boxes: ArrayLike) -> NDArray[np.float64]:
    """Answer real-valued boxes on a grid, assuming counts are uniform inside each cell.

    Parameters
    ----------
    grid : array_like, shape (nx, ny)
        Cell counts; cell ``(i, j)`` covers ``[i, i + 1) x [j, j + 1)`` in cell units.
    boxes : array_like, shape (q, 4)
        Rows ``[x_lo, y_lo, x_hi, y_hi]`` in cell units with ``0 <= x_lo <= x_hi <= nx`` and
        ``0 <= y_lo <= y_hi <= ny``. A cell partly covered contributes the covered fraction
        of its count (exact bilinear interpolation of the summed-area table). Integer boxes
        ``[a, b, c + 1, d + 1]`` equal ``range_sums_2d`` with ``[a, b, c, d]``.

    Examples
    --------
    >>> box_sums_2d([[4, 8], [0, 0]], [[0, 0, 1, 2], [0, 0, 0.5, 1.5], [0, 0, 2, 2]]).tolist()
    [12.0, 4.0, 12.0]
    """
    sat = summed_area_table(grid).astype(np.float64)
    nx, ny = sat.shape[0] - 1, sat.shape[1] - 1
    b = check_array(boxes, "boxes", allow_empty=True).astype(np.float64)
    if b.ndim == 1 and b.size == 4:
        b = b[None, :]
    if b.ndim != 2 or b.shape[1] != 4:
        raise ParameterError(f"boxes must have shape (q, 4), got {b.shape}", param="boxes")
    x0, y0, x1, y1 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    bad = (x0 < 0) | (y0 < 0) | (x1 > nx) | (y1 > ny) | (x0 > x1) | (y0 > y1)
    if np.any(bad):
        raise DomainError(
            f"boxes must satisfy 0 <= x_lo <= x_hi <= {nx} and 0 <= y_lo <= y_hi <= {ny}, "
            f"got {b[bad][0].tolist()}"
        , param="boxes")

    def at(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
        i = np.minimum(np.floor(x).astype(np.int64), nx - 1)
        j = np.minimum(np.floor(y).astype(np.int64), ny - 1)
        fx, fy = x - i, y - j
        return np.asarray((1 - fx) * (1 - fy) * sat[i, j] + fx * (1 - fy) * sat[i + 1, j]
                          + (1 - fx) * fy * sat[i, j + 1] + fx * fy * sat[i + 1, j + 1], dtype=np.float64)

    return at(x1, y1) - at(x0, y1) - at(x1, y0) + at(x0, y0)


def random_rectangles_2d(
    shape: tuple[int, int], n_queries: int, *, rng: RNGLike = None
) -> NDArray[np.int64]:
    """Random inclusive cell rectangles ``[x_lo, y_lo, x_hi, y_hi]`` on a grid of ``shape``.

    On each axis the two ends are independent uniform cells, sorted.

    Examples
    --------
    >>> r = random_rectangles_2d((16, 8), 4, rng=1)
    >>> r.shape, bool((r[:, 2] < 16).all() and (r[:, 3] < 8).all())
    ((4, 4), True)
    """
    nx, ny = _shape2(shape)
    m = check_positive_int(n_queries, "n_queries")
    gen = as_generator(rng)
    xs = np.sort(gen.integers(0, nx, size=(m, 2)), axis=1)
    ys = np.sort(gen.integers(0, ny, size=(m, 2)), axis=1)
    return np.stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1]], axis=1).astype(np.int64)


def random_boxes_2d(
    n_queries: int,
    *,
    area: tuple[float, float] = (0.05, 0.2),
    bounds: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0),
    rng: RNGLike = None,
) -> NDArray[np.float64]:
    """Random axis-aligned boxes ``[x_lo, y_lo, x_hi, y_hi]`` covering a fraction of the bounds' area.

    Per box: area fraction ``a ~ U[area]``, aspect ratio ``r`` log-uniform on [1/2, 2],
    side fractions ``sx = min(1, sqrt(a r))``, ``sy = a / sx`` (if ``sy > 1``: ``sy = 1``,
    ``sx = a``), lower corner uniform so the box lies inside ``bounds``. This is the
    size-class workload of the spatial spec; the draws are made in the order a, log r, x, y.

    Examples
    --------
    >>> b = random_boxes_2d(1000, area=(0.05, 0.2), rng=7)
    >>> frac = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    >>> bool((frac >= 0.05 - 1e-12).all() and (frac <= 0.2 + 1e-12).all())
    True
    """
    m = check_positive_int(n_queries, "n_queries")
    lo_a, hi_a = (check_real(v, "area") for v in area)
    if not 0 < lo_a <= hi_a <= 1:
        raise ParameterError(f"area must satisfy 0 < low <= high <= 1, got {area}", param="area")
    bx0, by0, bx1, by1 = check_bounds_2d(bounds)
    gen = as_generator(rng)
    a = gen.uniform(lo_a, hi_a, size=m)
    logr = gen.uniform(math.log(0.5), math.log(2.0), size=m)
    sx = np.minimum(1.0, np.sqrt(a * np.exp(logr)))
    sy = a / sx
    over = sy > 1
    sy = np.where(over, 1.0, sy)
    sx = np.where(over, a, sx)
    x0 = gen.uniform(0.0, 1.0, size=m) * (1 - sx)
    y0 = gen.uniform(0.0, 1.0, size=m) * (1 - sy)
    w, h = bx1 - bx0, by1 - by0
    return np.stack([bx0 + w * x0, by0 + h * y0, bx0 + w * (x0 + sx), by0 + h * (y0 + sy)], axis=1)


def _shape2(shape: Any) -> tuple[int, int]:
    try:
        nx, ny = shape
    except (TypeError, ValueError):
        raise ParameterError(f"shape must be a pair (nx, ny), got {shape!r}", param="shape") from None
    return check_positive_int(nx, "shape[0]"), check_positive_int(ny, "shape[1]")
