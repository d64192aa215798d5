"""Built-in data generators with known ground truth, for demos and tests (no download needed).

Every generator takes ``rng`` (int, Generator, SeedSequence or None): the same seed gives the
same data.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr

from privpub.core import (
    CategoricalAttribute,
    RNGLike,
    Schema,
    as_generator,
    check_array,
    check_bounds_2d,
    check_positive_int,
    check_probability,
    check_real,
    readonly,
)
from privpub.datasets._base import TableDataset
from privpub.datasets._schemas import IRIS_CLASSES, IRIS_COLUMNS, iris_schema
from privpub.errors import ParameterError

__all__ = [
    "BayesNetSample",
    "PointSample",
    "bayesnet_table",
    "bursty_stream",
    "clustered_points",
    "iris",
    "zipf_histogram",
    "zipf_probabilities",
]


# --------------------------------------------------------------------------------------------
# Zipf histogram
# --------------------------------------------------------------------------------------------
def zipf_probabilities(n_bins: int, exponent: float = 1.1) -> NDArray[np.float64]:
    """Zipf-like bin probabilities ``p_i ∝ (i + 1) ** -exponent``, ``i = 0..n_bins-1``.

    Examples
    --------
    >>> zipf_probabilities(3, 1.0).round(4).tolist()
    [0.5455, 0.2727, 0.1818]
    """
    n = check_positive_int(n_bins, "n_bins")
    s = check_real(exponent, "exponent")
    if s < 0:
        raise ParameterError(f"exponent must be >= 0, got {s}", param="exponent")
    w = np.arange(1, n + 1, dtype=np.float64) ** -s
    return np.asarray(w / w.sum(), dtype=np.float64)


def zipf_histogram(
    n_bins: int, total: int = 100_000, exponent: float = 1.1, rng: RNGLike = None, *, shuffle: bool = False
) -> NDArray[np.int64]:
    """A histogram of ``total`` records drawn from :func:`zipf_probabilities` (multinomial).

    Parameters
    ----------
    n_bins : int
        Number of bins.
    total : int
        Number of records (the histogram sums to it exactly).
    exponent : float >= 0
        Zipf exponent (0 gives the uniform distribution).
    rng : int, Generator or None
        Randomness.
    shuffle : bool, default False
        Randomly permute the bins (otherwise counts decrease in expectation with the index).

    Returns
    -------
    ndarray of int64, shape (n_bins,)
        The ground-truth distribution is ``zipf_probabilities(n_bins, exponent)`` (permuted
        alike when ``shuffle``).

    Examples
    --------
    >>> h = zipf_histogram(8, 1000, 1.5, rng=0)
    >>> int(h.sum()), h.dtype.name
    (1000, 'int64')
    """
    p = zipf_probabilities(n_bins, exponent)
    n = check_positive_int(total, "total", minimum=0)
    gen = as_generator(rng)
    counts = gen.multinomial(n, p).astype(np.int64)
    return gen.permutation(counts) if shuffle else counts


# --------------------------------------------------------------------------------------------
# Bayesian-network table
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BayesNetSample:
    """A categorical table sampled from a known Bayesian network.

    Attributes
    ----------
    frame : pandas.DataFrame
        ``n`` records; column ``a`` holds integer codes ``0..k_a-1``.
    schema : Schema
        Categorical attributes with categories ``"0"``, ``"1"``, ...
    network : tuple of (str, tuple of str)
        ``(attribute, parents)`` pairs in a topological order.
    cpts : dict of str to ndarray
        Conditional tables: ``cpts[a]`` has shape ``(*parent sizes, k_a)``; rows sum to 1.
    """

    frame: pd.DataFrame = field(repr=False)
    schema: Schema = field(repr=False)
    network: tuple[tuple[str, tuple[str, ...]], ...]
    cpts: dict[str, NDArray[np.float64]] = field(repr=False)

    def marginal(self, attributes: list[str] | tuple[str, ...]) -> NDArray[np.float64]:
        """Exact marginal distribution of ``attributes`` (axes in the given order) under the network.

        Computed by contracting the conditional tables (no sampling error).
        """
        names = list(self.schema.names)
        attrs = list(attributes)
        unknown = [a for a in attrs if a not in names]
        if unknown or len(set(attrs)) != len(attrs) or not attrs:
            raise ParameterError(f"attributes must be distinct names from {names}, got {attrs}", param="attributes")
        operands: list[Any] = []
        for child, parents in self.network:
            operands.append(self.cpts[child])
            operands.append([names.index(p) for p in parents] + [names.index(child)])
        operands.append([names.index(a) for a in attrs])
        return np.asarray(np.einsum(*operands, optimize="greedy"), dtype=np.float64)

    def joint(self) -> NDArray[np.float64]:
        """Exact joint distribution over all attributes (schema order); size must be <= 2**24 cells."""
        size = math.prod(self.schema.sizes)
        if size > 2**24:
            raise ParameterError(f"joint must have <= 2**24 cells, got {size}; use marginal() instead", param="joint")
        return self.marginal(self.schema.names)


def bayesnet_table(
    n: int,
    rng: RNGLike = None,
    *,
    n_attributes: int = 6,
    domain_sizes: ArrayLike | None = None,
    max_parents: int = 2,
    concentration: float = 0.5,
) -> BayesNetSample:
    """Sample ``n`` records from a random Bayesian network (the network is returned as ground truth).

    Attribute ``A{i}`` takes up to ``max_parents`` parents chosen at random among ``A0..A{i-1}``
    (so the order is topological); each row of its conditional table is drawn from a symmetric
    Dirichlet with ``concentration`` (small values give strong dependencies). Records are drawn
    by vectorised ancestral sampling.

    Parameters
    ----------
    n : int
        Number of records.
    rng : int, Generator or None
        Randomness for the network, its tables and the records.
    n_attributes : int, default 6
        Number of attributes (at most 52).
    domain_sizes : sequence of int or None
        Domain size of each attribute (>= 2); None draws each from {2, 3, 4}.
    max_parents : int, default 2
        Maximum in-degree.
    concentration : float > 0, default 0.5
        Dirichlet parameter of the conditional tables.

    Examples
    --------
    >>> s = bayesnet_table(2000, rng=0, n_attributes=3, domain_sizes=[2, 3, 2])
    >>> s.frame.shape, s.schema.sizes
    ((2000, 3), (2, 3, 2))
    >>> round(float(s.marginal(["A1"]).sum()), 12)
    1.0
    """
    m = check_positive_int(n, "n")
    d = check_positive_int(n_attributes, "n_attributes")
    if d > len(string.ascii_letters):
        raise ParameterError(f"n_attributes must be <= {len(string.ascii_letters)}, got {d}", param="n_attributes")
    k_max = check_positive_int(max_parents, "max_parents", minimum=0)
    alpha = check_real(concentration, "concentration")
    if alpha <= 0:
        raise ParameterError(f"concentration must be > 0, got {alpha}", param="concentration")
    gen = as_generator(rng)
    if domain_sizes is None:
        sizes = gen.integers(2, 5, size=d).astype(np.int64)
    else:
        sizes = check_array(domain_sizes, "domain_sizes", ndim=1).astype(np.int64)
        if sizes.shape[0] != d or np.any(sizes < 2):
            raise ParameterError(
                f"domain_sizes must hold {d} integers >= 2 (one per attribute), got {sizes.tolist()}"
            , param="domain_sizes")
    names = [f"A{i}" for i in range(d)]
    network: list[tuple[str, tuple[str, ...]]] = []
    cpts: dict[str, NDArray[np.float64]] = {}
    codes = np.empty((m, d), dtype=np.int64)
    for i in range(d):
        k = int(gen.integers(0, min(k_max, i) + 1))
        parents = tuple(sorted(gen.choice(i, size=k, replace=False).tolist())) if k else ()
        psizes = tuple(int(sizes[p]) for p in parents)
        table = gen.dirichlet(np.full(int(sizes[i]), alpha), size=psizes or None)
        table = np.asarray(table, dtype=np.float64).reshape(*psizes, int(sizes[i]))
        cpts[names[i]] = readonly(table)
        network.append((names[i], tuple(names[p] for p in parents)))
        config = np.ravel_multi_index(tuple(codes[:, p] for p in parents), psizes) if parents else np.zeros(
            m, dtype=np.int64)
        cum = np.cumsum(table.reshape(-1, int(sizes[i])), axis=1)
        u = gen.random(m)
        codes[:, i] = np.minimum((u[:, None] >= cum[config]).sum(axis=1), int(sizes[i]) - 1)
    schema = Schema(tuple(CategoricalAttribute(nm, tuple(str(v) for v in range(int(k))))
                          for nm, k in zip(names, sizes)))
    frame = pd.DataFrame(codes, columns=names)
    return BayesNetSample(frame=frame, schema=schema, network=tuple(network), cpts=cpts)


# --------------------------------------------------------------------------------------------
# clustered 2-D points
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PointSample:
    """2-D points from a known mixture of truncated Gaussians and a uniform background.

    Attributes
    ----------
    points : ndarray, shape (n, 2)
        Inside ``bounds``.
    bounds : tuple of float
        Public domain ``(x_lo, y_lo, x_hi, y_hi)``.
    centers : ndarray, shape (c, 2)
    scales : ndarray, shape (c,)
        Standard deviation of each (isotropic) cluster before truncation to ``bounds``.
    weights : ndarray, shape (c + 1,)
        Mixture weights of the clusters, then of the uniform background.
    """

    points: NDArray[np.float64] = field(repr=False)
    bounds: tuple[float, float, float, float]
    centers: NDArray[np.float64] = field(repr=False)
    scales: NDArray[np.float64] = field(repr=False)
    weights: NDArray[np.float64] = field(repr=False)

    def box_probability(self, boxes: ArrayLike) -> NDArray[np.float64]:
        """Exact probability mass of each box ``[x_lo, y_lo, x_hi, y_hi]`` (clipped to ``bounds``)."""
        b = check_array(boxes, "boxes").astype(np.float64).reshape(-1, 4)
        x0, y0, x1, y1 = self.bounds
        bx0, bx1 = np.clip(b[:, 0], x0, x1), np.clip(b[:, 2], x0, x1)
        by0, by1 = np.clip(b[:, 1], y0, y1), np.clip(b[:, 3], y0, y1)
        area = (x1 - x0) * (y1 - y0)
        prob = self.weights[-1] * np.maximum(bx1 - bx0, 0) * np.maximum(by1 - by0, 0) / area
        for (cx, cy), s, w in zip(self.centers, self.scales, self.weights[:-1]):
            zx = ndtr((x1 - cx) / s) - ndtr((x0 - cx) / s)
            zy = ndtr((y1 - cy) / s) - ndtr((y0 - cy) / s)
            px = (ndtr((bx1 - cx) / s) - ndtr((bx0 - cx) / s)) / zx
            py = (ndtr((by1 - cy) / s) - ndtr((by0 - cy) / s)) / zy
            prob = prob + w * np.maximum(px, 0) * np.maximum(py, 0)
        return np.asarray(prob, dtype=np.float64)

    def cell_probabilities(self, shape: tuple[int, int]) -> NDArray[np.float64]:
        """Exact probability of each cell of a regular ``shape`` grid over ``bounds`` (first axis x)."""
        nx, ny = (check_positive_int(v, "shape") for v in shape)
        x0, y0, x1, y1 = self.bounds
        xe, ye = np.linspace(x0, x1, nx + 1), np.linspace(y0, y1, ny + 1)
        gx, gy = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
        boxes = np.stack([xe[gx], ye[gy], xe[gx + 1], ye[gy + 1]], axis=-1).reshape(-1, 4)
        return self.box_probability(boxes).reshape(nx, ny)


def clustered_points(
    n: int,
    rng: RNGLike = None,
    *,
    n_clusters: int = 5,
    spread: tuple[float, float] = (0.02, 0.08),
    background: float = 0.1,
    bounds: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0),
) -> PointSample:
    """Sample ``n`` 2-D points from a random mixture of Gaussian clusters truncated to ``bounds``.

    Parameters
    ----------
    n : int
        Number of points.
    rng : int, Generator or None
        Randomness for the mixture and the points.
    n_clusters : int, default 5
        Number of clusters; centres uniform in ``bounds``, weights Dirichlet(1).
    spread : (float, float)
        Range of the cluster standard deviations, as fractions of the bounds' width.
    background : float in [0, 1), default 0.1
        Weight of a uniform background component.
    bounds : (x_lo, y_lo, x_hi, y_hi)
        Public domain (default the unit square).

    Returns
    -------
    PointSample
        The points and the exact density (``box_probability``, ``cell_probabilities``).

    Examples
    --------
    >>> s = clustered_points(1000, rng=0)
    >>> s.points.shape, bool((s.points >= 0).all() and (s.points <= 1).all())
    ((1000, 2), True)
    >>> round(float(s.cell_probabilities((4, 4)).sum()), 9)
    1.0
    """
    m = check_positive_int(n, "n")
    c = check_positive_int(n_clusters, "n_clusters")
    bg = check_probability(background, "background", closed="left")
    lo_s, hi_s = (check_real(v, "spread") for v in spread)
    if not 0 < lo_s <= hi_s:
        raise ParameterError(f"spread must satisfy 0 < low <= high, got {spread}", param="spread")
    x0, y0, x1, y1 = check_bounds_2d(bounds)
    gen = as_generator(rng)
    centers = np.column_stack([gen.uniform(x0, x1, c), gen.uniform(y0, y1, c)])
    scales = gen.uniform(lo_s, hi_s, c) * (x1 - x0)
    weights = np.append((1 - bg) * gen.dirichlet(np.ones(c)), bg)
    comp = gen.choice(c + 1, size=m, p=weights)
    pts = np.empty((m, 2))
    is_bg = comp == c
    pts[is_bg] = np.column_stack([gen.uniform(x0, x1, is_bg.sum()), gen.uniform(y0, y1, is_bg.sum())])
    todo = np.flatnonzero(~is_bg)
    while todo.size:  # rejection sampling of the truncated Gaussians, vectorised over points
        k = comp[todo]
        cand = centers[k] + scales[k, None] * gen.standard_normal((todo.size, 2))
        ok = (cand[:, 0] >= x0) & (cand[:, 0] <= x1) & (cand[:, 1] >= y0) & (cand[:, 1] <= y1)
        pts[todo[ok]] = cand[ok]
        todo = todo[~ok]
    return PointSample(points=readonly(pts), bounds=(x0, y0, x1, y1), centers=readonly(centers),
                       scales=readonly(scales), weights=readonly(weights))


# --------------------------------------------------------------------------------------------
# bursty stream
# --------------------------------------------------------------------------------------------
def bursty_stream(
    length: int,
    rng: RNGLike = None,
    *,
    base_rate: float = 2.0,
    burst_rate: float = 40.0,
    burst_start: float = 0.01,
    mean_burst: float = 20.0,
) -> NDArray[np.int64]:
    """A count stream from a two-state Markov-modulated Poisson process (quiet / burst).

    Each step is quiet or in a burst; a quiet step starts a burst with probability
    ``burst_start`` and a burst ends with probability ``1 / mean_burst``. The count at a step is
    Poisson with ``base_rate`` (quiet) or ``burst_rate`` (burst).

    Returns
    -------
    ndarray of int64, shape (length,)
        Non-negative counts (these are the true values a stream publisher is scored against).

    Examples
    --------
    >>> s = bursty_stream(1000, rng=0)
    >>> s.shape, s.dtype.name, bool((s >= 0).all())
    ((1000,), 'int64', True)
    """
    t = check_positive_int(length, "length")
    lam0 = check_real(base_rate, "base_rate")
    lam1 = check_real(burst_rate, "burst_rate")
    if lam0 < 0 or lam1 < 0:
        raise ParameterError(f"base_rate and burst_rate must be >= 0, got {lam0} and {lam1}")
    p_on = check_probability(burst_start, "burst_start", closed="both")
    mb = check_real(mean_burst, "mean_burst")
    if mb < 1:
        raise ParameterError(f"mean_burst must be >= 1, got {mb}", param="mean_burst")
    gen = as_generator(rng)
    # alternating runs, starting quiet: quiet ~ Geometric(burst_start), burst ~ Geometric(1/mean_burst)
    if p_on == 0:
        state = np.zeros(t, dtype=bool)
    else:
        pairs = int(t / (1.0 / p_on + mb)) + 16
        quiet, burst = gen.geometric(p_on, size=pairs), gen.geometric(1.0 / mb, size=pairs)
        while quiet.sum() + burst.sum() < t:  # rare: draw more runs
            quiet = np.concatenate([quiet, gen.geometric(p_on, size=pairs)])
            burst = np.concatenate([burst, gen.geometric(1.0 / mb, size=pairs)])
        runs = np.column_stack([quiet, burst]).ravel()
        flags = np.tile(np.array([False, True]), quiet.size)
        state = np.repeat(flags, runs)[:t]
    rates = np.where(state, lam1, lam0)
    return gen.poisson(rates).astype(np.int64)


# --------------------------------------------------------------------------------------------
# Iris from scikit-learn
# --------------------------------------------------------------------------------------------
def iris(rng: RNGLike = None, *, shuffle: bool = False) -> TableDataset:
    """Fisher's Iris from scikit-learn's bundled copy, with the same columns and schema as ``load("iris")``.

    scikit-learn ships the corrected (Bezdek) values, so rows 35 and 38 differ from UCI's
    ``iris.data`` read by ``load("iris")``. ``rng`` is used only when ``shuffle`` is True.

    Examples
    --------
    >>> ds = iris()
    >>> ds.frame.shape, ds.schema.classes[0]
    ((150, 5), 'Iris-setosa')
    """
    from sklearn.datasets import load_iris

    bunch = load_iris()
    frame = pd.DataFrame(np.round(bunch.data, 1), columns=list(IRIS_COLUMNS[:-1]))
    frame["class"] = np.asarray(IRIS_CLASSES, dtype=object)[bunch.target]
    if shuffle:
        frame = frame.iloc[as_generator(rng).permutation(len(frame))].reset_index(drop=True)
    schema = iris_schema()
    schema.validate(frame, require_class=True)
    return TableDataset(
        name="iris", kind="table", paths=(),
        source="scikit-learn sklearn.datasets.load_iris (bundled copy of UCI Iris, Bezdek-corrected)",
        description="Iris from scikit-learn: 150 records, 4 measurements in cm and the class.",
        frame=frame, schema=schema,
    )
