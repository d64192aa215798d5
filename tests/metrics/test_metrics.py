"""privpub.metrics: distances and errors against brute force, identities, bad input."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import privpub.metrics as M
from privpub.errors import DomainError, ParameterError


def test_all_is_sorted_and_public() -> None:
    assert M.__all__ == sorted(M.__all__)
    assert all(not name.startswith("_") and callable(getattr(M, name)) for name in M.__all__)


# --------------------------------------------------------------------------------------------
# total variation / AVD
# --------------------------------------------------------------------------------------------
def _tv_brute(p: list[float], q: list[float]) -> float:
    sp, sq = sum(p), sum(max(v, 0.0) for v in q)
    qq = [max(v, 0.0) / sq for v in q] if sq > 0 else [1 / len(q)] * len(q)
    return 0.5 * sum(abs(a / sp - b) for a, b in zip(p, qq))


@pytest.mark.parametrize("seed", range(5))
def test_total_variation_matches_brute_force(seed: int) -> None:
    g = np.random.default_rng(seed)
    p = g.integers(0, 10, 7).astype(float)
    p[0] += 1
    q = g.normal(3, 3, 7)
    assert M.total_variation(p, q) == pytest.approx(_tv_brute(p.tolist(), q.tolist()), abs=1e-12)


def test_total_variation_identities(rng: np.random.Generator) -> None:
    p = rng.integers(1, 20, (4, 5))
    q = rng.integers(0, 20, (4, 5))
    assert M.total_variation(p, p) == 0.0
    assert M.total_variation(p, 3 * p) == pytest.approx(0.0, abs=1e-15)  # scale-free
    assert M.total_variation(p, q) == pytest.approx(M.total_variation(q, p))  # symmetric
    assert 0.0 <= M.total_variation(p, q) <= 1.0
    # disjoint supports reach 1
    assert M.total_variation([1, 0], [0, 1]) == 1.0
    # axis: one distance per row equals the flat distance of each row
    rows = M.total_variation(p, q, axis=1)
    assert rows.shape == (4,)
    np.testing.assert_allclose(rows, [M.total_variation(p[i], q[i]) for i in range(4)])
    # normalize=False uses the values as they are
    assert M.total_variation([0.5, 0.5], [1.0, 0.0], normalize=False) == 0.5
    assert M.avd(p, q) == M.total_variation(p, q)


def test_total_variation_estimate_clipped_and_zero_sum_uniform() -> None:
    assert M.total_variation([1, 1], [-5, 2]) == pytest.approx(0.5)
    assert M.total_variation([1, 1], [0, 0]) == 0.0
    assert M.total_variation([1, 1], [-1, -1]) == 0.0


@pytest.mark.parametrize(
    ("true", "est", "error", "message"),
    [
        ([1, 2], [1, 2, 3], ParameterError, "estimate must have the same shape as true (2,), got (3,)"),
        ([0, 0], [1, 2], DomainError, "true must have a positive sum, got 0"),
        ([-1, 2], [1, 2], DomainError, "true must be non-negative, got minimum -1.0"),
        ([1, np.nan], [1, 2], DomainError, "true must be finite, got 1 NaN or infinite entries"),
        ([], [], ParameterError, "true must not be empty"),
        (["a", "b"], [1, 2], ParameterError, "true must be a numeric array"),
    ],
)
def test_total_variation_bad_input(true: object, est: object, error: type, message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        M.total_variation(true, est)


def test_axis_validation() -> None:
    with pytest.raises(ParameterError, match=re.escape("axis must be None or an integer in [-1, 0], got 1")):
        M.total_variation([1, 2], [2, 1], axis=1)


# --------------------------------------------------------------------------------------------
# KL divergence
# --------------------------------------------------------------------------------------------
def _kl_brute(h: list[float], e: list[float], lam: float, c: float = 0.0) -> float:
    n = len(h)
    hp = [v + c for v in h]
    p = [v / sum(hp) for v in hp]
    ep = [max(v, 0.0) + c for v in e]
    q0 = [v / sum(ep) for v in ep] if sum(ep) > 0 else [1 / n] * n
    q = [(1 - lam) * v + lam / n for v in q0]
    return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q) if pi > 0)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("lam", [1e-4, 0.1])
def test_kl_matches_brute_force(seed: int, lam: float) -> None:
    g = np.random.default_rng(seed)
    h = g.integers(0, 5, 9).astype(float)
    h[3] += 1
    e = g.normal(2, 3, 9)
    expected = _kl_brute(h.tolist(), e.tolist(), lam)
    assert M.kl_divergence(h, e, smoothing=lam) == pytest.approx(expected, rel=1e-12)
    assert M.kl_divergence(h, e, smoothing=lam, pseudo_count=0.5) == pytest.approx(
        _kl_brute(h.tolist(), e.tolist(), lam, 0.5), rel=1e-12
    )


def test_kl_identities(rng: np.random.Generator) -> None:
    h = rng.integers(0, 50, 64).astype(float)
    h[0] = 1
    lam = 1e-4
    # spec test 16: 0 <= KLD(H, H) <= -ln(1 - lam)
    self_kl = M.kl_divergence(h, h, smoothing=lam)
    assert 0.0 <= self_kl <= -math.log(1 - lam)
    assert M.kl_divergence(h, h, smoothing=0.0) == pytest.approx(0.0, abs=1e-15)
    # Gibbs: >= 0, and bounded by ln(n / lam)
    for _ in range(20):
        e = rng.normal(0, 30, 64)
        kl = M.kl_divergence(h, e, smoothing=lam)
        assert 0.0 <= kl <= math.log(64 / lam)
    # scale-free on both sides
    e = rng.integers(1, 9, 64)
    assert M.kl_divergence(7 * h, e) == pytest.approx(M.kl_divergence(h, 3 * e), rel=1e-12)
    # Pinsker: TV <= sqrt(KL / 2) (without smoothing, q > 0 everywhere)
    assert M.total_variation(h, e) <= math.sqrt(M.kl_divergence(h, e, smoothing=0.0) / 2)
    # zero-mass estimate where p > 0: infinite without smoothing, finite with it
    assert M.kl_divergence([1, 1], [1, 0], smoothing=0.0) == math.inf
    assert math.isfinite(M.kl_divergence([1, 1], [1, 0]))


def test_kl_axis() -> None:
    h = np.array([[1, 2, 3], [4, 0, 1]])
    e = np.array([[2, 2, 2], [1, 1, 1]])
    np.testing.assert_allclose(M.kl_divergence(h, e, axis=1), [M.kl_divergence(h[i], e[i]) for i in range(2)])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"smoothing": 1.0}, "smoothing must be in [0, 1), got 1.0"),
        ({"smoothing": -0.1}, "smoothing must be in [0, 1), got -0.1"),
        ({"smoothing": math.nan}, "smoothing must be finite, got nan"),
        ({"pseudo_count": -1.0}, "pseudo_count must be >= 0, got -1.0"),
    ],
)
def test_kl_bad_parameters(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ParameterError, match=re.escape(message)):
        M.kl_divergence([1, 2], [2, 1], **kwargs)


def test_kl_bad_data() -> None:
    with pytest.raises(DomainError, match="true must have a positive sum"):
        M.kl_divergence([0, 0], [1, 1])
    with pytest.raises(DomainError, match="true must be non-negative"):
        M.kl_divergence([-1, 2], [1, 1])


# --------------------------------------------------------------------------------------------
# MSE, LNMSE, relative error
# --------------------------------------------------------------------------------------------
def test_mse_brute_force(rng: np.random.Generator) -> None:
    t, e = rng.normal(size=(3, 8)), rng.normal(size=(3, 8))
    assert M.mse(t, e) == pytest.approx(sum((a - b) ** 2 for a, b in zip(t.ravel(), e.ravel())) / 24)
    np.testing.assert_allclose(M.mse(t, e, axis=0), ((t - e) ** 2).mean(axis=0))
    assert M.mse(t, t) == 0.0


def _lnmse_brute(h: np.ndarray, releases: np.ndarray, r: int) -> float:
    n = len(h)
    errs = [
        (sum(h[a:a + r]) - sum(rel[a:a + r])) ** 2 for rel in releases for a in range(n - r + 1)
    ]
    m = sum(errs) / len(errs)
    return math.log(m) if m > 0 else -math.inf


@pytest.mark.parametrize("seed", range(4))
def test_lnmse_matches_brute_force(seed: int) -> None:
    g = np.random.default_rng(seed)
    n = int(g.integers(5, 30))
    h = g.integers(0, 20, n)
    releases = h + g.laplace(0, 3, (3, n))
    lengths = [1, 2, n // 2, n]
    got = M.lnmse(h, releases, lengths)
    np.testing.assert_allclose(got, [_lnmse_brute(h, releases, r) for r in lengths], rtol=1e-10)
    assert M.lnmse(h, releases[0], 3) == pytest.approx(_lnmse_brute(h, releases[:1], 3), rel=1e-10)


def test_lnmse_exact_release_is_minus_inf_and_bad_input() -> None:
    assert M.lnmse([1, 2, 3], [1, 2, 3], 2) == -math.inf
    msg = "range_length must be <= the number of bins 3, got 4"
    with pytest.raises(ParameterError, match=re.escape(msg)):
        M.lnmse([1, 2, 3], [1, 2, 3], 4)
    with pytest.raises(ParameterError, match=re.escape("range_length must be an integer >= 1, got 0")):
        M.lnmse([1, 2, 3], [1, 2, 3], 0)
    msg = "estimates must have shape (3,) or (T, 3), got (2, 2)"
    with pytest.raises(ParameterError, match=re.escape(msg)):
        M.lnmse([1, 2, 3], [[1, 2], [3, 4]], 1)


def test_relative_error() -> None:
    true = np.array([100.0, 0.0, 5.0, 50.0])
    est = np.array([90.0, 3.0, 5.0, 70.0])
    expected = [abs(e - t) / max(t, 10.0) for t, e in zip(true, est)]
    np.testing.assert_allclose(M.relative_error(true, est, rho=10.0), expected)
    with pytest.raises(ParameterError, match=re.escape("rho must be > 0, got 0.0")):
        M.relative_error(true, est, rho=0.0)
    with pytest.raises(ParameterError, match="rho must be a real number"):
        M.relative_error(true, est, rho="1")  # type: ignore[arg-type]
