"""Issue 15, the curator's path: real files in, every argument checked first, one flag vocabulary.

Each test is one finding of the issue (it failed on main before the fix). Raw Adult files are
generated in the UCI format (no header, ", " separators, '?' for missing values); the tests on
the real ``adult.data`` skip without the data directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import typer
from cli_inputs import raw_adult_text
from typer.testing import CliRunner

from privpub.cli import app
from privpub.core import Session

runner = CliRunner()


def _error(result) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    return result.output


@pytest.fixture
def adult_raw(tmp_path: Path) -> Path:
    path = tmp_path / "adult.data"
    path.write_text(raw_adult_text(3000, seed=1), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# real files as they come
# ---------------------------------------------------------------------------------------------
def test_a_file_without_header_line_is_named_as_such(adult_raw: Path, tmp_path: Path) -> None:
    """Finding: adult.data (no header) was rejected with "column 'age' is not in ... (columns: 39, State-gov, ...)"."""
    out = _error(runner.invoke(app, ["histogram", str(adult_raw), "--column", "age", "--integer-range", "15:95",
                                     "-e", "1", "-o", str(tmp_path / "o.csv")]))
    assert "has no header line (its first line is a record: " in out
    assert "--dataset-schema" in out and "--names" in out and "--schema" in out
    assert not (tmp_path / "o.csv").exists()


def test_a_schema_names_the_columns_of_a_headerless_file(adult_raw: Path, tmp_path: Path) -> None:
    """``--no-header`` with names from a schema: its attributes and class, in order, name the 15 fields."""
    from privpub.datasets import table_format

    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({**table_format("adult").schema.to_dict(), "missing": ["?"]}), encoding="utf-8")
    res = runner.invoke(app, ["decision", str(adult_raw), "--schema", str(schema), "-e", "1", "--levels", "2",
                              "--seed", "0", "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 0, res.output
    assert "missing-value policy of --schema schema.json" in res.output


def test_names_and_no_header_read_a_headerless_file(adult_raw: Path, tmp_path: Path) -> None:
    from privpub.datasets import table_format

    names = ",".join(table_format("adult").columns)
    out = tmp_path / "h.csv"
    res = runner.invoke(app, ["histogram", str(adult_raw), "--no-header", "--names", names, "--column", "sex",
                              "--categories", "Female,Male", "-e", "1", "--seed", "0", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert pd.read_csv(out)["label"].tolist() == ["Female", "Male"]


def test_histogram_with_the_adult_schema_on_the_raw_file(adult_raw: Path, tmp_path: Path) -> None:
    """``privpub histogram FILE --dataset-schema adult --column age -e E -o OUT.csv``: the domain is the schema's."""
    out = tmp_path / "age.csv"
    res = runner.invoke(app, ["histogram", str(adult_raw), "--dataset-schema", "adult", "--column", "age", "-e", "1",
                              "--seed", "0", "-o", str(out)])
    assert res.exit_code == 0, res.output
    frame = pd.read_csv(out)
    assert len(frame) == 80 and frame["label"].iloc[0] == "[15, 16)" and frame["label"].iloc[-1] == "[94, 95]"
    assert "dropped" not in res.output            # age has no '?': no record is dropped for it


