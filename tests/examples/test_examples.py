"""Every script in examples/ runs to completion (in a subprocess, on built-in generated data)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))
#: modules an example needs besides privpub.core (by file stem)
NEEDS = {"core": ("privpub.ldp",)}


def test_there_is_an_example_per_part() -> None:
    stems = {p.stem for p in SCRIPTS}
    assert {"core", "histogram", "stream", "spatial", "decision", "ldp_synth"} <= stems


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_example_runs(script: Path, tmp_path: Path) -> None:
    for module in NEEDS.get(script.stem, (f"privpub.{script.stem}",)):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            pytest.skip(f"{script.name} needs {module}, which is not importable here: {exc}")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert proc.stdout.strip(), f"{script.name} printed nothing"
    assert "budget epsilon=" in proc.stdout, f"{script.name} should print a release's ledger"
