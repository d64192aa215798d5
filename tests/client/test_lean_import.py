"""The participant SDK stays light (issue 27): importing :mod:`privpub.client` and running its
randomisation path (GRR, OUE, SUE, OLH, the spatial cell location, the codec) loads neither Numba,
SciPy nor pandas, and not httpx until a request is made. Checked in fresh interpreters; the
import-time goal itself is a benchmark (``benchmarks/client_import.py``), not a timed test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))

from client_configs import every_kind

SRC = Path(__file__).resolve().parents[2] / "src"
HEAVY = ("numba", "scipy", "pandas")

_REPORT = """
import json, sys
loaded = lambda: sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'scipy', 'pandas', 'httpx'})
"""


def _run(code: str, stdin: str = "") -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", _REPORT + code], input=stdin, capture_output=True, text=True,
                         env=env, check=True, timeout=300)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _configs() -> dict[str, dict[str, Any]]:
    cfgs = every_kind()
    del cfgs["synth"]  # the synth path encodes a DataFrame: it loads pandas by design
    ug = cfgs["spatial-ug"]
    cfgs["spatial-intervals"] = dict(ug, partition={"type": "intervals", "axis": 0, "edges": [0.0, 2.0, 5.0, 10.0]})
    cfgs["spatial-leaves"] = dict(ug, partition={"type": "leaves", "x0": [0.0, 5.0, 0.0], "x1": [5.0, 10.0, 10.0],
                                                 "y0": [0.0, 0.0, 2.5], "y1": [2.5, 2.5, 5.0]})
    return cfgs


def test_import_loads_no_heavy_package() -> None:
    got = _run("import privpub.client\nprint(json.dumps({'loaded': loaded()}))")
    assert got["loaded"] == []


def test_randomisation_path_loads_only_numpy() -> None:
    """Every oracle and partition kind, secure and seeded coins, encoded and decoded."""
    code = """
import numpy as np
from privpub.client import decode_payloads, perturb_values
cfgs = json.loads(sys.stdin.read())
out = {}
for name, cfg in cfgs.items():
    for rng in ("secure", 0):
        if cfg["kind"] == "frequency":
            payloads = perturb_values(cfg, ["c0", "c1", "c5", "c2"], rng=rng)
        else:
            part = cfg.get("partition") or {"type": "grid", "bounds": cfg["bounds"], "g": 4}
            payloads = perturb_values(cfg, np.array([[1.0, 1.0], [9.0, 4.0]]), partition=part, rng=rng)
        d = cfg.get("domain_size") or payloads.shape[1] * 8
        decode_payloads(cfg["payload"]["layout"], payloads, d)
    out[name] = loaded()
print(json.dumps(out))
"""
    got = _run(code, json.dumps(_configs()))
    assert set(got) >= {"frequency-GRR", "frequency-OUE", "frequency-SUE", "frequency-OLH", "spatial-ug",
                        "spatial-intervals", "spatial-leaves"}
    assert {name: mods for name, mods in got.items() if mods} == {}


@pytest.mark.parametrize("module", ["privpub.ldp_synth", "privpub.core._isotonic"])
def test_the_check_can_fail(module: str) -> None:
    """Negative control: the same check in a fresh interpreter flags a module that loads pandas / SciPy."""
    got = _run(f"import privpub.client, {module}\nprint(json.dumps({{'loaded': loaded()}}))")
    assert set(got["loaded"]) & set(HEAVY)
