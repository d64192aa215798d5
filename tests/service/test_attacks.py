"""The service against hostile participants, producers and careless operators (issue 22): each
numbered finding reproduced as it was reported, against a real ``privpub serve`` on SQLite and on
PostgreSQL, and the new behaviour asserted. One section per part of the service (transport,
streams, campaigns)."""
from __future__ import annotations

import asyncio
import base64
import csv
import io
import os
import re
import secrets
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
import sqlalchemy as sa
from service_helpers import ADMIN_TOKEN, SRC, Server, create, fresh_database
from stream_helpers import CHECKS, admin_client, create_stream, post_counts
from typer.testing import CliRunner

from privpub.cli import app as cli_app
from privpub.client import Gateway, OfflineError, Participant, StreamProducer
from privpub.ldp import OUE, fake_reports
from privpub.service import make_engine
from privpub.service._db import write_tx
from privpub.stream import make_publisher

# --- transport: findings 4, 9 ---
# Timeouts of the transport server: short, so that the slow-client tests stay bounded.
HEADER_TIMEOUT, BODY_TIMEOUT = 2.0, 3.0
# and 64 MiB of large bodies read at once per worker (two 31 MB bodies)
TRANSPORT_ENV = {"PRIVPUB_TIMEOUT_HEADERS": str(HEADER_TIMEOUT), "PRIVPUB_TIMEOUT_BODY": str(BODY_TIMEOUT),
                 "PRIVPUB_BODY_MEMORY": "64"}


