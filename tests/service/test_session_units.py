"""The database session store states each charge's privacy unit (issue 25), on SQLite and PostgreSQL:
units survive a restart, mixed units are refused inside the reserving transaction, explicit
conversions keep both amounts, and a database written before units existed (revision 0005) opens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from service_helpers import fresh_database

from privpub import PrivacyUnit, Session
from privpub.errors import ParameterError
from privpub.histogram import LaplaceHistogram, UnitCounts
from privpub.service import head_revision, make_engine, upgrade
from privpub.service._db import current_revision, write_tx
from privpub.service._sessions import DatabaseSessionStore

PERSON = PrivacyUnit.person("user", 4)


@pytest.fixture
def fresh_url(backend: str, tmp_path: Path) -> Iterator[str]:
    yield from fresh_database(backend, tmp_path)


def test_units_survive_a_restart_and_mixed_units_are_refused(fresh_url: str) -> None:
    store = DatabaseSessionStore(fresh_url, total_epsilon=3.0, name="people")
    session = Session(store=store)
    LaplaceHistogram().publish(UnitCounts([5, 2, 7], PERSON), epsilon=1.0, rng=0, session=session)
    # a record-level release is refused (nothing appended), then accepted converted at k = 4
    with pytest.raises(ParameterError) as info:
        LaplaceHistogram().publish([5, 2, 7], epsilon=0.25, rng=0, session=session)
    assert info.value.param == "privacy_unit" and len(session.charges) == 1
    LaplaceHistogram().publish([5, 2, 7], epsilon=0.25, rng=0, session=session.convert_record_level(4))
    store.close()

    reopened = Session(store=DatabaseSessionStore(fresh_url, name="people"))  # a new process would do the same
    first, converted = reopened.charges
    assert first.privacy_unit == PERSON and first.converted_from is None and first.epsilon == pytest.approx(1.0)
    assert converted.privacy_unit == PERSON and converted.epsilon == pytest.approx(1.0)
    assert converted.converted_from == {"unit": {"kind": "record", "relation": "add_remove"}, "epsilon": 0.25}
    assert "converted from one record" in converted.describe() and "epsilon=0.25" in str(reopened)
    assert reopened.spent == pytest.approx(2.0)
    with pytest.raises(ParameterError):  # still refused after the restart
        LaplaceHistogram().publish([1, 2], epsilon=0.1, rng=0, session=reopened)
    assert len(reopened.charges) == 2


def test_a_database_written_before_units_opens(fresh_url: str) -> None:
    assert upgrade(fresh_url, "0005_campaigns_sybil_archive") == "0005_campaigns_sybil_archive"
    engine = make_engine(fresh_url, pool_size=1)
    try:
        with write_tx(engine) as conn:
            conn.execute(sa.text("INSERT INTO budget_sessions (name, total_epsilon, created) "
                                 "VALUES ('old', 2.0, '2026-01-01T00:00:00+00:00')"))
            conn.execute(sa.text("INSERT INTO budget_charges (id, session_name, time, method, epsilon, data, status, "
                                 "note) VALUES ('a' || '0000000000000000000000000000000', 'old', "
                                 "'2026-01-01T00:00:00+00:00', 'laplace', 0.5, 'old data', 'spent', '')"))
    finally:
        engine.dispose()
    session = Session(store=DatabaseSessionStore(fresh_url, name="old"))  # upgrades to the head
    engine = make_engine(fresh_url, pool_size=1)
    try:
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()
    assert session.measure == "pure-dp"  # NULL measure (migration 0008): the session holds epsilons, as it did
    (old,) = session.charges
    assert old.unit is None and old.privacy_unit == PrivacyUnit.record() and session.spent == pytest.approx(0.5)
    # the old record-level session keeps refusing person-level releases
    with pytest.raises(ParameterError):
        LaplaceHistogram().publish(UnitCounts([1, 1], PERSON), epsilon=0.5, rng=0, session=session)
    LaplaceHistogram().publish([1, 1], epsilon=0.5, rng=0, session=session)
    assert session.spent == pytest.approx(1.0)


def test_downgrade_below_0008_refuses_while_a_zcdp_session_exists(fresh_url: str) -> None:
    """An older privpub would read a zCDP session's rhos as epsilons: the downgrade refuses until it is gone."""
    from alembic import command

    from privpub.service._db import alembic_config

    DatabaseSessionStore(fresh_url, 0.5, name="rho", measure="zcdp").close()
    # down to 0008 first (the later revisions hold nothing that refuses), then 0008's own refusal:
    # SQLite runs each revision's DDL in its own transaction, so a refused downgrade of several
    # revisions would stop part-way on SQLite and not on PostgreSQL
    command.downgrade(alembic_config(fresh_url), "0008_budget_sessions_measure")
    with pytest.raises(RuntimeError, match="zCDP budget session"):
        command.downgrade(alembic_config(fresh_url), "0007_streams_measure")
    engine = make_engine(fresh_url, pool_size=1)
    try:
        assert current_revision(engine) == "0008_budget_sessions_measure"
        with write_tx(engine) as conn:
            conn.execute(sa.text("DELETE FROM budget_sessions WHERE name = 'rho'"))
    finally:
        engine.dispose()
    command.downgrade(alembic_config(fresh_url), "0007_streams_measure")
    store = DatabaseSessionStore(fresh_url, 1.0, name="pure")  # upgrades again; pure sessions work throughout
    assert store.measure == "pure-dp"
    store.close()
