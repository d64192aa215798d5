"""Evaluation helpers: surrogate point sets, grid-to-points, random range queries, exact counts."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import RNGLike, as_generator, check_array, check_counts, check_positive_int
from privpub.errors import ParameterError

__all__ = ["ExactRangeCounter", "grid_to_points", "random_queries", "synthetic_checkin", "synthetic_landmark"]

#: query size classes of the paper, as fractions of the domain's area
SIZE_CLASSES = ((0.05, 0.20), (0.20, 0.40), (0.40, 0.60))


def synthetic_checkin(n_points: int, rng: RNGLike = None) -> NDArray[np.float64]:
    """Skewed check-in-like points on the unit square: 98% from 200 Gaussian hot spots, 2% uniform.

    Examples
    --------
    >>> synthetic_checkin(1000, rng=0).shape
    (1000, 2)
    """
    n = check_positive_int(n_points, "n_points")
    gen = as_generator(rng)
    k = 200
    centres = gen.uniform(0.05, 0.95, size=(k, 2))
    weights = np.arange(1, k + 1, dtype=np.float64) ** -1.2
    stds = np.exp(gen.uniform(np.log(0.0005), np.log(0.01), size=k))
    n_clustered, n_uniform = gen.multinomial(n, [0.98, 0.02])
    comp = np.repeat(np.arange(k), gen.multinomial(n_clustered, weights / weights.sum()))
    pts = centres[comp] + gen.standard_normal((comp.size, 2)) * stds[comp, None]
    pts = np.concatenate([pts, gen.random((n_uniform, 2))])
    return np.asarray(np.clip(pts, 0.0, 1.0), dtype=np.float64)


def synthetic_landmark(n_points: int, rng: RNGLike = None) -> NDArray[np.float64]:
    """Denser, more even taxi-like points on the unit square: one long 60-degree band plus spots.

    Examples
    --------
    >>> synthetic_landmark(1000, rng=0).shape
    (1000, 2)
    """
    n = check_positive_int(n_points, "n_points")
    gen = as_generator(rng)
    n_band, n_a, n_b, n_uniform = gen.multinomial(n, [0.80, 0.05, 0.05, 0.10])
    angle = np.deg2rad(60.0)
    along = np.array([np.cos(angle), np.sin(angle)])
    across = np.array([-np.sin(angle), np.cos(angle)])
    z = gen.standard_normal((n_band, 2))
    band = 0.5 + np.outer(z[:, 0] * 0.15, along) + np.outer(z[:, 1] * 0.03, across)
    spot_a = np.array([0.8, 0.25]) + gen.standard_normal((n_a, 2)) * 0.01
    spot_b = np.array([0.25, 0.2]) + gen.standard_normal((n_b, 2)) * 0.01
    pts = np.concatenate([band, spot_a, spot_b, gen.random((n_uniform, 2))])
    return np.asarray(np.clip(pts, 0.0, 1.0), dtype=np.float64)


def grid_to_points(grid: ArrayLike, n_points: int | None = None, seed: int = 20220501) -> NDArray[np.float64]:
    """Turn a count grid ``a[i, j]`` (i along x) into points on the unit square (spec section 5).

    Each count becomes one point placed uniformly inside its cell; with ``n_points`` a uniform
    subsample without replacement is taken first. The result is fixed by ``seed``.

    Examples
    --------
    >>> grid_to_points([[2, 0], [0, 1]]).shape
    (3, 2)
    """
    a = check_counts(np.asarray(grid, dtype=np.float64), "grid", ndim=2)
    gx, gy = a.shape
    g = np.random.default_rng(seed)
    cells = np.repeat(np.arange(gx * gy), a.ravel())
    if n_points is not None:
        n_points = check_positive_int(n_points, "n_points")
        if n_points < cells.size:
            cells = g.choice(cells, n_points, replace=False)
    n = cells.size
    x = (cells // gy + g.random(n)) / gx
    y = (cells % gy + g.random(n)) / gy
    return np.column_stack([x, y])


def random_queries(
    n_queries: int, lo: float, hi: float, rng: RNGLike = None, *, size_mode: str = "area"
) -> NDArray[np.float64]:
    """Random query rectangles on the unit square whose area (or side) fraction lies in ``[lo, hi]``.

    Draws the area ``a ~ U[lo, hi]``, then the log aspect ratio on ``[log 1/2, log 2]``, then the
    lower-left corner so that the rectangle lies inside the square (spec section 5).

    Examples
    --------
    >>> q = random_queries(100, 0.05, 0.2, rng=7)
    >>> bool(((q[:, 2] - q[:, 0]) * (q[:, 3] - q[:, 1]) >= 0.05 - 1e-12).all())
    True
    """
    n = check_positive_int(n_queries, "n_queries")
    if not 0 < lo <= hi <= 1:
        raise ParameterError(f"lo and hi must satisfy 0 < lo <= hi <= 1, got ({lo}, {hi})")
    gen = as_generator(rng)
    a = gen.uniform(lo, hi, n)
    log_r = gen.uniform(np.log(0.5), np.log(2.0), n)
    if size_mode == "area":
        sx = np.minimum(1.0, np.sqrt(a * np.exp(log_r)))
        sy = a / sx
        over = sy > 1.0
        sy[over] = 1.0
        sx[over] = a[over]
    elif size_mode == "side":
        sx = a
        sy = np.clip(a * np.exp(log_r), lo, hi)
    else:
        raise ParameterError(f"size_mode must be 'area' or 'side', got {size_mode!r}", param="size_mode")
    x0 = gen.random(n) * (1.0 - sx)
    y0 = gen.random(n) * (1.0 - sy)
    return np.column_stack([x0, y0, x0 + sx, y0 + sy])


class ExactRangeCounter:
    """Exact number of points in closed query rectangles, O((N + q) log N) (a merge-sort tree).

    Built once per point set; levels of the tree are generated on the fly so memory stays O(N).

    Examples
    --------
    >>> c = ExactRangeCounter([[0.1, 0.1], [0.5, 0.5], [0.9, 0.2]])
    >>> c.count([[0, 0, 0.5, 0.5], [0.0, 0.0, 1.0, 0.3]]).tolist()
    [2, 2]
    """

    def __init__(self, points: ArrayLike) -> None:
        pts = check_array(points, "points", ndim=2).astype(np.float64)
        order = np.argsort(pts[:, 0], kind="stable")
        self._xs = pts[order, 0]
        ys = pts[order, 1]
        self._ys_sorted = np.sort(ys)
        self._yrank = np.searchsorted(self._ys_sorted, ys, side="left").astype(np.int64)
        self.n = pts.shape[0]

    def count(self, rects: ArrayLike) -> NDArray[np.int64]:
        r = np.asarray(rects, dtype=np.float64).reshape(-1, 4)
        lo = np.searchsorted(self._xs, r[:, 0], side="left").astype(np.int64)
        hi = np.searchsorted(self._xs, r[:, 2], side="right").astype(np.int64)
        ylo = np.searchsorted(self._ys_sorted, r[:, 1], side="left").astype(np.int64)  # rank >= ylo
        yhi = np.searchsorted(self._ys_sorted, r[:, 3], side="right").astype(np.int64)  # rank < yhi
        n = self.n
        size = 1
        while size < n:
            size *= 2
        big = np.int64(size + 1)
        total = np.zeros(r.shape[0], dtype=np.int64)
        base = np.full(size, size, dtype=np.int64)  # padding ranks never fall in a query
        base[:n] = self._yrank
        level = base
        width = 1
        while lo.size and width <= size:
            # blocks of this level are [k*width, (k+1)*width), each sorted by y rank
            keys = (np.arange(size, dtype=np.int64) // width) * big + level
            take_lo = (lo < hi) & (lo % 2 == 1)
            take_hi = (lo < hi) & (hi % 2 == 1)
            for take, node in ((take_lo, lo), (take_hi, hi - 1)):
                idx = np.flatnonzero(take)
                if idx.size:
                    off = node[idx] * big
                    total[idx] += (np.searchsorted(keys, off + yhi[idx], side="left")
                                   - np.searchsorted(keys, off + ylo[idx], side="left"))
            lo = np.where(take_lo, lo + 1, lo) // 2
            hi = np.where(take_hi, hi - 1, hi) // 2
            width *= 2
            if width <= size:
                level = np.sort(level.reshape(-1, width), axis=1).ravel()
        return total
