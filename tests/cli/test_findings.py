"""One test per traceback and unbounded allocation found on the CLI (issue 12).

Every hostile invocation must end with exactly one ``error: ...`` line and a non-zero exit code,
never a traceback; a size too large for memory is refused before anything is allocated, with a
message naming the size and the option that lowers it.
"""

from __future__ import annotations

import json
import resource
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_inputs import args_for
from typer.testing import CliRunner

from privpub.cli import app

runner = CliRunner()


def _one_line_error(result, *needles: str, code: int = 2) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == code, (result.exit_code, result.output, repr(result.exception))
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, result.output
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


# ---------------------------------------------------------------------------------------------
# tracebacks
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["stream", "histogram"])
def test_truncated_npy_input(tmp_path: Path, inputs: dict[str, Path], command: str) -> None:
    """Finding: a truncated .npy input raised ValueError (EOF: reading array header) with a traceback."""
    full = tmp_path / "full.npy"
    np.save(full, np.arange(1000, dtype=np.int64))
    for cut in (20, 100, 1000):                       # inside the magic, inside the header, inside the data
        bad = tmp_path / f"cut{cut}.npy"
        bad.write_bytes(full.read_bytes()[:cut])
        override: dict[str, str | None] = {"--counts-column": None} if command == "histogram" else {}
        result = runner.invoke(app, args_for(command, inputs, tmp_path / f"o{cut}.csv", override, source=bad))
        _one_line_error(result, "not a valid .npy array", str(bad))


def test_binary_taxonomy_file(tmp_path: Path, inputs: dict[str, Path]) -> None:
    """Finding: a binary --taxonomy file raised UnicodeDecodeError with a traceback."""
    tax = tmp_path / "tax.json"
    tax.write_bytes(bytes(range(256)) * 4)
    result = runner.invoke(app, [*args_for("decision", inputs, tmp_path / "o.csv"), "--taxonomy", str(tax)])
    _one_line_error(result, "tax.json", "is not UTF-8 text (a binary file?)")


def test_decision_levels_10000(tmp_path: Path, inputs: dict[str, Path]) -> None:
    """Finding: ``--levels 10000`` raised OverflowError in the level budgets with a traceback."""
    result = runner.invoke(app, args_for("decision", inputs, tmp_path / "o.csv", {"--levels": "10000"}))
    _one_line_error(result, "levels", "10000", "--levels")
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize(("command", "option"), [("histogram", "--trials"), ("decision", "--reps")])
@pytest.mark.parametrize("value", ["0", "-3", "10000001"])
def test_reproduce_repetitions_out_of_range(tmp_path: Path, command: str, option: str, value: str) -> None:
    """Finding: ``privpub reproduce histogram --trials 0`` raised KeyError('dataset') with a traceback."""
    result = runner.invoke(app, ["reproduce", command, "--quick", "--out", str(tmp_path / "r"), option, value])
    _one_line_error(result, f"{option} must be in [1, ")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("epsilon", ["800", "1e-20"])
def test_kdght_extreme_epsilon_is_one_line(tmp_path: Path, inputs: dict[str, Path], epsilon: str) -> None:
    """Finding: KDG-HT with epsilon 800 (OverflowError) or 1e-20 (ZeroDivisionError) printed a traceback.

    The publisher is being fixed in privpub.spatial; whatever it raises, the CLI prints one line and
    exits non-zero (2 for a privpub error, 1 for an internal error) -- or succeeds and writes a release.
    """
    out = tmp_path / "o.json"
    result = runner.invoke(app, args_for("spatial", inputs, out, {"--epsilon": epsilon}))
    assert isinstance(result.exception, SystemExit) or result.exception is None, repr(result.exception)
    assert "Traceback" not in result.output
    if result.exit_code == 0:
        assert json.loads(out.read_text())["epsilon"] == float(epsilon)
    else:
        _one_line_error(result, code=result.exit_code)
        assert result.exit_code in (1, 2) and not out.exists()


