"""Level-by-level collection of an adaptive partition (shared by KDG-HT and AHEAD).

The users of the tree phase are split into ``len(sizes)`` disjoint random groups; group ``l``
reports (OUE) the leaf of the level-``l`` partition holding its point, the server estimates the
level's counts and splits leaves (MTR) before the next group reports. The per-user path runs
every user's client; the simulation path draws each group's counts per leaf exactly from the
law of the random groups (multivariate hypergeometric splits of per-leaf counts, see
:func:`~privpub.spatial._collect.split_counts`), so it never permutes the users.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from privpub.ldp import norm_sub
from privpub.spatial._collect import Collection, check_cells, split_children
from privpub.spatial._kernels import (
    N_CHILDREN,
    BisectionGrids,
    bisection_edges,
    descend,
    grid_extract,
    level0_grid,
    level0_leaf,
    mtr_children,
    mtr_kind,
)
from privpub.spatial._release import TreeLevel

__all__ = ["DescendCounter", "GridCounter", "Level0", "TreeResult", "grow_tree"]

#: cells of the level-0 bisection grids of :class:`GridCounter` per tree user (4 bytes a cell, 8 more
#: for its prefix sums)
GRID_CELLS_PER_USER = 0.5
#: at most this many cells in all (a grid that stays in cache: the pass's cost per user does not grow with N)
GRID_MAX_CELLS = 1 << 18
#: bisections per axis every level-0 leaf's grid resolves at least (at most the tree height)
GRID_MIN_DEPTH = 3

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass
class TreeResult:
    """The levels of a grown tree: per-level noisy estimates, parents and variances."""

    levels: list[TreeLevel]
    ys: list[F64]
    parents: list[I64]
    variances: list[float]
    leaves: tuple[F64, F64, F64, F64]


@dataclass(frozen=True)
class Level0:
    """How a point finds its level-0 leaf: KDG interval on each axis (equal-width edges ``ex``,
    ``ey``), the block of each interval, the leaf of each block pair (``table``)."""

    ex: F64
    ey: F64
    block_of_x: I64
    block_of_y: I64
    table: I64

    def leaves_of(self, px: F64, py: F64) -> I64:
        """Each point's level-0 leaf."""
        counts = np.zeros(int(self.table.max()) + 1, dtype=np.int64)
        return level0_leaf(px, py, self.ex, self.ey, self.block_of_x, self.block_of_y, self.table, counts)


# a split: (kind, x0, x1, y0, y1, start) of the parents, as :func:`descend` takes them
Split = tuple[I64, F64, F64, F64, F64, I64]


class DescendCounter:
    """Users per child of each MTR step, by moving every user to its child (O(users) per level)."""

    def __init__(self, px: F64, py: F64, leaf: I64) -> None:
        self.px, self.py, self.leaf = px, py, leaf

    def node_counts(self, n_nodes: int) -> I64:
        """Users per node of the current level."""
        return np.bincount(self.leaf, minlength=n_nodes).astype(np.int64)

    def split(self, step: Split, n_new: int) -> I64:
        """Move the users to the children of ``step``; return the users per child."""
        counts = np.zeros(n_new, dtype=np.int64)
        self.leaf = descend(self.leaf, self.px, self.py, *step, counts=counts)
        return counts


