"""Web participants: the JS client bundle (``GET /client.js``) and CORS for a campaign's declared origins.

A campaign may declare ``"allowed_origins": ["https://survey.example.org", ...]`` (spec field):
pages from exactly those origins may read its public configuration, ask for assignments and
submit reports from a browser. :class:`CampaignCORS` answers the preflight (``OPTIONS``) of those
endpoints and adds ``Access-Control-Allow-Origin`` for an allowed origin only; a request carrying
any other ``Origin`` (other than the service's own) is refused with 403 before it reaches the
handlers, so a page from a foreign origin cannot submit even with a "simple" request that skips
the preflight. Only JSON bodies are allowed (the preflight admits the ``Content-Type`` header
alone, and a cross-origin POST must be ``application/json``); no credentials are involved.
Requests without an ``Origin`` header (devices, gateways, the Python SDK) are unaffected.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from privpub.service._http import error_body

__all__ = ["CampaignCORS", "client_js_router"]

#: the campaign endpoints a web page may use, with their methods
_PATHS = (
    (re.compile(r"^/campaigns/([0-9a-f]{16})$"), ("GET",)),
    (re.compile(r"^/campaigns/([0-9a-f]{16})/assignments$"), ("POST",)),
    (re.compile(r"^/campaigns/([0-9a-f]{16})/reports$"), ("POST",)),
)
#: seconds a browser may cache a preflight answer
MAX_AGE = 600


def _match(path: str) -> tuple[str, tuple[str, ...]] | None:
    for pattern, methods in _PATHS:
        m = pattern.match(path)
        if m is not None:
            return m.group(1), methods
    return None


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope["headers"]:
        if k == name:
            return str(v.decode("latin-1"))
    return None


def _same_origin(scope: Scope, origin: str) -> bool:
    host = _header(scope, b"host")
    if host is None:
        return False
    parts = urlsplit(origin)
    return parts.netloc == host.lower()


class CampaignCORS:
    """CORS for the campaign endpoints, per campaign (see the module docstring)."""

    def __init__(self, app: ASGIApp, fastapi_app: Any) -> None:
        self.app = app
        self.fastapi_app = fastapi_app

    def _allowed(self, cid: str) -> list[str] | None:
        """The campaign's origins, or None when there is no such campaign."""
        try:
            info = self.fastapi_app.state.store.campaign(cid)
        except Exception:  # unknown campaign (or the database is away): no origin is allowed
            return None
        return list(info.spec.get("allowed_origins") or [])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        hit = _match(scope["path"]) if origin is not None else None
        if origin is None or hit is None or _same_origin(scope, origin):
            await self.app(scope, receive, send)
            return
        cid, methods = hit
        allowed = self._allowed(cid)
        origin_l = origin.lower()
        ok = allowed is not None and origin_l in allowed
        vary = {"Vary": "Origin"}
        if scope["method"] == "OPTIONS":
            want_method = (_header(scope, b"access-control-request-method") or "").upper()
            want_headers = {h.strip().lower() for h in (_header(scope, b"access-control-request-headers") or "")
                            .split(",") if h.strip()}
            if not ok or want_method not in methods or not want_headers <= {"content-type"}:
                await JSONResponse(error_body(403, "this origin, method or header is not allowed by the "
                                              "campaign's allowed_origins", "origin"),
                                   status_code=403, headers=vary)(scope, receive, send)
                return
            await Response(status_code=204, headers={
                **vary, "Access-Control-Allow-Origin": origin, "Access-Control-Allow-Methods": ", ".join(methods),
                "Access-Control-Allow-Headers": "content-type", "Access-Control-Max-Age": str(MAX_AGE),
            })(scope, receive, send)
            return
        if not ok:
            await JSONResponse(error_body(403, f"the origin {origin!r} may not use this campaign (it is not "
                                          "in the campaign's allowed_origins)", "origin"),
                               status_code=403, headers=vary)(scope, receive, send)
            return
        ctype = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
        if scope["method"] == "POST" and ctype != "application/json":
            await JSONResponse(error_body(415, "a cross-origin request body must be application/json",
                                          "content-type"),
                               status_code=415, headers={**vary, "Access-Control-Allow-Origin": origin}
                               )(scope, receive, send)
            return

        async def send_with_cors(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                headers = [(k, v) for k, v in msg.get("headers", []) if k.lower() != b"access-control-allow-origin"]
                headers += [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
                msg = dict(msg, headers=headers)
            await send(msg)

        await self.app(scope, receive, send_with_cors)


def _bundle() -> bytes:
    return resources.files("privpub.service").joinpath("static/client.js").read_bytes()


def client_js_router() -> APIRouter:
    """``GET /client.js``: the JS participant client (built from clients/js, shipped in the package)."""
    router = APIRouter(tags=["participants"])
    body = _bundle()
    import hashlib

    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'

    @router.get("/client.js", response_class=Response,
                responses={200: {"content": {"text/javascript": {}},
                                 "description": "the minified client; `window.privpub` after loading"}})
    def client_js(request: Request) -> Response:
        """The JS participant client: ``<script src="/client.js"></script>`` then ``privpub.Participant``."""
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers={"ETag": etag})
        return Response(body, media_type="text/javascript; charset=utf-8",
                        headers={"ETag": etag, "Cache-Control": "public, max-age=3600",
                                 "X-Content-Type-Options": "nosniff"})

    return router
