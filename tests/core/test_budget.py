from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privpub.core import Budget, BudgetLedger, split
from privpub.errors import BudgetExceededError, LedgerFrozenError, ParameterError


@given(
    eps=st.floats(min_value=1e-6, max_value=100.0),
    weights=st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=12),
)
def test_split_sums_to_epsilon_and_is_proportional(eps: float, weights: list[float]) -> None:
    parts = split(eps, weights)
    assert len(parts) == len(weights)
    assert math.isclose(math.fsum(parts), eps, rel_tol=1e-12)
    total = math.fsum(weights)
    for p, w in zip(parts[:-1], weights[:-1]):
        assert math.isclose(p, eps * w / total, rel_tol=1e-12)


@given(eps=st.floats(min_value=1e-6, max_value=100.0), k=st.integers(1, 20))
def test_ledger_spending_a_split_never_overspends(eps: float, k: int) -> None:
    ledger = BudgetLedger(eps)
    for i, part in enumerate(split(eps, [1.0] * k)):
        ledger.spend(f"step {i}", "laplace", part)
    assert ledger.is_exhausted()
    assert math.isclose(ledger.total, eps, rel_tol=1e-12)


def test_sequential_sums_and_parallel_counts_once() -> None:
    ledger = BudgetLedger(1.0)
    ledger.spend("sort", "laplace", 0.5)
    ledger.spend("means", "laplace", 0.5, composition="parallel", parts=10)
    assert ledger.total == 1.0
    frame = ledger.to_frame()
    assert list(frame["composition"]) == ["sequential", "parallel"]
    assert list(frame["parts"]) == [1, 10]
    assert "over 10 disjoint parts" in str(ledger)


def test_overspend_raises_with_numbers() -> None:
    ledger = BudgetLedger(1.0)
    ledger.spend("a", "laplace", 0.7)
    with pytest.raises(BudgetExceededError, match=re.escape("over the budget epsilon=1")):
        ledger.spend("b", "laplace", 0.4)
    assert ledger.total == 0.7  # the refused step was not recorded


def test_spend_rest_and_frozen_ledger() -> None:
    ledger = BudgetLedger(0.3)
    ledger.spend("a", "laplace", 0.1)
    ledger.spend_rest("b", "laplace")
    assert ledger.total == pytest.approx(0.3, rel=1e-15)
    frozen = ledger.freeze()
    assert frozen.frozen and not ledger.frozen
    with pytest.raises(LedgerFrozenError):
        frozen.spend("c", "laplace", 0.01)
    with pytest.raises(BudgetExceededError):
        ledger.spend_rest("c", "laplace")


def test_bad_budget_inputs() -> None:
    with pytest.raises(ParameterError, match=re.escape("epsilon must be finite and > 0, got -1.0")):
        Budget(-1.0)
    with pytest.raises(ParameterError, match="weights must all be > 0"):
        split(1.0, [1.0, 0.0])
    with pytest.raises(ParameterError, match="weights must not be empty"):
        split(1.0, [])
    with pytest.raises(ParameterError, match="composition"):
        BudgetLedger(1.0).spend("a", "laplace", 0.1, composition="advanced")
    assert BudgetLedger(Budget(2.0)).epsilon == 2.0  # type: ignore[arg-type]


def _spent(text: str) -> float:
    return float(re.search(r"spent ([0-9.e+-]+|inf)", text).group(1))  # type: ignore[union-attr]


def test_explain_states_the_composed_total_and_why() -> None:
    from privpub.core import Accountant, discrete_laplace

    # eight disjoint user groups at 0.5 each: 0.5, not 4 (the issue-21 KDG-HT ledger)
    with Accountant(0.5) as acc:
        with acc.parallel("disjoint user groups") as block:
            for g in range(8):
                with block.branch(f"U^{g}"):
                    discrete_laplace([3], epsilon=0.5, rng=g, note=f"{g + 10} users")
        ledger = acc.seal()
    text = ledger.explain()
    assert _spent(text) == ledger.total == 0.5
    assert "costliest branch" in text and "not the sum of its entries (4)" in text
    assert str(ledger).startswith("budget epsilon=0.5, spent 0.5:")
    # sequential steps add; a block of branches that each run two steps costs one branch's two steps
    with Accountant(1.0) as acc:
        with acc.step("structure"):
            discrete_laplace([3], epsilon=0.25, rng=0)
        with acc.parallel("trees") as block:
            for g in range(3):
                with block.branch(f"tree {g}"), acc.step("level"):
                    discrete_laplace([1], epsilon=0.25, rng=g)
                    discrete_laplace([1], epsilon=0.25, rng=g)
        ledger = acc.seal()
    text = ledger.explain()
    assert math.isclose(_spent(text), ledger.total) and math.isclose(ledger.total, 0.75)
    assert "0.25 (structure) + 0.5 (trees)" in text and "2 steps in sequence" in text
    assert "0.25 of the budget left unspent" in text
    # without blocks, the steps simply add
    led = BudgetLedger(1.0)
    led.spend("a", "laplace", 0.5)
    led.spend("a", "laplace", 0.5)
    assert led.explain() == "spent 1 = 2 x 0.5 (a): sequential steps add up"