def test_unexpected_exceptions_are_one_line(tmp_path: Path, inputs: dict[str, Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A privpub bug (any non-privpub exception) is one line with exit code 1; PRIVPUB_DEBUG re-raises it."""
    def boom(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr("privpub.histogram.HPHP.publish", boom)
    args = args_for("histogram", inputs, tmp_path / "o.csv")
    line = _one_line_error(runner.invoke(app, args), "internal error (ZeroDivisionError: float division by zero)",
                           code=1)
    assert "PRIVPUB_DEBUG=1" in line
    monkeypatch.setenv("PRIVPUB_DEBUG", "1")
    assert isinstance(runner.invoke(app, args).exception, ZeroDivisionError)


# ---------------------------------------------------------------------------------------------
# sizes set by a flag or a small file are checked before allocation
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def low_address_space():  # type: ignore[no-untyped-def]
    """Cap the address space at the current use + 2 GB: an attempted huge allocation would MemoryError."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as fh:
        used = int(fh.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (used + 2 * 1024**3, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _schema_file(path: Path, attributes: list[dict[str, object]], **extra: object) -> Path:
    path.write_text(json.dumps({"attributes": attributes, **extra}), encoding="utf-8")
    return path


def test_three_line_files_cannot_request_terabytes(tmp_path: Path, inputs: dict[str, Path]) -> None:
    """Finding: a 3-line file made privpub request 26 TiB. Each case names the size and the option."""
    three = tmp_path / "three.csv"
    three.write_text("a,b\n1,1\n2,2\n", encoding="utf-8")
    huge_numeric = _schema_file(tmp_path / "s1.json", [
        {"name": "a", "type": "numeric", "lo": 0, "hi": 1e13, "resolution": 1},
        {"name": "b", "type": "numeric", "lo": 0, "hi": 3, "resolution": 1}])
    cats = [str(i) for i in range(3000)]
    wide = _schema_file(tmp_path / "s2.json", [{"name": n, "type": "categorical", "categories": cats}
                                               for n in ("a", "b", "c")])
    (tmp_path / "three3.csv").write_text("a,b,c\n1,1,1\n2,2,2\n", encoding="utf-8")
    cases = [
        (["histogram", str(three), "--column", "a", "--integer-range", "1:3000000000000", "-e", "1"],
         "the histogram would have 3,000,000,000,000 bins", "lower --integer-range"),
        (["stream", str(three), "--column", "a", "-e", "1", "--window", "3000000000000"],
         "the stream's trees (height 42) would have", "lower --window"),
        (["stream", str(three), "--column", "a", "-e", "1", "--window", "4", "--height", "60"],
         "the stream's trees (height 60) would have", "lower --height"),
        (["synth", str(three), "--schema", str(huge_numeric), "--epsilon", "1", "--degree", "1", "--quiet"],
         "the users' reports", "bits"),
        (["synth", str(tmp_path / "three3.csv"), "--schema", str(wide), "--epsilon", "1", "--degree", "2",
          "--quiet"], "the largest joint distribution of 3 attributes would have 27,000,000,000 cells",
         "lower --degree"),
        (["synth", str(tmp_path / "three3.csv"), "--schema", str(wide), "--epsilon", "1", "--degree", "1",
          "--rows", "100000000000000", "--quiet"], "the synthetic table would have", "lower --rows"),
    ]
    for i, (args, size, option) in enumerate(cases):
        result = runner.invoke(app, [*args, "-o", str(tmp_path / f"o{i}.csv")])
        line = _one_line_error(result, size, option)
        assert "over the memory budget of" in line and "PRIVPUB_MEMORY_BUDGET" in line


def test_limits_hold_under_a_small_budget(tmp_path: Path, inputs: dict[str, Path],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """PRIVPUB_MEMORY_BUDGET lowers every limit: 10^5 bins are refused under a 1 MB budget, not under 1 GB."""
    rec = tmp_path / "r.csv"
    pd.DataFrame({"v": [1, 2, 3]}).to_csv(rec, index=False)
    args = ["histogram", str(rec), "--column", "v", "--integer-range", "1:100000", "-e", "1", "--seed", "0"]
    monkeypatch.setenv("PRIVPUB_MEMORY_BUDGET", "1M")
    _one_line_error(runner.invoke(app, [*args, "-o", str(tmp_path / "a.csv")]), "100,000 bins", "--integer-range")
    monkeypatch.setenv("PRIVPUB_MEMORY_BUDGET", "1G")
    result = runner.invoke(app, [*args, "-o", str(tmp_path / "b.csv")])
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(tmp_path / "b.csv")) == 100_000


def test_refused_sizes_allocate_nothing(tmp_path: Path, low_address_space: None) -> None:
    """Under a 2 GB address-space cap the refusals above still come from the check, not a MemoryError."""
    rec = tmp_path / "r.csv"
    rec.write_text("v\n1\n", encoding="utf-8")
    result = runner.invoke(app, ["histogram", str(rec), "--column", "v", "--integer-range", "1:10000000000000",
                                 "-e", "1", "-o", str(tmp_path / "o.csv")])
    _one_line_error(result, "10^13 bins")


def test_large_histogram_shows_progress(tmp_path: Path) -> None:
    """Finding: a large histogram ran silently. Over 10^6 bins the CLI reports what it does on stderr."""
    counts = tmp_path / "c.npy"
    np.save(counts, np.zeros(1_100_000, dtype=np.int64))
    result = runner.invoke(app, ["histogram", str(counts), "-e", "1", "--method", "laplace", "--seed", "0",
                                 "-o", str(tmp_path / "o.npy")])
    assert result.exit_code == 0, result.output
    assert "publishing 1,100,000 bins with laplace" in result.stderr
    assert "writing" in result.stderr                      # the tqdm bar of the rows written
    out = np.load(tmp_path / "o.npy")
    assert out.dtype.names == ("bin", "count", "group") and len(out) == 1_100_000
    quiet = runner.invoke(app, ["histogram", str(counts), "-e", "1", "--method", "laplace", "--seed", "0",
                                "-o", str(tmp_path / "q.npy"), "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""


# ---------------------------------------------------------------------------------------------
# issue 21: what the fuzzer still found (usage errors, server commands, hostile values)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("command", "override", "needle"), [
    ("histogram", {"--epsilon": "abc"}, "invalid value for --epsilon"),
    ("histogram", {"--seed": "1.5"}, "invalid value for --seed"),
    ("stream", {"--window": "1e3"}, "invalid value for --window / -w"),
    ("stream", {"--window": None}, "missing option --window / -w"),
    ("histogram", {"--no-such-flag": ""}, "no such option: --no-such-flag"),
])
def test_usage_errors_are_one_line(tmp_path: Path, inputs: dict[str, Path], command: str,
                                   override: dict[str, str | None], needle: str) -> None:
    """Finding: Typer's multi-line usage box for a bad value; now the one ``error:`` line (exit 2)."""
    result = runner.invoke(app, args_for(command, inputs, tmp_path / "o.csv", override))
    line = _one_line_error(result, needle, f"(see privpub {command}")
    assert "╭" not in result.output and "Usage:" not in result.output, result.output
    assert line.endswith("--help)")


@pytest.mark.parametrize(("args", "needle"), [
    (["stream", "query", "0123456789abcdef", "--start", "5", "--end", "2"], "--end must be >= --start"),
    (["stream", "query", "0123456789abcdef", "--start", "0", "--end", "2"], "--start must be >= 1"),
    (["stream", "query", "not-an-id", "--start", "1", "--end", "2"], "16 hexadecimal digits"),
    (["stream", "produce", "{series}", "--stream", "0123456789abcdef", "--batch-size", "0", "--token", "t"],
     "--batch-size must be in 1..200000"),
    (["stream", "produce", "{series}", "--stream", "0123456789abcdef", "--speed", "0", "--token", "t"],
     "--speed must be finite and > 0"),
    (["stream", "create", "--name", "", "-e", "1", "-w", "8"], "--name must not be empty"),
    (["stream", "create", "--name", " ", "-e", "1", "-w", "8"], "--name must not be empty"),
    (["stream", "create", "--name", "s", "-e", "1", "-w", "8", "--late", "later"], "--late must be reject or current"),
    (["campaign", "release", "abc"], "the campaign id must be 16 hexadecimal digits"),
    (["campaign", "status", ""], "the campaign id must not be empty"),
    (["participate", "--campaign", "xyz", "--simulate", "3"], "the campaign id must be 16 hexadecimal digits"),
    (["stream", "query", "0123456789abcdef", "--start", "1", "--end", "2", "--connect-timeout", "-1"],
     "--connect-timeout must be in 0..86400"),
])
def test_server_commands_check_arguments_before_connecting(inputs: dict[str, Path], args: list[str],
                                                           needle: str) -> None:
    """Finding: arguments of server commands were checked only after connecting (here nothing listens:
    a check that waited for the service would report the service instead)."""
    args = [a.replace("{series}", str(inputs["series"])) for a in args]
    result = runner.invoke(app, [*args, "--url", "http://127.0.0.1:9"])
    line = _one_line_error(result, needle)
    assert "could not reach" not in line and "--url" not in line.split("got")[0], line


def test_synth_tiny_flip_probability_is_one_line(tmp_path: Path, inputs: dict[str, Path]) -> None:
    """Finding: ``--flip-prob 1e-300`` overflowed in the estimator (internal error); now refused up front."""
    args = args_for("synth", inputs, tmp_path / "o.csv", {"--epsilon": None, "--flip-prob": "1e-300"})
    _one_line_error(runner.invoke(app, args), "--flip-prob: flip_prob must be >= 1e-150")
    assert not (tmp_path / "o.csv").exists()


def test_db_upgrade_of_a_binary_file_is_one_line(tmp_path: Path) -> None:
    """Finding: ``privpub db upgrade --db <a binary file>`` was an internal error (sqlite DatabaseError)."""
    pytest.importorskip("sqlalchemy")
    db = tmp_path / "random.db"
    db.write_bytes(np.random.default_rng(0).bytes(4096))
    _one_line_error(runner.invoke(app, ["db", "upgrade", "--db", str(db)]), "cannot open the database",
                    "file is not a database")
