"""The client SDK: raw values never leave the client, retries with back-off, the offline queue."""

from __future__ import annotations

import base64
import json

import httpx
import numpy as np
import pandas as pd
import pytest
from service_helpers import ADMIN_TOKEN, Server, create, fresh_database

from privpub.client import Gateway, Participant, Receipt
from privpub.errors import DomainError


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("client")
    gen = fresh_database("sqlite", tmp)
    db = next(gen)
    srv = Server(db, tmp / "server.log").start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def admin(server):
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as c:
        yield c


class Recorder:
    """An httpx client whose every request body is kept for inspection."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.client = httpx.Client(timeout=30, event_hooks={"request": [self._hook]})

    def _hook(self, request: httpx.Request) -> None:
        self.bodies.append(request.read())


ALLOWED_SINGLE = {"report_id", "report", "group", "assignment", "token"}
ALLOWED_BATCH = {"report_ids", "reports", "groups", "assignments", "tokens"}


def _check_bodies(bodies: list[bytes], secrets_: list[str]) -> int:
    n_reports = 0
    for raw in bodies:
        text = raw.decode()
        for s in secrets_:
            assert s not in text
        if not raw:
            continue
        body = json.loads(text)
        if "report" in body:
            assert set(body) <= ALLOWED_SINGLE
            n_reports += 1
        elif "report_ids" in body:
            assert set(body) <= ALLOWED_BATCH
            n_reports += len(base64.b64decode(body["report_ids"])) // 16
        else:
            assert set(body) <= {"count"}  # assignment requests
    return n_reports


def test_raw_values_never_leave_the_client(server, admin) -> None:
    cats = ["CANARY-alpha", "CANARY-beta", "CANARY-gamma", "CANARY-delta"]
    freq = create(admin, name="f", kind="frequency", oracle="GRR", epsilon=1.0, categories=cats, min_reports=1)
    rec = Recorder()
    p = Participant(server.url, freq["id"], client=rec.client, rng=0)
    payloads = {p.submit("CANARY-beta").report_id for _ in range(30)}
    assert len(payloads) == 30
    Gateway(server.url, freq["id"], client=rec.client, rng=1).submit_many(cats * 50)
    # GRR with p = e/(e+3) ~ 0.48: the reported value differs from the true one about half the time
    reported = [base64.b64decode(json.loads(b)["report"])[0] for b in rec.bodies if b and b'"report"' in b]
    assert 5 < sum(r != 1 for r in reported) < 25
    points = np.array([[0.123456789, 0.987654321]] * 20)
    spatial = create(admin, name="s", kind="spatial", method="kdght", epsilon=1.0, bounds=[0, 0, 1, 1],
                     expected_participants=1000, min_reports=1, allow_unenrolled_phases=True)
    Gateway(server.url, spatial["id"], client=rec.client, rng=2).submit_many(points)
    Participant(server.url, spatial["id"], client=rec.client, rng=3).submit((0.123456789, 0.987654321))
    synth = create(admin, name="y", kind="synth", epsilon=4.0, min_reports=1, degree=1,
                   attributes=[{"name": "a", "categories": ["CANARY-x", "CANARY-y"]},
                               {"name": "b", "categories": ["CANARY-u", "CANARY-v"]}])
    Participant(server.url, synth["id"], client=rec.client, rng=4).submit({"a": "CANARY-y", "b": "CANARY-u"})
    Gateway(server.url, synth["id"], client=rec.client, rng=5).submit_many(
        pd.DataFrame({"a": ["CANARY-x"] * 10, "b": ["CANARY-v"] * 10}))
    sent = _check_bodies(rec.bodies, ["CANARY", "0.123456789", "0.98765432", "alpha", "beta"])
    assert sent == 30 + 200 + 21 + 11


def test_values_outside_the_domain_are_refused_on_the_device(server, admin) -> None:
    c = create(admin, name="dom", kind="frequency", oracle="OUE", epsilon=1.0, categories=["x", "y"])
    rec = Recorder()
    p = Participant(server.url, c["id"], client=rec.client)
    with pytest.raises(DomainError):
        p.submit("z")
    assert all(not b for b in rec.bodies)  # only the configuration was fetched


def test_retries_back_off_then_queue_then_flush(server, admin, tmp_path) -> None:
    c = create(admin, name="offline", kind="frequency", oracle="OUE", epsilon=1.0, categories=["x", "y"],
               min_reports=1)
    delays: list[float] = []
    queue = tmp_path / "queue.jsonl"
    p = Participant(server.url, c["id"], retries=4, backoff=0.1, max_backoff=1.0, queue_path=queue,
                    sleep=delays.append, rng=0)
    p.config()
    server.stop()
    try:
        receipt = p.submit("y")
        assert receipt.queued and receipt.received is None and p.pending == 1
        assert len(delays) == 4
        assert all(0.05 <= d <= 1.5 for d in delays) and delays[-1] > delays[0]  # exponential, capped, jittered
        stored = [json.loads(line) for line in queue.read_text().splitlines()]
        assert [set(s) for s in stored] == [{"report_id", "report", "group"}] and "y" not in queue.read_text()
        # a new process picks the queue up from the file
        again = Participant(server.url, c["id"], queue_path=queue, retries=0, sleep=delays.append)
        assert again.pending == 1 and again.flush() == [] and again.pending == 1
    finally:
        server.start()
    done = Participant(server.url, c["id"], queue_path=queue, sleep=delays.append).flush()
    assert [r.report_id for r in done] == [receipt.report_id] and isinstance(done[0], Receipt)
    # the queued report went once; flushing again (a lost receipt) stores nothing new
    item = stored[0]
    resend = httpx.post(f"{server.url}/campaigns/{c['id']}/reports", json=item)
    assert resend.status_code == 200 and resend.json()["received"] == done[0].received
    assert admin.get(f"/campaigns/{c['id']}/status").json()["n_reports"] == 1
