"""The explicit registry of stream publishers (CLI, experiments, benchmarks)."""

from __future__ import annotations

from typing import Any

from privpub.errors import ParameterError
from privpub.stream._base import StreamPublisher
from privpub.stream._binary import BT, BTH
from privpub.stream._fenwick import HQRTP, HQRTPMM, RTP, RTPMM
from privpub.stream._mf import BLT, MFRange, MFSqrt

__all__ = ["PUBLISHERS", "make_publisher"]

#: method name -> publisher class
PUBLISHERS: dict[str, type[StreamPublisher]] = {
    "rtp": RTP,
    "hq_rtp": HQRTP,
    "rtp_mm": RTPMM,
    "hq_rtpmm": HQRTPMM,
    "bt": BT,
    "bth": BTH,
    "mf_sqrt": MFSqrt,
    "blt": BLT,
    "mf_range": MFRange,
}


def make_publisher(method: str, **params: Any) -> StreamPublisher:
    """Build a publisher by name (``"rtp"``, ``"hq_rtp"``, ``"rtp_mm"``, ``"hq_rtpmm"``, ``"bt"``, ``"bth"``, ``"mf_sqrt"``, ``"blt"``,
    ``"mf_range"``)."""
    cls = PUBLISHERS.get(method)
    if cls is None:
        raise ParameterError(f"method must be one of {sorted(PUBLISHERS)}, got {method!r}", param="method")
    return cls(**params)
