"""Budget sessions: one privacy budget across many releases.

Every ``publish`` takes ``session=``. A :class:`Session` holds a total epsilon; each release
published under it reserves its whole epsilon *before* any noise is drawn and is refused with
:class:`~privpub.errors.BudgetExceededError` when the rest is too small. Releases compose
sequentially (basic composition: the epsilons add up), which is what protects a dataset against
the averaging attack: fifty releases of the same counts at epsilon 1 cost 50, not 1.

Three stores keep the record:

* in memory (``Session(total_epsilon=3.0)``), for one Python process;
* a JSON file (``Session.open("budget.json", total_epsilon=3.0)``, the CLI's ``--budget-file``),
  locked while it is read and rewritten, written atomically, so concurrent processes cannot
  overspend it;
* a database (the service's store, in :mod:`privpub.service`), through the same
  :class:`SessionStore` interface.

A session states its privacy measure: pure epsilon-DP (the default, and what every session
file written before the measure existed holds) or rho-zCDP (``Session(total_rho=1.0)``), whose
releases reserve rhos that add up. A session never adds an epsilon to a rho: a release in the
other measure is refused (convert it explicitly, see :mod:`privpub.core._measures`).

What a session cannot do: it only knows the releases made through it. A curator who starts a
new session, edits the file, or publishes without ``session=`` escapes it; privacy across
sessions is the curator's responsibility (see ``docs/privacy.md``). A session does not hash the
data: a fingerprint of private data stored next to its releases would let anyone who holds the
file test guesses about the data. Releases are listed with the label the caller gives
(:meth:`Session.on`) and a coarse description (shape) of the data.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privpub.core._budget import BUDGET_RTOL
from privpub.core._measures import PURE_DP, ZCDP, check_measure, measure_unit
from privpub.core._plugins import session_store_factory
from privpub.core._unit import RECORD, PrivacyUnit, check_privacy_unit
from privpub.core._validation import check_epsilon
from privpub.errors import BudgetExceededError, ParameterError

__all__ = ["FileSessionStore", "MemorySessionStore", "Reservation", "Session", "SessionCharge", "SessionStore",
           "conversion_record", "refuse_mixed_units", "refuse_unaffordable", "session_timestamp"]

_FORMAT = "privpub-session"
_VERSION = 1


def session_timestamp() -> str:
    """The time stamp a store writes on a charge (UTC, seconds, ISO 8601)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


@dataclass(frozen=True)
class SessionCharge:
    """One release's line in a session: what was published, at what epsilon, on which data.

    ``status`` is ``"reserved"`` (publishing, or interrupted: counted as spent), ``"spent"`` or
    ``"returned"`` (the publisher failed before drawing any noise; not counted). ``unit`` is the
    release's privacy unit as a record (:meth:`privpub.PrivacyUnit.as_dict`; ``None``: one record,
    what every charge written before units existed protects). ``converted_from`` is set on a
    release that was made for another unit and converted explicitly
    (:meth:`Session.convert_record_level`): ``{"unit": <record>, "epsilon": <its amount>}``, while
    ``epsilon`` is what the session counts for ``unit``.
    """

    id: str
    time: str
    method: str
    epsilon: float
    data: str
    status: str
    note: str = ""
    measure: str = PURE_DP
    unit: dict[str, Any] | None = None
    converted_from: dict[str, Any] | None = None

    @property
    def privacy_unit(self) -> PrivacyUnit:
        """The release's :class:`~privpub.PrivacyUnit`."""
        return PrivacyUnit.from_dict(self.unit)

    def describe(self) -> str:
        """The charge's unit in words, with the conversion when there was one."""
        words = str(self.privacy_unit)
        if self.converted_from:
            frm = PrivacyUnit.from_dict(self.converted_from.get("unit"))
            amount = measure_unit(self.measure)
            words += (f"; converted from {frm} at {amount}={float(self.converted_from['epsilon']):g} "
                      f"(x {self.epsilon / float(self.converted_from['epsilon']):.6g})")
        return words

    @property
    def counts(self) -> bool:
        """Whether this line counts against the session's budget."""
        return self.status != "returned"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _spent(charges: list[SessionCharge]) -> float:
    return math.fsum(c.epsilon for c in charges if c.counts)


