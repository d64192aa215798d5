"""Client side: conversions, one-hot blocks, flip rates and the exact LDP guarantee (spec 7.1-7.3)."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privpub.core import CategoricalAttribute, Schema
from privpub.errors import DomainError, ParameterError
from privpub.ldp import SUE
from privpub.ldp_synth import (
    LDPReports,
    encode,
    epsilon_from_f,
    f_from_epsilon,
    perturb_codes,
    simulate_clients,
)


def test_conversions_round_trip_and_table() -> None:
    for f in (0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99):
        for d in (1, 15, 16):
            assert abs(f_from_epsilon(epsilon_from_f(f, d), d) - f) < 1e-12
    assert round(epsilon_from_f(0.5, 16), 4) == 35.1556
    assert round(epsilon_from_f(0.1, 1), 3) == 5.889
    assert round(epsilon_from_f(0.9, 24), 2) == 9.63


@pytest.mark.parametrize("f", [0.0, 1.0, -0.1, 1.5, float("nan"), float("inf")])
def test_invalid_flip_prob(f: float) -> None:
    with pytest.raises(ParameterError, match=r"f must|must be finite"):
        epsilon_from_f(f, 3)


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_invalid_epsilon(eps: float) -> None:
    with pytest.raises(ParameterError, match="epsilon must be finite and > 0"):
        f_from_epsilon(eps, 3)


def test_encode_one_hot_blocks() -> None:
    codes = np.array([[0, 2, 1], [1, 0, 3]])
    bits = encode(codes, [2, 3, 4])
    assert bits.shape == (2, 9)
    np.testing.assert_array_equal(bits[0], [1, 0, 0, 0, 1, 0, 1, 0, 0])
    np.testing.assert_array_equal(bits[1], [0, 1, 1, 0, 0, 0, 0, 0, 1])
    with pytest.raises(DomainError, match=re.escape("codes of attribute 1 must hold integer codes in [0, 2]")):
        encode([[0, 3]], [2, 3])


def _exact_output_probabilities(sizes: tuple[int, ...], p: float, q: float) -> tuple[np.ndarray, list]:
    """P(o | x) for every record x (rows) and every L-bit output o (columns), by enumeration."""
    inputs = list(itertools.product(*[range(s) for s in sizes]))
    s_bits = encode(np.array(inputs), sizes).astype(bool)  # (n_inputs, L)
    width = s_bits.shape[1]
    outs = np.array(list(itertools.product([0, 1], repeat=width)), dtype=bool)  # (2^L, L)
    same = s_bits[:, None, :] == outs[None, :, :]
    probs = np.prod(np.where(same, p, q), axis=2)
    return probs, inputs


def test_exact_ldp_by_enumeration() -> None:
    """Schema (2, 3): all 32 outputs x 6 inputs; the max log-ratio equals the stated epsilon."""
    f = 0.3
    sizes = (2, 3)
    p, q = SUE(domain_size=2, f=f).probabilities()  # the mechanism's realised probabilities
    assert abs(q - f / 2) < 2**-31
    probs, inputs = _exact_output_probabilities(sizes, p, q)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    log_p = np.log(probs)
    ratios = log_p[:, None, :] - log_p[None, :, :]
    stated = epsilon_from_f(f, len(sizes))
    realised = float(ratios.max())
    assert realised <= stated * (1 + 1e-12)
    assert math.isclose(realised, stated, rel_tol=1e-8)  # tight: attained
    assert math.isclose(realised, 4 * math.log(p / q), rel_tol=1e-12)
    # neighbours differing in one attribute: the per-attribute epsilon
    one_diff = np.array([[sum(a != b for a, b in zip(x, y)) == 1 for y in inputs] for x in inputs])
    assert math.isclose(float(ratios[one_diff].max()), epsilon_from_f(f, 1), rel_tol=1e-8)


@pytest.mark.statistical
def test_reports_match_exact_probabilities() -> None:
    """Chi-square of 2e5 simulated reports of one record against the enumerated P(o|x).

    With half the noise (flip probability f/2) this test fails decisively (checked below)."""
    f, sizes, record = 0.3, (2, 3), (1, 2)
    p, q = SUE(domain_size=2, f=f).probabilities()
    probs, inputs = _exact_output_probabilities(sizes, p, q)
    expected = probs[inputs.index(record)]
    n = 200_000
    codes = np.tile(np.array(record), (n, 1))
    weights = 1 << np.arange(4, -1, -1)

    def observed(flip: float) -> np.ndarray:
        bits = perturb_codes(codes, sizes, flip_prob=flip, rng=7).bits
        return np.bincount(bits.astype(np.int64) @ weights, minlength=32)

    assert stats.chisquare(observed(f), expected * n).pvalue > 1e-3
    assert stats.chisquare(observed(f / 2), expected * n).pvalue < 1e-12


@pytest.mark.statistical
def test_flip_rate_per_bit() -> None:
    f, n = 0.4, 100_000
    codes = np.zeros((n, 2), dtype=np.int64)
    bits = perturb_codes(codes, (3, 2), flip_prob=f, rng=3).bits
    truth = encode(codes[:1], (3, 2))[0].astype(bool)
    rate = (bits != truth).mean(axis=0)
    sigma = math.sqrt(f / 2 * (1 - f / 2) / n)
    assert np.all(np.abs(rate - f / 2) < 5 * sigma)


def test_simulate_clients_and_reports_metadata() -> None:
    schema = Schema([CategoricalAttribute("a", ["x", "y"]), CategoricalAttribute("b", ["u", "v", "w"])])
    df = pd.DataFrame({"a": ["x", "y", "y"], "b": ["w", "u", "v"]})
    rep = simulate_clients(df, schema, epsilon=6.0, rng=0)
    assert rep.bits.shape == (3, 5) and rep.bits.dtype == bool
    assert math.isclose(rep.epsilon, 6.0, rel_tol=1e-12)
    assert rep.names == ("a", "b") and rep.sizes == (2, 3)
    again = simulate_clients(df, schema, epsilon=6.0, rng=0)
    np.testing.assert_array_equal(rep.bits, again.bits)  # determinism
    with pytest.raises(ParameterError, match="exactly one of epsilon"):
        simulate_clients(df, schema, epsilon=1.0, flip_prob=0.5)
    with pytest.raises(ParameterError, match="exactly one of epsilon"):
        simulate_clients(df, schema)


def test_bad_client_input() -> None:
    schema = Schema([CategoricalAttribute("a", ["x", "y"]), CategoricalAttribute("b", ["u", "v", "w"])])
    with pytest.raises(DomainError, match=re.escape("values outside its declared categories: ['z']")):
        simulate_clients(pd.DataFrame({"a": ["x", "z"], "b": ["u", "u"]}), schema, flip_prob=0.5)
    with pytest.raises(DomainError, match=re.escape("columns without a declared domain: ['c']")):
        simulate_clients(pd.DataFrame({"a": ["x"], "b": ["u"], "c": [1]}), schema, flip_prob=0.5)
    with pytest.raises(DomainError, match="missing values"):
        simulate_clients(pd.DataFrame({"a": ["x", None], "b": ["u", "u"]}), schema, flip_prob=0.5)
    with pytest.raises(ParameterError, match=re.escape("flip_prob must be in (0, 1), got 1.0")):
        simulate_clients(pd.DataFrame({"a": ["x"], "b": ["u"]}), schema, flip_prob=1.0)


def test_reports_validation() -> None:
    with pytest.raises(ParameterError, match=re.escape("reports must have shape (n_users, 5)")):
        LDPReports(np.zeros((4, 6), dtype=bool), (2, 3), 0.5)
    with pytest.raises(ParameterError, match="0/1 bits"):
        LDPReports(np.full((4, 5), 2), (2, 3), 0.5)
    with pytest.raises(ParameterError, match="must not be empty"):
        LDPReports(np.zeros((0, 5), dtype=bool), (2, 3), 0.5)
    rep = LDPReports(np.ones((2, 5), dtype=np.int64), (2, 3), 0.5)
    assert rep.bits.dtype == bool and not rep.bits.flags.writeable
