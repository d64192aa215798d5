"""Statistical and unit tests of the central mechanisms.

Each statistical check is written as a function and run twice: on the real mechanism (must
pass) and on a negative control with half the noise scale (must fail), so the tests are shown
to be able to fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statutils import chisquare_pvalue, max_ratio_lower_bound

from privpub.core import (
    discrete_laplace,
    discrete_laplace_noise,
    discrete_laplace_pmf,
    exponential_mechanism,
    exponential_mechanism_probabilities,
    laplace,
    laplace_noise,
    rational_scale,
    report_noisy_max,
)
from privpub.errors import DomainError, ParameterError

EPS = 1.0


# -- discrete Laplace -------------------------------------------------------------------------
def dlap_fit_pvalue(sample: np.ndarray, epsilon: float) -> float:
    support = np.arange(-60, 61)
    observed = np.array([np.count_nonzero(sample == z) for z in support] + [np.count_nonzero(np.abs(sample) > 60)])
    pmf = discrete_laplace_pmf(support, epsilon=epsilon)
    expected = np.append(pmf, max(0.0, 1.0 - pmf.sum()))
    return chisquare_pvalue(observed, expected)


@pytest.mark.statistical
@pytest.mark.parametrize("epsilon", [0.0625, 0.1, 0.3, 1.0, 2.5])
def test_discrete_laplace_matches_pmf_on_a_million_draws(epsilon: float) -> None:
    sample = discrete_laplace_noise(10**6, epsilon=epsilon, rng=11)
    assert dlap_fit_pvalue(sample, epsilon) > 1e-4


@pytest.mark.statistical
def test_discrete_laplace_pmf_check_fails_with_half_the_noise() -> None:
    sample = discrete_laplace_noise(10**6, epsilon=2 * EPS, rng=11)  # scale halved
    assert dlap_fit_pvalue(sample, EPS) < 1e-12


def test_discrete_laplace_keeps_integers_and_is_reproducible() -> None:
    a = discrete_laplace(np.array([3, 0, 7]), epsilon=0.5, rng=4)
    b = discrete_laplace(np.array([3, 0, 7]), epsilon=0.5, rng=4)
    assert a.dtype == np.int64
    np.testing.assert_array_equal(a, b)
    assert isinstance(discrete_laplace(5, epsilon=1.0, rng=0), int)


def test_discrete_laplace_sensitivity_scales_noise() -> None:
    sample = discrete_laplace_noise(200_000, epsilon=1.0, sensitivity=3, rng=2)
    p = math.exp(-1.0 / 3)
    var = 2 * p / (1 - p) ** 2
    assert abs(sample.var() / var - 1) < 0.03


def test_rational_scale_never_below_requested() -> None:
    for eps in [0.1, 0.3, 1 / 3, 0.01, 2.0, 7.77, 1e-4]:
        t, s = rational_scale(eps, 1.0)
        assert t / s >= 1.0 / eps * (1 - 1e-15)
        assert abs(t / s - 1.0 / eps) <= 1e-8 / eps
    assert rational_scale(0.1) == (10, 1)


def test_discrete_laplace_rejects_fractions() -> None:
    with pytest.raises(DomainError, match="integers"):
        discrete_laplace([1.5], epsilon=1.0)


# -- Laplace -----------------------------------------------------------------------------------
@pytest.mark.statistical
def test_laplace_noise_distribution_and_negative_control() -> None:
    noise = laplace_noise(200_000, epsilon=EPS, sensitivity=2.0, rng=3)
    assert stats.kstest(noise, stats.laplace(scale=2.0).cdf).pvalue > 1e-4
    halved = laplace_noise(200_000, epsilon=2 * EPS, sensitivity=2.0, rng=3)
    assert stats.kstest(halved, stats.laplace(scale=2.0).cdf).pvalue < 1e-12


def test_laplace_scalar_and_shape() -> None:
    assert isinstance(laplace(1.0, epsilon=1.0, rng=0), float)
    assert laplace(np.zeros((2, 3)), epsilon=1.0, rng=0).shape == (2, 3)


# -- neighbour-ratio tests of the selection mechanisms -----------------------------------------
N_TRIALS = 100_000


def _em_batch(scores: np.ndarray, epsilon: float, n: int, gen: np.random.Generator) -> np.ndarray:
    # vectorised equivalent of n calls (same Gumbel-max rule) for speed
    logits = epsilon * scores / 2.0
    return np.argmax(logits + gen.gumbel(size=(n, scores.size)), axis=1)


@pytest.mark.statistical
def test_exponential_mechanism_matches_exact_probabilities() -> None:
    scores = np.array([0.0, 1.0, 3.0, -2.0])
    gen = np.random.default_rng(8)
    draws = np.array([exponential_mechanism(scores, epsilon=1.0, rng=gen) for _ in range(20_000)])
    probs = exponential_mechanism_probabilities(scores, epsilon=1.0)
    assert chisquare_pvalue(np.bincount(draws, minlength=4), probs) > 1e-4


@pytest.mark.statistical
def test_exponential_mechanism_neighbour_ratio_and_negative_control() -> None:
    d1, d2 = np.array([0.0, 4.0]), np.array([1.0, 3.0])
    gen = np.random.default_rng(9)
    # the library call, checked against the batch kernel on the same seed
    one = exponential_mechanism(d1, epsilon=EPS, rng=np.random.default_rng(1))
    assert one == int(_em_batch(d1, EPS, 1, np.random.default_rng(1))[0])
    o1 = _em_batch(d1, EPS, N_TRIALS, gen)
    o2 = _em_batch(d2, EPS, N_TRIALS, gen)
    assert max_ratio_lower_bound(o1, o2) <= math.exp(EPS)
    b1 = _em_batch(d1, 2 * EPS, N_TRIALS, gen)  # half the noise
    b2 = _em_batch(d2, 2 * EPS, N_TRIALS, gen)
    assert max_ratio_lower_bound(b1, b2) > math.exp(EPS)


def rnm_outputs(scores: np.ndarray, epsilon: float, monotone: bool, gen: np.random.Generator) -> np.ndarray:
    return np.array([report_noisy_max(scores, epsilon=epsilon, monotone=monotone, rng=gen) for _ in range(N_TRIALS // 4)])


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("monotone", "d1", "d2"),
    [(True, [0.0, 3.0], [1.0, 3.0]), (False, [0.0, 3.0], [1.0, 2.0])],
)
def test_report_noisy_max_neighbour_ratio_and_negative_control(monotone: bool, d1: list, d2: list) -> None:
    gen = np.random.default_rng(10)
    a1, a2 = np.array(d1), np.array(d2)
    ok = max_ratio_lower_bound(rnm_outputs(a1, EPS, monotone, gen), rnm_outputs(a2, EPS, monotone, gen))
    assert ok <= math.exp(EPS)
    bad = max_ratio_lower_bound(rnm_outputs(a1, 2 * EPS, monotone, gen), rnm_outputs(a2, 2 * EPS, monotone, gen))
    assert bad > math.exp(EPS)


def test_selection_picks_clear_winner() -> None:
    assert report_noisy_max([0, 1000, 0], epsilon=1.0, rng=0) == 1
    assert exponential_mechanism([0, 1000, 0], epsilon=1.0, rng=0) == 1


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0, -1.0, float("nan"), float("inf"), "1", None, True])
def test_bad_epsilon_is_rejected_everywhere(eps: object) -> None:
    for call in (
        lambda: laplace([1.0], epsilon=eps),
        lambda: discrete_laplace([1], epsilon=eps),
        lambda: exponential_mechanism([1.0, 2.0], epsilon=eps),
        lambda: report_noisy_max([1.0, 2.0], epsilon=eps),
    ):
        with pytest.raises(ParameterError, match="epsilon"):
            call()


def test_bad_values_and_scores() -> None:
    with pytest.raises(DomainError, match="finite"):
        laplace([1.0, float("nan")], epsilon=1.0)
    with pytest.raises(DomainError, match="finite"):
        discrete_laplace([1.0, float("inf")], epsilon=1.0)
    with pytest.raises(ParameterError, match="empty"):
        report_noisy_max([], epsilon=1.0)
    with pytest.raises(ParameterError, match="1-dimensional"):
        exponential_mechanism([[1.0, 2.0]], epsilon=1.0)
    with pytest.raises(ParameterError, match="sensitivity"):
        laplace([1.0], epsilon=1.0, sensitivity=0)
    with pytest.raises(ParameterError, match="numeric"):
        laplace(["a"], epsilon=1.0)
