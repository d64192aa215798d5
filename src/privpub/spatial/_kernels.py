"""Pure array kernels of privpub.spatial: geometry, KDG, MTR, constrained inference, queries.

No validation, no I/O: callers in the publisher modules validate at the boundary.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from types import ModuleType

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BisectionGrids",
    "Block",
    "bisection_edges",
    "ci_combine",
    "descend",
    "grid_answer",
    "grid_edges",
    "grid_extract",
    "interval_index",
    "kd_partition",
    "kdg_height",
    "leaf_lookup",
    "level0_grid",
    "level0_leaf",
    "locate_in_leaves",
    "merge_sparse",
    "mtr_children",
    "mtr_kind",
    "mtr_split",
    "oue_v1",
    "overlap_answer",
    "round_half_up",
]

#: a side below this fraction of the domain is never halved (MTR guard)
MIN_SIDE = 2e-6

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def round_half_up(x: float) -> int:
    """round(x) = floor(x + 0.5), the rounding rule of the spec."""
    return math.floor(x + 0.5)


def oue_v1(epsilon: float) -> float:
    """Per-user variance constant of OUE: ``V1 = 4 e^eps / (e^eps - 1)^2``."""
    return 4.0 * math.exp(epsilon) / math.expm1(epsilon) ** 2


def grid_edges(lo: float, hi: float, g: int) -> F64:
    """``g + 1`` equal-width edges ``lo + i (hi - lo) / g``, the last one exactly ``hi``."""
    edges = lo + np.arange(g + 1, dtype=np.float64) * ((hi - lo) / g)
    edges[-1] = hi
    return edges


def interval_index(edges: F64, values: F64) -> I64:
    """Index of the half-open interval ``[e_i, e_{i+1})`` holding each value (last one closed)."""
    idx = np.searchsorted(edges, values, side="right").astype(np.int64)
    idx -= 1
    np.maximum(idx, 0, out=idx)
    np.minimum(idx, edges.size - 2, out=idx)
    return idx


def uniform_interval_index(edges: F64, values: F64) -> I64:
    """:func:`interval_index` for equal-width ``edges`` by arithmetic (same result, no search).

    The float estimate ``(v - e_0) / width`` is off by at most one near an edge; one comparison
    with the neighbouring edges corrects it. Values must lie in ``[e_0, e_m]``.
    """
    m = edges.size - 1
    idx: I64 = ((values - edges[0]) * (m / (edges[-1] - edges[0]))).astype(np.int64)
    np.minimum(idx, m - 1, out=idx)
    np.maximum(idx, 0, out=idx)
    idx -= values < edges[idx]
    upper = edges.copy()
    upper[-1] = np.inf  # the last interval is closed on the right
    idx += values >= upper[idx + 1]
    return idx


# ---------------------------------------------------------------------------------------------
# KDG (Algorithm 1)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    """A run of merged intervals on one axis: ``[lo, hi)`` interval indices, mass, density."""

    lo: int
    hi: int
    f: float
    w: float
    sparse: bool

    @property
    def den(self) -> float:
        return self.f / self.w if self.w > 0 else 0.0


def _rgdd(a: float, b: float) -> float:
    if a + b == 0.0:
        return 0.0
    return abs(b - a) / (b + a)


def merge_sparse(freq: F64, widths: F64, lam: float, tau: float) -> list[Block]:
    """Mark intervals sparse (``den < lam``) and merge adjacent sparse runs with ``rgdd < tau``.

    ``freq`` are the (Norm-Sub) interval frequencies summing to 1, ``widths`` the interval widths
    as fractions of the axis. Returns the ordered blocks of the axis.
    """
    blocks: list[Block] = []
    for i in range(freq.size):
        f, w = float(freq[i]), float(widths[i])
        den = f / w
        sparse = den < lam
        if sparse and blocks and blocks[-1].sparse and _rgdd(blocks[-1].den, den) < tau:
            prev = blocks[-1]
            blocks[-1] = Block(prev.lo, i + 1, prev.f + f, prev.w + w, True)
        else:
            blocks.append(Block(i, i + 1, f, w, sparse))
    return blocks


def kd_partition(bx: list[Block], by: list[Block]) -> list[tuple[int, int, int, int, str]]:
    """KD-style cut of the block grid (spec 2.3 step 6).

    Returns leaves as ``(bx_lo, bx_hi, by_lo, by_hi, kind)`` in block indices (half-open), sorted
    by their lower-left block corner.
    """
    leaves: list[tuple[int, int, int, int, str]] = []
    stack = [(0, len(bx), 0, len(by))]
    while stack:
        x_lo, x_hi, y_lo, y_hi = stack.pop()
        sx = [(bx[i].den, 0, i) for i in range(x_lo, x_hi) if bx[i].sparse]
        sy = [(by[j].den, 1, j) for j in range(y_lo, y_hi) if by[j].sparse]
        if not sx and not sy:
            leaves.append((x_lo, x_hi, y_lo, y_hi, "dense"))
            continue
        dx = any(not bx[i].sparse for i in range(x_lo, x_hi))
        dy = any(not by[j].sparse for j in range(y_lo, y_hi))
        if not dx or not dy:
            leaves.append((x_lo, x_hi, y_lo, y_hi, "sparse"))
            continue
        _, axis, b = min(sx + sy)  # ties: x (0) before y (1), then lower coordinate
        if axis == 0:
            leaves.append((b, b + 1, y_lo, y_hi, "sparse"))
            parts = [(x_lo, b, y_lo, y_hi), (b + 1, x_hi, y_lo, y_hi)]
        else:
            leaves.append((x_lo, x_hi, b, b + 1, "sparse"))
            parts = [(x_lo, x_hi, y_lo, b), (x_lo, x_hi, b + 1, y_hi)]
        for part in reversed(parts):
            if part[0] < part[1] and part[2] < part[3]:
                stack.append(part)
    leaves.sort(key=lambda t: (t[0], t[2]))
    return leaves


def kdg_height(n_hat: float, epsilon: float, h_max: int = 10) -> int:
    """Eq. 2: ``h = clamp(round(0.5 log2(n_hat eps / 10)), 1, h_max)``; 1 when ``n_hat eps/10 <= 1``."""
    arg = n_hat * epsilon / 10.0
    if arg <= 1.0:
        return 1
    return min(max(round_half_up(0.5 * math.log2(arg)), 1), h_max)


# ---------------------------------------------------------------------------------------------
# MTR (Algorithm 2)
# ---------------------------------------------------------------------------------------------
#: number of children of each MTR split kind (copy, binary on x, binary on y, quad)
N_CHILDREN = np.array([1, 2, 2, 4], dtype=np.int64)


def mtr_kind(
    x0: F64, x1: F64, y0: F64, y1: F64, y: F64, theta: float, width: float, height: float,
    *, binary: bool = True, frozen: NDArray[np.bool_] | None = None,
) -> I64:
    """MTR's decision per leaf: 0 copy, 1 binary split on x, 2 binary split on y, 3 quad split.

    Quad split when ``y > theta``; binary split of the longer side when ``theta / 2 < y <= theta``
    (only with ``binary``); else the leaf is copied. Leaves marked ``frozen`` are always copied;
    a side below ``MIN_SIDE`` of the domain is never halved.
    """
    wx = (x1 - x0) / width
    wy = (y1 - y0) / height
    can_x = wx >= MIN_SIDE
    can_y = wy >= MIN_SIDE
    quad = y > theta
    halves = (y > theta / 2.0) & ~quad if binary else np.zeros(y.size, dtype=bool)
    if frozen is not None:
        quad &= ~frozen
        halves &= ~frozen
    kind = np.zeros(y.size, dtype=np.int64)
    # quad split, degraded when one side may not be halved
    kind[quad & can_x & can_y] = 3
    kind[quad & can_x & ~can_y] = 1
    kind[quad & ~can_x & can_y] = 2
    longer_x = wx >= wy
    kind[halves & longer_x & can_x] = 1
    kind[halves & ~longer_x & can_y] = 2
    return kind


def mtr_children(kind: I64, x0: F64, x1: F64, y0: F64, y1: F64) -> tuple[F64, F64, F64, F64, I64]:
    """The children of an MTR step: rectangles and parent index, parents in order and each one's
    children sorted by ``(x0, y0)``; children keep the parent's exact edges and midpoints."""
    n_child = N_CHILDREN[kind]
    parent = np.repeat(np.arange(kind.size, dtype=np.int64), n_child)
    start = np.cumsum(n_child) - n_child
    code = np.arange(parent.size, dtype=np.int64) - start[parent]
    k = kind[parent]
    px0, px1, py0, py1 = x0[parent], x1[parent], y0[parent], y1[parent]
    mx = (px0 + px1) / 2.0
    my = (py0 + py1) / 2.0
    split_x = (k == 3) | (k == 1)
    split_y = (k == 3) | (k == 2)
    x_hi = np.where(k == 3, code >= 2, code == 1) & split_x
    y_hi = np.where(k == 3, code % 2 == 1, code == 1) & split_y
    cx0 = np.where(split_x & x_hi, mx, px0)
    cx1 = np.where(split_x & ~x_hi, mx, px1)
    cy0 = np.where(split_y & y_hi, my, py0)
    cy1 = np.where(split_y & ~y_hi, my, py1)
    return cx0, cx1, cy0, cy1, parent


