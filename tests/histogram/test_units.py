"""Person-level histograms: bounding in counts_from_records, counts that carry their unit, and
publishers that charge for it (issue 25)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from privpub import ParameterError, PrivacyUnit, Session
from privpub.histogram import (
    PUBLISHERS,
    LaplaceHistogram,
    UnitCounts,
    counts_from_records,
    dawa_sensitivity,
    noise_variance,
)

KEY = "0123456789abcdef"


def _table(rows_per_person, rng=0):
    """One row per (person, row); each row's value is a random bin in 0..9."""
    gen = np.random.default_rng(rng)
    ids = np.repeat([f"p{i}" for i in range(len(rows_per_person))], rows_per_person)
    return ids, gen.integers(0, 10, size=ids.size)


def test_each_person_keeps_exactly_min_rows_k():
    rows = [1, 3, 5, 40, 7, 2, 12]
    k = 5
    ids = np.repeat([f"p{i}" for i in range(len(rows))], rows)
    # the value is the person itself: bin i counts person i's kept rows
    counts = counts_from_records(ids, categories=[f"p{i}" for i in range(len(rows))], privacy_ids=ids,
                                 max_contributions=k, rng=3)
    assert counts.tolist() == [min(r, k) for r in rows]
    assert counts.privacy_unit == PrivacyUnit.person("privacy_id", k)


def test_kept_rows_do_not_depend_on_other_people():
    ids, values = _table([4, 9, 2, 30, 6], rng=1)
    base = counts_from_records(values, bins=np.arange(11), privacy_ids=ids, max_contributions=3, key=KEY)
    # add a person with 25 rows: the counts grow by exactly that person's 3 kept rows, nothing else moves
    extra_ids = np.r_[ids, ["new"] * 25]
    extra_values = np.r_[values, np.random.default_rng(9).integers(0, 10, 25)]
    more = counts_from_records(extra_values, bins=np.arange(11), privacy_ids=extra_ids, max_contributions=3,
                               key=KEY)
    diff = more - base
    assert np.all(diff >= 0) and int(diff.sum()) == 3
    # shuffling the table changes nothing either (the choice is by hash, not by position)
    perm = np.random.default_rng(2).permutation(ids.size)
    shuffled = counts_from_records(values[perm], bins=np.arange(11), privacy_ids=ids[perm], max_contributions=3,
                                   key=KEY)
    assert shuffled.tolist() == base.tolist()


def test_counts_carry_their_unit_and_name_the_id_column():
    ids = pd.Series(["a", "a", "b"], name="user")
    c = counts_from_records([1, 1, 2], bins=[0, 1, 2, 3], privacy_ids=ids, max_contributions=2, rng=0)
    assert isinstance(c, UnitCounts) and isinstance(c, np.ndarray) and c.dtype == np.int64
    assert c.privacy_unit == PrivacyUnit.person("user", 2)
    plain = counts_from_records([1, 1, 2], bins=[0, 1, 2, 3])
    assert plain.privacy_unit == PrivacyUnit.record()
    assert isinstance(np.sum(c), np.integer)  # reductions are plain numbers


@pytest.mark.parametrize("kwargs, param", [
    ({"privacy_ids": ["a", "b", "c"]}, "max_contributions"),
    ({"max_contributions": 2}, "privacy_ids"),
    ({"privacy_ids": ["a", "b"], "max_contributions": 2}, "privacy_ids"),
    ({"privacy_ids": ["a", None, "c"], "max_contributions": 2}, "privacy_ids"),
    ({"privacy_ids": ["a", "b", "c"], "max_contributions": 0}, "max_contributions"),
])
def test_bad_bounding_arguments_name_the_parameter(kwargs, param):
    with pytest.raises(ParameterError) as info:
        counts_from_records([0, 1, 1], bins=[0, 1, 2], **kwargs)
    assert info.value.param == param


