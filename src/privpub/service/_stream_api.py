"""HTTP endpoints of the real-time streams (issue 16): ``/streams`` and its sub-resources.

Operators create streams with the admin token; producers post counts or timed events with the
stream's producer token (returned once at creation) or the admin token; anyone may ask range
queries and read the status and the dashboard (released values are public). See docs/service.md.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
from typing import Annotated, Any

import anyio
import numpy as np
from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema

from privpub.service._endpoint import Call, Endpoint
from privpub.service._http import AUTHENTICATED, MAX_BATCH_BODY
from privpub.service._specs import StreamIn
from privpub.service._streams import (
    Asker,
    StreamError,
    StreamStore,
)

__all__ = ["CloseStepIn", "CountsIn", "EventsIn", "RangesIn", "ENDPOINTS", "RangeQuery", "StreamIn", "router"]

log = logging.getLogger("privpub.service")

#: items (counts or events) per request, and ranges per batch query
MAX_ITEMS = 200_000
MAX_RANGES = 10_000

StreamId = Path(pattern=r"^[0-9a-f]{16}$", description="the stream's id")
_BATCH = r"^[A-Za-z0-9._:-]{1,64}$"
#: an event time: a JSON number (strict: ``true`` and ``"5"`` are refused)
Time = Annotated[float, Field(strict=True, allow_inf_nan=False)]


def _count(v: Any) -> int | float:
    """A count as sent: a JSON integer (kept exact, never through a float) or a finite JSON
    float; ``true`` and ``"5"`` are refused (strict types)."""
    if type(v) is int:
        return v
    if type(v) is float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v
    raise ValueError(f"must be a JSON number, got {type(v).__name__} (true and \"5\" are not counts)")


Count = Annotated[int | float, PlainValidator(_count), WithJsonSchema({"type": "number"})]
#: a step index (far beyond any stream, inside int64)
Step = Annotated[int, Field(ge=-(2**62), le=2**62)]


#: a person's id on an event: a JSON string (at most 200 characters) or integer (strict)
PrivacyId = Annotated[str, Field(strict=True, min_length=1, max_length=200)] | Annotated[int, Field(strict=True)]


class CountsIn(BaseModel):
    """Per-step counts from a producer that aggregates itself (one count per step, in order)."""

    model_config = ConfigDict(extra="forbid")

    counts: list[Count] = Field(min_length=1, max_length=MAX_ITEMS,
                                description="JSON numbers; integer streams take integers (parsed exactly; "
                                            "a float must be integral and below 2**53)")
    batch_id: str = Field(pattern=_BATCH, description="idempotency key: a resent batch is not counted again")


class EventsIn(BaseModel):
    """Timed events (each counts 1 in the step its time falls in): ``time`` or ``times``."""

    model_config = ConfigDict(extra="forbid")

    batch_id: str = Field(pattern=_BATCH, description="idempotency key: a resent batch is not counted again")
    time: Time | None = Field(default=None, ge=0, description="Unix time of one event")
    times: list[Time] | None = Field(default=None, min_length=1, max_length=MAX_ITEMS,
                                       description="Unix times of many events")
    privacy_id: PrivacyId | None = Field(default=None, description="person-per-step streams: the person of "
                                                                    "the one event ('time')")
    privacy_ids: list[PrivacyId] | None = Field(default=None, min_length=1, max_length=MAX_ITEMS,
                                                description="person-per-step streams: the person of each event "
                                                            "of 'times' (in order)")


class CloseStepIn(BaseModel):
    """The step a producer closes (``t + 1`` before the call): a retry closes nothing twice."""

    model_config = ConfigDict(extra="forbid")

    t: int = Field(strict=True, ge=1, le=2**62, description="the step to close: the open step, t + 1 (t = steps closed)")


class RangesIn(BaseModel):
    """Many range queries at once: ``[[start, end], ...]`` (steps from 1, both ends inclusive)."""

    model_config = ConfigDict(extra="forbid")

    ranges: list[tuple[Step, Step]] = Field(min_length=1, max_length=MAX_RANGES)
    log: bool = Field(default=True, description="record the ranges in the query log (HQ publishers learn)")


router = APIRouter(prefix="/streams", tags=["streams"])
_bearer = HTTPBearer(auto_error=False, description="the admin token or the stream's producer token")
_BEARER = Depends(_bearer)


def _streams(request: Request) -> StreamStore:
    return request.app.state.streams  # type: ignore[no-any-return]


def _admin_dep() -> Any:
    from privpub.service._http import require_admin

    return Depends(require_admin)


def check_producer(app: Any, stream_id: str, token: str | None) -> None:
    """Ingestion: the stream's producer token or the admin token (constant-time comparisons)."""
    from privpub.service._http import ApiError

    if token is None:
        raise ApiError(401, "posting to a stream needs its producer token (or the admin token): "
                            "Authorization: Bearer <token>", headers={"WWW-Authenticate": "Bearer"})
    admin = app.state.admin_token
    given = hashlib.sha256(token.encode("utf-8")).digest()
    if admin and hmac.compare_digest(given, hashlib.sha256(admin.encode("utf-8")).digest()):
        return
    if not app.state.streams.authorised(stream_id, token):
        raise ApiError(403, "the token is not this stream's producer token nor the admin token")


