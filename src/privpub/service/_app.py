"""The HTTP application (FastAPI): campaigns, reports, assignments, releases, streams, dashboards, health.

Resources are routers listed in :data:`ROUTERS`; another resource (e.g. streams) adds its router
there and its tables in its own migration. Error bodies are FastAPI's ``{"detail": [{"loc": ["body",
field], "msg": ..., "type": ...}, ...]}`` (every problem of the request) beside privpub's ``{"error":
{"field": ..., "message": ...}}`` (:func:`privpub.service._http.error_body`), and never echo a report's content or a participant's value; the access log is off (it
would hold IP addresses) and the service logs only method, path template and status.
"""

from __future__ import annotations

import asyncio
import csv
import gc
import io
import logging
import os
import sys
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

import privpub
from privpub.ldp.wire import b64decode
from privpub.service._db import make_engine, upgrade
from privpub.service._endpoint import MATCH, Call, Endpoint, FastPath
from privpub.service._http import (
    MAX_BATCH_BODY,
    MAX_BATCH_REPORTS,
    STORE_TIMEOUT,
    ApiError,
    BodyLimit,
    CampaignId,
    ReleaseId,
    _error,
    _validation_error,
    require_admin,
)
from privpub.service._kinds import ReportError, SpecError
from privpub.service._metrics import count_report, count_reports
from privpub.service._specs import AssignmentRequest, BatchIn, CampaignIn, ReportIn, TokenRequest
from privpub.service._store import (
    ARCHIVED,
    BAD_ASSIGNMENT,
    BAD_TOKEN,
    CLOSED,
    DUPLICATE,
    NEW,
    Batch,
    CampaignInfo,
    Conflict,
    Forbidden,
    Gone,
    Ingestor,
    NotFound,
    Store,
    Unavailable,
    iso,
)
from privpub.service._streams import StreamError, StreamStore
from privpub.service._transport import Guard, TransportConfig, admin_token_problem
from privpub.service._web import CampaignCORS, client_js_router

__all__ = ["ROUTERS", "PrivpubApp", "create_app", "create_app_from_env"]

log = logging.getLogger("privpub.service")

#: request body limits (bytes): the batch endpoint, everything else
def _store(request: Request) -> Store:
    return request.app.state.store  # type: ignore[no-any-return]


def _campaign(request: Request, campaign_id: str) -> CampaignInfo:
    return _store(request).campaign(campaign_id)


# ---------------------------------------------------------------------------------------------
# report decoding and validation (nothing is stored unless every report passes)
# ---------------------------------------------------------------------------------------------
def _b64(text: str, field: str) -> bytes:
    try:
        return b64decode(text)
    except ValueError:
        raise ApiError(422, "is not valid base64", field) from None


def _single_batch(store: Store, info: CampaignInfo, body: ReportIn) -> Batch:
    group = store.group(info, body.group)
    if group is None:
        raise ApiError(422, f"no group {body.group} in this campaign", "group")
    if info.kind.assigned and body.assignment is None:
        raise ApiError(422, "this campaign assigns groups: send the assignment from POST /assignments", "assignment")
    if info.enrollment and body.token is None:
        raise ApiError(422, "this campaign needs a one-time enrollment token", "token")
    payload = _b64(body.report, "report")
    width = info.kind.width(group)
    if len(payload) != width:
        raise ApiError(422, f"must decode to {width} bytes for group {group.group_id}, got {len(payload)}", "report")
    arr = np.frombuffer(payload, dtype=np.uint8).reshape(1, width)
    try:
        info.kind.validate(group, arr)
    except ReportError as exc:
        raise ApiError(422, exc.message, exc.field) from None
    return Batch(ids=np.frombuffer(bytes.fromhex(body.report_id), dtype=np.uint8).reshape(1, 16),
                 groups=np.array([group.group_id], dtype=np.int64),
                 rows_by_group={group.group_id: arr},
                 tokens=[body.token] if body.token else None,
                 assignments=[body.assignment] if body.assignment else None)


