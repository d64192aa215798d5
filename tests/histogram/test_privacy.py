"""Privacy: the paper's leak (spec section 3) and empirical neighbour-ratio tests.

Neighbours: D = (6, 5, 0) and D' = (5, 5, 0) differ by one record in bin 0.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
from statutils import clopper_pearson, max_ratio_lower_bound

from privpub.errors import PrivacyWarning
from privpub.histogram import (
    AHP,
    HPHP,
    LaplaceHistogram,
    ahp_structure,
    hphp_structure,
    noise_vector,
    publish_groups,
    rank_structure,
)

D = np.array([6, 5, 0])
D_PRIME = np.array([5, 5, 0])

pytestmark = pytest.mark.statistical


def _event_e(counts: np.ndarray) -> bool:
    """Spec section 3: published bin1 == bin2 > 0 and bin0 differs."""
    return bool(counts[1] == counts[2] and counts[1] > 0 and counts[0] != counts[1])


def _count_event(pub: HPHP, data: np.ndarray, runs: int, seed: int) -> int:
    gen = np.random.default_rng(seed)
    return sum(_event_e(pub.publish(data, epsilon=1.0, rng=gen).counts) for _ in range(runs))


def test_paper_variant_leaks_and_private_variant_does_not() -> None:
    """Spec test 12: Pr_D[E] > 0 = Pr_D'[E] for the paper's HPHP (infinite privacy loss)."""
    paper = HPHP(variant="paper", noise="laplace")
    with pytest.warns(PrivacyWarning):
        on_d = _count_event(paper, D, 3000, seed=1)
        on_d_prime = _count_event(paper, D_PRIME, 3000, seed=2)
    assert on_d > 200  # about 16% of the runs
    assert on_d_prime == 0  # impossible under D'
    # the private variant: E happens under both neighbours, with a bounded ratio
    private = HPHP(split=0.5, noise="laplace")
    on_d = _count_event(private, D, 3000, seed=3)
    on_d_prime = _count_event(private, D_PRIME, 3000, seed=4)
    assert on_d > 50 and on_d_prime > 50
    lo, _ = clopper_pearson(on_d, 3000, 1e-3)
    _, hi = clopper_pearson(on_d_prime, 3000, 1e-3)
    assert lo <= math.exp(1.0) * hi


# ------------------------------------------------------------------------------------------
# the structure step is epsilon1-DP (spec test 13), on the released partitions
# ------------------------------------------------------------------------------------------
def _partition_key(order: np.ndarray, bounds: np.ndarray) -> str:
    groups = sorted(tuple(sorted(order[a:b].tolist())) for a, b in itertools.pairwise(bounds))
    return "|".join("".join(map(str, g)) for g in groups)


def _partitions(
    structure: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    data: np.ndarray,
    eps_noise: float,
    runs: int,
    seed: int,
) -> dict[str, int]:
    """Draw the structure noise with the publishers' own sampler; evaluate each distinct y once."""
    gen = np.random.default_rng(seed)
    y = data[None, :] + noise_vector(runs * data.size, eps_noise, "discrete", gen).reshape(runs, data.size)
    uniq, inverse = np.unique(y, axis=0, return_inverse=True)
    keys = np.array([_partition_key(*structure(row)) for row in uniq])
    labels, counts = np.unique(keys[inverse.ravel()], return_counts=True)
    return dict(zip(labels.tolist(), counts.tolist()))


def _dp_holds(p: dict[str, int], q: dict[str, int], runs: int, epsilon: float) -> bool:
    """Clopper-Pearson 99.9% check of p_D^lower <= e^eps p_D'^upper in both directions."""
    for key in set(p) | set(q):
        a, b = p.get(key, 0), q.get(key, 0)
        if max(a, b) < 100:
            continue
        lo_a, hi_a = clopper_pearson(a, runs, 1e-3)
        lo_b, hi_b = clopper_pearson(b, runs, 1e-3)
        if lo_a > math.exp(epsilon) * hi_b or lo_b > math.exp(epsilon) * hi_a:
            return False
    return True


EPS, RHO = 5.0, 0.2
EPS1, EPS2 = RHO * EPS, (1 - RHO) * EPS

STRUCTURES: dict[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "hphp": lambda y: hphp_structure(y, epsilon1=EPS1, epsilon2=EPS2),
    "ahp": lambda y: ahp_structure(y, epsilon1=EPS1, epsilon2=EPS2),
    # the unattributed variant works on sort(H), whose sensitivity is 1 as well
    "hphp_unattributed": lambda y: (np.arange(y.size), rank_structure(np.sort(y), epsilon2=EPS2)),
}