@pytest.fixture(scope="module")
def tserver(db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(db_url, tmp_path_factory.mktemp("log") / "server.log", env=TRANSPORT_ENV).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def tadmin(tserver: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=tserver.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120) as c:
        yield c


@pytest.fixture(scope="module")
def tcampaign(tadmin: httpx.Client) -> dict[str, object]:
    return create(tadmin, name="transport", kind="frequency", oracle="GRR", epsilon=1.0, min_reports=1,
                  categories=["a", "b", "c"])


@pytest.fixture(scope="module")
def tstream(tadmin: httpx.Client) -> dict[str, object]:
    resp = tadmin.post("/streams", json={"name": "transport", "publisher": "rtp", "epsilon": 1.0, "window": 64})
    assert resp.status_code == 201, resp.text
    return resp.json()  # type: ignore[no-any-return]


def _grr(value: int) -> str:
    """A GRR report (uint32 little-endian, base64) as the client sends it."""
    return base64.b64encode(int(value).to_bytes(4, "little")).decode()


def _rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in bytes, from /proc/<pid>/status."""
    text = Path(f"/proc/{pid}/status").read_text()
    kb = {k: int(v.split()[0]) for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(.*)$", text, re.M)}
    return kb["VmRSS"] * 1024, kb["VmHWM"] * 1024


def _post_raw(port: int, path: str, length: int, headers: str = "", chunk: int = 1 << 20,
              timeout: float = 20.0) -> tuple[str, int]:
    """POST a body of ``length`` bytes over a raw socket; (status line, bytes the server took)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {length}\r\n{headers}\r\n".encode())
        block = b" " * chunk
        try:
            while sent < length:
                sent += s.send(block[: min(chunk, length - sent)])
        except OSError:  # the server answered and closed: the rest of the body is refused
            pass
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
    return data.split(b"\r\n", 1)[0].decode(errors="replace"), sent


def test_finding4_unauthenticated_bodies_are_not_read(tserver: Server, tstream: dict[str, object]) -> None:
    """Finding 4: 30 concurrent 31 MB bodies without a token made the server grow from 796 MB to
    2,240 MB. Now each gets 401 from its headers and its body is not read: the server's peak
    RSS grows by less than 64 MB (it would need 930 MB to hold the bodies)."""
    assert tserver.proc is not None
    rss0, _ = _rss(tserver.proc.pid)
    results: list[tuple[str, int]] = []

    def one(i: int) -> None:
        auth = "" if i % 2 else "Authorization: Bearer " + secrets.token_urlsafe(32) + "\r\n"
        results.append(_post_raw(tserver.port, f"/streams/{tstream['id']}/counts", 31_000_000, auth))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    rss1, hwm = _rss(tserver.proc.pid)
    assert len(results) == 30
    statuses = sorted({r[0] for r in results})
    assert all(st.startswith(("HTTP/1.1 401", "HTTP/1.1 403")) or st == "" for st, _ in results), statuses
    assert sum(st.startswith("HTTP/1.1 40") for st, _ in results) >= 25, statuses  # a reset may hide a few
    assert max(hwm, rss1) - rss0 < 64 * 2**20, (rss0, rss1, hwm)
    print(f"finding 4: RSS {rss0 / 2**20:.0f} MB before, {rss1 / 2**20:.0f} MB after, peak {hwm / 2**20:.0f} MB; "
          f"client bytes the server took: max {max(n for _, n in results) / 2**20:.1f} MB of 29.6 MB")
    # the server still answers, and the producer with its token is served
    ok = httpx.post(f"{tserver.url}/streams/{tstream['id']}/counts", json={"counts": [1, 2], "batch_id": "f4"},
                    headers={"Authorization": f"Bearer {tstream['producer_token']}"}, timeout=60)
    assert ok.status_code == 200, ok.text


def test_finding4_anonymous_large_bodies_share_a_memory_budget(tserver: Server, tcampaign: dict[str, object]) -> None:
    """The public batch endpoint takes no token, so its bodies cannot be refused unread: instead
    large bodies reserve their size from a per-worker budget (``--body-memory``, here 64 MiB) and
    the rest get 503 with Retry-After, unread. 30 concurrent 31 MB batches: the peak RSS grows by
    less than 256 MB (1.5 GB when all are read at once)."""
    assert tserver.proc is not None
    rss0, _ = _rss(tserver.proc.pid)
    results: list[tuple[str, int]] = []
    threads = [threading.Thread(target=lambda: results.append(
        _post_raw(tserver.port, f"/campaigns/{tcampaign['id']}/reports/batch", 31_000_000))) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    rss1, hwm = _rss(tserver.proc.pid)
    statuses = [st for st, _ in results]
    assert len(results) == 30 and all(st.startswith(("HTTP/1.1 503", "HTTP/1.1 422")) or st == ""
                                      for st in statuses), sorted(set(statuses))
    assert sum(st.startswith("HTTP/1.1 503") for st in statuses) >= 10, sorted(set(statuses))
    assert max(hwm, rss1) - rss0 < 256 * 2**20, (rss0, rss1, hwm)
    print(f"anonymous batches: {sorted(set(statuses))}; RSS {rss0 / 2**20:.0f} MB before, peak {hwm / 2**20:.0f} MB")
    assert httpx.get(f"{tserver.url}/health", timeout=30).json()["status"] == "ok"


def test_finding4_routed_admin_endpoints_check_the_token_first(tserver: Server, tcampaign: dict[str, object]) -> None:
    """The routed admin endpoints too: 401 from the headers, body unread, connection closed."""
    for path in ("/campaigns", f"/campaigns/{tcampaign['id']}/tokens", "/streams"):
        status, _ = _post_raw(tserver.port, path, 200_000, chunk=1 << 16)
        assert status.startswith("HTTP/1.1 401") or status == "", (path, status)
        resp = httpx.post(tserver.url + path, json={"count": 1}, timeout=30)
        assert resp.status_code == 401 and resp.headers["connection"] == "close"
        assert resp.headers["www-authenticate"] == "Bearer"


async def _slow(port: int, head: bytes, trickle: bytes, every: float, limit: float) -> tuple[bytes, float]:
    """Send ``head`` then ``trickle`` every ``every`` seconds until the server closes; (reply, seconds)."""
    t0 = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head)
    reply = b""
    try:
        while time.monotonic() - t0 < limit:
            try:
                chunk = await asyncio.wait_for(reader.read(4096), every)
            except TimeoutError:
                writer.write(trickle)
                try:
                    await writer.drain()
                except OSError:
                    break
                continue
            if not chunk:
                break
            reply += chunk
    except OSError:
        pass
    finally:
        writer.close()
    return reply, time.monotonic() - t0


async def _many_slow(n: int, *args: object) -> list[tuple[bytes, float]]:
    return await asyncio.gather(*(_slow(*args) for _ in range(n)))  # type: ignore[arg-type]


def test_finding4_slow_headers_and_bodies_are_timed_out(tserver: Server, tcampaign: dict[str, object]) -> None:
    """Finding 4: 300 slow-header and 300 slow-body connections were held for 30 s. Now the server
    answers 408 and closes each after its timeout (here 2 s for headers, 3 s for bodies)."""
    limit = 15.0
    head = f"POST /campaigns/{tcampaign['id']}/reports HTTP/1.1\r\nHost: x\r\n".encode()
    slow_headers = asyncio.run(_many_slow(300, tserver.port, head, b"X-Slow: 1\r\n", 0.5, limit))
    body_head = head + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    slow_bodies = asyncio.run(_many_slow(300, tserver.port, body_head, b" ", 0.5, limit))
    for name, got, timeout in (("headers", slow_headers, HEADER_TIMEOUT), ("bodies", slow_bodies, BODY_TIMEOUT)):
        took = sorted(t for _, t in got)
        assert took[-1] < timeout + 4.0, (name, took[-5:])  # closed by the server, not held until `limit`
        assert took[0] >= timeout - 0.5, (name, took[:5])
        assert all(reply.startswith(b"HTTP/1.1 408") for reply, _ in got), (name, {r[:40] for r, _ in got})
    # a slow body on a routed (admin) endpoint too
    admin_head = (f"POST /campaigns HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{").encode()
    (reply, took), = asyncio.run(_many_slow(1, tserver.port, admin_head, b" ", 0.5, limit))
    assert reply.startswith(b"HTTP/1.1 408") and took < BODY_TIMEOUT + 4.0, (reply[:200], took)
    assert httpx.get(f"{tserver.url}/health", timeout=30).json()["status"] == "ok"


def test_finding9_only_json_bodies(tserver: Server, tadmin: httpx.Client, tcampaign: dict[str, object],
                                   tstream: dict[str, object]) -> None:
    """Finding 9: a report posted as text/plain was stored (any web page could make its visitors'
    browsers post reports without a CORS preflight). Now every body that is not
    application/json gets 415 and nothing is stored."""
    cid, sid = tcampaign["id"], tstream["id"]
    report = {"report_id": secrets.token_hex(16), "report": _grr(1)}
    import json

    body = json.dumps(report)
    before = tadmin.get(f"/campaigns/{cid}/status").json()["n_reports"]
    producer = {"Authorization": f"Bearer {tstream['producer_token']}"}
    calls = [(f"/campaigns/{cid}/reports", body, {}),
             (f"/campaigns/{cid}/reports/batch", json.dumps({"report_ids": "", "reports": ""}), {}),
             (f"/campaigns/{cid}/assignments", '{"count": 1}', {}),
             (f"/streams/{sid}/counts", '{"counts": [1], "batch_id": "ct"}', producer),
             (f"/streams/{sid}/ranges", '{"ranges": [[1, 1]]}', {}),
             ("/campaigns", '{"name": "x"}', {"Authorization": f"Bearer {ADMIN_TOKEN}"})]
    for path, content, headers in calls:
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
            h = dict(headers)
            if ctype is not None:
                h["Content-Type"] = ctype
            resp = httpx.post(tserver.url + path, content=content.encode(), headers=h, timeout=30)
            if ctype is None:  # httpx sends no Content-Type for raw content
                assert resp.status_code == 415, (path, resp.text)
            else:
                assert resp.status_code == 415, (path, ctype, resp.status_code, resp.text)
            assert resp.json()["error"]["field"] == "Content-Type"
    assert tadmin.get(f"/campaigns/{cid}/status").json()["n_reports"] == before
    ok = httpx.post(f"{tserver.url}/campaigns/{cid}/reports", content=body.encode(),
                    headers={"Content-Type": "application/json; charset=utf-8"}, timeout=30)
    assert ok.status_code == 201, ok.text


@pytest.mark.parametrize("token", ["change-me-to-a-long-random-string", "short-token",
                                   "a" * 40, "password-password-password-12345678", "0123456789" * 3])
def test_finding9_weak_admin_token_refused_at_start(token: str, tmp_path: Path) -> None:
    """Finding 9: the README's sample admin token was accepted. Now ``privpub serve`` refuses a
    sample or weak token (< 32 characters, < 10 distinct, or a placeholder) with exit 2."""
    env = dict(os.environ, PRIVPUB_ADMIN_TOKEN=token, PYTHONPATH=str(SRC))
    proc = subprocess.run([sys.executable, "-m", "privpub", "serve", "--db", str(tmp_path / "x.db"),
                           "--port", "0"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "too weak" in lines[0] and "token_urlsafe(32)" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_finding9_sqlite_file_is_private(tmp_path: Path) -> None:
    """Finding 9: the SQLite file was created 0644 although stream state is confidential. Now the
    database and its -wal and -shm files are 0600 (a SQLite file: its own server, whatever the
    backend of the module's fixtures)."""
    path = tmp_path / "private.db"
    srv = Server(f"sqlite:///{path}", tmp_path / "server.log", env=TRANSPORT_ENV).start()
    try:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                          timeout=30) as admin:
            resp = admin.post("/streams", json={"name": "private", "publisher": "rtp", "epsilon": 1.0,
                                                "window": 8})
            assert resp.status_code == 201, resp.text
        files = [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]
        assert path in files and len(files) >= 2
        for p in files:
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, (p, oct(p.stat().st_mode))
    finally:
        srv.stop()


def test_finding9_no_500_and_logs_without_parameters(tserver: Server, tadmin: httpx.Client,
                                                     tcampaign: dict[str, object]) -> None:
    """Finding 9: a batch group of 2**70 and a NUL byte in a name (PostgreSQL) gave 500 and logged
    tracebacks with the SQL parameters. Now 4xx, and the log holds one line per error at most, with
    neither a traceback nor the values."""
    canary = "CANARY" + secrets.token_hex(4)
    rid = base64.b64encode(b"\x01" * 16).decode()
    resp = httpx.post(f"{tserver.url}/campaigns/{tcampaign['id']}/reports/batch",
                      json={"report_ids": rid, "reports": "AA==", "groups": [2**70]}, timeout=30)
    assert resp.status_code == 422 and resp.json()["error"]["field"].startswith("groups"), resp.text
    for path, spec in (("/campaigns", {"name": canary + "\u0000", "kind": "frequency", "epsilon": 1.0,
                                       "categories": ["a", "b"]}),
                       ("/streams", {"name": canary + "\u0000", "publisher": "rtp", "epsilon": 1.0, "window": 8})):
        resp = tadmin.post(path, json=spec)
        assert 200 <= resp.status_code < 500, (path, resp.status_code, resp.text)
        assert canary not in resp.text or resp.status_code < 300
    log = tserver.log()
    assert "Traceback" not in log and canary not in log and "[parameters" not in log, log[-2000:]


def test_finding9_failed_auth_is_rate_limited(db_url: str, tmp_path: Path) -> None:
    """Finding 9: 1,500 admin-token guesses were checked in 2.1 s. Now a client address gets
    ``--auth-burst`` (here 20) failures, then ``--auth-rate`` (here 2) per second; the rest get
    429 with Retry-After, unchecked, and so does the right token until the bucket refills."""
    burst, rate = 20, 2.0
    srv = Server(db_url, tmp_path / "server.log",
                 env={"PRIVPUB_AUTH_BURST": str(burst), "PRIVPUB_AUTH_RATE": str(rate)}).start()
    try:
        counts: dict[int, int] = {}
        t0 = time.monotonic()
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            for _ in range(1500):
                resp = c.get("/campaigns", headers={"Authorization": f"Bearer {secrets.token_urlsafe(32)}"})
                counts[resp.status_code] = counts.get(resp.status_code, 0) + 1
                if resp.status_code == 429:
                    assert int(resp.headers["retry-after"]) >= 1
            elapsed = time.monotonic() - t0
            checked = counts.get(403, 0)
            assert set(counts) <= {403, 429}, counts
            assert checked <= burst + rate * elapsed + 1, (counts, elapsed)
            assert checked >= burst and counts.get(429, 0) >= 1500 - burst - rate * elapsed - 1
            # the right token is not checked either while the bucket is empty (a refill between the
            # two requests lets it through: then guess again)
            extra = 0
            for _ in range(10):
                extra += 1
                guess = c.get("/campaigns", headers={"Authorization": f"Bearer {secrets.token_urlsafe(32)}"})
                right = c.get("/campaigns", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
                counts[guess.status_code] = counts.get(guess.status_code, 0) + 1
                if right.status_code == 429:
                    break
            assert right.status_code == 429
            time.sleep(1.2 / rate)
            assert c.get("/campaigns", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).status_code == 200
            metrics = c.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text
        invalid = _sample(metrics, "privpub_auth_failures_total", kind="admin", reason="invalid")
        limited = _sample(metrics, "privpub_auth_failures_total", kind="admin", reason="limited")
        assert invalid == counts.get(403, 0) and limited == counts[429] + 1, (invalid, limited, counts)
        print(f"failed-auth limit: {checked} of 1500 guesses checked in {elapsed:.1f} s")
    finally:
        srv.stop()


def test_admin_token_rule() -> None:
    """The rule ``privpub serve`` applies: >= 32 characters, >= 10 distinct, no placeholder."""
    from privpub.service._transport import admin_token_problem

    assert admin_token_problem(secrets.token_urlsafe(32)) is None
    assert admin_token_problem(secrets.token_hex(16)) is None and admin_token_problem(ADMIN_TOKEN) is None
    for weak in ("change-me-to-a-long-random-string", "Change-Me-" + secrets.token_hex(16), "x" * 64,
                 secrets.token_hex(15), "my-example-token-" + secrets.token_hex(16)):
        assert admin_token_problem(weak) is not None, weak


def test_auth_limiter_is_a_bounded_token_bucket() -> None:
    from privpub.service._transport import AuthLimiter

    lim = AuthLimiter(burst=3, rate=1000.0, max_clients=100)
    for _ in range(3):
        assert lim.retry_after("a") is None
        lim.failed("a")
    wait = lim.retry_after("a")
    assert wait is not None and 0 < wait <= 1 / 1000
    time.sleep(0.01)
    assert lim.retry_after("a") is None  # refilled
    for i in range(1000):
        lim.failed(f"client{i}")
    assert len(lim._buckets) == 100 and lim.retry_after("b") is None


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text (0 if absent)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', line[: line.rindex("}")]))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_show_an_attack(tserver: Server, tadmin: httpx.Client, tcampaign: dict[str, object],
                                tstream: dict[str, object]) -> None:
    """``GET /metrics``: admin only; reports per campaign and outcome, failed auths, stream
    ingest and query requests, request latency by route template (never a raw path)."""
    cid, sid = str(tcampaign["id"]), str(tstream["id"])
    before = tadmin.get("/metrics").text
    assert httpx.get(f"{tserver.url}/metrics", timeout=30).status_code == 401
    assert httpx.get(f"{tserver.url}/metrics", headers={"Authorization": "Bearer " + "x" * 40}, timeout=30).status_code == 403
    rid = secrets.token_hex(16)
    one = {"report_id": rid, "report": _grr(2)}
    assert httpx.post(f"{tserver.url}/campaigns/{cid}/reports", json=one, timeout=30).status_code == 201
    assert httpx.post(f"{tserver.url}/campaigns/{cid}/reports", json=one, timeout=30).status_code == 200
    bad = {"report_id": secrets.token_hex(16), "report": _grr(9)}  # category 9 of 3
    assert httpx.post(f"{tserver.url}/campaigns/{cid}/reports", json=bad, timeout=30).status_code == 422
    producer = {"Authorization": f"Bearer {tstream['producer_token']}"}
    assert httpx.post(f"{tserver.url}/streams/{sid}/counts", json={"counts": [3], "batch_id": "m1"},
                      headers=producer, timeout=30).status_code == 200
    assert httpx.get(f"{tserver.url}/streams/{sid}/range", params={"start": 1, "end": 1}, timeout=30).status_code == 200
    after = tadmin.get("/metrics").text
    assert after.startswith("# HELP") and "text/plain" in tadmin.get("/metrics").headers["content-type"]

    def delta(name: str, **labels: str) -> float:
        return _sample(after, name, **labels) - _sample(before, name, **labels)

    assert delta("privpub_reports_total", campaign=cid, outcome="accepted") == 1
    assert delta("privpub_reports_total", campaign=cid, outcome="duplicate") == 1
    assert delta("privpub_reports_total", campaign=cid, outcome="refused") == 1
    assert delta("privpub_stream_requests_total", stream=sid, kind="ingest") == 1
    assert delta("privpub_stream_requests_total", stream=sid, kind="query") == 1
    assert delta("privpub_auth_failures_total", kind="admin", reason="missing") >= 1
    assert delta("privpub_auth_failures_total", kind="admin", reason="invalid") >= 1
    assert delta("privpub_request_duration_seconds_count", method="POST",
                 path="/campaigns/{campaign_id}/reports", status="201") == 1
    clocked = tadmin.post("/streams", json={"name": "clocked", "publisher": "rtp", "epsilon": 1.0, "window": 8,
                                            "step_seconds": 60})
    assert clocked.status_code == 201, clocked.text
    lag = _sample(tadmin.get("/metrics").text, "privpub_stream_clock_lag_seconds", stream=clocked.json()["id"])
    assert f'privpub_stream_clock_lag_seconds{{stream="{clocked.json()["id"]}"}}' in tadmin.get("/metrics").text
    assert 0 <= lag < 60
    paths = set(re.findall(r'path="([^"]*)"', after))
    assert "/streams/{stream_id}/counts" in paths and not any(cid in p or sid in p for p in paths), paths


def test_metrics_sum_over_two_workers(db_url: str, tmp_path: Path) -> None:
    """With ``--workers 2`` the counters are the sum over the workers (multiprocess mode): every
    scrape, whichever worker serves it, counts all the reports."""
    srv = Server(db_url, tmp_path / "server.log", workers=2).start()
    try:
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        with httpx.Client(base_url=srv.url, headers=admin, timeout=60) as a:
            cid = str(create(a, name="workers", kind="frequency", oracle="GRR", epsilon=1.0, min_reports=1,
                             categories=["a", "b"])["id"])
        n = 60
        for _ in range(n):  # a new connection each: the kernel spreads them over the workers
            one = {"report_id": secrets.token_hex(16), "report": _grr(1)}
            assert httpx.post(f"{srv.url}/campaigns/{cid}/reports", json=one, timeout=30).status_code == 201
        for _ in range(6):
            text = httpx.get(f"{srv.url}/metrics", headers=admin, timeout=30).text
            assert _sample(text, "privpub_reports_total", campaign=cid, outcome="accepted") == n
    finally:
        srv.stop()

# --- streams: findings 2, 3, 6, 7, 8, 9 ---
def _post(client: httpx.Client, sid: str, counts: object) -> httpx.Response:
    return client.post(f"/streams/{sid}/counts", json={"counts": counts, "batch_id": uuid.uuid4().hex})


def _raw(client: httpx.Client, sid: str, text: str) -> httpx.Response:
    body = '{"batch_id": "' + uuid.uuid4().hex + '", "counts": ' + text + "}"
    return client.post(f"/streams/{sid}/counts", content=body.encode(), headers={"content-type": "application/json"})


def _err(resp: httpx.Response, status: int, field: str | None = None) -> dict[str, str]:
    assert resp.status_code == status, resp.text
    err: dict[str, str] = resp.json()["error"]
    if field is not None:
        assert err["field"] == field, err
    return err


@contextmanager
def _own_server(backend: str, tmp_path: Path) -> Iterator[Server]:
    """A server on a database of its own (tests that restart it or edit its rows)."""
    gen = fresh_database(backend, tmp_path)
    url = next(gen)
    srv = Server(url, tmp_path / "server.log", env=CHECKS).start()
    try:
        yield srv
    finally:
        srv.stop()
        gen.close()


def test_finding2_integer_counts_are_exact_never_through_a_float(adm: httpx.Client) -> None:
    """2**53 + 1 was stored as 2**53 (a float): now JSON integers stay exact end to end, and the
    answers are the library's on the same integers and seed."""
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=16, height=2, rng=21)
    big = [2**53 + 1, 2**53 + 2, 3]
    assert _raw(adm, s["id"], "[9007199254740993, 9007199254740994, 3]").status_code == 200
    assert adm.get(f"/streams/{s['id']}/check").json()["true_total"] == sum(big)
    lib = make_publisher("rtp", window=16, epsilon=1.0, height=2, rng=21)
    lib.extend(big)
    for lo, hi in ((1, 1), (2, 2), (1, 3)):
        got = adm.get(f"/streams/{s['id']}/range", params={"start": lo, "end": hi}).json()["estimate"]
        assert got == lib.query(lo, hi)
    # a JSON float above 2**53 cannot be exact: refused, naming the count and the limit
    err = _err(_raw(adm, s["id"], "[1, 9007199254740993.0]"), 422, "counts[1]")
    assert "2**53" in err["message"]
    _err(_raw(adm, s["id"], "[2.5]"), 422, "counts[0]")
    # strict types: true and "5" are not counts
    _err(_raw(adm, s["id"], "[true]"), 422, "counts.0")
    _err(_raw(adm, s["id"], '["5"]'), 422, "counts.0")
    _err(_raw(adm, s["id"], "[null]"), 422, "counts.0")
    e = create_stream(adm, publisher="rtp", epsilon=1.0, window=16, step_seconds=3600)
    for body in ({"times": [True]}, {"times": ["5"]}, {"time": "5"}):
        assert adm.post(f"/streams/{e['id']}/events", json={"batch_id": "b", **body}).status_code == 422, body
    assert adm.get(f"/streams/{s['id']}").json()["t"] == 3  # nothing refused was stored
    # a real-valued stream refuses what a float64 cannot hold (2**52)
    r = create_stream(adm, publisher="rtp", epsilon=1.0, window=16, real=True, noise="laplace")
    assert "2**52" in _err(_raw(adm, r["id"], "[9007199254740993]"), 422, "counts")["message"]


def test_finding2_sums_beyond_int64_are_refused_not_wrapped(adm: httpx.Client) -> None:
    """Eight posts of [2**60] to an rtp stream made range 1..8 answer -9223372036854775806: now
    the post that would take the running total past 2**62 is refused (422 naming the limit),
    and every answer stays the exact library answer (no wrap)."""
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, rng=4)
    lib = make_publisher("rtp", window=64, epsilon=1.0, rng=4)
    codes = []
    for _ in range(8):
        resp = _post(adm, s["id"], [2**60])
        codes.append(resp.status_code)
        if resp.status_code == 200:
            lib.append(2**60)
        else:
            assert "2**62" in _err(resp, 422, "counts")["message"]
    assert codes[:3] == [200] * 3 and 422 in codes and set(codes) <= {200, 422}
    t = adm.get(f"/streams/{s['id']}").json()["t"]
    assert t == lib.t == codes.count(200)
    est = adm.get(f"/streams/{s['id']}/range", params={"start": 1, "end": t}).json()["estimate"]
    assert est == lib.query(1, t) and abs(est - t * 2**60) < 1000
    # the stream still takes counts that fit
    assert _post(adm, s["id"], [5]).status_code == 200
    # counts beyond the arithmetic: 422, never a 500
    for text in (str(2**61 + 1), str(2**63), str(2**70), "1" + "0" * 400, "1" + "0" * 4200, "9" * 5000, "1e400"):
        assert _raw(adm, s["id"], f"[{text}]").status_code == 422, text


