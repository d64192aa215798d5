"""AHEAD (Du et al., CCS 2021): adaptive hierarchical decomposition under LDP, 2-D quadtree form."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from privpub.core import (
    Publisher,
    RNGLike,
    Session,
    accounting,
    as_generator,
    check_positive_int,
    check_real,
    describe_data,
)
from privpub.errors import ParameterError
from privpub.ldp import norm_sub
from privpub.spatial._baselines import prepare
from privpub.spatial._collect import check_grid_height, user_groups
from privpub.spatial._kernels import ci_combine, oue_v1
from privpub.spatial._release import SpatialRelease
from privpub.spatial._tree import grow_tree

__all__ = ["AHEAD", "ahead_threshold"]

#: AHEAD's fan-out for two dimensions: every decomposition halves both sides
FANOUT = 4


def ahead_threshold(n_users: int, epsilon: float, height: int) -> float:
    """AHEAD's split threshold as a population count: ``N sqrt((B + 1) Var)``.

    ``Var = 4 e^eps / ((N / height) (e^eps - 1)^2)`` is the variance of one node's OUE frequency
    estimate from a group of ``N / height`` users and ``B = 4`` the fan-out: a node is
    decomposed only if its estimated frequency is at least ``sqrt((B + 1) Var)``, the point where
    the worst-case non-uniformity error of keeping it exceeds the noise of its B children.

    Examples
    --------
    >>> round(ahead_threshold(10**6, 1.0, 8))
    12137
    """
    var = oue_v1(epsilon) * height / n_users
    return n_users * math.sqrt((FANOUT + 1) * var)


@dataclass(frozen=True, kw_only=True)
class AHEAD(Publisher):
    """AHEAD: top-down adaptive quadtree with one user group per layer (Du et al., CCS 2021).

    The domain is decomposed down to a ``2**height x 2**height`` grid at most. The users are
    split at random into ``height`` equal groups. The root is split into four quadrants; group
    ``l`` reports (OUE) the current leaf holding its point; every leaf whose estimated count
    (the mean of its layer estimates, each Norm-Sub'ed) reaches :func:`ahead_threshold` is split
    into four, the others stop for good and are re-estimated by the later groups. The layers
    are combined by weighted averaging and mean consistency (here the exact constrained
    inference shared with KDG-HT and GT-R) and the leaves Norm-Sub'ed to ``N``.

    Parameters
    ----------
    height : int
        Depth of the finest grid (8: 256 x 256, the DPBench grids' resolution) and the number
        of user groups.
    theta : float or None
        An absolute split threshold (population count) overriding :func:`ahead_threshold`.
    postprocess : {"normsub", "none"}
        Norm-Sub of the leaves to total N.
    clip : bool
        Clamp points outside the bounds instead of raising ``DomainError``.

    Notes
    -----
    **Privacy:** epsilon-LDP per user: each user belongs to one data-independent random group and
    sends one OUE report at epsilon over the leaves of the tree built from earlier groups' noisy
    reports (post-processing). Ledger: one parallel block, branches ``U^0 .. U^(height-1)`` (OUE
    at epsilon each), charged by the oracle as it draws.

    References
    ----------
    Du, Zhang, Bai, Liu, Ji, Cheng, Chen. AHEAD: adaptive hierarchical decomposition for range
    query under local differential privacy. ACM CCS 2021, 1266-1288.
    doi:10.1145/3460120.3485668.

    Examples
    --------
    >>> from privpub.spatial import AHEAD, synthetic_checkin
    >>> rel = AHEAD().publish(synthetic_checkin(50_000, rng=0), bounds=(0, 0, 1, 1), epsilon=1.0, rng=0)
    >>> len(rel.levels), rel.ledger.total
    (8, 1.0)
    """

    height: int = 8
    theta: float | None = None
    postprocess: str = "normsub"
    clip: bool = False

    def __post_init__(self) -> None:
        check_positive_int(self.height, "height", minimum=1)
        check_grid_height(self.height, "AHEAD's finest grid 2**height x 2**height", "height")
        if self.theta is not None and check_real(self.theta, "theta") <= 0:
            raise ParameterError(f"theta must be > 0, got {self.theta}", param="theta")
        if self.postprocess not in ("normsub", "none"):
            raise ParameterError(f"postprocess must be 'normsub' or 'none', got {self.postprocess!r}", param="postprocess")

    def publish(  # type: ignore[override]
        self, points: ArrayLike, *, bounds: Any, epsilon: float, rng: RNGLike = None, mode: str = "simulate",
        session: Session | None = None,
    ) -> SpatialRelease:
        """Collect one report per user on its layer and return the adaptive quadtree's leaves.

        Under a ``session``, ``epsilon`` is reserved there first; nothing is drawn if it cannot pay.
        """
        pts, box, eps, mode = prepare(points, bounds, epsilon, mode, self.clip)
        n_users = pts.shape[0]
        layers = max(1, min(self.height, n_users))
        sizes = [len(a) for a in np.array_split(np.arange(n_users), layers)]
        bx0, by0, bx1, by1 = box
        width, height = bx1 - bx0, by1 - by0
        mx, my = (bx0 + bx1) / 2.0, (by0 + by1) / 2.0
        quads = (np.array([bx0, bx0, mx, mx]), np.array([mx, mx, bx1, bx1]),
                 np.array([by0, my, by0, my]), np.array([my, by1, my, by1]))
        role_gen, noise_gen = as_generator(rng).spawn(2)
        order = role_gen.permutation(n_users) if mode == "per_user" else np.arange(n_users)
        px, py = pts[order, 0], pts[order, 1]
        leaf = 2 * (px >= mx).astype(np.int64) + (py >= my)
        th = float(self.theta) if self.theta is not None else ahead_threshold(n_users, eps, layers)
        v1 = oue_v1(eps)
        with accounting(eps, method="ahead", session=session, data=describe_data(pts)) as acc:
            with user_groups(acc, mode, noise_gen) as coll:
                tree = grow_tree(coll, quads, px, py, leaf, sizes, n_total=n_users, epsilon=eps, v1=v1,
                                 theta=lambda _lev: th, width=width, height=height, role_gen=role_gen,
                                 binary=False, freeze_stopped=True, decide_on_mean=True,
                                 finest=0.5**self.height, option="height")
            values = ci_combine(tree.ys, tree.variances, tree.parents, float(n_users))
            if self.postprocess == "normsub":
                values = norm_sub(values, float(n_users))
            params = asdict(self)
            params.update({"theta": th, "layers": layers})
            x0, x1, y0, y1 = tree.leaves
            return SpatialRelease(
                ledger=acc.seal(), epsilon=eps, method="ahead", params=params, bounds=box, x0=x0, x1=x1, y0=y0,
                y1=y1, values=values, n_users=n_users, levels=tuple(tree.levels), roles=tuple(coll.roles),
                mode=mode,
            )
