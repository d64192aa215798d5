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
