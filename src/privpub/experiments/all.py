"""``privpub reproduce all``: every part's reproduction in turn, then one HTML report.

Each available part (``privpub.experiments.<part>`` importable) runs its ``reproduce`` into
``<out>/<part>/``; a part whose datasets are missing or whose run fails is recorded and the
others still run. The report (``<out>/report.html``) is built by
:mod:`privpub.experiments._report` from the files each part wrote (contract in
:mod:`privpub.experiments._common`).
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from privpub.errors import DataNotFoundError, ParameterError
from privpub.experiments._common import claims_from_markdown, read_claims, resolve_data_dir, write_claims
from privpub.experiments._report import PartSection, build_report

__all__ = [
    "PARTS",
    "PART_PLANS",
    "PartPlan",
    "available_parts",
    "build_report_from_dir",
    "expected_duration",
    "missing_datasets",
    "representative_ledgers",
    "reproduce_all",
]

log = logging.getLogger(__name__)

#: the five parts, in report order
PARTS = ("histogram", "ldp_synth", "spatial", "decision", "stream")


@dataclass(frozen=True)
class PartPlan:
    """What ``reproduce all`` knows about a part before running it.

    ``quick_minutes`` / ``full_minutes`` are the expected wall-clock durations on the 2-core
    CI-class machine: the runs recorded in docs/results (histogram full 23 min, spatial 30 min,
    stream 28 min, all under a load average of about 10; decision and ldp_synth full runs are
    estimates) and the quick runs of ``reproduce all --quick`` (1-4 min each under that load).
    """

    part: str
    datasets: tuple[str, ...]
    quick_minutes: float
    full_minutes: float


#: the datasets each part reads (names of privpub.datasets) and its expected duration
PART_PLANS: dict[str, PartPlan] = {
    "histogram": PartPlan("histogram", (
        "nettrace", "search_logs", "social_network", "dpbench_1d/HEPTH", "dpbench_1d/ADULTFRANK",
        "dpbench_1d/NETTRACE", "dpbench_1d/SEARCHLOGS", "dpbench_1d/LC-REQ", "dpbench_1d/MD-SAL"), 1.5, 25),
    "ldp_synth": PartPlan("ldp_synth", ("nltcs", "adult"), 2, 60),
    "spatial": PartPlan("spatial", ("gowalla", "dpbench_2d/BJ-CABS-S"), 1, 30),
    "decision": PartPlan("decision", ("iris", "adult", "census_income_kdd"), 2, 30),
    "stream": PartPlan("stream", ("search_logs", "nettrace", "worldcup98"), 1.5, 30),
}

Runner = Callable[..., Any]


def _load_runner(part: str) -> Runner | None:
    """The part's ``reproduce`` function, or None when the part is not installed."""
    try:
        module = importlib.import_module(f"privpub.experiments.{part}")
    except ModuleNotFoundError as exc:
        if exc.name is not None and (exc.name == f"privpub.experiments.{part}" or
                                     exc.name == f"privpub.{part}"):
            return None
        raise
    return getattr(module, "reproduce", None)


def available_parts(parts: Iterable[str] | None = None) -> list[str]:
    """The parts (of ``parts``, default all) whose experiment runner is importable."""
    out = []
    for p in parts if parts is not None else PARTS:
        try:
            if _load_runner(p) is not None:
                out.append(p)
        except Exception:  # a broken part is still "available": its run will report the error
            out.append(p)
    return out


def expected_duration(parts: Sequence[str], *, quick: bool) -> float:
    """Expected total minutes of ``parts`` (see :data:`PART_PLANS`)."""
    plans = [PART_PLANS[p] for p in parts if p in PART_PLANS]
    return float(sum(p.quick_minutes if quick else p.full_minutes for p in plans))


