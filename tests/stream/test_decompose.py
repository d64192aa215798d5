"""Fenwick decompositions: exact cover, node-count bounds, NP difference = signed node sum (§9.1-2)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from privpub.stream import RTP, decompose


@st.composite
def layouts_and_ranges(draw):
    heights = draw(st.lists(st.integers(1, 6), min_size=1, max_size=6))
    starts, s = [], 1
    for h in heights:
        starts.append(s)
        s += 1 << (h - 1)
    total = s - 1
    l = draw(st.integers(1, total))
    r = draw(st.integers(l, total))
    return starts, heights, l, r


@settings(max_examples=300, deadline=None)
@given(layouts_and_ranges())
def test_decomposition_covers_range_exactly(case):
    starts, heights, l, r = case
    total = starts[-1] + (1 << (heights[-1] - 1)) - 1
    ind = np.zeros(total + 1, dtype=int)
    for m, v, c in decompose(l, r, starts, heights):
        s = starts[m]
        lo = v - (v & -v)
        ind[s + lo : s + v] += c
    expected = np.zeros(total + 1, dtype=int)
    expected[l : r + 1] = 1
    np.testing.assert_array_equal(ind, expected)


@settings(max_examples=300, deadline=None)
@given(layouts_and_ranges())
def test_node_bounds_per_tree_piece(case):
    starts, heights, l, r = case
    pieces: dict[int, int] = {}
    for m, _v, _c in decompose(l, r, starts, heights):
        pieces[m] = pieces.get(m, 0) + 1
    for m, count in pieces.items():
        h, s = heights[m], starts[m]
        T = 1 << (h - 1)
        a, b = max(l, s) - s + 1, min(r, s + T - 1) - s + 1
        if a == 1 and b == T:
            assert count == 1
        elif b == T:
            assert count <= h  # suffix
        elif a == 1:
            assert count <= max(1, h - 1)  # prefix [1, b] with b < T
        else:
            assert count <= max(h, 2 * h - 3)


def test_inner_bound_is_attained():
    # height 5 (T = 16): [8, 15] = path(15) minus path(7) uses 2h - 3 = 7 nodes
    assert len(decompose(8, 15, [1], [5])) == 7


def test_sensitivity_is_height():
    for h in range(1, 8):
        T = 1 << (h - 1)
        worst = 0
        for m in range(1, T + 1):
            n, x = 0, m
            while x <= T:
                n += 1
                x += x & -x
            worst = max(worst, n)
        assert worst == h


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 200), st.integers(1, 200))
def test_publisher_answer_equals_signed_node_sum(seed, a, b):
    pub = RTP(window=512, epsilon=1.0, rng=seed, height=5, real=True, noise="laplace")
    data = np.random.default_rng(seed).random(300) * 10
    pub.extend(data)
    l, r = min(a, b) + 100, max(a, b) + 100
    times, coefs = pub.support(l, r)
    direct = float(np.sum(coefs * pub.node_values(times)))
    ans = pub.query(l, r)
    assert abs(ans - direct) <= 1e-9 * max(1.0, abs(ans))
