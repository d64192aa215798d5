"""Errors as data (issue 24): the CLI names the flag of an error from the error's ``param`` and
spells its ``fix`` with flags, never by reading or rewriting the message."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from cli_inputs import args_for
from typer.testing import CliRunner

from privpub.cli import app
from privpub.cli._common import command_flags, handle_errors, render_error
from privpub.errors import BudgetExceededError, DomainError, ParameterError

runner = CliRunner()


def _error_line(result) -> str:  # type: ignore[no-untyped-def]
    """The one ``error:`` line of a failed command (exit 2, no traceback)."""
    assert result.exit_code == 2, (result.exit_code, result.output, repr(result.exception))
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


#: (command, options replaced in its valid run, what the error line must hold): each error comes
#: from the library with ``param`` (or ``fix``), and the CLI names the flag from it
LIBRARY_ERRORS = [
    ("synth", {"--epsilon": None, "--flip-prob": "1.5"}, ["--flip-prob: "]),
    ("synth", {"--epsilon": None, "--flip-prob": "1e-300"}, ["--flip-prob: "]),
    ("synth", {"--epsilon": "-2", "--columns": "a,b"}, ["--epsilon"]),
    ("stream", {"--max-item": "-1"}, ["--max-item: "]),
    ("stream", {"--real": ""}, ["--noise: ", "; pass --noise laplace"]),
    ("spatial", {"--bounds": "0,0,0.5,0.5"}, ["; pass --clip"]),
    ("decision", {"--levels": "10000"}, ["--levels: "]),
]


@pytest.mark.parametrize(("command", "override", "needles"), LIBRARY_ERRORS,
                         ids=[f"{c}-{'-'.join(o)}" for c, o, _ in LIBRARY_ERRORS])
def test_library_errors_name_the_flag(tmp_path: Path, inputs: dict[str, Path], command: str,
                                      override: dict[str, str | None], needles: list[str]) -> None:
    out = tmp_path / ("o.json" if command == "spatial" else "o.csv")
    line = _error_line(runner.invoke(app, args_for(command, inputs, out, override)))
    for needle in needles:
        assert needle in line, line
    assert "=True" not in line and "=" not in line.partition("; pass ")[2], line  # the fix in flags, not Python
    assert not out.exists()


def test_a_budget_refusal_names_the_epsilon_flag(tmp_path: Path, inputs: dict[str, Path]) -> None:
    budget = tmp_path / "budget.json"
    base = args_for("histogram", inputs, tmp_path / "a.csv", {"--epsilon": "0.6"})
    assert runner.invoke(app, [*base, "--budget-file", str(budget), "--budget-total", "1"]).exit_code == 0
    again = args_for("histogram", inputs, tmp_path / "b.csv", {"--epsilon": "0.6"})
    line = _error_line(runner.invoke(app, [*again, "--budget-file", str(budget)]))
    assert line.startswith("error: --epsilon: the session cannot pay"), line


# ------------------------------------------------------------------------------------------------
# the flag comes from ``param``, whatever the message says
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("command", "override", "param", "flag"), [
    ("stream", {}, "window", "--window"),
    ("stream", {}, "max_item", "--max-item"),
    ("stream", {}, "rng", "--seed"),
    ("histogram", {}, "epsilon", "--epsilon"),
    ("synth", {}, "flip_prob", "--flip-prob"),
    ("spatial", {}, "bounds", "--bounds"),
])
def test_the_flag_is_rendered_from_param_not_from_the_message(
        tmp_path: Path, inputs: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
        command: str, override: dict[str, str | None], param: str, flag: str) -> None:
    """A message that does not mention the parameter at all still gets its flag: the CLI reads
    ``exc.param`` (a regression to message parsing would print the bare message)."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise ParameterError("this value cannot be used", param=param)

    monkeypatch.setattr("privpub.cli._common.check_output", refuse)
    for module in ("_stream", "_histogram", "_ldp_synth", "_spatial"):
        monkeypatch.setattr(f"privpub.cli.{module}.check_output", refuse, raising=False)
    out = tmp_path / ("o.json" if command == "spatial" else "o.csv")
    line = _error_line(runner.invoke(app, args_for(command, inputs, out, override)))
    assert line == f"error: {flag}: this value cannot be used", line


def test_render_error_uses_only_the_data() -> None:
    flags = {"clip": ("--clip", "--no-clip"), "noise": ("--noise", None), "real": ("--real", None),
             "epsilon": ("--epsilon", None)}
    # the message names another parameter than ``param``: the flag follows param
    assert render_error(ParameterError("epsilon must be > 0", param="noise"), flags) == "--noise: epsilon must be > 0"
    # no param: the message as it is (nothing is rewritten, even a Python spelling in it)
    assert render_error(ParameterError("epsilon=-1 must be > 0"), flags) == "epsilon=-1 must be > 0"
    # a param the command has no flag for: no prefix
    assert render_error(DomainError("rows must be finite", param="rows"), flags) == "rows must be finite"
    # fix as flags; a fix without a flag is left out
    err = DomainError("items must be integers", param="items", fix={"real": True, "noise": "laplace", "x": 1})
    assert str(err) == "items must be integers; pass real=True, noise='laplace', x=1"
    assert render_error(err, flags) == "items must be integers; pass --real --noise laplace"
    assert render_error(DomainError("off", fix={"clip": False}), flags) == "off; pass --no-clip"
    assert render_error(BudgetExceededError("no budget left", param="epsilon"), flags) == "--epsilon: no budget left"


def test_command_flags_of_a_typer_command() -> None:
    def cmd(window: int = typer.Option(8, "--window", "-w"), seed: int | None = typer.Option(None, "--seed"),
            clip: bool = typer.Option(False, "--clip/--no-clip")) -> None: ...

    flags = command_flags(cmd)
    assert flags["window"] == ("--window", None) and flags["clip"] == ("--clip", "--no-clip")
    assert flags["rng"] == flags["seed"] == ("--seed", None)


def test_handle_errors_prints_one_line_per_problem_with_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from privpub.cli._common import Checks

    @handle_errors
    def cmd(epsilon: float = typer.Option(1.0, "--epsilon"), window: int = typer.Option(8, "--window")) -> None:
        checks = Checks()
        checks.add(ParameterError("epsilon must be > 0, got -1", param="epsilon"))
        checks.add(ParameterError("window must be >= 1, got 0", param="window"))
        checks.done()

    with pytest.raises(typer.Exit) as exit_info:
        cmd()
    assert exit_info.value.exit_code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: 2 problems with the arguments")
    assert err[1:] == ["  - --epsilon: epsilon must be > 0, got -1", "  - --window: window must be >= 1, got 0"]
