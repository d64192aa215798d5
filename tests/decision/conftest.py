"""Fixtures of the decision tests (helpers live in decision_helpers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decision_helpers import make_frame, make_schema

from privpub.core import Schema


@pytest.fixture
def schema() -> Schema:
    return make_schema()


@pytest.fixture
def frame() -> pd.DataFrame:
    return make_frame(300, 2, seed=1)
