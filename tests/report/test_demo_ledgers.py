"""Issue 21: the demo report shows every ledger as it composes, and reads as a first impression.

The real ``privpub demo`` parts run (built-in data, a few seconds once Numba has compiled); the
HTML is parsed and every ledger's printed total is checked against the total that
:class:`privpub.core.BudgetLedger` composes from the entries the part wrote (``ledgers.csv``).
"""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from privpub.cli._demo import DEMO_PARTS, run_demo_parts, write_demo_report
from privpub.core import BudgetLedger
from privpub.experiments._common import read_ledgers
from privpub.ldp_synth import epsilon_from_f


class _Ledgers(HTMLParser):
    """Collect each ``div.ledger``: its release, the printed total line, the protection and heights lines."""

    def __init__(self) -> None:
        super().__init__()
        self.ledgers: list[dict[str, str]] = []
        self.part = ""
        self._field: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag == "section":
            self.part = a.get("data-part", "")
        if tag == "div" and "ledger" in classes:
            self.ledgers.append({"part": self.part, "release": a["data-release"], "total": "", "protects": "",
                                 "heights": "", "data-total": ""})
        if tag == "p" and self.ledgers:
            for name in ("ledger-total", "protects", "heights"):
                if name in classes:
                    self._field = "total" if name == "ledger-total" else name
                    if name == "ledger-total":
                        self.ledgers[-1]["data-total"] = a.get("data-total", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "p":
            self._field = None

    def handle_data(self, data: str) -> None:
        if self._field is not None:
            self.ledgers[-1][self._field] += data


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    run = run_demo_parts(0)
    assert not run.errors, run.errors
    return write_demo_report(run, out, seed=0)


def _composed(report: Path) -> dict[tuple[str, str], BudgetLedger]:
    """Every ledger the parts wrote, rebuilt as a BudgetLedger from ledgers.csv."""
    out = {}
    for part in DEMO_PARTS:
        frame = read_ledgers(report.parent / part)
        assert frame is not None, f"{part} wrote no ledgers.csv: every demo release carries its ledger"
        for release, group in frame.groupby("release", sort=False):
            records = group.to_dict("records")
            for r in records:
                r["sensitivity"] = None if r["sensitivity"] == "" else float(r["sensitivity"])
            out[(part, str(release))] = BudgetLedger.from_records(float(group["epsilon_total"].iloc[0]), records)
    return out


@pytest.mark.slow
def test_every_printed_total_is_the_composed_total(demo_report: Path) -> None:
    scan = _Ledgers()
    scan.feed(demo_report.read_text(encoding="utf-8"))
    composed = _composed(demo_report)
    shown = {(led["part"], led["release"]): led for led in scan.ledgers}
    assert len(shown) == len(scan.ledgers), "a release is shown twice"
    assert set(shown) == set(composed), "every ledger the demo made is shown, and only those"
    for key, led in shown.items():
        ledger = composed[key]
        m = re.search(r"spent ([0-9.e+-]+|inf)", led["total"])
        assert m is not None, led
        printed = float(m.group(1))
        assert math.isclose(printed, ledger.total, rel_tol=1e-5), (key, led["total"], ledger.total)
        assert math.isclose(float(led["data-total"]), ledger.total, rel_tol=1e-5)
        assert ledger.total <= ledger.epsilon * (1 + 1e-9), key
        assert f"budget ε = {ledger.epsilon:.6g}" in led["total"]
        assert led["protects"].startswith(("Local DP, unit: one user", "Central DP")), led
        # a parallel block is explained as a maximum, not a sum
        if any(e.composition == "parallel" and e.parts * len(ledger) > 1 for e in ledger):
            assert "costliest branch" in led["total"], led
    # the two totals of the issue: all KDG-HT and GT-R steps run on disjoint users
    for name in ("KDG-HT eps=0.5", "GT-R eps=0.5"):
        led = shown[("spatial", name)]
        assert "spent 0.5:" in led["total"] and "not the sum of its entries" in led["total"], led
        assert "disjoint groups" in led["protects"]


@pytest.mark.slow
def test_the_demo_report_explains_instead_of_placeholding(demo_report: Path) -> None:
    html = demo_report.read_text(encoding="utf-8")
    for placeholder in ("No <code>claims.csv</code>", "not applicable", "No ledgers recorded", "results summary",
                        "<th>reproduced</th>"):
        assert placeholder not in html, placeholder
    scan = _Ledgers()
    scan.feed(html)
    by_release = {(led["part"], led["release"]): led for led in scan.ledgers}
    # the core part's runs are releases with ledgers too
    assert sum(part == "core" for part, _ in by_release) == 8
    # HQ chose other heights than RTP, and the ledgers say which
    heights = {name: by_release[("stream", f"{name} eps=1")]["heights"] for name in ("RTP", "HQ_RTP", "RTP_MM",
                                                                                      "HQ_RTPMM")}
    assert all(h.startswith("Tree heights chosen: ") for h in heights.values()), heights
    assert heights["RTP"] != heights["HQ_RTP"] and heights["RTP_MM"] != heights["HQ_RTPMM"], heights
    assert "Why the HQ methods are so much better here" in html
    rows = pd.read_csv(demo_report.parent / "stream" / "demo.csv")
    assert rows.note.str.contains("of height").all()
    # the LDP synthesizer's epsilon is explained by paper 000's mapping, with the d and f used
    eps = epsilon_from_f(0.2, 6)
    assert f"{eps:.4g}" in html and "2 <em>d</em> ln((2 - <em>f</em>)/<em>f</em>)" in html
    assert "<em>d</em> = 6 and <em>f</em> = 0.2" in html
