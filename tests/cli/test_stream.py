"""``privpub stream publish --privacy-id COLUMN --max-contributions K`` (issue 25): an event table,
bounded to K events per person and step, published at the person-per-step unit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privpub import PrivacyUnit
from privpub.cli import app
from privpub.core import Session
from privpub.stream import RTP

runner = CliRunner()


@pytest.fixture
def events(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 3000
    frame = pd.DataFrame({"step": rng.integers(1, 41, n), "user": rng.zipf(1.6, n) % 50})
    path = tmp_path / "events.csv"
    frame.to_csv(path, index=False)
    return path


def _args(events: Path, out: Path, *extra: str) -> list[str]:
    return ["stream", "publish", str(events), "-e", "1", "-w", "64", "-m", "rtp", "--column", "step",
            "-o", str(out), "--seed", "3", *extra]


def test_publish_bounds_events_as_the_library_does(events: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    res = runner.invoke(app, _args(events, out, "--privacy-id", "user", "--max-contributions", "2"))
    assert res.exit_code == 0, res.output
    assert "at most 2 per step" in res.output  # the unit in words
    got = pd.read_csv(out)
    # the library on the same events and seed: same key, same kept events, same noise
    frame = pd.read_csv(events)
    pub = RTP(window=64, epsilon=1.0, rng=3, privacy_unit=PrivacyUnit.person_per_step("user", 2))
    items = pub.extend_events(frame["step"].to_numpy() - 1, frame["user"].to_numpy())
    t = np.arange(1, pub.t + 1)
    assert got["noisy_count"].tolist() == pub.answer(np.stack([t, t], axis=1), record=False).tolist()
    # the bound holds: no step counts more than 2 events of any person
    per = frame.groupby(["step", "user"]).size().clip(upper=2).groupby(level=0).sum()
    assert items.tolist() == per.reindex(range(1, 41), fill_value=0).tolist()
    assert items.sum() < len(frame)  # the heavy users were truncated


def test_budget_file_records_the_unit(events: Path, tmp_path: Path) -> None:
    budget = tmp_path / "budget.json"
    res = runner.invoke(app, _args(events, tmp_path / "o.csv", "--privacy-id", "user", "--max-contributions", "3",
                                   "--budget-file", str(budget), "--budget-total", "2"))
    assert res.exit_code == 0, res.output
    (charge,) = Session.open(budget).charges
    assert charge.privacy_unit == PrivacyUnit.person_per_step("user", 3)


@pytest.mark.parametrize(("extra", "message"), [
    (["--privacy-id", "user"], "--privacy-id needs --max-contributions"),
    (["--max-contributions", "2"], "--max-contributions needs --privacy-id"),
    (["--privacy-id", "user", "--max-contributions", "0"], "--max-contributions must be >= 1"),
    (["--privacy-id", "step", "--max-contributions", "2"], "must be different columns"),
    (["--privacy-id", "who", "--max-contributions", "2"], "missing ['who']"),
])
def test_bad_options_exit_2_before_anything_is_written(events: Path, tmp_path: Path, extra: list[str],
                                                       message: str) -> None:
    out = tmp_path / "o.csv"
    res = runner.invoke(app, _args(events, out, *extra))
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert not out.exists()


def test_missing_ids_and_bad_steps_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"step": [1, 2, 0], "user": ["a", "b", "c"]}).to_csv(bad, index=False)
    res = runner.invoke(app, _args(bad, tmp_path / "o.csv", "--privacy-id", "user", "--max-contributions", "2"))
    assert res.exit_code == 2 and "steps >= 1" in res.output
    pd.DataFrame({"step": [1, 2, 2], "user": ["a", None, "c"]}).to_csv(bad, index=False)
    res = runner.invoke(app, _args(bad, tmp_path / "o.csv", "--privacy-id", "user", "--max-contributions", "2"))
    assert res.exit_code == 2 and "missing in row 2" in res.output


def test_a_series_without_ids_says_the_per_person_check_is_not_run(tmp_path: Path) -> None:
    series = tmp_path / "s.csv"
    pd.DataFrame({"count": [3, 0, 5, 2]}).to_csv(series, index=False)
    res = runner.invoke(app, ["stream", "publish", str(series), "-e", "1", "-w", "4", "-m", "rtp", "--column", "count",
                              "-o", str(tmp_path / "o.csv"), "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert "this release protects one event" in res.stderr and "is not checked" in res.stderr
    quiet = runner.invoke(app, ["stream", "publish", str(series), "-e", "1", "-w", "4", "-m", "rtp", "--column",
                                "count", "-o", str(tmp_path / "q.csv"), "--seed", "1", "--quiet"])
    assert quiet.exit_code == 0 and "not checked" not in quiet.stderr


# -- --rho: the zCDP stream publishers (issue 26) -----------------------------------------------------------
@pytest.fixture
def series(tmp_path: Path) -> Path:
    path = tmp_path / "series.txt"
    path.write_text("\n".join(str(v) for v in np.random.default_rng(1).integers(0, 5, 100)) + "\n")
    return path


@pytest.mark.parametrize("method", ["mf_sqrt", "blt", "mf_range", "bt", "bth"])
def test_rho_publishes_as_the_library_does(series: Path, tmp_path: Path, method: str) -> None:
    from privpub.stream import PUBLISHERS

    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["stream", "publish", str(series), "--rho", "0.5", "-w", "128", "-m", method,
                              "-o", str(out), "--seed", "4"])
    assert res.exit_code == 0, res.output
    assert "rho=0.5 (zCDP)" in res.output
    items = np.loadtxt(series, dtype=np.int64)
    pub = PUBLISHERS[method](window=128, rho=0.5, rng=4)
    pub.extend(items)
    t = np.arange(1, items.size + 1)
    assert pd.read_csv(out)["noisy_count"].tolist() == pub.answer(np.stack([t, t], axis=1), record=False).tolist()


def test_rho_budget_file_is_a_zcdp_session(series: Path, tmp_path: Path) -> None:
    budget = tmp_path / "budget.json"
    args = ["stream", "publish", str(series), "-w", "16", "-m", "mf_sqrt", "--budget-file", str(budget)]
    res = runner.invoke(app, [*args, "--rho", "0.25", "-o", str(tmp_path / "a.csv"), "--budget-total", "0.4"])
    assert res.exit_code == 0, res.output
    assert "spent rho 0.25 of 0.4" in res.output
    session = Session.open(budget)
    assert session.measure == "zcdp" and session.spent == pytest.approx(0.25)
    # the rest of the rho cannot pay for a second 0.25, and an epsilon is never added to the rho
    res = runner.invoke(app, [*args, "--rho", "0.25", "-o", str(tmp_path / "b.csv")])
    assert res.exit_code == 2 and "0.15" in res.output and not (tmp_path / "b.csv").exists(), res.output
    res = runner.invoke(app, [*args[:-4], "-m", "bt", "--budget-file", str(budget), "--epsilon", "0.1",
                              "-o", str(tmp_path / "c.csv")])
    assert res.exit_code == 2 and not (tmp_path / "c.csv").exists(), res.output
    assert Session.open(budget).spent == pytest.approx(0.25)


@pytest.mark.parametrize(("extra", "flag"), [
    ([], "--epsilon"),  # neither
    (["--epsilon", "1", "--rho", "0.5"], "--rho"),  # both
    (["--rho", "0"], "--rho"),
    (["--rho", "0.5", "-m", "rtp"], "rho"),  # RTP is pure DP only
    (["--epsilon", "1", "-m", "mf_sqrt"], "epsilon"),  # the MF counters are zCDP only
])
def test_budget_options_are_checked(series: Path, tmp_path: Path, extra: list[str], flag: str) -> None:
    out = tmp_path / "o.csv"
    res = runner.invoke(app, ["stream", "publish", str(series), "-w", "16", "-o", str(out), *extra])
    assert res.exit_code == 2, res.output
    assert flag in res.output and "Traceback" not in res.output
    assert not out.exists()
