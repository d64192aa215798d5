"""Web participants: ``GET /client.js``, a campaign's ``allowed_origins`` (CORS), and the example
page (examples/web) end to end in headless Chromium against a real ``privpub serve``.

One backend (SQLite) is enough here: the CORS layer sits in front of the store.
"""

from __future__ import annotations

import functools
import http.server
import math
import tempfile
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import httpx
import pytest
from service_helpers import ADMIN_TOKEN, Server, chromium_or_skip, create, free_port, fresh_database

from privpub.ldp import OUE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "web"
CATEGORIES = ["walk", "bike", "bus", "car"]
#: the 2,000 simulated participants' true answers
TRUTH = {"walk": 800, "bike": 600, "bus": 400, "car": 200}


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("web")
    gen = fresh_database("sqlite", tmp)
    srv = Server(next(gen), tmp / "server.log").start()
    try:
        yield srv
    finally:
        srv.stop()


class _Static:
    """The example page served from its own loopback origin (a real second web origin)."""

    def __init__(self) -> None:
        self.port = free_port()
        handler = functools.partial(_QuietHandler, directory=str(EXAMPLE))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.origin = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> _Static:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _admin(srv: Server) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=120)


def _count(srv: Server, cid: str) -> int:
    return int(httpx.get(f"{srv.url}/campaigns/{cid}/status").json()["n_reports"])


def test_client_js_is_the_shipped_bundle(web_server: Server) -> None:
    resp = httpx.get(f"{web_server.url}/client.js")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/javascript")
    shipped = resources.files("privpub.service").joinpath("static/client.js").read_bytes()
    assert resp.content == shipped and b"getRandomValues" in shipped and b"Math.random" not in shipped
    again = httpx.get(f"{web_server.url}/client.js", headers={"If-None-Match": resp.headers["etag"]})
    assert again.status_code == 304


def test_allowed_origins_cors(web_server: Server) -> None:
    good, bad = "http://127.0.0.1:9", "https://evil.example"
    with _admin(web_server) as adm:
        refused = adm.post("/campaigns", json={"name": "x", "kind": "frequency", "epsilon": 1.0,
                                               "categories": ["a", "b"], "allowed_origins": ["https://a.org/path"]})
        assert refused.status_code == 422 and "allowed_origins" in refused.text
        cfg = create(adm, name="cors", kind="frequency", epsilon=1.0, categories=["a", "b"], oracle="GRR",
                     allowed_origins=["HTTP://127.0.0.1:9/", good], min_reports=1)
    cid = cfg["id"]
    url = f"{web_server.url}/campaigns/{cid}/reports"
    pre = httpx.options(url, headers={"Origin": good, "Access-Control-Request-Method": "POST",
                                      "Access-Control-Request-Headers": "content-type"})
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == good
    assert pre.headers["access-control-allow-methods"] == "POST"
    assert pre.headers["access-control-allow-headers"] == "content-type"
    assert "origin" in pre.headers["vary"].lower()
    for origin, method, hdrs in ((bad, "POST", "content-type"), (good, "DELETE", ""), (good, "POST", "x-custom")):
        no = httpx.options(url, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                         "Access-Control-Request-Headers": hdrs})
        assert no.status_code == 403 and "access-control-allow-origin" not in no.headers
    body = {"report_id": "ab" * 16, "report": "AAAAAA==", "group": 0}
    ok = httpx.post(url, json=body, headers={"Origin": good})
    assert ok.status_code == 201 and ok.headers["access-control-allow-origin"] == good
    # a foreign origin is refused before anything is stored (even a "simple" request)
    for headers in ({"Origin": bad}, {"Origin": bad, "Content-Type": "text/plain"}):
        no = httpx.post(url, content=b'{"report_id": "' + b"cd" * 16 + b'", "report": "AAAAAA=="}', headers=headers)
        assert no.status_code == 403 and no.json()["error"]["field"] == "origin"
    plain = httpx.post(url, content=b"{}", headers={"Origin": good, "Content-Type": "text/plain"})
    assert plain.status_code == 415
    assert _count(web_server, cid) == 1
    # devices and gateways (no Origin header) are unaffected; the config is readable from the page
    assert httpx.post(url, json=dict(body, report_id="ef" * 16)).status_code == 201
    got = httpx.get(f"{web_server.url}/campaigns/{cid}", headers={"Origin": good})
    assert got.status_code == 200 and got.headers["access-control-allow-origin"] == good
    assert httpx.get(f"{web_server.url}/campaigns/{cid}", headers={"Origin": bad}).status_code == 403


