"""``sparse_noisy_counts``: all cells noised, only cells >= 1 materialised; dense and sparse paths agree."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats
from statutils import chisquare_pvalue, max_ratio_lower_bound

from privpub.core import (
    Accountant,
    discrete_laplace_pmf,
    rational_scale,
    sparse_noisy_counts,
    sparse_release_probability,
)
from privpub.core._sparse import _distinct_uniform, _empty_ids, _geometric_exact
from privpub.errors import BudgetExceededError, DomainError, ParameterError

CELLS = np.array([3, 10, 11, 40], dtype=np.int64)
COUNTS = np.array([5, 1, 0, 12], dtype=np.int64)


def _runs(noise: str, dense_limit: int, n_cells: int, reps: int, seed: int, eps: float = 0.7):
    gen = np.random.default_rng(seed)
    out = []
    for _ in range(reps):
        ids, vals = sparse_noisy_counts(CELLS, COUNTS, n_cells=n_cells, epsilon=eps, noise=noise, rng=gen,
                                        dense_limit=dense_limit)
        assert ids.dtype == np.int64 and vals.dtype == np.int64
        assert np.all(np.diff(ids) > 0) and np.all(vals >= 1) and ids.min(initial=0) >= 0 and ids.max() < n_cells
        out.append((ids, vals))
    return out


@pytest.mark.statistical
@pytest.mark.parametrize("noise", ["discrete", "laplace"])
def test_sparse_path_has_the_distribution_of_dense_noising(noise) -> None:
    """Same law for: the number of released empty cells, their values, and each listed cell's value."""
    n_cells = 3000
    dense = _runs(noise, 10**9, n_cells, 300, seed=1)
    sparse = _runs(noise, 0, n_cells, 300, seed=2)

    def summary(runs):
        n_empty = np.array([np.count_nonzero(~np.isin(ids, CELLS)) for ids, _ in runs])
        empty_vals = np.concatenate([v[~np.isin(ids, CELLS)] for ids, v in runs])
        cell40 = np.array([v[ids == 40][0] if np.any(ids == 40) else 0 for ids, v in runs])
        return n_empty, empty_vals, cell40

    (e1, v1, c1), (e2, v2, c2) = summary(dense), summary(sparse)
    p = sparse_release_probability(0.7, noise=noise)
    n0 = n_cells - CELLS.size
    for e in (e1, e2):  # Binomial(N0, p): mean within 4 standard errors
        assert abs(e.mean() - n0 * p) < 4 * math.sqrt(n0 * p * (1 - p) / e.size)
    assert stats.ks_2samp(e1, e2).pvalue > 1e-3
    assert stats.ks_2samp(c1, c2).pvalue > 1e-3
    k1 = np.bincount(np.minimum(v1, 6), minlength=7)[1:]
    k2 = np.bincount(np.minimum(v2, 6), minlength=7)[1:]
    assert stats.chi2_contingency(np.vstack([k1, k2]))[1] > 1e-3
    # exact tail law of a released empty cell
    if noise == "discrete":
        t, s = rational_scale(0.7)
        z = np.arange(1, 6)
        pmf = discrete_laplace_pmf(z, epsilon=s / t) / (p * 1.0)
        expected = np.append(pmf, 1 - pmf.sum())
    else:
        b = 1 / 0.7  # P[rint(L) = k | L > 1/2] for L ~ Laplace(b): the mass of [k - 1/2, k + 1/2) above 1/2
        cdf = lambda x: 1 - 0.5 * np.exp(-x / b)  # noqa: E731
        edges = np.arange(0.5, 6.0, 1.0)
        masses = (cdf(edges[1:]) - cdf(edges[:-1])) / (1 - cdf(0.5))
        expected = np.append(masses, 1 - masses.sum())
    for k in (k1, k2):
        assert chisquare_pvalue(k, expected) > 1e-3


