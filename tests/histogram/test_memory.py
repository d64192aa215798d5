"""The histogram publishers' peak-memory estimates (``peak_bytes``) bound the measured peak.

Each case runs in a fresh interpreter: warm up (Numba kernels compiled or loaded), build the
input, reset the process's peak resident set size (``/proc/self/clear_refs``), publish and read
the peak's growth over the resident size before the call (``VmHWM``, which sees the Numba
kernels' arrays that :mod:`tracemalloc` misses; compiling kernels no longer hides it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from privpub.histogram import PEAK_BYTES_PER_BIN, peak_bytes

_SCRIPT = """
import json, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
from privpub import histogram
name, n, dtype, kw = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
histogram.PUBLISHERS[name](**kw).publish((np.arange(2000) % 37).astype(dtype), epsilon=1.0, rng=0)
x = np.minimum(np.random.default_rng(0).zipf(1.5, n), 10**6).astype(dtype)

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

with open("/proc/self/clear_refs", "w") as f:  # reset the peak (VmHWM) to the current RSS (Linux >= 4.0)
    f.write("5")
before = status("VmRSS:")
histogram.PUBLISHERS[name](**kw).publish(x, epsilon=1.0, rng=0)
print(json.dumps(status("VmHWM:") - before))
"""

CASES = [
    ("laplace", 10**6, "int64", {}),
    ("dawa", 2 * 10**5, "float64", {}),
    ("laplace", 10**6, "float64", {}),
    ("hphp", 2 * 10**5, "int64", {}),
    ("hphp", 10**6, "float64", {}),
    ("hphp", 10**6, "int64", {"grouping": "deque", "noise": "laplace"}),
    ("hphp", 2 * 10**5, "int64", {"grouping": "wavefront"}),
    ("hphp", 10**4, "int64", {"grouping": "quadratic"}),
    ("hphp_unattributed", 10**6, "float64", {}),
    ("hphp_paper", 10**6, "int64", {}),
    ("optimal", 10**6, "float64", {}),
    ("ahp", 10**4, "int64", {}),
    ("ahp", 3 * 10**4, "float64", {"noise": "laplace"}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "n", "dtype", "kw"), CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}" for c in CASES])
def test_peak_bytes_bounds_the_measured_peak(name: str, n: int, dtype: str, kw: dict) -> None:
    src = os.path.dirname(os.path.dirname(__import__("privpub").__file__))
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", _SCRIPT, name, str(n), dtype, json.dumps(kw)], capture_output=True,
                         text=True, check=True, env=env, timeout=300)
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    estimate = peak_bytes(name, n, grouping=kw.get("grouping", "fast"))
    assert measured <= estimate, f"measured {measured / n:.1f} B/bin, estimate {estimate / n:.1f} B/bin"
    if n >= 2 * 10**5:  # the measurement sees the call's arrays (at least the 8-byte noise per bin)
        assert measured >= 7 * n, f"measured only {measured / n:.1f} B/bin"


def test_every_publisher_and_grouping_has_an_estimate() -> None:
    from privpub.histogram import PUBLISHERS

    for name in PUBLISHERS:
        for grouping in ("fast", "deque", "wavefront", "quadratic"):
            assert peak_bytes(name, 10) > peak_bytes(name, 0) > 0
            assert peak_bytes(name, 10**6, grouping=grouping) >= 8 * 10**6  # at least the int64 counts
    assert set(PEAK_BYTES_PER_BIN) == {"laplace", "ahp", "dawa", "fast", "deque", "wavefront", "quadratic"}
