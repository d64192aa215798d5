"""Throughput of privpub.stream on a 7.5 M-item stream (the paper's WorldCup98 size).

Run on demand::

    PRIVPUB_DATA=../shared/datasets python benchmarks/stream.py [--items N] [--repeats R] [--out FILE]

The stream is the WorldCup98 per-second stand-in (each minute split over 60 s; 7,518,600 items)
when the data directory has it, else a generated bursty stream of the same size. Queries: one per
time step (lengths 1-1024 inside the window W = 32768). Reports medians over the repeats of:

* batch ingestion (``extend``) in items/s, default exact discrete Laplace and continuous Laplace;
* batch queries (``answer`` of 10^6 ranges at once) in queries/s;
* batch replay (``replay``: ingestion plus one query per step, heights adapting) in items/s;
* one-at-a-time ``append`` loop over the first ``--online-items`` items, then as many ``query``
  calls inside the window, per second.

Every rate is given for wall-clock time and for CPU time of this process (``time.process_time``;
the code is single-threaded, so CPU time is what an idle machine would show as wall time). The
load average before and after the run is printed: on a shared machine the wall-clock rates fall
with the load, the CPU rates much less. All methods run side by side in one process, so their
ratios (RTP_MM / RTP) survive the load.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from privpub.errors import DataNotFoundError
from privpub.experiments.stream import load_dataset, make_queries, stand_in_per_second, synthetic_stream
from privpub.stream import make_publisher

W = 32768
GOALS = {"batch": 10e6, "append": 200e3, "mm_ratio": 1.5}


def _both(fn, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``repeats`` calls."""
    walls, cpus = [], []
    for _ in range(max(1, repeats)):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=7_518_600)
    ap.add_argument("--online-items", type=int, default=300_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="write a markdown table here")
    ap.add_argument("--methods", default="rtp,hq_rtp,rtp_mm,hq_rtpmm,bt,bth")
    ap.add_argument("--noises", default="discrete,laplace")
    ap.add_argument("--no-replay", action="store_true", help="skip the (slow) replay column")
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
    load0 = os.getloadavg()
    rows = []
    for method in args.methods.split(","):
        for noise in args.noises.split(","):
            def fresh(method=method, noise=noise):
                return make_publisher(method, window=W, epsilon=1.0, rng=0, noise=noise)

            ext = _both(lambda: fresh().extend(data), args.repeats)
            pub = fresh()
            pub.extend(data)
            ans = _both(lambda pub=pub: pub.answer(batch_q, record=False), args.repeats)
            rep = (float("nan"), float("nan")) if args.no_replay else _both(lambda: fresh().replay(data, queries), 1)
            m = args.online_items
            items = data[:m].tolist()
            ql_arr = rng.integers(max(1, m - W + 1), m + 1, size=m)
            ql = ql_arr.tolist()
            qr = np.minimum(m, ql_arr + rng.integers(0, 1024, size=m)).tolist()
            holder = []

            def loop_append(items=items, fresh=fresh, holder=holder):
                p = fresh()
                for x in items:
                    p.append(x)
                holder.append(p)

            app = _both(loop_append, 1)
            query = holder[-1].query

            def loop_query(query=query, ql=ql, qr=qr):
                for lo, hi in zip(ql, qr):
                    query(lo, hi)

            qry = _both(loop_query, 1)
            rows.append({
                "method": method, "noise": noise,
                "batch ingest (items/s)": (n / ext[0], n / ext[1]),
                "batch queries (q/s)": (batch_q.shape[0] / ans[0], batch_q.shape[0] / ans[1]),
                "batch replay (items/s)": (n / rep[0], n / rep[1]),
                "append (items/s)": (m / app[0], m / app[1]),
                "query (q/s)": (len(ql) / qry[0], len(ql) / qry[1]),
            })
            print(rows[-1], flush=True)
    load1 = os.getloadavg()

    def fmt(v: float) -> str:
        return "-" if not np.isfinite(v) else (f"{v / 1e6:,.2f} M" if v >= 1e6 else f"{v / 1e3:,.0f} k")

    header = list(rows[0])
    lines = [
        "# privpub.stream benchmarks",
        "",
        f"Stream: {source}, {n:,} items, one query per step (lengths 1-1024, W = {W}); medians of "
        f"{args.repeats} runs (replay: 1); one-at-a-time loops over the first {args.online_items:,} items.",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, numpy {np.__version__}. Load average (1 min) {load0[0]:.1f} before, "
        f"{load1[0]:.1f} after the run.",
        "Each cell: wall-clock rate / CPU-time rate (single-threaded: the CPU rate is what an idle "
        "machine shows).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for r in rows:
        cells = [r["method"], r["noise"]] + [f"{fmt(w)} / {fmt(c)}" for w, c in list(r.values())[2:]]
        lines.append("| " + " | ".join(cells) + " |")
    # the goals of issue 17 (default exact noise)
    disc = [r for r in rows if r["noise"] == "discrete"]
    if disc:
        lines += ["", "Goals of issue 17 (default exact noise, CPU-time rates):", ""]
        batch = {r["method"]: r["batch ingest (items/s)"][1] for r in disc}
        appends = {r["method"]: r["append (items/s)"][1] for r in disc}
        for name in ("rtp", "hq_rtp"):
            if name in batch:
                lines.append(f"- batch {name}: {fmt(batch[name])} items/s (goal >= 10 M)")
        if "rtp" in batch and "rtp_mm" in batch:
            lines.append(f"- RTP_MM / RTP batch time: {batch['rtp'] / batch['rtp_mm']:.2f}x (goal <= 1.5x)")
        worst = min(appends, key=appends.__getitem__)
        lines.append(f"- append: median {fmt(statistics.median(appends.values()))} items/s, worst {worst} "
                     f"{fmt(appends[worst])} (goal >= 200 k for every publisher)")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
