"""Streams of the flawed matrix-factorisation counters are never continued (issue 34).

``data/mf_streams_0_1_0.json`` holds the database rows of ``mf_sqrt``, ``blt`` and ``mf_range``
streams exactly as the flawed privpub (0.1.0, commit 3246757) stored them (written by that code's own
``privpub serve``: ``data/make_mf_streams_0_1_0.py``). Put into a database of that revision, a
real ``privpub serve`` of this version shows them closed with the reason, from its start-up on,
refuses to continue or query them (409 naming the reason, never a 500), never touches their stored
noise, and keeps them closed across restarts; a new ``mf_sqrt`` stream works and survives a restart.
The CLI reports the refusal as one privpub error (exit 2), not a traceback.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import sqlalchemy as sa
from service_helpers import ADMIN_TOKEN, Server, fresh_database
from stream_helpers import CHECKS, admin_client, create_stream, post_counts, ranges, stream_server
from typer.testing import CliRunner

from privpub.errors import RetiredStateError
from privpub.service import head_revision, make_engine, upgrade
from privpub.service._db import current_revision, write_tx
from privpub.service._streams import unpack_state
from privpub.stream import StreamPublisher, join_state, retired_state_reason
from privpub.stream._mf import RETIRED_MF_REASON

FIXTURE = json.loads((Path(__file__).with_name("data") / "mf_streams_0_1_0.json").read_text())
OLD = {s["id"]: s for s in FIXTURE["streams"]}
#: the counts the fixture's count streams were fed (make_mf_streams_0_1_0.py)
OLD_COUNTS = [3, 1, 4, 1, 5, 9, 2]


def _blob(v: Any) -> Any:
    return base64.b64decode(v["base64"]) if isinstance(v, dict) and set(v) == {"base64"} else v


def _write_old_rows(url: str, ids: list[str]) -> None:
    """The fixture's rows into ``url`` (at revision 0008, as the flawed privpub left its database)."""
    engine = make_engine(url, pool_size=1)
    try:
        with write_tx(engine) as conn:
            for sid in ids:
                old = OLD[sid]
                row = {k: _blob(v) for k, v in old["row"].items()}
                cols = ", ".join(row)
                conn.execute(sa.text(f"INSERT INTO streams ({cols}) VALUES ({', '.join(':' + k for k in row)})"), row)
                for part in old["parts"]:
                    conn.execute(sa.text("INSERT INTO stream_parts (stream_id, t_end, t_from, data) VALUES "
                                         "(:stream_id, :t_end, :t_from, :data)"), {k: _blob(v) for k, v in part.items()})
                for q in old["queries"]:  # their own sequence numbers: the database's
                    conn.execute(sa.text("INSERT INTO stream_queries (stream_id, asked_at, t, range_start, range_end) "
                                         "VALUES (:stream_id, :asked_at, :t, :range_start, :range_end)"),
                                 {k: v for k, v in q.items() if k != "seq"})
    finally:
        engine.dispose()


def _stored(url: str, sid: str) -> tuple[bytes, list[bytes], int]:
    """A stream's stored head, its parts (in order) and its open step's count."""
    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            state, open_count = conn.execute(sa.text("SELECT state, open_count FROM streams WHERE id = :s"),
                                             {"s": sid}).one()
            parts = conn.execute(sa.text("SELECT data FROM stream_parts WHERE stream_id = :s ORDER BY t_end"),
                                 {"s": sid}).scalars().all()
        return bytes(state), [bytes(p) for p in parts], int(open_count)
    finally:
        engine.dispose()


def _reason(sid: str) -> str:
    return RETIRED_MF_REASON.format(method=OLD[sid]["row"]["method"])


def _refused(resp: httpx.Response, sid: str) -> None:
    """A 409 whose message names the stream's reason (the JSON error of every privpub refusal)."""
    assert resp.status_code == 409, (resp.status_code, resp.text)
    assert _reason(sid) in resp.json()["error"]["message"], resp.text


