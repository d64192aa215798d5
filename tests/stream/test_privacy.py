"""Noise calibration: answer variances, per-item budget audit and neighbour-ratio tests (§9.3, §9.6)."""

from __future__ import annotations

import numpy as np
import pytest

from privpub.stream import BTH, HQRTP, HQRTPMM, RTP, RTPMM

N_REP = 20_000


def _per_tree_answers(pub, T, offsets, at):
    """Answer the same relative range in each of N_REP consecutive trees (zero data)."""
    a, b = offsets
    starts = 1 + T * np.arange(N_REP - 2)
    qs = np.stack([starts + at - 1, starts + a - 1, starts + b - 1], axis=1)
    ans = pub.replay(np.zeros(T * N_REP, dtype=np.int64), qs)
    return ans, qs


@pytest.mark.statistical
@pytest.mark.parametrize(("offsets", "at"), [((2, 7), 7), ((6, 11), 11), ((1, 8), 8), ((3, 3), 8)])
def test_rtp_answer_variance_is_2h2_over_eps2_times_nodes(offsets, at):
    eps, h = 0.5, 4
    pub = RTP(window=64, epsilon=eps, rng=1, height=h, noise="laplace")
    ans, _ = _per_tree_answers(pub, 8, offsets, at)
    probe = RTP(window=64, epsilon=eps, rng=1, height=h, noise="laplace")
    probe.extend(np.zeros(at + 8, dtype=int))
    nodes = len(probe.support(offsets[0], offsets[1])[0])
    expected = 2 * h**2 / eps**2 * nodes
    assert probe.answer_variance(offsets[0], offsets[1]) == pytest.approx(expected)
    # 20k draws: the sample variance of Laplace sums is within 6% (> 3.5 standard errors)
    assert np.var(ans) == pytest.approx(expected, rel=0.06)
    assert np.mean(ans) == pytest.approx(0.0, abs=4 * np.sqrt(expected / ans.size))


@pytest.mark.statistical
def test_mm_and_bth_answer_variances():
    for pub, T, offsets, at in [
        (RTPMM(window=64, epsilon=1.0, rng=2, height=4, noise="laplace"), 8, (2, 7), 7),
        (RTPMM(window=64, epsilon=1.0, rng=3, height=4, noise="discrete"), 8, (3, 9), 9),
        (BTH(window=64, epsilon=1.0, rng=4, height=4, noise="laplace"), 8, (2, 7), 8),
        (BTH(window=64, epsilon=1.0, rng=5, height=4, noise="laplace"), 8, (2, 7), 7),  # open block
    ]:
        probe = type(pub)(window=64, epsilon=1.0, height=4, noise=pub.noise)
        probe.extend(np.zeros(at, dtype=int))
        expected = probe.answer_variance(*offsets)
        ans, _ = _per_tree_answers(pub, T, offsets, at)
        assert np.var(ans) == pytest.approx(expected, rel=0.06), type(pub).__name__


def _item_spend(pub):
    """Epsilon spent by every item: sum over the nodes containing it of sensitivity / scale."""
    starts, cfgs = pub._trees.overlapping(1, pub.t)
    spends = []
    for s, cfg in zip(starts, cfgs):
        T = cfg.T
        budget = pub.sensitivity * cfg.eps / cfg.sens  # per node: Δ / scale
        for m in range(1, T + 1):
            if s + m - 1 > pub.t:
                break
            total, v = 0.0, m
            while v <= T:
                total += budget[v - 1]
                v += v & -v
            spends.append((m, T, total))
    return spends


