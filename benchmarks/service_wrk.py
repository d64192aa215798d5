"""Single-report throughput of the collection service with a compiled load generator (``wrk``).

``benchmarks/service_load.py`` drives the service from 64 Python clients that need about as much
CPU per report as the server; on a 2-core machine they take one of the two cores. This script
measures the same endpoint with ``wrk`` (Debian package ``wrk``; C, one thread per core, Lua for
the bodies): 64 keep-alive connections post ``POST /campaigns/{id}/reports`` with unique report ids
and random OUE-shaped payloads for ``--seconds``, loopback only, then stops.

Every response is counted by status in the Lua script; after each run the stored count (the
campaign's running aggregate) must lie between the number of 201 receipts and that plus the
connections and its timeouts (requests still in flight when wrk stops, or given up by wrk after its 2 s
timeout, are stored but never answered to it).

The reference: the same ``wrk`` script against a minimal uvicorn JSON application
(``benchmarks/wrk_reference_app.py``: reads the body, parses the JSON, answers 201; nothing
validated or stored) served with the options of ``privpub serve`` (httptools, the same workers,
no access log). Both servers run side by side; each round loads one, then the other (the order
alternates between rounds), after an unmeasured warm-up of each (the first reports compile the
aggregation kernels, if the cache does not hold them). Server CPU is the user + system time of the
server's process group (every worker and thread; not the database's processes) over the run.
Prints one JSON line per run and a summary line: the medians and their ratio. ``--baseline-src``
adds a third server, another checkout's privpub (e.g. ``/path/to/main/src``), to the alternation:
before and after a change measured in the same run, under the same load.

    python benchmarks/service_wrk.py --backend postgresql --postgres-url postgresql+psycopg://u@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "service"))

from service_helpers import ADMIN_TOKEN, Server, create, free_port, fresh_database  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from service_load import server_cpu_seconds  # noqa: E402

D = 16  # categories: 2-byte OUE payloads

LUA = r"""
-- globals: wrk's thread:set/get and setup() see globals of each thread's interpreter only
counter = 0
tid = 0
run = 0
ok, other = 0, 0
local threads = {}
local b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

