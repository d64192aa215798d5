"""The README's Python snippets run as written (finding of issue 15: the first one raised NameError)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mdblocks import blocks, run_python

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = [b.code for b in blocks(README) if b.info == "python"]


def test_the_readme_has_python_snippets() -> None:
    assert SNIPPETS, "README.md has no ```python block"


@pytest.mark.parametrize("code", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_readme_snippet_runs_as_written(code: str, tmp_path: Path) -> None:
    """Each block alone, in a fresh interpreter (nothing defined by an earlier block or the test)."""
    proc = run_python(code, tmp_path)
    assert proc.returncode == 0, f"README snippet failed:\n{code}\n{proc.stderr[-3000:]}"