def refuse_mixed_units(charges: list[SessionCharge], unit: PrivacyUnit | None, method: str) -> None:
    """Raise :class:`~privpub.errors.ParameterError` if ``unit`` does not compose with the units of
    the counted ``charges`` (see :meth:`privpub.PrivacyUnit.same_protection`).

    Epsilons for different units do not add up to anything a reader can interpret (a record-level
    epsilon and a person-level epsilon are guarantees about different neighbours): a release in
    another unit must be converted explicitly first (:meth:`Session.convert_record_level`).
    """
    unit = check_privacy_unit(unit)
    for c in charges:
        if c.counts and not c.privacy_unit.same_protection(unit):
            raise ParameterError(
                f"{method} protects {unit}, but this session already composes releases that protect "
                f"{c.privacy_unit} ({c.method}); epsilons for different privacy units do not add up. Convert "
                "explicitly (a record-level release on data with at most k rows per person costs k x epsilon "
                "per person: publish with privacy_unit=PrivacyUnit.person(column, k), or under "
                "session.convert_record_level(k)), or use another session",
                param="privacy_unit")


def refuse_unaffordable(total: float, charges: list[SessionCharge], epsilon: float, method: str,
                        measure: str = PURE_DP) -> None:
    """Raise :class:`~privpub.errors.BudgetExceededError` unless ``charges`` leave room for ``epsilon``.

    Every :class:`SessionStore` calls this inside its atomic check-and-append, so that all stores
    refuse by the same rule and with the same message. ``measure`` names the unit in the message
    (``"zcdp"``: the amounts are rhos).
    """
    spent = _spent(charges)
    if spent + epsilon > total * (1.0 + BUDGET_RTOL):
        raise BudgetExceededError(
            f"the session cannot pay for {method} at {measure_unit(measure)}={epsilon:g}: {spent:.6g} of its "
            f"{total:g} is spent, {max(0.0, total - spent):.6g} remains; nothing was published",
            param=measure_unit(measure),
        )


class SessionStore(ABC):
    """Where a session keeps its record; :meth:`reserve` must check and append atomically."""

    total_epsilon: float
    #: the privacy measure of the total and of every charge (``"zcdp"``: they are rhos)
    measure: str = PURE_DP

    @abstractmethod
    def reserve(self, epsilon: float, *, method: str, data: str,
                unit: PrivacyUnit | None = None,
                converted_from: dict[str, Any] | None = None) -> SessionCharge:
        """Append a ``"reserved"`` charge if the rest of the budget covers it and its privacy
        ``unit`` composes with the others' (:func:`refuse_mixed_units`), else raise.
        ``converted_from`` is stored on the charge as given (see :class:`SessionCharge`)."""

    @abstractmethod
    def settle(self, charge_id: str, *, status: str, note: str = "") -> None:
        """Mark a reserved charge ``"spent"`` or ``"returned"``."""

    @abstractmethod
    def charges(self) -> list[SessionCharge]:
        """Every charge so far, oldest first."""