def mtr_split(
    x0: F64, x1: F64, y0: F64, y1: F64, y: F64, theta: float, width: float, height: float,
    *, binary: bool = True, frozen: NDArray[np.bool_] | None = None,
) -> tuple[I64, F64, F64, F64, F64, I64]:
    """One MTR step (:func:`mtr_kind` then :func:`mtr_children`).

    Returns ``(kind, cx0, cx1, cy0, cy1, parent)``.
    """
    kind = mtr_kind(x0, x1, y0, y1, y, theta, width, height, binary=binary, frozen=frozen)
    return (kind, *mtr_children(kind, x0, x1, y0, y1))


@functools.cache
def _jit() -> ModuleType:
    """The compiled tree-phase kernels, imported on first use (``import privpub.spatial`` does not load Numba)."""
    from privpub.spatial import _jit as jit

    return jit


def descend(
    leaf: I64, px: F64, py: F64, kind: I64, x0: F64, x1: F64, y0: F64, y1: F64, start: I64,
    counts: I64 | None = None,
) -> I64:
    """Child index of each point given its parent leaf (``p >= mid`` goes to the upper child).

    Children of a quad split are ordered (lo, lo), (lo, hi), (hi, lo), (hi, hi) in (x, y), so the
    child offset is ``2 [px >= mx] + [py >= my]``; binary splits use one comparison; copies none
    (a parent that is not split on an axis has its midpoint at +inf there). One compiled pass
    over the points (:func:`privpub.spatial._jit.descend_count`), which also adds each point to
    ``counts[child]`` when ``counts`` is given.
    """
    mult_x = np.array([0, 1, 0, 2], dtype=np.int64)[kind]
    mult_y = np.array([0, 0, 1, 1], dtype=np.int64)[kind]
    mx = np.where(mult_x > 0, (x0 + x1) / 2.0, np.inf)
    my = np.where(mult_y > 0, (y0 + y1) / 2.0, np.inf)
    out = np.empty(leaf.size, dtype=np.int64)
    _jit().descend_count(np.ascontiguousarray(leaf, dtype=np.int64), np.ascontiguousarray(px, dtype=np.float64),
                         np.ascontiguousarray(py, dtype=np.float64), mx, my, mult_x, mult_y,
                         np.ascontiguousarray(start, dtype=np.int64), out,
                         np.zeros(0, dtype=np.int64) if counts is None else counts)
    return out


