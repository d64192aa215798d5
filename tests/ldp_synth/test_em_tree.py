"""The batched prefix-tree EM kernel against the one-joint dense reference EM (``em_collapsed``).

Every EM estimate of the library runs through :func:`privpub.ldp_synth._em_tree.em_tree_batch`, except
batches small enough to finish sooner in NumPy than the kernel compiles (``NUMPY_EM_SECONDS``, tested
last); the dense per-joint EM stays as the reference. Agreement is to float rounding: 1e-12 on every cell, the
same iteration count and the same log-likelihood to 1e-12 relative (the two only sum in another order).
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import numpy as np
import pytest

import privpub.ldp_synth._store as store_mod
from privpub.errors import ParameterError
from privpub.ldp_synth import ReportStore, build_network, perturb_codes

TOL_P = 1e-12
TOL_LL = 1e-12


@pytest.fixture(autouse=True)
def _compiled_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch of these tests through the compiled kernel (small batches would take the NumPy EM)."""
    monkeypatch.setattr(store_mod, "NUMPY_EM_SECONDS", -1.0)


def _codes(n: int, sizes: tuple[int, ...], seed: int) -> np.ndarray:
    """Correlated columns: each copies an earlier one (mod its size) with probability 0.6."""
    gen = np.random.default_rng(seed)
    x = np.zeros((n, len(sizes)), dtype=np.int64)
    for j, s in enumerate(sizes):
        x[:, j] = gen.integers(s, size=n)
        if j:
            src = int(gen.integers(j))
            x[:, j] = np.where(gen.random(n) < 0.6, x[:, src] % s, x[:, j])
    return x


def _assert_matches_reference(store: ReportStore, keys: list[tuple[int, ...]], method: str = "em") -> set[int]:
    iters = set()
    for key in keys:
        est = store.estimate(key, method=method)
        init = store._hybrid_init(key) if method == "hybrid" else None
        max_iter = store.refine_iter if method == "hybrid" and store.refine_iter else store.max_iter
        p, n_iter, converged, loglik = store._em_reference(key, init=init, max_iter=max_iter)
        assert np.max(np.abs(est.p - p)) < TOL_P, key
        assert est.n_iter == n_iter and est.converged == converged, key
        assert est.loglik is not None and math.isclose(est.loglik, loglik, rel_tol=TOL_LL), key
        iters.add(n_iter)
    return iters


@pytest.mark.parametrize("f", [0.3, 0.8])
def test_batch_over_all_joints_equals_reference(f: float) -> None:
    """All 1- to 4-way joints of a mixed schema, estimated in one batch, equal their one-by-one EMs."""
    sizes = (2, 3, 4, 5, 2)
    rep = perturb_codes(_codes(3000, sizes, seed=1), sizes, flip_prob=f, rng=2)
    keys = [k for m in (1, 2, 3, 4) for k in itertools.combinations(range(len(sizes)), m)]
    store = ReportStore(rep, max_iter=300)
    store.prefetch(keys)
    assert store.n_estimates == len(keys)
    iters = _assert_matches_reference(store, keys)
    assert len(iters) > 3  # the joints stopped at their own iterations


