"""Where Numba caches privpub's compiled kernels (imported by each kernel module before its decorators).

Every kernel is compiled on its first call only (``@njit(cache=True)``, no eager signatures,
no warm-up at import) and cached on disk, so a later process loads it instead of compiling it.
Numba caches next to the sources (``__pycache__``) when that directory is writable. When it is
not (a read-only site-packages, a system package) and ``NUMBA_CACHE_DIR`` is not set, privpub
points Numba at a directory the user can write: ``$XDG_CACHE_HOME/privpub/numba`` (default
``~/.cache/privpub/numba``), else ``<tmp>/privpub-numba-<user>``. Nothing happens when
``NUMBA_CACHE_DIR`` is set.
"""

from __future__ import annotations

import functools
import getpass
import os
import tempfile
from pathlib import Path

__all__ = ["cache_dir", "prepare", "prepare_numba_cache"]

_PACKAGE = Path(__file__).resolve().parents[1]  # the privpub package


def _writable(path: Path) -> bool:
    """Can this process create files in ``path`` (created if missing)? Tried for real, since
    ``os.access`` answers yes to root on a read-only file system."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".privpub-probe-"):
            pass
    except OSError:
        return False
    return True


def cache_dir(package: Path = _PACKAGE) -> Path | None:
    """The directory privpub gives Numba, or None when Numba's own choice is kept
    (``NUMBA_CACHE_DIR`` set, or the package's ``__pycache__`` writable)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    if _writable(package / "__pycache__"):
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    for candidate in (base / "privpub" / "numba", Path(tempfile.gettempdir()) / f"privpub-numba-{_user()}"):
        if _writable(candidate):
            return candidate
    return None


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid()) if hasattr(os, "getuid") else "user"


@functools.cache
def prepare() -> Path | None:
    """Point Numba's cache at :func:`cache_dir` (once per process); returns the directory set."""
    target = cache_dir()
    if target is not None:
        from numba.core import config

        config.CACHE_DIR = str(target)  # type: ignore[attr-defined]  # numba's config sets its names at runtime
    return target


#: the public name kernel modules outside the core call before their ``@njit`` decorators
prepare_numba_cache = prepare
