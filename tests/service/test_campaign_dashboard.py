"""Issue 21: the campaign dashboard is live (it refreshes itself like the stream page), explains
every statistical term where it is used (Norm-Sub with a link to its explanation), and draws its
plots with axes, ticks and labels. Checked in headless Chromium against a real ``privpub serve``
on SQLite and PostgreSQL."""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from service_helpers import chromium_or_skip, create

from privpub.cli._service import simulate_values
from privpub.client import Gateway

DOCS = Path(__file__).resolve().parents[2] / "docs" / "service.md"


def _wait_for(page, selector: str, expected: str, sync_api, timeout: float = 20.0) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        try:
            seen = page.inner_text(selector)
            if seen == expected:
                return seen
        except sync_api.Error:  # the page is reloading
            pass
        time.sleep(0.2)
    return seen


def test_campaign_dashboard_is_live_and_explained(server, admin) -> None:
    browser_path = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")
    c = create(admin, name="live fruit", kind="frequency", oracle="OUE", epsilon=2.0, min_reports=20,
               categories=["apple", "banana", "cherry"])
    cid = str(c["id"])
    gateway = Gateway(server.url, cid, rng=0)
    gateway.submit_many(["apple"] * 20 + ["banana"] * 10)
    assert admin.post(f"/campaigns/{cid}/releases").status_code == 201
    # the default refresh is the stream page's: every 5 s
    page_html = httpx.get(f"{server.url}/campaigns/{cid}/dashboard").text
    assert '<meta http-equiv="refresh" content="5">' in page_html
    dialogs: list[str] = []
    with sync_api.sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=browser_path, headless=True,
                                                    args=["--no-sandbox"])
        try:
            page = ctx.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            resp = page.goto(f"{server.url}/campaigns/{cid}/dashboard?refresh=3600")  # still while we look
            assert resp is not None and resp.status == 200
            page.wait_for_load_state("load")
            assert page.locator("script").count() == 0
            assert page.inner_text("#n_reports") == "30"
            # Norm-Sub explained in place, linked to its explanation
            term = page.inner_text("#norm-sub-term")
            assert "Norm-Sub" in term and "negative" in term and "add up to the 30 reports" in term
            assert "standard error" in term and "costs no privacy" in term
            assert page.get_attribute("#norm-sub-link", "href") == "/help#norm-sub"
            assert "optimised unary encoding" in page.inner_text("#oracle-term")
            ledger = page.inner_text("#ledger")
            assert "budget epsilon = 2, spent 2" in ledger
            # both bar plots have an x axis with ticks, tick labels and an axis label
            for plot, label in (("#plot", "estimated participants (Norm-Sub)"), ("#timeline", "reports received")):
                assert page.locator(f"{plot} .x-axis .tick").count() >= 2, plot
                ticks = page.locator(f"{plot} .tick-label").all_text_contents()
                assert ticks[0] == "0" and all(re.fullmatch(r"[0-9.,]+", t) for t in ticks), ticks
                assert page.text_content(f"{plot} .axis-label") == label
            assert page.evaluate("document.querySelectorAll('#plot rect').length") == 3
            page.screenshot(path=str(server.log_path.with_name("campaign-dashboard.png")), full_page=True)
            # participants arrive while the page is open: the count on the page follows
            page.goto(f"{server.url}/campaigns/{cid}/dashboard?refresh=1")
            page.wait_for_load_state("load")
            assert page.inner_text("#n_reports") == "30"
            gateway.submit_many(["cherry"] * 25)
            assert _wait_for(page, "#n_reports", "55", sync_api) == "55"
            # the link leads to the explanation
            page.goto(f"{server.url}/help#norm-sub")
            section = page.locator("#norm-sub")
            assert section.count() == 1 and "Norm-Sub" in section.inner_text()
            assert "sums to N" in page.inner_text("body")
        finally:
            ctx.close()
    assert dialogs == []


def test_help_page_matches_the_docs(server) -> None:
    """Every section of /help has its heading in docs/service.md ("Reading the dashboards")."""
    html = httpx.get(f"{server.url}/help").text
    headings = re.findall(r'<h2 id="([a-z-]+)">([^<]+)</h2>', html)
    assert {h for h, _ in headings} >= {"norm-sub", "epsilon", "confidence-band", "ledger"}
    docs = DOCS.read_text(encoding="utf-8")
    assert "## Reading the dashboards" in docs
    section = docs.split("## Reading the dashboards", 1)[1]
    for _, title in headings:
        assert f"### {title.replace('&#34;', chr(34))}" in section, title


def _axis_ticks(html: str, plot_id: str, axis: str) -> list[str]:
    svg = html.split(f'id="{plot_id}"', 1)[1].split("</svg>", 1)[0]
    block = svg.split(f'<g class="axis {axis}">', 1)[1].split("</g>", 1)[0]
    return re.findall(r'class="tick-label"[^>]*>([^<]+)<', block)


def test_spatial_and_synth_plots_have_axes_and_explanations(server, admin) -> None:
    ug = create(admin, name="ug", kind="spatial", method="ug", epsilon=1.0, bounds=[0, 0, 10, 10],
                expected_participants=400, g=4, min_reports=400)
    Gateway(server.url, ug["id"], rng=4).submit_many(simulate_values(ug, 400, np.random.default_rng(2)))
    assert admin.post(f"/campaigns/{ug['id']}/releases").status_code == 201
    html = httpx.get(f"{server.url}/campaigns/{ug['id']}/dashboard").text
    for axis in ("x-axis", "y-axis"):
        ticks = _axis_ticks(html, "plot", axis)
        assert ticks[0] == "0" and ticks[-1] == "10" and len(ticks) >= 3, ticks
    assert 'id="density-term"' in html and "logarithmic colour scale" in html and 'href="/help#norm-sub"' in html
    assert 'id="method-term"' in html and "uniform grid" in html
    attrs = [{"name": "age", "categories": ["young", "old"]}, {"name": "car", "categories": ["no", "yes"]}]
    syn = create(admin, name="synth", kind="synth", epsilon=4.0, attributes=attrs, degree=1, min_reports=300)
    Gateway(server.url, syn["id"], rng=5).submit_many(simulate_values(syn, 300, np.random.default_rng(3)))
    assert admin.post(f"/campaigns/{syn['id']}/releases").status_code == 201
    html = httpx.get(f"{server.url}/campaigns/{syn['id']}/dashboard").text
    assert 'id="marginals-term"' in html and "Bayesian network" in html
    assert html.count(">share of the synthetic records</text>") == 2
    assert "budget epsilon = 4, spent 4 = 2 x 2 (local perturbation): sequential steps add up" in html
