"""Fake part outputs for the report tests (no part is run)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pandas as pd

from privpub.core import BudgetLedger, split
from privpub.experiments._common import Claim, write_claims, write_ledgers


def tiny_png(path: Path, rgb: tuple[int, int, int] = (40, 90, 160), size: int = 8) -> Path:
    """Write a valid ``size`` x ``size`` single-colour PNG (no plotting library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return path


def ledger(epsilon: float) -> BudgetLedger:
    led = BudgetLedger(epsilon)
    a, b = split(epsilon, [1, 1])
    led.spend("structure", "discrete_laplace", a)
    led.spend("group means", "discrete_laplace", b, composition="parallel", parts=5)
    return led.freeze()


def part_with_claims(out: Path) -> Path:
    """A complete part directory: summary with an inline figure, two PNGs, CSVs, claims, ledgers."""
    out.mkdir(parents=True, exist_ok=True)
    tiny_png(out / "fig2.png")
    tiny_png(out / "fig3_lnmse.png", (200, 60, 40))
    pd.DataFrame({"dataset": ["nettrace", "search_logs"], "kld": [0.12, 0.034]}).to_csv(
        out / "summary.csv", index=False)
    pd.DataFrame({"run": range(100), "value": [i / 7 for i in range(100)]}).to_csv(out / "runs.csv", index=False)
    summary = out / "summary.md"
    summary.write_text(
        "# Histogram reproduction\n\nCommand: `privpub reproduce histogram --quick`\n\n"
        "| method | KLD |\n|---|---|\n| HPHP | 0.12 |\n| AHP <b> | 0.34 |\n\n"
        "![Fig. 2: KLD](fig2.png)\n\n- a list item with **bold**\n- and `code`\n",
        encoding="utf-8")
    write_claims(out, [
        Claim("HPHP's KLD about 10% of AHP's", "10%", "35%", "not reproduced", "private variant pays for the sort"),
        Claim("HPHP beats DP everywhere", "yes", "12/12", "reproduced"),
        Claim("waitakere results", "Fig. 2d", "", "not applicable", "dataset not public"),
    ])
    write_ledgers(out, {"HPHP eps=0.1": ledger(0.1), "HPHP eps=1": ledger(1.0)})
    return summary


def part_without_claims(out: Path) -> Path:
    """A part that wrote only a summary and a figure (the report falls back)."""
    out.mkdir(parents=True, exist_ok=True)
    tiny_png(out / "queries.png", (20, 160, 60))
    summary = out / "summary.md"
    summary.write_text("# Stream\n\nHQ variants better for small queries.\n", encoding="utf-8")
    return summary