def test_finding9_stream_count_2_61_name_nul_and_tiny_epsilon(adm: httpx.Client) -> None:
    """A count of 2**61, a NUL byte in a stream's name (PostgreSQL) and epsilon 1e-300 gave 500s."""
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=16)
    first = _post(adm, s["id"], [2**61])
    assert first.status_code == 200, first.text
    assert _post(adm, s["id"], [2**61]).status_code == 422  # the running total would pass 2**62
    est = adm.get(f"/streams/{s['id']}/range", params={"start": 1, "end": 1}).json()["estimate"]
    assert abs(est - 2**61) < 1000
    body = {"publisher": "rtp", "epsilon": 1.0, "window": 16}
    _err(adm.post("/streams", json={**body, "name": "bad\x00name"}), 422, "name")
    _err(adm.post("/streams", json={**body, "name": "ok", "session": "s\x00"}), 422, "session")
    for eps in (1e-300, 1e-12):
        assert "epsilon" in _err(adm.post("/streams", json={**body, "name": "tiny", "epsilon": eps}), 422)["field"]


def test_finding3_operator_settings_are_bounded(adm: httpx.Client) -> None:
    """``step_seconds: 1, origin: 0`` froze the clock for good; ``step_seconds: 1e-9`` burned a core."""
    n = len(adm.get("/streams").json()["streams"])
    body = {"name": "clock", "publisher": "rtp", "epsilon": 1.0, "window": 16}
    assert "1000000" in _err(adm.post("/streams", json={**body, "step_seconds": 1, "origin": 0}), 422,
                             "origin")["message"]
    _err(adm.post("/streams", json={**body, "step_seconds": 1e-9}), 422, "step_seconds")
    _err(adm.post("/streams", json={**body, "step_seconds": 1, "origin": time.time() + 400 * 86400}), 422, "origin")
    _err(adm.post("/streams", json={**body, "window": 2**21}), 422, "window")
    _err(adm.post("/streams", json={**body, "horizon": 2**60}), 422, "horizon")
    _err(adm.post("/streams", json={**body, "history": [1] * 20_000, "publisher": "hq_rtp"}), 422, "history")
    _err(adm.post("/streams", json={**body, "log_per_client": 0}), 422, "log_per_client")
    assert len(adm.get("/streams").json()["streams"]) == n
    # the largest catch-up allowed is accepted and closes its steps
    s = create_stream(adm, **body, step_seconds=60, origin=time.time() - 600 * 60)
    deadline = time.monotonic() + 20
    while adm.get(f"/streams/{s['id']}").json()["t"] < 600 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert adm.get(f"/streams/{s['id']}").json()["t"] == 600


