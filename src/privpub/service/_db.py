"""Database URLs, engines and schema upgrades (Alembic) for the service and the session store.

SQLite: WAL journal, ``synchronous=FULL`` (a receipt is sent only after the report is on disk), a
busy timeout, and ``BEGIN IMMEDIATE`` for every writing transaction, so writers queue on the
database lock instead of failing when they upgrade a read lock. PostgreSQL: a connection pool;
writers lock the rows they read-modify-write (``SELECT ... FOR UPDATE``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from privpub.errors import ParameterError

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["database_url", "make_engine", "upgrade", "write_tx"]

_MIGRATIONS = Path(__file__).with_name("migrations")
_upgrade_lock = threading.Lock()


def database_url(db: str) -> str:
    """A SQLAlchemy URL from ``--db``: a URL as given, a plain path as a SQLite file."""
    text = str(db).strip()
    if not text:
        raise ParameterError("db must be a database URL or a SQLite file path, got ''")
    if "://" in text:
        if text.startswith("postgres://") or text.startswith("postgresql://"):
            text = "postgresql+psycopg://" + text.split("://", 1)[1]
        if not (text.startswith("sqlite") or text.startswith("postgresql")):
            raise ParameterError(f"db must be a sqlite:// or postgresql+psycopg:// URL, got scheme {text.split(':')[0]!r}")
        return text
    return "sqlite:///" + str(Path(text).expanduser().resolve())


def private_sqlite_file(url: str) -> Path | None:
    """Create a SQLite database file readable by its owner only (0600) before SQLite does.

    SQLite gives its ``-wal`` and ``-shm`` files the database file's permissions, so stream
    state and reports stay private to the service's user. Returns the file's path (None for
    PostgreSQL or an in-memory database); an existing file keeps its mode (``privpub serve``
    warns when others can read it).
    """
    u = sa.engine.make_url(database_url(url))
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:" or u.database.startswith("file:"):
        return None
    path = Path(u.database)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError:  # e.g. a missing directory: SQLite reports it when it opens the file
        pass
    return path


def is_sqlite(engine: Engine | Connection) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str, *, pool_size: int = 16) -> Engine:
    """An engine for ``url`` configured for the service (see the module doc)."""
    full = database_url(url)
    # hide_parameters: an error's message (and so any log line) never holds the values of a statement
    if full.startswith("sqlite"):
        private_sqlite_file(full)
        engine = sa.create_engine(full, connect_args={"timeout": 60, "check_same_thread": False},
                                  pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=False,
                                  poolclass=sa.pool.QueuePool, hide_parameters=True)

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _record: Any) -> None:  # a sqlite3.Connection (the DBAPI's)
            dbapi_conn.isolation_level = None  # transactions are begun explicitly below
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @sa.event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("privpub_write") else "BEGIN")

        return engine
    return sa.create_engine(full, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True,
                            hide_parameters=True)


@contextlib.contextmanager
def write_tx(engine: Engine) -> Iterator[Connection]:
    """A writing transaction (SQLite: ``BEGIN IMMEDIATE``), committed on success."""
    with engine.connect() as raw:
        conn = raw.execution_options(privpub_write=True)
        with conn.begin():
            yield conn


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", database_url(url).replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> str:
    """Bring the database at ``url`` to ``revision`` (creating it if empty); returns the revision."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.util.exc import CommandError

    full = database_url(url)
    shown = sa.engine.make_url(full).render_as_string(hide_password=True)
    private_sqlite_file(full)
    with _upgrade_lock:
        try:
            command.upgrade(alembic_config(full), revision)
            engine = make_engine(full, pool_size=1)
            try:
                with engine.connect() as conn:
                    return str(MigrationContext.configure(conn).get_current_revision())
            finally:
                engine.dispose()
        except CommandError as exc:
            raise ParameterError(f"revision {revision!r}: {exc}") from None
        except (sa.exc.DatabaseError, sa.exc.InterfaceError) as exc:  # also "file is not a database"
            raise ParameterError(f"cannot open the database {shown} (--db): {str(exc.orig).strip().splitlines()[0]}"
                                 ) from None


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return str(ScriptDirectory.from_config(alembic_config("sqlite:///unused.db")).get_current_head())
