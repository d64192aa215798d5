"""The single-report writer's PostgreSQL path (issue 27): ``Store.ingest_pipelined`` stores a small
group in one round trip (the aggregate rows compared and set) or two, and must leave the database exactly as ``Store.ingest`` does: the same
statuses and receipts, rows, aggregates and bucket counts; a report stored before makes it store
nothing and hand the group to ``Store.ingest`` (which finds the duplicate); a closed or archived
campaign stores nothing; the writer's connection is left idle and in its own transaction mode."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest
import sqlalchemy as sa
from service_helpers import frequency_campaign, fresh_store, one_group_batch

from privpub.service import Store
from privpub.service._store import ARCHIVED, CLOSED, DUPLICATE, NEW, Batch, CampaignInfo, Ingestor
from privpub.service._tables import aggregates, report_buckets, reports

T0 = 1_800_000_000  # a whole hour: the bucket of T0 is T0


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    yield from fresh_store("postgresql", tmp_path_factory.mktemp("db"))  # skips without PostgreSQL


@pytest.fixture
def conn(store: Store) -> Iterator[sa.Connection]:
    """The writer's kind of connection: its own, outside any transaction."""
    c = store.engine.connect().execution_options(privpub_write=True)
    try:
        yield c
    finally:
        c.close()


def _campaign(store: Store) -> CampaignInfo:
    return frequency_campaign(store, "writer")


def _batch(ids: np.ndarray, payloads: np.ndarray) -> Batch:
    return one_group_batch(ids, payloads)


def _stored(store: Store, cid: str) -> tuple[int, int, int, list[int], list[tuple[bytes, bytes, int]]]:
    """Rows, aggregate count, bucket count, the aggregates' per-cell sums and the rows themselves."""
    with store.engine.connect() as conn:
        _, support = Store._sums(conn, cid)
        rows = conn.execute(sa.select(reports.c.report_id, reports.c.payload, reports.c.received)
                            .where(reports.c.campaign_id == cid).order_by(reports.c.report_id)).all()
        agg = conn.execute(sa.select(sa.func.sum(aggregates.c.n)).where(aggregates.c.campaign_id == cid)).scalar_one()
        buckets = conn.execute(sa.select(sa.func.sum(report_buckets.c.n))
                               .where(report_buckets.c.campaign_id == cid)).scalar_one()
    return (len(rows), int(agg), int(buckets or 0), [int(x) for x in support[0]],
            [(bytes(r[0]), bytes(r[1]), int(r[2])) for r in rows])


def _idle(conn: sa.Connection) -> bool:
    import psycopg

    raw = conn.connection.driver_connection
    assert raw is not None
    return bool(raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE and not raw.autocommit)


@pytest.mark.parametrize("n", [1, 2, 40])
def test_pipelined_stores_what_ingest_stores(store: Store, conn: sa.Connection, n: int) -> None:
    """The same groups (with a repeat inside when n > 1) through both paths, on two campaigns:
    equal outcomes, rows, aggregates (count and per-cell sums) and bucket counts."""
    fast, slow = _campaign(store), _campaign(store)
    rng = np.random.default_rng(n)
    for k in range(3):  # three commits: the aggregates accumulate over shards
        ids = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
        pay = rng.integers(0, 256, size=(n, 2), dtype=np.uint8)
        if n > 1:
            ids[-1] = ids[0]  # a repeat inside the group: stored once, same receipt
        a = store.ingest_pipelined(fast, _batch(ids, pay), T0 + 3600 * k, conn)
        b = store.ingest(slow, _batch(ids, pay), T0 + 3600 * k)
        assert a is not None
        np.testing.assert_array_equal(a.status, b.status)
        np.testing.assert_array_equal(a.received, b.received)
        assert (a.status[: n - 1 if n > 1 else 1] == NEW).all()
        if n > 1:
            assert a.status[-1] == DUPLICATE and a.received[-1] == a.received[0]
        assert _idle(conn)
    got, want = _stored(store, fast.id), _stored(store, slow.id)
    assert got == want
    assert got[0] == got[1] == got[2] == 3 * (n - 1 if n > 1 else 1)
    assert sum(got[3]) > 0


def test_a_report_stored_before_stores_nothing_and_falls_back(store: Store, conn: sa.Connection) -> None:
    """A resent report makes the pipelined transaction store nothing (None); Store.ingest then
    stores the new ones and answers the resent one as a duplicate with its first receipt."""
    info = _campaign(store)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 256, size=(5, 16), dtype=np.uint8)
    pay = rng.integers(0, 256, size=(5, 2), dtype=np.uint8)
    out = store.ingest_pipelined(info, _batch(ids[:1], pay[:1]), T0, conn)
    assert out is not None and out.status.tolist() == [NEW]
    before = _stored(store, info.id)
    assert store.ingest_pipelined(info, _batch(ids, pay), T0 + 3600, conn) is None
    assert _idle(conn)
    assert _stored(store, info.id) == before  # nothing of the group was stored
    out = store.ingest(info, _batch(ids, pay), T0 + 3600, conn=conn)
    assert out.status.tolist() == [DUPLICATE, NEW, NEW, NEW, NEW]
    assert out.received.tolist() == [T0] + [T0 + 3600] * 4
    assert _stored(store, info.id)[:3] == (5, 5, 5)


