"""Experiment runners: the no-download demo and the papers' reproductions (outside the kernels).

Each part has a module ``privpub.experiments.<part>`` with ``demo(rng) -> list[DemoRow]`` and
``reproduce(out_dir, *, quick, data_dir, rng) -> Path`` (the markdown summary it wrote).
"""

from __future__ import annotations

from privpub.experiments._common import DemoRow, default_out_dir, write_ledgers
from privpub.experiments._report import PartSection, build_report

__all__ = ["DemoRow", "PartSection", "build_report", "default_out_dir", "write_ledgers"]
