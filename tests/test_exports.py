"""The public surface is curated: every package's ``__all__`` is sorted and importable."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["privpub", "privpub.core", "privpub.ldp", "privpub.errors", "privpub.metrics", "privpub.datasets",
            "privpub.histogram", "privpub.ldp_synth", "privpub.spatial", "privpub.decision", "privpub.stream",
            "privpub.audit", "privpub.service", "privpub.client", "privpub.spark"]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError:
        pytest.skip(f"{name} is not built yet")
    exported = getattr(module, "__all__", None)
    if exported is None:
        pytest.skip(f"{name} has no public surface yet")
    assert list(exported) == sorted(exported)
    for item in exported:
        assert hasattr(module, item), f"{name}.{item} is listed in __all__ but missing"


def test_core_api_names() -> None:
    from privpub.core import (  # noqa: F401
        Budget,
        CategoricalAttribute,
        NumericAttribute,
        Schema,
        discrete_laplace,
        exponential_mechanism,
        laplace,
        report_noisy_max,
    )
    from privpub.ldp import GRR, OLH, OUE, SUE  # noqa: F401