def test_finding3_one_streams_clock_failure_never_stops_another(backend: str, tmp_path: Path) -> None:
    """A stream whose clock cannot catch up (origin 0, one-second steps: written directly, as an
    older privpub accepted it) is logged, marked in its status and skipped; clocked streams
    created afterwards advance, also after a restart; DELETE takes it out of service."""
    with _own_server(backend, tmp_path) as srv, admin_client(srv) as adm:
        bad = create_stream(adm, publisher="rtp", epsilon=1.0, window=16, step_seconds=3600)["id"]
        srv.stop()
        engine = make_engine(srv.db, pool_size=1)
        try:
            with write_tx(engine) as conn:
                conn.execute(sa.text("UPDATE streams SET origin = 0, open_since = 0, step_seconds = 1 WHERE id = :i"),
                             {"i": bad})
        finally:
            engine.dispose()
        srv.start()
        good = create_stream(adm, publisher="rtp", epsilon=1.0, window=16, step_seconds=1,
                             origin=time.time() - 2.5)["id"]
        deadline = time.monotonic() + 20
        while adm.get(f"/streams/{good}").json()["t"] < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert adm.get(f"/streams/{good}").json()["t"] >= 3
        status = adm.get(f"/streams/{bad}").json()
        assert status["t"] == 0 and "behind" in status["clock_error"]
        ev = adm.post(f"/streams/{bad}/events", json={"batch_id": "e", "time": time.time()})
        assert ev.status_code == 409 and "behind" in ev.json()["error"]["message"]
        assert f"stream {bad}: the clock failed" in srv.log()
        closed = adm.delete(f"/streams/{bad}")
        assert closed.status_code == 200 and closed.json()["closed_at"] > 0
        t_good = adm.get(f"/streams/{good}").json()["t"]
        time.sleep(1.5)
        assert adm.get(f"/streams/{good}").json()["t"] > t_good


