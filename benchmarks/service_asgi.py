"""Server CPU per request through the service's whole ASGI stack, without a network or a load generator.

The application of ``privpub serve`` (CORS, the transport guard, the body limit, the fast path,
FastAPI) is called in this process with ready-made ASGI messages: ``GET /streams/{id}/range``
(answered from memory), ``POST /streams/{id}/ranges`` (``--batch`` ranges per request, answered
from memory; CPU per request and per range), ``POST /streams/{id}/counts`` (3 counts, one transaction) and
``POST /campaigns/{id}/reports`` (one report, one transaction; requests in turn, so no group
commit) over a fresh SQLite file. Reports this process's CPU time per request (every thread, so
the store's writer too): a measure of the transport's own cost that survives a loaded machine
better than throughput. ``--framework`` serves every request through FastAPI's routing instead of
the fast path (``PRIVPUB_FAST_PATHS=0``). Prints one JSON line.

    python benchmarks/service_asgi.py --n 3000 [--framework]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from typing import Any

TOKEN = "a" * 16 + "b" * 16 + "cdefghijkl"


async def call(app: Any, method: str, path: str, qs: bytes = b"", headers: Any = (),
               body: bytes = b"") -> tuple[int, bytes]:
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": qs,
             "headers": list(headers), "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "scheme": "http",
             "http_version": "1.1", "root_path": "", "asgi": {"version": "3.0"}}
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    out: dict[str, Any] = {"body": b""}

    async def send(msg: dict[str, Any]) -> None:
        if msg["type"] == "http.response.start":
            out["status"] = msg["status"]
        elif msg["type"] == "http.response.body":
            out["body"] += msg.get("body", b"")

    await app(scope, receive, send)
    return out["status"], out["body"]


async def run(n: int, fast: bool, batch: int = 100) -> dict[str, float]:
    from privpub.service._app import create_app

    with tempfile.TemporaryDirectory(prefix="privpub-asgi-") as tmp:
        app = create_app(f"sqlite:///{tmp}/bench.db", admin_token=TOKEN, fast_paths=fast)
        admin = [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")]
        json_only = [(b"content-type", b"application/json")]
        async with app.router.lifespan_context(app):
            spec = {"name": "asgi", "kind": "frequency", "oracle": "OUE", "epsilon": 1.0,
                    "categories": [str(i) for i in range(16)], "min_reports": 1}
            cid = json.loads((await call(app, "POST", "/campaigns", headers=admin, body=json.dumps(spec).encode()))[1])["id"]
            stream = {"name": "asgi", "publisher": "hq_rtp", "epsilon": 1.0, "window": 4096}
            made = json.loads((await call(app, "POST", "/streams", headers=admin, body=json.dumps(stream).encode()))[1])
            sid = made["id"]
            producer = [(b"authorization", f"Bearer {made['producer_token']}".encode()), *json_only]
            status, body = await call(app, "POST", f"/streams/{sid}/counts", headers=producer,
                                      body=json.dumps({"counts": [1] * 1000, "batch_id": "warm"}).encode())
            assert status == 200, body
            t0 = time.process_time()
            for i in range(n):
                status, body = await call(app, "GET", f"/streams/{sid}/range",
                                          qs=f"start={1 + i % 500}&end={600 + i % 400}".encode())
                assert status == 200, body
            t1 = time.process_time()
            ranges_body = [json.dumps({"ranges": [[1 + (i * 7 + j) % 500, 600 + (i * 13 + j) % 400]
                                                  for j in range(batch)], "log": True}).encode()
                           for i in range(max(1, n // batch))]
            tb0 = time.process_time()
            for body in ranges_body:
                status, out = await call(app, "POST", f"/streams/{sid}/ranges", headers=json_only, body=body)
                assert status == 200, out
            tb1 = time.process_time()
            for i in range(n // 10):
                status, body = await call(app, "POST", f"/streams/{sid}/counts", headers=producer,
                                          body=b'{"batch_id":"c%d","counts":[1,2,3]}' % i)
                assert status == 200, body
            t2 = time.process_time()
            for i in range(n // 6):
                status, body = await call(app, "POST", f"/campaigns/{cid}/reports", headers=json_only,
                                          body=b'{"report_id":"%032x","report":"AQA="}' % i)
                assert status == 201, body
            t3 = time.process_time()
    return {"range_us": round(1e6 * (t1 - t0) / n, 1),
            "ranges_batch": batch, "ranges_us_per_request": round(1e6 * (tb1 - tb0) / len(ranges_body), 1),
            "ranges_us_per_range": round(1e6 * (tb1 - tb0) / (len(ranges_body) * batch), 2), "counts_us": round(1e6 * (t2 - t1) / (n // 10), 1),
            "report_us": round(1e6 * (t3 - t2) / (n // 6), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=3000, help="range queries (counts: n/10, reports: n/6)")
    parser.add_argument("--framework", action="store_true", help="no fast path: FastAPI's routing for everything")
    parser.add_argument("--batch", type=int, default=100, help="ranges per POST /streams/{id}/ranges (1..10000)")
    args = parser.parse_args()
    if not 60 <= args.n <= 10**6:
        raise SystemExit("--n must be in 60..1000000")
    if not 1 <= args.batch <= 10_000:
        raise SystemExit("--batch must be in 1..10000")
    out = asyncio.run(run(args.n, not args.framework, args.batch))
    print(json.dumps({"fast_path": not args.framework, "n": args.n, **out}), flush=True)


if __name__ == "__main__":
    main()
