"""Load benchmark of a service stream (issue 16; loopback only; bounded; stops by itself).

Starts ``privpub serve`` (with the test-only check endpoint) on 127.0.0.1 over a fresh database,
creates an HQ_RTP stream with 1-second steps closed by the service's clock, then runs
``--producers`` producers posting batches of ``--batch-size`` timed events while ``--queriers``
clients ask random range queries (``tests/service/stream_loadgen.py``). Checks that the sum of the
true counts the service holds equals the producers' log (zero lost, zero counted twice) and prints
one JSON line: ingest events/s, query latency percentiles, server CPU, load average.

    python benchmarks/stream_load.py --backend sqlite
    python benchmarks/stream_load.py --backend postgresql --postgres-url postgresql+psycopg://u@127.0.0.1:5432/postgres

Results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "service"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from service_helpers import Server, fresh_database  # noqa: E402
from service_load import server_cpu_seconds  # noqa: E402
from stream_helpers import CHECKS, admin_client, create_stream  # noqa: E402
from stream_loadgen import run_stream_load  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--postgres-url", default=os.environ.get("PRIVPUB_TEST_POSTGRES_URL"))
    parser.add_argument("--producers", type=int, default=32)
    parser.add_argument("--queriers", type=int, default=32)
    parser.add_argument("--batches", type=int, default=20, help="batches per producer")
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=None,
                        help="total events per second the producers send (default: as fast as possible)")
    parser.add_argument("--query-rate", type=float, default=None,
                        help="queries per second per querier (default: each asks again as soon as answered)")
    parser.add_argument("--processes", type=int, default=2, help="client processes")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args()
    if args.postgres_url:
        os.environ["PRIVPUB_TEST_POSTGRES_URL"] = args.postgres_url
    with tempfile.TemporaryDirectory(prefix="privpub-stream-load-") as tmp:
        gen = fresh_database(args.backend, Path(tmp))
        db = next(gen)
        server = Server(db, Path(tmp) / "server.log", workers=args.workers, env=CHECKS).start()
        try:
            with admin_client(server) as adm:
                s = create_stream(adm, publisher="hq_rtp", epsilon=1.0, window=4096, step_seconds=1.0,
                                  origin=time.time() - 1000.0, late="current")
                sid = s["id"]
                while adm.get(f"/streams/{sid}").json()["t"] < 1000:
                    time.sleep(0.1)
                t0 = adm.get(f"/streams/{sid}").json()["t"]
                assert server.proc is not None
                cpu0, load0 = server_cpu_seconds(server.proc.pid), os.getloadavg()[0]
                res = run_stream_load(server.url, sid, s["producer_token"], producers=args.producers,
                                      queriers=args.queriers, batches=args.batches, batch_size=args.batch_size,
                                      query_range=(t0 - 999, t0), rate=args.rate, query_rate=args.query_rate,
                                      processes=args.processes,
                                      max_seconds=args.max_seconds)
                cpu1, load1 = server_cpu_seconds(server.proc.pid), os.getloadavg()[0]
                chk = adm.get(f"/streams/{sid}/check").json()
                lost = res.acknowledged_events - chk["true_total"]
                print(json.dumps({
                    "backend": args.backend, "workers": args.workers, "producers": args.producers,
                    "queriers": args.queriers, "batch_size": args.batch_size, "rate": args.rate, "query_rate": args.query_rate,
                    "events": res.acknowledged_events, "ingest_seconds": round(res.ingest_seconds, 2),
                    "events_per_s": round(res.events_per_second), "queries": int(res.latencies_ms.size),
                    "queries_per_s": round(res.latencies_ms.size / max(res.ingest_seconds, 1e-9)),
                    "query_ms_p50": round(res.p(50), 2), "query_ms_p99": round(res.p(99), 2),
                    "query_errors": res.query_errors, "retries": res.retries, "unfinished": res.unfinished,
                    "lost_or_double": lost, "steps_closed_during_load": chk["t"] - t0,
                    "server_cpu_s": round(cpu1 - cpu0, 1), "load_average": [round(load0, 1), round(load1, 1)],
                    "cores": os.cpu_count()}), flush=True)
                if lost:
                    raise SystemExit(f"{lost} events lost or counted twice")
        finally:
            server.stop()
            for _ in gen:
                pass


if __name__ == "__main__":
    main()
