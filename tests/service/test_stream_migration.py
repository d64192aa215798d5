"""A database written before streams existed (revision 0002) opens: ``privpub serve`` upgrades it to
0003_streams, the old campaigns are still there and streams work."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from stream_helpers import admin_client, create_stream, post_counts, stream_server

from privpub.service import head_revision, make_engine, upgrade
from privpub.service._db import current_revision, write_tx


def test_older_database_upgrades_and_keeps_its_data(db_url: str, tmp_path: Path) -> None:
    assert upgrade(db_url, "0002_budget_sessions") == "0002_budget_sessions"
    engine = make_engine(db_url, pool_size=1)
    try:
        with write_tx(engine) as conn:
            conn.execute(sa.text("INSERT INTO campaigns (id, name, kind, spec, epsilon, min_reports, time_precision, "
                                 "enrollment, closed, stage, created_at) VALUES ('c0000000000000bb', 'old', "
                                 "'frequency', '{}', 1.0, 1, 3600, false, false, 0, 0)"))
        assert not sa.inspect(engine).has_table("streams")
    finally:
        engine.dispose()
    srv = stream_server(db_url, tmp_path / "server.log").start()
    try:
        with admin_client(srv) as adm:
            s = create_stream(adm, publisher="rtp", epsilon=1.0, window=8)
            assert post_counts(adm, s["id"], [1, 2, 3])["t"] == 3
            assert adm.get(f"/streams/{s['id']}/range", params={"start": 1, "end": 3}).status_code == 200
        engine = make_engine(db_url, pool_size=1)
        try:
            assert current_revision(engine) == head_revision()
            with engine.connect() as conn:
                assert conn.execute(sa.text("SELECT name FROM campaigns")).scalars().all() == ["old"]
        finally:
            engine.dispose()
    finally:
        srv.stop()


def test_a_database_written_before_zcdp_streams_opens(backend: str, tmp_path: Path) -> None:
    """A stream stored before streams stated their measure (revision 0006) reads as pure epsilon-DP,
    answers as before and goes on; a downgrade below 0007 refuses while a zCDP stream exists (an
    older privpub would read its rho as an epsilon)."""
    import numpy as np
    import pytest
    from alembic import command
    from service_helpers import fresh_database
    from stream_helpers import ranges

    from privpub.service._db import alembic_config
    from privpub.service._streams import pack_state
    from privpub.stream import make_publisher, split_state

    gen = fresh_database(backend, tmp_path)
    db_url = next(gen)
    try:
        assert upgrade(db_url, "0006_budget_charge_units") == "0006_budget_charge_units"
        lib = make_publisher("rtp", epsilon=0.7, window=8, rng=5)
        lib.extend([4, 1, 3])
        head, part = split_state(lib.state(checkpoint=False))
        engine = make_engine(db_url, pool_size=1)
        try:
            with write_tx(engine) as conn:  # the row an older privpub wrote (no measure column)
                conn.execute(sa.text(
                    "INSERT INTO streams (id, name, method, params, epsilon, late, producer_token_hash, created_at, "
                    "t, state, open_count, open_since, log_seq) VALUES ('00000000000000aa', 'old', 'rtp', :p, 0.7, "
                    "'reject', :h, 0, 3, :s, 0, 0, 0)"), {"p": '{"window": 8}', "h": b"\0" * 32, "s": pack_state(head)})
                conn.execute(sa.text("INSERT INTO stream_parts (stream_id, t_end, t_from, data) VALUES "
                                     "('00000000000000aa', :t, :f, :d)"),
                             {"t": part["t"], "f": part["arrays_from"], "d": pack_state(part)})
        finally:
            engine.dispose()
        srv = stream_server(db_url, tmp_path / "server.log").start()  # upgrades to the head
        try:
            with admin_client(srv) as adm:
                old = adm.get("/streams/00000000000000aa").json()
                assert (old["measure"], old["epsilon"], old["rho"]) == ("pure-dp", 0.7, None)
                assert "epsilon = 0.7" in old["neighbouring"]
                q = [[1, 3], [2, 2], [3, 3]]
                assert np.array_equal(ranges(adm, old["id"], q, log=False), lib.answer(q, record=False))
                assert adm.get(f"/streams/{old['id']}/log").json()["ledger_measure"] == "pure-dp"
                z = create_stream(adm, publisher="mf_sqrt", rho=0.5, window=8)
                assert post_counts(adm, z["id"], [1, 2, 3])["t"] == 3
        finally:
            srv.stop()
        # down to 0007 first (the later revisions hold nothing that refuses), then 0007's own refusal:
        # SQLite runs each revision's DDL in its own transaction, so the refused one stays applied
        command.downgrade(alembic_config(db_url), "0007_streams_measure")
        with pytest.raises(RuntimeError, match="zCDP stream"):
            command.downgrade(alembic_config(db_url), "0006_budget_charge_units")
        engine = make_engine(db_url, pool_size=1)
        try:
            assert current_revision(engine) == "0007_streams_measure"
            with engine.connect() as conn:  # the zCDP stream is still there, with its measure
                assert conn.execute(sa.text("SELECT count(*) FROM streams WHERE measure = 'zcdp'")).scalar_one() == 1
        finally:
            engine.dispose()
    finally:
        gen.close()
