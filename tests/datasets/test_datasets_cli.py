"""``privpub datasets list | info`` through Typer's CliRunner."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from privpub.cli import app
from privpub.datasets import list_datasets

runner = CliRunner()


def test_list_without_data(tmp_path: Path) -> None:
    result = runner.invoke(app, ["datasets", "list", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:4] == ["name", "kind", "status", "path"]
    assert len(lines) == len(list_datasets()) + 2
    assert all("missing" in line for line in lines[1:-1])
    assert "https://github.com/vukk/lfr" in result.output  # the public source is shown
    assert lines[-1] == f"0 of {len(list_datasets())} present in {tmp_path}"


def test_list_with_data(data_dir: Path) -> None:
    result = runner.invoke(app, ["datasets", "list", "--data-dir", str(data_dir)])
    assert result.exit_code == 0, result.output
    adult = next(line for line in result.output.splitlines() if line.startswith("adult "))
    if (data_dir / "adult" / "adult.data").is_file() and (data_dir / "adult" / "adult.test").is_file():
        assert "present" in adult and str(data_dir / "adult" / "adult.data") in adult


def test_list_uses_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PRIVPUB_DATA", str(tmp_path))
    result = runner.invoke(app, ["datasets", "list"])
    assert result.exit_code == 0 and f"present in {tmp_path}" in result.output
    monkeypatch.delenv("PRIVPUB_DATA")
    result = runner.invoke(app, ["datasets", "list"])
    assert result.exit_code == 0 and "no data directory" in result.output


def test_info(data_dir: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["datasets", "info", "worldcup98", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0
    assert "status:      missing" in result.output and "nimamahmoudi/worldcup98-dataset" in result.output
    if not (data_dir / "hay2010_histograms" / "search_logs.txt").is_file():
        pytest.skip("search_logs not present")
    result = runner.invoke(app, ["datasets", "info", "search_logs", "--data-dir", str(data_dir)])
    assert result.exit_code == 0
    assert "present: counts of shape (32768,), total 335889" in result.output


def test_unknown_dataset_is_a_one_line_error() -> None:
    result = runner.invoke(app, ["datasets", "info", "waitakere"])
    assert result.exit_code == 2
    assert "error: name must be one of the registered datasets" in result.output
