"""Boundary validation, role assignment and one collection round (per-user or exact simulation)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import check_array, check_bounds_2d
from privpub.errors import DomainError, ParameterError
from privpub.ldp import OUE, SUE

__all__ = ["MODES", "Role", "check_bounds", "check_points", "check_rects", "client_reports", "collect"]

MODES = ("simulate", "per_user")
#: bits per per-user chunk (bounds the memory of the vectorised client at ~16 MB)
_CHUNK_BITS = 1 << 24

Bounds = tuple[float, float, float, float]


@dataclass(frozen=True)
class Role:
    """One disjoint group of users: its name, size, oracle, epsilon per report, reports per user."""

    name: str
    size: int
    mechanism: str
    epsilon: float
    reports: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "mechanism": self.mechanism,
                "epsilon": self.epsilon, "reports": self.reports}


def check_bounds(bounds: Any) -> Bounds:
    """Validate the public domain ``(x0, y0, x1, y1)`` (see :func:`privpub.core.check_bounds_2d`)."""
    return check_bounds_2d(bounds)


def check_points(points: ArrayLike, bounds: Bounds, *, clip: bool = False) -> NDArray[np.float64]:
    """Validate an ``(n, 2)`` array of finite points inside ``bounds`` (or clamp them if ``clip``)."""
    arr = np.asarray(check_array(points, "points", ndim=2), dtype=np.float64)
    if arr.shape[1] != 2:
        raise ParameterError(f"points must have shape (n, 2), got {arr.shape}")
    x0, y0, x1, y1 = bounds
    lo = np.array([x0, y0])
    hi = np.array([x1, y1])
    bad = arr < lo
    bad |= arr > hi
    if bad.any():
        outside = bad.any(axis=1)
        if not clip:
            k = int(np.argmax(outside))
            raise DomainError(
                f"points must lie inside the declared bounds {bounds}, got {int(outside.sum())} outside "
                f"(first: {tuple(arr[k])}); pass clip=True to clamp them to the boundary"
            )
        arr = np.clip(arr, lo, hi)
    return arr


def check_rects(rects: ArrayLike, bounds: Bounds) -> NDArray[np.float64]:
    """Validate ``(q, 4)`` query rectangles ``[x0, y0, x1, y1]`` and clip them to the domain."""
    arr = check_array(rects, "rects", allow_empty=True).astype(np.float64)
    if arr.ndim == 1 and arr.size == 4:
        arr = arr.reshape(1, 4)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ParameterError(f"rects must have shape (q, 4) with rows [x0, y0, x1, y1], got {arr.shape}")
    if np.any(arr[:, 2] < arr[:, 0]) or np.any(arr[:, 3] < arr[:, 1]):
        raise ParameterError("rects must satisfy x0 <= x1 and y0 <= y1 in every row [x0, y0, x1, y1]")
    x0, y0, x1, y1 = bounds
    out = arr.copy()
    out[:, [0, 2]] = np.clip(out[:, [0, 2]], x0, x1)
    out[:, [1, 3]] = np.clip(out[:, [1, 3]], y0, y1)
    return out


def _oracle(mechanism: str, d: int) -> OUE | SUE:
    if mechanism == "OUE":
        return OUE(domain_size=d)
    if mechanism == "SUE":
        return SUE(domain_size=d)
    raise ParameterError(f"mechanism must be 'OUE' or 'SUE', got {mechanism!r}")


def client_reports(
    cells: NDArray[np.int64],
    d: int,
    *,
    epsilon: float,
    rng: np.random.Generator,
    mechanism: str = "OUE",
    packed: bool = False,
) -> NDArray[np.bool_] | NDArray[np.uint8]:
    """The client side: each user (one row) randomises the one-hot vector of its cell.

    This is all a user ever sends: one ``d``-bit report at ``epsilon`` (OUE: own bit kept as 1
    w.p. 1/2, every other bit set w.p. 1/(1+e^eps); SUE: RAPPOR's symmetric bits). ``packed``:
    the same reports bit-packed, ``(n, ceil(d / 8))`` uint8 (see :meth:`privpub.ldp.OUE.perturb`).
    """
    return _oracle(mechanism, max(d, 2)).perturb(cells, epsilon=epsilon, rng=rng, packed=packed)


def collect(
    cells: NDArray[np.int64],
    d: int,
    *,
    epsilon: float,
    mode: str,
    rng: np.random.Generator,
    mechanism: str = "OUE",
) -> NDArray[np.float64]:
    """One collection round: each user of the group reports its cell in ``{0..d-1}`` once.

    ``mode="per_user"`` runs the client randomiser of every user and sums the reports (what a
    deployment does); ``mode="simulate"`` draws the same support counts exactly from two
    binomials per cell (spec section 4). Returns the unbiased count estimates of the group.
    """
    n = int(cells.size)
    if n == 0:
        return np.zeros(d, dtype=np.float64)
    d_eff = max(d, 2)  # a 1-cell domain carries no information; pad with an empty cell
    oracle = _oracle(mechanism, d_eff)
    if mode == "simulate":
        counts = np.bincount(cells, minlength=d_eff)
        support = oracle.simulate_support(counts, epsilon=epsilon, rng=rng)
    else:
        support = np.zeros(d_eff, dtype=np.int64)
        step = max(1, _CHUNK_BITS // d_eff)
        for s in range(0, n, step):
            reports = client_reports(cells[s:s + step], d_eff, epsilon=epsilon, rng=rng, mechanism=mechanism,
                                     packed=True)
            support += oracle.aggregate(reports, epsilon=epsilon)
    est = oracle.estimate_from_support(support, n, epsilon=epsilon)
    return np.asarray(est[:d], dtype=np.float64)


