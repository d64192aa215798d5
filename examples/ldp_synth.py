"""privpub.ldp_synth: local-DP synthetic data via a Bayesian network (LoPub-style).

Run: python examples/ldp_synth.py   (built-in generated data with a known network, a few seconds)
"""

from __future__ import annotations

from privpub.datasets import bayesnet_table
from privpub.ldp_synth import LDPBayesSynthesizer

truth = bayesnet_table(20_000, rng=0)                 # known network, CPTs and marginals
print("true network:   ", truth.network)

# every user's record is perturbed locally (RAPPOR-style bits); the server sees only reports
release = LDPBayesSynthesizer(degree=2).publish(truth.frame, schema=truth.schema, epsilon=4.0, rng=0)
print("learned network:", release.network)
print(release.ledger)

synthetic = release.sample(1_000, rng=0)              # same columns and categories as the input
print(synthetic.head())
