"""Kernels of privpub.spatial: KDG, MTR, CI, formulas, query answering, exact counting."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privpub.spatial import (
    ExactRangeCounter,
    gtr_height,
    kdg_intervals,
    random_queries,
    rappor_granularity,
    ug_granularity,
)
from privpub.spatial._kernels import (
    ci_combine,
    grid_answer,
    grid_edges,
    interval_index,
    kd_partition,
    kdg_height,
    merge_sparse,
    mtr_split,
    oue_v1,
    overlap_answer,
    uniform_interval_index,
)


# ---- spec 7.8: KDG worked example ------------------------------------------------------------
def test_kdg_worked_example_fig1() -> None:
    fx = np.array([0.03, 0.80, 0.17])
    fy = np.array([0.1, 0.6, 0.3])
    w = np.full(3, 1 / 3)
    bx = merge_sparse(fx, w, lam=0.6, tau=1.0)
    by = merge_sparse(fy, w, lam=0.6, tau=1.0)
    assert [b.sparse for b in bx] == [True, False, True]
    assert [b.sparse for b in by] == [True, False, False]
    leaves = kd_partition(bx, by)
    # x1 x all; (x2..x3) x y1; x2 x (y2..y3) dense; x3 x (y2..y3)
    assert sorted(leaves) == sorted([
        (0, 1, 0, 3, "sparse"), (1, 3, 0, 1, "sparse"), (1, 2, 1, 3, "dense"), (2, 3, 1, 3, "sparse"),
    ])
    assert leaves == sorted(leaves, key=lambda t: (t[0], t[2]))


def test_rgdd_merge_rule() -> None:
    w = np.full(4, 0.25)
    # den 0.2 and 0.3 (freq = den * w): rgdd = 0.2 < 1 -> merged
    blocks = merge_sparse(np.array([0.05, 0.075, 0.6, 0.275]), w, lam=0.6, tau=1.0)
    assert (blocks[0].lo, blocks[0].hi) == (0, 2)
    assert blocks[0].den == pytest.approx(0.25)
    # den 0 next to 0.4: rgdd = 1, not < 1 -> kept apart
    blocks = merge_sparse(np.array([0.0, 0.1, 0.6, 0.3]), w, lam=0.6, tau=1.0)
    assert [(b.lo, b.hi) for b in blocks][:2] == [(0, 1), (1, 2)]
    # both zero: rgdd := 0 -> merged; at tau = 0.5, den 0.1 next to 0.4 (rgdd 0.6) stays apart
    assert merge_sparse(np.array([0.0, 0.0, 0.5, 0.5]), w, lam=0.6, tau=1.0)[0].hi == 2
    assert merge_sparse(np.array([0.025, 0.1, 0.5, 0.375]), w, lam=0.6, tau=0.5)[0].hi == 1


def test_kd_partition_all_dense_and_all_sparse() -> None:
    w = np.full(4, 0.25)
    even = merge_sparse(np.full(4, 0.25), w, lam=0.6, tau=1.0)
    assert kd_partition(even, even) == [(0, 4, 0, 4, "dense")]


# ---- spec 7.10: formulas ---------------------------------------------------------------------
def test_formulas() -> None:
    assert kdg_height(1e6, 0.5) == 8
    assert kdg_height(0.0, 0.5) == 1
    assert kdg_height(1e30, 0.5) == 10
    assert [ug_granularity(10**6, e) for e in (0.1, 0.3, 0.5)] == [3, 5, 6]
    assert [gtr_height(10**6, e) for e in (0.1, 0.3, 0.5)] == [7, 7, 8]
    assert [kdg_intervals(25_000, e, rule="noise") for e in (0.1, 0.3, 0.5)] == [4, 11, 19]
    # the default histogram rule, (2 alpha1^2 / sigma_f^2)^(1/3): sigma_f^2 = V1 / n_a
    assert [kdg_intervals(25_000, e) for e in (0.1, 0.3, 0.5)] == [4, 8, 11]
    for eps in (0.25, 0.5, 1.0, 2.0):  # the sparse test's margin lam/m in noise std grows with eps
        var = oue_v1(eps) / 25_000
        assert kdg_intervals(25_000, eps) == min(max(int((2 * 0.49 / var) ** (1 / 3)), 4), 32)
    assert rappor_granularity(10**8, 0.5) == 512


# ---- spec 7.9: MTR -----------------------------------------------------------------------------
def test_mtr_split_rules() -> None:
    x0 = np.array([0.0, 0.0, 0.5, 0.5])
    x1 = np.array([0.5, 0.5, 1.0, 1.0])
    y0 = np.array([0.0, 0.5, 0.0, 0.25])
    y1 = np.array([0.5, 1.0, 0.25, 1.0])
    y = np.array([101.0, 60.0, 60.0, 10.0])  # theta = 100
    kind, cx0, cx1, cy0, cy1, parent = mtr_split(x0, x1, y0, y1, y, 100.0, 1.0, 1.0)
    assert kind.tolist() == [3, 1, 1, 0]  # quad; binary on x (tie -> x); binary on longer x; copy
    assert parent.tolist() == [0, 0, 0, 0, 1, 1, 2, 2, 3]
    np.testing.assert_array_equal(cx0[:4], [0, 0, 0.25, 0.25])
    np.testing.assert_array_equal(cy0[:4], [0, 0.25, 0, 0.25])
    np.testing.assert_array_equal(cx1[4:6], [0.25, 0.5])
    assert (cx0[8], cx1[8], cy0[8], cy1[8]) == (0.5, 1.0, 0.25, 1.0)
    area = (cx1 - cx0) * (cy1 - cy0)
    assert np.isclose(area.sum(), 1.0, rtol=1e-12)
    # a binary split of a tall leaf goes along y
    kind, *_ = mtr_split(np.array([0.0]), np.array([0.25]), np.array([0.0]), np.array([1.0]),
                         np.array([60.0]), 100.0, 1.0, 1.0)
    assert kind.tolist() == [2]
    # a side below 2e-6 of the domain is never halved
    kind, *_ = mtr_split(np.array([0.0]), np.array([1e-6]), np.array([0.0]), np.array([1.0]),
                         np.array([1e9]), 100.0, 1.0, 1.0)
    assert kind.tolist() == [2]


# ---- spec 7.11: CI equals the dense equality-constrained GLS --------------------------------------
def _random_tree(gen: np.random.Generator) -> list[np.ndarray]:
    parents = [np.full(int(gen.integers(1, 4)), -1)]
    for _ in range(2):
        fan = gen.integers(1, 5, size=parents[-1].size)
        parents.append(np.repeat(np.arange(parents[-1].size), fan))
    return parents


def _dense_gls(ys: list[np.ndarray], var: list[float], parents: list[np.ndarray], total: float) -> np.ndarray:
    h = len(ys) - 1
    n_leaf = ys[h].size
    a_rows = [np.eye(n_leaf)]
    for lev in range(h, 0, -1):  # ancestor matrices from leaves up
        m = np.zeros((ys[lev - 1].size, ys[lev].size))
        m[parents[lev], np.arange(ys[lev].size)] = 1.0
        a_rows.insert(0, m @ a_rows[0])
    a = np.vstack(a_rows)
    w = np.concatenate([np.full(ys[lev].size, 1 / var[lev]) for lev in range(h + 1)])
    y = np.concatenate(ys)
    k = np.zeros((n_leaf + 1, n_leaf + 1))
    k[:n_leaf, :n_leaf] = a.T @ (w[:, None] * a)
    k[:n_leaf, n_leaf] = 1.0
    k[n_leaf, :n_leaf] = 1.0
    rhs = np.concatenate([a.T @ (w * y), [total]])
    return np.linalg.solve(k, rhs)[:n_leaf]


def test_ci_equals_dense_gls() -> None:
    gen = np.random.default_rng(5)
    for _ in range(50):
        parents = _random_tree(gen)
        ys = [gen.normal(100, 30, size=p.size) for p in parents]
        var = list(gen.uniform(1, 50, size=3))
        total = float(gen.uniform(200, 400))
        got = ci_combine(ys, var, parents, total)
        np.testing.assert_allclose(got, _dense_gls(ys, var, parents, total), rtol=0, atol=1e-8)
        assert got.sum() == pytest.approx(total, abs=1e-8)


@pytest.mark.statistical
def test_ci_unbiased_and_no_worse_than_last_on_fixed_tree() -> None:
    gen = np.random.default_rng(11)
    parents = [np.array([-1, -1, -1]), np.array([0, 0, 1, 2, 2, 2]), np.array([0, 1, 1, 2, 3, 4, 4, 5])]
    truth_leaf = np.array([50.0, 10.0, 30.0, 80.0, 5.0, 40.0, 25.0, 60.0])
    truths = [truth_leaf]
    for lev in (2, 1):
        truths.insert(0, np.bincount(parents[lev], weights=truths[0]))
    total = truth_leaf.sum()
    var = [400.0, 300.0, 200.0]
    runs = 2000
    est = np.empty((runs, truth_leaf.size))
    for r in range(runs):
        ys = [t + gen.normal(0, math.sqrt(v), size=t.size) for t, v in zip(truths, var)]
        est[r] = ci_combine(ys, var, parents, total)
    se = est.std(axis=0, ddof=1) / math.sqrt(runs)
    assert np.all(np.abs(est.mean(axis=0) - truth_leaf) < 4 * se + 1e-9)
    assert np.all(est.var(axis=0, ddof=1) <= 1.1 * var[2])


# ---- spec 7.12: query answering ----------------------------------------------------------------
def test_overlap_answer_rules() -> None:
    x0, x1 = np.array([0.0, 0.5, 0.5]), np.array([0.5, 1.0, 1.0])
    y0, y1 = np.array([0.0, 0.0, 0.5]), np.array([1.0, 0.5, 1.0])
    val = np.array([10.0, 20.0, 30.0])
    q = np.array([[0.5, 0.0, 1.0, 0.5], [0.5, 0.0, 0.75, 0.5], [0, 0, 1, 1], [0.2, 0.1, 0.7, 0.9]])
    got = overlap_answer(x0, x1, y0, y1, val, q)
    assert got[0] == pytest.approx(20.0)
    assert got[1] == pytest.approx(10.0)
    assert got[2] == pytest.approx(60.0)
    left = overlap_answer(x0, x1, y0, y1, val, np.array([[0.2, 0.1, 0.45, 0.9]]))
    right = overlap_answer(x0, x1, y0, y1, val, np.array([[0.45, 0.1, 0.7, 0.9]]))
    assert got[3] == pytest.approx(left[0] + right[0], abs=1e-9)


def test_grid_answer_matches_overlap() -> None:
    gen = np.random.default_rng(2)
    g = 8
    vals = gen.random((g, g)) * 100
    e = np.linspace(0, 1, g + 1)
    ii, jj = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
    q = random_queries(200, 0.01, 0.6, rng=3)
    a = grid_answer(vals, (0.0, 0.0, 1.0, 1.0), q)
    b = overlap_answer(e[ii.ravel()], e[ii.ravel() + 1], e[jj.ravel()], e[jj.ravel() + 1], vals.ravel(), q)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_exact_counter_matches_brute_force() -> None:
    gen = np.random.default_rng(0)
    pts = np.round(gen.random((3000, 2)), 2)  # ties on query edges
    q = random_queries(300, 0.05, 0.6, rng=1)
    q[:3] = [[0.1, 0.1, 0.1, 0.5], [0.2, 0.3, 0.5, 0.3], [0, 0, 1, 1]]
    brute = np.array([np.sum((pts[:, 0] >= r[0]) & (pts[:, 0] <= r[2]) & (pts[:, 1] >= r[1])
                             & (pts[:, 1] <= r[3])) for r in q])
    np.testing.assert_array_equal(ExactRangeCounter(pts).count(q), brute)


def test_random_queries_area_classes() -> None:
    for lo, hi in ((0.05, 0.2), (0.2, 0.4), (0.4, 0.6)):
        q = random_queries(2000, lo, hi, rng=7)
        area = (q[:, 2] - q[:, 0]) * (q[:, 3] - q[:, 1])
        assert area.min() >= lo - 1e-12 and area.max() <= hi + 1e-12
        assert q.min() >= 0 and q.max() <= 1


def test_uniform_interval_index_matches_search() -> None:
    gen = np.random.default_rng(4)
    for lo, hi, m in ((0.0, 1.0, 7), (-122.5, -70.1, 33), (3.0, 3.5, 512), (0.0, 1.0, 256)):
        e = grid_edges(lo, hi, m)
        v = np.concatenate([gen.uniform(lo, hi, 20_000), e, np.nextafter(e, -np.inf)[1:],
                            np.nextafter(e, np.inf)[:-1]])
        np.testing.assert_array_equal(uniform_interval_index(e, v), interval_index(e, v))
