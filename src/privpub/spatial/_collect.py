"""Boundary validation, role splits and the collection rounds of the spatial publishers.

Every spatial publisher runs one parallel-composition block over *disjoint user groups*
(roles): each user belongs to exactly one group, drawn at random before any report, and sends
the reports of that group only. :class:`Collection` runs one group's round and lets the LDP
oracle charge the active accountant as it draws (per-user reports or their exact aggregated
law); the publishers never write a ledger entry.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import Accountant, ParallelBlock, check_array, check_bounds_2d, check_epsilon
from privpub.errors import DomainError, ParameterError
from privpub.ldp import OUE, SUE

__all__ = [
    "MAX_CELLS",
    "MODES",
    "Collection",
    "Role",
    "check_bounds",
    "check_cells",
    "check_grid_height",
    "check_local_epsilon",
    "check_mode",
    "check_points",
    "check_rects",
    "client_reports",
    "collect",
    "split_counts",
    "user_groups",
]

MODES = ("simulate", "per_user")
#: bits per per-user chunk (bounds the memory of the vectorised clients at 16 MiB of packed reports)
_CHUNK_BITS = 1 << 27
#: largest number of cells (grid cells or tree leaves) a spatial release may hold
MAX_CELLS = 1 << 24
#: the largest ``h`` with ``4**h <= MAX_CELLS`` (a 4096 x 4096 grid)
MAX_GRID_HEIGHT = (MAX_CELLS.bit_length() - 1) // 2
#: bytes of working memory per cell (coordinates, counts, estimates, levels), for messages
_BYTES_PER_CELL = 96
#: a box side must resolve 2**22 equal parts in float64 (MTR halves sides down to 2e-6)
_RESOLUTION_BITS = 22

Bounds = tuple[float, float, float, float]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]


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


# ---------------------------------------------------------------------------------------------
# validation at the boundary
# ---------------------------------------------------------------------------------------------
def check_bounds(bounds: Any) -> Bounds:
    """Validate the public domain ``(x0, y0, x1, y1)`` for spatial use.

    On top of :func:`privpub.core.check_bounds_2d` (four finite numbers, ``x1 > x0``,
    ``y1 > y0``): the side lengths and the area must be finite and non-zero in float64, and each
    side must resolve ``2**22`` equal parts (the finest split a tree may make) at the box's
    magnitude; otherwise cell edges would coincide and answers would be NaN.
    """
    x0, y0, x1, y1 = check_bounds_2d(bounds)
    with np.errstate(over="ignore"):
        w, h = x1 - x0, y1 - y0
        area = w * h
    if not (math.isfinite(w) and math.isfinite(h) and math.isfinite(area)):
        raise ParameterError(
            f"bounds must have finite side lengths and area in float64, got {(x0, y0, x1, y1)} "
            f"(x1 - x0 = {w:g}, y1 - y0 = {h:g}); rescale the coordinates"
        , param="bounds")
    if area <= 0.0 or not area > 0:
        raise ParameterError(f"bounds must have a non-zero area in float64, got {(x0, y0, x1, y1)}", param="bounds")
    for lo, hi, side, axis in ((x0, x1, w, "x"), (y0, y1, h, "y")):
        ulp = float(np.spacing(max(abs(lo), abs(hi))))
        if side < ulp * 2.0**_RESOLUTION_BITS:
            raise ParameterError(
                f"bounds are too narrow along {axis} for their magnitude in float64: the side "
                f"{side:g} must be at least {ulp * 2.0**_RESOLUTION_BITS:g} (2**{_RESOLUTION_BITS} "
                f"float steps at {max(abs(lo), abs(hi)):g}); shift the coordinates towards 0"
            , param="bounds")
    return (x0, y0, x1, y1)


def check_points(points: ArrayLike, bounds: Bounds, *, clip: bool = False, name: str = "points"
                 ) -> F64:
    """Validate an ``(n, 2)`` array of finite points inside ``bounds`` (or clamp them if ``clip``)."""
    arr = np.asarray(check_array(points, name, ndim=2), dtype=np.float64)
    if arr.shape[1] != 2:
        raise ParameterError(f"{name} must have shape (n, 2), got {arr.shape}", param=name)
    x0, y0, x1, y1 = bounds
    if arr.shape[0] and (x0 <= arr[:, 0].min() and arr[:, 0].max() <= x1
                         and y0 <= arr[:, 1].min() and arr[:, 1].max() <= y1):
        return arr  # all inside: four reductions instead of two (n, 2) masks
    lo = np.array([x0, y0])
    hi = np.array([x1, y1])
    bad = arr < lo
    bad |= arr > hi
    if bad.any():
        outside = bad.any(axis=1)
        if not clip:
            k = int(np.argmax(outside))
            raise DomainError(
                f"{name} must lie inside the declared bounds {bounds}, got {int(outside.sum())} outside "
                f"(first: {tuple(float(v) for v in arr[k])}), or be clamped to the boundary", param=name, fix={"clip": True}
            )
        arr = np.clip(arr, lo, hi)
    return arr


def check_rects(rects: ArrayLike, bounds: Bounds) -> F64:
    """Validate ``(q, 4)`` query rectangles ``[x0, y0, x1, y1]`` and clip them to the domain."""
    arr = check_array(rects, "rects", allow_empty=True).astype(np.float64)
    if arr.ndim == 1 and arr.size == 4:
        arr = arr.reshape(1, 4)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ParameterError(f"rects must have shape (q, 4) with rows [x0, y0, x1, y1], got {arr.shape}", param="rects")
    if np.any(arr[:, 2] < arr[:, 0]) or np.any(arr[:, 3] < arr[:, 1]):
        raise ParameterError("rects must satisfy x0 <= x1 and y0 <= y1 in every row [x0, y0, x1, y1]", param="rects")
    x0, y0, x1, y1 = bounds
    out = arr.copy()
    out[:, [0, 2]] = np.clip(out[:, [0, 2]], x0, x1)
    out[:, [1, 3]] = np.clip(out[:, [1, 3]], y0, y1)
    return out


def check_mode(mode: Any) -> str:
    if mode not in MODES:
        raise ParameterError(f"mode must be one of {MODES}, got {mode!r}", param="mode")
    return str(mode)


def _oracle(mechanism: str, d: int) -> OUE | SUE:
    if mechanism == "OUE":
        return OUE(domain_size=d)
    if mechanism == "SUE":
        return SUE(domain_size=d)
    raise ParameterError(f"mechanism must be 'OUE' or 'SUE', got {mechanism!r}", param="mechanism")


def check_local_epsilon(epsilon: Any, mechanism: str = "OUE", *, name: str = "epsilon",
                        per_report: float = 1.0) -> float:
    """Validate the per-user ``epsilon`` for a local randomiser (before anything is drawn).

    The randomiser realises its probabilities exactly as dyadic fractions (rounded towards
    privacy), so ``epsilon`` must be at most the oracle's limit (40) and large enough that its two
    response probabilities differ (about 5e-10 for OUE). ``per_report`` is the fraction of ``epsilon`` one report gets (1/2 when a user
    reports twice).
    """
    eps = check_epsilon(epsilon, name)
    share = eps * per_report
    try:
        p, q = _oracle(mechanism, 2).probabilities(share)
    except ParameterError as exc:
        raise ParameterError(f"{name}={eps:g} is out of range for the local randomiser: {exc}") from exc
    if not p > q:
        raise ParameterError(
            f"{name} must be large enough for a local randomiser to carry information, got {eps:g}: "
            f"{mechanism}'s two response probabilities coincide at {share:g} (use epsilon >= 1e-9)"
        , param=name)
    return eps


def check_cells(n_cells: int, what: str, option: str) -> int:
    """Refuse a grid or tree of more than :data:`MAX_CELLS` cells before allocating it."""
    n = int(n_cells)
    if n > MAX_CELLS:
        gib = n * _BYTES_PER_CELL / 2**30
        raise ParameterError(
            f"{what} would have {n:,} cells (about {gib:,.1f} GiB of working memory), more than "
            f"the {MAX_CELLS:,} privpub allows; lower {option}"
        )
    return n


def check_grid_height(height: int, what: str, option: str) -> int:
    """Refuse a ``2**height x 2**height`` grid of more than :data:`MAX_CELLS` cells, without
    computing ``4**height`` (a height of 2**40 would take minutes to raise to that power)."""
    h = int(height)
    if h > MAX_GRID_HEIGHT:
        gib = f"{4**h * _BYTES_PER_CELL / 2**30:,.1f} GiB" if h <= 64 else f"2**{2 * h - 23:,} GiB"
        raise ParameterError(
            f"{what} would have 4**{h} cells (about {gib} of working memory), more than the {MAX_CELLS:,} "
            f"(4**{MAX_GRID_HEIGHT}) privpub allows; lower {option} to at most {MAX_GRID_HEIGHT}"
        )
    return check_cells(4**h, what, option)


# ---------------------------------------------------------------------------------------------
# role splits by counts (exact laws of the random user groups)
# ---------------------------------------------------------------------------------------------
def split_counts(counts: I64, sizes: list[int], rng: np.random.Generator) -> list[I64]:
    """Split the users behind per-cell ``counts`` into groups of the given ``sizes`` at random.

    The result has the law of cutting a uniformly random permutation of the users into
    consecutive groups of ``sizes`` (what the per-user path does) and counting each group per
    cell: a chain of multivariate hypergeometric draws, O(cells) per group instead of O(users).
    """
    remaining = np.asarray(counts, dtype=np.int64).copy()
    total = int(remaining.sum())
    if sum(sizes) != total:
        raise ParameterError(f"group sizes must add up to the {total} users, got {sum(sizes)}")
    if total >= 10**9:
        raise ParameterError(
            f"mode='simulate' splits at most 10**9 users into groups, got {total:,}; "
            "split the data or use mode='per_user'"
        )
    out: list[I64] = []
    for k, size in enumerate(sizes):
        if k == len(sizes) - 1:
            part = remaining.copy()
        elif size == 0:
            part = np.zeros_like(remaining)
        else:
            part = np.asarray(rng.multivariate_hypergeometric(remaining, int(size)), dtype=np.int64)
        remaining -= part
        out.append(part)
    return out


def split_children(parent_remaining: I64, child_all: I64, child_parent: I64, n_parents: int,
                   rng: np.random.Generator) -> I64:
    """Distribute each parent's remaining users over its children at random.

    ``child_all[c]`` is the number of eligible users in child ``c`` (all of them, remaining or
    not), ``child_parent[c]`` its parent (children of one parent are consecutive). A parent's
    ``parent_remaining[p]`` remaining users are a uniformly random subset of its eligible
    users, so their counts per child are multivariate hypergeometric; drawn here as a chain of
    univariate hypergeometrics vectorised over parents.
    """
    n_child = np.bincount(child_parent, minlength=n_parents)
    first = np.cumsum(n_child) - n_child
    rank = np.arange(child_parent.size) - first[child_parent]
    out = np.zeros(child_parent.size, dtype=np.int64)
    left_sample = np.asarray(parent_remaining, dtype=np.int64).copy()
    left_pool = np.bincount(child_parent, weights=child_all, minlength=n_parents).astype(np.int64)
    for r in range(int(n_child.max(initial=0))):
        sel = np.flatnonzero(rank == r)
        par = child_parent[sel]
        good = np.asarray(child_all[sel], dtype=np.int64)
        last = rank[sel] == n_child[par] - 1
        draw = left_sample[par].copy()
        mid = ~last & (left_sample[par] > 0)
        if mid.any():
            draw[mid] = rng.hypergeometric(good[mid], left_pool[par[mid]] - good[mid], left_sample[par[mid]])
        draw[~last & ~mid] = 0
        out[sel] = draw
        left_sample[par] -= draw
        left_pool[par] -= good
    return out


# ---------------------------------------------------------------------------------------------
# collection rounds
# ---------------------------------------------------------------------------------------------
def client_reports(
    cells: I64, d: int, *, epsilon: float, rng: np.random.Generator, mechanism: str = "OUE",
    packed: bool = False, note: str = "",
) -> NDArray[Any]:
    """The client side: each user (one row) randomises the one-hot vector of its cell.

    This is all a user ever sends: one ``d``-bit report at ``epsilon`` (OUE: own bit kept as 1
    w.p. 1/2, every other bit set w.p. 1/(1+e^eps); SUE: RAPPOR's symmetric bits), as an
    ``(n, d)`` bool array or, with ``packed`` (what the publishers send), ``ceil(d / 8)`` bytes per
    user in little-endian bit order. The oracle charges the active accountant ``epsilon`` for
    these users before drawing.
    """
    oracle = _oracle(mechanism, max(d, 2))
    return np.asarray(oracle.perturb(cells, epsilon=epsilon, rng=rng, packed=packed, note=note))


def _chunks(n: int, d_max: int) -> list[tuple[int, int]]:
    step = max(1, _CHUNK_BITS // max(d_max, 2))
    return [(s, min(n, s + step)) for s in range(0, n, step)]


def collect(
    cells: I64,
    d: int,
    *,
    epsilon: float,
    mode: str,
    rng: np.random.Generator,
    mechanism: str = "OUE",
) -> F64:
    """One collection round: each user of the group reports its cell in ``{0..d-1}`` once.

    ``mode="per_user"`` runs the client randomiser of every user and sums the reports (what a
    deployment does); ``mode="simulate"`` draws the same support counts exactly from two
    binomials per cell (spec section 4). Returns the unbiased count estimates of the group.
    A building block for tests: inside a publisher, :class:`Collection` runs the rounds (the
    per-user path charges once per chunk of users here, once per group there).
    """
    n = int(cells.size)
    if n == 0:
        return np.zeros(d, dtype=np.float64)
    d_eff = max(d, 2)  # a 1-cell domain carries no information; pad with an empty cell
    oracle = _oracle(mechanism, d_eff)
    if mode == "simulate":
        support = oracle.simulate_support(np.bincount(cells, minlength=d_eff), epsilon=epsilon, rng=rng)
    else:
        support = np.zeros(d_eff, dtype=np.int64)
        for s, e in _chunks(n, d_eff):
            support += oracle.aggregate(client_reports(cells[s:e], d_eff, epsilon=epsilon, rng=rng,
                                                       mechanism=mechanism, packed=True))
    return np.asarray(oracle.estimate_from_support(support, n, epsilon=epsilon)[:d], dtype=np.float64)


@dataclass
class Collection:
    """The collection rounds of one release: disjoint user groups in one parallel block.

    Each group (role) is a branch of ``block``; its users report once per domain in the round
    (one domain normally, two for KDG-HT's ``kdg_split="budget"`` sample). The oracles charge
    the block as they draw. In the per-user path a group whose reports would not fit in memory
    at once is served in chunks of disjoint users, one branch each.
    """

    block: ParallelBlock
    mode: str
    rng: np.random.Generator
    roles: list[Role] = field(default_factory=list)
    #: the auditor only: a list that receives ``(name, k, first user, packed reports)`` of every
    #: per-user report drawn (``None``, the default: nothing is kept)
    kept: list[tuple[str, int, int, NDArray[Any]]] | None = None

    def _note(self, name: str, n: int, d: int, mechanism: str) -> str:
        return f"{name}: {n:,} users, one {mechanism} report each over {d:,} cells"

    def reports(self, name: str, cells: list[I64], domains: list[int], *, epsilon: float,
                mechanism: str = "OUE") -> list[F64]:
        """Per-user round: the users behind ``cells[k]`` (same users for every k) each send one
        report over ``domains[k]`` cells. Returns the unbiased count estimates per domain."""
        n = int(cells[0].size)
        if n == 0:
            return [np.zeros(d, dtype=np.float64) for d in domains]
        d_eff = [max(d, 2) for d in domains]
        oracles = [_oracle(mechanism, d) for d in d_eff]
        supports = [np.zeros(d, dtype=np.int64) for d in d_eff]
        parts = _chunks(n, sum(d_eff))
        for s, e in parts:
            label = name if len(parts) == 1 else f"{name} (users {s:,}-{e - 1:,})"
            with self.block.branch(label):
                for k, oracle in enumerate(oracles):
                    rep = client_reports(cells[k][s:e], d_eff[k], epsilon=epsilon, rng=self.rng,
                                         mechanism=mechanism, packed=True,
                                         note=self._note(name, e - s, d_eff[k], mechanism))
                    if self.kept is not None:
                        self.kept.append((name, k, s, rep))
                    supports[k] += oracle.aggregate(rep)
        self.roles.append(Role(name, n, mechanism, epsilon, len(domains)))
        return [np.asarray(o.estimate_from_support(sup, n, epsilon=epsilon)[:d], dtype=np.float64)
                for o, sup, d in zip(oracles, supports, domains)]

    def counts(self, name: str, counts: list[I64], *, epsilon: float, mechanism: str = "OUE") -> list[F64]:
        """Simulated round: the same law as :meth:`reports` for users with per-cell ``counts``
        (one array per domain, equal totals), drawn exactly from the aggregated binomials."""
        n = int(np.sum(counts[0]))
        if n == 0:
            return [np.zeros(c.size, dtype=np.float64) for c in counts]
        out = []
        with self.block.branch(name):
            for c in counts:
                d = int(c.size)
                d_eff = max(d, 2)
                full = np.zeros(d_eff, dtype=np.int64)
                full[:d] = c
                oracle = _oracle(mechanism, d_eff)
                support = oracle.simulate_support(full, epsilon=epsilon, rng=self.rng,
                                                  note=self._note(name, n, d_eff, mechanism))
                out.append(np.asarray(oracle.estimate_from_support(support, n, epsilon=epsilon)[:d],
                                      dtype=np.float64))
        self.roles.append(Role(name, n, mechanism, epsilon, len(counts)))
        return out

    def round(self, name: str, *, cells: list[I64] | None = None, counts: list[I64] | None = None,
              domains: list[int] | None = None, epsilon: float, mechanism: str = "OUE") -> list[F64]:
        """:meth:`reports` in the per-user path (``cells``), :meth:`counts` when simulating."""
        if self.mode == "per_user":
            assert cells is not None and domains is not None
            return self.reports(name, cells, domains, epsilon=epsilon, mechanism=mechanism)
        assert counts is not None
        return self.counts(name, counts, epsilon=epsilon, mechanism=mechanism)


#: the name of the parallel block every spatial publisher charges
BLOCK = "disjoint user groups"


@contextmanager
def user_groups(acc: Accountant, mode: str, rng: np.random.Generator) -> Iterator[Collection]:
    """The collection step of a release: one parallel block over the disjoint user groups."""
    with acc.step("collect"), acc.parallel(BLOCK) as block:
        yield Collection(block, mode, rng)
