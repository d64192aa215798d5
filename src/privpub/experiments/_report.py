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
import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import privpub
from privpub.experiments._common import (
    CLAIMS_FILE,
    LEDGERS_FILE,
    VERDICTS,
    Claim,
    read_claims,
    read_ledgers,
)

__all__ = ["PART_TITLES", "PartSection", "build_report", "claims_of", "markdown_to_html"]

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
# markdown (a small, safe subset: headings, paragraphs, lists, tables, code, quotes, images)
# ----------------------------------------------------------------------------------------------
_IMG = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)([^*]+?)\*(?![\w*])")
_CODE = re.compile(r"`([^`]+)`")


def _data_uri(path: Path) -> str | None:
    mime = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml"}
    kind = mime.get(path.suffix.lower())
    if kind is None or not path.is_file():
        return None
    return f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


class _Inline:
    """Inline markdown rendering relative to a base directory (images become data URIs)."""

    def __init__(self, base: Path | None, report_dir: Path | None) -> None:
        self.base = base
        self.report_dir = report_dir
        self.images: list[Path] = []

    def figure(self, path: Path, caption: str) -> str:
        uri = _data_uri(path)
        name = html.escape(_relative(path, self.report_dir))
        if uri is None:
            return f'<span class="missing">[missing image {name}]</span>'
        self.images.append(path.resolve())
        return (f'<figure data-file="{name}"><img alt="{html.escape(caption)}" src="{uri}">'
                f"<figcaption>{html.escape(caption or path.name)}</figcaption></figure>")

    def __call__(self, text: str) -> str:
        codes: list[str] = []

        def keep_code(m: re.Match[str]) -> str:
            codes.append(f"<code>{html.escape(m.group(1))}</code>")
            return f"\x00{len(codes) - 1}\x00"

        text = _CODE.sub(keep_code, text)
        images: list[str] = []

        def image(m: re.Match[str]) -> str:
            alt, src = m.group(1), m.group(2)
            if self.base is not None and not re.match(r"^[a-z]+:", src):
                images.append(self.figure(self.base / src, alt))
            else:
                images.append(f'<a href="{html.escape(src)}">{html.escape(alt or src)}</a>')
            return f"\x01{len(images) - 1}\x01"

        text = _IMG.sub(image, text)
        text = html.escape(text, quote=False)
        text = _LINK.sub(lambda m: f'<a href="{html.escape(m.group(2))}">{m.group(1)}</a>', text)
        text = _BOLD.sub(r"<strong>\1</strong>", text)
        text = _ITALIC.sub(r"<em>\1</em>", text)
        text = re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], text)
        return re.sub("\x01(\\d+)\x01", lambda m: images[int(m.group(1))], text)


