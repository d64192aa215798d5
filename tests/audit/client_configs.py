"""Public campaign configurations of every kind, as ``GET /campaigns/{id}`` returns them.

Shared by the conformance tests of the Python SDK and of the JS client (``clients/js``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from privpub.ldp import OLH
from privpub.ldp_synth import f_from_epsilon


def _base(kind: str, epsilon: float) -> dict[str, Any]:
    return {"id": f"audit-{kind}", "name": f"conformance {kind}", "kind": kind, "epsilon": epsilon,
            "min_reports": 0, "opens_at": None, "closes_at": None, "time_precision": 3600, "enrollment": False,
            "privacy": "(audit)"}


def frequency(oracle: str, *, epsilon: float = 1.0, d: int = 6) -> dict[str, Any]:
    cats = [f"c{i}" for i in range(d)]
    layout = {"GRR": "uint32le", "OLH": "uint32le[3]"}.get(oracle, "bits")
    width = {"uint32le": 4, "uint32le[3]": 12}.get(layout, (d + 7) // 8)
    cfg = dict(_base("frequency", epsilon), oracle=oracle, categories=cats, domain_size=d,
               payload={"layout": layout, "bytes": width})
    if oracle == "OLH":
        cfg["g"] = OLH(domain_size=d).buckets(epsilon)
    return cfg


def synth(*, epsilon: float = 3.0) -> dict[str, Any]:
    attrs = [{"name": "sex", "type": "categorical", "categories": ["F", "M"]},
             {"name": "age", "type": "categorical", "categories": ["<30", "30-50", ">50"]},
             {"name": "city", "type": "categorical", "categories": ["N", "S", "E", "W"]}]
    bits = sum(len(a["categories"]) for a in attrs)
    return dict(_base("synth", epsilon), schema={"attributes": attrs}, flip_prob=f_from_epsilon(epsilon, len(attrs)),
                degree=1, payload={"layout": "bits", "bytes": (bits + 7) // 8, "bits": bits})


def spatial_ug(*, epsilon: float = 1.0, g: int = 4) -> dict[str, Any]:
    bounds = [0.0, 0.0, 10.0, 5.0]
    return dict(_base("spatial", epsilon), method="ug", bounds=bounds, assigned=False, oracle="OUE",
                payload={"layout": "bits", "bytes": (g * g + 7) // 8},
                partition={"type": "grid", "bounds": bounds, "g": g})


def spatial_kdght(*, epsilon: float = 1.0, m: int = 8) -> dict[str, Any]:
    return dict(_base("spatial", epsilon), method="kdght", bounds=[0.0, 0.0, 10.0, 5.0], assigned=True,
                oracle="OUE", payload={"layout": "bits"},
                phases=[{"group": 0, "name": "U'_x", "cells": m, "quota": 100},
                        {"group": 1, "name": "U'_y", "cells": m, "quota": 100}])


def every_kind() -> dict[str, dict[str, Any]]:
    """One configuration per campaign kind and oracle, by name."""
    out = {f"frequency-{o}": frequency(o) for o in ("GRR", "OUE", "SUE", "OLH")}
    out["synth"] = synth()
    out["spatial-ug"] = spatial_ug()
    out["spatial-kdght"] = spatial_kdght()
    return out


def write_all(folder: Path) -> dict[str, Path]:
    """Write :func:`every_kind` as ``<name>.json`` files; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, cfg in every_kind().items():
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(json.dumps(cfg))
    return paths


if __name__ == "__main__":  # python tests/audit/client_configs.py FOLDER
    import sys

    for path in write_all(Path(sys.argv[1])).values():
        print(path)
