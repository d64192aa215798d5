"""Fuzzing the CLI: every command with malformed files, option values, sizes and output names.

Each publishing command starts from a valid invocation on a tiny file; Hypothesis swaps the input
for a malformed file, options for malformed values (NaN, inf, negatives, huge sizes, empty, junk)
and the output for a bad name (a directory, a missing folder, an unknown suffix, an existing file,
the input itself). The command may succeed -- it must then have written its output, with no NaN
in it -- or fail with one ``error:`` line and a non-zero exit code. ``PRIVPUB_DEBUG=1`` is set, so
an exception that is not a privpub error (which the CLI would report as an internal error) escapes
and fails the test. Each example must finish within 30 s (the Hypothesis deadline), and a small
memory budget (``PRIVPUB_MEMORY_BUDGET``) makes huge sizes fail fast instead of swapping.

``demo`` and ``reproduce ...`` run long experiments: their option handling is fuzzed with the
experiment runners replaced by stubs (the parts' tests smoke-test the runners).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from privpub.cli import app
from privpub.core import CategoricalAttribute, NumericAttribute, Schema, Session

runner = CliRunner()

#: examples per command: small enough that the whole module runs in well under a minute on 2 cores
CLI_FUZZ = settings(
    max_examples=30,
    deadline=timedelta(seconds=30),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture],
)

NASTY = ["nan", "inf", "-inf", "-1", "0", "1e400", "1e-320", "abc", "", "1,2", "0:0", "5:1", "2:x",
         "99999999999999999999", "-0", "0.5", "a,b,,", "1,2,3,4", "0,0,0,0", "0,0,1,1,1", "1:3000000000000",
         "3000000000000", "10000", "64", "200", "=cmd", "<script>alert(1)</script>"]
#: the memory budget of the fuzz runs: a size the CLI accepts must fit in it
FUZZ_MEMORY_BUDGET = "256M"


@contextlib.contextmanager
def _fuzz_env() -> Iterator[None]:
    """Internal errors re-raise (PRIVPUB_DEBUG) and sizes are checked against a small budget."""
    with mock.patch.dict(os.environ, {"PRIVPUB_DEBUG": "1", "PRIVPUB_MEMORY_BUDGET": FUZZ_MEMORY_BUDGET}):
        yield


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cli_fuzz")
    gen = np.random.default_rng(0)
    out: dict[str, Path] = {}

    def csv(name: str, frame: pd.DataFrame) -> None:
        out[name] = d / f"{name}.csv"
        frame.to_csv(out[name], index=False)

    csv("counts", pd.DataFrame({"count": [5, 0, 3, 9, 1, 0, 2, 7], "c": [1, 0, 2, 1, 0, 0, 3, 1],
                                "v": [0, 1, 2, 3, 1, 1, 2, 0]}))
    csv("table", pd.DataFrame({"a": gen.choice(["x", "y"], 40), "b": gen.choice(["u", "v", "w"], 40),
                               "n": gen.integers(0, 10, 40), "cls": gen.choice(["p", "q"], 40)}))
    csv("points", pd.DataFrame({"x": gen.random(60), "y": gen.random(60)}))
    csv("nan", pd.DataFrame({"count": [1.0, np.nan], "c": [np.nan, 1], "a": ["x", None], "b": ["u", "v"],
                             "n": [1, np.nan], "cls": ["p", "q"], "x": [0.5, np.nan], "y": [np.inf, 0.1],
                             "v": [1, np.nan]}))
    csv("unknown", pd.DataFrame({"count": [-3, 2], "c": [1.5, 2], "a": ["zz", "x"], "b": ["u", "nope"],
                                 "n": [99, -1], "cls": ["p", "r"], "x": [2.0, -1.0], "y": [0.5, 7.0],
                                 "v": [-5, 10**12]}))
    csv("strings", pd.DataFrame({"count": ["a", "b"], "c": ["1", "x"], "x": ["p", "q"], "y": ["r", "s"],
                                 "a": [1, 2], "b": [3, 4], "n": ["k", "l"], "cls": [1, 2], "v": ["=1", "@x"]}))
    (d / "empty.csv").write_text("", encoding="utf-8")
    out["empty"] = d / "empty.csv"
    (d / "header.csv").write_text("count,c,a,b,n,cls,x,y,v\n", encoding="utf-8")
    out["header"] = d / "header.csv"
    (d / "garbage.csv").write_bytes(b"\x00\xff\xfe,\n\x81\x82\"unterminated\n")
    out["garbage"] = d / "garbage.csv"
    np.save(d / "series.npy", gen.integers(0, 5, 64))
    out["series"] = d / "series.npy"
    (d / "truncated.npy").write_bytes((d / "series.npy").read_bytes()[:100])
    out["truncated"] = d / "truncated.npy"
    np.save(d / "floats.npy", np.array([1.5, np.nan, -np.inf]))
    out["floats"] = d / "floats.npy"
    out["missing"] = d / "missing.csv"
    out["directory"] = d
    schema = Schema([CategoricalAttribute("a", ["x", "y"]), CategoricalAttribute("b", ["u", "v", "w"]),
                     NumericAttribute("n", 0, 9)], class_name="cls", classes=["p", "q"])
    out["schema"] = d / "schema.json"
    out["schema"].write_text(json.dumps(schema.to_dict()), encoding="utf-8")
    out["bad_schema"] = d / "bad_schema.json"
    out["bad_schema"].write_text('{"attributes": [{"name": "a"}]', encoding="utf-8")
    out["huge_schema"] = d / "huge_schema.json"
    out["huge_schema"].write_text(json.dumps({"attributes": [
        {"name": "a", "type": "numeric", "lo": 0, "hi": 1e13, "resolution": 1},
        {"name": "n", "type": "numeric", "lo": 0, "hi": 9}], "class_name": "cls", "classes": ["p", "q"]}),
        encoding="utf-8")
    out["binary"] = d / "binary.json"
    out["binary"].write_bytes(bytes(range(256)))
    out["taxonomy"] = d / "taxonomy.json"
    out["taxonomy"].write_text(json.dumps({"a": {"Any": ["x", "y"]}}), encoding="utf-8")
    out["queries"] = d / "queries.csv"
    pd.DataFrame({"l": [5, 6], "r": [8, 7]}).to_csv(out["queries"], index=False)
    out["out_dir"] = d / "out"
    out["out_dir"].mkdir()
    out["budget"] = d / "budget.json"
    Session.open(out["budget"], total_epsilon=1e6)
    return out


INPUTS = ["nan", "unknown", "strings", "empty", "header", "garbage", "missing", "directory", "truncated", "floats",
          "binary"]
FILES = ["@bad_schema", "@missing", "@empty", "@garbage", "@binary", "@huge_schema", "@directory"]
OUTPUTS = ["ok", "ok", "ok", "ok", ".json", ".npy", ".parquet", ".txt", "", "directory", "missing_folder",
           "existing", "input"]

#: command -> (valid input file, output suffix, {option: valid value}; "@name" values are fixture files,
#: "" is a flag)
COMMANDS: dict[str, tuple[str, str, dict[str, str]]] = {
    "histogram": ("counts", ".csv", {"--counts-column": "count", "--epsilon": "1", "--method": "hphp",
                                     "--noise": "discrete", "--seed": "1", "--split": "0.5"}),
    "histogram-records": ("counts", ".csv", {"--column": "v", "--integer-range": "0:3", "--epsilon": "1",
                                             "--categories": "", "--bins": "", "--method": "laplace", "--seed": "1",
                                             "--names": "", "--dataset-schema": ""}),
    "histogram-schema": ("table", ".csv", {"--column": "b", "--schema": "@schema", "--epsilon": "1", "--seed": "1",
                                           "--names": ""}),
    "synth": ("table", ".csv", {"--schema": "@schema", "--epsilon": "2", "--columns": "a,b,n",
                                "--rows": "20", "--degree": "1", "--seed": "1", "--quiet": "", "--names": "",
                                "--dataset-schema": ""}),
    "spatial": ("points", ".json", {"--x": "x", "--y": "y", "--epsilon": "1", "--bounds": "0,0,1,1",
                                    "--method": "kdght", "--seed": "1", "--query": "0,0,0.5,0.5"}),
    "decision": ("table", ".csv", {"--target": "cls", "--epsilon": "1", "--levels": "2", "--schema": "@schema",
                                   "--seed": "1", "--taxonomy": "@taxonomy", "--names": "", "--classes": ""}),
    "stream": ("counts", ".csv", {"--column": "c", "--epsilon": "1", "--window": "4", "--seed": "1",
                                  "--queries": "@queries", "--height": "2", "--method": "hq_rtp"}),
}


#: Known defects of the parts the CLI calls, being fixed by their owners (issue 12): the CLI reports
#: them as one-line internal errors; here they are tolerated so that the fuzzer keeps finding others.
#: command -> [(exception type, message regex)]
KNOWN_CLI: dict[str, list[tuple[type[BaseException], str]]] = {
    # KDG-HT with an extreme epsilon: math.exp overflow / division by a zero budget (privpub.spatial)
    "spatial": [(OverflowError, "math range error|out of range"), (ZeroDivisionError, "division by zero")],
}


def _known(command: str, exc: BaseException) -> bool:
    return any(isinstance(exc, kind) and re.search(pat, str(exc)) for kind, pat in KNOWN_CLI.get(command, []))


def _value(v: str, files: dict[str, Path]) -> str:
    return str(files[v[1:]]) if v.startswith("@") else v


def _output(files: dict[str, Path], command: str, kind: str, source: Path) -> tuple[Path, bool]:
    """The output path of one example, and whether the command may succeed with it."""
    suffix = COMMANDS[command][1]
    out = files["out_dir"]
    for p in out.iterdir():
        if p.is_file():
            p.unlink()
    if kind == "ok":
        return out / f"{command}{suffix}", True
    if kind == "directory":
        return out, False
    if kind == "missing_folder":
        return out / "nowhere" / f"x{suffix}", False
    if kind == "existing":
        target = out / f"{command}{suffix}"
        target.write_text("precious", encoding="utf-8")
        return target, False
    if kind == "input":
        return source, False
    return out / f"{command}{kind}", True


def _check_output(path: Path) -> None:
    """A written release exists and holds no NaN."""
    assert path.is_file(), f"succeeded without writing {path}"
    suffix = path.suffix
    if suffix == ".csv":
        frame = pd.read_csv(path, keep_default_na=False, na_values=["nan", "NaN"])
        numeric = frame.select_dtypes("number")
        assert not numeric.isna().any().any(), f"NaN in {path}"
    elif suffix == ".json":
        text = path.read_text(encoding="utf-8")
        json.loads(text)
        assert "NaN" not in text
    elif suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
        for name in arr.dtype.names or ():
            if np.issubdtype(arr[name].dtype, np.floating):
                assert not np.isnan(arr[name]).any(), f"NaN in {path}[{name}]"


def _invoke(files: dict[str, Path], command: str, input_name: str, options: dict[str, str], output_kind: str,
            force: bool) -> None:
    source = files[input_name]
    output, may_succeed = _output(files, command, output_kind, source)
    name = command.split("-")[0]
    args = [name, str(source), "--output", str(output)]
    for opt, val in options.items():
        if val == "":
            if opt in ("--quiet",):
                args.append(opt)
            continue
        args += [opt, _value(val, files)]
    if force:
        args.append("--force")
    before = source.read_bytes() if source.is_file() else None
    with _fuzz_env():
        result = runner.invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        if _known(name, result.exception):
            return
        raise AssertionError(f"`privpub {' '.join(args)}` raised {result.exception!r}") from result.exception
    assert "Traceback" not in result.output
    if result.exit_code == 0:
        assert may_succeed or force, f"`privpub {' '.join(args)}` succeeded with output {output_kind!r}"
        _check_output(output)
    else:
        errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
        # a usage error (a value of the wrong type, a missing option) is one error: line too (issue 21)
        assert len(errors) == 1, f"`privpub {' '.join(args)}` failed without one error line: {result.output!r}"
        assert "Usage:" not in result.output and "╭" not in result.output, result.output
        if output_kind == "existing":
            assert output.read_text(encoding="utf-8") == "precious"
        if before is not None and output != source:
            assert source.read_bytes() == before
    assert not [p for p in files["out_dir"].iterdir() if ".partial" in p.name], "temporary file left behind"


def _options(command: str) -> st.SearchStrategy[dict[str, str]]:
    valid = COMMANDS[command][2]
    return st.fixed_dictionaries({
        opt: st.one_of(st.just(val), st.just(val), st.just(val), st.sampled_from(NASTY), st.text(max_size=4),
                       st.sampled_from(FILES))
        for opt, val in valid.items()
    })


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_valid_invocation_succeeds(files: dict[str, Path], command: str) -> None:
    valid_input, suffix, options = COMMANDS[command]
    _invoke(files, command, valid_input, options, "ok", False)
    assert (files["out_dir"] / f"{command}{suffix}").is_file()


def _fuzz(command: str):  # type: ignore[no-untyped-def]
    valid_input = COMMANDS[command][0]

    @CLI_FUZZ
    @given(input_name=st.sampled_from([valid_input, valid_input, valid_input, *INPUTS]), options=_options(command),
           output_kind=st.sampled_from(OUTPUTS), force=st.booleans())
    def run(files: dict[str, Path], input_name: str, options: dict[str, str], output_kind: str, force: bool) -> None:
        _invoke(files, command, input_name, options, output_kind, force)

    return run


test_fuzz_histogram = _fuzz("histogram")
test_fuzz_histogram_records = _fuzz("histogram-records")
test_fuzz_histogram_schema = _fuzz("histogram-schema")
test_fuzz_synth = _fuzz("synth")
test_fuzz_spatial = _fuzz("spatial")
test_fuzz_decision = _fuzz("decision")
test_fuzz_stream = _fuzz("stream")


@CLI_FUZZ
@given(input_name=st.sampled_from(["table", "counts", "points", *INPUTS]),
       class_column=st.sampled_from([None, "cls", "nope", "", "=cmd"]),
       max_categories=st.sampled_from([None, "0", "-1", "5", "abc", "99999999999999999999"]),
       names=st.sampled_from([None, "a,b", "a,a,b,c", "", "p,q,r,s", "x,y"]),
       header=st.sampled_from([None, "--header", "--no-header"]), output_kind=st.sampled_from(["ok", "stdout", ".csv"]))
def test_fuzz_schema_draft(files: dict[str, Path], input_name: str, class_column: str | None,
                           max_categories: str | None, names: str | None, header: str | None, output_kind: str) -> None:
    """``privpub schema draft``: a draft (with its warning) or one clean error, never a traceback."""
    out = files["out_dir"] / ("draft.json" if output_kind != ".csv" else "draft.csv")
    args = ["schema", "draft", str(files[input_name]), "--force"]
    if output_kind != "stdout":
        args += ["-o", str(out)]
    for opt, val in (("--class-column", class_column), ("--max-categories", max_categories), ("--names", names)):
        if val is not None:
            args += [opt, val]
    if header is not None:
        args.append(header)
    result = _plain(args)
    if result.exit_code == 0:
        assert "PrivacyWarning" in result.output
        if output_kind == "ok":
            assert "draft" in json.loads(out.read_text(encoding="utf-8"))


@CLI_FUZZ
@given(name=st.one_of(st.sampled_from(["adult", "census", "iris", "nltcs", "nope", "", "ADULT"]), st.text(max_size=5)),
       synth=st.booleans())
def test_fuzz_schema_show(files: dict[str, Path], name: str, synth: bool) -> None:
    result = _plain(["schema", "show", name, *(["--synth"] if synth else [])])
    if result.exit_code == 0:
        assert json.loads(result.stdout)["attributes"]


def _plain(args: list[str], *, ok_codes: tuple[int, ...] = (0,)) -> Any:
    """Run a command that writes no release: success or one error line, no exception."""
    with _fuzz_env():
        result = runner.invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"`privpub {' '.join(args)}` raised {result.exception!r}") from result.exception
    assert "Traceback" not in result.output
    if result.exit_code not in ok_codes:
        assert result.exit_code != 0
        assert result.output.strip(), f"`privpub {' '.join(args)}` failed without a message"
    return result


@CLI_FUZZ
@given(name=st.one_of(st.sampled_from(["adult", "dpbench_1d/HEPTH", "nope", "", "../etc", "a/b/c"]),
                      st.text(max_size=6)),
       data_dir=st.sampled_from(["@missing", "@empty", "@directory", None]))
def test_fuzz_datasets_info(files: dict[str, Path], name: str, data_dir: str | None) -> None:
    args = ["datasets", "info", name]
    _plain(args if data_dir is None else [*args, "--data-dir", _value(data_dir, files)])


@pytest.mark.parametrize("data_dir", ["@missing", "@empty", "@directory", None])
def test_datasets_list(files: dict[str, Path], data_dir: str | None) -> None:
    args = ["datasets", "list"]
    _plain(args if data_dir is None else [*args, "--data-dir", _value(data_dir, files)])


@CLI_FUZZ
@given(path=st.sampled_from(["@budget", "@missing", "@empty", "@garbage", "@binary", "@directory", "@schema",
                             "@bad_schema"]))
def test_fuzz_budget_show(files: dict[str, Path], path: str) -> None:
    result = _plain(["budget", "show", _value(path, files)])
    assert (result.exit_code == 0) == (path == "@budget"), result.output


@CLI_FUZZ
@given(budget=st.sampled_from(["@budget", "new", "@garbage", "@binary", "@directory", "@missing_folder"]),
       total=st.sampled_from([None, "1e6", "0", "-1", "nan", "inf", "abc", "1e400", "5"]),
       epsilon=st.sampled_from(["1", "0.5", "1e7", "nan"]))
def test_fuzz_budget_options(files: dict[str, Path], budget: str, total: str | None, epsilon: str) -> None:
    """--budget-file / --budget-total on the histogram command: charged, or one clean error."""
    if budget == "new":
        path = files["out_dir"] / "new_budget.json"
        path.unlink(missing_ok=True)
    elif budget == "@missing_folder":
        path = files["out_dir"] / "nowhere" / "b.json"
    else:
        path = files[budget[1:]]
    valid = dict(COMMANDS["histogram"][2], **{"--epsilon": epsilon, "--budget-file": str(path)})
    if total is not None:
        valid["--budget-total"] = total
    _invoke(files, "histogram", "counts", valid, "ok", True)


def _stub_reproduce(out: Path, **kwargs: Any) -> Path:
    """Stands in for an experiment runner: only checks what it receives and writes a summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for key in ("trials", "reps", "n_points"):
        value = kwargs.get(key)
        assert value is None or (isinstance(value, int) and value >= 1), (key, value)
    (out / "summary.md").write_text("# stub\n", encoding="utf-8")
    return out / "summary.md"


