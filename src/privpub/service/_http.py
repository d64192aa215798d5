"""The HTTP plumbing every endpoint shares: error responses, body limits, the admin check.

Kept apart from the routes (:mod:`privpub.service._app`), the stream API and the transport guard,
which all import it, so that none of them imports another (``tests/test_architecture.py``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Any

from fastapi import Depends, Path, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from privpub.service._specs import spec_loc

__all__ = ["MAX_BATCH_BODY", "MAX_BODY", "ApiError", "BodyLimit", "error_body", "error_message", "read_body",
           "require_admin"]

MAX_BATCH_BODY = 32 * 1024 * 1024
MAX_BODY = 256 * 1024
MAX_BATCH_REPORTS = 50_000
#: how long a report request waits for its transaction
STORE_TIMEOUT = 120.0

#: the scope key where the transport guard records the authentication it checked ("admin" or
#: "producer"): the routes' own checks (``require_admin``, ``require_producer``) then do not
#: check the same token again, so a route and its fast path authenticate by the same code
AUTHENTICATED = "privpub.authenticated"

CampaignId = Path(pattern=r"^[0-9a-f]{16}$", description="the campaign's id")
ReleaseId = Path(pattern=r"^[0-9a-f]{16}$", description="the release's id")


class ApiError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field, self.headers = status, message, field, headers


#: the ``type`` of an error the service raises itself (pydantic's errors keep their own), by status
ERROR_TYPES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 408: "timeout",
               409: "conflict", 410: "gone", 413: "too_large", 415: "unsupported_media_type", 422: "value_error",
               429: "rate_limited", 500: "internal_error", 503: "unavailable"}
#: where a named field lives when it is not in the JSON body (FastAPI's first ``loc`` element)
FIELD_PLACES = {"campaign_id": "path", "release_id": "path", "stream_id": "path", "Content-Type": "header",
                "content-type": "header",
                "origin": "header"}
#: the first element of a FastAPI ``loc``: where the field is
_PLACES = ("body", "query", "path", "header", "cookie")
#: at most this many problems are listed in one response (a batch can hold thousands)
MAX_ERRORS = 100


def error_body(status: int, message: str, field: str | None = None) -> dict[str, Any]:
    """The JSON of an error response: FastAPI's ``detail`` list and privpub's ``error`` object.

    ``detail`` is FastAPI's own 422 shape (``[{"loc": ["body", field], "msg": ..., "type": ...}]``),
    for every status (``loc`` is empty for an error about no field: a missing stream, a bad token);
    ``error`` (``message``, ``field``) is what privpub's clients read.

    Examples
    --------
    >>> error_body(422, "must be > 0", "epsilon")
    {'detail': [{'loc': ['body', 'epsilon'], 'msg': 'must be > 0', 'type': 'value_error'}], \
'error': {'message': 'must be > 0', 'field': 'epsilon'}}
    """
    loc = [] if field is None else [FIELD_PLACES.get(field, "body"), field]
    detail = {"loc": loc, "msg": message,
              "type": ERROR_TYPES.get(status, "error")}
    body: dict[str, Any] = {"message": message}
    if field is not None:
        body["field"] = field
    return {"detail": [detail], "error": body}


def _error(status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, field), status_code=status, headers=headers)


def error_message(exc: Exception, fix: bool = True) -> str:
    """A privpub error's message in the service's terms: its :attr:`~privpub.errors.PrivpubError.fix`
    as JSON fields (``; send "clip": true``) instead of Python arguments; ``fix=False`` leaves it
    out (when the fix belongs to another request, e.g. the stream's declaration)."""
    import json

    reason: str = getattr(exc, "reason", None) or str(exc)
    remedy: dict[str, object] = getattr(exc, "fix", None) or {}
    if not remedy:
        return str(exc)
    if not fix:
        return reason
    return f"{reason}; send {', '.join(f'{json.dumps(k)}: {json.dumps(v)}' for k, v in remedy.items())}"


def _is_batch_path(path: str) -> bool:
    return path.endswith("/reports/batch") or (path.startswith("/streams/") and (
        path.endswith("/events") or path.endswith("/counts") or path.endswith("/ranges")))


class BodyLimit:
    """Refuse request bodies above the limit with 413, before they are read into memory."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD"):  # bodies are never read
            await self.app(scope, receive, send)
            return
        limit = MAX_BATCH_BODY if _is_batch_path(scope["path"]) else MAX_BODY
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _error(413, f"the request body exceeds the limit of {limit} bytes",
                         headers={"Connection": "close"})(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    raise ApiError(413, f"the request body exceeds the limit of {limit} bytes",
                                   headers={"Connection": "close"})
            return msg

        await self.app(scope, limited, send)


_bearer = HTTPBearer(auto_error=False, description="the admin token (PRIVPUB_ADMIN_TOKEN)")
_BEARER = Depends(_bearer)


def require_admin(request: Request, cred: HTTPAuthorizationCredentials | None = _BEARER) -> None:
    """Admin endpoints: ``Authorization: Bearer <PRIVPUB_ADMIN_TOKEN>``, compared in constant time
    (by the transport guard, before the body is read; here only if it did not)."""
    if request.scope.get(AUTHENTICATED) == "admin":
        return
    expected: str | None = request.app.state.admin_token
    if not expected:
        raise ApiError(403, "no admin token is configured on this server (set PRIVPUB_ADMIN_TOKEN)")
    if cred is None or cred.scheme.lower() != "bearer":
        raise ApiError(401, "this endpoint needs the admin token: Authorization: Bearer <token>",
                       headers={"WWW-Authenticate": "Bearer"})
    given = hashlib.sha256(cred.credentials.encode("utf-8")).digest()
    if not hmac.compare_digest(given, hashlib.sha256(expected.encode("utf-8")).digest()):
        raise ApiError(403, "the admin token is not valid")


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """A request's body (None if the client went away); ``ApiError(413)`` past ``limit`` bytes,
    before the rest is read."""
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        try:
            msg = await receive()
        except StarletteHTTPException as exc:  # the body deadline (408) of the transport guard
            raise ApiError(exc.status_code, str(exc.detail), headers=dict(exc.headers or {})) from None
        if msg["type"] != "http.request":
            return None
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"the request body exceeds the limit of {limit} bytes",
                           headers={"Connection": "close"})
        chunks.append(chunk)
        more = msg.get("more_body", False)
    return b"".join(chunks)


def _validation_error(errors: Sequence[Any]) -> JSONResponse:
    """422 listing every problem of the request at once (up to :data:`MAX_ERRORS`), in FastAPI's shape
    (``detail``: ``loc``, ``msg``, ``type``) and privpub's (``error``: the first's ``message`` and
    ``field``, and ``errors``). The input itself is deliberately not returned."""
    detail: list[dict[str, Any]] = []
    items = []
    problems = list(errors) or [{"loc": ("body",), "msg": "invalid request", "type": "value_error"}]
    for err in problems[:MAX_ERRORS]:
        first = next(iter(err.get("loc", ())), None)
        place = first if first in _PLACES else "body"  # none: a model validated by a fast path (the body)
        path = spec_loc(err)  # as the CLI names it (no union tag of a campaign kind or stream publisher)
        loc = [place, *path]
        msg = str(err.get("msg", "invalid value"))
        detail.append({"loc": loc, "msg": msg, "type": str(err.get("type", "value_error"))})
        field = ".".join(str(p) for p in path)
        items.append({"field": field or "body", "message": msg})
    if len(problems) > MAX_ERRORS:
        more = f"and {len(problems) - MAX_ERRORS} more problems (the first {MAX_ERRORS} are listed)"
        detail.append({"loc": ["body"], "msg": more, "type": "too_many_errors"})
        items.append({"field": "body", "message": more})
    body = {"message": items[0]["message"], "field": items[0]["field"], "errors": items}
    return JSONResponse({"detail": detail, "error": body}, status_code=422)
