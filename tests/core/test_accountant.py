"""The accountant: mechanisms charge it as they draw; the release's ledger is its sealed record."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from privpub.core import (
    Accountant,
    Charge,
    Session,
    accounting,
    active_accountant,
    discrete_laplace,
    discrete_laplace_noise,
    exponential_mechanism,
    laplace,
    laplace_noise,
    report_noisy_max,
)
from privpub.errors import BudgetExceededError, LedgerFrozenError, ParameterError, PrivpubError

MECHANISMS = {
    "laplace": lambda eps, acc=None, rng=0: laplace([1.0, 2.0], epsilon=eps, rng=rng, accountant=acc),
    "laplace_noise": lambda eps, acc=None, rng=0: laplace_noise(3, epsilon=eps, rng=rng, accountant=acc),
    "discrete_laplace": lambda eps, acc=None, rng=0: discrete_laplace([1, 2], epsilon=eps, rng=rng, accountant=acc),
    "discrete_laplace_noise": lambda eps, acc=None, rng=0: discrete_laplace_noise(3, epsilon=eps, rng=rng,
                                                                                  accountant=acc),
    "exponential_mechanism": lambda eps, acc=None, rng=0: exponential_mechanism([1.0, 2.0], epsilon=eps, rng=rng,
                                                                               accountant=acc),
    "report_noisy_max": lambda eps, acc=None, rng=0: report_noisy_max([1.0, 2.0], epsilon=eps, rng=rng,
                                                                     accountant=acc),
}
RECORDED = {"laplace_noise": "laplace", "discrete_laplace_noise": "discrete_laplace"}


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_every_mechanism_charges_the_active_accountant_once(name: str) -> None:
    with Accountant(1.0) as acc:
        MECHANISMS[name](0.25)
    ledger = acc.seal()
    assert [(e.mechanism, e.epsilon) for e in ledger] == [(RECORDED.get(name, name), 0.25)]
    assert ledger.entries[0].sensitivity == 1.0
    assert acc.n_charges == 1


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_explicit_accountant_and_no_accountant(name: str) -> None:
    explicit = Accountant(1.0)
    with Accountant(1.0) as active:
        MECHANISMS[name](0.5, explicit)
    assert explicit.total == 0.5 and active.total == 0.0
    MECHANISMS[name](0.5)  # no accountant anywhere: a direct call is the caller's own accounting
    assert active_accountant() is None


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_overspending_charge_raises_before_drawing(name: str) -> None:
    gen = np.random.default_rng(5)
    state = gen.bit_generator.state
    with Accountant(1.0) as acc:
        MECHANISMS[name](0.75)
        with pytest.raises(BudgetExceededError, match="over its declared epsilon=1; nothing was drawn"):
            MECHANISMS[name](0.5, rng=gen)
    assert acc.total == 0.75
    assert gen.bit_generator.state == state  # the refused mechanism drew nothing


def test_overspend_leaves_the_generator_untouched() -> None:
    gen = np.random.default_rng(5)
    state = gen.bit_generator.state
    with Accountant(0.1), pytest.raises(BudgetExceededError):
        discrete_laplace_noise(1000, epsilon=0.2, rng=gen)
    assert gen.bit_generator.state == state


def test_parallel_block_costs_its_costliest_branch_and_groups_kinds() -> None:
    acc = Accountant(1.0)
    with acc:
        discrete_laplace([1], epsilon=0.25, rng=0)
        with acc.parallel("roles") as block:
            for i in range(5):
                with block.branch(f"group {i}"):
                    discrete_laplace([1], epsilon=0.5, rng=i)
            with block.branch("two-phase"):
                discrete_laplace([1], epsilon=0.375, rng=0)
                discrete_laplace([1], epsilon=0.375, rng=1)
    assert acc.total == pytest.approx(1.0)
    ledger = acc.seal()
    assert ledger.total == pytest.approx(1.0)
    kinds = [(e.branch, e.parts, e.epsilon) for e in ledger if e.composition == "parallel"]
    assert kinds == [("group 0, group 1, ... (5 parts)", 5, 0.5), ("two-phase", 1, 0.375),
                     ("two-phase", 1, 0.375)]


def test_a_branch_over_budget_is_refused() -> None:
    acc = Accountant(1.0)
    with acc, acc.parallel("roles") as block:
        with block.branch("a"):
            discrete_laplace([1], epsilon=1.0, rng=0)
        with block.branch("b"):
            discrete_laplace([1], epsilon=0.5, rng=0)
            with pytest.raises(BudgetExceededError, match="in parallel block 'roles'"):
                discrete_laplace([1], epsilon=0.75, rng=0)
    assert acc.total == pytest.approx(1.0)


def test_charge_inside_a_block_but_outside_a_branch_is_an_error() -> None:
    acc = Accountant(1.0)
    with acc, acc.parallel("roles"), pytest.raises(PrivpubError, match="outside any of its branches"):
        discrete_laplace([1], epsilon=0.5, rng=0)


def test_bulk_branches() -> None:
    acc = Accountant(2.0)
    block = acc.open_parallel("trees")
    block.charge_branches(10_000, [Charge("discrete_laplace", 0.5, 1.0, step="level 0"),
                                   Charge("discrete_laplace", 0.5, 1.0, step="level 1")], name="height 2")
    block.charge_branches(3, [Charge("discrete_laplace", 1.0, 1.0)], name="height 1")
    assert acc.total == 1.0
    with pytest.raises(BudgetExceededError):
        block.charge_branches(1, [Charge("laplace", 2.5)])
    ledger = acc.snapshot()
    assert [(e.parts, e.epsilon) for e in ledger] == [(10_000, 0.5), (10_000, 0.5), (3, 1.0)]
    assert acc.n_charges == 20_003


def test_sealed_ledger_refuses_later_draws() -> None:
    with Accountant(1.0) as acc:
        discrete_laplace([1], epsilon=0.5, rng=0)
        ledger = acc.seal()
        with pytest.raises(LedgerFrozenError, match="sealed"):
            discrete_laplace([1], epsilon=0.1, rng=0)
    assert ledger.frozen and ledger.total == 0.5


def test_leak_only_in_non_private_runs() -> None:
    with pytest.raises(PrivpubError, match="declared private"):
        Accountant(1.0).leak("sort", "true order")
    acc = Accountant(1.0, private=False)
    acc.leak("sort", "true order")
    acc.charge("laplace", 1.0)
    assert acc.total == math.inf and acc.seal().total == math.inf


def test_step_labels() -> None:
    with Accountant(1.0) as acc:
        with acc.step("structure"):
            laplace_noise(2, epsilon=0.5, rng=0, note="the counts")
        laplace_noise(2, epsilon=0.5, rng=0)
    assert [(e.step, e.note) for e in acc.seal()] == [("structure", "the counts"), ("laplace", "")]


def test_accounting_requires_a_sealed_ledger() -> None:
    with pytest.raises(PrivpubError, match="without sealing"), accounting(1.0, method="m"):
        discrete_laplace([1], epsilon=0.5, rng=0)


def test_nested_release_is_charged_to_the_outer_accountant() -> None:
    from privpub.histogram import LaplaceHistogram

    with Accountant(1.0) as outer:
        LaplaceHistogram().publish([3, 4], epsilon=0.75, rng=0)
        with pytest.raises(BudgetExceededError):
            LaplaceHistogram().publish([3, 4], epsilon=0.5, rng=0)
    assert [(e.mechanism, e.epsilon) for e in outer.seal()] == [("laplace", 0.75)]


def test_accounting_with_session_returns_the_reservation_when_nothing_was_drawn() -> None:
    session = Session(total_epsilon=1.0)
    with pytest.raises(ValueError, match="boom"), accounting(0.5, method="m", session=session):
        raise ValueError("boom")
    assert session.spent == 0.0 and session.charges[0].status == "returned"
    with pytest.raises(ValueError, match="boom"), accounting(0.5, method="m", session=session):
        discrete_laplace([1], epsilon=0.5, rng=0)
        raise ValueError("boom")
    assert session.spent == 0.5 and session.charges[1].status == "spent"


def test_non_private_runs_are_refused_under_a_session() -> None:
    with pytest.raises(ParameterError, match=re.escape("not differentially private")), accounting(
        1.0, method="optimal", session=Session(total_epsilon=5.0), private=False
    ):
        pass


def test_bad_accountant_argument() -> None:
    with pytest.raises(ParameterError, match=re.escape("accountant must be a privpub.core.Accountant")):
        discrete_laplace([1], epsilon=0.5, rng=0, accountant="ledger")  # type: ignore[arg-type]
