"""Batched EM over report-pattern prefix trees (Numba): every joint estimate of the EM path runs here.

The collapsed EM of spec 2.3 needs, per iteration and per distinct canonical report pattern ``u``
(weight ``w_u = c_u / N``),

    Z_u = sum_w P(w) prod_t lam_t[g_t(u), w_t],     G(w) = sum_u (w_u / Z_u) prod_t lam_t[g_t(u), w_t],

then ``P <- P * G / sum(P * G)``. ``g_t(u)`` is pattern ``u``'s canonical block of attribute ``t``
and ``lam_t[g, v] = base_g + delta * bit_v(g)`` (``base_g = 1``, ``delta = rho - 1``; rescaled rows
use ``base_g = 1/rho`` for patterns with a set bit and ``delta = 1 - 1/rho``). The dense form costs
``U x D`` per iteration (``U`` patterns, ``D`` cells).

Here the ``U`` pattern tuples form a prefix tree: level ``t`` holds the distinct prefixes
``(g_1, ..., g_t)``, and the product is contracted one attribute at a time (spec 5, speed-up 3). In
the forward pass, level ``t`` holds for each prefix the partial sum over ``w_1..w_t`` as a table
over the remaining cells ``w_{t+1}..w_m`` (``R_t`` of them); the leaves hold ``Z``. The backward pass
is its transpose and ends with ``G`` at the root. A level is either

* **complete**: every parent has all ``G_t`` patterns of the attribute as children (node
  ``(par, g)`` at ``par * G_t + g``, weight 0 where no user has that tuple), and the level is a
  small dense product per parent (``G_t x n_t`` table); or
* **sparse**: explicit nodes with their parent and the list of their pattern's set bits; a node
  costs one pass over its parent's per-value sum plus one per set bit.

Each joint runs its own EM to its own stopping point: the iteration of :func:`em_collapsed`, exact
up to float summation order. The compiled kernel releases the GIL; joints run in a few Python
threads (no Numba threading layer, so it is thread- and fork-safe).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numpy.typing import NDArray
from threadpoolctl import threadpool_limits

from privpub.core import prepare_numba_cache as prepare
from privpub.ldp import N_THREADS, run_chunks

prepare()  # before the decorators: where the kernels are cached (see privpub.core._jitcache)

__all__ = ["EMBatch", "em_tree_batch"]

_I64 = NDArray[np.int64]
_F64 = NDArray[np.float64]

#: one joint's tree for the passes: sizes, npat, lam, lam_off, r (cells after each level), u (nodes
#: per level), xo (level offsets in the buffers), lev, node_par, optr, ones, base1, delta
_TreeArgs = tuple[_I64, _I64, _F64, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _I64, float, float]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _tables(
    sizes: NDArray[np.int64],
    npat: NDArray[np.int64],
    pat0: NDArray[np.int64],
    pat_ptr: NDArray[np.int64],
    pat_ones: NDArray[np.int64],
    base1: float,
    delta: float,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Dense tables of the complete levels, ``lam[off[t] + v * G_t + g] = base_g + delta * bit_v(g)``."""
    m = sizes.shape[0]
    off = np.zeros(m + 1, dtype=np.int64)
    for t in range(m):
        off[t + 1] = off[t] + sizes[t] * npat[t]
    lam = np.empty(off[m])
    for t in range(m):
        n_g = npat[t]
        for g in range(n_g):
            gg = pat0[t] + g
            b = base1 if pat_ptr[gg + 1] > pat_ptr[gg] else 1.0
            for v in range(sizes[t]):
                lam[off[t] + v * n_g + g] = b
            for j in range(pat_ptr[gg], pat_ptr[gg + 1]):
                lam[off[t] + pat_ones[j] * n_g + g] += delta
    return lam, off


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _update(p: NDArray[np.float64], g: NDArray[np.float64], tol: float, stop_paper: bool) -> bool:
    """``p <- p * g / sum(p * g)`` in place; True if the stopping rule of :func:`em_collapsed` holds."""
    n_cells = p.shape[0]
    total = 0.0
    for k in range(n_cells):
        g[k] = p[k] * g[k]
        total += g[k]
    diff = 0.0
    old_max = 0.0
    new_max = 0.0
    for k in range(n_cells):
        val = g[k] / total
        dv = abs(val - p[k])
        if dv > diff:
            diff = dv
        if p[k] > old_max:
            old_max = p[k]
        if val > new_max:
            new_max = val
        p[k] = val
    return (new_max - old_max <= tol) if stop_paper else (diff < tol)


