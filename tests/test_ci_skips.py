"""On CI (``CI`` set) a test the README says runs must fail rather than skip (issue 21)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CASES = '''
import pytest

def test_needs_chromium():
    pytest.skip("Debian's chromium is not installed")

@pytest.mark.skipif(True, reason="PRIVPUB_TEST_POSTGRES_URL is not set")
def test_needs_postgres():
    pass

def test_full_tier():
    pytest.skip("full audit tier: run with --full")

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    raise AssertionError

def test_passes():
    pass
'''


def _run(tmp_path: Path, ci: bool, *files: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-rs",
                           "-c", os.devnull, "--rootdir", str(tmp_path), *files],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_skips_fail_on_ci_except_the_allowed_ones(tmp_path: Path) -> None:
    (tmp_path / "test_cases.py").write_text(CASES, encoding="utf-8")
    proc = _run(tmp_path, True, "test_cases.py")
    out = proc.stdout
    assert proc.returncode == 1, out
    # a skip in the test body fails; one at setup (a skipif mark, a fixture) is an error
    assert "1 failed, 1 passed, 1 skipped, 1 xfailed, 1 error" in out, out
    assert "skipped on CI: Debian's chromium is not installed" in out
    assert "skipped on CI: PRIVPUB_TEST_POSTGRES_URL is not set" in out


def test_skips_stay_skips_off_ci(tmp_path: Path) -> None:
    (tmp_path / "test_cases.py").write_text(CASES, encoding="utf-8")
    proc = _run(tmp_path, False, "test_cases.py")
    assert proc.returncode == 0, proc.stdout
    assert "1 passed, 3 skipped, 1 xfailed" in proc.stdout, proc.stdout


def test_a_module_skipped_at_collection_fails_on_ci(tmp_path: Path) -> None:
    (tmp_path / "test_module.py").write_text(
        'import pytest\npytest.importorskip("a_module_that_is_not_installed")\n\ndef test_x():\n    pass\n',
        encoding="utf-8")
    proc = _run(tmp_path, True, "test_module.py")
    assert proc.returncode != 0, proc.stdout
    assert "skipped on CI" in proc.stdout + proc.stderr, proc.stdout
