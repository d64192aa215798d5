"""privpub.histogram: publish a histogram with the private HPHP and compare it with the baselines.

Run: python examples/histogram.py   (built-in generated data, a few seconds)
"""

from __future__ import annotations

import numpy as np

from privpub.datasets import zipf_histogram
from privpub.histogram import AHP, HPHP, LaplaceHistogram

counts = zipf_histogram(512, 50_000, 1.1, rng=0)     # known truth
epsilon = 0.1

release = HPHP().publish(counts, epsilon=epsilon, rng=0)
print(f"HPHP: {counts.size} bins published as {len(release.groups)} groups")
print(f"range [0, 100): true {counts[:100].sum()}, published {release.range_query(0, 100):.0f}")
print(release.ledger)                                # where epsilon went; total == 0.1

for publisher in (HPHP(), AHP(), LaplaceHistogram()):
    published = publisher.publish(counts, epsilon=epsilon, rng=1).counts
    mae = np.abs(np.asarray(published, dtype=float) - counts).mean()
    print(f"{type(publisher).__name__:>16}: mean absolute error per bin {mae:7.2f}")
