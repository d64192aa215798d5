"""Fuzzing the LDP frequency oracles (client and server side) and their post-processing."""

from __future__ import annotations

import numpy as np
import pytest
from fuzz_strategies import FUZZ, arrays, call, epsilons, has_non_finite, rngs, scalars
from hypothesis import given
from hypothesis import strategies as st

from privpub import ldp

ORACLES = pytest.mark.parametrize("cls", [ldp.GRR, ldp.SUE, ldp.OUE, ldp.OLH], ids=lambda c: c.__name__)
#: domain sizes: small valid ones and malformed values (no huge ints: (n, d) reports would be memory bombs)
DOMAIN = st.one_of(st.integers(-2, 9), scalars().filter(lambda v: not isinstance(v, int) or abs(v) < 1000))


def _oracle(cls, domain_size):
    return call(lambda: cls(domain_size=domain_size), known="ldp")


@ORACLES
@FUZZ
@given(domain_size=DOMAIN, values=arrays(), epsilon=epsilons(), rng=rngs())
def test_perturb_and_estimate(cls, domain_size, values, epsilon, rng) -> None:
    ok, oracle = _oracle(cls, domain_size)
    if not ok:
        return
    ok, reports = call(lambda: oracle.perturb(values, epsilon=epsilon, rng=rng), known="ldp")
    if not ok:
        return
    assert not has_non_finite(values)
    n = np.asarray(values).size
    assert oracle.n_reports(reports) == n  # one report per user, none dropped
    ok, est = call(lambda: oracle.estimate(reports, epsilon=epsilon), known="ldp")
    if ok:
        assert est.shape == (oracle.domain_size,) and np.all(np.isfinite(est))


@ORACLES
@FUZZ
@given(reports=arrays(), epsilon=epsilons())
def test_aggregate_malformed_reports(cls, reports, epsilon) -> None:
    oracle = cls(domain_size=4)
    ok, support = call(lambda: oracle.aggregate(reports, epsilon=epsilon), known="ldp")
    if ok:
        assert not has_non_finite(reports)
        assert support.shape == (4,) and np.all(support >= 0)


@ORACLES
@FUZZ
@given(counts=arrays(), epsilon=epsilons(), rng=rngs(), n=scalars(), frequency=scalars())
def test_simulate_and_variance(cls, counts, epsilon, rng, n, frequency) -> None:
    oracle = cls(domain_size=4)
    ok, est = call(lambda: oracle.simulate(counts, epsilon=epsilon, rng=rng), known="ldp")
    if ok:
        assert not has_non_finite(counts)
        assert est.shape == (4,) and np.all(np.isfinite(est))
    ok, var = call(lambda: oracle.variance(n, epsilon=epsilon, frequency=frequency), known="ldp")
    if ok:
        assert np.isfinite(var) and var >= 0
    ok, est = call(lambda: oracle.estimate_from_support(counts, 10, epsilon=epsilon), known="ldp")
    if ok:
        assert est.shape == (4,)


@pytest.mark.parametrize("which", ["norm_sub", "clip"])
@FUZZ
@given(estimates=arrays(), total=st.one_of(st.none(), scalars()))
def test_postprocessing(estimates, total, which) -> None:
    fn = ldp.norm_sub if which == "norm_sub" else ldp.clip_renormalise
    ok, out = call(lambda: fn(estimates, total), known="ldp")
    if ok:
        assert not has_non_finite(estimates)
        assert np.asarray(out).size == np.asarray(estimates).size
        assert np.all(np.asarray(out) >= 0)


@FUZZ
@given(value=scalars(), g=scalars())
def test_parameters(value, g) -> None:
    call(lambda: ldp.sue_epsilon(value), known="ldp")
    call(lambda: ldp.sue_flip_probability(value), known="ldp")
    call(lambda: ldp.SUE(domain_size=4, f=value), known="ldp")
    call(lambda: ldp.OLH(domain_size=4, g=g), known="ldp")
