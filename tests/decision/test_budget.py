"""Level budgets and the sealed ledgers of MAXGDDP and DiffGen (spec §2.6, §3; oracle 2).

The ledger is the accountant's record of what the mechanisms charged as they drew; these tests
rebuild the expected schedule from the public release (its history) and compare it entry by
entry: step, mechanism, epsilon, sensitivity, composition, parts.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privpub.decision
from privpub import Session
from privpub.core import LedgerEntry
from privpub.decision import MAXGDDP, CategoricalAttribute, DecisionRelease, DiffGen, NumericAttribute, Schema
from privpub.decision._kernels import level_budgets, max_levels
from privpub.errors import BudgetExceededError, DomainError, ParameterError

R = 3 ** (1 / 3)


def test_geometric_schedule_matches_corrected_formula() -> None:
    got = level_budgets(0.5, 5)
    np.testing.assert_allclose(got, [0.042197, 0.060859, 0.087774, 0.126592, 0.182577], atol=5e-7)
    for h in (1, 2, 5, 13, 16, 60):
        eps = level_budgets(0.37, h)
        assert math.fsum(eps) == pytest.approx(0.37, abs=1e-12)
        formula = [0.37 * R ** (i - 1) * (R - 1) / (R**h - 1) for i in range(1, h + 1)]
        np.testing.assert_allclose(eps, formula, rtol=1e-12)
        f = [3.0 ** (i - 1) for i in range(1, h + 1)]  # fan-outs with ratio 3: eps_i ∝ f_i^(1/3)
        np.testing.assert_allclose(eps, 0.37 * np.cbrt(f) / np.cbrt(f).sum(), rtol=1e-12)
        if h > 1:
            np.testing.assert_allclose(np.asarray(eps[1:]) / eps[:-1], R, rtol=1e-12)
        # the first levels of a long schedule, without materialising the rest
        np.testing.assert_allclose(level_budgets(0.37, h, count=3), eps[:3], rtol=1e-12)
    assert level_budgets(0.5, 1) == (0.5,)
    assert level_budgets(0.5, 16)[0] == pytest.approx(0.00127 * 0.5, rel=1e-2)
    np.testing.assert_allclose(level_budgets(0.6, 4, "uniform"), [0.15] * 4)
    assert level_budgets(0.6, 10**12, "uniform", count=2) == (0.6e-12, 0.6e-12)


def test_levels_beyond_a_usable_schedule_are_refused() -> None:
    """A level budget below 2**-51 would need a noise scale beyond 2**52: refused, naming the limit."""
    assert max_levels(0.5) == 92
    level_budgets(0.5, 92)
    with pytest.raises(ParameterError, match=re.escape("levels=93 with schedule='geometric' gives level 1 a budget "
                                                       "of 3.6e-16 out of eps1=0.5, below the smallest usable level budget 2**-51")):
        level_budgets(0.5, 93)
    with pytest.raises(ParameterError, match="about 1e-1592 .* at most 92 levels are possible: lower levels "
                                             r", raise epsilon or use the uniform schedule; pass schedule='uniform'"):
        level_budgets(0.5, 10_000)
    with pytest.raises(ParameterError, match="at most 225179 levels"):
        level_budgets(1e-10, 10**7, "uniform")


def _expected_maxgddp(pub: MAXGDDP, rel: DecisionRelease, eps: float) -> list[tuple]:
    sched = level_budgets(eps * pub.split, pub.levels, pub.schedule, pub.fanout_ratio, count=len(rel.history))
    rows = [(f"level {i + 1} selection", "report_noisy_max", e_i, 1.0, "sequential", 1) for i, e_i in enumerate(sched)]
    mech = "laplace" if pub.noise == "laplace" else "discrete_laplace"
    rows.append(("leaf counts", mech, eps - eps * pub.split, 1.0, "sequential", 1))
    return rows


def _rows(rel: DecisionRelease) -> list[tuple]:
    return [(e.step, e.mechanism, e.epsilon, e.sensitivity, e.composition, e.parts) for e in rel.ledger]


def _assert_rows(got: list[tuple], want: list[tuple]) -> None:
    assert [r[:2] + r[3:] for r in got] == [r[:2] + r[3:] for r in want]
    np.testing.assert_allclose([r[2] for r in got], [r[2] for r in want], rtol=1e-12)


@pytest.mark.parametrize(("eps", "h", "sp", "kwargs"), [
    (1.0, 5, 0.5, {}), (0.3, 3, 0.3, {"noise": "laplace"}), (2.0, 8, 0.7, {"schedule": "uniform"}),
    (1.0, 4, 0.5, {"score": "max", "fanout_ratio": 5.0}),
])
def test_maxgddp_ledger_is_the_schedule(frame, schema, eps, h, sp, kwargs) -> None:
    pub = MAXGDDP(levels=h, split=sp, **kwargs)
    rel = pub.publish(frame, schema=schema, epsilon=eps, rng=1)
    assert len(rel.history) == h
    _assert_rows(_rows(rel), _expected_maxgddp(pub, rel, eps))
    assert rel.ledger.total == pytest.approx(eps, abs=1e-12) and rel.ledger.total <= eps * (1 + 1e-9)
    assert rel.ledger.epsilon == eps and rel.ledger.frozen and rel.private
    leaf = rel.ledger.entries[-1]
    assert str(rel.n_cells) in leaf.note and "empty ones included" in leaf.note
    assert all("candidates, Lap(1/eps_i), monotone Max scores" in e.note for e in rel.ledger.entries[:-1])


def test_maxgddp_early_stop_leaves_budget_unspent(frame) -> None:
    schema = Schema([NumericAttribute("x", lo=0, hi=3)], class_name="y", classes=["k0", "k1"])
    pub = MAXGDDP(levels=6)
    rel = pub.publish(frame.assign(x=frame["x"] % 3), schema=schema, epsilon=1.0, rng=0)
    assert len(rel.history) == 2  # T = 3 ticks: two splits, then nothing is left
    _assert_rows(_rows(rel), _expected_maxgddp(pub, rel, 1.0))
    assert rel.ledger.total == pytest.approx(0.5 + math.fsum(pub.level_budgets(1.0)[:2]), abs=1e-12)
    assert rel.ledger.total < 1.0
    # a schedule far longer than the schema allows: only the levels that run are computed
    long = MAXGDDP(levels=80, schedule="uniform")
    rel = long.publish(frame.assign(x=frame["x"] % 3), schema=schema, epsilon=1.0, rng=0)
    assert [e.epsilon for e in rel.ledger][:2] == [pytest.approx(0.5 / 80)] * 2


def _expected_diffgen(pub: DiffGen, rel: DecisionRelease, schema: Schema, eps: float) -> list[tuple]:
    """The DiffGen schedule, rebuilt from the public history."""
    attrs = pub.compile(schema)
    e = pub.step_epsilon(eps, schema)
    du = math.log2(len(schema.classes)) if pub.score == "infogain" else 1.0
    em = "exponential_mechanism"
    rows = [(f"root split {a.name}", em, e, du, "sequential", 1) for a in attrs if a.kind == "ticks" and a.n_fine >= 2]
    numeric = {a.name: a for a in attrs if a.kind == "ticks"}
    for i, step in enumerate(rel.history, start=1):
        rows.append((f"level {i} selection", em, e, du, "sequential", 1))
        if step.attribute in numeric:
            at = numeric[step.attribute]
            widths = [round((float(b) - float(a)) / at.q) for a, b in
                      (c.strip("[)").split(",") for c in step.children)]
            parts = sum(w >= 2 for w in widths)
            if parts:
                rows.append((f"level {i} child splits", em, e, du, "parallel", parts))
    spent = math.fsum(r[2] for r in rows if r[4] == "sequential") + e * sum(r[4] == "parallel" for r in rows)
    mech = "laplace" if pub.noise == "laplace" else "discrete_laplace"
    rows.append(("leaf counts", mech, eps - spent if pub.reuse_unspent else eps / 2, 1.0, "sequential", 1))
    return rows


@pytest.mark.parametrize("kwargs", [{}, {"score": "infogain"}, {"reuse_unspent": True}, {"noise": "laplace"}])
def test_diffgen_ledger_is_the_schedule(frame, schema, kwargs) -> None:
    h = 6
    pub = DiffGen(levels=h, **kwargs)
    e = 1.0 / (2 * (2 + 2 * h))
    assert pub.step_epsilon(1.0, schema) == pytest.approx(e)
    for seed in range(4):
        rel = pub.publish(frame, schema=schema, epsilon=1.0, rng=seed)
        _assert_rows(_rows(rel), _expected_diffgen(pub, rel, schema, 1.0))
        assert rel.ledger.total <= 1.0 * (1 + 1e-9)
        if pub.reuse_unspent:
            assert rel.ledger.total == pytest.approx(1.0, abs=1e-12)
        for entry in rel.ledger:  # the two children of a split interval: one parallel block
            if entry.composition == "parallel":
                assert entry.block == entry.step and entry.parts in (1, 2)


def test_diffgen_spends_everything_when_every_pick_is_a_splittable_interval(frame) -> None:
    num = Schema([NumericAttribute("x", lo=0, hi=1000)], class_name="y", classes=["k0", "k1"])
    pub = DiffGen(levels=3)
    rel = pub.publish(frame.assign(x=frame["x"] * 80), schema=num, epsilon=0.8, rng=0)
    _assert_rows(_rows(rel), _expected_diffgen(pub, rel, num, 0.8))
    assert [r[5] for r in _rows(rel) if r[4] == "parallel"] == [2, 2, 2]
    assert rel.ledger.total == pytest.approx(0.8, abs=1e-12)


def test_non_private_reference_records_its_leaks(frame, schema) -> None:
    for pub in (MAXGDDP(levels=3), DiffGen(levels=3)):
        rel = pub._run(frame, schema=schema, epsilon=1.0, rng=0, exact=True)
        assert not rel.private and rel.ledger.total == math.inf
        assert [e.step for e in rel.ledger] == ["selection", "leaf counts"]
        assert all(e.mechanism == "none (reads the true data)" for e in rel.ledger)
        with pytest.raises(ParameterError, match="not differentially private"):
            pub._run(frame, schema=schema, epsilon=1.0, rng=0, exact=True, session=Session(total_epsilon=10))


@pytest.mark.parametrize("cls", [MAXGDDP, DiffGen])
def test_session_pays_for_releases_and_refuses_drawing_nothing(cls, frame, schema) -> None:
    session = Session(total_epsilon=1.0)
    rel = cls(levels=3).publish(frame, schema=schema, epsilon=0.6, rng=0, session=session.on("train"))
    assert rel.ledger.total <= 0.6 * (1 + 1e-9)
    assert session.spent == pytest.approx(0.6)
    c = session.charges[0]
    assert c.method == cls.__name__.lower() and c.status == "spent" and c.data == f"train (DataFrame of shape {frame.shape})"
    gen = np.random.default_rng(5)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError, match="the session cannot pay"):
        cls(levels=3).publish(frame, schema=schema, epsilon=0.6, rng=gen, session=session)
    assert gen.bit_generator.state == state  # nothing was drawn
    assert session.spent == pytest.approx(0.6) and len(session.charges) == 1
    # bad data fails validation before the reservation: the session is untouched
    with pytest.raises(DomainError):
        cls(levels=3).publish(frame.assign(c1="zzz"), schema=schema, epsilon=0.1, rng=0, session=session)
    assert len(session.charges) == 1


@pytest.mark.parametrize("cls", [MAXGDDP, DiffGen])
def test_oversized_releases_are_refused_before_anything_is_drawn(cls, frame) -> None:
    """levels >= every possible specialisation: the final cut is the finest one, known in advance;
    its size is checked before the session is charged or any noise drawn."""
    big = Schema([CategoricalAttribute(f"c{i}", [f"v{j}" for j in range(40)]) for i in range(6)],
                 class_name="y", classes=["k0", "k1"])
    df = pd.DataFrame({f"c{i}": [f"v{j % 40}" for j in range(50)] for i in range(6)} | {"y": ["k0", "k1"] * 25})
    session = Session(total_epsilon=10.0)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    pub = cls(levels=1000, **({"schedule": "uniform"} if cls is MAXGDDP else {}))
    with pytest.raises(ParameterError, match=r"levels=1000 specialises every attribute to its finest cut \(the schema "
                                             r"allows \d+ specialisations\), of 8192000000 cells; .* use fewer levels"):
        pub.publish(df, schema=big, epsilon=1.0, rng=gen, session=session)
    assert gen.bit_generator.state == state and session.charges == ()


def test_no_part_writes_its_ledger_or_draws_noise_itself() -> None:
    """Privacy by construction: the decision sources never build a ledger or call a sampler."""
    forbidden = re.compile(r"BudgetLedger\(|\.spend\(|\.spend_rest\(|\.(laplace|exponential|gumbel|geometric|binomial|"
                           r"normal|standard_\w+)\(|(?<![\w.])(laplace|laplace_noise|discrete_laplace_noise)\(")
    for planted in ("ledger = BudgetLedger(eps)", "ledger.spend('x', 'laplace', e)", "z = gen.laplace(0, b, n)",
                    "t = gen.exponential(b)", "c + laplace(c, epsilon=e)", "gen.binomial(n, p)"):
        assert forbidden.search(planted), planted
    assert not forbidden.search("gen.integers(lo, hi)") and not forbidden.search("discrete_laplace(x)")
    src = Path(privpub.decision.__file__).parent
    hits = [f"{p.name}:{i}" for p in src.glob("*.py")
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if forbidden.search(line.split("#")[0]) and not line.strip().startswith((">>>", "..."))]
    assert hits == []


def test_ledger_entries_round_trip(frame, schema) -> None:
    rel = DiffGen(levels=4).publish(frame, schema=schema, epsilon=1.0, rng=2)
    assert [LedgerEntry.from_dict(r) for r in rel.ledger.to_records()] == list(rel.ledger)
