"""The combined HTML report: one self-contained file for every part's reproduction (or the demo).

The builder reads each part's output directory as described at the top of
:mod:`privpub.experiments._common` (markdown summary, PNG figures, CSV tables, ``claims.csv``,
``ledgers.csv``) and writes one HTML file with every figure embedded as base64, so the file can
be mailed or archived alone. Nothing is fetched from the network when it is opened.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from privpub.experiments._common import Claim, write_claims
>>> root = Path(tempfile.mkdtemp())
>>> _ = write_claims(root / "histogram", [Claim("HPHP beats DP", "yes", "yes", "reproduced")])
>>> html = build_report([PartSection("histogram", out_dir=root / "histogram")], root / "report.html")
>>> "reproduced" in html.read_text()
True
"""

from __future__ import annotations

import base64
import datetime as _dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup

import privpub
from privpub._io import atomic_output, neutralise_frame
from privpub.core import LedgerEntry, explain_entries, ledger_total
from privpub.experiments._common import (
    CLAIMS_FILE,
    LEDGERS_FILE,
    MEASURED_DIGITS,
    VERDICTS,
    Claim,
    parse_rule,
    read_claims,
    read_ledgers,
)

__all__ = ["LOCAL_MECHANISMS", "PART_TITLES", "SAFE_SCHEMES", "PartSection", "build_report", "claims_of",
           "figure_order", "heights_of", "markdown_to_html", "protection_of", "safe_link"]

#: display title of each part (paper number in shared/seeds, reference)
PART_TITLES: dict[str, str] = {
    "core": "Shared mechanisms and local-DP frequency oracles",
    "histogram": "Histogram publishing: HPHP (paper 001, Li et al. 2020)",
    "ldp_synth": "Local-DP high-dimensional synthetic data (paper 000, Ren et al. 2019, LoPub)",
    "spatial": "Local-DP spatial range queries: KDG-HT (paper 002, Jin et al. 2022)",
    "decision": "Decision-data release: MAXGDDP (paper 003, Fu et al. 2018)",
    "stream": "Real-time stream publishing (paper 004, Wu et al. 2019)",
}

#: CSV tables with at most this many rows are shown in full
MAX_TABLE_ROWS = 60


@dataclass
class PartSection:
    """What the report knows about one part besides the files in its directory.

    Parameters
    ----------
    part : str
        Part name (``"histogram"``, ...).
    out_dir : Path or None
        The part's output directory (None when it did not run).
    status : str
        ``"ok"``, ``"failed"``, ``"not available"`` (module not installed), ``"missing data"``
        or ``"demo"``.
    duration : float or None
        Wall-clock seconds of the run.
    message : str
        Error text or a remark shown under the title.
    summary : Path or None
        The markdown summary (default: ``summary.md`` or the only ``*.md`` in ``out_dir``).
    missing_datasets : list of (name, source)
        Datasets the part needs that are absent from the data directory.
    ledgers : DataFrame or None
        Representative ledgers (columns as ``ledgers.csv``) used when ``out_dir`` has none.
    ledger_note : str
        Where ``ledgers`` come from.
    fallback_note : str
        Note of the single ``results summary`` claim row shown when there is no ``claims.csv``.
    command : str
        The command that reproduces this section.
    about : str
        Markdown shown under the title (what the section ran and how to read it).
    """

    part: str
    out_dir: Path | None = None
    status: str = "ok"
    duration: float | None = None
    message: str = ""
    summary: Path | None = None
    missing_datasets: list[tuple[str, str]] = field(default_factory=list)
    ledgers: Any = None
    ledger_note: str = ""
    fallback_note: str = ""
    command: str = ""
    about: str = ""

    @property
    def title(self) -> str:
        return PART_TITLES.get(self.part, self.part)

    def summary_path(self) -> Path | None:
        if self.summary is not None and Path(self.summary).is_file():
            return Path(self.summary)
        if self.out_dir is None or not Path(self.out_dir).is_dir():
            return None
        default = Path(self.out_dir) / "summary.md"
        if default.is_file():
            return default
        mds = sorted(Path(self.out_dir).glob("*.md"))
        return mds[0] if mds else None


