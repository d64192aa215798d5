"""The database-backed budget session (privpub.service.database_session_store) on both databases."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from privpub import Session
from privpub.errors import BudgetExceededError, ParameterError
from privpub.histogram import LaplaceHistogram
from privpub.service import database_session_store
from privpub.service._sessions import DatabaseSessionStore


def test_reserve_settle_refuse(db_url: str) -> None:
    session = Session(store=database_session_store(db_url, total_epsilon=1.0, name="basic"))
    LaplaceHistogram().publish([5, 3, 2], epsilon=0.4, rng=0, session=session.on("counts"))
    assert session.spent == pytest.approx(0.4)
    with pytest.raises(BudgetExceededError, match="cannot pay"):
        LaplaceHistogram().publish([5, 3, 2], epsilon=0.7, rng=1, session=session)
    assert [c.status for c in session.charges] == ["spent"]
    # reopening reads the same record; the total is fixed
    again = Session(store=database_session_store(db_url, name="basic"))
    assert again.remaining == pytest.approx(0.6) and again.charges[0].data.startswith("counts")
    with pytest.raises(ParameterError, match="total epsilon 1"):
        database_session_store(db_url, total_epsilon=2.0, name="basic")
    with pytest.raises(ParameterError, match="does not exist"):
        database_session_store(db_url, name="missing")


def test_session_open_sqlite_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    s = Session.open(url, total_epsilon=0.5)
    LaplaceHistogram().publish([1, 2], epsilon=0.5, rng=0, session=s)
    assert Session.open(url).remaining == 0.0


def _reserve(url: str, name: str, start: mp.synchronize.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    store = DatabaseSessionStore(url, name=name, migrate=False)
    start.wait(30)
    ok = 0
    for _ in range(5):
        try:
            store.reserve(0.1, method="race", data="")
            ok += 1
        except BudgetExceededError:
            pass
    out.put(ok)


def test_concurrent_processes_cannot_overspend(db_url: str) -> None:
    database_session_store(db_url, total_epsilon=1.0, name="race")
    ctx = mp.get_context("fork")  # the children open their own engines
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_reserve, args=(db_url, "race", start, out)) for _ in range(6)]
    for p in procs:
        p.start()
    start.set()
    granted = sum(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
    # 30 attempts of 0.1 against a total of 1.0: exactly 10 may pass, whatever the interleaving
    assert granted == 10
    assert Session(store=database_session_store(db_url, name="race")).spent == pytest.approx(1.0)
