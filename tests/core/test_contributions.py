"""suggest_max_contributions: a DP quantile of the rows per person, charged at the person level."""

from __future__ import annotations

import numpy as np
import pytest

from privpub import BudgetExceededError, ParameterError, PrivacyUnit, Session
from privpub.core import exponential_mechanism_probabilities, suggest_max_contributions
from privpub.core._contributions import quantile_scores


def _ids(rows):
    return np.repeat(np.arange(len(rows)), rows)


def test_suggestion_is_near_the_quantile_and_charges_its_epsilon():
    rows = np.random.default_rng(0).geometric(0.25, size=3000)
    truth = int(np.quantile(rows, 0.9, method="inverted_cdf"))
    picks = [suggest_max_contributions(_ids(rows), epsilon=0.5, upper=100, rng=s) for s in range(10)]
    assert all(abs(p.max_contributions - truth) <= 1 for p in picks)
    ledger = picks[0].ledger
    assert ledger.total == pytest.approx(0.5)
    assert ledger.unit.same_protection(PrivacyUnit.person("privacy_id", 7))


def test_suggestion_reserves_in_a_person_level_session():
    session = Session(total_epsilon=1.0)
    ids = _ids([1, 2, 3, 30] * 50)
    suggestion = suggest_max_contributions(ids, epsilon=0.4, rng=0, session=session, column="user")
    assert session.spent == pytest.approx(0.4)
    # it composes with a person-level release on the same column at any k
    from privpub.histogram import LaplaceHistogram

    LaplaceHistogram().publish([3, 4], epsilon=0.6, rng=0, session=session,
                               privacy_unit=PrivacyUnit.person("user", suggestion.max_contributions))
    assert session.spent == pytest.approx(1.0)
    with pytest.raises(BudgetExceededError):
        suggest_max_contributions(ids, epsilon=0.1, rng=0, session=session, column="user")


def test_rank_utility_has_sensitivity_one_per_person():
    """Exact output distributions of two neighbours (one person, with many rows, removed) stay
    within e^epsilon; the negative control (the utility of rows, not people) does not."""
    eps, upper = 1.0, 12
    rows = np.array([1, 1, 2, 3, 3, 4, 6, 9])
    neighbour = np.r_[rows, 50]  # a person with 50 rows, clipped to upper

    def scores(r, q=0.9):
        return quantile_scores(r, q, upper)

    p = exponential_mechanism_probabilities(scores(rows), epsilon=eps)
    p2 = exponential_mechanism_probabilities(scores(neighbour), epsilon=eps)
    assert np.max(np.abs(np.log(p / p2))) <= eps + 1e-12
    for q in (0.1, 0.5, 0.9, 1.0):  # every score moves by at most 1 when one person is added
        for extra in range(1, upper + 3):
            assert np.max(np.abs(scores(np.r_[rows, extra], q) - scores(rows, q))) <= 1.0 + 1e-12

    def row_scores(r, q=0.9):  # rows-weighted rank: one person moves it by their row count
        values = np.repeat(np.arange(r.size), np.minimum(r, upper))
        ranks = np.array([np.sum(np.minimum(r, upper)[values] <= k) for k in range(1, upper + 1)])
        return -np.abs(ranks - q * values.size)

    c = exponential_mechanism_probabilities(row_scores(rows), epsilon=eps)
    c2 = exponential_mechanism_probabilities(row_scores(neighbour), epsilon=eps)
    assert np.max(np.abs(np.log(c / c2))) > eps


@pytest.mark.parametrize("kwargs, param", [
    ({"epsilon": 0.0}, "epsilon"),
    ({"epsilon": 1.0, "quantile": 0.0}, "quantile"),
    ({"epsilon": 1.0, "upper": 0}, "upper"),
    ({"epsilon": 1.0, "upper": 10**7}, "upper"),
])
def test_bad_arguments_name_the_parameter(kwargs, param):
    with pytest.raises(ParameterError) as info:
        suggest_max_contributions([1, 1, 2], rng=0, **kwargs)
    assert info.value.param == param


def test_empty_or_missing_ids_are_refused_before_any_reservation():
    session = Session(total_epsilon=1.0)
    for ids in ([], [1, None]):
        with pytest.raises(ParameterError) as info:
            suggest_max_contributions(ids, epsilon=0.5, rng=0, session=session)
        assert info.value.param == "privacy_ids"
    assert not session.charges
