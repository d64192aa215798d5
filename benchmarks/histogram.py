"""Benchmark of privpub.histogram: exact grouping (fast vs O(n^2) reference) and end-to-end HPHP.

Run on demand (not part of the test suite)::

    PRIVPUB_DATA=../shared/datasets python benchmarks/histogram.py [--max-reference 30000] [--repeats 3]
        [--sizes 1000,10000,100000,1000000] [--markdown docs/benchmarks/histogram.md]

Input: the private HPHP's real workload, i.e. the sorted noisy values of a socialnetwork-like
surrogate histogram (lognormal degrees, spec 6.1) with Laplace noise at ε1 = 0.85·ε, ε = 0.1;
grouping constants c = 2/ε2², γ = 2/ε1². End-to-end: ``HPHP().publish`` (discrete Laplace
noise, the default) and ``HPHP(noise="laplace")`` on the surrogate. Reports medians.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _timing import emit, median_time

from privpub.experiments.histogram import synthetic_like
from privpub.histogram import HPHP, dp_group_deque, dp_group_fast, dp_group_quadratic

EPS = 0.1
EPS1, EPS2 = 0.85 * EPS, 0.15 * EPS
C, GAMMA = 2 / EPS2**2, 2 / EPS1**2


CLOCK: Callable[[], float] = time.perf_counter


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    return median_time(fn, repeats, CLOCK)


def _workload(n: int) -> tuple[np.ndarray, np.ndarray]:
    counts = synthetic_like("socialnetwork", n=n, seed=0)
    rng = np.random.default_rng(n)
    x = np.sort(counts + rng.laplace(0, 1 / EPS1, n))
    return counts, x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,3000,10000,30000,100000,300000,1000000")
    parser.add_argument("--max-reference", type=int, default=30000,
                        help="largest n for the O(n^2) reference (default 30000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall-clock time (default) or this process's CPU time (on a shared machine)")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.perf_counter if args.clock == "wall" else time.process_time
    sizes = [int(s) for s in args.sizes.split(",")]
    lines = [
        "# privpub.histogram benchmark",
        "",
        f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"{args.clock} clock, median of {args.repeats} runs (the reference: 1 run above n = 10^4). "
        "Workload: sorted noisy "
        "socialnetwork-like surrogate, ε = 0.1 (ε1 = 0.085, ε2 = 0.015).",
        "",
        "| n | groups | fast grouping (s) | deque only (s) | O(n²) reference (s) | speed-up (reference / fast) "
        "| HPHP end-to-end, discrete (s) | HPHP end-to-end, laplace (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in sizes:
        counts, x = _workload(n)
        cost_fast, bounds = dp_group_fast(x, C, GAMMA)
        t_fast = _median_time(lambda x=x: dp_group_fast(x, C, GAMMA), args.repeats)
        t_deque = _median_time(lambda x=x: dp_group_deque(x, C, GAMMA), 1 if n > 100_000 else args.repeats)
        ref = "—"
        speed = "—"
        if n <= args.max_reference:
            reps = args.repeats if n <= 10_000 else 1
            t_ref = _median_time(lambda x=x: dp_group_quadratic(x, C, GAMMA), reps)
            cost_ref, _ = dp_group_quadratic(x, C, GAMMA) if n <= 3000 else (cost_fast, None)
            assert abs(cost_ref - cost_fast) <= 1e-6 * (1 + abs(cost_ref))
            ref = f"{t_ref:.3g}"
            speed = f"{t_ref / t_fast:.0f}x"
        t_disc = _median_time(lambda c=counts: HPHP().publish(c, epsilon=EPS, rng=1), args.repeats)
        t_lap = _median_time(lambda c=counts: HPHP(noise="laplace").publish(c, epsilon=EPS, rng=1), args.repeats)
        line = (f"| {n:,} | {bounds.size - 1} | {t_fast:.3g} | {t_deque:.3g} | {ref} | {speed} | {t_disc:.3g} "
                f"| {t_lap:.3g} |")
        print(line, flush=True)
        lines.append(line)
    text = "\n".join(lines) + "\n"
    emit(text, args.markdown)


if __name__ == "__main__":
    main()
