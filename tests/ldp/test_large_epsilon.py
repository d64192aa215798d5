"""Every oracle's randomiser, probabilities, realised epsilon and estimator agree at every epsilon
up to the accepted maximum (40), and the realised epsilon tracks the request (issue 12).

Only the public API is used, so the file can be run against any version of the package. Before
the dyadic thresholds the 32-bit grid capped the realised epsilon (GRR near ln(3 * 2**32) = 23.3
on 4 values, OUE at 22.2, OLH with few buckets likewise) and GRR's ``probabilities`` failed at 40.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privpub.ldp import GRR, OLH, OUE, SUE

EPSILONS = [0.5, 1.0, 4.0, 10.0, 20.0, 22.5, 23.3, 25.0, 30.0, 35.0, 36.8, 39.5, 40.0]
DOMAINS = [2, 3, 4, 1000, 2**20]


def _oracles(d: int) -> list:
    return [GRR(domain_size=d), OUE(domain_size=d), SUE(domain_size=d), OLH(domain_size=d), OLH(domain_size=d, g=2)]


@pytest.mark.parametrize("d", DOMAINS)
def test_realised_epsilon_is_at_most_and_tracks_the_request(d: int) -> None:
    for oracle in _oracles(d):
        for eps in EPSILONS:
            realised = oracle.effective_epsilon(eps)
            name = f"{oracle!r} at epsilon={eps}"
            assert realised <= eps, name
            # 32 significant bits: the small probability is off by at most 2**-31 relative
            assert realised >= eps - 4 * 2.0**-31, (name, realised)


@pytest.mark.parametrize("d", [2, 4, 1000])
def test_probabilities_are_the_realised_ones_at_large_epsilon(d: int) -> None:
    for eps in [23.3, 30.0, 36.8, 40.0]:
        p, q = GRR(domain_size=d).probabilities(eps)
        assert 0 < q < p <= 1 and math.isfinite(p / q)
        assert math.log(p / q) == pytest.approx(GRR(domain_size=d).effective_epsilon(eps), abs=1e-9)
        # q = (1 - p) / (d - 1): the randomiser's flips are spread over the d - 1 other values
        assert q * (d - 1) == pytest.approx(1 - p, rel=1e-6, abs=1e-15) or p == 1.0
        p_oue, q_oue = OUE(domain_size=d).probabilities(eps)
        assert p_oue == 0.5 and math.log(p_oue * (1 - q_oue) / ((1 - p_oue) * q_oue)) == pytest.approx(eps, abs=1e-8)


@pytest.mark.statistical
@pytest.mark.parametrize(("d", "eps"), [(2**40, 30.0), (2**45, 35.0), (2**50, 39.0)])
def test_grr_keep_rate_matches_probabilities_at_large_epsilon(d: int, eps: float) -> None:
    """A huge domain makes the flip rate observable at a large epsilon."""
    oracle = GRR(domain_size=d)
    p, _ = oracle.probabilities(eps)
    n = 400_000
    values = np.full(n, d // 3, dtype=np.int64)
    reports = oracle.perturb(values, epsilon=eps, rng=11)
    kept = np.count_nonzero(reports == values) / n
    assert abs(kept - p) < 5 * math.sqrt(p * (1 - p) / n), (kept, p)
    assert np.all((reports >= 0) & (reports < d))


@pytest.mark.statistical
@pytest.mark.parametrize("eps", [30.0, 40.0])
def test_simulate_and_perturb_agree_at_large_epsilon(eps: float) -> None:
    """At a large epsilon the reports are almost exact: estimates of both paths match the truth."""
    true = np.array([300, 0, 700, 1000])
    values = np.repeat(np.arange(4), true)
    for oracle in (GRR(domain_size=4), OUE(domain_size=4), SUE(domain_size=4), OLH(domain_size=4)):
        per_user = oracle.estimate(oracle.perturb(values, epsilon=eps, rng=3), epsilon=eps)
        simulated = oracle.simulate(true, epsilon=eps, rng=3)
        sd = np.sqrt([oracle.variance(true.sum(), epsilon=eps, frequency=c / true.sum()) for c in true])
        for est in (per_user, simulated):
            assert np.all(np.isfinite(est))
            assert np.all(np.abs(est - true) <= 5 * sd + 1e-9), (oracle, est)