def level0_leaf(px: F64, py: F64, ex: F64, ey: F64, block_of_x: I64, block_of_y: I64, table: I64,
                counts: I64) -> I64:
    """Each point's level-0 leaf ``table[block_of_x[ix], block_of_y[iy]]``, with ``ix, iy`` its
    intervals on the equal-width edges ``ex, ey`` (as :func:`uniform_interval_index`), in one
    compiled pass that also adds each point to ``counts[leaf]``."""
    out = np.empty(px.size, dtype=np.int64)
    sx = (ex.size - 1) / (ex[-1] - ex[0])
    sy = (ey.size - 1) / (ey[-1] - ey[0])
    _jit().level0_leaf(np.ascontiguousarray(px, dtype=np.float64), np.ascontiguousarray(py, dtype=np.float64),
                       ex, float(sx), ey, float(sy), np.ascontiguousarray(block_of_x, dtype=np.int64),
                       np.ascontiguousarray(block_of_y, dtype=np.int64), np.ascontiguousarray(table, dtype=np.int64),
                       out, counts)
    return out


def bisection_edges(lo: F64, hi: F64, d: int) -> F64:
    """The ``2**d + 1`` edges of ``d`` iterated bisections of each ``[lo, hi]`` (one row per interval).

    Each midpoint is ``(a + b) / 2`` of its two parent edges, the float steps of
    :func:`mtr_children`, so a tree node's side is exactly one of these cells once ``d`` covers
    its depth.
    """
    e = np.stack([np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)], axis=1)
    for _ in range(d):
        out = np.empty((e.shape[0], 2 * e.shape[1] - 1), dtype=np.float64)
        out[:, 0::2] = e
        out[:, 1::2] = (e[:, :-1] + e[:, 1:]) / 2.0
        e = out
    return e


