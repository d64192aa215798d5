"""Real-time streams in the service (issue 16, paper 004): storage, ingestion, step closing, queries.

Each stream is a :mod:`privpub.stream` publisher kept in memory by every worker that serves it,
with its state in the ``streams`` row (the database is the authority). The rules:

* **Noise is durable before anything derived from it is returned.** Steps are closed (items fed
  to the publisher, nodes released) inside a database transaction that also writes the
  publisher's new state; queries see the new nodes only after that transaction has committed
  (they wait on the stream's lock). If the commit fails, the in-memory publisher is discarded
  and reloaded from the database: noise of nodes that were never returned is drawn again, noise
  of a node already returned never is.
* **A restart never redraws a released node.** A publisher is restored with
  :meth:`~privpub.stream._base.StreamPublisher.from_state` from the stored state, which holds
  every released node over the window; later nodes get noise from fresh OS entropy (a seed given
  at creation is never stored: it would let a reader of the database remove the noise).
* **Data minimisation.** The database keeps, of the raw data, only the open nodes' partial sums
  (inside the state; for the matrix-factorisation counters, the open block's items), the open
  step's count and the ids of the batches already counted, never a per-step history beyond the
  open block or a batch's contents. The state is confidential; the service never returns it.
* **Idempotent ingestion.** A batch id is stored with the change it made, in one transaction;
  a resent batch id is acknowledged and not counted again.
* **A flawed stored stream is never continued.** A stream whose stored state was written by a
  publisher version with a privacy flaw (:func:`~privpub.stream.retired_state_reason`: the
  matrix-factorisation counters before issue 34) is never loaded: at start-up and on its first
  access the service closes it (``closed_at``) with the reason (``closed_reason``), its status
  shows both, and posting to it or querying it is a 409 naming the reason. Its stored state and
  parts are left as they are.

Several workers may serve one stream: writers serialise on the stream's row (PostgreSQL ``SELECT
... FOR UPDATE``, SQLite ``BEGIN IMMEDIATE``), and a worker whose publisher is behind the row
(``t`` differs) reloads it before answering or writing.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import hmac
import io
import json
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import sqlalchemy as sa
from numpy.typing import NDArray
from sqlalchemy.engine import Connection, Engine

from privpub.core import PURE_DP, ZCDP, PrivacyUnit, Session
from privpub.errors import BudgetExceededError, PrivpubError, RetiredStateError
from privpub.service._db import write_tx
from privpub.service._http import error_message
from privpub.service._specs import (  # a declaration's limits live with its model
    LOG_PER_CLIENT,
    STREAM_SPECS,
    publisher_key,
)
from privpub.service._store import NotFound
from privpub.service._tables import stream_batches, stream_parts, stream_queries, streams
from privpub.stream import (
    PUBLISHERS,
    StreamPublisher,
    join_state,
    retired_state_reason,
    split_state,
    state_needs_from,
)

__all__ = ["Asker", "Retired", "StreamError", "StreamInfo", "StreamStore", "exact_counts", "pack_state",
           "publisher_key", "unpack_state"]

log = logging.getLogger("privpub.service")
_T = TypeVar("_T")

#: most steps the clock closes for one stream in one tick, and most steps a new stream's origin
#: may lie in the past (catching up from origin is bounded work)
MAX_CATCHUP_STEPS = 1_000_000
#: how far in the future a stream's origin may lie (seconds)
MAX_ORIGIN_AHEAD = 366 * 86400.0
#: largest noise scale sensitivity / epsilon of a service stream (int64 sums keep their headroom)
MAX_NOISE_SCALE = 2.0**36
#: stored state parts of one stream before a write replaces them by one part holding the window
#: (bounds the rows a restart reads; amortised, a write costs O(steps closed + window / 256))
PARTS_COMPACT = 256
#: seconds a stream whose clock failed waits before the clock tries it again
CLOCK_RETRY = 30.0
#: a clocked stream further behind than this (steps) is left alone: catching up would be endless
CLOCK_GIVE_UP = 1000 * MAX_CATCHUP_STEPS
#: events in the future by more than this (seconds, server clock) are refused
FUTURE_SKEW = 2.0
#: the background clock's period (seconds)
TICK = 0.2
#: environment variable enabling the non-private check endpoint (tests only)
CHECKS_ENV = "PRIVPUB_TEST_CHECKS"

class StreamError(Exception):
    """A request the stream refuses (-> 4xx naming ``field``)."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field



