"""Mutual information, network construction (Alg. 3 / Alg. 4) and sampling (spec 7.7-7.9)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree

from privpub.errors import ParameterError
from privpub.ldp_synth import (
    EmpiricalJoints,
    ReportStore,
    build_network,
    conditional_tables,
    edges,
    perturb_codes,
    sample_synthetic,
)
from privpub.ldp_synth._kernels import entropy, mutual_information

from .conftest import chain_codes


def _random_codes(n: int, sizes: tuple[int, ...], seed: int) -> np.ndarray:
    """Correlated random data: each column mixes a copy of an earlier column with noise."""
    gen = np.random.default_rng(seed)
    x = np.zeros((n, len(sizes)), dtype=np.int64)
    for j, s in enumerate(sizes):
        noise = gen.integers(s, size=n)
        if j == 0:
            x[:, j] = noise
            continue
        src = gen.integers(j)
        keep = gen.random(n) < gen.uniform(0.2, 0.9)
        x[:, j] = np.where(keep, x[:, src] % s, noise)
    return x


def test_mutual_information_identities() -> None:
    px, py = np.array([0.2, 0.8]), np.array([0.1, 0.3, 0.6])
    assert mutual_information(np.outer(px, py)) == 0.0
    copy = np.diag([0.2, 0.3, 0.5])
    assert math.isclose(mutual_information(copy), entropy(np.array([0.2, 0.3, 0.5])), rel_tol=1e-12)
    j = np.random.default_rng(0).dirichlet(np.ones(12)).reshape(3, 2, 2)
    eq6 = entropy(j.sum(axis=(1, 2))) + entropy(j.sum(axis=0)) - entropy(j)
    assert math.isclose(mutual_information(j), eq6, rel_tol=1e-10)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_parent_set_sizes_and_order(k: int) -> None:
    sizes = (2, 3, 2, 2, 3, 2)
    net = build_network(EmpiricalJoints(_random_codes(3000, sizes, 0), sizes), k)
    assert sorted(c for c, _ in net) == list(range(len(sizes)))
    placed: set[int] = set()
    for i, (child, parents) in enumerate(net):
        assert len(parents) == min(k, i)
        assert set(parents) <= placed
        placed.add(child)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_equals_exhaustive(k: int, seed: int) -> None:
    sizes = (2, 3, 2, 4, 2, 3, 2)
    src = EmpiricalJoints(_random_codes(4000, sizes, seed), sizes)
    for start in ("entropy", "random"):
        inc = build_network(src, k, start=start, search="incremental", rng=seed)
        exh = build_network(src, k, start=start, search="exhaustive", rng=seed)
        assert inc == exh


def test_incremental_equals_exhaustive_on_reports_with_ties() -> None:
    """An exact duplicate column gives exact MI ties; the tie order keeps both searches equal."""
    x = _random_codes(5000, (2, 3, 2, 2, 3), 5)
    x = np.concatenate([x, x[:, [1]]], axis=1)
    sizes = (2, 3, 2, 2, 3, 3)
    reports = perturb_codes(x, sizes, flip_prob=0.3, rng=1)
    for src in (EmpiricalJoints(x, sizes), ReportStore(reports, method="linear"),
                ReportStore(reports, max_iter=200)):
        for k in (1, 2):
            assert build_network(src, k, search="incremental") == build_network(src, k, search="exhaustive")


def test_k1_exhaustive_is_maximum_spanning_tree() -> None:
    sizes = (2, 3, 2, 4, 2, 3)
    src = EmpiricalJoints(_random_codes(5000, sizes, 3), sizes)
    d = len(sizes)
    w = np.zeros((d, d))
    for i in range(d):
        for j in range(i + 1, d):
            w[i, j] = mutual_information(src.joint((i, j)))
    mst = minimum_spanning_tree(-w).toarray()
    tree = frozenset(frozenset((int(i), int(j))) for i, j in zip(*np.nonzero(mst)))
    assert edges(build_network(src, 1, search="exhaustive", start="random", rng=0)) == tree


@pytest.mark.statistical
@pytest.mark.parametrize(("method", "seed"), [("em", 0), ("em", 1), ("linear", 0), ("hybrid", 2)])
def test_chain_recovered_at_small_f(method: str, seed: int) -> None:
    x = chain_codes(50_000, 6, seed=seed)
    store = ReportStore(perturb_codes(x, (2,) * 6, flip_prob=0.1, rng=seed + 10), method=method, refine_iter=30)
    chain = frozenset(frozenset((j, j + 1)) for j in range(5))
    assert edges(build_network(store, 1)) == chain


def test_entropy_start_picks_uniform_attribute() -> None:
    gen = np.random.default_rng(0)
    n = 20_000
    x = np.stack([np.where(gen.random(n) < 0.8, 0, gen.integers(4, size=n)),
                  gen.integers(4, size=n),
                  np.where(gen.random(n) < 0.7, 1, gen.integers(4, size=n))], axis=1)
    store = ReportStore(perturb_codes(x, (4, 4, 4), flip_prob=0.2, rng=1))
    assert build_network(store, 1)[0] == (1, ())


def test_single_carry_is_a_valid_network() -> None:
    sizes = (2, 3, 2, 4, 2, 3, 2)
    net = build_network(EmpiricalJoints(_random_codes(3000, sizes, 4), sizes), 2, search="single_carry")
    assert sorted(c for c, _ in net) == list(range(7))


@pytest.mark.parametrize("search", ["incremental", "exhaustive", "single_carry"])
def test_progress_is_reported_once_per_node(search: str) -> None:
    codes = _random_codes(2000, (2, 3, 2, 4, 2), seed=4)
    store = ReportStore(perturb_codes(codes, (2, 3, 2, 4, 2), flip_prob=0.5, rng=5))
    calls: list[tuple[int, int]] = []
    build_network(store, 2, search=search, progress=lambda i, d: calls.append((i, d)))
    assert calls == [(i, 5) for i in range(1, 6)]


def test_network_argument_errors() -> None:
    src = EmpiricalJoints(_random_codes(100, (2, 2, 2), 0), (2, 2, 2))
    with pytest.raises(ParameterError, match=re.escape("degree (max parents k) must be an integer in [1, 2]")):
        build_network(src, 3)
    with pytest.raises(ParameterError, match="degree must be an integer >= 1, got 0"):
        build_network(src, 0)
    with pytest.raises(ParameterError, match="start must be one of"):
        build_network(src, 1, start="middle")
    with pytest.raises(ParameterError, match="search must be one of"):
        build_network(src, 1, search="greedy")


@pytest.mark.statistical
def test_sampler_reproduces_fitted_conditionals() -> None:
    sizes = (2, 3, 2, 4, 2)
    src = EmpiricalJoints(_random_codes(20_000, sizes, 6), sizes)
    net = build_network(src, 2)
    tables = conditional_tables(src, net)
    syn = EmpiricalJoints(sample_synthetic(net, tables, sizes, 200_000, rng=1), sizes)
    for child, parents in net:
        attrs = (*parents, child)
        assert 0.5 * np.abs(syn.joint(attrs) - src.joint(attrs)).sum() < 0.01


def test_zero_mass_parent_configuration_falls_back() -> None:
    class Known:
        sizes = (2, 2)

        def joint(self, attrs):
            j = np.array([[0.5, 0.5], [0.0, 0.0]])  # parent value 1 never occurs
            return j if tuple(attrs) == (0, 1) else (j.T if tuple(attrs) == (1, 0) else j.sum(axis=1))

    src = Known()
    net = ((0, ()), (1, (0,)))
    tables = conditional_tables(src, net)
    assert np.all(np.isfinite(tables[1]))
    np.testing.assert_allclose(tables[1][1], [0.5, 0.5])  # falls back to the child marginal
    out = sample_synthetic(((1, ()), (0, (1,))), [np.array([[0.5, 0.5]]), np.array([[1.0, 0.0], [0.0, 1.0]])],
                           (2, 2), 100, rng=0)
    assert out.shape == (100, 2)


def test_sampling_is_deterministic() -> None:
    sizes = (2, 3, 2)
    src = EmpiricalJoints(_random_codes(1000, sizes, 1), sizes)
    net = build_network(src, 1)
    t = conditional_tables(src, net)
    np.testing.assert_array_equal(sample_synthetic(net, t, sizes, 500, rng=3),
                                  sample_synthetic(net, t, sizes, 500, rng=3))
