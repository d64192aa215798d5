"""Local-DP guarantees of the spatial clients: exact (enumerated) and empirical output ratios."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privpub.ldp import OUE, SUE
from privpub.spatial import KDGHT, synthetic_checkin
from privpub.spatial._collect import client_reports

BOX = (0.0, 0.0, 1.0, 1.0)


def _report_prob(cell: int, z: tuple[int, ...], p: float, q: float) -> float:
    out = 1.0
    for k, bit in enumerate(z):
        pk = p if k == cell else q
        out *= pk if bit else 1.0 - pk
    return out


def _max_ratio(dists: np.ndarray) -> float:
    """Worst ratio Pr[z | v] / Pr[z | v'] over all outputs z and input pairs (rows of dists)."""
    return float(max((dists[a] / dists[b]).max() for a in range(len(dists)) for b in range(len(dists))))


@pytest.mark.parametrize("oracle_cls", [OUE, SUE])
def test_exact_ratio_tiny_tree(oracle_cls) -> None:
    """The leaf report of a user on a tiny published tree: enumerate all 2^d outputs."""
    eps = 0.7
    pts = synthetic_checkin(4000, rng=0)
    rel = KDGHT(m=2, n=2, h=1, theta=1.0).publish(pts, bounds=BOX, epsilon=eps, rng=0)
    d = rel.levels[0].size  # users of group U^0 report over the KDG leaves
    assert 1 <= d <= 4
    d = max(d, 2)
    p, q = oracle_cls(domain_size=d).probabilities(eps)
    outs = list(itertools.product((0, 1), repeat=d))
    dists = np.array([[_report_prob(v, z, p, q) for z in outs] for v in range(d)])
    np.testing.assert_allclose(dists.sum(axis=1), 1.0)
    ratio = _max_ratio(dists)
    assert ratio <= math.exp(eps) * (1 + 1e-12)
    assert ratio >= math.exp(eps) * (1 - 1e-6)  # the bound is attained (up to 2^-32 quantisation)


def test_exact_ratio_kdg_budget_mode_two_half_reports() -> None:
    """In kdg_split='budget' a U' user sends x and y reports at eps/2 each: still eps in total."""
    eps = 0.9
    p, q = OUE(domain_size=2).probabilities(eps / 2)
    outs = list(itertools.product((0, 1), repeat=4))
    dists = np.array([[_report_prob(vx, z[:2], p, q) * _report_prob(vy, z[2:], p, q) for z in outs]
                      for vx in range(2) for vy in range(2)])
    ratio = _max_ratio(dists)
    assert ratio <= math.exp(eps) * (1 + 1e-12)
    assert ratio >= math.exp(eps) * (1 - 1e-6)


def _empirical_ratio(reports_by_input: list[np.ndarray], min_hits: int = 1000) -> float:
    codes = [r.astype(np.int64) @ (1 << np.arange(r.shape[1])) for r in reports_by_input]
    size = 1 << reports_by_input[0].shape[1]
    hist = np.array([np.bincount(c, minlength=size) for c in codes], dtype=np.float64)
    worst = 0.0
    for a in range(len(hist)):
        for b in range(len(hist)):
            ok = (hist[a] >= min_hits) & (hist[b] >= min_hits)
            if ok.any():
                worst = max(worst, float((hist[a][ok] / hist[b][ok]).max()))
    return worst


@pytest.mark.statistical
def test_empirical_ratio_client_and_broken_client_fails() -> None:
    eps = math.log(3)
    gen = np.random.default_rng(0)
    n = 200_000
    reports = [client_reports(np.full(n, v), 3, epsilon=eps, rng=gen) for v in range(3)]
    assert _empirical_ratio(reports) <= math.exp(eps) * 1.15
    # the paper's KDG client: x and y reports at eps each (2 eps in total) must fail the check
    broken = []
    for vx, vy in ((0, 0), (1, 1)):
        zx = client_reports(np.full(n, vx), 2, epsilon=eps, rng=gen)
        zy = client_reports(np.full(n, vy), 2, epsilon=eps, rng=gen)
        broken.append(np.hstack([zx, zy]))
    assert _empirical_ratio(broken) > math.exp(eps) * 1.15
    # and the fixed budget-mode client (eps/2 per axis) passes
    fixed = []
    for vx, vy in ((0, 0), (1, 1)):
        zx = client_reports(np.full(n, vx), 2, epsilon=eps / 2, rng=gen)
        zy = client_reports(np.full(n, vy), 2, epsilon=eps / 2, rng=gen)
        fixed.append(np.hstack([zx, zy]))
    assert _empirical_ratio(fixed) <= math.exp(eps) * 1.15
