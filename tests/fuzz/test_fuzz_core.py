"""Fuzzing the core: mechanisms, validation, budget and domains with malformed inputs.

Only privpub errors may escape; non-finite input must be rejected, never silently dropped; a
successful call returns one output per input.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fuzz_strategies import FUZZ, arrays, call, epsilons, has_non_finite, mostly, rngs, scalars
from hypothesis import given
from hypothesis import strategies as st

from privpub import core


@FUZZ
@given(values=mostly(st.lists(st.integers(-5, 50), max_size=6), arrays()), epsilon=epsilons(),
       sensitivity=mostly(st.sampled_from([1, 2.0, 0.5]), scalars()), rng=rngs())
def test_laplace(values, epsilon, sensitivity, rng) -> None:
    ok, out = call(lambda: core.laplace(values, epsilon=epsilon, sensitivity=sensitivity, rng=rng))
    if ok:
        assert not has_non_finite(values)
        assert np.shape(out) == np.shape(np.asarray(values))
        if float(sensitivity) / float(epsilon) < 1e300:  # known issue: an infinite scale gives inf
            assert np.all(np.isfinite(out))


@FUZZ
@given(values=mostly(st.lists(st.integers(-5, 50), max_size=6), arrays()), epsilon=epsilons(),
       sensitivity=mostly(st.sampled_from([1, 2.0, 0.5]), scalars()), rng=rngs())
def test_discrete_laplace(values, epsilon, sensitivity, rng) -> None:
    ok, out = call(lambda: core.discrete_laplace(values, epsilon=epsilon, sensitivity=sensitivity, rng=rng),
                   known="core.discrete_laplace")
    if ok:
        assert not has_non_finite(values)
        assert np.shape(out) == np.shape(np.asarray(values))
        assert np.asarray(out).dtype.kind == "i"


@pytest.mark.parametrize("discrete", [True, False])
@FUZZ
@given(shape=st.one_of(st.integers(-3, 40), st.tuples(st.integers(-2, 5), st.integers(-2, 5)),
                       scalars().filter(lambda v: not isinstance(v, int) or abs(v) < 1000)),  # no memory bombs
       epsilon=epsilons(), sensitivity=scalars())
def test_noise_arrays(shape, epsilon, sensitivity, discrete) -> None:
    fn = core.discrete_laplace_noise if discrete else core.laplace_noise
    ok, out = call(lambda: fn(shape, epsilon=epsilon, sensitivity=sensitivity, rng=0), known="core.noise_shape")
    if ok:
        expected = () if shape is None else (shape,) if isinstance(shape, int) else tuple(shape)
        assert np.shape(out) == expected


@FUZZ
@given(z=arrays(), epsilon=epsilons(), sensitivity=scalars())
def test_discrete_laplace_pmf(z, epsilon, sensitivity) -> None:
    ok, out = call(lambda: core.discrete_laplace_pmf(z, epsilon=epsilon, sensitivity=sensitivity),
                   known="core.discrete_laplace_pmf")
    if ok and not has_non_finite(z) and np.asarray(z).dtype.kind in "biuf":
        # (known issue: NaN or None in z gives NaN instead of an error)
        assert np.all((np.asarray(out) >= 0) & (np.asarray(out) <= 1))


@pytest.mark.parametrize("which", ["em", "rnm", "probs"])
@FUZZ
@given(scores=mostly(st.lists(st.floats(-100, 100), min_size=1, max_size=6), arrays()), epsilon=epsilons(),
       sensitivity=mostly(st.sampled_from([1, 2.0]), scalars()), monotone=st.booleans(), rng=rngs())
def test_selection(scores, epsilon, sensitivity, monotone, rng, which) -> None:
    if which == "em":
        ok, out = call(lambda: core.exponential_mechanism(scores, epsilon=epsilon, sensitivity=sensitivity,
                                                          monotone=monotone, rng=rng), known="core.selection")
    elif which == "rnm":
        ok, out = call(lambda: core.report_noisy_max(scores, epsilon=epsilon, sensitivity=sensitivity,
                                                     monotone=monotone, rng=rng), known="core.selection")
    else:
        ok, out = call(lambda: core.exponential_mechanism_probabilities(
            scores, epsilon=epsilon, sensitivity=sensitivity, monotone=monotone), known="core.selection")
    if ok:
        assert not has_non_finite(scores)
        n = np.asarray(scores).shape[0]
        if which == "probs":
            assert out.shape == (n,) and np.isclose(out.sum(), 1.0) and np.all(np.isfinite(out))
        else:
            assert 0 <= out < n


@FUZZ
@given(epsilon=epsilons(), sensitivity=scalars())
def test_rational_scale(epsilon, sensitivity) -> None:
    ok, out = call(lambda: core.rational_scale(epsilon, sensitivity))
    if ok:
        t, s = out
        assert t > 0 and s > 0 and t / s >= float(sensitivity) / float(epsilon) * (1 - 1e-15)


@FUZZ
@given(epsilon=epsilons(), weights=arrays(), step=st.one_of(st.text(max_size=4), scalars()),
       composition=st.one_of(st.sampled_from(["sequential", "parallel", "bogus"]), scalars()),
       parts=scalars(), spend=epsilons())
def test_budget(epsilon, weights, step, composition, parts, spend) -> None:
    ok, out = call(lambda: core.split(epsilon, weights), known="core.split")
    if ok:
        assert abs(sum(out) - float(epsilon)) <= 1e-9 * float(epsilon)
    ok, ledger = call(lambda: core.BudgetLedger(epsilon))
    if ok:
        call(lambda: ledger.spend(step, "laplace", spend, composition=composition, parts=parts))
        assert ledger.total <= ledger.epsilon * (1 + 1e-9)
        assert ledger.remaining >= -1e-9 * ledger.epsilon


@FUZZ
@given(rng=rngs())
def test_as_generator(rng) -> None:
    ok, out = call(lambda: core.as_generator(rng))
    if ok:
        assert isinstance(out, np.random.Generator)


@pytest.mark.parametrize("which", ["epsilon", "probability", "positive_int", "real", "array", "counts", "in_domain"])
@FUZZ
@given(value=st.one_of(scalars(), arrays()))
def test_validators(value, which) -> None:
    checks = {
        "epsilon": lambda: core.check_epsilon(value),
        "probability": lambda: core.check_probability(value, "p"),
        "positive_int": lambda: core.check_positive_int(value, "n"),
        "real": lambda: core.check_real(value, "x"),
        "array": lambda: core.check_array(value, "values"),
        "counts": lambda: core.check_counts(value, "counts"),
        "in_domain": lambda: core.check_in_domain(value, "values", 5),
    }
    ok, out = call(checks[which], known=f"core.check_{which}")
    if ok and which in ("array", "counts", "in_domain"):
        assert not has_non_finite(value)
        assert np.asarray(out).size == np.asarray(value).size


@FUZZ
@given(y=arrays(), weights=st.one_of(st.none(), arrays()), increasing=st.booleans())
def test_isotonic_regression(y, weights, increasing) -> None:
    ok, out = call(lambda: core.isotonic_regression(y, weights, increasing=increasing))
    if ok:
        assert not has_non_finite(y)
        assert np.asarray(out).shape == np.asarray(y).reshape(-1).shape


SCHEMA = core.Schema([core.CategoricalAttribute("c", ["a", "b"]), core.NumericAttribute("x", 0, 10)])
cells = st.one_of(st.sampled_from(["a", "b", "z", "", None]), scalars())


@FUZZ
@given(c=st.lists(cells, max_size=5), x=st.lists(st.one_of(st.floats(-5, 15), scalars()), max_size=5),
       drop=st.sampled_from([None, "c", "x"]))
def test_schema_encode(c, x, drop) -> None:
    n = min(len(c), len(x))
    frame = pd.DataFrame({"c": pd.Series(c[:n], dtype=object), "x": pd.Series(x[:n], dtype=object)})
    if drop:
        frame = frame.drop(columns=drop)
    ok, out = call(lambda: SCHEMA.encode(frame))
    if ok:
        assert out.shape == (n, 2)  # every row kept: nothing silently dropped
        assert set(frame["c"]) <= {"a", "b"}


@FUZZ
@given(name=st.one_of(st.text(max_size=3), scalars()), categories=arrays(), lo=scalars(), hi=scalars(),
       resolution=scalars())
def test_attribute_constructors(name, categories, lo, hi, resolution) -> None:
    call(lambda: core.CategoricalAttribute(name, categories), known="core.CategoricalAttribute")
    call(lambda: core.NumericAttribute(name, lo, hi, resolution=resolution))
