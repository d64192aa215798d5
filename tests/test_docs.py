"""The code blocks of ``docs/**/*.md`` run as written, or say why they cannot (issue 24).

Every fenced block states what it is in its info string, and the test holds it to that:

* ```` ```python ````: runs alone, as written, in a fresh interpreter in an empty directory
  (nothing from an earlier block); it must exit 0. A block that reads the papers' datasets
  (``privpub.datasets``) gets ``PRIVPUB_DATA`` (the ``data_dir`` fixture).
* ```` ```python {.continued} ````: runs the same way, after the page's previous ``python``
  block (which it continues: ``release`` from the quick start, say).
* ```` ```python {.no-run} ````: Python a reader adapts before running (it needs a running server,
  a Spark cluster or the reader's own data); it must still compile.
* ```` ```console ```` (shell commands and sessions, run by the reader), ```` ```text ```` (output
  samples, diagrams) and the other languages of :data:`NOT_RUN`: shown, never run.

Anything else (a bare fence, ```` ```bash ````, an unknown language) fails, so a new example is
either run or explicitly marked, and a marked one is visible as such in the page source.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mdblocks import Block, blocks, run_python

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCKS = [b for p in sorted(DOCS.rglob("*.md")) for b in blocks(p)]
#: info-string languages that are shown but never run
NOT_RUN = frozenset({"console", "text", "html", "yaml", "json", "mermaid"})
RUN = [b for b in BLOCKS if b.language == "python" and "no-run" not in b.classes]
NO_RUN_PYTHON = [b for b in BLOCKS if b.language == "python" and "no-run" in b.classes]


def _program(block: Block) -> str:
    """The code a block runs: its own, after the blocks it continues."""
    if "continued" not in block.classes:
        return block.code
    earlier = [b for b in RUN if b.path == block.path and b.line < block.line]
    assert earlier, f"{block.where} continues no earlier ```python block"
    return _program(earlier[-1]) + block.code


def _id(b: Block) -> str:
    return str(b.path.relative_to(DOCS)).replace("/", ".").removesuffix(".md") + f":{b.line}"


def test_the_docs_have_runnable_python_blocks() -> None:
    assert len(RUN) >= 10, [_id(b) for b in RUN]


def test_every_block_is_run_or_marked() -> None:
    bad = [f"{_id(b)}: ```{b.info}" for b in BLOCKS if b.language != "python" and b.language not in NOT_RUN]
    assert not bad, ("blocks neither run nor marked: use ```python (runs), ```python {.no-run}, "
                     "```console (shell) or ```text (output):\n" + "\n".join(bad))


@pytest.mark.parametrize("block", NO_RUN_PYTHON, ids=[_id(b) for b in NO_RUN_PYTHON])
def test_a_no_run_python_block_compiles(block: Block) -> None:
    compile(block.code, block.where, "exec")


@pytest.mark.parametrize("block", RUN, ids=[_id(b) for b in RUN])
def test_a_python_block_runs_as_written(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = {}
    code = _program(block)
    if "privpub.datasets" in code:  # skipped without the datasets outside CI, a failure on CI
        env["PRIVPUB_DATA"] = str(Path(request.getfixturevalue("data_dir")).resolve())
    proc = run_python(code, tmp_path, env)
    assert proc.returncode == 0, f"{block.where} failed:\n{code}\n{proc.stderr[-3000:]}"
