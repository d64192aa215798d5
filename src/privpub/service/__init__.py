"""The privpub collection service: devices perturb locally, an untrusted server collects,
aggregates and publishes (papers 000 and 002 as deployed systems).

``privpub serve --db campaigns.db`` runs it (FastAPI under uvicorn, SQLAlchemy storage on SQLite
or PostgreSQL, Alembic migrations); :mod:`privpub.client` is the participant side. See
``docs/service.md`` for the API, deployment and threat model.

This package needs the ``privpub[service]`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privpub.service._app import ROUTERS, create_app, create_app_from_env
    from privpub.service._db import database_url, head_revision, make_engine, private_sqlite_file, upgrade
    from privpub.service._sessions import DatabaseSessionStore, database_session_store
    from privpub.service._specs import (
        CAMPAIGN_SPECS,
        PUBLISHER_KEYS,
        STREAM_SPECS,
        UNSERVED_PUBLISHERS,
        CampaignSpec,
        StreamSpec,
        spec_field,
        validate_spec,
    )
    from privpub.service._store import Store, load_reports
    from privpub.service._transport import admin_token_problem

#: each public name and the module that defines it, imported on first use (PEP 562): the CLI checks
#: a declaration with the spec models without loading the server (FastAPI, SQLAlchemy, publishers)
_MODULES = {
    "ROUTERS": "_app",
    "create_app": "_app",
    "create_app_from_env": "_app",
    "database_url": "_db",
    "head_revision": "_db",
    "make_engine": "_db",
    "private_sqlite_file": "_db",
    "upgrade": "_db",
    "DatabaseSessionStore": "_sessions",
    "database_session_store": "_sessions",
    "CAMPAIGN_SPECS": "_specs",
    "PUBLISHER_KEYS": "_specs",
    "STREAM_SPECS": "_specs",
    "UNSERVED_PUBLISHERS": "_specs",
    "CampaignSpec": "_specs",
    "StreamSpec": "_specs",
    "spec_field": "_specs",
    "validate_spec": "_specs",
    "Store": "_store",
    "load_reports": "_store",
    "admin_token_problem": "_transport",
}

__all__ = [
    "CAMPAIGN_SPECS",
    "CampaignSpec",
    "DatabaseSessionStore",
    "PUBLISHER_KEYS",
    "ROUTERS",
    "STREAM_SPECS",
    "Store",
    "StreamSpec",
    "UNSERVED_PUBLISHERS",
    "admin_token_problem",
    "create_app",
    "create_app_from_env",
    "database_session_store",
    "database_url",
    "head_revision",
    "load_reports",
    "make_engine",
    "private_sqlite_file",
    "spec_field",
    "upgrade",
    "validate_spec",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'privpub.service' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"privpub.service.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
