"""AIM and MST (privpub.decision, rho-zCDP synthetic data through private-pgm's estimator).

Small domains (3 bins per number, few iterations) keep these fast; the Adult reproduction is in
``test_synth_adult.py`` (slow).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from decision_helpers import make_frame, make_schema

pytest.importorskip("mbi", reason="AIM and MST need privpub[baselines]")

from privpub.audit import audit_epsilon
from privpub.core import (
    Accountant,
    Session,
    discrete_gaussian,
    exponential_mechanism_zcdp,
    zcdp_to_approx_dp,
)
from privpub.decision import AIM, MST, PUBLISHERS, SyntheticRelease
from privpub.decision._synth import _Table
from privpub.errors import BudgetExceededError, ParameterError

FAST = {"bins": 3, "max_iters": 60}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return make_frame(600, 2, 0)


def _aim() -> AIM:
    return AIM(degree=2, max_rounds=2, **FAST)


@pytest.mark.parametrize("make", [_aim, lambda: MST(**FAST)], ids=["aim", "mst"])
def test_release_is_rho_zcdp_and_ledger_sums_to_rho(make, table) -> None:
    pub = make()
    rel = pub.publish(table, schema=make_schema(), rho=0.3, rng=1)
    assert isinstance(rel, SyntheticRelease)
    assert rel.ledger.measure == "zcdp" and rel.rho == 0.3
    assert rel.ledger.total == pytest.approx(0.3, rel=1e-9)
    # the stated conversion, never rho added to an epsilon
    assert rel.approx_dp(1e-6) == pytest.approx(0.3 + 2 * math.sqrt(0.3 * math.log(1e6)))
    mech = {e.mechanism for e in rel.ledger.entries}
    assert mech == {"discrete_gaussian", "exponential_mechanism"}
    # every column's 1-way marginal is measured first
    assert [m for m in rel.measured[:5]] == [("c1",), ("x",), ("c2",), ("z",), ("y",)]
    # the synthetic table has about n rows (the model's total, from the noisy 1-way marginals)
    n_synth = int(rel.counts.sum())
    assert abs(n_synth - len(table)) < 60
    # classifier inputs work as for MAXGDDP
    X, _, w = rel.encode_cells()
    assert X.shape[0] == len(rel.cell_ids) == len(w) and w.min() >= 1
    assert rel.encode(table).shape[1] == X.shape[1]


def test_mst_ledger_thirds(table) -> None:
    rel = MST(**FAST).publish(table, schema=make_schema(), rho=0.6, rng=2)
    d = 5
    by_step: dict[str, float] = {}
    for e in rel.ledger.entries:
        by_step[e.step] = by_step.get(e.step, 0.0) + e.epsilon
    assert by_step == pytest.approx({"1-way marginals": 0.2, "spanning tree selection": 0.2,
                                     "2-way marginals": 0.2})
    assert len(rel.measured) == d + d - 1  # 1-way marginals, then a spanning tree's d - 1 edges
    edges = rel.measured[d:]
    assert all(len(e) == 2 for e in edges)


def test_aim_budget_schedule(table) -> None:
    pub = AIM(degree=2, rounds=20, max_rounds=3, **FAST)
    rel = pub.publish(table, schema=make_schema(), rho=1.0, rng=3)
    ent = rel.ledger.entries
    one_way = [e.epsilon for e in ent if e.step == "1-way marginals"]
    assert one_way == pytest.approx([0.9 / 20] * 5)
    sel = [e.epsilon for e in ent if e.step == "selection"]
    assert len(sel) == 3 and sel[0] == pytest.approx(0.1 / 20)
    assert rel.ledger.total == pytest.approx(1.0, rel=1e-9)


def test_same_seed_same_release(table) -> None:
    a = MST(**FAST).publish(table, schema=make_schema(), rho=0.5, rng=7)
    b = MST(**FAST).publish(table, schema=make_schema(), rho=0.5, rng=7)
    assert np.array_equal(a.cell_ids, b.cell_ids) and np.array_equal(a.counts, b.counts)


def test_person_level_spends_rho_over_k_squared(table) -> None:
    df = table.assign(user=[f"u{i % 200}" for i in range(len(table))])  # 3 rows per person
    rel = MST(**FAST).publish(df, schema=make_schema(), rho=0.9, rng=4, privacy_id="user", max_contributions=3)
    assert rel.ledger.total == pytest.approx(0.9, rel=1e-9)
    assert all(e.unit is not None and e.unit.max_contributions == 3 for e in rel.ledger.entries)
    first = rel.ledger.entries[0]
    assert "x 9 for persons" in first.note  # group privacy under zCDP: k^2
    assert first.epsilon == pytest.approx(0.9 / 3 / 5)  # unit-level: the record-level 0.9/9/3/5 times 9


def test_session_reserves_rho(table) -> None:
    session = Session(total_rho=1.0)
    MST(**FAST).publish(table, schema=make_schema(), rho=0.6, rng=0, session=session)
    assert session.spent == pytest.approx(0.6)
    with pytest.raises(BudgetExceededError):
        MST(**FAST).publish(table, schema=make_schema(), rho=0.6, rng=0, session=session)


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"bins": 1}, "bins"), ({"max_iters": 0}, "max_iters"), ({"degree": 0}, "degree"),
    ({"rounds": True}, "rounds"), ({"max_model_size": 0}, "max_model_size"),
    ({"class_workload": 1}, "class_workload"),
])
def test_bad_parameters(kwargs, param) -> None:
    with pytest.raises(ParameterError) as err:
        AIM(**kwargs)
    assert err.value.param == param


def test_class_workload_keeps_the_marginals_with_the_class(table) -> None:
    shape = (3, 3, 3, 3, 2)  # the class is the last column
    full = AIM(degree=3).workload(shape)
    with_class = AIM(degree=3, class_workload=True).workload(shape)
    assert len(full) == 10 and with_class == [cl for cl in full if 4 in cl] and len(with_class) == 6
    rel = AIM(degree=2, class_workload=True, max_rounds=2, **FAST).publish(table, schema=make_schema(), rho=0.3,
                                                                           rng=1)
    # after the 1-way marginals, every selected marginal is in the class workload's downward closure
    assert all(len(m) == 1 or "y" in m for m in rel.measured[5:]), rel.measured
    assert rel.params["class_workload"] is True


@pytest.mark.parametrize("rho", [0.0, -1.0, math.nan, math.inf])
def test_bad_rho_draws_nothing(rho, table) -> None:
    session = Session(total_rho=1.0)
    with pytest.raises(ParameterError):
        MST(**FAST).publish(table, schema=make_schema(), rho=rho, rng=0, session=session)
    assert session.spent == 0


def test_registered_and_refused_by_the_epsilon_cli() -> None:
    assert PUBLISHERS["aim"] is AIM and PUBLISHERS["mst"] is MST
    assert AIM.measures == ("zcdp",) and PUBLISHERS["maxgddp"].measures == ("pure-dp",)


# ---------------------------------------------------------------------------------------------
# privacy: the two private steps as AIM and MST run them, audited, each with a leaky control
# ---------------------------------------------------------------------------------------------
def _neighbours() -> tuple[_Table, _Table]:
    codes = np.array([[0, 0], [1, 1]], dtype=np.int64)
    a = _Table(codes, np.array([3, 2], dtype=np.int64), (2, 2))
    b = _Table(codes, np.array([3, 3], dtype=np.int64), (2, 2))  # one record added to cell (1, 1)
    return a, b


def _selection(rho: float):
    """AIM's round: scores ||M_r(D) - M_r(p)||_1 - bias over 3 candidate marginals of a public
    model estimate p, selected by the zCDP exponential mechanism (sensitivity 1)."""
    # a public estimate with scores [0, 1, 0] on D and [1, 0, 1] on D' (each moves by 1)
    est = {(0,): np.array([3.0, 2.0]), (1,): np.array([3.0, 3.0]), (0, 1): np.array([3.0, 0.0, 0.0, 2.0])}

    def mech(t: _Table, rng: np.random.Generator, n: int) -> np.ndarray:
        scores = np.array([np.abs(t.marginal(cl) - est[cl]).sum() for cl in est])
        with Accountant(n * rho, measure="zcdp"):
            return np.array([exponential_mechanism_zcdp(scores, rho=rho, sensitivity=1.0, rng=rng)
                             for _ in range(n)])
    return mech


def _measurement(rho: float):
    def mech(t: _Table, rng: np.random.Generator, n: int) -> np.ndarray:
        x = t.marginal((0, 1))
        with Accountant(rho, measure="zcdp"):
            return np.asarray(discrete_gaussian(np.tile(x, (n, 1)), rho=rho, sensitivity=1.0, rng=rng))
    return mech


@pytest.mark.statistical
def test_selection_audit_and_leaky_control() -> None:
    a, b = _neighbours()
    rho = 0.5  # epsilon = sqrt(8 rho) = 2 (pure DP: the exponential mechanism)
    ok = audit_epsilon(_selection(rho), a, b, epsilon=2.0, trials=4000, batch=True, rng=0)
    assert ok.passed, ok
    # control: the noise for 4 rho (selection epsilon doubled) while 2 is declared
    leaky = audit_epsilon(_selection(4 * rho), a, b, epsilon=2.0, trials=4000, batch=True, rng=0)
    assert not leaky.passed, leaky


@pytest.mark.statistical
def test_measurement_audit_and_leaky_control() -> None:
    a, b = _neighbours()
    rho = 0.5
    eps = zcdp_to_approx_dp(rho, 1e-3)  # the (epsilon, delta) the audit can resolve with 4000 trials
    ok = audit_epsilon(_measurement(rho), a, b, epsilon=eps, trials=4000, batch=True, rng=0)
    assert ok.passed, ok
    leaky = audit_epsilon(_measurement(100 * rho), a, b, epsilon=eps, trials=4000, batch=True, rng=0)
    assert not leaky.passed, leaky


@pytest.mark.parametrize(("extra", "message"), [
    (["--epsilon", "1", "--method", "aim"], "--method aim is rho-zCDP synthetic data, not epsilon-DP: it takes --rho"),
    (["--rho", "0.5", "--method", "maxgddp", "--levels", "2"], "--method maxgddp is epsilon-DP: it takes --epsilon"),
    (["--rho", "0.5", "--epsilon", "1", "--method", "mst"], "give exactly one of --epsilon"),
    (["--method", "mst"], "give exactly one of --epsilon"),
    (["--rho", "0", "--method", "mst"], "--rho"),
    (["--rho", "0.5", "--method", "aim", "--levels", "3"], "--levels applies to maxgddp and diffgen"),
    (["--epsilon", "1", "--method", "maxgddp"], "--levels is required with --method maxgddp"),
])
def test_cli_budget_flag_follows_the_method_before_reading(tmp_path, extra, message) -> None:
    from typer.testing import CliRunner

    from privpub.cli import app

    res = CliRunner().invoke(app, ["decision", str(tmp_path / "absent.csv"), "--target", "y", *extra,
                                   "-o", str(tmp_path / "out.csv")])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output, res.output
    assert not (tmp_path / "out.csv").exists()


def test_cli_rho_budget_file_is_a_zcdp_session(tmp_path, table) -> None:
    """--rho with --budget-file: a new file is a zCDP session (--budget-total a rho), charged in rho; a
    pure-DP budget file refuses the rho before anything is drawn."""
    import json

    from typer.testing import CliRunner

    from privpub import Session
    from privpub.cli import app

    data, schema = tmp_path / "t.csv", tmp_path / "s.json"
    table.to_csv(data, index=False)
    schema.write_text(json.dumps(make_schema().to_dict()))
    args = ["decision", str(data), "--target", "y", "--rho", "0.3", "--method", "mst", "--schema", str(schema),
            "--seed", "1"]
    budget = tmp_path / "b.json"
    res = CliRunner().invoke(app, [*args, "--budget-file", str(budget), "--budget-total", "0.5",
                                   "-o", str(tmp_path / "a.csv")])
    assert res.exit_code == 0, res.output
    assert "spent rho 0.3 of 0.5" in res.output
    session = Session.open(budget)
    assert session.measure == "zcdp" and session.spent == pytest.approx(0.3)
    res = CliRunner().invoke(app, [*args, "--budget-file", str(budget), "-o", str(tmp_path / "b.csv")])
    assert res.exit_code == 2 and not (tmp_path / "b.csv").exists(), res.output  # 0.2 of rho remains
    pure = tmp_path / "pure.json"
    Session.open(pure, total_epsilon=5.0)
    res = CliRunner().invoke(app, [*args, "--budget-file", str(pure), "-o", str(tmp_path / "c.csv")])
    assert res.exit_code == 2 and "never adds an epsilon to a rho" in res.output, res.output
    assert not (tmp_path / "c.csv").exists() and Session.open(pure).spent == 0


def test_cli_publishes_mst_under_rho(tmp_path, table) -> None:
    import json

    from typer.testing import CliRunner

    from privpub.cli import app

    data, schema, out, led = tmp_path / "t.csv", tmp_path / "s.json", tmp_path / "out.csv", tmp_path / "l.csv"
    table.to_csv(data, index=False)
    schema.write_text(json.dumps(make_schema().to_dict()))
    res = CliRunner().invoke(app, ["decision", str(data), "--target", "y", "--rho", "0.3", "--method", "mst",
                                   "--schema", str(schema), "--seed", "1", "-o", str(out), "--ledger", str(led)])
    assert res.exit_code == 0, res.output
    cells = pd.read_csv(out)
    assert list(cells.columns) == ["c1", "x", "c2", "z", "y", "count"] and (cells["count"] >= 1).all()
    assert abs(int(cells["count"].sum()) - len(table)) < 60  # the model's total, from noisy 1-way marginals
    ledger = pd.read_csv(led)
    assert ledger["epsilon"].sum() == pytest.approx(0.3)  # the zCDP ledger's column holds rho
