"""The compiled exact grouping returns the SAME groups as the pure-Python kernel it replaced.

``data/grouping_f3a90b8.json`` holds the boundaries that ``dp_group_fast`` returned at commit
f3a90b8 (the pure-Python deque, which was the ``"fast"`` path below 5 * 10^4 bins) on the
inputs built by :func:`grouping_input`: the sorted noisy values of HPHP's structure step on
10^4-bin histograms of five families of counts, at two budgets. The inputs are built with
NumPy only (integer two-sided geometric noise, so the sorted values have many ties), so they do
not depend on privpub's sampler. Regenerate (with that commit's kernels module) with
``python tests/histogram/test_grouping_identity.py [path/to/old/_kernels.py]``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

FIXTURE = Path(__file__).parent / "data" / "grouping_f3a90b8.json"
FAMILIES = ("uniform", "poisson", "zipf1.1", "zipf1.5", "mostly_zero")
EPSILONS = (0.1, 1.0)
N = 10_000
ZIPF_CAP = 2**31


def family_counts(family: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Counts of one family (frozen: the fixture depends on it)."""
    if family == "uniform":
        return rng.integers(0, 1001, n)
    if family == "poisson":
        return rng.poisson(50.0, n)
    if family.startswith("zipf"):
        a = float(family[4:])
        x = rng.zipf(a, n)
        while np.any(big := x > ZIPF_CAP):  # Zipf(a) truncated to [1, 2**31]
            x[big] = rng.zipf(a, int(big.sum()))
        return x
    if family == "mostly_zero":
        return np.where(rng.random(n) < 0.95, 0, rng.poisson(30.0, n))
    raise ValueError(family)


def grouping_input(family: str, epsilon: float, n: int = N) -> tuple[np.ndarray, float, float]:
    """Sorted noisy values ``y`` and the constants ``c``, ``gamma`` of HPHP's structure step."""
    rng = np.random.default_rng([FAMILIES.index(family), int(epsilon * 1000), n])
    counts = family_counts(family, n, rng)
    eps1, eps2 = 0.85 * epsilon, 0.15 * epsilon
    q = 1.0 - np.exp(-eps1)  # two-sided geometric = difference of two geometric draws
    noise = rng.geometric(q, n) - rng.geometric(q, n)
    y = np.sort((counts + noise).astype(np.float64))

    def var(eps: float) -> float:
        p = np.exp(-eps)
        return float(2 * p / (1 - p) ** 2)

    return y, var(eps2), var(eps1)


def _key(family: str, epsilon: float) -> str:
    return f"{family}@{epsilon}"


def _digest(y: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(y).tobytes()).hexdigest()[:16]


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_fast_grouping_is_identical_to_the_pure_python_kernel_and_optimal(family: str, epsilon: float) -> None:
    from privpub.histogram import dp_group, dp_group_fast, dp_group_quadratic

    y, c, gamma = grouping_input(family, epsilon)
    saved = json.loads(FIXTURE.read_text())[_key(family, epsilon)]
    assert saved["digest"] == _digest(y), "the test input changed"
    expected = np.asarray(saved["boundaries"], dtype=np.int64)
    cost, bounds = dp_group_fast(y, c, gamma)
    np.testing.assert_array_equal(bounds, expected)
    assert cost == saved["cost"]  # bit for bit: the same floating-point operations
    np.testing.assert_array_equal(dp_group(y, c, gamma, method="deque")[1], expected)
    # and it is optimal: the O(n^2) reference's cost, within the spec's rounding tolerance
    # (section 4; the prefix sums of Zipf(1.1) counts near 2**31 lose about 10^6 to rounding)
    ref_cost, ref_bounds = dp_group_quadratic(y, c, gamma)
    tol = 1e-8 * (1 + abs(ref_cost)) + 1e-12 * float(np.sum((y - y.mean()) ** 2))
    assert cost == pytest.approx(ref_cost, abs=tol)
    if not family.startswith("zipf1.1"):  # elsewhere no rounding-level near-ties: the same groups
        np.testing.assert_array_equal(ref_bounds, expected)


if __name__ == "__main__":
    import importlib.util
    import sys

    if len(sys.argv) > 1:  # a saved copy of the old module (it imports only privpub.errors)
        spec = importlib.util.spec_from_file_location("old_kernels", sys.argv[1])
        assert spec is not None and spec.loader is not None
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        fast = old.dp_group_fast
    else:
        from privpub.histogram import dp_group_fast as fast

    out: dict[str, dict[str, object]] = {}
    for fam in FAMILIES:
        for eps in EPSILONS:
            y, c, gamma = grouping_input(fam, eps)
            cost, bounds = fast(y, c, gamma)
            out[_key(fam, eps)] = {"digest": _digest(y), "cost": float(cost), "boundaries": bounds.tolist()}
            print(fam, eps, bounds.size - 1, "groups;", y.size - np.unique(y).size, "tied values")
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(out, separators=(",", ":")) + "\n")
