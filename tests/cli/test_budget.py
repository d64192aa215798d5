"""Budget files on the CLI: --budget-file / --budget-total on every publishing command, privpub budget show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_inputs import SUFFIXES, VALID, args_for
from typer.testing import CliRunner

from privpub.cli import app
from privpub.core import Session

runner = CliRunner()


def test_histogram_releases_are_charged_and_refused_when_the_budget_is_spent(
        tmp_path: Path, inputs: dict[str, Path]) -> None:
    budget = tmp_path / "budget.json"
    first = runner.invoke(app, [*args_for("histogram", inputs, tmp_path / "a.csv", {"--epsilon": "0.6"}),
                                "--budget-file", str(budget), "--budget-total", "1.0", "--data-label", "ages 2024"])
    assert first.exit_code == 0, first.output
    assert "spent 0.6 of 1, 0.4 remains" in first.output
    session = Session.open(budget)
    assert [(c.method, c.epsilon, c.status) for c in session.charges] == [("hphp", 0.6, "spent")]
    assert session.charges[0].data.startswith("ages 2024")
    # the second release at 0.6 cannot be paid: nothing is drawn, nothing is written
    second = runner.invoke(app, [*args_for("histogram", inputs, tmp_path / "b.csv", {"--epsilon": "0.6"}),
                                 "--budget-file", str(budget)])
    assert second.exit_code == 2, second.output
    assert "--epsilon: the session cannot pay for hphp at epsilon=0.6" in second.output
    assert not (tmp_path / "b.csv").exists()
    third = runner.invoke(app, [*args_for("histogram", inputs, tmp_path / "c.csv",
                                          {"--epsilon": "0.4", "--method": "laplace"}), "--budget-file", str(budget)])
    assert third.exit_code == 0, third.output
    assert Session.open(budget).spent == pytest.approx(1.0)
    shown = runner.invoke(app, ["budget", "show", str(budget)])
    assert shown.exit_code == 0, shown.output
    assert "total epsilon 1, spent 1, remaining 0" in shown.output
    assert "hphp" in shown.output and "laplace" in shown.output
    assert "ages 2024" in shown.output and "counts.csv" in shown.output   # default label: the input's name


def test_budget_total_must_match_and_needs_a_file(tmp_path: Path, inputs: dict[str, Path]) -> None:
    budget = tmp_path / "budget.json"
    ok = runner.invoke(app, [*args_for("histogram", inputs, tmp_path / "a.csv"), "--budget-file", str(budget),
                             "--budget-total", "3"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, [*args_for("histogram", inputs, tmp_path / "b.csv"), "--budget-file", str(budget),
                              "--budget-total", "5"])
    assert bad.exit_code == 2 and "total epsilon 3" in bad.output
    lone = runner.invoke(app, [*args_for("histogram", inputs, tmp_path / "c.csv"), "--budget-total", "5"])
    assert lone.exit_code == 2 and "--budget-total creates a --budget-file" in lone.output
    missing = runner.invoke(app, [*args_for("histogram", inputs, tmp_path / "d.csv"),
                                  "--budget-file", str(tmp_path / "new.json")])
    assert missing.exit_code == 2 and "give total_epsilon to create it" in missing.output


@pytest.mark.parametrize("command", sorted(VALID))
def test_every_publishing_command_honours_or_refuses_the_budget_file(
        tmp_path: Path, inputs: dict[str, Path], command: str) -> None:
    """A command either charges the budget file or refuses to publish; it never ignores it."""
    budget = tmp_path / "budget.json"
    out = tmp_path / f"o{SUFFIXES[command][0]}"
    result = runner.invoke(app, [*args_for(command, inputs, out), "--budget-file", str(budget), "--budget-total", "10"])
    if result.exit_code == 0:
        charges = Session.open(budget).charges
        assert len(charges) == 1 and charges[0].status == "spent", charges
        assert charges[0].epsilon > 0
    else:
        assert result.exit_code == 2, result.output
        assert "cannot publish under a budget session yet" in result.output
        assert not out.exists()
        assert Session.open(budget).charges == ()


def test_budget_show_errors(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["budget", "show", str(tmp_path / "none.json")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    junk = tmp_path / "junk.json"
    junk.write_text(json.dumps({"hello": 1}), encoding="utf-8")
    bad = runner.invoke(app, ["budget", "show", str(junk)])
    assert bad.exit_code == 2 and "not a privpub session file" in bad.output
    empty = tmp_path / "empty.json"
    Session.open(empty, total_epsilon=2.0)
    shown = runner.invoke(app, ["budget", "show", str(empty)])
    assert shown.exit_code == 0 and "no releases yet" in shown.output


@pytest.mark.parametrize("command", sorted(VALID))
def test_seed_help_warns_against_publishing_the_seed(command: str) -> None:
    from typer.main import get_command

    cmd = get_command(app).commands[command]  # type: ignore[attr-defined]
    if hasattr(cmd, "commands"):  # ``privpub stream`` is a group whose default command is ``publish``
        cmd = cmd.commands["publish"]
    params = {p.name: p for p in cmd.params}
    seed_help = params["seed"].help
    assert "never publish it" in seed_help and "omit it for an OS-seeded generator" in seed_help
    assert {"budget_file", "budget_total", "data_label", "force"} <= set(params)
    assert runner.invoke(app, [command, "--help"]).exit_code == 0
