"""The shared core of privpub: randomness, validation, mechanisms, budget, domains, publisher shape."""

from __future__ import annotations

from privpub.core._accountant import (
    Accountant,
    Charge,
    ParallelBlock,
    accounting,
    active_accountant,
    charge,
    check_session,
)
from privpub.core._budget import Budget, BudgetLedger, LedgerEntry, ledger_total, split
from privpub.core._domain import CategoricalAttribute, NumericAttribute, Schema, infer_schema
from privpub.core._isotonic import isotonic_regression
from privpub.core._mechanisms import (
    FLOAT_EXACT_LIMIT,
    add_int_noise,
    check_float_exact,
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
from privpub.core._memory import (
    MEMORY_BUDGET_ENV,
    check_allocation,
    check_working_set,
    format_bytes,
    memory_budget,
)
from privpub.core._publisher import Publisher, Release, describe_data, readonly
from privpub.core._ranges import exponential_mechanism_ranges
from privpub.core._rng import RNGLike, as_generator, secure_generator, spawn
from privpub.core._session import (
    FileSessionStore,
    MemorySessionStore,
    Reservation,
    Session,
    SessionCharge,
    SessionStore,
)
from privpub.core._sparse import DENSE_CELL_LIMIT, sparse_noisy_counts, sparse_release_probability
from privpub.core._tree_noise import TreeNoise, TreePlan
from privpub.core._validation import (
    MEANINGFUL_EPSILON,
    check_array,
    check_bounds_2d,
    check_counts,
    check_epsilon,
    check_in_domain,
    check_positive_int,
    check_probability,
    check_real,
    warn_meaningless_epsilon,
)

__all__ = [
    "Accountant",
    "Budget",
    "BudgetLedger",
    "CategoricalAttribute",
    "Charge",
    "DENSE_CELL_LIMIT",
    "FLOAT_EXACT_LIMIT",
    "FileSessionStore",
    "LedgerEntry",
    "MEANINGFUL_EPSILON",
    "MEMORY_BUDGET_ENV",
    "MemorySessionStore",
    "NumericAttribute",
    "ParallelBlock",
    "Publisher",
    "RNGLike",
    "Release",
    "Reservation",
    "Schema",
    "Session",
    "SessionCharge",
    "SessionStore",
    "TreeNoise",
    "TreePlan",
    "accounting",
    "active_accountant",
    "add_int_noise",
    "as_generator",
    "charge",
    "check_allocation",
    "check_array",
    "check_bounds_2d",
    "check_counts",
    "check_epsilon",
    "check_float_exact",
    "check_in_domain",
    "check_positive_int",
    "check_probability",
    "check_real",
    "check_session",
    "check_working_set",
    "describe_data",
    "discrete_laplace",
    "discrete_laplace_noise",
    "discrete_laplace_pmf",
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "exponential_mechanism_ranges",
    "format_bytes",
    "infer_schema",
    "isotonic_regression",
    "laplace",
    "laplace_noise",
    "ledger_total",
    "memory_budget",
    "rational_scale",
    "readonly",
    "report_noisy_max",
    "secure_generator",
    "sparse_noisy_counts",
    "sparse_release_probability",
    "spawn",
    "split",
    "warn_meaningless_epsilon",
]
