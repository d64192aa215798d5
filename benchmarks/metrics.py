"""Benchmark: privpub.metrics range-query helpers and distances on paper-sized inputs.

Run on demand::

    python benchmarks/metrics.py [--queries 1000000] [--repeats 5]

Prints the median wall time of each call; medians are recorded in docs/benchmarks/metrics.md.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import median_time as _median

import privpub.metrics as M


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    q, reps = args.queries, args.repeats
    g = np.random.default_rng(0)
    hist = g.integers(0, 100, 65_536)
    ranges = M.random_ranges_1d(65_536, q, rng=1)
    grid = g.integers(0, 100, (256, 256))
    rects = M.random_rectangles_2d((256, 256), q, rng=2)
    boxes = M.random_boxes_2d(q, rng=3) * 256
    noisy = hist + g.laplace(0, 10, 65_536)
    trials = hist + g.laplace(0, 10, (20, 65_536))
    rows = [
        (f"range_sums_1d: {q:,} ranges, n = 65,536", lambda: M.range_sums_1d(hist, ranges)),
        (f"range_sums_2d: {q:,} rectangles, 256 x 256", lambda: M.range_sums_2d(grid, rects)),
        (f"box_sums_2d: {q:,} real boxes, 256 x 256", lambda: M.box_sums_2d(grid, boxes)),
        ("kl_divergence: n = 65,536", lambda: M.kl_divergence(hist, noisy)),
        ("total_variation: n = 65,536", lambda: M.total_variation(hist, noisy)),
        ("lnmse: T = 20, n = 65,536, r = 50..450 (9 lengths)",
         lambda: M.lnmse(hist, trials, list(range(50, 451, 50)))),
    ]
    print(f"{'call':<55} {'median s':>10}")
    for label, fn in rows:
        print(f"{label:<55} {_median(fn, reps):>10.4f}")


if __name__ == "__main__":
    main()
