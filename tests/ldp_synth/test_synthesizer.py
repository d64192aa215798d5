"""The publisher: API shape, ledger, deployment path, bad input, end-to-end utility (spec 7.10-7.12)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from privpub.core import CategoricalAttribute, Schema
from privpub.errors import DomainError, ParameterError
from privpub.ldp_synth import (
    EmpiricalJoints,
    LDPBayesSynthesizer,
    ReportStore,
    edge_accuracy,
    epsilon_from_f,
    i_sum,
    marginal_errors,
    sample_independent,
    simulate_clients,
)

from .conftest import chain_codes


def _table(n: int = 4000, seed: int = 0) -> tuple[pd.DataFrame, Schema]:
    gen = np.random.default_rng(seed)
    x = chain_codes(n, 4, keep=0.85, k=3, seed=seed)
    sex = np.where(gen.random(n) < 0.8, x[:, 0] % 2, gen.integers(2, size=n))
    cats = ["lo", "mid", "hi"]
    df = pd.DataFrame({f"c{j}": np.asarray(cats, dtype=object)[x[:, j]] for j in range(4)})
    df["sex"] = np.where(sex == 0, "F", "M")
    schema = Schema([CategoricalAttribute(f"c{j}", cats) for j in range(4)]
                    + [CategoricalAttribute("sex", ["F", "M"])])
    return df, schema


def test_publish_api_and_ledger() -> None:
    df, schema = _table()
    release = LDPBayesSynthesizer(degree=2).publish(df, schema=schema, flip_prob=0.2, rng=0)
    assert math.isclose(release.epsilon, epsilon_from_f(0.2, 5), rel_tol=1e-15)
    assert release.ledger.total == release.epsilon and release.ledger.frozen
    assert math.isclose(release.epsilon_attribute * 5, release.epsilon, rel_tol=1e-12)
    net = release.network
    assert isinstance(net, list) and len(net) == 5
    assert all(isinstance(a, str) and isinstance(p, tuple) for a, p in net)
    assert [len(p) for _, p in net] == [0, 1, 2, 2, 2]
    syn = release.sample(rng=1)
    assert list(syn.columns) == list(df.columns) and len(syn) == len(df)
    for col in df.columns:
        assert set(syn[col]) <= set(schema[col].categories)
    pd.testing.assert_frame_equal(syn, release.sample(rng=1))  # determinism
    assert release.sample(10, rng=0).shape == (10, 5)
    with pytest.raises(ValueError, match="read-only"):
        release.tables[1][0, 0] = 1.0


def test_epsilon_and_flip_prob_are_equivalent() -> None:
    df, schema = _table(1500)
    eps = epsilon_from_f(0.4, 5)
    a = LDPBayesSynthesizer(degree=1).publish(df, schema=schema, epsilon=eps, rng=3)
    b = LDPBayesSynthesizer(degree=1).publish(df, schema=schema, flip_prob=0.4, rng=3)
    assert math.isclose(a.flip_prob, 0.4, rel_tol=1e-12)
    assert a.structure == b.structure and a.ledger.total == a.epsilon == eps


def test_fit_reports_deployment_path_matches_publish() -> None:
    df, schema = _table(3000, seed=2)
    gen = np.random.default_rng(5)
    reports = simulate_clients(df, schema, flip_prob=0.3, rng=gen)
    synth = LDPBayesSynthesizer(degree=2)
    from_publish = synth.publish(df, schema=schema, flip_prob=0.3, rng=5)
    from_reports = synth.fit_reports(reports, schema=schema)
    from_array = synth.fit_reports(np.asarray(reports.bits, dtype=np.uint8), schema=schema, flip_prob=0.3)
    assert from_publish.structure == from_reports.structure == from_array.structure
    for t1, t2 in zip(from_publish.tables, from_reports.tables):
        np.testing.assert_array_equal(t1, t2)
    assert from_array.ledger.total == from_array.epsilon


def test_bad_input_errors() -> None:
    df, schema = _table(200)
    synth = LDPBayesSynthesizer(degree=2)
    bad = df.copy()
    bad.loc[3, "c1"] = "huge"
    with pytest.raises(DomainError, match=re.escape("column 'c1' has values outside its declared categories")):
        synth.publish(bad, schema=schema, flip_prob=0.5)
    extra = df.assign(zip_code="12345")
    with pytest.raises(DomainError, match="columns without a declared domain: \\['zip_code'\\]"):
        synth.publish(extra, schema=schema, flip_prob=0.5)
    for f in (0.0, 1.0, 1.2, -0.3):
        with pytest.raises(ParameterError, match=re.escape(f"flip_prob must be in (0, 1), got {float(f)}")):
            synth.publish(df, schema=schema, flip_prob=f)
    with pytest.raises(ParameterError, match="degree must be an integer >= 1, got 0"):
        LDPBayesSynthesizer(degree=0)
    with pytest.raises(ParameterError, match=re.escape("degree (max parents k) must be in [1, 4]")):
        LDPBayesSynthesizer(degree=5).publish(df, schema=schema, flip_prob=0.5)
    with pytest.raises(ParameterError, match=re.escape("reports must have shape (n_users, 14)")):
        synth.fit_reports(np.zeros((10, 13), dtype=bool), schema=schema, flip_prob=0.5)
    with pytest.raises(ParameterError, match="give exactly one of epsilon"):
        synth.fit_reports(np.zeros((10, 14), dtype=bool), schema=schema)
    with pytest.raises(ParameterError, match="method must be one of"):
        LDPBayesSynthesizer(method="magic")
    with pytest.raises(ParameterError, match="epsilon must be finite and > 0"):
        synth.publish(df, schema=schema, epsilon=-1.0)
    reports = simulate_clients(df, schema, flip_prob=0.5, rng=0)
    with pytest.raises(ParameterError, match="disagrees"):
        synth.fit_reports(reports, schema=schema, flip_prob=0.4)


def _end_to_end_codes(n: int, seed: int) -> np.ndarray:
    """d = 8 correlated attributes (a tree with strong edges), sizes 2 and 3."""
    gen = np.random.default_rng(seed)
    sizes = (2, 3, 2, 3, 2, 2, 3, 2)
    parent = (-1, 0, 1, 1, 0, 4, 3, 6)
    x = np.zeros((n, 8), dtype=np.int64)
    for j, s in enumerate(sizes):
        noise = gen.integers(s, size=n)
        x[:, j] = noise if parent[j] < 0 else np.where(gen.random(n) < 0.8, x[:, parent[j]] % s, noise)
    return x


@pytest.mark.statistical
def test_end_to_end_utility_grows_worse_with_f() -> None:
    sizes = (2, 3, 2, 3, 2, 2, 3, 2)
    schema = Schema([CategoricalAttribute(f"a{j}", [str(v) for v in range(s)]) for j, s in enumerate(sizes)])
    avd2: dict[float, list[float]] = {0.1: [], 0.5: [], 0.9: []}
    for seed in range(3):
        x = _end_to_end_codes(20_000, seed)
        df = schema.decode(x)
        for f in avd2:
            rel = LDPBayesSynthesizer(degree=2, max_iter=300).publish(df, schema=schema, flip_prob=f, rng=seed)
            avd2[f].append(marginal_errors(x, rel.sample_codes(rng=seed), sizes, 2)[0])
    means = {f: float(np.mean(v)) for f, v in avd2.items()}
    assert max(avd2[0.1]) < 0.03
    assert means[0.9] > means[0.5] > means[0.1]


def test_baselines_and_metrics() -> None:
    x = _end_to_end_codes(5000, 0)
    sizes = (2, 3, 2, 3, 2, 2, 3, 2)
    exact = EmpiricalJoints(x, sizes)
    from privpub.ldp_synth import build_network, perturb_codes

    ref = build_network(exact, 2)
    assert edge_accuracy(ref, ref) == 1.0
    avd_self, kl_self = marginal_errors(x, x, sizes, 3)
    assert avd_self == 0.0 and 0.0 <= kl_self < 1e-3  # KL > 0 only through the 0.5 pseudo-counts
    avd, kl = marginal_errors(x, x[::-1], sizes, 2)
    assert avd == 0.0 and kl >= 0.0
    store = ReportStore(perturb_codes(x, sizes, flip_prob=0.1, rng=0))
    ind = sample_independent(store, 5000, rng=0)
    net = build_network(store, 2)
    from privpub.ldp_synth import conditional_tables, sample_synthetic

    bn = sample_synthetic(net, conditional_tables(store, net), sizes, 5000, rng=0)
    # the independent baseline loses the correlations: higher 2-way error, lower I_sum
    assert marginal_errors(x, ind, sizes, 2)[0] > marginal_errors(x, bn, sizes, 2)[0]
    assert i_sum(EmpiricalJoints(ind, sizes), net) < i_sum(EmpiricalJoints(bn, sizes), net)
    avd_r, kl_r = marginal_errors(x, ind, sizes, 2)
    assert 0 <= avd_r <= 1 and kl_r >= 0


def test_ledger_is_made_by_the_clients_randomisers_and_sessions_are_charged() -> None:
    from privpub import Session
    from privpub.errors import BudgetExceededError

    df, schema = _table(800)
    session = Session(total_epsilon=epsilon_from_f(0.3, 5) * 1.5)
    release = LDPBayesSynthesizer(degree=1).publish(df, schema=schema, flip_prob=0.3, rng=0, session=session)
    # one SUE charge per attribute block, made by the randomiser as it flipped the bits
    assert [(e.mechanism, e.step) for e in release.ledger] == [("SUE", "local perturbation")] * 5
    assert all(math.isclose(e.epsilon, epsilon_from_f(0.3, 1), rel_tol=1e-12) for e in release.ledger)
    assert [e.note.split(":")[0] for e in release.ledger] == list(schema.names)
    assert math.isclose(session.spent, release.epsilon, rel_tol=1e-12)
    gen = np.random.default_rng(9)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError, match="the session cannot pay"):
        LDPBayesSynthesizer(degree=1).publish(df, schema=schema, flip_prob=0.3, rng=gen, session=session)
    assert gen.bit_generator.state == state
