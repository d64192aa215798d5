"""Person-per-step streams in the service (issue 25), on SQLite and PostgreSQL through a real
server: a stream declares ``privacy_unit`` (person_per_step, privacy_id, max_contributions), events
carry their person's id and at most k of a person's events count in one step (across batches and
across a SIGKILL restart), the answers equal the library publisher's on the bounded counts, and
the stream's status states the unit in words."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest
from service_helpers import Server
from stream_helpers import CHECKS, admin_client, create_stream, ranges, stream_server

from privpub import PrivacyUnit
from privpub.stream import RTP

K = 3
UNIT = {"kind": "person_per_step", "privacy_id": "user", "max_contributions": K}


def _events(adm: httpx.Client, sid: str, ids: list[object], times: list[float] | None = None) -> dict[str, object]:
    now = time.time()
    body = {"batch_id": uuid.uuid4().hex, "times": times or [now] * len(ids), "privacy_ids": ids}
    resp = adm.post(f"/streams/{sid}/events", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def _check(adm: httpx.Client, sid: str) -> dict[str, int]:
    resp = adm.get(f"/streams/{sid}/check")
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def test_events_are_bounded_per_person_and_step_and_answers_equal_the_library(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, rng=99, privacy_unit=UNIT)
    sid = s["id"]
    lib = RTP(window=64, epsilon=1.0, rng=99, privacy_unit=PrivacyUnit.person_per_step("user", K))
    g = np.random.default_rng(5)
    for step in range(1, 9):
        # a heavy person (up to 8 events, in two batches), a few light ones with string and integer ids
        heavy = int(g.integers(0, 9))
        batch1: list[object] = ["heavy"] * (heavy // 2) + [1, 2, 2]
        batch2: list[object] = ["heavy"] * (heavy - heavy // 2) + ["x", 2, 2]
        got1 = _events(adm, sid, batch1)
        got2 = _events(adm, sid, batch2)
        counted = got1["counted"] + got2["counted"]  # type: ignore[operator]
        expected = min(heavy, K) + 1 + min(4, K) + 1  # heavy, 1, 2 (four events), "x"
        assert counted == expected
        assert _check(adm, sid)["open_count"] == expected
        assert adm.post(f"/streams/{sid}/close-step", json={"t": step}).json()["t"] == step
        lib.append(expected)
    q = [[lo, hi] for hi in range(1, 9) for lo in range(1, hi + 1)]
    assert np.array_equal(ranges(adm, sid, q, log=False), lib.answer(np.array(q), record=False))


def test_status_states_the_unit_in_words(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="bt", epsilon=0.5, window=64, privacy_unit=UNIT, step_seconds=60)
    status = adm.get(f"/streams/{s['id']}").json()
    assert status["privacy_unit"]["kind"] == "person_per_step"
    assert status["privacy_unit"]["max_contributions"] == K and status["privacy_unit"]["column"] == "user"
    assert "at most 3 per step" in status["privacy_unit"]["description"]
    words = status["neighbouring"]
    assert "Person-per-step" in words and "at most 3 events of a person" in words and "60-second step" in words
    plain = create_stream(adm, publisher="bt", epsilon=0.5, window=64)
    assert adm.get(f"/streams/{plain['id']}").json()["privacy_unit"]["kind"] == "event"


def test_clocked_events_across_steps(adm: httpx.Client) -> None:
    step = 3600.0
    origin = (time.time() // step) * step - 2 * step  # two steps closed by the clock, the third open
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, step_seconds=step, origin=origin,
                      late="current", privacy_unit=UNIT)
    sid = s["id"]
    now = time.time()
    got = _events(adm, sid, ["a"] * 5 + ["b"] * 2, [now] * 7)
    assert got["accepted"] == 7 and got["counted"] == K + 2
    got = _events(adm, sid, ["a"] * 5 + ["c"], [now] * 6)  # a is at k already in the open step
    assert got["counted"] == 1
    # a late event of a closed step is counted in the open step (late="current"), bounded there too
    got = _events(adm, sid, ["b", "b"], [origin + 10, origin + 20])
    assert got["counted"] == 1  # b had 2 in the open step, k = 3
    assert _check(adm, sid)["open_count"] == K + 2 + 1 + 1


@pytest.mark.parametrize(("body", "field"), [
    ({"times": [1.0]}, "privacy_ids"),                                   # no ids
    ({"times": [1.0, 2.0], "privacy_ids": ["a"]}, "privacy_ids"),        # one id short
    ({"time": 1.0, "privacy_ids": ["a"]}, "privacy_ids"),                # ids with one time
    ({"times": [1.0], "privacy_ids": [True]}, "privacy_ids.0"),          # not a string or integer
    ({"times": [1.0], "privacy_ids": ["x" * 201]}, "privacy_ids.0"),     # too long
])
def test_bad_events_name_the_field(adm: httpx.Client, body: dict[str, object], field: str) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, privacy_unit=UNIT)
    resp = adm.post(f"/streams/{s['id']}/events", json={"batch_id": "b1", **body})
    assert resp.status_code == 422, resp.text
    assert field in resp.text
    assert _check(adm, s["id"])["open_count"] == 0


def test_counts_are_refused_and_ids_need_a_person_stream(adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, privacy_unit=UNIT)
    resp = adm.post(f"/streams/{s['id']}/counts", json={"batch_id": "c1", "counts": [3]})
    assert resp.status_code == 409 and "privacy_ids" in resp.text
    plain = create_stream(adm, publisher="rtp", epsilon=1.0, window=64)
    resp = adm.post(f"/streams/{plain['id']}/events", json={"batch_id": "e1", "times": [1.0], "privacy_ids": ["a"]})
    assert resp.status_code == 422 and "event level" in resp.text


@pytest.mark.parametrize(("unit", "field"), [
    ({"kind": "w_event", "privacy_id": "user", "max_contributions": 2}, "privacy_unit"),
    ({"privacy_id": "user", "max_contributions": 0}, "max_contributions"),
    ({"privacy_id": "", "max_contributions": 2}, "privacy_id"),
    ({"max_contributions": 2}, "privacy_id"),
])
def test_bad_units_are_refused(adm: httpx.Client, unit: dict[str, object], field: str) -> None:
    resp = adm.post("/streams", json={"name": "x", "publisher": "rtp", "epsilon": 1.0, "window": 8,
                                      "privacy_unit": unit})
    assert resp.status_code == 422, resp.text
    assert field in resp.text


def test_the_open_steps_bound_survives_a_sigkill(db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    srv = stream_server(db_url, log).start()
    try:
        with admin_client(srv) as adm:
            sid = create_stream(adm, publisher="hq_rtp", epsilon=1.0, window=64, rng=4, privacy_unit=UNIT)["id"]
            _events(adm, sid, ["p"] * 2 + ["q"])
            adm.post(f"/streams/{sid}/close-step", json={"t": 1})
            _events(adm, sid, ["p"] * 2)  # step 2 is open, p has 2
            before = ranges(adm, sid, [[1, 1]], log=False)
        srv.kill()
        srv = Server(srv.db, log, port=srv.port, env=CHECKS).start()
        with admin_client(srv) as adm:
            assert np.array_equal(ranges(adm, sid, [[1, 1]], log=False), before)  # no released node redrawn
            assert _events(adm, sid, ["p"] * 4)["counted"] == 1  # p's third event of step 2, no more
            assert _check(adm, sid)["open_count"] == K
            assert adm.post(f"/streams/{sid}/close-step", json={"t": 2}).json()["t"] == 2
            assert _events(adm, sid, ["p"] * 4)["counted"] == K  # a new step: p may count k again
            assert adm.get(f"/streams/{sid}").json()["privacy_unit"]["kind"] == "person_per_step"
    finally:
        srv.stop()
