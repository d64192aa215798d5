"""Bounded work per request, before the application sees it (issue 22, findings 4 and 9).

:class:`Guard` is the outermost middleware of the application (it wraps the fast paths too):

1. a body is JSON or nothing: ``POST``/``PUT``/``PATCH``/``DELETE`` with a body whose
   ``Content-Type`` is not ``application/json`` get 415, unread (a web page cannot make its
   visitors' browsers post JSON to another origin without a CORS preflight);
2. authentication before the body: a route that needs the admin token or a stream's producer
   token has it checked from the headers, and a refused request gets 401/403 with
   ``Connection: close``: its body is never read;
3. failed-authentication rate limit: per client address, a token bucket of ``auth_burst``
   failures refilled at ``auth_rate`` per second; an empty bucket answers 429 with
   ``Retry-After`` *without checking* the token (bounded memory: the ``MAX_CLIENTS`` most recent
   addresses);
4. a body deadline: the whole body must arrive within ``body_timeout`` seconds of the headers, or
   408 and the connection is closed; and a memory budget for large bodies: a request announcing
   more than 1 MiB (a chunked body counts 32 MiB, the batch limit) reserves its size from
   ``body_memory`` bytes per worker before it is read, and gets 503 with ``Retry-After`` when the
   budget is spent (public batch endpoints cannot check a token first, so this bounds what
   anonymous clients can make a worker hold);
5. unexpected errors: one log line (method, route template, status, error class; never a
   traceback, never SQL parameters) and a 500 without detail;
6. metrics: latency per route template (:mod:`privpub.service._metrics`).

:class:`HeaderTimeoutProtocol` (uvicorn's httptools protocol with a deadline) closes connections
whose request line and headers do not arrive within ``PRIVPUB_TIMEOUT_HEADERS`` seconds or exceed
``MAX_HEADER_BYTES``; uvicorn's own ``timeout_keep_alive`` closes idle kept-alive connections.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import logging
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from privpub.service import _metrics

__all__ = ["BODY_COMPLETE", "Guard", "HeaderTimeoutProtocol", "TransportConfig", "admin_token_problem"]

log = logging.getLogger("privpub.service")

#: request line plus headers larger than this get 431 (uvicorn's httptools parser has no limit)
MAX_HEADER_BYTES = 64 * 1024
#: failed-auth buckets kept (least recently failed evicted first)
MAX_CLIENTS = 10_000
#: bodies above this many bytes are reserved from the memory budget before they are read, and
#: the most one body reserves (the batch limit: larger bodies get 413 anyway; chunked bodies,
#: whose length is not announced, reserve this much)
LARGE_BODY = 2**20
MAX_RESERVE = 32 * 2**20
#: the shortest admin token accepted by ``privpub serve``, and the fewest distinct characters
MIN_TOKEN_LENGTH = 32
MIN_TOKEN_DISTINCT = 10
#: placeholder words of documentation samples (compared lowercased, without punctuation)
SAMPLE_WORDS = ("changeme", "changemetoalongrandomstring", "password", "example", "placeholder", "yourtoken",
                "admintoken", "secrettoken")
_CLOSE = {"Connection": "close"}
#: a request's scope holds this key (True) once its whole body has arrived (set by
#: :class:`HeaderTimeoutProtocol`, the protocol of ``privpub serve``)
BODY_COMPLETE = "privpub.body_complete"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def admin_token_problem(token: str) -> str | None:
    """Why ``token`` is too weak to be the admin token, or None.

    The rule: at least 32 characters, at least 10 distinct characters, and no documentation
    placeholder (``change-me...``, ``password``, ``example``, ...). ``secrets.token_urlsafe(32)``
    (43 characters, 256 bits) always passes.
    """
    if len(token) < MIN_TOKEN_LENGTH:
        return f"it has {len(token)} characters; at least {MIN_TOKEN_LENGTH} are needed"
    if len(set(token)) < MIN_TOKEN_DISTINCT:
        return f"it has only {len(set(token))} distinct characters; at least {MIN_TOKEN_DISTINCT} are needed"
    plain = re.sub(r"[^a-z0-9]", "", token.lower())
    for word in SAMPLE_WORDS:
        if word in plain:
            return f"it contains the placeholder {word!r} of a documentation sample"
    return None


@dataclass(frozen=True)
class TransportConfig:
    """Limits of :class:`Guard` (``privpub serve`` options; environment variables for the workers)."""

    #: seconds from the end of the headers to the end of the body
    body_timeout: float = 60.0
    #: failed authentications a client address may make at once, then ``auth_rate`` per second
    auth_burst: int = 30
    auth_rate: float = 1.0
    #: bytes of large request bodies (> 1 MiB each) a worker reads at once
    body_memory: int = 256 * 2**20

    def __post_init__(self) -> None:
        if not (math.isfinite(self.body_timeout) and self.body_timeout > 0):
            raise ValueError(f"body_timeout must be > 0 seconds, got {self.body_timeout}")
        if self.auth_burst < 1:
            raise ValueError(f"auth_burst must be >= 1, got {self.auth_burst}")
        if not (math.isfinite(self.auth_rate) and self.auth_rate > 0):
            raise ValueError(f"auth_rate must be > 0 per second, got {self.auth_rate}")
        if self.body_memory < LARGE_BODY:
            raise ValueError(f"body_memory must be >= {LARGE_BODY} bytes, got {self.body_memory}")

    @classmethod
    def from_env(cls) -> TransportConfig:
        """The limits ``privpub serve`` passes to its workers (``PRIVPUB_TIMEOUT_BODY``,
        ``PRIVPUB_AUTH_BURST``, ``PRIVPUB_AUTH_RATE``, ``PRIVPUB_BODY_MEMORY`` in MiB); defaults
        for those not set."""
        env, default = os.environ, cls()
        memory = env.get("PRIVPUB_BODY_MEMORY")
        return cls(body_timeout=float(env.get("PRIVPUB_TIMEOUT_BODY", default.body_timeout)),
                   auth_burst=int(env.get("PRIVPUB_AUTH_BURST", default.auth_burst)),
                   auth_rate=float(env.get("PRIVPUB_AUTH_RATE", default.auth_rate)),
                   body_memory=int(float(memory) * 2**20) if memory else default.body_memory)


class AuthLimiter:
    """Failed authentications per client address: a token bucket (thread-safe, bounded memory)."""

    def __init__(self, burst: int, rate: float, max_clients: int = MAX_CLIENTS) -> None:
        self.burst, self.rate, self.max_clients = float(burst), float(rate), max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def _level(self, client: str, now: float) -> float:
        got = self._buckets.get(client)
        if got is None:
            return self.burst
        tokens, at = got
        return min(self.burst, tokens + (now - at) * self.rate)

    def retry_after(self, client: str) -> float | None:
        """Seconds until ``client`` may try again, or None if a token may be checked now."""
        with self._lock:
            level = self._level(client, time.monotonic())
        return None if level >= 1.0 else (1.0 - level) / self.rate

    def failed(self, client: str) -> None:
        """Record one failed authentication of ``client``."""
        with self._lock:
            now = time.monotonic()
            self._buckets[client] = (self._level(client, now) - 1.0, now)
            self._buckets.move_to_end(client)
            while len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)


def _json_error(status: int, message: str, field: str | None = None,
                headers: dict[str, str] | None = None) -> Any:
    from privpub.service._http import _error

    return _error(status, message, field, {**_CLOSE, **(headers or {})})


def _unhandled(method: str, template: str, exc: Exception) -> Any:
    """An unexpected error: one log line (method, route template, error class; no traceback, which
    could hold SQL parameters) and the 500 to answer, without detail."""
    log.error("unhandled error method=%s path=%s status=500 error=%s", method, template, type(exc).__name__)
    return _json_error(500, "internal error")


class BodyTimeout(StarletteHTTPException):
    """The body did not arrive in time (408; raised from ``receive``, answered by the app)."""


def _auth_kind(route: Any) -> str | None:
    from privpub.service._http import require_admin
    from privpub.service._stream_api import require_producer

    stack = list(getattr(getattr(route, "dependant", None), "dependencies", []))
    while stack:
        dep = stack.pop()
        if dep.call is require_admin:
            return "admin"
        if dep.call is require_producer:
            return "producer"
        stack.extend(dep.dependencies)
    return None


def _flat_routes(routes: Any) -> list[Any]:
    """Every route of the application (FastAPI >= 0.16x keeps included routers as one route each)."""
    out: list[Any] = []
    for r in routes:
        contexts = getattr(r, "effective_route_contexts", None)
        if contexts is not None:
            out.extend(ctx.original_route for ctx in contexts())
        else:
            out.append(r)
    return out


class Guard:
    """The outermost middleware: see the module docstring."""

    def __init__(self, app: ASGIApp, fastapi_app: Any, config: TransportConfig) -> None:
        self.app = app
        self.fastapi_app = fastapi_app
        self.config = config
        self.limiter = AuthLimiter(config.auth_burst, config.auth_rate)
        self.body_memory_free = config.body_memory  # touched on the event loop only
        self._table: list[tuple[re.Pattern[str], frozenset[str], str, str | None]] | None = None
        # the hot paths repeat (one campaign's or stream's path): remember the last lookups
        self.route = functools.lru_cache(maxsize=4096)(self._route)

    def _routes(self) -> list[tuple[re.Pattern[str], frozenset[str], str, str | None]]:
        if self._table is None:
            self._table = [(r.path_regex, frozenset(getattr(r, "methods", None) or ()), r.path, _auth_kind(r))
                           for r in _flat_routes(self.fastapi_app.router.routes) if hasattr(r, "path_regex")]
        return self._table

    def _route(self, method: str, path: str) -> tuple[str, str | None, dict[str, str]]:
        """The route template (bounded label), its authentication and its path parameters."""
        seen = None
        for regex, methods, template, auth in self._routes():
            m = regex.match(path)
            if m is not None:
                if method in methods or (method == "HEAD" and "GET" in methods):
                    return template, auth, m.groupdict()
                seen = seen or template
        return seen or "unmatched", None, {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        method = scope["method"]
        template, auth, params = self.route(method, scope["path"])
        status = 500
        started = False

        async def watched(msg: Message) -> None:
            nonlocal status, started
            if msg["type"] == "http.response.start":
                status, started = int(msg["status"]), True
            await send(msg)

        reserved = 0
        try:
            headers = dict(scope["headers"])
            early = await self._screen(scope, headers, method, auth, params)
            if early is None:
                reserved = self._large_body(scope, headers)
                if reserved > self.body_memory_free:
                    reserved = 0
                    early = _json_error(503, "the server is reading too many large requests: send again later",
                                        headers={"Retry-After": "1"})
                self.body_memory_free -= reserved
            if early is not None:
                await early(scope, receive, watched)
            else:
                # the body deadline: only where a body may be read (GET and HEAD bodies never are)
                if method in _BODY_METHODS:
                    deadline = self._deadline(receive)
                    try:
                        await self.app(scope, deadline, watched)
                    finally:
                        deadline.close()
                else:
                    await self.app(scope, receive, watched)
        except Exception as exc:
            answer = _unhandled(method, template, exc)
            if not started:
                await answer(scope, receive, watched)
        finally:
            self.body_memory_free += reserved
            _metrics.observe_request(method, template, status, time.perf_counter() - start)
            if 200 <= status < 300 and "stream_id" in params:
                if template.endswith(("/counts", "/events")):
                    _metrics.count_stream(params["stream_id"], "ingest")
                elif template.endswith(("/range", "/ranges")):
                    _metrics.count_stream(params["stream_id"], "query")

    async def direct(self, scope: Scope, receive: Receive, send: Send, limit: int,
                     serve: Callable[[Receive], Awaitable[Any]]) -> bool:
        """Serve a plain JSON request to a public endpoint with what this guard and the body limit
        would do to it, without their middleware layers (the single-report hot path).

        Plain: ``POST`` with ``Content-Type: application/json``, a ``Content-Length`` of at most
        ``limit`` bytes (and below :data:`LARGE_BODY`: no memory reservation), no
        ``Transfer-Encoding``, no ``Origin`` (no CORS), to a route without authentication. Each
        check the middleware would make then passes: only the body deadline, the unexpected-error
        answer and the latency metric are left, and they are kept here. ``serve(receive)`` returns
        the response (or None: the client went away). Returns False, having done nothing, when
        the request is not plain: the caller sends it through the middleware. A request whose
        whole body has arrived (:data:`BODY_COMPLETE`) needs no body deadline: no timer is armed.
        """
        if scope["method"] != "POST":
            return False
        ctype = length = None
        for k, v in scope["headers"]:
            if k == b"content-type":
                ctype = v
            elif k == b"content-length":
                if length is not None:
                    return False
                length = v
            elif k == b"origin" or k == b"transfer-encoding":
                return False
        if (length is None or not length.isdigit() or len(length) > 6 or int(length) > limit
                or ctype is None or ctype.split(b";", 1)[0].strip().lower() != b"application/json"):
            return False
        method = scope["method"]
        template, auth, _ = self.route(method, scope["path"])
        if auth is not None:
            return False
        start = time.perf_counter()
        status = 500
        # the body deadline, unless the whole body is here already (HeaderTimeoutProtocol says so)
        deadline = None if scope.get(BODY_COMPLETE) else self._deadline(receive)
        body = receive if deadline is None else deadline
        try:
            try:
                response = await serve(body)
            except Exception as exc:
                response = _unhandled(method, template, exc)
            if response is not None:
                status = response.status_code
                await response(scope, body, send)
        except Exception as exc:  # sending failed (the answer may have started): logged, nothing more sent
            _unhandled(method, template, exc)
        finally:
            if deadline is not None:
                deadline.close()
            _metrics.observe_request(method, template, status, time.perf_counter() - start)
        return True

    # -- screening (headers only: no body is read) ---------------------------------------------
    async def _screen(self, scope: Scope, headers: dict[bytes, bytes], method: str, auth: str | None,
                      params: dict[str, str]) -> Any:
        if method in _BODY_METHODS and _has_body(headers):
            ctype = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
            if ctype != b"application/json":
                return _json_error(415, "the request body must be JSON (Content-Type: application/json)",
                                   "Content-Type")
        if auth is None:
            return None
        raw = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, token = raw.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            _metrics.count_auth_failure(auth, "missing")
            what = ("this endpoint needs the admin token" if auth == "admin"
                    else "posting to a stream needs its producer token (or the admin token)")
            return _json_error(401, f"{what}: Authorization: Bearer <token>", headers={"WWW-Authenticate": "Bearer"})
        client = (scope.get("client") or ("unknown",))[0]
        wait = self.limiter.retry_after(client)
        if wait is not None:
            _metrics.count_auth_failure(auth, "limited")
            retry = max(1, math.ceil(wait))
            return _json_error(429, f"too many failed authentications from this address: retry in {retry} s",
                               headers={"Retry-After": str(retry)})
        try:
            if auth == "admin":
                self._check_admin(token)
            else:
                from privpub.service._stream_api import check_producer

                await anyio.to_thread.run_sync(check_producer, self.fastapi_app, params.get("stream_id", ""), token)
        except Exception as exc:
            from privpub.service._http import ApiError
            from privpub.service._store import NotFound

            if isinstance(exc, ApiError):
                if exc.status in (401, 403):
                    self.limiter.failed(client)
                    _metrics.count_auth_failure(auth, "invalid")
                return _json_error(exc.status, exc.message, exc.field, exc.headers)
            if isinstance(exc, NotFound):
                return _json_error(404, str(exc), "stream_id")
            raise
        from privpub.service._http import AUTHENTICATED

        scope[AUTHENTICATED] = auth  # the route's dependency need not check the same token again
        return None

    @staticmethod
    def _large_body(scope: Scope, headers: dict[bytes, bytes]) -> int:
        """Bytes to reserve for the request's body: its length if above :data:`LARGE_BODY` (at most
        :data:`MAX_RESERVE`); a chunked body counts :data:`MAX_RESERVE`; else 0."""
        length = headers.get(b"content-length")
        if length is not None and len(length) <= 6:  # below 1 MiB
            return 0

        if length is not None:
            n = int(length) if length.isdigit() else 0
            return min(n, MAX_RESERVE) if n > LARGE_BODY else 0
        return MAX_RESERVE if b"transfer-encoding" in headers else 0

    def _check_admin(self, token: str) -> None:
        from privpub.service._http import ApiError

        expected: str | None = self.fastapi_app.state.admin_token
        if not expected:
            raise ApiError(403, "no admin token is configured on this server (set PRIVPUB_ADMIN_TOKEN)")
        given = hashlib.sha256(token.encode("utf-8")).digest()
        if not hmac.compare_digest(given, hashlib.sha256(expected.encode("utf-8")).digest()):
            raise ApiError(403, "the admin token is not valid")

    def _deadline(self, receive: Receive) -> _BodyDeadline:
        return _BodyDeadline(receive, self.config.body_timeout)


class _BodyDeadline:
    """``receive`` with a deadline for the whole body, ``timeout`` seconds from now (408 after it).

    One timer per request, not a timeout context per ``receive`` call: it cancels the request's
    task only while the task waits in ``receive`` for the body (anything else the task awaits is
    never cut short; a later ``receive`` past the deadline fails at once). Once the body is
    complete the timer is cancelled and later calls (waiting for a disconnect) are untimed.
    :meth:`close` cancels it when the request ends.
    """

    __slots__ = ("_handle", "_receive", "_task", "done", "late", "timeout", "waiting")

    def __init__(self, receive: Receive, timeout: float) -> None:
        self._receive = receive
        self.timeout = timeout
        self.done = self.late = self.waiting = False
        self._task: asyncio.Task[Any] | None = None  # the task waiting in receive, if any
        self._handle: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(timeout, self._expire)

    def _expire(self) -> None:
        self._handle = None
        if self.done:
            return
        self.late = True
        if self.waiting and self._task is not None:
            self._task.cancel()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _timed_out(self) -> BodyTimeout:
        return BodyTimeout(408, f"the request body did not arrive within {self.timeout:g} s", headers=dict(_CLOSE))

    async def __call__(self) -> Message:
        if self.done:  # the body is complete: later calls wait for a disconnect, untimed
            return await self._receive()
        if self.late:
            raise self._timed_out()
        self.waiting, self._task = True, asyncio.current_task()
        try:
            msg = await self._receive()
        except asyncio.CancelledError:
            if self.late and self._task is not None and self._task.uncancel() == 0:
                raise self._timed_out() from None
            raise
        finally:
            self.waiting, self._task = False, None
        if msg["type"] != "http.request" or not msg.get("more_body", False):
            self.done = True
            self.close()
        return msg


def _has_body(headers: dict[bytes, bytes]) -> bool:
    length = headers.get(b"content-length")
    if length is not None:
        return length.strip() not in (b"0", b"")
    return b"transfer-encoding" in headers


class _Corked:
    """A connection's transport as uvicorn's protocol and request cycles see it: a response's
    header block is held until its body is written, and both leave in one write (one system call
    and one TCP segment instead of two for a small response).

    Held: a write that is a whole final response head (``HTTP/1.1 `` and a status of 200 or more,
    ending with the blank line; never a ``100 Continue``). It goes out with the next write, at
    :meth:`close`, or at the latest in the event loop's next round (a response whose body comes
    later, or a ``HEAD`` response without one). Everything else is the transport's own.
    """

    __slots__ = ("_held", "_loop", "_t")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._t = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._t.write(held + bytes(data))
        elif data[:9] == b"HTTP/1.1 " and data[9:10] != b"1" and data[-4:] == b"\r\n\r\n":
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
        else:
            self._t.write(data)

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._t.is_closing():
                self._t.write(held)

    def close(self) -> None:
        self.flush()
        self._t.close()

    def is_closing(self) -> bool:
        return self._t.is_closing()

    def __getattr__(self, name: str) -> Any:  # the rest of the transport's interface, unchanged
        return getattr(self._t, name)


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline and a size cap for the request line and headers.

    The deadline (``PRIVPUB_TIMEOUT_HEADERS`` seconds, default 10) starts when the connection is
    made and when a new request begins on a kept-alive connection; a request whose headers are not
    complete by then gets 408 and the connection is closed. Headers larger than
    :data:`MAX_HEADER_BYTES` get 431. Its timer is armed only when a request's headers did not all
    come in the bytes that began it (usually they do: no timer per request).

    Also: a response's head and body leave in one write (:class:`_Corked`), and a request whose
    whole body has arrived is marked in its scope (:data:`BODY_COMPLETE`: the guard then needs no
    body deadline for it).
    """

    # uvicorn's HttpToolsProtocol takes an asyncio.Transport where asyncio's protocol takes a BaseTransport
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # read per connection: ``privpub serve`` sets it after this module may have been imported
        self.header_timeout = float(os.environ.get("PRIVPUB_TIMEOUT_HEADERS", "10"))
        self._header_timer: asyncio.TimerHandle | None = None
        self._in_headers = True
        self._header_bytes = 0
        super().connection_made(_Corked(transport, self.loop))  # type: ignore[arg-type]
        self._arm()

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _refuse(self, status_line: bytes) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(status_line + b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            self.transport.close()

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._in_headers:
            self._refuse(b"HTTP/1.1 408 Request Timeout")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers, self._header_bytes = True, 0  # the timer: armed by data_received if needed

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        cast("dict[str, Any]", self.scope)[BODY_COMPLETE] = True  # the scope uvicorn gave this request's application

    def data_received(self, data: bytes) -> None:
        waiting = self._in_headers
        super().data_received(data)
        if self._in_headers:  # a request began (or continues) and its headers are not complete
            self._arm()
            self._header_bytes += len(data) if waiting else 0
            if self._header_bytes > MAX_HEADER_BYTES:
                self._refuse(b"HTTP/1.1 431 Request Header Fields Too Large")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
