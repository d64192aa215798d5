"""Budget sessions: one budget across releases, in memory, in a file shared by processes."""

from __future__ import annotations

import json
import multiprocessing as mp
import re
from pathlib import Path

import numpy as np
import pytest

import privpub
from privpub import Session
from privpub.core import FileSessionStore
from privpub.errors import BudgetExceededError, ParameterError
from privpub.histogram import HPHP, LaplaceHistogram, OptimalGrouping

COUNTS = np.array([30, 0, 12, 7, 7, 55, 3, 0])


def test_session_is_public_at_the_top_level() -> None:
    assert privpub.Session is Session


def test_fifty_releases_of_the_same_counts_cannot_all_be_made() -> None:
    """The averaging attack of issue 12: a session caps the total, and refuses the rest."""
    session = Session(total_epsilon=5.0)
    made = []
    for i in range(50):
        try:
            made.append(HPHP().publish(COUNTS, epsilon=1.0, rng=i, session=session))
        except BudgetExceededError as exc:
            assert "the session cannot pay for hphp at epsilon=1" in str(exc)
            assert "nothing was published" in str(exc)
    assert len(made) == 5
    assert session.spent == pytest.approx(5.0) and session.remaining == 0.0
    assert [c.status for c in session.charges] == ["spent"] * 5
    assert all(c.method == "hphp" and c.data == "ndarray of shape (8,)" for c in session.charges)


def test_refused_release_draws_nothing() -> None:
    session = Session(total_epsilon=1.0)
    LaplaceHistogram().publish(COUNTS, epsilon=0.9, rng=0, session=session)
    gen = np.random.default_rng(3)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        LaplaceHistogram().publish(COUNTS, epsilon=0.2, rng=gen, session=session)
    assert gen.bit_generator.state == state
    assert len(session.charges) == 1


def test_invalid_data_returns_the_reservation() -> None:
    session = Session(total_epsilon=1.0)
    with pytest.raises(privpub.DomainError):
        LaplaceHistogram().publish([1, -2], epsilon=0.5, session=session)
    assert session.spent == 0.0  # validation fails before the reservation is made


def test_non_private_reference_refused_under_session() -> None:
    with pytest.raises(ParameterError, match="not differentially private"):
        OptimalGrouping().publish(COUNTS, epsilon=0.5, session=Session(total_epsilon=10.0))


def test_labels_and_spent_on() -> None:
    session = Session(total_epsilon=3.0)
    LaplaceHistogram().publish(COUNTS, epsilon=1.0, rng=0, session=session.on("census 2026"))
    LaplaceHistogram().publish(COUNTS, epsilon=0.5, rng=0, session=session.on("census 2026"))
    HPHP().publish(COUNTS, epsilon=0.5, rng=0, session=session.on("survey"))
    assert session.spent_on() == {"census 2026 (ndarray of shape (8,))": 1.5, "survey (ndarray of shape (8,))": 0.5}
    frame = session.to_frame()
    assert list(frame["method"]) == ["laplace", "laplace", "hphp"]
    assert "remaining 1" in str(session)


def test_can_pay_and_validation() -> None:
    session = Session(total_epsilon=1.0)
    assert session.can_pay(1.0) and not session.can_pay(1.01)
    with pytest.raises(ParameterError, match="total_epsilon must be given"):
        Session()
    with pytest.raises(ParameterError, match=re.escape("total_epsilon must be finite and > 0, got -1.0")):
        Session(total_epsilon=-1.0)


def test_file_session_persists_and_refuses_a_new_total(tmp_path: Path) -> None:
    path = tmp_path / "budget.json"
    s1 = Session.open(path, total_epsilon=2.0)
    LaplaceHistogram().publish(COUNTS, epsilon=1.5, rng=0, session=s1)
    s2 = Session.open(path)  # reopened by another run: the record is there
    assert s2.spent == pytest.approx(1.5) and s2.total_epsilon == 2.0
    with pytest.raises(BudgetExceededError):
        LaplaceHistogram().publish(COUNTS, epsilon=1.0, rng=0, session=s2)
    with pytest.raises(ParameterError, match="cannot be reopened with total_epsilon=9"):
        Session.open(path, total_epsilon=9.0)
    payload = json.loads(path.read_text())
    assert payload["format"] == "privpub-session" and len(payload["charges"]) == 1


def test_file_session_errors(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="does not exist; give total_epsilon"):
        Session.open(tmp_path / "missing.json")
    with pytest.raises(ParameterError, match="is a directory"):
        Session.open(tmp_path, total_epsilon=1.0)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ParameterError, match="is not a privpub session file"):
        Session.open(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ParameterError, match="is not a privpub session file"):
        Session.open(other)


def _reserve_in_child(path: str, results: mp.Queue) -> None:  # type: ignore[type-arg]
    store = FileSessionStore(path)
    ok = 0
    for _ in range(4):
        try:
            store.reserve(0.1, method="m", data="d")
            ok += 1
        except BudgetExceededError:
            pass
    results.put(ok)


def test_file_session_cannot_be_overspent_by_concurrent_processes(tmp_path: Path) -> None:
    """Eight processes each try four reservations of 0.1 against a total of 1.0: exactly 10 pass."""
    path = tmp_path / "budget.json"
    FileSessionStore(path, 1.0)
    ctx = mp.get_context("spawn")
    results: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=_reserve_in_child, args=(str(path), results)) for _ in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert sum(results.get(timeout=5) for _ in procs) == 10
    assert Session.open(path).spent == pytest.approx(1.0)