def require_producer(request: Request, stream_id: str = StreamId,
                     cred: HTTPAuthorizationCredentials | None = _BEARER) -> None:
    """Ingestion: the stream's producer token or the admin token (constant-time comparisons; by the
    transport guard, before the body is read; here only if it did not)."""
    if request.scope.get(AUTHENTICATED) == "producer":
        return
    ok = cred is not None and cred.scheme.lower() == "bearer"
    check_producer(request.app, stream_id, cred.credentials if ok and cred is not None else None)


_PRODUCER = [Depends(require_producer)]


@router.post("", status_code=201, dependencies=[_admin_dep()])
def create_stream(request: Request, body: StreamIn) -> dict[str, Any]:
    """Create a stream (admin). Returns its id, its status and its producer token (shown once)."""
    info, token, reader = _streams(request).create(body.root.model_dump())
    return {**_streams(request).status(info.id), "producer_token": token, "reader_token": reader}


@router.get("", dependencies=[_admin_dep()])
def list_streams(request: Request) -> dict[str, Any]:
    """Every stream (admin)."""
    return {"streams": _streams(request).list()}


@router.get("/{stream_id}")
def stream_status(request: Request, stream_id: str = StreamId) -> dict[str, Any]:
    """Public status: declaration, privacy in words and ``t``, the number of steps released."""
    return _streams(request).status(stream_id)


def do_counts(store: StreamStore, stream_id: str, body: CountsIn) -> dict[str, Any]:
    return store.add_counts(stream_id, body.counts, body.batch_id)


def do_events(store: StreamStore, stream_id: str, body: EventsIn) -> dict[str, Any]:
    if (body.time is None) == (body.times is None):
        raise StreamError(422, "every event needs a time: send 'time' (one event) or 'times' (a batch)", "times")
    times = np.asarray([body.time] if body.time is not None else body.times, dtype=np.float64)
    if (times < 0).any():
        i = int(np.argmax(times < 0))
        raise StreamError(422, "must be a Unix time >= 0", f"times[{i}]")
    if body.privacy_id is not None and body.time is None:
        raise StreamError(422, "privacy_id goes with 'time' (one event); send 'privacy_ids' with 'times'", "privacy_id")
    if body.privacy_ids is not None and body.times is None:
        raise StreamError(422, "privacy_ids go with 'times' (a batch); send 'privacy_id' with 'time'", "privacy_ids")
    ids = [body.privacy_id] if body.privacy_id is not None else body.privacy_ids
    if ids is not None and len(ids) != times.shape[0]:
        raise StreamError(422, f"must hold one id per event of 'times' ({times.shape[0]}), got {len(ids)}",
                          "privacy_ids")
    return store.add_events(stream_id, times, body.batch_id, privacy_ids=ids)


def _counts(call: Call, body: CountsIn) -> tuple[int, dict[str, Any]]:
    return 200, do_counts(call.app.state.streams, call.params["stream_id"], body)


def _events(call: Call, body: EventsIn) -> tuple[int, dict[str, Any]]:
    return 200, do_events(call.app.state.streams, call.params["stream_id"], body)


