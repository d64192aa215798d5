"""``privpub audit client``: the Python SDK held to the wire-level conformance audit, every kind.

The SDK's entry point (``python -m privpub.client.conformance``) runs the real client code path
(:func:`privpub.client.perturb_values`, with the SDK's default OS-seeded randomness), so these tests
fail when the SDK randomises at another epsilon than the configuration declares (checked by
applying the issue's two mutations: the spatial path at twice epsilon, the synth path with the
flip probability of twice epsilon; see docs/clients.md). The client's randomness is unseeded:
each check's false-alarm rate is alpha = 1e-6.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client_configs

from privpub.audit import ClientError, audit_client, client_scenarios, run_client
from privpub.cli import app
from privpub.errors import ParameterError

SDK = [sys.executable, "-m", "privpub.client.conformance"]
#: reports per input: every negative control is caught by a wide margin, and a kind takes seconds
REPORTS = 1500
runner = CliRunner()


@pytest.mark.parametrize("name", sorted(client_configs.every_kind()))
def test_python_sdk_conforms_on_every_kind(name: str) -> None:
    cfg = client_configs.every_kind()[name]
    audit = audit_client(cfg, SDK, reports=REPORTS)
    failed = [(c.scenario, c.check, c.detail) for c in audit.failed]
    assert not failed, failed
    assert not audit.uncaught, audit.table()
    checks = {c.check for c in audit.checks}
    assert checks == {"wire", "distribution", "epsilon"}
    # the distribution check is the sharp one: it catches every doubled-epsilon control
    assert all(c.control_caught for c in audit.checks if c.check == "distribution"), audit.table()


def test_kdght_scenarios_cover_every_phase_with_assignment_and_partition() -> None:
    scenarios = client_scenarios(client_configs.spatial_kdght())
    names = [s.name for s in scenarios]
    assert names == ["spatial kdght phase U'_x (intervals)", "spatial kdght phase U'_y (intervals)",
                     "spatial kdght phase U^0 (leaves)", "spatial kdght phase U^1 (leaves)"]
    for s in scenarios:
        assert s.line["assignment"]["group"] in (0, 1, 2, 3) and s.line["assignment"]["assignment"]
        assert s.line["partition"]["type"] in ("intervals", "leaves")
        assert s.control_line["epsilon"] == 2 * s.line["epsilon"]
        assert s.control_line["partition"] == s.line["partition"]


def test_synth_control_doubles_epsilon_through_the_flip_probability() -> None:
    (sc,) = client_scenarios(client_configs.synth(epsilon=3.0))
    from privpub.ldp_synth import epsilon_from_f

    assert epsilon_from_f(sc.control_line["flip_prob"], 3) == pytest.approx(6.0)
    assert sc.line["flip_prob"] > sc.control_line["flip_prob"]


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "client.py"
    path.write_text("import sys, json, base64, struct, random\n" + body)
    return [sys.executable, str(path)]


def test_a_client_without_noise_fails(tmp_path: Path) -> None:
    # GRR that reports the true value: wire-valid, but the distribution and epsilon checks fail
    cmd = _script(tmp_path, """
lines = sys.stdin.read().splitlines()
cats = json.loads(lines[0])["categories"]
for ln in lines[1:]:
    print(base64.b64encode(struct.pack('<I', cats.index(json.loads(ln)))).decode())
""")
    audit = audit_client(client_configs.frequency("GRR"), cmd, reports=500)
    assert {c.check for c in audit.failed} == {"distribution", "epsilon"}
    assert not audit.passed


def test_a_client_with_bad_wire_format_fails(tmp_path: Path) -> None:
    # OUE reports one byte short
    cmd = _script(tmp_path, """
lines = sys.stdin.read().splitlines()
for ln in lines[1:]:
    print(base64.b64encode(b'').decode())
""")
    audit = audit_client(client_configs.frequency("OUE", d=12), cmd, reports=400)
    (fail,) = audit.failed
    assert fail.check == "wire" and "has 0 bytes" in fail.detail


def test_protocol_breaks_are_client_errors(tmp_path: Path) -> None:
    cfg = client_configs.frequency("GRR")
    with pytest.raises(ClientError, match="exited with code 3"):
        run_client(_script(tmp_path, "sys.exit(3)\n"), cfg, ["c0"])
    with pytest.raises(ClientError, match="wrote 0 lines for 1 inputs"):
        run_client(_script(tmp_path, "sys.stdin.read()\n"), cfg, ["c0"])
    with pytest.raises(ClientError, match="not strict base64"):
        run_client(_script(tmp_path, "sys.stdin.read(); print('%%%')\n"), cfg, ["c0"])
    with pytest.raises(ClientError, match="cannot start"):
        run_client(["/nonexistent/client"], cfg, ["c0"])


def test_bad_configurations_are_refused_before_running() -> None:
    with pytest.raises(ParameterError, match="kind must be"):
        client_scenarios({"kind": "stream", "epsilon": 1.0})
    with pytest.raises(ParameterError, match="missing the field 'categories'"):
        client_scenarios({"kind": "frequency", "epsilon": 1.0, "oracle": "GRR"})
    with pytest.raises(ParameterError, match="does not match"):
        client_scenarios(dict(client_configs.frequency("OUE"), payload={"layout": "uint32le"}))
    with pytest.raises(ParameterError, match="reports must be"):
        audit_client(client_configs.frequency("GRR"), SDK, reports=10)


def test_cli_passes_the_sdk_and_fails_a_broken_client(tmp_path: Path) -> None:
    cfg = tmp_path / "grr.json"
    cfg.write_text(json.dumps(client_configs.frequency("GRR")))
    out = tmp_path / "checks.csv"
    result = runner.invoke(app, ["audit", "client", "--config", str(cfg), "--reports", "800", "-o", str(out),
                                 "--", *SDK])
    assert result.exit_code == 0, result.output
    assert "frequency GRR" in result.output and "caught" in result.output
    assert out.exists()
    broken = _script(tmp_path, "sys.exit(5)\n")
    result = runner.invoke(app, ["audit", "client", "--config", str(cfg), "--reports", "800", "--", *broken])
    assert result.exit_code == 1 and "broke the protocol" in result.output


def test_cli_bad_input_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["audit", "client", "--config", str(tmp_path / "none.json"), "--", "true"])
    assert result.exit_code == 2 and "does not exist" in result.output
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = runner.invoke(app, ["audit", "client", "--config", str(bad), "--", "true"])
    assert result.exit_code == 2 and "not readable JSON" in result.output
