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
