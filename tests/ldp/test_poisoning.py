"""Poisoning defenses (privpub.ldp.defend): the honest law of report sizes against exact
enumeration, the per-report threshold's exact false-positive rate, unbiasedness after reports are
set aside (with a negative control), the group test, fake-report generators, and the acceptance
numbers of benchmarks/poisoning.py at a smaller size."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from privpub.errors import ParameterError
from privpub.ldp import (
    GRR,
    OLH,
    OUE,
    SUE,
    defend,
    defend_bins,
    fake_reports,
    report_threshold,
    size_bins,
    support_size_pmf,
    support_sizes,
    truncated_probabilities,
)

EPS = 2.0


def _enumerate(oracle: OUE | SUE, value: int, epsilon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every output of a unary encoding on a tiny domain: (bits, probability) for input ``value``."""
    p, q = oracle.probabilities(epsilon)
    d = oracle.domain_size
    outs = np.array(list(itertools.product([0, 1], repeat=d)), dtype=bool)
    probs = np.where(np.arange(d) == value, np.where(outs, p, 1 - p), np.where(outs, q, 1 - q)).prod(axis=1)
    return outs, probs, outs.sum(axis=1)


@pytest.mark.parametrize("oracle", [OUE(domain_size=5), SUE(domain_size=5)], ids=["OUE", "SUE"])
def test_support_size_law_is_exact_and_value_independent(oracle) -> None:
    pmf = support_size_pmf(oracle, epsilon=EPS)
    for v in range(oracle.domain_size):
        _, probs, k = _enumerate(oracle, v, EPS)
        brute = np.bincount(k, weights=probs, minlength=oracle.domain_size + 1)
        np.testing.assert_allclose(pmf, brute, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("oracle", [OUE(domain_size=5), SUE(domain_size=5)], ids=["OUE", "SUE"])
def test_truncated_probabilities_match_enumeration(oracle) -> None:
    for threshold in (2, 3, 4):
        pt, qt = truncated_probabilities(oracle, epsilon=EPS, threshold=threshold)
        outs, probs, k = _enumerate(oracle, 0, EPS)
        keep = k < threshold
        mass = probs[keep].sum()
        assert pt == pytest.approx((probs * outs[:, 0])[keep].sum() / mass, rel=1e-12)
        assert qt == pytest.approx((probs * outs[:, 1])[keep].sum() / mass, rel=1e-12)


def test_report_threshold_is_the_smallest_size_within_alpha() -> None:
    pmf = support_size_pmf(OUE(domain_size=16), epsilon=EPS)
    k, fpr = report_threshold(pmf, 1e-3)
    tail = np.cumsum(pmf[::-1])[::-1]
    assert k is not None and fpr == pytest.approx(tail[k]) and fpr <= 1e-3 < tail[k - 1]
    # OUE over 16 cells at epsilon 2: mean 0.5 + 15 q = 2.29 ones; 8 or more has probability ~2e-4
    assert k == 8
    assert report_threshold(support_size_pmf(GRR(domain_size=16), epsilon=EPS), 1e-3) == (None, 0.0)
    with pytest.raises(ParameterError, match="alpha"):
        report_threshold(pmf, 1.5)


def test_honest_reports_are_set_aside_at_the_stated_rate() -> None:
    oracle = OUE(domain_size=16)
    values = np.random.default_rng(0).integers(0, 16, 100_000)
    res = defend(oracle, oracle.perturb(values, epsilon=EPS, rng=1), epsilon=EPS, alpha=0.01)
    n, f = values.size, res.false_positive_rate
    # binomial count of flagged honest reports: within 4 standard deviations of n * fpr
    assert abs(res.flagged.sum() - n * f) <= 4 * math.sqrt(n * f * (1 - f)) + 1
    assert res.suspected == res.flagged.sum()


def test_detect_is_unbiased_and_the_naive_estimate_after_filtering_is_not() -> None:
    # a generous alpha sets many reports aside, so a missing re-weighting would show
    oracle = OUE(domain_size=8)
    n = 200_000
    values = np.random.default_rng(2).choice(8, size=n, p=[0.4, 0.2, 0.1, 0.1, 0.1, 0.05, 0.03, 0.02])
    truth = np.bincount(values, minlength=8).astype(float)
    reports = oracle.perturb(values, epsilon=EPS, rng=3)
    res = defend(oracle, reports, epsilon=EPS, method="detect", alpha=0.2)
    assert res.false_positive_rate > 0.05
    keep = ~res.flagged
    pt, qt = truncated_probabilities(oracle, epsilon=EPS, threshold=res.threshold)
    sd = math.sqrt(keep.sum() * qt * (1 - qt)) / (pt - qt) / (1 - res.false_positive_rate)
    assert np.all(np.abs(res.estimate - truth) < 5 * sd)
    # negative control: the plain estimator on the kept reports (p, q not re-weighted) is biased
    naive = oracle.estimate(reports[keep], epsilon=EPS) * (n / keep.sum())
    assert np.max(np.abs(naive - truth)) > 10 * sd


def test_group_test_passes_honest_and_flags_poisoned_reports() -> None:
    oracle = SUE(domain_size=16)
    values = np.random.default_rng(4).integers(0, 16, 3000)
    honest = oracle.perturb(values, epsilon=EPS, rng=5)
    p_honest = [defend(oracle, oracle.perturb(values, epsilon=EPS, rng=100 + s), epsilon=EPS).group_p_value
                for s in range(20)]
    assert min(p_honest) > 1e-3  # the level is 1e-3: all 20 pass with probability ~0.98
    fakes = fake_reports(oracle, 15, 150, attack="target", epsilon=EPS, rng=6)
    res = defend(oracle, np.concatenate([honest, fakes]), epsilon=EPS)
    assert res.group_flagged and res.group_p_value < 1e-10
    adaptive = fake_reports(oracle, 15, 150, attack="adaptive", epsilon=EPS, rng=7)
    assert not defend(oracle, np.concatenate([honest, adaptive]), epsilon=EPS).group_flagged


def test_fake_reports_follow_their_attack() -> None:
    oracle = OUE(domain_size=16)
    p, q = oracle.probabilities(EPS)
    mga = fake_reports(oracle, 3, 500, attack="mga", epsilon=EPS, rng=0)
    bits = np.unpackbits(mga, axis=1, count=16, bitorder="little")
    assert bits[:, 3].all() and (bits.sum(axis=1) == math.floor(p + 15 * q)).all()
    target = fake_reports(oracle, 3, 50, attack="target", epsilon=EPS, rng=0)
    assert (support_sizes(oracle, target, epsilon=EPS) == 1).all()
    adaptive = fake_reports(oracle, 3, 20_000, attack="adaptive", epsilon=EPS, rng=1)
    assert np.unpackbits(adaptive, axis=1, count=16, bitorder="little")[:, 3].all()
    pmf = support_size_pmf(oracle, epsilon=EPS)
    pmf[0] = 0.0
    obs = np.bincount(support_sizes(oracle, adaptive, epsilon=EPS), minlength=17)[1:8]
    exp = 20_000 * pmf[1:8] / pmf.sum()
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-4
    assert (fake_reports(GRR(domain_size=16), 3, 10, rng=0) == 3).all()
    olh = OLH(domain_size=16)
    r = fake_reports(olh, 3, 200, attack="mga", epsilon=EPS, rng=2)
    assert (olh.aggregate(r, epsilon=EPS)[3] == 200)


def test_bins_of_chunks_give_the_same_result_as_all_reports() -> None:
    oracle = OUE(domain_size=13)  # padding bits in the last byte
    values = np.random.default_rng(8).integers(0, 13, 3000)
    reports = np.concatenate([oracle.perturb(values, epsilon=EPS, rng=9),
                              fake_reports(oracle, 4, 300, attack="mga", epsilon=EPS, rng=10)])
    whole = size_bins(oracle, reports)
    merged = size_bins(oracle, reports[:1000]) + size_bins(oracle, reports[1000:2500]) + size_bins(oracle, reports[2500:])
    np.testing.assert_array_equal(whole.counts, merged.counts)
    assert whole.n == reports.shape[0] == int(np.bincount(support_sizes(oracle, reports)).sum())
    total = sum(merged.support.values(), np.zeros(13, dtype=np.int64))
    np.testing.assert_array_equal(total, oracle.aggregate(reports))
    for method in ("none", "detect", "recover"):
        a = defend(oracle, reports, epsilon=EPS, method=method)
        b = defend_bins(oracle, merged, epsilon=EPS, method=method)
        np.testing.assert_allclose(a.estimate, b.estimate, rtol=1e-9, atol=1e-9)
        assert (a.suspected, a.n) == (b.suspected, pytest.approx(b.n))
    assert defend(oracle, reports, epsilon=EPS, method="none").estimate.tolist() == \
        oracle.estimate(reports, epsilon=EPS).tolist()


def test_bad_arguments_are_refused() -> None:
    oracle = OUE(domain_size=4)
    reports = oracle.perturb([0, 1], epsilon=EPS, rng=0)
    with pytest.raises(ParameterError, match="method"):
        defend(oracle, reports, epsilon=EPS, method="ignore")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="group_alpha"):
        defend(oracle, reports, epsilon=EPS, group_alpha=0.0)
    with pytest.raises(ParameterError, match="OLH"):
        support_size_pmf(OLH(domain_size=4), epsilon=EPS)
    with pytest.raises(ParameterError, match="attack"):
        fake_reports(oracle, 0, 3, attack="loud")
    res = defend(GRR(domain_size=4), GRR(domain_size=4).perturb([0, 1], epsilon=EPS, rng=0), epsilon=EPS)
    assert res.suspected == 0 and "enrollment" in res.note and res.to_dict()["group_p_value"] is None


