"""Privacy of MAXGDDP and DiffGen: exact report-noisy-max ratios, and whole releases through ``publish``.

The whole-publisher tests run ``publish`` on two neighbouring tiny tables (add one record), map
each release to a small public outcome (the history, and whether the cell holding the added
record was released), and bound ``P[outcome | D'] / P[outcome | D]`` in both directions with
two-sided Clopper-Pearson intervals (``statutils.max_ratio_lower_bound``): the test fails if a
*lower* confidence bound of some ratio exceeds ``e^epsilon``. An outcome seen on one side only
is not skipped: its zero count gives a small upper bound on that side, so a frequent outcome
that is impossible on the other side fails the test. Each test has a negative control at half
the noise (``2 epsilon`` with the ledger still saying ``epsilon``) that it must detect.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from decision_helpers import make_frame, make_schema
from scipy import integrate
from statutils import max_ratio_lower_bound

from privpub.core import report_noisy_max, sparse_noisy_counts
from privpub.decision import MAXGDDP, CategoricalAttribute, DecisionRelease, DiffGen, NumericAttribute, Schema
from privpub.decision._maxgddp import apply, candidates, score_candidates
from privpub.decision._model import Cut, encode_frame

#: error probability of each two-sided Clopper-Pearson interval
ALPHA = 1e-3


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


def _rnm_draws(scores: np.ndarray, epsilon: float, draws: int, gen: np.random.Generator) -> np.ndarray:
    return np.array([report_noisy_max(scores, epsilon=epsilon, monotone=True, rng=gen) for _ in range(draws)])


@pytest.mark.statistical
def test_rnm_neighbour_ratio_passes_and_fails_with_half_the_noise() -> None:
    """Scores [0,1,1] vs [0,0,0]: exact ln-ratio 0.85 at Lap(1/eps), 1.80 at Lap(1/(2 eps))."""
    eps = 1.0
    c, cp = np.array([0.0, 1, 1]), np.zeros(3)
    g = np.random.default_rng(1)
    assert max_ratio_lower_bound(_rnm_draws(c, eps, 20_000, g), _rnm_draws(cp, eps, 20_000, g), ALPHA) <= math.e**eps
    # half the noise = what MAXGDDP would release with a scale of 1/(2 eps_i): detected
    half = max_ratio_lower_bound(_rnm_draws(c, 2 * eps, 20_000, g), _rnm_draws(cp, 2 * eps, 20_000, g), ALPHA)
    assert half > math.e**eps


@pytest.mark.statistical
def test_selection_on_neighbouring_tables_within_epsilon() -> None:
    """Real Max scores of D and D minus one record move by 0/+1; RNM over them stays within eps."""
    schema = make_schema(2)
    df = make_frame(40, 2, seed=3)
    attrs = MAXGDDP(levels=1).compile(schema)
    cuts = [Cut.root(a) for a in attrs]
    apply(cuts, candidates(cuts)[1])
    cands = candidates(cuts)
    f, y = encode_frame(attrs, schema, df, with_class=True)
    u = score_candidates(cands, cuts, f, y, 2, "max_partition").astype(float)
    g = np.random.default_rng(7)
    for drop in range(3):
        keep = np.arange(len(y)) != drop
        up = score_candidates(cands, cuts, f[keep], y[keep], 2, "max_partition").astype(float)
        assert set(np.unique(u - up)) <= {0.0, 1.0}
        assert max_ratio_lower_bound(_rnm_draws(u, 0.5, 4_000, g), _rnm_draws(up, 0.5, 4_000, g), ALPHA) <= math.e**0.5


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


# ---------------------------------------------------------------------------------------------
# whole publishers, through publish
# ---------------------------------------------------------------------------------------------
def _outcomes(publish: Callable[..., DecisionRelease], frame: pd.DataFrame, record: pd.DataFrame, epsilon: float,
              runs: int, seed: int) -> np.ndarray:
    """``runs`` releases, each reduced to what a user sees of it: the history and whether the cell
    holding ``record`` was released (post-processing of the release)."""
    gen = np.random.default_rng(seed)
    fine: np.ndarray | None = None
    labels = []
    for _ in range(runs):
        rel = publish(frame, epsilon=epsilon, rng=gen)
        if fine is None:  # the record's codes over the public domains (same for every release)
            fine = encode_frame(rel.attrs, rel.schema, record, with_class=True)[0][0]
            cls = rel.schema.classes.index(record[rel.schema.class_name].iloc[0])
        cell = 0
        for j, size in enumerate(rel.radix):
            cell = cell * size + (int(rel.final_cuts[j].index(fine[j : j + 1])[0]) if j < fine.size else cls)
        released = "released" if np.isin(cell, rel.cell_ids) else "absent"
        labels.append(" | ".join(map(str, rel.history)) + " / " + released)
    return np.array(labels)


def _ratio_bound(publish: Callable[..., DecisionRelease], d: pd.DataFrame, added: pd.DataFrame, epsilon: float,
                 runs: int, seed: int) -> float:
    """Largest two-sided-CP lower bound on P[o | D + added] / P[o | D] (both ways) over outcomes o:
    the full outcome (history and released cell), and the released cell alone (a coarser event
    with more power when the selection moves little)."""
    out = _outcomes(publish, d, added, epsilon, runs, seed)
    out_nb = _outcomes(publish, pd.concat([d, added], ignore_index=True), added, epsilon, runs, seed + 1)
    cell = np.char.rpartition(out.astype(str), " / ")[:, 2]
    cell_nb = np.char.rpartition(out_nb.astype(str), " / ")[:, 2]
    return max(max_ratio_lower_bound(out, out_nb, ALPHA), max_ratio_lower_bound(cell, cell_nb, ALPHA))


# MAXGDDP, one level: five candidates (c, b, and the splits of n at 1, 2, 3) all score 2 on D; the
# added record raises exactly one of them (n at 1) and lands in a cell that is empty on D
RNM_SCHEMA = Schema([CategoricalAttribute("c", ["x", "y"]), CategoricalAttribute("b", ["u", "v"]),
                     NumericAttribute("n", 0, 4)], class_name="cls", classes=["p", "q"])
RNM_D = pd.DataFrame({"c": ["x", "x"], "b": ["u", "u"], "n": [0, 0], "cls": ["q", "q"]})
RNM_ADDED = pd.DataFrame({"c": ["x"], "b": ["u"], "n": [1], "cls": ["p"]})


def _maxgddp(frame: pd.DataFrame, *, epsilon: float, rng: Any) -> DecisionRelease:
    return MAXGDDP(levels=1, split=0.5).publish(frame, schema=RNM_SCHEMA, epsilon=epsilon, rng=rng)


@pytest.mark.statistical
def test_maxgddp_release_is_epsilon_dp_and_half_the_noise_is_detected() -> None:
    """Selection (eps_1 = 0.5: exact ln-ratio of the raised candidate ~0.44) and leaves (eps2 = 0.5:
    the cell of the added record released, ln-ratio 0.5) compose to ~0.94 <= epsilon = 1 for the
    outcome (n split at 1, cell released). At twice the epsilon (half the noise) the same outcome
    has ln-ratio ~1.77, which the test must flag."""
    eps = 1.0
    assert _ratio_bound(_maxgddp, RNM_D, RNM_ADDED, eps, 1_200, seed=10) <= math.e**eps
    half_noise = lambda frame, *, epsilon, rng: _maxgddp(frame, epsilon=2 * epsilon, rng=rng)  # noqa: E731
    assert _ratio_bound(half_noise, RNM_D, RNM_ADDED, eps, 1_200, seed=20) > math.e**eps


@pytest.mark.statistical
def test_noising_only_non_empty_cells_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """The classic leak (spec §2.8): a leaf release that noises only the non-empty cells never shows
    the added record's cell on D. The outcome is impossible on one side, and the test fails it."""
    from privpub.decision import _release

    def leaky(cells: Any, counts: Any, *, n_cells: int, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
        cells = np.asarray(cells)
        kept, noisy = sparse_noisy_counts(np.arange(cells.size), counts, n_cells=max(1, cells.size), **kwargs)
        return cells[kept], noisy

    monkeypatch.setattr(_release, "sparse_noisy_counts", leaky)
    out = _outcomes(_maxgddp, RNM_D, RNM_ADDED, 1.0, 300, seed=30)
    out_nb = _outcomes(_maxgddp, pd.concat([RNM_D, RNM_ADDED], ignore_index=True), RNM_ADDED, 1.0, 300, seed=31)
    assert not any(o.endswith("/ released") for o in out)  # never released on D ...
    assert max_ratio_lower_bound(out, out_nb, ALPHA) > math.e**1.0  # ... so the bound explodes


# DiffGen, one level, three binary categorical attributes, reuse_unspent: the selection costs
# eps' = epsilon / 4, the leaves get the other 3/4; the added record raises c's score and lands
# in a cell that is empty on D
EM_SCHEMA = Schema([CategoricalAttribute(a, ["x", "y"]) for a in "abc"], class_name="cls", classes=["p", "q"])
EM_D = pd.DataFrame({"a": ["x", "x"], "b": ["x", "x"], "c": ["x", "x"], "cls": ["q", "q"]})
EM_ADDED = pd.DataFrame({"a": ["x"], "b": ["x"], "c": ["y"], "cls": ["p"]})


def _diffgen(frame: pd.DataFrame, *, epsilon: float, rng: Any) -> DecisionRelease:
    return DiffGen(levels=1, reuse_unspent=True).publish(frame, schema=EM_SCHEMA, epsilon=epsilon, rng=rng)


@pytest.mark.statistical
def test_diffgen_release_is_epsilon_dp_and_half_the_noise_is_detected() -> None:
    """Ledger: selection 0.25 + leaves 0.75 = 1. The outcome (c, cell released) has ln-ratio <=
    0.125 + 0.75; at twice the epsilon ~0.16 + 1.5, which the test must flag."""
    rel = _diffgen(EM_D, epsilon=1.0, rng=0)
    assert [(e.step, e.epsilon) for e in rel.ledger] == [("level 1 selection", 0.25), ("leaf counts", 0.75)]
    eps = 1.0
    assert _ratio_bound(_diffgen, EM_D, EM_ADDED, eps, 1_000, seed=40) <= math.e**eps
    half_noise = lambda frame, *, epsilon, rng: _diffgen(frame, epsilon=2 * epsilon, rng=rng)  # noqa: E731
    assert _ratio_bound(half_noise, EM_D, EM_ADDED, eps, 1_000, seed=50) > math.e**eps


@pytest.mark.statistical
def test_diffgen_with_numeric_splits_has_no_impossible_outcome() -> None:
    """Root split, selection and child splits (a numeric attribute of 6 ticks, two levels): every
    history seen on one table is possible on its neighbour, within epsilon."""
    schema = Schema([NumericAttribute("n", 0, 6), CategoricalAttribute("c", ["x", "y"])],
                    class_name="cls", classes=["p", "q"])
    d = pd.DataFrame({"n": [0, 1, 5], "c": ["x", "x", "y"], "cls": ["q", "q", "p"]})
    added = pd.DataFrame({"n": [3], "c": ["y"], "cls": ["q"]})

    def publish(frame: pd.DataFrame, *, epsilon: float, rng: Any) -> DecisionRelease:
        return DiffGen(levels=2).publish(frame, schema=schema, epsilon=epsilon, rng=rng)

    assert _ratio_bound(publish, d, added, 1.0, 500, seed=60) <= math.e