# ----------------------------------------------------------------------------------------------
# claims
# ----------------------------------------------------------------------------------------------
def claims_of(section: PartSection) -> tuple[list[Claim], str]:
    """The claim rows of a section and where they come from (``"claims.csv"`` or ``"fallback"``).

    Every section gets at least one row, and every row has a verdict from ``VERDICTS``.
    """
    if section.out_dir is not None:
        try:
            claims = read_claims(section.out_dir)
        except Exception as exc:  # a malformed file must not sink the whole report
            return [Claim("results summary", "", "", "not applicable",
                          f"{CLAIMS_FILE} could not be read: {exc}")], "fallback"
        if claims:
            return claims, CLAIMS_FILE
    if section.status not in ("ok", "demo"):
        why = {"failed": "the run failed", "not available": "the part is not installed",
               "missing data": "its datasets are missing"}.get(section.status, section.status)
        detail = _first_line(section.message) if section.status in ("failed", "missing data") else ""
        return [Claim("results summary", "", "", "not applicable",
                      f"not checked: {why}" + (f" ({detail})" if detail else ""))], "fallback"
    if section.fallback_note:
        return [Claim("results summary", "", "", "not applicable", section.fallback_note)], "fallback"
    note = f"the part wrote no {CLAIMS_FILE}; its summary below puts the paper's claims beside our numbers"
    return [Claim("results summary", "see summary", "see summary", "not applicable", note)], "fallback"


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


# ----------------------------------------------------------------------------------------------
# markdown: markdown-it-py (CommonMark + tables), raw HTML off, links limited to safe schemes
# ----------------------------------------------------------------------------------------------
#: link schemes a summary may use; anything else (javascript:, data:, file:, vbscript: ...) is not linked
SAFE_SCHEMES = ("http", "https", "mailto")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")


def safe_link(url: str) -> bool:
    """Whether ``url`` may be a link of the report: http(s), mailto, or relative (no scheme).

    Control characters and whitespace are removed before the scheme is read, as browsers do
    (``"java\\tscript:"`` is ``javascript:``).

    Examples
    --------
    >>> safe_link("https://x.org"), safe_link("fig.png"), safe_link("#top"), safe_link("JavaScript:alert(1)")
    (True, True, True, False)
    """
    cleaned = re.sub(r"[\x00-\x20\x7f]+", "", url)
    m = _SCHEME.match(cleaned)
    if m is None:
        return True
    return m.group(1).lower() in SAFE_SCHEMES


def _data_uri(path: Path) -> str | None:
    mime = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml"}
    kind = mime.get(path.suffix.lower())
    if kind is None or not path.is_file():
        return None
    return f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _figure(path: Path, caption: str, report_dir: Path | None, images: list[Path]) -> Markup:
    """An embedded figure (base64), or a marker naming the missing file."""
    uri = _data_uri(path)
    name = _relative(path, report_dir)
    if uri is None:
        return Markup('<span class="missing">[missing image {}]</span>').format(name)
    images.append(path.resolve())
    return Markup('<figure data-file="{}"><img alt="{}" src="{}"><figcaption>{}</figcaption></figure>').format(
        name, caption, uri, caption or path.name)


