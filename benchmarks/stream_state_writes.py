"""What one write to a large-window stream costs (issue 22, finding 8; bounded, local SQLite file).

Creates a ``--publisher`` stream of window ``--window`` in the service's stream store over a fresh
SQLite file, ingests ``--steps`` counts in batches of 200,000, then times ``--posts`` one-count posts
and reports the bytes each wrote (the state head and the part of the new nodes). Before issue 22
every write rewrote the whole window state (window 2**20 at t = 1.2 M: 20 MB and about 1 s per
one-count post on this machine).

    python benchmarks/stream_state_writes.py --window 1048576 --steps 1200000

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from privpub.service import make_engine, upgrade
from privpub.service._streams import StreamStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--publisher", default="rtp")
    ap.add_argument("--window", type=int, default=2**20)
    ap.add_argument("--steps", type=int, default=1_200_000)
    ap.add_argument("--posts", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{Path(d) / 'streams.db'}"
        upgrade(url)
        engine = make_engine(url, pool_size=2)
        store = StreamStore(engine, url)
        info = store.create({"name": "bench", "publisher": args.publisher, "epsilon": 1.0,
                             "window": args.window})[0]
        t0 = time.perf_counter()
        for i, a in enumerate(range(0, args.steps, 200_000)):
            store.add_counts(info.id, np.ones(min(200_000, args.steps - a), dtype=np.int64), f"bulk-{i}")
        ingest = time.perf_counter() - t0
        took = []
        for i in range(args.posts):
            t1 = time.perf_counter()
            store.add_counts(info.id, np.array([3]), f"one-{i}")
            took.append(time.perf_counter() - t1)
        with engine.connect() as conn:
            head = conn.execute(sa.text("SELECT length(state) FROM streams")).scalar_one()
            part = conn.execute(sa.text("SELECT length(data) FROM stream_parts ORDER BY t_end DESC LIMIT 1")
                                ).scalar_one()
            stored = conn.execute(sa.text("SELECT sum(length(data)) FROM stream_parts")).scalar_one()
        engine.dispose()
    print(json.dumps({"publisher": args.publisher, "window": args.window, "t": args.steps + args.posts,
                      "ingest_s": round(ingest, 2), "post_median_s": round(float(np.median(took)), 4),
                      "post_bytes_head": int(head), "post_bytes_part": int(part),
                      "parts_bytes_total": int(stored)}))


if __name__ == "__main__":
    main()