@dataclass(frozen=True)
class BisectionGrids:
    """Where a point falls on the bisection grids of the level-0 leaves.

    Leaf ``k`` is located as :func:`level0_leaf` does (KDG intervals on the equal-width edges
    ``ex, ey``, their blocks, the leaf of each block pair); its sides are bisected
    ``depth[k]`` times, with edges ``gx[gbase[k]:]`` and ``gy[gbase[k]:]``
    (:func:`bisection_edges`, ``2**depth[k] + 1`` each); its cell ``(cx, cy)`` is number
    ``hoff[k] + (cx << depth[k]) + cy`` of ``n_cells``.
    """

    ex: F64
    ey: F64
    block_of_x: I64
    block_of_y: I64
    table: I64
    depth: I64
    gx: F64
    gy: F64
    gbase: I64
    hoff: I64
    n_cells: int

    def _args(self) -> tuple[object, ...]:
        side = np.left_shift(1, self.depth).astype(np.float64)
        last = self.gbase + (1 << self.depth)
        return (self.ex, float((self.ex.size - 1) / (self.ex[-1] - self.ex[0])), self.ey,
                float((self.ey.size - 1) / (self.ey[-1] - self.ey[0])),
                np.ascontiguousarray(self.block_of_x, dtype=np.int64), np.ascontiguousarray(self.block_of_y, dtype=np.int64),
                np.ascontiguousarray(self.table, dtype=np.int64), np.ascontiguousarray(self.depth, dtype=np.int64),
                self.gx, self.gy, np.ascontiguousarray(self.gbase, dtype=np.int64),
                side / (self.gx[last] - self.gx[self.gbase]), side / (self.gy[last] - self.gy[self.gbase]),
                np.ascontiguousarray(self.hoff, dtype=np.int64))


def level0_grid(pts: F64, excluded: I64, grids: BisectionGrids,
                dtype: type = np.int32) -> tuple[NDArray[np.integer], NDArray[np.integer]]:
    """Histogram of the points (rows of ``pts`` not in the sorted ``excluded``) over the cells
    of ``grids``, in one compiled pass, and each row's cell (``uint32``, or ``uint64`` beyond
    2^32 - 1 cells; the dtype's largest value for excluded rows) for :func:`grid_extract`."""
    hist: NDArray[np.integer] = np.zeros(grids.n_cells, dtype=dtype)
    cell: NDArray[np.integer] = np.empty(pts.shape[0], dtype=np.uint32 if grids.n_cells < 2**32 - 1 else np.uint64)
    _jit().level0_grid(np.ascontiguousarray(pts, dtype=np.float64), np.ascontiguousarray(excluded, dtype=np.int64),
                       *grids._args(), hist, cell)
    return hist, cell


def grid_extract(pts: F64, cell: NDArray[np.integer], cell_node: I64, size: int) -> tuple[F64, F64, I64]:
    """The rows of ``pts`` whose ``cell`` (from :func:`level0_grid`) has ``cell_node >= 0``
    (``size`` of them), in row order: ``(x, y, their cell_node)``, in one compiled pass."""
    out_x = np.empty(size, dtype=np.float64)
    out_y = np.empty(size, dtype=np.float64)
    out_node = np.empty(size, dtype=np.int64)
    k = _jit().grid_extract(np.ascontiguousarray(pts, dtype=np.float64), cell,
                            np.ascontiguousarray(cell_node, dtype=np.int64), out_x, out_y, out_node)
    if k != size:  # the histogram counted these very points
        raise RuntimeError(f"grid_extract found {k} points, the grid holds {size}")
    return out_x, out_y, out_node


