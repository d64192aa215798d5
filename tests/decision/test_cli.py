"""``privpub decision`` and ``privpub reproduce decision`` through Typer's runner."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from decision_helpers import make_frame, make_schema
from typer.testing import CliRunner

from privpub.cli import app

runner = CliRunner()


@pytest.fixture
def files(tmp_path):
    df = make_frame(200, 2, seed=0)
    data = tmp_path / "train.csv"
    df.to_csv(data, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(make_schema().to_dict()))
    return tmp_path, data, schema


@pytest.mark.parametrize("method", ["maxgddp", "diffgen"])
def test_cli_writes_cells_and_ledger(files, method) -> None:
    tmp, data, schema = files
    out, led = tmp / "cells.csv", tmp / "ledger.csv"
    res = runner.invoke(app, ["decision", str(data), "--target", "y", "--epsilon", "1", "--levels", "4",
                              "--schema", str(schema), "--method", method, "--seed", "3", "-o", str(out),
                              "--ledger", str(led)])
    assert res.exit_code == 0, res.output
    cells = pd.read_csv(out)
    assert list(cells.columns) == ["c1", "x", "c2", "z", "y", "count"] and (cells["count"] >= 1).all()
    ledger = pd.read_csv(led)
    assert ledger["epsilon"].sum() <= 1.0 + 1e-9
    again = tmp / "again.csv"
    runner.invoke(app, ["decision", str(data), "--target", "y", "--epsilon", "1", "--levels", "4",
                        "--schema", str(schema), "--method", method, "--seed", "3", "-o", str(again)])
    pd.testing.assert_frame_equal(cells, pd.read_csv(again))


def test_cli_taxonomy_and_synthetic(files) -> None:
    tmp, data, schema = files
    tax = tmp / "tax.json"
    tax.write_text(json.dumps({"c1": "{Any {ab {a} {b}} {c} {d} {e} {f}}", "x": "{0-12 {0-6} {6-12}}"}))
    out = tmp / "syn.csv"
    res = runner.invoke(app, ["decision", str(data), "--target", "y", "--epsilon", "2", "--levels", "3",
                              "--schema", str(schema), "--taxonomy", str(tax), "--synthetic", "--seed", "0",
                              "-o", str(out)])
    assert res.exit_code == 0, res.output
    syn = pd.read_csv(out)
    assert set(syn["x"]) <= {"[0,12)", "[0,6)", "[6,12)"}
    assert set(syn["c1"]) <= {"Any", "ab", "a", "b", "c", "d", "e", "f"}


@pytest.mark.parametrize(("extra", "message"), [
    (["--levels", "0"], "levels must be an integer >= 1"),
    (["--levels", "2", "--method", "c45"], "--method must be one of"),
    (["--levels", "2", "--target", "income"], "differs from the class 'y'"),
])
def test_cli_errors(files, extra, message) -> None:
    tmp, data, schema = files
    args = ["decision", str(data), "--epsilon", "1", "-o", str(tmp / "o.csv"), "--schema", str(schema)]
    if "--target" not in extra:
        args += ["--target", "y"]
    res = runner.invoke(app, args + extra)
    assert res.exit_code == 2
    assert message in res.output


def test_cli_requires_a_public_schema(files) -> None:
    tmp, data, _ = files
    res = runner.invoke(app, ["decision", str(data), "--target", "y", "--epsilon", "1", "--levels", "2",
                              "-o", str(tmp / "o.csv")])
    assert res.exit_code == 2 and "--schema" in res.output
    bad = tmp / "bad.csv"
    make_frame(50, 2, 1).assign(c1="zzz").to_csv(bad, index=False)
    res = runner.invoke(app, ["decision", str(bad), "--target", "y", "--epsilon", "1", "--levels", "2",
                              "--schema", str(tmp / "schema.json"), "-o", str(tmp / "o.csv")])
    assert res.exit_code == 2 and "declared categories" in res.output


def test_reproduce_decision_on_iris(tmp_path, data_dir) -> None:
    if not (data_dir / "iris" / "iris.data").exists():
        pytest.skip("iris/iris.data not in the data directory")
    from privpub.experiments import decision as exp

    summary = exp.reproduce(tmp_path / "out", quick=True, data_dir=data_dir, reps=1, datasets=["iris"])
    assert summary.exists() and (tmp_path / "out" / "runs.csv").exists()
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert set(runs["algorithm"]) == {"maxgddp", "diffgen", "maxgddp_uniform"}
    assert runs["accuracy"].between(0, 1).all()
    assert (tmp_path / "out" / "fig3_levels.png").exists() and (tmp_path / "out" / "claims.csv").exists()


def test_demo_runs() -> None:
    from privpub.experiments import decision as exp

    rows = exp.demo(rng=0)
    assert {r.method for r in rows} == {"MAXGDDP", "DiffGen"}
    # the rule is learnable: MAXGDDP at eps = 1 is far above the 50% majority rate
    assert max(r.value for r in rows if r.method == "MAXGDDP") > 0.8


@pytest.mark.parametrize(("content", "message"), [
    (bytes(range(256)) * 4, "is not UTF-8 text (a binary file?)"),
    (b"{hello", "must be a JSON object of trees"),
    (b'{"c1": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "nested more than 200 levels"),
], ids=["binary", "not-json", "deep-json"])
def test_cli_bad_taxonomy_file_is_a_clear_error(files, content, message) -> None:
    tmp, data, schema = files
    tax = tmp / "tax.json"
    tax.write_bytes(content)
    res = runner.invoke(app, ["decision", str(data), "--target", "y", "--epsilon", "1", "--levels", "3",
                              "--schema", str(schema), "--taxonomy", str(tax), "-o", str(tmp / "o.csv")])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert message in res.output and "tax.json" in res.output and "Traceback" not in res.output
    assert not (tmp / "o.csv").exists()


@pytest.mark.parametrize(("method", "extra", "message"), [
    ("maxgddp", [], "--levels: levels=10000 with schedule='geometric' gives level 1 a budget of about 1e-1592"),
    # DiffGen on Adult's public schema (1.5M fnlwgt ticks): the cut outgrows max_synthetic_rows
    # after a few dozen levels; the run stops there, before the leaves are allocated
    ("diffgen", ["--dataset-schema", "adult"], "cells; at leaf epsilon=0.5 their noise alone would create about"),
], ids=["maxgddp", "diffgen-adult"])
def test_cli_huge_levels_are_refused_before_anything_is_drawn(files, tmp_path, method, extra, message) -> None:
    tmp, data, schema = files
    args = ["decision", str(data), "--target", "y", "--epsilon", "1", "--levels", "10000", "--method", method,
            "-o", str(tmp / "o.csv")]
    if extra:
        frame = pd.DataFrame({"age": [30, 40], "workclass": ["Private", "State-gov"], "fnlwgt": [1000, 2000],
                              "education": ["Bachelors", "HS-grad"], "education-num": [13, 9],
                              "marital-status": ["Never-married", "Divorced"], "occupation": ["Sales", "Sales"],
                              "relationship": ["Husband", "Wife"], "race": ["White", "Black"], "sex": ["Male", "Female"],
                              "capital-gain": [0, 0], "capital-loss": [0, 0], "hours-per-week": [40, 50],
                              "native-country": ["Canada", "Cuba"], "income": ["<=50K", ">50K"]})
        data = tmp_path / "adult.csv"
        frame.to_csv(data, index=False)
        args = ["decision", str(data), "--target", "income", "--epsilon", "1", "--levels", "10000", "--method", method,
                "-o", str(tmp / "o.csv"), *extra]
    else:
        args += ["--schema", str(schema)]
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert message in res.output and "--levels" in res.output and "Traceback" not in res.output


# ---------------------------------------------------------------------------------------------
# person level: --privacy-id COLUMN --max-contributions K
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def people_files(tmp_path):
    import numpy as np

    df = make_frame(300, 2, seed=1)
    df["user"] = [f"p{i}" for i in np.random.default_rng(2).zipf(1.7, len(df)).clip(max=30)]
    data = tmp_path / "visits.csv"
    df.to_csv(data, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(make_schema().to_dict()))
    return tmp_path, data, schema, df


@pytest.mark.parametrize("method", ["maxgddp", "diffgen"])
def test_cli_person_level(people_files, method) -> None:
    from privpub.decision import PUBLISHERS

    tmp, data, schema, _ = people_files
    out, led = tmp / "cells.csv", tmp / "ledger.json"
    args = ["decision", str(data), "--target", "y", "--epsilon", "2", "--levels", "2", "--schema", str(schema),
            "--method", method, "--seed", "3", "-o", str(out), "--ledger", str(led),
            "--privacy-id", "user", "--max-contributions", "3"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "protects: one person (all rows with the same 'user', at most 3 rows each)" in res.output
    cells = pd.read_csv(out)
    assert "user" not in cells.columns  # the id is never published
    entries = json.loads(led.read_text())
    rows = entries if isinstance(entries, list) else entries.get("records", entries)
    assert all(r["unit"]["kind"] == "person" and r["unit"]["max_contributions"] == 3 for r in rows)
    # the CLI publishes what the library publishes for the same seed
    from privpub.core import Schema

    sch = Schema.from_dict(json.loads(schema.read_text()))
    lib = PUBLISHERS[method](levels=2).publish(pd.read_csv(data), schema=sch, epsilon=2.0, rng=3,
                                                 privacy_id="user", max_contributions=3)
    assert int(cells["count"].sum()) == int(lib.counts.sum())


@pytest.mark.parametrize(("extra", "message"), [
    (["--privacy-id", "user"], "--privacy-id needs --max-contributions"),
    (["--max-contributions", "2"], "--max-contributions needs --privacy-id"),
    (["--privacy-id", "user", "--max-contributions", "0"], "--max-contributions must be an integer >= 1"),
    (["--privacy-id", "x", "--max-contributions", "2"], "is an attribute of the schema"),
])
def test_cli_person_level_refusals(people_files, extra, message) -> None:
    tmp, data, schema, _ = people_files
    out = tmp / "cells.csv"
    res = runner.invoke(app, ["decision", str(data), "--target", "y", "--epsilon", "1", "--levels", "2",
                              "--schema", str(schema), "-o", str(out), *extra])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert not out.exists()


def test_cli_person_level_missing_id_column(people_files) -> None:
    tmp, data, schema, _ = people_files
    res = runner.invoke(app, ["decision", str(data), "--target", "y", "--epsilon", "1", "--levels", "2",
                              "--schema", str(schema), "-o", str(tmp / "c.csv"), "--privacy-id", "who",
                              "--max-contributions", "2"])
    assert res.exit_code == 2, res.output
    assert "who" in res.output and "Traceback" not in res.output


def test_cli_says_what_the_release_protects_without_a_privacy_id(files) -> None:
    # issue 25: only the public schema is read; it does not say whether ids repeat, so the check is not run
    tmp, data, schema = files
    res = runner.invoke(app, ["decision", str(data), "--target", "y", "--epsilon", "1", "--levels", "2",
                              "--schema", str(schema), "--seed", "3", "-o", str(tmp / "c.csv")])
    assert res.exit_code == 0, res.output
    assert "this release protects one row" in res.stderr and "is not checked" in res.stderr
    # a schema that states the bound gets a warning naming it, and what it costs a person
    stated = json.loads(schema.read_text())
    stated.update(privacy_id="user", max_contributions=40)
    (tmp / "stated.json").write_text(json.dumps(stated))
    res = runner.invoke(app, ["decision", str(data), "--target", "y", "--epsilon", "1", "--levels", "2",
                              "--schema", str(tmp / "stated.json"), "--seed", "3", "-o", str(tmp / "d.csv")])
    assert res.exit_code == 0, res.output
    assert "WARNING" in res.stderr and "up to 40 rows" in res.stderr and "40 x epsilon = 40" in res.stderr


def test_reproduce_decision_caps_aim_and_mst_repetitions(tmp_path, data_dir, monkeypatch) -> None:
    """Full mode runs AIM and MST ``sota_reps`` times per point (34 min per AIM release on Adult),
    the other methods ``reps`` times; the report's cells for one run read "(1 run)". The publishing
    step is replaced by a recorder here: this checks the plan, test_synth_adult.py the methods."""
    if not (data_dir / "iris" / "iris.data").exists():
        pytest.skip("iris/iris.data not in the data directory")
    pytest.importorskip("mbi")
    from privpub.core import BudgetLedger
    from privpub.errors import ParameterError
    from privpub.experiments import decision as exp

    calls: list[tuple[str, float, int]] = []

    def record(algorithm, name, train, test, schema, epsilon, h, seed, quick=False):
        calls.append((algorithm, epsilon, int(seed[-1])))
        return {"accuracy": 0.5 + 0.01 * len(calls) % 0.4, "n_cells": 1, "n_synth_rows": 1, "seconds": 0.0,
                "ledger": BudgetLedger(epsilon)}

    monkeypatch.setattr(exp, "run_one", record)
    exp.reproduce(tmp_path / "full", quick=False, data_dir=data_dir, reps=3, datasets=["iris"])
    reps = pd.DataFrame(calls, columns=["algorithm", "eps", "rep"]).groupby("algorithm")["rep"].max() + 1
    assert reps["aim"] == reps["mst"] == exp.SOTA_REPS == 1
    assert reps["maxgddp"] == reps["diffgen"] == 3
    assert "(1 run)" in (tmp_path / "full" / "summary.md").read_text()
    calls.clear()
    exp.reproduce(tmp_path / "two", quick=False, data_dir=data_dir, reps=3, datasets=["iris"], sota_reps=2)
    assert pd.DataFrame(calls, columns=["algorithm", "eps", "rep"]).query("algorithm == 'aim'")["rep"].max() == 1
    with pytest.raises(ParameterError, match="sota_reps"):
        exp.reproduce(tmp_path / "bad", quick=True, data_dir=data_dir, reps=1, datasets=["iris"], sota_reps=0)
