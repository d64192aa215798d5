from __future__ import annotations

from typer.testing import CliRunner

import privpub
from privpub.cli import app

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert privpub.__version__ in result.output


def test_demo_prints_a_row_per_run() -> None:
    result = runner.invoke(app, ["demo", "--seed", "1", "--no-report"])
    assert result.exit_code == 0, result.output
    assert "discrete_laplace" in result.output
    assert "ldp.OUE" in result.output
    assert "runs in" in result.output


def test_unknown_command_fails() -> None:
    result = runner.invoke(app, ["no-such-command"])
    assert result.exit_code != 0
