"""``privpub synth`` end to end on the raw ``adult.data`` with the built-in schema (issue 15).

    PRIVPUB_DATA=../shared/datasets python benchmarks/cli_synth.py [--repeats 3] [--methods default,linear]

Runs ``privpub synth adult.data --dataset-schema adult --flip-prob F -o OUT.csv`` in a fresh
process for F in {0.1, 0.5, 0.9} (default options otherwise), each method side by side inside each
repeat, and reports the median wall time, the child's CPU time (user + system) and the estimator
the command chose. Prints a markdown table (``--markdown PATH`` also writes it).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import emit


def _run(raw: Path, f: float, method: str, out: Path) -> tuple[float, float, str]:
    args = [sys.executable, "-m", "privpub", "synth", str(raw), "--dataset-schema", "adult", "--flip-prob", str(f),
            "-o", str(out), "--force", "--quiet", "--seed", "0"]
    if method != "default":
        args += ["--method", method]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"privpub synth failed: {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    chosen = re.search(r"estimator (\w+)", proc.stdout)
    return wall, cpu, chosen.group(1) if chosen else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", default="default,linear")
    parser.add_argument("--flips", default="0.1,0.5,0.9")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    data = os.environ.get("PRIVPUB_DATA")
    raw = Path(data or ".") / "adult" / "adult.data"
    if not raw.is_file():
        raise SystemExit(f"{raw} not found: set PRIVPUB_DATA to the datasets folder")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    flips = [float(f) for f in args.flips.split(",")]
    results: dict[tuple[float, str], list[tuple[float, float, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "syn.csv"
        for _ in range(args.repeats):
            for f in flips:
                for m in methods:
                    results.setdefault((f, m), []).append(_run(raw, f, m, out))
    load = os.getloadavg()[0]
    lines = [f"`privpub synth adult.data --dataset-schema adult --flip-prob F -o OUT.csv` (fresh process each run; "
             f"medians of {args.repeats}; load average {load:.1f} at the end; {os.cpu_count()} cores)", "",
             "| f | epsilon per user | options | estimator chosen | wall (s) | CPU (s) |", "|---|---|---|---|---|---|"]
    from privpub.ldp_synth import epsilon_from_f

    for (f, m), runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        lines.append(f"| {f:g} | {epsilon_from_f(f, 15):.4g} | {'default' if m == 'default' else '--method ' + m} | "
                     f"{runs[-1][2]} | {wall:.1f} | {cpu:.1f} |")
    emit("\n".join(lines) + "\n", args.markdown)


if __name__ == "__main__":
    main()
