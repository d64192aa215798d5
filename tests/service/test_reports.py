"""Reports over HTTP: idempotent resends, validation before storage, enrollment tokens, closing,
minimum batch, and error bodies that never echo a report."""

from __future__ import annotations

import base64
import secrets

import httpx
import numpy as np
import pytest
from service_helpers import create

from privpub.client import Participant, SubmissionError, b64encode


@pytest.fixture(scope="module")
def campaign(admin):
    return create(admin, name="reports", kind="frequency", oracle="OUE", epsilon=1.0,
                  categories=["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"], min_reports=5)


def _status(admin, cid):
    return admin.get(f"/campaigns/{cid}/status").json()


def _report(width: int = 2, byte: int = 1) -> dict[str, str]:
    return {"report_id": secrets.token_hex(16), "report": base64.b64encode(bytes([byte] * width)).decode()}


def test_resend_returns_same_receipt_and_is_stored_once(server, admin, campaign) -> None:
    cid = campaign["id"]
    before = _status(admin, cid)["n_reports"]
    body = _report()
    first = httpx.post(f"{server.url}/campaigns/{cid}/reports", json=body)
    again = httpx.post(f"{server.url}/campaigns/{cid}/reports", json=body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json() == again.json() == {"campaign_id": cid, "report_id": body["report_id"],
                                            "received": first.json()["received"]}
    assert _status(admin, cid)["n_reports"] == before + 1
    # the same ids in a batch: all duplicates; a batch repeating an id stores it once
    ids = bytes.fromhex(body["report_id"]) + secrets.token_bytes(16)
    batch = {"report_ids": base64.b64encode(ids + ids[16:]).decode(),
             "reports": base64.b64encode(b"\x01\x00" * 3).decode()}
    out = httpx.post(f"{server.url}/campaigns/{cid}/reports/batch", json=batch).json()
    assert (out["new"], out["duplicates"]) == (1, 2)
    assert _status(admin, cid)["n_reports"] == before + 2


@pytest.mark.parametrize(("body", "field"), [
    ({"report_id": "zz" * 16, "report": "AQA="}, "report_id"),
    ({"report_id": "ab" * 16, "report": "AQ=="}, "report"),  # 1 byte, the campaign needs 2
    ({"report_id": "ab" * 16, "report": "AQD/"}, "report"),  # 3 bytes
    ({"report_id": "ab" * 16, "report": "AP8="}, "report"),  # bits beyond the 10 cells
    ({"report_id": "ab" * 16, "report": "AQA=", "group": 5}, "group"),
    ({"report_id": "ab" * 16, "report": "AQA=", "extra": 1}, "extra"),
    ({"report": "AQA="}, "report_id"),
])
def test_malformed_reports_are_refused_naming_the_field(server, admin, campaign, body, field) -> None:
    cid = campaign["id"]
    before = _status(admin, cid)["n_reports"]
    resp = httpx.post(f"{server.url}/campaigns/{cid}/reports", json=body)
    assert 400 <= resp.status_code < 500, resp.text
    assert resp.json()["error"]["field"] == field
    assert _status(admin, cid)["n_reports"] == before


def test_batch_validation_names_the_report_and_stores_nothing(server, admin, campaign) -> None:
    cid = campaign["id"]
    before = _status(admin, cid)["n_reports"]
    payloads = bytearray(b"\x01\x00" * 5)
    payloads[7] = 0xFF  # report 3 sets bits beyond the 10 cells
    body = {"report_ids": b64encode(secrets.token_bytes(80)), "reports": b64encode(bytes(payloads))}
    resp = httpx.post(f"{server.url}/campaigns/{cid}/reports/batch", json=body)
    assert resp.status_code == 422 and resp.json()["error"]["field"] == "reports[3]"
    short = {"report_ids": b64encode(secrets.token_bytes(80)), "reports": b64encode(b"\x01" * 9)}
    assert httpx.post(f"{server.url}/campaigns/{cid}/reports/batch", json=short).json()["error"]["field"] == "reports"
    assert _status(admin, cid)["n_reports"] == before


def test_errors_and_logs_never_echo_report_content(server, campaign) -> None:
    cid = campaign["id"]
    marker = "Q2FuYXJ5U2VjcmV0VmFsdWU="  # base64 of a marker: valid base64, wrong length
    bodies = [{"report_id": "ab" * 16, "report": marker},
              {"report_id": "CANARY" * 5 + "ab", "report": marker},
              {"report_id": "ab" * 16, "report": marker, "token": "CANARYCANARYCANARY"}]
    for body in bodies:
        resp = httpx.post(f"{server.url}/campaigns/{cid}/reports", json=body)
        assert resp.status_code == 422
        assert marker not in resp.text and "CANARY" not in resp.text
    broken = httpx.post(f"{server.url}/campaigns/{cid}/reports", content=b'{"report": "CANARY', headers={
        "content-type": "application/json"})
    assert broken.status_code == 422 and "CANARY" not in broken.text
    assert "CANARY" not in server.log() and marker not in server.log()


def test_minimum_batch_and_closing(server, admin) -> None:
    c = create(admin, name="small", kind="frequency", oracle="GRR", epsilon=1.0, categories=["x", "y"], min_reports=3)
    p = Participant(server.url, c["id"], rng=0)
    p.submit("x")
    resp = admin.post(f"/campaigns/{c['id']}/releases")
    assert resp.status_code == 409 and "below its minimum of 3" in resp.json()["error"]["message"]
    p.submit("y")
    p.submit("y")
    assert admin.post(f"/campaigns/{c['id']}/releases").status_code == 201
    assert admin.post(f"/campaigns/{c['id']}/close").status_code == 200
    with pytest.raises(SubmissionError) as err:
        p.submit("x")
    assert err.value.status == 409
    assert _status(admin, c["id"])["n_reports"] == 3


def test_enrollment_tokens_count_each_participant_once(server, admin) -> None:
    c = create(admin, name="enrolled", kind="frequency", oracle="OUE", epsilon=1.0, categories=["x", "y", "z"],
               enrollment=True, min_reports=1)
    tokens = admin.post(f"/campaigns/{c['id']}/tokens", json={"count": 3}).json()["tokens"]
    assert len(set(tokens)) == 3
    with pytest.raises(SubmissionError) as err:
        Participant(server.url, c["id"]).submit("x")  # no token
    assert err.value.field == "token"
    Participant(server.url, c["id"], token=tokens[0]).submit("x")
    with pytest.raises(SubmissionError) as err:
        Participant(server.url, c["id"], token=tokens[0]).submit("y")  # used
    assert (err.value.status, err.value.field) == (403, "token")
    with pytest.raises(SubmissionError):
        Participant(server.url, c["id"], token="x" * 32).submit("y")  # unknown
    # a batch: one fresh token, one reused, one used twice in the batch
    ids = secrets.token_bytes(64)
    body = {"report_ids": b64encode(ids), "reports": b64encode(np.zeros(4, dtype=np.uint8)),
            "tokens": [tokens[1], tokens[0], tokens[2], tokens[2]]}
    out = httpx.post(f"{server.url}/campaigns/{c['id']}/reports/batch", json=body).json()
    assert out["new"] == 2 and [r["index"] for r in out["rejected"]] == [1, 3]
    assert _status(admin, c["id"])["n_reports"] == 3


def test_no_ip_device_id_or_exact_time_is_stored(server, admin, db_url, campaign) -> None:
    import sqlalchemy as sa

    from privpub.service import make_engine
    from privpub.service._tables import metadata

    cid = campaign["id"]
    marker_ip = "203.0.113.77"
    for _ in range(3):
        resp = httpx.post(f"{server.url}/campaigns/{cid}/reports", json=_report(),
                          headers={"X-Forwarded-For": marker_ip, "X-Real-IP": marker_ip,
                                   "User-Agent": "device-CANARY-42"})
        assert resp.status_code == 201
    engine = make_engine(db_url, pool_size=1)
    try:
        with engine.connect() as conn:
            dump = ""
            for table in metadata.sorted_tables:
                dump += repr(conn.execute(sa.select(table)).all())
            received = conn.execute(sa.text("SELECT received FROM reports WHERE campaign_id = :c"),
                                    {"c": cid}).scalars().all()
    finally:
        engine.dispose()
    assert marker_ip not in dump and "CANARY" not in dump
    assert received and all(r % campaign["time_precision"] == 0 for r in received)
    assert marker_ip not in server.log() and "device-CANARY" not in server.log()
