"""Timing shared by the benchmark scripts (run as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def median_run(
    fn: Callable[[], Any], repeats: int, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, Any]:
    """Call ``fn`` ``repeats`` times; return the median duration (by ``clock``) and the last result."""
    times, out = [], None
    for _ in range(max(1, repeats)):
        start = clock()
        out = fn()
        times.append(clock() - start)
    return statistics.median(times), out


def median_time(fn: Callable[[], Any], repeats: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """The median duration of ``repeats`` calls of ``fn``."""
    return median_run(fn, repeats, clock)[0]


def emit(text: str, markdown: Path | None) -> None:
    """Print a benchmark's markdown report and, if a path is given, also write it there."""
    print(text)
    if markdown is not None:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(text)
