"""The reference of ``benchmarks/service_wrk.py``: a minimal uvicorn JSON application.

It answers ``POST /campaigns/{id}/reports`` as the service would, without the service: read the
body, parse the JSON, take ``report_id``, answer 201 with a JSON receipt. Nothing is validated,
authenticated or stored. ``service_wrk.py`` serves it with the options of ``privpub serve``
(uvicorn, httptools, the same number of workers, no access log) and drives it with the same
``wrk`` script, so the ratio of server CPU per request measures what the service adds to an HTTP
server's floor.
"""

from __future__ import annotations

import json
import time
from typing import Any

_HEADERS = [(b"content-type", b"application/json")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI application (``uvicorn wrk_reference_app:app``)."""
    if scope["type"] != "http":  # lifespan: nothing to start
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    chunks = []
    more = True
    while more:
        msg = await receive()
        chunks.append(msg.get("body", b""))
        more = msg.get("more_body", False)
    try:
        report = json.loads(b"".join(chunks))
        status, answer = 201, {"report_id": str(report["report_id"]), "received": int(time.time())}
    except (ValueError, KeyError, TypeError):
        status, answer = 422, {"error": "bad report"}
    body = json.dumps(answer, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [*_HEADERS, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
