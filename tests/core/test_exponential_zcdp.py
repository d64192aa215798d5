"""``exponential_mechanism_zcdp``: the exponential mechanism at ``epsilon = sqrt(8 rho)``, charged as rho."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privpub.core import Accountant, exponential_mechanism_probabilities, exponential_mechanism_zcdp
from privpub.errors import ParameterError


def test_charges_rho_under_zcdp_and_refuses_pure_dp() -> None:
    with Accountant(0.3, measure="zcdp") as acc:
        exponential_mechanism_zcdp([0.0, 1.0], rho=0.125, rng=0)
    assert acc.total == pytest.approx(0.125) and acc.measure == "zcdp"
    with Accountant(1.0) as pure, pytest.raises(ParameterError):  # an epsilon is never added to a rho
        exponential_mechanism_zcdp([0.0, 1.0], rho=0.125, rng=0)
    assert pure.n_charges == 0


@pytest.mark.statistical
def test_distribution_is_the_exponential_mechanism_at_sqrt_8_rho() -> None:
    scores = np.array([0.0, 1.0, 3.0])
    rho = 0.5  # epsilon = 2
    p = exponential_mechanism_probabilities(scores, epsilon=math.sqrt(8 * rho), sensitivity=1.0)
    gen = np.random.default_rng(0)
    n = 20_000
    draws = np.array([exponential_mechanism_zcdp(scores, rho=rho, rng=gen) for _ in range(n)])
    freq = np.bincount(draws, minlength=3) / n
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n))
