"""A budget session kept in the service's database (SQLite or PostgreSQL).

:func:`database_session_store` returns a :class:`privpub.core.SessionStore`;
``privpub.core.Session.open("sqlite:///budget.db", total_epsilon=3)`` calls it. Reserving is atomic
across processes: on PostgreSQL the session's row is locked (``SELECT ... FOR UPDATE``) while the
spent total is summed and the new charge appended; on SQLite the whole check-and-append runs in a
``BEGIN IMMEDIATE`` transaction, which holds the database's write lock. The same transaction refuses a
release whose privacy unit does not compose with the session's (:func:`privpub.core.refuse_mixed_units`);
each charge stores its unit and, for an explicitly converted release, the unit and amount it was
converted from (columns ``unit`` and ``converted_from``, JSON; migration 0006). A session states its
measure (column ``measure``, migration 0008): pure epsilon-DP (NULL, as every older session) or
rho-zCDP (``Session.open(url, total_rho=...)``), whose total and charges are rhos; a release of the
other measure is refused, never added.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import sqlalchemy as sa

from privpub.core import (
    PURE_DP,
    PrivacyUnit,
    SessionCharge,
    SessionStore,
    check_epsilon,
    check_measure,
    check_privacy_unit,
    measure_unit,
    refuse_mixed_units,
    refuse_unaffordable,
    register_session_store,
    session_timestamp,
)
from privpub.errors import ParameterError
from privpub.service._db import make_engine, upgrade, write_tx
from privpub.service._tables import budget_charges, budget_sessions

__all__ = ["DatabaseSessionStore", "database_session_store"]

_STATUSES = ("reserved", "spent", "returned")


class DatabaseSessionStore(SessionStore):
    """A session record in the ``budget_sessions`` / ``budget_charges`` tables (see the module doc)."""

    def __init__(self, url: str, total_epsilon: float | None = None, *, name: str = "default",
                 migrate: bool = True, measure: str | None = None) -> None:
        self.name = str(name)
        if not self.name or len(self.name) > 200:
            raise ParameterError(f"session name must be 1 to 200 characters, got {len(self.name)}", param="name")
        if measure is not None:
            measure = check_measure(measure)
        if migrate:
            upgrade(url)
        self._engine = make_engine(url, pool_size=2)
        t = budget_sessions.c
        with write_tx(self._engine) as conn:
            row = conn.execute(sa.select(t.total_epsilon, t.measure).where(t.name == self.name)).first()
            if row is None:
                self.measure = measure or PURE_DP
                what = "total_" + measure_unit(self.measure)
                if total_epsilon is None:
                    raise ParameterError(
                        f"session {self.name!r} does not exist in the database; give {what} to create it", param=what)
                self.total_epsilon = check_epsilon(total_epsilon, what)
                conn.execute(sa.insert(budget_sessions).values(
                    name=self.name, total_epsilon=self.total_epsilon, created=session_timestamp(),
                    measure=None if self.measure == PURE_DP else self.measure))  # pure DP stays NULL, as before 0008
            else:
                self.measure = check_measure(row.measure or PURE_DP)
                if measure is not None and measure != self.measure:
                    raise ParameterError(
                        f"session {self.name!r} is a {self.measure} session; it cannot be reopened as a {measure} "
                        "session (an epsilon is never added to a rho)", param="measure")
                what = "total_" + measure_unit(self.measure)
                stored = float(row.total_epsilon)
                if total_epsilon is not None and not math.isclose(check_epsilon(total_epsilon, what),
                                                                  stored, rel_tol=1e-12):
                    raise ParameterError(
                        f"session {self.name!r} has {what.replace('_', ' ')} {stored:g}; it cannot be reopened "
                        f"with {what}={total_epsilon:g} (a session's total is fixed)", param=what)
                self.total_epsilon = stored

    def _charges(self, conn: sa.Connection) -> list[SessionCharge]:
        c = budget_charges.c
        rows = conn.execute(sa.select(c.id, c.time, c.method, c.epsilon, c.data, c.status, c.note, c.unit,
                                      c.converted_from)
                            .where(c.session_name == self.name).order_by(c.seq)).all()
        return [SessionCharge(r.id, r.time, r.method, float(r.epsilon), r.data, r.status, r.note,
                              unit=_json(r.unit), converted_from=_json(r.converted_from)) for r in rows]

    def reserve(self, epsilon: float, *, method: str, data: str, unit: PrivacyUnit | None = None,
                converted_from: dict[str, Any] | None = None) -> SessionCharge:
        eps = check_epsilon(epsilon)
        unit = check_privacy_unit(unit)
        unit_record = None if unit == PrivacyUnit.record() else unit.as_dict()
        with write_tx(self._engine) as conn:
            # the row lock (PostgreSQL) / the write lock (SQLite BEGIN IMMEDIATE) serialises reservers
            conn.execute(sa.select(budget_sessions.c.name).where(budget_sessions.c.name == self.name)
                         .with_for_update()).one()
            charges = self._charges(conn)
            refuse_mixed_units(charges, unit, method)
            refuse_unaffordable(self.total_epsilon, charges, eps, method, self.measure)
            charge = SessionCharge(uuid.uuid4().hex, session_timestamp(), str(method), eps, str(data), "reserved",
                                   unit=unit_record, converted_from=converted_from)
            conn.execute(sa.insert(budget_charges).values(
                id=charge.id, session_name=self.name, time=charge.time, method=charge.method,
                epsilon=charge.epsilon, data=charge.data, status=charge.status, note="",
                unit=None if unit_record is None else json.dumps(unit_record, sort_keys=True),
                converted_from=None if converted_from is None else json.dumps(converted_from, sort_keys=True)))
            return charge

    def settle(self, charge_id: str, *, status: str, note: str = "") -> None:
        if status not in _STATUSES:
            raise ParameterError(f"status must be one of {_STATUSES}, got {status!r}")
        with write_tx(self._engine) as conn:
            conn.execute(sa.update(budget_charges)
                         .where(budget_charges.c.id == charge_id, budget_charges.c.session_name == self.name)
                         .values(status=status, note=str(note)))

    def charges(self) -> list[SessionCharge]:
        with self._engine.connect() as conn:
            return self._charges(conn)

    def close(self) -> None:
        """Release the database connections."""
        self._engine.dispose()


def _json(text: str | None) -> dict[str, Any] | None:
    return None if text is None else dict(json.loads(text))


def database_session_store(url: str, total_epsilon: float | None = None, *, name: str = "default",
                           measure: str | None = None) -> SessionStore:
    """A :class:`privpub.core.SessionStore` in the database at ``url`` (created/upgraded as needed).

    Parameters
    ----------
    url : str
        ``sqlite:///path.db`` or ``postgresql+psycopg://user@host:port/db`` (a plain path is a
        SQLite file).
    total_epsilon : float, optional
        Needed to create the session (a rho for a zCDP session); when reopening, it must equal the
        stored total.
    name : str
        Several sessions can share one database under different names.
    measure : {"pure-dp", "zcdp"}, optional
        The session's measure when creating it (default pure DP); when reopening, None accepts the
        stored one and a given measure must match it.

    Examples
    --------
    >>> import tempfile, os
    >>> from privpub import Session
    >>> path = os.path.join(tempfile.mkdtemp(), "budget.db")
    >>> session = Session.open(f"sqlite:///{path}", total_epsilon=1.0)
    >>> reservation = session.reserve(0.25, method="example")
    >>> reservation.settle(spent=True)
    >>> round(session.remaining, 6)
    0.75
    """
    return DatabaseSessionStore(url, total_epsilon, name=name, measure=measure)


# Session.open("sqlite:///...") / ("postgresql+psycopg://...") in privpub.core finds this store here
register_session_store(("sqlite", "postgresql"), database_session_store)
