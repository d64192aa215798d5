"""Parameter checks shared by the decision publishers (fail fast in ``__post_init__``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privpub.core import check_positive_int
from privpub.errors import ParameterError

__all__ = ["check_common"]


def check_common(pub: Any) -> None:
    """Validate ``levels``, ``noise``, ``fanout``, ``taxonomies``, grid size and the row limit."""
    if isinstance(pub.levels, bool):
        raise ParameterError(f"levels must be an integer >= 1, got {pub.levels!r}", param="levels")
    check_positive_int(pub.levels, "levels")
    if pub.noise not in ("discrete", "laplace"):
        raise ParameterError(f"noise must be 'discrete' or 'laplace', got {pub.noise!r}", param="noise")
    check_positive_int(pub.fanout, "fanout", minimum=2)
    if hasattr(pub, "max_split_candidates"):
        check_positive_int(pub.max_split_candidates, "max_split_candidates")
    if not float(pub.max_synthetic_rows) > 0:
        raise ParameterError(f"max_synthetic_rows must be > 0, got {pub.max_synthetic_rows!r}", param="max_synthetic_rows")
    if pub.taxonomies is not None and not isinstance(pub.taxonomies, Mapping):
        raise ParameterError(
            f"taxonomies must be a mapping of attribute names to trees, got {type(pub.taxonomies).__name__}"
        , param="taxonomies")