def _split_row(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    cells = re.split(r"(?<!\\)\|", line)
    return [c.strip().replace("\\|", "|") for c in cells]


def markdown_to_html(text: str, *, base: Path | None = None, shift: int = 0,
                     report_dir: Path | None = None, images: list[Path] | None = None) -> str:
    """Render the markdown subset the summaries use; relative images are embedded as base64.

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
    >>> markdown_to_html("# T\\n\\n| a | b |\\n|---|---|\\n| 1 | **2** |", shift=1)
    '<h2>T</h2>\\n<table class="md"><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td><strong>2</strong></td></tr></tbody></table>'
    """
    inline = _Inline(base, report_dir)
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    i = 0
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append(f"<p>{inline(' '.join(s.strip() for s in para))}</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            block = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                block.append(lines[i])
                i += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(block))}</code></pre>")
            i += 1
            continue
        if not stripped:
            flush()
            i += 1
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", stripped)
        if m:
            flush()
            level = min(6, len(m.group(1)) + shift)
            out.append(f"<h{level}>{inline(m.group(2))}</h{level}>")
            i += 1
            continue
        if re.fullmatch(r"(-{3,}|\*{3,}|_{3,})", stripped):
            flush()
            out.append("<hr>")
            i += 1
            continue
        if stripped.startswith("|") and i + 1 < len(lines) and re.fullmatch(
                r"\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?", lines[i + 1].strip()):
            flush()
            head = _split_row(stripped)
            i += 2
            body = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                body.append(_split_row(lines[i]))
                i += 1
            thead = "".join(f"<th>{inline(c)}</th>" for c in head)
            rows = "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in body)
            out.append(f'<table class="md"><thead><tr>{thead}</tr></thead><tbody>{rows}</tbody></table>')
            continue
        if stripped.startswith(">"):
            flush()
            quote = []
            while i < len(lines) and lines[i].strip().startswith(">"):
                quote.append(lines[i].strip()[1:].strip())
                i += 1
            out.append(f"<blockquote>{markdown_to_html(chr(10).join(quote), base=base, report_dir=report_dir, images=images)}</blockquote>")
            continue
        lm = re.match(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$", line)
        if lm:
            flush()
            ordered = lm.group(2)[0].isdigit()
            items: list[str] = []
            while i < len(lines):
                cur = lines[i]
                lm2 = re.match(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$", cur)
                if lm2 and (lm2.group(2)[0].isdigit()) == ordered:
                    items.append(lm2.group(3).strip())
                elif cur.strip() and (cur.startswith("  ") or cur.startswith("\t")) and items:
                    items[-1] += " " + cur.strip()
                else:
                    break
                i += 1
            tag = "ol" if ordered else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{inline(it)}</li>" for it in items) + f"</{tag}>")
            continue
        para.append(line)
        i += 1
    flush()
    if images is not None:
        images.extend(inline.images)
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------
# HTML pieces
# ----------------------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232a;background:#fafbfc}
main{max-width:1180px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:1.7em;margin-bottom:.2em} h2{border-bottom:2px solid #d0d7de;padding-bottom:.2em;margin-top:2.2em}
h3{margin-top:1.6em} h4,h5,h6{margin-top:1.2em}
.meta{color:#57606a;font-size:.92em} .meta code{font-size:.95em}
table{border-collapse:collapse;margin:.8em 0;font-size:.88em;background:#fff}
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
.error{white-space:pre-wrap;background:#ffebe9;padding:8px;font-size:.8em;max-height:240px;overflow:auto}
"""


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


def _frame_html(frame: pd.DataFrame, *, max_rows: int = MAX_TABLE_ROWS) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.head(max_rows).itertuples(index=False):
        cells = []
        for v in row:
            cls = ' class="num"' if isinstance(v, int | float) and not isinstance(v, bool) else ""
            cells.append(f"<td{cls}>{html.escape(_fmt(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    extra = ""
    if len(frame) > max_rows:
        extra = f'<p class="meta">first {max_rows} of {len(frame)} rows</p>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{extra}"


def _claims_html(claims: Sequence[Claim], part: str) -> str:
    rows = []
    for c in claims:
        v = c.verdict
        rows.append(
            f'<tr class="claim" data-part="{html.escape(part)}"><td>{html.escape(c.claim)}</td>'
            f"<td>{html.escape(c.paper_value)}</td><td>{html.escape(c.our_value)}</td>"
            f'<td class="verdict v-{_slug(v)}">{html.escape(v)}</td><td>{html.escape(c.note)}</td></tr>'
        )
    return ('<table class="claims"><thead><tr><th>claim</th><th>paper</th><th>ours</th><th>verdict</th>'
            f"<th>note</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _ledgers_html(frame: pd.DataFrame) -> str:
    parts = []
    for release, group in frame.groupby("release", sort=False):
        eps = pd.to_numeric(group["epsilon"], errors="coerce")
        budget = ""
        if "epsilon_total" in group.columns:
            budget = f"budget ε = {_fmt(float(pd.to_numeric(group['epsilon_total']).iloc[0]))}, "
        cols = [c for c in ("step", "mechanism", "epsilon", "composition", "parts", "note") if c in group.columns]
        parts.append(f"<h4>{html.escape(str(release))}</h4><p class=\"meta\">{budget}spent "
                     f"{_fmt(float(eps.sum()))} (sequential sum of the steps)</p>"
                     + _frame_html(group[cols].reset_index(drop=True), max_rows=200))
    return "".join(parts)


def _section_html(section: PartSection, report_dir: Path) -> str:
    out_dir = Path(section.out_dir) if section.out_dir is not None else None
    anchor = f"part-{_slug(section.part)}"
    status = section.status
    lines = [f'<section id="{anchor}" data-part="{html.escape(section.part)}">',
             f"<h2>{html.escape(section.title)}</h2>"]
    meta = [f'<span class="status s-{_slug(status)}">{html.escape(status)}</span>']
    if section.duration is not None:
        meta.append(f"{section.duration:.1f} s")
    if out_dir is not None:
        meta.append(f"files: <code>{html.escape(_relative(out_dir, report_dir))}</code>")
    if section.command:
        meta.append(f"command: <code>{html.escape(section.command)}</code>")
    lines.append(f'<p class="meta">{" · ".join(meta)}</p>')
    if section.message:
        cls = "error" if status == "failed" else "meta"
        lines.append(f'<div class="{cls}">{html.escape(section.message)}</div>')
    if section.missing_datasets:
        items = "".join(f"<li><code>{html.escape(n)}</code>: {html.escape(s)}</li>"
                        for n, s in section.missing_datasets)
        lines.append(f"<p>Missing datasets (the rest still ran):</p><ul>{items}</ul>")

    claims, source = claims_of(section)
    lines.append("<h3>Claims</h3>")
    if source != CLAIMS_FILE:
        lines.append(f'<p class="meta">No <code>{CLAIMS_FILE}</code> from this part.</p>')
    lines.append(_claims_html(claims, section.part))

    embedded: list[Path] = []
    summary = section.summary_path()
    if summary is not None:
        lines.append(f"<h3>Summary <span class=\"meta\">({html.escape(summary.name)})</span></h3>")
        lines.append('<div class="summary">' + markdown_to_html(
            summary.read_text(encoding="utf-8"), base=summary.parent, shift=2, report_dir=report_dir,
            images=embedded) + "</div>")

    if out_dir is not None and out_dir.is_dir():
        done = set(embedded)
        pngs = [p for p in sorted(out_dir.rglob("*.png")) if p.resolve() not in done]
        if pngs:
            lines.append("<h3>Figures</h3>")
            inline = _Inline(out_dir, report_dir)
            lines.append("".join(inline.figure(p, _relative(p, out_dir)) for p in pngs))
        csvs = [p for p in sorted(out_dir.rglob("*.csv")) if p.name not in (CLAIMS_FILE, LEDGERS_FILE)]
        if csvs:
            lines.append("<h3>Tables</h3>")
            for p in csvs:
                lines.append(_csv_html(p, out_dir))

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
    lines.append("<h3>Budget ledgers</h3>")
    if ledgers is not None and len(ledgers):
        lines.append(f'<p class="meta">{html.escape(note)}</p>')
        lines.append(_ledgers_html(ledgers))
    else:
        lines.append(f'<p class="meta">No ledgers recorded{": " + html.escape(note) if note else ""}.</p>')
    lines.append("</section>")
    return "\n".join(lines)


def _csv_html(path: Path, out_dir: Path) -> str:
    name = html.escape(_relative(path, out_dir))
    try:
        frame = pd.read_csv(path)
    except Exception as exc:
        return f'<p class="meta"><code>{name}</code>: unreadable ({html.escape(str(exc))})</p>'
    if len(frame) <= MAX_TABLE_ROWS:
        return f"<details open><summary>{name} ({len(frame)} rows)</summary>{_frame_html(frame)}</details>"
    return (f"<details><summary>{name} ({len(frame)} rows × {frame.shape[1]} columns; first "
            f"{MAX_TABLE_ROWS} shown)</summary>{_frame_html(frame)}</details>")


def _overview_html(sections: Sequence[PartSection]) -> str:
    rows = []
    totals = dict.fromkeys(VERDICTS, 0)
    for s in sections:
        claims, _ = claims_of(s)
        counts = dict.fromkeys(VERDICTS, 0)
        for c in claims:
            counts[c.verdict] += 1
            totals[c.verdict] += 1
        dur = f"{s.duration:.1f} s" if s.duration is not None else ""
        rows.append(
            f'<tr><td><a href="#part-{_slug(s.part)}">{html.escape(s.part)}</a></td><td>{html.escape(s.title)}</td>'
            f'<td><span class="status s-{_slug(s.status)}">{html.escape(s.status)}</span></td>'
            f'<td class="num">{dur}</td>'
            + "".join(f'<td class="num">{counts[v]}</td>' for v in VERDICTS) + "</tr>"
        )
    head = "".join(f"<th>{v}</th>" for v in VERDICTS)
    foot = ('<tr><th colspan="4">all parts</th>' + "".join(f'<th class="num">{totals[v]}</th>' for v in VERDICTS)
            + "</tr>")
    return (f"<table class=\"overview\"><thead><tr><th>part</th><th>system</th><th>status</th><th>time</th>"
            f"{head}</tr></thead><tbody>{''.join(rows)}{foot}</tbody></table>")


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
    meta_html = " · ".join(f"{html.escape(k)}: <code>{html.escape(str(v))}</code>" for k, v in info.items())
    body = [f"<h1>{html.escape(title)}</h1>", f'<p class="meta">{meta_html}</p>']
    if intro:
        body.append(markdown_to_html(intro, shift=1))
    body.append("<h2 id=\"overview\">Overview</h2>")
    body.append(_overview_html(sections))
    if missing_datasets:
        rows = "".join(f"<tr><td><code>{html.escape(n)}</code></td><td>{html.escape(p)}</td>"
                       f"<td>{html.escape(s)}</td></tr>" for n, p, s in missing_datasets)
        body.append("<h3 id=\"missing-datasets\">Missing datasets</h3><p>These files were not found in the "
                    "data directory; the experiments that need them were skipped and everything else ran. "
                    "Put the files in the data directory (<code>--data-dir</code> or "
                    "<code>$PRIVPUB_DATA</code>, see <code>privpub datasets list</code>) and rerun.</p>"
                    f"<table><thead><tr><th>dataset</th><th>needed by</th><th>public source</th></tr></thead>"
                    f"<tbody>{rows}</tbody></table>")
    nav = "".join(f'<li><a href="#part-{_slug(s.part)}">{html.escape(s.title)}</a></li>' for s in sections)
    body.append(f"<nav><ul>{nav}</ul></nav>")
    body.extend(_section_html(s, report_dir) for s in sections)
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>"
            f"<body><main>{''.join(body)}</main></body></html>\n")
    path.write_text(page, encoding="utf-8")
    _write_all_claims(sections, report_dir / "claims_all.csv")
    return path


def _write_all_claims(sections: Sequence[PartSection], path: Path) -> Path:
    rows: list[dict[str, str]] = []
    for s in sections:
        claims, source = claims_of(s)
        rows.extend({"part": s.part, "status": s.status, "claim": c.claim, "paper_value": c.paper_value,
                     "our_value": c.our_value, "verdict": c.verdict, "note": c.note, "source": source}
                    for c in claims)
    pd.DataFrame(rows, columns=["part", "status", "claim", "paper_value", "our_value", "verdict", "note",
                                "source"]).to_csv(path, index=False)
    return path
