"""The collection service's batch ingest against the database's own fastest load (issue 27).

For each backend, in one run, times the store's batch path (``Store.ingest``, what the ingest
thread of ``privpub serve`` runs for a batch: duplicate detection, the append, the running
aggregates, the commit; on PostgreSQL, batches of up to ``PG_INSERT_ROWS`` reports are inserted by
``INSERT ... SELECT`` statements in the transaction's two messages rather than a ``COPY``) and a
*reference* load of the same number of rows of the same
shape (the batch's payloads and groups, fresh report ids) into the same ``reports`` table, in one
transaction with its commit:

* PostgreSQL: one binary ``COPY reports (...) FROM STDIN (FORMAT BINARY)`` of a buffer built
  beforehand (the client's encoding is not timed);
* SQLite: one ``executemany`` of ``INSERT INTO reports VALUES (?, ?, ?, ?, ?)`` over a list of
  row tuples built beforehand.

The reference's rows are sorted by report id (the primary key), the order that loads fastest.

The two are run alternately (store, reference, reference, store, ...), so that the machine's load
hits both alike, over input families: batch sizes (default 1,000 / 10,000 / 50,000) x

* ``fresh``: no duplicates;
* ``resent10``: 10% of the reports resent (ids stored by an earlier batch), spread through the batch;
* ``resent100``: an earlier batch resent whole.

It prints, per family, the medians of wall and CPU time and the median of the per-pair ratios
``reference / store`` (1.0: the store ingests as fast as the database's bulk load; the issue's goal
is >= 0.7 on PostgreSQL and >= 0.8 on SQLite), and the ratio of the totals over all pairs
(``ratio_*_total``). On SQLite the commit that takes the WAL past its automatic checkpoint (1,000
pages) copies the WAL into the database; a batch of 1,000 into a large table writes most of that, so
the checkpoint lands on every other operation, and the per-pair ratios alternate between about 1.5
and 0.5: their median then falls on either cluster from one run to the next, while the ratio of the
totals does not. CPU time is this process's plus, on PostgreSQL,
the server backend's serving the connection (from ``/proc``, the server runs on this machine).
At the end it checks that every report was stored and counted once (aggregates and rows).

    python benchmarks/service_ingest.py --backend sqlite --backend postgresql \
        --postgres-url postgresql+psycopg://USER@127.0.0.1:PORT/postgres

Results are recorded in docs/benchmarks.md ("Collection service").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "service"))

from service_helpers import fresh_database  # noqa: E402

from privpub.service import Store, make_engine, upgrade  # noqa: E402
from privpub.service._db import write_tx  # noqa: E402
from privpub.service._specs import CampaignSpec  # noqa: E402
from privpub.service._store import Batch, Outcome  # noqa: E402

D = 16  # OUE over 16 categories: 2-byte payloads


def _backend_cpu(pid: int | None) -> float:
    """CPU seconds of a process on this machine (``/proc/PID/schedstat``: nanoseconds, not 10 ms ticks)."""
    if pid is None:
        return 0.0
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def make_batch(ids: np.ndarray, payloads: np.ndarray) -> Batch:
    """A batch as the batch endpoint builds it (one group)."""
    groups = np.zeros(ids.shape[0], dtype=np.int64)
    kwargs: dict[str, Any] = {"ids": ids, "groups": groups, "rows_by_group": {0: payloads}}
    if "payloads" in {f.name for f in dataclasses.fields(Batch)}:  # older privpub: a bytes object per row
        kwargs["payloads"] = [bytes(r) for r in payloads]
    return Batch(**kwargs)


def pg_copy_buffer(cid: str, ids: np.ndarray, payloads: np.ndarray, received: int) -> bytes:
    """PostgreSQL's binary COPY format of the rows (campaign_id, report_id, group_id, payload, received)."""
    n, w = payloads.shape
    c = cid.encode()
    row = np.dtype([("nf", ">i2"), ("lc", ">i4"), ("c", f"S{len(c)}"), ("li", ">i4"), ("id", "V16"),
                    ("lg", ">i4"), ("g", ">i4"), ("lp", ">i4"), ("p", f"V{w}"), ("lr", ">i4"), ("r", ">i8")])
    arr = np.zeros(n, dtype=row)
    arr["nf"], arr["lc"], arr["c"], arr["li"], arr["lg"], arr["lp"], arr["lr"] = 5, len(c), c, 16, 4, w, 8
    arr["id"] = np.ascontiguousarray(ids).view("V16").ravel()
    arr["p"] = np.ascontiguousarray(payloads).view(f"V{w}").ravel()
    arr["r"] = received
    return b"PGCOPY\n\xff\r\n\x00" + bytes(8) + arr.tobytes() + b"\xff\xff"


