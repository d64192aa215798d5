"""Output files of every publishing command: format from the suffix, no overwrite, atomic, safe CSV.

Each test names the finding of issue 12 it covers; each fails on the CLI before the shared writer.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_inputs import SUFFIXES, VALID, args_for
from typer.testing import CliRunner

from privpub.cli import app

runner = CliRunner()
COMMANDS = sorted(VALID)


def _ok(result) -> None:
    assert result.exit_code == 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _fails_cleanly(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, result.output
    for needle in needles:
        assert needle in lines[0], result.output


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".partial" in p.name)


@pytest.mark.parametrize("command", COMMANDS)
def test_output_naming_a_directory_is_a_clear_error(inputs: dict[str, Path], tmp_path: Path, command: str) -> None:
    """Finding: ``-o`` a directory raised IsADirectoryError with a traceback."""
    _fails_cleanly(runner.invoke(app, args_for(command, inputs, tmp_path)), "is a directory")


@pytest.mark.parametrize("command", COMMANDS)
def test_output_in_a_missing_folder_is_a_clear_error(inputs: dict[str, Path], tmp_path: Path, command: str) -> None:
    out = tmp_path / "nowhere" / f"o{SUFFIXES[command][0]}"
    _fails_cleanly(runner.invoke(app, args_for(command, inputs, out)), "does not exist")
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_format_follows_the_suffix(inputs: dict[str, Path], tmp_path: Path, command: str) -> None:
    """Finding: ``-o x.json`` wrote CSV. Every supported suffix writes its format; others are refused."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        result = runner.invoke(app, args_for(command, inputs, tmp_path / "o.parquet"))
        if ".parquet" in SUFFIXES[command]:
            _fails_cleanly(result, "needs pyarrow")
        assert not (tmp_path / "o.parquet").exists()
        suffixes = [s for s in SUFFIXES[command] if s != ".parquet"]
    else:
        suffixes = list(SUFFIXES[command])
    for suffix in suffixes:
        out = tmp_path / f"o{suffix}"
        _ok(runner.invoke(app, args_for(command, inputs, out)))
        if suffix == ".json":
            payload = json.loads(out.read_text(encoding="utf-8"))
            assert isinstance(payload, list | dict) and payload
        elif suffix == ".csv":
            assert len(pd.read_csv(out)) > 0
        elif suffix == ".npy":
            arr = np.load(out, allow_pickle=False)
            assert arr.dtype.names and len(arr) > 0
        elif suffix == ".parquet":
            assert len(pd.read_parquet(out)) > 0
    result = runner.invoke(app, args_for(command, inputs, tmp_path / "o.txt"))
    _fails_cleanly(result, "suffix '.txt'", SUFFIXES[command][0])
    assert not (tmp_path / "o.txt").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_no_overwrite_without_force(inputs: dict[str, Path], tmp_path: Path, command: str) -> None:
    """Finding: outputs were replaced silently, including the input file itself."""
    out = tmp_path / f"o{SUFFIXES[command][0]}"
    out.write_text("precious", encoding="utf-8")
    _fails_cleanly(runner.invoke(app, args_for(command, inputs, out)), "already exists", "--force")
    assert out.read_text(encoding="utf-8") == "precious"
    _ok(runner.invoke(app, [*args_for(command, inputs, out), "--force"]))
    assert out.read_text(encoding="utf-8") != "precious"
    assert _leftovers(tmp_path) == []


def test_output_naming_the_input_is_refused(inputs: dict[str, Path]) -> None:
    before = inputs["counts"].read_bytes()
    result = runner.invoke(app, args_for("histogram", inputs, inputs["counts"]))
    _fails_cleanly(result, "is an input file")
    assert inputs["counts"].read_bytes() == before
    result = runner.invoke(app, args_for("decision", inputs, inputs["table"].with_name("x.csv"),
                                         {"--schema": "@schema"}))
    _ok(result)