@pytest.mark.parametrize("name", list(STRUCTURES))
def test_structure_is_epsilon1_dp_and_the_test_has_power(name: str) -> None:
    runs = 200_000
    structure = STRUCTURES[name]
    d, d_prime = (np.sort(D), np.sort(D_PRIME)) if name == "hphp_unattributed" else (D, D_PRIME)
    p = _partitions(structure, d, EPS1, runs, seed=10)
    q = _partitions(structure, d_prime, EPS1, runs, seed=11)
    assert sum(v >= 100 for v in p.values()) >= 2  # several partitions are actually compared
    assert _dp_holds(p, q, runs, EPS1)
    # with half the noise (scale 1/(2 eps1)) the same check must fail
    p_half = _partitions(structure, d, 2 * EPS1, runs, seed=12)
    q_half = _partitions(structure, d_prime, 2 * EPS1, runs, seed=13)
    assert not _dp_holds(p_half, q_half, runs, EPS1)


def _releases(name: str, data: np.ndarray, noise_factor: float, runs: int, seed: int) -> dict[str, int]:
    """Frequencies of the full released vector (structure at ε1, then one draw per group at ε2).

    Uses the publishers' sampler, structure functions and :func:`publish_groups`; each distinct
    (noisy vector, group noise) combination is published once. ``noise_factor`` 2 halves the noise.
    """
    gen = np.random.default_rng(seed)
    n = data.size
    y = data[None, :] + noise_vector(runs * n, noise_factor * EPS1, "discrete", gen).reshape(runs, n)
    uniq, inverse = np.unique(y, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    structures = [STRUCTURES[name](row) for row in uniq]
    n_groups = np.array([b.size - 1 for _, b in structures])[inverse]
    z = noise_vector(runs * n, noise_factor * EPS2, "discrete", gen).reshape(runs, n)
    z = np.where(np.arange(n)[None, :] < n_groups[:, None], z, 0)  # one draw per group
    combos, combo_inverse = np.unique(np.column_stack([inverse, z]), axis=0, return_inverse=True)
    keys = []
    for combo in combos:
        order, bounds = structures[int(combo[0])]
        out = publish_groups(data, order, bounds, combo[1 : bounds.size].astype(float))
        keys.append(",".join(f"{v:.6g}" for v in out))
    labels, counts = np.unique(np.array(keys)[combo_inverse.ravel()], return_counts=True)
    return dict(zip(labels.tolist(), counts.tolist()))


@pytest.mark.parametrize("name", ["hphp", "ahp"])
def test_whole_release_is_epsilon_dp_and_the_test_has_power(name: str) -> None:
    """End to end (structure + publishing), total ε = 5: released vectors obey the ε bound."""
    runs = 200_000
    p = _releases(name, D, 1.0, runs, seed=20)
    q = _releases(name, D_PRIME, 1.0, runs, seed=21)
    assert sum(v >= 100 for v in p.values()) >= 3
    assert _dp_holds(p, q, runs, EPS)
    p_half = _releases(name, D, 2.0, runs, seed=22)
    q_half = _releases(name, D_PRIME, 2.0, runs, seed=23)
    assert not _dp_holds(p_half, q_half, runs, EPS)


def test_publishers_use_the_tested_structure_functions() -> None:
    """The release's groups equal the structure function applied to the same noisy vector."""
    h = np.array([4, 0, 9, 9, 1, 30, 0, 2])
    for pub, fn in ((HPHP(split=RHO), STRUCTURES["hphp"]), (AHP(ratio=RHO), STRUCTURES["ahp"])):
        rel = pub.publish(h, epsilon=EPS, rng=np.random.default_rng(5))
        y = h + noise_vector(h.size, EPS1, "discrete", np.random.default_rng(5))
        order, bounds = fn(y)
        np.testing.assert_array_equal(rel.order, order)
        np.testing.assert_array_equal(rel.boundaries, bounds)


# ------------------------------------------------------------------------------------------
# Laplace baseline: output-probability ratios of one bin (count 3 vs 4)
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("noise", ["discrete", "laplace"])
def test_laplace_histogram_neighbour_ratio(noise: str) -> None:
    runs, eps = 200_000, 1.0

    def outputs(value: int, epsilon: float, seed: int) -> np.ndarray:
        # runs independent bins holding the same count = runs independent releases of that bin
        out = LaplaceHistogram(noise=noise).publish(np.full(runs, value), epsilon=epsilon, rng=seed).counts
        return np.floor(out) if noise == "laplace" else out  # bucket continuous outputs (post-processing)

    assert max_ratio_lower_bound(outputs(3, eps, 0), outputs(4, eps, 1), alpha=1e-3) <= math.exp(eps)
    # half the noise: the ratio bound exp(eps) is clearly violated
    assert max_ratio_lower_bound(outputs(3, 2 * eps, 2), outputs(4, 2 * eps, 3), alpha=1e-3) > math.exp(eps)
