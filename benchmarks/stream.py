"""Throughput of privpub.stream on a 7.5 M-item stream (the paper's WorldCup98 size).

Run on demand::

    PRIVPUB_DATA=../shared/datasets python benchmarks/stream.py [--items N] [--repeats R] [--out FILE]

The stream is the WorldCup98 per-second stand-in (each minute split over 60 s; 7,518,600 items)
when the data directory has it, else a generated bursty stream of the same size. Queries: one per
time step (lengths 1-1024 inside the window W = 32768). Reports medians over the repeats of:

* batch ingestion (``extend``) in items/s, continuous and exact discrete Laplace noise;
* batch queries (``answer`` of 10^6 ranges at once) in queries/s;
* batch replay (``replay``: ingestion plus one query per step, heights adapting) in items/s;
* one-at-a-time ``append`` loop over the first ``--online-items`` items, then as many ``query``
  calls inside the window, per second.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
from _timing import median_time as _median_time

from privpub.errors import DataNotFoundError
from privpub.experiments.stream import load_dataset, make_queries, stand_in_per_second, synthetic_stream
from privpub.stream import make_publisher

W = 32768


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=7_518_600)
    ap.add_argument("--online-items", type=int, default=300_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="write a markdown table here")
    ap.add_argument("--methods", default="rtp,hq_rtp,rtp_mm,hq_rtpmm")
    ap.add_argument("--noises", default="laplace,discrete")
    args = ap.parse_args()
    try:
        data = stand_in_per_second(load_dataset("worldcup98"))[: args.items]
        source = "WorldCup98 per-second stand-in"
    except DataNotFoundError:
        data = synthetic_stream(args.items, rng=0)
        source = "generated bursty stream"
    n = data.shape[0]
    queries = make_queries(n, W, 1, 1024, rng=1)
    rng = np.random.default_rng(2)
    lq = rng.integers(n - W + 1, n + 1, size=1_000_000)
    batch_q = np.stack([lq, np.minimum(n, lq + rng.integers(0, 1024, size=lq.size))], axis=1)
    rows = []
    for method in args.methods.split(","):
        for noise in args.noises.split(","):
            def fresh(method=method, noise=noise):
                return make_publisher(method, window=W, epsilon=1.0, rng=0, noise=noise)

            t_ext = _median_time(lambda: fresh().extend(data), args.repeats)
            pub = fresh()
            pub.extend(data)
            t_ans = _median_time(lambda pub=pub: pub.answer(batch_q, record=False), args.repeats)
            t_rep = _median_time(lambda: fresh().replay(data, queries), args.repeats)
            m = args.online_items
            items = data[:m].tolist()
            ql_arr = rng.integers(m - W + 1, m + 1, size=m)
            ql = ql_arr.tolist()
            qr = np.minimum(m, ql_arr + rng.integers(0, 1024, size=m)).tolist()

            def loop_append(items=items, fresh=fresh):
                p = fresh()
                for x in items:
                    p.append(x)
                return p

            t_app = _median_time(loop_append, 1)
            p = loop_append()
            query = p.query
            t0 = time.perf_counter()
            for lo, hi in zip(ql, qr):
                query(lo, hi)
            t_q = time.perf_counter() - t0
            rows.append({
                "method": method, "noise": noise,
                "batch ingest (items/s)": n / t_ext,
                "batch queries (q/s)": batch_q.shape[0] / t_ans,
                "batch replay (items/s)": n / t_rep,
                "append (items/s)": m / t_app,
                "query (q/s)": len(ql) / t_q,
            })
            print(rows[-1], flush=True)
    header = list(rows[0])
    lines = [
        "# privpub.stream benchmarks",
        "",
        f"Stream: {source}, {n:,} items, one query per step (lengths 1-1024, W = {W}); medians of "
        f"{args.repeats} runs; one-at-a-time loops over the first {args.online_items:,} items.",
        f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"numpy {np.__version__}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for r in rows:
        lines.append("| " + " | ".join(f"{v:,.0f}" if isinstance(v, float) else str(v) for v in r.values()) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
