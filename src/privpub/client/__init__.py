"""The participant side of a privpub collection service (``privpub serve``).

A device perturbs its own value under epsilon-LDP with the library's client code and sends only
the report; see :class:`Participant` (one device) and :class:`Gateway` (a relay or simulator
that perturbs and uploads many participants' values in batches). A device's randomness is a
ChaCha20 stream keyed from the OS CSPRNG (:func:`device_generator`); ``python -m
privpub.client.conformance`` is the SDK's entry point for ``privpub audit client``. A real-time stream's producer
(a trusted source of raw counts or events; the service adds the noise) is :class:`StreamProducer`.

Examples
--------
>>> from privpub.client import Participant
>>> Participant("http://127.0.0.1:8000", "c0ffee").campaign_id
'c0ffee'
"""

from __future__ import annotations

from privpub.client._participant import (
    BatchResult,
    Gateway,
    OfflineError,
    Participant,
    Receipt,
    SubmissionError,
)
from privpub.client._perturb import cell_domain_size, frequency_oracle, locate_cells, perturb_values
from privpub.client._producer import ProduceResult, StreamProducer
from privpub.client._randomness import device_generator
from privpub.client.codec import b64encode, decode_payloads, encode_payloads, new_report_ids, payload_width

__all__ = [
    "BatchResult",
    "Gateway",
    "OfflineError",
    "Participant",
    "ProduceResult",
    "Receipt",
    "StreamProducer",
    "SubmissionError",
    "b64encode",
    "cell_domain_size",
    "decode_payloads",
    "device_generator",
    "encode_payloads",
    "frequency_oracle",
    "locate_cells",
    "new_report_ids",
    "payload_width",
    "perturb_values",
]