@pytest.mark.parametrize("command", COMMANDS)
def test_interrupt_leaves_no_partial_output(inputs: dict[str, Path], tmp_path: Path, command: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding: an interrupted ``privpub synth`` left a truncated CSV that looked complete."""
    import privpub._io as io

    def half_then_interrupt(data, tmp: Path, progress) -> None:
        tmp.write_text("bin,count\n0,1\n", encoding="utf-8")   # a plausible prefix of the output ...
        raise KeyboardInterrupt                                  # ... then Ctrl-C

    for name in ("csv", "json", "npy", "parquet"):
        monkeypatch.setitem(io._WRITERS, name, half_then_interrupt)
    monkeypatch.setattr("privpub.spatial._release.SpatialRelease.to_json",
                        lambda self, path: half_then_interrupt(None, Path(path), None))
    out = tmp_path / f"o{SUFFIXES[command][0]}"
    result = runner.invoke(app, args_for(command, inputs, out))
    assert result.exit_code == 130, result.output
    assert "interrupted: no output was written" in result.output
    assert not out.exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("command", ["histogram", "synth", "decision"])
def test_csv_formula_cells_are_neutralised(tmp_path: Path, command: str) -> None:
    """Finding: CSV outputs wrote cells starting with ``=`` verbatim (spreadsheet formula injection)."""
    from privpub.core import CategoricalAttribute, Schema

    cats = ["=cmd|' /C calc'!A0", "+SUM(1)", "-2+3", "@x", "\tt", "'q", "-7", "plain"]
    data = tmp_path / "d.csv"
    pd.DataFrame({"v": cats * 5, "w": (cats[::-1]) * 5}).to_csv(data, index=False)
    out = tmp_path / "o.csv"
    if command == "histogram":
        cats = [c for c in cats if c != "\tt"]            # a comma list on the command line is stripped
        pd.DataFrame({"v": cats * 5}).to_csv(data, index=False)
        args = ["histogram", str(data), "--column", "v", "--categories", ",".join(cats), "-e", "1", "-o", str(out),
                "--seed", "0", "--method", "laplace"]
    else:
        schema = Schema([CategoricalAttribute("v", cats)], class_name="w", classes=cats) if command == "decision" \
            else Schema([CategoricalAttribute("v", cats), CategoricalAttribute("w", cats)])
        (tmp_path / "s.json").write_text(json.dumps(schema.to_dict()), encoding="utf-8")
        args = [command, str(data), "--schema", str(tmp_path / "s.json"), "--epsilon", "50", "-o", str(out),
                "--seed", "0"]
        args += ["--target", "w", "--levels", "1", "--synthetic"] if command == "decision" else ["--degree", "1",
                                                                                                   "--quiet"]
    _ok(runner.invoke(app, args))
    text = out.read_text(encoding="utf-8")
    cells = [c.strip('"') for line in text.splitlines()[1:] for c in line.split(",")]
    for cell in cells:
        if cell and cell[0] in "=+-@\t\r":
            float(cell)                                   # only plain numbers may start with a sign
    assert any(c.startswith("'=cmd") for c in cells)
    assert "-7" in cells or command == "decision"        # numbers in text cells stay numbers
    if command == "histogram":
        frame = pd.read_csv(out)
        assert pd.api.types.is_integer_dtype(frame["count"])   # noisy counts (may be negative) stay numbers


@pytest.mark.parametrize("column", [["x", "y"], pd.array([1, None], dtype="Int64"), pd.Categorical(["a", "b"])])
def test_npy_output_refuses_pandas_extension_columns(tmp_path: Path, column) -> None:
    """A text, nullable-integer or categorical column (pandas extension dtypes, not numpy dtypes)
    gets the .npy writer's clear error, not numpy's TypeError."""
    from privpub._io import write_table
    from privpub.errors import ParameterError

    with pytest.raises(ParameterError, match="holds numbers only"):
        write_table(pd.DataFrame({"a": column, "b": [1, 2]}), tmp_path / "out.npy")
    assert not (tmp_path / "out.npy").exists()
