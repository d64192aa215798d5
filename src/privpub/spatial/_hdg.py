"""HDG (Yang et al., VLDB 2021): two 1-D grids and one 2-D grid, fused by weighted update."""

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
from privpub.spatial._baselines import block_sums, grid_cells, grid_rects, prepare
from privpub.spatial._collect import check_cells, split_counts, user_groups
from privpub.spatial._release import SpatialRelease

__all__ = ["HDG", "hdg_granularities"]

F64 = NDArray[np.float64]
ALPHA1, ALPHA2 = 0.7, 0.03


def _pow2(g: float, cap: int) -> int:
    """Round to the nearest power of two, ties down, at least 2 and at most ``cap``."""
    if g <= 2.0:
        return 2
    lo = 2 ** math.floor(math.log2(g))
    out = lo if g - lo <= 2 * lo - g else 2 * lo
    return int(min(out, cap))


def hdg_granularities(n_users: int, epsilon: float, *, cap: int = 1024) -> tuple[int, int]:
    """HDG's guideline ``(g1, g2)`` for two attributes (``k = 3`` grids), powers of two.

    ``g1 = (N (e^eps - 1)^2 alpha1^2 / (2 k e^eps))^(1/3)`` and
    ``g2 = sqrt(2 alpha2 (e^eps - 1) sqrt(N / (k e^eps)))``, ``alpha1 = 0.7``, ``alpha2 = 0.03``,
    each rounded to the nearest power of two (ties down, at least 2, at most ``cap``).

    Examples
    --------
    >>> hdg_granularities(10**6, 1.0)
    (32, 8)
    """
    k = 3.0
    e, e1 = math.exp(epsilon), math.expm1(epsilon)
    g1 = (n_users * e1**2 * ALPHA1**2 / (2.0 * k * e)) ** (1.0 / 3.0)
    g2 = math.sqrt(2.0 * ALPHA2 * e1 * math.sqrt(n_users / (k * e)))
    return _pow2(g1, cap), _pow2(g2, cap)


def _consistency(gx: F64, gy: F64, g2d: F64, g1: int, g2: int, total: float, iterations: int) -> tuple[F64, F64, F64]:
    """HDG's overall consistency: the grids agree on each attribute's marginal (inverse-variance
    weighted, Norm-Sub between rounds); ends with a non-negativity step."""
    c = min(g1, g2)
    f1, f2 = g1 // c, g2 // c
    gx, gy, g2d = norm_sub(gx, total), norm_sub(gy, total), norm_sub(g2d, total)
    for _ in range(iterations):
        m2 = g2d.reshape(g2, g2)
        before = np.concatenate([gx, gy, g2d])
        for axis, one in ((0, gx), (1, gy)):
            t1 = one.reshape(c, f1).sum(axis=1)
            marg = m2.sum(axis=1 - axis).reshape(c, f2).sum(axis=1)
            w1, w2 = 1.0 / f1, 1.0 / (f2 * g2)  # a sum over C equal-variance cells has weight 1/C
            target = (w1 * t1 + w2 * marg) / (w1 + w2)
            one += np.repeat((target - t1) / f1, f1)
            adj = np.repeat((target - marg) / (f2 * g2), f2)
            m2 += adj[:, None] if axis == 0 else adj[None, :]
        gx, gy, g2d = norm_sub(gx, total), norm_sub(gy, total), norm_sub(m2.ravel(), total)
        if np.abs(np.concatenate([gx, gy, g2d]) - before).sum() < 1e-6 * total:
            break
    return gx, gy, g2d


def _weighted_update(gx: F64, gy: F64, g2d: F64, g1: int, g2: int, total: float, iterations: int) -> F64:
    """HDG's weighted update: the fine ``G x G`` matrix (G = max(g1, g2)) matching the 1-D cells and
    the 2-D cells in turn, from a uniform start, until it moves by less than one user."""
    big = max(g1, g2)
    a, b = big // g1, big // g2
    mat = np.full((big, big), total / big**2)
    for _ in range(iterations):
        prev = mat.copy()
        for axis, one in ((0, gx), (1, gy)):
            cur = mat.sum(axis=1 - axis).reshape(g1, a).sum(axis=1)
            scale = np.divide(one, cur, out=np.zeros_like(one), where=cur > 0)
            s = np.repeat(scale, a)
            mat *= s[:, None] if axis == 0 else s[None, :]
        cur2 = mat.reshape(g2, b, g2, b).sum(axis=(1, 3))
        scale2 = np.divide(g2d.reshape(g2, g2), cur2, out=np.zeros_like(cur2), where=cur2 > 0)
        mat *= np.repeat(np.repeat(scale2, b, axis=0), b, axis=1)
        s_all = mat.sum()
        if s_all > 0:
            mat *= total / s_all
        if np.abs(mat - prev).sum() < 1.0:
            break
    return mat.ravel()