@pytest.mark.parametrize("how", ["close", "archive"])
def test_closed_or_archived_campaign_stores_nothing(store: Store, conn: sa.Connection, how: str) -> None:
    info = _campaign(store)
    rng = np.random.default_rng(5)
    getattr(store, how)(info.id)
    out = store.ingest_pipelined(info, _batch(rng.integers(0, 256, size=(3, 16), dtype=np.uint8),
                                              rng.integers(0, 256, size=(3, 2), dtype=np.uint8)), T0, conn)
    assert out is not None
    assert (out.status == (CLOSED if how == "close" else ARCHIVED)).all()
    assert _stored(store, info.id)[:3] == (0, 0, 0)
    assert _idle(conn)


def _one_trips(store: Store) -> list[bool | None]:
    """Spy on the one-round-trip transaction: its results, in order."""
    seen: list[bool | None] = []
    inner = store._one_trip

    def spy(*args: object) -> bool | None:
        seen.append(inner(*args))  # type: ignore[arg-type]
        return seen[-1]

    store._one_trip = spy  # type: ignore[method-assign]
    return seen


def test_one_round_trip_after_the_first_and_another_writer_between(store: Store, conn: sa.Connection) -> None:
    """The second commit on the writer's shard takes one round trip; when another writer (another
    process's, or the batch path) adds to the rows in between, the compare-and-set fails, nothing
    is stored twice, and the group is stored on another shard: the same rows, counts and sums as
    Store.ingest leaves."""
    fast, slow = _campaign(store), _campaign(store)
    other = Store(store.engine)  # another process's writer: its own memory of the rows
    rng = np.random.default_rng(21)
    seen = _one_trips(store)
    try:
        for k, writer in enumerate([store, store, other, store, store]):
            ids = rng.integers(0, 256, size=(6, 16), dtype=np.uint8)
            pay = rng.integers(0, 256, size=(6, 2), dtype=np.uint8)
            if writer is other:  # the rows the writer remembers, changed behind its back
                other._sticky = store._sticky
            a = writer.ingest_pipelined(fast, _batch(ids, pay), T0 + 3600 * k, conn)
            b = store.ingest(slow, _batch(ids, pay), T0 + 3600 * k)
            assert a is not None and (a.status == NEW).all()
            np.testing.assert_array_equal(a.received, b.received)
            assert _idle(conn)
    finally:
        del store._one_trip
    assert seen == [True, False, True]  # the second; after the other writer; once more on the new shard
    got, want = _stored(store, fast.id), _stored(store, slow.id)
    assert got == want
    assert got[0] == got[1] == got[2] == 30


@pytest.mark.parametrize("how", ["close", "archive"])
def test_closed_after_a_commit_stores_nothing_in_one_round_trip(store: Store, conn: sa.Connection, how: str) -> None:
    """The writer remembers the rows, then the campaign is closed or archived: the one-message
    transaction fails on it, and the group is answered CLOSED or ARCHIVED with nothing stored."""
    info = _campaign(store)
    rng = np.random.default_rng(8)
    out = store.ingest_pipelined(info, _batch(rng.integers(0, 256, size=(2, 16), dtype=np.uint8),
                                              rng.integers(0, 256, size=(2, 2), dtype=np.uint8)), T0, conn)
    assert out is not None and (out.status == NEW).all()
    getattr(store, how)(info.id)
    seen = _one_trips(store)
    try:
        out = store.ingest_pipelined(info, _batch(rng.integers(0, 256, size=(3, 16), dtype=np.uint8),
                                                  rng.integers(0, 256, size=(3, 2), dtype=np.uint8)), T0, conn)
    finally:
        del store._one_trip
    assert seen == [False]
    assert out is not None and (out.status == (CLOSED if how == "close" else ARCHIVED)).all()
    assert _stored(store, info.id)[:3] == (2, 2, 2)
    assert _idle(conn)


def test_ingestor_uses_it_and_replaces_a_lost_connection(store: Store) -> None:
    """Through the writer thread: small groups are stored, a resend is a duplicate, and a
    connection the server ended is replaced (the commit is retried, nothing counted twice)."""
    info = _campaign(store)
    rng = np.random.default_rng(11)
    ingestor = Ingestor(store)
    calls: list[int] = []
    pipelined = store.ingest_pipelined

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return pipelined(*args, **kwargs)  # type: ignore[arg-type]

    store.ingest_pipelined = spy  # type: ignore[method-assign]
    try:
        ids = rng.integers(0, 256, size=(4, 16), dtype=np.uint8)
        pay = rng.integers(0, 256, size=(4, 2), dtype=np.uint8)
        assert (ingestor.submit(info, _batch(ids, pay)).result(timeout=30).status == NEW).all()
        assert calls
        again = ingestor.submit(info, _batch(ids[:2], pay[:2])).result(timeout=30)
        assert (again.status == DUPLICATE).all()
        first = ingestor._conn
        assert first is not None
        pid = first.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        first.rollback()
        with store.engine.connect() as other:
            other.exec_driver_sql("SELECT pg_terminate_backend(%s)", (pid,))

        async def on_loop() -> object:
            fut = ingestor.submit_async(info, _batch(rng.integers(0, 256, size=(3, 16), dtype=np.uint8),
                                                     rng.integers(0, 256, size=(3, 2), dtype=np.uint8)))
            return await asyncio.wait_for(fut, 30)

        out = asyncio.run(on_loop())
        assert (out.status == NEW).all()  # type: ignore[attr-defined]
        assert ingestor._conn is not first
        assert _stored(store, info.id)[:3] == (7, 7, 7)
    finally:
        del store.ingest_pipelined
        ingestor.stop()
