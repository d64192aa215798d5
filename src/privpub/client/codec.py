"""Report payloads on the wire: :mod:`privpub.ldp.wire`, under the SDK's name.

The layouts are defined once, in the ``ldp`` layer, for the client SDKs, the service and the
auditor alike; this module re-exports them for code written against the SDK.
"""

from __future__ import annotations

from privpub.ldp.wire import (
    LAYOUTS,
    b64decode,
    b64encode,
    decode_payloads,
    encode_payloads,
    frequency_oracle,
    new_report_ids,
    payload_width,
)

__all__ = ["LAYOUTS", "b64decode", "b64encode", "decode_payloads", "encode_payloads", "frequency_oracle",
           "new_report_ids", "payload_width"]
