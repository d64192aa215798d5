"""The service against hostile participants, producers and careless operators (issue 22).

Each section reproduces findings of the issue as they were reported, against a real ``privpub
serve`` on SQLite and on PostgreSQL, and asserts the new behaviour.
"""

from __future__ import annotations

import base64
import csv
import io
import secrets

import httpx
import numpy as np
import pytest
from service_helpers import ADMIN_TOKEN, create
from typer.testing import CliRunner

from privpub.cli import app as cli_app
from privpub.client import Gateway, Participant
from privpub.ldp import OUE, fake_reports

# --- campaigns: findings 1, 5, 9 ---

CATS16 = [f"c{i:02d}" for i in range(16)]


def _kdght(admin: httpx.Client, **extra: object) -> dict[str, object]:
    spec: dict[str, object] = {"name": "kdght", "kind": "spatial", "method": "kdght", "epsilon": 1.0,
                               "bounds": [0, 0, 1, 1], "expected_participants": 2000, "min_reports": 1}
    spec.update(extra)
    return create(admin, **spec)


def _rid() -> str:
    return secrets.token_hex(16)


def _phase0_reports(admin: httpx.Client, cid: str) -> int:
    groups = admin.get(f"/campaigns/{cid}/status").json()["groups"]
    return sum(g["reports"] for g in groups if g["group"] in (0, 1))


def test_multiphase_campaigns_need_enrollment_or_an_explicit_opt_out(admin) -> None:
    spec = {"name": "k", "kind": "spatial", "method": "kdght", "epsilon": 1.0, "bounds": [0, 0, 1, 1],
            "expected_participants": 2000}
    r = admin.post("/campaigns", json=spec)
    assert r.status_code == 422 and r.json()["error"]["field"] == "enrollment"
    r = admin.post("/campaigns", json=dict(spec, allow_unenrolled_phases=True, assignment_ttl=7 * 86400))
    assert r.status_code == 422 and r.json()["error"]["field"] == "assignment_ttl"
    r = admin.post("/campaigns", json=dict(spec, kind="frequency", method=None, bounds=None,
                                           expected_participants=None, categories=["a", "b"],
                                           allow_unenrolled_phases=True))
    assert r.status_code == 422 and r.json()["error"]["field"] == "allow_unenrolled_phases"


def test_finding1_anonymous_takeover_of_phase0_is_refused(server, admin) -> None:
    # as reported: enrollment true and assignment_ttl 7 days; an anonymous client asks for 1000 places
    cfg = _kdght(admin, enrollment=True, assignment_ttl=7 * 86400)
    cid = cfg["id"]
    r = httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"count": 1000})
    assert r.status_code == 403 and r.json()["error"]["field"] == "token"
    r = httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"token": "x" * 32})
    assert r.status_code == 403 and r.json()["error"]["field"] == "token"
    tokens = admin.post(f"/campaigns/{cid}/tokens", json={"count": 60}).json()["tokens"]
    attacker, honest = tokens[0], tokens[1:]
    # one token holds at most one outstanding assignment: asking again replaces the earlier one
    got = [httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"token": attacker}).json()
           for _ in range(30)]
    assert all(len(g["assignments"]) == 1 for g in got)
    quota = sum(p["quota"] for p in cfg["phases"])  # phase 0: U'_x and U'_y
    assert quota == 100
    # honest participants still get places (30 requests by the attacker hold one place, not 30)
    res = Gateway(server.url, cid, rng=1).submit_many(np.random.default_rng(2).random((50, 2)), tokens=honest[:50])
    assert (res.new, res.rejected) == (50, [])
    # the attacker's 1000 fabricated reports on its assignment: one is stored, the rest refused
    last = got[-1]["assignments"][0]
    width = (max(cfg["phases"][0]["cells"], 2) + 7) // 8
    payload = base64.b64encode(bytes(width)).decode()
    codes = []
    for _ in range(1000 // 50):  # bounded: 20 batches of 50 reports
        body = {"report_ids": base64.b64encode(secrets.token_bytes(16 * 50)).decode(),
                "reports": base64.b64encode(bytes(width) * 50).decode(), "groups": [last["group"]] * 50,
                "assignments": [last["assignment"]] * 50, "tokens": [attacker] * 50}
        out = httpx.post(f"{server.url}/campaigns/{cid}/reports/batch", json=body, timeout=60).json()
        codes.append(out["new"])
    assert sum(codes) == 1
    assert _phase0_reports(admin, cid) == 51  # phase 0 (100 places) is not complete
    # an assignment serves only the token it was issued to
    a = httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"token": honest[50]}).json()["assignments"][0]
    r = httpx.post(f"{server.url}/campaigns/{cid}/reports", json={
        "report_id": _rid(), "report": payload, "group": a["group"], "assignment": a["assignment"],
        "token": honest[51]})
    assert r.status_code == 403 and r.json()["error"]["field"] == "assignment"
    r = httpx.post(f"{server.url}/campaigns/{cid}/reports", json={
        "report_id": _rid(), "report": payload, "group": a["group"], "assignment": a["assignment"],
        "token": honest[50]})
    assert r.status_code == 201
    # the SDK follows: a participant's device sends its token for the assignment and the report
    receipt = Participant(server.url, cid, token=honest[52], rng=4).submit((0.5, 0.5))
    assert receipt.received is not None and not receipt.queued
    assert _phase0_reports(admin, cid) == 53


