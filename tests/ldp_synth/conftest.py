"""Shared fixtures of the ldp_synth tests."""

from __future__ import annotations

import numpy as np
import pytest


def chain_codes(n: int, d: int, *, keep: float = 0.9, k: int = 2, seed: int = 0) -> np.ndarray:
    """A Markov chain: X_j copies X_{j-1} with probability ``keep``, else uniform over ``k`` values."""
    gen = np.random.default_rng(seed)
    x = np.zeros((n, d), dtype=np.int64)
    x[:, 0] = gen.integers(k, size=n)
    for j in range(1, d):
        x[:, j] = np.where(gen.random(n) < keep, x[:, j - 1], gen.integers(k, size=n))
    return x


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