def _markdown(base: Path | None, shift: int, report_dir: Path | None, images: list[Path]) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
    md.validateLink = safe_link  # type: ignore[method-assign]  # markdown-it-py's documented hook: replace the method

    def heading_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].tag = f"h{min(6, int(tokens[idx].tag[1]) + shift)}"
        return str(self.renderToken(tokens, idx, options, env))

    def heading_close(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].tag = f"h{min(6, int(tokens[idx].tag[1]) + shift)}"
        return str(self.renderToken(tokens, idx, options, env))

    def table_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("class", "md")
        return '<div class="tablewrap">' + str(self.renderToken(tokens, idx, options, env))

    def table_close(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        return str(self.renderToken(tokens, idx, options, env)) + "</div>\n"

    def fence(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        return str(Markup("<pre><code>{}</code></pre>\n").format(tokens[idx].content.rstrip("\n")))

    def image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        src = str(token.attrGet("src") or "")
        alt = self.renderInlineAsText(token.children or [], options, env)
        if base is not None and not _SCHEME.match(src) and not src.startswith("//"):
            return str(_figure(base / src, alt, report_dir, images))
        # an external image would be fetched when the page opens: show a link instead
        return str(Markup('<a href="{}">{}</a>').format(src, alt or src))

    for name, rule in (("heading_open", heading_open), ("heading_close", heading_close),
                       ("table_open", table_open), ("table_close", table_close), ("fence", fence), ("code_block", fence), ("image", image)):
        md.add_render_rule(name, rule)
    return md


def markdown_to_html(text: str, *, base: Path | None = None, shift: int = 0,
                     report_dir: Path | None = None, images: list[Path] | None = None) -> str:
    """Render markdown (CommonMark and tables) safely; relative images are embedded as base64.

    Raw HTML in the text is shown as text, never interpreted; links and images keep only
    http(s), mailto and relative targets (a ``javascript:`` link is left as plain text).

    Parameters
    ----------
    text : str
        Markdown.
    base : Path or None
        Directory that relative image paths are resolved against.
    shift : int
        Added to every heading level (``# x`` becomes ``<h3>`` with ``shift=2``).
    report_dir : Path or None
        The report's directory; ``data-file`` attributes of figures are relative to it.
    images : list of Path or None
        If given, the embedded image files are appended to it.

    Examples
    --------
    >>> print(markdown_to_html("# T\\n\\n| a | b |\\n|---|---|\\n| 1 | **2** |", shift=1).replace("\\n", ""))
    <h2>T</h2><div class="tablewrap"><table class="md"><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td><strong>2</strong></td></tr></tbody></table></div>
    >>> markdown_to_html("[x](javascript:alert(1)) <b>")
    '<p>[x](javascript:alert(1)) &lt;b&gt;</p>\\n'
    """
    found: list[Path] = []
    out = str(_markdown(base, shift, report_dir, found).render(text))
    if images is not None:
        images.extend(found)
    return out


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232a;background:#fafbfc}
main{max-width:1180px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:1.7em;margin-bottom:.2em} h2{border-bottom:2px solid #d0d7de;padding-bottom:.2em;margin-top:2.2em}
h3{margin-top:1.6em} h4,h5,h6{margin-top:1.2em}
.meta{color:#57606a;font-size:.92em} .meta code{font-size:.95em}
table{border-collapse:collapse;margin:.8em 0;font-size:.88em;background:#fff}
.tablewrap{max-width:100%;overflow-x:auto} .tablewrap>table{margin:.4em 0}
table.claims{width:100%;table-layout:auto} table.claims td{overflow-wrap:anywhere}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f3f6} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.verdict{font-weight:600;white-space:nowrap}
.v-reproduced{color:#116329;background:#dafbe1} .v-not-reproduced{color:#a40e26;background:#ffebe9}
.v-not-applicable{color:#57606a;background:#eef1f4}
.status{display:inline-block;padding:1px 8px;border-radius:10px;font-size:.85em;font-weight:600}
.s-ok,.s-demo{background:#dafbe1;color:#116329} .s-failed{background:#ffebe9;color:#a40e26}
.s-missing-data,.s-not-available{background:#fff8c5;color:#7d4e00}
figure{display:inline-block;margin:8px 12px 12px 0;background:#fff;border:1px solid #d0d7de;padding:6px;
 max-width:100%;vertical-align:top} figure img{max-width:100%;height:auto;display:block}
figcaption{font-size:.8em;color:#57606a;margin-top:4px}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:.85em} code{background:#f0f3f6;padding:0 3px}
blockquote{border-left:4px solid #d0d7de;margin:0;padding:0 12px;color:#444}
nav ul{columns:2} .missing{color:#a40e26}
details{margin:.6em 0} summary{cursor:pointer;font-weight:600}
.ledger{border-left:3px solid #d0d7de;padding:2px 0 2px 12px;margin:1em 0}
.ledger h4{margin:.2em 0} .ledger p{margin:.3em 0} .ledger-total{font-weight:600}
.protects,.heights{color:#3d444d;font-size:.92em} .about{max-width:60em}
.error{white-space:pre-wrap;background:#ffebe9;padding:8px;font-size:.8em;max-height:240px;overflow:auto}
"""


# ----------------------------------------------------------------------------------------------
# page data -> Jinja2 template (autoescaped)
# ----------------------------------------------------------------------------------------------
_ENV: Environment | None = None


def _environment() -> Environment:
    global _ENV
    if _ENV is None:
        _ENV = Environment(loader=PackageLoader("privpub.experiments", "templates"),
                           autoescape=select_autoescape(default=True, default_for_string=True),
                           undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return _ENV


def _relative(path: Path, report_dir: Path | None) -> str:
    path = Path(path).resolve()
    if report_dir is not None:
        try:
            return path.relative_to(Path(report_dir).resolve()).as_posix()
        except ValueError:
            pass
    return path.as_posix()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:
            return ""
        return f"{value:.6g}"
    return str(value)


def _table(frame: pd.DataFrame, *, max_rows: int = MAX_TABLE_ROWS) -> dict[str, Any]:
    rows = [[{"text": _fmt(v), "num": isinstance(v, int | float) and not isinstance(v, bool)} for v in row]
            for row in frame.head(max_rows).itertuples(index=False)]
    return {"columns": [str(c) for c in frame.columns], "rows": rows, "total": len(frame),
            "truncated": len(frame) > max_rows, "max_rows": max_rows}


_OP_SYMBOL = {">=": "≥", "<=": "≤", ">": ">", "<": "<", "==": "="}


def _claims(claims: Sequence[Claim]) -> list[dict[str, str]]:
    out = []
    for c in claims:
        test = ""
        if c.tested:
            op, threshold = parse_rule(c.rule)
            test = f"{c.measured:.{MEASURED_DIGITS}g} {_OP_SYMBOL[op]} {threshold:g}"
        elif c.rule:
            test = f"untested (rule {c.rule})"
        out.append({"claim": c.claim, "paper": c.paper_value, "ours": c.our_value, "test": test,
                    "verdict": c.verdict, "slug": _slug(c.verdict), "cells": c.cells, "note": c.note})
    return out


_FIGURE_NUMBER = re.compile(r"fig(?:ure)?[ _.-]?(\d+)", flags=re.IGNORECASE)


def figure_order(path: Path) -> tuple[int, int, str]:
    """Sort key of a figure file: the paper's figure number in its name (``fig6_...`` before
    ``fig10_...``), then the name; files without a number come last.

    Examples
    --------
    >>> [p.name for p in sorted(map(Path, ["fig10_a.png", "ne.png", "fig6_b.png", "fig9.png"]), key=figure_order)]
    ['fig6_b.png', 'fig9.png', 'fig10_a.png', 'ne.png']
    """
    m = _FIGURE_NUMBER.search(path.name)
    return (0, int(m.group(1)), path.name) if m else (1, 0, path.name)


#: mechanisms that run on the users' devices (local DP): the oracles of privpub.ldp
LOCAL_MECHANISMS = frozenset({"GRR", "SUE", "OUE", "OLH", "RAPPOR"})


def _ledger_entry(row: dict[str, Any]) -> LedgerEntry:
    """A ledger entry from one row of a ledgers table (missing or blank newer columns allowed)."""
    clean = {k: v for k, v in row.items() if not (v is None or (isinstance(v, float) and v != v) or v == "")}
    for key in ("parts",):
        if key in clean:
            clean[key] = int(float(clean[key]))
    return LedgerEntry.from_dict(clean)


def protection_of(entries: Sequence[LedgerEntry], measure: str = "pure-dp") -> str:
    """What a release's ledger protects and how, in words, read from its entries.

    Local-DP oracles (:data:`LOCAL_MECHANISMS`) protect one user's value on the device; the
    central mechanisms protect the unit their entries state (one record unless the release was
    made per person or per event; one time step of a stream, for the stream trees) against a
    curator's release, with noise calibrated to the sensitivity the entries state. ``measure``:
    the ledger's (``"zcdp"``: the amounts are rho).

    Examples
    --------
    >>> from privpub.core import PrivacyUnit
    >>> e = LedgerEntry("counts", "laplace", 1.0, sensitivity=3.0, unit=PrivacyUnit.person("user", 3))
    >>> protection_of([e])[:80]
    "Central DP, unit: one person (all rows with the same 'user', at most 3 rows each"
    """
    if not entries:
        return ""
    units = list(dict.fromkeys(e.unit for e in entries))
    unit = units[0] if all(units[0].same_protection(u) for u in units) else None
    dp = "rho-zCDP" if measure == "zcdp" else "DP"
    mechanisms = list(dict.fromkeys(e.mechanism for e in entries))
    local = [e for e in entries if e.mechanism in LOCAL_MECHANISMS]
    if local and len(local) == len(entries):
        per_user = ledger_total(local)
        top = [e for e in local if e.composition != "parallel"]
        split = any(e.composition == "parallel" and e.branch for e in local) and len(local) > 1
        if len(top) > 1:
            how = (f"each user reports {len(top)} times on their own device ({', '.join(mechanisms)}), so the "
                   f"reports of one user add up to epsilon {per_user:.6g}")
        elif split:
            how = (f"the users are split into {len(local)} disjoint groups and each user sends one report, "
                   f"randomised on their own device ({', '.join(mechanisms)}), so each user is protected at "
                   f"epsilon {per_user:.6g}")
        else:
            how = (f"each user sends one report, randomised on their own device ({', '.join(mechanisms)}), "
                   f"at epsilon {per_user:.6g}")
        return ("Local DP, unit: one user. The server never sees a true value; any two values of one user "
                f"give the same report with probabilities within a factor e^epsilon: {how}.")
    sens = sorted({e.sensitivity for e in entries if e.sensitivity is not None})
    sens_text = ("L1 sensitivity " + ", ".join(f"{v:g}" for v in sens)) if sens else "its sensitivity"
    if unit is None:
        return (f"Central {dp}; its entries state different privacy units ({', '.join(map(str, units))}), which do "
                "not compose into one guarantee.")
    if unit.kind not in ("record", "event"):
        return (f"Central {dp}, unit: {unit.describe()}. Neighbouring datasets differ in one such unit; each "
                f"one's contributions were bounded before any noise, and the curator's steps use "
                f"{', '.join(mechanisms)} calibrated to the unit's {sens_text}.")
    if any("stream" in e.block for e in entries):
        return (f"Central {dp} at event level, unit: one time step. Neighbouring streams have the same length and "
                "differ at one time step by at most the sensitivity; each tree node's count gets "
                f"{', '.join(mechanisms)} noise calibrated to {sens_text}; a time step is counted in one node per "
                "level of its tree, and the trees cover disjoint stretches of the stream.")
    return (f"Central {dp}, unit: one record. Neighbouring datasets differ by adding or removing one record; "
            f"the curator's steps use {', '.join(mechanisms)} calibrated to {sens_text}.")


_HEIGHT = re.compile(r"height-(\d+)")


def heights_of(entries: Sequence[LedgerEntry]) -> str:
    """The tree heights a stream release used, read from its entries' branch kinds ("height-k trees").

    Examples
    --------
    >>> e = LedgerEntry("level 0", "discrete_laplace", 1.0, "parallel", 20, branch="height-1 trees (+19 more)")
    >>> heights_of([e])
    'tree heights chosen: 1 (20 trees)'
    """
    found: dict[int, int] = {}
    seen: set[tuple[str, str]] = set()
    for e in entries:
        m = _HEIGHT.search(e.branch)
        if m is None or (e.block, e.branch) in seen:
            continue
        seen.add((e.block, e.branch))
        found[int(m.group(1))] = found.get(int(m.group(1)), 0) + e.parts
    if not found:
        return ""
    return "tree heights chosen: " + ", ".join(f"{k} ({n} tree{'s' if n != 1 else ''})"
                                               for k, n in sorted(found.items()))


def _ledgers(frame: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for release, group in frame.groupby("release", sort=False):
        records: list[dict[str, Any]] = [{str(k): v for k, v in rec.items()} for rec in group.to_dict("records")]
        if "block" not in group.columns:
            # a ledgers.csv of an older privpub: a run of parallel entries of one step is one block
            # whose rows ran on disjoint parts (the only way the parts wrote parallel entries then)
            for i, r in enumerate(records):
                if r.get("composition") == "parallel":
                    r["block"], r["branch"] = str(r["step"]), f"row {i + 1}"
        entries = [_ledger_entry(r) for r in records]
        measure = str(group["measure"].iloc[0]) if "measure" in group.columns else "pure-dp"
        budget = None
        if "epsilon_total" in group.columns:
            value = pd.to_numeric(group["epsilon_total"], errors="coerce").iloc[0]
            budget = None if value != value else float(value)
        total = ledger_total(entries)
        parallel = any(e.composition == "parallel" for e in entries)
        cols = [c for c in ("step", "mechanism", "epsilon", "composition", "parts", "branch", "note")
                if c in group.columns and (parallel or c not in ("composition", "parts", "branch"))]
        out.append({"release": str(release), "budget": None if budget is None else _fmt(budget),
                    "symbol": "ρ" if measure == "zcdp" else "ε",
                    "total": _fmt(total), "explained": explain_entries(entries, budget),
                    "protects": protection_of(entries, measure), "heights": heights_of(entries),
                    "table": _table(group[cols].reset_index(drop=True), max_rows=200)})
    return out


def _csv_table(path: Path, out_dir: Path) -> dict[str, Any]:
    name = _relative(path, out_dir)
    try:
        frame = pd.read_csv(path)
    except Exception as exc:
        return {"name": name, "error": str(exc)}
    return {"name": name, "error": None, "n_rows": len(frame), "n_cols": frame.shape[1],
            "small": len(frame) <= MAX_TABLE_ROWS, "table": _table(frame)}


def _section(section: PartSection, report_dir: Path) -> dict[str, Any]:
    out_dir = Path(section.out_dir) if section.out_dir is not None else None
    claims, source = claims_of(section)
    data: dict[str, Any] = {
        "anchor": f"part-{_slug(section.part)}", "part": section.part, "title": section.title,
        "status": section.status, "status_slug": _slug(section.status),
        "duration": f"{section.duration:.1f} s" if section.duration is not None else None,
        "files": _relative(out_dir, report_dir) if out_dir is not None else None,
        "command": section.command, "message": section.message,
        "message_class": "error" if section.status == "failed" else "meta",
        "missing_datasets": list(section.missing_datasets),
        "claims": _claims(claims) if source == CLAIMS_FILE else [],
        "about": Markup(markdown_to_html(section.about, shift=2)) if section.about else None,
        "summary": None, "figures": [], "tables": [],
    }
    embedded: list[Path] = []
    summary = section.summary_path()
    if summary is not None:
        data["summary"] = {"name": summary.name, "html": Markup(markdown_to_html(
            summary.read_text(encoding="utf-8", errors="replace"), base=summary.parent, shift=2,
            report_dir=report_dir, images=embedded))}
    if out_dir is not None and out_dir.is_dir():
        done = set(embedded)
        figures: list[Path] = []
        data["figures"] = [_figure(p, _relative(p, out_dir), report_dir, figures)
                           for p in sorted(out_dir.rglob("*.png"), key=figure_order) if p.resolve() not in done]
        data["tables"] = [_csv_table(p, out_dir) for p in sorted(out_dir.rglob("*.csv"))
                          if p.name not in (CLAIMS_FILE, LEDGERS_FILE)]
    ledgers = None
    note = ""
    if out_dir is not None:
        try:
            ledgers = read_ledgers(out_dir)
            if ledgers is not None:
                note = f"from {LEDGERS_FILE}: the ledger of each kind of release this run made"
        except Exception as exc:
            note = f"{LEDGERS_FILE} could not be read: {exc}"
    if ledgers is None and section.ledgers is not None:
        ledgers = section.ledgers
        note = section.ledger_note or "representative releases"
    data["ledger_note"] = note
    data["ledgers"] = _ledgers(ledgers) if ledgers is not None and len(ledgers) else []
    return data


def _overview(sections: Sequence[PartSection], pages: Sequence[dict[str, Any]]
              ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """One row per part; verdicts count the claims of ``claims.csv`` files only (no placeholders)."""
    rows = []
    totals = dict.fromkeys(VERDICTS, 0)
    for s, page in zip(sections, pages):
        counts = dict.fromkeys(VERDICTS, 0)
        for c in page["claims"]:
            counts[c["verdict"]] += 1
            totals[c["verdict"]] += 1
        rows.append({"part": s.part, "anchor": f"part-{_slug(s.part)}", "title": s.title, "status": s.status,
                     "status_slug": _slug(s.status),
                     "duration": f"{s.duration:.1f} s" if s.duration is not None else "",
                     "counts": [counts[v] for v in VERDICTS], "n_ledgers": len(page["ledgers"]) or ""})
    return rows, totals


def build_report(
    sections: Iterable[PartSection],
    path: str | Path,
    *,
    title: str = "privpub reproduction report",
    intro: str = "",
    missing_datasets: Sequence[tuple[str, str, str]] = (),
    meta: dict[str, str] | None = None,
) -> Path:
    """Write the self-contained HTML report and ``claims_all.csv`` beside it.

    The page is rendered by a Jinja2 template with autoescaping; markdown (the summaries, the
    intro) by markdown-it-py with raw HTML disabled and links limited to :data:`SAFE_SCHEMES`
    and relative targets. Both files are written atomically.

    Parameters
    ----------
    sections : iterable of PartSection
        One per part, in display order.
    path : path-like
        The HTML file to write (parent directories are created).
    title, intro : str
        Page title and an introductory markdown paragraph.
    missing_datasets : sequence of (dataset, needed by, public source)
        Listed near the top.
    meta : dict or None
        Extra key/value lines shown under the title (command, mode, seed, data directory, ...).

    Returns
    -------
    Path
        The HTML file.
    """
    sections = list(sections)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    report_dir = path.parent
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    info = {"generated": now, "privpub": privpub.__version__, **(meta or {})}
    pages = [_section(s, report_dir) for s in sections]
    overview, totals = _overview(sections, pages)
    page = _environment().get_template("report.html.j2").render(
        title=title, meta={str(k): str(v) for k, v in info.items()},
        intro=Markup(markdown_to_html(intro, shift=1)) if intro else None,
        verdicts=VERDICTS, overview=overview, totals=[totals[v] for v in VERDICTS],
        any_claims=any(page["claims"] for page in pages),
        missing_datasets=list(missing_datasets),
        sections=pages,
        css=Markup(_CSS),
    )
    with atomic_output(path, force=True) as tmp:
        tmp.write_text(page, encoding="utf-8")
    _write_all_claims(sections, report_dir / "claims_all.csv")
    return path


def _write_all_claims(sections: Sequence[PartSection], path: Path) -> Path:
    rows: list[dict[str, str]] = []
    for s in sections:
        claims, source = claims_of(s)
        rows.extend({"part": s.part, "status": s.status, "claim": c.claim, "paper_value": c.paper_value,
                     "our_value": c.our_value,
                     "measured": "" if c.measured is None else f"{c.measured:.{MEASURED_DIGITS}g}",
                     "rule": c.rule, "verdict": c.verdict, "cells": c.cells, "note": c.note, "source": source}
                    for c in claims)
    frame = pd.DataFrame(rows, columns=["part", "status", "claim", "paper_value", "our_value", "measured", "rule",
                                        "verdict", "cells", "note", "source"])
    with atomic_output(path, force=True) as tmp:
        neutralise_frame(frame).to_csv(tmp, index=False)
    return path