def test_finding1_unenrolled_opt_out_gives_one_short_assignment_per_request(server, admin) -> None:
    cfg = _kdght(admin, allow_unenrolled_phases=True)
    cid = cfg["id"]
    assert cfg["enrollment"] is False and cfg["allow_unenrolled_phases"] is True
    r = httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"count": 1000})
    assert r.status_code == 403 and r.json()["error"]["field"] == "count"
    one = httpx.post(f"{server.url}/campaigns/{cid}/assignments", json={"count": 1}).json()
    assert len(one["assignments"]) == 1
    # the SDK follows: a participant without a token asks for one assignment
    receipt = Participant(server.url, cid, rng=3).submit((0.25, 0.75))
    assert receipt.received is not None and not receipt.queued
    # reports not tied to distinct assignments do not count towards a phase
    a = one["assignments"][0]
    width = (max(cfg["phases"][0]["cells"], 2) + 7) // 8
    body = {"report_ids": base64.b64encode(secrets.token_bytes(16 * 200)).decode(),
            "reports": base64.b64encode(bytes(width) * 200).decode(), "groups": [a["group"]] * 200,
            "assignments": [a["assignment"]] * 200}
    out = httpx.post(f"{server.url}/campaigns/{cid}/reports/batch", json=body, timeout=60).json()
    assert out["new"] == 1 and len(out["rejected"]) == 199
    assert _phase0_reports(admin, cid) == 2


