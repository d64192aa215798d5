"""``reproduce_all`` and its CLI with fake part runners: every outcome is reported and the rest runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from report_fakes import ledger, part_with_claims, part_without_claims
from typer.testing import CliRunner

import privpub.experiments.all as all_mod
from privpub.cli import app
from privpub.errors import DataNotFoundError, ParameterError

runner = CliRunner()


def _fake_runners(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    def histogram(out_dir: Path, **kw: Any) -> Path:
        calls.append(("histogram", kw))
        return part_with_claims(Path(out_dir))

    def ldp_synth(out_dir: Path, *, quick: bool, data_dir: Any, rng: int, progress: bool = False) -> Path:
        calls.append(("ldp_synth", {"quick": quick, "progress": progress}))
        return part_without_claims(Path(out_dir))

    def spatial(out_dir: Path, **kw: Any) -> Path:
        raise DataNotFoundError("dataset 'gowalla' needs the file 'checkin_256_256.npy'")

    def decision(out_dir: Path, **kw: Any) -> Path:
        raise RuntimeError("boom in decision")

    return {"histogram": histogram, "ldp_synth": ldp_synth, "spatial": spatial, "decision": decision,
            "stream": None}


@pytest.fixture
def fake_parts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    runners = _fake_runners(calls)
    monkeypatch.setattr(all_mod, "_load_runner", lambda part: runners[part])

    def fake_ledgers(part: str, rng: int = 0) -> tuple[pd.DataFrame, str]:
        frame = ledger(0.5).to_frame()
        frame.insert(0, "epsilon_total", 0.5)
        frame.insert(0, "release", f"{part} representative")
        return frame, "representative (fake)"

    monkeypatch.setattr(all_mod, "representative_ledgers", fake_ledgers)
    return calls


def test_reproduce_all_reports_every_outcome(fake_parts: list[Any], tmp_path: Path) -> None:
    messages: list[str] = []
    empty_data = tmp_path / "no-data"           # only one file each for histogram and ldp_synth
    for rel in ("hay2010_histograms/nettrace.txt", "nltcs/nltcs.csv"):
        (empty_data / rel).parent.mkdir(parents=True, exist_ok=True)
        (empty_data / rel).write_text("1\n", encoding="utf-8")
    report = all_mod.reproduce_all(tmp_path / "out", quick=True, data_dir=empty_data, rng=3, progress=False,
                                   echo=messages.append)
    assert report == tmp_path / "out" / "report.html" and report.is_file()
    # the runners got the options, ldp_synth's optional progress flag only when asked for
    assert fake_parts[0] == ("histogram", {"quick": True, "data_dir": empty_data, "rng": 3})
    assert fake_parts[1] == ("ldp_synth", {"quick": True, "progress": False})
    text = "\n".join(messages)
    assert "expected duration about" in text
    assert "missing datasets" in text and "adult (needed by ldp_synth, decision)" in text
    assert "nltcs (needed" not in text
    assert "not installed, skipped: stream" in text
    claims = pd.read_csv(tmp_path / "out" / "claims_all.csv", keep_default_na=False)
    status = dict(zip(claims.part, claims.status))
    assert status == {"histogram": "ok", "ldp_synth": "ok", "spatial": "missing data", "decision": "failed",
                      "stream": "not available"}
    html = report.read_text(encoding="utf-8")
    assert "boom in decision" in html and "checkin_256_256.npy" in html
    assert "ldp_synth representative" in html        # fallback ledgers where no ledgers.csv
    assert "HPHP eps=0.1" in html                      # the part's own ledgers.csv
    # every missing dataset of the installed parts is listed with its public source
    from privpub.datasets import info

    for name in ("search_logs", "adult", "gowalla", "census_income_kdd", "iris"):
        assert info(name).source.split(" ")[0] in html


def test_a_run_without_any_of_its_data_is_missing_data(fake_parts: list[Any], tmp_path: Path) -> None:
    all_mod.reproduce_all(tmp_path / "out", data_dir=tmp_path, parts=["histogram"], progress=False)
    claims = pd.read_csv(tmp_path / "out" / "claims_all.csv", keep_default_na=False)
    assert set(claims.status) == {"missing data"}


def test_unknown_part_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="parts must be a subset"):
        all_mod.reproduce_all(tmp_path, parts=["histogram", "nope"], progress=False)


def test_missing_datasets_name_their_source(tmp_path: Path) -> None:
    rows = all_mod.missing_datasets(["stream", "histogram"], tmp_path)
    names = [r[0] for r in rows]
    assert names[:3] == ["search_logs", "nettrace", "worldcup98"]
    assert dict((r[0], r[1]) for r in rows)["nettrace"] == "stream, histogram"
    assert all(r[2].startswith("https://") for r in rows)


def test_expected_duration() -> None:
    assert all_mod.expected_duration(list(all_mod.PARTS), quick=True) <= 10
    assert all_mod.expected_duration(["stream"], quick=False) > all_mod.expected_duration(["stream"], quick=True)


def test_cli_reproduce_all_and_report(fake_parts: list[Any], tmp_path: Path) -> None:
    out = tmp_path / "res"
    result = runner.invoke(app, ["reproduce", "all", "--quick", "--out", str(out), "--data-dir", str(tmp_path),
                                 "--no-progress", "--part", "histogram", "--part", "ldp_synth"])
    assert result.exit_code == 0, result.output
    assert "expected duration about 3.5 min" in result.output
    assert "report:" in result.output and "claims: " in result.output
    assert (out / "report.html").is_file()
    (out / "report.html").unlink()
    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "report.html").is_file()


def test_cli_exits_1_when_a_part_fails(fake_parts: list[Any], tmp_path: Path) -> None:
    result = runner.invoke(app, ["reproduce", "all", "--out", str(tmp_path), "--no-progress",
                                 "--part", "decision", "--part", "spatial"])
    assert result.exit_code == 1, result.output
    assert "failed: decision" in result.output
    assert "spatial: missing data" in result.output


def test_cli_rejects_unknown_part(tmp_path: Path) -> None:
    result = runner.invoke(app, ["reproduce", "all", "--part", "bogus", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "--part must be one of" in result.output


def test_cli_report_without_results(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert "no part directories" in result.output


def test_interrupt_still_writes_the_report(fake_parts: list[Any], monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    def interrupted(out_dir: Path, **kw: Any) -> Path:
        raise KeyboardInterrupt

    runners = _fake_runners([])
    runners["ldp_synth"] = interrupted
    monkeypatch.setattr(all_mod, "_load_runner", lambda part: runners[part])
    with pytest.raises(KeyboardInterrupt):
        all_mod.reproduce_all(tmp_path, parts=["histogram", "ldp_synth", "stream"], progress=False)
    claims = pd.read_csv(tmp_path / "claims_all.csv", keep_default_na=False)
    assert dict(zip(claims.part, claims.status))["ldp_synth"] == "failed"
    assert "interrupted by the user" in (tmp_path / "report.html").read_text(encoding="utf-8")
