"""The base install (no extras) declares every package it imports and runs the README's first command.

Finding of issue 21: typer 0.29 stopped depending on click, pyproject never declared it, and every
``privpub`` command of a fresh ``pip install -e .`` died with ``No module named 'click'``.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "privpub"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

#: sub-packages that belong to an extra (their imports are declared there)
EXTRA_PACKAGES = {"service": "service", "client": "service", "spark": "spark"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared(extra: str | None) -> set[str]:
    names = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    if extra is not None:
        names |= {_name(r) for r in PYPROJECT["project"]["optional-dependencies"][extra]}
    return names


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(top-level module, imported at module level outside try/except) for each absolute import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        out += [(n.split(".")[0], id(node) in top_level) for n in names]
    return out


def _third_party(module: str) -> bool:
    return module not in sys.stdlib_module_names and module not in ("privpub", "__future__")


def test_every_import_is_declared_in_pyproject() -> None:
    """A module-level import of the base package is a base dependency; any import is declared somewhere."""
    dists = packages_distributions()
    every_extra = set().union(*(_declared(e) for e in PYPROJECT["project"]["optional-dependencies"]))
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if "migrations" in rel.parts:
            continue
        extra = EXTRA_PACKAGES.get(rel.parts[0]) if len(rel.parts) > 1 else None
        for module, at_top in _imports(path):
            if not _third_party(module):
                continue
            provided = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
            allowed = _declared(extra) if at_top else every_extra
            if not provided & allowed:
                where = f"[{extra}]" if at_top and extra else ("the base dependencies" if at_top else "any extra")
                problems.append(f"{rel}: imports {module} ({', '.join(sorted(provided))}), not declared in {where}")
    assert not problems, "\n".join(problems)


def _copy_of_the_checkout(dest: Path) -> Path:
    """The repository's files as a fresh clone has them (tracked and new files, nothing ignored)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / os.fsdecode(name)
        if src.is_file():
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(src.read_bytes())
    return dest


@pytest.mark.slow
def test_fresh_venv_without_extras_runs_the_demo(tmp_path: Path) -> None:
    """``python -m pip install -e .`` in a new venv (no extras), then ``privpub --version`` and ``privpub demo``."""
    checkout = _copy_of_the_checkout(tmp_path / "privpub")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py, exe = venv / "bin" / "python", venv / "bin" / "privpub"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "-e", "."], cwd=checkout, env=env,
                         capture_output=True, text=True, timeout=2400, check=False)
    assert pip.returncode == 0, pip.stderr[-3000:]
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], env=env, capture_output=True,
                            text=True, check=True).stdout.lower()
    assert "fastapi" not in listed and "pyspark" not in listed, "an extra was installed"
    version = subprocess.run([str(exe), "--version"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=120, check=False)
    assert version.returncode == 0 and version.stdout.startswith("privpub "), version.stderr[-3000:]
    work = tmp_path / "work"
    work.mkdir()
    demo = subprocess.run([str(exe), "demo"], cwd=work, env={**env, "MPLBACKEND": "Agg"}, capture_output=True,
                          text=True, timeout=900, check=False)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
    assert (work / "privpub-results" / "demo" / "report.html").is_file()
    assert "internal error" not in demo.stderr and "Traceback" not in demo.stderr
