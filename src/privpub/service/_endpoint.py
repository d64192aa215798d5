"""One way into each hot endpoint: the same code behind its framework route and its fast path.

The report and stream ingest endpoints are the service's hot paths. Each is an :class:`Endpoint`:
its request model (a JSON body or query parameters), its handler and its body limit. Two ASGI
entries serve it, and both call :meth:`Endpoint.respond`, which reads and parses the request,
calls the handler and maps every error through the application's own exception handlers (the
JSON shape of every other route):

* the documented FastAPI route (``Endpoint.route``: the route function only forwards the request;
  its OpenAPI entry documents the model, see :meth:`Endpoint.openapi`);
* :class:`FastPath`, a middleware that matches the endpoints' paths itself and skips the
  framework's routing and dependency machinery (``privpub serve`` runs it unless
  ``PRIVPUB_FAST_PATHS=0``).

What happens before either entry is shared as well, because both sit inside the same middleware:
CORS, then the transport :class:`~privpub.service._transport.Guard` (JSON-only bodies (415),
authentication from the headers before any body is read (401/403), the failed-authentication rate
limit (429), the body deadline (408), the memory budget (503), metrics), then
:class:`~privpub.service._http.BodyLimit` (413).
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import anyio
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from privpub.service._http import MAX_BODY, read_body

__all__ = ["Call", "Endpoint", "FastPath", "JsonAnswer", "error_response"]

log = logging.getLogger("privpub.service")

#: a handler's answer: status code and JSON body
Answer = tuple[int, Any]

#: JSON as Starlette's ``JSONResponse`` renders it (compact, UTF-8, no NaN), with one encoder
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
#: the scope key where :class:`privpub.service._app.PrivpubApp` leaves the fast path's match
MATCH = "privpub.fast_path"


class JsonAnswer(Response):
    """A handler's JSON answer, sent as ``JSONResponse`` would send it (same body and headers:
    ``content-length`` and ``content-type: application/json``), built without its header
    machinery (the hot endpoints answer thousands of these a second)."""

    media_type = "application/json"

    def __init__(self, status: int, content: Any) -> None:
        self.status_code = status
        self.background = None
        # bytes: the handler rendered its JSON itself (the single report's receipt)
        self.body = content if isinstance(content, bytes) else _encode(content).encode("utf-8")
        self.raw_headers = [(b"content-length", str(len(self.body)).encode("latin-1")),
                            (b"content-type", b"application/json")]


def _query_pairs(raw: bytes) -> dict[str, str]:
    """The query string's name/value pairs (the last of repeated names, as the framework's
    ``QueryParams``); plain ``a=1&b=2`` strings are split directly, others go through ``parse_qsl``."""
    if b"%" in raw or b"+" in raw or b";" in raw:
        return dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True))
    out: dict[str, str] = {}
    for part in raw.decode("latin-1").split("&"):
        if part:
            name, _, value = part.partition("=")
            out[name] = value
    return out


class Call:
    """What a handler may know of its request: the application, the path parameters, the scope."""

    __slots__ = ("app", "params", "scope")

    def __init__(self, app: Any, params: dict[str, str], scope: Scope) -> None:
        self.app, self.params, self.scope = app, params, scope

    def header(self, name: str) -> str | None:
        """A request header (latin-1), or None."""
        key = name.lower().encode("latin-1")
        for k, v in self.scope.get("headers", ()):
            if k == key:
                return bytes(v).decode("latin-1")
        return None

    @property
    def client_host(self) -> str | None:
        client = self.scope.get("client")
        return str(client[0]) if client else None


def _param(segment: str) -> str:
    return f"(?P<{segment[1:-1]}>[0-9a-f]{{16}})" if segment.startswith("{") else re.escape(segment)


@dataclass(frozen=True)
class Endpoint:
    """One endpoint served by the same code from its FastAPI route and from :class:`FastPath`.

    Parameters
    ----------
    method : str
        ``"POST"`` (a JSON body of model ``body``) or ``"GET"`` (query parameters of model ``query``).
    path : str
        The path template, e.g. ``"/campaigns/{campaign_id}/reports"``; every ``{param}`` is a
        16-hex-digit id (the route's own pattern: other values go to the route and get its 422).
    handler : callable
        ``handler(call, model) -> (status, body)``: ``body`` is JSON-serialisable, or the JSON
        already rendered as ``bytes``. A coroutine function runs on the event loop
        (the body is parsed there too); a plain function runs in the thread pool, and the body is
        parsed in the same thread (large batches do not hold the event loop).
    body, query : pydantic model
        The request's model (exactly one of them).
    status : int
        The documented success status (the handler returns the actual one).
    direct : bool
        A public endpoint whose plain JSON requests the application serves without its middleware
        layers (:meth:`privpub.service._transport.Guard.direct`: the same checks, inline).
    limit : int
        Largest body in bytes (413 beyond; :class:`~privpub.service._http.BodyLimit` refuses a
        larger announced ``Content-Length`` before either entry sees the request).
    """

    method: str
    path: str
    handler: Callable[[Call, Any], Awaitable[Answer] | Answer]
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    limit: int = MAX_BODY
    status: int = 200
    direct: bool = False
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)
    blocking: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (self.body is None) == (self.query is None):
            raise ValueError("an endpoint has a body model or a query model, not both")
        pattern = "".join(_param(s) for s in re.split(r"(\{[a-z_]+\})", self.path))
        object.__setattr__(self, "regex", re.compile(f"^{pattern}$"))
        object.__setattr__(self, "blocking", not inspect.iscoroutinefunction(self.handler))

    # -- the one way in ------------------------------------------------------------------------
    async def respond(self, app: Any, scope: Scope, receive: Receive, params: dict[str, str]) -> Response | None:
        """The response to a request of this endpoint (None: the client went away mid-body)."""
        try:
            call = Call(app, params, scope)
            if self.query is not None:
                # repeated names: the last value, as the framework's QueryParams
                query = self.query.model_validate(_query_pairs(scope.get("query_string", b"")))
                return self._json(await self._handle(call, query))
            raw = await read_body(receive, self.limit)
            if raw is None:
                return None
            model = self.body
            assert model is not None
            if self.blocking:  # parse in the handler's thread: a large batch does not hold the event loop
                handler: Callable[[Call, Any], Answer] = self.handler  # type: ignore[assignment]
                return self._json(await anyio.to_thread.run_sync(lambda: handler(call, model.model_validate_json(raw))))
            status, content = await self.handler(call, model.model_validate_json(raw))  # type: ignore[misc]
            return JsonAnswer(status, content)
        except Exception as exc:
            return await error_response(app, scope, receive, exc, "query" if self.query is not None else "body")

    async def _handle(self, call: Call, model: Any) -> Answer:
        if self.blocking:
            handler: Callable[[Call, Any], Answer] = self.handler  # type: ignore[assignment]
            return await anyio.to_thread.run_sync(handler, call, model)
        return await self.handler(call, model)  # type: ignore[misc, no-any-return]

    @staticmethod
    def _json(answer: Answer) -> Response:
        return JsonAnswer(*answer)

    async def route(self, request: Request, **params: str) -> Response:
        """The FastAPI route's body: forward the request to :meth:`respond`."""
        response = await self.respond(request.app, request.scope, request.receive, params)
        return response if response is not None else Response(status_code=400)

    def openapi(self) -> dict[str, Any]:
        """The route's ``openapi_extra``: the request model the route function does not declare."""
        answer = {"responses": {str(self.status): {"content": {"application/json": {
            "schema": {"type": "object", "additionalProperties": True}}}}}}
        if self.body is not None:
            return {**answer, "requestBody": {
                "required": True, "content": {"application/json": {"schema": self.body.model_json_schema()}}}}
        assert self.query is not None
        schema = self.query.model_json_schema()
        required = set(schema.get("required", ()))
        return {**answer, "parameters": [
            {"name": name, "in": "query", "required": name in required,
             **({"description": prop["description"]} if "description" in prop else {}), "schema": prop}
            for name, prop in schema["properties"].items()]}


async def error_response(app: Any, scope: Scope, receive: Receive, exc: Exception, where: str = "body") -> Response:
    """``exc`` as the application's exception handlers render it for every route.

    A pydantic ``ValidationError`` of the request model is rendered as FastAPI's own request
    validation error (its locations under ``where``: ``"body"`` or ``"query"``).
    """
    if isinstance(exc, ValidationError):
        exc = RequestValidationError([{**err, "loc": (where, *err.get("loc", ()))}
                                      for err in exc.errors(include_input=False)])
    handlers: dict[Any, Callable[..., Awaitable[Response]]] = app.exception_handlers
    for cls in type(exc).__mro__:
        handler = handlers.get(cls)
        if handler is not None:
            return await handler(Request(scope, receive), exc)
    raise exc


class FastPath:
    """Serve :class:`Endpoint` requests without the framework's routing and dependency machinery.

    A request whose method and path match an endpoint is answered by :meth:`Endpoint.respond`,
    the code its FastAPI route runs; every other request goes to the application.
    """

    def __init__(self, app: ASGIApp, fastapi_app: Any, endpoints: Sequence[Endpoint]) -> None:
        self.app = app
        self.fastapi_app = fastapi_app
        self.endpoints = tuple(endpoints)
        self._by_method: dict[str, tuple[Endpoint, ...]] = {}
        for ep in self.endpoints:
            self._by_method[ep.method] = (*self._by_method.get(ep.method, ()), ep)

    def match(self, method: str, path: str) -> tuple[Endpoint, dict[str, str]] | None:
        """The endpoint serving ``method path`` and its path parameters, or None."""
        for ep in self._by_method.get(method, ()):
            m = ep.regex.match(path)
            if m is not None:
                return ep, m.groupdict()
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = scope.pop(MATCH, None)
        if found is None and scope["type"] == "http":
            found = self.match(scope["method"], scope["path"])
        if found is None:
            await self.app(scope, receive, send)
            return
        endpoint, params = found
        response = await endpoint.respond(self.fastapi_app, scope, receive, params)
        if response is not None:
            await response(scope, receive, send)
