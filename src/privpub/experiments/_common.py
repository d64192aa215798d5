"""Shared pieces of the experiment runners."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DemoRow", "default_out_dir", "resolve_data_dir"]


@dataclass(frozen=True)
class DemoRow:
    """One line of ``privpub demo``: a method run on built-in data with known ground truth."""

    part: str
    method: str
    epsilon: float
    metric: str
    value: float
    note: str = ""


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The data directory: the argument, else ``$PRIVPUB_DATA``, else None."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get("PRIVPUB_DATA")
    return Path(env) if env else None


def default_out_dir(part: str) -> Path:
    """Where ``privpub reproduce <part>`` writes by default: ``./privpub-results/<part>``."""
    return Path("privpub-results") / part
