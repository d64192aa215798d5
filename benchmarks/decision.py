"""Benchmark of privpub.decision: MAXGDDP and DiffGen releases on Adult (h = 4..16) and Census-Income.

Run on demand (not part of the test suite)::

    PRIVPUB_DATA=../shared/datasets python benchmarks/decision.py [--repeats 3] [--levels 4,7,10,13,16]
        [--markdown docs/benchmarks/decision.md]

Times ``publish`` alone (epsilon = 1, the paper's Adult setting; Census at epsilon = 2, h = 10 and
13), then, for Adult, the classifier fit on the weighted cells as the reproduction does it.
Reports medians. Goal (issue 6): Adult at h = 16 under 5 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

from _timing import median_run as _median

from privpub.decision import MAXGDDP, DiffGen
from privpub.experiments.decision import dataset_taxonomies, load_split, make_classifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--levels", default="4,7,10,13,16")
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument("--no-fit", action="store_true", help="Skip the classifier timings.")
    args = parser.parse_args()
    levels = [int(h) for h in args.levels.split(",")]
    rows: list[tuple[str, str, int, float, float, int, int, str]] = []
    for name, eps, hs in (("adult", 1.0, levels), ("census_income_kdd", 2.0, [10, 13])):
        train, _, schema = load_split(name)
        taxes = dataset_taxonomies(name)
        for h in hs:
            for pub in (MAXGDDP(levels=h, taxonomies=taxes), DiffGen(levels=h, taxonomies=taxes)):
                sec, rel = _median(lambda pub=pub, tr=train, sc=schema, e=eps: pub.publish(tr, schema=sc, epsilon=e, rng=0),
                                   args.repeats)
                fit = float("nan")
                if name == "adult" and not args.no_fit:
                    X, y, w = rel.encode_cells()
                    fit, _ = _median(lambda X=X, y=y, w=w: make_classifier(0).fit(X, y, sample_weight=w), 1)
                label = type(pub).__name__
                rows.append((name, label, h, sec, fit, rel.n_cells, len(rel.counts), f"eps={eps:g}"))
                print(f"{name:18s} {label:8s} h={h:2d} publish {sec:7.3f} s  fit {fit:7.3f} s  "
                      f"cells {rel.n_cells:>9d}  released {len(rel.counts):>8d}", flush=True)
    if args.markdown is not None:
        lines = [
            "# Benchmarks: privpub.decision", "",
            f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}. Median of {args.repeats} runs of `publish` (rng=0, discrete "
            "Laplace leaf noise); `fit` = one weighted C4.5-stand-in fit on the released cells.", "",
            "Command: `PRIVPUB_DATA=../shared/datasets python benchmarks/decision.py "
            + " ".join(sys.argv[1:]) + "`", "",
            f"Load average while measuring: {os.getloadavg()[0]:.1f} (shared machine).", "",
            "| dataset | method | h | publish (s) | fit (s) | cells | released cells | setting |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [f"| {d} | {m} | {h} | {s:.3f} | {'-' if f != f else f'{f:.2f}'} | {c} | {r} | {note} |"
                  for d, m, h, s, f, c, r, note in rows]
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
