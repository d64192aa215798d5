"""The audit tiers: the fast tier always runs; ``audit_full`` tests need ``--full`` or PRIVPUB_AUDIT_FULL=1.

``--full`` is registered here, so it is recognised when pytest is pointed at this folder
(``python -m pytest tests/audit --full``); from anywhere else use the environment variable.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true", default=False,
                     help="run the full privacy-audit tier (tests marked audit_full)")


def full_tier_enabled(config: pytest.Config) -> bool:
    env = os.environ.get("PRIVPUB_AUDIT_FULL", "").strip().lower()
    return bool(config.getoption("--full", default=False)) or env in ("1", "true", "yes")


@pytest.fixture(autouse=True)
def _skip_full_tier(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("audit_full") and not full_tier_enabled(request.config):
        pytest.skip("full audit tier: run with `python -m pytest tests/audit --full` or PRIVPUB_AUDIT_FULL=1")