def test_geometric_tail_sampler_is_exact_in_distribution() -> None:
    gen = np.random.default_rng(3)
    for t, s in ((10, 7), (1, 1), (3, 5)):
        y = _geometric_exact(40_000, t, s, gen)
        q = math.exp(-s / t)
        probs = (1 - q) * q ** np.arange(8)
        assert chisquare_pvalue(np.bincount(np.minimum(y, 8), minlength=9), np.append(probs, 1 - probs.sum())) > 1e-3


@pytest.mark.statistical
def test_empty_cells_are_a_uniform_subset_and_ranks_map_to_empty_ids() -> None:
    gen = np.random.default_rng(5)
    hits = np.zeros(20, dtype=np.int64)
    for _ in range(3000):
        chosen = _distinct_uniform(20, 7, gen)
        assert chosen.size == 7 and np.unique(chosen).size == 7
        hits[chosen] += 1
    assert stats.chisquare(hits).pvalue > 1e-3
    assert _distinct_uniform(5, 5, gen).size == 5 and _distinct_uniform(10**18, 0, gen).size == 0
    listed = np.array([0, 3, 7, 8], dtype=np.int64)
    empty = np.setdiff1d(np.arange(30), listed)
    np.testing.assert_array_equal(_empty_ids(np.arange(empty.size, dtype=np.int64), listed), empty)


def test_huge_partitions_cost_only_their_output() -> None:
    ids, vals = sparse_noisy_counts([5, 2**61], [1000, 3], n_cells=2**62, epsilon=60.0, rng=0)
    assert ids.tolist() == [5, 2**61] and vals.tolist() == [1000, 3]  # P[noise != 0] ~ 2e-26
    ids, vals = sparse_noisy_counts([5], [1000], n_cells=2**62, epsilon=40.0, rng=0)
    assert 5 in ids and 2 < ids.size < 60  # ~18 empty cells out of 4.6e18 reach 1 (p = 4e-18)
    with pytest.raises(ParameterError, match=re.escape("about 1.24e+18 empty cells would come out >= 1")):
        sparse_noisy_counts([5], [1000], n_cells=2**62, epsilon=1.0, rng=0)


def test_one_charge_and_nothing_drawn_when_refused() -> None:
    acc = Accountant(1.0)
    with acc:
        sparse_noisy_counts(CELLS, COUNTS, n_cells=100, epsilon=0.4, noise="laplace", rng=0, note="leaves")
    (entry,) = acc.seal()
    assert (entry.mechanism, entry.epsilon, entry.sensitivity, entry.note) == ("laplace", 0.4, 1.0, "leaves")
    acc = Accountant(0.3)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError, match="nothing was drawn"):
        sparse_noisy_counts(CELLS, COUNTS, n_cells=100, epsilon=0.4, rng=gen, accountant=acc, dense_limit=0)
    assert gen.bit_generator.state == state and acc.n_charges == 0
    assert "sparse_noisy_counts: all 10 cells" in _charge_note()


def _charge_note() -> str:
    acc = Accountant(1.0)
    sparse_noisy_counts([1], [2], n_cells=10, epsilon=0.5, rng=0, accountant=acc, sensitivity=2)
    (entry,) = acc.seal()
    assert entry.sensitivity == 2.0 and entry.mechanism == "discrete_laplace"
    return entry.note


