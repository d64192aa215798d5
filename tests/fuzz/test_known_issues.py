"""Minimal reproducers of the defects the fuzzers found in code this suite may not edit.

Each is a strict xfail: it fails today (a non-privpub exception or a silently wrong value) and
will XPASS -- failing the suite -- once fixed, as a reminder to delete the reproducer and the
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


@pytest.mark.parametrize(("name", "check"), KNOWN_DEFECTS, ids=[n.split(":")[0] + f"[{i}]" for i, (n, _) in
                                                               enumerate(KNOWN_DEFECTS)])
@pytest.mark.xfail(strict=True, reason="known defect outside tests/fuzz (reported); remove when fixed")
def test_known_defect(name: str, check) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        check()
