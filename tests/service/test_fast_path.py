"""One way into each hot endpoint: ``FastPath`` and the framework routes answer alike.

The report and stream ingest endpoints (``privpub.service._endpoint.Endpoint``) are served by the
``FastPath`` middleware and by their documented FastAPI routes, through the same code. Two real
``privpub serve`` processes on loopback, one with the fast path and one without
(``PRIVPUB_FAST_PATHS=0``: every request goes through the framework's routing), over fresh
databases of the same backend, get the same requests in the same order; every answer (status,
body, ``WWW-Authenticate``) must be equal once ids and clocks are masked, and must be the status
the case expects (two equal 500s would not pass). And the application starts with no
``DeprecationWarning`` (its startup and shutdown are a lifespan handler).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_helpers import ADMIN_TOKEN, Server, create, fresh_database

# a case: (name, request made against one side, expected status)
Reply = tuple[int, Any, str | None]


@dataclass
class Side:
    """One server and what was created on it (same declarations on both sides)."""

    server: Server
    client: httpx.Client
    cid: str  # an OUE campaign with enrollment tokens
    tokens: list[str]
    sid: str  # a stream closed by POST counts (seeded: both sides release the same noise)
    esid: str  # a stream of timed events
    producer: str
    eproducer: str

    @property
    def masks(self) -> dict[str, str]:
        return {self.cid: "<campaign>", self.sid: "<stream>", self.esid: "<events-stream>"}


#: one origin for both sides' event streams (steps of an hour: the same step is open on both)
ORIGIN = float(int(time.time()) // 3600 * 3600)


def _side(server: Server) -> Side:
    admin = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60)
    with admin:
        cid = create(admin, name="fast path", kind="frequency", oracle="OUE", epsilon=1.0,
                     categories=[str(i) for i in range(16)], enrollment=True, min_reports=1)["id"]
        tokens = admin.post(f"/campaigns/{cid}/tokens", json={"count": 40}).json()["tokens"]
        stream = admin.post("/streams", json={"name": "counts", "publisher": "hq_rtp", "epsilon": 1.0,
                                              "window": 64, "rng": 7})
        events = admin.post("/streams", json={"name": "events", "publisher": "rtp", "epsilon": 1.0, "window": 64,
                                              "step_seconds": 3600, "origin": ORIGIN, "late": "current", "rng": 7})
        assert stream.status_code == events.status_code == 201, stream.text + events.text
    return Side(server, httpx.Client(base_url=server.url, timeout=60), str(cid), list(tokens),
                stream.json()["id"], events.json()["id"], stream.json()["producer_token"],
                events.json()["producer_token"])


@pytest.fixture(scope="module")
def sides(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    """The fast-path server and the framework-only server, each over its own fresh database."""
    made: list[Side] = []
    gens = []
    try:
        for fast in (True, False):
            tmp = tmp_path_factory.mktemp("fast" if fast else "framework")
            gen = fresh_database(backend, tmp)
            gens.append(gen)
            env = {} if fast else {"PRIVPUB_FAST_PATHS": "0"}
            server = Server(next(gen), tmp / "server.log", env=env).start()
            made.append(_side(server))
        yield made[0], made[1]
    finally:
        for side in made:
            side.client.close()
            side.server.stop()
        for gen in gens:
            for _ in gen:
                pass


def _mask(text: str, side: Side) -> Any:
    for value, name in side.masks.items():
        text = text.replace(value, name)
    body = json.loads(text) if text else None
    if isinstance(body, dict) and "received" in body:
        body["received"] = "<time>"  # the receipt's clock (rounded to the hour, but may differ)
    return body


def _reply(resp: httpx.Response, side: Side) -> Reply:
    return resp.status_code, _mask(resp.text, side), resp.headers.get("www-authenticate")


def _raw(side: Side, path: str, length: int, headers: dict[str, str], body: bytes = b"{") -> Reply:
    """POST announcing a ``Content-Length`` of ``length`` but sending only ``body`` (an oversized
    body is refused from its headers: nothing more need be sent)."""
    host, port = "127.0.0.1", side.server.port
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": f"{host}:{port}", "Content-Length": str(length),
                                                 "Connection": "close", **headers}.items())
    with socket.create_connection((host, port), timeout=60) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode("latin-1") + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head_raw, _, rest = data.partition(b"\r\n\r\n")
    lines = head_raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    n = int(fields.get("content-length", len(rest)))
    return status, _mask(rest[:n].decode(), side), fields.get("www-authenticate")


JSON = {"Content-Type": "application/json"}
RID = ["%032x" % (0xFA57 * 2**64 + i) for i in range(8)]
OUE = base64.b64encode(b"\x01\x00").decode()  # one category's bit: a valid 16-category OUE report
OUE2 = base64.b64encode(b"\x01\x00\x00\x80").decode()  # two of them, concatenated (a batch's reports)


def _ids(*rids: str) -> str:
    return base64.b64encode(b"".join(bytes.fromhex(r) for r in rids)).decode()


def _chunks(total: int) -> Iterator[bytes]:
    for _ in range(total // 65536):
        yield b" " * 65536


Case = tuple[str, Callable[[Side], Reply], int]


def _report_cases() -> list[Case]:
    def post(body: Any, **kw: Any) -> Callable[[Side], Reply]:
        def run(s: Side) -> Reply:
            content = body(s) if callable(body) else body
            return _reply(s.client.post(f"/campaigns/{s.cid}/reports", json=content, **kw), s)
        return run

    def valid(s: Side) -> dict[str, Any]:
        return {"report_id": RID[0], "report": OUE, "token": s.tokens[0]}

    return [
        ("valid", post(valid), 201),
        ("duplicate (idempotent retry)", post(valid), 200),
        ("valid, a stray Authorization header (the endpoint is public)",
         post(lambda s: {"report_id": RID[1], "report": OUE, "token": s.tokens[1]},
              headers={"Authorization": "Bearer not-a-token"}), 201),
        ("bad token (unknown enrollment token)", post({"report_id": RID[2], "report": OUE, "token": "f" * 32}), 403),
        ("missing token (the campaign needs one)", post({"report_id": RID[3], "report": OUE}), 422),
        ("invalid field", post(lambda s: {"report_id": "xyz", "report": OUE, "token": s.tokens[2]}), 422),
        ("invalid report for the campaign",
         post(lambda s: {"report_id": RID[4], "report": "AAAA", "token": s.tokens[2]}), 422),
        ("not JSON", lambda s: _reply(s.client.post(f"/campaigns/{s.cid}/reports", content=b"{report",
                                                    headers=JSON), s), 422),
        ("wrong content type", lambda s: _reply(s.client.post(
            f"/campaigns/{s.cid}/reports", content=b"report_id=1", headers={"Content-Type": "text/plain"}), s), 415),
        ("oversized body (announced)", lambda s: _raw(s, f"/campaigns/{s.cid}/reports", 300_000, JSON), 413),
        ("oversized body (chunked)", lambda s: _reply(s.client.post(
            f"/campaigns/{s.cid}/reports", content=_chunks(320 * 1024), headers=JSON), s), 413),
        ("unknown campaign", lambda s: _reply(s.client.post(
            f"/campaigns/{'0' * 16}/reports", json={"report_id": RID[5], "report": OUE}), s), 404),
    ]


def _batch_cases() -> list[Case]:
    def post(body: Any) -> Callable[[Side], Reply]:
        def run(s: Side) -> Reply:
            return _reply(s.client.post(f"/campaigns/{s.cid}/reports/batch",
                                        json=body(s) if callable(body) else body), s)
        return run

    def valid(s: Side) -> dict[str, Any]:
        return {"report_ids": _ids(RID[6], RID[7]), "reports": OUE2, "tokens": s.tokens[10:12]}

    return [
        ("valid", post(valid), 200),
        ("duplicate (idempotent retry)", post(valid), 200),
        ("bad token (unknown enrollment tokens are rejected one by one)",
         post(lambda s: {"report_ids": _ids(RID[0][::-1], RID[1][::-1]), "reports": OUE2,
                         "tokens": [s.tokens[12], "e" * 32]}), 200),
        ("missing token (the campaign needs one per report)",
         post({"report_ids": _ids(RID[2][::-1]), "reports": OUE}), 422),
        ("invalid field", post(lambda s: {"report_ids": "AAAA", "reports": OUE, "tokens": s.tokens[13:14]}), 422),
        ("wrong content type", lambda s: _reply(s.client.post(
            f"/campaigns/{s.cid}/reports/batch", content=b"<batch/>", headers={"Content-Type": "text/xml"}), s), 415),
        ("oversized body (announced)",
         lambda s: _raw(s, f"/campaigns/{s.cid}/reports/batch", 33 * 2**20, JSON), 413),
    ]


def _stream_cases(what: str) -> list[Case]:
    def post(body: Any, token: Callable[[Side], str | None] | None = None, **kw: Any) -> Callable[[Side], Reply]:
        def run(s: Side) -> Reply:
            sid, producer = (s.sid, s.producer) if what == "counts" else (s.esid, s.eproducer)
            tok = producer if token is None else token(s)
            headers = {"Authorization": f"Bearer {tok}"} if tok is not None else {}
            return _reply(s.client.post(f"/streams/{sid}/{what}", json=body, headers=headers, **kw), s)
        return run

    def sid(s: Side) -> str:
        return s.sid if what == "counts" else s.esid

    def producer(s: Side) -> dict[str, str]:
        return {**JSON, "Authorization": f"Bearer {s.producer if what == 'counts' else s.eproducer}"}

    now = time.time()
    valid = {"counts": [3, 1, 4, 1, 5], "batch_id": "one"} if what == "counts" else {
        "times": [now - 1.0, now - 2.0, ORIGIN - 10.0], "batch_id": "one"}  # the last: late, counted now
    invalid = {"counts": [1, True], "batch_id": "two"} if what == "counts" else {"time": -1.0, "batch_id": "two"}
    return [
        ("valid", post(valid), 200),
        ("duplicate (idempotent retry)", post(valid), 200),
        ("bad token", post(valid, token=lambda s: "p" * 43), 403),
        ("the admin token", post({**valid, "batch_id": "admin"}, token=lambda s: ADMIN_TOKEN), 200),
        ("missing token", post(valid, token=lambda s: None), 401),
        ("invalid field", post(invalid), 422),
        ("not JSON", lambda s: _reply(s.client.post(f"/streams/{sid(s)}/{what}", content=b"[1,",
                                                    headers=producer(s)), s), 422),
        ("wrong content type", lambda s: _reply(s.client.post(
            f"/streams/{sid(s)}/{what}", content=b"1,2,3", headers={**producer(s), "Content-Type": "text/csv"}), s),
         415),
        ("oversized body (announced)", lambda s: _raw(s, f"/streams/{sid(s)}/{what}", 33 * 2**20, producer(s)), 413),
        ("unknown stream (admin token)", lambda s: _reply(s.client.post(
            f"/streams/{'0' * 16}/{what}", json={**valid, "batch_id": "x"},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}), s), 404),
    ]


def _five_steps(s: Side) -> Reply:
    """Release steps 1..5 (once: batch "range" is a duplicate when the other range endpoint's cases,
    which may run in this worker before or after, posted it already)."""
    return _reply(s.client.post(f"/streams/{s.sid}/counts", json={"counts": [2, 7, 1, 8, 2], "batch_id": "range"},
                                headers={"Authorization": f"Bearer {s.producer}"}), s)


def _range_cases() -> list[Case]:
    def get(query: str, headers: Callable[[Side], dict[str, str]] | None = None,
            stream: Callable[[Side], str] | None = None) -> Callable[[Side], Reply]:
        def run(s: Side) -> Reply:
            sid = stream(s) if stream else s.sid
            return _reply(s.client.get(f"/streams/{sid}/range?{query}",
                                       headers=headers(s) if headers else None), s)
        return run

    return [
        ("five more steps released", _five_steps, 200),
        ("valid", get("start=1&end=5"), 200),
        ("again (a query changes nothing)", get("start=1&end=5"), 200),
        ("valid, the admin token (logged as a reader's)",
         get("start=2&end=3", headers=lambda s: {"Authorization": f"Bearer {ADMIN_TOKEN}"}), 200),
        ("bad token (answered as anonymous)", get("start=2&end=3", headers=lambda s: {"Authorization": "Bearer x"}),
         200),
        ("missing parameter", get("start=1"), 422),
        ("invalid field", get("start=1&end=x"), 422),
        ("out of range", get("start=1&end=99999999999999999999"), 422),
        ("unknown stream", get("start=1&end=2", stream=lambda s: "0" * 16), 404),
        ("bad stream id (the route's 422)", get("start=1&end=2", stream=lambda s: "nope"), 422),
    ]


def _ranges_cases() -> list[Case]:
    def post(body: Any, headers: Callable[[Side], dict[str, str]] | None = None,
             stream: Callable[[Side], str] | None = None, **kw: Any) -> Callable[[Side], Reply]:
        def run(s: Side) -> Reply:
            sid = stream(s) if stream else s.sid
            return _reply(s.client.post(f"/streams/{sid}/ranges", json=body,
                                        headers=headers(s) if headers else None, **kw), s)
        return run

    return [
        ("steps 1..5 released (whichever range endpoint runs first)", _five_steps, 200),
        ("valid", post({"ranges": [[1, 5], [2, 2], [3, 5]]}), 200),
        ("not logged", post({"ranges": [[1, 5]], "log": False}), 200),
        ("the admin token (a reader)", post({"ranges": [[2, 3]]}, headers=lambda s: {
            "Authorization": f"Bearer {ADMIN_TOKEN}"}), 200),
        ("bad token (answered as anonymous)", post({"ranges": [[2, 3]]},
                                                   headers=lambda s: {"Authorization": "Bearer x"}), 200),
        ("empty list", post({"ranges": []}), 422),
        ("too many", post({"ranges": [[1, 1]] * 10_001}), 422),
        ("reversed range", post({"ranges": [[1, 2], [4, 3]]}), 422),
        ("future range", post({"ranges": [[1, 2], [2, 10**6]]}), 422),
        ("not a pair", post({"ranges": [[1, 2, 3]]}), 422),
        ("not integers", post({"ranges": [["a", 2]]}), 422),
        ("unknown field", post({"ranges": [[1, 2]], "extra": 1}), 422),
        ("not JSON", post(None, content=b"[[1,2]]", headers=lambda s: {"Content-Type": "text/plain"}), 415),
        ("unknown stream", post({"ranges": [[1, 2]]}, stream=lambda s: "0" * 16), 404),
        ("bad stream id (the route's 422)", post({"ranges": [[1, 2]]}, stream=lambda s: "nope"), 422),
    ]


CASES = {"POST /campaigns/{id}/reports": _report_cases, "POST /campaigns/{id}/reports/batch": _batch_cases,
         "POST /streams/{id}/counts": lambda: _stream_cases("counts"),
         "POST /streams/{id}/events": lambda: _stream_cases("events"),
         "GET /streams/{id}/range": _range_cases, "POST /streams/{id}/ranges": _ranges_cases}


@pytest.mark.parametrize("endpoint", list(CASES))
def test_fast_path_and_route_answer_alike(sides: tuple[Side, Side], endpoint: str) -> None:
    """Every case in order on both servers: equal status, body and ``WWW-Authenticate``, and the
    status the case expects."""
    fast, framework = sides
    for name, case, status in CASES[endpoint]():
        got_fast, got_framework = case(fast), case(framework)
        assert got_fast == got_framework, f"{endpoint}, {name}: fast path {got_fast} != route {got_framework}"
        assert got_fast[0] == status, f"{endpoint}, {name}: {got_fast}"
        if status >= 400:
            # the service's error shape: FastAPI's "detail" list beside the "error" object (issue 24)
            assert isinstance(got_fast[1], dict) and set(got_fast[1]) == {"detail", "error"}, got_fast
            assert got_fast[1]["detail"] and all("loc" in d and "msg" in d for d in got_fast[1]["detail"])
            assert got_fast[1]["error"]["message"]


def test_fast_path_refusals_name_the_field(sides: tuple[Side, Side]) -> None:
    """The shared error bodies are the framework's: a validation error names the field."""
    fast, _ = sides
    resp = fast.client.post(f"/campaigns/{fast.cid}/reports", json={"report_id": "xyz", "report": OUE})
    assert resp.status_code == 422 and resp.json()["error"]["field"] == "report_id"
    resp = fast.client.get(f"/streams/{fast.sid}/range?start=1")
    assert resp.status_code == 422 and resp.json()["error"]["field"] == "end"


