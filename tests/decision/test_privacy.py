"""Privacy of the selection step: exact report-noisy-max ratios and empirical neighbour ratios."""

from __future__ import annotations

import numpy as np
import pytest
from decision_helpers import make_frame, make_schema
from scipy import integrate

from privpub.core import report_noisy_max
from privpub.decision import MAXGDDP
from privpub.decision._maxgddp import apply, candidates, score_candidates
from privpub.decision._model import Cut, encode_frame


def rnm_prob(c: np.ndarray, i: int, scale: float) -> float:
    """P[argmax(c + Lap(scale)) = i] = ∫ f(x) prod_{j != i} F(c_i + x - c_j) dx (scipy quad)."""
    others = np.delete(np.asarray(c, dtype=float), i)
    kinks = sorted({0.0, *(others - c[i]).tolist()})

    def f(x: float) -> float:
        z = (c[i] + x - others) / scale
        cdf = np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0)), 1 - 0.5 * np.exp(-np.maximum(z, 0)))
        return float(np.exp(-abs(x) / scale) / (2 * scale) * np.prod(cdf))
    return integrate.quad(f, -40 * scale, 40 * scale, points=kinks, limit=200, epsabs=1e-13)[0]


@pytest.mark.statistical
def test_exact_rnm_ratio_bounded_for_monotone_neighbours() -> None:
    rng = np.random.default_rng(0)
    eps = 1.0
    worst = 0.0
    for _ in range(40):
        n = int(rng.integers(2, 5))
        c = rng.integers(0, 4, n).astype(float)
        cp = c - rng.integers(0, 2, n)
        for i in range(n):
            worst = max(worst, abs(np.log(rnm_prob(c, i, 1 / eps) / rnm_prob(cp, i, 1 / eps))))
    assert worst <= eps + 1e-6
    # the spec's reference values: monotone pairs 0.57 / 0.74; a non-monotone pair breaks Lap(1/eps)
    c = np.array([3.0, 2, 2])
    assert abs(np.log(rnm_prob(c, 0, 1) / rnm_prob(np.array([2.0, 2, 2]), 0, 1))) == pytest.approx(0.571, abs=2e-3)
    a, b = np.array([0.0, 1, 3, 3, 3]), np.array([0.0, 0, 4, 4, 4])
    assert abs(np.log(rnm_prob(a, 1, 1) / rnm_prob(b, 1, 1))) == pytest.approx(1.99, abs=1e-2)


def _empirical_ln_ratio(c: np.ndarray, cp: np.ndarray, epsilon: float, draws: int, seed: int) -> tuple[float, float]:
    """Largest |ln P_c(i)/P_c'(i)| over outputs and its standard error, from sampled RNM runs."""
    g = np.random.default_rng(seed)
    out1 = np.array([report_noisy_max(c, epsilon=epsilon, monotone=True, rng=g) for _ in range(draws)])
    out2 = np.array([report_noisy_max(cp, epsilon=epsilon, monotone=True, rng=g) for _ in range(draws)])
    k1 = np.bincount(out1, minlength=len(c))
    k2 = np.bincount(out2, minlength=len(c))
    ok = (k1 > 500) & (k2 > 500)
    lr = np.abs(np.log(k1[ok] / k2[ok]))
    se = np.sqrt(1 / k1[ok] + 1 / k2[ok])
    j = int(np.argmax(lr))
    return float(lr[j]), float(se[j])


@pytest.mark.statistical
def test_rnm_neighbour_ratio_passes_and_fails_with_half_the_noise() -> None:
    """Scores [0,1,1] vs [0,0,0]: exact ln-ratio 0.85 at Lap(1/eps), 1.80 at Lap(1/(2 eps))."""
    eps = 1.0
    c, cp = np.array([0.0, 1, 1]), np.zeros(3)
    lr, se = _empirical_ln_ratio(c, cp, eps, 40_000, seed=1)
    assert lr <= eps + 4 * se
    # half the noise = what MAXGDDP would release with a scale of 1/(2 eps_i): detected
    lr_half, se_half = _empirical_ln_ratio(c, cp, 2 * eps, 40_000, seed=2)
    assert lr_half > eps + 4 * se_half


