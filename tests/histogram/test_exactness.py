"""Issue 12, "noise erased by rounding": counts up to 2**62 keep their noise (int64 end to end)."""

from __future__ import annotations

import numpy as np
import pytest

from privpub.core import laplace
from privpub.errors import DomainError
from privpub.histogram import AHP, HPHP, LaplaceHistogram

BIG = 2**60


def test_laplace_histogram_keeps_huge_counts_exact_and_noisy() -> None:
    """On main, [2**60 + 128, 0] gave exactly 2**60 for every seed and [2**60 + 129, 0] exactly
    2**60 + 256: the neighbours' outputs never overlapped (infinite epsilon)."""
    a = np.array([LaplaceHistogram().publish([BIG + 128, 0], epsilon=1.0, rng=s).counts[0] for s in range(400)])
    b = np.array([LaplaceHistogram().publish([BIG + 129, 0], epsilon=1.0, rng=s).counts[0] for s in range(400)])
    assert a.dtype == np.int64
    # the noise is there: the outputs spread around the true value as the discrete Laplace does
    assert len(np.unique(a)) > 5
    assert abs(float(np.mean(a - (BIG + 128)))) < 0.5
    # neighbouring inputs give overlapping output distributions
    common = np.intersect1d(a, b)
    assert common.size >= 5


@pytest.mark.parametrize("pub", [HPHP(), AHP(), LaplaceHistogram(noise="laplace")], ids=repr)
def test_real_valued_outputs_refuse_counts_beyond_2_52(pub: object) -> None:
    with pytest.raises(DomainError, match=r"2\*\*52"):
        pub.publish([2**53, 1], epsilon=1.0, rng=0)  # type: ignore[attr-defined]


def test_float_laplace_refuses_values_beyond_2_52() -> None:
    with pytest.raises(DomainError, match=r"at most 2\*\*52"):
        laplace([2.0**55], epsilon=1.0, rng=0)


def test_hphp_group_sums_are_exact_below_the_limit() -> None:
    counts = np.array([2**50 + 1, 2**50 + 3, 0, 5])
    rel = HPHP().publish(counts, epsilon=1.0, rng=0)
    assert np.all(np.isfinite(rel.counts))
