"""Alembic migrations: an empty database reaches the head revision, the migrated schema matches
the tables the code uses, and reports and releases are append-only in the database itself."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from privpub.service import head_revision, make_engine, upgrade
from privpub.service._db import write_tx
from privpub.service._tables import metadata


def test_upgrade_is_idempotent_and_matches_the_tables(db_url: str) -> None:
    assert upgrade(db_url) == head_revision() == upgrade(db_url)
    engine = make_engine(db_url, pool_size=1)
    try:
        with engine.connect() as conn:
            diffs = compare_metadata(MigrationContext.configure(conn), metadata)
        assert diffs == []
    finally:
        engine.dispose()


def test_reports_and_releases_are_append_only(db_url: str) -> None:
    upgrade(db_url)
    engine = make_engine(db_url, pool_size=1)
    try:
        with write_tx(engine) as conn:
            conn.execute(sa.text("INSERT INTO campaigns (id, name, kind, spec, epsilon, min_reports, time_precision, "
                                 "enrollment, closed, stage, created_at) VALUES ('c0000000000000aa', 'x', 'frequency',"
                                 " '{}', 1.0, 1, 3600, false, false, 0, 0)"))
            conn.execute(sa.text("INSERT INTO reports VALUES ('c0000000000000aa', :rid, 0, :p, 0)"),
                         {"rid": b"\x01" * 16, "p": b"\x00"})
        for stmt in ("UPDATE reports SET payload = :p", "DELETE FROM reports"):
            with pytest.raises(sa.exc.DBAPIError, match="append-only"), write_tx(engine) as conn:
                conn.execute(sa.text(stmt), {"p": b"\x01"})
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM reports")).scalar_one() == 1
    finally:
        engine.dispose()