def test_decision_with_the_adult_schema_on_the_raw_file(adult_raw: Path, tmp_path: Path) -> None:
    """``privpub decision FILE --dataset-schema adult -e E --levels H -o OUT.csv`` (no --target: the schema's)."""
    out = tmp_path / "cells.csv"
    res = runner.invoke(app, ["decision", str(adult_raw), "--dataset-schema", "adult", "-e", "1", "--levels", "3",
                              "--seed", "0", "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = (adult_raw.read_text()).splitlines()
    n_missing = sum("?" in line for line in text)
    assert f"dropped {n_missing:,} of 3,000 records with a missing value ('?')" in res.output
    assert "income" in pd.read_csv(out).columns


def test_synth_with_the_adult_schema_on_the_raw_file(adult_raw: Path, tmp_path: Path) -> None:
    """``privpub synth FILE --dataset-schema adult --epsilon E -o OUT.csv``: 15 coarse attributes, income included."""
    from privpub.datasets import table_format

    out = tmp_path / "syn.csv"
    res = runner.invoke(app, ["synth", str(adult_raw), "--dataset-schema", "adult", "--epsilon", "30", "--seed", "0",
                              "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    syn = pd.read_csv(out, dtype=str, keep_default_na=False)
    fmt = table_format("adult")
    assert list(syn.columns) == list(fmt.columns)
    for attr in fmt.synth_schema:
        assert set(syn[attr.name]) <= set(attr.categories), attr.name
    kept = 3000 - sum("?" in line for line in adult_raw.read_text().splitlines())
    assert len(syn) == kept


def test_the_adult_test_file_as_it_comes(tmp_path: Path) -> None:
    """adult.test: its '|1x3 Cross validator' line is skipped and the '.' of its labels stripped."""
    path = tmp_path / "adult.test"
    path.write_text(raw_adult_text(800, seed=2, test=True), encoding="utf-8")
    out = tmp_path / "income.csv"
    res = runner.invoke(app, ["histogram", str(path), "--dataset-schema", "adult", "--column", "income", "-e", "1",
                              "--seed", "0", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert pd.read_csv(out)["label"].tolist() == ["<=50K", ">50K"]


def test_the_real_adult_data(tmp_path: Path, data_dir: Path) -> None:
    """The raw UCI file: 2,399 of its 32,561 records hold a '?' (the papers' 30,162 remain)."""
    source = data_dir / "adult" / "adult.data"
    if not source.is_file():
        pytest.skip("adult/adult.data not in the data directory")
    out = tmp_path / "cells.csv"
    res = runner.invoke(app, ["decision", str(source), "--dataset-schema", "adult", "-e", "1", "--levels", "2",
                              "--seed", "0", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "dropped 2,399 of 32,561 records" in res.output and "30,162 remain" in res.output
    res = runner.invoke(app, ["histogram", str(source), "--dataset-schema", "adult", "--column", "age", "-e", "1",
                              "--seed", "0", "-o", str(tmp_path / "age.csv")])
    assert res.exit_code == 0, res.output


def test_a_count_file_as_it_comes(tmp_path: Path) -> None:
    """Hay et al.'s files: one count per line, no header; histogram reads them like stream does."""
    path = tmp_path / "nettrace.txt"
    path.write_text("3\n0\n17\n5\n0\n0\n2\n", encoding="utf-8")
    out = tmp_path / "h.csv"
    res = runner.invoke(app, ["histogram", str(path), "-e", "1", "--seed", "0", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(out)) == 7


def test_schema_draft_warns_and_lists_what_to_replace(adult_raw: Path, tmp_path: Path) -> None:
    """``privpub schema draft FILE``: a PrivacyWarning, the list of inferred values, and a draft the CLI refuses."""
    from privpub.datasets import table_format

    names = ",".join(table_format("adult").columns)
    draft = tmp_path / "draft.json"
    res = runner.invoke(app, ["schema", "draft", str(adult_raw), "--names", names, "--class-column", "income",
                              "-o", str(draft)])
    assert res.exit_code == 0, res.output
    assert "PrivacyWarning" in res.output
    assert "age: bounds [" in res.output and "the data's minimum and maximum" in res.output
    assert "workclass:" in res.output and "? appear as values" in res.output
    spec = json.loads(draft.read_text())
    assert spec["draft"] and spec["columns"][0] == "age" and spec["class_name"] == "income"
    refused = _error(runner.invoke(app, ["decision", str(adult_raw), "--schema", str(draft), "-e", "1", "--levels",
                                         "2", "-o", str(tmp_path / "o.csv")]))
    assert "is a draft inferred from the data" in refused and not (tmp_path / "o.csv").exists()
    del spec["draft"]
    spec["missing"] = ["?"]
    draft.write_text(json.dumps(spec), encoding="utf-8")
    ok = runner.invoke(app, ["decision", str(adult_raw), "--schema", str(draft), "-e", "1", "--levels", "2",
                             "--seed", "0", "-o", str(tmp_path / "o.csv")])
    assert ok.exit_code == 0, ok.output


def test_schema_show_round_trips(tmp_path: Path, adult_raw: Path) -> None:
    res = runner.invoke(app, ["schema", "show", "adult"])
    assert res.exit_code == 0, res.output
    path = tmp_path / "adult.json"
    path.write_text(res.stdout, encoding="utf-8")
    ok = runner.invoke(app, ["histogram", str(adult_raw), "--schema", str(path), "--column", "race", "-e", "1",
                             "--seed", "0", "-o", str(tmp_path / "race.csv")])
    assert ok.exit_code == 0, ok.output


# ---------------------------------------------------------------------------------------------
# every argument checked before data or budget
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("query", ["0.5,0.5,0.2,0.2", "0,0,2,2", "1,2,3", "nan,0,1,1"])
def test_spatial_queries_are_checked_before_the_release(tmp_path: Path, inputs: dict[str, Path], query: str) -> None:
    """Finding: ``privpub spatial ... -q`` built and wrote the release, spent the budget, then rejected the query."""
    budget = tmp_path / "budget.json"
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["spatial", str(inputs["points"]), "--x", "x", "--y", "y", "-e", "1", "--bounds", "0,0,1,1",
                              "-o", str(out), "-q", query, "--budget-file", str(budget), "--budget-total", "2"])
    assert "--query" in _error(res)
    assert not out.exists()
    assert not budget.exists() or Session.open(budget).spent == 0


def test_all_problems_are_reported_at_once(tmp_path: Path, inputs: dict[str, Path]) -> None:
    res = runner.invoke(app, ["decision", str(inputs["table"]), "--schema", str(inputs["schema"]), "-e", "-1",
                              "--levels", "0", "--method", "magic", "-o", str(tmp_path / "no" / "o.csv")])
    out = _error(res)
    assert "4 problems with the arguments" in out
    for needle in ("--epsilon must be finite and > 0", "--levels must be an integer >= 1", "--method must be one of",
                   "--output"):
        assert needle in out, needle


def test_decision_accepts_e(tmp_path: Path, inputs: dict[str, Path]) -> None:
    """Finding: ``decision`` rejected the ``-e`` every other command accepts."""
    res = runner.invoke(app, ["decision", str(inputs["table"]), "--schema", str(inputs["schema"]), "-e", "1",
                              "--levels", "2", "--seed", "0", "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 0, res.output


def test_one_flag_vocabulary() -> None:
    """-e/--epsilon, -o/--output, --seed and --force on every publishing command; -o/--out on every reproduction."""
    root = typer.main.get_command(app)

    def opts(*path: str) -> set[str]:
        cmd = root
        for name in path:
            cmd = cmd.commands[name]  # type: ignore[attr-defined]
        return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}

    for command in ("histogram", "synth", "spatial", "decision", "stream publish"):
        assert {"-e", "--epsilon", "-o", "--output", "--seed", "--force"} <= opts(*command.split()), command
    for part in ("histogram", "ldp_synth", "spatial", "decision", "stream", "all"):
        assert {"-o", "--out"} <= opts("reproduce", part), part


def test_synth_with_two_columns_reports_the_real_problem(tmp_path: Path, inputs: dict[str, Path]) -> None:
    """Finding: with two columns synth reported the degree error whatever the real problem was."""
    base = ["synth", str(inputs["table"]), "--schema", str(inputs["schema"]), "--columns", "a,b", "--quiet"]
    out = _error(runner.invoke(app, [*base, "--epsilon", "-2", "-o", str(tmp_path / "o.csv")]))
    assert "--epsilon: epsilon must be finite and > 0" in out and "--degree" not in out
    ok = runner.invoke(app, [*base, "--epsilon", "4", "--seed", "0", "-o", str(tmp_path / "o.csv")])
    assert ok.exit_code == 0, ok.output
    assert "degree 1" in ok.output                      # the default degree fits two attributes


@pytest.mark.parametrize(("args", "flag", "python"), [
    (["spatial", "@points", "--x", "x", "--y", "y", "-e", "1", "--bounds", "0,0,0.5,0.5"], "--clip", "clip=True"),
    (["stream", "@reals", "-e", "1", "-w", "4"], "--noise laplace", "noise='laplace'"),
])
def test_errors_speak_the_flags(tmp_path: Path, inputs: dict[str, Path], args: list[str], flag: str,
                                python: str) -> None:
    """Finding: errors spoke the Python API (``clip=True``, ``noise='laplace'``) instead of the flag."""
    reals = tmp_path / "reals.csv"
    pd.DataFrame({"count": [0.5, 1.5, 2.0]}).to_csv(reals, index=False)
    files = {"@points": str(inputs["points"]), "@reals": str(reals)}
    out = _error(runner.invoke(app, [*(files.get(a, a) for a in args), "-o", str(tmp_path / "o.json")]))
    assert flag in out and python not in out
