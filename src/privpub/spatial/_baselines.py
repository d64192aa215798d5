"""KDG-HT's baselines: UG (uniform grid, OUE), RAPPOR (one-hot SUE grid), GT-R (quadtree levels)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import (
    Publisher,
    RNGLike,
    Session,
    accounting,
    as_generator,
    check_positive_int,
    describe_data,
)
from privpub.errors import ParameterError
from privpub.ldp import norm_sub
from privpub.spatial._collect import (
    Bounds,
    check_bounds,
    check_cells,
    check_grid_height,
    check_local_epsilon,
    check_mode,
    check_points,
    split_counts,
    user_groups,
)
from privpub.spatial._kernels import ci_combine, grid_edges, oue_v1, round_half_up, uniform_interval_index
from privpub.spatial._release import SpatialRelease, TreeLevel

__all__ = [
    "GTR",
    "RapporGrid",
    "UniformGrid",
    "grid_cells",
    "grid_rects",
    "gtr_height",
    "prepare",
    "rappor_granularity",
    "ug_granularity",
]


def ug_granularity(n_users: int, epsilon: float, rule: str = "qardaji") -> int:
    """UG grid size: Qardaji's rule at the effective central epsilon (spec 3), at least 2.

    ``g = round(sqrt(sqrt(N) (e^eps - 1) / (10 sqrt(2) e^(eps/2))))``; ``rule="hdg"`` uses
    ``sqrt(2 * 0.03 * (e^eps - 1) * sqrt(N / e^eps))``.

    Examples
    --------
    >>> [ug_granularity(10**6, e) for e in (0.1, 0.3, 0.5)]
    [3, 5, 6]
    """
    e1 = math.expm1(epsilon)
    if rule == "qardaji":
        g = math.sqrt(math.sqrt(n_users) * e1 / (10.0 * math.sqrt(2.0) * math.exp(epsilon / 2.0)))
    elif rule == "hdg":
        g = math.sqrt(2.0 * 0.03 * e1 * math.sqrt(n_users / math.exp(epsilon)))
    else:
        raise ParameterError(f"grid_rule must be 'qardaji' or 'hdg', got {rule!r}", param="grid_rule")
    return max(2, round_half_up(g))


def rappor_granularity(n_users: int, epsilon: float, cap: int = 512) -> int:
    """RAPPOR grid size ``round(sqrt(N eps / 10))`` (central-DP rule), between 2 and ``cap``.

    Examples
    --------
    >>> rappor_granularity(10**6, 0.5)
    224
    """
    return min(max(2, round_half_up(math.sqrt(n_users * epsilon / 10.0))), cap)


def gtr_height(n_users: int, epsilon: float) -> int:
    """GT-R leaf-grid height ``H = clamp(round(log2 sqrt(N eps / 10)), 1, 9)``.

    Examples
    --------
    >>> [gtr_height(10**6, e) for e in (0.1, 0.3, 0.5)]
    [7, 7, 8]
    """
    arg = n_users * epsilon / 10.0
    if arg <= 1.0:
        return 1
    return min(max(round_half_up(math.log2(math.sqrt(arg))), 1), 9)


def prepare(points: ArrayLike, bounds: Any, epsilon: float, mode: str, clip: bool, mechanism: str = "OUE"
            ) -> tuple[NDArray[np.float64], Bounds, float, str]:
    """Validate a spatial publish call before anything is reserved or drawn."""
    eps = check_local_epsilon(epsilon, mechanism)
    box = check_bounds(bounds)
    pts = check_points(points, box, clip=clip)
    return pts, box, eps, check_mode(mode)


def grid_cells(pts: NDArray[np.float64], box: Bounds, g: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Column and row index of each point on the ``g x g`` grid of ``box``."""
    ix = uniform_interval_index(grid_edges(box[0], box[2], g), pts[:, 0])
    iy = uniform_interval_index(grid_edges(box[1], box[3], g), pts[:, 1])
    return ix, iy


def grid_rects(box: Bounds, g: int) -> tuple[NDArray[np.float64], ...]:
    """The cells of the ``g x g`` grid (cell ``i * g + j``, ``i`` along x) as leaf arrays."""
    ex = grid_edges(box[0], box[2], g)
    ey = grid_edges(box[1], box[3], g)
    ii, jj = np.divmod(np.arange(g * g), g)
    return ex[ii], ex[ii + 1], ey[jj], ey[jj + 1]


