from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

from privpub.core import (
    as_generator,
    check_counts,
    check_in_domain,
    check_positive_int,
    check_probability,
    isotonic_regression,
    secure_generator,
    spawn,
)
from privpub.errors import DomainError, ParameterError

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "privpub"


def test_as_generator_normalises() -> None:
    g = np.random.default_rng(1)
    assert as_generator(g) is g
    assert as_generator(3).integers(1000) == np.random.default_rng(3).integers(1000)
    assert isinstance(as_generator(None), np.random.Generator)
    assert isinstance(secure_generator(), np.random.Generator)
    assert len(spawn(0, 3)) == 3
    for bad in (1.5, True, -1, "seed", np.random.RandomState(0)):
        with pytest.raises(ParameterError, match="rng"):
            as_generator(bad)  # type: ignore[arg-type]


def test_no_global_random_state_in_library_code() -> None:
    banned_np = {"seed", "rand", "randn", "randint", "random", "normal", "laplace", "uniform", "choice",
                 "shuffle", "permutation", "binomial", "geometric", "multinomial", "exponential", "gumbel"}
    offenders = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names]
                mod = getattr(node, "module", None)
                if "random" in names or mod == "random":
                    offenders.append(f"{path}: imports the stdlib random module")
            if isinstance(node, ast.Attribute) and node.attr in banned_np:
                v = node.value
                if isinstance(v, ast.Attribute) and v.attr == "random" and isinstance(v.value, ast.Name) \
                        and v.value.id in ("np", "numpy"):
                    offenders.append(f"{path}:{node.lineno}: np.random.{node.attr}")
    assert offenders == []


def test_validators() -> None:
    assert check_probability(0.5, "f") == 0.5
    with pytest.raises(ParameterError, match=r"f must be in \(0.0, 1.0\), got 1.0"):
        check_probability(1.0, "f")
    assert check_probability(1.0, "f", closed="both") == 1.0
    with pytest.raises(ParameterError, match="window must be an integer >= 1, got 0"):
        check_positive_int(0, "window")
    with pytest.raises(ParameterError, match="integer"):
        check_positive_int(2.0, "window")
    np.testing.assert_array_equal(check_counts([1.0, 2.0]), [1, 2])
    with pytest.raises(DomainError, match="non-negative"):
        check_counts([1, -2])
    with pytest.raises(DomainError, match="integers"):
        check_counts([1.5])
    with pytest.raises(ParameterError, match="empty"):
        check_counts([])
    with pytest.raises(ParameterError, match="1-dimensional"):
        check_counts([[1]])
    with pytest.raises(DomainError, match=r"\[0, 2\]"):
        check_in_domain([0, 3], "values", 3)


def _brute_isotonic(y: np.ndarray) -> np.ndarray:
    # the isotonic fit is the max-min formula: x_i = max_{j<=i} min_{k>=i} mean(y[j..k])
    n = y.size
    out = np.empty(n)
    for i in range(n):
        out[i] = max(min(y[j : k + 1].mean() for k in range(i, n)) for j in range(i + 1))
    return out


def test_isotonic_regression_equals_brute_force(rng: np.random.Generator) -> None:
    for _ in range(200):
        y = rng.normal(size=rng.integers(1, 9)).round(1)
        np.testing.assert_allclose(isotonic_regression(y), _brute_isotonic(y), atol=1e-12)
    np.testing.assert_allclose(isotonic_regression([3.0, 2.0, 1.0], increasing=False), [3.0, 2.0, 1.0])
    with pytest.raises(ParameterError, match="weights"):
        isotonic_regression([1.0, 2.0], weights=[1.0])
