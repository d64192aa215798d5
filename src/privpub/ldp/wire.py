"""Local-DP reports on the wire: the byte layouts shared by the client SDKs, the service and the auditor.

A report is an opaque byte string whose layout the campaign's public configuration names
(``payload.layout``); the single-report endpoint carries it base64-encoded, the batch endpoint
concatenates many. Pure NumPy; no validation beyond shapes (the server validates).

Layouts
-------
``uint32le``        GRR: the reported value, 4 bytes little-endian.
``uint32le[3]``     OLH: ``(a, b, y)``, 3 x 4 bytes little-endian.
``bits``            unary encodings (OUE, SUE, RAPPOR blocks): ``ceil(d / 8)`` bytes, bit ``j``
                    of the report is bit ``j % 8`` of byte ``j // 8`` (little-endian bit order,
                    ``numpy.packbits(..., bitorder="little")``); padding bits are 0.

:func:`frequency_oracle` maps a frequency campaign's public configuration to the oracle that
randomises (client) and estimates (server) its reports. This module sits in the ``ldp`` layer so
that :mod:`privpub.client` (devices) and :mod:`privpub.service` (the collector) share one
definition without importing each other (``docs/architecture.md``).
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.errors import ParameterError
from privpub.ldp._base import FrequencyOracle
from privpub.ldp._grr import GRR
from privpub.ldp._olh import OLH
from privpub.ldp._unary import OUE, SUE

__all__ = [
    "LAYOUTS",
    "b64decode",
    "b64encode",
    "decode_payloads",
    "encode_payloads",
    "frequency_oracle",
    "new_report_ids",
    "payload_width",
]

LAYOUTS = ("uint32le", "uint32le[3]", "bits")


def payload_width(layout: str, domain_size: int) -> int:
    """Bytes per report for ``layout`` over a domain of ``domain_size`` values (or bits)."""
    if layout == "uint32le":
        return 4
    if layout == "uint32le[3]":
        return 12
    if layout == "bits":
        return (int(domain_size) + 7) // 8
    raise ValueError(f"unknown payload layout {layout!r}; expected one of {LAYOUTS}")


def encode_payloads(layout: str, reports: ArrayLike, domain_size: int) -> NDArray[np.uint8]:
    """Reports as an ``(n, width)`` uint8 array in ``layout`` (see the module doc).

    ``reports``: GRR ``(n,)`` ints; OLH ``(n, 3)`` ints; ``bits`` an ``(n, d)`` bool array or an
    already packed ``(n, ceil(d/8))`` uint8 array.
    """
    arr = np.asarray(reports)
    if layout == "uint32le":
        return np.ascontiguousarray(arr.reshape(-1).astype("<u4")).view(np.uint8).reshape(-1, 4)
    if layout == "uint32le[3]":
        return np.ascontiguousarray(arr.reshape(-1, 3).astype("<u4")).view(np.uint8).reshape(-1, 12)
    if layout == "bits":
        width = payload_width(layout, domain_size)
        if arr.dtype == np.uint8 and arr.ndim == 2 and arr.shape[1] == width and domain_size != width:
            return np.ascontiguousarray(arr)
        return np.packbits(arr.astype(bool).reshape(arr.shape[0], -1), axis=1, bitorder="little")
    raise ValueError(f"unknown payload layout {layout!r}")


def decode_payloads(layout: str, payloads: NDArray[np.uint8], domain_size: int) -> NDArray[np.int64] | NDArray[np.uint8]:
    """Inverse of :func:`encode_payloads`: GRR ``(n,)`` int64, OLH ``(n, 3)`` int64, bits stay packed."""
    p = np.ascontiguousarray(payloads, dtype=np.uint8)
    if layout == "uint32le":
        return p.view("<u4").reshape(-1).astype(np.int64)
    if layout == "uint32le[3]":
        return p.view("<u4").reshape(-1, 3).astype(np.int64)
    if layout == "bits":
        return p
    raise ValueError(f"unknown payload layout {layout!r}")


def b64encode(data: bytes | NDArray[np.uint8]) -> str:
    """Standard base64 text of ``data``."""
    raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    return base64.b64encode(raw).decode("ascii")


def b64decode(text: str) -> bytes:
    """Strict standard base64 (raises ``ValueError`` on anything else)."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError("is not valid base64") from exc


def new_report_ids(n: int) -> NDArray[np.uint8]:
    """``n`` fresh random 128-bit report ids from the operating system's CSPRNG, ``(n, 16)`` uint8."""
    return np.frombuffer(secrets.token_bytes(16 * int(n)), dtype=np.uint8).reshape(int(n), 16).copy()


def frequency_oracle(config: Mapping[str, Any]) -> FrequencyOracle:
    """The :mod:`privpub.ldp` oracle a frequency campaign declares (public parameters only)."""
    d = len(config["categories"])
    name = config["oracle"]
    if name == "GRR":
        return GRR(domain_size=d)
    if name == "OUE":
        return OUE(domain_size=d)
    if name == "SUE":
        return SUE(domain_size=d)
    if name == "OLH":
        return OLH(domain_size=d, g=int(config["g"]))
    raise ParameterError(f"oracle must be one of GRR, OUE, OLH, SUE, got {name!r}", param="oracle")
