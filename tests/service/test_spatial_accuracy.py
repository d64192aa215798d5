"""A multi-phase KDG-HT campaign over HTTP matches the library's KDG-HT accuracy on the Gowalla grid
(mean relative error of range queries over 5 seeds, within sampling error)."""

from __future__ import annotations

import math

import httpx
import numpy as np
import pytest
from service_helpers import ADMIN_TOKEN, Server, create, fresh_database

from privpub.client import Gateway
from privpub.experiments.spatial import SIZE_CLASSES, load_points
from privpub.spatial import KDGHT, random_queries
from privpub.spatial._kernels import overlap_answer

N = 100_000
SEEDS = range(5)
EPSILON = 1.0


def _mre(est: np.ndarray, truth: np.ndarray, n: int) -> float:
    return float(np.mean(np.abs(est - truth) / np.maximum(truth, 0.001 * n)))


@pytest.mark.slow
def test_kdght_over_http_matches_the_library_on_gowalla(data_dir, tmp_path) -> None:
    points = load_points("Checkin", data_dir, N)
    lo, hi = SIZE_CLASSES[1]
    queries = random_queries(300, lo, hi, rng=8)
    truth = np.array([np.count_nonzero((points[:, 0] >= q[0]) & (points[:, 0] <= q[2]) & (points[:, 1] >= q[1])
                                       & (points[:, 1] <= q[3])) for q in queries], dtype=np.float64)
    gen = fresh_database("sqlite", tmp_path)
    server = Server(next(gen), tmp_path / "server.log").start()
    service, library = [], []
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                          timeout=600) as admin:
            for seed in SEEDS:
                cfg = create(admin, name=f"gowalla {seed}", kind="spatial", method="kdght", epsilon=EPSILON,
                             bounds=[0, 0, 1, 1], expected_participants=N, min_reports=N, enrollment=True)
                tokens = admin.post(f"/campaigns/{cfg['id']}/tokens", json={"count": N}).json()["tokens"]
                order = np.random.default_rng(100 + seed).permutation(N)  # participants arrive at random
                res = Gateway(server.url, cfg["id"], rng=seed, batch_size=1000).submit_many(points[order],
                                                                                          tokens=tokens)
                assert res.new == N
                rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
                lv = {k: np.asarray(v, dtype=np.float64) for k, v in rel["leaves"].items()}
                est = overlap_answer(lv["x0"], lv["x1"], lv["y0"], lv["y1"], lv["value"], queries)
                service.append(_mre(est, truth, N))
                lib = KDGHT().publish(points, bounds=(0, 0, 1, 1), epsilon=EPSILON, rng=seed, mode="simulate")
                library.append(_mre(lib.range_count(queries), truth, N))
    finally:
        server.stop()
        for _ in gen:
            pass
    s, lib_ = np.asarray(service), np.asarray(library)
    print(f"mean relative error over {len(SEEDS)} seeds: service {s.mean():.4f} (per seed {np.round(s, 4).tolist()}), "
          f"library {lib_.mean():.4f} (per seed {np.round(lib_, 4).tolist()})")
    sampling = math.sqrt(s.var(ddof=1) / s.size + lib_.var(ddof=1) / lib_.size)
    # the two means agree within 3 standard errors of their difference (plus 10% for the
    # arrival-driven phase sizes: the service plans its phases from expected_participants)
    assert abs(s.mean() - lib_.mean()) <= 3 * sampling + 0.1 * lib_.mean(), (service, library)
