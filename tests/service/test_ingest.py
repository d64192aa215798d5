"""The batch-ingest path of the store (issue 27): bulk load first; the reports this process's
predictor (``RecentIds``) knows and a sample of the others probed in the first statement; every id
probed only when the sample or the bulk load meets a stored report (``Store.ingest``). Each report
is stored and counted once, on both databases: fresh batches, resent reports mixed with new ones
(predicted, stored by another process, missed by the sample), whole batches resent, repeats inside
a batch, a concurrent writer storing the same ids, a stale prediction, and groups of different
payload widths in one batch. On PostgreSQL, batches of up to ``PG_INSERT_ROWS`` reports take the
``INSERT ... SELECT`` path (two messages, no sample): the same cases, plus a report stored by another
writer between the probe and the insert, and closed or archived campaigns."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from service_helpers import frequency_campaign, fresh_store, one_group_batch

from privpub.service import Store
from privpub.service._db import write_tx
from privpub.service._store import DUPLICATE, NEW, Batch, CampaignInfo, Outcome, Resent, _append
from privpub.service._tables import aggregates, report_buckets, reports

T0 = 1_800_000_000  # a whole hour: the bucket of T0 is T0


@pytest.fixture(scope="module")
def store(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    yield from fresh_store(backend, tmp_path_factory.mktemp("db"))


@pytest.fixture
def pg_store(tmp_path: Path) -> Iterator[Store]:
    """A store on PostgreSQL only, for PostgreSQL's own paths (SQLite's writer holds the database,
    so nothing is stored in between; its statements are other)."""
    yield from fresh_store("postgresql", tmp_path)


def _campaign(store: Store) -> CampaignInfo:
    return frequency_campaign(store, "ingest")


def _batch(ids: np.ndarray, payloads: np.ndarray) -> Batch:
    return one_group_batch(ids, payloads)


def _mixed_batch(rng: np.random.Generator, n: int
                 ) -> tuple[np.ndarray, np.ndarray, dict[int, int], dict[int, np.ndarray], Batch]:
    """``n`` reports in three groups of payload widths 2, 5 and 1, interleaved: the ids, the
    groups, the widths, the payloads per group and the batch."""
    ids = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    groups = rng.integers(0, 3, size=n).astype(np.int64)
    widths = {0: 2, 1: 5, 2: 1}
    rows = {g: rng.integers(0, 256, size=(int((groups == g).sum()), w), dtype=np.uint8) for g, w in widths.items()}
    return ids, groups, widths, rows, Batch(ids=ids, groups=groups, rows_by_group=rows)


def _put(store: Store, info: CampaignInfo, ids: np.ndarray, payloads: np.ndarray, t: int) -> Outcome:
    return store.ingest(info, _batch(ids, payloads), t)


def _stored(store: Store, cid: str) -> tuple[int, int, int, np.ndarray]:
    """Rows, aggregate count, bucket count and the aggregates' per-cell sums of a campaign."""
    with store.engine.connect() as conn:
        _, support = Store._sums(conn, cid)
        rows = conn.execute(sa.select(sa.func.count()).select_from(reports).where(reports.c.campaign_id == cid)
                            ).scalar_one()
        agg = conn.execute(sa.select(sa.func.sum(aggregates.c.n)).where(aggregates.c.campaign_id == cid)).scalar_one()
        buckets = conn.execute(sa.select(sa.func.sum(report_buckets.c.n))
                               .where(report_buckets.c.campaign_id == cid)).scalar_one()
    return int(rows), int(agg), int(buckets or 0), support[0]


def _ones(info: CampaignInfo, payloads: np.ndarray) -> np.ndarray:
    """The per-cell sums the aggregates must hold for ``payloads`` (the kind's own support)."""
    return info.kind.support(info.groups[0], payloads)