function setup(thread)
   thread:set("tid", #threads + 1)
   table.insert(threads, thread)
end

function init(args)
   -- the run number (wrk's arguments after "--"): every run sends new report ids
   run = tonumber(args[1] or "0")
   math.randomseed(tid * 7919 + run * 104729)
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
   local id = string.format("%08x%08x%016x", run, tid, counter)
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
   -- timeouts: requests wrk gave up on (2 s); the server may still store them
   io.write(string.format("RESULT ok=%d other=%d p50_us=%d p99_us=%d timeouts=%d\n", t_ok, t_other,
                          latency:percentile(50), latency:percentile(99), summary.errors.timeout))
end
"""


_runs = iter(range(1, 10**6))


def _wrk(args: argparse.Namespace, script: Path, url: str, seconds: int) -> tuple[int, int, int, int, int]:
    proc = subprocess.run(["wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{seconds}s",
                           "--latency", "-s", str(script), url, "--", str(next(_runs))],
                          capture_output=True, text=True, check=False, timeout=seconds + 120)
    if proc.returncode != 0:
        sys.exit(f"wrk failed ({proc.returncode}): {proc.stderr.strip()}")
    m = re.search(r"RESULT ok=(\d+) other=(\d+) p50_us=(\d+) p99_us=(\d+) timeouts=(\d+)", proc.stdout)
    assert m is not None, proc.stdout
    ok, other, p50, p99, timeouts = (int(g) for g in m.groups())
    return ok, other, p50, p99, timeouts


class Reference:
    """The minimal uvicorn JSON application, served like ``privpub serve`` (own process group)."""

    def __init__(self, workers: int, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "wrk_reference_app:app", "--app-dir", str(ROOT / "benchmarks"),
             "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(workers), "--http", "httptools",
             "--no-access-log", "--no-server-header", "--log-level", "warning"],
            stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.post(f"{self.url}/campaigns/x/reports", json={"report_id": "1"}, timeout=2).status_code == 201:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        self.stop()
        sys.exit("the reference application did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            self.proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--postgres-url", default=os.environ.get("PRIVPUB_TEST_POSTGRES_URL"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=15, help="seconds of each measured run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each server, alternated")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured seconds of load on each server first")
    parser.add_argument("--no-reference", action="store_true", help="load privpub only")
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="also serve another checkout's privpub (its src directory, e.g. main's) on the same "
                             "database and alternate it with the others: before/after figures from one run")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian: apt-get install wrk)")
    if not 1 <= args.seconds <= 600 or not 1 <= args.rounds <= 20 or not 0 <= args.warmup <= 60:
        sys.exit("--seconds must be in 1..600, --rounds in 1..20, --warmup in 0..60")
    if args.postgres_url:
        os.environ["PRIVPUB_TEST_POSTGRES_URL"] = args.postgres_url
    if args.baseline_src is not None and not (args.baseline_src / "privpub" / "__init__.py").is_file():
        sys.exit(f"--baseline-src {args.baseline_src}: no privpub package there (give a checkout's src directory)")
    with tempfile.TemporaryDirectory(prefix="privpub-wrk-") as tmp:
        gen = fresh_database(args.backend, Path(tmp))
        db = next(gen)
        servers = {"privpub": Server(db, Path(tmp) / "server.log", workers=args.workers)}
        if args.baseline_src is not None:  # another checkout's privpub on the same database (own campaign)
            servers["baseline"] = Server(db, Path(tmp) / "baseline.log", workers=args.workers)
            servers["baseline"].env["PYTHONPATH"] = str(args.baseline_src.resolve())
        ref = None
        try:
            for server in servers.values():
                server.start()
            ref = None if args.no_reference else Reference(args.workers, Path(tmp) / "reference.log")
            cids = {}
            for name, server in servers.items():
                with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as admin:
                    cids[name] = create(admin, name="wrk", kind="frequency", oracle="OUE", epsilon=1.0,
                                        categories=[str(i) for i in range(D)], min_reports=1)["id"]
            script = Path(tmp) / "reports.lua"
            script.write_text(LUA)
            targets = {}
            for name, server in servers.items():
                assert server.proc is not None
                targets[name] = (server.proc.pid, f"{server.url}/campaigns/{cids[name]}/reports")
            if ref is not None:
                targets["reference"] = (ref.proc.pid, f"{ref.url}/campaigns/{cids['privpub']}/reports")
            answered = dict.fromkeys(servers, 0)  # receipts so far (the stored count grows over the runs)

            def stored(name: str) -> int:
                with httpx.Client(base_url=servers[name].url) as client:
                    return int(client.get(f"/campaigns/{cids[name]}/status").json()["n_reports"])

            if args.warmup:
                for _, url in targets.values():
                    _wrk(args, script, url, args.warmup)
                answered = {name: stored(name) for name in servers}
            results: dict[str, list[float]] = {name: [] for name in targets}
            for r in range(args.rounds):
                order = list(targets) if r % 2 == 0 else list(reversed(targets))
                for name in order:
                    pgid, url = targets[name]
                    cpu0, load0 = server_cpu_seconds(pgid), os.getloadavg()[0]
                    ok, other, p50, p99, timeouts = _wrk(args, script, url, args.seconds)
                    cpu1, load1 = server_cpu_seconds(pgid), os.getloadavg()[0]
                    line: dict[str, object] = {"server": name, "round": r + 1}
                    if name in servers:
                        n = stored(name)
                        # stored but never answered to wrk: in flight at the stop (one per connection at
                        # most) or given up by wrk after its 2 s timeout (each counted by wrk)
                        if not 0 <= n - answered[name] - ok <= args.connections + timeouts:
                            sys.exit(f"{name}: stored {n - answered[name]} reports for {ok} receipts over "
                                     f"{args.connections} connections and {timeouts} timeouts")
                        line.update(backend=args.backend, stored=n - answered[name],
                                    unanswered_at_stop=n - answered[name] - ok)
                        answered[name] = n
                    cpu_ms = 1e3 * (cpu1 - cpu0) / max(ok, 1)
                    results[name].append(cpu_ms)
                    line.update(workers=args.workers, connections=args.connections, seconds=args.seconds,
                                receipts=ok, other_status=other, timeouts=timeouts, requests_per_s=round(ok / args.seconds),
                                p50_ms=p50 / 1000, p99_ms=p99 / 1000, server_cpu_ms_per_request=round(cpu_ms, 4),
                                load_average=[round(load0, 1), round(load1, 1)])
                    print(json.dumps(line), flush=True)
            summary: dict[str, object] = {"summary": True, "backend": args.backend, "workers": args.workers,
                                          "rounds": args.rounds, "load_average_now": [round(x, 1) for x in os.getloadavg()]}
            for name, vals in results.items():
                summary[f"{name}_cpu_ms_per_request_median"] = round(statistics.median(vals), 4)
            if ref is not None:
                for name in servers:
                    key = "ratio" if name == "privpub" else f"{name}_ratio"
                    summary[key] = round(statistics.median(results[name]) / statistics.median(results["reference"]), 2)
            print(json.dumps(summary), flush=True)
        finally:
            for server in servers.values():
                server.stop()
            if ref is not None:
                ref.stop()
            for _ in gen:
                pass


if __name__ == "__main__":
    main()
