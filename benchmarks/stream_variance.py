"""CPU per call of one range's answer and exact standard deviation (issue 27), library only.

The work of the service's ``GET /streams/{id}/range`` inside the library: HQ_RTP (and BT, BTH),
window 4,096, epsilon 1, ``--steps`` steps extended, ``--ranges`` random ranges in the last 500
steps; per publisher the CPU time per call of ``answer_variance`` and, for HQ_RTP, of the
answer plus its standard deviation as the service computes them. Best of ``--repeats`` runs.
Run it against two checkouts alternately to compare them (``PYTHONPATH`` selects the code)::

    PYTHONPATH=src python benchmarks/stream_variance.py [--steps 1000] [--ranges 2000]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from privpub.stream import BT, BTH, HQRTP


def best_us(fn: Callable[[], Any], calls: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return round(1e6 * best / calls, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--ranges", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    out: dict[str, float] = {}
    for cls in (HQRTP, BT, BTH):
        pub = cls(window=4096, epsilon=1.0, rng=0)
        rng = np.random.default_rng(1)
        pub.extend(rng.integers(0, 10, args.steps))
        t = pub.t
        a = rng.integers(max(1, t - 499), t + 1, args.ranges)
        b = rng.integers(max(1, t - 499), t + 1, args.ranges)
        pairs = list(zip(np.minimum(a, b).tolist(), np.maximum(a, b).tolist()))

        def variance(pub: Any = pub, pairs: list[tuple[int, int]] = pairs) -> None:
            for l, r in pairs:
                pub.answer_variance(l, r)

        out[f"{pub.method}_variance_us"] = best_us(variance, len(pairs), args.repeats)
        if cls is HQRTP:
            def service(pub: Any = pub, pairs: list[tuple[int, int]] = pairs, t: int = t) -> None:
                if hasattr(pub, "_answer_one"):  # this code: the service's one-range path
                    for l, r in pairs:
                        pub._answer_one(l, r, t)
                        float(pub._variance_checked(l, r)) ** 0.5
                else:  # before issue 27's change
                    for l, r in pairs:
                        pub._answer_at(np.array([l]), np.array([r]), np.array([t]))[0].item()
                        float(pub.answer_variance(l, r)) ** 0.5

            out["hq_rtp_answer_and_std_us"] = best_us(service, len(pairs), args.repeats)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
