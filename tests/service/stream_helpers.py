"""Helpers of the stream service tests: a server with the test-only check endpoint, stream calls."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from service_helpers import ADMIN_TOKEN, Server

CHECKS = {"PRIVPUB_TEST_CHECKS": "1"}


def stream_server(db_url: str, log: Path) -> Server:
    return Server(db_url, log, env=CHECKS)


def admin_client(server: Server) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=300)


def create_stream(admin: httpx.Client, **spec: Any) -> dict[str, Any]:
    if spec.get("step_seconds", 0) >= 3600 and "origin" not in spec:
        # the default origin is aligned, so an hourly step could close mid-test at the top of the hour
        # (a test crossing xx:00 would see its open step released): start the open step 30 minutes ago
        spec["origin"] = time.time() - 1800
    body = {"name": "test stream", **spec}
    resp = admin.post("/streams", json=body)
    assert resp.status_code == 201, resp.text
    return resp.json()  # type: ignore[no-any-return]


def post_counts(client: httpx.Client, sid: str, counts: Any, batch_id: str | None = None) -> dict[str, Any]:
    resp = client.post(f"/streams/{sid}/counts", json={"counts": np.asarray(counts).tolist(),
                                                       "batch_id": batch_id or uuid.uuid4().hex})
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def ranges(client: httpx.Client, sid: str, q: Any, log: bool = True) -> np.ndarray:
    """Estimates of every range of ``q``, asked in requests of at most the service's cap per request."""
    from privpub.service._stream_api import MAX_RANGES

    rows = np.asarray(q).reshape(-1, 2)
    out = []
    for i in range(0, max(len(rows), 1), MAX_RANGES):
        resp = client.post(f"/streams/{sid}/ranges", json={"ranges": rows[i:i + MAX_RANGES].tolist(), "log": log})
        assert resp.status_code == 200, resp.text
        out.append(np.asarray(resp.json()["estimates"]))
    return np.concatenate(out)


def all_ranges(t: int, window: int, stride: int = 1) -> np.ndarray:
    """Every unit range and every prefix-like range ending at each step of the window."""
    lo = max(1, t - window + 1)
    steps = np.arange(lo, t + 1, stride, dtype=np.int64)
    return np.concatenate([np.stack([steps, steps], 1), np.stack([np.full_like(steps, lo), steps], 1)])
