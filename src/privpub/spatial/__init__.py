"""Local-DP spatial data publishing for 2-D range-count queries.

KDG-HT (Jin, Ni, Zhu, Chen, Chen, "Spatial data adaptive partition algorithm based on local
differential privacy", Computer Engineering 48(5):136-144, 2022), its baselines RAPPOR, UG and
GT-R, and the modern LDP anchors HDG (Yang et al., VLDB 2021) and AHEAD (Du et al., CCS 2021).
Every publisher has the same shape::

    release = KDGHT().publish(points, bounds=(x0, y0, x1, y1), epsilon=0.5, rng=0, mode="simulate")
    release.range_count(rects)        # (q, 4) rectangles [x0, y0, x1, y1]
    release.ledger                    # one parallel block over disjoint user groups, charged by the oracles

``mode="per_user"`` runs each user's client randomiser (a deployment); ``mode="simulate"`` draws
the aggregated reports from their exact law (binomial counts), for experiments with millions of
users. Both share the role draw, so they differ only in the perturbation.

Examples
--------
>>> from privpub.spatial import GTR, KDGHT, synthetic_checkin
>>> pts = synthetic_checkin(20_000, rng=0)
>>> rel = KDGHT().publish(pts, bounds=(0, 0, 1, 1), epsilon=1.0, rng=0)
>>> bool(abs(rel.range_count([[0, 0, 1, 1]])[0] - 20_000) < 1e-6)
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privpub.core import lazy_exports

if TYPE_CHECKING:
    from privpub.spatial._ahead import AHEAD, ahead_threshold
    from privpub.spatial._baselines import (
        GTR,
        RapporGrid,
        UniformGrid,
        gtr_height,
        rappor_granularity,
        ug_granularity,
    )
    from privpub.spatial._collect import Role
    from privpub.spatial._data import (
        SIZE_CLASSES,
        ExactRangeCounter,
        grid_to_points,
        random_queries,
        synthetic_checkin,
        synthetic_landmark,
    )
    from privpub.spatial._hdg import HDG, hdg_granularities
    from privpub.spatial._kdght import KDGHT, kdg_intervals
    from privpub.spatial._registry import PUBLISHERS
    from privpub.spatial._release import SpatialPublisher, SpatialRelease, TreeLevel

__all__ = [
    "AHEAD",
    "ExactRangeCounter",
    "GTR",
    "HDG",
    "KDGHT",
    "PUBLISHERS",
    "RapporGrid",
    "Role",
    "SIZE_CLASSES",
    "SpatialPublisher",
    "SpatialRelease",
    "TreeLevel",
    "UniformGrid",
    "ahead_threshold",
    "grid_to_points",
    "gtr_height",
    "hdg_granularities",
    "kdg_intervals",
    "random_queries",
    "rappor_granularity",
    "synthetic_checkin",
    "synthetic_landmark",
    "ug_granularity",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