@CLI_FUZZ
@given(part=st.sampled_from(["histogram", "decision", "spatial", "stream", "ldp_synth"]),
       option=st.sampled_from(["--trials", "--reps", "--n-points", "--seed", None]),
       value=st.sampled_from(["0", "-1", "1", "3", "10000000", "abc", "nan", ""]),
       out_kind=st.sampled_from(["dir", "file", "new"]))
def test_fuzz_reproduce_options(files: dict[str, Path], part: str, option: str | None, value: str,
                                out_kind: str) -> None:
    import importlib

    module = importlib.import_module(f"privpub.experiments.{part}")
    out = {"dir": files["out_dir"] / "rep", "file": files["counts"], "new": files["out_dir"] / "rep_new"}[out_kind]
    flag = "--out-dir" if part == "stream" else "--out"
    args = ["reproduce", part, "--quick", flag, str(out)]
    if option is not None:
        args += [option, value]
    with mock.patch.object(module, "reproduce", _stub_reproduce):
        result = _plain(args)
    if out_kind == "file":
        assert result.exit_code != 0


@CLI_FUZZ
@given(results=st.sampled_from(["@directory", "@missing", "@counts", "@out_dir"]))
def test_fuzz_report(files: dict[str, Path], results: str) -> None:
    _plain(["report", _value(results, files)])


