"""privpub.spatial: local-DP 2-D points (KDG-HT) answering rectangle range queries.

Run: python examples/spatial.py   (built-in generated data, a few seconds)
"""

from __future__ import annotations

import numpy as np

from privpub.datasets import clustered_points
from privpub.spatial import AHEAD, GTR, HDG, KDGHT, UniformGrid

points = clustered_points(200_000, rng=0).points     # (n, 2), one point per user
bounds = (0.0, 0.0, 1.0, 1.0)                        # public bounds of the domain
rects = np.array([[0.1, 0.1, 0.3, 0.3], [0.0, 0.0, 0.5, 1.0], [0.4, 0.2, 0.9, 0.6]])  # [x0, y0, x1, y1]
x, y = points[:, 0, None], points[:, 1, None]
truth = ((x >= rects[:, 0]) & (x < rects[:, 2]) & (y >= rects[:, 1]) & (y < rects[:, 3])).sum(axis=0)

for publisher in (KDGHT(), AHEAD(), HDG(), GTR(), UniformGrid()):
    # mode="simulate": exact aggregated simulation of every user's report (mode="per_user" runs the clients)
    release = publisher.publish(points, bounds=bounds, epsilon=0.5, rng=0, mode="simulate")
    est = release.range_count(rects)
    print(f"{type(publisher).__name__:>12}: " + ", ".join(f"{e:9.0f} (true {t:7.0f})" for e, t in zip(est, truth)))
print(release.ledger)                                 # each user reports once: parallel composition
print(KDGHT().publish(points, bounds=bounds, epsilon=0.5, rng=0).ledger)  # one branch per user group
