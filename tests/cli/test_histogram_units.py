"""``privpub histogram --privacy-id COLUMN --max-contributions K``: person-level histograms from the CLI,
and what a curator is told without --privacy-id (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privpub import Session
from privpub.cli import app

runner = CliRunner()


@pytest.fixture
def checkins(tmp_path: Path) -> Path:
    """Person ``u0`` has 40 rows, everybody else 1 or 2."""
    ids = ["u0"] * 40 + [f"u{i}" for i in range(1, 61) for _ in range(1 + i % 2)]
    venues = np.random.default_rng(0).integers(0, 4, len(ids))
    path = tmp_path / "checkins.csv"
    pd.DataFrame({"user": ids, "venue": venues}).to_csv(path, index=False)
    return path


def _schema(tmp_path: Path, **extra: object) -> Path:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"attributes": [{"name": "venue", "type": "categorical",
                                                "categories": ["0", "1", "2", "3"]}],
                                "columns": ["user", "venue"], **extra}))
    return path


def _run(*args: str) -> object:
    return runner.invoke(app, ["histogram", *args])


def test_privacy_id_bounds_each_person_and_states_the_unit(checkins: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.csv"
    budget = tmp_path / "budget.json"
    result = _run(str(checkins), "-e", "1", "-o", str(out), "--column", "venue", "--integer-range", "0:3",
                  "--method", "laplace", "--privacy-id", "user", "--max-contributions", "3", "--seed", "1",
                  "--budget-file", str(budget), "--budget-total", "2")
    assert result.exit_code == 0, result.output
    assert "protects: one person (all rows with the same 'user', at most 3 rows each), added or removed" in \
        result.stdout
    assert "note:" not in result.stderr
    shown = runner.invoke(app, ["budget", "show", str(budget)])
    assert shown.exit_code == 0 and "protects one person (all rows with the same 'user'" in shown.stdout
    charge = Session.open(budget).charges[0]
    assert charge.unit == {"kind": "person", "relation": "add_remove", "column": "user", "max_contributions": 3}
    # a record-level release into the same budget file is refused: the units do not compose
    again = _run(str(checkins), "-e", "0.5", "-o", str(tmp_path / "p.csv"), "--column", "venue", "--integer-range",
                 "0:3", "--method", "laplace", "--seed", "1", "--budget-file", str(budget))
    assert again.exit_code == 2 and "privacy unit" in again.output
    assert len(Session.open(budget).charges) == 1


def test_bounded_counts_hold_min_rows_k_per_person(checkins: Path, tmp_path: Path) -> None:
    # a huge epsilon shows the bounded counts: 121 rows, but u0 keeps 3 of 40 -> 84 rows in all
    out = tmp_path / "o.csv"
    result = _run(str(checkins), "-e", "1000", "-o", str(out), "--column", "venue", "--integer-range", "0:3",
                  "--method", "laplace", "--privacy-id", "user", "--max-contributions", "3", "--seed", "1")
    assert result.exit_code == 0, result.output
    counts = pd.read_csv(out)["count"]
    assert abs(int(counts.sum()) - (3 + sum(1 + i % 2 for i in range(1, 61)))) <= 2


@pytest.mark.parametrize("args, words", [
    (["--privacy-id", "user"], "--max-contributions is missing"),
    (["--max-contributions", "4"], "--privacy-id is missing"),
    (["--privacy-id", "user", "--max-contributions", "0"], "--max-contributions must be an integer >= 1"),
])
def test_bad_options_are_refused_before_reading(checkins: Path, tmp_path: Path, args: list[str],
                                                words: str) -> None:
    result = _run(str(checkins), "-e", "1", "-o", str(tmp_path / "o.csv"), "--column", "venue",
                  "--integer-range", "0:3", *args)
    assert result.exit_code == 2 and words in result.output
    assert not (tmp_path / "o.csv").exists()


def test_privacy_id_needs_raw_records(tmp_path: Path) -> None:
    path = tmp_path / "hist.csv"
    pd.DataFrame({"c": [1, 2, 3]}).to_csv(path, index=False)
    result = _run(str(path), "-e", "1", "-o", str(tmp_path / "o.csv"), "--counts-column", "c",
                  "--privacy-id", "user", "--max-contributions", "2")
    assert result.exit_code == 2 and "needs --column" in result.output


def test_unknown_privacy_id_column(checkins: Path, tmp_path: Path) -> None:
    result = _run(str(checkins), "-e", "1", "-o", str(tmp_path / "o.csv"), "--column", "venue",
                  "--integer-range", "0:3", "--privacy-id", "account", "--max-contributions", "2")
    assert result.exit_code == 2 and "account" in result.output


def test_without_privacy_id_the_schema_names_the_largest_contribution(checkins: Path, tmp_path: Path) -> None:
    schema = _schema(tmp_path, privacy_id="user", max_contributions=40)
    result = _run(str(checkins), "-e", "0.5", "-o", str(tmp_path / "o.csv"), "--column", "venue",
                  "--schema", str(schema), "--method", "laplace", "--seed", "0")
    assert result.exit_code == 0, result.output
    assert "up to 40 rows" in result.stderr and "40 x epsilon = 20" in result.stderr
    assert "--privacy-id user" in result.stderr
    assert "protects: one record (row), added or removed" in result.stdout


def test_without_a_stated_bound_the_check_is_said_not_run(checkins: Path, tmp_path: Path) -> None:
    schema = _schema(tmp_path, privacy_id="user")
    result = _run(str(checkins), "-e", "0.5", "-o", str(tmp_path / "o.csv"), "--column", "venue",
                  "--schema", str(schema), "--method", "laplace", "--seed", "0", "--quiet")
    assert result.exit_code == 0, result.output
    assert "check is not run" in result.stderr and "40" not in result.stderr  # the data's 40 is never read
    plain = _run(str(checkins), "-e", "0.5", "-o", str(tmp_path / "p.csv"), "--column", "venue",
                 "--integer-range", "0:3", "--method", "laplace", "--seed", "0")
    assert plain.exit_code == 0 and "is not checked" in plain.stderr and "40" not in plain.stderr


def test_bad_schema_declaration(checkins: Path, tmp_path: Path) -> None:
    schema = _schema(tmp_path, max_contributions=3)
    result = _run(str(checkins), "-e", "0.5", "-o", str(tmp_path / "o.csv"), "--column", "venue",
                  "--schema", str(schema))
    assert result.exit_code == 2 and "'max_contributions' needs 'privacy_id'" in result.output


def test_a_value_outside_the_domain_is_reported_even_in_a_dropped_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    pd.DataFrame({"user": ["a"] * 5, "venue": [0, 1, 2, 3, 9]}).to_csv(path, index=False)
    result = _run(str(path), "-e", "1", "-o", str(tmp_path / "o.csv"), "--column", "venue", "--integer-range", "0:3",
                  "--privacy-id", "user", "--max-contributions", "1", "--seed", "0")
    assert result.exit_code == 2 and "outside the declared --integer-range" in result.output


def test_unit_notice_states_group_privacy_per_measure() -> None:
    """Without --privacy-id, a schema stating k rows per person gets the person's cost: k x epsilon
    under pure DP, k^2 x rho under zCDP (group privacy), never k x rho."""
    from types import SimpleNamespace

    from privpub.cli._common import unit_notice

    table = SimpleNamespace(privacy_id="user", max_contributions=4)
    pure = unit_notice(table, None, 0.5)
    assert pure is not None and "4 x epsilon = 2" in pure and "at epsilon" in pure
    zcdp = unit_notice(table, None, 0.5, zcdp=True)
    assert zcdp is not None and "4^2 x rho = 8" in zcdp and "at rho" in zcdp and "epsilon" not in zcdp
    assert unit_notice(table, "user", 0.5, zcdp=True) is None
