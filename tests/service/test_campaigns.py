"""Campaign declarations: validation naming the field, open/close times, and the CLI commands."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from service_helpers import ADMIN_TOKEN, create
from typer.testing import CliRunner

from privpub.cli import app
from privpub.client import Participant, SubmissionError

FREQ = {"name": "x", "kind": "frequency", "epsilon": 1.0, "categories": ["a", "b"]}


@pytest.mark.parametrize(("change", "field"), [
    ({"categories": None}, "categories"),
    ({"categories": ["a", "a"]}, "categories"),
    ({"categories": ["a"]}, "categories"),
    ({"epsilon": 0}, "epsilon"),
    ({"epsilon": 41}, "epsilon"),
    ({"oracle": "XYZ"}, "oracle"),
    ({"min_reports": 0}, "min_reports"),
    ({"bounds": [0, 0, 1, 1]}, "bounds"),
    ({"kind": "spatial", "categories": None}, "bounds"),
    ({"kind": "spatial", "categories": None, "bounds": [0, 0, 1, 1]}, "expected_participants"),
    ({"kind": "spatial", "categories": None, "bounds": [1, 0, 0, 1], "expected_participants": 100}, "bounds"),
    ({"kind": "synth", "categories": None, "attributes": [{"name": "a", "categories": ["x", "y"]},
                                                          {"name": "b", "categories": ["u", "v"]}], "degree": 2},
     "degree"),
    ({"kind": "synth", "categories": None, "attributes": [{"name": "a"}, {"name": "b"}]}, "attributes.0.categories"),
    ({"closes_at": "2020-01-01T00:00:00Z", "opens_at": "2021-01-01T00:00:00Z"}, "closes_at"),
    ({"unknown": 1}, "unknown"),
])
def test_invalid_declarations_name_the_field(admin, change, field) -> None:
    spec = {k: v for k, v in {**FREQ, **change}.items() if v is not None}
    resp = admin.post("/campaigns", json=spec)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"] == field


def test_reports_outside_the_open_window_are_refused(server, admin) -> None:
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    c = create(admin, **FREQ, opens_at=later)
    with pytest.raises(SubmissionError) as err:
        Participant(server.url, c["id"]).submit("a")
    assert err.value.status == 409
    past = create(admin, **FREQ, closes_at="2001-01-01T00:00:00")
    with pytest.raises(SubmissionError):
        Participant(server.url, past["id"]).submit("a")


def test_cli_campaign_lifecycle(server, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PRIVPUB_ADMIN_TOKEN", ADMIN_TOKEN)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: cli\nkind: frequency\noracle: OUE\nepsilon: 2\ncategories: [x, y, z]\nmin_reports: 50\n")
    runner = CliRunner()
    out = runner.invoke(app, ["campaign", "create", str(spec), "--url", server.url])
    assert out.exit_code == 0, out.output
    cid = json.loads(out.output)["id"]
    sim = runner.invoke(app, ["participate", "--url", server.url, "--campaign", cid, "--simulate", "60"])
    assert sim.exit_code == 0 and json.loads(sim.output) == {"participants": 60, "new": 60, "duplicates": 0,
                                                            "rejected": 0}
    csv = tmp_path / "values.csv"
    csv.write_text("value\nx\ny\nz\nz\n")
    from_file = runner.invoke(app, ["participate", "--url", server.url, "--campaign", cid, "--values", str(csv)])
    assert from_file.exit_code == 0 and json.loads(from_file.output)["new"] == 4
    one = runner.invoke(app, ["participate", "--url", server.url, "--campaign", cid, "--value", "y"])
    assert one.exit_code == 0 and len(json.loads(one.output)["report_id"]) == 32
    rel = runner.invoke(app, ["campaign", "release", cid, "--url", server.url])
    assert rel.exit_code == 0 and json.loads(rel.output)["n_reports"] == 65
    status = runner.invoke(app, ["campaign", "status", cid, "--url", server.url])
    assert json.loads(status.output)["n_releases"] == 1
    bad = runner.invoke(app, ["participate", "--url", server.url, "--campaign", cid, "--value", "nope"])
    assert bad.exit_code == 2 and "declared categories" in bad.output
    monkeypatch.setenv("PRIVPUB_ADMIN_TOKEN", "wrong")
    refused = runner.invoke(app, ["campaign", "release", cid, "--url", server.url])
    assert refused.exit_code == 2 and "403" in refused.output


def test_cli_db_upgrade(tmp_path) -> None:
    out = CliRunner().invoke(app, ["db", "upgrade", "--db", str(tmp_path / "x.db")])
    from privpub.service import head_revision

    assert out.exit_code == 0 and head_revision() in out.output
