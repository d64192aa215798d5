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
from privpub.spatial._kernels import N_CHILDREN, descend, mtr_children, mtr_kind
from privpub.spatial._release import TreeLevel

__all__ = ["TreeResult", "grow_tree"]

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


def grow_tree(
    coll: Collection,
    leaves: tuple[F64, F64, F64, F64],
    px: F64,
    py: F64,
    leaf: I64,
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
    """
    x0, x1, y0, y1 = (np.asarray(a, dtype=np.float64) for a in leaves)
    h = len(sizes) - 1
    per_user = coll.mode == "per_user"
    cuts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n_leaves = x0.size
    parent = np.full(n_leaves, -1, dtype=np.int64)
    if not per_user:
        eligible = (np.bincount(leaf, minlength=n_leaves).astype(np.int64) if leaf_counts is None
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
            later = slice(int(cuts[lev + 1]), None)
            leaf[later] = descend(leaf[later], px[later], py[later], kind, x0, x1, y0, y1, start)
        else:
            new_eligible = np.zeros(n_new, dtype=np.int64)
            leaf = descend(leaf, px, py, kind, x0, x1, y0, y1, start, counts=new_eligible)
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
