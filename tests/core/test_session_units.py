"""Sessions compose one privacy unit; record-level releases enter a person-level session only
converted explicitly (Session.convert_record_level), and the record states both amounts."""

from __future__ import annotations

import json

import pytest

from privpub import ParameterError, PrivacyUnit, Session
from privpub.histogram import LaplaceHistogram, UnitCounts

PERSON = PrivacyUnit.person("user", 5)


@pytest.mark.parametrize("store", ["memory", "file"])
def test_conversion_charges_k_times_epsilon_and_states_both(store, tmp_path):
    session = (Session(total_epsilon=4.0) if store == "memory"
               else Session.open(tmp_path / "budget.json", total_epsilon=4.0))
    LaplaceHistogram().publish(UnitCounts([3, 4], PERSON), epsilon=1.0, rng=0, session=session)
    with pytest.raises(ParameterError) as info:  # no conversion: refused, nothing recorded
        LaplaceHistogram().publish([3, 4], epsilon=0.2, rng=0, session=session)
    assert info.value.param == "privacy_unit" and len(session.charges) == 1
    converted = session.convert_record_level(5)
    assert converted.converts_to == PERSON
    release = LaplaceHistogram().publish([3, 4], epsilon=0.2, rng=0, session=converted)
    assert release.ledger.unit == PrivacyUnit.record()  # the release itself is record-level ...
    charge = session.charges[-1]  # ... and the session counts it per person
    assert charge.epsilon == pytest.approx(1.0) and charge.privacy_unit == PERSON
    assert charge.converted_from == {"unit": {"kind": "record", "relation": "add_remove"}, "epsilon": 0.2}
    assert session.spent == pytest.approx(2.0)
    text = str(session)
    assert "converted from one record (row), added or removed at epsilon=0.2 (x 5)" in text
    # person-level releases pass through a converting view unchanged
    LaplaceHistogram().publish(UnitCounts([3, 4], PERSON), epsilon=0.5, rng=0, session=converted)
    assert session.charges[-1].converted_from is None and session.spent == pytest.approx(2.5)
    if store == "file":
        raw = json.loads((tmp_path / "budget.json").read_text())
        assert [("converted_from" in c) for c in raw["charges"]] == [False, True, False]
        assert Session.open(tmp_path / "budget.json").charges[1] == session.charges[1]


def test_conversion_takes_the_column_from_the_session_or_needs_it():
    session = Session(total_epsilon=2.0)
    with pytest.raises(ParameterError) as info:
        session.convert_record_level(3)
    assert info.value.param == "privacy_id"
    assert session.convert_record_level(3, column="user").converts_to == PrivacyUnit.person("user", 3)
    with pytest.raises(ParameterError) as info:
        session.convert_record_level(0, column="user")
    assert info.value.param == "max_contributions"
    # a record-level session refuses converted (person-level) charges like any person-level release
    LaplaceHistogram().publish([1, 2], epsilon=0.5, rng=0, session=session)
    with pytest.raises(ParameterError):
        LaplaceHistogram().publish([1, 2], epsilon=0.1, rng=0, session=session.convert_record_level(3, column="user"))


def test_zcdp_conversion_is_k_squared(tmp_path):
    from privpub.core import accounting, discrete_gaussian_noise

    session = Session(total_rho=1.0)
    view = session.convert_record_level(3, column="user")
    with accounting(0.05, method="t", session=view, measure="zcdp") as acc:
        discrete_gaussian_noise(2, rho=0.05, rng=0)
        acc.seal()
    assert session.spent == pytest.approx(0.45)
    assert session.charges[0].converted_from["epsilon"] == pytest.approx(0.05)
