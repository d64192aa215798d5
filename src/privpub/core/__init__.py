"""The shared core of privpub: randomness, validation, mechanisms, budget, domains, publisher shape."""

from __future__ import annotations

from privpub.core._budget import Budget, BudgetLedger, LedgerEntry, split
from privpub.core._domain import CategoricalAttribute, NumericAttribute, Schema, infer_schema
from privpub.core._isotonic import isotonic_regression
from privpub.core._mechanisms import (
    discrete_laplace,
    discrete_laplace_noise,
    discrete_laplace_pmf,
    exponential_mechanism,
    exponential_mechanism_probabilities,
    laplace,
    laplace_noise,
    rational_scale,
    report_noisy_max,
)
from privpub.core._publisher import Publisher, Release, readonly
from privpub.core._rng import RNGLike, as_generator, secure_generator, spawn
from privpub.core._validation import (
    check_array,
    check_bounds_2d,
    check_counts,
    check_epsilon,
    check_in_domain,
    check_positive_int,
    check_probability,
    check_real,
)

__all__ = [
    "Budget",
    "BudgetLedger",
    "CategoricalAttribute",
    "LedgerEntry",
    "NumericAttribute",
    "Publisher",
    "RNGLike",
    "Release",
    "Schema",
    "as_generator",
    "check_array",
    "check_bounds_2d",
    "check_counts",
    "check_epsilon",
    "check_in_domain",
    "check_positive_int",
    "check_probability",
    "check_real",
    "discrete_laplace",
    "discrete_laplace_noise",
    "discrete_laplace_pmf",
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "infer_schema",
    "isotonic_regression",
    "laplace",
    "laplace_noise",
    "rational_scale",
    "readonly",
    "report_noisy_max",
    "secure_generator",
    "spawn",
    "split",
]
