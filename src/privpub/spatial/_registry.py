"""The spatial publishers by CLI name (``privpub.spatial.PUBLISHERS``)."""

from __future__ import annotations

from privpub.spatial._ahead import AHEAD
from privpub.spatial._baselines import GTR, RapporGrid, UniformGrid
from privpub.spatial._hdg import HDG
from privpub.spatial._kdght import KDGHT
from privpub.spatial._release import SpatialPublisher

__all__ = ["PUBLISHERS"]

#: the spatial publishers by CLI name
PUBLISHERS: dict[str, type[SpatialPublisher]] = {
    "kdght": KDGHT, "ug": UniformGrid, "gtr": GTR, "rappor": RapporGrid, "hdg": HDG, "ahead": AHEAD,
}
