"""Per-user path vs exact simulation, estimator unbiasedness and variance, CI vs last end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privpub.spatial import KDGHT, synthetic_checkin
from privpub.spatial._collect import collect
from privpub.spatial._kernels import oue_v1

BOX = (0.0, 0.0, 1.0, 1.0)


def _runs(counts: list[int], eps: float, mode: str, runs: int, seed: int) -> np.ndarray:
    cells = np.repeat(np.arange(len(counts)), counts)
    gen = np.random.default_rng(seed)
    return np.array([collect(cells, len(counts), epsilon=eps, mode=mode, rng=gen) for _ in range(runs)])


@pytest.mark.statistical
@pytest.mark.parametrize("mode", ["simulate", "per_user"])
def test_oue_unbiased_and_variance(mode) -> None:
    counts = [600, 250, 150, 0]
    eps = 0.5
    est = _runs(counts, eps, mode, 4000, seed=1)
    se = est.std(axis=0, ddof=1) / math.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - counts) < 4 * se)
    expected = 1000 * oue_v1(eps) + np.array(counts)
    np.testing.assert_allclose(est.var(axis=0, ddof=1), expected, rtol=0.10)


@pytest.mark.statistical
def test_simulation_agrees_with_per_user_in_distribution() -> None:
    counts = [900, 500, 350, 200, 50]
    eps = 1.0
    sim = _runs(counts, eps, "simulate", 3000, seed=2)
    per = _runs(counts, eps, "per_user", 3000, seed=3)
    for k in range(len(counts)):
        assert stats.ks_2samp(sim[:, k], per[:, k]).pvalue > 1e-3
    np.testing.assert_allclose(sim.mean(axis=0), per.mean(axis=0), atol=4 * math.sqrt(2 * 2000 * oue_v1(eps) / 3000))
    np.testing.assert_allclose(sim.var(axis=0), per.var(axis=0), rtol=0.15)
    for est in (sim, per):
        r = np.corrcoef(est.T)
        assert np.abs(r[np.triu_indices(len(counts), 1)]).max() < 0.08


@pytest.mark.statistical
def test_end_to_end_kdght_modes_agree() -> None:
    pts = synthetic_checkin(5000, rng=7)
    query = np.array([[0.1, 0.2, 0.55, 0.7]])
    answers = {}
    for mode in ("simulate", "per_user"):
        answers[mode] = np.array([
            KDGHT().publish(pts, bounds=BOX, epsilon=1.0, rng=seed, mode=mode).range_count(query)[0]
            for seed in range(300)
        ])
    assert stats.ks_2samp(answers["simulate"], answers["per_user"]).pvalue > 1e-3


@pytest.mark.statistical
def test_last_leaf_estimates_unbiased_and_ci_beats_last() -> None:
    """Given the published tree, the last group's leaf estimates are unbiased; CI has lower MSE."""
    pts = synthetic_checkin(20_000, rng=8)
    gen = np.random.default_rng(0)
    queries = np.array([[a, b, a + 0.3, b + 0.4] for a, b in gen.random((20, 2)) * 0.6])
    err_last, err_ci = [], []
    for seed in range(200):
        last = KDGHT(combine="last", postprocess="none").publish(pts, bounds=BOX, epsilon=0.5, rng=seed)
        ci = KDGHT(combine="ci", postprocess="none").publish(pts, bounds=BOX, epsilon=0.5, rng=seed)
        assert np.array_equal(last.x0, ci.x0)  # same seed, same tree
        exact = np.bincount(last.locate(pts), minlength=last.n_leaves)
        truth = last.answer_with(exact, queries)
        err_last.append(last.range_count(queries) - truth)
        err_ci.append(ci.range_count(queries) - truth)
    el, ec = np.array(err_last), np.array(err_ci)
    se = el.std(axis=0, ddof=1) / math.sqrt(len(el))
    assert np.all(np.abs(el.mean(axis=0)) < 4 * se)
    assert (ec**2).mean() <= (el**2).mean()
