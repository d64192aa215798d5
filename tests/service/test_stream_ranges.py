"""``POST /streams/{id}/ranges``: many range queries in one request (issue 27), through a real
server on SQLite and PostgreSQL.

The batched endpoint answers from the same in-memory publisher as ``GET /streams/{id}/range``:
the same estimates, the same ``t``, the same bounds and refusals (a 4xx naming the field, nothing
logged), and the same authentication (anyone may ask; a reader's token makes the queries count
for the query log, a wrong token is simply anonymous).
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import numpy as np
import pytest
from service_helpers import Server
from stream_helpers import create_stream, post_counts

from privpub.service._stream_api import MAX_RANGES, RANGES_BODY


def _ranges(client: httpx.Client, sid: str, body: Any, **kw: Any) -> httpx.Response:
    return client.post(f"/streams/{sid}/ranges", json=body, **kw)


def _field(resp: httpx.Response, status: int) -> str:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert err["message"]
    return str(err["field"])


@pytest.mark.parametrize("publisher", ["rtp", "hq_rtp", "bt"])
def test_batched_answers_equal_single_queries(adm: httpx.Client, publisher: str) -> None:
    """Random ranges (unit ranges, the whole window, repeats) asked in one request get the
    estimates that one ``/range`` each gets, in order, at the same ``t``."""
    g = np.random.default_rng(27)
    s = create_stream(adm, publisher=publisher, epsilon=0.7, window=256, rng=2701)
    post_counts(adm, s["id"], g.integers(0, 40, size=300))
    lo = g.integers(300 - 255, 301, size=60)
    hi = np.minimum(300, lo + g.integers(0, 120, size=60))
    q = [[int(a), int(b)] for a, b in zip(lo, hi)] + [[300, 300], [45, 300], [45, 300], [100, 100]]
    resp = _ranges(adm, s["id"], {"ranges": q, "log": False})
    assert resp.status_code == 200, resp.text
    batch = resp.json()
    assert set(batch) == {"estimates", "t"} and batch["t"] == 300 and len(batch["estimates"]) == len(q)
    for (a, b), est in zip(q, batch["estimates"]):
        one = adm.get(f"/streams/{s['id']}/range", params={"start": a, "end": b})
        assert one.status_code == 200, one.text
        assert one.json()["estimate"] == est and one.json()["t"] == batch["t"], (a, b)
    # the same request again: the same answers (a query changes no released value)
    assert _ranges(adm, s["id"], {"ranges": q, "log": False}).json() == batch


def test_batched_ranges_bounds(adm: httpx.Client) -> None:
    """At most MAX_RANGES ranges (exactly that many are answered), at least one, and a body of at
    most RANGES_BODY bytes (413 beyond, before it is parsed)."""
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64)
    post_counts(adm, s["id"], np.arange(64))
    full = _ranges(adm, s["id"], {"ranges": [[1, 64]] * MAX_RANGES, "log": False})
    assert full.status_code == 200 and len(set(full.json()["estimates"])) == 1
    assert _field(_ranges(adm, s["id"], {"ranges": [[1, 64]] * (MAX_RANGES + 1)}), 422) == "ranges"
    assert _field(_ranges(adm, s["id"], {"ranges": []}), 422) == "ranges"
    big = b'{"ranges": [[1, 2]], "log": false' + b" " * RANGES_BODY + b"}"
    resp = adm.post(f"/streams/{s['id']}/ranges", content=big, headers={"Content-Type": "application/json"})
    assert resp.status_code == 413, resp.text


@pytest.mark.parametrize(("body", "field"), [
    ({"ranges": [[1, 2], [5, 3]]}, "ranges[1]"),  # reversed
    ({"ranges": [[1, 2], [2, 999]]}, "ranges[1]"),  # in the future
    ({"ranges": [[0, 2]]}, "start"),  # steps count from 1 (one range: the single query's field)
    ({"ranges": [[1, 2, 3]]}, "ranges.0"),  # not a pair
    ({"ranges": [["a", 2]]}, "ranges.0.0"),  # not an integer
    ({"ranges": [[1, 2**63]]}, "ranges.0.1"),  # beyond any step
    ({"ranges": [[1, 2]], "log": "maybe"}, "log"),
    ({"ranges": [[1, 2]], "extra": 1}, "extra"),
    ({"log": False}, "ranges"),  # missing
])
def test_batched_ranges_refusals_name_the_field(adm: httpx.Client, body: dict[str, Any], field: str) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64)
    post_counts(adm, s["id"], np.arange(10))
    assert _field(_ranges(adm, s["id"], body), 422) == field


def test_batched_ranges_refuse_non_json_and_unknown_streams(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64)
    resp = adm.post(f"/streams/{s['id']}/ranges", content=b"[[1, 2]]", headers={"Content-Type": "text/plain"})
    assert _field(resp, 415) == "Content-Type"
    assert _ranges(adm, "0" * 16, {"ranges": [[1, 1]]}).status_code == 404
    assert _ranges(adm, "not-an-id", {"ranges": [[1, 1]]}).status_code == 422
    resp = adm.post(f"/streams/{s['id']}/ranges", content=b'{"ranges": [[1,', headers={"Content-Type": "application/json"})
    assert resp.status_code == 422, resp.text


def _logged(adm: httpx.Client, sid: str, expect: int) -> int:
    """The stream's logged queries once the clock flushed ``expect`` of them (at most 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        n = int(adm.get(f"/streams/{sid}/log", params={"limit": 1}).json()["queries_logged"])
        if n >= expect or time.monotonic() > deadline:
            return n
        time.sleep(0.1)


def test_batched_ranges_authenticate_as_the_single_query(srv: Server, adm: httpx.Client) -> None:
    """Anyone may ask (no token, a wrong token, the producer token); only a reader's token (or the
    admin token) makes the queries count for a ``queries_from="readers"`` stream, in both
    endpoints alike."""
    s = create_stream(adm, publisher="hq_rtp", epsilon=1.0, window=64, queries_from="readers")
    sid = s["id"]
    post_counts(adm, sid, np.arange(20))
    q = [[1, 4], [3, 9], [10, 20]]
    for token in (None, "wrong-token", s["producer_token"]):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with httpx.Client(base_url=srv.url, timeout=60, headers=headers) as anon:
            batch = _ranges(anon, sid, {"ranges": q})
            single = anon.get(f"/streams/{sid}/range", params={"start": 1, "end": 4})
        assert batch.status_code == 200 and single.status_code == 200, (batch.text, single.text)
        assert batch.json()["estimates"][0] == single.json()["estimate"]
    time.sleep(0.5)  # two clock ticks: anything buffered would be flushed by now
    assert _logged(adm, sid, 0) == 0
    with httpx.Client(base_url=srv.url, timeout=60, headers={"Authorization": f"Bearer {s['reader_token']}"}) as rd:
        assert _ranges(rd, sid, {"ranges": q}).status_code == 200
        assert _logged(adm, sid, len(q)) == len(q)
        assert rd.get(f"/streams/{sid}/range", params={"start": 1, "end": 4}).status_code == 200
        assert _logged(adm, sid, len(q) + 1) == len(q) + 1
        assert _ranges(rd, sid, {"ranges": q, "log": False}).status_code == 200  # answered, not logged
    time.sleep(0.5)
    assert _logged(adm, sid, len(q) + 1) == len(q) + 1
