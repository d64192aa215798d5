"""Built-in generators: reproducible, valid, and their stated ground truth is right."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import privpub.datasets as D
from privpub.errors import ParameterError


def test_reproducible_with_same_seed_and_differs_otherwise() -> None:
    assert np.array_equal(D.zipf_histogram(50, 1000, 1.2, rng=5), D.zipf_histogram(50, 1000, 1.2, rng=5))
    assert not np.array_equal(D.zipf_histogram(50, 1000, 1.2, rng=5), D.zipf_histogram(50, 1000, 1.2, rng=6))
    a, b = D.bayesnet_table(500, rng=1), D.bayesnet_table(500, rng=1)
    assert a.frame.equals(b.frame) and a.network == b.network
    assert not a.frame.equals(D.bayesnet_table(500, rng=2).frame)
    assert np.array_equal(D.clustered_points(300, rng=4).points, D.clustered_points(300, rng=4).points)
    assert np.array_equal(D.bursty_stream(500, rng=3), D.bursty_stream(500, rng=3))
    assert not np.array_equal(D.bursty_stream(500, rng=3), D.bursty_stream(500, rng=4))
    assert D.iris(rng=2, shuffle=True).frame.equals(D.iris(rng=2, shuffle=True).frame)


def test_generator_object_is_used() -> None:
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    assert np.array_equal(D.zipf_histogram(10, 100, rng=g1), D.zipf_histogram(10, 100, rng=g2))
    # the caller's generator advances: a second call differs
    assert not np.array_equal(D.zipf_histogram(10, 100, rng=g1), D.zipf_histogram(10, 100, rng=9))


def test_zipf() -> None:
    p = D.zipf_probabilities(100, 1.1)
    assert p.sum() == pytest.approx(1.0) and (np.diff(p) < 0).all()
    assert p[0] / p[9] == pytest.approx(10**1.1)
    h = D.zipf_histogram(100, 200_000, 1.1, rng=0)
    assert h.dtype == np.int64 and h.sum() == 200_000
    se = np.sqrt(200_000 * p * (1 - p))
    assert (np.abs(h - 200_000 * p) < 5 * se).all()
    s = D.zipf_histogram(100, 200_000, 1.1, rng=0, shuffle=True)
    assert sorted(s.tolist()) == sorted(h.tolist()) and not np.array_equal(s, h)
    assert D.zipf_histogram(3, 0, rng=0).tolist() == [0, 0, 0]


def test_bayesnet_truth_matches_sample() -> None:
    n = 100_000
    s = D.bayesnet_table(n, rng=11, n_attributes=5, max_parents=2)
    names = list(s.schema.names)
    # the network is a DAG in topological order; CPT rows sum to 1
    for i, (child, parents) in enumerate(s.network):
        assert child == names[i] and all(names.index(p) < i for p in parents)
        cpt = s.cpts[child]
        assert cpt.shape == (*(s.schema[p].size for p in parents), s.schema[child].size)
        np.testing.assert_allclose(cpt.sum(axis=-1), 1.0)
    joint = s.joint()
    assert joint.shape == s.schema.sizes and joint.sum() == pytest.approx(1.0)
    # every 2-way marginal: exact truth vs empirical, within 5 binomial standard errors
    codes = s.schema.encode(s.frame)
    for a in range(5):
        for b in range(a + 1, 5):
            truth = s.marginal([names[a], names[b]])
            np.testing.assert_allclose(truth, joint.sum(axis=tuple(k for k in range(5) if k not in (a, b))))
            emp = np.zeros_like(truth)
            np.add.at(emp, (codes[:, a], codes[:, b]), 1.0 / n)
            se = np.sqrt(truth * (1 - truth) / n)
            assert (np.abs(emp - truth) <= 5 * se + 1e-12).all()
    # axis order follows the request
    np.testing.assert_allclose(s.marginal(["A3", "A1"]), s.marginal(["A1", "A3"]).T)


def test_bayesnet_options_and_errors() -> None:
    s = D.bayesnet_table(100, rng=0, n_attributes=4, domain_sizes=[2, 5, 3, 2], max_parents=0)
    assert s.schema.sizes == (2, 5, 3, 2) and all(p == () for _, p in s.network)
    with pytest.raises(ParameterError, match=re.escape("domain_sizes must hold 4 integers >= 2")):
        D.bayesnet_table(10, rng=0, n_attributes=4, domain_sizes=[2, 1, 2, 2])
    with pytest.raises(ParameterError, match=re.escape("concentration must be > 0, got 0.0")):
        D.bayesnet_table(10, rng=0, concentration=0.0)
    with pytest.raises(ParameterError, match=re.escape("n must be an integer >= 1, got 0")):
        D.bayesnet_table(0, rng=0)
    with pytest.raises(ParameterError, match="attributes must be distinct names"):
        s.marginal(["A0", "A0"])
    big = D.bayesnet_table(10, rng=0, n_attributes=26, domain_sizes=[2] * 26)
    with pytest.raises(ParameterError, match="joint must have <= 2\\*\\*24 cells"):
        big.joint()
    assert big.marginal(["A25"]).sum() == pytest.approx(1.0)


def test_clustered_points_density() -> None:
    n = 200_000
    s = D.clustered_points(n, rng=3, n_clusters=4, bounds=(-1.0, 0.0, 1.0, 4.0))
    pts = s.points
    assert pts.shape == (n, 2) and not pts.flags.writeable
    assert (pts[:, 0] >= -1).all() and (pts[:, 0] <= 1).all() and (pts[:, 1] >= 0).all() and (pts[:, 1] <= 4).all()
    assert s.box_probability([[-1, 0, 1, 4]])[0] == pytest.approx(1.0)
    cells = s.cell_probabilities((8, 8))
    assert cells.sum() == pytest.approx(1.0)
    emp = np.histogram2d(pts[:, 0], pts[:, 1], bins=8, range=[[-1, 1], [0, 4]])[0] / n
    se = np.sqrt(cells * (1 - cells) / n)
    assert (np.abs(emp - cells) <= 5 * se + 1e-9).all()
    with pytest.raises(ParameterError, match=re.escape("background must be in [0.0, 1.0), got 1.0")):
        D.clustered_points(10, rng=0, background=1.0)
    with pytest.raises(ParameterError, match="bounds must satisfy x1 > x0"):
        D.clustered_points(10, rng=0, bounds=(0, 0, 0, 1))


def test_bursty_stream() -> None:
    s = D.bursty_stream(200_000, rng=0, base_rate=2.0, burst_rate=40.0, burst_start=0.01, mean_burst=20.0)
    assert s.dtype == np.int64 and s.shape == (200_000,) and (s >= 0).all()
    # stationary burst fraction pi = (p_on) / (p_on + 1/mb) with geometric runs; mean rate follows
    mean_quiet, mean_burst = 1 / 0.01, 20.0
    pi = mean_burst / (mean_quiet + mean_burst)
    assert s.mean() == pytest.approx(2.0 + pi * 38.0, rel=0.1)
    assert s.max() > 20  # bursts happen
    quiet = D.bursty_stream(100_000, rng=1, base_rate=3.0, burst_start=0.0)
    assert abs(quiet.mean() - 3.0) < 5 * math.sqrt(3.0 / 100_000)
    with pytest.raises(ParameterError, match=re.escape("mean_burst must be >= 1, got 0.5")):
        D.bursty_stream(10, rng=0, mean_burst=0.5)
    with pytest.raises(ParameterError, match="base_rate and burst_rate must be >= 0"):
        D.bursty_stream(10, rng=0, base_rate=-1.0)


def test_iris_from_sklearn() -> None:
    ds = D.iris()
    assert ds.frame.shape == (150, 5) and ds.frame["class"].value_counts().tolist() == [50, 50, 50]
    ds.schema.validate(ds.frame, require_class=True)
    assert ds.paths == () and "scikit-learn" in ds.source


def test_iris_sklearn_differs_from_uci_in_two_rows(data_dir: Path) -> None:
    ds = D.iris()
    if "iris" not in D.available(data_dir):
        pytest.skip("iris.data not present")
    uci = D.load("iris", data_dir)
    assert isinstance(uci, D.TableDataset)
    assert uci.schema == ds.schema and list(uci.frame.columns) == list(ds.frame.columns)
    diff = np.flatnonzero((uci.frame.iloc[:, :4].to_numpy() != ds.frame.iloc[:, :4].to_numpy()).any(axis=1))
    assert (diff + 1).tolist() == [35, 38]  # the two Bezdek corrections
