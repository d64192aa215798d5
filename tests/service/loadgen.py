"""A bounded load generator for the collection service (loopback only; stops by itself).

``P`` processes x ``T`` threads of clients send pre-made OUE reports of a frequency campaign, to
the single-report endpoint (one request per report) or the batch endpoint, over keep-alive
``http.client`` connections. Every client logs each report id it got a receipt for; a report that
got no receipt (connection refused or reset, 5xx) is sent again with the same id until it gets one
or the deadline passes. Used by ``tests/service/test_load.py`` and ``benchmarks/service_load.py``.
"""

from __future__ import annotations

import base64
import http.client
import json
import multiprocessing as mp
import os
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlparse

import numpy as np

__all__ = ["LoadResult", "make_reports", "run_load"]


def make_reports(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` distinct random report ids and OUE-shaped random packed payloads over ``d`` cells."""
    gen = np.random.default_rng(seed)
    ids = gen.integers(0, 256, size=(n, 16), dtype=np.uint8)
    ids[:, :8] = np.frombuffer(np.arange(n, dtype=">u8").tobytes(), dtype=np.uint8).reshape(n, 8)  # distinct
    bits = gen.random((n, d)) < 0.3
    return ids, np.packbits(bits, axis=1, bitorder="little")


@dataclass
class LoadResult:
    receipted: np.ndarray  # (k,) indices of the reports that got a receipt
    seconds: float
    requests: int
    retries: int
    unfinished: int


def _conn(url: str) -> http.client.HTTPConnection:
    u = urlparse(url)
    assert u.hostname in ("127.0.0.1", "localhost", "::1"), "load tests target loopback only"
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60)


def _post(conn_box: list[http.client.HTTPConnection], url: str, path: str, body: bytes) -> int | None:
    try:
        conn = conn_box[0]
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except (OSError, http.client.HTTPException):
        conn_box[0].close()
        conn_box[0] = _conn(url)
        return None


def _worker(url: str, cid: str, ids: np.ndarray, payloads: np.ndarray, idx: np.ndarray, mode: str,
            batch_size: int, deadline: float, out: list[object]) -> None:
    box = [_conn(url)]
    done: list[np.ndarray] = []
    requests = retries = 0
    path = f"/campaigns/{cid}/reports" + ("/batch" if mode == "batch" else "")
    step = batch_size if mode == "batch" else 1
    pos = 0
    while pos < idx.size and time.monotonic() < deadline:
        sel = idx[pos:pos + step]
        if mode == "batch":
            body = json.dumps({"report_ids": base64.b64encode(ids[sel].tobytes()).decode(),
                               "reports": base64.b64encode(payloads[sel].tobytes()).decode()}).encode()
        else:
            i = int(sel[0])
            body = json.dumps({"report_id": ids[i].tobytes().hex(),
                               "report": base64.b64encode(payloads[i].tobytes()).decode()}).encode()
        while time.monotonic() < deadline:
            requests += 1
            status = _post(box, url, path, body)
            if status is not None and status < 300:
                done.append(sel)
                break
            if status is not None and 400 <= status < 500:
                raise RuntimeError(f"the service refused a load report with {status}")
            retries += 1
            time.sleep(0.05 if status is None else 0.02)
        else:
            break
        pos += step
    box[0].close()
    unfinished = int(idx.size - sum(d.size for d in done))
    out.append((np.concatenate(done) if done else np.zeros(0, dtype=np.int64), requests, retries, unfinished))


def _process(url: str, cid: str, ids: np.ndarray, payloads: np.ndarray, idx: np.ndarray, threads: int, mode: str,
             batch_size: int, deadline: float, queue: mp.Queue) -> None:  # type: ignore[type-arg]
    out: list[object] = []
    parts = np.array_split(idx, threads)
    ts = [threading.Thread(target=_worker, args=(url, cid, ids, payloads, p, mode, batch_size, deadline, out))
          for p in parts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    queue.put(out)


def run_load(url: str, cid: str, ids: np.ndarray, payloads: np.ndarray, *, mode: str = "single",
             clients: int = 64, processes: int | None = None, batch_size: int = 10_000,
             max_seconds: float = 600.0) -> LoadResult:
    """Send every report once (retrying those without a receipt); returns what got receipts."""
    procs_n = processes or min(clients, max(1, (os.cpu_count() or 2)))
    threads = max(1, clients // procs_n)
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    if mode == "batch":  # whole batches are the unit of work
        order = np.arange(ids.shape[0])
        chunks = np.array_split(order, procs_n)
    else:
        chunks = np.array_split(np.arange(ids.shape[0]), procs_n)
    deadline = time.monotonic() + max_seconds
    start = time.perf_counter()
    procs = [ctx.Process(target=_process, args=(url, cid, ids, payloads, c, threads, mode, batch_size, deadline,
                                                queue)) for c in chunks]
    for p in procs:
        p.start()
    results = [queue.get(timeout=max_seconds + 120) for _ in procs]
    for p in procs:
        p.join(60)
    seconds = time.perf_counter() - start
    flat = [r for rs in results for r in rs]
    return LoadResult(np.concatenate([r[0] for r in flat]), seconds, sum(r[1] for r in flat),
                      sum(r[2] for r in flat), sum(r[3] for r in flat))
