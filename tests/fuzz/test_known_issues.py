"""Minimal reproducers of the defects the fuzzers found in code this suite may not edit.

Each fails today (a non-privpub exception or a silently wrong value); the test below fails once
one is fixed, as a reminder to delete the reproducer and the
matching entry of ``fuzz_strategies.KNOWN``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from privpub.errors import PrivpubError


def _raises_privpub(fn) -> None:
    with pytest.raises(PrivpubError):
        fn()


KNOWN_DEFECTS: list = [
]


def _finite_or_raise(est: np.ndarray) -> None:
    if not np.all(np.isfinite(est)):
        raise AssertionError("non-finite estimate")


def test_known_defects_still_fail() -> None:
    """Each reproducer still fails (a non-privpub exception or a wrong value); one that passes is a
    fixed defect whose reproducer (and ``fuzz_strategies.KNOWN`` entry) must now be deleted. An
    empty list runs and passes: nothing is known to be broken."""
    fixed = []
    for name, check in KNOWN_DEFECTS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                check()
        except Exception:  # still broken, as recorded
            continue
        fixed.append(name)
    assert not fixed, f"fixed: remove these reproducers: {fixed}"