@dataclass(frozen=True, kw_only=True)
class HDG(Publisher):
    """HDG: hybrid-dimensional grids for 2-D range queries under LDP (Yang et al., VLDB 2021).

    The users are split at random into three equal groups: one reports (OUE) its x cell on a
    1-D grid of ``g1`` cells, one its y cell, one its cell on a ``g2 x g2`` grid. After Norm-Sub
    and HDG's consistency step, the weighted update fits a ``G x G`` grid (``G = max(g1, g2)``)
    to all three; its cells are the release's leaves.

    Parameters
    ----------
    g1, g2 : int or None
        Granularities (default :func:`hdg_granularities`; powers of two).
    cap : int
        Largest default granularity (1024).
    iterations : int
        Maximum rounds of the consistency and of the weighted update (100, as the authors' code).
    clip : bool
        Clamp points outside the bounds instead of raising ``DomainError``.

    Notes
    -----
    **Privacy:** epsilon-LDP per user: each user belongs to one data-independent random group and
    sends one OUE report at epsilon (the paper uses OLH, the authors' code OUE; both have the
    same variance, and OUE's aggregate is simulated exactly). Ledger: one parallel block,
    branches ``U_x``, ``U_y``, ``U_xy`` (OUE at epsilon each), charged by the oracle as it draws.

    References
    ----------
    Yang, Wang, Li, Cheng, Su. Answering multi-dimensional range queries under local differential
    privacy. PVLDB 14(3):378-390, 2021. doi:10.14778/3430915.3430927.

    Examples
    --------
    >>> from privpub.spatial import HDG, synthetic_landmark
    >>> rel = HDG().publish(synthetic_landmark(50_000, rng=0), bounds=(0, 0, 1, 1), epsilon=1.0, rng=0)
    >>> rel.grid_shape, rel.params["g1"], rel.params["g2"]
    ((16, 16), 16, 2)
    """

    g1: int | None = None
    g2: int | None = None
    cap: int = 1024
    iterations: int = 100
    clip: bool = False

    def __post_init__(self) -> None:
        for name in ("g1", "g2"):
            value = getattr(self, name)
            if value is not None:
                check_positive_int(value, name, minimum=2)
                if value & (value - 1):
                    raise ParameterError(f"{name} must be a power of two (HDG nests its grids), got {value}", param=name)
                check_cells(value * value, f"HDG's {name} x {name} grid", name)
        check_positive_int(self.cap, "cap", minimum=2)
        check_cells(self.cap * self.cap, "HDG's largest default grid cap x cap", "cap")
        check_positive_int(self.iterations, "iterations")

    def publish(  # type: ignore[override]
        self, points: ArrayLike, *, bounds: Any, epsilon: float, rng: RNGLike = None, mode: str = "simulate",
        session: Session | None = None,
    ) -> SpatialRelease:
        """Collect one report per user in its group's grid and return the fused fine grid.

        Under a ``session``, ``epsilon`` is reserved there first; nothing is drawn if it cannot pay.
        """
        pts, box, eps, mode = prepare(points, bounds, epsilon, mode, self.clip)
        n_users = pts.shape[0]
        d1, d2 = hdg_granularities(n_users, eps, cap=self.cap)
        g1 = self.g1 if self.g1 is not None else d1
        g2 = self.g2 if self.g2 is not None else d2
        big = max(g1, g2)
        check_cells(big * big, "HDG's fused grid max(g1, g2)^2", "g1, g2 or cap")
        role_gen, noise_gen = as_generator(rng).spawn(2)
        sizes = [len(a) for a in np.array_split(np.arange(n_users), 3)]
        ix, iy = grid_cells(pts, box, big)
        a, b = big // g1, big // g2
        with accounting(eps, method="hdg", session=session, data=describe_data(pts)) as acc:
            with user_groups(acc, mode, noise_gen) as coll:
                if mode == "per_user":
                    order = role_gen.permutation(n_users)
                    cut = np.cumsum(sizes)
                    gxu, gyu, gxy = np.split(order, cut[:2])
                    (ex,) = coll.reports("U_x", [ix[gxu] // a], [g1], epsilon=eps)
                    (ey,) = coll.reports("U_y", [iy[gyu] // a], [g1], epsilon=eps)
                    (e2,) = coll.reports("U_xy", [(ix[gxy] // b) * g2 + iy[gxy] // b], [g2 * g2], epsilon=eps)
                else:
                    cx, cy, c2 = split_counts(np.bincount(ix * big + iy, minlength=big * big), sizes, role_gen)
                    fine_x = cx.reshape(big, big).sum(axis=1).reshape(g1, a).sum(axis=1)
                    fine_y = cy.reshape(big, big).sum(axis=0).reshape(g1, a).sum(axis=1)
                    (ex,) = coll.counts("U_x", [fine_x], epsilon=eps)
                    (ey,) = coll.counts("U_y", [fine_y], epsilon=eps)
                    (e2,) = coll.counts("U_xy", [block_sums(c2, g2, b)], epsilon=eps)
            scale = [n_users / max(s, 1) for s in sizes]
            gx, gy, g2d = _consistency(ex * scale[0], ey * scale[1], e2 * scale[2], g1, g2, float(n_users),
                                       self.iterations)
            values = _weighted_update(gx, gy, g2d, g1, g2, float(n_users), self.iterations)
            params = asdict(self)
            params.update({"g1": g1, "g2": g2})
            x0, x1, y0, y1 = grid_rects(box, big)
            return SpatialRelease(
                ledger=acc.seal(), epsilon=eps, method="hdg", params=params, bounds=box, x0=x0, x1=x1, y0=y0,
                y1=y1, values=values, n_users=n_users, grid_shape=(big, big), roles=tuple(coll.roles), mode=mode,
            )