# ---------------------------------------------------------------------------------------------
# state serialisation: JSON for the structure, .npy members for the arrays (no pickle)
# ---------------------------------------------------------------------------------------------
def pack_state(state: dict[str, Any]) -> bytes:
    """Serialise a publisher state (JSON + NumPy arrays, no pickle) for the ``state`` column."""
    arrays: dict[str, NDArray[Any]] = {}

    def walk(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            key = f"a{len(arrays)}"
            arrays[key] = v
            return {"__array__": key}
        if isinstance(v, dict):
            return {str(k): walk(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [walk(x) for x in v]
        if isinstance(v, np.generic):
            return v.item()
        return v

    doc = json.dumps(walk(state)).encode("utf-8")
    buf = io.BytesIO()
    # Any: numpy's stub lets ``**`` reach ``allow_pickle=``, a keyword that numpy < 2.1 does not have
    members: dict[str, Any] = {"__json__": np.frombuffer(doc, dtype=np.uint8), **arrays}
    np.savez(buf, **members)
    return buf.getvalue()


def unpack_state(blob: bytes) -> dict[str, Any]:
    """Inverse of :func:`pack_state`."""
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    doc = json.loads(arrays.pop("__json__").tobytes().decode("utf-8"))

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"__array__"}:
                return arrays[v["__array__"]]
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    state: dict[str, Any] = walk(doc)
    return state


def exact_counts(values: list[int | float] | NDArray[Any], *, real: bool) -> NDArray[Any]:
    """Counts as sent (JSON integers and floats) as an array, exactly.

    Integers never go through a float (2**53 + 1 stays 2**53 + 1); an integer stream takes a
    float only when it is integral and below 2**53 (where every integer is a float64); an
    integer beyond int64 is refused (422 naming it) before the publisher's own limit check.
    Real streams convert to float64 (the publisher refuses values above 2**52).
    """
    if isinstance(values, np.ndarray):
        return values
    try:
        arr = np.array(values)
    except OverflowError:  # an integer too large even for a float (real streams)
        arr = np.array(values, dtype=object)
    if arr.dtype.kind == "f" and not real:
        for i, v in enumerate(values):
            if type(v) is float:
                if v != math.floor(v):
                    raise StreamError(422, f"must be an integer (the stream is not real-valued), got {v!r}",
                                      f"counts[{i}]")
                if abs(v) >= 2**53:
                    raise StreamError(422, f"is a JSON float of 2**53 or more ({v:.6g}), where a float64 cannot hold "
                                           "every integer: send integer counts as JSON integers", f"counts[{i}]")
        arr = np.array([int(v) for v in values])
    if arr.dtype.kind == "O":
        i, v = next((i, v) for i, v in enumerate(values) if not -(2**63) <= v < 2**63)
        shown = str(v) if isinstance(v, int) and abs(v) < 10**25 else f"a number of about 2**{int(abs(v)).bit_length()}"
        raise StreamError(422, f"is beyond the stream's arithmetic (counts must be at most 2**61 for an integer "
                               f"stream, 2**52 for a real one), got {shown}", f"counts[{i}]")
    if arr.dtype.kind == "f" and real and not np.isfinite(arr).all():
        i = int(np.argmax(~np.isfinite(arr)))
        raise StreamError(422, "is beyond float64 (counts of a real stream must be at most 2**52)", f"counts[{i}]")
    return arr


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


# ---------------------------------------------------------------------------------------------
# in-memory streams
# ---------------------------------------------------------------------------------------------
@dataclass
class StreamInfo:
    """A stream's immutable declaration."""

    id: str
    name: str
    method: str
    params: dict[str, Any]
    #: the stream's budget in its ``measure``: epsilon (``"pure-dp"``) or rho (``"zcdp"``)
    budget: float
    step_seconds: float | None
    origin: float | None
    late: str
    horizon: int | None
    session: str | None
    created_at: int
    token_hash: bytes
    reader_hash: bytes | None = None
    queries_from: str = "anyone"
    log_per_client: int | None = None
    #: the privacy measure: ``"pure-dp"`` (epsilon; every stream of a database older than migration
    #: 0007) or ``"zcdp"`` (rho)
    measure: str = PURE_DP

    @property
    def epsilon(self) -> float | None:
        """The stream's epsilon (pure DP; None for a zCDP stream)."""
        return self.budget if self.measure == PURE_DP else None

    @property
    def rho(self) -> float | None:
        """The stream's rho (zCDP; None for a pure-DP stream)."""
        return self.budget if self.measure == ZCDP else None

    def _guarantee(self, level: str) -> str:
        if self.measure == ZCDP:
            return (f"{level} rho-zero-concentrated differential privacy (rho-zCDP, discrete Gaussian noise) with "
                    f"rho = {self.budget:g} for the whole stream")
        return f"{level} differential privacy with epsilon = {self.budget:g} for the whole stream"

    @property
    def sensitivity(self) -> float:
        return float(self.params.get("sensitivity", 1.0))

    @property
    def unit(self) -> PrivacyUnit:
        """Whom the stream protects (event level unless declared person per step)."""
        d = self.params.get("privacy_unit")
        return PrivacyUnit.event() if d is None else PrivacyUnit.from_dict(d)

    def privacy_words(self) -> str:
        sens = self.sensitivity
        step = f"{self.step_seconds:g}-second step" if self.step_seconds else "step"
        unit = self.unit
        if unit.kind == "person_per_step":
            k = int(unit.max_contributions or 1)
            each = "each event counts 1" if sens == 1 else f"each event counts at most {sens:g}"
            return (f"{self._guarantee('Person-per-step')}: "
                    f"neighbouring streams differ by all of one person's events of one {step} (same "
                    f"{unit.column!r}); the service counts at most {k} events of a person in a {step} "
                    f"({each}), so the count of one {step} differs by at most {k * sens:g}. A person present in "
                    "many steps is protected per step, not as a whole (person per step, not user level).")
        what = "one event" if sens == 1 else f"{sens:g} events"
        return (f"{self._guarantee('Event-level')}: "
                f"neighbouring streams differ in the count of one {step} by at most {sens:g} ({what}). "
                f"Whatever one individual contributes to a single {step}, up to {sens:g}, is protected; "
                "an individual present in many steps is protected per step, not as a whole "
                "(event level, not user level).")

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "publisher": self.method, "measure": self.measure,
                "epsilon": self.epsilon, "rho": self.rho, "params": self.params, "step_seconds": self.step_seconds, "origin": self.origin,
                "late": self.late, "horizon": self.horizon, "session": self.session,
                "created_at": self.created_at, "queries_from": self.queries_from,
                "log_per_client": self.log_per_client, "neighbouring": self.privacy_words(),
                "privacy_unit": {**self.unit.as_dict(), "description": str(self.unit)}}


@dataclass(frozen=True)
class Asker:
    """Who asks a range query: ``key`` identifies the client for the per-client cap (a reader
    token's hash, or the address of an anonymous client); ``reader`` says whether it
    authenticated as a reader of the stream (its reader token or the admin token)."""

    key: str
    reader: bool


@dataclass
class Live:
    """A worker's copy of one stream: the publisher and the row fields it matches."""

    info: StreamInfo
    pub: StreamPublisher
    t: int
    open_count: int
    open_since: float
    log_seq: int
    visible: int = -1  # steps whose nodes are committed: what queries may use (t while a write commits)
    lock: threading.RLock = field(default_factory=threading.RLock)
    pending: list[tuple[float, int, int, int]] = field(default_factory=list)
    plock: threading.Lock = field(default_factory=threading.Lock)
    #: held from taking the buffered query log to the commit that writes it, so that a reader who
    #: flushes (the operator's log) waits for a flush in flight instead of counting before it commits
    flock: threading.RLock = field(default_factory=threading.RLock)
    closed_at: int | None = None
    #: parts of the state stored in the database (compacted at PARTS_COMPACT)
    parts: int = 1
    #: per-client logged queries in the current hour: client -> (hour, count)
    logged: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Retired:
    """A stored stream the service never continues (see the module doc): its declaration, the steps
    it had released, when it was closed and why. Nothing of its publisher is loaded."""

    info: StreamInfo
    t: int
    closed_at: int
    reason: str
    log_seq: int = 0

    def refusal(self) -> StreamError:
        """The 409 every request to continue or query the stream gets."""
        return StreamError(409, f"the stream was closed at {self.closed_at} (Unix time) and takes no more data "
                                f"and answers no more queries: {self.reason}")


def _retirable_methods() -> list[str]:
    """The methods some of whose stored states are retired (the rows the start-up scan reads): those
    whose bare state (no version marks) is retired; a method whose check needs more is read too."""
    out = []
    for key, cls in PUBLISHERS.items():
        try:
            retired = retired_state_reason({"method": cls.method, "params": {}}) is not None
        except Exception:  # the check reads more than a bare state holds: scan its streams all the same
            retired = True
        if retired:
            out.append(key)
    return sorted(out)


def _info(row: Any) -> StreamInfo:
    return StreamInfo(id=row.id, name=row.name, method=row.method, params=dict(row.params), budget=float(row.epsilon),
                      step_seconds=None if row.step_seconds is None else float(row.step_seconds),
                      origin=None if row.origin is None else float(row.origin), late=row.late,
                      horizon=None if row.horizon is None else int(row.horizon), session=row.session,
                      created_at=int(row.created_at), token_hash=bytes(row.producer_token_hash),
                      reader_hash=None if row.reader_token_hash is None else bytes(row.reader_token_hash),
                      queries_from=row.queries_from or "anyone",
                      log_per_client=LOG_PER_CLIENT if row.log_per_client is None else int(row.log_per_client),
                      measure=row.measure or PURE_DP)  # NULL: a stream of a database older than 0007 (epsilon)


def _check_noise_scale(per_step: float, budget: float, zcdp: bool) -> None:
    """Refuse a stream whose noise scale passes 2**36: ``per_step`` (k events of a person per step
    x the per-event sensitivity) over epsilon (Laplace) or over sqrt(2 rho) (the Gaussian's
    standard deviation at sensitivity 1)."""
    scale = per_step / (math.sqrt(2.0 * budget) if zcdp else budget)
    if scale > MAX_NOISE_SCALE:
        what = "sensitivity / sqrt(2 rho)" if zcdp else "sensitivity / epsilon"
        raise StreamError(422, f"{what} must be at most 2**36 (the noise scale; int64 sums keep their headroom), "
                               f"got {scale:.3g}: raise {'rho' if zcdp else 'epsilon'}", "rho" if zcdp else "epsilon")


def _check_origin(origin: float, step: float, now: float) -> None:
    """Refuse a clocked stream's origin too far in the past (catching up closes every step) or the future."""
    behind = (now - origin) / step
    if behind > MAX_CATCHUP_STEPS:
        raise StreamError(422, f"is {behind:.4g} steps of {step:g} s in the past; catching up may close "
                               f"at most {MAX_CATCHUP_STEPS} steps (origin >= now - "
                               f"{MAX_CATCHUP_STEPS} * step_seconds)", "origin")
    if origin > now + MAX_ORIGIN_AHEAD:
        raise StreamError(422, f"is more than {MAX_ORIGIN_AHEAD / 86400:g} days in the future", "origin")


class StreamStore:
    """The streams of one worker process over the service's database (see the module doc)."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url
        self.checks = os.environ.get(CHECKS_ENV) == "1"
        self._live: dict[str, Live] = {}
        #: streams this worker found closed for a retired state (never loaded; see the module doc)
        self._retired: dict[str, Retired] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: streams whose clock failed in this worker: id -> (message, when to retry)
        self.clock_errors: dict[str, tuple[str, float]] = {}

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Close the stored streams of retired states (:meth:`retire_flawed`), then start the service
        clock (closes due steps, flushes the query log)."""
        try:
            self.retire_flawed()
        except Exception as exc:  # the database hiccuped: each such stream is closed on its first access
            log.error("the start-up check of stored stream states failed (%s); each retired stream is closed on "
                      "its first access", type(exc).__name__)
        self._thread = threading.Thread(target=self._run, name="privpub-stream-clock", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        for live in list(self._live.values()):
            try:
                self._flush_queries(live)
            except Exception:  # pragma: no cover - shutting down
                pass

    def _run(self) -> None:
        while not self._stop.wait(TICK):
            try:
                self.tick()
            except Exception as exc:  # pragma: no cover - logged, retried on the next tick
                log.warning("stream clock: %s", type(exc).__name__)

    def tick(self, now: float | None = None) -> None:
        """Close the steps whose end has passed (clocked streams), catch up with steps another
        worker released, and flush the query logs."""
        now = time.time() if now is None else now
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(streams.c.id, streams.c.t, streams.c.step_seconds, streams.c.origin,
                                          streams.c.horizon, streams.c.closed_at)).all()
        for r in rows:
            if r.id in self._retired:  # closed: never loaded, nothing to close or catch up
                continue
            # one stream's failure never stops the others: logged, shown in its status, retried later
            failed = self.clock_errors.get(r.id)
            if failed is not None and time.monotonic() < failed[1]:
                continue
            try:
                t_db = int(r._mapping["t"])
                if r.step_seconds is not None and r.closed_at is None:
                    due = self._clock_steps(float(r.origin), float(r.step_seconds), now, r.horizon)
                    if due - t_db > CLOCK_GIVE_UP:
                        raise StreamError(409, f"the clock is {due - t_db} steps behind (origin {float(r.origin):g}, "
                                               f"step_seconds {float(r.step_seconds):g}), more than {CLOCK_GIVE_UP}: "
                                               "left as it is (close it with DELETE /streams/{id})")
                    if due > t_db:
                        self._write(r.id, functools.partial(self._advance, now=now))
                        self.clock_errors.pop(r.id, None)
                        continue
                live = self._live.get(r.id)
                if live is not None and live.t < t_db:
                    self._current(r.id)
                self.clock_errors.pop(r.id, None)
            except Exception as exc:
                if r.id in self._retired:  # found retired on this first access: closed (and logged) now
                    self.clock_errors.pop(r.id, None)
                    continue
                msg = str(exc.message) if isinstance(exc, StreamError) else type(exc).__name__
                log.error("stream %s: the clock failed (%s); retried in %g s", r.id, msg, CLOCK_RETRY)
                self.clock_errors[r.id] = (msg, time.monotonic() + CLOCK_RETRY)
        for live in list(self._live.values()):
            if live.pending:
                try:
                    self._flush_queries(live)
                except Exception as exc:  # pragma: no cover - retried on the next tick
                    log.warning("stream %s: query log flush failed (%s)", live.info.id, type(exc).__name__)

    @staticmethod
    def _clock_steps(origin: float, step: float, now: float, horizon: int | None) -> int:
        """Steps whose end is at or before ``now``."""
        n = max(0, math.floor((now - origin) / step))
        return n if horizon is None else min(n, int(horizon))

    # -- creation -------------------------------------------------------------------------------
    def create(self, body: dict[str, Any]) -> tuple[StreamInfo, str, str]:
        """Create a stream (validated publisher, budget charged); returns it, its producer token and
        its reader token."""
        # ``body`` is a StreamSpec (privpub.service._specs): the publisher's model checked its fields
        # (which it takes, their ranges); what follows needs the clock, the budget or the publisher
        key = publisher_key(body["publisher"])
        if key is None:  # pragma: no cover - the model refuses first
            raise StreamError(422, f"must be one of {sorted(PUBLISHERS)}, got {body['publisher']!r}", "publisher")
        cls = PUBLISHERS[key]
        model = STREAM_SPECS[key]
        # the publisher's constructor keywords (the spec's block_length is MFSqrt's horizon=)
        params = model.constructor_kwargs(body)
        if not params.get("history"):
            params.pop("history", None)
        zcdp = params.get("rho") is not None
        budget = float(params["rho"] if zcdp else params["epsilon"])
        adaptive = key.startswith("hq_")
        declared = body.get("privacy_unit")
        unit = None if declared is None else PrivacyUnit.person_per_step(declared["privacy_id"],
                                                                         declared["max_contributions"])
        if unit is not None:
            params["privacy_unit"] = unit
        _check_noise_scale(float(body.get("sensitivity") or 1.0) * (unit.factor if unit else 1), budget, zcdp)
        now = time.time()
        step = body.get("step_seconds")
        origin = body.get("origin")
        if step is not None and origin is not None:
            _check_origin(origin, step, now)
        queries_from = body.get("queries_from") or "readers"
        log_per_client = body.get("log_per_client") or LOG_PER_CLIENT
        pub = self._make_publisher(cls, model, params, body)
        sid = secrets.token_hex(8)
        token = secrets.token_urlsafe(24)
        reader = secrets.token_urlsafe(24)
        open_since: float = now
        if step is not None:
            if origin is None:
                origin = math.floor(now / step) * step  # steps aligned on the clock
            open_since = origin
        # the publisher's parameters under their spec names (the budget has its own columns)
        stored = {n: body[n] for n in model.params() if body.get(n) is not None and n not in ("epsilon", "rho", "history")}
        if unit is not None:
            stored["privacy_unit"] = unit.as_dict()
        if adaptive:
            stored["history_length"] = len(params.get("history", ()))
        info = StreamInfo(id=sid, name=body["name"], method=key, params=stored, budget=pub.budget, measure=pub.measure,
                          step_seconds=step, origin=origin, late=body.get("late", "reject"),
                          horizon=body.get("horizon"), session=body.get("session"), created_at=int(now),
                          token_hash=_hash(token), reader_hash=_hash(reader), queries_from=queries_from,
                          log_per_client=log_per_client)
        head, part = split_state(pub.state(checkpoint=False))
        with write_tx(self.engine) as conn:
            conn.execute(sa.insert(streams).values(
                id=sid, name=info.name, method=key, params=stored, epsilon=info.budget, measure=info.measure,
                step_seconds=step,
                origin=origin, late=info.late, horizon=info.horizon, session=info.session,
                producer_token_hash=info.token_hash, created_at=info.created_at, t=0,
                state=pack_state(head), open_count=0, open_since=open_since, log_seq=0,
                true_total=0 if self.checks else None, reader_token_hash=info.reader_hash,
                queries_from=queries_from, log_per_client=log_per_client))
            conn.execute(sa.insert(stream_parts).values(stream_id=sid, t_end=part["t"], t_from=part["arrays_from"],
                                                        data=pack_state(part)))
        with self._guard:
            self._live[sid] = Live(info=info, pub=pub, t=0, open_count=0, open_since=open_since, log_seq=0,
                                   visible=0)
        log.info("stream %s created (%s)", sid, key)
        return info, token, reader

    def _make_publisher(self, cls: type[StreamPublisher], model: Any, params: dict[str, Any],
                        body: dict[str, Any]) -> StreamPublisher:
        """The stream's publisher: its parameters validated, then its budget reserved in the
        body's ``session`` (refused: nothing made). Errors are 4xx naming the spec's field."""
        session = None
        if body.get("session") is not None:
            from privpub.service._sessions import DatabaseSessionStore

            try:
                session = Session(store=DatabaseSessionStore(self.url, name=body["session"], migrate=False))
            except PrivpubError as exc:
                raise StreamError(422, str(exc), "session") from None
        try:
            # the seed (tests, reproducibility) is used once and never stored
            pub: StreamPublisher = cls(**params, rng=body.get("rng"), session=session)
            return pub
        except BudgetExceededError as exc:
            raise StreamError(409, f"the budget session cannot pay for this stream: {exc}", "session") from None
        except PrivpubError as exc:  # the field is the parameter the error names (as data, not from its text)
            # the session's measure is not the stream's (a rho is never added to epsilons, nor an epsilon to
            # rhos; a zCDP stream needs a session opened with total_rho): refused, nothing made
            if exc.param == "measure":
                raise StreamError(422, error_message(exc), "session") from None
            renamed = {v: k for k, v in model.RENAMED.items()}
            fld: str | None = renamed.get(str(exc.param), exc.param) if exc.param in {*params, "history"} else None
            raise StreamError(422, error_message(exc), fld) from None
        finally:
            if session is not None:
                session.store.close()  # type: ignore[attr-defined]

    # -- loading --------------------------------------------------------------------------------
    def _load(self, conn: Connection, sid: str) -> Live | Retired:
        """The stored stream: its publisher restored, or, for a state the service never continues,
        a :class:`Retired` (its ``closed_at`` is 0 until :meth:`_retire` has recorded it)."""
        row = conn.execute(sa.select(streams).where(streams.c.id == sid)).first()
        if row is None:
            raise NotFound(f"no stream {sid}")
        t = int(row._mapping["t"])
        info = _info(row)
        if row.closed_reason is not None:  # closed for a retired state: never loaded again
            return Retired(info, t, int(row.closed_at or 0), str(row.closed_reason), int(row.log_seq))
        head = unpack_state(bytes(row.state))
        why = retired_state_reason(head)  # checked on the head: the parts are not even read
        if why is not None:
            return Retired(info, t, 0, why, int(row.log_seq))
        pc = stream_parts.c
        parts = [unpack_state(bytes(r.data)) for r in conn.execute(
            sa.select(pc.data).where(pc.stream_id == sid, pc.t_end >= state_needs_from(head)).order_by(pc.t_end))]
        try:
            pub = StreamPublisher.from_state(join_state(head, parts), rng=None)  # fresh entropy for unreleased nodes
        except RetiredStateError as exc:  # the full state's check (the head's said nothing): the same closure
            return Retired(info, t, 0, str(exc), int(row.log_seq))
        return Live(info=info, pub=pub, t=t, open_count=int(row.open_count),
                    open_since=float(row.open_since), log_seq=int(row.log_seq), visible=t,
                    closed_at=None if row.closed_at is None else int(row.closed_at), parts=len(parts))

    def _retire(self, found: Retired) -> Retired:
        """Record in the database that the stream is closed for a retired state (``closed_at``, kept
        if it was closed already, and ``closed_reason``; the open step's events are discarded, never
        released, as when an operator closes a stream). The state and its parts are not touched.
        Idempotent: a stream another worker closed first keeps that worker's time and reason."""
        sid = found.info.id
        if found.closed_at:
            return found
        now = int(time.time())
        with write_tx(self.engine) as conn:
            c = streams.c
            done = conn.execute(sa.update(streams).where(c.id == sid, sa.or_(c.closed_reason.is_(None),
                                                                             c.closed_at.is_(None)))
                                .values(closed_at=sa.func.coalesce(c.closed_at, now),
                                        closed_reason=sa.func.coalesce(c.closed_reason, found.reason),
                                        open_count=0)).rowcount
            row = conn.execute(sa.select(streams.c.closed_at, streams.c.closed_reason)
                               .where(streams.c.id == sid)).one()
        if done:
            log.warning("stream %s (%s) closed: its stored state was written by a flawed publisher version and "
                        "is never continued (see its status)", sid, found.info.method)
        return Retired(found.info, found.t, int(row.closed_at), str(row.closed_reason), found.log_seq)

    def retire_flawed(self) -> builtins.list[str]:
        """Close every stored stream whose state the service never continues (start-up; also done on
        a stream's first access). Reads the heads of the streams of the methods concerned that are
        not closed for that reason yet; returns the ids closed now."""
        methods = _retirable_methods()
        if not methods:
            return []
        with self.engine.connect() as conn:
            ids = conn.execute(sa.select(streams.c.id).where(streams.c.method.in_(methods),
                                                              streams.c.closed_reason.is_(None))).scalars().all()
        closed = []
        for sid in ids:
            try:
                with self.engine.connect() as conn:
                    row = conn.execute(sa.select(streams).where(streams.c.id == sid)).first()
                if row is None or row.closed_reason is not None:
                    continue
                why = retired_state_reason(unpack_state(bytes(row.state)))
                if why is None:
                    continue
                got = self._retire(Retired(_info(row), int(row._mapping["t"]), 0, why, int(row.log_seq)))
            except Exception as exc:  # a damaged row: reported when the stream is first used
                log.error("stream %s: its stored state could not be checked at start-up (%s)", sid, type(exc).__name__)
                continue
            with self._guard:
                self._live.pop(sid, None)
                self._retired[sid] = got
            closed.append(sid)
        if closed:
            log.warning("%d stored stream(s) closed at start-up: their state was written by a flawed publisher "
                        "version (privpub.stream.retired_state_reason); create new streams to go on publishing",
                        len(closed))
        return closed

    def _entry(self, sid: str) -> Live | Retired:
        """The worker's copy of the stream, loaded on first use; a :class:`Retired` for a stream
        closed for a retired state (recorded in the database on this first access)."""
        got: Live | Retired | None = self._live.get(sid) or self._retired.get(sid)
        if got is None:
            with self._guard:
                got = self._live.get(sid) or self._retired.get(sid)
                if got is None:
                    with self.engine.connect() as conn:
                        got = self._load(conn, sid)
                    if isinstance(got, Retired):
                        got = self._retire(got)
                        self._retired[sid] = got
                    else:
                        self._live[sid] = got
        return got

    def live(self, sid: str) -> Live:
        """The worker's copy of the stream (loaded on first use); a stream closed for a retired
        state is a 409 naming the reason."""
        got = self._entry(sid)
        if isinstance(got, Retired):
            raise got.refusal()
        return got

    def retired(self, sid: str) -> Retired | None:
        """The stream's closure for a retired state, or None (an open or operator-closed stream)."""
        got = self._entry(sid)
        return got if isinstance(got, Retired) else None

    def _refresh(self, conn: Connection, live: Live) -> None:
        """Replace the worker's publisher by the stored one (same lock object)."""
        fresh = self._load(conn, live.info.id)
        if isinstance(fresh, Retired):  # not a state this worker wrote: closed, never continued
            with self._guard:
                self._live.pop(live.info.id, None)
            raise StreamError(409, f"the stream's stored state cannot be continued: {fresh.reason}")
        with live.lock:
            live.pub, live.t, live.open_count = fresh.pub, fresh.t, fresh.open_count
            live.open_since, live.log_seq, live.visible = fresh.open_since, fresh.log_seq, fresh.t
            live.closed_at, live.parts = fresh.closed_at, fresh.parts

    def loaded(self, sid: str) -> bool:
        """Whether this worker holds the stream in memory."""
        return sid in self._live

    def info(self, sid: str) -> StreamInfo:
        """The stream's declaration (also of a stream closed for a retired state: tokens still check)."""
        return self._entry(sid).info

    def authorised(self, sid: str, token: str) -> bool:
        """Whether ``token`` is this stream's producer token (constant-time)."""
        return hmac.compare_digest(_hash(token), self.info(sid).token_hash)

    def is_reader(self, sid: str, token: str) -> bool:
        """Whether ``token`` is this stream's reader token (constant-time)."""
        expected = self.info(sid).reader_hash
        return expected is not None and hmac.compare_digest(_hash(token), expected)

    def list(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(streams.c.id, streams.c.name, streams.c.method, streams.c.epsilon,
                                          streams.c.measure, streams.c.t, streams.c.closed_at, streams.c.closed_reason)
                                .order_by(streams.c.created_at)).all()
        out = []
        for r in rows:
            zcdp = (r.measure or PURE_DP) == ZCDP
            out.append({"id": r.id, "name": r.name, "publisher": r.method, "measure": r.measure or PURE_DP,
                        "epsilon": None if zcdp else r.epsilon, "rho": r.epsilon if zcdp else None,
                        "t": int(r._mapping["t"]), "status": "open" if r.closed_at is None else "closed",
                        "closed_at": r.closed_at, "closed_reason": r.closed_reason})
        return out

    # -- writing --------------------------------------------------------------------------------
    def _write(self, sid: str, fn: Callable[[Connection, Live], _T], *, closing: bool = False) -> _T:
        """Run ``fn(conn, live)`` in a write transaction holding the stream's row.

        Writers serialise on the row (``FOR UPDATE`` / ``BEGIN IMMEDIATE``). Steps closed in the
        transaction become visible to queries (``live.visible``) only after it has committed;
        meanwhile queries go on answering from the nodes already committed, which the new steps
        do not change.
        """
        live = self.live(sid)
        taken: list[tuple[float, int, int, int]] = []
        try:
            with live.flock, write_tx(self.engine) as conn:
                row = conn.execute(sa.select(streams.c.t, streams.c.open_count, streams.c.open_since,
                                             streams.c.log_seq, streams.c.closed_at).where(streams.c.id == sid)
                                   .with_for_update()).one()
                if int(row._mapping["t"]) != live.t:
                    self._refresh(conn, live)
                if row.closed_at is not None and not closing:
                    live.closed_at = int(row.closed_at)
                    raise StreamError(409, f"the stream was closed (DELETE) at {int(row.closed_at)} (Unix time): it "
                                           "takes no more data; its released steps stay queryable")
                live.open_count, live.open_since = int(row.open_count), float(row.open_since)
                live.log_seq = int(row.log_seq)
                taken = self._flush_pending(conn, live)
                out = fn(conn, live)
            live.visible = live.t  # committed: the new nodes may be used
            return out
        except StreamError:  # refused before anything changed (the transaction rolled back)
            with live.plock:  # the logged queries were not written: keep them for the next flush
                live.pending[:0] = taken
            raise
        except BaseException:
            # the transaction did not commit: forget the worker's copy (reloaded on next use)
            with self._guard:
                self._live.pop(sid, None)
            raise

    def _seen(self, conn: Connection, sid: str, batch_id: str) -> bool:
        return conn.execute(sa.select(stream_batches.c.n_items).where(
            stream_batches.c.stream_id == sid, stream_batches.c.batch_id == batch_id)).first() is not None

    def _mark(self, conn: Connection, sid: str, batch_id: str, items: int) -> None:
        conn.execute(sa.insert(stream_batches).values(stream_id=sid, batch_id=batch_id, n_items=items,
                                                      received=int(time.time())))

    def _close_steps(self, conn: Connection, live: Live, counts: NDArray[Any], open_count: int,
                     open_since: float, added: int,
                     person_tally: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
        """Release ``counts`` as the next steps and persist everything in ``conn``'s transaction.

        ``person_tally``: (the open step's tally, the stored head) of a person-per-step stream;
        the tally is written into the new head (or into the stored one if no step closes)."""
        pub = live.pub
        predictor = getattr(pub, "predictor", None)
        log_seq = live.log_seq
        lengths: list[int] = []
        if counts.shape[0] and predictor is not None:
            c = stream_queries.c
            rows = conn.execute(sa.select(c.seq, c.range_start, c.range_end).where(
                c.stream_id == live.info.id, c.seq > log_seq).order_by(c.seq)).all()
            if rows:
                lengths = [int(r.range_end) - int(r.range_start) + 1 for r in rows]
                log_seq = int(rows[-1].seq)
        values: dict[str, Any] = {"open_count": open_count, "open_since": open_since, "log_seq": log_seq}
        t_before = pub.t
        part = None
        if counts.shape[0]:
            with live.lock:  # no query reads the publisher while it changes
                if predictor is not None and lengths:
                    predictor.update_many(lengths)
                try:
                    pub.extend(counts)
                except PrivpubError as exc:  # e.g. a running total beyond int64: refused, never wrapped
                    with self._guard:  # the copy may be part-way: reload it (the transaction rolls back)
                        self._live.pop(live.info.id, None)
                    raise StreamError(422, error_message(exc, fix=False), "counts") from None
                # O(steps closed): the new nodes go to a new part, the small head replaces the old one;
                # every PARTS_COMPACT parts, one part with the whole window replaces them all
                compact = live.parts >= PARTS_COMPACT
                head, part = split_state(pub.state(checkpoint=False, since=None if compact else t_before))
            if person_tally is not None:
                head = {**head, "person_tally": person_tally[0]}
            values["state"] = pack_state(head)
            pc = stream_parts.c
            conn.execute(sa.insert(stream_parts).values(stream_id=live.info.id, t_end=part["t"],
                                                        t_from=part["arrays_from"], data=pack_state(part)))
            drop_before = part["t"] if compact else state_needs_from(head)
            gone = conn.execute(sa.delete(stream_parts).where(pc.stream_id == live.info.id,
                                                              pc.t_end < drop_before)).rowcount
            live.parts = 1 if compact else live.parts + 1 - max(0, gone or 0)
        elif person_tally is not None:  # no step closed: the stored head with the open step's new tally
            values["state"] = pack_state({**person_tally[1], "person_tally": person_tally[0]})
        values["t"] = pub.t
        if self.checks and added:
            values["true_total"] = sa.func.coalesce(streams.c.true_total, 0) + added
        conn.execute(sa.update(streams).where(streams.c.id == live.info.id).values(**values))
        live.t, live.open_count, live.open_since, live.log_seq = pub.t, open_count, open_since, log_seq

    def _advance(self, conn: Connection, live: Live, now: float) -> int:
        """Clocked streams: close every step whose end has passed (the open step's count first)."""
        info = live.info
        assert info.step_seconds is not None and info.origin is not None
        due = self._clock_steps(info.origin, info.step_seconds, now, info.horizon)
        n = min(due - live.t, MAX_CATCHUP_STEPS)  # bounded work per tick: a long catch-up takes several
        if n <= 0:
            return 0
        counts = np.zeros(n, dtype=np.int64)
        counts[0] = live.open_count
        self._close_steps(conn, live, counts, 0, info.origin + (live.t + n) * info.step_seconds, 0)
        return n

    def add_counts(self, sid: str, counts: builtins.list[int | float] | NDArray[Any], batch_id: str) -> dict[str, Any]:
        """Append per-step counts (streams without ``step_seconds``): JSON integers stay exact
        (never through a float), counts the stream cannot hold exactly are refused."""
        info = self.live(sid).info  # a stream closed for a retired state: 409 naming the reason, first
        if info.step_seconds is not None:
            raise StreamError(409, "this stream's steps close by its clock (step_seconds); post events", "counts")
        if info.unit.kind == "person_per_step":
            raise StreamError(409, "this stream protects each person's events of a step (person per step): post "
                                   "events with their privacy_ids, which the service bounds; counts cannot be "
                                   "bounded", "counts")
        pub = self.live(sid).pub
        arr = exact_counts(counts, real=bool(info.params.get("real")))
        try:
            items = pub._check_items(arr)
        except PrivpubError as exc:
            raise StreamError(422, error_message(exc, fix=False), "counts") from None

        def apply(conn: Connection, live: Live) -> dict[str, Any]:
            if self._seen(conn, sid, batch_id):
                return {"batch_id": batch_id, "duplicate": True, "t": live.t}
            if live.open_count:
                raise StreamError(409, "the open step holds events: close it (POST /streams/{id}/close-step) "
                                       "before appending counts", "counts")
            if info.horizon is not None and live.t + items.shape[0] > info.horizon:
                raise StreamError(409, f"the stream ends at step {info.horizon} (horizon); {live.t} steps are "
                                       f"released, {items.shape[0]} more do not fit", "counts")
            added = sum(items.tolist()) if self.checks and items.dtype.kind == "i" else 0
            self._close_steps(conn, live, items, 0, time.time(), added)
            self._mark(conn, sid, batch_id, int(items.shape[0]))
            return {"batch_id": batch_id, "duplicate": False, "t": live.t}

        return self._write(sid, apply)

    def _person_counts(self, conn: Connection, live: Live, steps: NDArray[np.int64],
                       ids: Sequence[Any]) -> tuple[NDArray[np.int64], dict[str, Any], dict[str, Any]]:
        """Person per step: the events counted in steps ``t+1 .. max(steps)`` (at most ``k`` of a
        person's events per step, the open step's earlier events included), the open step's new
        tally and the stored head it goes into.

        The tally of the open step (keyed hashes of the ids -> events counted, at most ``k``) lives
        in the stream's stored state head, read inside the write transaction (another worker may
        have added events to the open step); it is discarded when its step closes. Events of a
        count stream are alike (each counts 1), so keeping ``min(events, k)`` of a person is
        exactly what :func:`privpub.core.bound_contributions` keeps.
        """
        import pandas as pd

        k = int(live.info.unit.max_contributions or 1)
        head = unpack_state(bytes(conn.execute(sa.select(streams.c.state).where(streams.c.id == live.info.id))
                                  .scalar_one()))
        open_step = live.t + 1
        stored = head.get("person_tally") or {}
        before: dict[str, int] = dict(stored.get("ids", {})) if stored.get("step") == open_step else {}
        key = live.pub.contribution_key
        assert key is not None  # a person-per-step publisher draws its key before any noise
        # the ids' keyed SipHash (as privpub.core.bound_contributions hashes them), as text for the stored tally
        hashed = pd.util.hash_array(np.asarray(list(ids), dtype=object), hash_key=key).astype(str)
        pairs = pd.DataFrame({"s": steps, "h": hashed}).groupby(["s", "h"]).size()
        s_idx = pairs.index.get_level_values(0).to_numpy(np.int64)
        h_idx = pairs.index.get_level_values(1).to_numpy(dtype=object)
        prev = np.where(s_idx == open_step,
                        pd.Series(h_idx, dtype=object).map(before).fillna(0).to_numpy(np.int64), 0)
        total = np.minimum(prev + pairs.to_numpy(np.int64), k)
        last = int(steps.max())
        per = np.bincount(s_idx - open_step, weights=total - prev, minlength=last - live.t).astype(np.int64)
        tally = dict(before) if last == open_step else {}
        at_last = s_idx == last
        tally.update(zip(h_idx[at_last].tolist(), total[at_last].tolist()))
        return per, {"step": last, "ids": tally}, head

    def add_events(self, sid: str, times: NDArray[np.float64], batch_id: str,
                   privacy_ids: Sequence[Any] | None = None) -> dict[str, Any]:
        """Count timed events in their steps (see the late-event policy); a person-per-step stream
        counts at most ``k`` events of a person (``privacy_ids``) in one step."""
        info = self.live(sid).info  # a stream closed for a retired state: 409 naming the reason, first
        per_person = info.unit.kind == "person_per_step"
        if per_person and privacy_ids is None:
            raise StreamError(422, f"this stream protects each person's events of a step (person per step, "
                                   f"{info.unit.column!r}): every event needs its person's id ('privacy_id' with "
                                   "'time', 'privacy_ids' with 'times')", "privacy_ids")
        if not per_person and privacy_ids is not None:
            raise StreamError(422, "this stream is event level: it takes no privacy ids (declare privacy_unit "
                                   "person_per_step when creating a stream that bounds each person's events)",
                              "privacy_ids")

        def apply(conn: Connection, live: Live) -> dict[str, Any]:
            if self._seen(conn, sid, batch_id):
                return {"batch_id": batch_id, "duplicate": True, "t": live.t, "accepted": 0}
            now = time.time()
            n = int(times.shape[0])
            future = times > now + FUTURE_SKEW
            if info.step_seconds is not None and info.origin is not None:
                due_now = self._clock_steps(info.origin, info.step_seconds, now, None)
                future |= np.floor((times - info.origin) / info.step_seconds) + 1 > due_now + 1
            if future.any():
                i = int(np.argmax(future))
                raise StreamError(422, f"is in the future ({times[i] - now:.3g} s after the service's clock)",
                                  f"times[{i}]")
            if info.horizon is not None and live.t >= info.horizon:
                raise StreamError(409, f"the stream ended at step {info.horizon} (horizon)", "times")
            if info.step_seconds is None:
                late = times < live.open_since
                if late.any() and info.late == "reject":
                    i = int(np.argmax(late))
                    raise StreamError(422, "is before the open step (its step is closed and released); this "
                                           "stream rejects late events (late='reject')", f"times[{i}]")
                if per_person:
                    assert privacy_ids is not None
                    kept, tally, head = self._person_counts(conn, live, np.full(n, live.t + 1, dtype=np.int64),
                                                            privacy_ids)
                    counted = int(kept[0])
                    self._close_steps(conn, live, np.zeros(0, dtype=np.int64), live.open_count + counted,
                                      live.open_since, counted, person_tally=(tally, head))
                    self._mark(conn, sid, batch_id, n)
                    return {"batch_id": batch_id, "duplicate": False, "t": live.t, "accepted": n, "counted": counted}
                self._close_steps(conn, live, np.zeros(0, dtype=np.int64), live.open_count + n, live.open_since, n)
                self._mark(conn, sid, batch_id, n)
                return {"batch_id": batch_id, "duplicate": False, "t": live.t, "accepted": n}
            assert info.origin is not None
            L = info.step_seconds
            due = self._clock_steps(info.origin, L, now, info.horizon)
            if due - live.t > MAX_CATCHUP_STEPS:  # bounded work: the clock catches up first
                raise StreamError(409, f"the stream's clock is {due - live.t} steps behind (more than "
                                       f"{MAX_CATCHUP_STEPS}); events are taken again once it has caught up",
                                  "times")
            steps = np.floor((times - info.origin) / L).astype(np.int64) + 1  # 1-based step of each event
            if info.horizon is not None and (steps > info.horizon).any():
                i = int(np.argmax(steps > info.horizon))
                raise StreamError(409, f"is after the stream's last step ({info.horizon}, horizon)", f"times[{i}]")
            late = steps <= live.t
            if late.any():
                if info.late == "reject":
                    i = int(np.argmax(late))
                    if steps[i] < 1:
                        raise StreamError(422, f"is before the stream's first step (origin {info.origin:.3f}, "
                                               "Unix seconds)", f"times[{i}]")
                    raise StreamError(422, f"falls in step {int(steps[i])}, which is closed and released "
                                           f"(t={live.t}); this stream rejects late events (late='reject')",
                                      f"times[{i}]")
                steps = np.maximum(steps, live.t + 1)
            # steps t+1 .. last: close those before the newest (and any due by the clock)
            last = int(max(int(steps.max()), min(due + 1, info.horizon or due + 1), live.t + 1))
            pt: tuple[dict[str, Any], dict[str, Any]] | None = None
            if per_person:
                assert privacy_ids is not None
                kept, tally, head = self._person_counts(conn, live, steps, privacy_ids)
                per = np.zeros(last - live.t, dtype=np.int64)
                per[: kept.shape[0]] = kept
                if tally["step"] != last:  # the newest event's step closes here too: a fresh open step
                    tally = {"step": last, "ids": {}}
                pt, counted = (tally, head), int(kept.sum())
            else:
                per = np.bincount(steps - (live.t + 1), minlength=last - live.t).astype(np.int64)
                counted = n
            per[0] += live.open_count
            close = per[:-1]
            self._close_steps(conn, live, close, int(per[-1]), info.origin + (last - 1) * L, counted, person_tally=pt)
            self._mark(conn, sid, batch_id, n)
            out = {"batch_id": batch_id, "duplicate": False, "t": live.t, "accepted": n}
            return {**out, "counted": counted} if per_person else out

        return self._write(sid, apply)

    def close_step(self, sid: str, step: int) -> dict[str, Any]:
        """Close step ``step``, the open one (streams without ``step_seconds``); idempotent.

        ``step`` is the step the caller closes (``t + 1`` before the call). Closing the step that
        was closed last again (a retry whose answer was lost) changes nothing and returns the
        same ``t``; any other ``step`` is a 409 naming the current ``t``.
        """
        info = self.live(sid).info  # a stream closed for a retired state: 409 naming the reason, first
        if info.step_seconds is not None:
            raise StreamError(409, "this stream's steps close by its clock (step_seconds)")

        def apply(conn: Connection, live: Live) -> dict[str, Any]:
            if step == live.t and step >= 1:
                return {"t": live.t, "step": step, "duplicate": True}
            if step != live.t + 1:
                raise StreamError(409, f"step {step} is not the open step: t={live.t} steps are closed, the open "
                                       f"step is {live.t + 1} (send {{\"t\": {live.t + 1}}})", "t")
            if info.horizon is not None and live.t >= info.horizon:
                raise StreamError(409, f"the stream ended at step {info.horizon} (horizon)")
            self._close_steps(conn, live, np.array([live.open_count], dtype=np.int64), 0, time.time(), 0)
            return {"t": live.t, "step": step, "duplicate": False}

        return self._write(sid, apply)

    def delete(self, sid: str) -> dict[str, Any]:
        """Close and archive a stream (admin): ingest stops for good, the clock leaves it, the
        released steps stay queryable; the open step's events are discarded, never released.
        Idempotent (the first closing time is kept). A stream closed for a retired state is closed
        already: its closure is answered as it is (its publisher is never loaded)."""
        gone = self.retired(sid)
        if gone is not None:
            return {"id": sid, "closed_at": gone.closed_at, "t": gone.t, "discarded_open_step": False,
                    "closed_reason": gone.reason}

        def apply(conn: Connection, live: Live) -> dict[str, Any]:
            row = conn.execute(sa.select(streams.c.closed_at).where(streams.c.id == sid)).one()
            closed = int(row.closed_at) if row.closed_at is not None else int(time.time())
            discarded = 0 if row.closed_at is not None else live.open_count
            if row.closed_at is None:
                conn.execute(sa.update(streams).where(streams.c.id == sid).values(closed_at=closed, open_count=0))
                live.open_count = 0
            live.closed_at = closed
            return {"id": sid, "closed_at": closed, "t": live.t, "discarded_open_step": discarded > 0,
                    "closed_reason": None}

        out = self._write(sid, apply, closing=True)
        log.info("stream %s closed", sid)
        return out

    # -- query log ------------------------------------------------------------------------------
    def _flush_pending(self, conn: Connection, live: Live) -> builtins.list[tuple[float, int, int, int]]:
        """Write the worker's buffered query log in ``conn``'s transaction; returns what it took."""
        with live.plock:
            pending, live.pending = live.pending, []
        if pending:
            conn.execute(sa.insert(stream_queries), [
                {"stream_id": live.info.id, "asked_at": a, "t": t, "range_start": lo, "range_end": hi}
                for a, t, lo, hi in pending])
        return pending

    def _flush_queries(self, live: Live) -> None:
        # the flush lock first: with the buffer empty because another thread's flush took it, wait
        # for that flush to commit (the operator's log counts the rows right after this)
        with live.flock:
            if not live.pending:
                return
            taken: list[tuple[float, int, int, int]] = []
            try:
                with write_tx(self.engine) as conn:
                    taken = self._flush_pending(conn, live)
            except Exception:
                with live.plock:
                    live.pending[:0] = taken
                raise

    # -- reading --------------------------------------------------------------------------------
    def _current(self, sid: str) -> Live:
        """The worker's copy, reloaded if another worker released steps since."""
        live = self.live(sid)
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(streams.c.t, streams.c.closed_at).where(streams.c.id == sid)).first()
            if row is None:
                raise NotFound(f"no stream {sid}")
            t = row._mapping["t"]
            if row.closed_at is not None:
                live.closed_at = int(row.closed_at)
            if int(t) > live.t:
                with live.lock:
                    if int(t) > live.t:
                        self._refresh(conn, live)
        return live

    @staticmethod
    def _range_error(lo: int, hi: int, t: int, W: int, field: str | None) -> StreamError:
        if lo > hi:
            why, fld = f"the range is reversed (start={lo} > end={hi})", "start"
        elif hi > t:
            why, fld = f"end={hi} is in the future: {t} steps are released", "end"
        elif lo < 1:
            why, fld = "start must be >= 1 (steps are numbered from 1)", "start"
        else:
            why, fld = (f"start={lo} is before the window: steps {max(1, t - W + 1)}..{t} can be asked "
                        f"(window={W})"), "start"
        return StreamError(422, why, field or fld)

    def _log(self, live: Live, t: int, lo: builtins.list[int], hi: builtins.list[int], who: Asker | None) -> int:
        """Buffer the ranges for the query log as the stream's ``queries_from`` allows (readers only,
        anyone, or none) and at most ``log_per_client`` per client and hour; returns how many."""
        policy = live.info.queries_from
        if policy == "none" or (policy == "readers" and (who is None or not who.reader)):
            return 0
        now = time.time()
        with live.plock:
            cap = live.info.log_per_client
            if cap is not None and who is not None:
                hour = int(now // 3600)
                h, used = live.logged.get(who.key, (hour, 0))
                used = used if h == hour else 0
                take = max(0, min(len(lo), cap - used))
                if len(live.logged) > 100_000:  # forget the clients of earlier hours
                    live.logged = {k: v for k, v in live.logged.items() if v[0] == hour}
                live.logged[who.key] = (hour, used + take)
                lo, hi = lo[:take], hi[:take]
            live.pending.extend((now, t, a, b) for a, b in zip(lo, hi))
        return len(lo)

    def try_answer_one(self, sid: str, lo: int, hi: int, who: Asker | None = None) -> dict[str, Any] | None:
        """One range from the worker's copy without waiting (the event loop's fast path), or None
        when the copy is busy (a writer commits), absent, or behind the range asked."""
        live = self._live.get(sid)
        if live is None or not live.lock.acquire(blocking=False):
            return None
        try:
            pub = live.pub
            t, W = live.visible, pub.window
            if hi > t and lo <= hi:
                return None  # maybe released by another worker: the slow path checks the database
            if not (1 <= lo <= hi <= t and lo > pub.t - W):
                raise self._range_error(lo, hi, t, W, None)
            est = pub._answer_one(lo, hi, t)  # checked just above: no second check in the library
            std = float(pub._variance_checked(lo, hi)) ** 0.5
        finally:
            live.lock.release()
        self._log(live, t, [lo], [hi], who)
        return {"estimate": est, "start": lo, "end": hi, "t": t, "std": std}

    def try_answer_many(self, sid: str, lo: NDArray[np.int64], hi: NDArray[np.int64], *, record: bool = True,
                        who: Asker | None = None) -> tuple[NDArray[Any], int] | None:
        """Many ranges from the worker's copy without waiting (the event loop's fast path; as
        :meth:`answer` without variances), or None when the copy is busy, absent, or behind a range."""
        live = self._live.get(sid)
        if live is None or not live.lock.acquire(blocking=False):
            return None
        try:
            pub = live.pub
            t, W = live.visible, pub.window
            if ((hi > t) & (lo <= hi)).any():
                return None  # maybe released by another worker: the slow path checks the database
            bad = ~((lo >= 1) & (lo > pub.t - W) & (lo <= hi) & (hi <= t))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise self._range_error(int(lo[i]), int(hi[i]), t, W, None if lo.shape[0] == 1 else f"ranges[{i}]")
            out = pub._answer_at(lo, hi, np.full(lo.shape, t, dtype=np.int64))
        finally:
            live.lock.release()
        if record:
            self._log(live, t, lo.tolist(), hi.tolist(), who)
        return out, t

    def answer(self, sid: str, lo: NDArray[np.int64], hi: NDArray[np.int64], *, record: bool = True,
               variance: bool = False, who: Asker | None = None) -> tuple[NDArray[Any], int, builtins.list[float] | None]:
        """Noisy answers to ranges ``[lo, hi]`` from released nodes; logged (as the stream's query-log
        policy allows ``who``) unless ``record=False``."""
        live = self.live(sid)
        if hi.shape[0] and int(hi.max()) > live.t:
            live = self._current(sid)  # another worker may have released these steps
        with live.lock:
            pub = live.pub
            t, W = live.visible, pub.window
            bad = ~((lo >= 1) & (lo > pub.t - W) & (lo <= hi) & (hi <= t))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise self._range_error(int(lo[i]), int(hi[i]), t, W, None if lo.shape[0] == 1 else f"ranges[{i}]")
            # answers as of the committed time (the library's ``query`` at that time)
            out = pub._answer_at(lo, hi, np.full(lo.shape, t, dtype=np.int64))
            var = None
            if variance:
                var = [float(pub._variance_checked(a, b)) for a, b in zip(lo.tolist(), hi.tolist())]  # checked above
        if record:
            self._log(live, t, lo.tolist(), hi.tolist(), who)
        return out, t, var

    def status(self, sid: str) -> dict[str, Any]:
        """The public status: the declaration, ``t``, the window, what can be asked, and whether the
        stream is ``open`` or ``closed`` (``closed_at``; ``closed_reason`` when the service closed it
        itself: a stream of a retired state, which answers nothing any more)."""
        gone = self.retired(sid)
        if gone is not None:
            return {**gone.info.public(), "t": gone.t, "window": int(gone.info.params["window"]), "answerable": None,
                    "status": "closed", "closed_at": gone.closed_at, "closed_reason": gone.reason}
        live = self._current(sid)
        info = live.info
        with live.lock:
            t, W = live.visible, live.pub.window
        out = {**info.public(), "t": t, "window": W, "answerable": [max(1, t - W + 1), t] if t else None,
               "status": "open" if live.closed_at is None else "closed", "closed_at": live.closed_at,
               "closed_reason": None}
        failed = self.clock_errors.get(sid)
        if failed is not None:
            out["clock_error"] = failed[0]
        if info.step_seconds is not None and info.origin is not None:
            out["open_step"] = {"step": t + 1, "starts": info.origin + t * info.step_seconds,
                                "ends": info.origin + (t + 1) * info.step_seconds}
        return out

    def operator_view(self, sid: str, limit: int = 1000) -> dict[str, Any]:
        """The query log, the chosen tree heights and the ledger (admin). Of a stream closed for a
        retired state, the query log (which ranges were answered: what is exposed) and the reason;
        no heights and no ledger (its publisher is never loaded)."""
        gone = self.retired(sid)
        live = None if gone is not None else self._current(sid)
        if live is not None:
            self._flush_queries(live)
        c = stream_queries.c
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(c.seq, c.asked_at, c.t, c.range_start, c.range_end)
                                .where(c.stream_id == sid).order_by(c.seq.desc()).limit(limit)).all()
            n = conn.execute(sa.select(sa.func.count()).select_from(stream_queries)
                             .where(c.stream_id == sid)).scalar_one()
        queries = [{"seq": r.seq, "asked_at": r.asked_at, "t": int(r._mapping["t"]), "start": int(r.range_start),
                    "end": int(r.range_end), "length": int(r.range_end) - int(r.range_start) + 1} for r in reversed(rows)]
        if live is None:
            assert gone is not None
            return {"id": sid, "t": gone.t, "queries_logged": int(n), "queries": queries,
                    "queries_learned_up_to": gone.log_seq, "predicted_length": None, "trees": [], "ledger": None,
                    "ledger_total": None, "ledger_measure": gone.info.measure, "status": "closed",
                    "closed_reason": gone.reason}
        with live.lock:
            pub = live.pub
            trees = [{"start": s, "height": k} for s, k in pub.trees]
            predictor = getattr(pub, "predictor", None)
            snap = pub.ledger
            ledger = [{**e.as_dict(), "measure": snap.measure} for e in snap]  # under zCDP the amounts are rhos
            total, measure = snap.total, snap.measure
        return {"id": sid, "t": live.visible, "queries_logged": int(n), "queries": queries,
                "queries_learned_up_to": live.log_seq,
                "predicted_length": None if predictor is None or predictor.value is None else float(predictor.value),
                "trees": trees, "ledger": ledger, "ledger_total": total, "ledger_measure": measure}

    def check(self, sid: str) -> dict[str, Any]:
        """Non-private totals for tests (only with ``PRIVPUB_TEST_CHECKS=1``)."""
        if not self.checks:
            raise NotFound("not found")
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(streams.c.true_total, streams.c.open_count, streams.c.t)
                               .where(streams.c.id == sid)).first()
            if row is None:
                raise NotFound(f"no stream {sid}")
            nb = conn.execute(sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(stream_batches.c.n_items), 0))
                              .where(stream_batches.c.stream_id == sid)).one()
        return {"true_total": None if row.true_total is None else int(row.true_total),
                "open_count": int(row.open_count), "t": int(row._mapping["t"]), "batches": int(nb[0]), "items": int(nb[1])}
