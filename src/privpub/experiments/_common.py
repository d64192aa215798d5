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
    ``claim, paper_value, our_value, verdict, note``; ``verdict`` is one of :data:`VERDICTS`
    (``reproduced``, ``not reproduced``, ``not applicable``). When the file is absent the report
    shows the markdown summary and a single row ``results summary`` with verdict
    ``not applicable``.
``ledgers.csv`` (optional; written with :func:`write_ledgers`)
    The budget ledger of each kind of release the part made: columns ``release, epsilon_total,
    step, mechanism, epsilon, composition, parts, note`` (one row per ledger entry; ``release``
    names the release, e.g. ``"HPHP eps=0.1"``). When absent, the report shows the ledger of a
    representative release of each method on generated data, marked as such.

``demo(rng=0) -> list[DemoRow]`` runs the part on built-in generated data with known truth in
under 15 s; a :class:`DemoRow` may carry the ``ledger`` of its release for the demo report.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privpub._io import neutralise_cell, restore_cell, restore_frame
from privpub.core import BudgetLedger
from privpub.errors import ParameterError

__all__ = [
    "CLAIMS_FILE",
    "LEDGERS_FILE",
    "VERDICTS",
    "Claim",
    "DemoRow",
    "default_out_dir",
    "read_claims",
    "read_ledgers",
    "resolve_data_dir",
    "write_claims",
    "write_ledgers",
]

#: file name of a part's claims table inside its output directory
CLAIMS_FILE = "claims.csv"
#: file name of a part's ledgers table inside its output directory
LEDGERS_FILE = "ledgers.csv"
#: the allowed verdicts of a claim
VERDICTS = ("reproduced", "not reproduced", "not applicable")

_CLAIM_COLUMNS = ("claim", "paper_value", "our_value", "verdict", "note")
_LEDGER_COLUMNS = ("release", "epsilon_total", "step", "mechanism", "epsilon", "composition", "parts", "note")


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


@dataclass(frozen=True)
class Claim:
    """One claim of a paper beside our measurement, with a verdict.

    Parameters
    ----------
    claim : str
        The claim in words, e.g. ``"HPHP's KLD is about 10% of AHP's (nettrace, eps=0.1)"``.
    paper_value, our_value : str
        The paper's number (or ``""``) and ours, as displayed.
    verdict : {"reproduced", "not reproduced", "not applicable"}
        ``"not applicable"`` when the claim cannot be tested here (data missing, non-private).
    note : str
        Why, in one sentence (required in spirit when the verdict is not ``"reproduced"``).

    Examples
    --------
    >>> Claim("HPHP beats DP", "yes", "yes at 12/12 settings", "reproduced").verdict
    'reproduced'
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

    def __post_init__(self) -> None:
        if not isinstance(self.claim, str) or not self.claim.strip():
            raise ParameterError(f"claim must be a non-empty string, got {self.claim!r}")
        verdict = self.verdict.strip().lower() if isinstance(self.verdict, str) else self.verdict
        if verdict not in VERDICTS:
            raise ParameterError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        object.__setattr__(self, "verdict", verdict)
        for name in ("paper_value", "our_value", "note"):
            object.__setattr__(self, name, _text(getattr(self, name)))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value)


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
            raise ParameterError(f"claims must be Claim objects, got {type(c).__name__}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / CLAIMS_FILE
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(_CLAIM_COLUMNS)
        for c in rows:
            writer.writerow([neutralise_cell(v) for v in (c.claim, c.paper_value, c.our_value, c.verdict, c.note)])
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
            )
            for row in reader
        ]


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
                writer.writerow([neutralise_cell(v) for v in (name, repr(ledger.epsilon), e.step, e.mechanism,
                                                              repr(e.epsilon), e.composition, e.parts, e.note)])
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
    return restore_frame(frame)


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

