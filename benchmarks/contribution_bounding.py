"""Contribution bounding (issue 25): the error of a person-level histogram against the bound k.

A generated check-in table with a heavy-tailed rows-per-person law (discrete Pareto, shape 1.1:
most people check in a few times, a few thousands of times; heavy users favour a few venues),
64 public venue bins. For each k, every person is bounded to k rows
(``counts_from_records(..., privacy_ids=, max_contributions=k)``) and the histogram is published
at epsilon 1 **per person** (the mechanisms spend 1/k per row); the error is the relative L1
distance to the true histogram of all rows, split into the bias of bounding (rows dropped) and the
total with noise. The default suggestion (``suggest_max_contributions``, quantile 0.9, epsilon 0.1
on top of the release) is marked. About 20 seconds on one core.

    python benchmarks/contribution_bounding.py [--people 5000] [--trials 10] [--shape 1.1] [--markdown out.md]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _timing import emit

from privpub.histogram import HPHP, LaplaceHistogram, counts_from_records, suggest_max_contributions

N_BINS = 64
EPSILON = 1.0
SUGGEST_EPSILON = 0.1
KS = (1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377)


def checkin_table(people: int, shape: float = 1.1, seed: int = 0) -> pd.DataFrame:
    """``user``, ``venue``: rows per person ~ ceil(Lomax(shape)) capped at 5000; each person has three
    favourite venues (drawn by popularity, Zipf 1.0) that take 70% of their check-ins."""
    gen = np.random.default_rng(seed)
    rows = np.minimum(np.ceil(gen.pareto(shape, people) + 1e-9).astype(np.int64), 5000)
    pop = 1.0 / np.arange(1, N_BINS + 1)
    pop /= pop.sum()
    favourites = gen.choice(N_BINS, size=(people, 3), p=pop)
    user = np.repeat(np.arange(people), rows)
    fav = favourites[user, gen.integers(0, 3, user.size)]
    venue = np.where(gen.random(user.size) < 0.7, fav, gen.choice(N_BINS, size=user.size, p=pop))
    return pd.DataFrame({"user": user, "venue": venue})


def run(people: int, trials: int, shape: float = 1.1) -> tuple[str, dict[str, object]]:
    table = checkin_table(people, shape)
    bins = np.arange(N_BINS + 1)
    truth = counts_from_records(table["venue"], bins=bins).astype(np.float64)
    total = truth.sum()
    rows = table.groupby("user").size().to_numpy()
    suggestions = [suggest_max_contributions(table["user"], epsilon=SUGGEST_EPSILON, quantile=0.9, upper=500,
                                             rng=100 + s).max_contributions for s in range(trials)]
    k_suggested = int(np.median(suggestions))
    k_99 = int(np.median([suggest_max_contributions(table["user"], epsilon=SUGGEST_EPSILON, quantile=0.99, upper=500,
                                                    rng=200 + s).max_contributions for s in range(trials)]))
    ks = sorted(k for k in {*KS, k_suggested, int(rows.max())} if k <= rows.max())
    publishers = {"Laplace": LaplaceHistogram(), "HPHP": HPHP()}
    lines = []
    for k in ks:
        bias, err = [], {name: [] for name in publishers}
        for t in range(trials):
            counts = counts_from_records(table["venue"], bins=bins, privacy_ids=table["user"], max_contributions=k,
                                         rng=1000 * k + t)
            bias.append(np.abs(counts - truth).sum() / total)
            for name, pub in publishers.items():
                out = pub.publish(counts, epsilon=EPSILON, rng=7 * t + k).counts
                err[name].append(np.abs(out - truth).sum() / total)
        mark = " **(suggested)**" if k == k_suggested else (" (largest contribution)" if k == rows.max() else "")
        lines.append(f"| {k}{mark} | {np.mean(rows > k):.1%} | {np.mean(bias):.4f} | "
                     f"{np.mean(err['Laplace']):.4f} | {np.mean(err['HPHP']):.4f} |")
    record = {name: np.mean([np.abs(pub.publish(truth.astype(np.int64), epsilon=EPSILON, rng=t).counts - truth).sum()
                             / total for t in range(trials)]) for name, pub in publishers.items()}
    head = (f"Rows per person ~ Lomax({shape:g}). {people:,} people, {len(table):,} check-ins, rows per person: median {int(np.median(rows))}, "
            f"90% quantile {int(np.quantile(rows, 0.9))}, max {int(rows.max())}; {N_BINS} venue bins; epsilon "
            f"{EPSILON:g} per person; relative L1 error, mean of {trials} trials. Suggested k over {trials} seeds: "
            f"{sorted(suggestions)} (median {k_suggested}; the suggestion costs epsilon {SUGGEST_EPSILON:g}); at "
            f"quantile 0.99 the median suggestion is {k_99}.\n\n"
            "| k | people above k | bias of bounding | Laplace | HPHP |\n| --- | --- | --- | --- | --- |\n")
    tail = (f"\n\nFor reference, the **record-level** release at epsilon {EPSILON:g} (protects one row: the heaviest "
            f"person, with {int(rows.max())} rows, only at {int(rows.max()) * EPSILON:g}): Laplace "
            f"{record['Laplace']:.4f}, HPHP {record['HPHP']:.4f}.")
    return head + "\n".join(lines) + tail, {"k_suggested": k_suggested, "suggestions": suggestions, "k_99": k_99}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=5000)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--shape", type=float, default=1.1, help="Lomax shape of the rows per person (> 0)")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    if not 100 <= args.people <= 200_000 or not 1 <= args.trials <= 100 or not 0.5 <= args.shape <= 10:
        parser.error("--people must be in [100, 200000], --trials in [1, 100], --shape in [0.5, 10]")
    start = time.perf_counter()
    text, _ = run(args.people, args.trials, args.shape)
    emit(text + f"\n\n({time.perf_counter() - start:.0f} s)", args.markdown)


if __name__ == "__main__":
    main()