class GridCounter:
    """Users per tree node from one pass over the points (the simulation path's tree phase).

    Every node of an MTR tree is a cell of iterated bisections of a level-0 leaf's sides (its
    edges are the parents' exact midpoints), so one histogram of the tree users over each
    leaf's ``2**d x 2**d`` bisection grid, summed in 2-D prefix sums, gives the users of every
    node down to ``d`` bisections per axis in O(1): the tree phase reads the points once instead
    of once per level (the levels grow with log N by Eq. 2). The counts equal those of moving
    every user down (:class:`DescendCounter`: the same comparisons ``p >= (lo + hi) / 2``), so
    a seed gives the same release.

    ``d`` is chosen per leaf from ``weights`` (its estimated share of the users) so that the
    grids hold about ``GRID_CELLS_PER_USER`` cells per tree user but at most ``GRID_MAX_CELLS``
    in all (a grid that stays in cache, so the pass costs the same per user at every N), between
    ``GRID_MIN_DEPTH`` and the tree height ``h``. The pass also keeps each point's cell (4
    bytes). When a node holding users splits below its leaf's grid (dense spots), the users of
    its cells are read out by a scan of the kept cells and moved down one by one from then on
    (:class:`DescendCounter` on those users only), the grid still counting the coarser nodes.
    """

    def __init__(self, pts: F64, excluded: I64, level0: Level0, leaves: tuple[F64, F64, F64, F64], h: int,
                 weights: F64) -> None:
        lx0, lx1, ly0, ly1 = leaves
        n_leaves = lx0.size
        pts = np.ascontiguousarray(pts, dtype=np.float64)
        self.pts, self.excluded = pts, excluded
        n_rest = pts.shape[0] - excluded.size
        w = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
        w = w / w.sum() if w.sum() > 0 else np.full(n_leaves, 1.0 / n_leaves)
        budget = min(GRID_CELLS_PER_USER * n_rest, GRID_MAX_CELLS)
        low = min(h, GRID_MIN_DEPTH)
        if n_leaves * 4.0**low > budget:  # very many leaves: no floor (one cell a leaf at least)
            low = 0
        if n_leaves * 4.0**h <= budget:  # every leaf down to the tree's height: nothing read out
            self.depth = np.full(n_leaves, h, dtype=np.int64)
        else:
            depth = np.floor(np.log2(np.maximum(w * budget, 1.0)) / 2.0)
            self.depth = np.clip(depth, low, h).astype(np.int64)
        # bisection edges (2**d + 1 per leaf), histogram cells (4**d) and prefix sums ((2**d + 1)^2),
        # leaves stored by depth (leaves of one depth are contiguous: one array view each)
        side = np.left_shift(1, self.depth)
        order = np.argsort(self.depth, kind="stable")
        gbase, hoff, self.soff = (np.empty(n_leaves, dtype=np.int64) for _ in range(3))
        for arr, size in ((gbase, side + 1), (hoff, side * side), (self.soff, (side + 1) ** 2)):
            arr[order] = np.cumsum(size[order]) - size[order]
        gx = np.empty(int((side + 1).sum()), dtype=np.float64)
        gy = np.empty_like(gx)
        groups = []
        for d in np.unique(self.depth).tolist():
            sel = order[self.depth[order] == d]  # in storage order
            m = 1 << d
            g0, h0, s0 = int(gbase[sel[0]]), int(hoff[sel[0]]), int(self.soff[sel[0]])
            gx[g0:g0 + sel.size * (m + 1)] = bisection_edges(lx0[sel], lx1[sel], d).ravel()
            gy[g0:g0 + sel.size * (m + 1)] = bisection_edges(ly0[sel], ly1[sel], d).ravel()
            groups.append((sel.size, m, h0, s0))
        self.grids = BisectionGrids(level0.ex, level0.ey, level0.block_of_x, level0.block_of_y, level0.table,
                                    self.depth, gx, gy, gbase, hoff, int((side * side).sum()))
        self.hoff = hoff
        self.hist, self.cell = level0_grid(pts, excluded, self.grids, np.int32 if n_rest < 2**31 else np.int64)
        # 2-D prefix sums per leaf: node counts by inclusion-exclusion
        self.cum = np.zeros(int(((side + 1) ** 2).sum()), dtype=np.int64)
        for count, m, h0, s0 in groups:
            block = self.hist[h0:h0 + count * m * m].reshape(count, m, m)
            cum = self.cum[s0:s0 + count * (m + 1) ** 2].reshape(count, m + 1, m + 1)
            np.cumsum(block, axis=1, out=cum[:, 1:, 1:])
            np.cumsum(cum[:, 1:, 1:], axis=2, out=cum[:, 1:, 1:])
        # the nodes of the current level: leaf, bisections and cell index per axis, users, and
        # whether their users are read out (``fine``, moved down one by one)
        self.nk = np.arange(n_leaves, dtype=np.int64)
        self.ax = np.zeros(n_leaves, dtype=np.int64)
        self.jx = np.zeros(n_leaves, dtype=np.int64)
        self.ay = np.zeros(n_leaves, dtype=np.int64)
        self.jy = np.zeros(n_leaves, dtype=np.int64)
        self.counts, _ = self._count(self.nk, self.ax, self.jx, self.ay, self.jy)
        self.read_out = np.zeros(n_leaves, dtype=bool)
        self.fine: DescendCounter | None = None
        self.passes = 1

    def _count(self, nk: I64, ax: I64, jx: I64, ay: I64, jy: I64) -> tuple[I64, NDArray[np.bool_]]:
        """Users of each node (0 where the node is finer than its leaf's grid) and which are resolved."""
        d = self.depth[nk]
        ok = (ax <= d) & (ay <= d)
        out = np.zeros(nk.size, dtype=np.int64)
        if ok.any():
            d, nk, ax, jx, ay, jy = d[ok], nk[ok], ax[ok], jx[ok], ay[ok], jy[ok]
            sx, sy = d - ax, d - ay
            xl, xh = jx << sx, (jx + 1) << sx
            yl, yh = jy << sy, (jy + 1) << sy
            stride = (1 << d) + 1
            b = self.soff[nk]
            c = self.cum
            out[ok] = (c[b + xh * stride + yh] - c[b + xl * stride + yh]
                       - c[b + xh * stride + yl] + c[b + xl * stride + yl])
        return out, ok

    def leaf_counts(self) -> I64:
        """Users per level-0 leaf."""
        return self.counts.copy()

    def node_counts(self, n_nodes: int) -> I64:
        """Users per node of the current level (``n_nodes`` of them)."""
        return self.counts.copy()

    def _read_out(self, nodes: I64) -> None:
        """Read out the users of ``nodes`` (resolved by the grid) to move them one by one."""
        cell_node = np.full(self.grids.n_cells, -1, dtype=np.int64)
        for p in nodes.tolist():
            k, d = int(self.nk[p]), int(self.depth[self.nk[p]])
            sx, sy = d - int(self.ax[p]), d - int(self.ay[p])
            cx = np.arange(int(self.jx[p]) << sx, (int(self.jx[p]) + 1) << sx)
            cy = np.arange(int(self.jy[p]) << sy, (int(self.jy[p]) + 1) << sy)
            cell_node[int(self.hoff[k]) + (cx[:, None] << d) + cy[None, :]] = p
        size = int(self.counts[nodes].sum())
        px, py, leaf = grid_extract(self.pts, self.cell, cell_node, size)
        self.passes += 1
        if self.fine is None:
            self.fine = DescendCounter(px, py, leaf)
        else:
            self.fine = DescendCounter(np.concatenate([self.fine.px, px]), np.concatenate([self.fine.py, py]),
                                       np.concatenate([self.fine.leaf, leaf]))
        self.read_out[nodes] = True

    def split(self, step: Split, n_new: int) -> I64:
        """The users per child of ``step`` (the children in :func:`mtr_children`'s order)."""
        kind, start = step[0], step[5]
        par = np.repeat(np.arange(kind.size, dtype=np.int64), N_CHILDREN[kind])
        k = kind[par]
        code = np.arange(par.size, dtype=np.int64) - start[par]
        split_x = (k == 3) | (k == 1)
        split_y = (k == 3) | (k == 2)
        x_hi = (np.where(k == 3, code >= 2, code == 1) & split_x).astype(np.int64)
        y_hi = (np.where(k == 3, code % 2 == 1, code == 1) & split_y).astype(np.int64)
        nk = self.nk[par]
        ax = self.ax[par] + split_x
        jx = np.where(split_x, 2 * self.jx[par] + x_hi, self.jx[par])
        ay = self.ay[par] + split_y
        jy = np.where(split_y, 2 * self.jy[par] + y_hi, self.jy[par])
        counts, ok = self._count(nk, ax, jx, ay, jy)
        # users below the grid: read out the users of their parents (resolved, not yet read out)
        new = ~ok & (self.counts[par] > 0) & ~self.read_out[par]
        if new.any():
            self._read_out(np.unique(par[new]))
        if self.fine is not None:
            fine_counts = self.fine.split(step, n_new)
            counts = np.where(ok, counts, fine_counts)
        self.read_out = self.read_out[par]
        self.nk, self.ax, self.jx, self.ay, self.jy, self.counts = nk, ax, jx, ay, jy, counts
        return counts.copy()