# -- acceptance of benchmarks/poisoning.py at a smaller size -----------------------------------
D, N = 16, 2500


def _zipf(seed: int) -> np.ndarray:
    w = 1.0 / np.arange(1, D + 1) ** 1.1
    return np.random.default_rng(seed).choice(D, size=N, p=w / w.sum())


@pytest.mark.parametrize("name", ["OUE", "SUE"])
@pytest.mark.parametrize("attack", ["target", "mga"])
def test_recover_stops_target_only_and_mga_at_ten_percent(name, attack) -> None:
    oracle = OUE(domain_size=D) if name == "OUE" else SUE(domain_size=D)
    # standard error of one estimated frequency from N reports (the tolerance unit)
    se = math.sqrt(oracle.variance(N, epsilon=EPS)) / N
    for seed in range(3):
        values = _zipf(seed)
        truth = np.bincount(values, minlength=D) / N
        fakes = fake_reports(oracle, D - 1, N // 9, attack=attack, epsilon=EPS, rng=50 + seed)
        reports = np.concatenate([oracle.perturb(values, epsilon=EPS, rng=10 + seed), fakes])
        none = defend(oracle, reports, epsilon=EPS, method="none")
        rec = defend(oracle, reports, epsilon=EPS, method="recover")
        gain_none = none.estimate[D - 1] / none.n - truth[D - 1]
        gain_rec = rec.estimate[D - 1] / rec.n - truth[D - 1]
        # without a defense the fakes add ~0.1 * (1 - q) / (p - q): at least 5 standard errors
        assert gain_none > 5 * se, (gain_none, se)
        # recovered: the gain falls below half of it and the target is far from first
        assert gain_rec < 0.5 * gain_none and gain_rec < 6 * se, (gain_rec, gain_none, se)
        f = rec.estimate / rec.n
        assert f[D - 1] < np.sort(f)[-3]


@pytest.mark.parametrize("oracle", [OUE(domain_size=D), SUE(domain_size=D)], ids=["OUE", "SUE"])
def test_defenses_cost_at_most_five_percent_of_honest_mse(oracle) -> None:
    mse = {m: [] for m in ("none", "detect", "recover")}
    for seed in range(20):
        values = _zipf(100 + seed)
        truth = np.bincount(values, minlength=D) / N
        reports = oracle.perturb(values, epsilon=EPS, rng=200 + seed)
        for m in mse:
            res = defend(oracle, reports, epsilon=EPS, method=m)  # type: ignore[arg-type]
            mse[m].append(float(((res.estimate / res.n - truth) ** 2).sum()))
    base = np.mean(mse["none"])
    for m in ("detect", "recover"):
        assert np.mean(mse[m]) <= 1.05 * base, (m, np.mean(mse[m]), base)