@dataclass(frozen=True, kw_only=True)
class _FlatGrid(Publisher):
    """A ``g × g`` uniform grid; every user sends one unary-encoded report of its cell."""

    g: int | None = None
    cap: int = 1024
    postprocess: str = "normsub"
    clip: bool = False

    _mechanism = "OUE"
    _method = "grid"

    def __post_init__(self) -> None:
        if self.g is not None:
            check_positive_int(self.g, "g", minimum=2)
            check_cells(self.g * self.g, f"{type(self).__name__}'s grid g x g", "g")
        check_positive_int(self.cap, "cap", minimum=2)
        check_cells(self.cap * self.cap, f"{type(self).__name__}'s largest default grid cap x cap", "cap")
        if self.postprocess not in ("normsub", "none"):
            raise ParameterError(f"postprocess must be 'normsub' or 'none', got {self.postprocess!r}", param="postprocess")

    def granularity(self, n_users: int, epsilon: float) -> int:
        raise NotImplementedError

    def publish(  # type: ignore[override]
        self, points: ArrayLike, *, bounds: Any, epsilon: float, rng: RNGLike = None, mode: str = "simulate",
        session: Session | None = None,
    ) -> SpatialRelease:
        """Collect one report per user on the grid and return the grid release (see the class doc).

        Under a ``session``, ``epsilon`` is reserved there first; nothing is drawn if it cannot pay.
        """
        pts, box, eps, mode = prepare(points, bounds, epsilon, mode, self.clip, self._mechanism)
        n_users = pts.shape[0]
        g = self.g if self.g is not None else self.granularity(n_users, eps)
        check_cells(g * g, f"{type(self).__name__}'s grid g x g", "g")
        _, noise_gen = as_generator(rng).spawn(2)
        ix, iy = grid_cells(pts, box, g)
        cells = ix * g + iy
        with accounting(eps, method=self._method, session=session, data=describe_data(pts)) as acc:
            with user_groups(acc, mode, noise_gen) as coll:
                (est,) = coll.round("U", cells=[cells], counts=[np.bincount(cells, minlength=g * g)],
                                    domains=[g * g], epsilon=eps, mechanism=self._mechanism)
            values = norm_sub(est, float(n_users)) if self.postprocess == "normsub" else est
            x0, x1, y0, y1 = grid_rects(box, g)
            params = asdict(self)
            params["g"] = g
            return SpatialRelease(
                ledger=acc.seal(), epsilon=eps, method=self._method, params=params, bounds=box, x0=x0, x1=x1,
                y0=y0, y1=y1, values=values, n_users=n_users, grid_shape=(g, g), roles=tuple(coll.roles),
                mode=mode,
            )


@dataclass(frozen=True, kw_only=True)
class UniformGrid(_FlatGrid):
    """UG: a ``g × g`` uniform grid, every user reports its cell with OUE (Kim et al. 2018).

    Parameters
    ----------
    g : int or None
        Grid size per axis (default :func:`ug_granularity`, at most ``cap``).
    grid_rule : {"qardaji", "hdg"}
        Rule for the default ``g``.
    cap : int
        Largest default grid size (1024).
    postprocess : {"normsub", "none"}
        Norm-Sub of the cells to total N.
    clip : bool
        Clamp points outside the bounds instead of raising ``DomainError``.

    Notes
    -----
    **Privacy:** epsilon-LDP per user (replace-one on a location): one OUE report at epsilon;
    the grid is public (it depends on N and epsilon only). Ledger: one parallel block with
    one branch, ``U`` (OUE at epsilon, all users), charged by the oracle as it draws.

    References
    ----------
    Kim, Kim, Jang. Application of local differential privacy to collection of indoor positioning
    data. IEEE Access 6:4276-4286, 2018. Qardaji, Yang, Li. ICDE 2013.

    Examples
    --------
    >>> from privpub.spatial import UniformGrid, synthetic_landmark
    >>> pts = synthetic_landmark(20_000, rng=0)
    >>> rel = UniformGrid().publish(pts, bounds=(0, 0, 1, 1), epsilon=1.0, rng=0)
    >>> rel.grid_shape
    (3, 3)
    """

    grid_rule: str = "qardaji"
    _method = "ug"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.grid_rule not in ("qardaji", "hdg"):
            raise ParameterError(f"grid_rule must be 'qardaji' or 'hdg', got {self.grid_rule!r}", param="grid_rule")

    def granularity(self, n_users: int, epsilon: float) -> int:
        return min(ug_granularity(n_users, epsilon, self.grid_rule), self.cap)