def _batch(store: Store, info: CampaignInfo, body: BatchIn) -> Batch:
    ids_raw = _b64(body.report_ids, "report_ids")
    if len(ids_raw) % 16 or not ids_raw:
        raise ApiError(422, "must be base64 of n x 16 bytes (n >= 1)", "report_ids")
    n = len(ids_raw) // 16
    if n > MAX_BATCH_REPORTS:
        raise ApiError(413, f"a batch holds at most {MAX_BATCH_REPORTS} reports, got {n}", "report_ids")
    for name in ("groups", "assignments", "tokens"):
        val = getattr(body, name)
        if val is not None and len(val) != n:
            raise ApiError(422, f"must have one entry per report ({n}), got {len(val)}", name)
    if info.kind.assigned and body.assignments is None:
        raise ApiError(422, "this campaign assigns groups: send each report's assignment", "assignments")
    if info.enrollment and body.tokens is None:
        raise ApiError(422, "this campaign needs a one-time enrollment token per report", "tokens")
    if body.groups is not None and any(not 0 <= g < 2**31 for g in body.groups):
        raise ApiError(422, "group ids are integers in [0, 2**31)", "groups")
    groups = np.zeros(n, dtype=np.int64) if body.groups is None else np.asarray(body.groups, dtype=np.int64)
    known: dict[int, Any] = {}
    for gid in np.unique(groups).tolist():
        g = store.group(info, gid)
        if g is None:
            raise ApiError(422, f"no group {gid} in this campaign", "groups")
        known[gid] = g
    payload = _b64(body.reports, "reports")
    width_of = {gid: info.kind.width(g) for gid, g in known.items()}
    widths = np.zeros(n, dtype=np.int64)
    for gid, w in width_of.items():
        widths[groups == gid] = w
    if int(widths.sum()) != len(payload):
        raise ApiError(422, f"must hold {int(widths.sum())} bytes (the reports' payload widths), got {len(payload)}",
                       "reports")
    buf = np.frombuffer(payload, dtype=np.uint8)
    starts = np.cumsum(widths) - widths
    rows_by_group = {}
    for gid, w in width_of.items():
        rows = np.flatnonzero(groups == gid)
        arr = (buf.reshape(n, w) if len(width_of) == 1  # one group: the payloads as they came
               else buf[(starts[rows][:, None] + np.arange(w)[None, :])])
        try:
            info.kind.validate(known[gid], arr)
        except ReportError as exc:
            index = int(rows[exc.index]) if exc.index is not None else None
            raise ApiError(422, exc.message, f"reports[{index}]" if index is not None else "reports") from None
        rows_by_group[gid] = arr
    return Batch(ids=np.frombuffer(ids_raw, dtype=np.uint8).reshape(n, 16), groups=groups,
                 rows_by_group=rows_by_group, tokens=body.tokens, assignments=body.assignments)


class _StoreDeadlines:
    """The writer's deadline (:data:`STORE_TIMEOUT`) of the requests waiting on one event loop.

    One timer per loop checks them every :attr:`every` seconds while any wait, instead of one timer
    per request (a timer costs ~2 µs to arm and cancel on uvloop; a report costs the event loop
    ~60 µs in all). A request waiting longer than its deadline gets ``TimeoutError`` (then 503), at
    most :attr:`every` seconds late.
    """

    every = 1.0

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: dict[asyncio.Future[Any], float] = {}
        self.timer: asyncio.TimerHandle | None = None

    def add(self, fut: asyncio.Future[Any]) -> None:
        self.waiting[fut] = self.loop.time() + STORE_TIMEOUT
        if self.timer is None:
            self.timer = self.loop.call_later(self.every, self._check)

    def _check(self) -> None:
        self.timer = None
        now = self.loop.time()
        for fut in [f for f, at in self.waiting.items() if at <= now]:
            del self.waiting[fut]
            if not fut.done():
                fut.set_exception(TimeoutError())
        if self.waiting:
            self.timer = self.loop.call_later(self.every, self._check)