@dataclasses.dataclass
class Bench:
    backend: str
    url: str
    engine: sa.Engine
    store: Store
    cid: str  # the store's campaign
    ref_cid: str  # the reference loads' campaign (same table)
    pid: int | None  # PostgreSQL backend of the engine's one connection

    def timed(self, fn: Callable[[], Any]) -> tuple[float, float, Any]:
        c0, b0, t0 = time.process_time(), _backend_cpu(self.pid), time.perf_counter()
        out = fn()
        t1, c1, b1 = time.perf_counter(), time.process_time(), _backend_cpu(self.pid)
        return t1 - t0, (c1 - c0) + (b1 - b0), out

    def store_run(self, batch: Batch) -> Outcome:
        info = self.store.campaign(self.cid)
        if hasattr(self.store, "ingest"):
            return self.store.ingest(info, batch, int(time.time()))
        with write_tx(self.engine) as conn:  # older privpub: what its ingest thread ran
            return self.store.store_batch(conn, info, batch, int(time.time()))

    def ref_run(self, rows: Any) -> None:
        with write_tx(self.engine) as conn:
            raw = conn.connection.driver_connection
            if self.backend == "postgresql":
                with raw.cursor() as cur, cur.copy("COPY reports (campaign_id, report_id, group_id, payload, "
                                                   "received) FROM STDIN (FORMAT BINARY)") as cp:
                    cp.write(rows)
            else:
                raw.cursor().executemany("INSERT INTO reports (campaign_id, report_id, group_id, payload, "
                                         "received) VALUES (?, ?, ?, ?, ?)", rows)

    def ref_rows(self, ids: np.ndarray, payloads: np.ndarray) -> Any:
        t = int(time.time())
        if self.backend == "postgresql":
            return pg_copy_buffer(self.ref_cid, ids, payloads, t)
        return [(self.ref_cid, bytes(i), 0, bytes(p), t) for i, p in zip(ids, payloads, strict=True)]


def open_bench(backend: str, url: str) -> Bench:
    upgrade(url)
    engine = make_engine(url, pool_size=1)
    store = Store(engine)
    spec = {"name": "ingest", "kind": "frequency", "oracle": "OUE", "epsilon": 1.0,
            "categories": [str(i) for i in range(D)], "min_reports": 1}
    body = CampaignSpec.model_validate(spec).root.model_dump(mode="json")  # as POST /campaigns does
    cid, ref_cid = store.create_campaign(dict(body)).id, store.create_campaign(dict(body)).id
    pid = None
    if backend == "postgresql":
        with engine.connect() as conn:
            pid = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
    return Bench(backend, url, engine, store, cid, ref_cid, pid)


