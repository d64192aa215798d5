"""Core checks behind issue 21's hostile inputs: peak-memory checks, the epsilon warning, sessions, splits."""

from __future__ import annotations

import re
import warnings

import pytest

from privpub.core import (
    MEANINGFUL_EPSILON,
    Accountant,
    accounting,
    check_session,
    check_working_set,
    discrete_laplace,
    split,
    warn_meaningless_epsilon,
)
from privpub.errors import ParameterError, PrivacyWarning


def test_check_working_set_counts_the_whole_peak() -> None:
    assert check_working_set(10**6, 100, "X.publish", "the bins", fixed=5, budget=10**8 + 5) == 10**8 + 5
    msg = ("X.publish on 10^6 bins would need about 100.0 MB at its peak (100 bytes per bin), over the memory "
           "budget of 99.0 MB; lower the bins (or raise PRIVPUB_MEMORY_BUDGET)")
    with pytest.raises(ParameterError, match=re.escape(msg)):
        check_working_set(10**6, 100, "X.publish", "the bins", unit="bins", budget=99 * 10**6)
    with pytest.raises(ParameterError, match="must be >= 0"):
        check_working_set(float("nan"), 1, "X", "n")


def test_epsilon_warning_starts_above_the_threshold() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        warn_meaningless_epsilon(MEANINGFUL_EPSILON)  # at the threshold: silent
    with pytest.warns(PrivacyWarning, match=r"epsilon=30\.5 is above 30"):
        warn_meaningless_epsilon(30.5)


def test_a_release_warns_once_and_a_nested_one_not_again() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with accounting(100.0, method="x") as acc:
            discrete_laplace([1, 2], epsilon=100.0, rng=0)
            acc.seal()
        with Accountant(1e3), accounting(100.0, method="inner") as acc:  # a release used as a step
            discrete_laplace([1, 2], epsilon=100.0, rng=0)
            acc.seal()
    assert [str(w.message)[:22] for w in caught] == ["epsilon=100 is above 3"]
    assert caught[0].filename == __file__


def test_session_must_be_a_session() -> None:
    assert check_session(None) is None
    for bad in ("s", 1.0, {"total_epsilon": 1.0}):
        with pytest.raises(ParameterError, match=re.escape("session must be a privpub.Session or None")):
            check_session(bad)
        with pytest.raises(ParameterError, match="session must be"), accounting(1.0, method="x", session=bad):
            pass


def test_split_refuses_parts_that_underflow() -> None:
    with pytest.raises(ParameterError, match="epsilon must be large enough to split into 2 parts"):
        split(5e-324, [1, 1])
    assert split(1e-300, [1, 1]) == (5e-301, 5e-301)
