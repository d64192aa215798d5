"""``privpub demo`` writes the HTML report from the demo rows (parts replaced by fakes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_fakes import ledger
from typer.testing import CliRunner

import privpub.cli._demo as demo_mod
from privpub.cli import app
from privpub.experiments._common import DemoRow

runner = CliRunner()


def _fake_demo(part: str) -> Any:
    if part == "decision":
        return None                                       # not installed

    def demo(rng: int = 0) -> list[DemoRow]:
        if part == "stream":
            raise RuntimeError("stream demo broke")
        return [DemoRow(part, "M1", 0.1, "MAE", 3.0 + rng, "n=10", ledger=ledger(0.1)),
                DemoRow(part, "M2", 1.0, "MAE", 0.5),
                DemoRow(part, "M2", 1.0, "accuracy", 0.9)]

    return demo


def test_demo_writes_the_report(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(demo_mod, "_demo_function", _fake_demo)
    monkeypatch.setattr("privpub.experiments.all.representative_ledgers",
                        lambda part, rng=0: (None, "skipped in test"))
    out = tmp_path / "demo"
    result = runner.invoke(app, ["demo", "--seed", "2", "--out", str(out)])
    assert result.exit_code == 1, result.output           # a part failed: reported, non-zero exit
    assert "stream     FAILED: RuntimeError: stream demo broke" in result.output
    assert "M1" in result.output and "report:" in result.output
    for part in ("core", "histogram", "spatial", "ldp_synth"):
        assert (out / part / "demo.png").stat().st_size > 1000
        assert (out / part / "demo.csv").is_file()
        assert (out / part / "ledgers.csv").is_file()    # from the rows' ledgers
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "stream demo broke" in html and "not available" in html
    assert "M1 eps=0.1" in html


def test_demo_without_report(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(demo_mod, "_demo_function", lambda part: None if part != "core" else _fake_demo(part))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["demo", "--no-report"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "privpub-results").exists()