def test_finding3_delete_archives_a_stream(adm: httpx.Client, srv: Server) -> None:
    """There was no way to delete a stream: DELETE (admin) stops ingest and the clock for good,
    keeps the released steps queryable, and is idempotent."""
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=16, rng=8)
    sid = s["id"]
    post_counts(adm, sid, [4, 5, 6])
    before = adm.get(f"/streams/{sid}/range", params={"start": 1, "end": 3}).json()
    assert httpx.delete(f"{srv.url}/streams/{sid}").status_code == 401
    anyone = httpx.delete(f"{srv.url}/streams/{sid}", headers={"Authorization": f"Bearer {s['producer_token']}"})
    assert anyone.status_code == 403
    first = adm.delete(f"/streams/{sid}")
    assert first.status_code == 200 and first.json()["t"] == 3
    again = adm.delete(f"/streams/{sid}")
    assert again.status_code == 200 and again.json()["closed_at"] == first.json()["closed_at"]
    assert "closed" in _err(_post(adm, sid, [1]), 409)["message"]
    _err(adm.post(f"/streams/{sid}/events", json={"batch_id": "e", "time": time.time()}), 409)
    _err(adm.post(f"/streams/{sid}/close-step", json={"t": 4}), 409)
    assert adm.get(f"/streams/{sid}/range", params={"start": 1, "end": 3}).json() == before
    status = adm.get(f"/streams/{sid}").json()
    assert status["closed_at"] == first.json()["closed_at"] and status["t"] == 3
    assert adm.delete("/streams/00000000000000ff").status_code == 404
    # a clocked stream stops closing steps
    c = create_stream(adm, publisher="rtp", epsilon=1.0, window=16, step_seconds=0.2)
    assert adm.delete(f"/streams/{c['id']}").status_code == 200
    t_closed = adm.get(f"/streams/{c['id']}").json()["t"]
    time.sleep(1.0)
    assert adm.get(f"/streams/{c['id']}").json()["t"] == t_closed


@contextmanager
def _hold_stream_row(db: str, sid: str, seconds: float) -> Iterator[None]:
    """Hold the stream's row (as a slow writer would) for ``seconds`` in a background thread."""
    ready = threading.Event()

    def hold() -> None:
        if db.startswith("sqlite"):
            conn = sqlite3.connect(db.removeprefix("sqlite:///"), timeout=60, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            ready.set()
            time.sleep(seconds)
            conn.execute("COMMIT")
            conn.close()
            return
        engine = make_engine(db, pool_size=1)
        try:
            with engine.begin() as conn:
                conn.execute(sa.text("SELECT t FROM streams WHERE id = :i FOR UPDATE"), {"i": sid})
                ready.set()
                time.sleep(seconds)
        finally:
            engine.dispose()

    th = threading.Thread(target=hold)
    th.start()
    ready.wait(30)
    try:
        yield
    finally:
        th.join(60)


def test_finding6_close_step_is_idempotent_under_sdk_retries(adm: httpx.Client, srv: Server) -> None:
    """``StreamProducer(timeout=1.5, retries=2).close_step()`` against a slow stream raised and
    advanced t by 3: now the request names the step it closes and a retry closes nothing twice."""
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=16)
    sid = s["id"]
    post_counts(adm, sid, [1, 2])
    producer = StreamProducer(srv.url, sid, token=s["producer_token"], timeout=1.5, retries=2, backoff=0.05)
    try:
        with _hold_stream_row(srv.db, sid, 3.0):
            try:
                t = producer.close_step(3)
            except OfflineError:  # every attempt timed out: still, the step is closed at most once
                t = None
        time.sleep(1.0)
        assert adm.get(f"/streams/{sid}").json()["t"] == 3
        assert t in (3, None)
        # the same step again: a no-op with the same answer; another step: 409 naming t
        again = adm.post(f"/streams/{sid}/close-step", json={"t": 3})
        assert again.status_code == 200 and again.json() == {"t": 3, "step": 3, "duplicate": True}
        assert "t=3" in _err(adm.post(f"/streams/{sid}/close-step", json={"t": 7}), 409, "t")["message"]
        _err(adm.post(f"/streams/{sid}/close-step", json={"t": 2}), 409, "t")
        _err(adm.post(f"/streams/{sid}/close-step"), 422)
        _err(adm.post(f"/streams/{sid}/close-step", json={"t": "4"}), 422, "t")
        assert producer.close_step() == 4  # default: the open step, from the status
        assert adm.get(f"/streams/{sid}").json()["t"] == 4
    finally:
        producer.close()


def test_finding7_anonymous_queries_cannot_steer_hq_heights(adm: httpx.Client, srv: Server) -> None:
    """20 anonymous requests of 50,000 unit ranges added 10**6 log rows and moved an hq_rtp
    stream's heights from 8 to 1. Now: at most 10,000 ranges per request, and only readers'
    queries (reader token or admin token) are logged by default, at most ``log_per_client`` each."""
    s = create_stream(adm, publisher="hq_rtp", epsilon=1.0, window=4096, history=[1000] * 100, log_per_client=300)
    sid = s["id"]
    post_counts(adm, sid, np.ones(64, dtype=int))
    view = adm.get(f"/streams/{sid}/log").json()
    heights = [tr["height"] for tr in view["trees"]]
    assert view["predicted_length"] == 1000.0 and heights
    unit = [[i, i] for i in range(1, 65)] * 150  # 9,600 unit ranges
    with httpx.Client(base_url=srv.url, timeout=60) as anon:
        _err(anon.post(f"/streams/{sid}/ranges", json={"ranges": [[1, 1]] * 10_001}), 422, "ranges")
        for _ in range(5):
            assert anon.post(f"/streams/{sid}/ranges", json={"ranges": unit}).status_code == 200
        for i in range(20):
            assert anon.get(f"/streams/{sid}/range", params={"start": 1 + i, "end": 1 + i}).status_code == 200
        wrong = anon.post(f"/streams/{sid}/ranges", json={"ranges": unit},
                          headers={"Authorization": f"Bearer {s['producer_token']}"})
        assert wrong.status_code == 200
    post_counts(adm, sid, np.ones(64, dtype=int))  # closing steps is when the predictor learns
    view = adm.get(f"/streams/{sid}/log").json()
    assert view["queries_logged"] == 0 and view["predicted_length"] == 1000.0
    assert [tr["height"] for tr in view["trees"]][-1] == heights[-1] > 1
    # a reader's queries are logged, at most log_per_client an hour
    with httpx.Client(base_url=srv.url, timeout=60, headers={"Authorization": f"Bearer {s['reader_token']}"}) as rd:
        assert rd.post(f"/streams/{sid}/ranges", json={"ranges": [[1, 128]] * 250}).status_code == 200
        assert rd.get(f"/streams/{sid}/range", params={"start": 1, "end": 128}).status_code == 200
        assert rd.post(f"/streams/{sid}/ranges", json={"ranges": [[1, 1]] * 250}).status_code == 200
    assert adm.get(f"/streams/{sid}/log").json()["queries_logged"] == 300
    # queries_from="anyone": anonymous clients count, each at most log_per_client
    a = create_stream(adm, publisher="hq_rtp", epsilon=1.0, window=256, queries_from="anyone", log_per_client=40)
    post_counts(adm, a["id"], np.ones(8, dtype=int))
    assert httpx.post(f"{srv.url}/streams/{a['id']}/ranges", json={"ranges": [[1, 1]] * 100}).status_code == 200
    assert adm.get(f"/streams/{a['id']}/log").json()["queries_logged"] == 40
    n = create_stream(adm, publisher="hq_rtp", epsilon=1.0, window=256, queries_from="none")
    post_counts(adm, n["id"], np.ones(8, dtype=int))
    assert adm.post(f"/streams/{n['id']}/ranges", json={"ranges": [[1, 1]] * 10}).status_code == 200
    assert adm.get(f"/streams/{n['id']}/log").json()["queries_logged"] == 0
    assert a["queries_from"] == "anyone" and s["queries_from"] == "readers"


