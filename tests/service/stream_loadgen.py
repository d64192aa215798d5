"""A bounded load generator for the streams of the service (loopback only; stops by itself).

``producers`` threads post batches of timed events (stamped with the current time) to one stream,
each batch under its own batch id, resent with the same id until it gets a 200 or the deadline
passes; every producer logs the events of each acknowledged batch (a duplicate acknowledgement
counts too: the batch was counted once). Meanwhile ``queriers`` threads ask random range queries
and log their latencies. The threads run in ``processes`` forked processes over keep-alive
``http.client`` connections. Used by ``tests/service/test_stream_load.py`` and
``benchmarks/stream_load.py``.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import threading
import time
import uuid
from dataclasses import dataclass
from urllib.parse import urlparse

import numpy as np

__all__ = ["StreamLoadResult", "run_stream_load"]


@dataclass
class StreamLoadResult:
    acknowledged_events: int  # events of the batches that got a 200 (the producers' log)
    batches: int
    retries: int
    unfinished: int  # batches that never got an answer before the deadline
    ingest_seconds: float  # first batch sent to last batch acknowledged
    latencies_ms: np.ndarray  # one per answered query
    query_errors: int

    @property
    def events_per_second(self) -> float:
        return self.acknowledged_events / max(self.ingest_seconds, 1e-9)

    def p(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms.size else float("nan")


def _conn(url: str) -> http.client.HTTPConnection:
    u = urlparse(url)
    assert u.hostname in ("127.0.0.1", "localhost", "::1"), "load tests target loopback only"
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60)


def _request(box: list[http.client.HTTPConnection], url: str, method: str, path: str, body: bytes | None,
             headers: dict[str, str]) -> tuple[int | None, bytes]:
    try:
        box[0].request(method, path, body=body, headers=headers)
        resp = box[0].getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException):
        box[0].close()
        box[0] = _conn(url)
        return None, b""


def _producer(url: str, sid: str, token: str, batches: int, batch_size: int, deadline: float,
              interval: float, out: list[tuple[int, int, int, int, float, float]]) -> None:
    box = [_conn(url)]
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    acked = retries = unfinished = 0
    first = last = 0.0
    start = time.monotonic() + interval * np.random.default_rng().random()  # spread the producers
    for i in range(batches):
        if interval:
            wait = start + i * interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        bid = uuid.uuid4().hex
        while True:
            now = time.time()
            body = json.dumps({"batch_id": bid, "times": [now] * batch_size}).encode()
            if not first:
                first = time.monotonic()
            status, _ = _request(box, url, "POST", f"/streams/{sid}/events", body, headers)
            if status == 200:
                acked += batch_size
                last = time.monotonic()
                break
            if time.monotonic() > deadline:
                unfinished += 1
                break
            retries += 1
            time.sleep(0.05)
    box[0].close()
    out.append((acked, batches, retries, unfinished, first, last))


def _querier(url: str, sid: str, lo: int, hi: int, stop: threading.Event, seed: int, interval: float,
             lat: list[float], errors: list[int]) -> None:
    box = [_conn(url)]
    g = np.random.default_rng(seed)
    n_err = 0
    start = time.monotonic() + interval * g.random()
    i = 0
    while not stop.is_set():
        if interval:
            wait = start + i * interval - time.monotonic()
            i += 1
            if wait > 0:
                time.sleep(wait)
        a, b = sorted(int(x) for x in g.integers(lo, hi + 1, size=2))
        t0 = time.perf_counter()
        status, _ = _request(box, url, "GET", f"/streams/{sid}/range?start={a}&end={b}", None, {})
        if status == 200:
            lat.append((time.perf_counter() - t0) * 1000.0)
        else:
            n_err += 1
    box[0].close()
    errors.append(n_err)


def _worker(url: str, sid: str, token: str, n_prod: int, n_query: int, batches: int, batch_size: int,
            interval: float, q_interval: float, lo: int, hi: int, max_seconds: float, seed: int,
            queue: mp.Queue) -> None:  # type: ignore[type-arg]
    deadline = time.monotonic() + max_seconds
    prod_out: list[tuple[int, int, int, int, float, float]] = []
    lat: list[float] = []
    errors: list[int] = []
    stop = threading.Event()
    prods = [threading.Thread(target=_producer, args=(url, sid, token, batches, batch_size, deadline, interval,
                                                            prod_out))
             for _ in range(n_prod)]
    queries = [threading.Thread(target=_querier, args=(url, sid, lo, hi, stop, seed * 1000 + i, q_interval, lat,
                                                          errors))
               for i in range(n_query)]
    for th in queries + prods:
        th.start()
    for th in prods:
        th.join()
    stop.set()
    for th in queries:
        th.join()
    # monotonic clocks are system-wide on Linux: first/last compare across processes
    queue.put((prod_out, lat, sum(errors)))


def run_stream_load(url: str, sid: str, token: str, *, producers: int = 32, queriers: int = 32,
                    batches: int = 8, batch_size: int = 2_000, query_range: tuple[int, int],
                    rate: float | None = None, query_rate: float | None = None, processes: int = 2,
                    max_seconds: float = 120.0) -> StreamLoadResult:
    """Run the load (see the module doc); returns the producers' log and the query latencies.

    ``rate`` (events per second, all producers together) paces the producers and ``query_rate``
    (queries per second, per querier) the queriers; None: as fast as the service answers.
    """
    interval = 0.0 if rate is None else batch_size * producers / rate
    q_interval = 0.0 if query_rate is None else 1.0 / query_rate
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = []
    for p in range(processes):
        n_prod = producers // processes + (p < producers % processes)
        n_query = queriers // processes + (p < queriers % processes)
        procs.append(ctx.Process(target=_worker, args=(url, sid, token, n_prod, n_query, batches, batch_size,
                                                       interval, q_interval, query_range[0], query_range[1],
                                                       max_seconds,
                                                       p + 1, queue)))
    for pr in procs:
        pr.start()
    results = [queue.get(timeout=max_seconds + 120) for _ in procs]
    for pr in procs:
        pr.join(60)
    prod = [r for res in results for r in res[0]]
    lat = np.array([x for res in results for x in res[1]])
    firsts = [r[4] for r in prod if r[4]]
    lasts = [r[5] for r in prod if r[5]]
    return StreamLoadResult(
        acknowledged_events=sum(r[0] for r in prod), batches=sum(r[1] for r in prod),
        retries=sum(r[2] for r in prod), unfinished=sum(r[3] for r in prod),
        ingest_seconds=(max(lasts) - min(firsts)) if firsts and lasts else 0.0,
        latencies_ms=lat, query_errors=sum(res[2] for res in results))