@pytest.mark.statistical
def test_selection_on_neighbouring_tables_within_epsilon() -> None:
    """Real Max scores of D and D minus one record move by 0/+1; RNM on the leading candidates stays within eps."""
    schema = make_schema(2)
    df = make_frame(40, 2, seed=3)
    attrs = MAXGDDP(levels=1).compile(schema)
    cuts = [Cut.root(a) for a in attrs]
    apply(cuts, candidates(cuts)[1])
    cands = candidates(cuts)
    f, y = encode_frame(attrs, schema, df, with_class=True)
    u = score_candidates(cands, cuts, f, y, 2, "max_partition").astype(float)
    best = 0.0
    for drop in range(5):
        keep = np.arange(len(y)) != drop
        up = score_candidates(cands, cuts, f[keep], y[keep], 2, "max_partition").astype(float)
        assert set(np.unique(u - up)) <= {0.0, 1.0}
        # only the candidates near the top matter in distribution; restrict for speed
        top = np.argsort(-u)[:4]
        lr, se = _empirical_ln_ratio(u[top] - u[top].max(), up[top] - u[top].max(), 0.5, 8_000, seed=drop)
        best = max(best, lr - 4 * se)
    assert best <= 0.5


def _history_probs(df, schema, levels: int, budgets, score: str) -> dict[tuple[int, ...], float]:
    """Exact probability of every selection history of MAXGDDP (RNM probabilities by quadrature)."""
    attrs = MAXGDDP(levels=levels).compile(schema)
    f, y = encode_frame(attrs, schema, df, with_class=True)
    out: dict[tuple[int, ...], float] = {}

    def walk(cuts, prefix: tuple[int, ...], p: float) -> None:
        if len(prefix) == levels:
            out[prefix] = p
            return
        cands = candidates(cuts)
        u = score_candidates(cands, cuts, f, y, 2, score).astype(float)
        for j in range(len(cands)):
            nxt = [c.copy() for c in cuts]
            apply(nxt, cands[j])
            walk(nxt, (*prefix, j), p * rnm_prob(u, j, 1 / budgets[len(prefix)]))

    walk([Cut.root(a) for a in attrs], (), 1.0)
    return out


@pytest.mark.statistical
@pytest.mark.parametrize("score", ["max_partition", "max"])
def test_end_to_end_selection_history_is_eps1_dp(score) -> None:
    """5 records vs the same minus one; Any -> {a, b} and a numeric attribute with T = 4; h = 2,
    eps1 = 1. Exact history probabilities: max |ln ratio| <= eps1 (0.88 here), and > eps1 (1.80) with half the noise."""
    import pandas as pd

    from privpub.decision import CategoricalAttribute, NumericAttribute, Schema

    schema = Schema([CategoricalAttribute("c", ["a", "b"]), NumericAttribute("t", lo=0, hi=4)],
                    class_name="y", classes=["k0", "k1"])
    df = pd.DataFrame({"c": ["a", "a", "b", "b", "a"], "t": [0, 1, 2, 3, 3], "y": ["k0", "k0", "k1", "k1", "k1"]})
    budgets = MAXGDDP(levels=2, split=0.5).level_budgets(2.0)  # eps1 = 1
    worst, worst_half = 0.0, 0.0
    for drop in (1, 2, 4):
        p = _history_probs(df, schema, 2, budgets, score)
        q = _history_probs(df.drop(index=drop), schema, 2, budgets, score)
        assert sum(p.values()) == pytest.approx(1.0, abs=1e-6)
        worst = max(worst, max(abs(np.log(p[k] / q[k])) for k in p))
        half = [2 * b for b in budgets]
        ph = _history_probs(df, schema, 2, half, score)
        qh = _history_probs(df.drop(index=drop), schema, 2, half, score)
        worst_half = max(worst_half, max(abs(np.log(ph[k] / qh[k])) for k in ph))
    assert worst <= 1.0 + 1e-6
    assert worst_half > 1.0  # Lap(1/(2 eps_i)) breaks the guarantee on this table
