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
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "service"))

from loadgen import make_reports, run_load  # noqa: E402
from service_helpers import ADMIN_TOKEN, Server, create, fresh_database  # noqa: E402
from test_load import D, check_exactly_once  # noqa: E402


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
            single = run_load(server.url, cid, ids[:n1], payloads[:n1], mode="single", clients=args.clients,
                              max_seconds=args.max_seconds)
            print(json.dumps({"backend": args.backend, "workers": args.workers, "endpoint": "single",
                              "clients": args.clients, "reports": int(single.receipted.size),
                              "seconds": round(single.seconds, 2),
                              "reports_per_s": round(single.receipted.size / single.seconds)}), flush=True)
            batch = run_load(server.url, cid, ids[n1:], payloads[n1:], mode="batch", clients=args.batch_clients,
                             batch_size=args.batch_size, max_seconds=args.max_seconds)
            print(json.dumps({"backend": args.backend, "workers": args.workers, "endpoint": "batch",
                              "clients": args.batch_clients, "batch_size": args.batch_size,
                              "reports": int(batch.receipted.size), "seconds": round(batch.seconds, 2),
                              "reports_per_s": round(batch.receipted.size / batch.seconds)}), flush=True)
            receipted = __import__("numpy").concatenate([single.receipted, batch.receipted + n1])
            check_exactly_once(db, cid, ids, payloads, receipted)
            print(json.dumps({"check": "exactly once", "stored": int(receipted.size), "lost": 0,
                              "counted_twice": 0, "unfinished": single.unfinished + batch.unfinished}), flush=True)
        finally:
            server.stop()
            for _ in gen:
                pass


if __name__ == "__main__":
    main()
