"""The privpub collection service: devices perturb locally, an untrusted server collects,
aggregates and publishes (papers 000 and 002 as deployed systems).

``privpub serve --db campaigns.db`` runs it (FastAPI under uvicorn, SQLAlchemy storage on SQLite
or PostgreSQL, Alembic migrations); :mod:`privpub.client` is the participant side. See
``docs/service.md`` for the API, deployment and threat model.

This package needs the ``privpub[service]`` extra.
"""

from __future__ import annotations

from privpub.service._app import ROUTERS, create_app, create_app_from_env
from privpub.service._db import database_url, head_revision, make_engine, private_sqlite_file, upgrade
from privpub.service._sessions import DatabaseSessionStore, database_session_store
from privpub.service._specs import (
    CAMPAIGN_SPECS,
    STREAM_SPECS,
    UNSERVED_PUBLISHERS,
    CampaignSpec,
    StreamSpec,
    spec_field,
    validate_spec,
)
from privpub.service._store import Store, load_reports
from privpub.service._transport import admin_token_problem

__all__ = [
    "CAMPAIGN_SPECS",
    "CampaignSpec",
    "STREAM_SPECS",
    "StreamSpec",
    "UNSERVED_PUBLISHERS",
    "spec_field",
    "validate_spec",
    "DatabaseSessionStore",
    "ROUTERS",
    "Store",
    "admin_token_problem",
    "create_app",
    "create_app_from_env",
    "database_session_store",
    "database_url",
    "head_revision",
    "load_reports",
    "make_engine",
    "private_sqlite_file",
    "upgrade",
]
