"""Crash safety of the streams (issue 16): SIGKILL the real ``privpub serve`` between steps, inside a
step and in the middle of a batch, restart it on the same database, and every answer about the past
is identical (a redrawn released node would change the unit answer of its step); no event is lost
or counted twice."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import numpy as np
from service_helpers import Server
from stream_helpers import CHECKS, admin_client, all_ranges, create_stream, post_counts, ranges, stream_server

from privpub.stream import make_publisher


def _answers(adm: httpx.Client, sid: str, window: int) -> tuple[int, np.ndarray, np.ndarray]:
    t = adm.get(f"/streams/{sid}").json()["t"]
    q = all_ranges(t, window)
    return t, q, ranges(adm, sid, q, log=False)


def _restart(srv: Server, log: Path) -> Server:
    srv.kill()
    return Server(srv.db, log, port=srv.port, env=CHECKS).start()


def test_sigkill_never_redraws_released_noise(db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    srv = stream_server(db_url, log).start()
    try:
        with admin_client(srv) as adm:
            g = np.random.default_rng(3)
            # the zCDP publishers too: a matrix factorisation's open block of noise (drawn once when
            # the block opens, before most of it is released) must come back exactly
            specs = {m: {"publisher": m, "epsilon": 1.0} for m in ("rtp", "hq_rtp", "hq_rtpmm", "bth")}
            specs.update({"mf_sqrt": {"publisher": "mf_sqrt", "rho": 0.5, "block_length": 200},
                          "blt": {"publisher": "blt", "rho": 0.5}, "bt-rho": {"publisher": "bt", "rho": 0.5}})
            streams = {m: create_stream(adm, window=512, rng=7, **spec)["id"] for m, spec in specs.items()}
            counts = g.integers(0, 50, size=700)
            for sid in streams.values():
                post_counts(adm, sid, counts[:300])
                for _ in range(10):  # queries the HQ publishers learn from
                    adm.get(f"/streams/{sid}/range", params={"start": 290, "end": 300})
                post_counts(adm, sid, counts[300:450])
            before = {m: _answers(adm, sid, 512) for m, sid in streams.items()}
            # the answers are noisy (not the true sums): equality below is not trivial
            t, q, a = before["rtp"]
            true = np.array([counts[lo - 1 : hi].sum() for lo, hi in q])
            assert np.any(a != true)
            # and a publisher that redraws its nodes (another rng, same counts) answers differently
            other = make_publisher("rtp", epsilon=1.0, window=512, rng=8)
            other.extend(counts[:450])
            assert np.any(other.answer(q, record=False) != a)
            # the zCDP streams hold an open block (450 = 2 x 200 + 50; blt: 450 of 512) whose noise
            # outlives the restart
            lib = make_publisher("mf_sqrt", rho=0.5, window=512, horizon=200, rng=7)
            lib.extend(counts[:450])
            # (the decoder's float sums depend on how the items were grouped into writes: the service
            # took 300 then 150, the library 450; both decode the same exact noisy vector)
            np.testing.assert_allclose(before["mf_sqrt"][2], lib.answer(before["mf_sqrt"][1], record=False),
                                       rtol=1e-12, atol=1e-9)

        # 1. between steps
        srv = _restart(srv, log)
        with admin_client(srv) as adm:
            for m, sid in streams.items():
                t, q, a = before[m]
                t2, q2, a2 = _answers(adm, sid, 512)
                assert t2 == t == 450 and np.array_equal(q2, q)
                assert np.array_equal(a2, a), m
            # the restored streams go on: new steps, old answers unchanged
            for sid in streams.values():
                post_counts(adm, sid, counts[450:500])
            mid = {m: _answers(adm, sid, 512) for m, sid in streams.items()}
            # the open block's noise survived: steps 451..500 (its later items) are what the library,
            # which never restarted, releases (later blocks draw from fresh OS entropy)
            lib.extend(counts[450:500])
            q = mid["mf_sqrt"][1]
            inside = q[:, 0] > 400
            np.testing.assert_allclose(mid["mf_sqrt"][2][inside], lib.answer(q[inside], record=False),
                                       rtol=1e-12, atol=1e-9)
            # ... and a redrawn block would be off by its noise (the tolerance above is not loose)
            other_mf = make_publisher("mf_sqrt", rho=0.5, window=512, horizon=200, rng=8)
            other_mf.extend(counts[:500])
            assert np.max(np.abs(other_mf.answer(q[inside], record=False) - mid["mf_sqrt"][2][inside])) > 1e-3
            # 2. inside a step: events of the open step of a manual and of a clocked stream
            manual = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, rng=1)["id"]
            post_counts(adm, manual, [5, 6, 7])
            clocked = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, step_seconds=3600)["id"]
            now = time.time()
            for sid in (manual, clocked):
                r = adm.post(f"/streams/{sid}/events", json={"batch_id": "open-1", "times": [now] * 9})
                assert r.status_code == 200, r.text
            man_before = ranges(adm, manual, [[1, 1], [2, 2], [3, 3], [1, 3]], log=False)

        srv = _restart(srv, log)
        with admin_client(srv) as adm:
            for m, sid in streams.items():
                assert np.array_equal(_answers(adm, sid, 512)[2], mid[m][2]), m
            for sid in (manual, clocked):
                chk = adm.get(f"/streams/{sid}/check").json()
                assert chk["open_count"] == 9
            # the resent batch is not counted again; the step closes with its 9 events
            r = adm.post(f"/streams/{manual}/events", json={"batch_id": "open-1", "times": [time.time()] * 9})
            assert r.json()["duplicate"] is True
            assert adm.post(f"/streams/{manual}/close-step", json={"t": 4}).json()["t"] == 4
            assert np.array_equal(ranges(adm, manual, [[1, 1], [2, 2], [3, 3], [1, 3]], log=False), man_before)
            assert adm.get(f"/streams/{manual}/check").json()["true_total"] == 5 + 6 + 7 + 9

            # 3. in the middle of a batch: the batch is all or nothing, and resending it counts it once
            sid = streams["rtp"]
            t0, q0, a0 = _answers(adm, sid, 512)
            big = g.integers(0, 50, size=150_000)
            done = threading.Event()

            def send() -> None:
                try:
                    adm.post(f"/streams/{sid}/counts", json={"counts": big.tolist(), "batch_id": "big"})
                except httpx.TransportError:
                    pass
                done.set()

            th = threading.Thread(target=send)
            th.start()
            time.sleep(0.25)
            srv.kill()
            th.join(60)
        srv = Server(srv.db, log, port=srv.port, env=CHECKS).start()
        with admin_client(srv) as adm:
            t1 = adm.get(f"/streams/{sid}").json()["t"]
            assert t1 in (t0, t0 + big.shape[0])
            if t1 == t0:  # the batch was lost whole: the answers about the past are unchanged
                assert np.array_equal(ranges(adm, sid, q0, log=False), a0)
            r = adm.post(f"/streams/{sid}/counts", json={"counts": big.tolist(), "batch_id": "big"})
            assert r.status_code == 200 and r.json()["t"] == t0 + big.shape[0]
            assert r.json()["duplicate"] is (t1 != t0)
            chk = adm.get(f"/streams/{sid}/check").json()
            assert chk["true_total"] == int(counts[:500].sum() + big.sum())
    finally:
        srv.stop()
