"""Bounded loopback load on a stream (issue 16): 32 producers post batches of timed events while 32
clients ask range queries and the service's clock closes steps; zero events lost or counted twice
(the producers' log against the non-private check endpoint, enabled only in tests). The full-size
run and its throughput and latency are ``benchmarks/stream_load.py`` and docs/benchmarks.md."""

from __future__ import annotations

import time

import httpx
from service_helpers import Server
from stream_helpers import admin_client, create_stream
from stream_loadgen import run_stream_load


def test_producers_and_queriers_lose_nothing(srv: Server) -> None:
    with admin_client(srv) as adm:
        s = create_stream(adm, publisher="hq_rtp", epsilon=1.0, window=4096, step_seconds=0.5, late="current",
                          origin=time.time() - 300.0, queries_from="anyone", log_per_client=10**6)
        sid = s["id"]
        deadline = time.monotonic() + 30
        while adm.get(f"/streams/{sid}").json()["t"] < 600 and time.monotonic() < deadline:
            time.sleep(0.1)
        t0 = adm.get(f"/streams/{sid}").json()["t"]
        assert t0 >= 600
        res = run_stream_load(srv.url, sid, s["producer_token"], producers=32, queriers=32, batches=6,
                              batch_size=1_000, query_range=(t0 - 500, t0), max_seconds=150)
        assert res.unfinished == 0 and res.query_errors == 0 and res.retries == 0
        assert res.acknowledged_events == 32 * 6 * 1_000
        assert res.latencies_ms.size > 100
        # every acknowledged event is counted exactly once (closed steps + the open step)
        chk: dict[str, int] = adm.get(f"/streams/{sid}/check").json()
        assert chk["true_total"] == res.acknowledged_events
        assert chk["batches"] == 32 * 6 and chk["items"] == res.acknowledged_events
        # the clock kept closing steps under load, and the past is still answerable
        assert chk["t"] > t0
        assert adm.get(f"/streams/{sid}/range", params={"start": t0 - 10, "end": t0}).status_code == 200
        log = adm.get(f"/streams/{sid}/log", params={"limit": 1}).json()
        assert log["queries_logged"] >= res.latencies_ms.size * 0.9
    # the check endpoint does not exist on a normal server
    assert httpx.get(f"{srv.url}/streams/{sid}/check").status_code in (401, 403)