@pytest.fixture()
def old_db(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database the flawed privpub wrote: revision 0008 with its four matrix-factorisation streams."""
    gen = fresh_database(backend, tmp_path)
    url = next(gen)
    try:
        assert upgrade(url, FIXTURE["revision"]) == "0008_budget_sessions_measure"
        _write_old_rows(url, list(OLD))
        yield url
    finally:
        gen.close()


def _check_fixture() -> None:
    """The stored streams are the flawed mechanism's (not merely a state without a key): their heads
    lack ``mf_format`` and two answers of the ``mf_sqrt`` stream read the parity of its first count,
    ``frac(q(1, 2) - q(1, 1) / 2) = (x_1 mod 2) / 2`` (the leak of issue 34)."""
    for sid, old in OLD.items():
        head = unpack_state(_blob(old["row"]["state"]))
        assert "mf_format" not in head and head["method"] in ("mf_sqrt", "blt", "mf_range")
        assert retired_state_reason(head) == _reason(sid)
        # the library refuses the whole stored state too (what a worker would have loaded)
        full = join_state(head, [unpack_state(_blob(p["data"])) for p in old["parts"]])
        with pytest.raises(RetiredStateError) as err:
            StreamPublisher.from_state(full)
        assert (str(err.value), err.value.method, err.value.param) == (_reason(sid), head["method"], "state")
    counted = next(s for s in OLD.values() if s["row"]["method"] == "mf_sqrt" and s["row"]["step_seconds"] is None)
    q11, q12 = counted["answers"][:2]
    assert math.isclose((q12 - q11 / 2) % 1.0, (OLD_COUNTS[0] % 2) / 2)
    clocked = next(s for s in OLD.values() if s["row"]["step_seconds"] is not None)
    q11, q12 = clocked["answers"][:2]  # its first hour held no event: x_1 = 0
    assert math.isclose((q12 - q11 / 2) % 1.0, 0.0)


def test_flawed_streams_are_closed_with_their_reason_and_never_continued(old_db: str, tmp_path: Path) -> None:
    _check_fixture()
    before = {sid: _stored(old_db, sid) for sid in OLD}
    log = tmp_path / "server.log"
    srv = stream_server(old_db, log).start()  # upgrades the database to the head
    try:
        with admin_client(srv) as adm:
            # start-up: the listing (which loads no stream) already shows them closed, with the reason
            listed = {s["id"]: s for s in adm.get("/streams").json()["streams"]}
            for sid in OLD:
                assert listed[sid]["status"] == "closed" and listed[sid]["closed_reason"] == _reason(sid)
                assert isinstance(listed[sid]["closed_at"], int)
            closed_at = {sid: listed[sid]["closed_at"] for sid in OLD}
            for sid, old in OLD.items():
                st = adm.get(f"/streams/{sid}").json()
                assert (st["status"], st["closed_reason"], st["closed_at"]) == ("closed", _reason(sid), closed_at[sid])
                assert st["t"] == old["row"]["t"] and st["answerable"] is None
                assert st["publisher"] == old["row"]["method"] and st["measure"] == "zcdp"
                # continuing: refused with the reason, with the producer token (checked first) or the admin's
                producer = {"Authorization": f"Bearer {old['producer_token']}"}
                if old["row"]["step_seconds"] is None:
                    _refused(adm.post(f"/streams/{sid}/counts", json={"counts": [1], "batch_id": "new"}), sid)
                    _refused(httpx.post(f"{srv.url}/streams/{sid}/counts", headers=producer,
                                        json={"counts": [1, 2], "batch_id": "new2"}), sid)
                    _refused(httpx.post(f"{srv.url}/streams/{sid}/close-step", headers=producer,
                                        json={"t": old["row"]["t"] + 1}), sid)
                _refused(httpx.post(f"{srv.url}/streams/{sid}/events", headers=producer,
                                    json={"times": [time.time()], "batch_id": "new3"}), sid)
                wrong = httpx.post(f"{srv.url}/streams/{sid}/counts", headers={"Authorization": "Bearer nope"},
                                   json={"counts": [1], "batch_id": "x"})
                assert wrong.status_code == 403
                # querying: the answers are not served any more (anonymous, reader or admin)
                reader = {"Authorization": f"Bearer {old['reader_token']}"}
                _refused(httpx.get(f"{srv.url}/streams/{sid}/range", params={"start": 1, "end": 1}), sid)
                _refused(httpx.get(f"{srv.url}/streams/{sid}/range", params={"start": 1, "end": 2}, headers=reader), sid)
                _refused(adm.post(f"/streams/{sid}/ranges", json={"ranges": [[1, 1], [1, 2]], "log": False}), sid)
                _refused(adm.get(f"/streams/{sid}/series"), sid)
                page = httpx.get(f"{srv.url}/streams/{sid}/dashboard")
                assert page.status_code == 200 and _reason(sid) in page.text and 'id="series"' not in page.text
                # the operator sees what was answered (the exposure) and why the stream is closed
                op = adm.get(f"/streams/{sid}/log").json()
                assert op["closed_reason"] == _reason(sid) and op["queries_logged"] == len(old["queries"])
                assert [[q["start"], q["end"]] for q in op["queries"]] == \
                    [[q["range_start"], q["range_end"]] for q in old["queries"]]
                # closing it is answered (idempotent): the closure stays as it was
                gone = adm.delete(f"/streams/{sid}").json()
                assert (gone["closed_at"], gone["closed_reason"]) == (closed_at[sid], _reason(sid))
            time.sleep(1.0)  # five ticks of the clock: the clocked stream (hours behind) is left alone
            for sid in OLD:
                st = adm.get(f"/streams/{sid}").json()
                assert st["t"] == OLD[sid]["row"]["t"] and "clock_error" not in st
            # and it has no clock to lag behind (no alert growing for ever)
            metrics = adm.get("/metrics")
            assert metrics.status_code == 200 and "privpub_stream_clock_lag_seconds" in metrics.text
            assert not any(sid in line for line in metrics.text.splitlines() for sid in OLD), metrics.text
        assert "Traceback" not in srv.log() and "status=500" not in srv.log()

        # the stored noise is untouched: head and parts bit for bit; the open step's events are discarded
        for sid in OLD:
            state, parts, open_count = _stored(old_db, sid)
            assert (state, parts) == before[sid][:2]
            assert open_count == 0
        assert before[next(s for s in OLD if OLD[s]["row"]["step_seconds"])][2] == 3  # it held 3 events

        # a new mf_sqrt stream (the fixed counter) works, and survives a restart with the same answers
        with admin_client(srv) as adm:
            new = create_stream(adm, publisher="mf_sqrt", rho=0.5, window=16, block_length=8)["id"]
            post_counts(adm, new, OLD_COUNTS)
            q = [[lo, hi] for hi in range(1, 8) for lo in range(1, hi + 1)]
            answers = ranges(adm, new, q, log=False)
            st = adm.get(f"/streams/{new}").json()
            assert (st["status"], st["closed_reason"], st["t"]) == ("open", None, 7)
        assert retired_state_reason(unpack_state(_stored(old_db, new)[0])) is None

        srv.kill()
        srv = Server(old_db, log, port=srv.port, env=CHECKS).start()
        with admin_client(srv) as adm:
            assert np.array_equal(ranges(adm, new, q, log=False), answers)
            assert post_counts(adm, new, [6, 5])["t"] == 9
            for sid in OLD:  # still closed, at the same time, for the same reason
                st = adm.get(f"/streams/{sid}").json()
                assert (st["status"], st["closed_at"], st["closed_reason"]) == ("closed", closed_at[sid], _reason(sid))
                _refused(adm.post(f"/streams/{sid}/ranges", json={"ranges": [[1, 1]]}), sid)
        engine = make_engine(old_db, pool_size=1)
        try:
            assert current_revision(engine) == head_revision()
        finally:
            engine.dispose()
    finally:
        srv.stop()
    assert "Traceback" not in log.read_text(errors="replace")


def test_a_flawed_stream_found_on_first_access_is_closed_there(backend: str, tmp_path: Path) -> None:
    """A row the start-up check did not see (written while the service ran, e.g. restored from a
    backup) is closed on its first access, whatever that access is: a producer's post first."""
    gen = fresh_database(backend, tmp_path)
    url = next(gen)
    srv = None
    try:
        upgrade(url, FIXTURE["revision"])
        srv = stream_server(url, tmp_path / "server.log").start()
        counted = [s for s in OLD if OLD[s]["row"]["step_seconds"] is None]
        _write_old_rows(url, counted)
        with admin_client(srv) as adm:
            first = counted[0]
            producer = {"Authorization": f"Bearer {OLD[first]['producer_token']}"}
            _refused(httpx.post(f"{srv.url}/streams/{first}/counts", headers=producer,
                                json={"counts": [1], "batch_id": "a"}), first)
            st = adm.get(f"/streams/{first}").json()
            assert (st["status"], st["closed_reason"]) == ("closed", _reason(first))
            second = counted[1]  # first touched by an anonymous query
            _refused(httpx.get(f"{srv.url}/streams/{second}/range", params={"start": 1, "end": 1}), second)
            listed = {s["id"]: s for s in adm.get("/streams").json()["streams"]}
            assert listed[second]["closed_reason"] == _reason(second)
            third = counted[2]  # first touched by its status
            assert adm.get(f"/streams/{third}").json()["closed_reason"] == _reason(third)
            _refused(adm.post(f"/streams/{third}/counts", json={"counts": [1], "batch_id": "b"}), third)
        assert "Traceback" not in srv.log() and "status=500" not in srv.log()
    finally:
        if srv is not None:
            srv.stop()
        gen.close()


def test_downgrade_keeps_them_closed(old_db: str, tmp_path: Path) -> None:
    """Below 0009 the reason goes but ``closed_at`` stays: an older privpub never continues them."""
    from alembic import command

    from privpub.service._db import alembic_config

    srv = stream_server(old_db, tmp_path / "server.log").start()
    srv.stop()
    command.downgrade(alembic_config(old_db), "0008_budget_sessions_measure")
    engine = make_engine(old_db, pool_size=1)
    try:
        with engine.connect() as conn:
            closed = dict(conn.execute(sa.text("SELECT id, closed_at FROM streams")).all())
        assert set(closed) == set(OLD) and all(v is not None for v in closed.values())
    finally:
        engine.dispose()
    assert upgrade(old_db) == head_revision()  # and back up: closed again on the next start


def test_cli_reports_the_reason_as_a_privpub_error(old_db: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``privpub stream query|produce|close-step`` on such a stream: one ``error:`` line naming the
    reason, exit 2 (as every privpub error), no traceback."""
    from privpub.cli import app

    srv = stream_server(old_db, tmp_path / "server.log").start()
    try:
        sid = next(s for s in OLD if OLD[s]["row"]["step_seconds"] is None)
        counts = tmp_path / "counts.txt"
        counts.write_text("1\n2\n")
        env = {"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN, "PRIVPUB_URL": srv.url}
        runner = CliRunner()
        for args in (["stream", "query", sid, "--start", "1", "--end", "2"],
                     ["stream", "produce", str(counts), "--stream", sid, "--token", OLD[sid]["producer_token"]],
                     ["stream", "close-step", sid]):
            result = runner.invoke(app, [*args, "--url", srv.url], env=env)
            assert result.exit_code == 2, (args, result.output, repr(result.exception))
            errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
            assert len(errors) == 1 and "refused the request (409)" in errors[0] and _reason(sid) in errors[0], \
                result.output
            assert "Traceback" not in result.output
    finally:
        srv.stop()