def missing_datasets(parts: Sequence[str], data_dir: str | os.PathLike[str] | None = None
                     ) -> list[tuple[str, str, str]]:
    """``(dataset, needed by, public source)`` for every dataset of ``parts`` absent from the data dir.

    Examples
    --------
    >>> import tempfile
    >>> rows = missing_datasets(["decision"], data_dir=tempfile.mkdtemp())
    >>> [r[0] for r in rows]
    ['iris', 'adult', 'census_income_kdd']
    """
    from privpub.datasets import available, info

    present = set(available(resolve_data_dir(data_dir)))
    needed: dict[str, list[str]] = {}
    for p in parts:
        for name in PART_PLANS[p].datasets if p in PART_PLANS else ():
            needed.setdefault(name, []).append(p)
    rows = []
    for name, users in needed.items():
        if name not in present:
            try:
                source = info(name).source
            except ParameterError:
                source = "(not in the dataset registry)"
            rows.append((name, ", ".join(users), source))
    return rows


# ----------------------------------------------------------------------------------------------
# representative ledgers: one small release per method on generated data (public API only)
# ----------------------------------------------------------------------------------------------
def _ledgers_histogram(rng: int) -> dict[str, Any]:
    from privpub.datasets import zipf_histogram
    from privpub.histogram import AHP, HPHP, LaplaceHistogram

    counts = zipf_histogram(256, 20_000, 1.0, rng=rng)
    return {f"{type(p).__name__} eps=0.1": p.publish(counts, epsilon=0.1, rng=rng).ledger
            for p in (HPHP(), AHP(), LaplaceHistogram())}


def _ledgers_stream(rng: int) -> dict[str, Any]:
    from privpub.datasets import bursty_stream
    from privpub.stream import HQRTP, HQRTPMM, RTP, RTPMM

    items = bursty_stream(256, rng=rng)
    out = {}
    for cls in (RTP, RTPMM, HQRTP, HQRTPMM):
        pub = cls(window=64, epsilon=1.0, rng=rng)
        pub.extend(items)
        out[f"{cls.__name__} eps=1 (event-level), W=64"] = pub.ledger
    return out


def _ledgers_spatial(rng: int) -> dict[str, Any]:
    from privpub.datasets import clustered_points
    from privpub.spatial import GTR, KDGHT, RapporGrid, UniformGrid

    points = clustered_points(50_000, rng=rng).points
    return {f"{type(p).__name__} eps=0.5": p.publish(points, bounds=(0.0, 0.0, 1.0, 1.0), epsilon=0.5,
                                                      rng=rng).ledger
            for p in (KDGHT(), GTR(), UniformGrid(), RapporGrid())}


def _ledgers_decision(rng: int) -> dict[str, Any]:
    from privpub.datasets import iris
    from privpub.decision import MAXGDDP, DiffGen

    data = iris()
    return {f"{type(p).__name__} h=4 eps=1": p.publish(data.frame, schema=data.schema, epsilon=1.0,
                                                       rng=rng).ledger
            for p in (MAXGDDP(levels=4), DiffGen(levels=4))}


def _ledgers_ldp_synth(rng: int) -> dict[str, Any]:
    from privpub.datasets import bayesnet_table
    from privpub.ldp_synth import LDPBayesSynthesizer

    table = bayesnet_table(5_000, rng=rng)
    release = LDPBayesSynthesizer(degree=2).publish(table.frame, schema=table.schema, epsilon=4.0, rng=rng)
    return {"LDPBayesSynthesizer k=2 eps=4": release.ledger}


_LEDGER_MAKERS: dict[str, Callable[[int], dict[str, Any]]] = {
    "histogram": _ledgers_histogram,
    "stream": _ledgers_stream,
    "spatial": _ledgers_spatial,
    "decision": _ledgers_decision,
    "ldp_synth": _ledgers_ldp_synth,
}


def representative_ledgers(part: str, rng: int = 0) -> tuple[pd.DataFrame | None, str]:
    """Ledgers of one small release per method of ``part`` on generated data, and a note.

    Used by the report when a part's output has no ``ledgers.csv``. Returns ``(None, reason)``
    when the part is not installed or its publishers fail.
    """
    maker = _LEDGER_MAKERS.get(part)
    if maker is None:
        return None, "this part has no publisher with a ledger"
    try:
        ledgers = maker(rng)
    except Exception as exc:
        return None, f"representative releases failed: {type(exc).__name__}: {exc}"
    frames = []
    for name, ledger in ledgers.items():
        frame = ledger.to_frame()
        frame.insert(0, "epsilon_total", ledger.epsilon)
        frame.insert(0, "release", name)
        frames.append(frame)
    note = ("representative releases on generated data (the part's run did not record ledgers.csv); "
            "each method spends its budget the same way at every epsilon")
    return pd.concat(frames, ignore_index=True), note