@pytest.mark.slow
def test_finding8_a_write_costs_the_new_nodes_not_the_window(backend: str, tmp_path: Path) -> None:
    """Window 2**20 at t = 1.2 M rewrote 168 MB per post: now a one-count post stores a part of a
    few nodes and a small head, and the stream restarts with identical answers."""
    W = 2**20
    with _own_server(backend, tmp_path) as srv, admin_client(srv) as adm:
        s = create_stream(adm, publisher="rtp", epsilon=1.0, window=W, rng=1)
        sid = s["id"]
        ones = np.ones(200_000, dtype=np.int64)
        for _ in range(6):
            post_counts(adm, sid, ones)
        assert adm.get(f"/streams/{sid}").json()["t"] == 1_200_000
        took = []
        for _ in range(5):
            t0 = time.perf_counter()
            post_counts(adm, sid, [3])
            took.append(time.perf_counter() - t0)
        engine = make_engine(srv.db, pool_size=1)
        try:
            with engine.connect() as conn:
                head = conn.execute(sa.text("SELECT length(state) FROM streams WHERE id = :i"), {"i": sid}).scalar_one()
                last = conn.execute(sa.text("SELECT length(data) FROM stream_parts WHERE stream_id = :i "
                                            "ORDER BY t_end DESC LIMIT 1"), {"i": sid}).scalar_one()
                total = conn.execute(sa.text("SELECT sum(length(data)) FROM stream_parts WHERE stream_id = :i"),
                                     {"i": sid}).scalar_one()
        finally:
            engine.dispose()
        # the write stored a few released nodes and the head, not the window (about 16 MB of nodes)
        assert head < 64_000 and last < 16_000, (head, last)
        assert total < 4 * 16 * (W + 200_000)
        assert min(took) < 1.0, took
        q = [[1_200_005 - W + 1, 1_200_005], [1_200_001, 1_200_005], [1_199_990, 1_199_999]]
        before = adm.post(f"/streams/{sid}/ranges", json={"ranges": q, "log": False}).json()["estimates"]
        srv.stop()
        srv.start()
        assert adm.post(f"/streams/{sid}/ranges", json={"ranges": q, "log": False}).json()["estimates"] == before
        assert post_counts(adm, sid, [1])["t"] == 1_200_006


@pytest.mark.slow
def test_finding8_many_small_writes_keep_few_parts(backend: str, tmp_path: Path) -> None:
    """One part per write would leave a restart reading a row per step: every 256 parts, a
    write replaces them by one part holding the window (amortised O(window / 256) a write)."""
    from privpub.service._streams import PARTS_COMPACT

    with _own_server(backend, tmp_path) as srv, admin_client(srv) as adm:
        s = create_stream(adm, publisher="hq_rtp", epsilon=1.0, window=4096, history=[50] * 10)
        sid = s["id"]
        for i in range(PARTS_COMPACT + 40):
            post_counts(adm, sid, [i % 5, 1])
        engine = make_engine(srv.db, pool_size=1)
        try:
            with engine.connect() as conn:
                n = conn.execute(sa.text("SELECT count(*) FROM stream_parts WHERE stream_id = :i"),
                                 {"i": sid}).scalar_one()
        finally:
            engine.dispose()
        assert n <= 41, n
        t = 2 * (PARTS_COMPACT + 40)
        q = [[1, t], [t, t], [100, 300], [t - 50, t - 1]]
        before = adm.post(f"/streams/{sid}/ranges", json={"ranges": q, "log": False}).json()["estimates"]
        srv.stop()
        srv.start()
        assert adm.post(f"/streams/{sid}/ranges", json={"ranges": q, "log": False}).json()["estimates"] == before


def test_finding8_a_database_of_the_older_privpub_opens(backend: str, tmp_path: Path) -> None:
    """A stream written by the older privpub (the whole state in ``streams.state``, revision
    0003_streams) is converted by the migration: same released noise, same answers, and it goes on."""
    from privpub.service import upgrade
    from privpub.service._streams import pack_state

    gen = fresh_database(backend, tmp_path)
    url = next(gen)
    try:
        assert upgrade(url, "0003_streams") == "0003_streams"
        lib = make_publisher("hq_rtp", window=64, epsilon=1.0, rng=5, history=[10] * 5)
        lib.extend(np.arange(100) % 7)
        lib.query(90, 100)
        engine = make_engine(url, pool_size=1)
        try:
            with write_tx(engine) as conn:
                conn.execute(sa.text(
                    "INSERT INTO streams (id, name, method, params, epsilon, step_seconds, origin, late, horizon, "
                    "session, producer_token_hash, created_at, t, state, open_count, open_since, log_seq, true_total) "
                    "VALUES ('00000000000000aa', 'old', 'hq_rtp', '{\"window\": 64}', 1.0, NULL, NULL, 'reject', "
                    "NULL, NULL, :h, 0, 100, :s, 0, 0, 0, NULL)"),
                    {"h": b"\0" * 32, "s": pack_state(lib.state(checkpoint=False))})
        finally:
            engine.dispose()
        srv = Server(url, tmp_path / "server.log").start()
        try:
            with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as adm:
                q = [[39, 100], [100, 100], [50, 60]]
                got = adm.post("/streams/00000000000000aa/ranges", json={"ranges": q, "log": False}).json()
                assert got["estimates"] == lib.answer(q, record=False).tolist()
                status = adm.get("/streams/00000000000000aa").json()
                assert status["queries_from"] == "anyone" and status["closed_at"] is None
                # it goes on: new steps get fresh noise (a restored stream never reuses a seed)
                assert post_counts(adm, "00000000000000aa", [3, 4])["t"] == 102
                got = adm.post("/streams/00000000000000aa/ranges", json={"ranges": q, "log": False}).json()
                assert got["estimates"] == lib.answer(q, record=False).tolist()
                assert adm.get("/streams/00000000000000aa/range", params={"start": 101, "end": 102}).status_code == 200
        finally:
            srv.stop()
    finally:
        gen.close()

# --- campaigns: findings 1, 5, 9 ---

CATS16 = [f"c{i:02d}" for i in range(16)]


def _kdght(admin: httpx.Client, **extra: object) -> dict[str, object]:
    spec: dict[str, object] = {"name": "kdght", "kind": "spatial", "method": "kdght", "epsilon": 1.0,
                               "bounds": [0, 0, 1, 1], "expected_participants": 2000, "min_reports": 1}
    spec.update(extra)
    return create(admin, **spec)


def _rid() -> str:
    return secrets.token_hex(16)


def _phase0_reports(admin: httpx.Client, cid: str) -> int:
    groups = admin.get(f"/campaigns/{cid}/status").json()["groups"]
    return sum(g["reports"] for g in groups if g["group"] in (0, 1))


