"""The shared core of privpub: randomness, validation, mechanisms, budget, domains, publisher shape."""

from __future__ import annotations

from typing import TYPE_CHECKING

from privpub.core._lazy import lazy_exports

if TYPE_CHECKING:
    from privpub.core._accountant import (
        Accountant,
        Charge,
        ParallelBlock,
        accounting,
        active_accountant,
        charge,
        check_session,
    )
    from privpub.core._budget import Budget, BudgetLedger, LedgerEntry, explain_entries, ledger_total, split
    from privpub.core._contributions import ContributionSuggestion, suggest_max_contributions
    from privpub.core._domain import CategoricalAttribute, NumericAttribute, Schema, infer_schema
    from privpub.core._isotonic import isotonic_regression
    from privpub.core._jitcache import prepare_numba_cache
    from privpub.core._measures import (
        MEASURES,
        PURE_DP,
        ZCDP,
        measure_unit,
        pure_dp_to_zcdp,
        zcdp_to_approx_dp,
    )
    from privpub.core._mechanisms import (
        FLOAT_EXACT_LIMIT,
        add_int_noise,
        check_float_exact,
        discrete_gaussian,
        discrete_gaussian_noise,
        discrete_gaussian_pmf,
        discrete_gaussian_sigma2,
        discrete_gaussian_variance,
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
    from privpub.core._plugins import (
        FrameBackend,
        frame_backend,
        register_frame_backend,
        register_session_store,
        require_operation,
        session_store_factory,
    )
    from privpub.core._publisher import DataPublisher, Publisher, Release, describe_data, readonly
    from privpub.core._ranges import exponential_mechanism_ranges
    from privpub.core._rng import RNGLike, as_generator, secure_generator, spawn
    from privpub.core._session import (
        FileSessionStore,
        MemorySessionStore,
        Reservation,
        Session,
        SessionCharge,
        SessionStore,
        conversion_record,
        refuse_mixed_units,
        refuse_unaffordable,
        session_timestamp,
    )
    from privpub.core._sparse import DENSE_CELL_LIMIT, sparse_noisy_counts, sparse_release_probability
    from privpub.core._tree_noise import MAX_TREE_HEIGHT, TreeNoise, TreePlan
    from privpub.core._unit import (
        RELATIONS,
        UNIT_KINDS,
        PrivacyUnit,
        bound_contributions,
        check_privacy_ids,
        check_privacy_unit,
        contribution_key,
    )
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
    "ContributionSuggestion",
    "DENSE_CELL_LIMIT",
    "DataPublisher",
    "FLOAT_EXACT_LIMIT",
    "FileSessionStore",
    "FrameBackend",
    "LedgerEntry",
    "MAX_TREE_HEIGHT",
    "MEANINGFUL_EPSILON",
    "MEASURES",
    "MEMORY_BUDGET_ENV",
    "MemorySessionStore",
    "NumericAttribute",
    "PURE_DP",
    "ParallelBlock",
    "PrivacyUnit",
    "Publisher",
    "RELATIONS",
    "RNGLike",
    "Release",
    "Reservation",
    "Schema",
    "Session",
    "SessionCharge",
    "SessionStore",
    "TreeNoise",
    "TreePlan",
    "UNIT_KINDS",
    "ZCDP",
    "accounting",
    "active_accountant",
    "add_int_noise",
    "as_generator",
    "bound_contributions",
    "charge",
    "check_allocation",
    "check_array",
    "check_bounds_2d",
    "check_counts",
    "check_epsilon",
    "check_float_exact",
    "check_in_domain",
    "check_positive_int",
    "check_privacy_ids",
    "check_privacy_unit",
    "check_probability",
    "check_real",
    "check_session",
    "check_working_set",
    "contribution_key",
    "conversion_record",
    "describe_data",
    "discrete_gaussian",
    "discrete_gaussian_noise",
    "discrete_gaussian_pmf",
    "discrete_gaussian_sigma2",
    "discrete_gaussian_variance",
    "discrete_laplace",
    "discrete_laplace_noise",
    "discrete_laplace_pmf",
    "explain_entries",
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "exponential_mechanism_ranges",
    "format_bytes",
    "frame_backend",
    "infer_schema",
    "isotonic_regression",
    "laplace",
    "laplace_noise",
    "lazy_exports",
    "ledger_total",
    "measure_unit",
    "memory_budget",
    "prepare_numba_cache",
    "pure_dp_to_zcdp",
    "rational_scale",
    "readonly",
    "refuse_mixed_units",
    "refuse_unaffordable",
    "register_frame_backend",
    "register_session_store",
    "report_noisy_max",
    "require_operation",
    "secure_generator",
    "session_store_factory",
    "session_timestamp",
    "sparse_noisy_counts",
    "sparse_release_probability",
    "spawn",
    "split",
    "suggest_max_contributions",
    "warn_meaningless_epsilon",
    "zcdp_to_approx_dp",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