#: run a sparse level's children of one parent as one matrix product when there are this many
#: children and at least ``_GEMM_WIDTH`` cells per node (otherwise the per-bit loops are cheaper)
_GEMM_CHILDREN = 8
_GEMM_WIDTH = 4


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _rows(optr: _I64, ones: _I64, node0: int, c: int, n: int, base1: float, delta: float) -> _F64:
    """Likelihood rows ``(c, n)`` of nodes ``node0 .. node0 + c - 1`` from their set-bit lists."""
    a = np.empty((c, n))
    for i in range(c):
        j0 = optr[node0 + i]
        j1 = optr[node0 + i + 1]
        b = base1 if j1 > j0 else 1.0
        for v in range(n):
            a[i, v] = b
        for j in range(j0, j1):
            a[i, ones[j]] += delta
    return a


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _forward(x: NDArray[np.float64], s_buf: NDArray[np.float64], tree: _TreeArgs) -> None:
    """Fill levels 1..m of ``x`` from level 0 (the current ``P``); level m holds ``Z``."""
    sizes, npat, lam, lam_off, r, u, xo, lev, node_par, optr, ones, base1, delta = tree
    m = sizes.shape[0]
    for t in range(1, m + 1):
        n = sizes[t - 1]
        rt = r[t]
        rp = r[t - 1]
        src0 = xo[t - 1]
        dst0 = xo[t]
        n_g = npat[t - 1]
        if n_g > 0:  # complete level; lam is stored transposed, lam[l0 + v * n_g + g]
            l0 = lam_off[t - 1]
            if rt == 1:
                for par in range(u[t - 1]):
                    src = src0 + par * n
                    dst = dst0 + par * n_g
                    xv = x[src]
                    for g in range(n_g):
                        x[dst + g] = lam[l0 + g] * xv
                    for v in range(1, n):
                        xv = x[src + v]
                        lv = l0 + v * n_g
                        for g in range(n_g):
                            x[dst + g] += lam[lv + g] * xv
            else:  # one matrix product per parent: (G x n) @ (n x R)
                lt = lam[l0:l0 + n * n_g].reshape((n, n_g)).T
                for par in range(u[t - 1]):
                    src = src0 + par * rp
                    dst = dst0 + par * n_g * rt
                    out = np.dot(lt, x[src:src + rp].reshape((n, rt))).ravel()
                    for k in range(n_g * rt):
                        x[dst + k] = out[k]
            continue
        # sparse level: per-parent sums over the contracted value, then one pass per set bit
        for par in range(u[t - 1]):
            sb = par * rt
            for k in range(rt):
                s_buf[sb + k] = 0.0
            for v in range(n):
                src = src0 + par * rp + v * rt
                for k in range(rt):
                    s_buf[sb + k] += x[src + k]
        i = 0
        while i < u[t]:
            node = lev[t - 1] + i
            par = node_par[node]
            src = src0 + par * rp
            c = 1  # children of par from node on (counted only where a product could pay off)
            while rt >= _GEMM_WIDTH and i + c < u[t] and node_par[node + c] == par:
                c += 1
            if c >= _GEMM_CHILDREN:  # all children of par in one product
                a = _rows(optr, ones, node, c, n, base1, delta)
                out = np.dot(a, x[src:src + rp].reshape((n, rt))).ravel()
                d0 = dst0 + i * rt
                for k in range(c * rt):
                    x[d0 + k] = out[k]
                i += c
                continue
            i += 1
            j0 = optr[node]
            j1 = optr[node + 1]
            b = base1 if j1 > j0 else 1.0
            dst = dst0 + (i - 1) * rt
            sb = par * rt
            if rt == 1:
                acc = 0.0
                for j in range(j0, j1):
                    acc += x[src + ones[j]]
                x[dst] = b * s_buf[sb] + delta * acc
            else:
                for k in range(rt):
                    x[dst + k] = b * s_buf[sb + k]
                for j in range(j0, j1):
                    sv = src + ones[j] * rt
                    for k in range(rt):
                        x[dst + k] += delta * x[sv + k]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _backward(y: NDArray[np.float64], b_buf: NDArray[np.float64], tree: _TreeArgs) -> None:
    """From the leaf weights ``w_u / Z_u`` in level m of ``y``, fill levels m-1..0; level 0 is ``G``."""
    sizes, npat, lam, lam_off, r, u, xo, lev, node_par, optr, ones, base1, delta = tree
    m = sizes.shape[0]
    for t in range(m, 0, -1):
        n = sizes[t - 1]
        rt = r[t]
        rp = r[t - 1]
        dst0 = xo[t - 1]
        src0 = xo[t]
        n_g = npat[t - 1]
        if n_g > 0:
            l0 = lam_off[t - 1]
            if rt > 1:  # one matrix product per parent: (n x G) @ (G x R)
                lmat = lam[l0:l0 + n * n_g].reshape((n, n_g))
                for par in range(u[t - 1]):
                    src = src0 + par * n_g * rt
                    out = np.dot(lmat, y[src:src + n_g * rt].reshape((n_g, rt))).ravel()
                    d0 = dst0 + par * rp
                    for k in range(rp):
                        y[d0 + k] = out[k]
                continue
            for par in range(u[t - 1]):
                dst = dst0 + par * rp
                src = src0 + par * n_g
                for v in range(n):
                    lv = l0 + v * n_g
                    acc = 0.0
                    for g in range(n_g):
                        acc += lam[lv + g] * y[src + g]
                    y[dst + v] = acc
            continue
        for k in range(u[t - 1] * rp):
            y[dst0 + k] = 0.0
        for k in range(u[t - 1] * rt):
            b_buf[k] = 0.0
        i = 0
        while i < u[t]:
            node = lev[t - 1] + i
            par = node_par[node]
            dst = dst0 + par * rp
            c = 1  # children of par from node on (counted only where a product could pay off)
            while rt >= _GEMM_WIDTH and i + c < u[t] and node_par[node + c] == par:
                c += 1
            if c >= _GEMM_CHILDREN:  # all children of par in one product
                a = _rows(optr, ones, node, c, n, base1, delta)
                out = np.dot(a.T, y[src0 + i * rt:src0 + (i + c) * rt].reshape((c, rt))).ravel()
                for k in range(rp):
                    y[dst + k] += out[k]
                i += c
                continue
            i += 1
            j0 = optr[node]
            j1 = optr[node + 1]
            b = base1 if j1 > j0 else 1.0
            src = src0 + (i - 1) * rt
            bb = par * rt
            if rt == 1:
                val = y[src]
                b_buf[bb] += b * val
                val *= delta
                for j in range(j0, j1):
                    y[dst + ones[j]] += val
            else:
                for k in range(rt):
                    b_buf[bb + k] += b * y[src + k]
                for j in range(j0, j1):
                    dv = dst + ones[j] * rt
                    for k in range(rt):
                        y[dv + k] += delta * y[src + k]
        for par in range(u[t - 1]):
            bb = par * rt
            for v in range(n):
                dst = dst0 + par * rp + v * rt
                for k in range(rt):
                    y[dst + k] += b_buf[bb + k]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _em_one(
    p: NDArray[np.float64],
    z_out: NDArray[np.float64],
    w: NDArray[np.float64],
    sizes: NDArray[np.int64],
    npat: NDArray[np.int64],
    pat0: NDArray[np.int64],
    lev: NDArray[np.int64],
    node_par: NDArray[np.int64],
    optr: NDArray[np.int64],
    ones: NDArray[np.int64],
    pat_ptr: NDArray[np.int64],
    pat_ones: NDArray[np.int64],
    base1: float,
    delta: float,
    tol: float,
    max_iter: int,
    stop_paper: bool,
) -> tuple[int, bool]:
    """EM of one joint; ``p`` (flat, C order over ``sizes``) is the start and receives the result."""
    m = sizes.shape[0]
    r = np.empty(m + 1, dtype=np.int64)
    u = np.empty(m + 1, dtype=np.int64)
    xo = np.empty(m + 2, dtype=np.int64)
    r[0] = p.shape[0]
    u[0] = 1
    for t in range(1, m + 1):
        r[t] = r[t - 1] // sizes[t - 1]
        u[t] = lev[t] - lev[t - 1]
    lam, lam_off = _tables(sizes, npat, pat0, pat_ptr, pat_ones, base1, delta)
    xo[0] = 0
    buf = 1
    for t in range(m + 1):
        xo[t + 1] = xo[t] + u[t] * r[t]
        if t >= 1 and u[t - 1] * r[t] > buf:
            buf = u[t - 1] * r[t]
    x = np.empty(xo[m + 1])
    y = np.empty(xo[m + 1])
    tmp = np.empty(buf)
    tree = (sizes, npat, lam, lam_off, r, u, xo, lev, node_par, optr, ones, base1, delta)
    n_cells = r[0]
    leaf0 = xo[m]
    n_leaf = u[m]
    n_iter = 0
    converged = False
    for it in range(1, max_iter + 1):
        n_iter = it
        for k in range(n_cells):
            x[k] = p[k]
        _forward(x, tmp, tree)
        for i in range(n_leaf):
            y[leaf0 + i] = w[i] / x[leaf0 + i]
        _backward(y, tmp, tree)
        if _update(p, y[:n_cells], tol, stop_paper):
            converged = True
            break
    for k in range(n_cells):
        x[k] = p[k]
    _forward(x, tmp, tree)
    for i in range(n_leaf):
        z_out[i] = x[leaf0 + i]
    return n_iter, converged


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _em_grid(
    p: NDArray[np.float64],
    z_out: NDArray[np.float64],
    w: NDArray[np.float64],
    sizes: NDArray[np.int64],
    npat: NDArray[np.int64],
    pat0: NDArray[np.int64],
    pat_ptr: NDArray[np.int64],
    pat_ones: NDArray[np.int64],
    base1: float,
    delta: float,
    tol: float,
    max_iter: int,
    stop_paper: bool,
) -> tuple[int, bool]:
    """EM of one joint whose pattern tuples fill the grid ``G_1 x ... x G_m`` (every level complete).

    ``Z`` over the whole grid is ``P`` multiplied by one ``n_t x G_t`` table per axis. Keeping the
    not-yet-contracted axis first (the axes cycle), each product is one matrix product (BLAS):
    ``(rest x n_t) @ (n_t x G_t)``; the backward pass uses the transposed tables. ``w`` is the
    grid of weights in C order over ``(g_1, ..., g_m)`` (0 where no user has the tuple).
    """
    m = sizes.shape[0]
    lam, off = _tables(sizes, npat, pat0, pat_ptr, pat_ones, base1, delta)  # lam[t][v, g]
    lam_t = np.empty(off[m])  # lam_t[t][g, v]
    for t in range(m):
        for v in range(sizes[t]):
            for g in range(npat[t]):
                lam_t[off[t] + g * sizes[t] + v] = lam[off[t] + v * npat[t] + g]
    n_grid = w.shape[0]
    wz = np.zeros(n_grid)
    n_iter = 0
    converged = False
    for it in range(1, max_iter + 2):
        cur = p.copy()
        for t in range(m):
            a = cur.reshape((sizes[t], cur.shape[0] // sizes[t]))
            cur = np.dot(a.T, lam[off[t]:off[t + 1]].reshape((sizes[t], npat[t]))).ravel()
        if it > max_iter or converged:  # cur holds Z at the returned p
            for i in range(n_grid):
                z_out[i] = cur[i]
            break
        n_iter = it
        for i in range(n_grid):
            wz[i] = w[i] / cur[i] if w[i] > 0.0 else 0.0
        cur = wz
        for t in range(m):
            a = cur.reshape((npat[t], cur.shape[0] // npat[t]))
            cur = np.dot(a.T, lam_t[off[t]:off[t + 1]].reshape((npat[t], sizes[t]))).ravel()
        converged = _update(p, cur, tol, stop_paper)
    return n_iter, converged


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _em_tree_batch(
    p: NDArray[np.float64],
    z: NDArray[np.float64],
    p_off: NDArray[np.int64],
    w: NDArray[np.float64],
    leaf_off: NDArray[np.int64],
    sizes: NDArray[np.int64],
    npat: NDArray[np.int64],
    pat0: NDArray[np.int64],
    size_off: NDArray[np.int64],
    lev: NDArray[np.int64],
    node_par: NDArray[np.int64],
    node_off: NDArray[np.int64],
    optr: NDArray[np.int64],
    ones: NDArray[np.int64],
    ones_off: NDArray[np.int64],
    base1: NDArray[np.float64],
    delta: NDArray[np.float64],
    pat_ptr: NDArray[np.int64],
    pat_ones: NDArray[np.int64],
    tol: float,
    max_iter: NDArray[np.int64],
    stop_paper: bool,
    order: NDArray[np.int64],
    n_iter: NDArray[np.int64],
    converged: NDArray[np.bool_],
) -> None:
    """Run the tree joints ``order`` (each writes only its own slices, so threads may share the arrays)."""
    for jj in range(order.shape[0]):
        j = order[jj]
        s0, s1 = size_off[j], size_off[j + 1]
        n0, n1 = node_off[j], node_off[j + 1]
        # lev has m + 1 entries and optr n_nodes + 1 entries per joint
        it, conv = _em_one(
            p[p_off[j]:p_off[j + 1]], z[leaf_off[j]:leaf_off[j + 1]], w[leaf_off[j]:leaf_off[j + 1]],
            sizes[s0:s1], npat[s0:s1], pat0[s0:s1], lev[s0 + j:s1 + j + 1], node_par[n0:n1],
            optr[n0 + j:n1 + j + 1], ones[ones_off[j]:ones_off[j + 1]], pat_ptr, pat_ones, base1[j], delta[j],
            tol, max_iter[j], stop_paper,
        )
        n_iter[j] = it
        converged[j] = conv


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _em_grid_batch(
    p: NDArray[np.float64],
    z: NDArray[np.float64],
    p_off: NDArray[np.int64],
    w: NDArray[np.float64],
    leaf_off: NDArray[np.int64],
    sizes: NDArray[np.int64],
    npat: NDArray[np.int64],
    pat0: NDArray[np.int64],
    size_off: NDArray[np.int64],
    base1: NDArray[np.float64],
    delta: NDArray[np.float64],
    pat_ptr: NDArray[np.int64],
    pat_ones: NDArray[np.int64],
    tol: float,
    max_iter: NDArray[np.int64],
    stop_paper: bool,
    order: NDArray[np.int64],
    n_iter: NDArray[np.int64],
    converged: NDArray[np.bool_],
) -> None:
    """Run the grid joints ``order`` (:func:`_em_grid`), like :func:`_em_tree_batch`."""
    for jj in range(order.shape[0]):
        j = order[jj]
        s0, s1 = size_off[j], size_off[j + 1]
        it, conv = _em_grid(
            p[p_off[j]:p_off[j + 1]], z[leaf_off[j]:leaf_off[j + 1]], w[leaf_off[j]:leaf_off[j + 1]],
            sizes[s0:s1], npat[s0:s1], pat0[s0:s1], pat_ptr, pat_ones, base1[j], delta[j], tol, max_iter[j],
            stop_paper,
        )
        n_iter[j] = it
        converged[j] = conv


class EMBatch(NamedTuple):
    """The EM inputs of ``B`` joints packed in flat arrays: joint ``j``'s slice of ``a`` is
    ``a[a_off[j]:a_off[j + 1]]``.

    Attributes
    ----------
    p, p_off : float array, offsets
        Start distributions (C order over the joint's axis sizes in contraction order). Cells at 0
        stay at 0.
    w, leaf_off : float array, offsets
        Weights ``c_u / N`` of the last level's nodes (0 for slots of a complete level no user has).
    sizes, npat, pat0 : int arrays, sliced by ``size_off``
        Per tree level (= axis, in contraction order): the axis size ``n_t``; ``G_t`` if the level is
        complete, 0 if sparse; the global index of the axis' first pattern in ``pat_ptr``.
    size_off : int array
    lev : int array
        Per joint ``m + 1`` level starts into its nodes (joint ``j``'s at ``size_off[j] + j``).
    node_par, node_off : int arrays
        Parent of each node as an index within the previous level (sparse levels only).
    optr, ones, ones_off : int arrays
        Per node, the set bits of its pattern: ``ones[optr[i]:optr[i + 1]]`` (joint ``j``'s ``optr``
        has ``n_nodes + 1`` entries at ``node_off[j] + j``, local offsets into its ``ones`` slice at
        ``ones_off``); empty for nodes of complete levels.
    base1, delta : float arrays, one per joint
        Likelihood rows ``lam[g, v] = base_g + delta * bit_v(g)``, ``base_g = base1`` if pattern ``g``
        has a set bit, else 1.
    grid : bool array, one per joint
        Every level complete: run the joint as matrix products over the full pattern grid
        (:func:`_em_grid`; ``w`` and ``z`` in C order over the grid) instead of the tree loops.
    """

    p: NDArray[np.float64]
    p_off: NDArray[np.int64]
    w: NDArray[np.float64]
    leaf_off: NDArray[np.int64]
    sizes: NDArray[np.int64]
    npat: NDArray[np.int64]
    pat0: NDArray[np.int64]
    size_off: NDArray[np.int64]
    lev: NDArray[np.int64]
    node_par: NDArray[np.int64]
    node_off: NDArray[np.int64]
    optr: NDArray[np.int64]
    ones: NDArray[np.int64]
    ones_off: NDArray[np.int64]
    base1: NDArray[np.float64]
    delta: NDArray[np.float64]
    grid: NDArray[np.bool_]


def em_tree_batch(
    batch: EMBatch,
    pat_ptr: NDArray[np.int64],
    pat_ones: NDArray[np.int64],
    *,
    tol: float,
    max_iter: NDArray[np.int64],
    stop: str,
    cost: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64], NDArray[np.bool_]]:
    """Run the EMs of the joints in ``batch``, each to its own stopping point.

    Parameters
    ----------
    batch : EMBatch
    pat_ptr, pat_ones : int arrays
        Set bits of every pattern (global CSR), for the tables of complete levels.
    tol, max_iter, stop
        The stopping rule of :func:`em_collapsed` (``max_iter`` per joint).
    cost : float array
        Estimated work per joint; joints start in decreasing cost for load balance.

    Returns
    -------
    p : the estimates (flat, layout of ``batch.p``), z : normalisers ``Z`` of the last level's nodes
    at the returned ``p``, n_iter : (B,), converged : (B,).
    """
    n_joints = batch.p_off.shape[0] - 1
    out = np.array(batch.p, dtype=np.float64, copy=True)
    z = np.empty(batch.w.shape[0])
    n_iter = np.zeros(n_joints, dtype=np.int64)
    converged = np.zeros(n_joints, dtype=np.bool_)
    order = np.argsort(-np.asarray(cost, dtype=np.float64), kind="stable").astype(np.int64)
    # dynamic schedule: 4 chunks per thread, dealt round-robin from the costliest joint down; the
    # kernel releases the GIL, and each joint's result does not depend on which thread ran it
    n_chunks = min(n_joints, 4 * N_THREADS)

    # each command compiles only the kernel its joints need (the tree passes or the grid products)
    is_grid = batch.grid[order]
    grid_order, tree_order = order[is_grid], order[~is_grid]
    paper = stop == "paper"
    b = batch

    def work(c: int) -> None:
        if tree_order.shape[0] > c:
            _em_tree_batch(out, z, b.p_off, b.w, b.leaf_off, b.sizes, b.npat, b.pat0, b.size_off, b.lev, b.node_par,
                           b.node_off, b.optr, b.ones, b.ones_off, b.base1, b.delta, pat_ptr, pat_ones, float(tol),
                           max_iter, paper, tree_order[c::n_chunks], n_iter, converged)
        if grid_order.shape[0] > c:
            _em_grid_batch(out, z, b.p_off, b.w, b.leaf_off, b.sizes, b.npat, b.pat0, b.size_off, b.base1, b.delta,
                           pat_ptr, pat_ones, float(tol), max_iter, paper, grid_order[c::n_chunks], n_iter,
                           converged)

    # the kernel's threads are the parallelism: BLAS on one thread inside them (a threaded BLAS
    # under them oversubscribes the cores; measured 3x slower on large-domain joints)
    with threadpool_limits(limits=1, user_api="blas"):
        run_chunks(work, n_chunks)
    return out, z, n_iter, converged
