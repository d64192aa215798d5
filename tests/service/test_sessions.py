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


def test_zcdp_database_session(db_url: str) -> None:
    """A database session in rho-zCDP (migration 0008): charged in rho by zCDP publishers, refusing
    pure-DP releases, and stating its measure when reopened."""
    from privpub.stream import PUBLISHERS

    session = Session.open(db_url, total_rho=0.5) if db_url.startswith("sqlite") else \
        Session(store=database_session_store(db_url, 0.5, name="rho", measure="zcdp"))
    name = getattr(session.store, "name", "default")
    assert session.measure == "zcdp"
    PUBLISHERS["mf_sqrt"](window=8, rho=0.2, rng=0, session=session).extend([1, 2, 3])
    assert session.spent == pytest.approx(0.2)
    # a pure-DP release never adds its epsilon to the rhos; nothing is charged
    with pytest.raises(ParameterError) as info:
        LaplaceHistogram().publish([5, 3], epsilon=0.1, rng=0, session=session)
    assert info.value.param == "measure"
    with pytest.raises(BudgetExceededError) as over:
        PUBLISHERS["bt"](window=8, rho=0.4, rng=0, session=session)
    assert over.value.param == "rho"
    # reopening: the measure and total are the stored ones
    again = Session(store=database_session_store(db_url, name=name))
    assert again.measure == "zcdp" and again.remaining == pytest.approx(0.3)
    for kwargs, param in [({"measure": "pure-dp"}, "measure"), ({"total_epsilon": 0.7}, "total_rho")]:
        with pytest.raises(ParameterError) as info:
            database_session_store(db_url, name=name, **kwargs)  # type: ignore[arg-type]
        assert info.value.param == param
    if db_url.startswith("sqlite"):
        with pytest.raises(ParameterError) as info:
            Session.open(db_url, total_epsilon=0.5)  # an epsilon total asks for a pure-DP session
        assert info.value.param == "measure"
        assert Session.open(db_url, total_rho=0.5).measure == "zcdp"


def test_pure_sessions_stay_null_in_the_measure_column(db_url: str) -> None:
    """Pure-DP sessions are written as before migration 0008 (NULL measure), so an older privpub reads them."""
    import sqlalchemy as sa

    from privpub.service import make_engine

    Session(store=database_session_store(db_url, 1.0, name="pure-null"))
    Session(store=database_session_store(db_url, 1.0, name="rho-zcdp", measure="zcdp"))
    engine = make_engine(db_url, pool_size=1)
    try:
        with engine.connect() as conn:
            rows = dict(conn.execute(sa.text("SELECT name, measure FROM budget_sessions WHERE name IN "
                                             "('pure-null', 'rho-zcdp')")).all())
    finally:
        engine.dispose()
    assert rows == {"pure-null": None, "rho-zcdp": "zcdp"}


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