@pytest.mark.parametrize("noise", ["laplace", "discrete"])
def test_privacy_audit_every_item_spends_at_most_epsilon(noise):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 5, size=6000)
    lengths_q = np.concatenate([rng.integers(1, 50, 2000), rng.integers(100, 2000, 4000)])
    qs = np.array([(t, t - L + 1, t) for t, L in zip(range(1, 6001), lengths_q) if L <= t], dtype=np.int64)
    for cls in (HQRTP, HQRTPMM, RTP, RTPMM):
        pub = cls(window=10_000, epsilon=0.8, rng=1, noise=noise, sensitivity=2.0)
        pub.replay(data, qs)
        spends = _item_spend(pub)
        assert len({T for _, T, _ in spends}) >= (2 if cls in (HQRTP, HQRTPMM) else 1)
        for m, _size, total in spends:
            assert total <= 0.8 * (1 + 1e-12)
            if m == 1 and cls in (RTP, HQRTP):
                assert total == pytest.approx(0.8)  # item 1 of a tree meets every level
            if m % 2 == 1 and cls in (RTPMM, HQRTPMM) and noise == "laplace":
                assert total == pytest.approx(0.8)  # odd positions spend exactly epsilon


def test_layout_and_budgets_do_not_depend_on_data():
    qs = np.array([(t, max(1, t - 40), t) for t in range(1, 3001)], dtype=np.int64)
    a = HQRTPMM(window=5000, epsilon=1.0, rng=0)
    b = HQRTPMM(window=5000, epsilon=1.0, rng=0)
    a.replay(np.zeros(3000, dtype=int), qs)
    b.replay(np.random.default_rng(1).integers(0, 100, 3000), qs)
    assert a.trees == b.trees


def _ratio_check(x, y, bound):
    """Max over well-populated outcomes of P[x = v] / P[y = v] compared with e^bound (3-sigma slack)."""
    vals = np.union1d(np.unique(x), np.unique(y))
    worst = 0.0
    for v in vals:
        cx, cy = np.sum(x == v), np.sum(y == v)
        if min(cx, cy) < 2000:
            continue
        slack = 3 * np.sqrt(1 / cx + 1 / cy)
        worst = max(worst, abs(np.log(cx / cy)) - slack)
    return worst <= bound


def _releases(make, data4, seed, n=200_000, answer=(1, 4)):
    pub = make(seed)
    T = 4 if answer != (1, 1) else 1
    starts = 1 + T * np.arange(n)
    qs = np.stack([starts + T - 1, starts + answer[0] - 1, starts + answer[1] - 1], axis=1)
    return pub.replay(np.tile(np.asarray(data4), n), qs)


@pytest.mark.statistical
def test_neighbour_ratio_per_item_height_one():
    # HQ_RTP with short predicted queries publishes every item with discrete Lap(1/eps): ratio e^eps
    eps = 0.5

    def make(e):
        return lambda seed: HQRTP(window=8, epsilon=e, rng=seed, history=[1])

    x = _releases(make(eps), [3], 1, answer=(1, 1))
    y = _releases(make(eps), [4], 2, answer=(1, 1))
    assert _ratio_check(x, y, eps)
    # the same test fails when the noise is halved (scale 1/(2 eps))
    x_half = _releases(make(2 * eps), [3], 3, answer=(1, 1))
    y_half = _releases(make(2 * eps), [4], 4, answer=(1, 1))
    assert not _ratio_check(x_half, y_half, eps)


@pytest.mark.statistical
def test_neighbour_ratio_root_of_height_three_tree():
    # a 4-item stream and its neighbour (item 1 changes by 1): the root answer's noise is Lap(3/eps);
    # the answer's own privacy loss is eps/3 (the other eps*2/3 sits in nodes 1 and 2)
    eps = 1.5

    def make(e):
        return lambda seed: RTP(window=8, epsilon=e, height=3, rng=seed)

    x = _releases(make(eps), [2, 0, 1, 5], 5)
    y = _releases(make(eps), [3, 0, 1, 5], 6)
    assert _ratio_check(x, y, eps / 3)
    x_half = _releases(make(2 * eps), [2, 0, 1, 5], 7)
    y_half = _releases(make(2 * eps), [3, 0, 1, 5], 8)
    assert not _ratio_check(x_half, y_half, eps / 3)
