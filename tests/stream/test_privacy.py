"""Privacy of the stream publishers as a whole (spec §9.3, §9.6).

* Noise calibration: answer variances and the per-item budget audit.
* Neighbour-ratio tests of every publisher through its public API: two neighbouring streams
  (item 1 differs by Δ = 1), many independent releases, and for every outcome (height 1) or for
  the sharpest events of the whole release (height 3: every node that holds item 1 on the same
  side of both means, where the likelihood ratio is largest), two-sided Clopper-Pearson bounds on
  the probability ratio. An outcome seen on one side only is never skipped: its bound is
  computed like any other and fails the test when the evidence is strong. Negative controls: the
  same tests reject publishers with half the noise and without noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from statutils import clopper_pearson

from privpub.core import TreeNoise
from privpub.stream import BT, BTH, HQRTP, HQRTPMM, RTP, RTPMM

N_REP = 20_000
ALPHA = 1e-6  # family-wise, Bonferroni over the outcomes / events of one check


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
        budget = pub.sensitivity / cfg.plan.scales[cfg.row]  # per node: Δ / scale actually used
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
            if m % 2 == 1 and cls in (RTPMM, HQRTPMM):
                # odd positions spend epsilon, less the per-node scales' rounding up to 7 significant bits
                # (exact noise, discrete or grid Laplace: at most 1/64 more noise per node)
                assert total >= 0.8 / (1 + 2**-6)
        # the ledger agrees: never more than epsilon, all of it here
        assert pub.ledger.total == pytest.approx(0.8, rel=1e-12)


def test_layout_and_budgets_do_not_depend_on_data():
    qs = np.array([(t, max(1, t - 40), t) for t in range(1, 3001)], dtype=np.int64)
    a = HQRTPMM(window=5000, epsilon=1.0, rng=0)
    b = HQRTPMM(window=5000, epsilon=1.0, rng=0)
    a.replay(np.zeros(3000, dtype=int), qs)
    b.replay(np.random.default_rng(1).integers(0, 100, 3000), qs)
    assert a.trees == b.trees


# -------------------------------------------------------------------------------------------------
# neighbour-ratio tests of the whole release
# -------------------------------------------------------------------------------------------------
def log_ratio_bound(k1: int, n1: int, k2: int, n2: int, alpha: float) -> float:
    """Lower confidence bound on max(log p1/p2, log p2/p1) from two-sided Clopper-Pearson intervals
    (each at level ``alpha``). An event seen on one side only gets a finite, possibly large bound."""
    lo1, hi1 = clopper_pearson(k1, n1, alpha)
    lo2, hi2 = clopper_pearson(k2, n2, alpha)
    best = -math.inf
    if lo1 > 0:
        best = max(best, math.log(lo1 / hi2))
    if lo2 > 0:
        best = max(best, math.log(lo2 / hi1))
    return best


def worst_outcome(out1: np.ndarray, out2: np.ndarray, alpha: float = ALPHA) -> float:
    """Largest lower bound of |log P[M(D1) = o] / P[M(D2) = o]| over EVERY outcome o seen on either side."""
    a = out1.reshape(out1.shape[0], -1)
    b = out2.reshape(out2.shape[0], -1)
    outcomes, inv = np.unique(np.concatenate([a, b]), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    c1 = np.bincount(inv[: a.shape[0]], minlength=outcomes.shape[0])
    c2 = np.bincount(inv[a.shape[0] :], minlength=outcomes.shape[0])
    each = alpha / outcomes.shape[0]
    return max(log_ratio_bound(int(x), a.shape[0], int(y), b.shape[0], each) for x, y in zip(c1, c2))


def worst_event(events1: list[np.ndarray], events2: list[np.ndarray], alpha: float = ALPHA) -> float:
    """As :func:`worst_outcome` for a family of events (boolean indicators per release)."""
    each = alpha / len(events1)
    return max(log_ratio_bound(int(e1.sum()), e1.size, int(e2.sum()), e2.size, each)
               for e1, e2 in zip(events1, events2))


def _release(make, pattern, n=N_REP):
    """``n`` independent releases of the whole publisher on the stream ``pattern``: the stream is
    ``pattern`` repeated, one tree per repeat (trees hold disjoint items and get independent
    noise), and the release of a repeat is its answers to all ranges [l, r] inside it."""
    T = len(pattern)
    pub = make(T * n)
    pub.extend(np.tile(np.asarray(pattern), n))
    ranges = [(lo, hi) for lo in range(1, T + 1) for hi in range(lo, T + 1)]
    starts = T * np.arange(n)[:, None]
    q = np.stack([(starts + lo).reshape(-1) for lo, _ in ranges], axis=1), \
        np.stack([(starts + hi).reshape(-1) for _, hi in ranges], axis=1)
    queries = np.stack([q[0].reshape(-1), q[1].reshape(-1)], axis=1)
    return pub.answer(queries, record=False).reshape(n, len(ranges)), ranges


# (factory, noise) of each publisher with trees (blocks) of 4 items; item 1 lies in 3 nodes
def _makers(eps, noise):
    common = {"epsilon": eps, "noise": noise}
    return {
        "RTP": lambda W, seed: RTP(window=W, rng=seed, height=3, **common),
        "HQRTP": lambda W, seed: HQRTP(window=W, rng=seed, height=3, **common),  # no length known yet
        "RTPMM": lambda W, seed: RTPMM(window=W, rng=seed, height=3, **common),
        "HQRTPMM": lambda W, seed: HQRTPMM(window=W, rng=seed, history=[150] * 5, **common),  # k*_MM = 3
        "BT": lambda W, seed: BT(window=W, rng=seed, height=3, **common),
    }


# nodes holding item 1, read from the answers: Fenwick nodes 1, 2, 4 = ranges (1,1), (1,2), (1,4);
# BT nodes (0,0), (1,0), (2,0) = the same ranges
_NODE_RANGES = [(1, 1), (1, 2), (1, 4)]
PATTERN_1 = [2, 1, 0, 3]
PATTERN_0 = [1, 1, 0, 3]  # item 1 smaller by 1


def _node_events(rel, ranges, true_hi, true_lo):
    """Events {every node holding item 1 >= its value on the higher stream + c} and
    {every such node <= its value on the lower stream - c}, c = 0, 1, 2: there the likelihood
    ratio of the two streams is exp(sum over those nodes of Δ / scale), its maximum."""
    cols = [ranges.index(r) for r in _NODE_RANGES]
    y = rel[:, cols]
    out = []
    for c in (0, 1, 2):
        out.append(np.all(y >= true_hi + c, axis=1))
        out.append(np.all(y <= true_lo - c, axis=1))
    return out


def _node_check(make, eps_test, seed):
    r1, ranges = _release(lambda W: make(W, seed), PATTERN_1)
    r0, _ = _release(lambda W: make(W, seed + 1), PATTERN_0)
    hi = np.array([sum(PATTERN_1[a - 1 : b]) for a, b in _NODE_RANGES])
    lo = np.array([sum(PATTERN_0[a - 1 : b]) for a, b in _NODE_RANGES])
    return worst_event(_node_events(r1, ranges, hi, lo), _node_events(r0, ranges, hi, lo)) - eps_test


@pytest.mark.statistical
@pytest.mark.parametrize("noise", ["discrete", "laplace"])
@pytest.mark.parametrize("name", ["RTP", "HQRTP", "RTPMM", "HQRTPMM", "BT"])
def test_whole_release_neighbour_ratio(name, noise):
    eps = 1.0
    make = _makers(eps, noise)[name]
    probe = make(1000, 0)
    probe.extend(PATTERN_1)
    assert probe.trees == [(1, 3)]
    # the true publisher: the worst event's ratio is at most e^eps (it equals e^eps for RTP / BT)
    assert _node_check(make, eps, 10) <= 0.0
    # negative control: half the noise (the same publisher at 2 eps) is caught
    assert _node_check(_makers(2 * eps, noise)[name], eps, 20) > 0.0


def _bth_events(rel, ranges):
    """Tail events of S = the least-squares answers (1,1) + (1,2) + (1,4), the fitted values of
    the nodes holding item 1. S is the direction of BTH's release in which item 1 is most
    exposed: it equals the raw sum of those nodes (the fit projects onto a space containing
    their indicator), so its tail ratio tends to e^eps."""
    S = rel[:, [ranges.index(r) for r in _NODE_RANGES]].sum(axis=1)
    hi, lo = 2 + 3 + 6, 1 + 2 + 5  # S without noise on the two streams
    out = []
    for c in (2.0, 4.0, 6.0):
        out += [S >= hi + c, S <= lo - c]
    return out


@pytest.mark.statistical
@pytest.mark.parametrize("noise", ["discrete", "laplace"])
def test_whole_release_neighbour_ratio_bth(noise):
    def check(eps_pub, seed):
        def make(W, s):
            return BTH(window=W, epsilon=eps_pub, rng=s, height=3, noise=noise)

        r1, ranges = _release(lambda W: make(W, seed), PATTERN_1, n=100_000)
        r0, _ = _release(lambda W: make(W, seed + 1), PATTERN_0, n=100_000)
        return worst_event(_bth_events(r1, ranges), _bth_events(r0, ranges)) - 1.0

    assert check(1.0, 30) <= 0.0
    assert check(2.0, 40) > 0.0  # half the noise is caught


@pytest.mark.statistical
@pytest.mark.parametrize("noise", ["discrete", "laplace"])
@pytest.mark.parametrize("cls", [RTP, HQRTP, RTPMM, HQRTPMM, BT, BTH])
def test_every_outcome_of_a_one_item_release(cls, noise):
    """Height 1 (one node per item): the whole release of a one-item stream, every outcome."""
    eps, n = 1.0, 100_000

    def release(e, x, seed):
        kw = {"history": [1] * 3} if cls in (HQRTP, HQRTPMM) else {"height": 1}
        pub = cls(window=n, epsilon=e, rng=seed, noise=noise, **kw)
        pub.extend(np.full(n, x))
        out = pub.answer(np.stack([np.arange(1, n + 1)] * 2, axis=1), record=False)
        return np.floor(out) if noise == "laplace" else out  # unit bins for continuous noise

    assert worst_outcome(release(eps, 1, 1), release(eps, 0, 2)) <= eps
    assert worst_outcome(release(2 * eps, 1, 3), release(2 * eps, 0, 4)) > eps  # half the noise


@pytest.mark.statistical
def test_noiseless_publishers_fail_the_checks(monkeypatch):
    """Negative control: outcomes that one neighbour makes impossible fail the checks."""
    monkeypatch.setattr(TreeNoise, "draw_one", lambda self, plan, node, row=0: 0)
    monkeypatch.setattr(TreeNoise, "draw", lambda self, plan, count, nodes=None, rows=None:
                        np.zeros(count, dtype=np.int64))
    n = 20_000
    for cls in (RTP, BT):
        a = cls(window=n, epsilon=1.0, rng=0, height=1)
        a.extend(np.ones(n, dtype=int))
        b = cls(window=n, epsilon=1.0, rng=1, height=1)
        b.extend(np.zeros(n, dtype=int))
        q = np.stack([np.arange(1, n + 1)] * 2, axis=1)
        assert worst_outcome(a.answer(q), b.answer(q)) > 5.0
    assert _node_check(_makers(1.0, "discrete")["RTP"], 1.0, 50) > 5.0