_deadlines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _StoreDeadlines] = weakref.WeakKeyDictionary()


async def _store_batch(app: Any, info: CampaignInfo, batch: Batch) -> Any:
    fut = app.state.ingestor.submit_async(info, batch)
    loop = asyncio.get_running_loop()
    deadlines = _deadlines.get(loop)
    if deadlines is None:
        deadlines = _deadlines[loop] = _StoreDeadlines(loop)
    deadlines.add(fut)
    try:
        return await fut
    except Exception as exc:  # the transaction failed: nothing of this request was stored
        log.warning("storing reports failed: %s", type(exc).__name__)
        raise ApiError(503, "the reports could not be stored; send them again with the same report ids",
                       headers={"Retry-After": "1"}) from None
    finally:
        deadlines.waiting.pop(fut, None)


# ---------------------------------------------------------------------------------------------
# routers
# ---------------------------------------------------------------------------------------------
health_router = APIRouter(tags=["service"])
campaigns_router = APIRouter(prefix="/campaigns", tags=["campaigns"])
reports_router = APIRouter(prefix="/campaigns", tags=["participants"])
releases_router = APIRouter(prefix="/campaigns", tags=["releases"])


@health_router.get("/health")
def health(request: Request) -> dict[str, Any]:
    """Liveness and database connectivity."""
    import sqlalchemy as sa

    try:
        with _store(request).engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        db = "ok"
    except Exception:
        db = "unavailable"
    return {"status": "ok" if db == "ok" else "degraded", "database": db, "version": privpub.__version__}


@health_router.get("/metrics", dependencies=[Depends(require_admin)], response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus metrics (admin): reports per campaign and outcome, failed authentications,
    stream ingest and query requests, clock lag, request latency per route (docs/service.md)."""
    from privpub.service._metrics import CONTENT_TYPE, render

    return Response(render(_store(request).engine), media_type=CONTENT_TYPE)


@campaigns_router.post("", status_code=201, dependencies=[Depends(require_admin)])
def create_campaign(request: Request, body: CampaignIn) -> dict[str, Any]:
    """Create a campaign (admin). Returns its id and public configuration."""
    info = _store(request).create_campaign(body.root.model_dump(mode="json"))
    log.info("campaign %s created (%s)", info.id, info.kind.kind)
    return info.public_config()


@campaigns_router.get("", dependencies=[Depends(require_admin)])
def list_campaigns(request: Request) -> dict[str, Any]:
    """Every campaign (admin)."""
    return {"campaigns": _store(request).list_campaigns()}


@campaigns_router.get("/{campaign_id}")
def campaign_config(request: Request, campaign_id: str = CampaignId) -> dict[str, Any]:
    """The campaign's public configuration: what a participant's device needs to perturb."""
    return _campaign(request, campaign_id).public_config()


@campaigns_router.get("/{campaign_id}/status")
def campaign_status(request: Request, campaign_id: str = CampaignId) -> dict[str, Any]:
    """Counts of reports (per group and per time bucket), open or closed, releases."""
    return _store(request).status(campaign_id)


@campaigns_router.post("/{campaign_id}/close", dependencies=[Depends(require_admin)])
def close_campaign(request: Request, campaign_id: str = CampaignId) -> dict[str, Any]:
    """Stop accepting reports (admin)."""
    _store(request).close(campaign_id)
    return _store(request).status(campaign_id)


@campaigns_router.delete("/{campaign_id}", dependencies=[Depends(require_admin)])
def archive_campaign(request: Request, campaign_id: str = CampaignId) -> dict[str, Any]:
    """Close and archive a campaign (admin): its releases stay readable; reports, assignments,
    tokens and new releases get 410. Idempotent."""
    out = _store(request).archive(campaign_id)
    log.info("campaign %s archived", campaign_id)
    return out


@campaigns_router.post("/{campaign_id}/tokens", status_code=201, dependencies=[Depends(require_admin)])
def create_tokens(request: Request, body: TokenRequest, campaign_id: str = CampaignId) -> dict[str, Any]:
    """One-time enrollment tokens (admin); shown once, stored only as hashes."""
    return {"tokens": _store(request).create_tokens(campaign_id, body.count)}


@reports_router.post("/{campaign_id}/assignments")
def assign(request: Request, body: AssignmentRequest, campaign_id: str = CampaignId) -> dict[str, Any]:
    """Assign an arriving participant to the current phase's group (multi-phase campaigns).

    With enrollment, send the participant's enrollment token (``token``; a gateway: ``tokens``, one
    per participant): each assignment is bound to its token, one outstanding per token. Without
    enrollment (``allow_unenrolled_phases``), one assignment per request."""
    if body.token is not None and body.tokens is not None:
        raise ApiError(422, "send token or tokens, not both", "tokens")
    tokens = [body.token] if body.token is not None else body.tokens
    return _store(request).assign(campaign_id, body.count, tokens)


#: store outcomes that refuse a report (counted as refused in /metrics)
_REFUSED = (CLOSED, BAD_TOKEN, BAD_ASSIGNMENT, ARCHIVED)


def _count_outcomes(campaign_id: str, status: Any) -> None:
    """Count a stored batch's reports by outcome (accepted, duplicate, refused) for ``/metrics``."""
    status = np.asarray(status)
    if status.shape == (1,):  # one report: no array passes
        one = int(status[0])
        count_reports(campaign_id, accepted=int(one == NEW), duplicate=int(one == DUPLICATE),
                      refused=int(one in _REFUSED))
        return
    count_reports(campaign_id, accepted=int((status == NEW).sum()), duplicate=int((status == DUPLICATE).sum()),
                  refused=int(np.isin(status, _REFUSED).sum()))


