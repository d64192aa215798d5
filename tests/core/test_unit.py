"""The privacy unit in the core: values, group-privacy accounting, bounding, sessions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privpub import ParameterError, PrivacyUnit, Session
from privpub.core import (
    BudgetLedger,
    LedgerEntry,
    accounting,
    bound_contributions,
    check_privacy_unit,
    contribution_key,
    discrete_gaussian_noise,
    laplace_noise,
)

PERSON = PrivacyUnit.person("user", max_contributions=4)


def test_units_are_values_with_words_and_records():
    assert PrivacyUnit.record() == check_privacy_unit(None)
    for unit in (PrivacyUnit.record(), PrivacyUnit.record("replace"), PERSON, PrivacyUnit.event(),
                 PrivacyUnit.person_per_step("user", 3), PrivacyUnit.w_event(5), PrivacyUnit.participant(),
                 PrivacyUnit.submission()):
        assert PrivacyUnit.from_dict(unit.as_dict()) == unit
        assert str(unit)
    assert PERSON.factor == 4 and PrivacyUnit.record().factor == 1
    assert PERSON.record_amount(1.0) == 0.25 and PERSON.record_amount(1.0, "zcdp") == 1.0 / 16
    assert PERSON.same_protection(PrivacyUnit.person("user", 9))
    assert not PERSON.same_protection(PrivacyUnit.record())


@pytest.mark.parametrize("kwargs, param", [
    ({"kind": "people"}, "privacy_unit"),
    ({"kind": "person"}, "privacy_id"),
    ({"kind": "person", "column": "u"}, "max_contributions"),
    ({"kind": "person", "column": "u", "max_contributions": 0}, "max_contributions"),
    ({"kind": "record", "column": "u"}, "privacy_unit"),
    ({"kind": "w_event"}, "window"),
])
def test_bad_units_name_their_parameter(kwargs, param):
    with pytest.raises(ParameterError) as info:
        PrivacyUnit(**kwargs)
    assert info.value.param == param


def test_person_release_spends_record_budget_and_states_the_unit():
    with accounting(1.0, method="t", unit=PERSON) as acc:
        assert acc.record_budget == 0.25
        laplace_noise(5, epsilon=acc.record_budget, sensitivity=1.0, rng=0)
        ledger = acc.seal()
    (entry,) = ledger.entries
    assert entry.epsilon == pytest.approx(1.0) and entry.sensitivity == 4.0 and entry.unit == PERSON
    assert ledger.unit == PERSON
    assert LedgerEntry.from_dict(entry.as_dict()) == entry
    assert BudgetLedger.from_records(1.0, ledger.to_records()).unit == PERSON


def test_person_release_over_record_budget_is_refused():
    from privpub import BudgetExceededError

    with pytest.raises(BudgetExceededError), accounting(1.0, method="t", unit=PERSON):
        laplace_noise(5, epsilon=0.5, rng=0)  # 0.5 at record level is 2.0 per person


def test_zcdp_group_privacy_is_k_squared():
    with accounting(0.5, method="t", measure="zcdp", unit=PERSON) as acc:
        assert acc.record_budget == pytest.approx(0.5 / 16)
        discrete_gaussian_noise(3, rho=acc.record_budget, rng=0)
        ledger = acc.seal()
    assert ledger.total == pytest.approx(0.5)


def test_old_ledger_records_read_as_record_level():
    entry = LedgerEntry.from_dict({"step": "s", "mechanism": "laplace", "epsilon": 1.0})
    assert entry.unit == PrivacyUnit.record()


# -- bounding ----------------------------------------------------------------------------------
def _people(rng, n_people=200, max_rows=30):
    rows = rng.integers(1, max_rows, size=n_people)
    ids = np.repeat(np.arange(n_people), rows)
    values = rng.integers(0, 10, size=ids.size)
    return ids, values


@pytest.mark.parametrize("k", [1, 3, 10])
def test_bounding_keeps_exactly_min_rows_k(k):
    rng = np.random.default_rng(1)
    ids, values = _people(rng)
    mask = bound_contributions(ids, k, rng=2, content=values)
    kept = np.bincount(ids[mask], minlength=ids.max() + 1)
    rows = np.bincount(ids, minlength=ids.max() + 1)
    np.testing.assert_array_equal(kept, np.minimum(rows, k))


def test_bounding_of_a_person_does_not_depend_on_others():
    rng = np.random.default_rng(3)
    ids, values = _people(rng)
    key = contribution_key(4)
    full = bound_contributions(ids, 3, key=key, content=values)
    others = ids != 7
    without = bound_contributions(ids[others], 3, key=key, content=values[others])
    np.testing.assert_array_equal(full[others], without)
    # and with other people's rows shuffled and changed
    perm = rng.permutation(ids.size)
    changed = np.where(ids == 7, values, (values + 1) % 10)
    again = bound_contributions(ids[perm], 3, key=key, content=changed[perm])
    kept7 = sorted(values[(ids == 7) & full].tolist())
    assert sorted(changed[perm][(ids[perm] == 7) & again].tolist()) == kept7


def test_bounding_picks_a_uniform_subset():
    # one person with 4 distinct rows, k = 1: each row is kept with probability 1/4 over keys
    hits = np.zeros(4)
    n = 4000
    for seed in range(n):
        hits += bound_contributions(["p"] * 4, 1, rng=seed, content=[0, 1, 2, 3])
    # binomial(n, 1/4): sd = sqrt(n * 3/16); 5 sd
    assert np.all(np.abs(hits - n / 4) < 5 * math.sqrt(n * 3 / 16))


def test_bounding_refuses_missing_ids_and_bad_keys():
    with pytest.raises(ParameterError) as info:
        bound_contributions(["a", None], 1, rng=0)
    assert info.value.param == "privacy_ids"
    with pytest.raises(ParameterError) as info:
        bound_contributions(["a"], 1, key="short")
    assert info.value.param == "key"


# -- sessions -----------------------------------------------------------------------------------
def test_session_refuses_to_mix_units(tmp_path):
    for session in (Session(total_epsilon=3.0), Session.open(tmp_path / "b.json", total_epsilon=3.0)):
        with accounting(1.0, method="person release", session=session, unit=PERSON) as acc:
            laplace_noise(2, epsilon=acc.record_budget, rng=0)
            acc.seal()
        with pytest.raises(ParameterError) as info, accounting(1.0, method="row release", session=session):
            pass
        assert info.value.param == "privacy_unit"
        assert session.spent == pytest.approx(1.0)
        # another bound for the same person column composes
        with accounting(1.0, method="person release 2", session=session,
                        unit=PrivacyUnit.person("user", 9)) as acc:
            laplace_noise(2, epsilon=acc.record_budget, rng=0)
            acc.seal()
        assert session.spent == pytest.approx(2.0)
    reopened = Session.open(tmp_path / "b.json")
    assert [c.privacy_unit for c in reopened.charges] == [PERSON, PrivacyUnit.person("user", 9)]


def test_nested_release_with_its_own_unit_is_refused():
    with accounting(1.0, method="outer") as acc:
        with pytest.raises(ParameterError) as info, accounting(0.5, method="inner", unit=PERSON):
            pass
        acc.seal()
    assert info.value.param == "privacy_unit"
