"""Make ``cli_inputs`` (the CLI tests' input files and valid invocations) importable; the ``inputs`` fixture."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_inputs import make_inputs


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    return make_inputs(tmp_path)
