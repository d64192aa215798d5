"""Empirical privacy auditing: lower confidence bounds on epsilon and exact LDP epsilons.

:func:`audit_epsilon` runs a mechanism many times on two neighbouring inputs and returns a
one-sided 99% lower confidence bound on its epsilon (Clopper-Pearson bounds on the
probabilities of output events chosen on independent runs). :func:`exact_epsilon` computes the
exact epsilon of a local randomiser from its enumerated output probabilities
(:func:`output_probabilities`). :func:`audit_cases` and :func:`run_audits` are the library's own
audit suite (every core mechanism, every LDP oracle and the private steps of the five parts,
each with a negative control); ``privpub audit run`` prints its table. :func:`audit_client`
holds a client implementation (any language) to a campaign's configuration over the wire format
(``privpub audit client``). :func:`audit_structure` reads the joint structure of a release
(lattice residues of its decoded coordinates, float low-order bits, support) under neighbouring
inputs, on every registered publisher (:func:`structure_targets`); :func:`lattice_attack` is
issue 34's attack on a linear stream release.

Examples
--------
>>> import numpy as np
>>> from privpub.audit import audit_epsilon
>>> from privpub.core import discrete_laplace
>>> def mechanism(count, rng, n):
...     return discrete_laplace(np.full(n, count), epsilon=1.0, rng=rng)
>>> audit_epsilon(mechanism, 0, 1, epsilon=1.0, trials=20_000, batch=True, rng=0).passed
True
"""

from __future__ import annotations

from privpub.audit._auditor import AuditResult, audit_epsilon, clopper_pearson_bounds
from privpub.audit._client import (
    ClientAudit,
    ClientCheck,
    ClientError,
    ClientScenario,
    audit_client,
    client_scenarios,
    run_client,
)
from privpub.audit._exact import exact_epsilon, output_probabilities
from privpub.audit._structure import (
    CHECKS,
    LatticeAttack,
    StructureResult,
    StructureTarget,
    audit_structure,
    lattice_attack,
    observed,
    release_leaves,
    stream_run,
    structure_targets,
)
from privpub.audit._suite import AuditCase, audit_cases, run_audits

__all__ = [
    "AuditCase",
    "AuditResult",
    "CHECKS",
    "ClientAudit",
    "ClientCheck",
    "ClientError",
    "ClientScenario",
    "LatticeAttack",
    "StructureResult",
    "StructureTarget",
    "audit_cases",
    "audit_client",
    "audit_epsilon",
    "audit_structure",
    "client_scenarios",
    "clopper_pearson_bounds",
    "exact_epsilon",
    "lattice_attack",
    "observed",
    "output_probabilities",
    "release_leaves",
    "run_audits",
    "run_client",
    "stream_run",
    "structure_targets",
]
