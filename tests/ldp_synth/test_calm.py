"""CALM (Zhang et al. CCS 2018): marginals under LDP, consistency, maximum entropy, privacy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from privpub import ParameterError, Session
from privpub.audit import audit_epsilon
from privpub.core import BudgetLedger, CategoricalAttribute, Schema
from privpub.ldp import OLH_PRIME
from privpub.ldp_synth import CALM, CALMRelease, calm_marginals, calm_reports, choose_oracle
from privpub.ldp_synth._calm import _make_consistent

SIZES = 4


def _chain(n: int, d: int, stay: float, rng: np.random.Generator) -> tuple[pd.DataFrame, Schema]:
    """A Markov chain a0 -> a1 -> ...: each attribute copies the previous one with prob. ``stay``."""
    cols = {"a0": rng.integers(0, SIZES, n)}
    for j in range(1, d):
        prev = cols[f"a{j - 1}"]
        cols[f"a{j}"] = np.where(rng.random(n) < stay, prev, rng.integers(0, SIZES, n))
    schema = Schema([CategoricalAttribute(k, [str(i) for i in range(SIZES)]) for k in cols])
    return pd.DataFrame({k: v.astype(str) for k, v in cols.items()}), schema


def _true(codes: np.ndarray, idx: tuple[int, ...]) -> np.ndarray:
    table = np.zeros((SIZES,) * len(idx))
    np.add.at(table, tuple(codes[:, i] for i in idx), 1)
    return table / codes.shape[0]


def test_marginals_cover_every_pair_and_ignore_the_data():
    for d, ell in [(5, 2), (6, 3), (7, 4), (4, 4)]:
        chosen = calm_marginals(d, ell, rng=1)
        covered = {p for m in chosen for p in itertools.combinations(m, 2)}
        assert covered == set(itertools.combinations(range(d), 2))
        assert all(len(m) == ell for m in chosen)
    with pytest.raises(ParameterError) as info:
        calm_marginals(3, 4)
    assert info.value.param == "marginal_size"


def test_oracle_choice_follows_the_variance_rule():
    assert type(choose_oracle(16, 2.0)).__name__ == "GRR"  # 16 < 3 e^2 + 2 = 24.2
    assert type(choose_oracle(16, 1.0)).__name__ == "OLH"  # 16 >= 3 e + 2 = 10.2


def test_release_ledger_and_tables():
    df, schema = _chain(30_000, 5, 0.6, np.random.default_rng(0))
    session = Session(total_epsilon=2.0)
    rel = CALM().publish(df, schema=schema, epsilon=1.0, rng=3, session=session)
    assert isinstance(rel, CALMRelease) and session.spent == pytest.approx(1.0)
    assert rel.ledger.total == pytest.approx(1.0)
    assert len({e.block for e in rel.ledger.entries}) == 1
    assert all(e.composition == "parallel" for e in rel.ledger.entries)
    assert sum(e.parts for e in rel.ledger.entries) == len(rel.marginals) == 10
    assert sum(rel.group_sizes) == 30_000
    for t in rel.tables:
        assert t.min() >= 0 and t.sum() == pytest.approx(1.0) and not t.flags.writeable
    again = CALM().publish(df, schema=schema, epsilon=1.0, rng=3)
    assert all(np.array_equal(a, b) for a, b in zip(rel.tables, again.tables))


def test_measured_marginals_within_their_noise():
    # per cell: oracle variance of a frequency plus the group's sampling variance (<= 1/4n_g); the mean
    # absolute error of a cell is at most its standard deviation, so AVD <= C sd / 2 (no tuning)
    n = 60_000
    df, schema = _chain(n, 4, 0.7, np.random.default_rng(1))
    codes = schema.encode(df)
    eps = 1.0
    rel = CALM(rounds=1).publish(df, schema=schema, epsilon=eps, rng=2)
    avd, bound = [], []
    for m, t, n_g in zip(rel.marginals, rel.tables, rel.group_sizes):
        oracle = choose_oracle(SIZES ** len(m), eps)
        sd = math.sqrt(oracle.variance(n_g, epsilon=eps) / n_g**2 + 0.25 / n_g)
        avd.append(0.5 * np.abs(t - _true(codes, m)).sum())
        bound.append(0.5 * t.size * sd)
    assert np.mean(avd) <= np.mean(bound)
    # and they carry the signal: far closer to the truth than independent uniform marginals
    uniform = np.mean([0.5 * np.abs(1 / 16 - _true(codes, m)).sum() for m in rel.marginals])
    assert np.mean(avd) < uniform / 2


def test_consistency_makes_shared_projections_agree():
    rng = np.random.default_rng(4)
    marginals = [(0, 1), (0, 2), (1, 2)]
    tables = [rng.random((3, 3)) for _ in marginals]
    tables = [t / t.sum() for t in tables]
    _make_consistent(tables, marginals, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(tables[0].sum(axis=1), tables[1].sum(axis=1), atol=1e-12)
    np.testing.assert_allclose(tables[0].sum(axis=0), tables[2].sum(axis=1), atol=1e-12)
    np.testing.assert_allclose(tables[1].sum(axis=0), tables[2].sum(axis=0), atol=1e-12)
    # the weighted mean leans to the low-variance marginal
    before = [rng.random((3, 3)) for _ in marginals]
    before = [t / t.sum() for t in before]
    after = [t.copy() for t in before]
    _make_consistent(after, marginals, [1e-6, 1.0, 1.0])
    np.testing.assert_allclose(after[0].sum(axis=1), before[0].sum(axis=1), atol=1e-5)


def test_maximum_entropy_recovers_a_markov_chain_from_its_pairs():
    # p(a, b, c) = p(a) p(b | a) p(c | b) is the maximum-entropy table with its pairwise marginals
    rng = np.random.default_rng(5)
    pa = rng.dirichlet(np.ones(3))
    pba = rng.dirichlet(np.ones(3), size=3)
    pcb = rng.dirichlet(np.ones(3), size=3)
    joint = pa[:, None, None] * pba[:, :, None] * pcb[None, :, :]
    marginals = ((0, 1), (1, 2))
    tables = (joint.sum(axis=2), joint.sum(axis=0))
    schema = Schema([CategoricalAttribute(c, ["0", "1", "2"]) for c in "abc"])
    rel = CALMRelease(ledger=BudgetLedger(1.0).freeze(), epsilon=1.0, method="calm", marginals=marginals,
                      tables=tables, schema=schema, columns=("a", "b", "c"), group_sizes=(1, 1))
    np.testing.assert_allclose(rel.marginal(["a", "b", "c"]), joint, atol=1e-7)
    # a pair no marginal holds is answered from the measured marginals restricted to it (as CALM does):
    # here only the one-way marginals of a and c, so the maximum-entropy answer is their product
    np.testing.assert_allclose(rel.marginal(["c", "a"]), np.outer(joint.sum(axis=(0, 1)), pa), atol=1e-12)
    np.testing.assert_allclose(rel.marginal("b"), joint.sum(axis=(0, 2)), atol=1e-12)
    with pytest.raises(ParameterError) as info:
        rel.marginal(["a", "z"])
    assert info.value.param == "attributes"


def test_synthetic_rows_follow_the_measured_dependence():
    df, schema = _chain(60_000, 4, 0.8, np.random.default_rng(6))
    rel = CALM().publish(df, schema=schema, epsilon=2.0, rng=7)
    syn = rel.sample(20_000, rng=8)
    assert list(syn.columns) == list(schema.names) and len(syn) == 20_000
    same = (syn["a0"] == syn["a1"]).mean()
    # truth: 0.8 + 0.2 / 4 = 0.85; independent attributes would give 0.25
    assert same > 0.6


def test_bad_input_names_the_parameter():
    df, schema = _chain(100, 3, 0.5, np.random.default_rng(0))
    for call, param in [
        (lambda: CALM(marginal_size=1), "marginal_size"),
        (lambda: CALM().publish(df.to_numpy(), schema=schema, epsilon=1.0), "data"),
        (lambda: CALM().publish(df, schema="x", epsilon=1.0), "schema"),
        (lambda: CALM().publish(df.head(2), schema=schema, epsilon=1.0), "data"),
    ]:
        with pytest.raises(ParameterError) as info:
            call()
        assert info.value.param == param


@pytest.mark.statistical
@pytest.mark.parametrize("eps", [0.5, 2.0])  # OLH on 16 joint values at 0.5, GRR at 2.0
def test_user_report_is_epsilon_ldp_and_a_leaky_one_is_flagged(eps):
    # one user's report for two attributes (one marginal): worst case, the user's values differ in both
    sizes = (SIZES, SIZES)

    def report(declared_factor: float):
        def mech(row, rng, n):
            codes = np.repeat(np.asarray([row]), n, axis=0)
            _, oracles, reps = calm_reports(codes, sizes, [(0, 1)], epsilon=eps * declared_factor, rng=rng)
            rep = reps[0]
            if type(oracles[0]).__name__ == "OLH":  # (a, b, y) -> "y is the bucket of joint value 0 / 15"
                a, b, y = rep[:, 0], rep[:, 1], rep[:, 2]
                g = oracles[0].buckets(eps * declared_factor)
                return np.stack([y == ((a * v + b) % OLH_PRIME) % g for v in (0, 15)], axis=1)
            return rep
        return mech

    x, y = (0, 0), (3, 3)
    ok = audit_epsilon(report(1.0), x, y, epsilon=eps, trials=60_000, batch=True, rng=11)
    assert ok.passed, str(ok)
    leaky = audit_epsilon(report(2.0), x, y, epsilon=eps, trials=60_000, batch=True, rng=12)
    assert not leaky.passed, str(leaky)


def test_n_marginals_caps_the_cover_without_looking_at_the_data():
    for d, ell, m in [(6, 2, 4), (8, 3, 5), (15, 3, 16)]:
        chosen = calm_marginals(d, ell, count=m, rng=2)
        assert len(chosen) == m and len(set(chosen)) == m and all(len(c) == ell for c in chosen)
        assert chosen == calm_marginals(d, ell, count=m, rng=2)
    # a count at or above the full cover is the full cover
    assert calm_marginals(5, 2, count=100, rng=0) == calm_marginals(5, 2)
    df, schema = _chain(20_000, 6, 0.6, np.random.default_rng(8))
    rel = CALM(marginal_size=3, n_marginals=3).publish(df, schema=schema, epsilon=1.0, rng=9)
    assert len(rel.marginals) == 3 and sum(rel.group_sizes) == 20_000
    assert rel.params["n_marginals"] == 3 and rel.ledger.total == pytest.approx(1.0)
    for bad in (0, -1, 2.5):
        with pytest.raises(ParameterError) as info:
            CALM(n_marginals=bad)
        assert info.value.param == "n_marginals"
