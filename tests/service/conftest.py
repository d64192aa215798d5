"""Fixtures of the service tests: a real ``privpub serve`` process on a free loopback port over a
real SQLite file, and over a real PostgreSQL (``PRIVPUB_TEST_POSTGRES_URL``, started by .ci/run).

Every test that takes ``db_url`` runs on both databases. Outside CI, the PostgreSQL runs skip when
``PRIVPUB_TEST_POSTGRES_URL`` is not set; in CI (``CI`` set) they fail instead.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_helpers import ADMIN_TOKEN, BACKENDS, Server, fresh_database
from stream_helpers import admin_client, stream_server


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def db_url(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from fresh_database(backend, tmp_path_factory.mktemp("db"))


@pytest.fixture(scope="module")
def server(db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(db_url, tmp_path_factory.mktemp("log") / "server.log").start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def admin(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=300) as c:
        yield c


@pytest.fixture(scope="module")
def srv(db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with the streams' test-only check endpoint (``PRIVPUB_TEST_CHECKS=1``)."""
    server = stream_server(db_url, tmp_path_factory.mktemp("log") / "server.log").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def adm(srv: Server) -> Iterator[httpx.Client]:
    """An admin client of :func:`srv`."""
    with admin_client(srv) as c:
        yield c
