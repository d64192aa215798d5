"""Person-level audit cases (issue 25): the decision publishers with contribution bounding are
audited on neighbours that differ by one whole person, with the unbounded release as the
negative control (the audits themselves run in test_suite.py's tiers)."""

from __future__ import annotations

import pytest

from privpub.audit import audit_cases


@pytest.mark.parametrize("name", ["MAXGDDP", "DiffGen"])
def test_decision_publishers_are_audited_per_person(name: str) -> None:
    fast = {c.name: c for c in audit_cases("fast", parts=["decision"])}
    full = {c.name: c for c in audit_cases("full", parts=["decision"])}
    beyond = fast[f"decision.{name}.publish[person k=2, 6 rows]"]
    assert "no bounding" in beyond.control_note
    assert f"decision.{name}.publish[person k=2, 2 rows]" in full  # up to k: full tier
    # the neighbours differ by exactly one person's rows, all of them
    extra = beyond.x_neighbour.iloc[len(beyond.x):]
    assert len(beyond.x_neighbour) == len(beyond.x) + 6 and set(extra["user"]) == {"p"}
    assert "p" not in set(beyond.x["user"])
    assert beyond.x_neighbour.iloc[: len(beyond.x)].equals(beyond.x)
