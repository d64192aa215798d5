"""The report opens in headless Chromium and a screenshot is taken.

Outside CI the test is skipped when no Chromium binary is found; in CI (``CI`` set) it must run,
so ``.ci/run`` installs Debian's ``chromium`` package. ``PRIVPUB_CHROMIUM`` may name the binary.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest
from report_fakes import part_with_claims, part_without_claims

from privpub.experiments._report import PartSection, build_report

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def _chromium() -> str | None:
    env = os.environ.get("PRIVPUB_CHROMIUM")
    if env:
        return env
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no Chromium binary was found: .ci/run must install Debian's chromium "
                        "(apt-get install -y chromium)")
        pytest.skip("no Chromium binary found (chromium, chromium-browser, google-chrome) and not in CI; "
                    "install Debian's chromium package or set PRIVPUB_CHROMIUM to run this test")
    root = tmp_path / "results"
    sections = [PartSection("histogram", out_dir=root / "histogram", summary=part_with_claims(root / "histogram")),
                PartSection("stream", out_dir=root / "stream", summary=part_without_claims(root / "stream"))]
    report = build_report(sections, root / "report.html")
    shot = tmp_path / "screenshot.png"
    with tempfile.TemporaryDirectory(prefix="privpub-chromium-") as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
               f"--user-data-dir={profile}", "--hide-scrollbars", "--window-size=1280,1600",
               f"--screenshot={shot}", report.resolve().as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert shot.is_file(), f"no screenshot; exit {proc.returncode}\n{proc.stderr[-2000:]}"
    assert _png_size(shot) == (1280, 1600)
    # a blank page compresses to a few kilobytes; the rendered report (tables, text, figures) does not
    assert shot.stat().st_size > 20_000, shot.stat().st_size
