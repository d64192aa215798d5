"""Grouping kernels: brute force, O(n^2) reference, fast exact DP, QI, AHP clustering, isotonic."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import isotonic_regression as scipy_isotonic

import privpub.histogram._kernels as hist_kernels
from privpub.core import isotonic_regression
from privpub.errors import ParameterError
from privpub.histogram import (
    ahp_clusters,
    dp_group,
    dp_group_deque,
    dp_group_fast,
    dp_group_quadratic,
    dp_group_wavefront,
    partition_cost,
    publish_groups,
    segment_cost,
)
from privpub.histogram._kernels import _prefix, ahp_min_error, stable_order


def _tol(x: np.ndarray, cost: float) -> float:
    """Spec section 4: 1e-8 (1 + |cost|) + 1e-12 * sum((x - mean)^2)."""
    return 1e-8 * (1 + abs(cost)) + 1e-12 * float(np.sum((x - x.mean()) ** 2))


def _brute_force(x: np.ndarray, c: float, gamma: float) -> float:
    n = x.size
    best = np.inf
    for mask in itertools.product([0, 1], repeat=n - 1):
        cuts = [0] + [k + 1 for k, m in enumerate(mask) if m] + [n]
        best = min(best, partition_cost(x, cuts, c, gamma))
    return best


# ------------------------------------------------------------------------------------------
# isotonic regression (spec test oracles 1-3): the core PAVA used by HPHP's paper variant
# ------------------------------------------------------------------------------------------
def _minmax_isotonic(y: np.ndarray) -> np.ndarray:
    n = y.size
    mean = np.full((n, n), np.nan)
    for i in range(n):
        for j in range(i, n):
            mean[i, j] = y[i : j + 1].mean()
    a = np.array([min(max(mean[i, j] for i in range(j + 1)) for j in range(k, n)) for k in range(n)])
    b = np.array([max(min(mean[i, j] for j in range(i, n)) for i in range(k + 1)) for k in range(n)])
    np.testing.assert_allclose(a, b, atol=1e-12)
    return a


def test_pava_equals_brute_force_minmax(rng: np.random.Generator) -> None:
    for _ in range(150):
        n = int(rng.integers(1, 11))
        y = np.round(rng.normal(0, 3, n), 1)
        fit = isotonic_regression(y)
        np.testing.assert_allclose(fit, _minmax_isotonic(y), atol=1e-10)
        assert np.all(np.diff(fit) >= -1e-12)
        assert fit.sum() == pytest.approx(y.sum())
        np.testing.assert_allclose(isotonic_regression(fit), fit, atol=1e-12)  # idempotent


def test_pava_equals_scipy_on_large_input(rng: np.random.Generator) -> None:
    y = np.sort(rng.poisson(5, 10_000)).astype(float) + rng.laplace(0, 10, 10_000)
    np.testing.assert_allclose(isotonic_regression(y), scipy_isotonic(y).x, atol=1e-9)


# ------------------------------------------------------------------------------------------
# DPCluster
# ------------------------------------------------------------------------------------------
def test_cost_examples() -> None:
    # two groups {0,0,0}, {10}: SSE 0 + c/3 and c/1
    cost, bounds = dp_group_quadratic([0.0, 0.0, 0.0, 10.0], c=1.0)
    assert cost == pytest.approx(1 / 3 + 1)
    assert bounds.tolist() == [0, 3, 4]
    # c = 0: every bin alone costs 0
    cost, bounds = dp_group_fast([1.0, 2.0, 3.0], c=0.0)
    assert cost == 0.0
    # single bin
    assert dp_group_fast([7.0], c=2.0, gamma=1.0)[0] == pytest.approx(3.0)
    assert dp_group_fast([7.0], c=2.0)[1].tolist() == [0, 1]


@pytest.mark.parametrize("method", ["fast", "deque", "wavefront", "quadratic"])
def test_optimal_cost_equals_brute_force(method: str, rng: np.random.Generator) -> None:
    for _ in range(120):
        n = int(rng.integers(1, 11))
        x = np.sort(rng.choice([0.0, 0.0, 1.0, 2.0, 5.0, 40.0], n) + rng.choice([0, 1]) * rng.normal(0, 2, n))
        c = float(rng.choice([0.0, 0.1, 2.0, 50.0, 1e4]))
        gamma = float(rng.choice([0.0, 3.0]))
        cost, bounds = dp_group(x, c, gamma, method=method)
        expected = _brute_force(x, c, gamma)
        assert cost == pytest.approx(expected, abs=_tol(x, expected))
        assert partition_cost(x, bounds, c, gamma) == pytest.approx(cost, abs=_tol(x, cost))


def _sorted_inputs() -> st.SearchStrategy[np.ndarray]:
    """Sorted vectors with heavy ties and zero runs (integers, halves, or noisy reals)."""
    ints = st.lists(st.sampled_from([0, 0, 0, 0, 1, 2, 3, 7, 50, 400]), min_size=1, max_size=60)
    reals = st.lists(st.floats(-30, 300, allow_nan=False, width=32), min_size=1, max_size=60)
    return st.one_of(ints, reals).map(lambda v: np.sort(np.asarray(v, dtype=np.float64)))


@settings(max_examples=2000, deadline=None, derandomize=True)
@given(
    x=_sorted_inputs(),
    c=st.sampled_from([0.0, 1e-3, 0.5, 2.0, 8.0, 200.0, 2e4, 2e6]),
    gamma=st.sampled_from([0.0, 0.5, 2.0, 2 / 0.085**2]),
)
def test_fast_equals_quadratic_hypothesis(x: np.ndarray, c: float, gamma: float) -> None:
    ref_cost, _ = dp_group_quadratic(x, c, gamma)
    for algorithm in (dp_group_deque, dp_group_wavefront):
        cost, bounds = algorithm(x, c, gamma)
        assert cost == pytest.approx(ref_cost, abs=_tol(x, ref_cost)), algorithm.__name__
        # the returned partition really has the reported cost
        assert partition_cost(x, bounds, c, gamma) == pytest.approx(cost, abs=_tol(x, cost))


def test_fast_equals_quadratic_on_larger_inputs(rng: np.random.Generator) -> None:
    """Spec test 5 in spirit: sorted inputs up to n = 1500, logspace c, gamma in {0, 2/eps1^2}."""
    for k in range(12):
        n = int(rng.integers(200, 1500))
        kind = k % 3
        if kind == 0:
            x = np.sort(rng.poisson(2, n) * rng.integers(0, 2, n)).astype(float)  # ties and zero runs
        elif kind == 1:
            x = np.sort(np.floor(rng.lognormal(2, 1.2, n)) + rng.laplace(0, 3, n))
        else:
            x = np.sort(np.concatenate([np.zeros(n // 2), rng.normal(100, 20, n - n // 2)]))
        c = float(10 ** rng.uniform(-2, 5))
        gamma = float(rng.choice([0.0, 2 / 0.5**2]))
        ref_cost, _ = dp_group_quadratic(x, c, gamma)
        for algorithm in (dp_group_deque, dp_group_wavefront):
            cost, bounds = algorithm(x, c, gamma)
            assert cost == pytest.approx(ref_cost, abs=_tol(x, ref_cost)), algorithm.__name__
            assert partition_cost(x, bounds, c, gamma) == pytest.approx(cost, abs=_tol(x, cost))


def test_fast_is_the_compiled_deque(rng: np.random.Generator) -> None:
    """"fast" and "deque" are one compiled kernel; the numpy wavefront reaches the same cost."""
    for scale, c in ((1.0, 1e4), (100.0, 1e-3), (5.0, 30.0)):
        x = np.sort(np.round(rng.normal(0, scale, 3000)))
        cost, bounds = dp_group_fast(x, c, 2.0)
        cost_d, bounds_d = dp_group_deque(x, c, 2.0)
        assert cost == cost_d and np.array_equal(bounds, bounds_d)
        assert cost == pytest.approx(dp_group_wavefront(x, c, 2.0)[0], abs=_tol(x, cost))
        assert cost == pytest.approx(dp_group_quadratic(x, c, 2.0)[0], abs=_tol(x, cost))


def test_backtrack_in_python_equals_the_compiled_walk(rng: np.random.Generator) -> None:
    """Groupings up to ``_NUMPY_SORT_MAX`` bins follow their back-pointers in Python: same boundaries."""
    jit = hist_kernels._jit()
    for c in (1e-3, 30.0, 1e4):
        x = np.sort(np.round(rng.normal(0, 5.0, 2000)))
        s1, s2 = hist_kernels._prefix(x)
        work = [np.zeros(s1.size)] + [np.zeros(s1.size, dtype=np.int64) for _ in range(3)]
        _, back = jit.deque_group(s1, s2, c, 2.0, *work)
        compiled = jit.backtrack(back, x.size)
        np.testing.assert_array_equal(hist_kernels._backtrack(back.tolist(), x.size), compiled)
        np.testing.assert_array_equal(dp_group_deque(x, c, 2.0)[1], compiled)


@pytest.mark.parametrize(
    ("x", "c", "fast", "reference"),
    [  # equal-cost partitions: the deque keeps the later start, the O(n^2) reference the earlier
        ([0.0, 1.0, 2.0], 1.0, [0, 2, 3], [0, 1, 3]),
        ([0.0, 2.0, 4.0, 6.0, 8.0], 4.0, [0, 2, 4, 5], [0, 1, 3, 5]),
        ([5.0, 5.0, 5.0, 5.0], 0.0, [0, 1, 2, 3, 4], [0, 4]),
        ([0.0, 0.0, 1.0, 1.0], 1.0, [0, 2, 4], [0, 2, 4]),
    ],
)
def test_ties_break_as_before(x: list[float], c: float, fast: list[int], reference: list[int]) -> None:
    """The boundaries the pure-Python deque (commit f3a90b8) returned on exact ties."""
    cost, bounds = dp_group_fast(x, c)
    ref_cost, ref_bounds = dp_group_quadratic(x, c)
    assert cost == ref_cost
    assert bounds.tolist() == fast and ref_bounds.tolist() == reference


def test_quadrangle_inequality_holds_on_sorted_and_fails_on_unsorted(rng: np.random.Generator) -> None:
    def violations(x: np.ndarray, c: float) -> int:
        n = x.size
        quads = np.array([q for q in itertools.combinations(range(n + 1), 4)])
        a, b, u, v = quads.T
        lhs = segment_cost(x, a, u, c) + segment_cost(x, b, v, c)
        rhs = segment_cost(x, a, v, c) + segment_cost(x, b, u, c)
        return int(np.count_nonzero(lhs > rhs + 1e-9 * (1 + np.abs(rhs))))

    total_unsorted = 0
    for _ in range(40):
        n = int(rng.integers(4, 10))
        x = rng.choice([0.0, 1.0, 3.0, 10.0], n) + rng.normal(0, 1, n)
        c = float(rng.choice([0.0, 1.0, 30.0]))
        assert violations(np.sort(x), c) == 0
        total_unsorted += violations(x, c)
    assert total_unsorted > 0


def test_grouping_rejects_bad_input() -> None:
    with pytest.raises(ParameterError, match="sorted"):
        dp_group_fast([3.0, 1.0], c=1.0)
    with pytest.raises(ParameterError, match="non-empty"):
        dp_group_fast([], c=1.0)
    with pytest.raises(ParameterError, match=re.escape("c must be finite and >= 0, got -1.0")):
        dp_group_quadratic([1.0], c=-1.0)
    with pytest.raises(ParameterError, match="finite"):
        dp_group_fast([0.0, np.nan], c=1.0)
    with pytest.raises(ParameterError, match="method"):
        dp_group([1.0], c=1.0, method="smawk")
    with pytest.raises(ParameterError, match="sorted"):
        dp_group_wavefront([3.0, 1.0], c=1.0)
    with pytest.raises(ParameterError, match="1-D"):
        stable_order(np.zeros((2, 2)))


@pytest.mark.parametrize(
    "values",
    [
        [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.0, 5e-324, -5e-324, 2.0**60, -(2.0**60)],
        [3.0, 1.0, 2.0, 1.0, 3.0, 0.0, -7.5],
        [0.0, 0.5, 1.0, 17.0, 2.0**40, -3.0],
    ],
)
@pytest.mark.parametrize("kernel", [True, False])
def test_stable_order_equals_numpy_stable_argsort(values: list[float], kernel: bool, rng: np.random.Generator,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The radix kernel (and, for small vectors by default, NumPy itself) gives NumPy's stable order."""
    if kernel:
        monkeypatch.setattr(hist_kernels, "_NUMPY_SORT_MAX", -1)
    for n in (0, 1, 2, 10, 5000):
        y = rng.choice(np.asarray(values), n)
        np.testing.assert_array_equal(stable_order(y), np.argsort(y, kind="stable"))
    y = np.round(rng.laplace(0, 40, 200_000)) + rng.integers(0, 3, 200_000) * 2.0**33  # many 11-bit digits
    np.testing.assert_array_equal(stable_order(y), np.argsort(y, kind="stable"))
    z = rng.normal(0, 1, 100_000)
    np.testing.assert_array_equal(stable_order(z), np.argsort(z, kind="stable"))


