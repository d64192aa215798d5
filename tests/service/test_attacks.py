"""The service against hostile participants, producers and careless operators (issue 22): each
numbered finding reproduced as it was reported, against a real ``privpub serve`` on SQLite and on
PostgreSQL, asserting the new behaviour."""

from __future__ import annotations

import sqlite3
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
from service_helpers import ADMIN_TOKEN, Server, fresh_database
from stream_helpers import CHECKS, admin_client, create_stream, post_counts

from privpub.client import OfflineError, StreamProducer
from privpub.service import make_engine
from privpub.service._db import write_tx
from privpub.stream import make_publisher


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
