"""The table-driven stage of the exact discrete Laplace sampler (privpub.core._dlap_table).

The integer thresholds are checked against an independent 80-digit decimal computation, the
compiled look-up exhaustively on short words, and the whole route (look-up, ties resolved by
further bits, geometric tail) against the exact pmf with words so short that ties and tails
are frequent; a negative control shows that a wrong tie rule is detected.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from numba import njit
from statutils import chisquare_pvalue

from privpub.core import _dlap, _dlap_jit, _dlap_table, rational_scale
from privpub.core._dlap import discrete_laplace_exact, fill_tables, geometric_exact, uses_tables
from privpub.core._dlap_table import exp_neg_bounds, guide_bits, inverse_tables, resolve_tie, table_length

SCALES = [(1, 1), (10, 1), (7, 3), (1, 3), (3, 10), (64, 5), (1, 40), rational_scale(0.7, 1),
          rational_scale(0.05, 2), rational_scale(3.3, 2)]


def _c(kind: int, k: int, t: int, s: int, bits: int) -> Decimal:
    """c_k = 2**bits P[|Z| >= k] (kind 0) or 2**bits q^k (kind 1) with 80 significant digits."""
    with localcontext() as ctx:
        ctx.prec = 80
        q = (-Decimal(s) / Decimal(t)).exp()
        p = 2 * q**k / (1 + q) if kind == 0 else q**k
        return p * Decimal(2) ** bits


@pytest.mark.parametrize(("num", "den"), [(1, 1), (1, 3), (7, 5), (1000, 3), (3, 2**30), (2**30, 3), (0, 9)])
@pytest.mark.parametrize("prec", [64, 200])
def test_exp_bounds_bracket_the_exponential(num: int, den: int, prec: int) -> None:
    lo, hi = exp_neg_bounds(num, den, prec)
    with localcontext() as ctx:
        ctx.prec = 120
        exact = (-Decimal(num) / Decimal(den)).exp() * Decimal(2) ** prec
        slack = exact * Decimal(10) ** -100
        assert Decimal(lo) <= exact + slack and exact - slack <= Decimal(hi)
    assert hi - lo <= 4


@pytest.mark.parametrize(("t", "s"), SCALES)
@pytest.mark.parametrize("bits", [63, 8])
def test_thresholds_are_the_floors_of_the_survival_function(t: int, s: int, bits: int) -> None:
    tab = inverse_tables(t, s, bits)
    for kind, thr in ((0, tab.lap), (1, tab.geo)):
        n = thr.size - 2
        assert 1 <= n <= table_length(t, s) and thr[0] == 0 and thr[-1] == -1
        values = [int(v) for v in thr[1:-1]]
        assert values == [math.floor(_c(kind, k, t, s, bits)) for k in range(1, n + 1)], (kind, t, s)
        assert all(a > b for a, b in itertools.pairwise(values))
        assert n == 1 or values[-1] >= 1
        if n < table_length(t, s):  # cut short: the next floor is 0 or repeats the last one
            nxt = math.floor(_c(kind, n + 1, t, s, bits))
            assert nxt < 1 or nxt >= values[-1]


@njit
def _look_up_all(words, thr, guide, shift):  # type: ignore[no-untyped-def]
    m = np.empty(words.size, dtype=np.int64)
    tie = np.empty(words.size, dtype=np.bool_)
    for i in range(words.size):
        m[i], tie[i] = _dlap_jit._look_up(words[i], thr, guide, shift)
    return m, tie


@pytest.mark.parametrize(("t", "s"), SCALES)
@pytest.mark.parametrize("bits", [8, 12])
def test_look_up_counts_the_thresholds_above_every_word(t: int, s: int, bits: int) -> None:
    """Every ``bits``-bit word: ``m = #{k: w < T_k}`` and a tie exactly when ``w == T_(m+1)``."""
    tab = inverse_tables(t, s, bits)
    words = np.arange(1 << bits, dtype=np.int64)
    for thr, guide in ((tab.lap, tab.lap_guide), (tab.geo, tab.geo_guide)):
        m, tie = _look_up_all(words, thr, guide, bits - guide_bits(bits))
        body = thr[1:-1]
        np.testing.assert_array_equal(m, (words[:, None] < body[None, :]).sum(axis=1))
        np.testing.assert_array_equal(tie, np.isin(words, body) & (words == thr[np.minimum(m + 1, thr.size - 1)]))


