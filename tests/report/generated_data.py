"""A data directory laid out like the shared datasets folder, filled from privpub's generators.

Small versions of every file the quick reproduction reads (no real data): the Hay et al. and
DPBench histograms from :func:`privpub.experiments.histogram.synthetic_like`, NLTCS from
:func:`privpub.datasets.bayesnet_table`, the two 2-D grids from
:func:`privpub.datasets.clustered_points`, the WorldCup98 stream from
:func:`privpub.datasets.bursty_stream`, and Iris from scikit-learn's bundled copy. Adult and
Census-Income are left out (the decision split needs their full 45,222 / 47,391 rows), so those
experiments are reported missing and the rest runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from privpub.datasets import bayesnet_table, bursty_stream, clustered_points, iris
from privpub.experiments.histogram import synthetic_like

#: bins of each generated histogram (small: the whole quick report runs in a few minutes)
HIST_BINS = 2048
STREAM_ITEMS = 40_000
GRID_POINTS = 60_000


def _grid(n: int, seed: int) -> np.ndarray:
    pts = clustered_points(n, rng=seed).points
    grid, _, _ = np.histogram2d(pts[:, 0], pts[:, 1], bins=256, range=[[0, 1], [0, 1]])
    return grid.astype(np.int64)


def write_generated_data(root: Path, seed: int = 0) -> Path:
    """Write the generated data directory under ``root`` and return it."""
    h = root / "hay2010_histograms"
    h.mkdir(parents=True)
    for name, kind in (("nettrace", "nettrace"), ("search_logs", "search_log"), ("social_network", "socialnetwork")):
        np.savetxt(h / f"{name}.txt", synthetic_like(kind, n=HIST_BINS, seed=seed), fmt="%d")
    d1 = root / "dpbench" / "1D"
    d1.mkdir(parents=True)
    for i, file in enumerate(("HEPTH.n4096.npy", "ADULTFRANK.n4096.npy", "NETTRACE.n4096.npy",
                              "SEARCHLOGS.n4096.npy", "RejectStats_0_4096_no_outliers.npy", "GrossCompenMDSalary1.npy")):
        np.save(d1 / file, synthetic_like("waitakere", n=HIST_BINS, seed=seed + i))
    g = root / "gowalla_dpbench_hist"
    g.mkdir()
    np.save(g / "checkin_256_256.npy", _grid(GRID_POINTS, seed))
    d2 = root / "dpbench" / "2D"
    d2.mkdir(parents=True)
    np.save(d2 / "BeijingTaxiS_256_256.npy", _grid(GRID_POINTS, seed + 1))
    n = root / "nltcs"
    n.mkdir()
    nl = bayesnet_table(3000, rng=seed, n_attributes=16, domain_sizes=[2] * 16)
    nl.frame.set_axis([str(i) for i in range(16)], axis=1).to_csv(n / "nltcs.csv", index=False)
    i = root / "iris"
    i.mkdir()
    iris().frame.to_csv(i / "iris.data", index=False)
    w = root / "worldcup98"
    w.mkdir()
    series = bursty_stream(STREAM_ITEMS, rng=seed)
    pd.DataFrame({"period": pd.date_range("1998-04-30 21:30", periods=STREAM_ITEMS, freq="min").astype(str),
                  "count": series}).to_csv(w / "invocation_count.csv", index=False)
    return root
