"""docs/cli.md is generated from the Typer application and must be up to date."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_up_to_date() -> None:
    expected = _generator().render()
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == expected, "docs/cli.md is out of date: run python scripts/gen_cli_docs.py"


def test_cli_reference_covers_every_command() -> None:
    from typer.main import get_command

    from privpub.cli import app

    text = _generator().render()

    def walk(cmd: object, path: str) -> list[str]:
        subs = getattr(cmd, "commands", None)
        if subs is None:
            return [path]
        return [path] + [p for n, c in subs.items() for p in walk(c, f"{path} {n}")]

    for path in walk(get_command(app), "privpub"):
        assert f"`{path}`" in text, path
    assert "`privpub reproduce all`" in text and "`privpub demo`" in text
