"""A stream served by ``privpub serve --workers 2``: whichever worker takes a request, every answer
about a released step is the same, ``t`` never goes back, and no batch is counted twice."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
from service_helpers import ADMIN_TOKEN, Server
from stream_helpers import CHECKS, create_stream


def test_two_workers_agree(db_url: str, tmp_path: Path) -> None:
    srv = Server(db_url, tmp_path / "server.log", workers=2, env=CHECKS).start()
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        with httpx.Client(base_url=srv.url, headers=headers, timeout=60) as adm:
            s = create_stream(adm, publisher="hq_rtp", epsilon=1.0, window=256, height=3,
                              queries_from="anyone")
        sid = s["id"]
        counts = np.random.default_rng(1).integers(0, 20, size=400)
        seen: dict[tuple[int, int], float] = {}
        last_t = 0
        for b in range(8):
            # a new connection per request: the kernel spreads them over both workers
            body = {"counts": counts[50 * b : 50 * b + 50].tolist(), "batch_id": f"b{b}"}
            for _ in range(2):  # the resend may reach the other worker: counted once
                r = httpx.post(f"{srv.url}/streams/{sid}/counts", json=body, headers=headers, timeout=60)
                assert r.status_code == 200, r.text
            t = 50 * (b + 1)
            for _ in range(6):
                q = [[max(1, t - 40), t], [max(1, t - 9), t - 5], [t, t]]
                r = httpx.post(f"{srv.url}/streams/{sid}/ranges", json={"ranges": q}, timeout=60)
                assert r.status_code == 200, r.text
                assert r.json()["t"] >= last_t
                last_t = r.json()["t"]
                for (lo, hi), est in zip(q, r.json()["estimates"]):
                    assert seen.setdefault((lo, hi), est) == est
                one = httpx.get(f"{srv.url}/streams/{sid}/range", params={"start": t, "end": t}, timeout=60)
                assert one.status_code == 200 and one.json()["estimate"] == seen[(t, t)]
        with httpx.Client(base_url=srv.url, headers=headers, timeout=60) as adm:
            chk = adm.get(f"/streams/{sid}/check").json()
            assert chk["true_total"] == int(counts.sum()) and chk["batches"] == 8 and chk["t"] == 400
            log = adm.get(f"/streams/{sid}/log").json()
            assert log["queries_logged"] > 0 and log["ledger_total"] <= 1.0
    finally:
        srv.stop()
