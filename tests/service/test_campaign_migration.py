"""A database written before issue 22 (revision 0003) opens: ``privpub serve`` upgrades it (0004:
assignments bound to enrollment tokens, archived campaigns); its campaigns keep their behaviour
(no poisoning_defense field: releases behave as "none") and can be archived."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import sqlalchemy as sa
from service_helpers import ADMIN_TOKEN, Server

from privpub.client import Gateway
from privpub.service import head_revision, make_engine, upgrade
from privpub.service._catalog import make_kind
from privpub.service._db import current_revision, write_tx
from privpub.service._store import N_SHARDS
from privpub.service._tables import aggregates, campaign_groups, campaigns


def test_campaign_of_revision_0003_upgrades_keeps_behaving_and_archives(db_url: str, tmp_path: Path) -> None:
    assert upgrade(db_url, "0003_streams") == "0003_streams"
    # the spec exactly as privpub stored it before issue 22 (one flat model: every kind's field, most
    # null; no poisoning_defense, no allow_unenrolled_phases)
    spec = {"name": "old", "kind": "frequency", "epsilon": 2.0, "min_reports": 10, "time_precision": 3600,
            "enrollment": False, "oracle": "OUE", "categories": ["a", "b", "c"], "method": None, "bounds": None,
            "expected_participants": None, "g": None, "eta": 0.05, "intervals": None, "lam": 0.6, "rgdd_tau": 1.0,
            "kappa": 4.0, "h": None, "assignment_ttl": 600, "attributes": None, "degree": 2, "estimator": "em",
            "allowed_origins": None, "requested_oracle": "OUE"}
    kind = make_kind(spec)
    engine = make_engine(db_url, pool_size=1)
    try:
        with write_tx(engine) as conn:  # the columns of revision 0003 only
            conn.execute(sa.insert(campaigns).values(
                id="c0000000000000cc", name="old", kind="frequency", spec=spec, epsilon=2.0, min_reports=10,
                opens_at=None, closes_at=None, time_precision=3600, enrollment=False, closed=False, stage=0,
                created_at=0))
            g = kind.initial_groups()[0]
            conn.execute(sa.insert(campaign_groups).values(campaign_id="c0000000000000cc", group_id=0, name=g.name,
                                                           domain_size=g.domain_size, quota=None, public=g.public,
                                                           created_at=0))
            conn.execute(sa.insert(aggregates), [{"campaign_id": "c0000000000000cc", "group_id": 0, "shard": s,
                                                  "n": 0, "support": bytes(8 * 3)} for s in range(N_SHARDS)])
        cols = {c["name"] for c in sa.inspect(engine).get_columns("assignments")}
        assert "enrollment_hash" not in cols
    finally:
        engine.dispose()
    srv = Server(db_url, tmp_path / "server.log").start()
    try:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120) as adm:
            cid = "c0000000000000cc"
            assert adm.get(f"/campaigns/{cid}").json()["poisoning_defense"] == "none"
            res = Gateway(srv.url, cid, rng=1).submit_many(list(np.random.default_rng(0).choice(["a", "b", "c"],
                                                                                               size=50)))
            assert res.new == 50
            rel = adm.post(f"/campaigns/{cid}/releases").json()
            assert rel["poisoning"]["method"] == "none" and rel["poisoning"]["suspected"] == 0
            assert adm.delete(f"/campaigns/{cid}").json()["archived_at"] is not None
            assert adm.get(f"/campaigns/{cid}/releases/latest").json()["id"] == rel["id"]
        engine = make_engine(db_url, pool_size=1)
        try:
            assert current_revision(engine) == head_revision()
            cols = {c["name"] for c in sa.inspect(engine).get_columns("assignments")}
            assert "enrollment_hash" in cols
        finally:
            engine.dispose()
    finally:
        srv.stop()