@dataclass(frozen=True, kw_only=True)
class RapporGrid(_FlatGrid):
    """RAPPOR baseline: basic one-time RAPPOR (symmetric unary encoding) on a fine uniform grid.

    Parameters
    ----------
    g : int or None
        Grid size per axis (default :func:`rappor_granularity`, capped at ``cap``).
    cap : int
        Largest default grid size (512).
    postprocess : {"normsub", "none"}
        Norm-Sub of the cells to total N.
    clip : bool
        Clamp points outside the bounds instead of raising ``DomainError``.

    Notes
    -----
    **Privacy:** epsilon-LDP per user: one SUE report, each bit kept with probability
    ``e^(eps/2) / (1 + e^(eps/2))``; two locations differ in two bits. Ledger: one parallel
    block with one branch, ``U`` (SUE at epsilon, all users).

    References
    ----------
    Erlingsson, Pihur, Korolova. RAPPOR. CCS 2014.

    Examples
    --------
    >>> from privpub.spatial import RapporGrid, synthetic_landmark
    >>> pts = synthetic_landmark(20_000, rng=0)
    >>> rel = RapporGrid().publish(pts, bounds=(0, 0, 1, 1), epsilon=1.0, rng=0)
    >>> rel.grid_shape
    (45, 45)
    """

    cap: int = 512
    _mechanism = "SUE"
    _method = "rappor"

    def granularity(self, n_users: int, epsilon: float) -> int:
        return rappor_granularity(n_users, epsilon, self.cap)


