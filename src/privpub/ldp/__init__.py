"""Local-DP frequency oracles with a client side and a server side.

Every oracle has one shape: ``perturb(values, *, epsilon, rng)`` on the client (vectorised over
all users), ``aggregate(reports)`` / ``estimate(reports, *, epsilon)`` on the server,
``variance(n, *, epsilon)`` and ``simulate(true_counts, *, epsilon, rng)`` (exact aggregated
simulation for experiments with millions of users).

Examples
--------
>>> from privpub.ldp import OUE
>>> oracle = OUE(domain_size=4)
>>> reports = oracle.perturb([0, 1, 1, 3, 3, 3], epsilon=1.0, rng=0)
>>> oracle.estimate(reports, epsilon=1.0).shape
(4,)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privpub.core import lazy_exports

if TYPE_CHECKING:
    from privpub.ldp._base import MAX_LOCAL_EPSILON, N_THREADS, FrequencyOracle, run_chunks
    from privpub.ldp._grr import GRR
    from privpub.ldp._olh import OLH, OLH_PRIME
    from privpub.ldp._poisoning import (
        POISONING_DEFENSES,
        PoisoningResult,
        SizeBins,
        defend,
        defend_bins,
        fake_reports,
        report_threshold,
        size_bins,
        support_size_pmf,
        support_sizes,
        truncated_probabilities,
    )
    from privpub.ldp._postprocess import clip_renormalise, isotonic_regression, norm_sub
    from privpub.ldp._unary import OUE, SUE, UnaryEncoding, sue_epsilon, sue_flip_probability


__all__ = [
    "FrequencyOracle",
    "GRR",
    "MAX_LOCAL_EPSILON",
    "N_THREADS",
    "OLH",
    "OLH_PRIME",
    "OUE",
    "POISONING_DEFENSES",
    "PoisoningResult",
    "SUE",
    "SizeBins",
    "UnaryEncoding",
    "clip_renormalise",
    "defend",
    "defend_bins",
    "fake_reports",
    "isotonic_regression",
    "norm_sub",
    "report_threshold",
    "run_chunks",
    "size_bins",
    "sue_epsilon",
    "sue_flip_probability",
    "support_size_pmf",
    "support_sizes",
    "truncated_probabilities",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