def test_same_seed_same_output_and_dense_path_equals_discrete_laplace() -> None:
    from privpub.core import discrete_laplace

    a = sparse_noisy_counts(CELLS, COUNTS, n_cells=60, epsilon=0.5, rng=7, dense_limit=0)
    b = sparse_noisy_counts(CELLS, COUNTS, n_cells=60, epsilon=0.5, rng=7, dense_limit=0)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    full = np.zeros(60, dtype=np.int64)
    full[CELLS] = COUNTS
    noisy = discrete_laplace(full, epsilon=0.5, rng=8)
    ids, vals = sparse_noisy_counts(CELLS[::-1], COUNTS[::-1], n_cells=60, epsilon=0.5, rng=8)
    np.testing.assert_array_equal(ids, np.flatnonzero(noisy >= 1))
    np.testing.assert_array_equal(vals, noisy[noisy >= 1])


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"cells": [1, 1]}, ParameterError, "cells must be distinct"),
    ({"cells": [1, 10]}, ParameterError, "cells must be ids in [0, n_cells=10)"),
    ({"cells": [-1, 2]}, ParameterError, "cells must be ids in [0, n_cells=10)"),
    ({"cells": [1.5, 2]}, ParameterError, "cells must be integer cell ids"),
    ({"counts": [1, -1]}, DomainError, "counts must be non-negative"),
    ({"counts": [1]}, ParameterError, "cells and counts must have the same length"),
    ({"n_cells": 0}, ParameterError, "n_cells must be an integer in [1, 2**62]"),
    ({"n_cells": 2**62 + 1}, ParameterError, "n_cells must be an integer in [1, 2**62]"),
    ({"n_cells": 10.0}, ParameterError, "n_cells must be an integer"),
    ({"noise": "gauss"}, ParameterError, "noise must be 'discrete' or 'laplace'"),
    ({"epsilon": 0}, ParameterError, "epsilon must be"),
    ({"dense_limit": -1}, ParameterError, "dense_limit must be an integer >= 0"),
    ({"counts": [2**53, 1], "noise": "laplace"}, DomainError, "at most 2**52"),
])
def test_bad_input_is_refused(kwargs, error, message) -> None:
    args = {"cells": [1, 2], "counts": [3, 4], "n_cells": 10, "epsilon": 1.0} | kwargs
    with pytest.raises(error, match=re.escape(message)):
        sparse_noisy_counts(args.pop("cells"), args.pop("counts"), rng=0, **args)


def test_empty_input_and_probabilities() -> None:
    ids, vals = sparse_noisy_counts([], [], n_cells=5, epsilon=50.0, rng=0)
    assert ids.size == vals.size == 0
    q = math.exp(-1.0)
    assert sparse_release_probability(1.0) == pytest.approx(q / (1 + q))
    assert sparse_release_probability(2.0, noise="laplace") == pytest.approx(0.5 * math.exp(-1.0))


@pytest.mark.statistical
@pytest.mark.parametrize(("noise", "dense_limit"), [("discrete", 10**6), ("discrete", 0), ("laplace", 0)])
def test_neighbour_ratio_within_epsilon_and_half_the_noise_detected(noise, dense_limit) -> None:
    """Cell 1 empty vs holding one record; the output is the released value of cell 1 (0 if absent).
    Two-sided Clopper-Pearson bounds on every output's probability ratio stay below e^epsilon, and
    exceed it at twice the epsilon (half the noise). Each call releases 4000 independent copies of
    the 3-cell table (copy i owns cells 3i..3i+2)."""
    copies, eps = 4000, 1.0

    def cell1(with_record: bool, epsilon: float, seed: int) -> np.ndarray:
        gen = np.random.default_rng(seed)
        out = []
        for _ in range(3):
            base = np.array([0, 1]) if with_record else np.array([0])
            cnt = np.array([2, 1]) if with_record else np.array([2])
            cells = (base[None, :] + 3 * np.arange(copies)[:, None]).ravel()
            ids, vals = sparse_noisy_counts(cells, np.tile(cnt, copies), n_cells=3 * copies, epsilon=epsilon,
                                            noise=noise, rng=gen, dense_limit=dense_limit)
            full = np.zeros(3 * copies, dtype=np.int64)
            full[ids] = vals
            out.append(np.minimum(full[1::3], 3))
        return np.concatenate(out)

    assert max_ratio_lower_bound(cell1(False, eps, 1), cell1(True, eps, 2), 1e-3) <= math.e**eps
    assert max_ratio_lower_bound(cell1(False, 2 * eps, 3), cell1(True, 2 * eps, 4), 1e-3) > math.e**eps
