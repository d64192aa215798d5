"""Mutation harness (issue 12): doubling any ``epsilon=`` (or ``rho=``) a part passes must make a test fail.

For every call in the five parts that passes a keyword ``epsilon=`` (to a mechanism, an LDP
oracle, a helper that reaches one, or a release), the harness writes a copy of the package in
which that one argument is doubled, runs the part's tests against the copy and requires that
at least one fails. Because the mechanisms charge the accountant as they draw, a doubled
epsilon either exceeds the declared budget (``BudgetExceededError``) or shows up in the ledger a
test checks; a surviving mutant is a place where the ledger and the noise could disagree
unnoticed. The zCDP publishers (issue 26) pass ``rho=`` the same way: those sites are doubled too.

The mutants run in their own processes (marked ``mutation``; excluded from the default run by
``pyproject.toml`` and run by ``.ci/run`` with ``python -m pytest -m mutation -n 2``); the copy of the
package they edit is the ``pristine_copy`` fixture of ``conftest.py``, shared with the structure mutants.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import privpub

SRC = Path(privpub.__file__).resolve().parent
REPO = SRC.parent.parent
PARTS = ("histogram", "spatial", "decision", "stream", "ldp_synth")

#: the privacy-parameter keywords whose call sites are mutated
KEYWORDS = ("epsilon", "rho")
#: sites whose doubling is not a privacy mutation, with the reason (file:callee -> reason);
#: kept empty unless a site truly passes epsilon to something that is not a mechanism
ALLOWED: dict[str, str] = {
    "stream/_base.py:discrete_gaussian_sigma2": "validation only: checks that rho gives a usable variance, draws "
                                                "nothing (the publisher's budget comes from _check_common)",
    "ldp_synth/_calm.py:oracle.variance": "post-processing only: the variance weighs marginals in CALM's consistency "
                                          "step; equal for equal groups and oracles, it draws nothing",
}


@dataclass(frozen=True)
class Site:
    """One ``epsilon=`` (or ``rho=``) keyword argument in a part's source."""

    part: str
    file: str  # relative to src/privpub
    line: int
    col: int
    end_line: int
    end_col: int
    callee: str
    value: str
    keyword: str = "epsilon"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.callee}({self.keyword}={self.value})"


def find_sites() -> list[Site]:
    """Every call with an ``epsilon=`` or ``rho=`` keyword in the parts' modules, in source order."""
    sites = []
    for part in PARTS:
        for path in sorted((SRC / part).glob("*.py")):
            rel = path.relative_to(SRC).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                for kw in node.keywords:
                    if kw.arg in KEYWORDS:
                        v = kw.value
                        assert v.end_lineno is not None and v.end_col_offset is not None
                        sites.append(Site(part, rel, v.lineno, v.col_offset, v.end_lineno, v.end_col_offset,
                                          ast.unparse(node.func), ast.unparse(v), kw.arg))
    return sorted(sites, key=lambda s: (s.file, s.line, s.col))


def mutate(source: str, site: Site) -> str:
    """``source`` with the argument at ``site`` replaced by ``((argument) * 2)``."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    raw = source.encode("utf-8")
    start = offsets[site.line - 1] + site.col
    end = offsets[site.end_line - 1] + site.end_col
    return (raw[:start] + b"((" + raw[start:end] + b") * 2)" + raw[end:]).decode("utf-8")


SITES = find_sites()


def test_sites_are_found_in_every_part() -> None:
    parts = {s.part for s in SITES}
    assert parts >= {"histogram", "decision", "spatial", "stream"}, parts
    assert any(s.keyword == "rho" and s.callee == "discrete_gaussian_noise" for s in SITES)
    assert all(any(str(s).startswith(k.split(":")[0]) for s in SITES) for k in ALLOWED), "stale ALLOWED entry"


def test_mutate_doubles_exactly_one_argument() -> None:
    site = next(s for s in SITES if s.part == "histogram")
    text = (SRC / site.file).read_text(encoding="utf-8")
    out = mutate(text, site)
    assert out.count(f"(({site.value}) * 2)") == text.count(f"(({site.value}) * 2)") + 1
    ast.parse(out)


def _test_paths(site: Site) -> list[str]:
    """The part's tests, those most likely to kill the mutant first, so that it stops early (``-x``).

    First the mutated module's own test file (``_dawa.py`` -> ``tests/histogram/test_dawa.py``),
    then the part's publisher tests, then the whole part (pytest drops the repeated files).
    """
    module = Path(site.file).stem.lstrip("_")
    first = [REPO / "tests" / site.part / f"test_{module}.py", REPO / "tests" / site.part / "test_publishers.py"]
    return [str(p.relative_to(REPO)) for p in dict.fromkeys(first) if p.exists()] + [f"tests/{site.part}"]


@pytest.mark.mutation
@pytest.mark.parametrize("site", [s for s in SITES if f"{s.file}:{s.callee}" not in ALLOWED], ids=str)
def test_doubled_epsilon_is_caught(site: Site, pristine_copy: Path) -> None:
    root = pristine_copy
    target = root / "privpub" / site.file
    mutated = mutate((SRC / site.file).read_text(encoding="utf-8"), site)
    ast.parse(mutated)
    target.write_text(mutated, encoding="utf-8")
    try:
        _run_mutant(site, root)
    finally:
        shutil.copy2(SRC / site.file, target)  # the next mutant of this process starts from the pristine file


def _run_mutant(site: Site, root: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "-n", "0",
           "-m", "not slow and not audit_full and not mutation", *_test_paths(site)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    # exit code 1: some test failed (the mutant is killed); 0: every test passed (it survived)
    assert proc.returncode != 5, f"no tests collected for {site.part}"
    assert proc.returncode != 0, (f"mutant survived: doubling {site.keyword} at {site} makes no test of "
                                  f"tests/{site.part} fail\n{proc.stdout[-1500:]}")
    # 1: a test failed; anything else (2-4: interrupted, internal or usage error) is a broken harness
    assert proc.returncode == 1, f"pytest exited with {proc.returncode}:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}"
    # the copy really was imported (the failure is the mutant's, not a broken harness)
    assert "Error" in proc.stdout or "failed" in proc.stdout
