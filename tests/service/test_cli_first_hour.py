"""The service commands of the CLI as a newcomer meets them (issue 21).

- against an address where nothing listens, every client command fails within 5 s with one
  ``error:`` line (exit 2); ``--connect-timeout`` bounds the total time spent retrying;
- ``privpub stream produce --speed N`` paces the steps (requests of about a tenth of a second);
- service errors read one way: ``error: the service refused the request (<status>): <field>: <what>``,
  401/403 naming the token's environment variable, a 422 listing every problem, no regex patterns.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from service_helpers import ADMIN_TOKEN, SRC, Server, free_port
from stream_helpers import admin_client, create_stream
from typer.testing import CliRunner

import privpub.client  # noqa: F401 -- imported before the timings: they measure the commands, not imports
from privpub.cli import app
from privpub.cli._service import check_response

runner = CliRunner()
ID = "0123456789abcdef"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("first-hour")
    srv = Server(str(tmp / "svc.db"), tmp / "server.log").start()
    try:
        with admin_client(srv) as adm:
            yield {"url": srv.url, "adm": adm, "tmp": tmp}
    finally:
        srv.stop()


def _closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # a port just released: nothing listens there


def _one_error(result: Any, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, repr(result.exception))
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, result.output
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def _client_commands(tmp_path: Path) -> list[list[str]]:
    counts = tmp_path / "counts.txt"
    counts.write_text("1\n2\n3\n")
    spec = tmp_path / "campaign.json"
    spec.write_text('{"name": "f", "kind": "frequency", "epsilon": 1.0, "categories": ["a", "b"]}')
    return [
        ["stream", "query", ID, "--start", "1", "--end", "2"],
        ["stream", "create", "--name", "s", "-e", "1", "-w", "8"],
        ["stream", "produce", str(counts), "--stream", ID, "--token", "t"],
        ["campaign", "create", str(spec)],
        ["campaign", "status", ID],
        ["campaign", "release", ID],
        ["campaign", "tokens", ID],
        ["campaign", "close", ID],
        ["participate", "--campaign", ID, "--simulate", "3"],
    ]


def test_client_commands_fail_fast_when_nothing_listens(tmp_path: Path) -> None:
    for args in _client_commands(tmp_path):
        start = time.monotonic()
        result = runner.invoke(app, [*args, "--url", _closed_url()], env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
        elapsed = time.monotonic() - start
        _one_error(result, "could not reach the service at http://127.0.0.1:", "within 2 s",
                   "is `privpub serve` running there?", "--connect-timeout")
        assert elapsed < 5.0, (args, elapsed)


def test_stream_query_subprocess_exits_2_within_5_s() -> None:
    """As a user runs it, in its own process: the command (after the interpreter has imported privpub,
    whose start-up is timed apart, as it varies with the machine's load) ends within 5 s."""
    code = ("import sys, time\nfrom privpub.cli import main\nstart = time.monotonic()\n"
            "try:\n    main()\nfinally:\n    print(f'elapsed {time.monotonic() - start:.3f}', file=sys.stderr)\n")

    def run(*extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
        args = ["stream", "query", ID, "--end", "2", "--url", _closed_url(), *extra]
        proc = subprocess.run([sys.executable, "-c", code, *args], env={**os.environ, "PYTHONPATH": str(SRC)},
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        return proc, float(proc.stderr.rsplit("elapsed ", 1)[1])

    # the same command refused before connecting: what parsing the command line costs on this machine now
    _, parsing = run("--start", "5")
    proc, elapsed = run("--start", "1")
    assert proc.stderr.count("error:") == 1 and "could not reach the service" in proc.stderr
    assert "terminated" not in proc.stderr
    # 2 s of retries plus one failed connection: within 5 s on an idle machine, whatever the load adds
    assert elapsed < 5.0 or elapsed - parsing < 3.0, (elapsed, parsing)


@pytest.mark.parametrize("seconds", [0.0, 3.0])
def test_connect_timeout_bounds_the_retries(seconds: float) -> None:
    start = time.monotonic()
    result = runner.invoke(app, ["campaign", "status", ID, "--url", _closed_url(),
                                 "--connect-timeout", str(seconds)])
    elapsed = time.monotonic() - start
    _one_error(result, f"within {seconds:g} s")
    assert seconds <= elapsed < seconds + 2.5, elapsed


def test_connect_timeout_waits_for_a_service_that_starts(tmp_path: Path) -> None:
    """Right after ``privpub serve &`` (the README's quickstarts): the first command waits for it."""
    srv = Server(str(tmp_path / "late.db"), tmp_path / "late.log")
    srv.start()  # the port is known; stop it and start it again while the command waits
    srv.stop()
    import threading

    thread = threading.Thread(target=lambda: (time.sleep(1.0), srv.start()))
    thread.start()
    try:
        result = runner.invoke(app, ["stream", "create", "--name", "late", "-e", "1", "-w", "8", "--url", srv.url,
                                     "--connect-timeout", "120"], env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
        assert result.exit_code == 0, result.output
        assert '"producer_token"' in result.output
    finally:
        thread.join()
        srv.stop()


def test_speed_paces_the_steps(live: dict[str, Any], tmp_path: Path) -> None:
    """3,000 steps at --speed 2000 take about 1.5 s, in requests of about 200 steps."""
    s = create_stream(live["adm"], publisher="rtp", epsilon=1.0, window=4096)
    counts = tmp_path / "counts.csv"
    counts.write_text("count\n" + "\n".join(map(str, np.random.default_rng(0).poisson(50, 3000))) + "\n")
    start = time.monotonic()
    result = runner.invoke(app, ["stream", "produce", str(counts), "--stream", s["id"], "--column", "count",
                                 "--speed", "2000", "--url", live["url"], "--token", s["producer_token"]])
    elapsed = time.monotonic() - start
    assert result.exit_code == 0, result.output
    assert "sent 3000 counts in 15 batches" in result.output, result.output
    assert "released 3000 steps" in result.output
    # paced: the last request leaves at 1.4 s and the command waits to 1.5 s (an upper bound only
    # catches a hang: 15 requests to a server on a loaded 2-core machine may take seconds each)
    assert 1.45 <= elapsed < 120.0, elapsed


def test_service_errors_read_one_way(live: dict[str, Any], tmp_path: Path) -> None:
    url = live["url"]
    # 401 / 403: the admin token's variable is named
    for env in ({}, {"PRIVPUB_ADMIN_TOKEN": "wrong-token"}):
        result = runner.invoke(app, ["stream", "create", "--name", "s", "-e", "1", "-w", "8", "--url", url], env=env)
        line = _one_error(result, "error: the service refused the request (40", "PRIVPUB_ADMIN_TOKEN")
        assert "answered" not in line
    # the producer token's variable
    s = create_stream(live["adm"], publisher="rtp", epsilon=1.0, window=64)
    counts = tmp_path / "c.txt"
    counts.write_text("1\n2\n")
    result = runner.invoke(app, ["stream", "produce", str(counts), "--stream", s["id"], "--url", url, "--token", "bad"])
    _one_error(result, "the service refused the request (40", "PRIVPUB_PRODUCER_TOKEN")
    # 422 naming the field (a check only the service makes: the noise scale sensitivity / epsilon)
    result = runner.invoke(app, ["stream", "create", "--name", "s", "-e", "0.001", "--sensitivity", "1e12", "-w", "8",
                                 "--url", url], env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    _one_error(result, "the service refused the request (422): epsilon:")
    # what the stream's model refuses is refused before sending, naming the same field
    result = runner.invoke(app, ["stream", "create", "--name", "s", "-e", "100", "-w", "8", "--url", url],
                           env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    _one_error(result, "stream: epsilon:")
    # 404
    result = runner.invoke(app, ["campaign", "status", ID, "--url", url])
    _one_error(result, "the service refused the request (404)")


def test_a_422_lists_every_problem_without_patterns(live: dict[str, Any]) -> None:
    adm: httpx.Client = live["adm"]
    resp = adm.post("/streams", json={"name": "", "publisher": "rtp", "epsilon": -1, "window": 0})
    assert resp.status_code == 422
    fields = {e["field"] for e in resp.json()["error"]["errors"]}
    assert {"name", "epsilon", "window"} <= fields
    with pytest.raises(Exception) as exc:
        check_response(resp)
    text = str(exc.value)
    assert text.startswith("the service refused the request (422): ")
    for field in ("name:", "epsilon:", "window:"):
        assert field in text, text
    resp = adm.get("/campaigns/not-hex-at-all/status")
    assert resp.status_code == 422
    with pytest.raises(Exception) as exc:
        check_response(resp)
    assert "pattern" not in str(exc.value) and "[0-9a-f]" not in str(exc.value), str(exc.value)