# ----------------------------------------------------------------------------------------------
# the run
# ----------------------------------------------------------------------------------------------
def _progress(parts: list[str], enabled: bool) -> Any:
    if not enabled:
        return parts
    from tqdm.auto import tqdm

    return tqdm(parts, desc="reproduce all", unit="part")


def _call(runner: Runner, out_dir: Path, *, quick: bool, data_dir: Any, rng: int, progress: bool) -> Any:
    kwargs: dict[str, Any] = {"quick": quick, "data_dir": data_dir, "rng": rng}
    try:
        names = set(inspect.signature(runner).parameters)
    except (TypeError, ValueError):
        names = set()
    if progress and "progress" in names:
        kwargs["progress"] = True
    return runner(out_dir, **kwargs)


def reproduce_all(
    out_dir: str | os.PathLike[str],
    *,
    quick: bool = False,
    data_dir: str | os.PathLike[str] | None = None,
    rng: int = 0,
    parts: Sequence[str] | None = None,
    progress: bool = True,
    echo: Callable[[str], None] | None = None,
) -> Path:
    """Run every available part's reproduction into ``out_dir/<part>`` and write the HTML report.

    Parameters
    ----------
    out_dir : path-like
        Output directory; each part writes into ``out_dir/<part>/`` and the report is
        ``out_dir/report.html`` (with ``claims_all.csv`` beside it).
    quick : bool
        Each part's ``--quick`` mode (about 1-2 minutes per part; under 10 minutes in all).
    data_dir : path-like or None
        Data directory (default ``$PRIVPUB_DATA``).
    rng : int
        Seed passed to each part.
    parts : sequence of str or None
        Subset of :data:`PARTS` (default all).
    progress : bool
        Show a tqdm progress bar over the parts (and the parts' own bars where they offer them).
    echo : callable or None
        Receives one-line messages (expected duration, missing datasets, per-part outcome).

    Returns
    -------
    Path
        The HTML report.

    Raises
    ------
    ParameterError
        If ``parts`` names an unknown part.
    """
    say = echo or (lambda msg: log.info("%s", msg))
    chosen = list(PARTS if parts is None else parts)
    unknown = [p for p in chosen if p not in PARTS]
    if unknown:
        raise ParameterError(f"parts must be a subset of {list(PARTS)}, got {unknown}", param="parts")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = resolve_data_dir(data_dir)
    installed = available_parts(chosen)
    not_installed = [p for p in chosen if p not in installed]
    minutes = expected_duration(installed, quick=quick)
    say(f"reproducing {len(installed)} part(s) ({', '.join(installed) or 'none'}) in "
        f"{'quick' if quick else 'full'} mode; expected duration about {minutes:g} min on a 2-core machine")
    if not_installed:
        say(f"not installed, skipped: {', '.join(not_installed)}")
    missing = missing_datasets(installed, data)
    if missing:
        say(f"missing datasets ({len(missing)}), the experiments needing them are skipped:")
        for name, users, source in missing:
            say(f"  {name} (needed by {users}): {source}")
    sections: dict[str, PartSection] = {}
    for part in not_installed:
        sections[part] = PartSection(part, status="not available",
                                     message=f"privpub.experiments.{part} is not installed")
    interrupted = False
    try:
        for part in _progress(installed, progress):
            section = run_part(part, out / part, quick=quick, data_dir=data, rng=rng, progress=progress,
                               missing=missing)
            sections[part] = section
            say(f"{part}: {section.status} in {section.duration or 0:.1f} s"
                + (f" ({section.message.strip().splitlines()[-1]})" if section.status != "ok" and section.message
                   else ""))
    except KeyboardInterrupt:
        interrupted = True
        say("interrupted: writing the report of the parts that finished")
    for part in chosen:
        sections.setdefault(part, PartSection(part, status="failed", message="not run: interrupted by the user"))
    ordered = [sections[p] for p in chosen]
    report = build_report(
        ordered, out / "report.html",
        title="privpub: reproduction of the five papers" + (" (quick mode)" if quick else ""),
        intro=_INTRO,
        missing_datasets=missing,
        meta={"command": "privpub reproduce all" + (" --quick" if quick else ""),
              "seed": str(rng), "data directory": str(data) if data else "(none: $PRIVPUB_DATA unset)",
              "total time": f"{sum(s.duration or 0 for s in ordered):.0f} s"},
    )
    say(f"report: {report}")
    if interrupted:
        raise KeyboardInterrupt
    return report


