"""Make the fake part outputs (report_fakes.py) importable from the report tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
