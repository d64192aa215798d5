"""Issue-12 findings in privpub.spatial: each failed on main with a raw traceback, a NaN answer, a
silent leaf index or an allocation that exhausted memory."""

from __future__ import annotations

import numpy as np
import pytest

from privpub.errors import DomainError, ParameterError
from privpub.spatial import (
    AHEAD,
    GTR,
    HDG,
    KDGHT,
    PUBLISHERS,
    RapporGrid,
    UniformGrid,
    synthetic_checkin,
)

BOX = (0.0, 0.0, 1.0, 1.0)


@pytest.fixture(scope="module")
def points() -> np.ndarray:
    return synthetic_checkin(3000, rng=2)


@pytest.mark.parametrize("name", sorted(PUBLISHERS))
@pytest.mark.parametrize("epsilon", [800.0, 41.0, 1e-20, 1e-12])
def test_epsilon_outside_the_randomisers_range_is_a_clear_error(points, name, epsilon) -> None:
    """Main: KDG-HT raised OverflowError at 800 and ZeroDivisionError at 1e-20."""
    with pytest.raises(ParameterError, match=r"epsilon"):
        PUBLISHERS[name]().publish(points, bounds=BOX, epsilon=epsilon, rng=0)


def test_budget_mode_checks_the_half_epsilon(points) -> None:
    KDGHT(kdg_split="budget").publish(points, bounds=BOX, epsilon=40.0, rng=0)
    with pytest.raises(ParameterError, match="epsilon"):
        KDGHT(kdg_split="budget").publish(points, bounds=BOX, epsilon=6e-10, rng=0)
    KDGHT().publish(points, bounds=BOX, epsilon=6e-10, rng=0)  # one report at 6e-10 is fine


@pytest.mark.parametrize("name", sorted(PUBLISHERS))
def test_large_epsilon_inside_the_range_works(points, name) -> None:
    rel = PUBLISHERS[name]().publish(points, bounds=BOX, epsilon=39.0, rng=0)
    assert rel.values.sum() == pytest.approx(3000)
    assert np.all(np.isfinite(rel.range_count([[0.1, 0.1, 0.4, 0.9]])))


@pytest.mark.parametrize("bounds", [
    (-1e308, -1e308, 1e308, 1e308),          # x1 - x0 overflows: main answered NaN
    (-1e200, -1e200, 1e200, 1e200),          # the area overflows
    (1e15, 0.0, 1e15 + 1.0, 1.0),            # a side too narrow for its magnitude
    (0.0, 0.0, 1e-320, 1.0),                 # subnormal side
])
def test_degenerate_float_bounds_are_refused(bounds) -> None:
    pts = np.array([[bounds[0], bounds[1]], [bounds[2], bounds[3]]])
    for cls in PUBLISHERS.values():
        with pytest.raises(ParameterError, match="bounds"):
            cls().publish(pts, bounds=bounds, epsilon=1.0, rng=0)


def test_wide_but_representable_bounds_answer_finite_numbers() -> None:
    box = (-1e150, -1e150, 1e150, 1e150)
    pts = np.array([[0.0, 0.0], [5e149, -5e149], [-1e150, 1e150]])
    for cls in PUBLISHERS.values():
        rel = cls().publish(pts, bounds=box, epsilon=1.0, rng=0)
        ans = rel.range_count([list(box), [0, 0, 1e150, 1e150]])
        assert np.all(np.isfinite(ans)) and ans[0] == pytest.approx(3.0)


def test_locate_refuses_nan_and_points_outside(points) -> None:
    rel = KDGHT().publish(points, bounds=BOX, epsilon=1.0, rng=0)
    with pytest.raises(DomainError, match="points must be finite"):
        rel.locate([[np.nan, 0.5]])  # main: mapped to a leaf
    with pytest.raises(DomainError, match="points must be finite"):
        rel.locate([[0.5, np.inf]])
    with pytest.raises(DomainError, match="inside the declared bounds"):
        rel.locate([[2.0, 0.5]])  # main: mapped to a leaf
    assert rel.locate([0.5, 0.5]).shape == (1,)


@pytest.mark.parametrize(("factory", "option"), [
    (lambda: UniformGrid(g=10**6), "lower g"),
    (lambda: RapporGrid(g=5000), "lower g"),
    (lambda: GTR(height=20), "lower height"),
    (lambda: HDG(g1=2**13), "lower g1"),
    (lambda: AHEAD(height=13), "lower height"),
    (lambda: KDGHT(m=10**4, n=10**4), "lower m or n"),
])
def test_oversized_grids_are_refused_before_allocation(factory, option) -> None:
    """Main: MemoryError (or the machine's memory exhausted) instead of a message."""
    with pytest.raises(ParameterError, match=f"cells .* GiB .*{option}"):
        factory()


def test_kdght_tree_growth_is_checked_per_level(points) -> None:
    """A tree that would outgrow memory stops with the size and the option that lowers it."""
    with pytest.raises(ParameterError, match=r"level-\d+ partition would have [\d,]+ cells.*lower h"):
        KDGHT(h=25, theta=1e-300).publish(points, bounds=BOX, epsilon=1.0, rng=0)


def test_default_grids_stay_within_the_caps(points) -> None:
    assert UniformGrid().publish(points, bounds=BOX, epsilon=39.0, rng=0).grid_shape == (1024, 1024)
    assert UniformGrid(cap=64).publish(points, bounds=BOX, epsilon=20.0, rng=0).grid_shape == (64, 64)
    with pytest.raises(ParameterError, match="cap"):
        UniformGrid(cap=10**5)
