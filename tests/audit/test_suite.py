"""The audit suite: every private step's lower bound <= its declared epsilon, every negative control flagged.

Fast tier: each case of :func:`privpub.audit.audit_cases` (core mechanisms, every LDP oracle,
the parts' private steps) at its fast trial count. Full tier (``--full``): five times the trials
plus extra epsilons and the OS-seeded generator; its table is recorded in docs/privacy.md.
"""

from __future__ import annotations

import math

import pytest

from privpub.audit import AuditCase, audit_cases, skipped_parts

FAST = audit_cases("fast")
FULL = audit_cases("full")
SKIPPED = skipped_parts()
PARTS = ("histogram", "stream", "spatial", "decision", "ldp_synth")


def _ids(cases: list[AuditCase]) -> list[str]:
    return [c.name for c in cases]


def _check(case: AuditCase, tier: str) -> None:
    result = case.audit(tier=tier, rng=0)
    assert result.passed, f"{case.name}: {result}"
    assert result.lower_bound <= case.epsilon
    if case.exact is not None:
        assert case.exact() <= case.epsilon + 1e-9
    if case.control is not None:
        control = case.audit(tier=tier, rng=1, control=True)
        assert not control.passed, f"negative control of {case.name} ({case.control_note}) not flagged: {control}"
    if case.exact_control is not None:
        assert case.exact_control() > case.epsilon


@pytest.mark.statistical
@pytest.mark.parametrize("case", FAST, ids=_ids(FAST))
def test_fast_tier(case: AuditCase) -> None:
    _check(case, "fast")


@pytest.mark.statistical
@pytest.mark.audit_full
@pytest.mark.parametrize("case", FULL, ids=_ids(FULL))
def test_full_tier(case: AuditCase) -> None:
    _check(case, "full")


def test_every_case_has_a_negative_control() -> None:
    assert all(c.control is not None for c in FULL)


def test_core_and_ldp_are_covered() -> None:
    names = {c.name for c in FAST}
    for step in ("core.laplace", "core.discrete_laplace", "core.exponential_mechanism", "core.report_noisy_max",
                 "ldp.GRR.perturb", "ldp.SUE.perturb", "ldp.OUE.perturb", "ldp.OLH.perturb"):
        assert step in names
    assert "core" not in SKIPPED and "ldp" not in SKIPPED


@pytest.mark.parametrize("part", PARTS)
def test_part_is_audited(part: str) -> None:
    if part in SKIPPED:
        pytest.skip(f"privpub.{part} not audited: {SKIPPED[part]}")
    assert any(c.part == part for c in FAST)


def test_exact_epsilons_are_tight() -> None:
    for case in FAST:
        if case.exact is not None and case.part == "ldp":
            assert math.isclose(case.exact(), case.epsilon, abs_tol=1e-7), case.name
