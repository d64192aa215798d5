"""Benchmark of privpub.decision's taxonomy validation (issue 12: "10^4 categories: 14 s").

Run on demand (not part of the test suite)::

    python benchmarks/decision_taxonomy.py [--sizes 1000,10000,100000] [--repeats 3]
        [--markdown docs/benchmarks/decision_taxonomy.md]

For each number of categories: parse a flat tree, build the default balanced tree, parse the
balanced tree's brace form, and run ``check_leaves`` (leaves equal the categories, labels
unique), then one MAXGDDP release with that attribute (2,000 records, 2 levels). Side by side,
in the same run, the quadratic duplicate check privpub used before (``labels.count`` per label),
up to 10^4 categories, so that the ratio survives machine load.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from _timing import median_run as _median

from privpub.decision import MAXGDDP, CategoricalAttribute, Schema, Taxonomy


def _quadratic_duplicates(tree: Taxonomy) -> list[str]:
    """The former check (before issue 12): one ``list.count`` per label, O(n^2)."""
    labels = [n.label for n in tree.nodes()]
    return sorted({x for x in labels if labels.count(x) > 1})


def _measure(n: int, repeats: int) -> tuple[int, float, float, float, float, float]:
    cats = [f"c{i}" for i in range(n)]
    flat = {"Any": cats}
    balanced = Taxonomy.balanced(cats)
    brace = balanced.to_brace()
    t_flat, _ = _median(lambda: Taxonomy.parse(flat).check_leaves(cats, "c"), repeats)
    t_bal, _ = _median(lambda: Taxonomy.balanced(cats).check_leaves(cats, "c"), repeats)
    t_brace, _ = _median(lambda: Taxonomy.parse(brace).check_leaves(cats, "c"), repeats)
    t_old = _median(lambda: _quadratic_duplicates(balanced), 1)[0] if n <= 10_000 else float("nan")
    schema = Schema([CategoricalAttribute("c", cats)], class_name="y", classes=["a", "b"])
    frame = pd.DataFrame({"c": np.random.default_rng(0).choice(cats, 2000), "y": ["a", "b"] * 1000})
    t_pub, _ = _median(lambda: MAXGDDP(levels=2).publish(frame, schema=schema, epsilon=1.0, rng=0), repeats)
    print(f"{n:>7d} categories: flat {t_flat:.4f} s, balanced {t_bal:.4f} s, brace {t_brace:.4f} s, "
          f"former quadratic duplicate check {t_old:.4f} s, MAXGDDP publish {t_pub:.3f} s", flush=True)
    return n, t_flat, t_bal, t_brace, t_old, t_pub


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    rows = [_measure(int(x), args.repeats) for x in args.sizes.split(",")]
    if args.markdown is not None:
        lines = [
            "# Benchmarks: privpub.decision taxonomies", "",
            f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}. Median of {args.repeats} runs (the former check: one run).", "",
            "Command: `python benchmarks/decision_taxonomy.py " + " ".join(sys.argv[1:]) + "`", "",
            f"Load average while measuring: {os.getloadavg()[0]:.1f} (shared machine).", "",
            "| categories | flat parse + check (s) | balanced build + check (s) | brace parse + check (s) "
            "| former duplicate check alone (s) | MAXGDDP publish, h = 2 (s) |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for n, a, b, c, d, e in rows:
            old = "" if np.isnan(d) else f"{d:.3f}"
            lines.append(f"| {n} | {a:.4f} | {b:.4f} | {c:.4f} | {old} | {e:.3f} |")
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"-> {args.markdown}")


if __name__ == "__main__":
    main()