def quad_parents(g: int, lev: int) -> NDArray[np.int64]:
    """Parent index (in the ``g/2`` grid) of every cell of the level-``lev`` quadtree grid ``g = 2**lev``."""
    if lev <= 1:
        return np.full(g * g, -1, dtype=np.int64)
    ii, jj = np.divmod(np.arange(g * g, dtype=np.int64), g)
    return np.asarray((ii // 2) * (g // 2) + jj // 2, dtype=np.int64)


def block_sums(counts: NDArray[np.int64], g: int, f: int) -> NDArray[np.int64]:
    """Sums of ``f x f`` blocks of a ``(g*f) x (g*f)`` grid given as a flat array (row = x)."""
    return np.asarray(counts.reshape(g, f, g, f).sum(axis=(1, 3)).ravel(), dtype=np.int64)


@dataclass(frozen=True, kw_only=True)
class GTR(Publisher):
    """GT-R: quadtree levels over a uniform grid, one random user group per level (Zhang et al. 2020).

    Level ``l = 1..H`` is the ``2^l × 2^l`` grid; the users are split at random into ``H``
    near-equal groups, group ``l`` reports its level-``l`` cell with OUE, estimates are scaled to
    the population and combined by constrained inference (root = N); leaves are the ``2^H`` grid.

    Parameters
    ----------
    height : int or None
        Leaf-grid height ``H`` (default :func:`gtr_height`).
    combine : {"ci", "last"}
        Constrained inference over all levels, or the last level only.
    postprocess : {"normsub", "none"}
        Norm-Sub of the leaves to total N.
    clip : bool
        Clamp points outside the bounds instead of raising ``DomainError``.

    Notes
    -----
    **Privacy:** epsilon-LDP per user: each user belongs to one data-independent random group and
    sends one OUE report at epsilon. Ledger: one parallel block, branches ``U^1 .. U^H`` (OUE at
    epsilon each), charged by the oracle as it draws.

    References
    ----------
    Zhang, Fu, Meng. Towards spatial range queries under local differential privacy. J. Comput.
    Res. Dev. 57(4):847-858, 2020.

    Examples
    --------
    >>> from privpub.spatial import GTR, synthetic_checkin
    >>> rel = GTR().publish(synthetic_checkin(20_000, rng=0), bounds=(0, 0, 1, 1), epsilon=1.0, rng=0)
    >>> rel.grid_shape, len(rel.levels)
    ((32, 32), 5)
    """

    height: int | None = None
    combine: str = "ci"
    postprocess: str = "normsub"
    clip: bool = False

    def __post_init__(self) -> None:
        if self.height is not None:
            check_positive_int(self.height, "height", minimum=1)
            check_grid_height(self.height, "GT-R's leaf grid 2**height x 2**height", "height")
        if self.combine not in ("ci", "last"):
            raise ParameterError(f"combine must be 'ci' or 'last', got {self.combine!r}", param="combine")
        if self.postprocess not in ("normsub", "none"):
            raise ParameterError(f"postprocess must be 'normsub' or 'none', got {self.postprocess!r}", param="postprocess")

    def publish(  # type: ignore[override]
        self, points: ArrayLike, *, bounds: Any, epsilon: float, rng: RNGLike = None, mode: str = "simulate",
        session: Session | None = None,
    ) -> SpatialRelease:
        """Collect one report per user on its group's level and return the leaf grid.

        Under a ``session``, ``epsilon`` is reserved there first; nothing is drawn if it cannot pay.
        """
        pts, box, eps, mode = prepare(points, bounds, epsilon, mode, self.clip)
        n_users = pts.shape[0]
        big_h = self.height if self.height is not None else gtr_height(n_users, eps)
        big_h = max(1, min(big_h, n_users))
        check_grid_height(big_h, "GT-R's leaf grid 2**height x 2**height", "height")
        role_gen, noise_gen = as_generator(rng).spawn(2)
        sizes = [len(a) for a in np.array_split(np.arange(n_users), big_h)]
        cuts = np.concatenate([[0], np.cumsum(sizes)])
        g_leaf = 2**big_h
        ix, iy = grid_cells(pts, box, g_leaf)
        if mode == "per_user":
            order = role_gen.permutation(n_users)
            ix, iy = ix[order], iy[order]
            groups = None
        else:
            groups = split_counts(np.bincount(ix * g_leaf + iy, minlength=g_leaf * g_leaf), sizes, role_gen)
        v1 = oue_v1(eps)
        with accounting(eps, method="gtr", session=session, data=describe_data(pts)) as acc:
            ys: list[NDArray[np.float64]] = []
            parents: list[NDArray[np.int64]] = []
            levels: list[TreeLevel] = []
            with user_groups(acc, mode, noise_gen) as coll:
                for lev in range(1, big_h + 1):
                    g, shift = 2**lev, big_h - lev
                    if groups is None:
                        s, e = cuts[lev - 1], cuts[lev]
                        (est,) = coll.reports(f"U^{lev}", [(ix[s:e] >> shift) * g + (iy[s:e] >> shift)], [g * g],
                                              epsilon=eps)
                    else:
                        (est,) = coll.counts(f"U^{lev}", [block_sums(groups[lev - 1], g, 2**shift)], epsilon=eps)
                    y = est * (n_users / max(sizes[lev - 1], 1))
                    par = quad_parents(g, lev)
                    lx0, lx1, ly0, ly1 = grid_rects(box, g)
                    levels.append(TreeLevel(x0=lx0, x1=lx1, y0=ly0, y1=ly1, parent=par, noisy=y))
                    ys.append(y)
                    parents.append(par)
            variances = [n_users**2 * v1 / max(s, 1) for s in sizes]
            values = ci_combine(ys, variances, parents, float(n_users)) if self.combine == "ci" else ys[-1].copy()
            if self.postprocess == "normsub":
                values = norm_sub(values, float(n_users))
            params = asdict(self)
            params["height"] = big_h
            x0, x1, y0, y1 = grid_rects(box, g_leaf)
            return SpatialRelease(
                ledger=acc.seal(), epsilon=eps, method="gtr", params=params, bounds=box,
                x0=x0, x1=x1, y0=y0, y1=y1, values=values, n_users=n_users, levels=tuple(levels),
                grid_shape=(g_leaf, g_leaf), roles=tuple(coll.roles), mode=mode,
            )
