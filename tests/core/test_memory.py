"""check_allocation refuses sizes over the memory budget, before anything is allocated."""

from __future__ import annotations

import re

import pytest

from privpub.core import MEMORY_BUDGET_ENV, check_allocation, format_bytes, memory_budget
from privpub.errors import ParameterError


def test_within_budget_returns_the_bytes() -> None:
    assert check_allocation(1000, 8, "x", "--n", budget=8000) == 8000
    assert check_allocation(0, 8, "x", budget=1) == 0


@pytest.mark.parametrize(("n", "itemsize", "text"), [
    (10**12, 8, "the histogram would have 10^12 bins (8.0 TB), over the memory budget of 1.0 GB; lower --bins"),
    (3 * 10**12, 8, "the histogram would have 3,000,000,000,000 bins (24.0 TB)"),
    (float("inf"), 8, "the histogram would have unboundedly many bins (an unbounded amount)"),
    (2**200, 8, "bins ("),                      # Python ints do not overflow
])
def test_over_budget_names_size_bytes_and_option(n: float, itemsize: int, text: str) -> None:
    with pytest.raises(ParameterError, match=re.escape(text)):
        check_allocation(n, itemsize, "the histogram", "--bins", unit="bins", budget=10**9)


def test_negative_or_nan_sizes_are_errors() -> None:
    for bad in (-1, float("nan"), -0.5):
        with pytest.raises(ParameterError, match="must be >= 0"):
            check_allocation(bad, 8, "x", budget=10)


def test_budget_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for text, expected in (("1000", 1000), ("2K", 2048), ("1.5G", int(1.5 * 1024**3)), ("3MiB", 3 * 1024**2),
                           ("1e6", 10**6)):
        monkeypatch.setenv(MEMORY_BUDGET_ENV, text)
        assert memory_budget() == expected, text
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "50%")
    half = memory_budget()
    monkeypatch.delenv(MEMORY_BUDGET_ENV)
    assert memory_budget() == half > 0          # the default is half the machine's memory
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "100")
    with pytest.raises(ParameterError, match="over the memory budget of 100 B"):
        check_allocation(101, 1, "x")
    for bad in ("lots", "-5G", "0", "150%", "0%"):
        monkeypatch.setenv(MEMORY_BUDGET_ENV, bad)
        with pytest.raises(ParameterError, match=MEMORY_BUDGET_ENV):
            memory_budget()


def test_format_bytes() -> None:
    assert [format_bytes(v) for v in (0, 999, 1000, 2.5e9, 8e12)] == ["0 B", "999 B", "1.0 kB", "2.5 GB", "8.0 TB"]
