"""privpub.stream: publish a count stream in real time and answer range queries inside the window.

Run: python examples/stream.py   (built-in generated data, a few seconds)
"""

from __future__ import annotations

import numpy as np

from privpub.datasets import bursty_stream
from privpub.stream import HQRTP, RTP

items = bursty_stream(2_000, rng=0)                  # one count per time step (known truth)
window = 256

publisher = HQRTP(window=window, epsilon=1.0, rng=0)  # stateful: items arrive one at a time ...
for x in items[:1_000]:
    publisher.append(int(x))
publisher.extend(items[1_000:])                      # ... or in batches
t = items.size
print(f"query [{t - 9}, {t}]: true {items[t - 10:t].sum()}, published {publisher.query(t - 9, t):.1f}")

# a workload of short queries inside the window: (q, 2) array of 1-based inclusive [l, r]
gen = np.random.default_rng(1)
starts = gen.integers(t - window + 1, t - 8, size=200)
queries = np.column_stack([starts, starts + 7])
truth = np.array([items[l - 1:r].sum() for l, r in queries])
for cls in (RTP, HQRTP):
    pub = cls(window=window, epsilon=1.0, rng=2)
    pub.extend(items)
    err = np.abs(np.asarray(pub.answer(queries), dtype=float) - truth).mean()
    print(f"{cls.__name__:>6}: mean absolute error of 8-step queries {err:.1f}")
print(publisher.ledger)                              # event-level epsilon