class MemorySessionStore(SessionStore):
    """A session record in this process's memory (thread-safe); ``measure="zcdp"``: the total is a rho."""

    def __init__(self, total_epsilon: float, *, measure: str = PURE_DP) -> None:
        self.measure = check_measure(measure)
        self.total_epsilon = check_epsilon(total_epsilon, "total_epsilon" if self.measure == PURE_DP else "total_rho")
        self._charges: list[SessionCharge] = []
        self._lock = threading.Lock()

    def reserve(self, epsilon: float, *, method: str, data: str,
                unit: PrivacyUnit | None = None,
                converted_from: dict[str, Any] | None = None) -> SessionCharge:
        with self._lock:
            refuse_mixed_units(self._charges, unit, method)
            refuse_unaffordable(self.total_epsilon, self._charges, epsilon, method, self.measure)
            c = SessionCharge(uuid.uuid4().hex, session_timestamp(), method, epsilon, data, "reserved",
                              measure=self.measure, unit=_unit_record(unit), converted_from=converted_from)
            self._charges.append(c)
            return c

    def settle(self, charge_id: str, *, status: str, note: str = "") -> None:
        with self._lock:
            self._charges = [replace(c, status=status, note=note) if c.id == charge_id else c
                             for c in self._charges]

    def charges(self) -> list[SessionCharge]:
        with self._lock:
            return list(self._charges)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _atomic_write_json(path: Path, payload: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class FileSessionStore(SessionStore):
    """A session record in a JSON file, shared safely by concurrent processes (POSIX ``flock``).

    The file states its ``measure`` (files without it, written before zCDP existed, are pure
    DP); ``measure=None`` accepts the file's, a given measure must match it.
    """

    def __init__(self, path: str | os.PathLike[str], total_epsilon: float | None = None, *,
                 measure: str | None = None) -> None:
        if measure is not None:
            measure = check_measure(measure)
        self.path = Path(path)
        if self.path.is_dir():
            raise ParameterError(f"budget file {str(self.path)!r} is a directory; give a file path")
        if not self.path.parent.is_dir():
            raise ParameterError(f"budget file {str(self.path)!r}: folder {str(self.path.parent)!r} does not exist")
        with _locked(self.path):
            if self.path.exists():
                payload = self._read()
                stored = payload["total_epsilon"]
                if measure is not None and measure != payload["measure"]:
                    raise ParameterError(
                        f"budget file {str(self.path)!r} holds a {payload['measure']} session; it cannot be "
                        f"reopened as a {measure} session (an epsilon is never added to a rho)", param="measure")
                self.measure = payload["measure"]
                if total_epsilon is not None and not math.isclose(check_epsilon(total_epsilon, "total_epsilon"),
                                                                  stored, rel_tol=1e-12):
                    raise ParameterError(
                        f"budget file {str(self.path)!r} holds a session of total epsilon {stored:g}; "
                        f"it cannot be reopened with total_epsilon={total_epsilon:g} (a session's total is fixed)"
                    )
                self.total_epsilon = stored
            else:
                if total_epsilon is None:
                    raise ParameterError(
                        f"budget file {str(self.path)!r} does not exist; give total_epsilon to create it"
                    )
                self.total_epsilon = check_epsilon(total_epsilon, "total_epsilon")
                self.measure = measure or PURE_DP
                head: dict[str, Any] = {"format": _FORMAT, "version": _VERSION, "total_epsilon": self.total_epsilon}
                if self.measure != PURE_DP:  # pure-DP files stay byte-compatible with older privpub
                    head["measure"] = self.measure
                _atomic_write_json(self.path, {**head, "created": session_timestamp(), "charges": []})

    def _read(self) -> dict[str, Any]:
        try:
            payload = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ParameterError(f"budget file {str(self.path)!r} is not a privpub session file: {exc}") from exc
        if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
            raise ParameterError(f"budget file {str(self.path)!r} is not a privpub session file")
        try:
            payload["total_epsilon"] = check_epsilon(payload.get("total_epsilon"), "total_epsilon")
            payload["measure"] = check_measure(payload.get("measure", PURE_DP))
            payload["charges"] = [SessionCharge(**c) for c in payload.get("charges", [])]
        except TypeError as exc:
            raise ParameterError(f"budget file {str(self.path)!r} is damaged: {exc}") from exc
        return payload

    def _write(self, payload: dict[str, Any]) -> None:
        out = dict(payload)
        out["charges"] = [c.as_dict() for c in payload["charges"]]
        if out.get("measure") == PURE_DP:
            del out["measure"]
        for c in out["charges"]:
            if c.get("measure") == PURE_DP:
                del c["measure"]
            if c.get("unit") is None:  # record-level charges stay byte-compatible with older privpub
                c.pop("unit", None)
            if c.get("converted_from") is None:
                c.pop("converted_from", None)
        _atomic_write_json(self.path, out)

    def reserve(self, epsilon: float, *, method: str, data: str,
                unit: PrivacyUnit | None = None,
                converted_from: dict[str, Any] | None = None) -> SessionCharge:
        with _locked(self.path):
            payload = self._read()
            refuse_mixed_units(payload["charges"], unit, method)
            refuse_unaffordable(payload["total_epsilon"], payload["charges"], epsilon, method, payload["measure"])
            c = SessionCharge(uuid.uuid4().hex, session_timestamp(), method, epsilon, data, "reserved",
                              measure=payload["measure"], unit=_unit_record(unit), converted_from=converted_from)
            payload["charges"].append(c)
            self._write(payload)
            return c

    def settle(self, charge_id: str, *, status: str, note: str = "") -> None:
        with _locked(self.path):
            payload = self._read()
            payload["charges"] = [replace(c, status=status, note=note) if c.id == charge_id else c
                                  for c in payload["charges"]]
            self._write(payload)

    def charges(self) -> list[SessionCharge]:
        with _locked(self.path):
            return list(self._read()["charges"])


def conversion_record(unit: PrivacyUnit, epsilon: float) -> dict[str, Any]:
    """The ``converted_from`` record of a charge made for ``unit`` at ``epsilon`` (see
    :class:`SessionCharge`)."""
    return {"unit": unit.as_dict(), "epsilon": float(epsilon)}


def _unit_record(unit: PrivacyUnit | None) -> dict[str, Any] | None:
    """How a charge stores its unit: ``None`` for one record (as before units existed)."""
    unit = check_privacy_unit(unit)
    return None if unit == RECORD else unit.as_dict()


class Reservation:
    """A session's hold on one release's epsilon, settled when the publisher finishes."""

    def __init__(self, store: SessionStore, charge: SessionCharge) -> None:
        self._store = store
        self.charge = charge
        self._settled = False

    def settle(self, *, spent: bool, note: str = "") -> None:
        """Keep the charge (``spent``) or return it (the publisher drew nothing)."""
        if self._settled:
            return
        self._settled = True
        self._store.settle(self.charge.id, status="spent" if spent else "returned", note=note)


class Session:
    """A privacy budget shared by every release published under it.

    Parameters
    ----------
    total_epsilon : float
        The budget of the whole session (finite, > 0), pure epsilon-DP.
    total_rho : float
        Instead of ``total_epsilon``: a rho-zCDP session of this total rho. Its releases
        reserve rhos (the Gaussian mechanisms and the publishers that take ``rho=``); a release
        that reserves an epsilon is refused, and a pure-DP session refuses a rho.
    store : SessionStore, optional
        Where the record lives (default: memory). See :meth:`open` for a file.
    data_label : str
        The label recorded with each release (see :meth:`on`).

    Notes
    -----
    **Privacy:** releases under one session compose sequentially, so the session's total is an
    epsilon-DP guarantee for everything published through it (under the neighbouring relation
    of each release; parts that use different relations are stated in their docs). Each
    release reserves its declared epsilon before drawing; a release that fails before any noise
    is drawn is returned to the session.

    Examples
    --------
    >>> from privpub import Session
    >>> from privpub.histogram import LaplaceHistogram
    >>> session = Session(total_epsilon=1.0)
    >>> _ = LaplaceHistogram().publish([5, 3], epsilon=0.6, rng=0, session=session)
    >>> round(session.remaining, 6)
    0.4
    >>> LaplaceHistogram().publish([5, 3], epsilon=0.6, rng=1, session=session)
    Traceback (most recent call last):
    ...
    privpub.errors.BudgetExceededError: the session cannot pay for laplace at epsilon=0.6: 0.6 of its 1 is spent, 0.4 remains; nothing was published
    """

    def __init__(self, total_epsilon: float | None = None, *, total_rho: float | None = None,
                 store: SessionStore | None = None, data_label: str = "") -> None:
        if total_rho is not None:
            if total_epsilon is not None:
                raise ParameterError("give total_epsilon (pure DP) or total_rho (zCDP), not both",
                                     param="total_rho")
            rho = check_epsilon(total_rho, "total_rho")
            if store is None:
                store = MemorySessionStore(rho, measure=ZCDP)
            elif getattr(store, "measure", PURE_DP) != ZCDP or not math.isclose(rho, store.total_epsilon,
                                                                                rel_tol=1e-12):
                raise ParameterError(f"total_rho={rho:g} disagrees with the store ({store.measure}, total "
                                     f"{store.total_epsilon:g})", param="total_rho")
        elif store is None:
            if total_epsilon is None:
                raise ParameterError("total_epsilon must be given for a new session", param="total_epsilon")
            store = MemorySessionStore(total_epsilon)
        elif total_epsilon is not None and not math.isclose(check_epsilon(total_epsilon, "total_epsilon"),
                                                            store.total_epsilon, rel_tol=1e-12):
            raise ParameterError(
                f"total_epsilon={total_epsilon:g} disagrees with the store's total {store.total_epsilon:g}"
            )
        self._store = store
        self.data_label = str(data_label)
        self._convert_to: PrivacyUnit | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, total_epsilon: float | None = None,
             total_rho: float | None = None) -> Session:
        """A session kept in the JSON file ``path`` (created with ``total_epsilon`` if missing).

        ``total_rho`` instead creates (or reopens, checking the stored measure) a zCDP session, in
        the file or in the database.

        Database URLs (``sqlite:///...``, ``postgresql+psycopg://...``) open the store registered
        for their scheme (:func:`privpub.core.register_session_store`; the service's database
        store, which needs the ``privpub[service]`` extra).
        """
        text = os.fspath(path)
        if total_rho is not None:
            if total_epsilon is not None:
                raise ParameterError("give total_epsilon (pure DP) or total_rho (zCDP), not both",
                                     param="total_rho")
            rho = check_epsilon(total_rho, "total_rho")
            if "://" in text:
                return cls(store=session_store_factory(text)(text, rho, measure=ZCDP))
            return cls(store=FileSessionStore(text, rho, measure=ZCDP))
        if "://" in text:
            factory = session_store_factory(text)
            measure = PURE_DP if total_epsilon is not None else None  # a given epsilon: the session must be pure DP
            return cls(total_epsilon, store=factory(text, total_epsilon, measure=measure))
        measure = PURE_DP if total_epsilon is not None else None  # a given epsilon: the file must be pure DP
        return cls(total_epsilon, store=FileSessionStore(text, total_epsilon, measure=measure))

    def on(self, data_label: str) -> Session:
        """The same session (same budget and record), labelling the data of the next releases."""
        view = Session(store=self._store, data_label=data_label)
        view._convert_to = self._convert_to
        return view

    def convert_record_level(self, max_contributions: int, *, column: str | None = None) -> Session:
        """The same session, converting record-level releases into person-level charges.

        The explicit conversion of a person-level session (whose releases protect one person,
        ``PrivacyUnit.person(column, k)``): a release published under the returned view that
        protects one record, made on data where **each person holds at most**
        ``max_contributions`` **rows** (the caller vouches for that bound), is charged
        ``k x epsilon`` (``k^2 x rho`` under zCDP) for the person unit, by group privacy. Its
        charge states both amounts (:attr:`SessionCharge.converted_from` and
        :meth:`SessionCharge.describe`); the session's total counts the person-level one.
        Releases that already state a unit pass through unchanged.

        Parameters
        ----------
        max_contributions : int
            The bound ``k`` on the rows of one person in the data of the converted releases.
        column : str, optional
            The privacy-id column of the person unit (default: the column of the session's
            person-level releases; needed when there are none yet).

        Examples
        --------
        >>> from privpub import PrivacyUnit, Session
        >>> from privpub.histogram import LaplaceHistogram
        >>> session = Session(total_epsilon=2.0)
        >>> _ = LaplaceHistogram().publish([4, 1], epsilon=0.5, rng=0, session=session,
        ...                                privacy_unit=PrivacyUnit.person("user", 3))
        >>> _ = LaplaceHistogram().publish([9, 2], epsilon=0.25, rng=0, session=session.convert_record_level(3))
        >>> round(session.spent, 6), session.charges[-1].describe()
        (1.25, "one person (all rows with the same 'user', at most 3 rows each), added or removed; converted from one record (row), added or removed at epsilon=0.25 (x 3)")
        """
        from privpub.core._validation import check_positive_int

        k = check_positive_int(max_contributions, "max_contributions")
        if column is None:
            columns = {c.privacy_unit.column for c in self._store.charges()
                       if c.counts and c.privacy_unit.kind == "person"}
            if len(columns) != 1:
                raise ParameterError("convert_record_level needs column= (the privacy-id column of the person "
                                     "unit): the session has no person-level release to take it from",
                                     param="privacy_id")
            column = str(columns.pop())
        view = Session(store=self._store, data_label=self.data_label)
        view._convert_to = PrivacyUnit.person(column, max_contributions=k)
        return view

    @property
    def converts_to(self) -> PrivacyUnit | None:
        """The unit record-level releases are converted to under this view (None: no conversion)."""
        return self._convert_to

    # -- reading -------------------------------------------------------------------------------
    @property
    def store(self) -> SessionStore:
        return self._store

    @property
    def measure(self) -> str:
        """``"pure-dp"`` (amounts are epsilons) or ``"zcdp"`` (amounts are rhos)."""
        return getattr(self._store, "measure", PURE_DP)

    @property
    def total_epsilon(self) -> float:
        """The session's total (a rho under zCDP: see :attr:`total_rho`)."""
        return self._store.total_epsilon

    @property
    def total_rho(self) -> float | None:
        """The total rho of a zCDP session (None for a pure-DP session)."""
        return self._store.total_epsilon if self.measure == ZCDP else None

    @property
    def charges(self) -> tuple[SessionCharge, ...]:
        """Every release so far (oldest first), including returned reservations."""
        return tuple(self._store.charges())

    @property
    def spent(self) -> float:
        """Epsilon spent or reserved so far."""
        return _spent(self._store.charges())

    @property
    def remaining(self) -> float:
        return max(0.0, self.total_epsilon - self.spent)

    def can_pay(self, epsilon: float, *, measure: str = PURE_DP) -> bool:
        """Whether a release at ``epsilon`` (a rho with ``measure="zcdp"``) would be accepted now."""
        measure = check_measure(measure)
        eps = check_epsilon(epsilon, measure_unit(measure))
        return measure == self.measure and self.spent + eps <= self.total_epsilon * (1.0 + BUDGET_RTOL)

    def _check_measure(self, measure: str, method: str) -> str:
        measure = check_measure(measure)
        if measure != self.measure:
            raise ParameterError(
                f"{method} spends {measure_unit(measure)} ({measure}) but the session accounts in "
                f"{measure_unit(self.measure)} ({self.measure}); a session never adds an epsilon to a rho. "
                "Use a session of the release's measure, or convert explicitly (privpub.core.pure_dp_to_zcdp "
                "for an epsilon-DP release in a zCDP session)", param="measure")
        return measure

    def reserve(self, epsilon: float, *, method: str, data: str = "", measure: str = PURE_DP,
                unit: PrivacyUnit | None = None) -> Reservation:
        """Hold ``epsilon`` for one release (called by the publishers before they draw).

        ``measure`` is the measure of ``epsilon`` (``"zcdp"``: a rho); it must be the session's.
        ``unit`` is whom the release protects (default one record); it must compose with the
        units of the session's earlier releases (:func:`refuse_mixed_units`).
        """
        measure = self._check_measure(measure, method)
        eps = check_epsilon(epsilon, measure_unit(measure))
        unit = check_privacy_unit(unit)
        label = f"{self.data_label} ({data})" if self.data_label and data else (self.data_label or data)
        if self._convert_to is not None and unit == RECORD:  # the explicit conversion (convert_record_level)
            target = self._convert_to
            return Reservation(self._store, self._store.reserve(
                target.unit_amount(eps, measure), method=method, data=label, unit=target,
                converted_from=conversion_record(unit, eps)))
        if unit == RECORD:  # stores written before units existed take no unit
            return Reservation(self._store, self._store.reserve(eps, method=method, data=label))
        return Reservation(self._store, self._store.reserve(eps, method=method, data=label, unit=unit))

    def spent_on(self) -> dict[str, float]:
        """Epsilon spent per data label."""
        out: dict[str, float] = {}
        for c in self._store.charges():
            if c.counts:
                out[c.data] = out.get(c.data, 0.0) + c.epsilon
        return out

    def to_frame(self) -> Any:
        """The record as a :class:`pandas.DataFrame`, one row per release."""
        import pandas as pd

        return pd.DataFrame([c.as_dict() for c in self._store.charges()],
                            columns=["id", "time", "method", "epsilon", "data", "status", "note"])

    def __repr__(self) -> str:
        if self.measure == ZCDP:
            return f"Session(total_rho={self.total_epsilon:g}, spent={self.spent:.6g})"
        return f"Session(total_epsilon={self.total_epsilon:g}, spent={self.spent:.6g})"

    def __str__(self) -> str:
        unit = measure_unit(self.measure)
        kind = " (zCDP)" if self.measure == ZCDP else ""
        lines = [f"session: total {unit}{kind} {self.total_epsilon:g}, spent {self.spent:.6g}, "
                 f"remaining {self.remaining:.6g}"]
        for c in self._store.charges():
            line = f"  {c.time}  {c.method:<16} {unit}={c.epsilon:<8g} {c.status:<8} {c.data}"
            if c.unit is not None or c.converted_from is not None:
                line += f"  [protects {c.describe()}]"
            lines.append(line)
        return "\n".join(lines)
