"""Shared pieces of the experiment runners, and the contract between the parts and the report.

The contract of a part's output directory
-----------------------------------------
``privpub reproduce <part>`` calls ``privpub.experiments.<part>.reproduce(out_dir, *, quick,
data_dir, rng)``, which writes into ``out_dir`` and returns the path of its markdown summary.
The combined report (``privpub reproduce all``, ``privpub report DIR``) reads these files from
each part's directory (``<out>/<part>/``):

``*.md``
    The markdown summary returned by ``reproduce`` (``summary.md`` by convention). Embedded in
    the report; images it links to (``![caption](fig.png)``) are embedded as base64.
``*.png``
    Figures. Every PNG in the directory is embedded in the report (base64, no external file).
``*.csv``
    Result tables. Small ones (<= 60 rows) are shown in full, larger ones are listed with their
    size (the report names the file; open it for the rest).
``claims.csv`` (optional; written with :func:`write_claims`)
    The paper's claims beside our numbers, one row per claim, columns
    ``claim, paper_value, our_value, measured, rule, verdict, cells, note``; ``verdict`` is one
    of :data:`VERDICTS` (``reproduced``, ``not reproduced``, ``not applicable``) and, for a
    tested claim, follows from the row's own ``measured`` number and ``rule`` (:meth:`Claim.test`);
    ``cells`` names what was counted. An untestable claim says why in ``note``. When the file is
    absent the report shows the markdown summary and a single row ``results summary`` with
    verdict ``not applicable``.
``ledgers.csv`` (optional; written with :func:`write_ledgers`)
    The budget ledger of each kind of release the part made: columns ``release, epsilon_total,
    step, mechanism, epsilon, composition, parts, note, sensitivity, block, branch`` (one row per ledger entry; ``release``
    names the release, e.g. ``"HPHP eps=0.1"``; ``sensitivity, block, branch`` as in
    :class:`~privpub.core.LedgerEntry`: the parallel block and branch kind a charge belongs to, from
    which the report composes the total). When absent, the report shows the ledger of a
    representative release of each method on generated data, marked as such.

``demo(rng=0) -> list[DemoRow]`` runs the part on built-in generated data with known truth in
under 15 s; a :class:`DemoRow` may carry the ``ledger`` of its release for the demo report.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privpub._io import neutralise_cell, restore_cell, restore_frame
from privpub.core import BudgetLedger
from privpub.errors import ParameterError

__all__ = [
    "CLAIMS_FILE",
    "LEDGERS_FILE",
    "RULE_OPS",
    "VERDICTS",
    "Claim",
    "DemoRow",
    "claims_markdown",
    "default_out_dir",
    "parse_rule",
    "read_claims",
    "read_ledgers",
    "resolve_data_dir",
    "rule_verdict",
    "save_figure",
    "shown",
    "write_claims",
    "write_ledgers",
]

#: file name of a part's claims table inside its output directory
CLAIMS_FILE = "claims.csv"
#: file name of a part's ledgers table inside its output directory
LEDGERS_FILE = "ledgers.csv"
#: the allowed verdicts of a claim
VERDICTS = ("reproduced", "not reproduced", "not applicable")

_CLAIM_COLUMNS = ("claim", "paper_value", "our_value", "measured", "rule", "verdict", "cells", "note")
#: ``measure``: the ledger's (pure-dp, or zcdp: then ``epsilon_total`` and ``epsilon`` are rho);
#: ``unit``: whom each charge protects, as JSON (``PrivacyUnit.as_dict``); older files lack both
_LEDGER_COLUMNS = ("release", "epsilon_total", "step", "mechanism", "epsilon", "composition", "parts", "note",
                   "sensitivity", "block", "branch", "measure", "unit")


@dataclass(frozen=True)
class DemoRow:
    """One line of ``privpub demo``: a method run on built-in data with known ground truth.

    ``ledger`` (optional) is the budget ledger of the release behind the row; the demo report
    shows it.
    """

    part: str
    method: str
    epsilon: float
    metric: str
    value: float
    note: str = ""
    ledger: BudgetLedger | None = field(default=None, compare=False, repr=False)


#: comparison operators a claim's rule may use
RULE_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
}
#: significant digits a claim's measured number is shown (and tested) with
MEASURED_DIGITS = 4


def shown(value: float, digits: int = MEASURED_DIGITS) -> float:
    """``value`` as the report shows it: rounded to ``digits`` significant digits, never ``-0.0``.

    Verdicts are computed from the shown number; a part that displays fewer digits rounds the
    number it passes (a difference shown as ``-0.0`` points is passed as ``round(d, 1)``, which
    is zero).

    Examples
    --------
    >>> shown(round(-0.04, 1)), shown(0.92592), shown(1234.56)
    (0.0, 0.9259, 1235.0)
    """
    out = float(f"{float(value):.{digits}g}")
    return 0.0 if out == 0 else out


def parse_rule(rule: str) -> tuple[str, float]:
    """``">= 0.9"`` -> ``(">=", 0.9)``; raises ParameterError for anything else."""
    parts = str(rule).split()
    if len(parts) != 2 or parts[0] not in RULE_OPS:
        raise ParameterError(f"rule must be '<op> <number>' with op in {list(RULE_OPS)}, got {rule!r}", param="rule")
    try:
        return parts[0], float(parts[1])
    except ValueError:
        raise ParameterError(f"rule must end with a number, got {rule!r}", param="rule") from None


def rule_verdict(measured: float, rule: str) -> str:
    """The verdict a rule gives the shown ``measured`` number.

    Examples
    --------
    >>> rule_verdict(25 / 27, ">= 0.9"), rule_verdict(round(-0.04, 1), ">= 0")
    ('reproduced', 'reproduced')
    """
    op, threshold = parse_rule(rule)
    return "reproduced" if RULE_OPS[op](shown(measured), threshold) else "not reproduced"


@dataclass(frozen=True)
class Claim:
    """One claim of a paper beside our measurement, with a verdict computed from it.

    A testable claim carries the number its verdict is computed from (``measured``, rounded as
    shown), the rule (``rule``, e.g. ``">= 0.9"``: reproduced iff ``measured >= 0.9``) and the
    cells it counted (``cells``, in words). Build it with :meth:`test`, which computes the
    verdict; a claim with a rule and a verdict that does not follow from it is refused. A claim
    that cannot be tested here has verdict ``"not applicable"``, no number, and says why in
    ``note``.

    Parameters
    ----------
    claim : str
        The claim in words, e.g. ``"HPHP's KLD is about 10% of AHP's (nettrace, eps=0.1)"``.
    paper_value, our_value : str
        The paper's number or statement, and ours, as displayed.
    verdict : {"reproduced", "not reproduced", "not applicable"}
    note : str
        Remarks; required for ``"not applicable"`` (why the claim cannot be tested).
    measured : float or None
        The number the verdict is computed from (shown with 4 significant digits).
    rule : str
        ``"<op> <threshold>"`` with op in :data:`RULE_OPS`.
    cells : str
        Which cells (datasets, epsilons, sizes ...) were counted, and where the claim fails.

    Examples
    --------
    >>> c = Claim.test("HPHP beats DP", "all settings", "25 of 27 cells", 25 / 27, ">= 0.9",
    ...                cells="9 datasets x 3 epsilons; fails at nettrace eps=0.01, HEPTH eps=1")
    >>> c.verdict, c.measured
    ('reproduced', 0.9259)
    >>> Claim("x", "", "", "maybe")
    Traceback (most recent call last):
    ...
    privpub.errors.ParameterError: verdict must be one of ('reproduced', 'not reproduced', 'not applicable'), got 'maybe'
    """

    claim: str
    paper_value: str = ""
    our_value: str = ""
    verdict: str = "not applicable"
    note: str = ""
    measured: float | None = None
    rule: str = ""
    cells: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.claim, str) or not self.claim.strip():
            raise ParameterError(f"claim must be a non-empty string, got {self.claim!r}", param="claim")
        verdict = self.verdict.strip().lower() if isinstance(self.verdict, str) else self.verdict
        if verdict not in VERDICTS:
            raise ParameterError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}", param="verdict")
        object.__setattr__(self, "verdict", verdict)
        for name in ("paper_value", "our_value", "note", "rule", "cells"):
            object.__setattr__(self, name, _text(getattr(self, name)))
        if self.measured is not None and not (isinstance(self.measured, float) and math.isnan(self.measured)):
            object.__setattr__(self, "measured", shown(self.measured))
        else:
            object.__setattr__(self, "measured", None)
        if self.rule:
            parse_rule(self.rule)
            if self.measured is None:
                if verdict != "not applicable":
                    raise ParameterError(f"claim {self.claim!r} has a rule but no measured number")
            elif verdict != rule_verdict(self.measured, self.rule):
                raise ParameterError(f"claim {self.claim!r}: verdict {verdict!r} does not follow from "
                                     f"{self.measured:g} {self.rule}")

    @property
    def tested(self) -> bool:
        """Whether the verdict is computed from a number and a rule."""
        return self.measured is not None and bool(self.rule)

    @classmethod
    def test(cls, claim: str, paper_value: str, our_value: str, measured: float | None, rule: str, *,
             cells: str, note: str = "", untestable: str = "") -> Claim:
        """A claim whose verdict is ``rule`` applied to ``measured`` (as shown).

        ``measured`` None (or NaN) gives ``"not applicable"`` with ``untestable`` (or ``note``)
        as the reason, which is then required.
        """
        if measured is None or (isinstance(measured, float) and not math.isfinite(measured)):
            why = untestable or note
            if not why:
                raise ParameterError(f"claim {claim!r} has no measured number: say why in untestable=")
            return cls(claim, paper_value, our_value, "not applicable", why, None, rule, cells)
        return cls(claim, paper_value, our_value, rule_verdict(measured, rule), note, measured, rule, cells)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def claims_markdown(claims: Iterable[Claim]) -> str:
    """The claims as a markdown table (claim, paper, ours, test, verdict, counted), for a summary.

    Examples
    --------
    >>> print(claims_markdown([Claim.test("A beats B", "yes", "3 of 4", 0.75, ">= 0.9", cells="4 datasets")]))
    | claim | paper | ours | test | verdict | counted |
    |---|---|---|---|---|---|
    | A beats B | yes | 3 of 4 | 0.75 >= 0.9 | not reproduced | 4 datasets |
    """
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| claim | paper | ours | test | verdict | counted |", "|---|---|---|---|---|---|"]
    for c in claims:
        test = f"{c.measured:.{MEASURED_DIGITS}g} {c.rule}" if c.tested else (c.note or "not tested")
        lines.append("| " + " | ".join(cell(v) for v in (c.claim, c.paper_value, c.our_value, test, c.verdict,
                                                           c.cells)) + " |")
    return "\n".join(lines)


def write_claims(out_dir: str | os.PathLike[str], claims: Iterable[Claim]) -> Path:
    """Write ``claims.csv`` into ``out_dir`` (created if needed) and return its path.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> p = write_claims(d, [Claim("a", "1", "2", "not reproduced", "too small")])
    >>> read_claims(d)[0].our_value
    '2'
    """
    rows = list(claims)
    for c in rows:
        if not isinstance(c, Claim):
            raise ParameterError(f"claims must be Claim objects, got {type(c).__name__}", param="claims")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / CLAIMS_FILE
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(_CLAIM_COLUMNS)
        for c in rows:
            measured = "" if c.measured is None else f"{c.measured:.{MEASURED_DIGITS}g}"
            writer.writerow([neutralise_cell(v) for v in (c.claim, c.paper_value, c.our_value, measured, c.rule,
                                                          c.verdict, c.cells, c.note)])
    return path


def read_claims(out_dir: str | os.PathLike[str]) -> list[Claim] | None:
    """The claims of a part's output directory, or None when it has no ``claims.csv``.

    Raises
    ------
    ParameterError
        If the file lacks a column or a row has an unknown verdict.
    """
    path = Path(out_dir) / CLAIMS_FILE
    if not path.is_file():
        return None
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ("claim", "verdict") if c not in (reader.fieldnames or ())]
        if missing:
            raise ParameterError(f"{path} must have the columns {list(_CLAIM_COLUMNS)}, missing {missing}")
        return [
            Claim(
                claim=restore_cell(row.get("claim") or ""),
                paper_value=restore_cell(row.get("paper_value") or ""),
                our_value=restore_cell(row.get("our_value") or ""),
                verdict=restore_cell(row.get("verdict") or ""),
                note=restore_cell(row.get("note") or ""),
                measured=_number(restore_cell(row.get("measured") or "")),
                rule=restore_cell(row.get("rule") or ""),
                cells=restore_cell(row.get("cells") or ""),
            )
            for row in reader
        ]


def _number(text: str) -> float | None:
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise ParameterError(f"a claim's measured value must be a number, got {text!r}") from None


def write_ledgers(out_dir: str | os.PathLike[str], ledgers: Mapping[str, BudgetLedger]) -> Path:
    """Write ``ledgers.csv``: every entry of each named ledger (``{"HPHP eps=0.1": ledger}``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / LEDGERS_FILE
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(_LEDGER_COLUMNS)
        for name, ledger in ledgers.items():
            if not isinstance(ledger, BudgetLedger):
                raise ParameterError(f"ledgers[{name!r}] must be a BudgetLedger, got {type(ledger).__name__}")
            for e in ledger:
                sens = "" if e.sensitivity is None else repr(e.sensitivity)
                unit = json.dumps(e.unit.as_dict(), sort_keys=True, separators=(",", ":"))
                writer.writerow([neutralise_cell(v) for v in (name, repr(ledger.epsilon), e.step, e.mechanism,
                                                              repr(e.epsilon), e.composition, e.parts, e.note,
                                                              sens, e.block, e.branch, ledger.measure, unit)])
    return path


def read_ledgers(out_dir: str | os.PathLike[str]) -> Any:
    """The ledgers of a part's output directory as a DataFrame, or None without ``ledgers.csv``."""
    path = Path(out_dir) / LEDGERS_FILE
    if not path.is_file():
        return None
    import pandas as pd

    frame = pd.read_csv(path, keep_default_na=False)
    missing = [c for c in ("release", "step", "mechanism", "epsilon") if c not in frame.columns]
    if missing:
        raise ParameterError(f"{path} must have the columns {list(_LEDGER_COLUMNS)}, missing {missing}")
    frame = restore_frame(frame)
    if "unit" in frame.columns:  # JSON in the file, a record (as BudgetLedger.to_frame) in the frame
        frame["unit"] = pd.Series([_unit_record(path, v) for v in frame["unit"]], index=frame.index, dtype=object)
    return frame


def _unit_record(path: Path, text: Any) -> dict[str, Any] | None:
    """One ``unit`` cell of ``ledgers.csv`` as a record (blank: None, one record)."""
    if text is None or text == "":
        return None
    try:
        record = json.loads(str(text))
    except ValueError:
        record = None
    if not isinstance(record, dict):
        raise ParameterError(f"{path}: a ledger row's unit must be a JSON object, got {str(text)[:80]!r}",
                             param="unit")
    return record


def save_figure(fig: Any, path: str | os.PathLike[str], *, legend: bool = True, ncol: int | None = None,
                dpi: int = 110) -> Path:
    """Save a figure with one legend for all its axes *below* them, never over the data.

    The entries of every axes' legend (and labelled artists) are gathered, duplicates dropped,
    the axes' own legends removed, and one figure legend placed under the plots; the saved
    image is cropped to include it. The figure is closed.

    Examples
    --------
    >>> import tempfile, matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> _ = ax.plot([0, 1], [0, 1], label="a"); _ = ax.legend()
    >>> save_figure(fig, Path(tempfile.mkdtemp()) / "f.png").is_file()
    True
    """
    handles: list[Any] = []
    labels: list[str] = []
    for ax in fig.axes:
        h, lab = ax.get_legend_handles_labels()
        for hh, ll in zip(h, lab):
            if ll not in labels and not ll.startswith("_"):
                handles.append(hh)
                labels.append(ll)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.tight_layout()
    if legend and labels:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), frameon=False,
                   ncol=ncol or min(len(labels), 6), fontsize=8)
    out = Path(path)
    fig.savefig(out, dpi=dpi, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return out


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The data directory: the argument, else ``$PRIVPUB_DATA``, else None."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get("PRIVPUB_DATA")
    return Path(env) if env else None


def default_out_dir(part: str) -> Path:
    """Where ``privpub reproduce <part>`` writes by default: ``./privpub-results/<part>``."""
    return Path("privpub-results") / part


_VERDICT_WORDS = {
    "reproduced": "reproduced", "holds": "reproduced", "yes": "reproduced", "confirmed": "reproduced",
    "not reproduced": "not reproduced", "fails": "not reproduced", "no": "not reproduced",
    "does not hold": "not reproduced",
}


def claims_from_markdown(text: str) -> list[Claim]:
    r"""Claims from a summary's markdown table whose header is ``| claim | ... | verdict |``.

    Verdict words map to the three verdicts ("holds" -> reproduced, "fails" -> not reproduced);
    anything else becomes "not applicable" with the original wording kept in the note.

    Examples
    --------
    >>> md = "| claim | measured | verdict |\n|---|---|---|\n| A beats B | 3x | holds |\n| C | - | see text |"
    >>> [(c.claim, c.verdict) for c in claims_from_markdown(md)]
    [('A beats B', 'reproduced'), ('C', 'not applicable')]
    """
    claims: list[Claim] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        cells = [c.strip().lower() for c in lines[i].strip().strip("|").split("|")]
        if lines[i].lstrip().startswith("|") and cells and cells[0] == "claim" and cells[-1] == "verdict":
            i += 2  # header and separator
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                row = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if len(row) >= 2:
                    word = row[-1].strip("* ").lower()
                    verdict = _VERDICT_WORDS.get(word, "not applicable")
                    our = " | ".join(row[1:-1])
                    note = "" if word in _VERDICT_WORDS else f"summary says: {row[-1]}"
                    claims.append(Claim(row[0], "", our, verdict, note))
                i += 1
        i += 1
    return claims

