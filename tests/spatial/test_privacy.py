"""Local-DP guarantees of the spatial publishers, tested on the release as a user gets it.

Each publisher is run through ``publish`` on two neighbouring point sets that differ in one
user's location, on a tiny domain, many times. The output event is the whole release (leaves,
values, per-level noisy estimates, the KDG marginals in ``params``); for every output seen we
bound ``P_D[o] / P_D'[o]`` from below with two-sided Clopper-Pearson intervals (both
directions). The bound must not exceed ``e^eps``. An output seen under one input and never
under the other gives a large lower bound and FAILS the test (it is not skipped). The negative
control runs the same publisher at ``2 eps`` (half the noise) and requires the test to detect
it. With the other users at the moving user's first location, the moving user's report is
informative whatever group it is drawn into, so the mixture over roles keeps its power.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from statutils import ratio_lower_bound

from privpub.ldp import OUE
from privpub.spatial import AHEAD, GTR, HDG, KDGHT, RapporGrid, SpatialRelease, UniformGrid
from privpub.spatial._collect import client_reports

pytestmark = pytest.mark.statistical

BOX = (0.0, 0.0, 1.0, 1.0)
EPS = 2.0
ALPHA = 1e-6  # per output and side: with <= 2000 outputs a false alarm has probability < 1e-2
A, A_PRIME = [0.25, 0.25], [0.75, 0.75]  # differ in the x and the y cell of every grid used below


def _release_key(rel: SpatialRelease) -> bytes:
    parts = [rel.x0, rel.x1, rel.y0, rel.y1, np.round(rel.values, 9)]
    parts += [np.round(level.noisy, 9) for level in rel.levels]
    for axis in ("blocks_x", "blocks_y"):  # KDG-HT publishes its noisy marginals
        parts += [np.round(np.asarray((rel.params or {}).get(axis, []), dtype=np.float64).ravel(), 9)]
    return b"|".join(np.ascontiguousarray(p, dtype=np.float64).tobytes() for p in parts)


def _frequencies(pub: Any, points: np.ndarray, eps: float, runs: int, seed: int, mode: str) -> dict[bytes, int]:
    gen = np.random.default_rng(seed)
    out: dict[bytes, int] = {}
    for _ in range(runs):
        k = _release_key(pub.publish(points, bounds=BOX, epsilon=eps, rng=gen, mode=mode))
        out[k] = out.get(k, 0) + 1
    return out


def _max_ratio_lower_bound(p: dict[bytes, int], q: dict[bytes, int], runs: int) -> float:
    """Largest lower confidence bound of P_D[o] / P_D'[o] over all outputs seen, both directions."""
    best = 0.0
    for k in set(p) | set(q):
        a, b = p.get(k, 0), q.get(k, 0)
        best = max(best, ratio_lower_bound(a, runs, b, runs, ALPHA), ratio_lower_bound(b, runs, a, runs, ALPHA))
    return best


def test_an_output_impossible_on_one_side_fails() -> None:
    """The check itself: 200 hits against none is evidence of an infinite ratio, not a skip."""
    assert _max_ratio_lower_bound({b"o": 200, b"p": 2800}, {b"p": 3000}, 3000) > math.exp(EPS)
    assert _max_ratio_lower_bound({b"o": 1500, b"p": 1500}, {b"o": 1400, b"p": 1600}, 3000) < 1.2


def _points(n_others: int, first: list[float]) -> np.ndarray:
    return np.array([first] + [A] * n_others)


CASES = [
    # (id, publisher, other users, runs, mode)
    ("ug", UniformGrid(g=2), 0, 1000, "simulate"),
    ("ug-per-user", UniformGrid(g=2), 0, 1000, "per_user"),
    ("rappor", RapporGrid(g=2), 0, 1000, "simulate"),
    ("gtr", GTR(height=2), 1, 2000, "simulate"),
    ("hdg", HDG(g1=2, g2=2, iterations=3), 2, 3000, "simulate"),
    ("ahead", AHEAD(height=2, theta=1e-9), 1, 2000, "simulate"),
    # eta close to 1: the sample U' (x and y marginals) is drawn nearly always, the rest is the tree
    ("kdght", KDGHT(m=2, n=2, h=1, theta=1e-9, eta=0.99), 2, 3000, "simulate"),
    ("kdght-per-user", KDGHT(m=2, n=2, h=1, theta=1e-9, eta=0.99), 2, 2500, "per_user"),
    ("kdght-budget", KDGHT(m=2, n=2, h=1, theta=1e-9, eta=0.99, kdg_split="budget"), 1, 3500, "simulate"),
]


@pytest.mark.parametrize(("pub", "others", "runs", "mode"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_whole_release_is_eps_ldp_and_the_test_detects_half_the_noise(pub, others, runs, mode) -> None:
    d, d_prime = _points(others, A), _points(others, A_PRIME)
    p = _frequencies(pub, d, EPS, runs, seed=1, mode=mode)
    q = _frequencies(pub, d_prime, EPS, runs, seed=2, mode=mode)
    assert len(p) >= 4  # several outputs are compared
    assert _max_ratio_lower_bound(p, q, runs) <= math.exp(EPS)
    # negative control: the same publisher at 2 eps must be caught by the same check
    p2 = _frequencies(pub, d, 2 * EPS, runs, seed=3, mode=mode)
    q2 = _frequencies(pub, d_prime, 2 * EPS, runs, seed=4, mode=mode)
    assert _max_ratio_lower_bound(p2, q2, runs) > math.exp(EPS)


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


def _bits(cells: np.ndarray, d: int, eps: float, gen: np.random.Generator) -> np.ndarray:
    packed = client_reports(cells, d, epsilon=eps, rng=gen, packed=True)
    return np.unpackbits(packed, axis=1, bitorder="little")[:, :d].astype(bool)


def test_client_reports_packed_and_bool_are_the_same_bits() -> None:
    packed = client_reports(np.array([0, 2, 2]), 3, epsilon=1.0, rng=np.random.default_rng(1), packed=True)
    bits = client_reports(np.array([0, 2, 2]), 3, epsilon=1.0, rng=np.random.default_rng(1))
    assert packed.dtype == np.uint8 and packed.shape == (3, 1) and bits.dtype == bool
    np.testing.assert_array_equal(np.unpackbits(packed, axis=1, bitorder="little")[:, :3].astype(bool), bits)
    np.testing.assert_array_equal(OUE(domain_size=3).aggregate(packed), OUE(domain_size=3).aggregate(bits))


def test_empirical_ratio_client_and_broken_client_fails() -> None:
    eps = math.log(3)
    gen = np.random.default_rng(0)
    n = 200_000
    reports = [_bits(np.full(n, v), 3, eps, gen) for v in range(3)]
    assert _empirical_ratio(reports) <= math.exp(eps) * 1.15
    # the paper's KDG client: x and y reports at eps each (2 eps in total) must fail the check
    broken = []
    for vx, vy in ((0, 0), (1, 1)):
        broken.append(np.hstack([_bits(np.full(n, vx), 2, eps, gen), _bits(np.full(n, vy), 2, eps, gen)]))
    assert _empirical_ratio(broken) > math.exp(eps) * 1.15
    # and the fixed budget-mode client (eps/2 per axis) passes
    fixed = []
    for vx, vy in ((0, 0), (1, 1)):
        fixed.append(np.hstack([_bits(np.full(n, vx), 2, eps / 2, gen), _bits(np.full(n, vy), 2, eps / 2, gen)]))
    assert _empirical_ratio(fixed) <= math.exp(eps) * 1.15
