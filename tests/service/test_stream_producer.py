"""``privpub.client.StreamProducer`` and ``privpub stream produce|create|query`` against a real server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
from service_helpers import ADMIN_TOKEN, Server
from stream_helpers import create_stream, ranges
from typer.testing import CliRunner

from privpub.cli import app
from privpub.client import StreamProducer, SubmissionError
from privpub.errors import ParameterError
from privpub.stream import make_publisher

runner = CliRunner()




def test_producer_sends_counts_in_batches(srv: Server, adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=256, rng=4)
    counts = np.random.default_rng(0).integers(0, 9, size=1000)
    p = StreamProducer(srv.url, s["id"], token=s["producer_token"], batch_size=300)
    res = p.send_counts(counts)
    assert (res.batches, res.items, res.duplicates, res.t) == (4, 1000, 0, 1000)
    lib = make_publisher("rtp", window=256, epsilon=1.0, rng=4)
    for a in range(0, 1000, 300):  # same batches as the producer: same answers
        lib.extend(counts[a : a + 300])
    q = np.array([[800, 1000], [999, 999], [745, 745]])
    assert np.array_equal(ranges(adm, s["id"], q, log=False), lib.answer(q, record=False))
    assert adm.get(f"/streams/{s['id']}/check").json()["true_total"] == int(counts.sum())
    with pytest.raises(SubmissionError) as exc:
        p.send_counts([1, -1])
    assert exc.value.status == 422 and exc.value.field == "counts"
    with pytest.raises(ParameterError, match="batch_size"):
        StreamProducer(srv.url, s["id"], token="x", batch_size=0)
    p.close()


def test_producer_events_and_replay(srv: Server, adm: httpx.Client) -> None:
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, step_seconds=3600)
    p = StreamProducer(srv.url, s["id"], token=s["producer_token"], batch_size=50)
    now = time.time()
    assert p.send_events(np.full(120, now)).batches == 3
    res = p.replay_times(np.linspace(0, 0.6, 30), speed=2.0, batch_seconds=0.1)
    assert res.items == 30 and res.batches >= 2
    assert adm.get(f"/streams/{s['id']}/check").json()["open_count"] == 150
    with pytest.raises(ParameterError, match="finite"):
        p.send_events([now, float("nan")])


def test_producer_sends_each_event_with_its_person(srv: Server, adm: httpx.Client) -> None:
    """A person-per-step stream counts at most k events of one person in a step: the producer sends
    the ids with the events, across batches (an id stays with its event, also when replay sorts the
    times); without ids the service refuses the events; bad ids are refused before any request."""
    k = 2
    s = create_stream(adm, publisher="rtp", epsilon=1.0, window=64, step_seconds=3600,
                      privacy_unit={"kind": "person_per_step", "privacy_id": "user", "max_contributions": k})
    p = StreamProducer(srv.url, s["id"], token=s["producer_token"], batch_size=4)
    now = time.time()
    ids = ["heavy"] * 7 + [1, 2, 2, 2, np.int64(3)]  # heavy: 7 events; 2: three; 1 and 3: one each
    res = p.send_events(np.full(len(ids), now), privacy_ids=ids)
    assert (res.items, res.batches) == (12, 3)
    expected = k + 1 + k + 1
    assert adm.get(f"/streams/{s['id']}/check").json()["open_count"] == expected
    # replay sorts the recorded times; each id moves with its time (the heavy person is at k already)
    rec = np.array([0.3, 0.0, 0.2, 0.1])
    res = p.replay_times(rec, privacy_ids=["heavy", "new", "heavy", "other"], speed=10.0, batch_seconds=0.01)
    assert res.items == 4
    assert adm.get(f"/streams/{s['id']}/check").json()["open_count"] == expected + 2
    with pytest.raises(SubmissionError) as exc:  # the stream protects people: events need their ids
        p.send_events([now])
    assert exc.value.status == 422 and exc.value.field == "privacy_ids"
    for bad, match in ((["a"], "one id per event"), ([True, "b"], r"privacy_ids\[0\]"), (["", "b"], r"privacy_ids\[0\]"),
                       (["b", "x" * 201], r"privacy_ids\[1\]"), (["b", 1.5], r"privacy_ids\[1\]")):
        with pytest.raises(ParameterError, match=match):
            p.send_events([now, now], privacy_ids=bad)
    assert adm.get(f"/streams/{s['id']}/check").json()["open_count"] == expected + 2
    p.close()


def test_cli_person_per_step_stream(srv: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVPUB_ADMIN_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("PRIVPUB_URL", srv.url)
    made = runner.invoke(app, ["stream", "create", "--name", "people", "-e", "1", "-w", "16", "-m", "rtp",
                               "--step-seconds", "3600", "--privacy-id", "user", "--max-contributions", "2"])
    assert made.exit_code == 0, made.output
    info = json.loads(made.output)
    assert info["privacy_unit"]["kind"] == "person_per_step" and info["privacy_unit"]["max_contributions"] == 2
    events = tmp_path / "events.csv"
    stamp = pd.Timestamp.now(tz="UTC").isoformat()
    pd.DataFrame({"time": [stamp] * 6, "user": [7, 7, 7, 7, 8, 9]}).to_csv(events, index=False)
    out = runner.invoke(app, ["stream", "produce", str(events), "--stream", info["id"], "--kind", "times",
                              "-c", "time", "--privacy-id", "user", "--token", info["producer_token"]])
    assert out.exit_code == 0, out.output
    with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as adm:
        assert adm.get(f"/streams/{info['id']}/check").json()["open_count"] == 2 + 1 + 1
    noid = runner.invoke(app, ["stream", "produce", str(events), "--stream", info["id"], "--kind", "times",
                               "-c", "time", "--token", info["producer_token"]])
    assert noid.exit_code != 0 and "privacy_ids" in noid.output
    half = runner.invoke(app, ["stream", "create", "--name", "x", "-e", "1", "-w", "16", "--privacy-id", "user"])
    assert half.exit_code == 2 and "--max-contributions" in half.output
    counts = runner.invoke(app, ["stream", "produce", str(events), "--stream", info["id"], "-c", "user",
                                 "--privacy-id", "user"])
    assert counts.exit_code == 2 and "--kind times" in counts.output
    pd.DataFrame({"time": [stamp] * 2, "user": ["a", None]}).to_csv(events, index=False)
    gap = runner.invoke(app, ["stream", "produce", str(events), "--stream", info["id"], "--kind", "times",
                              "-c", "time", "--privacy-id", "user", "--token", info["producer_token"]])
    assert gap.exit_code == 2 and "missing privacy id (row 1)" in gap.output


def test_cli_create_produce_query(srv: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVPUB_ADMIN_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("PRIVPUB_URL", srv.url)
    made = runner.invoke(app, ["stream", "create", "--name", "demo", "-e", "1", "-w", "128", "-m", "HQRTP"])
    assert made.exit_code == 0, made.output
    info = json.loads(made.output)
    counts = tmp_path / "counts.csv"
    pd.DataFrame({"minute": range(200), "requests": np.arange(200) % 17}).to_csv(counts, index=False)
    out = runner.invoke(app, ["stream", "produce", str(counts), "--stream", info["id"], "-c", "requests",
                              "--batch-size", "64", "--token", info["producer_token"]])
    assert out.exit_code == 0, out.output
    assert "sent 200 counts in 4 batches" in out.output and "released 200 steps" in out.output
    q = runner.invoke(app, ["stream", "query", info["id"], "--start", "101", "--end", "200"])
    assert q.exit_code == 0, q.output
    assert isinstance(json.loads(q.output)["estimate"], int)
    # event times as ISO timestamps (a clocked stream), sent with their own times
    clocked = json.loads(runner.invoke(app, ["stream", "create", "--name", "ev", "-e", "1", "-w", "16",
                                             "--step-seconds", "3600", "-m", "rtp"]).output)
    times = tmp_path / "times.csv"
    stamp = pd.Timestamp.now(tz="UTC").isoformat()
    pd.DataFrame({"time": [stamp] * 5}).to_csv(times, index=False)
    ev = runner.invoke(app, ["stream", "produce", str(times), "--stream", clocked["id"], "--kind", "times"])
    assert ev.exit_code == 0, ev.output
    assert "sent 5 times" in ev.output
    # errors: one line, exit code 2, the option named
    bad = runner.invoke(app, ["stream", "produce", str(counts), "--stream", info["id"], "--kind", "nope"])
    assert bad.exit_code == 2 and "--kind" in bad.output
    nocol = runner.invoke(app, ["stream", "produce", str(counts), "--stream", info["id"]])
    assert nocol.exit_code == 2 and "--column" in nocol.output
    refused = runner.invoke(app, ["stream", "query", info["id"], "--start", "5", "--end", "1"])
    assert refused.exit_code == 2 and "--end must be >= --start" in refused.output  # before connecting
    # the library command is still ``privpub stream INPUT``
    assert runner.invoke(app, ["stream", "--help"]).exit_code == 0


def test_cli_close_step_delete_and_reader_queries(srv: Server, adm: httpx.Client, monkeypatch: pytest.MonkeyPatch
                                                  ) -> None:
    """Issue 22: ``privpub stream close-step`` (idempotent by step), ``privpub stream delete`` and a
    reader's logged queries (``--token`` / $PRIVPUB_READER_TOKEN)."""
    monkeypatch.setenv("PRIVPUB_ADMIN_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("PRIVPUB_URL", srv.url)
    made = runner.invoke(app, ["stream", "create", "--name", "cli", "-e", "1", "-w", "64", "-m", "hq_rtp",
                               "--log-per-client", "5"])
    assert made.exit_code == 0, made.output
    info = json.loads(made.output)
    assert info["queries_from"] == "readers" and info["log_per_client"] == 5 and info["reader_token"]
    sid = info["id"]
    adm.post(f"/streams/{sid}/events", json={"batch_id": "e", "times": [time.time()] * 3})
    tok = ["--token", info["producer_token"]]
    first = runner.invoke(app, ["stream", "close-step", sid, *tok])
    assert first.exit_code == 0 and "t = 1" in first.output, first.output
    again = runner.invoke(app, ["stream", "close-step", sid, "--step", "1", *tok])
    assert again.exit_code == 0 and "t = 1" in again.output, again.output
    wrong = runner.invoke(app, ["stream", "close-step", sid, "--step", "5", *tok])
    assert wrong.exit_code == 2 and "t=1" in wrong.output
    monkeypatch.delenv("PRIVPUB_ADMIN_TOKEN")
    for _ in range(3):
        anon = runner.invoke(app, ["stream", "query", sid, "--start", "1", "--end", "1"])
        assert anon.exit_code == 0, anon.output
    for _ in range(7):
        rd = runner.invoke(app, ["stream", "query", sid, "--start", "1", "--end", "1", "--token", info["reader_token"]])
        assert rd.exit_code == 0, rd.output
    assert adm.get(f"/streams/{sid}/log").json()["queries_logged"] == 5  # readers only, 5 per client and hour
    monkeypatch.setenv("PRIVPUB_ADMIN_TOKEN", ADMIN_TOKEN)
    gone = runner.invoke(app, ["stream", "delete", sid])
    assert gone.exit_code == 0 and json.loads(gone.output)["t"] == 1, gone.output
    closed = runner.invoke(app, ["stream", "close-step", sid, *tok])
    assert closed.exit_code == 2 and "closed" in closed.output
    bad = runner.invoke(app, ["stream", "create", "--name", "x", "-e", "1", "-w", "8", "--queries-from", "all"])
    assert bad.exit_code == 2 and "--queries-from" in bad.output