_INTRO = (
    "Each section below is one paper: the paper's claims beside our measurements with a verdict "
    "(**reproduced**, **not reproduced**, **not applicable**), the figures and tables of the run, and "
    "the budget ledger of every kind of release. Numbers come from privpub's private "
    "implementations; where a paper's method is not differentially private, its section says so."
)


def run_part(part: str, out_dir: Path, *, quick: bool, data_dir: Path | None, rng: int, progress: bool,
             missing: Sequence[tuple[str, str, str]] = ()) -> PartSection:
    """Run one part's reproduction and describe the outcome (never raises for the part's errors)."""
    command = f"privpub reproduce {part}" + (" --quick" if quick else "")
    part_missing = [(n, s) for n, users, s in missing if part in users.split(", ")]
    start = time.perf_counter()
    status, message, summary = "ok", "", None
    try:
        runner = _load_runner(part)
        if runner is None:
            status, message = "not available", f"privpub.experiments.{part} has no reproduce()"
        else:
            out_dir.mkdir(parents=True, exist_ok=True)
            result = _call(runner, out_dir, quick=quick, data_dir=data_dir, rng=rng, progress=progress)
            if isinstance(result, str | os.PathLike) and Path(result).is_file():
                summary = Path(result)
                if read_claims(out_dir) is None:  # a part without claims.csv: its summary's claim table
                    derived = claims_from_markdown(summary.read_text(encoding="utf-8"))
                    if derived:
                        write_claims(out_dir, derived)
    except DataNotFoundError as exc:
        status, message = "missing data", str(exc)
    except Exception as exc:
        status = "failed"
        message = "".join(traceback.format_exception(exc, limit=-6)).strip()
        log.warning("reproduce %s failed: %s", part, exc)
    duration = time.perf_counter() - start
    plan = PART_PLANS.get(part)
    if status == "ok" and plan is not None and plan.datasets and len(part_missing) == len(plan.datasets):
        status, message = "missing data", "every dataset of this part is missing; nothing was reproduced"
    ledgers, note = (None, "")
    if not (out_dir / "ledgers.csv").is_file() and status != "not available":
        ledgers, note = representative_ledgers(part, rng)
    return PartSection(part, out_dir=out_dir, status=status, duration=duration, message=message,
                       summary=summary, missing_datasets=part_missing, ledgers=ledgers, ledger_note=note,
                       command=command)


def build_report_from_dir(out_dir: str | os.PathLike[str], *, parts: Sequence[str] | None = None,
                          ledgers: bool = True) -> Path:
    """Rebuild ``out_dir/report.html`` from part directories already there (no experiments run).

    Useful after running parts one at a time (``privpub reproduce histogram --out R/histogram``).
    """
    out = Path(out_dir)
    chosen = [p for p in (parts or PARTS) if (out / p).is_dir()]
    if not chosen:
        raise DataNotFoundError(f"no part directories ({', '.join(PARTS)}) found in {str(out)!r}")
    sections = []
    for p in chosen:
        table, note = representative_ledgers(p) if ledgers and not (out / p / "ledgers.csv").is_file() \
            else (None, "")
        sections.append(PartSection(p, out_dir=out / p, ledgers=table, ledger_note=note,
                                    command=f"privpub reproduce {p}"))
    return build_report(sections, out / "report.html", title="privpub: reproduction of the five papers",
                        intro=_INTRO, meta={"command": f"privpub report {out}"})
