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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Spark tests share one JVM: they all run on one xdist worker (``--dist loadgroup``)."""
    for item in items:
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local Spark session (``local[2]``, UI off, bound to 127.0.0.1) for the whole run.

    Spark tests are marked ``spark``; without the ``privpub[spark]`` extra they are skipped
    (CI installs the extra, so there they run).
    """
    if not os.environ.get("CI"):  # on CI the extra is installed: a missing PySpark must fail, not skip
        pytest.importorskip("pyspark", reason="the privpub[spark] extra is not installed")
    from privpub.spark import local_session

    session = local_session(2, app_name="privpub-tests", shuffle_partitions=2)
    yield session
    session.stop()
