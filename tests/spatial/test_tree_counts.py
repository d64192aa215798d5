"""The simulation path's users per tree node: one pass over the points (GridCounter) against
moving every user down each level (DescendCounter), exactly, and the role draw in blocks."""

from __future__ import annotations

import numpy as np
import pytest

import privpub.spatial._tree as tree
from privpub.spatial import KDGHT, synthetic_checkin
from privpub.spatial._kdght import _ROLE_BLOCK, _sample_roles, assign_roles
from privpub.spatial._kernels import N_CHILDREN, bisection_edges, grid_edges, mtr_children
from privpub.spatial._tree import DescendCounter, GridCounter, Level0


def _level0() -> tuple[Level0, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Six level-0 leaves: x blocks [0, 3), [3, 4), [4, 8) of 8 intervals, y blocks [0, 2), [2, 5) of 5."""
    ex, ey = grid_edges(0.0, 1.0, 8), grid_edges(0.0, 2.0, 5)
    block_of_x = np.array([0, 0, 0, 1, 2, 2, 2, 2])
    block_of_y = np.array([0, 0, 1, 1, 1])
    table = np.arange(6).reshape(3, 2)
    bxe, bye = ex[[0, 3, 4, 8]], ey[[0, 2, 5]]
    ix, iy = np.divmod(np.arange(6), 2)
    leaves = (bxe[ix], bxe[ix + 1], bye[iy], bye[iy + 1])
    return Level0(ex, ey, block_of_x, block_of_y, table), leaves


def _points(rng: np.random.Generator, leaves: tuple[np.ndarray, ...], h: int) -> np.ndarray:
    """Uniform points, two point masses, and points exactly on every bisection edge and corner."""
    lx0, lx1, ly0, ly1 = leaves
    uniform = rng.random((6000, 2)) * [1.0, 2.0]
    masses = np.repeat([[0.61803, 1.41421], [0.1, 0.3]], [3000, 800], axis=0)
    ex = bisection_edges(lx0, lx1, h).ravel()
    ey = bisection_edges(ly0, ly1, h).ravel()
    on_edges = np.column_stack([rng.choice(ex, 4000), rng.choice(ey, 4000)])
    corners = np.array([[0.0, 0.0], [1.0, 2.0], [1.0, 0.0], [0.0, 2.0]])
    pts = np.concatenate([uniform, masses, on_edges, corners])
    return pts[rng.permutation(pts.shape[0])]


@pytest.mark.parametrize(("cells_per_user", "min_depth"), [(0.5, 3), (1e-9, 0), (1e-3, 1)])
def test_grid_counts_equal_descending_every_user(monkeypatch: pytest.MonkeyPatch, cells_per_user: float,
                                                  min_depth: int) -> None:
    """Same counts per node at every level, with random MTR decisions (deep splits read users out)."""
    monkeypatch.setattr(tree, "GRID_CELLS_PER_USER", cells_per_user)
    monkeypatch.setattr(tree, "GRID_MIN_DEPTH", min_depth)
    rng = np.random.default_rng(11)
    level0, leaves = _level0()
    h = 7
    pts = _points(rng, leaves, h)
    excluded = np.sort(rng.choice(pts.shape[0], 500, replace=False))
    keep = np.ones(pts.shape[0], dtype=bool)
    keep[excluded] = False
    px, py = pts[keep, 0].copy(), pts[keep, 1].copy()
    leaf = level0.leaves_of(px, py)
    grid = GridCounter(pts, excluded, level0, leaves, h, weights=np.array([0.5, 0.1, 0.0, 0.2, 0.1, 0.1]))
    ref = DescendCounter(px, py, leaf)
    np.testing.assert_array_equal(grid.leaf_counts(), np.bincount(leaf, minlength=6))
    x0, x1, y0, y1 = leaves
    for _ in range(h):
        kind = rng.choice(4, size=x0.size, p=[0.3, 0.2, 0.2, 0.3])
        cx0, cx1, cy0, cy1, par = mtr_children(kind, x0, x1, y0, y1)
        n_child = N_CHILDREN[kind]
        start = np.cumsum(n_child) - n_child
        step = (kind, x0, x1, y0, y1, start)
        want = ref.split(step, par.size)
        got = grid.split(step, par.size)
        np.testing.assert_array_equal(got, want)
        x0, x1, y0, y1 = cx0, cx1, cy0, cy1
    assert int(want.sum()) == px.size
    if cells_per_user < 1e-6:
        assert grid.passes > 1  # the negative control of the read-out path: it did run


def test_kdght_release_does_not_depend_on_the_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grids too coarse for the tree (users read out and moved one by one) give the same release."""
    pts = synthetic_checkin(30_000, rng=3)
    for eps in (0.5, 4.0):
        want = KDGHT().publish(pts, bounds=(0, 0, 1, 1), epsilon=eps, rng=8)
        monkeypatch.setattr(tree, "GRID_CELLS_PER_USER", 1e-9)
        monkeypatch.setattr(tree, "GRID_MIN_DEPTH", 0)
        got = KDGHT().publish(pts, bounds=(0, 0, 1, 1), epsilon=eps, rng=8)
        monkeypatch.undo()
        np.testing.assert_array_equal(got.values, want.values)
        np.testing.assert_array_equal(got.x0, want.x0)
        np.testing.assert_array_equal(got.y1, want.y1)


def _roles_in_one_draw(n: int, eta: float, kdg_split: str, gen: np.random.Generator) -> tuple[np.ndarray, ...]:
    """The former role draw: one array of N uniforms."""
    in_sample = gen.random(n) < eta
    sample = np.flatnonzero(in_sample)
    sample = sample[gen.permutation(sample.size)]
    rest = np.flatnonzero(~in_sample)
    if rest.size == 0:
        rest, sample = np.sort(sample[:1]), sample[1:]
    if kdg_split == "users":
        half = (sample.size + 1) // 2
        return sample[:half], sample[half:], rest
    return sample, sample, rest


@pytest.mark.parametrize(("n", "eta", "kdg_split"), [(3 * _ROLE_BLOCK + 17, 0.05, "users"),
                                                      (_ROLE_BLOCK + 1, 0.3, "budget"), (40, 1.0, "users"),
                                                      (5, 0.0, "users")])
def test_role_draw_in_blocks_is_the_same_stream(n: int, eta: float, kdg_split: str) -> None:
    got = assign_roles(n, eta, kdg_split, np.random.default_rng(4))
    want = _roles_in_one_draw(n, eta, kdg_split, np.random.default_rng(4))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    ux, uy, sampled = _sample_roles(n, eta, kdg_split, np.random.default_rng(4))
    np.testing.assert_array_equal(sampled, np.sort(np.union1d(ux, uy)))