#: parsed and stored in the thread pool (plain functions): large batches do not hold the event loop
COUNTS = Endpoint("POST", "/streams/{stream_id}/counts", _counts, body=CountsIn, limit=MAX_BATCH_BODY)
EVENTS = Endpoint("POST", "/streams/{stream_id}/events", _events, body=EventsIn, limit=MAX_BATCH_BODY)


@router.post("/{stream_id}/counts", dependencies=_PRODUCER, openapi_extra=COUNTS.openapi())
async def post_counts(request: Request, stream_id: str = StreamId) -> Response:
    """Append per-step counts (:class:`CountsIn`; streams without ``step_seconds``); a resent
    ``batch_id`` is not counted again."""
    return await COUNTS.route(request, stream_id=stream_id)


@router.post("/{stream_id}/events", dependencies=_PRODUCER, openapi_extra=EVENTS.openapi())
async def post_events(request: Request, stream_id: str = StreamId) -> Response:
    """Count timed events (:class:`EventsIn`: one or a batch) in their steps; late events follow the
    stream's ``late`` policy."""
    return await EVENTS.route(request, stream_id=stream_id)


@router.post("/{stream_id}/close-step", dependencies=_PRODUCER)
def close_step(request: Request, body: CloseStepIn, stream_id: str = StreamId) -> dict[str, Any]:
    """Close step ``t`` (the open one) now and release it (streams without ``step_seconds``).

    Idempotent: closing the step closed last again returns the same ``t`` with ``"duplicate": true``;
    any other ``t`` is a 409 naming the current ``t``."""
    return _streams(request).close_step(stream_id, body.t)


@router.delete("/{stream_id}", dependencies=[_admin_dep()])
def delete_stream(request: Request, stream_id: str = StreamId) -> dict[str, Any]:
    """Close and archive a stream (admin): ingest and the clock stop for good, the released steps stay
    queryable, the open step's events are discarded (never released). Idempotent."""
    return _streams(request).delete(stream_id)


