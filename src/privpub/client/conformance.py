"""The Python SDK's conformance entry point: ``python -m privpub.client.conformance``.

Implements the line protocol of ``privpub audit client`` (:func:`privpub.audit.audit_client`)
with the SDK's real code path, :func:`privpub.client.perturb_values`, exactly as
:class:`privpub.client.Participant` calls it: the first stdin line is the campaign's public
configuration (for an assigned spatial campaign with the ``assignment`` and ``partition`` the
service handed out), then one JSON input per line; one base64 report per input is written to
stdout, in order. The randomness is the SDK's default (``rng="secure"``).

The whole input is read before answering (the auditor closes stdin after the last input), so
that the reports are randomised in one vectorised call; each row is still one participant's
independent report.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

import numpy as np

from privpub.client._perturb import perturb_values
from privpub.client.codec import b64encode

__all__ = ["main", "respond"]


def respond(config: dict[str, Any], values: list[Any]) -> list[str]:
    """The base64 reports of ``values`` under ``config`` (one participant each)."""
    if not values:
        return []
    kind = config.get("kind")
    partition = config.get("partition")
    if kind == "spatial":
        payloads = perturb_values(config, np.asarray(values, dtype=np.float64).reshape(-1, 2), partition=partition)
    elif kind == "synth":
        payloads = perturb_values(config, [dict(v) for v in values])
    else:
        payloads = perturb_values(config, values)
    return [b64encode(row) for row in payloads]


def main(stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Run the protocol on ``stdin`` / ``stdout``; returns the exit code."""
    src = stdin if stdin is not None else sys.stdin
    dst = stdout if stdout is not None else sys.stdout
    lines = [ln for ln in src.read().splitlines() if ln.strip()]
    if not lines:
        print("error: expected the campaign configuration on the first line", file=sys.stderr)
        return 2
    config = json.loads(lines[0])
    values = [json.loads(ln) for ln in lines[1:]]
    dst.write("".join(r + "\n" for r in respond(config, values)))
    dst.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised as a subprocess
    raise SystemExit(main())
