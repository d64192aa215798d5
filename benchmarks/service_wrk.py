"""Single-report throughput of the collection service with a compiled load generator (``wrk``).

``benchmarks/service_load.py`` drives the service from 64 Python clients that need about as much
CPU per report as the server; on a 2-core machine they take one of the two cores. This script
measures the same endpoint with ``wrk`` (Debian package ``wrk``; C, one thread per core, Lua for
the bodies): 64 keep-alive connections post ``POST /campaigns/{id}/reports`` with unique report ids
and random OUE-shaped payloads for ``--seconds``, loopback only, then stops.

Every response is counted by status in the Lua script; at the end the stored count (the campaign's
running aggregate) must lie between the number of 201 receipts and that plus the connections
(requests still in flight when wrk stops are stored but never answered to it). Prints one JSON line.

    python benchmarks/service_wrk.py --backend postgresql --postgres-url postgresql+psycopg://u@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "service"))

from service_helpers import ADMIN_TOKEN, Server, create, fresh_database  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from service_load import server_cpu_seconds  # noqa: E402

D = 16  # categories: 2-byte OUE payloads

LUA = r"""
-- globals: wrk's thread:set/get and setup() see globals of each thread's interpreter only
counter = 0
tid = 0
ok, other = 0, 0
local threads = {}
local b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

function setup(thread)
   thread:set("tid", #threads + 1)
   table.insert(threads, thread)
end

function init(args)
   math.randomseed(tid * 7919)
end

local function payload()
   -- two random bytes, base64 ("xxx=")
   local a, b = math.random(0, 255), math.random(0, 255)
   local n = a * 256 + b
   local c1 = math.floor(n / 1024) % 64
   local c2 = math.floor(n / 16) % 64
   local c3 = (n % 16) * 4
   return b64:sub(c1 + 1, c1 + 1) .. b64:sub(c2 + 1, c2 + 1) .. b64:sub(c3 + 1, c3 + 1) .. "="
end

function request()
   counter = counter + 1
   local id = string.format("%08x%024x", tid, counter)
   local body = '{"report_id":"' .. id .. '","report":"' .. payload() .. '"}'
   return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end

function response(status, headers, body)
   if status == 201 then ok = ok + 1 else other = other + 1 end
end

function done(summary, latency, requests)
   local t_ok, t_other = 0, 0
   for _, thread in ipairs(threads) do
      t_ok = t_ok + thread:get("ok")
      t_other = t_other + thread:get("other")
   end
   io.write(string.format("RESULT ok=%d other=%d p50_us=%d p99_us=%d\n", t_ok, t_other,
                          latency:percentile(50), latency:percentile(99)))
end
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--postgres-url", default=os.environ.get("PRIVPUB_TEST_POSTGRES_URL"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=60)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian: apt-get install wrk)")
    if not 1 <= args.seconds <= 600:
        sys.exit("--seconds must be in 1..600")
    if args.postgres_url:
        os.environ["PRIVPUB_TEST_POSTGRES_URL"] = args.postgres_url
    with tempfile.TemporaryDirectory(prefix="privpub-wrk-") as tmp:
        gen = fresh_database(args.backend, Path(tmp))
        db = next(gen)
        server = Server(db, Path(tmp) / "server.log", workers=args.workers).start()
        try:
            with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as admin:
                cid = create(admin, name="wrk", kind="frequency", oracle="OUE", epsilon=1.0,
                             categories=[str(i) for i in range(D)], min_reports=1)["id"]
            script = Path(tmp) / "reports.lua"
            script.write_text(LUA)
            assert server.proc is not None
            cpu0, load0 = server_cpu_seconds(server.proc.pid), os.getloadavg()[0]
            proc = subprocess.run(["wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{args.seconds}s",
                                  "--latency", "-s", str(script), f"{server.url}/campaigns/{cid}/reports"],
                                 capture_output=True, text=True, check=False, timeout=args.seconds + 120)
            if proc.returncode != 0:
                sys.exit(f"wrk failed ({proc.returncode}): {proc.stderr.strip()}")
            out = proc.stdout
            cpu1, load1 = server_cpu_seconds(server.proc.pid), os.getloadavg()[0]
            m = re.search(r"RESULT ok=(\d+) other=(\d+) p50_us=(\d+) p99_us=(\d+)", out)
            assert m is not None, out
            ok, other, p50, p99 = (int(g) for g in m.groups())
            with httpx.Client(base_url=server.url) as client:
                stored = int(client.get(f"/campaigns/{cid}/status").json()["n_reports"])
            if not 0 <= stored - ok <= args.connections:
                sys.exit(f"stored {stored} reports for {ok} receipts over {args.connections} connections")
            print(json.dumps({"backend": args.backend, "workers": args.workers, "connections": args.connections,
                              "seconds": args.seconds, "receipts": ok, "other_status": other, "stored": stored,
                              "unanswered_at_stop": stored - ok, "reports_per_s": round(ok / args.seconds),
                              "p50_ms": p50 / 1000, "p99_ms": p99 / 1000,
                              "server_cpu_ms_per_1000": round(1e6 * (cpu1 - cpu0) / max(ok, 1), 1),
                              "load_average": [round(load0, 1), round(load1, 1)]}), flush=True)
        finally:
            server.stop()
            for _ in gen:
                pass


if __name__ == "__main__":
    main()
