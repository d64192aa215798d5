"""Local-DP frequency oracles: exact privacy ratios, sampler fidelity, unbiasedness, simulation.

Privacy is checked on the *exact* output distribution on a tiny domain (every output
enumerated), and the sampler is checked to realise that distribution (chi-square). A negative
control -- the randomiser of a larger epsilon, i.e. less noise -- must fail the ratio check.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from statutils import chisquare_pvalue

from privpub.errors import DomainError, ParameterError
from privpub.ldp import GRR, OLH, OUE, SUE, clip_renormalise, norm_sub, sue_epsilon, sue_flip_probability

D = 4
EPS = 1.0
ORACLES = [GRR(domain_size=D), SUE(domain_size=D), OUE(domain_size=D)]


def exact_output_matrix(oracle: GRR | SUE | OUE, epsilon: float) -> np.ndarray:
    """P[output | input] for every input (rows) and every output (columns)."""
    p, q = oracle.probabilities(epsilon)
    d = oracle.domain_size
    if isinstance(oracle, GRR):
        return np.where(np.eye(d, dtype=bool), p, q)
    outputs = np.array(list(itertools.product([0, 1], repeat=d)), dtype=bool)
    rows = []
    for x in range(d):
        onehot = np.zeros(d, dtype=bool)
        onehot[x] = True
        probs = np.where(onehot, np.where(outputs, p, 1 - p), np.where(outputs, q, 1 - q))
        rows.append(probs.prod(axis=1))
    return np.array(rows)


def max_log_ratio(matrix: np.ndarray) -> float:
    return float(np.max(np.log(matrix[:, None, :] / matrix[None, :, :])))


def observed_outputs(
    oracle: GRR | SUE | OUE, x: int, n: int, epsilon: float, seed: int, packed: bool = True
) -> np.ndarray:
    if isinstance(oracle, GRR):
        reports = oracle.perturb(np.full(n, x), epsilon=epsilon, rng=seed)
        return np.bincount(reports, minlength=oracle.domain_size)
    reports = oracle.perturb(np.full(n, x), epsilon=epsilon, rng=seed, packed=packed)
    if packed:
        assert reports.dtype == np.uint8 and reports.shape == (n, oracle.packed_width)
        reports = np.unpackbits(reports, axis=1, count=oracle.domain_size, bitorder="little")
    codes = reports.astype(np.int64) @ (1 << np.arange(oracle.domain_size)[::-1])
    return np.bincount(codes, minlength=2**oracle.domain_size)


@pytest.mark.statistical
@pytest.mark.parametrize("oracle", ORACLES, ids=lambda o: type(o).__name__)
def test_exact_ratio_is_at_most_and_reaches_e_eps(oracle: GRR | SUE | OUE) -> None:
    ratio = max_log_ratio(exact_output_matrix(oracle, EPS))
    assert ratio <= EPS + 1e-12
    assert ratio >= EPS - 1e-7  # no wasted budget (2**-32 quantisation only)
    assert oracle.effective_epsilon(EPS) == pytest.approx(ratio, abs=1e-9)
    # negative control: the randomiser of 2 * epsilon (less noise) breaks the epsilon bound
    assert max_log_ratio(exact_output_matrix(oracle, 2 * EPS)) > EPS + 0.5


@pytest.mark.statistical
@pytest.mark.parametrize("oracle", ORACLES, ids=lambda o: type(o).__name__)
def test_sampler_realises_the_exact_distribution(oracle: GRR | SUE | OUE) -> None:
    matrix = exact_output_matrix(oracle, EPS)
    for x in range(D):
        obs = observed_outputs(oracle, x, 40_000, EPS, seed=100 + x)
        assert chisquare_pvalue(obs, matrix[x]) > 1e-4
    # the bool reports (packed=False) are the same draws
    np.testing.assert_array_equal(observed_outputs(oracle, 1, 2_000, EPS, seed=5, packed=False),
                                  observed_outputs(oracle, 1, 2_000, EPS, seed=5))
    # negative control: a sampler with less noise is detected by the same check
    half = observed_outputs(oracle, 0, 40_000, 2 * EPS, seed=7)
    assert chisquare_pvalue(half, matrix[0]) < 1e-8


@pytest.mark.statistical
def test_olh_conditional_ratio_and_sampler() -> None:
    oracle = OLH(domain_size=D)
    g = oracle.buckets(EPS)
    assert g == 4  # round(e) + 1
    p, _ = oracle._bucket_probabilities(EPS)
    q = (1 - p) / (g - 1)
    assert math.log(p / q) <= EPS + 1e-12 and math.log(p / q) >= EPS - 1e-7
    reports = oracle.perturb(np.zeros(60_000, dtype=np.int64), epsilon=EPS, rng=3)
    a, b, y = reports.T
    h = ((a * 0 + b) % (2**31 - 1)) % g
    kept = np.count_nonzero(y == h)
    assert abs(kept / y.size - p) < 5 * math.sqrt(p * (1 - p) / y.size)
    # reports of other buckets are uniform over the g - 1 others
    others = (y - h)[y != h] % g
    assert chisquare_pvalue(np.bincount(others, minlength=g)[1:], np.full(g - 1, 1 / (g - 1))) > 1e-4
    half = OLH(domain_size=D).perturb(np.zeros(60_000, dtype=np.int64), epsilon=2 * EPS, rng=3)
    assert abs(np.count_nonzero(half[:, 2] == (half[:, 1] % (2**31 - 1)) % g) / 60_000 - p) > 0.05


TRUE = np.array([500, 1500, 0, 3000, 1000, 4000])


@pytest.mark.statistical
@pytest.mark.parametrize("cls", [GRR, SUE, OUE, OLH], ids=lambda c: c.__name__)
def test_perturb_estimate_unbiased_and_agrees_with_simulate(cls: type) -> None:
    oracle = cls(domain_size=TRUE.size)
    values = np.repeat(np.arange(TRUE.size), TRUE)
    reps = 200
    gen = np.random.default_rng(42)
    per_user = np.array([oracle.estimate(oracle.perturb(values, epsilon=EPS, rng=gen), epsilon=EPS)
                         for _ in range(reps)])
    simulated = np.array([oracle.simulate(TRUE, epsilon=EPS, rng=gen) for _ in range(reps)])
    n = TRUE.sum()
    var = np.array([oracle.variance(n, epsilon=EPS, frequency=c / n) for c in TRUE])
    # unbiased: each mean within 4.5 standard errors of the truth (Bonferroni over 12 cells)
    for est in (per_user, simulated):
        z = (est.mean(axis=0) - TRUE) / np.sqrt(var / reps)
        assert np.all(np.abs(z) < 4.5), z
    # variance matches the analytic formula: sample variance / var ~ chi2(reps-1)/(reps-1)
    for est in (per_user, simulated):
        ratio = est.var(axis=0, ddof=1) / var
        assert np.all((ratio > 0.68) & (ratio < 1.38)), ratio


def test_simulate_is_fast_for_millions() -> None:
    oracle = OUE(domain_size=1024)
    counts = np.full(1024, 10_000)
    est = oracle.simulate(counts, epsilon=1.0, rng=0)
    assert est.shape == (1024,)
    assert abs(est.sum() - counts.sum()) < 10 * math.sqrt(oracle.variance(int(counts.sum()), epsilon=1.0) * 1024)


def test_packed_and_bool_reports_agree() -> None:
    for d in (2, 9, 64, 100, 1000):
        oracle = OUE(domain_size=d)
        x = np.random.default_rng(d).integers(0, d, 2000)
        packed = oracle.perturb(x, epsilon=1.0, rng=5)
        dense = oracle.perturb(x, epsilon=1.0, rng=5, packed=False)
        assert packed.dtype == np.uint8 and packed.shape == (2000, (d + 7) // 8)
        assert dense.dtype == bool and dense.shape == (2000, d)
        np.testing.assert_array_equal(
            np.unpackbits(packed, axis=1, count=d, bitorder="little").astype(bool), dense)
        if d % 8:  # padding bits are 0
            assert not np.any(packed[:, -1] >> (d % 8))
        expected = dense.sum(axis=0)
        np.testing.assert_array_equal(oracle.aggregate(packed), expected)
        np.testing.assert_array_equal(oracle.aggregate(dense), expected)
        np.testing.assert_array_equal(oracle.aggregate(dense.astype(np.int8)), expected)
        # uint64 words: the same bits in little-endian 64-bit words
        words = np.zeros((2000, (d + 63) // 64 * 8), dtype=np.uint8)
        words[:, : packed.shape[1]] = packed
        np.testing.assert_array_equal(oracle.aggregate(words.view("<u8")), expected)
        # padding bits of packed rows are ignored
        if d % 8:
            noisy = packed.copy()
            noisy[:, -1] |= np.uint8(0xFF << (d % 8) & 0xFF)
            np.testing.assert_array_equal(oracle.aggregate(noisy), expected)
        np.testing.assert_array_equal(oracle.estimate(packed, epsilon=1.0), oracle.estimate(dense, epsilon=1.0))


def test_same_seed_same_reports() -> None:
    for oracle in [GRR(domain_size=5), SUE(domain_size=5), OUE(domain_size=5), OLH(domain_size=5)]:
        a = oracle.perturb([0, 1, 4], epsilon=1.0, rng=9)
        b = oracle.perturb([0, 1, 4], epsilon=1.0, rng=9)
        np.testing.assert_array_equal(a, b)


def test_sue_flip_probability_conversion() -> None:
    f = sue_flip_probability(2.0)
    assert sue_epsilon(f) == pytest.approx(2.0)
    oracle = SUE(domain_size=3, f=f)
    assert oracle.effective_epsilon() == pytest.approx(2.0, abs=1e-7)
    with pytest.raises(ParameterError, match="disagrees"):
        oracle.perturb([0], epsilon=1.0)
    for bad in (0.0, 1.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ParameterError, match="f"):
            SUE(domain_size=3, f=bad)


def test_post_processing() -> None:
    est = np.array([5.0, 3.0, -2.0, 0.5])
    ns = norm_sub(est, total=6.0)
    assert ns.sum() == pytest.approx(6.0) and ns.min() >= 0
    np.testing.assert_allclose(ns, [4.0, 2.0, 0.0, 0.0])
    cr = clip_renormalise(est, total=17.0)
    assert cr.sum() == pytest.approx(17.0) and cr[2] == 0


@pytest.mark.parametrize("oracle", [GRR(domain_size=3), SUE(domain_size=3), OUE(domain_size=3), OLH(domain_size=3)],
                         ids=lambda o: type(o).__name__)
def test_bad_input(oracle: GRR) -> None:
    with pytest.raises(DomainError, match=r"\[0, 2\]"):
        oracle.perturb([0, 3], epsilon=1.0)
    with pytest.raises(DomainError, match=r"\[0, 2\]"):
        oracle.perturb([-1], epsilon=1.0)
    with pytest.raises(DomainError, match="finite"):
        oracle.perturb([0.0, float("nan")], epsilon=1.0)
    with pytest.raises(ParameterError, match="empty"):
        oracle.perturb([], epsilon=1.0)
    for eps in (0.0, -1.0, float("inf"), float("nan"), None):
        with pytest.raises(ParameterError, match="epsilon"):
            oracle.perturb([0], epsilon=eps)
    with pytest.raises(ParameterError, match="true_counts must have shape"):
        oracle.simulate([1, 2], epsilon=1.0)
    with pytest.raises(DomainError, match="non-negative"):
        oracle.simulate([1, -2, 3], epsilon=1.0)
    with pytest.raises(ParameterError, match="domain_size"):
        type(oracle)(domain_size=1)


def test_bad_report_shapes() -> None:
    with pytest.raises(ParameterError, match="reports must have shape"):
        OUE(domain_size=4).aggregate(np.zeros((3, 5), dtype=bool))
    with pytest.raises(DomainError, match="0/1"):
        SUE(domain_size=2).aggregate(np.array([[0, 2]]))
    with pytest.raises(ParameterError, match=r"\(n, 3\)"):
        OLH(domain_size=4).aggregate(np.zeros((3, 2), dtype=np.int64), epsilon=1.0)
