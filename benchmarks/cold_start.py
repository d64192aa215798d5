"""Cold start: ``privpub demo`` with an empty Numba cache against the same command warm (issue 27).

Run on demand from the repository root (not part of the test suite)::

    python benchmarks/cold_start.py [--runs 1] [--markdown docs/benchmarks/cold_start.md]

Each run starts fresh interpreters with ``NUMBA_CACHE_DIR`` pointing at a new empty directory:
the first ``privpub demo --no-report`` compiles every kernel the demo calls (and caches it), the
next ones load them from that cache. Reports wall-clock and CPU seconds (user + system, of the
process and its children) and their cold / warm ratios, then, from one more cold interpreter
that records Numba's compile events, the compile CPU time of each top-level kernel. The load
average is printed before and after: on a shared machine wall time is inflated, CPU time less.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import emit

ROOT = Path(__file__).resolve().parents[1]

_EVENTS = """
import collections, sys, time
from numba.core import event
depth, start, total, calls = [0], {}, collections.defaultdict(float), collections.Counter()
class Listener(event.Listener):
    def on_start(self, e):
        start[id(e.data["dispatcher"]), str(e.data["args"])] = (time.process_time(), depth[0])
        depth[0] += 1
    def on_end(self, e):
        depth[0] -= 1
        t0, level = start.pop((id(e.data["dispatcher"]), str(e.data["args"])))
        if level == 0:
            f = e.data["dispatcher"].py_func
            total[f"{f.__module__}.{f.__name__}"] += time.process_time() - t0
            calls[f"{f.__module__}.{f.__name__}"] += 1
event.register("numba:compile", Listener())
from privpub.cli._demo import run_demo_parts
run_demo_parts(0)
for name, sec in sorted(total.items(), key=lambda kv: -kv[1]):
    print(f"{sec:.2f} {calls[name]} {name}")
"""


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="cold/warm pairs, each on a new empty cache")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    load0 = os.getloadavg()
    demo = [sys.executable, "-m", "privpub", "demo", "--no-report"]
    rows = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT / "src")}
            cold = _run(demo, env)
            warm = _run(demo, env)
            rows.append((cold, warm))
            print(f"cold wall {cold[0]:.1f} s cpu {cold[1]:.1f} s | warm wall {warm[0]:.1f} s cpu {warm[1]:.1f} s",
                  flush=True)
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT / "src")}
        compiles = _run([sys.executable, "-c", _EVENTS], env)[2].split("\n")
    load1 = os.getloadavg()
    cw, cc = statistics.median(r[0][0] for r in rows), statistics.median(r[0][1] for r in rows)
    ww, wc = statistics.median(r[1][0] for r in rows), statistics.median(r[1][1] for r in rows)
    lines = [
        "# Benchmark: cold start of `privpub demo` (`benchmarks/cold_start.py`)", "",
        f"Command: `python benchmarks/cold_start.py --runs {args.runs}`; load average (1, 5, 15 min) "
        f"{' '.join(f'{v:.2f}' for v in load0)} before, {' '.join(f'{v:.2f}' for v in load1)} after.", "",
        "| run | wall s | CPU s (user + system) |", "|---|---:|---:|",
        f"| cold (empty Numba cache) | {cw:.1f} | {cc:.1f} |",
        f"| warm (same cache) | {ww:.1f} | {wc:.1f} |",
        f"| cold / warm | {cw / ww:.2f} | {cc / wc:.2f} |", "",
        "Compile CPU seconds of each top-level kernel (one more cold run, Numba's compile events; "
        "nested compilations are inside their caller's time):", "",
        "| kernel | compilations | CPU s |", "|---|---:|---:|",
    ]
    total = 0.0
    for line in compiles:
        if line.strip():
            sec, n, name = line.split(" ", 2)
            total += float(sec)
            lines.append(f"| `{name}` | {n} | {float(sec):.2f} |")
    lines.append(f"| total | | {total:.2f} |")
    emit("\n".join(lines) + "\n", args.markdown)


if __name__ == "__main__":
    main()
