"""Shared machinery of the mutation harnesses (``test_epsilon_mutants.py``, ``test_structure_mutants.py``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import privpub

#: the package under test (the mutants copy it) and the repository whose tests run against the copy
SRC = Path(privpub.__file__).resolve().parent


@pytest.fixture(scope="session")
def pristine_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the package per test process, reused by every mutant that process runs.

    Numba's on-disk caches (``__pycache__/*.nbi``, ``*.nbc``) are copied with the sources and
    stay valid because ``copy2`` keeps the files' modification times; a mutant changes one module,
    which is restored byte for byte (and time stamp) afterwards, so the compiled kernels of the
    other modules are not rebuilt for every mutant. Bytecode (``*.pyc``) is not copied.
    """
    root = tmp_path_factory.mktemp("pristine")
    shutil.copytree(SRC, root / "privpub", ignore=shutil.ignore_patterns("*.pyc"))
    # the tests of a mutant must import the copy, not the installed package
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", "import privpub; print(privpub.__file__)"], env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    assert Path(out).resolve().is_relative_to(root.resolve()), out
    return root