#: the receipt of one report, rendered without the JSON encoder: its three values are a campaign id
#: (16 hex digits: the path's pattern), a report id (32 hex digits: ReportIn's pattern) and a time
#: from :func:`iso`, none of which JSON escapes
_RECEIPT = '{"campaign_id":"%s","report_id":"%s","received":"%s"}'


async def handle_report(call: Call, body: ReportIn) -> tuple[int, bytes]:
    """One report: validate, store (group commit), and the receipt with its status code."""
    app, campaign_id = call.app, call.params["campaign_id"]
    store: Store = app.state.store
    info = store.campaign(campaign_id)
    try:
        batch = _single_batch(store, info, body)
    except ApiError:
        count_reports(campaign_id, refused=1)
        raise
    out = await _store_batch(app, info, batch)
    status = int(out.status[0])
    if status == NEW:
        count_report(campaign_id, "accepted")
    elif status == DUPLICATE:
        count_report(campaign_id, "duplicate")
    else:
        count_report(campaign_id, "refused")
        if status == ARCHIVED:
            raise ApiError(410, "the campaign is archived: it accepts no more reports")
        if status == CLOSED:
            raise ApiError(409, "the campaign is not accepting reports")
        if status == BAD_TOKEN:
            raise ApiError(403, "the enrollment token is unknown or already used", "token")
        if status == BAD_ASSIGNMENT:
            raise ApiError(403, "the assignment is unknown, already used or for another group", "assignment")
    receipt = _RECEIPT % (campaign_id, body.report_id.lower(), iso(int(out.received[0])))
    return (201 if status == NEW else 200), receipt.encode("ascii")


