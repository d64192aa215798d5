"""Privacy by construction (issue 12): the parts never write ledgers and never draw privacy noise themselves.

Ledgers are the record the mechanisms of :mod:`privpub.core` and :mod:`privpub.ldp` make as they
draw; a part that constructs a ``BudgetLedger``, calls ``.spend``/``.spend_rest``, or calls a
continuous-noise method of a generator directly would write a record beside the noise instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import privpub

SRC = Path(privpub.__file__).resolve().parent
PARTS = ("histogram", "spatial", "decision", "stream", "ldp_synth")
#: generator methods that draw privacy noise (the parts must go through a core mechanism)
NOISE_METHODS = {"laplace", "exponential", "standard_exponential", "gumbel", "geometric", "logistic",
                 "normal", "standard_normal"}
_PENDING: set[str] = set()  # parts still migrating to the accountant


def _violations_in(source: str, filename: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name == "BudgetLedger" or name in ("spend", "spend_rest"):
                out.append(f"{filename}:{node.lineno} {ast.unparse(fn)}")
            if isinstance(fn, ast.Attribute) and name in NOISE_METHODS and not (
                    isinstance(fn.value, ast.Name) and fn.value.id in ("np", "math")):
                out.append(f"{filename}:{node.lineno} {ast.unparse(fn)}")
    return out


#: modules of built-in demo-data generators: they draw made-up data, not noise for a release
DATA_GENERATORS = {"_data.py"}


def _violations(part: str) -> list[str]:
    return [v for path in sorted((SRC / part).glob("*.py")) if path.name not in DATA_GENERATORS
            for v in _violations_in(path.read_text(encoding="utf-8"), path.name)]


@pytest.mark.parametrize("part", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="migration pending"))
                                  if p in _PENDING else p for p in PARTS])
def test_parts_write_no_ledger_and_draw_no_noise_themselves(part: str) -> None:
    assert _violations(part) == []


def test_the_scan_sees_a_violation() -> None:
    probe = "ledger = BudgetLedger(1.0)\nledger.spend('a', 'b', 1.0)\nz = gen.laplace(0, 1)\nw = np.exp(1)\n"
    assert _violations_in(probe, "probe.py") == ["probe.py:1 BudgetLedger", "probe.py:2 ledger.spend",
                                                 "probe.py:3 gen.laplace"]
