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

from privpub.service._specs import spec_field

__all__ = ["MAX_BATCH_BODY", "MAX_BODY", "ApiError", "BodyLimit", "read_body", "require_admin"]

MAX_BATCH_BODY = 32 * 1024 * 1024
MAX_BODY = 256 * 1024
MAX_BATCH_REPORTS = 50_000
#: how long a report request waits for its transaction
STORE_TIMEOUT = 120.0

CampaignId = Path(pattern=r"^[0-9a-f]{16}$", description="the campaign's id")
ReleaseId = Path(pattern=r"^[0-9a-f]{16}$", description="the release's id")


class ApiError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field, self.headers = status, message, field, headers


def _error(status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"message": message}
    if field is not None:
        body["field"] = field
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _is_batch_path(path: str) -> bool:
    return path.endswith("/reports/batch") or (path.startswith("/streams/") and (
        path.endswith("/events") or path.endswith("/counts") or path.endswith("/ranges")))


class BodyLimit:
    """Refuse request bodies above the limit with 413, before they are read into memory."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
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
    """Admin endpoints: ``Authorization: Bearer <PRIVPUB_ADMIN_TOKEN>``, compared in constant time."""
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
    """422 naming the first problem (``message``, ``field``) and listing every one (``errors``)."""
    items = []
    for err in errors or [{"loc": ("body",), "msg": "invalid request"}]:
        # the field as the CLI names it too (spec_field); pydantic's messages never include the
        # input; the input itself is deliberately not returned
        items.append({"field": spec_field(err) or "body", "message": str(err.get("msg", "invalid value"))})
    body = {"message": items[0]["message"], "field": items[0]["field"], "errors": items[:50]}
    return JSONResponse({"error": body}, status_code=422)
