"""Peak memory (max RSS) of the ``privpub histogram`` CLI path against the library alone.

    python benchmarks/cli_memory.py --bins 1e8 --method laplace
    python benchmarks/cli_memory.py --bins 1e7 --method hphp --suffix .csv

Writes a counts file (1-D int64 ``.npy``), then runs, each in its own process under
``/usr/bin/time -v``: (1) Python with NumPy only, loading the file (the baseline), (2) the library,
``publish`` on the loaded counts with no output, (3) the CLI, ``privpub histogram counts.npy -o
out<suffix>``. Prints max RSS of each, and as a multiple of the input (8 bytes per bin).
Results: docs/benchmarks.md ("CLI memory").
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[1] / "src"

LIBRARY = """
import sys, numpy as np
from privpub.histogram import HPHP, LaplaceHistogram
counts = np.load(sys.argv[1])
pub = LaplaceHistogram() if sys.argv[2] == "laplace" else HPHP()
pub.publish(counts, epsilon=1.0, rng=0)
"""
BASELINE = "import sys, numpy as np; c = np.array(np.load(sys.argv[1])); print(c.sum())"


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    rss_kb = float(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))  # type: ignore[union-attr]
    return rss_kb * 1024, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bins", type=float, default=1e8)
    ap.add_argument("--method", default="laplace", choices=["laplace", "hphp"])
    ap.add_argument("--suffix", default=".npy", choices=[".npy", ".csv"])
    args = ap.parse_args()
    n = int(args.bins)
    env = {**os.environ, "PYTHONPATH": str(SRC), "PRIVPUB_MEMORY_BUDGET": os.environ.get("PRIVPUB_MEMORY_BUDGET", "80%")}
    with tempfile.TemporaryDirectory(prefix="privpub-mem-") as tmp:
        counts = Path(tmp) / "counts.npy"
        np.save(counts, np.random.default_rng(0).poisson(5, n).astype(np.int64))
        input_bytes = 8 * n
        rows = [("numpy: load the counts (baseline)", *_run([sys.executable, "-c", BASELINE, str(counts)], env)),
                (f"library: {args.method} publish, no output",
                 *_run([sys.executable, "-c", LIBRARY, str(counts), args.method], env)),
                (f"CLI: privpub histogram -m {args.method} -o out{args.suffix}",
                 *_run([sys.executable, "-m", "privpub", "histogram", str(counts), "-e", "1", "-m", args.method,
                        "--seed", "0", "--quiet", "-o", str(Path(tmp) / f"out{args.suffix}")], env))]
    print(f"{n:,} bins, input {input_bytes / 1e9:.2f} GB (int64)")
    print("| run | max RSS | x input | wall s |\n| --- | ---: | ---: | ---: |")
    for name, rss, wall in rows:
        print(f"| {name} | {rss / 1e9:.2f} GB | {rss / input_bytes:.1f} | {wall:.1f} |")


if __name__ == "__main__":
    main()