def test_duplicates_are_detected_and_counted_once(store: Store) -> None:
    info = _campaign(store)
    rng = np.random.default_rng(7)
    n = 2000
    ids1 = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    pay1 = rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
    out = _put(store, info, ids1, pay1, T0)
    assert (out.status == NEW).all() and (out.received == T0).all()
    assert _stored(store, info.id)[:3] == (n, n, n)

    # 10% resent (spread through the batch, with other payloads), one id twice inside the batch
    ids2 = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    pay2 = rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
    resent = rng.choice(n, size=n // 10, replace=False)
    ids2[resent] = ids1[rng.choice(n, size=n // 10, replace=False)]
    fresh = np.setdiff1d(np.arange(n), resent)
    ids2[fresh[1]] = ids2[fresh[0]]
    out = _put(store, info, ids2, pay2, T0 + 7200)
    expect = np.full(n, NEW)
    expect[resent] = DUPLICATE
    expect[fresh[1]] = DUPLICATE
    np.testing.assert_array_equal(out.status, expect)
    np.testing.assert_array_equal(out.received[resent], np.full(resent.size, T0))  # the first receipt's time
    assert out.received[fresh[1]] == out.received[fresh[0]] == T0 + 7200
    added = np.setdiff1d(fresh, [fresh[1]])
    rows, agg, buckets, support = _stored(store, info.id)
    assert rows == agg == buckets == n + added.size
    np.testing.assert_array_equal(support, _ones(info, pay1) + _ones(info, pay2[added]))

    # the first batch resent whole: nothing stored, nothing counted, the first receipts
    out = _put(store, info, ids1, pay1, T0 + 3600)
    assert (out.status == DUPLICATE).all() and (out.received == T0).all()
    assert _stored(store, info.id)[:3] == (rows, agg, buckets)


def test_concurrent_writers_store_shared_ids_once(store: Store) -> None:
    """Writer B sends ids writer A is storing in a transaction still open: B's bulk load waits for
    A's commit, then finds A's reports stored and appends only its own."""
    info = _campaign(store)
    rng = np.random.default_rng(8)
    ids_a = rng.integers(0, 256, size=(300, 16), dtype=np.uint8)
    ids_b = np.concatenate([ids_a[::3], rng.integers(0, 256, size=(200, 16), dtype=np.uint8)])
    pay_a = rng.integers(0, 256, size=(300, 2), dtype=np.uint8)
    pay_b = rng.integers(0, 256, size=(ids_b.shape[0], 2), dtype=np.uint8)
    result: dict[str, Outcome] = {}
    errors: list[BaseException] = []

    def writer_b() -> None:
        try:
            result["b"] = _put(store, info, ids_b, pay_b, T0 + 3600)
        except BaseException as exc:  # reported below
            errors.append(exc)

    with write_tx(store.engine) as conn:
        result["a"] = store.store_batch(conn, info, _batch(ids_a, pay_a), T0)
        thread = threading.Thread(target=writer_b)
        thread.start()
        time.sleep(1.0)  # B is waiting on A's lock (SQLite) or on A's uncommitted ids (PostgreSQL)
        assert thread.is_alive()
    thread.join(60)
    assert not errors and not thread.is_alive()
    assert (result["a"].status == NEW).all()
    shared = ids_a[::3].shape[0]
    expect = np.array([DUPLICATE] * shared + [NEW] * 200)
    np.testing.assert_array_equal(result["b"].status, expect)
    assert (result["b"].received[:shared] == T0).all()
    rows, agg, buckets, support = _stored(store, info.id)
    assert rows == agg == buckets == 500
    np.testing.assert_array_equal(support, _ones(info, pay_a) + _ones(info, pay_b[shared:]))


@pytest.mark.parametrize("stored_rows", [0, 10**6])  # SQLite: INSERT ... SELECT, or executemany into a large campaign
def test_append_mixed_widths_round_trip(store: Store, stored_rows: int) -> None:
    """Groups of different payload widths interleaved in one batch are stored byte for byte, and a
    report stored before comes back as such, with its stored time."""
    info = _campaign(store)  # any campaign id: _append writes rows, not aggregates
    rng = np.random.default_rng(9)
    n = 400
    ids, groups, widths, rows, batch = _mixed_batch(rng, n)
    order = np.argsort(ids.view("V16").ravel())
    first, second = order[: n // 2], order[n // 4:]  # the second part overlaps the first by n / 4
    with write_tx(store.engine) as conn:
        at, _ = _append(conn, info.id, batch, first[np.argsort(ids[first].view("V16").ravel())], T0, dedup=False,
                        stored_rows=stored_rows)
    assert at.size == 0
    with pytest.raises(Resent), write_tx(store.engine) as conn:  # the bulk load meets stored reports
        _append(conn, info.id, batch, second, T0 + 60, dedup=False, stored_rows=stored_rows)
    with write_tx(store.engine) as conn:
        at, when = _append(conn, info.id, batch, second, T0 + 60, dedup=True, stored_rows=stored_rows)
    np.testing.assert_array_equal(np.sort(at), np.sort(order[n // 4: n // 2]))
    assert (when == T0).all()
    with store.engine.connect() as conn:
        got = conn.execute(sa.select(reports.c.report_id, reports.c.group_id, reports.c.payload, reports.c.received)
                           .where(reports.c.campaign_id == info.id)).all()
    assert len(got) == n
    rank = {g: np.cumsum(groups == g) - 1 for g in widths}
    want = {bytes(ids[i]): (int(groups[i]), bytes(rows[int(groups[i])][rank[int(groups[i])][i]]),
                            T0 if i in set(first.tolist()) else T0 + 60) for i in range(n)}
    assert {bytes(r[0]): (r[1], bytes(r[2]), r[3]) for r in got} == want



def test_append_reports_a_database_error_as_sqlalchemy_does(store: Store) -> None:
    """A database error of the bulk load other than a resent report comes out as SQLAlchemy's
    error class (a deadlock, a lost connection or a locked database: ``OperationalError``, which the
    writer thread retries), never as the bare driver error that would end the request in a 500.
    Here: the load runs in a read-only transaction, which the database refuses."""
    from privpub.service import make_engine

    rng = np.random.default_rng(21)
    batch = one_group_batch(rng.integers(0, 256, size=(50, 16), dtype=np.uint8),
                            rng.integers(0, 256, size=(50, 2), dtype=np.uint8))
    todo = np.argsort(batch.ids.view("V16").ravel()).astype(np.int64)
    info = _campaign(store)
    pg = store.engine.dialect.name == "postgresql"
    engine = make_engine(store.engine.url.render_as_string(hide_password=False))  # its own connections
    try:
        for dedup in (False, True):
            with engine.connect() as conn:
                conn.exec_driver_sql("SET TRANSACTION READ ONLY" if pg else "PRAGMA query_only = ON")
                with pytest.raises(sa.exc.DBAPIError) as err:
                    _append(conn, info.id, batch, todo, T0, dedup=dedup)
                assert pg or isinstance(err.value, sa.exc.OperationalError)  # SQLite: a retried class
                conn.rollback()
    finally:
        engine.dispose()
    assert _stored(store, info.id)[0] == 0


def test_ingestor_keeps_its_connection_and_replaces_a_lost_one(store: Store) -> None:
    """The writer thread commits on one long-lived connection; when the database drops it, the
    next commit is retried on a new one and nothing is lost or counted twice. Futures of an event
    loop are settled on that loop."""
    import asyncio

    from privpub.service._store import Ingestor

    info = _campaign(store)
    rng = np.random.default_rng(9)
    ingestor = Ingestor(store)
    try:
        def put(n: int) -> tuple[np.ndarray, Outcome]:
            ids = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
            pay = rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
            return ids, ingestor.submit(info, _batch(ids, pay)).result(timeout=30)

        _, out = put(5)
        assert (out.status == NEW).all()
        first = ingestor._conn
        assert first is not None
        _, out = put(5)
        assert (out.status == NEW).all() and ingestor._conn is first  # the same connection again
        if store.engine.dialect.name == "postgresql":  # the server ends the writer's session
            pid = first.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            first.rollback()
            with store.engine.connect() as other:
                other.exec_driver_sql("SELECT pg_terminate_backend(%s)", (pid,))
            _, out = put(5)
            assert (out.status == NEW).all() and ingestor._conn is not first

        async def on_loop() -> Outcome:
            ids = rng.integers(0, 256, size=(3, 16), dtype=np.uint8)
            fut = ingestor.submit_async(info, _batch(ids, rng.integers(0, 256, size=(3, 2), dtype=np.uint8)))
            return await asyncio.wait_for(fut, 30)

        out = asyncio.run(on_loop())
        assert (out.status == NEW).all()
        assert _stored(store, info.id)[:3] == (13 + 5 * (store.engine.dialect.name == "postgresql"),) * 3
    finally:
        ingestor.stop()
    assert ingestor._conn is None


def test_resent_reports_predicted_or_not_are_counted_once(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The three ways a batch with stored reports is stored, each counted once with the first
    receipt's time: the predictor of this process knows them (probed in the first statement, the
    rest bulk-loaded); another process stored them (SQLite: the sample finds one, every id probed;
    PostgreSQL's batches of up to ``PG_INSERT_ROWS``, which have no sample: the insert fails and the
    rerun probes all); and a stored report neither predicted nor sampled (the bulk load fails and
    the rerun probes all)."""
    import privpub.service._store as store_module

    calls: list[bool] = []  # per attempt: whether it probed every id
    real = store_module._append
    real_small = Store._small_pg

    def spy(*args: object, **kwargs: bool) -> tuple[np.ndarray, np.ndarray]:
        calls.append(bool(kwargs["dedup"]))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    def spy_small(self: Store, *args: object, **kwargs: bool) -> object:
        calls.append(bool(kwargs["dedup"]))
        return real_small(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module, "_append", spy)
    monkeypatch.setattr(Store, "_small_pg", spy_small)
    small_pg = store.engine.dialect.name == "postgresql" and 1000 <= store_module.PG_INSERT_ROWS
    info = _campaign(store)
    other = Store(store.engine)  # another process: its own predictor
    rng = np.random.default_rng(10)
    n = 1000
    ids1, pay1 = rng.integers(0, 256, size=(n, 16), dtype=np.uint8), rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
    ids2, pay2 = rng.integers(0, 256, size=(n, 16), dtype=np.uint8), rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
    assert (_put(store, info, ids1, pay1, T0).status == NEW).all()
    assert (_put(other, info, ids2, pay2, T0 + 3600).status == NEW).all()
    assert store.recent.find(info.id, store_module._id_keys(ids1)).all()
    assert not store.recent.find(info.id, store_module._id_keys(ids2)).any()
    expect_support = _ones(info, pay1) + _ones(info, pay2)
    total = 2 * n

    def resend(via: Store, old: np.ndarray, pick: np.ndarray, t: int) -> None:
        nonlocal total, expect_support
        ids = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
        pay = rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
        at = rng.choice(n, size=pick.size, replace=False)
        ids[at] = old[pick]
        out = _put(via, info, ids, pay, t)
        expect = np.full(n, NEW)
        expect[at] = DUPLICATE
        np.testing.assert_array_equal(out.status, expect)
        first = T0 if old is ids1 else T0 + 3600
        np.testing.assert_array_equal(out.received[at], np.full(at.size, first))
        new = np.setdiff1d(np.arange(n), at)
        total += new.size
        expect_support = expect_support + _ones(info, pay[new])
        rows, agg, buckets, support = _stored(store, info.id)
        assert rows == agg == buckets == total
        np.testing.assert_array_equal(support, expect_support)

    calls.clear()
    resend(store, ids1, rng.choice(n, size=n // 10, replace=False), T0 + 7200)  # predicted
    assert calls == [False]  # one bulk load of the others, no full probe
    calls.clear()
    resend(store, ids2, rng.choice(n, size=n // 10, replace=False), T0 + 10800)  # unknown: the sample finds them
    assert calls == ([False, True] if small_pg else [True])
    calls.clear()
    resend(store, ids2, np.array([5]), T0 + 14400)  # one unknown stored report, missed by the sample
    assert calls in ([False, True], [True])  # a failed bulk load and the rerun (or, rarely, sampled)


def test_a_stale_prediction_stores_the_report(store: Store) -> None:
    """The predictor is never trusted alone: ids it wrongly believes stored (a database restored
    from a backup, say) are probed, found missing and stored."""
    import privpub.service._store as store_module

    info = _campaign(store)
    rng = np.random.default_rng(11)
    ids = rng.integers(0, 256, size=(600, 16), dtype=np.uint8)
    pay = rng.integers(0, 256, size=(600, 2), dtype=np.uint8)
    store.recent.add(info.id, store_module._id_keys(ids[:400]))
    out = _put(store, info, ids, pay, T0)
    assert (out.status == NEW).all() and (out.received == T0).all()
    rows, agg, buckets, support = _stored(store, info.id)
    assert rows == agg == buckets == 600
    np.testing.assert_array_equal(support, _ones(info, pay))


def test_recent_ids_and_id_order() -> None:
    """RecentIds finds every recorded key while under capacity and forgets the oldest past it;
    _id_order sorts 16-byte ids by their bytes and finds each row's first row with its id, also when
    first halves collide."""
    from privpub.service._store import RecentIds, _id_order

    rng = np.random.default_rng(12)
    rec = RecentIds(capacity=10_000, min_batch=10)
    batches = [rng.integers(0, 2**63, size=int(k), dtype=np.int64).astype(np.uint64)
                for k in rng.integers(10, 900, size=12)]
    for b in batches:
        rec.add("c", b)
    assert rec.find("c", batches[-1]).all() and not rec.find("d", batches[-1]).any()
    assert not rec.find("c", rng.integers(0, 2**63, size=1000, dtype=np.int64).astype(np.uint64)).any()
    kept = sum(int(rec.find("c", b).sum()) for b in batches)
    assert kept <= 10_000 and rec.find("c", np.concatenate(batches[-3:])).all()
    rec.add("c", batches[0][:5])  # below min_batch: not recorded
    assert rec._size <= 10_000

    ids = rng.integers(0, 256, size=(500, 16), dtype=np.uint8)
    ids[100:200, :8] = ids[0, :8]  # equal first halves
    ids[300] = ids[7]
    ids[301] = ids[7]
    ids[400] = ids[150]
    order, first = _id_order(ids)
    view = ids.view("V16").ravel()
    np.testing.assert_array_equal(order, np.argsort(view, kind="stable"))
    _, idx, inv = np.unique(view, return_index=True, return_inverse=True)
    np.testing.assert_array_equal(first, idx[inv.ravel()])


@pytest.mark.parametrize("n", [300, 3000])  # PostgreSQL: the INSERT path and the COPY path
def test_closed_and_archived_campaigns_store_nothing(store: Store, n: int) -> None:
    """A batch for a closed campaign, fresh or with resent reports, stores and counts nothing (the
    transaction, whose first message may already have inserted them, is rolled back), and the
    connection is left usable."""
    from privpub.service._store import ARCHIVED, CLOSED

    info = _campaign(store)
    rng = np.random.default_rng(13)
    ids = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    pay = rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
    assert (_put(store, info, ids, pay, T0).status == NEW).all()
    store.close(info.id)
    ids2 = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    ids2[: n // 10] = ids[: n // 10]
    out = _put(store, info, ids2, pay, T0 + 3600)
    assert (out.status == CLOSED).all()
    assert _stored(store, info.id)[:3] == (n, n, n)
    store.archive(info.id)
    out = _put(store, info, rng.integers(0, 256, size=(n, 16), dtype=np.uint8), pay, T0 + 7200)
    assert (out.status == ARCHIVED).all()
    assert _stored(store, info.id)[:3] == (n, n, n)
    other = _campaign(store)  # the pool's connections still work
    assert (_put(store, other, ids2, pay, T0).status == NEW).all()


def test_a_report_stored_between_probe_and_insert_is_retried(pg_store: Store, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """PostgreSQL's batches of up to ``PG_INSERT_ROWS``: a report another writer stores after the
    first message probed it (here: a stale prediction, so the report is inserted by the second
    message) makes that insert fail; the transaction is rolled back and run again, and the report
    comes back a duplicate with the other writer's time, counted once."""
    store = pg_store
    import privpub.service._store as store_module

    info = _campaign(store)
    rng = np.random.default_rng(14)
    n = 500
    ids = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    pay = rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
    store.recent.add(info.id, store_module._id_keys(ids[:300]))  # predicted stored: probed, found missing
    real = Store._pg_opened
    done: list[bool] = []

    def opened(self: Store, *args: object) -> object:
        got = real(self, *args)  # type: ignore[arg-type]
        if not done:  # another writer stores ids[7] now, outside this transaction
            done.append(True)
            with store.engine.begin() as other:
                other.execute(sa.insert(reports).values(campaign_id=info.id, report_id=bytes(ids[7]), group_id=0,
                                                        payload=bytes(pay[7]), received=T0 - 3600))
        return got

    monkeypatch.setattr(Store, "_pg_opened", opened)
    out = _put(store, info, ids, pay, T0)
    expect = np.full(n, NEW)
    expect[7] = DUPLICATE
    np.testing.assert_array_equal(out.status, expect)
    assert out.received[7] == T0 - 3600 and (np.delete(out.received, 7) == T0).all()
    rows, agg, buckets, support = _stored(store, info.id)
    assert rows == n and agg == buckets == n - 1
    np.testing.assert_array_equal(support, _ones(info, np.delete(pay, 7, axis=0)))


def test_pg_insert_statements_round_trip_mixed_widths(pg_store: Store) -> None:
    """PostgreSQL: the ``INSERT ... SELECT`` statements of small batches store groups of different
    payload widths, interleaved in the batch, byte for byte."""
    store = pg_store
    import psycopg

    from privpub.service._store import _pg_insert_sql

    info = _campaign(store)
    rng = np.random.default_rng(15)
    n = 200
    ids, groups, widths, rows, batch = _mixed_batch(rng, n)
    todo = np.argsort(ids.view("V16").ravel())[: n - 20]
    sqls, params = _pg_insert_sql(batch, todo, T0, "a")
    params["c"] = info.id
    assert len(sqls) == 3
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        with psycopg.ClientCursor(raw) as cur:
            cur.execute("; ".join(sqls), params)
        conn.commit()
        got = conn.execute(sa.select(reports.c.report_id, reports.c.group_id, reports.c.payload, reports.c.received)
                           .where(reports.c.campaign_id == info.id)).all()
    rank = {g: np.cumsum(groups == g) - 1 for g in widths}
    want = {bytes(ids[i]): (int(groups[i]), bytes(rows[int(groups[i])][rank[int(groups[i])][i]]), T0)
            for i in todo.tolist()}
    assert {bytes(r[0]): (r[1], bytes(r[2]), r[3]) for r in got} == want
