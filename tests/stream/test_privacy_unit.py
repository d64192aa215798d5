"""Issue 25 for streams: the privacy unit of a stream publisher (event by default, person per step
with a bound k), the per-step bounding of events with a privacy id, and what the ledger, the
state and the session record of it."""

from __future__ import annotations

import numpy as np
import pytest

from privpub import PrivacyUnit, Session
from privpub.core import accounting
from privpub.errors import DomainError, ParameterError
from privpub.stream import BLT, BT, BTH, HQRTP, RTP, RTPMM, MFSqrt, StreamPublisher

UNIT = PrivacyUnit.person_per_step("user", 3)
PURE = [RTP, HQRTP, RTPMM, BT, BTH]
ZCDP = [BT, BTH, MFSqrt, BLT]


def make(cls, unit=UNIT, **kw):
    budget = {"rho": 0.5} if cls in (MFSqrt, BLT) else {"epsilon": 1.0}
    return cls(window=64, rng=0, privacy_unit=unit, **budget, **kw)


# -- the unit and the noise it calls for ---------------------------------------------------------
@pytest.mark.parametrize("cls", [RTP, BT, MFSqrt])
def test_default_unit_is_event(cls):
    pub = make(cls, unit=None)
    assert pub.privacy_unit == PrivacyUnit.event()
    pub.extend(np.arange(20))
    assert pub.ledger.unit == PrivacyUnit.event()
    assert all(e.unit == PrivacyUnit.event() for e in pub.ledger)


@pytest.mark.parametrize("cls", [*PURE, MFSqrt, BLT])
def test_person_per_step_ledger_states_the_unit(cls):
    pub = make(cls, sensitivity=2.0)
    pub.extend(np.arange(40))
    ledger = pub.ledger
    assert ledger.unit == UNIT and all(e.unit == UNIT for e in ledger)
    assert ledger.total == pytest.approx(pub.budget, rel=1e-12)  # the whole budget, stated per person
    for e in ledger:
        if e.sensitivity is not None and cls not in (MFSqrt, BLT):
            assert e.sensitivity == pytest.approx(3 * 2.0)  # k x the per-event sensitivity
        assert "x 3" in e.note or "x 9" in e.note  # the group-privacy factor is stated


def test_person_per_step_noise_is_that_of_sensitivity_k():
    # height 1: every item is one node with noise of scale k * sensitivity / epsilon (never less)
    eps, k = 0.8, 3
    pub = RTP(window=8, epsilon=eps, rng=0, height=1, privacy_unit=PrivacyUnit.person_per_step("u", k))
    plan = pub._noise.plan(1)
    assert plan.scales[0, 0] >= k / eps
    assert plan.scales[0, 0] == pytest.approx(k / eps, rel=1e-8)
    # and empirically: variance of a discrete Laplace of that scale, 2p / (1 - p)^2
    n = 20_000
    big = RTP(window=n, epsilon=eps, rng=1, height=1, privacy_unit=PrivacyUnit.person_per_step("u", k))
    big.extend(np.zeros(n, dtype=np.int64))
    noise = big.node_values(np.arange(1, n + 1))
    p = np.exp(-eps / k)
    var = 2 * p / (1 - p) ** 2
    # the sample variance's standard error is about var * sqrt((kurtosis - 1) / n), kurtosis ~ 6
    assert abs(noise.var() - var) < 5 * var * np.sqrt(5 / n)


@pytest.mark.parametrize("cls", ZCDP)
def test_zcdp_rho_scales_by_k_squared(cls):
    k = 3
    person = make(cls, unit=PrivacyUnit.person_per_step("u", k))
    kw = {"rho": 0.5 / k**2} if cls in (MFSqrt, BLT) else {"epsilon": None, "rho": 0.5 / k**2}
    if cls in (BT, BTH):
        person = cls(window=64, rng=0, rho=0.5, privacy_unit=PrivacyUnit.person_per_step("u", k))
    event = cls(window=64, rng=0, **{k_: v for k_, v in kw.items() if v is not None})
    if cls in (MFSqrt, BLT):
        assert person.sigma2 == pytest.approx(event.sigma2, rel=1e-12)
    else:
        assert person._noise.plan(person.height).scales[0, 0] == pytest.approx(
            event._noise.plan(event.height).scales[0, 0], rel=1e-12)


@pytest.mark.parametrize("unit", [PrivacyUnit.w_event(4), PrivacyUnit.record(), PrivacyUnit.person("u", 2),
                                  PrivacyUnit.participant(), "record", 3])
def test_units_no_stream_provides_are_refused(unit):
    with pytest.raises(ParameterError) as info:
        RTP(window=8, epsilon=1.0, privacy_unit=unit)
    assert info.value.param == "privacy_unit"


def test_w_event_message_says_no_publisher_provides_it():
    with pytest.raises(ParameterError, match="w-event"):
        BT(window=8, epsilon=1.0, privacy_unit=PrivacyUnit.w_event(4))


def test_noise_scale_check_includes_k():
    # epsilon 2**-50 is a usable scale per event, not once divided by k = 8
    RTP(window=8, epsilon=2.0**-50, height=1)
    with pytest.raises(ParameterError, match="max_contributions=8"):
        RTP(window=8, epsilon=2.0**-50, height=1, privacy_unit=PrivacyUnit.person_per_step("u", 8))


# -- bounding events of a step -------------------------------------------------------------------
def test_append_events_keeps_min_rows_k_per_person():
    pub = make(RTP)
    kept = pub.append_events(["a"] * 7 + ["b"] * 2 + ["c"])
    assert kept == 3 + 2 + 1
    assert pub.t == 1


