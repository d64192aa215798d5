"""The HTML report from fake part outputs: verdicts, embedded figures, ledgers, self-containment."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from report_fakes import part_with_claims, part_without_claims, tiny_png

from privpub.errors import ParameterError
from privpub.experiments._common import VERDICTS, Claim, read_claims, read_ledgers, write_claims
from privpub.experiments._report import PartSection, build_report, claims_of, markdown_to_html


class _Scan(HTMLParser):
    """Collect claim rows (with their verdict cells), figures and external references."""

    def __init__(self) -> None:
        super().__init__()
        self.claims: list[dict[str, object]] = []
        self.figures: list[dict[str, str]] = []
        self.external: list[str] = []
        self._row: dict[str, object] | None = None
        self._in_verdict = False
        self._figure: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag == "tr" and "claim" in classes:
            self._row = {"part": a.get("data-part"), "verdicts": []}
            self.claims.append(self._row)
        if tag == "td" and "verdict" in classes and self._row is not None:
            self._in_verdict = True
            self._row["verdicts"].append("")  # type: ignore[attr-defined]
        if tag == "figure":
            self._figure = {"file": a.get("data-file", ""), "src": ""}
            self.figures.append(self._figure)
        if tag == "img" and self._figure is not None:
            self._figure["src"] = a.get("src", "")
        for key in ("src", "href"):
            value = a.get(key, "")
            if tag in ("img", "script", "link", "iframe") and re.match(r"^(https?:)?//", value):
                self.external.append(value)
        if tag in ("script", "link"):
            self.external.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._in_verdict = False
        if tag == "tr":
            self._row = None
        if tag == "figure":
            self._figure = None

    def handle_data(self, data: str) -> None:
        if self._in_verdict and self._row is not None:
            self._row["verdicts"][-1] += data  # type: ignore[index]


def _scan(path: Path) -> _Scan:
    scan = _Scan()
    scan.feed(path.read_text(encoding="utf-8"))
    return scan


@pytest.fixture
def tiny_run(tmp_path: Path) -> tuple[Path, list[PartSection]]:
    """Fake outputs of a tiny run: one complete part, one without claims, one failed, one absent."""
    root = tmp_path / "results"
    hist_summary = part_with_claims(root / "histogram")
    part_without_claims(root / "stream")
    sections = [
        PartSection("histogram", out_dir=root / "histogram", summary=hist_summary, duration=1.5,
                    command="privpub reproduce histogram --quick"),
        PartSection("stream", out_dir=root / "stream", duration=0.5),
        PartSection("decision", out_dir=root / "decision", status="failed",
                    message="Traceback ...\nRuntimeError: boom"),
        PartSection("spatial", status="not available", message="privpub.experiments.spatial is not installed"),
    ]
    return root, sections


def test_every_claim_row_has_a_verdict_and_every_figure_exists(tiny_run: tuple[Path, list[PartSection]]) -> None:
    root, sections = tiny_run
    report = build_report(sections, root / "report.html",
                          missing_datasets=[("gowalla", "spatial", "https://github.com/dpcomp-org/dpcomp_core")])
    scan = _scan(report)
    # the 3 claims of claims.csv; the parts without one show no placeholder rows (issue 21)
    assert len(scan.claims) == 3
    for row in scan.claims:
        verdicts = [str(v).strip() for v in row["verdicts"]]  # type: ignore[attr-defined]
        assert len(verdicts) == 1 and verdicts[0] in VERDICTS, row
    assert {r["part"] for r in scan.claims} == {"histogram"}
    text = report.read_text(encoding="utf-8")
    assert "No <code>claims.csv</code>" not in text and "results summary" not in text
    # every figure names an existing file and embeds exactly its bytes
    assert len(scan.figures) == 3
    for fig in scan.figures:
        path = report.parent / fig["file"]
        assert path.is_file(), fig["file"]
        assert fig["src"].startswith("data:image/png;base64,")
        assert base64.b64decode(fig["src"].split(",", 1)[1]) == path.read_bytes()
    embedded = {f["file"] for f in scan.figures}
    assert embedded == {p.relative_to(root).as_posix() for p in root.rglob("*.png")}
    assert scan.external == []


def test_report_content(tiny_run: tuple[Path, list[PartSection]]) -> None:
    root, sections = tiny_run
    report = build_report(sections, root / "report.html", meta={"seed": "0"})
    text = report.read_text(encoding="utf-8")
    assert "HPHP eps=0.1" in text and "group means" in text          # ledgers.csv shown
    assert "AHP &lt;b&gt;" in text and "<b>" not in text                 # markdown is escaped
    assert "RuntimeError: boom" in text                                 # failure shown
    assert "runs.csv (100 rows" in text                                 # large CSV summarised
    assert "gowalla" not in text                                        # no missing list given
    table = pd.read_csv(root / "claims_all.csv", keep_default_na=False)
    assert len(table) == 6 and set(table.verdict) <= set(VERDICTS)
    assert list(table[table.part == "histogram"].source.unique()) == ["claims.csv"]
    assert set(table[table.part != "histogram"].source) == {"fallback"}


def test_missing_datasets_are_listed(tiny_run: tuple[Path, list[PartSection]]) -> None:
    root, sections = tiny_run
    report = build_report(sections, root / "r.html",
                          missing_datasets=[("gowalla", "spatial", "https://github.com/dpcomp-org/x")])
    text = report.read_text(encoding="utf-8")
    assert "Missing datasets" in text and "https://github.com/dpcomp-org/x" in text


def test_claims_round_trip_and_validation(tmp_path: Path) -> None:
    claims = [Claim("a, with comma", "1", "2", "Reproduced", 'say "x"'),
              Claim("b", 0.5, float("nan"), "not applicable")]  # type: ignore[arg-type]
    write_claims(tmp_path, claims)
    back = read_claims(tmp_path)
    assert back == [Claim("a, with comma", "1", "2", "reproduced", 'say "x"'), Claim("b", "0.5", "", "not applicable")]
    assert read_claims(tmp_path / "nowhere") is None
    assert read_ledgers(tmp_path) is None
    with pytest.raises(ParameterError, match="verdict must be one of"):
        Claim("c", verdict="partly")
    with pytest.raises(ParameterError, match="claim must be a non-empty string"):
        Claim("  ")
    (tmp_path / "claims.csv").write_text("claim,verdict\nx,perhaps\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="verdict must be one of"):
        read_claims(tmp_path)


def test_malformed_claims_file_still_gives_a_verdict(tmp_path: Path) -> None:
    (tmp_path / "claims.csv").write_text("claim,verdict\nx,perhaps\n", encoding="utf-8")
    claims, source = claims_of(PartSection("histogram", out_dir=tmp_path))
    assert source == "fallback" and claims[0].verdict == "not applicable"
    assert "could not be read" in claims[0].note


def test_markdown_subset(tmp_path: Path) -> None:
    tiny_png(tmp_path / "a.png")
    images: list[Path] = []
    out = markdown_to_html(
        "## Title\n\ntext with `a<b` and [link](https://x.org) and *it*\n\n1. one\n2. two\n\n"
        "```\nx < y\n```\n\n> quote\n\n![cap](a.png) ![gone](missing.png)\n",
        base=tmp_path, shift=1, report_dir=tmp_path, images=images)
    out = re.sub(r">\s+<", "><", out)  # markdown-it puts a newline between block tags
    assert "<h3>Title</h3>" in out
    assert "<code>a&lt;b</code>" in out and '<a href="https://x.org">link</a>' in out and "<em>it</em>" in out
    assert "<ol><li>one</li><li>two</li></ol>" in out
    assert "<pre><code>x &lt; y</code></pre>" in out and "<blockquote>" in out
    assert 'data-file="a.png"' in out and "missing image missing.png" in out
    assert images == [(tmp_path / "a.png").resolve()]


def test_ledgers_compose_in_the_report(tmp_path: Path) -> None:
    """Issue 21: the printed total is the composed total (parallel blocks cost their costliest branch),
    also for a ledgers.csv written before the block columns existed."""
    from privpub.core import Accountant, discrete_laplace
    from privpub.experiments._common import write_ledgers

    with Accountant(0.5) as acc:
        with acc.parallel("disjoint user groups") as block:
            for g in range(8):
                with block.branch(f"U^{g}"):
                    discrete_laplace([3], epsilon=0.5, rng=g, note=f"group {g}")
        ledger = acc.seal()
    part = tmp_path / "spatial"
    write_ledgers(part, {"KDGHT eps=0.5": ledger})
    old = tmp_path / "old"
    old.mkdir()
    frame = pd.read_csv(part / "ledgers.csv")
    frame.drop(columns=["sensitivity", "block", "branch"]).to_csv(old / "ledgers.csv", index=False)
    for out_dir in (part, old):
        html = build_report([PartSection("spatial", out_dir=out_dir)], tmp_path / f"{out_dir.name}.html"
                            ).read_text(encoding="utf-8")
        spent = re.findall(r'class="ledger-total" data-total="([^"]+)">budget ε = 0.5, spent ([0-9.]+)', html)
        assert spent == [("0.5", "0.5")], out_dir
        assert "costliest branch" in html and "not the sum of its entries (4)" in html


def test_ledgers_csv_keeps_the_unit_and_the_measure(tmp_path: Path) -> None:
    """ledgers.csv carries whom each charge protects and the ledger's measure: the report then says
    "one person" for a person-level release (not "one record") and rho for a zCDP one; a file of an
    older privpub (without the two columns) still reads as one record under epsilon."""
    from privpub.core import Accountant, PrivacyUnit, discrete_gaussian, discrete_laplace
    from privpub.experiments._common import write_ledgers

    with Accountant(1.0, unit=PrivacyUnit.person("user", 3)) as acc:
        discrete_laplace([3, 4], epsilon=1 / 3, rng=0)  # the unit: k = 3 rows, charged 3 x
        person = acc.seal()
    with Accountant(0.5, measure="zcdp") as acc:
        discrete_gaussian([3, 4], rho=0.5, rng=0)
        zcdp = acc.seal()
    part = tmp_path / "part"
    write_ledgers(part, {"person eps=1": person, "rho=0.5": zcdp})
    frame = read_ledgers(part)
    assert list(frame["measure"]) == ["pure-dp", "zcdp"]
    old = tmp_path / "old"
    old.mkdir()
    frame.drop(columns=["measure", "unit"]).to_csv(old / "ledgers.csv", index=False)
    html = build_report([PartSection("new", out_dir=part)], tmp_path / "new.html").read_text(encoding="utf-8")
    assert "Central DP, unit: one person (all rows with the same &#39;user&#39;, at most 3 rows each" in html
    assert "budget ρ = 0.5" in html and "Central rho-zCDP, unit: one record" in html
    html = build_report([PartSection("old", out_dir=old)], tmp_path / "old.html").read_text(encoding="utf-8")
    assert "one person" not in html and "budget ε = 0.5" in html and html.count("Central DP, unit: one record") == 2
