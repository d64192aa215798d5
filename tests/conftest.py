"""Shared fixtures: a seeded Generator and the data directory."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

# make tests/statutils.py importable as ``statutils`` from every test module
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real datasets (``$PRIVPUB_DATA``, else ../shared/datasets); tests skip when absent."""
    env = os.environ.get("PRIVPUB_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if not path.is_dir():
        pytest.skip(f"real datasets not found at {path}; set PRIVPUB_DATA")
    return path
