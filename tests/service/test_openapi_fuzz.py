"""Schemathesis over the service's OpenAPI schema: no generated request gets a 5xx."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from service_helpers import ADMIN_TOKEN, create

from privpub.client import Gateway

pytest.importorskip("schemathesis")


def test_schemathesis_finds_no_server_error(server, admin, tmp_path) -> None:
    c = create(admin, name="fuzz", kind="frequency", oracle="OUE", epsilon=1.0, categories=["a", "b", "c"],
               min_reports=5)
    Gateway(server.url, c["id"], rng=0).submit_many(["a", "b", "c"] * 5)
    rel = admin.post(f"/campaigns/{c['id']}/releases").json()
    stream = admin.post("/streams", json={"name": "fuzz", "publisher": "hq_rtp", "epsilon": 1.0, "window": 64})
    assert stream.status_code == 201, stream.text
    sid = stream.json()["id"]
    assert admin.post(f"/streams/{sid}/counts", json={"counts": [1, 2, 3] * 10, "batch_id": "fuzz"}).status_code == 200
    config = tmp_path / "schemathesis.toml"
    config.write_text(f'[parameters]\n"path.campaign_id" = "{c["id"]}"\n"path.release_id" = "{rel["id"]}"\n'
                      f'"path.stream_id" = "{sid}"\n')
    exe = shutil.which("schemathesis") or shutil.which("st")
    cmd = [exe] if exe else [sys.executable, "-m", "schemathesis.cli"]
    proc = subprocess.run(
        [*cmd, "--config-file", str(config), "run", f"{server.url}/openapi.json", "--checks", "not_a_server_error",
         "--max-examples", "25", "--generation-deterministic", "-H", f"Authorization: Bearer {ADMIN_TOKEN}"],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout.split("Test cases:")[-1]
    assert httpx_get_ok(server.url)


def httpx_get_ok(url: str) -> bool:
    import httpx

    return httpx.get(f"{url}/health").json()["status"] == "ok"
