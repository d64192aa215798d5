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

from privpub.ldp._base import FrequencyOracle
from privpub.ldp._grr import GRR
from privpub.ldp._olh import OLH
from privpub.ldp._postprocess import clip_renormalise, isotonic_regression, norm_sub
from privpub.ldp._unary import OUE, SUE, UnaryEncoding, sue_epsilon, sue_flip_probability

__all__ = [
    "FrequencyOracle",
    "GRR",
    "OLH",
    "OUE",
    "SUE",
    "UnaryEncoding",
    "clip_renormalise",
    "isotonic_regression",
    "norm_sub",
    "sue_epsilon",
    "sue_flip_probability",
]
