"""``exponential_mechanism_ranges``: the exponential mechanism over integers whose scores are constant on ranges."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from statutils import chisquare_pvalue, max_ratio_lower_bound

from privpub.core import Accountant, exponential_mechanism_probabilities, exponential_mechanism_ranges
from privpub.errors import BudgetExceededError, DomainError, ParameterError

STARTS = np.array([7, 1, 4])
STOPS = np.array([10, 4, 7])  # ranges [7,10), [1,4), [4,7): the integers 1..9
SCORES = np.array([2.0, 0.0, 5.0])


def _per_integer(scores: np.ndarray) -> np.ndarray:
    u = np.empty(9)
    for lo, hi, s in zip(STARTS, STOPS, scores):
        u[lo - 1 : hi - 1] = s
    return u


@pytest.mark.statistical
@pytest.mark.parametrize("monotone", [False, True])
def test_matches_the_exponential_mechanism_over_every_integer(monotone) -> None:
    gen = np.random.default_rng(0)
    draws = np.array([exponential_mechanism_ranges(STARTS, STOPS, SCORES, epsilon=0.8, monotone=monotone, rng=gen)
                      for _ in range(20_000)])
    assert draws.min() >= 1 and draws.max() <= 9
    want = exponential_mechanism_probabilities(_per_integer(SCORES), epsilon=0.8, monotone=monotone)
    assert chisquare_pvalue(np.bincount(draws - 1, minlength=9), want) > 1e-3


@pytest.mark.statistical
def test_neighbour_ratio_within_epsilon_and_doubled_epsilon_detected() -> None:
    """The worst case of the exponential mechanism: integer 1 gains one point while 2..9 lose one
    (exact ln-ratio of P[1]: 1.75 at epsilon 2, 3.36 at epsilon 4). The cut into ranges differs
    between the two inputs; only the law over the integers counts. Two-sided Clopper-Pearson bounds
    on every integer's probability ratio."""
    def draws(starts, stops, scores, eps, seed):
        gen = np.random.default_rng(seed)
        return np.array([exponential_mechanism_ranges(starts, stops, scores, epsilon=eps, rng=gen)
                         for _ in range(8_000)])

    d = ([1, 2, 5], [2, 5, 10], [0.0, 1.0, 1.0])
    d_nb = ([1, 2], [2, 10], [1.0, 0.0])
    assert max_ratio_lower_bound(draws(*d, 2.0, 1), draws(*d_nb, 2.0, 2), 1e-3) <= math.e**2.0
    assert max_ratio_lower_bound(draws(*d, 4.0, 3), draws(*d_nb, 4.0, 4), 1e-3) > math.e**2.0


def test_huge_ranges_charge_once() -> None:
    acc = Accountant(1.0)
    with acc:
        x = exponential_mechanism_ranges([0, 10**15], [10**15, 2 * 10**15], [0.0, 1000.0], epsilon=0.5,
                                         sensitivity=2.0, rng=1, note="split")
    assert 10**15 <= x < 2 * 10**15
    (entry,) = acc.seal()
    assert (entry.mechanism, entry.epsilon, entry.sensitivity, entry.note) == ("exponential_mechanism", 0.5, 2.0,
                                                                               "split")
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        exponential_mechanism_ranges([0], [5], [1.0], epsilon=2.0, rng=gen, accountant=Accountant(1.0))
    assert gen.bit_generator.state == state


@pytest.mark.parametrize(("args", "error", "message"), [
    (([0, 3], [3, 5], [1.0]), ParameterError, "starts, stops and scores must have the same length"),
    (([0, 2], [3, 5], [1.0, 2.0]), ParameterError, "the ranges must be pairwise disjoint"),
    (([0, 3], [0, 5], [1.0, 2.0]), ParameterError, "every range must be non-empty"),
    (([0.5, 3], [3, 5], [1.0, 2.0]), ParameterError, "starts must be integers"),
    (([0, 3], [3, 5], [1.0, float("nan")]), DomainError, "scores must be finite"),
])
def test_bad_input_is_refused(args, error, message) -> None:
    with pytest.raises(error, match=re.escape(message)):
        exponential_mechanism_ranges(*args, epsilon=1.0, rng=0)