def test_multiphase_campaigns_need_enrollment_or_an_explicit_opt_out(admin) -> None:
    spec = {"name": "k", "kind": "spatial", "method": "kdght", "epsilon": 1.0, "bounds": [0, 0, 1, 1],
            "expected_participants": 2000}
    r = admin.post("/campaigns", json=spec)
    assert r.status_code == 422 and r.json()["error"]["field"] == "enrollment"
    r = admin.post("/campaigns", json=dict(spec, allow_unenrolled_phases=True, assignment_ttl=7 * 86400))
    assert r.status_code == 422 and r.json()["error"]["field"] == "assignment_ttl"
    r = admin.post("/campaigns", json=dict(spec, kind="frequency", method=None, bounds=None,
                                           expected_participants=None, categories=["a", "b"],
                                           allow_unenrolled_phases=True))
    assert r.status_code == 422 and r.json()["error"]["field"] == "allow_unenrolled_phases"


def test_finding1_anonymous_takeover_of_phase0_is_refused(server, admin) -> None:
    # as reported: enrollment true and assignment_ttl 7 days; an anonymous client asks for 1000 places
    cfg = _kdght(admin, enrollment=True, assignment_ttl=7 * 86400)
    cid = cfg["id"]
    r = httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"count": 1000})
    assert r.status_code == 403 and r.json()["error"]["field"] == "token"
    r = httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"token": "x" * 32})
    assert r.status_code == 403 and r.json()["error"]["field"] == "token"
    tokens = admin.post(f"/campaigns/{cid}/tokens", json={"count": 60}).json()["tokens"]
    attacker, honest = tokens[0], tokens[1:]
    # one token holds at most one outstanding assignment: asking again replaces the earlier one
    got = [httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"token": attacker}).json()
           for _ in range(30)]
    assert all(len(g["assignments"]) == 1 for g in got)
    quota = sum(p["quota"] for p in cfg["phases"])  # phase 0: U'_x and U'_y
    assert quota == 100
    # honest participants still get places (30 requests by the attacker hold one place, not 30)
    res = Gateway(server.url, cid, rng=1).submit_many(np.random.default_rng(2).random((50, 2)), tokens=honest[:50])
    assert (res.new, res.rejected) == (50, [])
    # the attacker's 1000 fabricated reports on its assignment: one is stored, the rest refused
    last = got[-1]["assignments"][0]
    width = (max(cfg["phases"][0]["cells"], 2) + 7) // 8
    payload = base64.b64encode(bytes(width)).decode()
    codes = []
    for _ in range(1000 // 50):  # bounded: 20 batches of 50 reports
        body = {"report_ids": base64.b64encode(secrets.token_bytes(16 * 50)).decode(),
                "reports": base64.b64encode(bytes(width) * 50).decode(), "groups": [last["group"]] * 50,
                "assignments": [last["assignment"]] * 50, "tokens": [attacker] * 50}
        out = httpx.post(f"{server.url}/campaigns/{cid}/reports/batch", json=body, timeout=60).json()
        codes.append(out["new"])
    assert sum(codes) == 1
    assert _phase0_reports(admin, cid) == 51  # phase 0 (100 places) is not complete
    # an assignment serves only the token it was issued to
    a = httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"token": honest[50]}).json()["assignments"][0]
    r = httpx.post(f"{server.url}/campaigns/{cid}/reports", json={
        "report_id": _rid(), "report": payload, "group": a["group"], "assignment": a["assignment"],
        "token": honest[51]})
    assert r.status_code == 403 and r.json()["error"]["field"] == "assignment"
    r = httpx.post(f"{server.url}/campaigns/{cid}/reports", json={
        "report_id": _rid(), "report": payload, "group": a["group"], "assignment": a["assignment"],
        "token": honest[50]})
    assert r.status_code == 201
    # the SDK follows: a participant's device sends its token for the assignment and the report
    receipt = Participant(server.url, cid, token=honest[52], rng=4).submit((0.5, 0.5))
    assert receipt.received is not None and not receipt.queued
    assert _phase0_reports(admin, cid) == 53


def test_finding1_unenrolled_opt_out_gives_one_short_assignment_per_request(server, admin) -> None:
    cfg = _kdght(admin, allow_unenrolled_phases=True)
    cid = cfg["id"]
    assert cfg["enrollment"] is False and cfg["allow_unenrolled_phases"] is True
    r = httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"count": 1000})
    assert r.status_code == 403 and r.json()["error"]["field"] == "count"
    one = httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"count": 1}).json()
    assert len(one["assignments"]) == 1
    # the SDK follows: a participant without a token asks for one assignment
    receipt = Participant(server.url, cid, rng=3).submit((0.25, 0.75))
    assert receipt.received is not None and not receipt.queued
    # reports not tied to distinct assignments do not count towards a phase
    a = one["assignments"][0]
    width = (max(cfg["phases"][0]["cells"], 2) + 7) // 8
    body = {"report_ids": base64.b64encode(secrets.token_bytes(16 * 200)).decode(),
            "reports": base64.b64encode(bytes(width) * 200).decode(), "groups": [a["group"]] * 200,
            "assignments": [a["assignment"]] * 200}
    out = httpx.post(f"{server.url}/campaigns/{cid}/reports/batch", json=body, timeout=60).json()
    assert out["new"] == 1 and len(out["rejected"]) == 199
    assert _phase0_reports(admin, cid) == 2


