"""Every local randomiser charges the accountant for its users' reports as it draws."""

from __future__ import annotations

import numpy as np
import pytest

from privpub.core import Accountant
from privpub.errors import BudgetExceededError
from privpub.ldp import GRR, OLH, OUE, SUE

ORACLES = [GRR(domain_size=5), OLH(domain_size=5), OUE(domain_size=5), SUE(domain_size=5)]
VALUES = np.array([0, 1, 4, 4, 2])


@pytest.mark.parametrize("oracle", ORACLES, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("path", ["perturb", "simulate", "simulate_support"])
def test_oracle_paths_charge_once(oracle: object, path: str) -> None:
    with Accountant(1.0) as acc:
        if path == "perturb":
            oracle.perturb(VALUES, epsilon=0.75, rng=0)  # type: ignore[attr-defined]
        else:
            getattr(oracle, path)(np.bincount(VALUES, minlength=5), epsilon=0.75, rng=0)
    (entry,) = acc.seal()
    assert (entry.mechanism, entry.epsilon) == (type(oracle).__name__, 0.75)
    assert "5 users" in entry.note


@pytest.mark.parametrize("oracle", ORACLES, ids=lambda o: type(o).__name__)
def test_oracle_refuses_to_draw_over_budget(oracle: object) -> None:
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    with Accountant(0.5), pytest.raises(BudgetExceededError):
        oracle.perturb(VALUES, epsilon=0.75, rng=gen)  # type: ignore[attr-defined]
    assert gen.bit_generator.state == state


def test_sue_with_flip_probability_charges_its_epsilon() -> None:
    sue = SUE(domain_size=5, f=0.5)
    with Accountant(10.0) as acc:
        sue.perturb(VALUES, rng=0)
    assert acc.total == pytest.approx(sue.effective_epsilon(None))
