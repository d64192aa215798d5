"""Alembic environment of the privpub service (run through ``privpub db upgrade``)."""

from __future__ import annotations

from alembic import context

from privpub.service._db import make_engine
from privpub.service._tables import metadata

config = context.config


def run_migrations_online() -> None:
    engine = make_engine(config.get_main_option("sqlalchemy.url") or "", pool_size=1)
    with engine.connect() as raw:
        conn = raw.execution_options(privpub_write=True)
        context.configure(connection=conn, target_metadata=metadata, render_as_batch=conn.dialect.name == "sqlite")
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