def _post_batch(url: str, cid: str, payloads: np.ndarray, tokens: list[str] | None = None) -> dict[str, object]:
    n = payloads.shape[0]
    body: dict[str, object] = {"report_ids": base64.b64encode(secrets.token_bytes(16 * n)).decode(),
                               "reports": base64.b64encode(np.ascontiguousarray(payloads).tobytes()).decode()}
    if tokens is not None:
        body["tokens"] = tokens
    r = httpx.post(f"{url}/campaigns/{cid}/reports/batch", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("defense", ["none", "detect", "recover"])
def test_finding5_poisoned_oue_campaign(server, admin, defense) -> None:
    # 16 categories, epsilon 2, Zipf(1.1) truth; the target is the least popular category and 10%
    # of the reports are fakes naming only the target (the attack, at a smaller size)
    n, eps = 2500, 2.0
    cfg = create(admin, name=f"poison {defense}", kind="frequency", oracle="OUE", epsilon=eps, categories=CATS16,
                 min_reports=100, poisoning_defense=defense)
    w = 1.0 / np.arange(1, 17) ** 1.1
    values = np.random.default_rng(5).choice(16, size=n, p=w / w.sum())
    honest = OUE(domain_size=16).perturb(values, epsilon=eps, rng=6)
    fakes = fake_reports(OUE(domain_size=16), 15, n // 9, attack="target", epsilon=eps, rng=7)
    _post_batch(server.url, cfg["id"], honest)
    _post_batch(server.url, cfg["id"], fakes)
    rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
    pois = rel["poisoning"]
    assert pois["method"] == defense
    est = np.array([rel["normalised"][c] for c in CATS16])
    truth = np.bincount(values, minlength=16) / n
    gain = est[15] / est.sum() - truth[15]
    if defense != "none":  # the fakes shift the report sizes far from the honest law
        assert pois["group_p_value"] < 1e-10 and pois["group_flagged"] is True
    else:  # nothing is tested or set aside
        assert pois["suspected"] == 0 and pois["group_p_value"] is None
    if defense == "recover":
        # about n / 9 = 277 fakes attributed; their gain falls from ~0.2 to within noise (sd ~ 0.02)
        assert 150 <= pois["suspected"] <= 450, pois
        assert abs(gain) < 0.08, gain
        assert est[15] < np.sort(est)[-4]
    else:
        assert gain > 0.12  # no recovery: the fakes' gain stays
    if defense == "detect":
        # per report: an OUE report with 9 or more ones has probability below 1e-3 when honest
        assert pois["report_threshold"] is not None and 0 < pois["false_positive_rate"] <= 1e-3
    # the ledger does not claim one report per participant without enrollment
    notes = " ".join(e.get("note", "") for e in rel["ledger"])
    assert "per submission" in notes and "report each" not in notes


def test_poisoning_defense_from_campaign_yaml(server, tmp_path) -> None:
    spec = tmp_path / "campaign.yaml"
    spec.write_text("name: yaml\nkind: frequency\nepsilon: 2\noracle: SUE\ncategories: [a, b, c]\n"
                    "poisoning_defense: recover\n", encoding="utf-8")
    res = CliRunner().invoke(cli_app, ["campaign", "create", str(spec), "--url", server.url],
                             env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert res.exit_code == 0, res.output
    assert '"poisoning_defense": "recover"' in res.output
    spec.write_text("name: yaml\nkind: frequency\nepsilon: 2\ncategories: [a, b]\npoisoning_defense: loud\n",
                    encoding="utf-8")
    res = CliRunner().invoke(cli_app, ["campaign", "create", str(spec), "--url", server.url],
                             env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert res.exit_code == 2 and "poisoning_defense" in res.output


def test_finding5_twenty_thousand_reports_from_one_client_ledger_wording(server, admin) -> None:
    cfg = create(admin, name="one client", kind="frequency", oracle="GRR", epsilon=1.0, categories=["a", "b"],
                 min_reports=100)
    payloads = np.zeros((20_000, 4), dtype=np.uint8)  # GRR: uint32le value 0
    assert _post_batch(server.url, cfg["id"], payloads)["new"] == 20_000
    rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
    notes = " ".join(e.get("note", "") for e in rel["ledger"])
    assert "20000 reports, one epsilon-LDP report per submission" in notes
    assert "participants, one report each" not in notes and "report each" not in notes
    assert "cannot tell" in rel["privacy"]
    # GRR: a fake report is indistinguishable from an honest one; the release says so
    assert rel["poisoning"]["suspected"] == 0 and "enrollment" in rel["poisoning"]["note"]
    # with enrollment, the wording states one report each (the tokens enforce it)
    enr = create(admin, name="enrolled", kind="frequency", oracle="GRR", epsilon=1.0, categories=["a", "b"],
                 min_reports=10, enrollment=True)
    tokens = admin.post(f"/campaigns/{enr['id']}/tokens", json={"count": 12}).json()["tokens"]
    out = _post_batch(server.url, enr["id"], np.zeros((12, 4), dtype=np.uint8), tokens)
    assert out["new"] == 12
    again = _post_batch(server.url, enr["id"], np.zeros((12, 4), dtype=np.uint8), tokens)
    assert again["new"] == 0 and len(again["rejected"]) == 12
    rel = admin.post(f"/campaigns/{enr['id']}/releases").json()
    assert "12 reports, one epsilon-LDP report each" in " ".join(e.get("note", "") for e in rel["ledger"])


@pytest.mark.parametrize("kind", ["frequency", "spatial", "synth"])
def test_finding9_tiny_epsilon_is_a_4xx_naming_the_field(admin, kind) -> None:
    spec: dict[str, object] = {"name": "tiny", "kind": kind, "epsilon": 1e-300}
    if kind == "frequency":
        spec["categories"] = ["a", "b"]
    elif kind == "spatial":
        spec.update(method="ug", bounds=[0, 0, 1, 1], expected_participants=1000)
    else:
        spec["attributes"] = [{"name": "a", "categories": ["x", "y"]}, {"name": "b", "categories": ["u", "v"]}]
        spec["degree"] = 1
    r = admin.post("/campaigns", json=spec)
    assert 400 <= r.status_code < 500, r.text
    assert r.json()["error"]["field"] == "epsilon"


def test_finding9_batch_group_beyond_int64_is_a_4xx(server, admin) -> None:
    cfg = create(admin, name="g", kind="frequency", oracle="GRR", epsilon=1.0, categories=["a", "b"])
    body = {"report_ids": base64.b64encode(secrets.token_bytes(16)).decode(),
            "reports": base64.b64encode(bytes(4)).decode(), "groups": [2**70]}
    r = httpx.post(f"{server.url}/campaigns/{cfg['id']}/reports/batch", json=body)
    assert r.status_code == 422 and r.json()["error"]["field"].startswith("groups")


def test_finding9_release_csv_neutralises_formulas(server, admin) -> None:
    evil = ['=HYPERLINK("http://evil.example","x")', "+cmd", "-2+3+cmd|' /C calc'!A0", "@SUM(A1)", "plain"]
    cfg = create(admin, name="csv", kind="frequency", oracle="GRR", epsilon=1.0, categories=evil, min_reports=10)
    _post_batch(server.url, cfg["id"], np.zeros((20, 4), dtype=np.uint8))
    rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
    text = httpx.get(f"{server.url}/campaigns/{cfg['id']}/releases/{rel['id']}", params={"format": "csv"}).text
    cells = [row[0] for row in csv.reader(io.StringIO(text))][1:]
    assert cells == ["'" + c for c in evil[:4]] + ["plain"]
    assert rel["estimates"][evil[0]] is not None  # the JSON keeps the names as declared


def test_finding9_cli_release_csv_neutralises_formulas(server, admin, tmp_path) -> None:
    evil = ['=HYPERLINK("http://evil.example","x")', "@SUM(A1)", "plain"]
    cfg = create(admin, name="cli csv", kind="frequency", oracle="GRR", epsilon=1.0, categories=evil,
                 min_reports=10)
    _post_batch(server.url, cfg["id"], np.zeros((20, 4), dtype=np.uint8))
    out = tmp_path / "release.csv"
    res = CliRunner().invoke(cli_app, ["campaign", "release", cfg["id"], "--url", server.url, "-o", str(out)],
                             env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert res.exit_code == 0, res.output
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert rows[0] == ["category", "estimate", "normalised"]
    assert [r[0] for r in rows[1:]] == ["'" + evil[0], "'" + evil[1], "plain"]
    bad = CliRunner().invoke(cli_app, ["campaign", "release", cfg["id"], "--url", server.url, "-o",
                                       str(tmp_path / "x.txt")], env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert bad.exit_code == 2 and "error:" in bad.output


def test_campaigns_are_archived_by_delete(server, admin) -> None:
    cfg = create(admin, name="arch", kind="frequency", oracle="GRR", epsilon=1.0, categories=["a", "b"],
                 min_reports=10)
    cid = cfg["id"]
    _post_batch(server.url, cid, np.zeros((20, 4), dtype=np.uint8))
    rel = admin.post(f"/campaigns/{cid}/releases").json()
    assert httpx.delete(f"{server.url}/campaigns/{cid}").status_code == 401
    first = admin.delete(f"/campaigns/{cid}")
    assert first.status_code == 200 and first.json()["archived_at"] is not None
    assert admin.delete(f"/campaigns/{cid}").json()["archived_at"] == first.json()["archived_at"]
    r = httpx.post(f"{server.url}/campaigns/{cid}/reports",
                   json={"report_id": _rid(), "report": base64.b64encode(bytes(4)).decode()})
    assert r.status_code == 410
    body = {"report_ids": base64.b64encode(secrets.token_bytes(16)).decode(),
            "reports": base64.b64encode(bytes(4)).decode()}
    assert httpx.post(f"{server.url}/campaigns/{cid}/reports/batch", json=body).status_code == 410
    assert admin.post(f"/campaigns/{cid}/releases").status_code == 410
    # released data stays published
    assert httpx.get(f"{server.url}/campaigns/{cid}/releases/{rel['id']}").json()["id"] == rel["id"]
    assert admin.get(f"/campaigns/{cid}/status").json()["open"] is False
    # the CLI archives too (idempotent)
    res = CliRunner().invoke(cli_app, ["campaign", "archive", cid, "--url", server.url],
                             env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert res.exit_code == 0 and "archived" in res.output
    res = CliRunner().invoke(cli_app, ["campaign", "archive", "0" * 16, "--url", server.url],
                             env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert res.exit_code == 2 and "404" in res.output
