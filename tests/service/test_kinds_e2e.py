"""End to end per kind, over HTTP against a real ``privpub serve`` (SQLite and PostgreSQL).

10,000 simulated participants each; the release must equal what the library computes offline
from the same stored reports (same estimator, same numbers).
"""

from __future__ import annotations

import math

import httpx
import numpy as np
import pandas as pd
import pytest
from service_helpers import create

from privpub.cli._service import simulate_values
from privpub.client import Gateway, Participant, decode_payloads, frequency_oracle
from privpub.core import BudgetLedger, Schema
from privpub.ldp import OUE, defend, norm_sub
from privpub.ldp_synth import LDPBayesSynthesizer
from privpub.service import load_reports, make_engine
from privpub.spatial._kernels import ci_combine, oue_v1

N = 10_000
CATS = ["a", "b", "c", "d", "e", "f"]


def _stored(db_url: str, cid: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    engine = make_engine(db_url, pool_size=1)
    try:
        return load_reports(engine, cid)
    finally:
        engine.dispose()


@pytest.mark.parametrize("oracle", ["GRR", "OUE", "OLH", "SUE"])
def test_frequency_release_equals_offline_estimate(server, admin, db_url, oracle) -> None:
    cfg = create(admin, name=f"freq {oracle}", kind="frequency", oracle=oracle, epsilon=1.5, categories=CATS,
                 min_reports=N)
    values = simulate_values(cfg, N, np.random.default_rng(7))
    res = Gateway(server.url, cfg["id"], batch_size=2500, rng=11).submit_many(values)
    assert (res.new, res.duplicates, res.rejected) == (N, 0, [])
    rel = admin.post(f"/campaigns/{cfg['id']}/releases")
    assert rel.status_code == 201, rel.text
    body = rel.json()
    assert body["n_reports"] == N
    # offline: the library's oracle on the stored reports
    ids, payloads = _stored(db_url, cfg["id"])[0]
    assert ids.shape == (N, 16) and len({bytes(r) for r in ids}) == N
    o = frequency_oracle(cfg)
    # (the default poisoning defense, "detect", sets improbable reports aside: privpub.ldp.defend)
    defended = defend(o, decode_payloads(cfg["payload"]["layout"], payloads, len(CATS)), epsilon=1.5,
                      method="detect")
    offline = defended.estimate
    assert [body["estimates"][c] for c in CATS] == offline.tolist()
    assert [body["normalised"][c] for c in CATS] == norm_sub(offline, defended.n).tolist()
    assert body["poisoning"]["method"] == "detect" and body["poisoning"]["suspected"] == defended.suspected
    # accuracy: within 5 standard errors of the true counts
    true = pd.Series(values).value_counts().reindex(CATS, fill_value=0).to_numpy()
    assert np.all(np.abs(offline - true) < 5 * math.sqrt(o.variance(N, epsilon=1.5)))
    # the ledger is the accountant's record of the declared client randomiser
    ledger = BudgetLedger.from_records(1.5, body["ledger"])
    assert ledger.total == body["ledger_total"] == 1.5
    assert [(e.mechanism, e.epsilon, e.composition) for e in ledger] == [(oracle, 1.5, "sequential")]


def test_auto_oracle_picks_lowest_variance(admin) -> None:
    small = create(admin, name="auto small", kind="frequency", oracle="auto", epsilon=2.0, categories=["x", "y", "z"])
    large = create(admin, name="auto large", kind="frequency", epsilon=1.0, categories=[str(i) for i in range(64)])
    assert small["oracle"] == "GRR"  # d - 2 < 3 e^eps: GRR wins (Wang et al. 2017)
    assert large["oracle"] in ("OUE", "OLH")


def test_single_reports_and_release_formats(server, admin) -> None:
    cfg = create(admin, name="single", kind="frequency", oracle="OUE", epsilon=2.0, categories=CATS, min_reports=20)
    p = Participant(server.url, cfg["id"], rng=3)
    receipts = [p.submit(CATS[i % 6]) for i in range(25)]
    assert len({r.report_id for r in receipts}) == 25 and all(r.received.endswith(":00:00Z") for r in receipts)
    csv = admin.get(f"/campaigns/{cfg['id']}/releases/latest", params={"format": "csv"})
    assert csv.status_code == 404  # nothing published yet
    rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
    csv = httpx.get(f"{server.url}/campaigns/{cfg['id']}/releases/{rel['id']}", params={"format": "csv"})
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    lines = csv.text.strip().splitlines()
    assert lines[0] == "category,estimate,normalised" and len(lines) == 7
    got = httpx.get(f"{server.url}/campaigns/{cfg['id']}/releases/latest").json()
    assert got["estimates"] == rel["estimates"] and got["id"] == rel["id"]


def test_synth_release_equals_offline_fit(server, admin, db_url) -> None:
    attrs = [{"name": "age", "categories": ["young", "mid", "old"]},
             {"name": "job", "categories": ["a", "b", "c", "d"]},
             {"name": "city", "categories": ["x", "y"]},
             {"name": "car", "categories": ["no", "yes"]}]
    cfg = create(admin, name="synth", kind="synth", epsilon=6.0, attributes=attrs, degree=1, min_reports=N)
    values = simulate_values(cfg, N, np.random.default_rng(3))
    res = Gateway(server.url, cfg["id"], batch_size=4000, rng=5).submit_many(values)
    assert res.new == N
    rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
    _, payloads = _stored(db_url, cfg["id"])[0]
    schema = Schema.from_dict(cfg["schema"])
    bits = np.unpackbits(payloads, axis=1, count=sum(schema.sizes), bitorder="little").astype(bool)
    offline = LDPBayesSynthesizer(degree=1).fit_reports(bits, schema=schema, flip_prob=cfg["flip_prob"])
    assert rel["network"] == [{"attribute": c, "parents": list(p)} for c, p in offline.network]
    records = offline.sample(N, rng=rel["params"]["sample_seed"])
    assert rel["records"] == records.to_dict(orient="records")
    assert BudgetLedger.from_records(6.0, rel["ledger"]).total == pytest.approx(6.0, rel=1e-12)
    # the chain dependence of the simulated data is found: each attribute's parent is a neighbour
    order = [a["name"] for a in attrs]
    for node in rel["network"]:
        for parent in node["parents"]:
            assert abs(order.index(parent) - order.index(node["attribute"])) == 1


def test_spatial_ug_release_equals_offline(server, admin, db_url) -> None:
    cfg = create(admin, name="ug", kind="spatial", method="ug", epsilon=1.0, bounds=[0, 0, 10, 10],
                 expected_participants=N, g=8, min_reports=N)
    pts = simulate_values(cfg, N, np.random.default_rng(2))
    assert Gateway(server.url, cfg["id"], rng=4).submit_many(pts).new == N
    rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
    _, payloads = _stored(db_url, cfg["id"])[0]
    est = OUE(domain_size=64).estimate(payloads, epsilon=1.0)
    assert rel["leaves"]["value"] == norm_sub(est, float(N)).tolist()
    assert rel["grid_shape"] == [8, 8]


def test_spatial_kdght_multiphase_equals_offline(server, admin, db_url) -> None:
    cfg = create(admin, name="kdght", kind="spatial", method="kdght", epsilon=1.0, bounds=[0, 0, 1, 1],
                 expected_participants=N, min_reports=N, enrollment=True)
    assert cfg["assigned"] is True
    tokens = admin.post(f"/campaigns/{cfg['id']}/tokens", json={"count": N}).json()["tokens"]
    pts = simulate_values(cfg, N, np.random.default_rng(9))
    res = Gateway(server.url, cfg["id"], rng=8).submit_many(pts, tokens=tokens)
    assert (res.new, res.rejected) == (N, [])
    status = admin.get(f"/campaigns/{cfg['id']}/status").json()
    groups = status["groups"]
    assert len(groups) >= 4 and sum(g["reports"] for g in groups) == N
    for g in groups[:-1]:  # every phase but the last stopped at its quota
        assert g["reports"] == g["quota"]
    rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
    # offline: OUE estimates of the stored reports of each tree level, constrained inference, Norm-Sub
    stored = _stored(db_url, cfg["id"])
    public = {g["group"]: g for g in groups}
    levels = sorted(gid for gid in stored if gid >= 2)
    assert rel["params"]["levels"] == [{"group": gid, "cells": public[gid]["cells"],
                                        "reports": stored[gid][1].shape[0]} for gid in levels]
    parts = {gid: httpx.post(f"{server.url}/campaigns/{cfg['id']}/assignments", json={"count": 1}) for gid in ()}
    del parts
    from privpub.service import Store

    engine = make_engine(db_url, pool_size=1)
    try:
        info = Store(engine).campaign(cfg["id"])
    finally:
        engine.dispose()
    ys, variances, parents = [], [], []
    for gid in levels:
        d = info.groups[gid].domain_size
        n_l = stored[gid][1].shape[0]
        est = OUE(domain_size=max(d, 2)).estimate(stored[gid][1], epsilon=1.0)[:d]
        ys.append(est * (N / n_l))
        variances.append(N**2 * oue_v1(1.0) / n_l)
        parents.append(np.asarray(info.groups[gid].public["parent"]))
    offline = norm_sub(ci_combine(ys, variances, parents, float(N)), float(N))
    assert rel["leaves"]["value"] == offline.tolist()
    ledger = BudgetLedger.from_records(1.0, rel["ledger"])
    assert ledger.total == 1.0 and {e.composition for e in ledger} == {"parallel"}
    assert sum(e.parts for e in ledger) == len(groups)
