"""Accuracy acceptance on generated data (issue 17): KDG-HT's error falls as epsilon grows, the
default is never worse than the uniform grid, and HDG / AHEAD are sane.

The full check on every 2-D data set held is ``privpub.experiments.spatial.calibration`` (results
in docs/results/spatial.md); these are its fast counterparts on the generators.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privpub.datasets import clustered_points
from privpub.spatial import (
    AHEAD,
    HDG,
    KDGHT,
    ExactRangeCounter,
    UniformGrid,
    random_queries,
    synthetic_checkin,
)

pytestmark = pytest.mark.statistical

BOX = (0.0, 0.0, 1.0, 1.0)
N = 200_000
EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)
SEEDS = range(5)


def _data(name: str) -> np.ndarray:
    return clustered_points(N, rng=1).points if name == "clustered" else synthetic_checkin(N, rng=1)


@pytest.fixture(scope="module", params=["clustered", "sparse"])
def workload(request):
    pts = _data(request.param)
    queries = random_queries(1000, 0.05, 0.2, rng=7)
    truth = ExactRangeCounter(pts).count(queries).astype(np.float64)
    return request.param, pts, queries, truth


def _mre(pub, pts, queries, truth, eps) -> np.ndarray:
    """Mean relative error of [5%, 20%] queries (rho = 0.001 N), one value per seed."""
    rho = 0.001 * pts.shape[0]
    return np.array([np.mean(np.abs(pub.publish(pts, bounds=BOX, epsilon=eps, rng=s).range_count(queries) - truth)
                             / np.maximum(truth, rho)) for s in SEEDS])


def test_kdght_error_does_not_grow_with_epsilon(workload) -> None:
    name, pts, queries, truth = workload
    runs = [_mre(KDGHT(), pts, queries, truth, e) for e in EPSILONS]
    means = [r.mean() for r in runs]
    for (a, b), (ea, eb) in zip(itertools.pairwise(runs), itertools.pairwise(EPSILONS)):
        # tolerance: two standard errors of the difference of the two means over the seeds
        tol = 2.0 * math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
        assert b.mean() <= a.mean() + tol, (name, ea, eb, means)
    assert means[-1] < 0.5 * means[0], (name, means)  # and it does fall over the range


def test_default_is_never_worse_than_the_uniform_grid(workload) -> None:
    name, pts, queries, truth = workload
    for eps in (0.5, 1.0, 2.0):
        kdg = _mre(KDGHT(), pts, queries, truth, eps)
        ug = _mre(UniformGrid(), pts, queries, truth, eps)
        assert kdg.mean() <= ug.mean(), (name, eps, kdg.mean(), ug.mean())


@pytest.mark.parametrize("pub", [HDG(), AHEAD()], ids=["hdg", "ahead"])
def test_modern_baselines_are_accurate_and_improve_with_epsilon(workload, pub) -> None:
    name, pts, queries, truth = workload
    rho = 0.001 * N
    area = (queries[:, 2] - queries[:, 0]) * (queries[:, 3] - queries[:, 1])
    flat = np.mean(np.abs(N * area - truth) / np.maximum(truth, rho))  # knows nothing but N
    low, high = _mre(pub, pts, queries, truth, 0.5), _mre(pub, pts, queries, truth, 4.0)
    assert high.mean() < low.mean() < flat, (name, low.mean(), high.mean(), flat)
    assert high.mean() < 0.35 * flat
    rel = pub.publish(pts, bounds=BOX, epsilon=1.0, rng=0)
    assert rel.range_count([BOX])[0] == pytest.approx(N, rel=1e-9)
    assert rel.values.min() >= 0


def test_hdg_fused_grid_matches_its_one_dimensional_grids() -> None:
    """The weighted update returns a grid whose marginals agree with the consistent 1-D grids."""
    pts = synthetic_checkin(100_000, rng=4)
    rel = HDG(g1=16, g2=4).publish(pts, bounds=BOX, epsilon=2.0, rng=0)
    grid = rel.values.reshape(rel.grid_shape)
    assert rel.grid_shape == (16, 16)
    x_marg, y_marg = grid.sum(axis=1), grid.sum(axis=0)
    exact_x = np.histogram(pts[:, 0], bins=16, range=(0, 1))[0]
    exact_y = np.histogram(pts[:, 1], bins=16, range=(0, 1))[0]
    sd = math.sqrt(3 * 100_000 * 4 * math.e**2 / (math.e**2 - 1) ** 2)  # OUE std of a 1-D cell x 3 groups
    assert np.abs(x_marg - exact_x).max() < 5 * sd
    assert np.abs(y_marg - exact_y).max() < 5 * sd