CLI_DEFECTS = [
    ("synth", "table", {"--schema": ""}),
    ("decision", "table", {"--schema": "@garbage"}),
    ("spatial", "strings", {}),
    ("stream", "directory", {}),
]


@pytest.mark.parametrize(("command", "input_name", "override"), CLI_DEFECTS, ids=[c[0] for c in CLI_DEFECTS])
def test_fixed_cli_defects_now_fail_cleanly(files: dict[str, Path], command: str, input_name: str,
                                            override: dict[str, str]) -> None:
    _, suffix, options = COMMANDS[command]
    args = [command, str(files[input_name]), "--output", str(files["out_dir"] / f"defect{suffix}")]
    for opt, val in {**options, **override}.items():
        if val != "" or opt == "--schema":
            args += [opt, _value(val, files)]
        elif opt == "--quiet":
            args.append(opt)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, (result.output, repr(result.exception))
    assert "error:" in result.output


def test_fuzz_covers_every_command() -> None:
    """Every leaf command of the CLI is fuzzed here, or listed as run only by its part's tests."""
    from typer.main import get_command

    def walk(cmd: Any, path: str) -> list[str]:
        subs = getattr(cmd, "commands", None)
        if subs is None:
            return [path.strip()]
        return [p for n, c in subs.items() for p in walk(c, f"{path} {n}")]

    fuzzed = {c.split("-")[0] for c in COMMANDS} | {"datasets info", "datasets list", "budget show", "report",
                                                    "schema draft", "schema show",
                                                    "reproduce histogram", "reproduce decision", "reproduce spatial",
                                                    "reproduce stream", "reproduce ldp_synth"}
    # smoke-tested in tests/report, tests/audit (audit client: tests/audit/test_client_conformance.py)
    # (audit structure: tests/audit/test_cli.py runs it and checks its table and exit codes)
    long_running = {"demo", "reproduce all", "audit run", "audit list", "audit client", "audit structure"}
    # fuzzed against a real service in tests/service/test_cli_fuzz.py
    fuzzed |= {"serve", "db upgrade", "participate", "campaign create", "campaign status", "campaign tokens",
               "campaign release", "campaign close", "campaign archive"}
    # ``privpub stream INPUT`` is ``privpub stream publish INPUT`` (fuzzed above as "stream"); the live-stream
    # commands run against a real service in tests/service/test_stream_producer.py
    fuzzed |= {"stream publish", "stream create", "stream produce", "stream query", "stream close-step",
               "stream delete"}
    leaves = set(walk(get_command(app), ""))
    assert leaves - fuzzed - long_running == set()
