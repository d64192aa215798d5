"""Fuzzing the service commands of the CLI against a real ``privpub serve`` (SQLite file, loopback).

``campaign create/status/tokens/release/close/archive`` and ``participate`` get malformed files, ids,
counts, URLs and values; ``serve`` and ``db upgrade`` get malformed ports, worker counts, log
levels, databases and revisions (those never reach a running server: a valid ``serve`` would block).
A command may succeed or fail with one ``error:`` line and exit code 2; ``PRIVPUB_DEBUG=1`` makes any
exception that is not a privpub error escape and fail the test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_helpers import ADMIN_TOKEN, Server, create
from typer.testing import CliRunner

from privpub.cli import app

runner = CliRunner()

FUZZ = settings(max_examples=25, deadline=timedelta(seconds=30), derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

NASTY = ["", " ", "-1", "0", "1", "nan", "1e400", "99999999999999999999", "abc", "../../etc/passwd", "a/b",
         "%2e%2e", "\u00e9", "<script>", "=cmd", "1,2", "nan,nan", "1e400,0", "{}", "[1]", '{"a": "x"}', "null"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    srv = Server(str(tmp / "fuzz.db"), tmp / "server.log").start()
    try:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60) as c:
            freq = create(c, name="f", kind="frequency", epsilon=1.0, categories=["a", "b", "c"], min_reports=1)
            spat = create(c, name="s", kind="spatial", epsilon=1.0, bounds=[0, 0, 1, 1], method="ug",
                          expected_participants=1000, min_reports=1)
            resp = c.post("/streams", json={"name": "s", "publisher": "RTP", "epsilon": 1.0, "window": 64})
            assert resp.status_code == 201, resp.text
            stream_id = resp.json()["id"]
        files = {
            "binary": tmp / "binary.yaml", "list": tmp / "list.yaml", "bad": tmp / "bad.yaml",
            "campaign": tmp / "campaign.yaml", "points": tmp / "points.csv", "empty": tmp / "empty.csv",
            "cats": tmp / "cats.csv", "missing": tmp / "missing.csv", "dir": tmp,
        }
        files["binary"].write_bytes(b"\x00\x01\xff\xfe")
        files["list"].write_text("[1, 2, 3]\n")
        files["bad"].write_text("name: [unclosed\n")
        files["campaign"].write_text(json.dumps({"name": "g", "kind": "frequency", "epsilon": 2.0,
                                                 "categories": ["x", "y"]}))
        files["points"].write_text("x,y\n0.5,0.5\n2,2\nnan,0.1\n")
        files["empty"].write_text("")
        files["cats"].write_text("value\na\nb\nzzz\n")
        files["counts"] = tmp / "counts.txt"
        files["counts"].write_text("1\n2\n0\n3\n")
        yield {"url": srv.url, "freq": freq["id"], "spatial": spat["id"], "stream": stream_id, "files": files,
               "tmp": tmp}
    finally:
        srv.stop()


def _run(args: list[str], url: str) -> Any:
    env = {"PRIVPUB_DEBUG": "1", "PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN, "PRIVPUB_URL": url}
    result = runner.invoke(app, args, env=env, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    if result.exit_code != 0:
        assert result.exit_code in (1, 2), (args, result.exit_code, result.output)
        assert "error" in result.output.lower() or result.exit_code == 1, (args, result.output)
        assert "internal error" not in result.output, (args, result.output)
    return result


def _text(live: dict[str, Any]) -> st.SearchStrategy[str]:
    return st.sampled_from([*NASTY, live["freq"], live["spatial"]])


def _path(live: dict[str, Any]) -> st.SearchStrategy[str]:
    return st.sampled_from([str(p) for p in live["files"].values()])


@FUZZ
@given(data=st.data())
def test_fuzz_campaign_commands(live: dict[str, Any], data: st.DataObject) -> None:
    cmd = data.draw(st.sampled_from(["create", "status", "tokens", "release", "close", "archive"]))
    if cmd == "create":
        args = ["campaign", "create", data.draw(_path(live))]
    else:
        args = ["campaign", cmd, data.draw(_text(live))]
    if cmd == "tokens":
        args += ["--count", data.draw(st.sampled_from(["-1", "0", "1", "100001", "abc", "99999999999999999999"]))]
    if cmd == "release" and data.draw(st.booleans()):
        args += ["-o", data.draw(st.sampled_from([str(live["tmp"]), str(live["tmp"] / "r.csv"),
                                                  str(live["tmp"] / "nofolder" / "r.json"),
                                                  str(live["tmp"] / "r.json")]))]
    if data.draw(st.booleans()):
        args += ["--url", data.draw(st.sampled_from(["notaurl", "ftp://x", "http://[::1", "http://127.0.0.1:99999",
                                                     "", live["url"] + "/", live["url"]]))]
    _run(args, live["url"])


@FUZZ
@given(data=st.data())
def test_fuzz_participate(live: dict[str, Any], data: st.DataObject) -> None:
    args = ["participate", "--campaign", data.draw(_text(live))]
    source = data.draw(st.sampled_from(["--value", "--values", "--simulate", "none", "two"]))
    if source in ("--value", "two"):
        args += ["--value", data.draw(_text(live))]
    if source in ("--values", "two"):
        args += ["--values", data.draw(_path(live))]
    if source == "--simulate":
        args += ["--simulate", data.draw(st.sampled_from(["-1", "0", "3", "abc"]))]
    if data.draw(st.booleans()):
        args += ["--batch-size", data.draw(st.sampled_from(["-1", "0", "2", "abc"]))]
    args += ["--rng-seed", "1"]
    _run(args, live["url"])


@FUZZ
@given(data=st.data())
def test_fuzz_stream_commands(live: dict[str, Any], data: st.DataObject) -> None:
    ident = st.sampled_from([*NASTY, live["stream"]])
    number = st.sampled_from(["-1", "0", "1", "2", "64", "1e400", "nan", "abc", "99999999999999999999"])
    cmd = data.draw(st.sampled_from(["create", "produce", "query"]))
    if cmd == "create":
        args = ["stream", "create", "--name", data.draw(ident), "-e", data.draw(number), "-w", data.draw(number)]
        if data.draw(st.booleans()):
            args += ["-m", data.draw(st.sampled_from(["rtp", "hq_rtp", "bth", "bogus", ""]))]
        if data.draw(st.booleans()):
            args += ["--late", data.draw(st.sampled_from(["reject", "current", "later", ""]))]
        if data.draw(st.booleans()):
            args += ["--step-seconds", data.draw(number)]
    elif cmd == "produce":
        args = ["stream", "produce", data.draw(_path(live)), "--stream", data.draw(ident),
                "--kind", data.draw(st.sampled_from(["counts", "times", "bogus"])),
                "--batch-size", data.draw(st.sampled_from(["-1", "0", "2", "abc"]))]
    else:
        args = ["stream", "query", data.draw(ident), "--start", data.draw(number), "--end", data.draw(number)]
    _run(args, live["url"])


@pytest.mark.parametrize("args", [
    ["serve", "--port", "-1"], ["serve", "--port", "70000"], ["serve", "--workers", "0"],
    ["serve", "--log-level", "nope"], ["serve", "--host", ""], ["serve", "--db", "{tmp}"],
    ["serve", "--db", "postgresql+psycopg://u:secret@127.0.0.1:1/db"], ["serve", "--db", "foo://bar"],
    ["serve", "--db", ""], ["db", "upgrade", "--db", "{tmp}"], ["db", "upgrade", "--db", "{tmp}/x.db", "--revision", "zzz"],
    ["db", "upgrade", "--db", "mysql://x/y"], ["db", "upgrade", "--db", "{tmp}/nofolder/x.db"],
], ids=lambda a: " ".join(a))
def test_serve_and_db_refuse_bad_options(tmp_path: Path, args: list[str]) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = _run(args, "http://127.0.0.1:1")
    assert result.exit_code == 2, result.output
    assert "secret" not in result.output


def test_db_upgrade_creates_and_is_idempotent(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    first = _run(["db", "upgrade", "--db", db], "http://127.0.0.1:1")
    second = _run(["db", "upgrade", "--db", db], "http://127.0.0.1:1")
    assert first.exit_code == second.exit_code == 0
    assert first.output == second.output and "revision" in first.output
