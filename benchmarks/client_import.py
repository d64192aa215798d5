"""Import time of the participant SDK, ``import privpub.client`` (issue 27: <= 0.2 s, no Numba/SciPy/pandas).

Run on demand from the repository root (not part of the test suite)::

    python benchmarks/client_import.py [--runs 15] [--src src] [--markdown docs/benchmarks/client_import.md]

Each run is a fresh interpreter that times, in process (interpreter start-up excluded), first
``import numpy`` and then ``import privpub.client``, in wall-clock and CPU seconds, and lists the
heavy packages loaded. Bytecode is cached in a temporary ``PYTHONPYCACHEPREFIX`` (one warm-up run
writes it), as an installed package has its ``.pyc`` files; ``--src`` points at another checkout
to compare (e.g. the commit before the change). The load average is printed before and after:
on a shared machine wall time is inflated, CPU time less.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import emit

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys, time
w0, c0 = time.perf_counter(), time.process_time()
import numpy
w1, c1 = time.perf_counter(), time.process_time()
import privpub.client
w2, c2 = time.perf_counter(), time.process_time()
heavy = sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'scipy', 'pandas', 'httpx', 'randomgen'})
print(json.dumps({"numpy": [w1 - w0, c1 - c0], "client": [w2 - w1, c2 - c1], "total": [w2 - w0, c2 - c0],
                  "heavy": heavy, "privpub_modules": sum(m.startswith('privpub') for m in sys.modules)}))
"""


def _probe(env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the privpub source tree to import")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="privpub-pyc-") as pyc:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(args.src.resolve()), PYTHONPYCACHEPREFIX=pyc)
        _probe(env)  # writes the bytecode cache
        runs = [_probe(env) for _ in range(max(1, args.runs))]
    load1 = os.getloadavg()

    def med(key: str, i: int) -> float:
        return statistics.median(float(r[key][i]) for r in runs)  # type: ignore[index]

    lines = [f"`import privpub.client` from {args.src}, {len(runs)} fresh interpreters (medians; bytecode cached)",
             f"load average before {load0[0]:.2f}, after {load1[0]:.2f}", "",
             "| import | wall s | CPU s |", "| --- | ---: | ---: |"]
    for key, label in (("numpy", "`import numpy`"), ("client", "`import privpub.client` after NumPy"),
                       ("total", "both (the SDK's import)")):
        lines.append(f"| {label} | {med(key, 0):.3f} | {med(key, 1):.3f} |")
    lines += ["", f"heavy packages loaded: {runs[-1]['heavy'] or 'none'}; privpub modules: "
              f"{runs[-1]['privpub_modules']}"]
    emit("\n".join(lines) + "\n", args.markdown)


if __name__ == "__main__":
    main()