def _app(tmp: Path, **kw: Any) -> Any:
    from privpub.service._app import create_app

    return create_app(f"sqlite:///{tmp / 'app.db'}", admin_token="a" * 16 + "b" * 16 + "cdefghijkl", **kw)


def test_every_fast_path_endpoint_is_a_documented_route(tmp_path: Path) -> None:
    """``FastPath`` serves exactly the ``Endpoint``s whose routes document them, and only with
    ``fast_paths=True``."""
    from privpub.service._app import REPORT, REPORT_BATCH
    from privpub.service._endpoint import FastPath
    from privpub.service._stream_api import ENDPOINTS

    endpoints = [REPORT, REPORT_BATCH, *ENDPOINTS]
    app = _app(tmp_path)
    (fast,) = [m for m in app.user_middleware if m.cls is FastPath]
    assert list(fast.kwargs["endpoints"]) == endpoints
    schema = app.openapi()
    for ep in endpoints:
        operation = schema["paths"][ep.path][ep.method.lower()]
        if ep.body is not None:
            body = operation["requestBody"]["content"]["application/json"]["schema"]
            model = ep.body.model_json_schema()
            assert (set(body["properties"]), body["required"]) == (set(model["properties"]), model["required"])
        else:
            assert {p["name"] for p in operation["parameters"] if p["in"] == "query"} == {"start", "end"}
    (tmp_path / "framework").mkdir()
    framework_only = _app(tmp_path / "framework", fast_paths=False)
    assert not [m for m in framework_only.user_middleware if m.cls is FastPath]
    matcher = FastPath(None, app, endpoints)  # type: ignore[arg-type]
    assert matcher.match("POST", "/campaigns/0123456789abcdef/reports") == (REPORT, {"campaign_id": "0123456789abcdef"})
    assert matcher.match("POST", "/campaigns/0123456789abcdef/reports/batch")[0] is REPORT_BATCH  # type: ignore[index]
    assert matcher.match("GET", "/campaigns/0123456789abcdef/reports") is None
    assert matcher.match("POST", "/campaigns/0123456789ABCDEF/reports") is None  # the route's 422
    assert matcher.match("POST", "/streams/0123456789abcdef/range") is None


