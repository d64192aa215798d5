"""Demo of the shared mechanisms: central noise on a histogram and the local-DP oracles."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from privpub.core import RNGLike, accounting, as_generator, discrete_laplace, laplace
from privpub.experiments._common import DemoRow
from privpub.ldp import GRR, OLH, OUE, SUE

__all__ = ["demo"]


def _zipf_counts(n_bins: int = 256, total: int = 100_000) -> NDArray[np.int64]:
    weights = 1.0 / np.arange(1, n_bins + 1)
    counts: NDArray[np.int64] = np.floor(total * weights / weights.sum()).astype(np.int64)
    return counts


def demo(rng: RNGLike = 0) -> list[DemoRow]:
    """Mean absolute error per bin of each mechanism on a known Zipf histogram.

    Each run is one release made the way the publishers make theirs: an accountant is opened
    for the run's epsilon, the mechanism charges it when it draws, and the sealed record is the
    row's ledger.
    """
    gen = as_generator(rng)
    counts = _zipf_counts()
    rows = []
    for eps in (0.1, 1.0):
        for name, mechanism in (("discrete_laplace", discrete_laplace), ("laplace", laplace)):
            with accounting(eps, method=name) as acc:
                with acc.step("noisy counts"):
                    noisy = mechanism(counts, epsilon=eps, rng=gen,
                                      note=f"the {counts.size} counts of a Zipf histogram (L1 sensitivity 1)")
                ledger = acc.seal()
            rows.append(DemoRow("core", name, eps, "MAE per bin", float(np.abs(noisy - counts).mean()),
                                f"{counts.size} bins, {int(counts.sum()):,} records", ledger=ledger))
    small = _zipf_counts(64, 200_000)
    values = np.repeat(np.arange(small.size), small)
    for oracle in (GRR(domain_size=64), SUE(domain_size=64), OUE(domain_size=64), OLH(domain_size=64)):
        name = type(oracle).__name__
        with accounting(1.0, method=f"ldp.{name}") as acc:
            with acc.step("local perturbation"):
                reports = oracle.perturb(values, epsilon=1.0, rng=gen)
            ledger = acc.seal()
        est = oracle.estimate(reports, epsilon=1.0)
        rows.append(DemoRow("core", f"ldp.{name}", 1.0, "MAE per value (n=200k)",
                            float(np.abs(est - small).mean()), f"{values.size:,} users, 64 values", ledger=ledger))
    return rows