def asker(app: Any, stream_id: str, authorization: str | None, host: str | None) -> Asker:
    """Who asks: a reader (the stream's reader token or the admin token) or an anonymous client
    (identified by its address for the per-client cap). A wrong token is simply anonymous."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() == "bearer" and token:
        admin = app.state.admin_token
        given = hashlib.sha256(token.encode("utf-8")).digest()
        if admin and hmac.compare_digest(given, hashlib.sha256(admin.encode("utf-8")).digest()):
            return Asker("admin", True)
        if app.state.streams.is_reader(stream_id, token):
            return Asker("reader:" + given.hex()[:16], True)
    return Asker(f"client:{host or '?'}", False)


class RangeQuery(BaseModel):
    """The query parameters of ``GET /streams/{id}/range``."""

    start: Step = Field(description="first step (from 1)")
    end: Step = Field(description="last step (inclusive)")


async def _range(call: Call, query: RangeQuery) -> tuple[int, dict[str, Any]]:
    """Answered on the event loop from the worker's in-memory publisher (a few microseconds; it
    never waits for a writer, whose commit it would otherwise wait on: then in the thread pool)."""
    store: StreamStore = call.app.state.streams
    sid, auth = call.params["stream_id"], call.header("authorization")

    def who() -> Asker:
        return asker(call.app, sid, auth, call.client_host)

    # a token is checked against the stream's copy: on the event loop only if it is loaded
    body = store.try_answer_one(sid, query.start, query.end, who()) if (auth is None or store.loaded(sid)) else None
    if body is None:  # a writer holds the stream (or it is not loaded): the thread pool
        body = await anyio.to_thread.run_sync(lambda: answer_range(store, sid, query.start, query.end, who()))
    return 200, body


RANGE = Endpoint("GET", "/streams/{stream_id}/range", _range, query=RangeQuery)


async def _ranges(call: Call, body: RangesIn) -> tuple[int, dict[str, Any]]:
    """Many ranges, answered as :func:`_range` answers one: on the event loop from the worker's copy
    when it is free (one vectorised lookup), else in the thread pool."""
    store: StreamStore = call.app.state.streams
    sid, auth = call.params["stream_id"], call.header("authorization")
    q = np.asarray(body.ranges, dtype=np.int64).reshape(-1, 2)
    lo, hi = q[:, 0], q[:, 1]

    def who() -> Asker:
        return asker(call.app, sid, auth, call.client_host)

    def slow() -> tuple[Any, int]:
        out, t, _ = store.answer(sid, lo, hi, record=body.log, who=who())
        return out, t

    got = (store.try_answer_many(sid, lo, hi, record=body.log, who=who())
           if (auth is None or store.loaded(sid)) else None)
    # a writer holds the stream (or it is not loaded): the thread pool
    out, t = got if got is not None else await anyio.to_thread.run_sync(slow)
    return 200, {"estimates": out.tolist(), "t": t}


#: ``POST /streams/{id}/ranges``: at most :data:`MAX_RANGES` ranges, so at most this many bytes
#: (two 19-digit steps and their brackets per range, and the rest of the body)
RANGES_BODY = MAX_RANGES * 48 + 1024
RANGES = Endpoint("POST", "/streams/{stream_id}/ranges", _ranges, body=RangesIn, limit=RANGES_BODY)
#: the streams' hot endpoints: served by their routes and by the fast path (:class:`FastPath`)
ENDPOINTS = (COUNTS, EVENTS, RANGE, RANGES)


@router.get("/{stream_id}/range", openapi_extra=RANGE.openapi())
async def range_query(request: Request, stream_id: str = StreamId) -> Response:
    """Noisy count of steps ``start..end`` (:class:`RangeQuery`) from released noisy nodes only (as
    ``publisher.query``)."""
    return await RANGE.route(request, stream_id=stream_id)


def answer_range(store: StreamStore, stream_id: str, start: int, end: int, who: Asker | None = None) -> dict[str, Any]:
    out, t, var = store.answer(stream_id, np.array([start], dtype=np.int64), np.array([end], dtype=np.int64),
                               variance=True, who=who)
    assert var is not None
    return {"estimate": out[0].item(), "start": start, "end": end, "t": t, "std": var[0] ** 0.5}


@router.post("/{stream_id}/ranges", openapi_extra=RANGES.openapi())
async def range_queries(request: Request, stream_id: str = StreamId) -> Response:
    """Many range queries at once (:class:`RangesIn`: at most 10,000): the same estimates as one
    ``/range`` each, in order, and the ``t`` they were answered at (one consistent state)."""
    return await RANGES.route(request, stream_id=stream_id)


@router.get("/{stream_id}/series")
def series(request: Request, stream_id: str = StreamId,
           points: int = Query(200, ge=1, le=2000, description="last steps to return")) -> dict[str, Any]:
    """The noisy per-step counts of the last ``points`` released steps with their standard
    deviations (not logged as queries)."""
    return series_data(_streams(request), stream_id, points)


def series_data(store: StreamStore, stream_id: str, points: int) -> dict[str, Any]:
    """Unit-range answers and their standard deviations over the last ``points`` steps (not logged);
    a stream closed for a retired state answers nothing (409 naming the reason)."""
    store.live(stream_id)
    t = store.status(stream_id)["t"]
    window = int(store.info(stream_id).params["window"])
    first = max(1, t - min(points, window) + 1)
    steps = np.arange(first, t + 1, dtype=np.int64)
    if steps.shape[0] == 0:
        return {"t": t, "steps": [], "estimates": [], "std": []}
    out, t2, var = store.answer(stream_id, steps, steps, record=False, variance=True)
    assert var is not None
    return {"t": t2, "steps": steps.tolist(), "estimates": out.tolist(), "std": [v**0.5 for v in var]}


@router.get("/{stream_id}/log", dependencies=[_admin_dep()])
def operator_log(request: Request, stream_id: str = StreamId,
                 limit: int = Query(1000, ge=1, le=100_000)) -> dict[str, Any]:
    """The query log, the tree heights chosen and the ledger (admin)."""
    return _streams(request).operator_view(stream_id, limit)


@router.get("/{stream_id}/check", dependencies=[_admin_dep()], include_in_schema=False)
def check(request: Request, stream_id: str = StreamId) -> dict[str, Any]:
    """Non-private totals for the load tests (404 unless the service runs with PRIVPUB_TEST_CHECKS=1)."""
    return _streams(request).check(stream_id)
