"""The report with hostile content: nothing a part's files or names hold becomes markup or script.

Every test here fails on the hand-written converter this replaced (it let ``javascript:`` links
through and did not escape link text) or checks a property a template must keep.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from report_fakes import part_with_claims

from privpub.experiments._common import Claim, write_claims
from privpub.experiments._report import PartSection, build_report, markdown_to_html, safe_link

SCRIPT = "<script>alert(1)</script>"


class _Elements(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def _elements(html: str) -> list[tuple[str, dict[str, str]]]:
    p = _Elements()
    p.feed(html)
    return p.tags


def _assert_inert(html: str) -> None:
    """No script element, no event handler, no javascript:/vbscript:/data: link anywhere."""
    for tag, attrs in _elements(html):
        assert tag not in ("script", "iframe", "object", "embed"), tag
        for key, value in attrs.items():
            assert not key.startswith("on"), (tag, key, value)
            if key in ("href", "src", "action", "formaction"):
                cleaned = re.sub(r"[\x00-\x20]+", "", value).lower()
                assert not cleaned.startswith(("javascript:", "vbscript:")), (tag, key, value)
                if cleaned.startswith("data:"):
                    assert tag == "img" and cleaned.startswith("data:image/png;base64,"), (tag, key, value)


@pytest.mark.parametrize("link", ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "java\tscript:alert(1)",
                                  "vbscript:msgbox(1)", "data:text/html;base64,PHNjcmlwdD4=", "file:///etc/passwd"])
def test_unsafe_link_schemes_are_not_linked(link: str) -> None:
    out = markdown_to_html(f"[click]({link}) and ![img]({link})")
    _assert_inert(out)
    assert "<a " not in out and "<img" not in out
    assert not safe_link(link)


def test_safe_links_survive() -> None:
    out = markdown_to_html("[a](https://x.org) [b](mailto:a@b.org) [c](other.md#sec) [d](#top)")
    hrefs = [a["href"] for t, a in _elements(out) if t == "a"]
    assert hrefs == ["https://x.org", "mailto:a@b.org", "other.md#sec", "#top"]


def test_raw_html_in_markdown_is_text() -> None:
    out = markdown_to_html(f"# {SCRIPT}\n\n<img src=x onerror=alert(1)>\n\n| a |\n|---|\n| {SCRIPT} |\n")
    _assert_inert(out)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "<img" not in out


def test_hostile_names_in_the_whole_report(tmp_path: Path) -> None:
    """A dataset, category, claim, ledger and part name ``<script>``, a javascript: link, an =cmd cell."""
    root = tmp_path / "results"
    part = root / "histogram"
    summary = part_with_claims(part)
    summary.write_text(
        f"# Results on {SCRIPT}\n\n[details](javascript:alert(document.cookie))\n\n"
        f"| dataset | category |\n|---|---|\n| {SCRIPT} | \"><svg onload=alert(1)> |\n", encoding="utf-8")
    pd.DataFrame({"dataset": [SCRIPT, "=cmd|' /C calc'!A0"], "category": ["\"><img src=x onerror=alert(1)>", "ok"],
                  SCRIPT: [1, 2]}).to_csv(part / "hostile.csv", index=False)
    write_claims(part, [Claim(f"claim {SCRIPT}", "=1+1", "-2", "reproduced", "javascript:alert(1)")])
    sections = [PartSection("histogram", out_dir=part, summary=summary, message=SCRIPT,
                            command=f"privpub reproduce {SCRIPT}"),
                PartSection(SCRIPT, status="failed", message=SCRIPT)]
    report = build_report(sections, root / "report.html", title=f"report {SCRIPT}",
                          intro=f"intro {SCRIPT} [x](javascript:alert(1))",
                          missing_datasets=[(SCRIPT, "histogram", "javascript:alert(1)")],
                          meta={SCRIPT: SCRIPT})
    html = report.read_text(encoding="utf-8")
    _assert_inert(html)
    assert SCRIPT not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 10
    # the CSV written beside the report neutralises formula cells
    text = (root / "claims_all.csv").read_text(encoding="utf-8")
    assert "'=1+1" in text and ",=1+1" not in text


def test_report_is_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure while rendering leaves the previous report untouched and no temporary file."""
    import privpub.experiments._report as rep

    root = tmp_path / "r"
    summary = part_with_claims(root / "histogram")
    sections = [PartSection("histogram", out_dir=root / "histogram", summary=summary)]
    path = build_report(sections, root / "report.html")
    before = path.read_bytes()

    def boom(*args: object, **kwargs: object) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(rep, "markdown_to_html", boom)
    with pytest.raises(KeyboardInterrupt):
        build_report(sections, path)
    assert path.read_bytes() == before
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []


def test_claims_and_ledgers_csv_round_trip_formula_cells(tmp_path: Path) -> None:
    """claims.csv and ledgers.csv neutralise formula cells on disk and restore them exactly when read."""
    from privpub.core import BudgetLedger
    from privpub.experiments._common import read_claims, read_ledgers, write_ledgers

    claims = [Claim("=HYPERLINK(\"http://x\")", "+1", "-2", "reproduced", "'quoted"), Claim("@x", "-0.5", "", "not applicable")]
    write_claims(tmp_path, claims)
    text = (tmp_path / "claims.csv").read_text(encoding="utf-8")
    assert "'=HYPERLINK" in text and "'@x" in text and "''quoted" in text and ",-0.5," in text
    assert read_claims(tmp_path) == claims
    led = BudgetLedger(1.0)
    led.spend("=step", "-mech", 1.0, note="@note")
    write_ledgers(tmp_path, {"+release": led.freeze()})
    assert "'=step" in (tmp_path / "ledgers.csv").read_text(encoding="utf-8")
    back = read_ledgers(tmp_path)
    assert back["release"].tolist() == ["+release"] and back["step"].tolist() == ["=step"]
    assert back["note"].tolist() == ["@note"]
