# mypy: disable-error-code="no-untyped-def,assignment"
"""Numba kernels of privpub.spatial's tree phase: one pass over the users per level.

Imported on first use (:func:`privpub.spatial._kernels.descend` and
:func:`~privpub.spatial._kernels.level0_leaf` load it), compiled once and cached on disk. The
comparisons are those of the NumPy code they replace, so a seed gives the same release.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from privpub.core import prepare_numba_cache as prepare

prepare()  # before the decorators: where the kernels are cached (see privpub.core._jitcache)


@njit(cache=True, nogil=True)
def descend_count(leaf, px, py, mx, my, mult_x, mult_y, start, out, counts):
    """``out[i] = start[l] + mult_x[l] [px_i >= mx[l]] + mult_y[l] [py_i >= my[l]]`` for
    ``l = leaf[i]``, and ``counts[out[i]] += 1`` (``counts`` may be empty: no counting)."""
    count = counts.size > 0
    for i in range(leaf.size):
        lf = leaf[i]
        c = start[lf]
        if px[i] >= mx[lf]:
            c += mult_x[lf]
        if py[i] >= my[lf]:
            c += mult_y[lf]
        out[i] = c
        if count:
            counts[c] += 1


@njit(cache=True, nogil=True, inline="always")
def _uniform_index(v, edges, scale):
    """:func:`privpub.spatial._kernels.uniform_interval_index` for one value (same float steps)."""
    m = edges.size - 1
    idx = np.int64((v - edges[0]) * scale)
    if idx > m - 1:
        idx = m - 1
    if idx < 0:
        idx = 0
    if v < edges[idx]:
        idx -= 1
    if idx + 1 >= m:  # the last interval is closed on the right
        return idx
    if v >= edges[idx + 1]:
        idx += 1
    return idx


@njit(cache=True, nogil=True)
def level0_leaf(px, py, ex, sx, ey, sy, block_of_x, block_of_y, table, out, counts):
    """Each user's level-0 leaf ``table[block_of_x[ix], block_of_y[iy]]`` from its KDG interval
    indices ``ix, iy`` on the equal-width edges ``ex, ey`` (``sx = m / (ex[-1] - ex[0])``);
    ``counts[leaf] += 1``."""
    for i in range(px.size):
        lf = table[block_of_x[_uniform_index(px[i], ex, sx)], block_of_y[_uniform_index(py[i], ey, sy)]]
        out[i] = lf
        counts[lf] += 1


@njit(cache=True, nogil=True, inline="always")
def _bisect_code(v, edges, base, d, scale):
    """The cell ``c`` of ``v`` among the ``2**d`` cells ``edges[base:base + 2**d + 1]`` of an
    iterated bisection: the largest ``c < 2**d`` with ``edges[base + c] <= v`` (what ``d``
    comparisons ``v >= (lo + hi) / 2`` from the top give, the midpoints being monotone): a float
    estimate, then corrected against the exact edges."""
    m = 1 << d
    c = np.int64((v - edges[base]) * scale)
    if c > m - 1:
        c = m - 1
    if c < 0:
        c = 0
    while c > 0 and v < edges[base + c]:
        c -= 1
    while c < m - 1 and v >= edges[base + c + 1]:
        c += 1
    return c


@njit(cache=True, nogil=True, inline="always")
def _grid_cell(x, y, ex, sx, ey, sy, block_of_x, block_of_y, table, depth, gx, gy, gbase, scx, scy, hoff):
    """The flat cell of a point: its level-0 leaf (as :func:`level0_leaf`) and its cell on the
    leaf's ``2**d x 2**d`` bisection grid (``d = depth[leaf]``, edges ``gx, gy`` from
    ``gbase[leaf]``), at ``hoff[leaf] + (cx << d) + cy``."""
    lf = table[block_of_x[_uniform_index(x, ex, sx)], block_of_y[_uniform_index(y, ey, sy)]]
    d = depth[lf]
    cx = _bisect_code(x, gx, gbase[lf], d, scx[lf])
    cy = _bisect_code(y, gy, gbase[lf], d, scy[lf])
    return hoff[lf] + (cx << d) + cy


@njit(cache=True, nogil=True)
def level0_grid(pts, excluded, ex, sx, ey, sy, block_of_x, block_of_y, table, depth, gx, gy, gbase, scx, scy,
                hoff, hist, cell):
    """One pass over the rows of ``pts``: ``cell[i]`` is row ``i``'s :func:`_grid_cell` (the
    largest value of ``cell``'s dtype for rows in ``excluded``, sorted), counted in ``hist``."""
    j = 0
    ne = excluded.size
    skip = np.iinfo(cell.dtype).max
    for i in range(pts.shape[0]):
        if j < ne and excluded[j] == i:
            j += 1
            cell[i] = skip
            continue
        c = _grid_cell(pts[i, 0], pts[i, 1], ex, sx, ey, sy, block_of_x, block_of_y, table, depth, gx, gy, gbase,
                       scx, scy, hoff)
        cell[i] = c
        hist[c] += 1


@njit(cache=True, nogil=True)
def grid_extract(pts, cell, cell_node, out_x, out_y, out_node):
    """The rows whose ``cell`` (from :func:`level0_grid`; its dtype's largest value: none) has
    ``cell_node >= 0``, with that node, written in row order to ``out_*``; returns how many."""
    k = 0
    skip = np.iinfo(cell.dtype).max
    for i in range(cell.size):
        c = cell[i]
        if c == skip:
            continue
        nd = cell_node[c]
        if nd >= 0:
            out_x[k] = pts[i, 0]
            out_y[k] = pts[i, 1]
            out_node[k] = nd
            k += 1
    return k
