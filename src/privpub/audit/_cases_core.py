"""Audit cases of the core mechanisms and of every LDP frequency oracle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpub.audit._case import AuditCase
from privpub.audit._exact import exact_epsilon, output_probabilities
from privpub.core import (
    discrete_laplace,
    exponential_mechanism,
    exponential_mechanism_probabilities,
    laplace,
    report_noisy_max,
    secure_generator,
    sparse_noisy_counts,
    split,
)
from privpub.ldp import GRR, OLH, OUE, SUE, FrequencyOracle

__all__ = ["core_cases", "ldp_cases"]

EPS = 1.0
K = 20  # candidates of the selection mechanisms: the ratio k e^eps / (e^eps + k - 1) nears e^eps


def _tile(data: Any, n: int) -> NDArray[np.float64]:
    arr = np.asarray(data, dtype=np.float64)
    return np.broadcast_to(arr, (n, *arr.shape)).copy()


def _laplace(eps: float, sens: float) -> Callable[..., Any]:
    def mech(data: Any, rng: np.random.Generator, n: int) -> Any:
        return laplace(_tile(data, n), epsilon=eps, sensitivity=sens, rng=rng)
    return mech


def _dlap(eps: float, sens: float) -> Callable[..., Any]:
    def mech(data: Any, rng: np.random.Generator, n: int) -> Any:
        return discrete_laplace(_tile(data, n).astype(np.int64), epsilon=eps, sensitivity=sens, rng=rng)
    return mech


def _composed(eps: float, weights: list[float]) -> Callable[..., Any]:
    """Two discrete-Laplace releases of the same count with budgets ``split(eps, weights)``."""
    def mech(data: Any, rng: np.random.Generator, n: int) -> Any:
        parts = split(eps, weights)
        cols = [discrete_laplace(np.full(n, int(data)), epsilon=e, rng=rng) for e in parts]
        return np.stack(cols, axis=1)
    return mech


def _selection(fn: Callable[..., int], eps: float, monotone: bool) -> Callable[..., Any]:
    def mech(data: Any, rng: np.random.Generator, n: int) -> Any:
        return np.array([fn(data, epsilon=eps, monotone=monotone, rng=rng) for _ in range(n)])
    return mech


def _em_exact(u: Any, v: Any, eps: float, monotone: bool) -> Callable[[], float]:
    def exact() -> float:
        return exact_epsilon(np.vstack([
            exponential_mechanism_probabilities(u, epsilon=eps, monotone=monotone),
            exponential_mechanism_probabilities(v, epsilon=eps, monotone=monotone),
        ]))
    return exact


def _secure_dlap(eps: float) -> Callable[..., Any]:
    def mech(data: Any, rng: np.random.Generator, n: int) -> Any:  # rng ignored: OS-seeded stream
        return discrete_laplace(np.full(n, int(data)), epsilon=eps, rng=secure_generator())
    return mech


def _sparse_counts(eps: float, noise: str) -> Callable[..., Any]:
    """``n`` independent copies of a 3-cell table in one call of :func:`sparse_noisy_counts`'s sparse
    path (``dense_limit=0``: empty cells drawn through the noise tail); copy ``i`` owns cells
    ``3i..3i+2`` (every cell gets independent noise), so each row is one release of the 3 cells."""
    def mech(ids: Any, rng: np.random.Generator, n: int) -> Any:
        base = np.asarray(ids, dtype=np.int64)
        tiled = (base[None, :] + 3 * np.arange(n)[:, None]).reshape(-1)
        cells, counts = np.unique(tiled, return_counts=True)
        cid, cnt = sparse_noisy_counts(cells, counts, n_cells=3 * n, epsilon=eps, noise=noise, rng=rng,
                                       max_released=float(3 * n), dense_limit=0)
        out = np.zeros(3 * n)
        out[cid] = cnt
        return out.reshape(n, 3)
    return mech


def core_cases() -> list[AuditCase]:
    """Laplace, discrete Laplace, exponential mechanism, report-noisy-max, sequential composition."""
    flat = np.zeros(K)
    up_one = flat.copy()
    up_one[0] = 1.0
    swing = -np.ones(K)
    swing[0] = 1.0
    cases = [
        AuditCase("core.laplace", "core", _laplace(EPS, 1.0), 0.0, 1.0, EPS, 20_000,
                  "scalar query of sensitivity 1: answers 0 and 1",
                  control=_laplace(2 * EPS, 1.0), control_note="noise scale halved", batch=True),
        AuditCase("core.laplace[vector]", "core", _laplace(EPS, 2.0), [3.0, 1.0, 0.0], [2.0, 2.0, 0.0], EPS,
                  20_000, "histogram under replace-one: one record moves between bins (L1 = 2)",
                  control=_laplace(EPS, 1.0), control_note="sensitivity 1 instead of 2 (noise halved)",
                  batch=True),
        AuditCase("core.discrete_laplace", "core", _dlap(EPS, 1), 0, 1, EPS, 20_000,
                  "count under add/remove-one: 0 and 1",
                  control=_dlap(2 * EPS, 1), control_note="noise scale halved", batch=True),
        AuditCase("core.discrete_laplace[vector]", "core", _dlap(EPS, 2), [3, 1, 0], [2, 2, 0], EPS, 20_000,
                  "histogram under replace-one (L1 = 2)",
                  control=_dlap(EPS, 1), control_note="sensitivity 1 instead of 2 (noise halved)", batch=True),
        AuditCase("core.split+discrete_laplace", "core", _composed(EPS, [1.0, 3.0]), 0, 1, EPS, 20_000,
                  "two releases of one count with split(epsilon, [1, 3]) (sequential composition)",
                  control=_composed(2 * EPS, [1.0, 3.0]),
                  control_note="each release given the whole epsilon twice over", batch=True),
        AuditCase("core.exponential_mechanism", "core", _selection(exponential_mechanism, EPS, False),
                  flat, swing, EPS, 10_000,
                  f"{K} scores of sensitivity 1: all 0 vs candidate 0 up by 1 and the rest down by 1",
                  control=_selection(exponential_mechanism, 2 * EPS, False), batch=True,
                  exact=_em_exact(flat, swing, EPS, False), exact_control=_em_exact(flat, swing, 2 * EPS, False)),
        AuditCase("core.exponential_mechanism[monotone]", "core",
                  _selection(exponential_mechanism, EPS, True), flat, up_one, EPS, 10_000,
                  f"{K} counting scores: all 0 vs candidate 0 up by 1",
                  control=_selection(exponential_mechanism, 2 * EPS, True), batch=True,
                  exact=_em_exact(flat, up_one, EPS, True), exact_control=_em_exact(flat, up_one, 2 * EPS, True)),
        AuditCase("core.report_noisy_max", "core", _selection(report_noisy_max, EPS, False),
                  flat, swing, EPS, 10_000,
                  f"{K} scores of sensitivity 1: all 0 vs candidate 0 up by 1 and the rest down by 1",
                  control=_selection(report_noisy_max, 2 * EPS, False), batch=True),
        AuditCase("core.report_noisy_max[monotone]", "core", _selection(report_noisy_max, EPS, True),
                  flat, up_one, EPS, 10_000, f"{K} counting scores: all 0 vs candidate 0 up by 1",
                  control=_selection(report_noisy_max, 2 * EPS, True), batch=True),
        # the sparse path (the leaf step of MAXGDDP and DiffGen takes it beyond DENSE_CELL_LIMIT cells;
        # decision.MAXGDDP.leaf_counts audits the publisher's own leaf step)
        AuditCase("core.sparse_noisy_counts[sparse]", "core", _sparse_counts(EPS, "discrete"), [0, 0, 0],
                  [0, 0, 0, 1], EPS, 10_000, "add/remove one record; 3 cells, cell 1 empty vs count 1 (released "
                  "only when the noisy count >= 1); the sparse path (empty cells through the noise tail)",
                  control=_sparse_counts(2 * EPS, "discrete"), control_note="noise scale halved", batch=True),
        AuditCase("core.sparse_noisy_counts[sparse laplace]", "core", _sparse_counts(EPS, "laplace"), [0, 0, 0],
                  [0, 0, 0, 1], EPS, 10_000, "as core.sparse_noisy_counts[sparse] with the exact grid Laplace",
                  control=_sparse_counts(2 * EPS, "laplace"), control_note="noise scale halved", batch=True),
        # full tier only: other epsilons, and the OS-seeded generator
        AuditCase("core.discrete_laplace[eps=0.25]", "core", _dlap(0.25, 1), 0, 1, 0.25, 40_000,
                  "count under add/remove-one: 0 and 1",
                  control=_dlap(0.5, 1), control_note="noise scale halved", batch=True, full_only=True),
        AuditCase("core.laplace[eps=4]", "core", _laplace(4.0, 1.0), 0.0, 1.0, 4.0, 40_000,
                  "scalar query of sensitivity 1: answers 0 and 1",
                  control=_laplace(8.0, 1.0), control_note="noise scale halved", batch=True, full_only=True),
        AuditCase("core.discrete_laplace[secure rng]", "core", _secure_dlap(EPS), 0, 1, EPS, 20_000,
                  "count under add/remove-one, noise from secure_generator()",
                  control=_secure_dlap(2 * EPS), control_note="noise scale halved", batch=True, full_only=True),
    ]
    return cases


# ---------------------------------------------------------------------------------------------
# LDP oracles: one user's report, values 0 and 1 (every pair of values is a worst case)
# ---------------------------------------------------------------------------------------------
D = 4


def _perturb(oracle: FrequencyOracle, eps: float) -> Callable[..., Any]:
    def mech(value: int, rng: np.random.Generator, n: int) -> Any:
        return oracle.perturb(np.full(n, value), epsilon=eps, rng=rng)
    return mech


def _olh_perturb(oracle: OLH, eps: float) -> Callable[..., Any]:
    """OLH report ``(a, b, y)`` reduced to the events "y is the bucket of value 0 / of value 1"."""
    def mech(value: int, rng: np.random.Generator, n: int) -> Any:
        rep = oracle.perturb(np.full(n, value), epsilon=eps, rng=rng)
        a, b, y = rep[:, 0], rep[:, 1], rep[:, 2]
        g = oracle.buckets(eps)
        prime = (1 << 31) - 1
        return np.stack([y == ((a * v + b) % prime) % g for v in (0, 1)], axis=1)
    return mech


def _exact_ldp(oracle: FrequencyOracle, eps: float) -> Callable[[], float]:
    return lambda: exact_epsilon(output_probabilities(oracle, eps))


def ldp_cases() -> list[AuditCase]:
    """Client randomisers of GRR, SUE (RAPPOR), OUE and OLH on a domain of 4 values."""
    cases = []
    for oracle in (GRR(domain_size=D), SUE(domain_size=D), OUE(domain_size=D)):
        name = type(oracle).__name__
        cases.append(AuditCase(
            f"ldp.{name}.perturb", "ldp", _perturb(oracle, EPS), 0, 1, EPS, 20_000,
            "one user's value: 0 vs 1 (LDP: any two values)",
            control=_perturb(oracle, 2 * EPS), control_note="randomiser of 2 epsilon", batch=True,
            exact=_exact_ldp(oracle, EPS), exact_control=_exact_ldp(oracle, 2 * EPS)))
    olh = OLH(domain_size=D)
    cases.append(AuditCase(
        "ldp.OLH.perturb", "ldp", _olh_perturb(olh, EPS), 0, 1, EPS, 20_000,
        "one user's value: 0 vs 1; events on y = h(0), y = h(1) for the reported hash",
        control=_olh_perturb(olh, 2 * EPS), control_note="randomiser of 2 epsilon", batch=True,
        exact=_exact_ldp(olh, EPS), exact_control=_exact_ldp(olh, 2 * EPS)))
    return cases
