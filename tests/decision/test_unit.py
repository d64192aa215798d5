"""Person-level decision releases: contribution bounding (exactly min(rows, k) per person, a
choice that ignores other people's data), budgets from the record-level budget, the unit in the
ledger and the session, and the units the publishers refuse."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from decision_helpers import make_frame, make_schema

from privpub import PrivacyUnit, Session
from privpub.core import as_generator, contribution_key
from privpub.decision import MAXGDDP, DiffGen
from privpub.decision._aggregate import InMemoryCounts, open_counts
from privpub.decision._model import encode_frame
from privpub.decision._unit import bound_rows, resolve_unit
from privpub.errors import DomainError, ParameterError

KEY = "0123456789abcdef"


def people_frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """A table with a heavy-tailed number of rows per person (column ``user``)."""
    frame = make_frame(n, 2, seed=seed)
    frame["user"] = np.minimum(np.random.default_rng(seed + 1).zipf(1.6, n), 25).astype(np.int64)
    return frame


def kept_mask(pub: MAXGDDP | DiffGen, frame: pd.DataFrame, k: int, key: str = KEY) -> np.ndarray:
    schema = make_schema()
    attrs = pub.compile(schema)
    fine, y = encode_frame(attrs, schema, frame, with_class=True)
    assert y is not None
    return bound_rows(fine, y, frame["user"], PrivacyUnit.person("user", k), key)


@pytest.mark.parametrize("pub", [MAXGDDP(levels=2), DiffGen(levels=2)])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_exactly_min_rows_k_kept_per_person(pub, k) -> None:  # type: ignore[no-untyped-def]
    frame = people_frame()
    mask = kept_mask(pub, frame, k)
    kept = frame["user"][mask].value_counts()
    rows = frame["user"].value_counts()
    assert rows.max() > k  # the bound binds
    pd.testing.assert_series_equal(kept.sort_index(), rows.clip(upper=k).sort_index(), check_names=False)
    # the decision path reads exactly the kept rows
    schema = make_schema()
    counts = open_counts(pub.compile(schema), schema, frame, unit=PrivacyUnit.person("user", k), key=KEY)
    assert isinstance(counts, InMemoryCounts) and counts.y.size == int(mask.sum())


@pytest.mark.parametrize("pub", [MAXGDDP(levels=2), DiffGen(levels=2)])
def test_choice_does_not_depend_on_other_people(pub) -> None:  # type: ignore[no-untyped-def]
    frame = people_frame(seed=3)
    me = int(frame["user"].value_counts().idxmax())  # the person with most rows
    mine = frame["user"] == me
    kept_mine = frame.index[mine & kept_mask(pub, frame, 3)]
    # other people removed, added, changed or reordered: the same rows of `me` are kept
    others = people_frame(seed=9)
    others["user"] += 1000
    variants = [
        frame[mine],
        pd.concat([frame, others]),
        pd.concat([others, frame.sample(frac=1.0, random_state=1)]),
        frame.assign(y=np.where(mine, frame["y"], "k0")),
    ]
    for other in variants:
        keep = kept_mask(pub, other, 3)
        assert sorted(other.index[(other["user"] == me).to_numpy() & keep & other.index.isin(kept_mine)]) \
            == sorted(kept_mine)
        assert int(((other["user"] == me).to_numpy() & keep).sum()) == 3
    # a different key keeps a different sample of the person's rows (it is random, not "the first k")
    picks = {tuple(frame.index[mine & kept_mask(pub, frame, 3, key=contribution_key(s))]) for s in range(8)}
    assert len(picks) > 1


@pytest.mark.parametrize("make", [lambda: MAXGDDP(levels=3), lambda: DiffGen(levels=3, reuse_unspent=True)])
def test_person_release_is_record_release_of_bounded_rows_at_epsilon_over_k(make) -> None:  # type: ignore[no-untyped-def]
    """Same rng: the person-level release equals the record-level release of the bounded table at
    epsilon / k, so every mechanism spent the record-level budget; the ledger states the unit."""
    frame, schema, k, eps = people_frame(), make_schema(), 4, 2.0
    person = make().publish(frame, schema=schema, epsilon=eps, rng=7, privacy_id="user", max_contributions=k)
    gen = as_generator(7)
    key = contribution_key(gen)  # the publisher draws its bounding key first
    bounded = frame[kept_mask(make(), frame, k, key=key)]
    record = make().publish(bounded.drop(columns="user"), schema=schema, epsilon=eps / k, rng=gen)
    assert person.history == record.history
    np.testing.assert_array_equal(person.cell_ids, record.cell_ids)
    np.testing.assert_array_equal(person.counts, record.counts)
    assert person.ledger.unit == PrivacyUnit.person("user", k)
    assert record.ledger.unit == PrivacyUnit.record()
    for p, r in zip(person.ledger.entries, record.ledger.entries, strict=True):
        assert p.epsilon == pytest.approx(k * r.epsilon) and p.unit == person.ledger.unit
    assert person.ledger.total == pytest.approx(k * record.ledger.total)
    assert person.ledger.total <= eps * (1 + 1e-12)
    # privacy_unit= states the same release
    same = make().publish(frame, schema=schema, epsilon=eps, rng=7, privacy_unit=PrivacyUnit.person("user", k))
    np.testing.assert_array_equal(same.counts, person.counts)


def test_session_records_the_unit_and_refuses_mixing() -> None:
    frame, schema = people_frame(), make_schema()
    session = Session(total_epsilon=10.0)
    MAXGDDP(levels=2).publish(frame, schema=schema, epsilon=1.0, rng=0, session=session, privacy_id="user",
                              max_contributions=2)
    assert session.charges[-1].privacy_unit == PrivacyUnit.person("user", 2)
    with pytest.raises(ParameterError) as err:
        DiffGen(levels=2).publish(frame, schema=schema, epsilon=1.0, rng=0, session=session)
    assert err.value.param == "privacy_unit"


@pytest.mark.parametrize(("kwargs", "param", "message"), [
    ({"privacy_id": "user"}, "max_contributions", "give max_contributions"),
    ({"max_contributions": 3}, "privacy_id", "give privacy_id"),
    ({"privacy_id": "user", "max_contributions": 0}, "max_contributions", "max_contributions"),
    ({"privacy_id": "c1", "max_contributions": 2}, "privacy_id", "is an attribute of the schema"),
    ({"privacy_id": "y", "max_contributions": 2}, "privacy_id", "is an attribute of the schema"),
    ({"privacy_id": 3, "max_contributions": 2}, "privacy_id", "privacy_id must be the name"),
    ({"privacy_unit": PrivacyUnit.event()}, "privacy_unit", "one record or one person"),
    ({"privacy_unit": PrivacyUnit.record("replace")}, "privacy_unit", "replace-one"),
    ({"privacy_unit": PrivacyUnit.person("user", 2, relation="replace")}, "privacy_unit", "replace-one"),
    ({"privacy_unit": PrivacyUnit.person("user", 2), "max_contributions": 3}, "privacy_unit", "contradicts"),
    ({"privacy_unit": PrivacyUnit.record(), "privacy_id": "user", "max_contributions": 3}, "privacy_unit",
     "contradicts"),
    ({"privacy_unit": "people"}, "privacy_unit", "privacy_unit must be"),
])
def test_refused_units(kwargs, param, message) -> None:  # type: ignore[no-untyped-def]
    frame, schema = people_frame(50), make_schema()
    session = Session(total_epsilon=5.0)
    for pub in (MAXGDDP(levels=1), DiffGen(levels=1)):
        with pytest.raises(ParameterError, match=message) as err:
            pub.publish(frame, schema=schema, epsilon=1.0, rng=0, session=session, **kwargs)
        assert err.value.param == param
    assert session.remaining == pytest.approx(5.0)  # refused before anything was reserved


def test_missing_id_column_or_ids() -> None:
    frame, schema = people_frame(50), make_schema()
    with pytest.raises(DomainError, match="no privacy-id column 'who'") as err:
        MAXGDDP(levels=1).publish(frame, schema=schema, epsilon=1.0, rng=0, privacy_id="who", max_contributions=2)
    assert err.value.param == "privacy_id"
    holes = frame.astype({"user": object})
    holes.loc[[3, 7], "user"] = None
    with pytest.raises(DomainError, match="2 missing ids") as err:
        DiffGen(levels=1).publish(holes, schema=schema, epsilon=1.0, rng=0, privacy_id="user", max_contributions=2)
    assert err.value.param == "privacy_id"


def test_record_unit_stated_explicitly_is_the_default() -> None:
    frame, schema = people_frame(80), make_schema()
    a = MAXGDDP(levels=2).publish(frame, schema=schema, epsilon=1.0, rng=4)
    b = MAXGDDP(levels=2).publish(frame, schema=schema, epsilon=1.0, rng=4, privacy_unit=PrivacyUnit.record())
    np.testing.assert_array_equal(a.counts, b.counts)
    assert b.ledger.unit == PrivacyUnit.record()
    assert resolve_unit("record", None, None, schema) == PrivacyUnit.record()


@pytest.mark.parametrize("k", [1, 3])
def test_level_budgets_and_step_epsilon_are_what_a_person_level_release_draws(k: int) -> None:
    """``MAXGDDP.level_budgets`` and ``DiffGen.step_epsilon`` with ``max_contributions=k`` give what
    the mechanisms draw at per record: the ledger's per-person charges divided by k."""
    schema = make_schema()
    frame = people_frame(200, seed=3)
    m = MAXGDDP(levels=2)
    rel = m.publish(frame, schema=schema, epsilon=2.0, rng=1, privacy_id="user", max_contributions=k)
    levels = [e.epsilon / k for e in rel.ledger if e.step.startswith("level ")]
    np.testing.assert_allclose(m.level_budgets(2.0, max_contributions=k), levels, rtol=1e-12)
    np.testing.assert_allclose(m.level_budgets(2.0, max_contributions=k), np.array(m.level_budgets(2.0)) / k)
    d = DiffGen(levels=2)
    rel = d.publish(frame, schema=schema, epsilon=2.0, rng=1, privacy_id="user", max_contributions=k)
    steps = [e.epsilon / k for e in rel.ledger if e.mechanism == "exponential_mechanism"]
    assert steps and steps == pytest.approx([d.step_epsilon(2.0, schema, max_contributions=k)] * len(steps), rel=1e-12)
    with pytest.raises(ParameterError, match="max_contributions"):
        m.level_budgets(2.0, max_contributions=0)