def test_extend_events_bounds_per_person_and_step():
    pub = make(RTP)
    steps = [0, 0, 0, 0, 0, 1, 1, 3]
    ids = ["a", "a", "a", "a", "b", "a", "a", "a"]
    items = pub.extend_events(steps, ids, n_steps=5)
    assert items.tolist() == [3 + 1, 2, 0, 1, 0]
    assert pub.t == 5


def test_kept_values_depend_only_on_the_person_and_the_key():
    # with values, which k of a person's events are kept is a keyed-hash choice of that person's
    # events alone: adding another person changes nothing about the first one's kept sum
    vals_a = [1, 2, 3, 4, 5, 6]
    a = make(RTP, sensitivity=6.0)
    b = RTP.from_state(a.state(), rng=0)  # same key
    item_a, _ = a._bounded_events(np.zeros(6, dtype=np.int64), ["a"] * 6, vals_a, 1)
    item_ab, _ = b._bounded_events(np.zeros(9, dtype=np.int64), ["a"] * 6 + ["z"] * 3, [*vals_a, 6, 6, 6], 1)
    assert int(item_ab[0]) - int(item_a[0]) == 18  # z's three events, a's choice unchanged
    # a uniformly random k-subset across keys: each of a's events is kept half the time (k=3 of 6)
    hits = np.zeros(6)
    for seed in range(400):
        pub = RTP(window=4, epsilon=1.0, rng=seed, privacy_unit=UNIT, sensitivity=1e6)
        mask_sum, _ = pub._bounded_events(np.zeros(6, dtype=np.int64), ["a"] * 6, np.arange(1, 7) * 10 ** np.arange(6), 1)
        digits = (int(mask_sum[0]) // 10 ** np.arange(6)) % 10
        hits += digits > 0
    # binomial(400, 1/2): standard deviation 10
    assert np.all(np.abs(hits - 200) < 50)


def test_events_are_refused_on_an_event_level_stream():
    pub = RTP(window=8, epsilon=1.0, rng=0)
    with pytest.raises(ParameterError) as info:
        pub.append_events(["a", "b"])
    assert info.value.param == "privacy_unit"
    assert pub.t == 0


@pytest.mark.parametrize(("args", "err", "param"), [
    ((["a", None],), ParameterError, "privacy_ids"),
    ((["a", "b"], [1, 7]), DomainError, None),
    ((["a", "b"], [1]), ParameterError, "values"),
])
def test_bad_events_are_refused_before_anything_changes(args, err, param):
    pub = make(RTP, sensitivity=2.0)
    with pytest.raises(err) as info:
        pub.append_events(*args)
    if param:
        assert info.value.param == param
    assert pub.t == 0


def test_extend_events_validates_steps():
    pub = make(RTP)
    for steps, msg in (([-1], ">= 0"), ([0.5], "integer"), ([[0]], "1-D")):
        with pytest.raises(ParameterError, match=msg):
            pub.extend_events(steps, ["a"])
    with pytest.raises(ParameterError, match="n_steps"):
        pub.extend_events([0, 4], ["a", "b"], n_steps=2)
    assert pub.t == 0


# -- state, sessions, nesting --------------------------------------------------------------------
@pytest.mark.parametrize("cls", [RTP, HQRTP, BT, MFSqrt])
def test_state_keeps_unit_and_key(cls):
    pub = make(cls, sensitivity=8.0)
    pub.extend_events([0, 0, 1], ["a", "a", "b"])
    state = pub.state()
    assert state["params"]["privacy_unit"] == UNIT.as_dict()
    restored = StreamPublisher.from_state(state, rng=5)
    assert restored.privacy_unit == UNIT
    assert restored._contribution_key == pub._contribution_key
    # the same choice of events after a restart
    vals = list(range(1, 9))
    a, _ = pub._bounded_events(np.zeros(8, dtype=np.int64), ["p"] * 8, vals, 1)
    b, _ = restored._bounded_events(np.zeros(8, dtype=np.int64), ["p"] * 8, vals, 1)
    assert a.tolist() == b.tolist()
    assert restored.ledger.unit == UNIT
    # an event-level state has no unit parameter and no key (states written before units exist)
    ev = make(cls, unit=None).state()
    assert "privacy_unit" not in ev["params"] and "contribution_key" not in ev


def test_state_without_key_is_refused():
    state = make(RTP).state()
    del state["contribution_key"]
    with pytest.raises(ParameterError, match="contribution_key"):
        StreamPublisher.from_state(state)


def test_session_records_the_unit_and_refuses_mixing():
    session = Session(total_epsilon=3.0)
    RTP(window=8, epsilon=1.0, rng=0, session=session, privacy_unit=UNIT)
    (charge,) = session.charges
    assert charge.privacy_unit == UNIT
    with pytest.raises(ParameterError) as info:
        RTP(window=8, epsilon=1.0, rng=0, session=session)  # an event-level stream (record charge)
    assert info.value.param == "privacy_unit"
    assert len(session.charges) == 1
    RTP(window=8, epsilon=1.0, rng=0, session=session, privacy_unit=PrivacyUnit.person_per_step("user", 5))
    assert session.spent == pytest.approx(2.0)


def test_a_person_level_stream_is_not_a_step_of_another_release():
    with accounting(2.0, method="outer") as acc:
        RTP(window=8, epsilon=1.0, rng=0)  # event level: a step of the outer release
        with pytest.raises(ParameterError) as info:
            RTP(window=8, epsilon=1.0, rng=0, privacy_unit=UNIT)
        assert info.value.param == "privacy_unit"
        assert acc.total == pytest.approx(1.0)
        acc.seal()
