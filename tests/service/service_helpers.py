"""Helpers of the service tests: a real ``privpub serve`` subprocess, fresh databases, campaigns."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ADMIN_TOKEN = "test-admin-" + secrets.token_hex(16)
SRC = Path(__file__).resolve().parents[2] / "src"
BACKENDS = ["sqlite", "postgresql"]


def postgres_admin_url() -> str | None:
    return os.environ.get("PRIVPUB_TEST_POSTGRES_URL") or None


def _require_postgres() -> str:
    url = postgres_admin_url()
    if url is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but PRIVPUB_TEST_POSTGRES_URL is not: .ci/run must start PostgreSQL")
        pytest.skip("PRIVPUB_TEST_POSTGRES_URL is not set (start a PostgreSQL; see .ci/run)")
    return url


def _pg_conn(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)


def fresh_database(backend: str, tmp_dir: Path) -> Iterator[str]:
    """A new empty database: a SQLite file, or a new PostgreSQL database dropped afterwards."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_dir / 'service.db'}"
        return
    admin = _require_postgres()
    name = "privpub_t_" + secrets.token_hex(6)
    with _pg_conn(admin) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base, _ = admin.rsplit("/", 1)
    try:
        yield f"{base}/{name}"
    finally:
        with _pg_conn(admin) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def fresh_store(backend: str, tmp_dir: Path) -> Iterator[Any]:
    """A :class:`privpub.service.Store` on a new database at the head revision, disposed afterwards."""
    from privpub.service import Store, make_engine, upgrade

    gen = fresh_database(backend, tmp_dir)
    url = next(gen)
    upgrade(url)
    engine = make_engine(url, pool_size=2)
    try:
        yield Store(engine)
    finally:
        engine.dispose()
        for _ in gen:
            pass


def frequency_campaign(store: Any, name: str) -> Any:
    """A 16-category OUE campaign (epsilon 1, one report is enough) in ``store``: its ``CampaignInfo``."""
    from privpub.service._specs import CampaignSpec

    body = CampaignSpec.model_validate({"name": name, "kind": "frequency", "oracle": "OUE", "epsilon": 1.0,
                                        "categories": [str(i) for i in range(16)], "min_reports": 1})
    return store.create_campaign(body.root.model_dump(mode="json"))


def one_group_batch(ids: Any, payloads: Any) -> Any:
    """A ``Batch`` of reports that all belong to group 0."""
    import numpy as np

    from privpub.service._store import Batch

    return Batch(ids=ids, groups=np.zeros(ids.shape[0], dtype=np.int64), rows_by_group={0: payloads})


def chromium_or_skip() -> str:
    """Debian's chromium (or ``PRIVPUB_CHROMIUM``); skip without it, fail in CI (``.ci/run`` installs it)."""
    import shutil

    path = os.environ.get("PRIVPUB_CHROMIUM") or shutil.which("chromium")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but Debian's chromium is not installed (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A ``privpub serve`` subprocess on 127.0.0.1."""

    def __init__(self, db: str, log_path: Path, *, workers: int = 1, port: int | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.db = db
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.workers = workers
        self.env = dict(os.environ, PRIVPUB_ADMIN_TOKEN=ADMIN_TOKEN, PYTHONPATH=str(SRC), **(env or {}))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> Server:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from privpub.cli import main; main()", "serve", "--db", self.db,
             "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers)],
            stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"privpub serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"privpub serve did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the server and its workers (its own process group)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)


def create(admin: httpx.Client, **spec: object) -> dict[str, object]:
    resp = admin.post("/campaigns", json=spec)
    assert resp.status_code == 201, resp.text
    return resp.json()  # type: ignore[no-any-return]
