"""Load and fault tests against a real ``privpub serve`` on loopback (bounded; they stop by themselves).

Every report that got a receipt is stored exactly once, none is counted twice, and the running
aggregates (count and per-cell sums) equal what the clients' own logs say they sent. The full-size
run (64 clients, 200,000 single reports, 2,000,000 in batches) is ``benchmarks/service_load.py``;
its numbers are in docs/benchmarks.md.
"""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest
from loadgen import make_reports, run_load
from service_helpers import ADMIN_TOKEN, Server, create, fresh_database

from privpub.ldp import OUE
from privpub.service import Store, load_reports, make_engine

D = 16


def check_exactly_once(db: str, cid: str, ids: np.ndarray, payloads: np.ndarray, receipted: np.ndarray) -> None:
    """The stored reports are exactly the receipted ones; aggregates equal the clients' log."""
    engine = make_engine(db, pool_size=1)
    try:
        stored_ids, stored_payloads = load_reports(engine, cid)[0]
        with engine.connect() as conn:
            n, support = Store._sums(conn, cid)
    finally:
        engine.dispose()
    assert np.unique(receipted).size == receipted.size  # each client logged each report once
    stored = {bytes(r) for r in stored_ids}
    assert len(stored) == stored_ids.shape[0]  # no report stored twice
    assert stored == {bytes(r) for r in ids[receipted]}  # every receipted report is there, nothing else
    assert n[0] == receipted.size  # counted once each
    expected = OUE(domain_size=D).aggregate(payloads[receipted])
    assert support[0].tolist() == expected.tolist()  # per-cell sums
    assert OUE(domain_size=D).aggregate(stored_payloads).tolist() == expected.tolist()


def _campaign(server: Server) -> str:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as admin:
        return str(create(admin, name="load", kind="frequency", oracle="OUE", epsilon=1.0,
                          categories=[str(i) for i in range(D)], min_reports=1)["id"])


def test_concurrent_load_exactly_once(server, db_url) -> None:
    cid = _campaign(server)
    ids, payloads = make_reports(2_000 + 20_000, D, seed=1)
    single = run_load(server.url, cid, ids[:2_000], payloads[:2_000], mode="single", clients=16, max_seconds=300)
    batch = run_load(server.url, cid, ids[2_000:], payloads[2_000:], mode="batch", clients=4, batch_size=2_500,
                     max_seconds=300)
    assert single.unfinished == batch.unfinished == 0
    receipted = np.concatenate([single.receipted, batch.receipted + 2_000])
    check_exactly_once(db_url, cid, ids, payloads, receipted)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_sigkill_mid_load_loses_nothing(backend, tmp_path) -> None:
    """SIGKILL the server (all its workers) in the middle of the load, restart it on the same port:
    every receipted report is present exactly once; clients without a receipt resend and count once."""
    gen = fresh_database(backend, tmp_path)
    db = next(gen)
    server = Server(db, tmp_path / "server.log", workers=2).start()
    try:
        cid = _campaign(server)
        ids, payloads = make_reports(8_000 + 60_000, D, seed=2)
        results = {}

        def load(name: str, sl: slice, **kw: object) -> None:
            results[name] = run_load(server.url, cid, ids[sl], payloads[sl], max_seconds=240, **kw)

        threads = [threading.Thread(target=load, args=("single", slice(0, 8_000)), kwargs={"mode": "single",
                                                                                          "clients": 32}),
                   threading.Thread(target=load, args=("batch", slice(8_000, None)),
                                    kwargs={"mode": "batch", "clients": 4, "batch_size": 1_000})]
        for t in threads:
            t.start()
        # kill once a good part of the load has been stored, then restart
        engine = make_engine(db, pool_size=1)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                if Store._sums(conn, cid)[0].get(0, 0) >= 15_000:
                    break
            time.sleep(0.2)
        engine.dispose()
        server.kill()
        killed_at = time.monotonic()
        time.sleep(1.0)
        server.start()
        for t in threads:
            t.join(300)
        assert time.monotonic() - killed_at < 280
        single, batch = results["single"], results["batch"]
        assert single.unfinished == batch.unfinished == 0
        assert single.retries + batch.retries > 0  # the kill did interrupt requests
        receipted = np.concatenate([single.receipted, batch.receipted + 8_000])
        check_exactly_once(db, cid, ids, payloads, receipted)
    finally:
        server.stop()
        for _ in gen:
            pass
