"""Privacy of the service's stream release path (issue 16): answers obtained over HTTP from a real
``privpub serve`` on two neighbouring streams, with a tight output event and two-sided
Clopper-Pearson bounds; a negative control shows the test detects half the noise.

RTP of height 3 (trees of 4 steps, node noise discrete Laplace of scale 3/epsilon): in every
tree, stream B has one more event than stream A in the tree's first step (the neighbouring
relation with sensitivity 1, applied to disjoint trees, which are independent repetitions). The
event E = {node 1 >= 1, node 2 >= 1, node 4 >= 1} (the nodes that hold that step, read through the
ranges [s, s], [s, s+1], [s, s+3]) has probability ratio exactly e^epsilon; the complementary-side
event {all three <= 0} has ratio exactly e^epsilon the other way.
"""

from __future__ import annotations

import math

import httpx
import numpy as np
import pytest
from statutils import ratio_lower_bound
from stream_helpers import create_stream, post_counts, ranges

N_TREES = 4000
ALPHA = 1e-6


def _nodes(adm: httpx.Client, epsilon: float, first: int, seed: int) -> np.ndarray:
    """(N_TREES, 3): nodes 1, 2 and 4 of each tree, as answered by the service."""
    s = create_stream(adm, publisher="rtp", epsilon=epsilon, window=4 * N_TREES, height=3, rng=seed)
    counts = np.zeros(4 * N_TREES, dtype=np.int64)
    counts[::4] = first
    post_counts(adm, s["id"], counts)
    starts = 1 + 4 * np.arange(N_TREES)
    q = np.concatenate([np.stack([starts, starts + off], 1) for off in (0, 1, 3)])
    return ranges(adm, s["id"], q, log=False).reshape(3, N_TREES).T


def _worst_ratio(adm: httpx.Client, epsilon_used: float) -> float:
    a = _nodes(adm, epsilon_used, 0, 11)
    b = _nodes(adm, epsilon_used, 1, 12)
    hi_a, hi_b = int(np.all(a >= 1, axis=1).sum()), int(np.all(b >= 1, axis=1).sum())
    lo_a, lo_b = int(np.all(a <= 0, axis=1).sum()), int(np.all(b <= 0, axis=1).sum())
    n = N_TREES
    return max(ratio_lower_bound(hi_b, n, hi_a, n, ALPHA / 2), ratio_lower_bound(lo_a, n, lo_b, n, ALPHA / 2))


@pytest.mark.statistical
def test_service_stream_release_is_epsilon_dp(adm: httpx.Client) -> None:
    eps = 1.0
    assert _worst_ratio(adm, eps) <= math.exp(eps)


@pytest.mark.statistical
def test_negative_control_half_the_noise_is_detected(adm: httpx.Client) -> None:
    # a stream released with twice the epsilon (half the noise), judged against epsilon = 1
    assert _worst_ratio(adm, 2.0) > math.exp(1.0)