@pytest.mark.parametrize("name", sorted(PUBLISHERS))
def test_every_publisher_charges_for_the_counts_unit(name):
    ids, values = _table([3, 8, 1, 20, 5])
    counts = counts_from_records(values, bins=np.arange(11), privacy_ids=ids, max_contributions=4, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release = PUBLISHERS[name]().publish(counts, epsilon=2.0, rng=0)
    unit = PrivacyUnit.person("privacy_id", 4)
    assert release.ledger.unit == unit == release.privacy_unit
    finite = [e for e in release.ledger.entries if np.isfinite(e.epsilon)]
    assert sum(e.epsilon for e in finite) <= 2.0 * (1 + 1e-12)
    for e in finite:  # each charge is a record-level draw at epsilon/k, stated x k with sensitivity k
        # (DAWA's partition: k times the record-level sensitivity of its dyadic bucket costs)
        record = dawa_sensitivity(counts.size) if (name, e.step) == ("dawa", "partition") else 1.0
        assert e.unit == unit and e.sensitivity == 4.0 * record and "record-level epsilon" in e.note
    if release.private:
        assert release.ledger.total == pytest.approx(2.0)
    assert release.params["privacy_unit"] == unit.as_dict()
    assert type(release.counts) is np.ndarray


def test_person_level_noise_is_that_of_sensitivity_k():
    n, k, eps = 4000, 10, 1.0
    zeros = UnitCounts(np.zeros(n, dtype=np.int64), PrivacyUnit.person("user", k))
    out = LaplaceHistogram(clamp=False).publish(zeros, epsilon=eps, rng=5).counts.astype(float)
    want = noise_variance(eps / k)
    # sample variance of discrete Laplace: relative standard error sqrt((kurtosis - 1) / n) ~ sqrt(5/n) ~ 0.035
    assert abs(out.var() / want - 1.0) < 0.15
    record = LaplaceHistogram(clamp=False).publish(np.zeros(n, dtype=np.int64), epsilon=eps, rng=5).counts
    assert record.astype(float).var() < want / 20  # the negative control: record level is k^2 times smaller


def test_privacy_unit_argument_states_or_checks_the_unit():
    plain = np.array([4, 0, 7])
    person = PrivacyUnit.person("user", 5)
    # on counts with no person unit it is the caller's explicit statement that rows are bounded to k
    assert LaplaceHistogram().publish(plain, epsilon=1.0, rng=0, privacy_unit=person).ledger.unit == person
    bounded = UnitCounts(plain, person)
    # a larger bound for the same people is fine (and costs more noise); a smaller one, or others, is refused
    assert LaplaceHistogram().publish(bounded, epsilon=1.0, rng=0,
                                      privacy_unit=PrivacyUnit.person("user", 9)).ledger.unit.factor == 9
    for bad in (PrivacyUnit.person("user", 2), PrivacyUnit.person("account", 5), PrivacyUnit.record()):
        with pytest.raises(ParameterError) as info:
            LaplaceHistogram().publish(bounded, epsilon=1.0, rng=0, privacy_unit=bad)
        assert info.value.param == "privacy_unit"


@pytest.mark.parametrize("unit", [PrivacyUnit.event(), PrivacyUnit.record("replace"), PrivacyUnit.participant(),
                                  PrivacyUnit.person("user", 3, relation="replace"), PrivacyUnit.w_event(4),
                                  PrivacyUnit.person_per_step("user", 2), "nonsense"])
@pytest.mark.parametrize("name", sorted(PUBLISHERS))
def test_units_a_histogram_cannot_state_are_refused_not_ignored(name, unit):
    session = Session(total_epsilon=5.0)
    with pytest.raises(ParameterError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        PUBLISHERS[name]().publish([3, 1, 4], epsilon=1.0, rng=0, privacy_unit=unit,
                                   session=None if name in ("optimal", "hphp_paper") else session)
    assert info.value.param == "privacy_unit"
    assert session.spent == 0.0 and not session.charges  # refused before anything was reserved


def test_person_and_record_releases_do_not_mix_in_a_session():
    session = Session(total_epsilon=3.0)
    counts = UnitCounts([5, 2, 9], PrivacyUnit.person("user", 4))
    LaplaceHistogram().publish(counts, epsilon=1.0, rng=0, session=session)
    assert session.charges[0].privacy_unit == PrivacyUnit.person("user", 4)
    with pytest.raises(ParameterError) as info:
        LaplaceHistogram().publish([5, 2, 9], epsilon=0.5, rng=0, session=session)
    assert info.value.param == "privacy_unit"
    assert session.spent == pytest.approx(1.0)
