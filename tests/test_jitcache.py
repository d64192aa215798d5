"""privpub.core._jitcache: Numba's cache directory when the package directory is read-only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from privpub.core import _jitcache


def test_kept_when_the_package_is_writable_or_the_user_chose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert _jitcache.cache_dir(tmp_path / "pkg") is None  # writable: Numba caches next to the sources
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setattr(_jitcache, "_writable", lambda path: False)
    assert _jitcache.cache_dir(tmp_path / "pkg") is None


def test_read_only_package_uses_the_user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    package = tmp_path / "site-packages" / "privpub"
    real = _jitcache._writable
    monkeypatch.setattr(_jitcache, "_writable", lambda path: package not in path.parents and real(path))
    assert _jitcache.cache_dir(package) == tmp_path / "cache" / "privpub" / "numba"
    # no writable user cache either: a per-user directory under the temporary directory
    monkeypatch.setattr(_jitcache, "_writable", lambda path: "privpub-numba-" in path.name and real(path))
    assert _jitcache.cache_dir(package).name.startswith("privpub-numba-")  # type: ignore[union-attr]


def test_probe_detects_an_unwritable_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert _jitcache._writable(tmp_path / "d")
    assert not _jitcache._writable(blocker / "sub")  # a file in the way: cannot create


def test_kernels_are_cached_in_the_chosen_directory(tmp_path: Path) -> None:
    """A fresh interpreter whose package __pycache__ is unwritable compiles into the user cache."""
    code = (
        "import sys, privpub.core._jitcache as j\n"
        "j._writable = (lambda real: lambda p: p.name != '__pycache__' and real(p))(j._writable)\n"
        "from privpub.core import discrete_laplace_noise\n"
        "discrete_laplace_noise(5, epsilon=1.0, rng=0)\n"
        "from numba.core import config\n"
        "print(config.CACHE_DIR)\n"
    )
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHONPATH": str(Path(_jitcache.__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    target = tmp_path / "privpub" / "numba"
    assert out.stdout.strip() == str(target)
    assert list(target.rglob("*.nbi")), "no Numba index written in the user cache"
