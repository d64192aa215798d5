"""privpub.core and privpub.ldp: noise mechanisms, the budget ledger, and local-DP frequency oracles.

Run: python examples/core.py   (built-in generated data, a second or two)
"""

from __future__ import annotations

import numpy as np

from privpub.core import BudgetLedger, discrete_laplace, report_noisy_max, split
from privpub.datasets import zipf_histogram
from privpub.ldp import OUE

rng = np.random.default_rng(0)

# Central DP: integer noise on a histogram of counts (L1 sensitivity 1 under add/remove-one).
counts = zipf_histogram(64, 10_000, 1.0, rng=rng)
eps_counts, eps_top = split(1.0, [3, 1])            # 0.75 for the counts, 0.25 for the arg-max
ledger = BudgetLedger(1.0)
noisy = discrete_laplace(counts, epsilon=ledger.spend("counts", "discrete_laplace", eps_counts), rng=rng)
top = report_noisy_max(counts, epsilon=ledger.spend("top bin", "report_noisy_max", eps_top), monotone=True,
                       rng=rng)
print(f"mean absolute error per bin: {np.abs(noisy - counts).mean():.2f}; noisy arg-max bin: {top}")
print(ledger)                                        # total == 1.0

# Local DP: every user perturbs their own value; the server estimates the frequencies.
values = np.repeat(np.arange(counts.size), counts)   # one value per user
oracle = OUE(domain_size=counts.size)
reports = oracle.perturb(values, epsilon=1.0, rng=rng)  # client side, (n, ceil(d/8)) packed bits
estimate = oracle.estimate(reports, epsilon=1.0)        # server side, unbiased counts
std = np.sqrt(oracle.variance(values.size, epsilon=1.0))
print(f"OUE: max |error| {np.abs(estimate - counts).max():.0f} (analytic std per count {std:.0f})")
