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


#: skips the README's test command may show on CI (everything it lists must run: ``CI`` turns any other
#: skip into a failure). The full audit tier is run on demand (README), and a doctest whose examples
#: are all marked +SKIP (they need a running service) has nothing to run.
CI_ALLOWED_SKIPS = (
    "full audit tier",
    "all tests skipped by +SKIP option",
)


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail_skip_on_ci(report: pytest.CollectReport | pytest.TestReport) -> None:
    """On CI (``CI`` set), a skip the README does not allow becomes a failure naming its reason."""
    if not os.environ.get("CI") or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if any(allowed in reason for allowed in CI_ALLOWED_SKIPS):
        return
    report.outcome = "failed"
    report.longrepr = (f"skipped on CI: {reason}\nThe README says the test command runs this test; install what "
                       "it needs in .ci/run (or add the reason to CI_ALLOWED_SKIPS in tests/conftest.py and say "
                       "so in the README).")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    _fail_skip_on_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):  # type: ignore[no-untyped-def]
    outcome = yield
    _fail_skip_on_ci(outcome.get_result())


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
