"""``privpub demo``: every publisher on built-in data with known ground truth (no downloads).

Prints one line per run (method, epsilon, error against the truth) and writes the same HTML
report as ``privpub reproduce all`` (``--out``, default ``./privpub-results/demo``).
"""

from __future__ import annotations

import importlib
import inspect
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from privpub._io import neutralise_frame
from privpub.cli._common import check_out_dir, handle_errors
from privpub.experiments import DemoRow

#: parts whose experiments module provides ``demo(rng) -> list[DemoRow]``, in display order
DEMO_PARTS = ("core", "histogram", "ldp_synth", "spatial", "decision", "stream")

#: where ``privpub demo`` writes its report by default
DEFAULT_DEMO_OUT = Path("privpub-results") / "demo"


@dataclass
class DemoRun:
    """Rows of every part that ran, plus the parts that failed or are not installed."""

    rows: list[DemoRow] = field(default_factory=list)
    durations: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def _demo_function(part: str) -> Callable[..., Any] | None:
    try:
        module = importlib.import_module(f"privpub.experiments.{part}")
    except ModuleNotFoundError as exc:
        if exc.name in (f"privpub.experiments.{part}", f"privpub.{part}"):
            return None
        raise
    return getattr(module, "demo", None)


def _about(part: str) -> str:
    """What a part's demo ran (its ``demo`` docstring) and any ``demo_about()`` notes, as markdown."""
    try:
        module = importlib.import_module(f"privpub.experiments.{part}")
    except ModuleNotFoundError:
        return ""
    demo = getattr(module, "demo", None)
    doc = inspect.getdoc(demo) or ""
    text = "\n\n".join(p for p in doc.split("\n\n") if not p.lstrip().startswith(("Examples", "Parameters", ">>>")))
    about = getattr(module, "demo_about", None)
    extra = about() if callable(about) else ""
    return "\n\n".join(t for t in (text, extra) if t)


def run_demo(seed: int = 0) -> list[DemoRow]:
    """Run every available part's demo with a fixed seed and return the rows."""
    rows: list[DemoRow] = []
    for part in DEMO_PARTS:
        demo = _demo_function(part)
        if demo is not None:
            rows.extend(demo(rng=seed))
    return rows


def run_demo_parts(seed: int = 0, parts: tuple[str, ...] = DEMO_PARTS) -> DemoRun:
    """Like :func:`run_demo`, but a failing part is recorded and the others still run."""
    run = DemoRun()
    for part in parts:
        start = time.perf_counter()
        try:
            demo = _demo_function(part)
            if demo is None:
                run.missing.append(part)
                continue
            run.rows.extend(demo(rng=seed))
        except Exception as exc:
            run.errors[part] = "".join(traceback.format_exception(exc, limit=-4)).strip()
        finally:
            run.durations[part] = time.perf_counter() - start
    return run


def _plot_part(rows: list[DemoRow], path: Path) -> Path:
    from matplotlib.figure import Figure

    metrics = list(dict.fromkeys(r.metric for r in rows))
    height = max(2.2, 0.32 * max(sum(r.metric == m for r in rows) for m in metrics) + 1.2)
    fig = Figure(figsize=(5.2 * len(metrics), height), layout="constrained")
    for k, metric in enumerate(metrics):
        ax = fig.add_subplot(1, len(metrics), k + 1)
        sub = [r for r in rows if r.metric == metric]
        labels = [f"{r.method}, ε={r.epsilon:g}" for r in sub]
        values = [r.value for r in sub]
        ax.barh(range(len(sub)), values, color="#4c72b0")
        ax.set_yticks(range(len(sub)), labels, fontsize=8)
        ax.invert_yaxis()
        positive = [v for v in values if v > 0]
        if positive and min(positive) > 0 and max(positive) / min(positive) > 100 and len(positive) == len(values):
            ax.set_xscale("log")
        ax.set_xlabel(metric, fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"privpub demo: {rows[0].part}", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def write_demo_report(run: DemoRun, out_dir: Path | str, *, seed: int = 0, ledgers: bool = True) -> Path:
    """Write each part's rows (``<out>/<part>/demo.csv``), a plot, ledgers and ``report.html``."""
    from privpub.experiments import PartSection, build_report, write_ledgers
    from privpub.experiments.all import representative_ledgers

    out = Path(out_dir)
    sections = []
    for part in DEMO_PARTS:
        rows = [r for r in run.rows if r.part == part]
        part_dir = out / part
        if part in run.missing:
            sections.append(PartSection(part, status="not available",
                                        message=f"privpub.experiments.{part} is not installed"))
            continue
        if part in run.errors:
            sections.append(PartSection(part, status="failed", message=run.errors[part],
                                        duration=run.durations.get(part)))
            continue
        if not rows:
            continue
        part_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("claims.csv", "ledgers.csv"):
            (part_dir / stale).unlink(missing_ok=True)
        neutralise_frame(pd.DataFrame([{"method": r.method, "epsilon": r.epsilon, "metric": r.metric,
                                        "value": r.value, "note": r.note} for r in rows])).to_csv(
            part_dir / "demo.csv", index=False)
        _plot_part(rows, part_dir / "demo.png")
        own = {f"{r.method} eps={r.epsilon:g}": r.ledger for r in rows if r.ledger is not None}
        table, note = None, ""
        if own:
            write_ledgers(part_dir, own)
        elif ledgers:
            table, note = representative_ledgers(part, seed)
            note = note.replace("the part's run did not record ledgers.csv", "the demo rows carry no ledger")
        sections.append(PartSection(
            part, out_dir=part_dir, status="demo", duration=run.durations.get(part),
            about=_about(part), ledgers=table, ledger_note=note, command=f"privpub demo --seed {seed}",
        ))
    return build_report(
        sections, out / "report.html", title="privpub demo",
        intro="Every publisher on built-in generated data with known ground truth (no downloads). "
              "Errors are measured against the truth the generator knows. Each part lists the ledger of "
              "every release it made: what it spent, how the total composes, and what it protects. The "
              "papers' claims are checked on the real datasets by `privpub reproduce all`.",
        meta={"command": f"privpub demo --seed {seed}", "seed": str(seed),
              "total time": f"{sum(run.durations.values()):.0f} s"},
    )


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    @app.command("demo")
    @handle_errors
    def demo(
        seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same output)."),
        out: Annotated[Path, typer.Option(
            "--out", "-o", help="Directory of the HTML report and its files.")] = DEFAULT_DEMO_OUT,
        report: bool = typer.Option(True, "--report/--no-report", help="Write the HTML report."),
    ) -> None:
        """Run each publisher on built-in generated data and print its error against the truth."""
        if report:
            check_out_dir(out)
        start = time.perf_counter()
        run = run_demo_parts(seed)
        header = f"{'part':<10} {'method':<22} {'epsilon':>8} {'metric':<26} {'value':>12}"
        typer.echo(header)
        typer.echo("-" * len(header))
        for r in run.rows:
            typer.echo(f"{r.part:<10} {r.method:<22} {r.epsilon:>8g} {r.metric:<26} {r.value:>12.5g}")
        for part, err in run.errors.items():
            typer.echo(f"{part:<10} FAILED: {err.strip().splitlines()[-1]}", err=True)
        typer.echo(f"{len(run.rows)} runs in {time.perf_counter() - start:.1f} s (seed {seed})")
        if report:
            path = write_demo_report(run, out, seed=seed)
            typer.echo(f"report: {path}")
        if run.errors:
            raise typer.Exit(code=1)
