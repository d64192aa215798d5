"""Code blocks of Markdown files, and running a Python block as a reader would.

Shared by ``tests/test_readme.py`` (the README) and ``tests/test_docs.py`` (``docs/*.md``).
A block is a fenced code block; its *info string* is the text after the opening fence
(```` ```python {.no-run} ```` has language ``python`` and the class ``no-run``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<code>.*?)^(?P=fence)[ \t]*$",
                    flags=re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int  # of the opening fence, 1-based
    info: str  # the info string, stripped: "python", "python {.no-run}", "" for a bare fence
    code: str

    @property
    def language(self) -> str:
        """The first word of the info string ("" for a bare fence)."""
        return self.info.split(maxsplit=1)[0].lower() if self.info else ""

    @property
    def classes(self) -> frozenset[str]:
        """The ``.class`` attributes of the info string (```` ```python {.no-run} ```` -> ``{"no-run"}``)."""
        attrs = re.search(r"\{([^}]*)\}", self.info)
        return frozenset(w[1:] for w in attrs.group(1).split() if w.startswith(".")) if attrs else frozenset()

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced code block of ``path``, in order."""
    text = path.read_text(encoding="utf-8")
    return [Block(path, text.count("\n", 0, m.start()) + 1, m.group("info").strip(), m.group("code"))
            for m in _FENCE.finditer(text)]


def run_python(code: str, cwd: Path, env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``code`` alone in a fresh interpreter in ``cwd`` (nothing from an earlier block or the test)."""
    full_env = {**os.environ, "MPLBACKEND": "Agg", **(env or {})}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout, check=False)