async def handle_batch(app: Any, campaign_id: str, body: BatchIn) -> tuple[int, dict[str, Any]]:
    """A gateway's batch: validate all, store (nothing if any is malformed), per-batch totals."""
    store: Store = app.state.store
    info = store.campaign(campaign_id)
    try:
        batch = _batch(store, info, body)
    except ApiError:  # nothing of the batch is stored: count its reports as refused
        count_reports(campaign_id, refused=max(1, len(body.report_ids.strip()) * 3 // 4 // 16))
        raise
    out = await _store_batch(app, info, batch)
    _count_outcomes(campaign_id, out.status)
    if (out.status == ARCHIVED).all():
        raise ApiError(410, "the campaign is archived: it accepts no more reports")
    if (out.status == CLOSED).all():
        raise ApiError(409, "the campaign is not accepting reports")
    messages = {BAD_TOKEN: ("tokens", "unknown or already used"),
                BAD_ASSIGNMENT: ("assignments", "unknown, already used or for another group")}
    rejected = [{"index": int(i), "field": messages[int(out.status[i])][0], "message": messages[int(out.status[i])][1]}
                for i in np.flatnonzero((out.status == BAD_TOKEN) | (out.status == BAD_ASSIGNMENT))]
    return 200, {"campaign_id": campaign_id, "n": len(batch), "new": int((out.status == NEW).sum()),
                 "duplicates": int((out.status == DUPLICATE).sum()), "rejected": rejected,
                 "received": iso(int(out.received.max()))}


async def _report_batch(call: Call, body: BatchIn) -> tuple[int, dict[str, Any]]:
    return await handle_batch(call.app, call.params["campaign_id"], body)


#: the report endpoints: served by their routes below and by the fast path (:class:`FastPath`)
REPORT = Endpoint("POST", "/campaigns/{campaign_id}/reports", handle_report, body=ReportIn, status=201, direct=True)
REPORT_BATCH = Endpoint("POST", "/campaigns/{campaign_id}/reports/batch", _report_batch, body=BatchIn,
                        limit=MAX_BATCH_BODY)


@reports_router.post("/{campaign_id}/reports", status_code=201, openapi_extra=REPORT.openapi(),
                     responses={200: {"description": "already stored: the original receipt"}})
async def submit_report(request: Request, campaign_id: str = CampaignId) -> Response:
    """Store one participant's report (:class:`ReportIn`); a resend with the same ``report_id``
    returns the same receipt."""
    return await REPORT.route(request, campaign_id=campaign_id)


@reports_router.post("/{campaign_id}/reports/batch", openapi_extra=REPORT_BATCH.openapi())
async def submit_batch(request: Request, campaign_id: str = CampaignId) -> Response:
    """Store many participants' reports relayed by a gateway (:class:`BatchIn`: column-wise, see the docs)."""
    return await REPORT_BATCH.route(request, campaign_id=campaign_id)


@releases_router.post("/{campaign_id}/releases", status_code=201, dependencies=[Depends(require_admin)])
def create_release(request: Request, campaign_id: str = CampaignId) -> dict[str, Any]:
    """Estimate from the stored reports and store the release immutably (admin); 409 below ``min_reports``."""
    rel = _store(request).make_release(campaign_id)
    pois = rel.get("poisoning") or {}
    log.info("campaign %s: release %s from %d reports (poisoning defense %s: %d suspected%s)", campaign_id,
             rel["id"], rel["n_reports"], pois.get("method", "n/a"), int(pois.get("suspected", 0)),
             ", group test flagged" if pois.get("group_flagged") else "")
    return rel


@releases_router.get("/{campaign_id}/releases")
def list_releases(request: Request, campaign_id: str = CampaignId) -> dict[str, Any]:
    """The campaign's releases (public: releases are published data)."""
    return {"releases": _store(request).releases(campaign_id)}


def _release_response(request: Request, campaign_id: str, release_id: str | None, fmt: str) -> Any:
    store = _store(request)
    rel = store.release(campaign_id, release_id)
    if fmt == "json":
        return rel
    header, rows = store.campaign(campaign_id).kind.csv_rows(rel)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="release-{rel["id"]}.csv"'})


@releases_router.get("/{campaign_id}/releases/latest")
def latest_release(request: Request, campaign_id: str = CampaignId,
                   format: str = Query("json", pattern="^(json|csv)$")) -> Any:
    """The newest release, as JSON or CSV."""
    return _release_response(request, campaign_id, None, format)


@releases_router.get("/{campaign_id}/releases/{release_id}")
def get_release(request: Request, campaign_id: str = CampaignId, release_id: str = ReleaseId,
                format: str = Query("json", pattern="^(json|csv)$")) -> Any:
    """One release, as JSON or CSV."""
    return _release_response(request, campaign_id, release_id, format)


def _dashboard_router() -> APIRouter:
    from privpub.service._dashboard import router

    return router


def _streams_router() -> APIRouter:
    from privpub.service._stream_api import router

    return router


#: the application's resources; a new resource appends its router here
ROUTERS: list[Callable[[], APIRouter]] = [
    lambda: health_router, lambda: campaigns_router, lambda: reports_router, lambda: releases_router,
    _dashboard_router, _streams_router, client_js_router,
]


class PrivpubApp(FastAPI):
    """The FastAPI application whose hot endpoints skip the framework's own outer middleware.

    FastAPI wraps the user middleware in its own: Starlette's server-error middleware, the native
    telemetry (which reads the OpenTelemetry configuration from the environment on every request)
    and its own body limit. The service's middleware (CORS, the transport guard, the body limit, the
    fast path) already does all of that for the :class:`~privpub.service._endpoint.Endpoint` paths:
    a request that :class:`~privpub.service._endpoint.FastPath` serves enters the service's outermost
    middleware directly (the same instances the framework's stack holds, so the failed-authentication
    buckets and the body-memory budget are shared). Every other request takes the framework's way.
    """

    #: the service's outermost middleware inside the framework's stack, and the fast path
    _front: ASGIApp | None = None
    _fast: FastPath | None = None
    _guard: Guard | None = None

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        node: Any = stack
        front = fast = guard = None
        for _ in range(32):  # the framework's layers, then ours (each keeps the next as .app)
            if front is None and isinstance(node, CampaignCORS):
                front = node
            if guard is None and isinstance(node, Guard):
                guard = node
            if isinstance(node, FastPath):
                fast = node
                break
            node = getattr(node, "app", None)
            if node is None:
                break
        if front is not None and fast is not None:
            self._front, self._fast, self._guard = front, fast, guard
        return stack

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self.middleware_stack is None:
                self.middleware_stack = self.build_middleware_stack()
            fast = self._fast
            found = fast.match(scope["method"], scope["path"]) if fast is not None else None
            if found is not None and self._front is not None:
                scope["app"] = self
                endpoint, params = found
                if (endpoint.direct and self._guard is not None
                        and await self._guard.direct(scope, receive, send, endpoint.limit,
                                                     lambda body: endpoint.respond(self, scope, body, params))):
                    return  # a plain JSON request: served without the middleware layers (Guard.direct)
                scope[MATCH] = found  # FastPath need not match again
                await self._front(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(db: str, *, admin_token: str | None = None, migrate: bool = True,
               transport: TransportConfig | None = None, fast_paths: bool = True) -> FastAPI:
    """The service's ASGI application over the database ``db`` (URL or SQLite path).

    Parameters
    ----------
    db : str
        ``sqlite:///file.db``, a plain SQLite path, or ``postgresql+psycopg://...``.
    admin_token : str, optional
        The admin token (default: the environment variable ``PRIVPUB_ADMIN_TOKEN``).
    migrate : bool
        Bring the database schema to the newest revision first (Alembic).
    transport : TransportConfig, optional
        Body deadline and failed-authentication rate limit of the :class:`~privpub.service._transport.Guard`
        (default: ``TransportConfig()``).
    fast_paths : bool
        Serve the report and stream ingest endpoints through :class:`~privpub.service._endpoint.FastPath`
        (the same code as their routes, without the framework's routing; default). False: every
        request goes through the framework (``PRIVPUB_FAST_PATHS=0``; the tests compare the two).
    """
    if migrate:
        upgrade(db)
    engine = make_engine(db)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.streams.start()
        # the objects made at start (modules, NumPy, the framework) are never garbage: moved out of
        # the collector's generations, so that its full passes under load do not walk them
        gc.freeze()
        try:
            yield
        finally:
            app.state.streams.stop()
            app.state.ingestor.stop()
            engine.dispose()

    app = PrivpubApp(title="privpub collection service", version=privpub.__version__, docs_url=None, redoc_url=None,
                  lifespan=lifespan,
                  description="Local-DP collection: devices perturb, an untrusted server collects, aggregates "
                              "and publishes; and real-time count streams published under event-level DP "
                              "(/streams). See docs/service.md.")
    app.state.admin_token = admin_token if admin_token is not None else os.environ.get("PRIVPUB_ADMIN_TOKEN") or None
    app.state.store = Store(engine)
    app.state.ingestor = Ingestor(app.state.store)
    app.state.streams = StreamStore(engine, db)
    for make in ROUTERS:
        app.include_router(make())

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.message, exc.field, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_error(exc.errors())

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(SpecError)
    async def _spec(_: Request, exc: SpecError) -> JSONResponse:
        return _error(422, exc.message, exc.field)

    @app.exception_handler(StreamError)
    async def _stream_error(_: Request, exc: StreamError) -> JSONResponse:
        return _error(exc.status, exc.message, exc.field)

    @app.exception_handler(NotFound)
    async def _nf(_: Request, exc: NotFound) -> JSONResponse:
        return _error(404, str(exc))

    @app.exception_handler(Conflict)
    async def _conflict(_: Request, exc: Conflict) -> JSONResponse:
        return _error(409, str(exc))

    @app.exception_handler(Forbidden)
    async def _forbidden(_: Request, exc: Forbidden) -> JSONResponse:
        return _error(403, str(exc), exc.field)

    @app.exception_handler(Gone)
    async def _gone(_: Request, exc: Gone) -> JSONResponse:
        return _error(410, str(exc))

    @app.exception_handler(Unavailable)
    async def _busy(_: Request, exc: Unavailable) -> JSONResponse:
        return _error(503, str(exc), headers={"Retry-After": f"{exc.retry_after:g}"})

    from sqlalchemy.exc import DataError

    @app.exception_handler(DataError)
    async def _data(_: Request, exc: DataError) -> JSONResponse:
        # the database refused a value that passed validation (e.g. a NUL character in a
        # PostgreSQL text column): the client's input, not a server fault; nothing was stored
        log.warning("the database refused a value: %s", type(exc.orig).__name__)
        return _error(422, "a value of the request cannot be stored (e.g. a NUL character in a text field)")

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error method=%s status=500 error=%s", request.method, type(exc).__name__)
        return _error(500, "internal error")

    if fast_paths:
        from privpub.service._stream_api import ENDPOINTS as STREAM_ENDPOINTS

        app.add_middleware(FastPath, fastapi_app=app, endpoints=[REPORT, REPORT_BATCH, *STREAM_ENDPOINTS])
    # 413 for bodies above the endpoint's limit (outside the fast path: it applies to both entries)
    app.add_middleware(BodyLimit)
    # JSON only, auth before the body, failed-auth limit, body deadline, no tracebacks
    app.add_middleware(Guard, fastapi_app=app, config=transport or TransportConfig())
    # outermost: CORS preflights and headers for a campaign's allowed origins, before the guard and
    # the fast paths see a request (their refusals carry the CORS headers too)
    app.add_middleware(CampaignCORS, fastapi_app=app)
    return app


def create_app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory`` (the ``privpub serve`` workers): reads ``PRIVPUB_DB``."""
    db = os.environ.get("PRIVPUB_DB")
    if not db:
        raise RuntimeError("PRIVPUB_DB is not set")
    token = os.environ.get("PRIVPUB_ADMIN_TOKEN")
    problem = admin_token_problem(token) if token else None
    if problem is not None:
        raise RuntimeError(f"PRIVPUB_ADMIN_TOKEN is too weak: {problem}")
    # hand the interpreter lock over sooner (default 5 ms): a range query answered on the event
    # loop then waits less behind a thread parsing a large batch
    sys.setswitchinterval(0.0005)
    return create_app(db, migrate=False, transport=TransportConfig.from_env(),
                      fast_paths=os.environ.get("PRIVPUB_FAST_PATHS", "1") != "0")


