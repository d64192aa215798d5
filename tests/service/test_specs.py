"""Typed specs (issue 24): one pydantic model per campaign kind and per stream publisher, a
discriminated union that ``GET /openapi.json`` describes, the same models behind the CLI's checks."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_helpers import ADMIN_TOKEN, Server, fresh_database
from typer.testing import CliRunner

from privpub.cli import app
from privpub.errors import ParameterError
from privpub.service import (
    CAMPAIGN_SPECS,
    STREAM_SPECS,
    UNSERVED_PUBLISHERS,
    CampaignSpec,
    StreamSpec,
    validate_spec,
)
from privpub.stream import PUBLISHERS

runner = CliRunner()

#: the fields every stream declares that are the service's, not the publisher's
SERVICE_FIELDS = {"name", "publisher", "step_seconds", "origin", "horizon", "late", "session", "rng",
                  "queries_from", "log_per_client"}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    gen = fresh_database("sqlite", tmp_path_factory.mktemp("db"))
    url = next(gen)
    srv = Server(url, tmp_path_factory.mktemp("log") / "server.log").start()
    try:
        yield srv
    finally:
        srv.stop()
        gen.close()


@pytest.fixture(scope="module")
def openapi(live: Server) -> dict[str, Any]:
    spec: dict[str, Any] = httpx.get(f"{live.url}/openapi.json", timeout=60).json()
    return spec


def _body_schema(openapi: dict[str, Any], path: str) -> dict[str, Any]:
    ref = openapi["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema: dict[str, Any] = openapi["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return schema


def _component(openapi: dict[str, Any], ref: str) -> dict[str, Any]:
    schema: dict[str, Any] = openapi["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return schema


def test_openapi_describes_every_campaign_kind(openapi: dict[str, Any]) -> None:
    from privpub.service._catalog import KINDS

    union = _body_schema(openapi, "/campaigns")
    assert union["discriminator"]["propertyName"] == "kind"
    mapping = union["discriminator"]["mapping"]
    assert set(mapping) == set(KINDS) == set(CAMPAIGN_SPECS) == {"frequency", "spatial", "synth"}
    common = {"name", "kind", "epsilon"}
    own = {"frequency": {"categories"}, "spatial": {"bounds", "expected_participants"}, "synth": {"attributes"}}
    for kind, ref in mapping.items():
        schema = _component(openapi, ref)
        model = CAMPAIGN_SPECS[kind]
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) == {n for n, f in model.model_fields.items() if f.is_required()}
        assert set(schema["required"]) == common | own[kind], kind
        assert schema["properties"]["kind"]["const"] == kind
    # fields of one kind only appear in that kind's model
    freq = _component(openapi, mapping["frequency"])["properties"]
    assert "bounds" not in freq and "attributes" not in freq and "poisoning_defense" in freq
    synth = _component(openapi, mapping["synth"])
    attr = synth["properties"]["attributes"]["items"]["$ref"]
    assert set(_component(openapi, attr)["required"]) == {"name", "categories"}


def _ctor(cls: type) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(cls.__init__).parameters.items()
            if n not in ("self", "rng", "session", "memory_limit") and p.kind is p.KEYWORD_ONLY}


def test_openapi_describes_every_stream_publisher(openapi: dict[str, Any]) -> None:
    union = _body_schema(openapi, "/streams")
    assert union["discriminator"]["propertyName"] == "publisher"
    mapping = union["discriminator"]["mapping"]
    # every registered publisher is either served (one model each) or refused by name
    assert set(mapping) == set(STREAM_SPECS)
    assert set(mapping) | set(UNSERVED_PUBLISHERS) == set(PUBLISHERS)
    # every registered publisher is served (issue 26: the zCDP ones with rho)
    assert set(mapping) == set(PUBLISHERS) and not UNSERVED_PUBLISHERS
    for key, ref in mapping.items():
        schema = _component(openapi, ref)
        model = STREAM_SPECS[key]
        cls = PUBLISHERS[key]
        params = _ctor(cls)
        assert schema["additionalProperties"] is False
        assert schema["properties"]["publisher"]["const"] == key
        required = set(schema["required"])
        assert required == {n for n, f in model.model_fields.items() if f.is_required()}
        # the publisher's required parameters, plus the budget of its measure: epsilon (pure DP only),
        # rho (zCDP only), or one of the two (both measures: a oneOf of the two requirements)
        ctor_required = {n for n, p in params.items() if p.default is p.empty}
        budget = {("pure-dp",): {"epsilon"}, ("zcdp",): {"rho"}}.get(tuple(cls.measures), set())
        assert required == {"name", "publisher"} | budget | ctor_required, key
        if len(cls.measures) == 2:
            assert schema["oneOf"] == [{"required": ["epsilon"]}, {"required": ["rho"]}], key
        assert {"epsilon": "pure-dp", "rho": "zcdp"}.keys() & schema["properties"].keys() == {
            {"pure-dp": "epsilon", "zcdp": "rho"}[m] for m in cls.measures}, key
        # every other field is the service's or one of the publisher's parameters (under its spec name)
        fields = {model.RENAMED.get(f, f) for f in schema["properties"]}
        assert fields - SERVICE_FIELDS <= set(params), (key, fields - SERVICE_FIELDS - set(params))
        assert {model.RENAMED.get(f, f) for f in model.params()} <= set(params)
        assert ("history" in fields) == key.startswith("hq_")
    # the matrix factorisation's block length is not the stream's horizon (its last step)
    mf = _component(openapi, mapping["mf_sqrt"])["properties"]
    assert "block_length" in mf and "last step" in mf["horizon"]["description"]


def _cli_field(output: str) -> str:
    line = next(ln for ln in output.splitlines() if ln.startswith("error:"))
    # the CLI may prefix the option the field comes from (``--window: stream: window: ...``)
    m = re.match(r"error: (?:--[a-z-]+: )?(?:campaign file '[^']*'|stream): ([A-Za-z0-9_.]+):", line)
    assert m is not None, line
    return m.group(1)


BAD_CAMPAIGNS: list[tuple[dict[str, Any], str]] = [
    ({"categories": ["a", "a"]}, "categories"),
    ({"categories": ["a", ""]}, "categories.1"),
    ({"oracle": "XYZ"}, "oracle"),
    ({"bounds": [0, 0, 1, 1]}, "bounds"),
    ({"kind": "nope"}, "kind"),
    ({"kind": "spatial", "categories": None, "bounds": [1, 0, 0, 1], "expected_participants": 100}, "bounds"),
    ({"kind": "spatial", "categories": None, "bounds": [0, 0, 1, 1], "expected_participants": 100}, "enrollment"),
    ({"kind": "spatial", "categories": None, "method": "ug", "bounds": [0, 0, 1, 1], "expected_participants": 100,
      "allow_unenrolled_phases": True}, "allow_unenrolled_phases"),
    ({"kind": "synth", "categories": None, "attributes": [{"name": "a", "categories": ["x", "y"]},
                                                          {"name": "b", "categories": ["u", "v"], "type": "real"}]},
     "attributes.1.type"),
    ({"kind": "synth", "categories": None, "poisoning_defense": "detect",
      "attributes": [{"name": "a", "categories": ["x", "y"]}, {"name": "b", "categories": ["u", "v"]}]},
     "poisoning_defense"),
]


@pytest.mark.parametrize(("change", "field"), BAD_CAMPAIGNS)
def test_cli_and_service_name_the_same_field_of_a_bad_campaign(live: Server, tmp_path: Path,
                                                               change: dict[str, Any], field: str) -> None:
    body = {k: v for k, v in {"name": "x", "kind": "frequency", "epsilon": 1.0, "categories": ["a", "b"],
                              **change}.items() if v is not None}
    resp = httpx.post(f"{live.url}/campaigns", json=body, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                      timeout=60)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"] == field
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps(body))
    # refused before connecting (the URL is never asked)
    out = runner.invoke(app, ["campaign", "create", str(spec), "--url", "http://127.0.0.1:9"],
                        env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert out.exit_code == 2, out.output
    assert _cli_field(out.output) == field
    with pytest.raises(ParameterError) as err:
        validate_spec(CampaignSpec, body, "campaign")
    assert err.value.param == field


BAD_STREAMS: list[tuple[dict[str, Any], str]] = [
    ({"window": 0}, "window"),
    ({"epsilon": 41}, "epsilon"),
    ({"publisher": "nope"}, "publisher"),
    ({"publisher": "mf_sqrt"}, "epsilon"),  # a zCDP publisher: rho, not epsilon
    ({"publisher": "blt", "epsilon": None, "rho": 0.5, "noise": "laplace"}, "noise"),
    ({"publisher": "mf_sqrt", "epsilon": None, "rho": 0}, "rho"),
    ({"publisher": "mf_sqrt", "epsilon": None}, "rho"),
    ({"publisher": "mf_sqrt", "epsilon": None, "rho": 0.5, "block_length": 0}, "block_length"),
    ({"rho": 0.5}, "rho"),  # rtp is pure DP
    ({"publisher": "bt", "rho": 0.5}, "rho"),  # both
    ({"publisher": "bt", "epsilon": None}, "epsilon"),  # neither
    ({"history": [3, 4]}, "history"),
    ({"publisher": "HQRTP", "history": ["x"]}, "history.0"),
    ({"noise": "gaussian"}, "noise"),
    ({"name": "a\nb"}, "name"),
    ({"step_seconds": 0.001}, "step_seconds"),
]


@pytest.mark.parametrize(("change", "field"), BAD_STREAMS)
def test_service_and_model_name_the_same_field_of_a_bad_stream(live: Server, change: dict[str, Any],
                                                               field: str) -> None:
    body = {k: v for k, v in {"name": "s", "publisher": "rtp", "epsilon": 1.0, "window": 8, **change}.items()
            if v is not None}
    resp = httpx.post(f"{live.url}/streams", json=body, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                      timeout=60)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"] == field
    with pytest.raises(ParameterError) as err:
        validate_spec(StreamSpec, body, "stream")
    assert err.value.param == field


def test_cli_stream_create_names_the_models_field() -> None:
    out = runner.invoke(app, ["stream", "create", "--name", "s", "-e", "1", "-w", str(2**21), "--method", "bt",
                              "--url", "http://127.0.0.1:9"], env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert out.exit_code == 2, out.output
    assert _cli_field(out.output) == "window"
    # the zCDP publishers take --rho, not --epsilon (the model names the field, the CLI the flag)
    out = runner.invoke(app, ["stream", "create", "--name", "s", "-e", "1", "-w", "8", "--method", "blt",
                              "--url", "http://127.0.0.1:9"], env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert out.exit_code == 2 and _cli_field(out.output) == "epsilon" and "zCDP" in out.output, out.output
    assert out.output.startswith("error: --epsilon:"), out.output
    out = runner.invoke(app, ["stream", "create", "--name", "s", "--rho", "0.5", "-w", "8", "--method", "rtp",
                              "--url", "http://127.0.0.1:9"], env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert out.exit_code == 2 and _cli_field(out.output) == "rho" and out.output.startswith("error: --rho:")
    for budget in ([], ["-e", "1", "--rho", "0.5"]):  # exactly one of the two, before the spec is built
        out = runner.invoke(app, ["stream", "create", "--name", "s", *budget, "-w", "8", "--method", "bt",
                                  "--url", "http://127.0.0.1:9"], env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
        assert out.exit_code == 2 and "exactly one of --epsilon" in out.output, out.output
    out = runner.invoke(app, ["stream", "create", "--name", "s", "--rho", "0.5", "-w", "8", "--method", "mf_sqrt",
                              "--block-length", "0", "--url", "http://127.0.0.1:9"],
                        env={"PRIVPUB_ADMIN_TOKEN": ADMIN_TOKEN})
    assert out.exit_code == 2 and "--block-length" in out.output, out.output


def test_a_client_of_the_flat_model_still_creates_campaigns(live: Server) -> None:
    """Before issue 24 one flat model held every kind's field: a client that sends the other
    kinds' fields as null or at that model's defaults (its ``model_dump()``) is accepted; another
    value is refused, naming the field."""
    flat = {"name": "flat", "kind": "frequency", "epsilon": 1.0, "min_reports": 1000, "opens_at": None,
            "closes_at": None, "time_precision": 3600, "enrollment": False, "allow_unenrolled_phases": False,
            "poisoning_defense": None, "oracle": None, "categories": ["a", "b"], "method": None, "bounds": None,
            "expected_participants": None, "g": None, "eta": 0.05, "intervals": None, "lam": 0.6, "rgdd_tau": 1.0,
            "kappa": 4.0, "h": None, "assignment_ttl": 600, "attributes": None, "degree": 2, "estimator": "em",
            "allowed_origins": None}
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    resp = httpx.post(f"{live.url}/campaigns", json=flat, headers=headers, timeout=60)
    assert resp.status_code == 201, resp.text
    cfg = resp.json()
    assert cfg["kind"] == "frequency" and cfg["poisoning_defense"] == "detect" and cfg["oracle"] in ("GRR", "OUE",
                                                                                                   "OLH")
    for key, value in (("g", 8), ("eta", 0.1), ("allow_unenrolled_phases", True), ("degree", 3)):
        resp = httpx.post(f"{live.url}/campaigns", json={**flat, key: value}, headers=headers, timeout=60)
        assert resp.status_code == 422 and resp.json()["error"]["field"] == key, resp.text


def test_specs_round_trip_through_the_models() -> None:
    body = {"name": "s", "kind": "synth", "epsilon": 2.0, "degree": 1,
            "attributes": [{"name": "a", "categories": ["x", "y"]}, {"name": "b", "categories": ["u", "v"]}]}
    spec = validate_spec(CampaignSpec, body, "campaign")
    assert validate_spec(CampaignSpec, spec, "campaign") == spec
    assert spec["attributes"][0] == {"name": "a", "categories": ["x", "y"], "type": "categorical"}
    stream = validate_spec(StreamSpec, {"name": "s", "publisher": "HQ_RTP", "epsilon": 1.0, "window": 8}, "stream")
    assert stream["publisher"] == "hq_rtp" and validate_spec(StreamSpec, stream, "stream") == stream
    for body in ({"name": "s", "publisher": "MFSqrt", "rho": 0.5, "window": 8, "block_length": 4},
                 {"name": "s", "publisher": "BTH", "rho": 0.5, "window": 8}):
        stream = validate_spec(StreamSpec, body, "stream")
        assert stream["rho"] == 0.5 and validate_spec(StreamSpec, stream, "stream") == stream


def test_the_cli_checks_a_spec_without_loading_the_server() -> None:
    """``privpub campaign create`` / ``stream create`` validate with the models, not the whole service."""
    from privpub.service import PUBLISHER_KEYS

    assert tuple(PUBLISHER_KEYS) == tuple(PUBLISHERS)  # the spelled-out keys follow the registry
    code = ("import sys; from privpub.service import CampaignSpec, StreamSpec, validate_spec; "
            "print(sorted(m for m in ('fastapi', 'sqlalchemy', 'privpub.stream') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[2] / "examples" / "campaigns").glob("*.y*ml")),
                         ids=lambda p: p.name)
def test_example_campaigns_are_valid_specs(path: Path) -> None:
    import yaml

    body = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert validate_spec(CampaignSpec, body, str(path))["kind"] == body["kind"]
