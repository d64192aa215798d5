"""Level budgets and ledgers (spec §2.6, §3; oracle 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privpub.decision import MAXGDDP, DiffGen, NumericAttribute, Schema
from privpub.decision._kernels import level_budgets

R = 3 ** (1 / 3)


def test_geometric_schedule_matches_corrected_formula() -> None:
    got = level_budgets(0.5, 5)
    np.testing.assert_allclose(got, [0.042197, 0.060859, 0.087774, 0.126592, 0.182577], atol=5e-7)
    for h in (1, 2, 5, 13, 16):
        eps = level_budgets(0.37, h)
        assert math.fsum(eps) == pytest.approx(0.37, abs=1e-12)
        formula = [0.37 * R ** (i - 1) * (R - 1) / (R**h - 1) for i in range(1, h + 1)]
        np.testing.assert_allclose(eps, formula, rtol=1e-12)
        f = [3.0 ** (i - 1) for i in range(1, h + 1)]  # fan-outs with ratio 3: eps_i ∝ f_i^(1/3)
        np.testing.assert_allclose(eps, 0.37 * np.cbrt(f) / np.cbrt(f).sum(), rtol=1e-12)
        if h > 1:
            np.testing.assert_allclose(np.asarray(eps[1:]) / eps[:-1], R, rtol=1e-12)
    assert level_budgets(0.5, 1) == (0.5,)
    assert level_budgets(0.5, 16)[0] == pytest.approx(0.00127 * 0.5, rel=1e-2)
    np.testing.assert_allclose(level_budgets(0.6, 4, "uniform"), [0.15] * 4)


def test_maxgddp_ledger_sums_to_epsilon(frame, schema) -> None:
    for eps, h, sp in [(1.0, 5, 0.5), (0.3, 3, 0.3), (2.0, 8, 0.7)]:
        pub = MAXGDDP(levels=h, split=sp)
        rel = pub.publish(frame, schema=schema, epsilon=eps, rng=1)
        sel = [e.epsilon for e in rel.ledger if e.mechanism == "report_noisy_max"]
        assert len(sel) == h
        np.testing.assert_allclose(sel, pub.level_budgets(eps), rtol=1e-12)
        assert math.fsum(sel) == pytest.approx(sp * eps, abs=1e-12)
        assert rel.ledger.total == pytest.approx(eps, abs=1e-12)
        leaf = next(e for e in rel.ledger if e.step == "leaf counts")
        assert leaf.epsilon == pytest.approx((1 - sp) * eps) and leaf.parts == rel.n_cells


def test_maxgddp_early_stop_leaves_budget_unspent(frame) -> None:
    schema = Schema([NumericAttribute("x", lo=0, hi=3)], class_name="y", classes=["k0", "k1"])
    rel = MAXGDDP(levels=6).publish(frame.assign(x=frame["x"] % 3), schema=schema, epsilon=1.0, rng=0)
    assert len(rel.history) == 2  # T = 3 ticks: two splits, then nothing is left
    assert rel.ledger.total < 1.0


def test_diffgen_ledger(frame, schema) -> None:
    h = 4
    rel = DiffGen(levels=h).publish(frame, schema=schema, epsilon=1.0, rng=3)
    e = 1.0 / (2 * (2 + 2 * h))
    assert DiffGen(levels=h).step_epsilon(1.0, schema) == pytest.approx(e)
    assert rel.ledger.total <= 1.0 + 1e-12
    assert all(x.epsilon == pytest.approx(e) for x in rel.ledger if x.step != "leaf counts")
    assert [x.epsilon for x in rel.ledger if x.step == "leaf counts"] == [pytest.approx(0.5)]
    # only numeric, splittable attributes: every pick is an interval, so the ledger is exactly eps
    num = Schema([NumericAttribute("x", lo=0, hi=1000)], class_name="y", classes=["k0", "k1"])
    df = frame.assign(x=frame["x"] * 80)
    rel = DiffGen(levels=3).publish(df, schema=num, epsilon=0.8, rng=0)
    assert rel.ledger.total == pytest.approx(0.8, abs=1e-12)
    rel = DiffGen(levels=h, reuse_unspent=True).publish(frame, schema=schema, epsilon=1.0, rng=3)
    assert rel.ledger.total == pytest.approx(1.0, abs=1e-12)