def test_example_page_in_chromium(web_server: Server) -> None:
    browser_path = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")
    with _Static() as allowed, _Static() as foreign:
        with _admin(web_server) as adm:
            cfg = create(adm, name="How do you get to work?", kind="frequency", epsilon=1.0, oracle="OUE",
                         categories=CATEGORIES, allowed_origins=[allowed.origin], min_reports=100)
        cid = cfg["id"]
        query = f"?service={web_server.url}&campaign={cid}"
        with sync_api.sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
            ctx = pw.chromium.launch_persistent_context(profile, executable_path=browser_path, headless=True,
                                                        args=["--no-sandbox"])
            try:
                page = ctx.new_page()
                assert page.goto(f"{allowed.origin}/index.html{query}").status == 200
                page.wait_for_function("document.querySelectorAll('#choices input').length === 4")
                assert "epsilon = 1" in page.inner_text("#privacy")
                assert "2.72 times" in page.inner_text("#why")
                # a participant picks a value, sees the randomised bits, sends them
                page.check("input[value=bike]")
                bits = page.inner_text("#report")
                assert len(bits) == 4 and set(bits) <= {"0", "1"}
                page.click("#submit")
                page.wait_for_function("document.getElementById('status').textContent.startsWith('Sent')")
                assert _count(web_server, cid) == 1
                # 2,000 simulated participants, each randomising on the page and submitting
                n_sent = page.evaluate("""async (truth) => {
                    const values = Object.entries(truth).flatMap(([v, n]) => Array(n).fill(v));
                    let sent = 0;
                    for (let i = 0; i < values.length; i += 50) {
                      const rs = await Promise.all(values.slice(i, i + 50).map((v) =>
                        new privpub.Participant(window.participant.baseUrl, window.participant.campaignId,
                                                { queue: new privpub.MemoryQueue() }).submit(v)));
                      sent += rs.filter((r) => !r.queued).length;
                    }
                    return sent;
                }""", TRUTH)
                assert n_sent == 2000
                # offline: the report (perturbed) waits in IndexedDB and is flushed later, same id
                queued = page.evaluate("""async ([url, cid]) => {
                    const q = new privpub.IndexedDBQueue('offline-test');
                    const cfg = await window.participant.config();
                    const off = new privpub.Participant(url, cid, {queue: q, retries: 1, backoff: 0.01,
                      fetch: async (u, init) => (init && init.method === 'POST') ? Promise.reject(new TypeError('offline'))
                                                                                 : fetch(u, init)});
                    const r = await off.submit('car');
                    const stored = await q.load();
                    const on = new privpub.Participant(url, cid, {queue: q});
                    const done = await on.flush();
                    return [r.queued, stored.length, stored[0].report_id === r.report_id,
                            JSON.stringify(stored).includes('"car"'), done.length, await on.pending(), cfg.kind];
                }""", [web_server.url, cid])
                assert queued == [True, 1, True, False, 1, 0, "frequency"]
                assert _count(web_server, cid) == 2002
                # a page from an origin the campaign does not allow cannot submit
                other = ctx.new_page()
                assert other.goto(f"{foreign.origin}/index.html{query}").status == 200
                other.wait_for_function("typeof privpub !== 'undefined'")
                outcome = other.evaluate("""async ([url, cid]) => {
                    try {
                      const r = await fetch(url + '/campaigns/' + cid + '/reports', {method: 'POST',
                        headers: {'content-type': 'application/json'},
                        body: JSON.stringify({report_id: 'ab'.repeat(16), report: 'AQ==', group: 0})});
                      return 'status ' + r.status;
                    } catch (e) { return 'blocked'; }
                }""", [web_server.url, cid])
                assert outcome == "blocked"
                simple = other.evaluate("""async ([url, cid]) => {
                    try {
                      await fetch(url + '/campaigns/' + cid + '/reports', {method: 'POST', mode: 'no-cors',
                        headers: {'content-type': 'text/plain'},
                        body: JSON.stringify({report_id: 'cd'.repeat(16), report: 'AQ==', group: 0})});
                      return 'sent';
                    } catch (e) { return 'blocked'; }
                }""", [web_server.url, cid])
                assert simple in ("sent", "blocked")  # opaque either way; the server refused it:
                assert _count(web_server, cid) == 2002
            finally:
                ctx.close()
    with _admin(web_server) as adm:
        rel = adm.post(f"/campaigns/{cid}/releases")
        assert rel.status_code == 201, rel.text
        result = rel.json()
    truth = dict(TRUTH, bike=TRUTH["bike"] + 1, car=TRUTH["car"] + 1)
    n = sum(truth.values())
    oue = OUE(domain_size=len(CATEGORIES))
    for c in CATEGORIES:
        # the exact standard deviation of an OUE count estimate at this category's frequency
        sd = math.sqrt(oue.variance(n, epsilon=1.0, frequency=truth[c] / n))
        assert abs(result["estimates"][c] - truth[c]) < 4 * sd, (c, result["estimates"], sd)
    assert result["standard_error"] == pytest.approx(math.sqrt(oue.variance(n, epsilon=1.0)))