@pytest.mark.parametrize("f", [0.5, 1e-40])
@pytest.mark.parametrize("layout", ["sparse", "dense", "grid"])
def test_sparse_complete_and_grid_layouts_equal_reference(layout: str, f: float,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Force every tree level sparse (explicit nodes), complete (dense loops) or the full pattern grid
    (matrix products): the same estimates, also with rescaled likelihood rows (f = 1e-40)."""
    monkeypatch.setattr(store_mod, "DENSE_SPEEDUP", 1e-9 if layout == "sparse" else 1e9)
    monkeypatch.setattr(store_mod, "GRID_SPEEDUP", 1e9 if layout == "grid" else 1e-9)
    monkeypatch.setattr(store_mod, "GRID_CALL_COST", 0.0)
    store_mod._axis_order_cached.cache_clear()
    sizes = (6, 7, 5)
    rep = perturb_codes(_codes(4000, sizes, seed=3), sizes, flip_prob=f, rng=4)
    store = ReportStore(rep, max_iter=200)
    keys = [(0, 1, 2), (0, 2), (1,)]
    tree = store._tree((0, 1, 2))
    assert tree.grid == (layout == "grid") and tree.rescale == (f < 0.01)
    assert (tree.npat == 0).all() if layout == "sparse" else (tree.npat > 0).all()
    if layout != "sparse" and f == 0.5:  # complete levels have slots no user occupies
        assert tree.level_counts[-1] > tree.counts.shape[0]
    store.prefetch(keys)
    _assert_matches_reference(store, keys)
    store_mod._axis_order_cached.cache_clear()


def test_paper_stop_rescaled_rows_and_hybrid_equal_reference() -> None:
    sizes = (3, 4, 2)
    codes = _codes(2000, sizes, seed=5)
    keys = [(0, 1, 2), (1, 2), (0,)]
    paper = ReportStore(perturb_codes(codes, sizes, flip_prob=0.4, rng=6), stop="paper", max_iter=200)
    _assert_matches_reference(paper, keys)
    tiny = ReportStore(perturb_codes(codes, sizes, flip_prob=1e-40, rng=7))  # rho^m > e^500: rescaled rows
    assert tiny._tree((0, 1, 2)).rescale
    _assert_matches_reference(tiny, keys)
    hybrid = ReportStore(perturb_codes(codes, sizes, flip_prob=0.5, rng=8), method="hybrid", refine_iter=50)
    hybrid.prefetch(keys)
    _assert_matches_reference(hybrid, keys, method="hybrid")


def test_axes_in_callers_order_and_cached() -> None:
    sizes = (2, 5, 3)
    store = ReportStore(perturb_codes(_codes(2000, sizes, seed=9), sizes, flip_prob=0.5, rng=10))
    a = store.estimate((2, 0, 1))
    b = store.estimate((0, 1, 2))
    assert a.p.shape == (3, 2, 5)
    np.testing.assert_array_equal(a.p, np.transpose(b.p, (2, 0, 1)))
    assert store.n_estimates == 1


def test_expected_patterns_bounds_the_observed_count() -> None:
    """The public bound on distinct canonical patterns is at least what the reports show."""
    sizes = (2, 4, 6, 9)
    n = 20_000
    for f in (0.05, 0.3, 0.7):
        store = ReportStore(perturb_codes(_codes(n, sizes, seed=11), sizes, flip_prob=f, rng=12))
        for j, size in enumerate(sizes):
            seen = store._blocks[j].canon_patterns.shape[0]
            assert seen <= store_mod.expected_patterns(size, n, f) + 3 * math.sqrt(seen), (f, size)
    assert store_mod.expected_patterns(2, 10**6, 0.5) == 3  # 00, 10, 01 (11 is canonicalised to 00)
    assert store_mod.expected_patterns(4, 10**6, 0.9) == 15
    assert store_mod.expected_patterns(1_500_000, 45_222, 0.5) == 45_222  # huge domains stay cheap


def test_work_bound_covers_the_network_search() -> None:
    """em_work_bound (public metadata only) is at least the work of the joints the search estimates."""
    sizes = (4, 2, 3, 4, 2, 4)
    n, f = 5000, 0.8
    store = ReportStore(perturb_codes(_codes(n, sizes, seed=13), sizes, flip_prob=f, rng=14), max_iter=5)
    build_network(store, 2)
    actual = sum(store._tree(key).work for key, _ in store._cache)
    bound, cells = store_mod.em_work_bound(sizes, n, f, 2)
    assert actual <= bound and cells == 64
    assert bound < 1.5 * actual  # saturated patterns at f = 0.8: the bound is close


def test_slow_em_warns_and_huge_joint_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = (3, 3)
    rep = perturb_codes(_codes(1000, sizes, seed=15), sizes, flip_prob=0.5, rng=16)
    monkeypatch.setattr(store_mod, "EM_WARN_SECONDS", 0.0)
    with pytest.warns(UserWarning, match="method='linear' takes seconds"):
        ReportStore(rep).estimate((0, 1))
    monkeypatch.setattr(store_mod, "_MAX_BUFFER", 10)
    with pytest.raises(ParameterError, match="use the linear estimator for domains this large; pass method='linear'"):
        ReportStore(rep).estimate((0, 1))


ADULT = Path(os.environ.get("PRIVPUB_DATA", "../shared/datasets")) / "adult" / "adult.data"


@pytest.mark.skipif(not ADULT.is_file(), reason="Adult not available (set PRIVPUB_DATA)")
def test_adult_joints_equal_reference() -> None:
    """Binned Adult (15 attributes), f = 0.5: every 15th 3-way joint of the k = 2 search, batched."""
    from privpub.experiments.ldp_synth import load_adult_codes

    data = load_adult_codes(ADULT.parent.parent)
    store = ReportStore(perturb_codes(data.codes, data.sizes, flip_prob=0.5, rng=17))
    keys: list[tuple[int, ...]] = [*list(itertools.combinations(range(15), 3))[::15], (0, 9), (12,)]
    store.prefetch(keys)
    _assert_matches_reference(store, keys)


def test_small_batch_runs_numpy_em_and_equals_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """A small batch skips the kernel (nothing to compile) and gives the kernel's estimates."""
    sizes = (3, 3, 3)
    rep = perturb_codes(_codes(2000, sizes, seed=5), sizes, flip_prob=0.4, rng=6)
    keys = [(0,), (0, 1), (1, 2), (0, 1, 2)]
    kernel = ReportStore(rep, max_iter=200)
    kernel.prefetch(keys)
    monkeypatch.setattr(store_mod, "NUMPY_EM_SECONDS", 0.5)
    calls: list[int] = []
    monkeypatch.setattr(store_mod, "em_tree_batch", lambda *a, **k: calls.append(1))
    small = ReportStore(rep, max_iter=200)
    assert store_mod._numpy_em_seconds([small._tree(k) for k in keys], 200) <= 0.5
    small.prefetch(keys)
    assert not calls and small.n_estimates == len(keys)
    for key in keys:
        a, b = kernel.estimate(key), small.estimate(key)
        assert np.max(np.abs(a.p - b.p)) < TOL_P and a.n_iter == b.n_iter and a.converged == b.converged, key
        assert a.loglik is not None and b.loglik is not None and math.isclose(a.loglik, b.loglik, rel_tol=TOL_LL)
    assert small.em_work == kernel.em_work
    big = [kernel._tree(k) for k in keys] * 200  # 800 joints: the kernel
    assert store_mod._numpy_em_seconds(big, 1000) > store_mod.NUMPY_EM_SECONDS