def grow_tree(
    coll: Collection,
    leaves: tuple[F64, F64, F64, F64],
    px: F64 | None,
    py: F64 | None,
    leaf: I64 | None,
    sizes: list[int],
    *,
    n_total: int,
    epsilon: float,
    v1: float,
    theta: Callable[[int], float],
    width: float,
    height: float,
    role_gen: np.random.Generator,
    binary: bool = True,
    freeze_stopped: bool = False,
    decide_on_mean: bool = False,
    finest: float = 0.0,
    option: str = "h",
    leaf_counts: I64 | None = None,
    counter: GridCounter | DescendCounter | None = None,
) -> TreeResult:
    """Run the ``len(sizes)`` collection rounds and MTR steps of a tree phase.

    Parameters
    ----------
    coll : Collection
        The release's collection rounds (its block is charged by the oracles).
    leaves : (x0, x1, y0, y1)
        The level-0 partition.
    px, py, leaf : ndarray
        The tree users' coordinates and level-0 leaf. In the per-user path they are in the
        random order of the role draw and group ``l`` is the ``l``-th consecutive slice of
        ``sizes[l]`` users; in the simulation path their order does not matter.
    theta : callable
        ``theta(l)``: the split threshold (population count) applied after level ``l``.
    binary, freeze_stopped, decide_on_mean
        KDG-HT: binary splits between theta/2 and theta, a copied leaf may split later, the
        decision uses this level's estimate. AHEAD: quad splits only, a leaf that stops never
        splits again, the decision uses the mean of the leaf's (Norm-Sub'ed) estimates so far.
    leaf_counts : ndarray, optional
        ``np.bincount(leaf, minlength=leaves)`` when the caller has it (saves a pass).
    counter : GridCounter or DescendCounter, optional
        Simulation path: where the users per child come from (default: a
        :class:`DescendCounter` over ``px, py, leaf``, which may then be None).
    """
    x0, x1, y0, y1 = (np.asarray(a, dtype=np.float64) for a in leaves)
    h = len(sizes) - 1
    per_user = coll.mode == "per_user"
    cuts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n_leaves = x0.size
    parent = np.full(n_leaves, -1, dtype=np.int64)
    if not per_user:
        if counter is None:
            assert px is not None and py is not None and leaf is not None
            counter = DescendCounter(px, py, leaf)
        eligible = (counter.node_counts(n_leaves) if leaf_counts is None
                    else np.asarray(leaf_counts, dtype=np.int64))
        remaining = eligible.copy()
    stopped = np.zeros(n_leaves, dtype=bool)
    mean_obs = np.zeros(n_leaves)
    n_obs = np.zeros(n_leaves)
    out = TreeResult([], [], [], [], (x0, x1, y0, y1))
    for lev in range(h + 1):
        n_l = int(sizes[lev])
        name = f"U^{lev}"
        if per_user:
            assert leaf is not None
            (est,) = coll.reports(name, [leaf[cuts[lev]:cuts[lev + 1]]], [n_leaves], epsilon=epsilon)
        else:
            if lev < h:
                group = np.asarray(role_gen.multivariate_hypergeometric(remaining, n_l), dtype=np.int64)
            else:
                group = remaining.copy()
            remaining -= group
            (est,) = coll.counts(name, [group], epsilon=epsilon)
        y_lev = est * (n_total / max(n_l, 1))
        out.levels.append(TreeLevel(x0=x0, x1=x1, y0=y0, y1=y1, parent=parent, noisy=y_lev))
        out.ys.append(y_lev)
        out.parents.append(parent)
        out.variances.append(n_total**2 * v1 / max(n_l, 1))
        if lev == h:
            break
        if decide_on_mean:
            obs = norm_sub(y_lev, float(n_total))
            mean_obs = (mean_obs * n_obs + obs) / (n_obs + 1.0)
            n_obs = n_obs + 1.0
            stat = mean_obs
        else:
            stat = y_lev
        th = float(theta(lev))
        frozen = stopped.copy()
        if finest > 0:
            frozen |= ((x1 - x0) <= finest * width * (1 + 1e-9)) & ((y1 - y0) <= finest * height * (1 + 1e-9))
        kind = mtr_kind(x0, x1, y0, y1, stat, th, width, height, binary=binary, frozen=frozen)
        n_new = check_cells(int(N_CHILDREN[kind].sum()), f"the level-{lev + 1} partition",
                            f"{option} or raise the split threshold")
        cx0, cx1, cy0, cy1, par = mtr_children(kind, x0, x1, y0, y1)
        n_child = np.bincount(par, minlength=n_leaves)
        start = np.cumsum(n_child) - n_child
        if per_user:
            assert px is not None and py is not None and leaf is not None
            later = slice(int(cuts[lev + 1]), None)
            leaf[later] = descend(leaf[later], px[later], py[later], kind, x0, x1, y0, y1, start)
        else:
            assert counter is not None
            new_eligible = counter.split((kind, x0, x1, y0, y1, start), n_new)
            split = kind[par] != 0
            new_remaining = np.zeros(n_new, dtype=np.int64)
            new_remaining[~split] = remaining[par[~split]]
            if split.any():
                kids = np.flatnonzero(split)
                parents_split, parent_index = np.unique(par[kids], return_inverse=True)
                new_remaining[kids] = split_children(remaining[parents_split], new_eligible[kids],
                                                     parent_index.astype(np.int64), parents_split.size, role_gen)
            eligible, remaining = new_eligible, new_remaining
        copied = kind[par] == 0
        stopped = copied.copy() if freeze_stopped else np.zeros(n_new, dtype=bool)
        mean_obs = np.where(copied, mean_obs[par], 0.0)
        n_obs = np.where(copied, n_obs[par], 0.0)
        x0, x1, y0, y1, parent = cx0, cx1, cy0, cy1, par
        n_leaves = n_new
    out.leaves = (x0, x1, y0, y1)
    return out
