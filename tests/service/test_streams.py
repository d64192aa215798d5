"""The streams resource of ``privpub serve`` (issue 16) on SQLite and PostgreSQL, through a real
server process: equivalence with the library publishers, idempotent batches, timed events and the
clock, late events, bad input (4xx naming the field, nothing stored), budget sessions, the
operator's query log, producer tokens."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import numpy as np
import pytest
from service_helpers import Server
from stream_helpers import create_stream, post_counts, ranges

from privpub import Session
from privpub.errors import ParameterError
from privpub.service import database_session_store
from privpub.stream import PUBLISHERS, make_publisher


def _check(adm: httpx.Client, sid: str) -> dict[str, int]:
    resp = adm.get(f"/streams/{sid}/check")
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


#: every publisher in every measure it offers: (method, budget)
MEASURES = [(m, {"epsilon": 0.8} if measure == "pure-dp" else {"rho": 0.3})
            for m in sorted(PUBLISHERS) for measure in PUBLISHERS[m].measures]


@pytest.mark.parametrize(("method", "budget"), MEASURES, ids=[f"{m}-{next(iter(b))}" for m, b in MEASURES])
def test_answers_equal_the_library_publisher(adm: httpx.Client, method: str, budget: dict[str, float]) -> None:
    """Same counts, same seed, same queries in the same order: identical answers (HQ publishers
    learn the query lengths between batches exactly as the library does); the zCDP publishers
    (rho) as well, with their blocks of noise drawn once."""
    g = np.random.default_rng(11)
    counts = g.integers(0, 30, size=300)
    params: dict[str, Any] = {"window": 128}
    if method == "bth" and "epsilon" in budget:
        params["noise"] = "laplace"
    lib_params = dict(params)
    if method == "mf_sqrt":  # blocks shorter than the window: answers span two blocks' noise
        params["block_length"], lib_params["horizon"] = 50, 50
    if method == "blt":
        params["buffers"] = lib_params["buffers"] = 3
    s = create_stream(adm, publisher=method, rng=1234, **budget, **params)
    lib = make_publisher(method, rng=1234, **budget, **lib_params)
    assert s["publisher"] == method and s["t"] == 0
    zcdp = "rho" in budget
    assert s["measure"] == ("zcdp" if zcdp else "pure-dp")
    assert (s["rho"], s["epsilon"]) == ((0.3, None) if zcdp else (None, 0.8))
    assert ("rho-zCDP" in s["neighbouring"] and "rho = 0.3" in s["neighbouring"]) is zcdp
    pos = 0
    for size in (37, 1, 100, 62, 100):
        post_counts(adm, s["id"], counts[pos : pos + size])
        lib.extend(counts[pos : pos + size])
        pos += size
        for _ in range(5):
            r = int(g.integers(max(1, pos - 127), pos + 1))
            lo = int(g.integers(max(1, pos - 127), r + 1))
            resp = adm.get(f"/streams/{s['id']}/range", params={"start": lo, "end": r})
            assert resp.status_code == 200, resp.text
            body = resp.json()
            assert body["estimate"] == lib.query(lo, r)
            assert body["t"] == pos
    assert adm.get(f"/streams/{s['id']}").json()["t"] == 300
    # the noise is real: the answers are not the true sums
    got = ranges(adm, s["id"], [[t, t] for t in range(200, 301)], log=False)
    assert np.any(got != counts[199:300])
    # the standard deviations are the library's exact ones
    body = adm.get(f"/streams/{s['id']}/range", params={"start": 180, "end": 290}).json()
    assert body["std"] == pytest.approx(lib.answer_variance(180, 290) ** 0.5, rel=1e-12)
    # the ledger states the measure, and its total is the budget
    view = adm.get(f"/streams/{s['id']}/log").json()
    assert view["ledger_measure"] == lib.ledger.measure == s["measure"]
    assert {e["measure"] for e in view["ledger"]} == {s["measure"]}
    assert view["ledger_total"] == pytest.approx(lib.ledger.total) and lib.ledger.total <= next(iter(budget.values()))
    listed = next(x for x in adm.get("/streams").json()["streams"] if x["id"] == s["id"])
    assert (listed["measure"], listed["rho"], listed["epsilon"]) == (s["measure"], s["rho"], s["epsilon"])
    assert "rho (zCDP)" in adm.get(f"/streams/{s['id']}/dashboard").text if zcdp else True


def test_named_publishers_and_status(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="HQRTP", epsilon=1.0, window=4096)
    assert s["publisher"] == "hq_rtp" and s["t"] == 0 and "producer_token" in s
    status = adm.get(f"/streams/{s['id']}").json()
    assert "producer_token" not in status and status["t"] == 0
    assert "one event" in status["neighbouring"] and "epsilon = 1" in status["neighbouring"]
    assert any(x["id"] == s["id"] for x in adm.get("/streams").json()["streams"])


def test_batches_are_idempotent(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, rng=3)
    first = post_counts(adm, s["id"], [3, 4, 5], batch_id="batch-1")
    before = ranges(adm, s["id"], [[1, 3]], log=False)
    again = post_counts(adm, s["id"], [3, 4, 5], batch_id="batch-1")
    assert first["duplicate"] is False and again["duplicate"] is True and again["t"] == 3
    assert _check(adm, s["id"])["true_total"] == 12
    assert np.array_equal(ranges(adm, s["id"], [[1, 3]], log=False), before)
    # events too
    e = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, step_seconds=3600)
    body = {"batch_id": "ev-1", "times": [time.time()] * 5}
    assert adm.post(f"/streams/{e['id']}/events", json=body).json()["accepted"] == 5
    assert adm.post(f"/streams/{e['id']}/events", json=body).json()["duplicate"] is True
    assert _check(adm, e["id"])["open_count"] == 5


def test_clock_closes_steps_and_late_events(adm: httpx.Client) -> None:
    now = time.time()
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, step_seconds=1.0, origin=now - 4.5, rng=5)
    sid = s["id"]
    # the clock closes the four finished steps
    deadline = time.monotonic() + 10
    while adm.get(f"/streams/{sid}").json()["t"] < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = adm.get(f"/streams/{sid}").json()["t"]
    assert t0 >= 4
    # a late event (step 1, closed) is refused naming it, and nothing is stored
    late = adm.post(f"/streams/{sid}/events", json={"batch_id": "late", "times": [time.time(), now - 4.0]})
    assert late.status_code == 422 and late.json()["error"]["field"] == "times[1]"
    assert "closed" in late.json()["error"]["message"]
    # events of the open step are counted when it closes
    t_now = time.time()
    ok = adm.post(f"/streams/{sid}/events", json={"batch_id": "now", "times": [t_now] * 7})
    assert ok.status_code == 200, ok.text
    step = int((t_now - (now - 4.5)) // 1.0) + 1
    while adm.get(f"/streams/{sid}").json()["t"] < step and time.monotonic() < deadline + 10:
        time.sleep(0.05)
    chk = _check(adm, sid)
    assert chk["true_total"] == 7 and chk["t"] >= step
    # a future event is refused
    fut = adm.post(f"/streams/{sid}/events", json={"batch_id": "fut", "time": time.time() + 60})
    assert fut.status_code == 422 and fut.json()["error"]["field"] == "times[0]"
    # late='current': a late event counts in the open step
    c = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, step_seconds=3600.0, origin=now - 7300,
                      late="current")
    while adm.get(f"/streams/{c['id']}").json()["t"] < 2 and time.monotonic() < deadline + 20:
        time.sleep(0.05)
    r = adm.post(f"/streams/{c['id']}/events", json={"batch_id": "x", "times": [now - 7000, time.time()]})
    assert r.status_code == 200 and r.json()["accepted"] == 2
    assert _check(adm, c["id"])["open_count"] == 2


def test_manual_steps_close_explicitly(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=16, height=1, rng=9)
    sid = s["id"]
    t0 = time.time()
    assert adm.post(f"/streams/{sid}/events", json={"batch_id": "a", "times": [t0, t0]}).status_code == 200
    assert adm.get(f"/streams/{sid}").json()["t"] == 0
    # counts cannot be appended while the open step holds events
    busy = adm.post(f"/streams/{sid}/counts", json={"counts": [1], "batch_id": "c"})
    assert busy.status_code == 409
    assert adm.post(f"/streams/{sid}/close-step", json={"t": 1}).json()["t"] == 1
    lib = make_publisher("rtp", window=16, epsilon=1.0, height=1, rng=9)
    lib.append(2)
    assert adm.get(f"/streams/{sid}/range", params={"start": 1, "end": 1}).json()["estimate"] == lib.query(1, 1)
    # an event older than the open step is late
    old = adm.post(f"/streams/{sid}/events", json={"batch_id": "b", "time": t0 - 100})
    assert old.status_code == 422 and old.json()["error"]["field"] == "times[0]"
    # a clocked stream refuses counts and explicit closing
    c = create_stream(adm, publisher="rtp", epsilon=1.0, window=16, step_seconds=60)
    assert adm.post(f"/streams/{c['id']}/counts", json={"counts": [1], "batch_id": "c"}).status_code == 409
    assert adm.post(f"/streams/{c['id']}/close-step", json={"t": 1}).status_code == 409


def test_horizon(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="bt", epsilon=1.0, window=16, horizon=5)
    post_counts(adm, s["id"], [1, 2, 3])
    r = adm.post(f"/streams/{s['id']}/counts", json={"counts": [1, 1, 1], "batch_id": "over"})
    assert r.status_code == 409 and "horizon" in r.json()["error"]["message"]
    assert _check(adm, s["id"])["t"] == 3


BAD_CREATE = [
    ({"publisher": "nope"}, "publisher"),
    ({"epsilon": 0}, "epsilon"),
    ({"epsilon": -1}, "epsilon"),
    ({"window": 0}, "window"),
    ({"window": 2**21}, "window"),
    ({"noise": "gauss"}, "noise"),
    ({"colour": "red"}, "colour"),
    ({"history": [3, 4]}, "history"),  # rtp is not adaptive
    ({"height": 0}, "height"),
    ({"step_seconds": -1}, "step_seconds"),
    ({"late": "sometimes"}, "late"),
    ({"real": True}, "noise"),  # real streams need Laplace noise: the library error's param names the field
    ({"rho": 0.5}, "rho"),  # rtp is pure DP
    ({"publisher": "mf_sqrt"}, "epsilon"),  # a zCDP publisher: rho, not epsilon
    ({"publisher": "mf_sqrt", "epsilon": None}, "rho"),
    ({"publisher": "mf_sqrt", "epsilon": None, "rho": 0.5, "height": 3}, "height"),
    ({"publisher": "blt", "epsilon": None, "rho": 0.5, "buffers": 9}, "buffers"),
    ({"publisher": "mf_sqrt", "epsilon": None, "rho": 1e-30}, "rho"),  # the noise scale
    ({"publisher": "bt", "rho": 0.5}, "rho"),  # exactly one of the two
    ({"publisher": "bt", "epsilon": None}, "epsilon"),
    ({"publisher": "bt", "epsilon": None, "rho": 0.5, "noise": "laplace"}, "noise"),
]


@pytest.mark.parametrize(("change", "field"), BAD_CREATE)
def test_bad_stream_declarations(adm: httpx.Client, change: dict, field: str | None) -> None:
    n = len(adm.get("/streams").json()["streams"])
    body = {k: v for k, v in {"name": "bad", "publisher": "rtp", "epsilon": 1.0, "window": 64, **change}.items()
            if v is not None}
    resp = adm.post("/streams", json=body)
    assert resp.status_code == 422, resp.text
    err = resp.json()["error"]
    if field is not None:
        assert err["field"] == field, err
    assert len(adm.get("/streams").json()["streams"]) == n


def test_bad_input_is_refused_and_nothing_is_stored(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=8, rng=2)
    sid = s["id"]
    post_counts(adm, sid, [1, 2, 3, 4], batch_id="good")
    before = (_check(adm, sid), ranges(adm, sid, [[1, 4]], log=False))

    def refused(resp: httpx.Response, status: int, field: str | None) -> None:
        assert resp.status_code == status, resp.text
        err = resp.json()["error"]
        assert err["message"]
        if field is not None:
            assert err["field"] == field, err

    counts = f"/streams/{sid}/counts"
    refused(adm.post(counts, json={"counts": [1, 2.5], "batch_id": "x1"}), 422, "counts[1]")
    refused(adm.post(counts, json={"counts": [1, -2], "batch_id": "x2"}), 422, "counts")
    refused(adm.post(counts, content=b'{"counts": [1, NaN], "batch_id": "x3"}',
                     headers={"content-type": "application/json"}), 422, "counts.1")
    refused(adm.post(counts, json={"counts": [], "batch_id": "x4"}), 422, "counts")
    refused(adm.post(counts, json={"counts": ["a"], "batch_id": "x5"}), 422, "counts.0")
    refused(adm.post(counts, json={"counts": [1]}), 422, "batch_id")
    refused(adm.post(counts, json={"counts": [1], "batch_id": "bad id with spaces"}), 422, "batch_id")
    events = f"/streams/{sid}/events"
    refused(adm.post(events, json={"batch_id": "e1"}), 422, "times")
    refused(adm.post(events, json={"batch_id": "e2", "times": [time.time(), None]}), 422, "times.1")
    refused(adm.post(events, json={"batch_id": "e3", "times": [-5.0]}), 422, "times[0]")
    rng_ = f"/streams/{sid}/range"
    refused(adm.get(rng_, params={"start": 3, "end": 2}), 422, "start")
    refused(adm.get(rng_, params={"start": 1, "end": 5}), 422, "end")
    refused(adm.get(rng_, params={"start": 0, "end": 2}), 422, "start")
    refused(adm.get(rng_, params={"start": "a", "end": 2}), 422, "start")
    refused(adm.get(rng_, params={"end": 2}), 422, "start")
    refused(adm.post(f"/streams/{sid}/ranges", json={"ranges": [[1, 2], [2, 9]]}), 422, "ranges[1]")
    # unknown stream
    refused(adm.get("/streams/0123456789abcdef"), 404, None)
    refused(adm.get("/streams/0123456789abcdef/range", params={"start": 1, "end": 1}), 404, None)
    refused(adm.post("/streams/0123456789abcdef/counts", json={"counts": [1], "batch_id": "z"}), 404, None)
    refused(adm.get("/streams/not-an-id"), 422, "stream_id")
    # nothing was stored
    after = (_check(adm, sid), ranges(adm, sid, [[1, 4]], log=False))
    assert after[0] == before[0] and np.array_equal(after[1], before[1])


def test_window_of_the_past(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=8)
    post_counts(adm, s["id"], np.ones(20, dtype=int))
    r = adm.get(f"/streams/{s['id']}/range", params={"start": 5, "end": 15})
    assert r.status_code == 422 and r.json()["error"]["field"] == "start" and "window" in r.json()["error"]["message"]
    assert adm.get(f"/streams/{s['id']}").json()["answerable"] == [13, 20]


def test_producer_tokens(srv: Server, adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=8)
    other = create_stream(adm, publisher="rtp", epsilon=1.0, window=8)
    url = f"{srv.url}/streams/{s['id']}/counts"
    body = {"counts": [1], "batch_id": uuid.uuid4().hex}
    assert httpx.post(url, json=body).status_code == 401
    assert httpx.post(url, json=body, headers={"Authorization": f"Bearer {other['producer_token']}"}).status_code == 403
    assert httpx.post(url, json=body, headers={"Authorization": f"Bearer {s['producer_token']}"}).status_code == 200
    # creating and the operator's log need the admin token; queries are public
    assert httpx.post(f"{srv.url}/streams", json={"name": "x", "publisher": "rtp", "epsilon": 1,
                                                  "window": 8}).status_code == 401
    assert httpx.get(f"{srv.url}/streams/{s['id']}/log").status_code == 401
    assert httpx.get(f"{srv.url}/streams/{s['id']}/range", params={"start": 1, "end": 1}).status_code == 200


def test_budget_session_is_charged_and_refuses(srv: Server, adm: httpx.Client) -> None:
    name = "streams-" + uuid.uuid4().hex[:8]
    session = Session(store=database_session_store(srv.db, total_epsilon=1.0, name=name))
    a = adm.post("/streams", json={"name": "a", "publisher": "rtp", "epsilon": 0.6, "window": 8, "session": name})
    assert a.status_code == 201, a.text
    assert session.spent == pytest.approx(0.6)
    n = len(adm.get("/streams").json()["streams"])
    b = adm.post("/streams", json={"name": "b", "publisher": "rtp", "epsilon": 0.6, "window": 8, "session": name})
    assert b.status_code == 409 and b.json()["error"]["field"] == "session"
    assert len(adm.get("/streams").json()["streams"]) == n
    assert session.spent == pytest.approx(0.6)
    missing = adm.post("/streams", json={"name": "c", "publisher": "rtp", "epsilon": 0.1, "window": 8,
                                         "session": "no-such-session"})
    assert missing.status_code == 422 and missing.json()["error"]["field"] == "session"
    # a zCDP stream is never charged to a pure-DP session's epsilons (nor converted: no rho is a pure-DP epsilon)
    roomy = "streams-" + uuid.uuid4().hex[:8]
    Session(store=database_session_store(srv.db, total_epsilon=100.0, name=roomy))
    for pub in ("mf_sqrt", "bt"):
        z = adm.post("/streams", json={"name": "z", "publisher": pub, "rho": 0.01, "window": 8, "session": roomy})
        assert z.status_code == 422 and z.json()["error"]["field"] == "session", z.text
        assert "never adds an epsilon to a rho" in z.json()["error"]["message"]
    assert len(adm.get("/streams").json()["streams"]) == n
    assert Session(store=database_session_store(srv.db, name=roomy)).spent == 0


def test_zcdp_stream_is_charged_to_a_zcdp_session(srv: Server, adm: httpx.Client) -> None:
    """A zCDP database session (migration 0008) pays for zCDP streams in rho and refuses epsilons."""
    name = "rho-" + uuid.uuid4().hex[:8]
    session = Session(store=database_session_store(srv.db, 0.5, name=name, measure="zcdp"))
    assert session.measure == "zcdp"
    a = adm.post("/streams", json={"name": "a", "publisher": "mf_sqrt", "rho": 0.3, "window": 8, "session": name})
    assert a.status_code == 201, a.text
    assert session.spent == pytest.approx(0.3)
    (charge,) = session.charges
    assert charge.epsilon == pytest.approx(0.3)  # the amount is a rho: the session's measure says so
    # the rest (0.2) cannot pay for another 0.3, and nothing is made
    n = len(adm.get("/streams").json()["streams"])
    b = adm.post("/streams", json={"name": "b", "publisher": "bt", "rho": 0.3, "window": 8, "session": name})
    assert b.status_code == 409 and b.json()["error"]["field"] == "session", b.text
    # a pure-DP stream's epsilon is never added to the session's rhos
    c = adm.post("/streams", json={"name": "c", "publisher": "rtp", "epsilon": 0.1, "window": 8, "session": name})
    assert c.status_code == 422 and c.json()["error"]["field"] == "session", c.text
    assert "never adds an epsilon to a rho" in c.json()["error"]["message"]
    assert len(adm.get("/streams").json()["streams"]) == n
    assert session.spent == pytest.approx(0.3)
    # reopening states the measure: a zCDP session is not reopened as pure DP, nor with another total
    with pytest.raises(ParameterError) as info:
        database_session_store(srv.db, name=name, measure="pure-dp")
    assert info.value.param == "measure"
    with pytest.raises(ParameterError) as info:
        database_session_store(srv.db, 0.7, name=name)
    assert info.value.param == "total_rho"


def test_query_log_and_heights_visible_to_the_operator(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="hq_rtp", epsilon=1.0, window=4096, height=3, rng=1)
    sid = s["id"]
    post_counts(adm, sid, np.ones(64, dtype=int))
    for _ in range(20):
        assert adm.get(f"/streams/{sid}/range", params={"start": 61, "end": 64}).status_code == 200
    post_counts(adm, sid, np.ones(64, dtype=int))
    view = adm.get(f"/streams/{sid}/log").json()
    assert view["queries_logged"] == 20
    assert {q["length"] for q in view["queries"]} == {4}
    assert view["predicted_length"] == pytest.approx(4.0)
    # the first tree used the default height, the trees opened after the queries height 1 (length 4)
    heights = [tr["height"] for tr in view["trees"]]
    assert heights[0] > 1 and heights[-1] == 1
    assert view["ledger_total"] == pytest.approx(1.0)
    # the series endpoint (dashboard) does not log
    assert adm.get(f"/streams/{sid}/series", params={"points": 50}).status_code == 200
    assert adm.get(f"/streams/{sid}/log").json()["queries_logged"] == 20


def test_state_keeps_no_raw_history(srv: Server, adm: httpx.Client) -> None:
    """Data minimisation after 10^5 steps: the database holds the released noise over the window,
    the open nodes' partial sums and batch ids, never the per-step counts."""
    import sqlalchemy as sa

    from privpub.service import make_engine
    from privpub.service._streams import unpack_state

    window = 256
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=window)
    g = np.random.default_rng(5)
    counts = g.integers(1000, 1_000_000, size=100_000)
    for a in range(0, counts.shape[0], 25_000):
        post_counts(adm, s["id"], counts[a : a + 25_000])
    assert adm.get(f"/streams/{s['id']}").json()["t"] == 100_000
    engine = make_engine(srv.db, pool_size=1)
    try:
        with engine.connect() as conn:
            row = conn.execute(sa.text("SELECT state FROM streams WHERE id = :i"), {"i": s["id"]}).one()
            n_batches = conn.execute(sa.text("SELECT count(*) FROM stream_batches WHERE stream_id = :i"),
                                     {"i": s["id"]}).scalar_one()
            blobs = [bytes(r[0]) for r in conn.execute(sa.text("SELECT state FROM streams"))]
            parts = [bytes(r[0]) for r in conn.execute(sa.text("SELECT data FROM stream_parts WHERE stream_id = :i"),
                                                       {"i": s["id"]})]
            blobs += [bytes(r[0]) for r in conn.execute(sa.text("SELECT data FROM stream_parts"))]
    finally:
        engine.dispose()
    assert n_batches == 4
    state = unpack_state(bytes(row[0]))
    # the head holds no array; the stored parts (state deltas) hold the released noise over the window
    assert not [v for v in state.values() if isinstance(v, np.ndarray)]
    arrays = [v for p in parts for v in unpack_state(p).values() if isinstance(v, np.ndarray)]
    assert 1 <= len(parts) <= 2 and max(a.size for a in arrays) <= 2 * window + 2
    # the open tree's raw partial sums: at most one per level
    assert len(state["open_tree"]["anchors"]) <= 12
    # no run of true counts is stored anywhere (as int64 or as text)
    blob = b"".join(blobs)
    for i in g.integers(0, counts.shape[0] - 3, size=50):
        assert counts[i : i + 3].astype("<i8").tobytes() not in blob
    # (single values are not checked: a released node of one item equals it when its noise is 0)


@pytest.mark.parametrize("method", ["rtp", "hq_rtp"])
def test_timed_events_equal_the_library_on_their_step_counts(adm: httpx.Client, method: str) -> None:
    """Events counted into steps (closed explicitly here) give the library's answers on the per-step counts."""
    s = create_stream(adm, publisher=method, epsilon=1.0, window=64, height=2, rng=77)
    lib = make_publisher(method, window=64, epsilon=1.0, height=2, rng=77)
    g = np.random.default_rng(8)
    for step in range(1, 41):
        n = int(g.integers(0, 6))
        if n:
            r = adm.post(f"/streams/{s['id']}/events", json={"batch_id": f"s{step}", "times": [time.time()] * n})
            assert r.status_code == 200 and r.json()["accepted"] == n
        assert adm.post(f"/streams/{s['id']}/close-step", json={"t": step}).json()["t"] == step
        lib.append(n)
        if step % 8 == 0:
            q = [[max(1, step - 7), step], [step, step]]
            got = [adm.get(f"/streams/{s['id']}/range", params={"start": a, "end": b}).json()["estimate"]
                   for a, b in q]
            assert got == [lib.query(a, b) for a, b in q]
