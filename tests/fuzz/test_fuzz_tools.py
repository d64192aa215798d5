"""Fuzzing the supporting public entry points: metrics, dataset loading and the auditor itself."""

from __future__ import annotations

import numpy as np
import pytest
from fuzz_strategies import FUZZ, arrays, call, epsilons, has_non_finite, mostly, rngs, scalars
from hypothesis import given
from hypothesis import strategies as st

from privpub.audit import audit_epsilon

vectors = mostly(st.lists(st.floats(0, 100), min_size=1, max_size=6), arrays())


@pytest.mark.parametrize("which", ["avd", "kl_divergence", "mse", "total_variation", "relative_error", "lnmse"])
@FUZZ
@given(true=vectors, est=vectors, extra=scalars())
def test_metrics(true, est, which, extra) -> None:
    metrics = pytest.importorskip("privpub.metrics")
    fns = {
        "avd": lambda: metrics.avd(true, est),
        "kl_divergence": lambda: metrics.kl_divergence(true, est),
        "mse": lambda: metrics.mse(true, est),
        "total_variation": lambda: metrics.total_variation(true, est),
        "relative_error": lambda: metrics.relative_error(true, est, extra),
        "lnmse": lambda: metrics.lnmse(true, est, extra),
    }
    ok, _ = call(fns[which], known="metrics")
    if ok:
        assert not has_non_finite(true)


@FUZZ
@given(counts=vectors, ranges=arrays(), n_bins=mostly(st.integers(1, 20), scalars()),
       n_queries=mostly(st.integers(0, 20), scalars()), rng=rngs())
def test_range_helpers(counts, ranges, n_bins, n_queries, rng) -> None:
    metrics = pytest.importorskip("privpub.metrics")
    ok, out = call(lambda: metrics.range_sums_1d(counts, ranges), known="metrics")
    if ok:
        assert np.asarray(out).shape[0] == np.asarray(ranges).reshape(-1, 2).shape[0]
    call(lambda: metrics.random_ranges_1d(n_bins, n_queries, rng=rng), known="metrics")


@FUZZ
@given(name=st.one_of(st.sampled_from(["adult", "iris", "nettrace", "dpbench_1d/HEPTH", "gowalla", "nope",
                                       "", "../x", "dpbench_2d/"]), st.text(max_size=8), scalars()))
def test_datasets_load(name, tmp_path_factory) -> None:
    datasets = pytest.importorskip("privpub.datasets")
    empty = tmp_path_factory.getbasetemp()
    call(lambda: datasets.load(name, data_dir=empty), known="datasets")


def _coin(p: float, rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.random(n) < p


@FUZZ
@given(epsilon=epsilons(), trials=mostly(st.integers(100, 400), scalars()),
       confidence=mostly(st.just(0.99), scalars()), selection=mostly(st.just(0.25), scalars()),
       n_events=mostly(st.integers(1, 5), scalars()), rng=rngs())
def test_audit_epsilon(epsilon, trials, confidence, selection, n_events, rng) -> None:
    # the auditor's own arguments (a mechanism's own exceptions propagate unchanged, by design)
    ok, res = call(lambda: audit_epsilon(_coin, 0.3, 0.6, epsilon=epsilon, trials=trials, rng=rng, batch=True,
                                         confidence=confidence, selection=selection, n_events=n_events),
                   known="audit")
    if ok:
        assert res.lower_bound >= 0 and res.passed == (res.lower_bound <= res.epsilon)
