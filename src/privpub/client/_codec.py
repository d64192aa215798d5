"""Deprecated location of :mod:`privpub.client.codec` (kept importable for existing code)."""

from __future__ import annotations

from privpub.client.codec import (
    LAYOUTS,
    b64decode,
    b64encode,
    decode_payloads,
    encode_payloads,
    new_report_ids,
    payload_width,
)

__all__ = ["LAYOUTS", "b64decode", "b64encode", "decode_payloads", "encode_payloads", "new_report_ids",
           "payload_width"]
