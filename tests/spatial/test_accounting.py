"""The spatial publishers' ledgers are the record of what their oracles charged (issue 12).

Every publisher runs one parallel block over disjoint user groups; each group's oracle charges
its branch as it draws. These tests pin the schedule (mechanism, epsilon, block, branch) and
show that a report drawn at another epsilon than the one accounted for cannot go unnoticed.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import privpub.spatial._collect as collect_mod
from privpub.core import Session
from privpub.errors import BudgetExceededError
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
)

BOX = (0.0, 0.0, 1.0, 1.0)
EPS = 0.8
BLOCK = "disjoint user groups"


@pytest.fixture(scope="module")
def points() -> np.ndarray:
    return synthetic_checkin(20_000, rng=11)


def _schedule(rel: SpatialRelease) -> list[tuple[str, str, str, float, str]]:
    return [(e.block, e.branch, e.mechanism, e.epsilon, e.composition) for e in rel.ledger.entries]


def _expected(branches: list[tuple[str, str, float]]) -> list[tuple[str, str, str, float, str]]:
    return [(BLOCK, b, mech, eps, "parallel") for b, mech, eps in branches]


@pytest.mark.parametrize("mode", ["simulate", "per_user"])
def test_kdght_schedule_users_mode(points, mode) -> None:
    rel = KDGHT().publish(points, bounds=BOX, epsilon=EPS, rng=3, mode=mode)
    h = rel.params["h"]
    assert _schedule(rel) == _expected([("U'_x", "OUE", EPS), ("U'_y", "OUE", EPS)]
                                       + [(f"U^{i}", "OUE", EPS) for i in range(h + 1)])
    assert rel.ledger.total == EPS and rel.ledger.is_exhausted()
    assert all(e.step == "collect" and e.parts == 1 for e in rel.ledger.entries)


def test_kdght_schedule_budget_mode_is_one_branch_with_two_half_charges(points) -> None:
    rel = KDGHT(kdg_split="budget").publish(points, bounds=BOX, epsilon=EPS, rng=3)
    h = rel.params["h"]
    assert _schedule(rel) == _expected([("U'", "OUE", EPS / 2), ("U'", "OUE", EPS / 2)]
                                       + [(f"U^{i}", "OUE", EPS) for i in range(h + 1)])
    assert rel.ledger.total == EPS
    assert rel.roles[0].name == "U'" and rel.roles[0].reports == 2 and rel.roles[0].epsilon == EPS / 2


@pytest.mark.parametrize(("pub", "branches"), [
    (UniformGrid(), [("U", "OUE")]),
    (RapporGrid(), [("U", "SUE")]),
    (HDG(), [("U_x", "OUE"), ("U_y", "OUE"), ("U_xy", "OUE")]),
], ids=["ug", "rappor", "hdg"])
def test_flat_schedules(points, pub, branches) -> None:
    rel = pub.publish(points, bounds=BOX, epsilon=EPS, rng=0)
    assert _schedule(rel) == _expected([(b, m, EPS) for b, m in branches])
    assert rel.ledger.total == EPS


def test_tree_schedules(points) -> None:
    gtr = GTR().publish(points, bounds=BOX, epsilon=EPS, rng=0)
    big_h = gtr.params["height"]
    assert _schedule(gtr) == _expected([(f"U^{i}", "OUE", EPS) for i in range(1, big_h + 1)])
    ahead = AHEAD(height=6).publish(points, bounds=BOX, epsilon=EPS, rng=0)
    assert _schedule(ahead) == _expected([(f"U^{i}", "OUE", EPS) for i in range(6)])
    assert gtr.ledger.total == ahead.ledger.total == EPS


@pytest.mark.parametrize("name", sorted(PUBLISHERS))
def test_roles_are_what_was_charged(points, name) -> None:
    """The roles on the release agree with the ledger: one branch per group, its charges."""
    rel = PUBLISHERS[name]().publish(points, bounds=BOX, epsilon=EPS, rng=2)
    assert sum(r.size for r in rel.roles) == points.shape[0]
    for role in rel.roles:
        charged = [e.epsilon for e in rel.ledger.entries if e.branch == role.name]
        assert len(charged) == role.reports
        assert math.fsum(charged) == pytest.approx(EPS) == role.epsilon * role.reports
        assert all(e.note.startswith(f"{role.name}: {role.size:,} users") for e in rel.ledger.entries
                   if e.branch == role.name)


def test_per_user_chunks_are_disjoint_branches(points, monkeypatch) -> None:
    """A group too large for one batch of reports is served in disjoint chunks, one branch each."""
    monkeypatch.setattr(collect_mod, "_CHUNK_BITS", 36 * 6000)
    rel = UniformGrid(g=6).publish(points, bounds=BOX, epsilon=EPS, rng=0, mode="per_user")
    chunks = [e for e in rel.ledger.entries]
    assert sum(e.parts for e in chunks) == 4  # 20 000 users in chunks of 6 000
    assert {e.mechanism for e in chunks} == {"OUE"} and {e.epsilon for e in chunks} == {EPS}
    assert rel.ledger.total == EPS and [r.size for r in rel.roles] == [20_000]


@pytest.mark.parametrize("name", sorted(PUBLISHERS))
def test_session_is_charged_and_refuses_without_drawing(points, name) -> None:
    session = Session(total_epsilon=1.0)
    pub = PUBLISHERS[name]()
    pub.publish(points, bounds=BOX, epsilon=0.7, rng=0, session=session)
    assert session.spent == pytest.approx(0.7)
    gen = np.random.default_rng(5)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError, match="cannot pay"):
        pub.publish(points, bounds=BOX, epsilon=0.7, rng=gen, session=session)
    assert gen.bit_generator.state == state  # nothing was drawn
    assert session.spent == pytest.approx(0.7)
    # bad input is refused before the session is touched
    with pytest.raises(ValueError):
        pub.publish(points, bounds=(0, 0, 0, 1), epsilon=0.2, rng=0, session=session)
    assert [c.status for c in session.charges] == ["spent"]


def test_a_report_at_a_larger_epsilon_cannot_pass(points, monkeypatch) -> None:
    """Mutation check: a round drawn at twice the accounted epsilon is refused before drawing."""
    real = collect_mod.Collection.counts

    def doubled(self, name, counts, *, epsilon, mechanism="OUE"):
        if name == "U'_x":
            epsilon = 2 * epsilon
        return real(self, name, counts, epsilon=epsilon, mechanism=mechanism)

    monkeypatch.setattr(collect_mod.Collection, "counts", doubled)
    with pytest.raises(BudgetExceededError, match="over its declared epsilon"):
        KDGHT().publish(points, bounds=BOX, epsilon=EPS, rng=0)


@pytest.mark.parametrize("name", sorted(PUBLISHERS))
def test_json_round_trip_keeps_the_ledger_record(points, name, tmp_path) -> None:
    rel = PUBLISHERS[name]().publish(points[:4000], bounds=BOX, epsilon=EPS, rng=1)
    back = SpatialRelease.from_json(rel.to_json(tmp_path / "r.json"))
    assert back.ledger == rel.ledger and back.ledger.frozen
    assert back.ledger.to_records() == rel.ledger.to_records()


def test_no_hand_written_ledgers_in_spatial() -> None:
    src = Path(__file__).resolve().parents[2] / "src" / "privpub" / "spatial"
    for path in src.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"BudgetLedger\(|\.spend\(|\.spend_rest\(", text), path.name
        assert not re.search(r"\.(laplace|exponential|gumbel|geometric)\(", text), path.name
