"""Benchmark of privpub.spatial against its limit: one bincount pass over the users.

Every spatial publisher must at least read each user's point once and count it in a cell. The
*limit* is exactly that, measured side by side on the same points: each user's cell on a fixed
256 x 256 grid (``uniform_interval_index`` on x and y) and one ``np.bincount``. Each kernel
(publisher x path) is timed end to end (collection + estimation + post-processing, no data
generation, no queries) on four generated input families (uniform, clustered, sparse check-in
like, banded landmark like) and reported as a multiple of the limit: the median over the
families, the worst family, and the growth exponent from 10^6 to 10^7 users. Times are CPU
seconds of this process (robust to other jobs on the machine; the kernels are single-threaded
except the per-user randomiser's two worker threads) and wall seconds.

Usage::

    python benchmarks/spatial.py                 # 10^5, 10^6, 10^7 users (simulate), 10^6 (per-user)
    python benchmarks/spatial.py --quick         # 10^5 and 10^6, one repeat
    python benchmarks/spatial.py --write         # also write docs/benchmarks/spatial.md
    python benchmarks/spatial.py --only KDG-HT --sizes 1000000 10000000 --per-user-n 0   # one kernel
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from privpub.datasets import clustered_points
from privpub.spatial import (
    AHEAD,
    GTR,
    HDG,
    KDGHT,
    RapporGrid,
    UniformGrid,
    synthetic_checkin,
    synthetic_landmark,
)
from privpub.spatial._kernels import grid_edges, uniform_interval_index

BOX = (0.0, 0.0, 1.0, 1.0)
EPSILON = 0.5
FAMILIES: dict[str, Callable[[int], np.ndarray]] = {
    "uniform": lambda n: np.random.default_rng(0).random((n, 2)),
    "clustered": lambda n: clustered_points(n, rng=0).points,
    "sparse": lambda n: synthetic_checkin(n, rng=0),
    "landmark": lambda n: synthetic_landmark(n, rng=0),
}
SIMULATE = {"KDG-HT": KDGHT(), "GT-R": GTR(), "UG": UniformGrid(), "RAPPOR": RapporGrid(), "HDG": HDG(),
            "AHEAD": AHEAD()}
PER_USER = {"KDG-HT": KDGHT(), "UG": UniformGrid(), "HDG": HDG(), "AHEAD": AHEAD()}


def bincount_pass(pts: np.ndarray) -> np.ndarray:
    """The limit: every user's cell on a 256 x 256 grid, counted once."""
    edges = grid_edges(0.0, 1.0, 256)
    cells = uniform_interval_index(edges, pts[:, 0]) * 256
    cells += uniform_interval_index(edges, pts[:, 1])
    return np.bincount(cells, minlength=256 * 256)


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median CPU and wall seconds of ``repeats`` calls."""
    cpu, wall = [], []
    for _ in range(repeats):
        c, w = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def measure(pts: np.ndarray, n: int, fam: str, mode: str, pubs: dict[str, Any], repeats: int) -> list[dict[str, Any]]:
    """Time every kernel of ``pubs`` on ``pts`` beside the limit on the same points."""
    limit_cpu, limit_wall = timed(lambda: bincount_pass(pts), repeats)
    rows = []
    for name, pub in pubs.items():
        cpu, wall = timed(lambda: pub.publish(pts, bounds=BOX, epsilon=EPSILON, rng=0, mode=mode), repeats)  # noqa: B023
        rows.append({"kernel": name, "mode": mode, "n": n, "family": fam, "cpu": cpu, "wall": wall,
                     "limit_cpu": limit_cpu, "limit_wall": limit_wall, "ratio": cpu / limit_cpu})
        print(f"{name:7s} {mode:9s} N={n:>10,} {fam:9s} cpu {cpu:7.3f}s wall {wall:7.3f}s "
              f"limit {limit_cpu:6.3f}s  x{cpu / limit_cpu:5.1f}", flush=True)
    return rows


def run(sizes: list[int], per_user_n: int, repeats: int) -> list[dict[str, Any]]:
    rows = []
    for n in sorted(set(sizes) | ({per_user_n} - {0})):
        for fam, make in FAMILIES.items():
            pts = make(n)
            if n in sizes and SIMULATE:
                rows += measure(pts, n, fam, "simulate", SIMULATE, repeats)
            if n == per_user_n and PER_USER:
                rows += measure(pts, n, fam, "per_user", PER_USER, repeats)
            del pts
    return rows


def summary(rows: list[dict[str, Any]], sizes: list[int], per_user_n: int) -> list[str]:
    lines = ["| kernel | path | users | limit (bincount pass, CPU s, median) | kernel CPU s (median) | "
             "median ratio | worst family (ratio) | growth 10^6 -> 10^7: kernel / limit / ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for mode, pubs, n in (("simulate", SIMULATE, max(sizes)), ("per_user", PER_USER, per_user_n)):
        for name in pubs:
            sel = [r for r in rows if r["kernel"] == name and r["mode"] == mode and r["n"] == n]
            if not sel:
                continue
            ratios = {r["family"]: r["ratio"] for r in sel}
            worst = max(ratios, key=ratios.__getitem__)
            growth = ""
            if mode == "simulate" and 10**6 in sizes and 10**7 in sizes:
                small = [r for r in rows if r["kernel"] == name and r["mode"] == mode and r["n"] == 10**6]
                k = math.log10(statistics.median(r["cpu"] for r in sel) / statistics.median(r["cpu"] for r in small))
                lim = math.log10(statistics.median(r["limit_cpu"] for r in sel)
                                 / statistics.median(r["limit_cpu"] for r in small))
                growth = f"n^{k:.2f} / n^{lim:.2f} / n^{k - lim:+.2f}"
            lines.append(
                f"| {name} | {mode} | {n:,} | {statistics.median(r['limit_cpu'] for r in sel):.3f} | "
                f"{statistics.median(r['cpu'] for r in sel):.3f} | {statistics.median(ratios.values()):.1f}x | "
                f"{worst} ({ratios[worst]:.1f}x) | {growth} |")
    return lines


def parse_log(path: Path) -> list[dict[str, Any]]:
    """The rows of an earlier run, read back from the "All cells" table of its output."""
    rows = []
    text = path.read_text()
    for line in text[text.index("All cells"):].splitlines():
        parts = [p.strip() for p in line.strip("|").split("|")]
        if len(parts) == 8 and parts[1] in ("simulate", "per_user"):
            kernel, mode, n, fam, cpu, wall, lim, ratio = parts
            rows.append({"kernel": kernel, "mode": mode, "n": int(n.replace(",", "")), "family": fam,
                         "cpu": float(cpu), "wall": float(wall), "limit_cpu": float(lim), "ratio": float(ratio)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks/spatial.md")
    parser.add_argument("--from-log", type=Path, help="re-render the tables of an earlier run's printed output")
    parser.add_argument("--only", default="", help="comma-separated kernels to time (default: all)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="users of the simulate path")
    parser.add_argument("--per-user-n", type=int, default=None, help="users of the per-user path (0: skip it)")
    args = parser.parse_args()
    if args.only:
        keep = set(args.only.split(","))
        for table in (SIMULATE, PER_USER):
            for name in list(table):
                if name not in keep:
                    del table[name]
    repeats = 1 if args.quick else args.repeats
    sizes = args.sizes or ([10**5, 10**6] if args.quick else [10**5, 10**6, 10**7])
    per_user_n = args.per_user_n if args.per_user_n is not None else (10**5 if args.quick else 10**6)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    if args.from_log is not None:
        rows = parse_log(args.from_log)
        header = args.from_log.read_text().split("# privpub.spatial benchmarks", 1)[1].split("Limit =", 1)[0].strip()
    else:
        rows = run(sizes, per_user_n, repeats)
        header = (
            f"`python benchmarks/spatial.py {' '.join(sys.argv[1:])}` on {platform.machine()} "
            f"({os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}), "
            f"epsilon={EPSILON}, median of {repeats} runs per cell, {time.perf_counter() - t0:.0f} s in total. "
            f"Load average (1, 5, 15 min) {' '.join(f'{v:.2f}' for v in load_before)} before and "
            f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} after the run: "
            "other jobs shared the two cores, so wall times are inflated; the ratios use CPU time of "
            "this process, measured side by side with the limit.")
    lines = [
        "# privpub.spatial benchmarks",
        "",
        header,
        "",
        "Limit = one bincount pass over the users: each user's cell on a 256 x 256 grid plus one "
        "`np.bincount` (what any grid method must do at least). Input families: uniform, clustered "
        "(`clustered_points`), sparse (`synthetic_checkin`), landmark (`synthetic_landmark`). Growth: "
        "the exponent of the CPU time from 10^6 to 10^7 users, of the kernel, of the limit (memory "
        "effects: 10^6 users fit in cache, 10^7 do not), and of their ratio (0 = linear like the limit). "
        "The per-user path generates d random bits per user for d cells, so its limit-ratio grows with "
        "the number of cells reported.",
        "",
        *summary(rows, sizes, per_user_n),
        "",
        "All cells (CPU seconds, ratio to the limit on the same points):",
        "",
        "| kernel | path | users | family | CPU s | wall s | limit CPU s | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['mode']} | {r['n']:,} | {r['family']} | {r['cpu']:.3f} | "
                     f"{r['wall']:.3f} | {r['limit_cpu']:.3f} | {r['ratio']:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        path = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "spatial.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