def test_audit_accepts_the_services_own_public_configurations(web_server: Server) -> None:
    """``privpub audit client`` takes ``GET /campaigns/{id}`` as it is, for every kind."""
    import sys

    from privpub.audit import audit_client, client_scenarios

    specs = [
        {"kind": "frequency", "categories": ["a", "b", "c"], "oracle": "OLH"},
        {"kind": "frequency", "categories": [f"v{i}" for i in range(20)], "oracle": "auto"},
        {"kind": "synth", "attributes": [{"name": "x", "categories": ["0", "1"]},
                                         {"name": "y", "categories": ["p", "q", "r"]}], "degree": 1},
        {"kind": "spatial", "method": "ug", "bounds": [0, 0, 1, 1], "expected_participants": 5000},
        {"kind": "spatial", "method": "kdght", "bounds": [0, 0, 4, 2], "expected_participants": 5000,
         "enrollment": True},  # KDG-HT phases are built from reports: enrolled participants only
    ]
    with _admin(web_server) as adm:
        configs = [httpx.get(f"{web_server.url}/campaigns/{create(adm, name='c', epsilon=1.0, **s)['id']}").json()
                   for s in specs]
    names = [[sc.name for sc in client_scenarios(cfg)] for cfg in configs]
    assert names[0] == ["frequency OLH"] and names[2] == ["synth"] and names[3] == ["spatial ug grid"]
    assert len(names[4]) == 4  # U'_x, U'_y and two tree levels
    kdght = client_scenarios(configs[4])
    assert kdght[0].line["partition"]["type"] == "intervals"
    assert len(kdght[0].line["partition"]["edges"]) == configs[4]["phases"][0]["cells"] + 1
    # 3,000 reports: at epsilon 1 over 2 attributes the doubled-epsilon control is caught with p ~ 1e-45
    # (at 600 reports p ~ 1e-7 would make the audit inconclusive at alpha = 1e-6)
    audit = audit_client(configs[2], [sys.executable, "-m", "privpub.client.conformance"], reports=3000)
    assert audit.passed, audit.table()
