"""The README's Python snippets run as written (finding of issue 15: the first one raised NameError)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)


def test_the_readme_has_python_snippets() -> None:
    assert SNIPPETS, "README.md has no ```python block"


@pytest.mark.parametrize("code", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_readme_snippet_runs_as_written(code: str, tmp_path: Path) -> None:
    """Each block alone, in a fresh interpreter (nothing defined by an earlier block or the test)."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, f"README snippet failed:\n{code}\n{proc.stderr[-3000:]}"
