"""Security: admin endpoints need the token, nothing lets a participant read reports, request-size
limits, and the dashboard escapes what campaigns declare (checked in headless Chromium)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import tempfile
from typing import ClassVar

import httpx
import pytest
from service_helpers import ADMIN_TOKEN, chromium_or_skip, create

from privpub.client import Gateway

ADMIN_CALLS = [("POST", "/campaigns", {"name": "x", "kind": "frequency", "epsilon": 1, "categories": ["a", "b"]}),
               ("GET", "/campaigns", None),
               ("POST", "/campaigns/{cid}/releases", None),
               ("POST", "/campaigns/{cid}/close", None),
               ("POST", "/campaigns/{cid}/tokens", {"count": 1})]


@pytest.fixture(scope="module")
def campaign(server, admin):
    c = create(admin, name="security", kind="frequency", oracle="OUE", epsilon=1.0, min_reports=10,
               categories=["ok", "<script>alert(1)</script>", "<img src=x onerror=alert(2)>"])
    Gateway(server.url, c["id"], rng=0).submit_many(["ok"] * 30)
    return c


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_CALLS)
def test_admin_endpoints_refuse_missing_or_wrong_token(server, campaign, method, path, body) -> None:
    url = server.url + path.format(cid=campaign["id"])
    missing = httpx.request(method, url, json=body)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    for wrong in (ADMIN_TOKEN[:-1], ADMIN_TOKEN + "x", "0", secrets.token_hex(16)):
        resp = httpx.request(method, url, json=body, headers={"Authorization": f"Bearer {wrong}"})
        assert resp.status_code in (401, 403), (wrong, resp.status_code)
    basic = httpx.request(method, url, json=body, headers={"Authorization": f"Basic {ADMIN_TOKEN}"})
    assert basic.status_code in (401, 403)
    assert httpx.get(f"{server.url}/campaigns/{campaign['id']}/status").json()["n_releases"] == 0


def test_token_comparison_is_constant_time(monkeypatch) -> None:
    """require_admin compares digests with hmac.compare_digest (never ==)."""
    from fastapi.security import HTTPAuthorizationCredentials

    from privpub.service import _http as _app  # where require_admin lives

    calls = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(_app.hmac, "compare_digest", spy)

    class _Req:
        scope: ClassVar[dict[str, str]] = {}  # not marked by the transport guard: the dependency checks

        class app:
            class state:
                admin_token = "right"

    _app.require_admin(_Req(), HTTPAuthorizationCredentials(scheme="Bearer", credentials="right"))
    with pytest.raises(_app.ApiError):
        _app.require_admin(_Req(), HTTPAuthorizationCredentials(scheme="Bearer", credentials="wrong"))
    assert calls == [(hashlib.sha256(b"right").digest(),) * 2,
                     (hashlib.sha256(b"wrong").digest(), hashlib.sha256(b"right").digest())]


def test_nothing_lets_anyone_read_reports(server, admin, campaign) -> None:
    """Every GET route of the API, with and without the admin token, never returns a stored report."""
    rid = secrets.token_hex(16)
    payload = base64.b64encode(b"\x06").decode()
    assert httpx.post(f"{server.url}/campaigns/{campaign['id']}/reports",
                      json={"report_id": rid, "report": payload}).status_code == 201
    rel = admin.post(f"/campaigns/{campaign['id']}/releases").json()
    spec = httpx.get(f"{server.url}/openapi.json").json()
    gets = [p for p, ops in spec["paths"].items() if "get" in ops]
    assert not any("report" in p and "reports" in p.split("/")[-1] for p in gets)  # no GET .../reports
    for path in [*gets, "/campaigns/{campaign_id}/dashboard", "/"]:
        url = server.url + path.replace("{campaign_id}", campaign["id"]).replace("{release_id}", rel["id"])
        for client in (httpx, admin):
            resp = client.get(url)
            assert resp.status_code < 500
            assert rid not in resp.text and rid.upper() not in resp.text
    for method in ("GET", "DELETE", "PUT", "PATCH"):
        resp = admin.request(method, f"/campaigns/{campaign['id']}/reports")
        assert resp.status_code in (404, 405)


def test_request_size_limits(server, campaign) -> None:
    big = {"report_id": "ab" * 16, "report": "A" * 300_000}
    assert httpx.post(f"{server.url}/campaigns/{campaign['id']}/reports", json=big).status_code == 413
    huge = b"{" + b" " * (33 * 1024 * 1024) + b"}"
    resp = httpx.post(f"{server.url}/campaigns/{campaign['id']}/reports/batch", content=huge,
                      headers={"content-type": "application/json"}, timeout=60)
    assert resp.status_code == 413
    many = {"report_ids": base64.b64encode(b"\x00" * 16 * 50_001).decode(), "reports": ""}
    assert httpx.post(f"{server.url}/campaigns/{campaign['id']}/reports/batch", json=many,
                      timeout=60).status_code == 413
    assert httpx.get(f"{server.url}/health").json()["status"] == "ok"


CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def test_dashboard_escapes_category_names_in_chromium(server, admin, campaign) -> None:
    browser_path = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")
    admin.post(f"/campaigns/{campaign['id']}/releases")
    dialogs: list[str] = []
    with sync_api.sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=browser_path, headless=True,
                                                    args=CHROMIUM_ARGS)
        try:
            page = ctx.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            resp = page.goto(f"{server.url}/campaigns/{campaign['id']}/dashboard")
            assert resp is not None and resp.status == 200
            page.wait_for_load_state("load")
            text = page.text_content("#plot") or ""
            assert "<script>alert(1)</script>" in text and "<img src=x onerror=alert(2)>" in text
            assert page.locator("script").count() == 0 and page.locator("img").count() == 0
            assert page.evaluate("document.querySelectorAll('#plot rect').length") == 3
            assert "epsilon = 1" in page.inner_text("#privacy")
            page.screenshot(path=str(server.log_path.with_name("dashboard.png")), full_page=True)
        finally:
            ctx.close()
    assert dialogs == []
