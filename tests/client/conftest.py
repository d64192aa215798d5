"""The client tests run against a real ``privpub serve`` (the service tests' helpers)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
