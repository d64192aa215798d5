"""Every command's ``--help`` reads cleanly (issue 21): no Typer placeholders, no markup lost, every
argument explained, one name for one choice."""

from __future__ import annotations

import re
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from privpub.cli import app

runner = CliRunner()


def _commands(cmd: Any = None, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    cmd = cmd if cmd is not None else get_command(app)
    out = [(path, cmd)]
    for name, sub in getattr(cmd, "commands", {}).items():
        out += _commands(sub, (*path, name))
    return out


COMMANDS = _commands()


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) or "privpub" for p, _ in COMMANDS])
def test_help_has_no_placeholders_or_lost_markup(path: tuple[str, ...], cmd: Any) -> None:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100", "TERMINAL_WIDTH": "100"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "<bool>" not in text, text
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert not re.search(r"\{[A-Za-z_]+\}", usage), usage  # Typer's {input} for a required argument
    assert not re.search(r"privpub\)", text), text  # rich markup ate "[spark]" in "privpub[spark])"
    assert "Usage: privpub" in text


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) or "privpub" for p, _ in COMMANDS])
def test_every_argument_and_option_is_explained(path: tuple[str, ...], cmd: Any) -> None:
    missing = [p.name for p in cmd.params if not getattr(p, "hidden", False) and not (getattr(p, "help", "") or "")]
    assert not missing, f"privpub {' '.join(path)}: no help for {missing}"
    for paragraph in (cmd.help or "").split("\n\n"):
        assert "\n" not in paragraph.strip() or paragraph.startswith("\b"), (path, paragraph)


def test_spark_extra_is_shown_in_the_engine_help() -> None:
    with_engine = [p for p, c in COMMANDS if any(o.name == "engine" for o in c.params)]
    assert with_engine
    for path in with_engine:
        text = " ".join(runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output.split())
        assert "privpub[spark]" in text.replace("│ ", "").replace(" │", ""), text


def test_one_flag_name_for_the_stream_publisher() -> None:
    """``stream create --method`` as ``stream publish --method``; ``--publisher`` is a hidden alias."""
    flags = {p: {o for prm in c.params for o in getattr(prm, "opts", [])} for p, c in COMMANDS}
    assert "--method" in flags[("stream", "create")] and "--method" in flags[("stream", "publish")]
    hidden = [prm for prm in dict(COMMANDS)[("stream", "create")].params if "--publisher" in getattr(prm, "opts", [])]
    assert hidden and hidden[0].hidden
    assert not any("--publisher" in o for p, opts in flags.items() for o in opts if p != ("stream", "create"))
    result = runner.invoke(app, ["stream", "create", "--name", "s", "-e", "1", "-w", "8", "--publisher", "rtp",
                                 "--url", "http://127.0.0.1:9", "--connect-timeout", "0"])
    assert "warning: --publisher is deprecated; use --method" in result.output