def run_backend(backend: str, url: str, sizes: list[int], repeats: int, rng: np.random.Generator
                ) -> Iterator[dict[str, Any]]:
    b = open_bench(backend, url)
    stored: list[np.ndarray] = []  # ids the store has stored
    expected_n = 0
    try:
        for n in sizes:
            fresh_batches: list[tuple[np.ndarray, np.ndarray]] = []
            for family in ("fresh", "resent10", "resent100"):
                walls: list[tuple[float, float]] = []
                cpus: list[tuple[float, float]] = []
                load0 = os.getloadavg()
                for r in range(repeats):
                    payloads = rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
                    ids = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
                    n_new = n
                    if family == "resent10":
                        k = n // 10
                        pool = np.concatenate(stored)
                        old = pool[rng.choice(pool.shape[0], size=k, replace=False)]
                        at = rng.choice(n, size=k, replace=False)
                        ids[at] = old
                        n_new = n - k
                    elif family == "resent100":
                        ids, payloads = fresh_batches[r % len(fresh_batches)]
                        n_new = 0
                    batch = make_batch(ids, payloads)
                    ref_ids = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
                    ref_ids = ref_ids[np.argsort(ref_ids.view("V16").ravel())]  # id order: the fastest to load
                    ref = b.ref_rows(ref_ids, payloads)
                    pair: dict[str, tuple[float, float]] = {}
                    for which in (("store", "ref") if r % 2 == 0 else ("ref", "store")):
                        if which == "store":
                            wall, cpu, out = b.timed(lambda batch=batch: b.store_run(batch))
                            if int((out.status == 0).sum()) != n_new:
                                raise SystemExit(f"{backend} {family} n={n}: {int((out.status == 0).sum())} "
                                                 f"new reports, expected {n_new}")
                        else:
                            wall, cpu, _ = b.timed(lambda ref=ref: b.ref_run(ref))
                        pair[which] = (wall, cpu)
                    walls.append((pair["store"][0], pair["ref"][0]))
                    cpus.append((pair["store"][1], pair["ref"][1]))
                    expected_n += n_new
                    if family == "fresh":
                        fresh_batches.append((ids, payloads))
                    if n_new:
                        stored.append(ids if family == "fresh" else ids[np.isin(
                            np.arange(n), at, invert=True)])
                load1 = os.getloadavg()
                yield {
                    "backend": backend, "batch": n, "family": family, "repeats": repeats,
                    "store_wall_ms": round(1e3 * statistics.median(s for s, _ in walls), 2),
                    "ref_wall_ms": round(1e3 * statistics.median(f for _, f in walls), 2),
                    "ratio_wall": round(statistics.median(f / s for s, f in walls), 3),
                    "store_cpu_ms": round(1e3 * statistics.median(s for s, _ in cpus), 2),
                    "ref_cpu_ms": round(1e3 * statistics.median(f for _, f in cpus), 2),
                    "ratio_cpu": round(statistics.median(f / max(s, 1e-9) for s, f in cpus), 3),
                    # the ratio of the totals: robust to a cost that lands on every other operation
                    # (SQLite's WAL checkpoint, see the module doc)
                    "ratio_wall_total": round(sum(f for _, f in walls) / sum(s for s, _ in walls), 3),
                    "ratio_cpu_total": round(sum(f for _, f in cpus) / max(sum(s for s, _ in cpus), 1e-9), 3),
                    "load_average": [round(load0[0], 2), round(load1[0], 2)],
                }
        check(b, expected_n)
    finally:
        b.engine.dispose()


def check(b: Bench, expected_n: int) -> None:
    """Every report stored once: the rows, the aggregates' count, and the time buckets agree."""
    from privpub.service._tables import aggregates, report_buckets, reports

    with b.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(reports)
                            .where(reports.c.campaign_id == b.cid)).scalar_one()
        agg = conn.execute(sa.select(sa.func.sum(aggregates.c.n)).where(aggregates.c.campaign_id == b.cid)
                           ).scalar_one()
        buckets = conn.execute(sa.select(sa.func.sum(report_buckets.c.n))
                               .where(report_buckets.c.campaign_id == b.cid)).scalar_one()
    if not rows == int(agg) == int(buckets) == expected_n:
        raise SystemExit(f"{b.backend}: stored {rows} rows, aggregates {agg}, buckets {buckets}, "
                         f"expected {expected_n}")
    print(json.dumps({"backend": b.backend, "check": "stored once", "reports": rows}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", action="append", choices=["sqlite", "postgresql"])
    parser.add_argument("--postgres-url", default=os.environ.get("PRIVPUB_TEST_POSTGRES_URL"))
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.postgres_url:
        os.environ["PRIVPUB_TEST_POSTGRES_URL"] = args.postgres_url
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(args.seed)
    import privpub

    print(json.dumps({"privpub": privpub.__file__, "cpus": os.cpu_count(), "load_average": os.getloadavg()}),
          flush=True)
    for backend in args.backend or ["sqlite", "postgresql"]:
        with tempfile.TemporaryDirectory(prefix="privpub-ingest-") as tmp:
            gen = fresh_database(backend, Path(tmp))
            url = next(gen)
            try:
                for line in run_backend(backend, url, sizes, args.repeats, rng):
                    print(json.dumps(line), flush=True)
            finally:
                for _ in gen:
                    pass


if __name__ == "__main__":
    main()