# ---------------------------------------------------------------------------------------------
# Constrained inference (spec 2.6): Gaussian belief propagation on a tree = equality-constrained GLS
# ---------------------------------------------------------------------------------------------
def ci_combine(ys: list[F64], variances: list[float], parents: list[I64], total: float) -> F64:
    """Two-pass constrained inference over levels ``0..h``.

    ``ys[l]`` are the noisy level-l node values with common variance ``variances[l]``;
    ``parents[l]`` (``l >= 1``) maps level-l nodes to their level-(l-1) parent; level 0 hangs
    under a virtual root fixed at ``total``. Returns the leaf (level ``h``) values.
    """
    h = len(ys) - 1
    z = [np.empty(0)] * (h + 1)
    v = [np.empty(0)] * (h + 1)
    z[h] = np.asarray(ys[h], dtype=np.float64)
    v[h] = np.full(z[h].size, variances[h])
    for lev in range(h - 1, -1, -1):
        n_nodes = ys[lev].size
        s = np.bincount(parents[lev + 1], weights=z[lev + 1], minlength=n_nodes)
        w = np.bincount(parents[lev + 1], weights=v[lev + 1], minlength=n_nodes)
        prec = 1.0 / variances[lev] + 1.0 / w
        z[lev] = (ys[lev] / variances[lev] + s / w) / prec
        v[lev] = 1.0 / prec
    x = z[0] + (total - z[0].sum()) * v[0] / v[0].sum()
    for lev in range(1, h + 1):
        par = parents[lev]
        n_par = x.size
        sz = np.bincount(par, weights=z[lev], minlength=n_par)
        sv = np.bincount(par, weights=v[lev], minlength=n_par)
        x = z[lev] + (x - sz)[par] * v[lev] / sv[par]
    return np.asarray(x, dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Point location and range queries (spec 2.7)
# ---------------------------------------------------------------------------------------------
def leaf_lookup(x0: F64, x1: F64, y0: F64, y1: F64) -> tuple[F64, F64, NDArray[np.int32]]:
    """Elementary grid of a partition: unique edges per axis and the leaf of every elementary cell."""
    ux = np.unique(np.concatenate([x0, x1]))
    uy = np.unique(np.concatenate([y0, y1]))
    table = np.full((ux.size - 1, uy.size - 1), -1, dtype=np.int32)
    ix0 = np.searchsorted(ux, x0)
    ix1 = np.searchsorted(ux, x1)
    iy0 = np.searchsorted(uy, y0)
    iy1 = np.searchsorted(uy, y1)
    for k in range(x0.size):
        table[ix0[k]:ix1[k], iy0[k]:iy1[k]] = k
    return ux, uy, table


def locate_in_leaves(
    lookup: tuple[F64, F64, NDArray[np.int32]], px: F64, py: F64
) -> I64:
    """Leaf index of each point under the half-open rule (the domain's top/right edge closed)."""
    ux, uy, table = lookup
    return table[interval_index(ux, px), interval_index(uy, py)].astype(np.int64)


def overlap_answer(
    x0: F64, x1: F64, y0: F64, y1: F64, values: F64, rects: F64, chunk_cells: int = 1 << 22
) -> F64:
    """Σ_v values(v) · area(v ∩ Q) / area(v) for every query rectangle (vectorised, chunked)."""
    q = rects.shape[0]
    out = np.empty(q, dtype=np.float64)
    wx = x1 - x0
    wy = y1 - y0
    step = max(1, chunk_cells // max(1, x0.size))
    for s in range(0, q, step):
        r = rects[s:s + step]
        ox = np.minimum(x1, r[:, 2:3]) - np.maximum(x0, r[:, 0:1])
        np.clip(ox, 0.0, None, out=ox)
        oy = np.minimum(y1, r[:, 3:4]) - np.maximum(y0, r[:, 1:2])
        np.clip(oy, 0.0, None, out=oy)
        ox /= wx
        oy /= wy
        ox *= oy
        out[s:s + step] = ox @ values
    return out


def _cum_at(cum: F64, u: F64, v: F64) -> F64:
    """Bilinear interpolation of the cumulative table ``cum`` (shape (gx+1, gy+1)) at (u, v)."""
    gx, gy = cum.shape[0] - 1, cum.shape[1] - 1
    i = np.clip(np.floor(u).astype(np.int64), 0, gx - 1)
    j = np.clip(np.floor(v).astype(np.int64), 0, gy - 1)
    a = u - i
    b = v - j
    c00 = cum[i, j]
    c10 = cum[i + 1, j]
    c01 = cum[i, j + 1]
    c11 = cum[i + 1, j + 1]
    return c00 * (1 - a) * (1 - b) + c10 * a * (1 - b) + c01 * (1 - a) * b + c11 * a * b


def grid_answer(values: F64, bounds: tuple[float, float, float, float], rects: F64) -> F64:
    """Range answers on a uniform ``gx × gy`` grid (values[i, j], i along x) by 2-D prefix sums."""
    gx, gy = values.shape
    bx0, by0, bx1, by1 = bounds
    cum = np.zeros((gx + 1, gy + 1), dtype=np.float64)
    cum[1:, 1:] = values.cumsum(axis=0).cumsum(axis=1)
    u0 = (rects[:, 0] - bx0) / (bx1 - bx0) * gx
    u1 = (rects[:, 2] - bx0) / (bx1 - bx0) * gx
    v0 = (rects[:, 1] - by0) / (by1 - by0) * gy
    v1 = (rects[:, 3] - by0) / (by1 - by0) * gy
    return _cum_at(cum, u1, v1) - _cum_at(cum, u0, v1) - _cum_at(cum, u1, v0) + _cum_at(cum, u0, v0)