def test_prefix_sums_are_centred() -> None:
    s1, s2 = _prefix(np.array([1.0, 2.0, 3.0]))
    assert s1[-1] == pytest.approx(0.0)
    assert s2[-1] == pytest.approx(2.0)


# ------------------------------------------------------------------------------------------
# AHP
# ------------------------------------------------------------------------------------------
def test_ahp_run_jump_equals_plain_scan(rng: np.random.Generator) -> None:
    """Spec test 15: the exact run-jump gives the same err* as the plain scan."""
    for _ in range(6):
        n = int(rng.integers(50, 2000))
        x = np.sort(rng.choice([0.0, 0.0, 0.0, 1.0, 2.0, 9.0], n) + rng.choice([0, 1]) * rng.poisson(3, n))
        c = float(10 ** rng.uniform(-1, 4))
        prefix = np.concatenate([[0.0], np.cumsum(x)]).tolist()
        run = [int(np.argmax(x[j:] != x[j])) or (n - j) for j in range(n)]
        for j in rng.choice(n, size=min(n, 200), replace=False):
            fast = ahp_min_error(prefix, run, int(j), n, c, use_runs=True)
            plain = ahp_min_error(prefix, run, int(j), n, c, use_runs=False)
            assert fast == pytest.approx(plain, rel=1e-12, abs=1e-12)
        np.testing.assert_array_equal(ahp_clusters(x, c, use_runs=True), ahp_clusters(x, c, use_runs=False))


def test_ahp_clusters_partition() -> None:
    b = ahp_clusters(np.array([0.0] * 50 + [100.0] * 5), c=2.0)
    assert b[0] == 0 and b[-1] == 55 and np.all(np.diff(b) > 0)
    assert 50 in b.tolist()


# ------------------------------------------------------------------------------------------
# publishing
# ------------------------------------------------------------------------------------------
def test_publish_groups_checks_partition() -> None:
    with pytest.raises(ParameterError, match="partition"):
        publish_groups([1, 2, 3], [0, 0, 2], [0, 3], [0.0])
    with pytest.raises(ParameterError, match="partition"):
        publish_groups([1, 2, 3], [0, 1, 2], [0, 2], [0.0])
    with pytest.raises(ParameterError, match="one entry per group"):
        publish_groups([1, 2, 3], [0, 1, 2], [0, 1, 3], [0.0])
    out = publish_groups([1, 2, 3], [2, 0, 1], [0, 1, 3], [0.0, 0.0], clamp=False)
    assert out.tolist() == [1.5, 1.5, 3.0]
