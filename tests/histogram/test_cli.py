"""CLI: ``privpub histogram`` and ``privpub reproduce histogram`` through Typer's runner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privpub.cli import app

runner = CliRunner()


@pytest.fixture
def counts_csv(tmp_path: Path) -> Path:
    path = tmp_path / "hist.csv"
    pd.DataFrame({"c": [0, 0, 3, 120, 118, 0, 2, 121, 40, 41]}).to_csv(path, index=False)
    return path


@pytest.fixture
def records_csv(tmp_path: Path) -> Path:
    path = tmp_path / "records.csv"
    rng = np.random.default_rng(0)
    pd.DataFrame({"age": rng.integers(0, 10, 500), "city": rng.choice(["a", "b", "c"], 500)}).to_csv(
        path, index=False)
    return path


@pytest.mark.parametrize("method", ["hphp", "ahp", "laplace", "hphp_unattributed"])
def test_publish_counts_column(counts_csv: Path, tmp_path: Path, method: str) -> None:
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["histogram", str(counts_csv), "--counts-column", "c", "--epsilon", "0.5",
                              "--method", method, "--seed", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "10 bins" in res.output and "groups" in res.output and "epsilon=0.5" in res.output
    frame = pd.read_csv(out)
    assert len(frame) == 10 and (frame["count"] >= 0).all()
    assert {"count", "group"} <= set(frame.columns)


def test_publish_is_reproducible_and_split_is_used(counts_csv: Path, tmp_path: Path) -> None:
    outs = []
    for k in range(2):
        out = tmp_path / f"o{k}.csv"
        res = runner.invoke(app, ["histogram", str(counts_csv), "--counts-column", "c", "-e", "1",
                                  "--split", "0.5", "--seed", "7", "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert "epsilon=0.5" in res.output  # ledger lines show the 0.5 / 0.5 split
        outs.append(pd.read_csv(out))
    pd.testing.assert_frame_equal(outs[0], outs[1])


def test_raw_records_with_declared_domain(records_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.csv"
    res = runner.invoke(app, ["histogram", str(records_csv), "--column", "city", "--categories", "a,b,c,d",
                              "-e", "1", "--seed", "0", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert pd.read_csv(out)["label"].tolist() == ["a", "b", "c", "d"]
    res = runner.invoke(app, ["histogram", str(records_csv), "--column", "age", "--integer-range", "0:11",
                              "-e", "1", "--seed", "0", "-o", str(out), "--force"])
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(out)) == 12
    res = runner.invoke(app, ["histogram", str(records_csv), "--column", "age", "--bins", "0,5,10",
                              "-e", "1", "--seed", "0", "-o", str(out), "--force"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("method", ["hphp_paper", "optimal"])
def test_non_private_methods_need_the_flag(counts_csv: Path, tmp_path: Path, method: str) -> None:
    out = tmp_path / "o.csv"
    args = ["histogram", str(counts_csv), "--counts-column", "c", "-e", "1", "--method", method, "-o", str(out)]
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert "NOT differentially private" in res.output and "--non-private" in res.output
    assert not out.exists()
    res = runner.invoke(app, [*args, "--non-private", "--seed", "0"])
    assert res.exit_code == 0, res.output
    assert "NOT differentially private" in res.output


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--counts-column", "c", "-e", "0"], "epsilon"),
        (["--counts-column", "c", "-e", "1", "--split", "1.5"], "split"),
        (["--counts-column", "nope", "-e", "1"], "column 'nope'"),
        (["-e", "1"], "exactly one of --column"),
        (["--counts-column", "c", "-e", "1", "--method", "bogus"], "method must be one of"),
    ],
)
def test_bad_input_exits_with_a_message(counts_csv: Path, tmp_path: Path, extra: list[str], message: str) -> None:
    res = runner.invoke(app, ["histogram", str(counts_csv), *extra, "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 2
    assert message in res.output


def test_negative_counts_and_undeclared_domain(tmp_path: Path, records_csv: Path) -> None:
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"c": [1, -1]}).to_csv(bad, index=False)
    res = runner.invoke(app, ["histogram", str(bad), "--counts-column", "c", "-e", "1", "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 2 and "non-negative" in res.output
    res = runner.invoke(app, ["histogram", str(records_csv), "--column", "age", "-e", "1", "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 2 and "declared domain" in res.output
    res = runner.invoke(app, ["histogram", str(records_csv), "--column", "city", "--categories", "a,b",
                              "-e", "1", "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 2 and "declared categories" in res.output
    res = runner.invoke(app, ["histogram", str(tmp_path / "missing.csv"), "--counts-column", "c", "-e", "1",
                              "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_publish_with_dawa(counts_csv: Path, tmp_path: Path) -> None:
    """Issue 26: --method dawa (continuous Laplace only: --noise discrete is refused with one error line)."""
    out = tmp_path / "dawa.csv"
    res = runner.invoke(app, ["histogram", str(counts_csv), "--counts-column", "c", "-e", "1", "--method", "dawa",
                              "--noise", "laplace", "--split", "0.5", "--seed", "2", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "epsilon=0.5" in res.output
    frame = pd.read_csv(out)
    assert len(frame) == 10 and {"count", "group"} <= set(frame.columns)
    res = runner.invoke(app, ["histogram", str(counts_csv), "--counts-column", "c", "-e", "1", "--method", "dawa",
                              "-o", str(tmp_path / "x.csv")])
    assert res.exit_code == 2 and "--noise laplace" in res.output and not (tmp_path / "x.csv").exists()