def _laplace_pvalue(sample: np.ndarray, t: int, s: int) -> float:
    """Chi-square p-value against the exact pmf on integer bins (thin tails merged)."""
    q = math.exp(-s / t)
    top = max(3, int(12 * t / s))
    z = np.arange(-top, top + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(z).astype(np.float64)
    observed = np.array([np.count_nonzero(sample < -top), *np.bincount(sample[np.abs(sample) <= top] + top,
                                                                        minlength=z.size),
                         np.count_nonzero(sample > top)])
    expected = np.array([q ** (top + 1) / (1 + q), *pmf, q ** (top + 1) / (1 + q)])
    return _merged_pvalue(observed, expected)


def _geometric_pvalue(sample: np.ndarray, t: int, s: int) -> float:
    q = math.exp(-s / t)
    top = max(3, int(12 * t / s))
    y = np.arange(top + 1)
    expected = np.append((1 - q) * q ** y.astype(np.float64), q ** (top + 1))
    observed = np.append(np.bincount(np.minimum(sample, top + 1), minlength=top + 2)[:top + 1],
                         np.count_nonzero(sample > top))
    return _merged_pvalue(observed, expected)


def _merged_pvalue(observed: np.ndarray, expected: np.ndarray) -> float:
    n = observed.sum()
    keep = expected * n >= 5
    grp = np.cumsum(keep) - 1
    grp[grp < 0] = 0
    obs = np.bincount(grp, weights=observed)
    exp = np.bincount(grp, weights=expected)
    return chisquare_pvalue(obs.astype(np.int64), exp)


@pytest.fixture
def tie_counter(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of resolve_tie made by fill_tables."""
    calls = [0]

    def counted(*args: object) -> bool:
        calls[0] += 1
        return resolve_tie(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_dlap, "resolve_tie", counted)
    return calls


@pytest.mark.statistical
@pytest.mark.parametrize(("t", "s"), [(5, 1), (7, 3), (1, 1), (1, 3), rational_scale(0.7, 1)])
@pytest.mark.parametrize("laplace", [True, False])
def test_short_words_with_frequent_ties_give_the_exact_pmf(t: int, s: int, laplace: bool,
                                                            tie_counter: list[int]) -> None:
    """6-bit words: about one draw in 64 per threshold ends in a tie, resolved by further bits; the
    tables are short, so the geometric tail runs often. The law must still be exact."""
    out = np.empty(60_000, dtype=np.int64)
    assert fill_tables(out, t, s, np.random.default_rng(t + 10 * s), laplace, bits=6)
    assert tie_counter[0] > 300
    pvalue = _laplace_pvalue(out, t, s) if laplace else _geometric_pvalue(out, t, s)
    assert pvalue > 1e-4


@pytest.mark.statistical
@pytest.mark.parametrize("answer", [True, False])
def test_a_wrong_tie_rule_is_detected(answer: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: ties always resolved one way (4-bit words) visibly change the law."""
    monkeypatch.setattr(_dlap, "resolve_tie", lambda *args: answer)
    out = np.empty(60_000, dtype=np.int64)
    assert fill_tables(out, 7, 3, np.random.default_rng(1), True, bits=4)
    assert _laplace_pvalue(out, 7, 3) < 1e-9


@pytest.mark.statistical
def test_tie_resolution_has_the_fractional_probability() -> None:
    """P[resolve_tie] = frac(c_k) within 5 standard deviations (4-bit words, where frac is large)."""
    gen = np.random.default_rng(3)
    n = 6_000
    for kind, k in ((0, 1), (1, 2)):
        c = _c(kind, k, 7, 3, 4)
        whole = math.floor(c)
        p = float(c - whole)
        hits = sum(resolve_tie(gen, kind, k, whole, 7, 3, 4) for _ in range(n))
        assert abs(hits / n - p) <= 5 * math.sqrt(p * (1 - p) / n)


def test_routes_and_determinism() -> None:
    t, s = rational_scale(0.7, 1)
    assert uses_tables(10_000, t, s) and uses_tables(1, t, s)  # a short table serves any size
    assert uses_tables(10**6, 1000, 1) and not uses_tables(10, 1000, 1)  # 3,466 thresholds
    assert not uses_tables(10**9, 2**52, 1)  # a table would be too long: the loop sampler
    assert uses_tables(10**6, 1, 2**30)
    a = discrete_laplace_exact(50_000, t, s, np.random.default_rng(4))
    np.testing.assert_array_equal(a, discrete_laplace_exact(50_000, t, s, np.random.default_rng(4)))
    g = geometric_exact(50_000, t, s, np.random.default_rng(4))
    assert g.min() >= 0
    for bitgen in (np.random.MT19937, np.random.Philox):
        out = discrete_laplace_exact(100_000, t, s, np.random.Generator(bitgen(5)))
        assert _laplace_pvalue(out, t, s) > 1e-4


def test_table_module_has_no_floating_point() -> None:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(_dlap_table))
    for node in ast.walk(tree):
        assert not (isinstance(node, ast.Constant) and isinstance(node.value, float)), node.lineno
        assert not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)), node.lineno
        if isinstance(node, ast.Name):
            assert node.id != "float", node.lineno
