"""Exact grid Laplace (issue 34) against the floating-point Laplace it replaced.

Run on demand from the repository root (not part of the test suite)::

    python benchmarks/laplace_grid.py [--n 1000000] [--repeats 7] [--markdown PATH]

Times, per epsilon in {0.05, 0.1, 0.5, 1, 2, 10} (sensitivity 1), ``--n`` draws of

* *float*: ``Generator.laplace(0, 1 / epsilon, n)``, what ``privpub.core.laplace_noise`` drew
  before issue 34;
* *grid noise*: ``privpub.core.laplace_noise`` (discrete Laplace on the grid
  ``laplace_grid(epsilon)``, about ``2**20`` steps per unit of scale);
* *grid mechanism, real values*: ``privpub.core.laplace`` on ``n`` real values (rounded to the grid
  of ``changed=1``, then noised).

Reports the median of ``--repeats`` runs in ns per draw and the ratio to *float*. Timed
alternately in one loop (the machine is shared, so absolute numbers move; the ratio is the result).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _timing import emit, median_time

from privpub.core import laplace, laplace_noise

EPSILONS = (0.05, 0.1, 0.5, 1.0, 2.0, 10.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**6)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args()
    n = args.n
    laplace_noise(10, epsilon=1.0, rng=0)  # compile / load the exact sampler
    x = np.arange(n, dtype=np.float64) * 0.37
    rows = ["| epsilon | float (ns/draw) | grid noise (ns/draw) | ratio | grid mechanism, real values (ns/draw) | ratio |",
            "|---|---|---|---|---|---|"]
    for eps in EPSILONS:
        g_float, g_grid, g_mech = (np.random.default_rng(s) for s in (1, 2, 3))
        t_float = median_time(lambda e=eps, g=g_float: g.laplace(0.0, 1.0 / e, size=n), args.repeats, time.perf_counter)
        t_grid = median_time(lambda e=eps, g=g_grid: laplace_noise(n, epsilon=e, rng=g), args.repeats, time.perf_counter)
        t_mech = median_time(lambda e=eps, g=g_mech: laplace(x, epsilon=e, rng=g, changed=1), args.repeats,
                             time.perf_counter)
        ns = 1e9 / n
        rows.append(f"| {eps:g} | {t_float * ns:.1f} | {t_grid * ns:.1f} | {t_grid / t_float:.2f}x | "
                    f"{t_mech * ns:.1f} | {t_mech / t_float:.2f}x |")
    emit("\n".join(rows) + "\n", args.markdown)


if __name__ == "__main__":
    main()
