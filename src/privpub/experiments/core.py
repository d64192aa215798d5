"""Demo of the shared mechanisms: central noise on a histogram and the local-DP oracles."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from privpub.core import RNGLike, as_generator, discrete_laplace, laplace
from privpub.experiments._common import DemoRow
from privpub.ldp import GRR, OLH, OUE, SUE

__all__ = ["demo"]


def _zipf_counts(n_bins: int = 256, total: int = 100_000) -> NDArray[np.int64]:
    weights = 1.0 / np.arange(1, n_bins + 1)
    return np.floor(total * weights / weights.sum()).astype(np.int64)


def demo(rng: RNGLike = 0) -> list[DemoRow]:
    """Mean absolute error per bin of each mechanism on a known Zipf histogram."""
    gen = as_generator(rng)
    counts = _zipf_counts()
    rows = []
    for eps in (0.1, 1.0):
        noisy = discrete_laplace(counts, epsilon=eps, rng=gen)
        rows.append(DemoRow("core", "discrete_laplace", eps, "MAE per bin", float(np.abs(noisy - counts).mean())))
        noisy_f = laplace(counts, epsilon=eps, rng=gen)
        rows.append(DemoRow("core", "laplace", eps, "MAE per bin", float(np.abs(noisy_f - counts).mean())))
    small = _zipf_counts(64, 200_000)
    values = np.repeat(np.arange(small.size), small)
    for oracle in (GRR(domain_size=64), SUE(domain_size=64), OUE(domain_size=64), OLH(domain_size=64)):
        est = oracle.estimate(oracle.perturb(values, epsilon=1.0, rng=gen), epsilon=1.0)
        rows.append(DemoRow("core", f"ldp.{type(oracle).__name__}", 1.0, "MAE per value (n=200k)",
                            float(np.abs(est - small).mean())))
    return rows
