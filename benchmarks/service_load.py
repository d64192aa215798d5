"""Load benchmark of the collection service (loopback only; bounded; stops by itself).

Starts ``privpub serve`` on 127.0.0.1 over a fresh database, creates an OUE frequency campaign
over 16 categories, sends ``--n-single`` reports from 64 concurrent clients to the single-report
endpoint and ``--n-batch`` reports in batches of 10,000 to the batch endpoint, then checks that
every receipted report is stored exactly once and that the running aggregates (count and per-cell
sums) equal the clients' own log. Prints one JSON line per phase.

    python benchmarks/service_load.py --backend postgresql --postgres-url postgresql+psycopg://u@127.0.0.1:5432/postgres
    python benchmarks/service_load.py --backend sqlite --n-single 20000 --n-batch 200000

Results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "service"))

from loadgen import make_reports, run_load  # noqa: E402
from service_helpers import ADMIN_TOKEN, Server, create, fresh_database  # noqa: E402
from test_load import D, check_exactly_once  # noqa: E402

KILLS: list[dict[str, float]] = []


def _killer(server: Server, db: str, cid: str, thresholds: list[int]) -> None:
    """SIGKILL the server when the stored count passes each threshold; restart it on the same port."""
    from privpub.service import Store, make_engine

    engine = make_engine(db, pool_size=1)
    try:
        for limit in thresholds:
            while True:
                with engine.connect() as conn:
                    stored = Store._sums(conn, cid)[0].get(0, 0)
                if stored >= limit:
                    break
                time.sleep(0.2)
            server.kill()
            t0 = time.monotonic()
            time.sleep(1.0)
            server.start()
            KILLS.append({"at_stored": stored, "down_seconds": round(time.monotonic() - t0, 2)})
    finally:
        engine.dispose()


def server_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of every live process in the server's process group (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # field 5 of stat: the process group
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--postgres-url", default=os.environ.get("PRIVPUB_TEST_POSTGRES_URL"))
    parser.add_argument("--n-single", type=int, default=200_000)
    parser.add_argument("--n-batch", type=int, default=2_000_000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--batch-clients", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-seconds", type=float, default=1500.0)
    parser.add_argument("--kill", action="store_true",
                        help="SIGKILL the server (all workers) when half the single reports are stored, restart "
                             "it on the same port after 1 s, and again half-way through the batches")
    args = parser.parse_args()
    if args.postgres_url:
        os.environ["PRIVPUB_TEST_POSTGRES_URL"] = args.postgres_url
    with tempfile.TemporaryDirectory(prefix="privpub-load-") as tmp:
        gen = fresh_database(args.backend, Path(tmp))
        db = next(gen)
        server = Server(db, Path(tmp) / "server.log", workers=args.workers).start()
        try:
            with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as admin:
                cid = create(admin, name="load", kind="frequency", oracle="OUE", epsilon=1.0,
                             categories=[str(i) for i in range(D)], min_reports=1)["id"]
            n1, n2 = args.n_single, args.n_batch
            ids, payloads = make_reports(n1 + n2, D, seed=0)
            killer = None
            if args.kill:
                killer = threading.Thread(target=_killer, args=(server, db, cid, [n1 // 2, n1 + n2 // 2]),
                                          daemon=True)
                killer.start()
            assert server.proc is not None
            pgid = server.proc.pid
            cpu0, load0 = server_cpu_seconds(pgid), os.getloadavg()[0]
            single = run_load(server.url, cid, ids[:n1], payloads[:n1], mode="single", clients=args.clients,
                              max_seconds=args.max_seconds)
            cpu1, load1 = server_cpu_seconds(pgid), os.getloadavg()[0]
            print(json.dumps({"backend": args.backend, "workers": args.workers, "endpoint": "single",
                              "clients": args.clients, "reports": int(single.receipted.size),
                              "seconds": round(single.seconds, 2),
                              "reports_per_s": round(single.receipted.size / single.seconds),
                              "server_cpu_ms_per_1000": None if args.kill else round(1e6 * (cpu1 - cpu0) / max(1, single.receipted.size), 1),
                              "load_average": [round(load0, 1), round(load1, 1)]}), flush=True)
            batch = run_load(server.url, cid, ids[n1:], payloads[n1:], mode="batch", clients=args.batch_clients,
                             batch_size=args.batch_size, max_seconds=args.max_seconds)
            cpu2, load2 = server_cpu_seconds(pgid), os.getloadavg()[0]
            print(json.dumps({"backend": args.backend, "workers": args.workers, "endpoint": "batch",
                              "clients": args.batch_clients, "batch_size": args.batch_size,
                              "reports": int(batch.receipted.size), "seconds": round(batch.seconds, 2),
                              "reports_per_s": round(batch.receipted.size / batch.seconds),
                              "server_cpu_ms_per_1000": None if args.kill else round(1e6 * (cpu2 - cpu1) / max(1, batch.receipted.size), 1),
                              "load_average": [round(load1, 1), round(load2, 1)]}), flush=True)
            if killer is not None:
                killer.join(60)
                print(json.dumps({"kills": KILLS, "retries": single.retries + batch.retries}), flush=True)
            receipted = np.concatenate([single.receipted, batch.receipted + n1])
            check_exactly_once(db, cid, ids, payloads, receipted)
            print(json.dumps({"check": "exactly once", "stored": int(receipted.size), "lost": 0,
                              "counted_twice": 0, "unfinished": single.unfinished + batch.unfinished}), flush=True)
        finally:
            server.stop()
            for _ in gen:
                pass


if __name__ == "__main__":
    main()