def test_startup_and_shutdown_raise_no_deprecation_warning(tmp_path: Path) -> None:
    """Warnings as errors: building the app and running its lifespan (startup, shutdown) warn nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        app = _app(tmp_path)

        async def cycle() -> None:
            async with app.router.lifespan_context(app):
                assert app.state.streams is not None

        asyncio.run(cycle())


def test_startup_freezes_the_objects_made_at_start(tmp_path: Path) -> None:
    """The lifespan moves the objects made at start out of the collector's generations
    (``gc.freeze``): the full collections under load then walk only what requests made (p99 of
    single reports 86-92 ms -> 8-9 ms in docs/benchmarks.md)."""
    import gc

    gc.unfreeze()
    app = _app(tmp_path)
    frozen: list[int] = []

    async def cycle() -> None:
        async with app.router.lifespan_context(app):
            frozen.append(gc.get_freeze_count())

    try:
        asyncio.run(cycle())
    finally:
        gc.unfreeze()
    assert frozen and frozen[0] > 10_000  # the modules, NumPy's and the framework's objects


def test_serve_starts_with_deprecation_warnings_as_errors(tmp_path: Path) -> None:
    """A real ``privpub serve`` whose workers turn every ``DeprecationWarning`` into an error."""
    server = Server(f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "server.log",
                    env={"PYTHONWARNINGS": "error::DeprecationWarning"}).start()
    try:
        assert httpx.get(f"{server.url}/health").json()["status"] == "ok"
    finally:
        server.stop()
    assert "DeprecationWarning" not in server.log()
