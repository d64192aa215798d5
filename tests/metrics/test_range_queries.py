"""Range-query helpers against naive sums (Hypothesis), workloads, bad input."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import privpub.metrics as M
from privpub.errors import DomainError, ParameterError


@st.composite
def hist_and_ranges(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 40))
    counts = draw(arrays(np.int64, n, elements=st.integers(0, 1000)))
    q = draw(st.integers(0, 10))
    pairs = [sorted(draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2))) for _ in range(q)]
    return counts, np.array(pairs, dtype=np.int64).reshape(q, 2)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(hist_and_ranges())
def test_range_sums_1d_naive(case: tuple[np.ndarray, np.ndarray]) -> None:
    counts, ranges = case
    got = M.range_sums_1d(counts, ranges)
    assert got.dtype == np.int64
    assert got.tolist() == [int(counts[lo:hi + 1].sum()) for lo, hi in ranges]


def test_range_sums_1d_batched_and_float(rng: np.random.Generator) -> None:
    x = rng.normal(size=(3, 2, 10))
    ranges = M.random_ranges_1d(10, 7, rng=rng)
    got = M.range_sums_1d(x, ranges)
    assert got.shape == (3, 2, 7)
    expected = np.stack([x[..., lo:hi + 1].sum(axis=-1) for lo, hi in ranges], axis=-1)
    np.testing.assert_allclose(got, expected, atol=1e-12)
    assert M.range_sums_1d([1, 2, 3], [0, 2]).tolist() == [6]  # a single range as a flat pair


@pytest.mark.parametrize(
    ("ranges", "error", "message"),
    [
        ([[0, 4]], DomainError, "ranges must satisfy 0 <= lo <= hi < 4, got [0, 4]"),
        ([[2, 1]], DomainError, "ranges must satisfy 0 <= lo <= hi < 4, got [2, 1]"),
        ([[-1, 1]], DomainError, "ranges must satisfy 0 <= lo <= hi < 4, got [-1, 1]"),
        ([[0, 1, 2]], ParameterError, "ranges must have shape (q, 2), got (1, 3)"),
        ([[0.5, 1]], DomainError, "ranges must hold integer bin indices"),
    ],
)
def test_range_sums_1d_bad_ranges(ranges: object, error: type, message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        M.range_sums_1d([1, 2, 3, 4], ranges)


@st.composite
def grid_and_rects(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    nx, ny = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    grid = draw(arrays(np.int64, (nx, ny), elements=st.integers(0, 100)))
    q = draw(st.integers(0, 8))
    rects = []
    for _ in range(q):
        xs = sorted(draw(st.lists(st.integers(0, nx - 1), min_size=2, max_size=2)))
        ys = sorted(draw(st.lists(st.integers(0, ny - 1), min_size=2, max_size=2)))
        rects.append([xs[0], ys[0], xs[1], ys[1]])
    return grid, np.array(rects, dtype=np.int64).reshape(q, 4)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(grid_and_rects())
def test_range_sums_2d_naive(case: tuple[np.ndarray, np.ndarray]) -> None:
    grid, rects = case
    got = M.range_sums_2d(grid, rects)
    assert got.tolist() == [int(grid[a:c + 1, b:d + 1].sum()) for a, b, c, d in rects]
    # integer boxes [a, b, c + 1, d + 1] give the same answers
    boxes = rects + np.array([0, 0, 1, 1])
    np.testing.assert_allclose(M.box_sums_2d(grid, boxes.reshape(-1, 4)), got, atol=1e-9)


def test_summed_area_table() -> None:
    g = np.arange(20).reshape(4, 5)
    sat = M.summed_area_table(g)
    assert sat.shape == (5, 6)
    for i in range(5):
        for j in range(6):
            assert sat[i, j] == g[:i, :j].sum()


def test_box_sums_2d_fractional_equals_refined_grid(rng: np.random.Generator) -> None:
    # refining each cell into k x k sub-cells with count / k^2 each is exact under uniformity
    k = 4
    grid = rng.integers(0, 50, (5, 6)).astype(float)
    fine = np.kron(grid, np.ones((k, k))) / k**2
    corners = rng.integers(0, [5 * k, 6 * k], size=(30, 2))
    ends = rng.integers(0, [5 * k, 6 * k], size=(30, 2))
    lo, hi = np.minimum(corners, ends), np.maximum(corners, ends)
    boxes = np.column_stack([lo, hi + 1]) / k
    expected = [fine[a:c + 1, b:d + 1].sum() for (a, b), (c, d) in zip(lo, hi)]
    np.testing.assert_allclose(M.box_sums_2d(grid, boxes), expected, rtol=1e-12, atol=1e-9)


def test_range_sums_2d_bad_input() -> None:
    g = np.ones((3, 4))
    msg = "0 <= x_lo <= x_hi < 3 and 0 <= y_lo <= y_hi < 4, got [0, 0, 3, 0]"
    with pytest.raises(DomainError, match=re.escape(msg)):
        M.range_sums_2d(g, [[0, 0, 3, 0]])
    with pytest.raises(ParameterError, match=re.escape("rectangles must have shape (q, 4), got (1, 2)")):
        M.range_sums_2d(g, [[0, 0]])
    with pytest.raises(ParameterError, match=re.escape("grid must be 2-dimensional, got shape (3,)")):
        M.range_sums_2d([1, 2, 3], [[0, 0, 0, 0]])
    with pytest.raises(DomainError, match="boxes must satisfy"):
        M.box_sums_2d(g, [[0, 0, 3.5, 1]])
    with pytest.raises(DomainError, match="grid must be finite"):
        M.range_sums_2d([[np.nan]], [[0, 0, 0, 0]])


# --------------------------------------------------------------------------------------------
# workloads
# --------------------------------------------------------------------------------------------
def test_all_ranges_1d() -> None:
    r = M.all_ranges_1d(10, 3)
    assert r.shape == (8, 2)
    assert (r[:, 1] - r[:, 0] == 2).all() and r[0].tolist() == [0, 2] and r[-1].tolist() == [7, 9]
    with pytest.raises(ParameterError, match=re.escape("length must be <= n_bins (10), got 11")):
        M.all_ranges_1d(10, 11)


def test_random_ranges_reproducible_and_valid() -> None:
    a = M.random_ranges_1d(50, 500, rng=3)
    assert np.array_equal(a, M.random_ranges_1d(50, 500, rng=3))
    assert not np.array_equal(a, M.random_ranges_1d(50, 500, rng=4))
    assert ((0 <= a[:, 0]) & (a[:, 0] <= a[:, 1]) & (a[:, 1] < 50)).all()
    # both ends are hit: every bin is a possible lo and hi
    assert a[:, 0].min() == 0 and a[:, 1].max() == 49
    fixed = M.random_ranges_1d(50, 200, length=50, rng=0)
    assert (fixed == [0, 49]).all()
    with pytest.raises(ParameterError, match=re.escape("n_queries must be an integer >= 1, got 0")):
        M.random_ranges_1d(50, 0, rng=0)


def test_random_rectangles_and_boxes() -> None:
    r = M.random_rectangles_2d((7, 9), 400, rng=1)
    assert np.array_equal(r, M.random_rectangles_2d((7, 9), 400, rng=1))
    assert ((r[:, 0] <= r[:, 2]) & (r[:, 2] < 7) & (r[:, 1] <= r[:, 3]) & (r[:, 3] < 9)).all()
    M.range_sums_2d(np.ones((7, 9)), r)  # all valid
    b = M.random_boxes_2d(2000, area=(0.2, 0.4), bounds=(0, 0, 2, 4), rng=8)
    frac = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) / 8
    assert ((frac > 0.2 - 1e-12) & (frac < 0.4 + 1e-12)).all()
    assert (b[:, 0] >= 0).all() and (b[:, 2] <= 2 + 1e-12).all() and (b[:, 3] <= 4 + 1e-12).all()
    with pytest.raises(ParameterError, match=re.escape("shape must be a pair (nx, ny), got 5")):
        M.random_rectangles_2d(5, 3, rng=0)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="area must satisfy"):
        M.random_boxes_2d(3, area=(0.5, 0.2), rng=0)


def test_range_sums_1d_scalar_counts() -> None:
    with pytest.raises(ParameterError, match=re.escape("counts must be at least 1-dimensional, got shape ()")):
        M.range_sums_1d(5, [[0, 0]])
