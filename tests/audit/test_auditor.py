"""The auditor itself: valid bounds on mechanisms of known epsilon, power against leaks, input checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statutils import clopper_pearson

from privpub.audit import (
    AuditResult,
    audit_epsilon,
    clopper_pearson_bounds,
    exact_epsilon,
    output_probabilities,
)
from privpub.errors import DomainError, ParameterError
from privpub.ldp import GRR, OLH, OUE, SUE


def randomised_response(epsilon: float):
    """Binary randomised response (exactly epsilon-DP): keep the bit w.p. e^eps / (1 + e^eps)."""
    keep = math.exp(epsilon) / (1 + math.exp(epsilon))

    def mech(bit: int, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.where(rng.random(n) < keep, bit, 1 - bit)
    return mech


@pytest.mark.statistical
def test_bound_is_valid_and_tight_on_randomised_response() -> None:
    # exactly 1-DP: the 99% lower bound must stay below 1 (20 independent audits) and be tight
    bounds = [audit_epsilon(randomised_response(1.0), 0, 1, epsilon=1.0, trials=4_000, batch=True, rng=s).lower_bound
              for s in range(20)]
    assert max(bounds) <= 1.0
    big = audit_epsilon(randomised_response(1.0), 0, 1, epsilon=1.0, trials=200_000, batch=True, rng=0)
    assert 0.93 < big.lower_bound <= 1.0 and abs(big.estimate - 1.0) < 0.05
    assert big.output_kind == "exact"


@pytest.mark.statistical
def test_leaky_mechanism_is_flagged() -> None:
    # 1.5-DP randomised response declared as 1-DP, and a mechanism that publishes its input
    result = audit_epsilon(randomised_response(1.5), 0, 1, epsilon=1.0, trials=40_000, batch=True, rng=0)
    assert not result.passed and result.lower_bound > 1.2
    leak = audit_epsilon(lambda d, rng: d, "alice", "bob", epsilon=3.0, trials=1_000, rng=0)
    assert not leak.passed and leak.p == 1.0 and leak.q == 0.0


def test_identical_distributions_give_a_small_bound() -> None:
    result = audit_epsilon(lambda d, rng, n: rng.random(n), 0, 1, epsilon=0.1, trials=20_000, batch=True, rng=0)
    assert result.passed and result.lower_bound < 0.1


def test_scalar_vector_hashable_and_statistic_outputs() -> None:
    def noisy(d: float, rng: np.random.Generator) -> float:
        return d + rng.laplace(0.0, 1.0)
    res = audit_epsilon(noisy, 0.0, 1.0, epsilon=1.0, trials=2_000, rng=3)
    assert isinstance(res, AuditResult) and res.output_kind == "scalar" and res.passed

    def labels(d: int, rng: np.random.Generator) -> str:
        return "yes" if rng.random() < (0.7 if d else 0.3) else "no"
    res = audit_epsilon(labels, 0, 1, epsilon=2.0, trials=2_000, rng=3)
    assert res.output_kind == "exact" and ("'yes'" in res.event or "'no'" in res.event)

    def vec(d: list[float], rng: np.random.Generator, n: int) -> np.ndarray:
        return np.asarray(d) + rng.laplace(0.0, 2.0, size=(n, len(d)))
    res = audit_epsilon(vec, [0.0, 0.0, 5.0], [1.0, 1.0, 5.0], epsilon=1.0, trials=10_000, batch=True, rng=0)
    assert res.output_kind == "vector" and res.passed and res.lower_bound > 0.5

    res = audit_epsilon(vec, [0.0, 0.0], [1.0, 1.0], epsilon=1.0, trials=5_000, batch=True, rng=0,
                        statistic=lambda o: float(o.sum()))
    assert res.output_kind == "scalar" and res.passed


def test_same_seed_same_result() -> None:
    a = audit_epsilon(randomised_response(1.0), 0, 1, epsilon=1.0, trials=1_000, batch=True, rng=5)
    b = audit_epsilon(randomised_response(1.0), 0, 1, epsilon=1.0, trials=1_000, batch=True, rng=5)
    assert a == b
    assert "lower bound" in str(a)


def test_clopper_pearson_bounds_match_the_two_sided_interval() -> None:
    lo, hi = clopper_pearson_bounds(np.array([0, 7, 100]), 100, 0.005)
    ref = [clopper_pearson(k, 100, 0.01) for k in (0, 7, 100)]
    np.testing.assert_allclose(lo, [r[0] for r in ref])
    np.testing.assert_allclose(hi, [r[1] for r in ref])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"epsilon": 0.0, "trials": 1000}, "epsilon must be finite and > 0"),
    ({"epsilon": math.nan, "trials": 1000}, "epsilon must be finite"),
    ({"epsilon": 1.0, "trials": 10}, "trials must be an integer >= 100"),
    ({"epsilon": 1.0, "trials": 1000, "confidence": 1.0}, "confidence must be in"),
    ({"epsilon": 1.0, "trials": 1000, "selection": 0.0}, "selection must be in"),
    ({"epsilon": 1.0, "trials": 1000, "n_events": 0}, "n_events must be an integer >= 1"),
    ({"epsilon": 1.0, "trials": 100, "selection": 0.9}, "at least 50 estimation runs"),
])
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        audit_epsilon(randomised_response(1.0), 0, 1, batch=True, **kwargs)


def test_bad_mechanisms() -> None:
    with pytest.raises(ParameterError, match="mechanism must be callable"):
        audit_epsilon(42, 0, 1, epsilon=1.0, trials=200)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="must return 50 outputs"):
        audit_epsilon(lambda d, rng, n: np.zeros(3), 0, 1, epsilon=1.0, trials=200, batch=True)
    with pytest.raises(ParameterError, match="pass statistic="):
        audit_epsilon(lambda d, rng: str(rng.random()), 0, 1, epsilon=1.0, trials=2_000)


def test_exact_epsilon_of_every_oracle() -> None:
    for oracle in (GRR(domain_size=3), SUE(domain_size=3), OUE(domain_size=3), OLH(domain_size=3)):
        probs = output_probabilities(oracle, 1.5)
        np.testing.assert_allclose(probs.sum(axis=1), 1.0)
        assert exact_epsilon(probs) == pytest.approx(1.5, abs=1e-7)
        assert exact_epsilon(probs) <= 1.5 + 1e-12
        assert oracle.effective_epsilon(1.5) == pytest.approx(exact_epsilon(probs), abs=1e-9)


def test_exact_epsilon_edge_cases() -> None:
    assert exact_epsilon([[1.0, 0.0], [0.5, 0.5]]) == math.inf
    assert exact_epsilon([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]) == 0.0
    with pytest.raises(DomainError, match="rows summing to 1"):
        exact_epsilon([[0.5, 0.6], [0.5, 0.5]])
    with pytest.raises(ParameterError, match="at least 2 rows"):
        exact_epsilon([[1.0]])
    with pytest.raises(ParameterError, match="domain_size must be <= 16"):
        output_probabilities(OUE(domain_size=17), 1.0)
    with pytest.raises(ParameterError, match="oracle must be"):
        output_probabilities("GRR", 1.0)  # type: ignore[arg-type]
