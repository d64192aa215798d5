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


# ---- the simulation path's role splits by counts are exact (issue 17) ----------------------------
@pytest.mark.statistical
def test_split_counts_has_the_law_of_a_random_permutation() -> None:
    """Groups cut from a random permutation: group 0's counts per cell are multivariate
    hypergeometric; split_counts draws them with that exact law (chi-square against the pmf)."""
    from statutils import chisquare_pvalue

    from privpub.spatial._collect import split_counts

    counts = np.array([5, 3, 2])
    sizes = [4, 6]
    gen = np.random.default_rng(3)
    draws = np.array([split_counts(counts, sizes, gen)[0] for _ in range(20_000)])
    assert np.all(draws.sum(axis=1) == 4) and np.all(draws <= counts)
    outcomes = [tuple(o) for o in np.unique(draws, axis=0)]
    observed = np.array([np.all(draws == o, axis=1).sum() for o in outcomes])
    expected = np.array([stats.multivariate_hypergeom.pmf(o, counts, 4) for o in outcomes])
    assert expected.sum() == pytest.approx(1.0)
    assert chisquare_pvalue(observed, expected) > 1e-3
    # the rest goes to the last group, so every group's counts add up to the cells'
    parts = split_counts(counts, [2, 3, 5], gen)
    np.testing.assert_array_equal(sum(parts), counts)


@pytest.mark.statistical
def test_split_children_is_multivariate_hypergeometric_per_parent() -> None:
    from statutils import chisquare_pvalue

    from privpub.spatial._collect import split_children

    child_all = np.array([4, 1, 3, 2, 6])          # parent 0: children 0-2, parent 1: children 3-4
    child_parent = np.array([0, 0, 0, 1, 1])
    remaining = np.array([5, 3])
    gen = np.random.default_rng(4)
    draws = np.array([split_children(remaining, child_all, child_parent, 2, gen) for _ in range(20_000)])
    np.testing.assert_array_equal(draws[:, :3].sum(axis=1), 5)
    np.testing.assert_array_equal(draws[:, 3:].sum(axis=1), 3)
    for cols, pool, n in ((slice(0, 3), child_all[:3], 5), (slice(3, 5), child_all[3:], 3)):
        sub = draws[:, cols]
        outcomes = [tuple(o) for o in np.unique(sub, axis=0)]
        observed = np.array([np.all(sub == o, axis=1).sum() for o in outcomes])
        expected = np.array([stats.multivariate_hypergeom.pmf(o, pool, n) for o in outcomes])
        assert expected.sum() == pytest.approx(1.0)
        assert chisquare_pvalue(observed, expected) > 1e-3


@pytest.mark.statistical
@pytest.mark.parametrize("name", ["gtr", "hdg", "ahead"])
def test_simulation_agrees_with_per_user_end_to_end(name) -> None:
    from privpub.spatial import PUBLISHERS

    pts = synthetic_checkin(3000, rng=9)
    query = np.array([[0.1, 0.2, 0.55, 0.7]])
    pub = PUBLISHERS[name]() if name != "ahead" else PUBLISHERS[name](height=5)
    answers = {mode: np.array([pub.publish(pts, bounds=BOX, epsilon=1.0, rng=s, mode=mode).range_count(query)[0]
                               for s in range(200)]) for mode in ("simulate", "per_user")}
    assert stats.ks_2samp(answers["simulate"], answers["per_user"]).pvalue > 1e-3
