"""Publishers of privpub.spatial: partitions, counts, roles, ledger, determinism, bad input, I/O."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import privpub.spatial._collect as collect_mod
from privpub.core import as_generator
from privpub.errors import DataNotFoundError, DomainError, ParameterError
from privpub.spatial import (
    AHEAD,
    GTR,
    HDG,
    KDGHT,
    PUBLISHERS,
    RapporGrid,
    SpatialRelease,
    UniformGrid,
    synthetic_checkin,
    synthetic_landmark,
)
from privpub.spatial._kdght import assign_roles
from privpub.spatial._kernels import oue_v1

BOX = (0.0, 0.0, 1.0, 1.0)
N = 20_000


@pytest.fixture(scope="module")
def points() -> np.ndarray:
    return synthetic_checkin(N, rng=3)


def _contains(rel_x0, rel_x1, rel_y0, rel_y1, p: np.ndarray, box=BOX) -> np.ndarray:
    """Number of leaves holding each point under the half-open rule (top/right domain edge closed)."""
    px, py = p[:, :1], p[:, 1:]
    inx = (px >= rel_x0) & ((px < rel_x1) | ((rel_x1 == box[2]) & (px == box[2])))
    iny = (py >= rel_y0) & ((py < rel_y1) | ((rel_y1 == box[3]) & (py == box[3])))
    return (inx & iny).sum(axis=1)


ALL = [KDGHT(), UniformGrid(), RapporGrid(), GTR(), KDGHT(kdg_split="budget"), KDGHT(combine="last"), HDG(),
       AHEAD()]


@pytest.mark.parametrize("pub", ALL, ids=lambda p: f"{type(p).__name__}")
@pytest.mark.parametrize("mode", ["simulate", "per_user"])
def test_leaves_partition_domain(pub, mode, points) -> None:
    rel = pub.publish(points, bounds=BOX, epsilon=1.0, rng=0, mode=mode)
    area = 1.0
    assert rel.areas.sum() == pytest.approx(area, rel=1e-12)
    probe = np.vstack([np.random.default_rng(1).random((10_000, 2)), points[:3000],
                       [[0, 0], [0, 1], [1, 0], [1, 1]]])
    hits = _contains(rel.x0, rel.x1, rel.y0, rel.y1, probe)
    assert np.all(hits == 1)
    loc = rel.locate(probe)
    assert np.all((rel.x0[loc] <= probe[:, 0]) & (probe[:, 0] <= rel.x1[loc]))
    for lev, level in enumerate(rel.levels):
        assert np.all(_contains(level.x0, level.x1, level.y0, level.y1, probe) == 1)
        assert ((level.x1 - level.x0) * (level.y1 - level.y0)).sum() == pytest.approx(area, rel=1e-12)
        if lev > 0:  # level l refines level l-1
            up = rel.levels[lev - 1]
            par = level.parent
            assert np.all((level.x0 >= up.x0[par]) & (level.x1 <= up.x1[par]))
            assert np.all((level.y0 >= up.y0[par]) & (level.y1 <= up.y1[par]))


@pytest.mark.parametrize("name", sorted(PUBLISHERS))
def test_counts_normsub_and_ledger(name, points) -> None:
    rel = PUBLISHERS[name]().publish(points, bounds=BOX, epsilon=0.5, rng=1)
    assert rel.values.min() >= 0
    assert rel.values.sum() == pytest.approx(N, rel=1e-6)
    assert rel.range_count([[0, 0, 1, 1]])[0] == pytest.approx(N, rel=1e-6)
    assert rel.ledger.total == 0.5 and rel.ledger.is_exhausted()
    assert sum(r.size for r in rel.roles) == N
    for r in rel.roles:
        assert r.epsilon * r.reports == pytest.approx(0.5)
    assert {e.block for e in rel.ledger.entries} == {"disjoint user groups"}
    assert [e.branch for e in rel.ledger.entries] == [r.name for r in rel.roles for _ in range(r.reports)]


def test_full_domain_ci_without_normsub_is_n(points) -> None:
    for pub in (KDGHT(postprocess="none"), GTR(postprocess="none")):
        rel = pub.publish(points, bounds=BOX, epsilon=0.5, rng=2)
        assert rel.range_count([[0, 0, 1, 1]])[0] == pytest.approx(N, rel=1e-9)


@pytest.mark.statistical
def test_full_domain_last_within_analytic_sd(points) -> None:
    eps = 0.5
    zs = []
    for seed in range(20):
        rel = KDGHT(combine="last", postprocess="none").publish(points, bounds=BOX, epsilon=eps, rng=seed)
        n_h = rel.roles[-1].size
        d = rel.n_leaves
        sigma = (N / n_h) * math.sqrt(n_h * (d * oue_v1(eps) + 1))
        zs.append((rel.range_count([[0, 0, 1, 1]])[0] - N) / sigma)
    assert np.all(np.abs(zs) < 4)
    assert abs(np.mean(zs)) < 4 / math.sqrt(len(zs))


@pytest.mark.parametrize("kdg_split", ["users", "budget"])
def test_every_user_in_exactly_one_group_and_reports_once(kdg_split, points, monkeypatch) -> None:
    calls: list[int] = []
    real = collect_mod.client_reports

    def spy(cells, d, **kw):
        calls.append(int(np.asarray(cells).size))
        return real(cells, d, **kw)

    monkeypatch.setattr(collect_mod, "client_reports", spy)
    pub = KDGHT(kdg_split=kdg_split)
    rel = pub.publish(points, bounds=BOX, epsilon=0.5, rng=4, mode="per_user")
    role_gen, _ = as_generator(4).spawn(2)
    ux, uy, rest = assign_roles(N, pub.eta, kdg_split, role_gen)
    rest = rest[role_gen.permutation(rest.size)]  # the per-user path orders R at random, then cuts it
    h = rel.params["h"]
    groups = np.array_split(rest, h + 1)
    if kdg_split == "users":
        ids = np.concatenate([ux, uy, *groups])
        assert np.array_equal(np.sort(ids), np.arange(N))  # a partition of the user ids
        assert sum(calls) == N  # each user's client ran exactly once
        assert [r.size for r in rel.roles] == [ux.size, uy.size] + [g.size for g in groups]
    else:
        assert np.array_equal(ux, uy)
        ids = np.concatenate([ux, *groups])
        assert np.array_equal(np.sort(ids), np.arange(N))
        assert sum(calls) == N + ux.size  # U' users send two reports at eps/2
        assert rel.roles[0].reports == 2 and rel.roles[0].epsilon == 0.25
    assert [r.name for r in rel.roles][-(h + 1):] == [f"U^{i}" for i in range(h + 1)]


def test_gtr_groups_partition_users(points, monkeypatch) -> None:
    calls: list[int] = []
    real = collect_mod.client_reports
    monkeypatch.setattr(collect_mod, "client_reports",
                        lambda cells, d, **kw: calls.append(len(cells)) or real(cells, d, **kw))
    rel = GTR().publish(points, bounds=BOX, epsilon=0.5, rng=0, mode="per_user")
    assert sum(calls) == N
    sizes = [r.size for r in rel.roles]
    assert sum(sizes) == N and max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("name", sorted(PUBLISHERS))
@pytest.mark.parametrize("mode", ["simulate", "per_user"])
def test_determinism(name, mode) -> None:
    pts = synthetic_landmark(5000, rng=0)
    a = PUBLISHERS[name]().publish(pts, bounds=BOX, epsilon=0.7, rng=9, mode=mode)
    b = PUBLISHERS[name]().publish(pts, bounds=BOX, epsilon=0.7, rng=9, mode=mode)
    for f in ("x0", "x1", "y0", "y1", "values"):
        assert np.array_equal(getattr(a, f), getattr(b, f))


def test_same_seed_same_roles_across_modes(points) -> None:
    a = KDGHT().publish(points, bounds=BOX, epsilon=0.5, rng=5, mode="simulate")
    b = KDGHT().publish(points, bounds=BOX, epsilon=0.5, rng=5, mode="per_user")
    assert [r.size for r in a.roles[:2]] == [r.size for r in b.roles[:2]]


def test_bounds_other_than_unit_square() -> None:
    gen = np.random.default_rng(0)
    pts = np.column_stack([gen.uniform(-120, -70, 8000), gen.uniform(25, 50, 8000)])
    box = (-120.0, 25.0, -70.0, 50.0)
    for name, cls in PUBLISHERS.items():
        rel = cls().publish(pts, bounds=box, epsilon=1.0, rng=0)
        assert rel.areas.sum() == pytest.approx(50 * 25, rel=1e-12), name
        assert rel.range_count([box])[0] == pytest.approx(8000, rel=1e-6)
        half = rel.range_count([[-120, 25, -95, 50]])[0]
        assert abs(half - 4000) < 1500, name


# ---- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(PUBLISHERS))
def test_bad_input(name) -> None:
    pub = PUBLISHERS[name]()
    pts = synthetic_checkin(500, rng=0)
    with pytest.raises(DomainError, match="inside the declared bounds"):
        pub.publish(np.vstack([pts, [[1.5, 0.5]]]), bounds=BOX, epsilon=1.0, rng=0)
    with pytest.raises(DomainError, match="NaN"):
        pub.publish(np.vstack([pts, [[np.nan, 0.5]]]), bounds=BOX, epsilon=1.0, rng=0)
    with pytest.raises(ParameterError, match=re.escape("bounds must satisfy x1 > x0 and y1 > y0")):
        pub.publish(pts, bounds=(0, 0, 0, 1), epsilon=1.0, rng=0)
    with pytest.raises(ParameterError, match="bounds must be given"):
        pub.publish(pts, bounds=None, epsilon=1.0, rng=0)
    with pytest.raises(ParameterError, match="bounds must have 4 numbers"):
        pub.publish(pts, bounds=(0, 0, 1), epsilon=1.0, rng=0)
    with pytest.raises(ParameterError, match="points must not be empty"):
        pub.publish(np.empty((0, 2)), bounds=BOX, epsilon=1.0, rng=0)
    with pytest.raises(ParameterError, match=re.escape("points must have shape (n, 2)")):
        pub.publish(np.zeros((5, 3)), bounds=BOX, epsilon=1.0, rng=0)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ParameterError, match="epsilon must be finite and > 0"):
            pub.publish(pts, bounds=BOX, epsilon=bad, rng=0)
    with pytest.raises(ParameterError, match="mode must be one of"):
        pub.publish(pts, bounds=BOX, epsilon=1.0, rng=0, mode="central")
    rel = type(pub)(clip=True).publish(np.vstack([pts, [[1.5, -0.5]]]), bounds=BOX, epsilon=1.0, rng=0)
    assert rel.n_users == 501
    with pytest.raises(ParameterError, match=re.escape("rects must have shape (q, 4)")):
        rel.range_count([[0, 0, 1]])
    with pytest.raises(ParameterError, match="x0 <= x1"):
        rel.range_count([[0.5, 0, 0.2, 1]])


def test_bad_parameters() -> None:
    with pytest.raises(ParameterError, match="eta must be in"):
        KDGHT(eta=1.5)
    with pytest.raises(ParameterError, match="kdg_split must be"):
        KDGHT(kdg_split="half")
    with pytest.raises(ParameterError, match="lam must be in"):
        KDGHT(lam=0.0)
    with pytest.raises(ParameterError, match="combine must be"):
        GTR(combine="mean")
    with pytest.raises(ParameterError, match="g must be an integer >= 2"):
        UniformGrid(g=1)
    with pytest.raises(ParameterError, match="grid_rule must be"):
        UniformGrid(grid_rule="x")
    with pytest.raises(ParameterError, match="height must be an integer"):
        GTR(height=0)


def test_tiny_inputs() -> None:
    pts = np.array([[0.1, 0.2], [0.9, 0.9], [0.5, 0.5]])
    for cls in PUBLISHERS.values():
        rel = cls().publish(pts, bounds=BOX, epsilon=1.0, rng=0)
        assert rel.values.sum() == pytest.approx(3.0)
    with pytest.raises(ParameterError, match="at least 2 users"):
        KDGHT().publish(pts[:1], bounds=BOX, epsilon=1.0, rng=0)


# ---- persistence and plotting ---------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(PUBLISHERS))
def test_json_round_trip_and_plot(name, tmp_path, points) -> None:
    rel = PUBLISHERS[name]().publish(points[:5000], bounds=BOX, epsilon=1.0, rng=0)
    path = rel.to_json(tmp_path / "r.json")
    back = SpatialRelease.from_json(path)
    q = np.array([[0.1, 0.2, 0.6, 0.7], [0, 0, 1, 1]])
    np.testing.assert_array_equal(back.range_count(q), rel.range_count(q))
    assert back.ledger.total == rel.ledger.total and back.roles == rel.roles
    assert len(back.levels) == len(rel.levels)
    rel.plot(path=tmp_path / "a.png")
    rel.plot(points=points[:5000], path=tmp_path / "b.png")
    assert (tmp_path / "a.png").stat().st_size > 1000 and (tmp_path / "b.png").stat().st_size > 1000
    with pytest.raises(DataNotFoundError, match="does not exist"):
        SpatialRelease.from_json(tmp_path / "missing.json")


def test_public_surface() -> None:
    import privpub.spatial as sp

    assert sp.__all__ == sorted(sp.__all__)
    names = {"KDGHT": "kdght", "UniformGrid": "ug", "GTR": "gtr", "RapporGrid": "rappor", "HDG": "hdg",
             "AHEAD": "ahead"}
    for name, key in names.items():
        assert name in sp.__all__ and sp.PUBLISHERS[key] is getattr(sp, name)
