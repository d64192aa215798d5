"""``privpub demo``: every publisher on built-in data with known ground truth (no downloads)."""

from __future__ import annotations

import importlib
import time

import typer

from privpub.cli._common import handle_errors
from privpub.experiments._common import DemoRow

#: parts whose experiments module provides ``demo(rng) -> list[DemoRow]``, in display order
DEMO_PARTS = ("core", "histogram", "ldp_synth", "spatial", "decision", "stream")


def run_demo(seed: int = 0) -> list[DemoRow]:
    """Run every available part's demo with a fixed seed and return the rows."""
    rows: list[DemoRow] = []
    for part in DEMO_PARTS:
        try:
            module = importlib.import_module(f"privpub.experiments.{part}")
        except ModuleNotFoundError:
            continue
        demo = getattr(module, "demo", None)
        if demo is not None:
            rows.extend(demo(rng=seed))
    return rows


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    @app.command("demo")
    @handle_errors
    def demo(seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same output).")) -> None:
        """Run each publisher on built-in generated data and print its error against the truth."""
        start = time.perf_counter()
        rows = run_demo(seed)
        header = f"{'part':<10} {'method':<22} {'epsilon':>8} {'metric':<26} {'value':>12}"
        typer.echo(header)
        typer.echo("-" * len(header))
        for r in rows:
            typer.echo(f"{r.part:<10} {r.method:<22} {r.epsilon:>8g} {r.metric:<26} {r.value:>12.5g}")
        typer.echo(f"{len(rows)} runs in {time.perf_counter() - start:.1f} s (seed {seed})")
