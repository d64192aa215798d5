"""Shared helpers of the stream tests."""

from __future__ import annotations

import numpy as np
import pytest


def query_stream(n: int, window: int, lo: int, hi: int, seed: int) -> np.ndarray:
    """The spec's query protocol: after item t draw L ~ U{lo..hi}; if L <= min(t, W) ask a random
    range of length L inside the window. Returns a (q, 3) array of (time, l, r)."""
    g = np.random.default_rng(seed)
    out = []
    for t in range(1, n + 1):
        L = int(g.integers(lo, hi + 1))
        if L <= min(t, window):
            r = int(g.integers(max(L, t - window + L), t + 1))
            out.append((t, r - L + 1, r))
    return np.array(out, dtype=np.int64).reshape(-1, 3)


def online(pub, items, queries) -> np.ndarray:
    """Append items one at a time and ask each query at its time."""
    answers = []
    qi = 0
    for t, x in enumerate(items, start=1):
        pub.append(x)
        while qi < len(queries) and queries[qi, 0] == t:
            answers.append(pub.query(int(queries[qi, 1]), int(queries[qi, 2])))
            qi += 1
    return np.array(answers)


@pytest.fixture
def make_queries():
    return query_stream


@pytest.fixture
def run_online():
    return online
