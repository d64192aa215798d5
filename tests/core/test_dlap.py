"""The compiled exact discrete Laplace sampler (privpub.core._dlap): distribution, exactness, determinism.

Every code path of the kernel is checked against the exact pmf by a chi-square test on fixed
seeds; the continuation paths (the loop of [CKS20] continued step by step after the steps one
word decides) are forced by lowering ``max_steps``, which must not change the distribution.
The integer thresholds and the Bernoulli(exp(-1)) digit rule are checked exactly against their
definitions, and the sampler's source is checked to contain no floating-point operation.
"""

from __future__ import annotations

import ast
import inspect
import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from numba import njit
from statutils import chisquare_pvalue

from privpub.core import _dlap, _dlap_jit, _dlap_table, discrete_laplace_noise, rational_scale
from privpub.core._dlap import bernoulli_exp_exact, discrete_laplace_exact, geometric_exact, sampler_tables
from privpub.errors import DomainError, ParameterError


def _cdf(z: np.ndarray, t: int, s: int) -> np.ndarray:
    """P[Z <= z] of the discrete Laplace with P[Z = z] proportional to exp(-|z| s / t)."""
    p = math.exp(-s / t)
    z = np.asarray(z, dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore"):
        return np.where(z >= 0, 1.0 - p ** (z + 1) / (1 + p), p ** (-z) / (1 + p))


def _fit_pvalue(sample: np.ndarray, t: int, s: int) -> float:
    """Chi-square p-value of ``sample`` against the scale-``t/s`` pmf, on bins of about 1/3 scale."""
    scale = t / s
    width = max(1, int(scale / 3))
    half = int(np.ceil(8 * scale / width + 2)) * width
    edges = np.arange(-half, half + width, width) - 0.5  # bins [e_k, e_k+1) of integers
    inner = np.histogram(sample, bins=edges)[0]
    observed = np.concatenate([[np.count_nonzero(sample < edges[0])], inner,
                               [np.count_nonzero(sample >= edges[-1])]])
    cuts = _cdf(np.floor(edges), t, s)  # P[Z <= floor(e)] = P[Z < e] for half-integer e
    expected = np.diff(np.concatenate([[0.0], cuts, [1.0]]))
    keep = expected * sample.size >= 5  # merge the thin tail bins into their neighbours
    if not keep.all():
        grp = np.cumsum(keep) - 1
        grp[grp < 0] = 0
        observed = np.bincount(grp, weights=observed).astype(np.int64)
        expected = np.bincount(grp, weights=expected)
    return chisquare_pvalue(observed, expected)


HUGE_T, HUGE_S = rational_scale(0.7, 3)  # 4601750675 / 2**30: one word decides no step

CASES = [  # (t, s): both routes, unit and non-integer scales, powers of two, huge numerators
    (1, 1), (2, 1), (10, 1), (1000, 1), (10, 3), (30, 7), (1000, 3), (4, 3), (64, 5),
    (1, 2), (1, 10), (3, 10), (7, 30), (2, 7), (5, 5 * 2**20 + 1),
    (HUGE_T, HUGE_S), (2**40 + 3, 2**39), (2**52, 1), (3, 2**30),
]


#: every case on the forced loop, and on the default route where that is the threshold tables
ROUTES = [(t, s, "loop") for t, s in CASES] + [(t, s, "default") for t, s in CASES
                                               if _dlap.uses_tables(300_000, t, s)]


@pytest.mark.statistical
@pytest.mark.parametrize(("t", "s", "route"), ROUTES)
def test_exact_pmf_on_every_route(t: int, s: int, route: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both samplers: the threshold tables (the default for these sizes when the scale is below
    about 2,300, see test_dlap_table.py) and the loop of [CKS20] (forced)."""
    if route == "loop":
        monkeypatch.setattr(_dlap, "uses_tables", lambda *args: False)
    sample = discrete_laplace_exact(300_000, t, s, np.random.default_rng(t % 9973 + s))
    assert sample.dtype == np.int64
    if s > 40 * t:  # P[Z != 0] = 2p / (1 + p) < 2 exp(-40) per draw
        assert not sample.any()
    else:
        assert _fit_pvalue(sample, t, s) > 1e-4


@pytest.mark.statistical
@pytest.mark.parametrize("max_steps", [0, 1, 2])
@pytest.mark.parametrize(("t", "s"), [(2, 1), (10, 1), (1000, 3), (3, 10), (1, 3), (7, 30)])
def test_step_by_step_continuation_gives_the_same_pmf(t: int, s: int, max_steps: int) -> None:
    """With fewer steps decided per word the loop continues step by step more often (max_steps=0:
    every step from a fresh word); the distribution must not change."""
    tables = sampler_tables(t, s, max_steps)
    assert tables.kc.size <= max_steps and tables.thr_f.size <= max_steps
    out = np.empty(300_000, dtype=np.int64)
    assert _dlap._jit().fill(np.random.default_rng(max_steps), out, t, s, *tables)
    assert _fit_pvalue(out, t, s) > 1e-4


@pytest.mark.statistical
def test_fit_check_fails_for_a_slightly_wrong_scale() -> None:
    """Negative control: the binned chi-square tells scale 10 from scale 11."""
    sample = discrete_laplace_exact(300_000, 10, 1, np.random.default_rng(0))
    assert _fit_pvalue(sample, 11, 1) < 1e-9
    sample = discrete_laplace_exact(300_000, 1, 3, np.random.default_rng(0))  # mostly zeros
    assert _fit_pvalue(sample, 10, 33) < 1e-9


@pytest.mark.statistical
@pytest.mark.parametrize("route", ["default", "loop"])
@pytest.mark.parametrize(("t", "s"), [(1, 1), (1000, 1), (10, 3), (3, 10), (HUGE_T, HUGE_S)])
def test_geometric_has_the_exact_pmf(t: int, s: int, route: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The magnitude alone: P[Y = y] = (1 - q) q^y, q = exp(-s/t), on bins of about 1/3 scale
    (threshold tables by default, the loop of [CKS20] forced)."""
    if route == "loop":
        monkeypatch.setattr(_dlap, "uses_tables", lambda *args: False)
    y = geometric_exact(300_000, t, s, np.random.default_rng(s))
    q = math.exp(-s / t)
    width = max(1, int(t / s / 3))
    edges = np.arange(0, int(12 * t / s) + 2 * width, width)
    observed = np.append(np.histogram(y, bins=np.append(edges, np.inf))[0][:-1], np.count_nonzero(y >= edges[-1]))
    surv = q ** edges.astype(np.float64)  # P[Y >= e]
    expected = np.append(surv[:-1] - surv[1:], surv[-1])
    keep = expected * y.size >= 5
    observed = np.append(observed[keep], observed[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    assert y.min() >= 0
    assert chisquare_pvalue(observed, expected) > 1e-4


@pytest.mark.statistical
def test_bernoulli_exp_and_the_former_helpers() -> None:
    """bernoulli_exp_exact and the names core/_mechanisms kept for their callers
    (_bernoulli_exp_unit, _geometric_exp1): exact frequencies within 5 standard deviations."""
    from privpub.core import _mechanisms

    n = 400_000
    for num, den in ((0, 7), (3, 7), (7, 7), (5, 2**61)):
        hits = bernoulli_exp_exact(np.full(n, num), den, np.random.default_rng(num)).mean()
        p = math.exp(-num / den)
        assert abs(hits - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12, (num, den)
    u = np.random.default_rng(1).integers(0, 10, n)
    hits = _mechanisms._bernoulli_exp_unit(u, 10, np.random.default_rng(2))
    for k in (0, 4, 9):
        p = math.exp(-k / 10)
        assert abs(hits[u == k].mean() - p) <= 5 * math.sqrt(p * (1 - p) / np.count_nonzero(u == k)) + 1e-12
    v = _mechanisms._geometric_exp1(n, np.random.default_rng(3))
    mean = math.exp(-1) / (1 - math.exp(-1))  # geometric with ratio exp(-1)
    sd = math.sqrt(math.exp(-1)) / (1 - math.exp(-1))
    assert abs(v.mean() - mean) <= 5 * sd / math.sqrt(n)
    with pytest.raises(ParameterError, match="num <= den"):
        bernoulli_exp_exact(np.array([3]), 2, np.random.default_rng(0))


@njit
def _draw_loop(gen, n, u, t, k0):  # type: ignore[no-untyped-def]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = _dlap_jit._loop_from(gen.bit_generator, u, t, k0)
    return out


@pytest.mark.statistical
@pytest.mark.parametrize(("u", "t", "k0"), [(1, 1, 7), (3, 4, 1), (3, 4, 5), (1, 2**61, 1), (2**40, 2**61, 3)])
def test_continued_loop_has_the_exact_step_law(u: int, t: int, k0: int) -> None:
    """[CKS20] Alg. 1 from step k0: P[K > k | K >= k0] = gamma^(k-k0+1) (k0-1)! / k!."""
    n = 200_000
    ks = _draw_loop(np.random.default_rng(k0), n, u, t, k0)
    gamma = Fraction(u, t)
    support = list(range(k0, k0 + 8))
    tail = [float(gamma ** (k - k0 + 1) * Fraction(math.factorial(k0 - 1), math.factorial(k))) for k in support]
    surv = np.array([1.0, *tail])  # P[K > k - 1 | K >= k0] for k = k0, ..., k0 + 8
    expected = np.append(surv[:-1] - surv[1:], surv[-1])
    observed = np.append([np.count_nonzero(ks == k) for k in support], np.count_nonzero(ks > support[-1]))
    keep = expected * n >= 5
    observed = np.append(observed[keep], observed[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    if expected[-1] == 0.0:
        assert observed[-1] == 0
        observed, expected = observed[:-1], expected[:-1]
    assert ks.min() >= k0
    assert chisquare_pvalue(observed, expected) > 1e-4


def test_exp1_digit_rule_is_the_loop_definition() -> None:
    """For every base-720 digit d >= 1 the branch-free parity equals K odd with
    K = 1 + #{j <= 6: d < 6!/j!}; and P[odd, d >= 1] + P[d = 0] P[odd | K > 6] = exp(-1) exactly
    as series: sum over odd k of (1/(k-1)! - 1/k!)."""
    odd = njit(lambda d: _dlap_jit._exp1_odd(d))
    count = 0
    for d in range(1, 720):
        k = 1 + sum(d < 720 // math.factorial(j) for j in range(1, 7))
        assert odd(d) == (k % 2 == 1), d
        count += k % 2
    # the digits decide K <= 6 exactly: 720 * P[K odd, K <= 6] = 720 * (1 - 1/2 + 1/6 - 1/24 + 1/120 - 1/720) - 1
    exact = sum(Fraction(1, math.factorial(k - 1)) - Fraction(1, math.factorial(k)) for k in range(1, 7, 2))
    assert Fraction(count, 720) == exact


@pytest.mark.parametrize(("t", "s"), [(2, 1), (10, 1), (1000, 1), (4096, 7), (3, 10), (1000, 2999), (HUGE_T, HUGE_S)])
def test_thresholds_are_the_exact_loop_probabilities(t: int, s: int) -> None:
    """kc and thr_f, divided by their multiplier, are t^(m-j) m!/j! and r^j t^(m-j) m!/j!, and
    every multiple fits in 63 bits (the kernel's comparisons are exact integer comparisons)."""
    tab = sampler_tables(t, s)
    word = 2**63
    if s < t:
        m = tab.kc.size
        if m:
            big = t**m * math.factorial(m)
            k = tab.kd // big
            assert k >= 64 and tab.kd == k * big and tab.lim_u == k * t * big < word
            for j in range(1, m + 1):
                assert int(tab.kc[j - 1]) == k * t ** (m - j) * (math.factorial(m) // math.factorial(j))
                assert (t - 1) ** j * int(tab.kc[j - 1]) < word
        else:
            assert t**2 * 64 > word
    else:
        g0, r = divmod(s, t)
        assert (tab.g0, tab.r) == (g0, r)
        m = tab.thr_f.size
        if r:
            assert m >= 1
            big = t**m * math.factorial(m)
            k = tab.lim_f // big
            assert k >= 64 and tab.lim_f == k * big < word
            for j in range(1, m + 1):
                frac = Fraction(int(tab.thr_f[j - 1]), tab.lim_f)  # P[K > j] of Bernoulli(exp(-r/t))
                assert frac == Fraction(r, t) ** j / math.factorial(j)
    assert tab.lim_t == tab.kt * t <= word - 1


def test_same_seed_same_draws_and_any_bit_generator() -> None:
    a = discrete_laplace_exact(1000, 10, 3, np.random.default_rng(5))
    b = discrete_laplace_exact(1000, 10, 3, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    gen = np.random.default_rng(5)
    first, second = discrete_laplace_exact(1000, 10, 3, gen), discrete_laplace_exact(1000, 10, 3, gen)
    np.testing.assert_array_equal(first, a)
    assert not np.array_equal(first, second)  # the generator's state advanced
    for bitgen in (np.random.MT19937, np.random.Philox, np.random.SFC64):
        out = discrete_laplace_exact(200_000, 10, 1, np.random.Generator(bitgen(3)))
        assert _fit_pvalue(out, 10, 1) > 1e-4
    assert discrete_laplace_exact(0, 10, 1, np.random.default_rng(0)).shape == (0,)
    np.testing.assert_array_equal(discrete_laplace_noise((2, 3), epsilon=0.5, rng=7).ravel(),
                                  discrete_laplace_exact(6, 2, 1, np.random.default_rng(7)))


def test_bad_scales_and_overflow_are_refused() -> None:
    with pytest.raises(ParameterError, match="t / s"):
        discrete_laplace_exact(10, 2**53, 1, np.random.default_rng(0))
    with pytest.raises(ParameterError, match="t / s"):
        discrete_laplace_exact(10, 0, 1, np.random.default_rng(0))
    # a scale of 2**61 leaves room for one multiple of t below 2**62: the kernel reports overflow
    out = np.empty(1000, dtype=np.int64)
    assert not _dlap._jit().fill(np.random.default_rng(0), out, 2**61, 1, *sampler_tables(2**61, 1))
    monkey = _dlap.sampler_tables(2**52, 1)
    assert monkey.kc.size == 0
    with pytest.raises(DomainError, match="2\\*\\*62"):
        _raise_overflow()


def _raise_overflow() -> None:
    original = _dlap._MAX_INT
    try:
        _dlap._MAX_INT = 2**62
        discrete_laplace_exact(1000, 2**61, 1, np.random.default_rng(0))
    finally:
        _dlap._MAX_INT = original


def test_sampler_code_has_no_floating_point() -> None:
    """No float literal, true division, float() or math/np float function in the sampler's code."""
    for module in (_dlap, _dlap_jit, _dlap_table):
        tree = ast.parse(inspect.getsource(module))
        for node in ast.walk(tree):
            assert not (isinstance(node, ast.Constant) and isinstance(node.value, float)), (module, node.lineno)
            assert not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)), (module, node.lineno)
            assert not (isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div)), (module, node.lineno)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                assert node.func.attr not in {"exp", "log", "log1p", "expm1", "float64", "random", "laplace",
                                              "uniform", "exponential", "geometric"}, (module, node.lineno)
            if isinstance(node, ast.Name):
                assert node.id != "float", (module, node.lineno)


def test_import_does_not_load_numba() -> None:
    code = "import sys, privpub, privpub.core, privpub.histogram, privpub.stream; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
