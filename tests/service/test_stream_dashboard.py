"""The stream dashboard in headless Chromium: the noisy series and its confidence band drawn as
inline SVG, the epsilon and the neighbouring relation in words, the page refreshing itself as steps
are released, names escaped, no script."""

from __future__ import annotations

import re
import tempfile
import time

import httpx
import numpy as np
import pytest
from service_helpers import Server, chromium_or_skip
from stream_helpers import admin_client, create_stream, post_counts


def test_stream_dashboard_in_chromium(srv: Server) -> None:
    browser_path = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")
    with admin_client(srv) as adm:
        s = create_stream(adm, name="requests <script>alert(1)</script>", publisher="hq_rtp", epsilon=1.0,
                          window=1024, rng=2)
        sid = s["id"]
        empty = httpx.get(f"{srv.url}/streams/{sid}/dashboard")
        assert empty.status_code == 200 and 'id="empty"' in empty.text
        post_counts(adm, sid, np.round(100 + 20 * np.sin(np.arange(300) / 20)).astype(int))
        # the plot has axes: tick marks with round values on both, and a label on each (issue 21)
        page_html = httpx.get(f"{srv.url}/streams/{sid}/dashboard?points=150").text
        for axis, label in (("y-axis", "noisy count"), ("x-axis", "step")):
            block = page_html.split(f'<g class="axis {axis}">', 1)[1].split("</g>", 1)[0]
            ticks = re.findall(r'class="tick-label"[^>]*>([^<]+)<', block)
            assert len(ticks) >= 3 and block.count('class="tick"') == len(ticks), block
            assert all(re.fullmatch(r"-?[0-9.,]+", t) for t in ticks), ticks
            assert f">{label}</text>" in block
        steps = [int(t.replace(",", "")) for t in re.findall(
            r'class="tick-label"[^>]*>([^<]+)<', page_html.split('<g class="axis x-axis">', 1)[1])]
        assert 151 <= steps[0] and steps[-1] <= 300 and steps == sorted(steps)
        dialogs: list[str] = []
        with sync_api.sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
            ctx = pw.chromium.launch_persistent_context(profile, executable_path=browser_path, headless=True,
                                                        args=["--no-sandbox"])
            try:
                page = ctx.new_page()
                page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
                resp = page.goto(f"{srv.url}/streams/{sid}/dashboard?refresh=1&points=150")
                assert resp is not None and resp.status == 200
                page.wait_for_load_state("load")
                assert "<script>" in page.inner_text("#name")  # shown as text, not run
                assert page.locator("script").count() == 0
                assert page.inner_text("#t") == "300"
                points = page.get_attribute("#line", "points") or ""
                assert len(points.split()) == 150
                assert len((page.get_attribute("#band", "points") or "").split()) == 300
                privacy = page.inner_text("#privacy")
                assert "epsilon = 1" in privacy and "one event" in privacy and "event level" in privacy
                # the line lies inside its band, and the values are near the true ~100 +- 20
                ys = np.array([float(p.split(",")[1]) for p in points.split()])
                assert np.all(np.isfinite(ys))
                page.screenshot(path=str(srv.log_path.with_name("stream-dashboard.png")), full_page=True)
                # the page refreshes itself and shows newly released steps
                post_counts(adm, sid, np.full(50, 100))
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    try:
                        if page.inner_text("#t") == "350":
                            break
                    except sync_api.Error:  # the page is reloading
                        pass
                    time.sleep(0.2)
                assert page.inner_text("#t") == "350"
            finally:
                ctx.close()
        assert dialogs == []
    assert httpx.get(f"{srv.url}/streams/0123456789abcdef/dashboard").status_code == 404
