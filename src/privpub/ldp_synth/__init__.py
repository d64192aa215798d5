"""Local-DP high-dimensional synthetic data through a Bayesian network (paper 000).

Ren X B, Xu J Y, Yang X Y, Yang S S. Bayesian network-based high-dimensional crowdsourced data
publication with local differential privacy (in Chinese). Sci Sin Inform 49:1586-1605, 2019.
doi:10.1360/SSI-2019-0119.

Clients one-hot encode each attribute and flip each bit with probability f (RAPPOR, through
:class:`privpub.ldp.SUE`); the server estimates low-order joints by EM (or a fast linear
estimator), builds a Bayesian network of in-degree k greedily by mutual information, and samples a
synthetic table. Each report is ``2 d ln((2 - f)/f)``-LDP; everything after it is post-processing.

Examples
--------
>>> from privpub.ldp_synth import epsilon_from_f
>>> round(epsilon_from_f(0.5, d=15), 2)
32.96
"""

from __future__ import annotations

from privpub.ldp_synth._calm import CALM, CALMRelease, calm_marginals, calm_reports, choose_oracle
from privpub.ldp_synth._client import (
    LDPReports,
    encode,
    epsilon_from_f,
    f_from_epsilon,
    perturb_codes,
    resolve_flip_prob,
    simulate_clients,
)
from privpub.ldp_synth._evaluation import EmpiricalJoints, edge_accuracy, i_sum, marginal_errors, svm_accuracy
from privpub.ldp_synth._network import build_network, conditional_tables, edges, sample_synthetic
from privpub.ldp_synth._store import (
    EM_RATE,
    METHODS,
    JointEstimate,
    ReportStore,
    em_work_bound,
    estimate_joint,
)
from privpub.ldp_synth._synthesizer import (
    LDPBayesRelease,
    LDPBayesSynthesizer,
    report_ledger,
    sample_independent,
)

#: the ldp_synth publishers by name (audits and tools enumerate them)
PUBLISHERS: dict[str, type] = {"ldp_bayes": LDPBayesSynthesizer, "calm": CALM}

__all__ = [
    "CALM",
    "CALMRelease",
    "EM_RATE",
    "EmpiricalJoints",
    "JointEstimate",
    "LDPBayesRelease",
    "LDPBayesSynthesizer",
    "LDPReports",
    "METHODS",
    "PUBLISHERS",
    "ReportStore",
    "build_network",
    "calm_marginals",
    "calm_reports",
    "choose_oracle",
    "conditional_tables",
    "edge_accuracy",
    "edges",
    "em_work_bound",
    "encode",
    "epsilon_from_f",
    "estimate_joint",
    "f_from_epsilon",
    "i_sum",
    "marginal_errors",
    "perturb_codes",
    "report_ledger",
    "resolve_flip_prob",
    "sample_independent",
    "sample_synthetic",
    "simulate_clients",
    "svm_accuracy",
]