def _post_batch(url: str, cid: str, payloads: np.ndarray, tokens: list[str] | None = None) -> dict[str, object]:
    n = payloads.shape[0]
    body: dict[str, object] = {"report_ids": base64.b64encode(secrets.token_bytes(16 * n)).decode(),
                               "reports": base64.b64encode(np.ascontiguousarray(payloads).tobytes()).decode()}
    if tokens is not None:
        body["tokens"] = tokens
    r = httpx.post(f"{url}/campaigns/{cid}/reports/batch", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("defense", ["none", "detect", "recover"])
def test_finding5_poisoned_oue_campaign(server, admin, defense) -> None:
    # 16 categories, epsilon 2, Zipf(1.1) truth; the target is the least popular category and 10%
    # of the reports are fakes naming only the target (the attack, at a smaller size)
    n, eps = 2500, 2.0
    cfg = create(admin, name=f"poison {defense}", kind="frequency", oracle="OUE", epsilon=eps, categories=CATS16,
                 min_reports=100, poisoning_defense=defense)
    w = 1.0 / np.arange(1, 17) ** 1.1
    values = np.random.default_rng(5).choice(16, size=n, p=w / w.sum())
    honest = OUE(domain_size=16).perturb(values, epsilon=eps, rng=6)
    fakes = fake_reports(OUE(domain_size=16), 15, n // 9, attack="target", epsilon=eps, rng=7)
    _post_batch(server.url, cfg["id"], honest)
    _post_batch(server.url, cfg["id"], fakes)
    rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
    pois = rel["poisoning"]
    assert pois["method"] == defense
    est = np.array([rel["normalised"][c] for c in CATS16])
    truth = np.bincount(values, minlength=16) / n
    gain = est[15] / est.sum() - truth[15]
    if defense != "none":  # the fakes shift the report sizes far from the honest law
        assert pois["group_p_value"] < 1e-10 and pois["group_flagged"] is True
    else:  # nothing is tested or set aside
        assert pois["suspected"] == 0 and pois["group_p_value"] is None
    if defense == "recover":
        # about n / 9 = 277 fakes attributed; their gain falls from ~0.2 to within noise (sd ~ 0.02)
        assert 150 <= pois["suspected"] <= 450, pois
        assert abs(gain) < 0.08, gain
        assert est[15] < np.sort(est)[-4]
    else:
        assert gain > 0.12  # no recovery: the fakes' gain stays
    if defense == "detect":
        # per report: an OUE report with 9 or more ones has probability below 1e-3 when honest
        assert pois["report_threshold"] is not None and 0 < pois["false_positive_rate"] <= 1e-3
    # the ledger does not claim one report per participant without enrollment
    notes = " ".join(e.get("note", "") for e in rel["ledger"])
    assert "per submission" in notes and "report each" not in notes


def test_poisoning_defense_from_campaign_yaml(server, tmp_path) -> None:
    spec = tmp_path / "campaign.yaml"
    spec.write_text("name: yaml\nkind: frequency\nepsilon: 2\noracle: SUE\ncategories: [a, b, c]\n"
                    "poisoning_defense: recover\n", encoding="utf-8")
    res = CliRunner().invoke(cli_app, ["campaign", "create", str(spec), "--url", server.url],
                             env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert res.exit_code == 0, res.output
    assert '"poisoning_defense": "recover"' in res.output
    spec.write_text("name: yaml\nkind: frequency\nepsilon: 2\ncategories: [a, b]\npoisoning_defense: loud\n",
                    encoding="utf-8")
    res = CliRunner().invoke(cli_app, ["campaign", "create", str(spec), "--url", server.url],
                             env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert res.exit_code == 2 and "poisoning_defense" in res.output


def test_finding5_twenty_thousand_reports_from_one_client_ledger_wording(server, admin) -> None:
    cfg = create(admin, name="one client", kind="frequency", oracle="GRR", epsilon=1.0, categories=["a", "b"],
                 min_reports=100)
    payloads = np.zeros((20_000, 4), dtype=np.uint8)  # GRR: uint32le value 0
    assert _post_batch(server.url, cfg["id"], payloads)["new"] == 20_000
    rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
    notes = " ".join(e.get("note", "") for e in rel["ledger"])
    assert "20000 reports, one epsilon-LDP report per submission" in notes
    assert "participants, one report each" not in notes and "report each" not in notes
    assert "cannot tell" in rel["privacy"]
    # GRR: a fake report is indistinguishable from an honest one; the release says so
    assert rel["poisoning"]["suspected"] == 0 and "enrollment" in rel["poisoning"]["note"]
    # with enrollment, the wording states one report each (the tokens enforce it)
    enr = create(admin, name="enrolled", kind="frequency", oracle="GRR", epsilon=1.0, categories=["a", "b"],
                 min_reports=10, enrollment=True)
    tokens = admin.post(f"/campaigns/{enr['id']}/tokens", json={"count": 12}).json()["tokens"]
    out = _post_batch(server.url, enr["id"], np.zeros((12, 4), dtype=np.uint8), tokens)
    assert out["new"] == 12
    again = _post_batch(server.url, enr["id"], np.zeros((12, 4), dtype=np.uint8), tokens)
    assert again["new"] == 0 and len(again["rejected"]) == 12
    rel = admin.post(f"/campaigns/{enr['id']}/releases").json()
    assert "12 reports, one epsilon-LDP report each" in " ".join(e.get("note", "") for e in rel["ledger"])


@pytest.mark.parametrize("kind", ["frequency", "spatial", "synth"])
def test_finding9_tiny_epsilon_is_a_4xx_naming_the_field(admin, kind) -> None:
    spec: dict[str, object] = {"name": "tiny", "kind": kind, "epsilon": 1e-300}
    if kind == "frequency":
        spec["categories"] = ["a", "b"]
    elif kind == "spatial":
        spec.update(method="ug", bounds=[0, 0, 1, 1], expected_participants=1000)
    else:
        spec["attributes"] = [{"name": "a", "categories": ["x", "y"]}, {"name": "b", "categories": ["u", "v"]}]
        spec["degree"] = 1
    r = admin.post("/campaigns", json=spec)
    assert 400 <= r.status_code < 500, r.text
    assert r.json()["error"]["field"] == "epsilon"


def test_finding9_batch_group_beyond_int64_is_a_4xx(server, admin) -> None:
    cfg = create(admin, name="g", kind="frequency", oracle="GRR", epsilon=1.0, categories=["a", "b"])
    body = {"report_ids": base64.b64encode(secrets.token_bytes(16)).decode(),
            "reports": base64.b64encode(bytes(4)).decode(), "groups": [2**70]}
    r = httpx.post(f"{server.url}/campaigns/{cfg['id']}/reports/batch", json=body)
    assert r.status_code == 422 and r.json()["error"]["field"].startswith("groups")


def test_finding9_release_csv_neutralises_formulas(server, admin) -> None:
    evil = ['=HYPERLINK("http://evil.example","x")', "+cmd", "-2+3+cmd|' /C calc'!A0", "@SUM(A1)", "plain"]
    cfg = create(admin, name="csv", kind="frequency", oracle="GRR", epsilon=1.0, categories=evil, min_reports=10)
    _post_batch(server.url, cfg["id"], np.zeros((20, 4), dtype=np.uint8))
    rel = admin.post(f"/campaigns/{cfg['id']}/releases").json()
    text = httpx.get(f"{server.url}/campaigns/{cfg['id']}/releases/{rel['id']}", params={"format": "csv"}).text
    cells = [row[0] for row in csv.reader(io.StringIO(text))][1:]
    assert cells == ["'" + c for c in evil[:4]] + ["plain"]
    assert rel["estimates"][evil[0]] is not None  # the JSON keeps the names as declared


def test_finding9_cli_release_csv_neutralises_formulas(server, admin, tmp_path) -> None:
    evil = ['=HYPERLINK("http://evil.example","x")', "@SUM(A1)", "plain"]
    cfg = create(admin, name="cli csv", kind="frequency", oracle="GRR", epsilon=1.0, categories=evil,
                 min_reports=10)
    _post_batch(server.url, cfg["id"], np.zeros((20, 4), dtype=np.uint8))
    out = tmp_path / "release.csv"
    res = CliRunner().invoke(cli_app, ["campaign", "release", cfg["id"], "--url", server.url, "-o", str(out)],
                             env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert res.exit_code == 0, res.output
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert rows[0] == ["category", "estimate", "normalised"]
    assert [r[0] for r in rows[1:]] == ["'" + evil[0], "'" + evil[1], "plain"]
    bad = CliRunner().invoke(cli_app, ["campaign", "release", cfg["id"], "--url", server.url, "-o",
                                       str(tmp_path / "x.txt")], env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert bad.exit_code == 2 and "error:" in bad.output


def test_campaigns_are_archived_by_delete(server, admin) -> None:
    cfg = create(admin, name="arch", kind="frequency", oracle="GRR", epsilon=1.0, categories=["a", "b"],
                 min_reports=10)
    cid = cfg["id"]
    _post_batch(server.url, cid, np.zeros((20, 4), dtype=np.uint8))
    rel = admin.post(f"/campaigns/{cid}/releases").json()
    assert httpx.delete(f"{server.url}/campaigns/{cid}").status_code == 401
    first = admin.delete(f"/campaigns/{cid}")
    assert first.status_code == 200 and first.json()["archived_at"] is not None
    assert admin.delete(f"/campaigns/{cid}").json()["archived_at"] == first.json()["archived_at"]
    r = httpx.post(f"{server.url}/campaigns/{cid}/reports",
                   json={"report_id": _rid(), "report": base64.b64encode(bytes(4)).decode()})
    assert r.status_code == 410
    body = {"report_ids": base64.b64encode(secrets.token_bytes(16)).decode(),
            "reports": base64.b64encode(bytes(4)).decode()}
    assert httpx.post(f"{server.url}/campaigns/{cid}/reports/batch", json=body).status_code == 410
    assert admin.post(f"/campaigns/{cid}/releases").status_code == 410
    # released data stays published
    assert httpx.get(f"{server.url}/campaigns/{cid}/releases/{rel['id']}").json()["id"] == rel["id"]
    assert admin.get(f"/campaigns/{cid}/status").json()["open"] is False
    # the CLI archives too (idempotent)
    res = CliRunner().invoke(cli_app, ["campaign", "archive", cid, "--url", server.url],
                             env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert res.exit_code == 0 and "archived" in res.output
    res = CliRunner().invoke(cli_app, ["campaign", "archive", "0" * 16, "--url", server.url],
                             env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert res.exit_code == 2 and "404" in res.output
