"""Storage of campaigns, reports, aggregates and releases (SQLAlchemy Core, SQLite or PostgreSQL).

Reports are appended with their running aggregates in the same transaction: each report's support
vector is added to one of ``N_SHARDS`` aggregate rows of its group (shards spread the row locks of
concurrent writers), so a release reads ``N_SHARDS`` rows per group whatever the number of reports.
Single reports are committed in groups by one writer thread per process (:class:`Ingestor`): a
request gets its receipt only after the transaction holding its report has committed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import hashlib
import itertools
import logging
import queue
import re
import secrets
import struct
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from numpy.typing import NDArray
from sqlalchemy.engine import Connection, Engine

from privpub.service._catalog import make_kind, normalise_spec
from privpub.service._db import write_tx
from privpub.service._kinds import Group, Kind, ReleaseInput, SpecError
from privpub.service._tables import (
    aggregates,
    assignments,
    campaign_groups,
    campaigns,
    enrollment_tokens,
    releases,
    report_buckets,
    reports,
)

__all__ = ["CampaignInfo", "Ingestor", "Outcome", "Store", "load_reports"]

log = logging.getLogger("privpub.service")

N_SHARDS = 8
#: rows per IN (...) list
_CHUNK = 2000
#: max reports merged into one writer transaction
MAX_TX_ROWS = 60_000
#: PostgreSQL: the writer stores up to this many reports per transaction in two round trips
#: (:meth:`Store.ingest_pipelined`); larger groups take :meth:`Store.ingest` (one binary COPY)
PIPELINED_ROWS = 2000
#: the writer waits up to LINGER_SECONDS for a group of fewer than LINGER_ROWS reports to grow,
#: when the group before it held several requests (concurrent load; a lone request never waits)
LINGER_SECONDS = 0.002
LINGER_ROWS = 32

NEW, DUPLICATE, BAD_TOKEN, BAD_ASSIGNMENT, CLOSED, ARCHIVED = 0, 1, 2, 3, 4, 5
#: longest validity of an assignment in a multi-phase campaign without enrollment
UNENROLLED_MAX_TTL = 3600


class Forbidden(Exception):
    """A credential is missing, unknown or used (-> 403 naming ``field``)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class Gone(Exception):
    """The campaign is archived (-> 410)."""


class Conflict(Exception):
    """A request that conflicts with the campaign's state (-> 409)."""


class Unavailable(Exception):
    """Try again later (-> 503 with Retry-After)."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotFound(Exception):
    """No such campaign or release (-> 404)."""


def now_s() -> int:
    return int(time.time())


def iso(ts: int | None) -> str | None:
    return None if ts is None else _iso(int(ts))


@functools.lru_cache(maxsize=256)
def _iso(ts: int) -> str:
    # receipts repeat the same few time buckets: formatted once each
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def _epoch(value: Any) -> int | None:
    """Unix seconds of an ISO 8601 time (a time without a zone is UTC)."""
    if value is None:
        return None
    dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return int((dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)).timestamp())


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


@dataclass
class CampaignInfo:
    """A campaign's immutable declaration and its (cached) groups."""

    id: str
    name: str
    kind: Kind
    spec: dict[str, Any]
    min_reports: int
    opens_at: int | None
    closes_at: int | None
    time_precision: int
    enrollment: bool
    created_at: int
    groups: dict[int, Group] = field(default_factory=dict)

    def public_config(self) -> dict[str, Any]:
        cfg = {"id": self.id, "name": self.name, "kind": self.kind.kind, "epsilon": self.kind.epsilon,
               "min_reports": self.min_reports, "opens_at": iso(self.opens_at), "closes_at": iso(self.closes_at),
               "time_precision": self.time_precision, "enrollment": self.enrollment,
               "privacy": self.kind.privacy_words()}
        cfg.update(self.kind.public_config([self.groups[k] for k in sorted(self.groups)]))
        return cfg


@dataclass
class Batch:
    """Validated reports: ids ``(n, 16)``, group per row, payloads per group, optional tokens.

    The payloads are arrays, one ``(k, width)`` per group with the group's rows in row order: the
    batch path builds no Python object per report.
    """

    ids: NDArray[np.uint8]
    groups: NDArray[np.int64]
    rows_by_group: dict[int, NDArray[np.uint8]]  # group -> (k, width) payloads in row order
    tokens: list[str] | None = None
    assignments: list[str] | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@dataclass
class Outcome:
    """Per report: status (NEW, DUPLICATE, BAD_TOKEN, BAD_ASSIGNMENT, CLOSED) and stored time."""

    status: NDArray[np.int64]
    received: NDArray[np.int64]


def _merge(batches: Sequence[Batch]) -> Batch:
    if len(batches) == 1:
        return batches[0]
    groups = np.concatenate([b.groups for b in batches])
    rows: dict[int, list[NDArray[np.uint8]]] = {}
    for b in batches:
        for g, arr in b.rows_by_group.items():
            rows.setdefault(g, []).append(arr)
    with_tokens = any(b.tokens is not None for b in batches)
    with_assign = any(b.assignments is not None for b in batches)
    return Batch(
        ids=np.concatenate([b.ids for b in batches]), groups=groups,
        rows_by_group={g: np.concatenate(v) for g, v in rows.items()},
        tokens=list(itertools.chain.from_iterable(b.tokens or [""] * len(b) for b in batches)) if with_tokens else None,
        assignments=(list(itertools.chain.from_iterable(b.assignments or [""] * len(b) for b in batches))
                     if with_assign else None),
    )


_PG_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, header extension length
_PG_TRAILER = b"\xff\xff"
_UNIQUE_VIOLATION = "23505"  # PostgreSQL's SQLSTATE
_CAMPAIGN_ID = re.compile(r"[0-9a-f]{16}")  # the ids Store.create_campaign makes
#: aggregate rows the single-report writer remembers (beyond: forgotten, read again)
_WRITTEN_ROWS = 4096
_SQLITE_ROWS = "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?) "


def _by_group(batch: Batch, todo: NDArray[np.int64]) -> list[tuple[int, NDArray[np.int64], NDArray[np.uint8]]]:
    """Per group: the positions in ``todo`` of its rows and their payloads ``(k, width)``, in ``todo``'s order."""
    if todo.size == 0:
        return []
    if len(batch.rows_by_group) == 1:  # one group: a row's index is its index in the group's payloads
        ((gid, rows),) = batch.rows_by_group.items()
        return [(int(gid), np.arange(todo.size), rows[todo])]
    out = []
    groups = batch.groups[todo]
    for gid, rows in batch.rows_by_group.items():
        at = np.flatnonzero(groups == gid)
        if at.size == 0:
            continue
        rank = np.cumsum(batch.groups == gid) - 1  # row -> index in the group's payload array
        out.append((int(gid), at, rows[rank[todo[at]]]))
    return out


def _pg_copy_data(batch: Batch, todo: NDArray[np.int64], cid: str, bucket: int) -> memoryview:
    """The rows ``todo`` of ``reports`` (campaign_id, report_id, group_id, payload, received) in
    PostgreSQL's binary COPY format, encoded by NumPy into one buffer with the header and trailer
    (no Python object per row, no copy of the rows after they are written)."""
    c = cid.encode()
    parts: list[tuple[NDArray[np.int64], NDArray[np.uint8], NDArray[np.uint8], int, int]] = []
    for gid, at, payloads in _by_group(batch, todo):
        w = int(payloads.shape[1])
        # a row: 5 fields, each its int32 length then its bytes; only the id and the payload vary
        head = struct.pack(f">hi{len(c)}si", 5, len(c), c, 16)
        mid = struct.pack(">iii", 4, gid, w)
        tail = struct.pack(">iq", 8, bucket)
        template = np.frombuffer(head + bytes(16) + mid + bytes(w) + tail, dtype=np.uint8)
        parts.append((at, payloads, template, len(head), len(head) + 16 + len(mid)))
    length = np.zeros(todo.size, dtype=np.int64)  # each row's length in todo's order
    for at, _, template, _, _ in parts:
        length[at] = template.size
    h = len(_PG_HEADER)
    out = np.empty(h + int(length.sum()) + len(_PG_TRAILER), dtype=np.uint8)
    out[:h] = np.frombuffer(_PG_HEADER, dtype=np.uint8)
    out[out.size - len(_PG_TRAILER):] = np.frombuffer(_PG_TRAILER, dtype=np.uint8)
    body = out[h:out.size - len(_PG_TRAILER)]
    if len(parts) == 1:  # one width: the rows are one (n, row) block
        at, payloads, template, at_id, at_payload = parts[0]
        rows = body.reshape(at.size, template.size)
        rows[:] = template
        rows[:, at_id:at_id + 16] = batch.ids[todo]
        rows[:, at_payload:at_payload + payloads.shape[1]] = payloads
    else:  # rows of different widths, interleaved in todo's order
        start = np.cumsum(length) - length
        for at, payloads, template, at_id, at_payload in parts:
            rows = np.empty((at.size, template.size), dtype=np.uint8)
            rows[:] = template
            rows[:, at_id:at_id + 16] = batch.ids[todo[at]]
            rows[:, at_payload:at_payload + payloads.shape[1]] = payloads
            body[start[at][:, None] + np.arange(template.size)] = rows
    return out.data


#: ids of a batch probed before its bulk load (among those :class:`RecentIds` does not predict
#: stored): when one is stored already, the batch goes straight to the deduplicating path instead of
#: a bulk load that would fail (a batch with 10% resent reports hits with probability
#: 1 - 0.9^32 = 0.97; one that misses still fails its load and is rerun)
SAMPLE = 32
_PG_SAMPLE = ("(SELECT count(*) FROM generate_series(0, %(k)s - 1) AS k(i) CROSS JOIN LATERAL (SELECT 1 FROM "
              "reports WHERE campaign_id = %(c)s AND report_id = substring(%(sample)s FROM 16 * k.i + 1 FOR 16) "
              "LIMIT 1) AS r)")
_SQLITE_SAMPLE = ("SELECT count(*) FROM k JOIN reports r ON r.campaign_id = ? "
                  "AND r.report_id = substr(?, 16 * k.i + 1, 16)")


def _id_order(ids: NDArray[np.uint8]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The rows in id order (equal ids in row order) and, per row, the first row with its id.

    The 16-byte ids are compared as two big-endian 64-bit integers (the same order as their
    bytes): one integer sort when the first halves differ, a two-key sort otherwise; NumPy's sorts
    of 16-byte void values cost 3-4x more.
    """
    n = int(ids.shape[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    key = np.ascontiguousarray(ids).view(">u8")  # (n, 2)
    hi = key[:, 0].astype(np.uint64)
    order = np.argsort(hi)
    hs = hi[order]
    same = hs[1:] == hs[:-1]
    if same.any():  # equal first halves (a repeated id, or a rare collision): sort by both, stably
        order = np.lexsort((key[:, 1].astype(np.uint64), hi))
        srt = key[order]
        same = (srt[1:] == srt[:-1]).all(axis=1)
    start = np.concatenate(([True], ~same))
    first = np.empty(n, dtype=np.int64)
    first[order] = order[start][np.cumsum(start) - 1]
    return order.astype(np.int64, copy=False), first


def _start_outcome(batch: Batch, info: CampaignInfo, t: int) -> tuple[
        NDArray[np.int64], NDArray[np.int64], int, NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """A batch's outcome before anything is stored: every report NEW, received in ``t``'s time
    bucket, except the repeats of an id earlier in the batch (DUPLICATE). Returns the status,
    the received times, the bucket, the rows in id order, each row's first row with its id, and
    the repeats' mask."""
    n = len(batch)
    status = np.full(n, NEW, dtype=np.int64)
    bucket = t - t % info.time_precision
    received = np.full(n, bucket, dtype=np.int64)
    order, first = _id_order(batch.ids)
    repeat = first != np.arange(n)
    status[repeat] = DUPLICATE
    return status, received, bucket, order, first, repeat


def _id_keys(ids: NDArray[np.uint8]) -> NDArray[np.uint64]:
    """The first 8 bytes of each id as an integer (ids sorted by bytes have sorted keys)."""
    return np.ascontiguousarray(ids).view(">u8")[:, 0].astype(np.uint64)


class RecentIds:
    """Keys (:func:`_id_keys`) of the reports this process stored lately, per campaign: a predictor
    of which reports of a batch are resent, so that only those are probed in the database.

    Never trusted alone: the predicted reports are probed (the database says whether they are
    stored, and when), and a stored report the predictor missed (stored by another process,
    before a restart, or forgotten) makes the bulk load fail with a unique violation, after which
    every id of the batch is probed. A key shared by two ids only costs a probe. Kept as a few
    sorted runs per campaign (merged as they grow, like a binary counter) behind a bitmap of
    hashed keys (``2**bits`` bits) that answers most lookups of fresh keys without a search; past
    ``capacity`` keys in all, the oldest runs are forgotten. Commits of fewer than ``min_batch``
    reports are not recorded (their resent reports are all within the first statement's sample).
    Memory: 8 bytes a key and ``2**bits / 8`` bytes of bitmap (32 + 8 MiB by default).
    """

    _MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: spreads structured keys over the bitmap

    def __init__(self, capacity: int = 1 << 22, min_batch: int = 256, bits: int = 26) -> None:
        self.capacity = capacity
        self.min_batch = min_batch
        self._shift = np.uint64(64 - bits)
        self._bits = bits
        self._map: NDArray[np.uint8] | None = None  # allocated on the first record
        self._lock = threading.Lock()
        self._runs: dict[str, list[tuple[int, NDArray[np.uint64]]]] = {}  # campaign -> [(age, sorted keys)]
        self._age = 0
        self._size = 0

    def _slots(self, keys: NDArray[np.uint64]) -> tuple[NDArray[np.uint64], NDArray[np.uint8]]:
        pos = (keys * self._MUL) >> self._shift
        return pos >> np.uint64(3), (np.uint8(1) << (pos & np.uint64(7)).astype(np.uint8))

    def _mark(self, keys: NDArray[np.uint64]) -> None:
        if self._map is None:
            self._map = np.zeros(1 << (self._bits - 3), dtype=np.uint8)
        byte, bit = self._slots(keys)
        m = self._map
        m[byte] |= bit  # a byte indexed twice keeps only one of its new bits here ...
        lost = (m[byte] & bit) == 0
        if lost.any():  # ... so those few are set again (unbuffered, as np.bitwise_or.at is slow in bulk)
            np.bitwise_or.at(m, byte[lost], bit[lost])

    def add(self, cid: str, keys: NDArray[np.uint64]) -> None:
        """Record the keys of reports just committed (sorted or not)."""
        if keys.size < self.min_batch:
            return
        if not (keys[1:] >= keys[:-1]).all():
            keys = np.sort(keys)
        with self._lock:
            self._age += 1
            self._mark(keys)
            runs = self._runs.setdefault(cid, [])
            runs.append((self._age, keys))
            self._size += keys.size
            while len(runs) > 1 and runs[-2][1].size <= 2 * runs[-1][1].size:
                (a, x), (_, y) = runs[-2], runs.pop()
                runs[-1] = (a, np.sort(np.concatenate((x, y)), kind="stable"))  # two sorted runs: a merge
            if self._size > self.capacity:
                while self._size > self.capacity:
                    cid_old = min((r[0][0], c) for c, r in self._runs.items() if r)[1]
                    self._size -= self._runs[cid_old].pop(0)[1].size
                assert self._map is not None
                self._map[:] = 0  # rebuilt from the runs kept
                for kept in self._runs.values():
                    for _, run in kept:
                        self._mark(run)

    def find(self, cid: str, keys: NDArray[np.uint64]) -> NDArray[np.bool_]:
        """Per key: whether it was recorded for ``cid``."""
        hit = np.zeros(keys.size, dtype=bool)
        with self._lock:
            runs = list(self._runs.get(cid, ()))
            if not runs or self._map is None:
                return hit
            byte, bit = self._slots(keys)
            maybe = np.flatnonzero(self._map[byte] & bit)
        sub = keys[maybe]
        for _, run in runs:
            at = np.minimum(np.searchsorted(run, sub), run.size - 1)
            hit[maybe] |= run[at] == sub
        return hit


def _sql(conn: Connection, text: str) -> str:
    """``text`` with ``?`` placeholders in the driver's parameter style (psycopg: ``%s``).

    The statements of the ingest transaction run as plain driver SQL: SQLAlchemy's per-statement
    work (cache keys, parameter processing) cost as much CPU as a 1,000-report load.
    """
    return text.replace("?", "%s") if conn.dialect.name == "postgresql" else text


@contextlib.contextmanager
def _cursor(conn: Connection, *, client: bool = False) -> Iterator[Any]:
    """A cursor of ``conn``'s DBAPI connection (inside its transaction): the statements of the
    ingest transaction skip SQLAlchemy's per-statement result set-up (about 0.1 ms each). The
    driver's errors come out as SQLAlchemy's (a deadlock or lost connection: ``OperationalError``,
    which the writer thread retries). ``client``: PostgreSQL, a cursor binding the parameters
    client-side, so that one execute may send several statements in one message (one round trip)."""
    raw = conn.connection.driver_connection
    assert raw is not None  # an open connection's DBAPI connection
    dbapi_error = conn.dialect.loaded_dbapi.Error
    if client:
        import psycopg

        cur = psycopg.ClientCursor(raw)
    else:
        cur = raw.cursor()
    try:
        yield cur
    except dbapi_error as exc:
        raise sa.exc.DBAPIError.instance(None, None, exc, dbapi_error, hide_parameters=True,
                                         dialect=conn.dialect) from exc
    finally:
        cur.close()


class Resent(Exception):
    """The bulk load met a report stored before (or by a concurrent writer): the transaction is
    rolled back and run again on the deduplicating path (:meth:`Store.ingest`)."""


def _append(conn: Connection, cid: str, batch: Batch, todo: NDArray[np.int64], bucket: int, *,
            dedup: bool, stored_rows: int = 0) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Insert the rows ``todo`` (sorted by id) into ``reports``, each report at most once.

    Returns the rows of ``batch`` found already stored and their stored times; every other row of
    ``todo`` was inserted.

    ``dedup=False``, the common case: one bulk load straight into ``reports`` (PostgreSQL: one
    binary ``COPY`` of a buffer encoded by NumPy; SQLite: one ``INSERT ... SELECT`` per group
    slicing two blobs; no Python object per report, no ``RETURNING``). A unique violation means
    some reports were stored before: :class:`Resent` is raised and the caller runs the transaction
    again with ``dedup=True``, which first finds the stored ones with one probe of the primary key
    in the database (:func:`_append_pg_dedup`, :func:`_append_sqlite_dedup`) and loads the others.
    """
    none = np.zeros(0, dtype=np.int64)
    if todo.size == 0:
        return none, none
    raw = conn.connection.driver_connection
    assert raw is not None  # an open connection's DBAPI connection
    pg = conn.dialect.name == "postgresql"
    cur = raw.cursor()
    try:
        if dedup:
            return _append_pg_dedup(cur, cid, batch, todo, bucket) if pg else \
                _append_sqlite_dedup(cur, cid, batch, todo, bucket, stored_rows)
        if pg:
            with cur.copy("COPY reports (campaign_id, report_id, group_id, payload, received) "
                          "FROM STDIN (FORMAT BINARY)") as cp:
                cp.write(_pg_copy_data(batch, todo, cid, bucket))
        else:
            _sqlite_insert(cur, cid, batch, todo, bucket, stored_rows)
        return none, none
    except Exception as exc:
        if _is_unique_violation(exc):  # also (dedup): a report not probed, or a concurrent writer's
            raise Resent("some reports were stored before") from None
        dbapi_error = conn.dialect.loaded_dbapi.Error
        if isinstance(exc, dbapi_error):  # as SQLAlchemy reports it: a deadlock, a lost connection or a
            # locked database is an OperationalError, which the writer thread retries (not a 500)
            raise sa.exc.DBAPIError.instance(None, None, exc, dbapi_error, hide_parameters=True,
                                             dialect=conn.dialect) from exc
        raise
    finally:
        cur.close()


def _is_unique_violation(exc: BaseException) -> bool:
    """A duplicate primary key: psycopg's SQLSTATE 23505, or sqlite3's SQLITE_CONSTRAINT_PRIMARYKEY."""
    import sqlite3

    if isinstance(exc, sqlite3.IntegrityError):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
    return getattr(exc, "sqlstate", None) == _UNIQUE_VIOLATION


#: SQLite: at most this many rows into a campaign holding at least :data:`_SQLITE_MANY_STORED`
#: times as many are inserted by one ``executemany`` of single-row inserts rather than one ``INSERT
#: ... SELECT``. Measured (CPU of insert and commit, sorted random ids, this 16-byte-id table): the
#: ``INSERT ... SELECT``'s cost grows with the pages it touches that were there before, about one
#: per row when few rows go into many pages (1,000 rows into 30,000-60,000 stored: 1.5x the
#: ``executemany``'s), while into a small campaign it is 0.75x the ``executemany`` (a Python tuple
#: and a statement step per row), and at 50,000 rows 0.7x.
_SQLITE_MANY = 2000
_SQLITE_MANY_STORED = 10


def _sqlite_insert(cur: Any, cid: str, batch: Batch, todo: NDArray[np.int64], bucket: int,
                   stored_rows: int = 0) -> None:
    """Per group, one ``INSERT ... SELECT`` whose ids and payloads are two blobs sliced by SQLite,
    or, for a few rows into a campaign of many (``stored_rows``, see :data:`_SQLITE_MANY`), one
    ``executemany`` over row tuples (a ``bytes`` per id and payload, from NumPy's ``tolist``)."""
    many = todo.size <= _SQLITE_MANY and stored_rows >= _SQLITE_MANY_STORED * todo.size
    for gid, at, payloads in _by_group(batch, todo):
        w = int(payloads.shape[1])
        if many:  # a bytes object per id and payload: NumPy's tolist of void values
            ids = np.ascontiguousarray(batch.ids[todo[at]]).view("V16").ravel().tolist()
            pay = np.ascontiguousarray(payloads).view(f"V{w}").ravel().tolist()
            cur.executemany("INSERT INTO reports (campaign_id, report_id, group_id, payload, received) "
                            "VALUES (?, ?, ?, ?, ?)", zip(itertools.repeat(cid), ids, itertools.repeat(gid), pay,
                                                          itertools.repeat(bucket)))
            continue
        cur.execute(_SQLITE_ROWS + "INSERT INTO reports (campaign_id, report_id, group_id, payload, received) "
                    "SELECT ?, substr(?, 16 * i + 1, 16), ?, substr(?, ? * i + 1, ?), ? FROM k",
                    (int(at.size), cid, np.ascontiguousarray(batch.ids[todo[at]]).tobytes(), gid,
                     payloads.tobytes(), w, w, bucket))


#: PostgreSQL: which of %(n)s ids (one bytea of 16 bytes each) are stored in campaign %(c)s: an index
#: lookup per id; the positions and stored times come back as two bytea, not a row each
_PG_PROBE = ("SELECT string_agg(int4send(k.i), ''::bytea ORDER BY k.i) AS at, string_agg(int8send(r.received), "
             "''::bytea ORDER BY k.i) AS received FROM generate_series(0, %(n)s - 1) AS k(i) CROSS JOIN LATERAL "
             "(SELECT received FROM reports WHERE campaign_id = %(c)s AND report_id = substring(%(ids)s FROM 16 * k.i "
             "+ 1 FOR 16) LIMIT 1) AS r")


def _positions(at: bytes | None, when: bytes | None) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The two bytea of :data:`_PG_PROBE` as arrays (none found: two NULLs)."""
    if at is None or when is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.frombuffer(at, dtype=">i4").astype(np.int64), np.frombuffer(when, dtype=">i8").astype(np.int64)


def _sqlite_probe(cur: Any, cid: str, batch: Batch, rows: NDArray[np.int64]
                  ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """SQLite: which of ``rows`` are stored (positions in ``rows``) and when, by one join."""
    found = cur.execute(_SQLITE_ROWS + "SELECT k.i, r.received FROM k JOIN reports r ON r.campaign_id = ? "
                        "AND r.report_id = substr(?, 16 * k.i + 1, 16)",
                        (int(rows.size), cid, np.ascontiguousarray(batch.ids[rows]).tobytes())).fetchall()
    got = np.array(found, dtype=np.int64).reshape(-1, 2)
    return got[:, 0], got[:, 1]


def _append_sqlite_dedup(cur: Any, cid: str, batch: Batch, todo: NDArray[np.int64], bucket: int,
                         stored_rows: int = 0) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """SQLite, some reports stored before: one join finds them, the others are inserted (the
    transaction holds the database's write lock, so nothing is stored in between). Returns the
    rows found stored and their stored times."""
    at, when = _sqlite_probe(cur, cid, batch, todo)
    keep = np.ones(todo.size, dtype=bool)
    keep[at] = False
    _sqlite_insert(cur, cid, batch, todo[keep], bucket, stored_rows)
    return todo[at], when


def _append_pg_dedup(cur: Any, cid: str, batch: Batch, todo: NDArray[np.int64], bucket: int
                     ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """PostgreSQL, some reports stored before: one statement probes the primary key for every id
    (:data:`_PG_PROBE`), then one binary COPY appends the others. A concurrent writer that stores
    one of them in between makes the COPY fail with a unique violation (:meth:`Store.ingest`
    retries). Returns the rows found stored and their stored times. The transaction's first
    statement turned JIT off (:meth:`Store._open_pg`)."""
    row = cur.execute(_PG_PROBE, {"n": int(todo.size), "c": cid,
                                  "ids": np.ascontiguousarray(batch.ids[todo]).tobytes()}).fetchone()
    at, when = _positions(*row) if row is not None else _positions(None, None)
    keep = np.ones(todo.size, dtype=bool)
    keep[at] = False
    if keep.any():
        with cur.copy("COPY reports (campaign_id, report_id, group_id, payload, received) "
                      "FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(_pg_copy_data(batch, todo[keep], cid, bucket))
    return todo[at], when


def _pg_open_sql(cid: str, batch: Batch, predicted: NDArray[np.int64], sample: NDArray[np.int64], shard: int,
                 gids: list[int]) -> tuple[str, dict[str, Any]]:
    """PostgreSQL: the ingest transaction's first statement (:meth:`Store._open_pg`) and its named
    parameters. One row per locked aggregate row (at least one): closed, archived_at, the number of
    ``sample`` rows stored, the positions in ``predicted`` of its stored rows and their stored times
    (two ``bytea``, or NULL), then group_id, n, support of the aggregate row."""
    sql = ("WITH a AS (SELECT group_id, n, support FROM aggregates WHERE campaign_id = %(c)s AND shard = %(s)s "
           "AND group_id = ANY(%(g)s) ORDER BY group_id FOR UPDATE)"
           + (", p AS (" + _PG_PROBE.replace("%(n)s", "%(m)s").replace("%(ids)s", "%(predicted)s") + ") " if
              predicted.size else " ")
           + "SELECT c.closed, c.archived_at, " + (_PG_SAMPLE if sample.size else "0") + ", "
           + ("p.at, p.received, " if predicted.size else "NULL, NULL, ")
           + "a.group_id, a.n, a.support, set_config('jit', 'off', true) FROM campaigns c "
           + ("CROSS JOIN p " if predicted.size else "") + "LEFT JOIN a ON true WHERE c.id = %(c)s")
    params: dict[str, Any] = {"c": cid, "s": shard, "g": gids}
    if sample.size:
        params.update(k=int(sample.size), sample=np.ascontiguousarray(batch.ids[sample]).tobytes())
    if predicted.size:
        params.update(m=int(predicted.size), predicted=np.ascontiguousarray(batch.ids[predicted]).tobytes())
    return sql, params


def _pg_add_sql(cid: str, shard: int, locked: dict[int, tuple[int, bytes]],
                sums: list[tuple[int, int, NDArray[np.int64]]], bucket: int, n_new: int) -> tuple[str, dict[str, Any]]:
    """PostgreSQL: one statement giving the aggregate rows read and locked by the first statement
    the new reports' counts and sums, and the time bucket its count; with its named parameters."""
    values = []
    params: dict[str, Any] = {"c": cid, "s": shard, "b": bucket, "k": n_new}
    for j, (gid, k, add) in enumerate(sums):
        old_n, old = locked[gid]
        values.append(f"(%(g{j})s::integer, %(n{j})s::bigint, %(v{j})s::bytea)")
        params.update({f"g{j}": gid, f"n{j}": old_n + k,
                       f"v{j}": (np.frombuffer(old, dtype="<i8") + add).astype("<i8").tobytes()})
    return ("WITH u AS (UPDATE aggregates AS a SET n = v.n, support = v.support FROM (VALUES " + ", ".join(values)
            + ") AS v(g, n, support) WHERE a.campaign_id = %(c)s AND a.shard = %(s)s AND a.group_id = v.g) "
            "INSERT INTO report_buckets (campaign_id, bucket, shard, n) VALUES (%(c)s, %(b)s, %(s)s, %(k)s) "
            "ON CONFLICT (campaign_id, bucket, shard) DO UPDATE SET n = report_buckets.n + excluded.n"), params


#: PostgreSQL: a batch of up to this many reports is inserted by ``INSERT ... SELECT`` statements
#: sent in the transaction's messages (:meth:`Store._small_pg`) instead of a binary ``COPY``: at
#: 1,000 rows the insert cost 0.8x the ``COPY``'s CPU (client and server, with ``BEGIN`` and
#: ``COMMIT``), at 10,000 1.1x
PG_INSERT_ROWS = 2000
_PG_INSERT = ("INSERT INTO reports (campaign_id, report_id, group_id, payload, received) SELECT %(c)s, "
              "substring(%(i{j})s FROM 16 * i + 1 FOR 16), %(g{j})s, substring(%(p{j})s FROM %(w{j})s * i + 1 FOR "
              "%(w{j})s), %(b)s FROM generate_series(0, %(n{j})s - 1) AS k(i)")


def _pg_insert_sql(batch: Batch, rows: NDArray[np.int64], bucket: int, prefix: str
                   ) -> tuple[list[str], dict[str, Any]]:
    """PostgreSQL: one ``INSERT ... SELECT`` per group of the rows ``rows`` (in their order),
    each slicing two ``bytea`` (ids, payloads), with their named parameters (``prefix``: keeps the
    names of two calls apart; the campaign is ``%(c)s``)."""
    sqls: list[str] = []
    params: dict[str, Any] = {"b": bucket}
    for gid, at, payloads in _by_group(batch, rows):
        j = f"{prefix}{len(sqls)}"
        sqls.append(_PG_INSERT.replace("{j}", j))
        params.update({f"i{j}": np.ascontiguousarray(batch.ids[rows[at]]).tobytes(), f"g{j}": gid,
                       f"p{j}": payloads.tobytes(), f"w{j}": int(payloads.shape[1]), f"n{j}": int(at.size)})
    return sqls, params


class Store:
    """All database access of the service."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._cache: dict[str, CampaignInfo] = {}
        self._lock = threading.Lock()
        self._shards = itertools.cycle(np.random.default_rng(secrets.randbits(64)).permutation(N_SHARDS).tolist())
        self.recent = RecentIds()  # reports this process stored: which of a batch to probe
        # the single-report writer's aggregate rows as its last commit left them ((campaign, group,
        # shard) -> (n, support)), and the shard it keeps writing to: see ingest_pipelined
        self._written: dict[tuple[str, int, int], tuple[int, NDArray[np.int64]]] = {}
        self._sticky: int | None = None

    # -- campaigns -------------------------------------------------------------------------------
    def create_campaign(self, body: dict[str, Any]) -> CampaignInfo:
        spec = normalise_spec(dict(body))
        opens = spec.pop("opens_at", None)
        closes = spec.pop("closes_at", None)
        opens_s, closes_s = _epoch(opens), _epoch(closes)
        if opens_s is not None and closes_s is not None and closes_s <= opens_s:
            raise SpecError("closes_at", "must be after opens_at")
        kind = make_kind(spec)
        cid = secrets.token_hex(8)
        t = now_s()
        with write_tx(self.engine) as conn:
            conn.execute(sa.insert(campaigns).values(
                id=cid, name=spec["name"], kind=spec["kind"], spec=spec, epsilon=float(spec["epsilon"]),
                min_reports=int(spec["min_reports"]), opens_at=opens_s, closes_at=closes_s,
                time_precision=int(spec["time_precision"]), enrollment=bool(spec["enrollment"]), closed=False,
                stage=0, created_at=t))
            for g in kind.initial_groups():
                self._add_group(conn, cid, kind, g, t)
        return self.campaign(cid)

    def _add_group(self, conn: Connection, cid: str, kind: Kind, g: Group, t: int) -> None:
        conn.execute(sa.insert(campaign_groups).values(
            campaign_id=cid, group_id=g.group_id, name=g.name, domain_size=g.domain_size, quota=g.quota,
            public=g.public, created_at=t))
        zero = np.zeros(kind.support_length(g), dtype="<i8").tobytes()
        conn.execute(sa.insert(aggregates), [{"campaign_id": cid, "group_id": g.group_id, "shard": s, "n": 0,
                                              "support": zero} for s in range(N_SHARDS)])

    def campaign(self, cid: str, *, refresh_groups: bool = False) -> CampaignInfo:
        info = self._cache.get(cid)
        if info is None:
            with self.engine.connect() as conn:
                row = conn.execute(sa.select(campaigns).where(campaigns.c.id == cid)).first()
                if row is None:
                    raise NotFound(f"no campaign {cid!r}")
                info = CampaignInfo(row.id, row.name, make_kind(row.spec), row.spec, row.min_reports, row.opens_at,
                                    row.closes_at, row.time_precision, row.enrollment, row.created_at)
                info.groups = self._groups(conn, cid)
            with self._lock:
                self._cache[cid] = info
        elif refresh_groups:
            with self.engine.connect() as conn:
                info.groups = self._groups(conn, cid)
        return info

    def group(self, info: CampaignInfo, gid: int) -> Group | None:
        g = info.groups.get(gid)
        if g is None and info.kind.assigned:
            g = self.campaign(info.id, refresh_groups=True).groups.get(gid)
        return g

    @staticmethod
    def _groups(conn: Connection, cid: str) -> dict[int, Group]:
        rows = conn.execute(sa.select(campaign_groups).where(campaign_groups.c.campaign_id == cid)).all()
        return {r.group_id: Group(r.group_id, r.name, r.domain_size, r.quota, r.public) for r in rows}

    def list_campaigns(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(campaigns.c.id, campaigns.c.name, campaigns.c.kind, campaigns.c.closed,
                                          campaigns.c.created_at, campaigns.c.archived_at)
                                .order_by(campaigns.c.created_at)).all()
        return [{"id": r.id, "name": r.name, "kind": r.kind, "closed": r.closed, "created_at": iso(r.created_at),
                 "archived_at": iso(r.archived_at)} for r in rows]

    def close(self, cid: str) -> None:
        self.campaign(cid)
        with write_tx(self.engine) as conn:
            conn.execute(sa.update(campaigns).where(campaigns.c.id == cid).values(closed=True))

    def archive(self, cid: str) -> dict[str, Any]:
        """Close and archive a campaign (``DELETE /campaigns/{id}``): its releases stay readable,
        reports, assignments, tokens and new releases are refused (410). Idempotent."""
        self.campaign(cid)
        with write_tx(self.engine) as conn:
            conn.execute(sa.update(campaigns).where(campaigns.c.id == cid, campaigns.c.archived_at.is_(None))
                         .values(closed=True, archived_at=now_s()))
        return self.status(cid)

    def archived_at(self, conn: Connection, cid: str) -> int | None:
        at: int | None = conn.execute(sa.select(campaigns.c.archived_at).where(campaigns.c.id == cid)).scalar_one()
        return at

    def check_not_archived(self, cid: str) -> None:
        with self.engine.connect() as conn:
            when = self.archived_at(conn, cid)
        if when is not None:
            raise Gone(f"the campaign was archived at {iso(when)}: its releases stay readable, nothing else")

    def is_open(self, conn: Connection, info: CampaignInfo, t: int) -> str | None:
        closed, archived_at = conn.exec_driver_sql(_sql(conn, "SELECT closed, archived_at FROM campaigns WHERE id = ?"),
                                                   (info.id,)).one()
        if archived_at is not None:
            return "the campaign is archived"
        return self._closed_reason(info, t, bool(closed))

    @staticmethod
    def _closed_reason(info: CampaignInfo, t: int, closed: bool) -> str | None:
        if closed:
            return "the campaign is closed"
        if info.opens_at is not None and t < info.opens_at:
            return f"the campaign opens at {iso(info.opens_at)}"
        if info.closes_at is not None and t >= info.closes_at:
            return f"the campaign closed at {iso(info.closes_at)}"
        return None

    def ingest_pipelined(self, info: CampaignInfo, batch: Batch, t: int, conn: Connection) -> Outcome | None:
        """PostgreSQL, a small batch of a campaign without tokens or assignments (the single-report
        writer's usual group): :meth:`ingest` in one or two round trips instead of eight.

        The same transaction as :meth:`store_batch` with ``dedup=False``, each round trip one
        simple-query message of several statements. Usually one (:meth:`_one_trip`): the writer
        remembers the aggregate rows its last commit left (:attr:`_written`) on the shard it keeps
        (:attr:`_sticky`), and the message inserts the reports and *compares and sets* the rows: it
        writes the new count and sums only where the count is still the one remembered, and fails
        the transaction otherwise (as it does for a closed or archived campaign). The count is the
        rows' version: every writer adds the reports it stores, so a row whose count is unchanged is
        unchanged. Otherwise, and after such a failure (then on another shard), two: the first reads
        the campaign's state, locks the aggregate rows and inserts the new reports (one
        ``INSERT ... SELECT`` per group slicing two ``bytea``: a ``COPY`` cannot share a message);
        the second adds the reports to the aggregates, counts them in their time bucket and commits.
        A closed or archived campaign rolls it back (nothing stored); a report stored before (a
        resend) aborts it and returns None: the caller runs :meth:`ingest`, whose deduplicating path
        finds it. The reports stored are recorded in :attr:`recent` once committed, as
        :meth:`ingest` does. ``conn``: the writer's own connection, outside any transaction.
        """
        import psycopg

        n = len(batch)
        status = np.full(n, NEW, dtype=np.int64)
        bucket = t - t % info.time_precision
        received = np.full(n, bucket, dtype=np.int64)
        if n == 1:
            first = inverse = np.zeros(1, dtype=np.int64)
            repeat = np.zeros(1, dtype=bool)
            todo = first
        else:
            view = np.ascontiguousarray(batch.ids).view("V16").ravel()
            _, first, inverse = np.unique(view, return_index=True, return_inverse=True)
            repeat = first[inverse] != np.arange(n)
            status[repeat] = DUPLICATE
            todo = np.flatnonzero(~repeat)
            todo = todo[np.argsort(view[todo], kind="stable")]  # append in random-id order, as store_batch
        parts = _by_group(batch, todo)
        c = info.id
        raw = conn.connection.driver_connection
        assert raw is not None  # an open connection's DBAPI connection
        idle = psycopg.pq.TransactionStatus.IDLE
        if raw.info.transaction_status != idle:  # not the writer's idle connection: the general path
            return None
        sums = []
        for gid, _, payloads in parts:
            group = info.groups[gid] if gid in info.groups else self.group(info, gid)
            assert group is not None
            sums.append(info.kind.support(group, payloads))
        shard = self._sticky if self._sticky is not None else next(self._shards)
        keys = [(c, gid, shard) for gid, _, _ in parts]
        if len(self._written) > _WRITTEN_ROWS:
            self._written.clear()
        known = [row for row in map(self._written.get, keys) if row is not None]
        if (parts and len(known) == len(keys) and _CAMPAIGN_ID.fullmatch(c) is not None
                and self._closed_reason(info, t, False) is None):
            done = self._one_trip(raw, batch, todo, parts, sums, known, bucket, shard, c)
            if done is None:  # a report stored before: the deduplicating path
                return None
            if done:
                self.recent.add(c, _id_keys(batch.ids[todo]))  # committed: the resend predictor learns them
                received[repeat] = received[first[inverse]][repeat]
                return Outcome(status, received)
            shard = next(self._shards)  # another writer wrote these rows (or the campaign closed): read them
        self._sticky = None
        for k in keys:
            self._written.pop(k, None)
        # client-side binding: each round trip is one simple-query message of several statements
        # (the server-side binding of the extended protocol takes one statement per message)
        head = ["BEGIN", "SELECT closed, archived_at FROM campaigns WHERE id = %s"]
        args: list[Any] = [c]
        for gid, _, _ in parts:
            head.append("SELECT n, support FROM aggregates WHERE campaign_id = %s AND group_id = %s AND shard = %s "
                        "FOR UPDATE")
            args += [c, gid, shard]
        for gid, at, payloads in parts:
            w = int(payloads.shape[1])
            head.append("INSERT INTO reports (campaign_id, report_id, group_id, payload, received) SELECT %s, "
                        "substring(%s FROM 16 * i + 1 FOR 16), %s, substring(%s FROM %s * i + 1 FOR %s), %s "
                        "FROM generate_series(0, %s - 1) AS k(i)")
            args += [c, np.ascontiguousarray(batch.ids[todo[at]]).tobytes(), gid, payloads.tobytes(), w, w, bucket,
                     int(at.size)]
        raw.autocommit = True  # BEGIN and COMMIT are sent inside the round trips, not as their own
        cur = psycopg.ClientCursor(raw)
        try:
            try:
                cur.execute("; ".join(head), args)
            except psycopg.errors.UniqueViolation:  # a report stored before: the deduplicating path
                cur.execute("ROLLBACK")
                return None
            cur.nextset()  # BEGIN's empty result
            row = cur.fetchone()
            assert row is not None  # the campaign exists (info was read from it)
            reason = "the campaign is archived" if row[1] is not None else self._closed_reason(info, t, bool(row[0]))
            if reason is not None:
                cur.execute("ROLLBACK")
                status[:] = ARCHIVED if reason == "the campaign is archived" else CLOSED
                return Outcome(status, received)
            tail: list[str] = []
            args = []
            written = {}
            for (gid, at, _), add in zip(parts, sums, strict=True):
                cur.nextset()
                old_n, old = cur.fetchone() or (0, b"")
                support = np.frombuffer(old, dtype="<i8") + add
                tail.append("UPDATE aggregates SET n = %s, support = %s WHERE campaign_id = %s AND group_id = %s "
                            "AND shard = %s")
                written[(c, gid, shard)] = (int(old_n) + int(at.size), support.astype(np.int64))
                args += [int(old_n) + int(at.size), support.astype("<i8").tobytes(), c, gid, shard]
            tail += ["INSERT INTO report_buckets (campaign_id, bucket, shard, n) VALUES (%s, %s, %s, %s) ON CONFLICT "
                     "(campaign_id, bucket, shard) DO UPDATE SET n = report_buckets.n + excluded.n", "COMMIT"]
            args += [c, int(bucket), int(shard), int(todo.size)]
            cur.execute("; ".join(tail), args)
            self.recent.add(c, _id_keys(batch.ids[todo]))  # committed: the resend predictor learns them
            self._written.update(written)
            self._sticky = shard
        except psycopg.OperationalError as exc:  # e.g. the connection was lost: as SQLAlchemy reports it
            raise sa.exc.OperationalError(None, None, exc) from exc
        finally:
            cur.close()
            if raw.info.transaction_status != idle and not raw.closed:  # an error inside the transaction
                try:
                    raw.execute("ROLLBACK")
                except psycopg.Error:  # the connection is broken: the writer drops it
                    pass
            if raw.info.transaction_status == idle:
                raw.autocommit = False
        received[repeat] = received[first[inverse]][repeat]
        return Outcome(status, received)

    def _one_trip(self, raw: Any, batch: Batch, todo: NDArray[np.int64],
                  parts: list[tuple[int, NDArray[np.int64], NDArray[np.uint8]]], sums: list[NDArray[np.int64]],
                  known: list[tuple[int, NDArray[np.int64]]], bucket: int, shard: int, c: str) -> bool | None:
        """:meth:`ingest_pipelined`'s transaction in one message, the aggregate rows compared and set.

        True: committed (:attr:`_written` holds the new rows). False: rolled back, nothing stored:
        the campaign is closed or archived, or an aggregate row's count is not the one remembered
        (another writer added to it). None: rolled back, a report was stored before.

        The message is plain SQL text without parameters, sent with libpq's ``PQexec`` (no
        client-side binding): every value in it is an integer, hex digits (``decode(..., 'hex')``
        for the ``bytea``) or the campaign id, a 16-hex-digit string (checked by the caller).
        Division by zero fails the transaction where PL/pgSQL would raise: a campaign that is
        closed or archived, an ``UPDATE`` that found no row of the remembered count.
        """
        import psycopg

        sql = [f"BEGIN; SELECT 1 / (NOT closed AND archived_at IS NULL)::integer FROM campaigns WHERE id = '{c}'"]
        written = {}
        for (gid, at, payloads), add, (old_n, old) in zip(parts, sums, known, strict=True):
            w, k = int(payloads.shape[1]), int(at.size)
            ids = np.ascontiguousarray(batch.ids[todo[at]]).tobytes().hex()
            sql.append(f"INSERT INTO reports (campaign_id, report_id, group_id, payload, received) SELECT '{c}', "
                       f"substring(decode('{ids}', 'hex') FROM 16 * i + 1 FOR 16), {gid:d}, "
                       f"substring(decode('{payloads.tobytes().hex()}', 'hex') FROM {w:d} * i + 1 FOR {w:d}), "
                       f"{bucket:d} FROM generate_series(0, {k - 1:d}) AS k(i)")
            support = (old + add).astype(np.int64)
            sql.append(f"WITH u AS (UPDATE aggregates SET n = {old_n + k:d}, support = decode("
                       f"'{support.astype('<i8').tobytes().hex()}', 'hex') WHERE campaign_id = '{c}' "
                       f"AND group_id = {gid:d} AND shard = {shard:d} AND n = {old_n:d} RETURNING 1) "
                       "SELECT 1 / count(*)::integer FROM u")
            written[(c, gid, shard)] = (old_n + k, support)
        sql.append(f"INSERT INTO report_buckets (campaign_id, bucket, shard, n) VALUES ('{c}', {bucket:d}, "
                   f"{shard:d}, {int(todo.size):d}) ON CONFLICT (campaign_id, bucket, shard) DO UPDATE SET "
                   "n = report_buckets.n + excluded.n; COMMIT")
        pgconn = raw.pgconn
        res = pgconn.exec_("; ".join(sql).encode("ascii"))
        if res.status == psycopg.pq.ExecStatus.COMMAND_OK:
            self._written.update(written)
            return True
        state = res.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
        for key in written:
            self._written.pop(key, None)
        if pgconn.status == psycopg.pq.ConnStatus.OK and pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            if pgconn.exec_(b"ROLLBACK").status != psycopg.pq.ExecStatus.COMMAND_OK:
                state = None
        if state == _UNIQUE_VIOLATION.encode():
            return None
        if state == b"22012":  # division by zero: closed or archived, or another writer's rows
            return False
        # anything else (the connection was lost, the commit's outcome unknown, ...): as SQLAlchemy
        # reports an error; the writer drops the connection and tries again (a resend finds its reports)
        raise sa.exc.OperationalError(None, None, psycopg.OperationalError(
            f"single-message report transaction failed (SQLSTATE {state!r})"))

    # -- enrollment tokens -----------------------------------------------------------------------
    def create_tokens(self, cid: str, count: int) -> list[str]:
        info = self.campaign(cid)
        self.check_not_archived(cid)
        if not info.enrollment:
            raise Conflict("this campaign does not use enrollment tokens (create it with enrollment: true)")
        tokens = [secrets.token_urlsafe(24) for _ in range(count)]
        with write_tx(self.engine) as conn:
            conn.execute(sa.insert(enrollment_tokens), [{"campaign_id": cid, "token_hash": token_hash(t),
                                                          "used": False} for t in tokens])
        return tokens

    # -- reports ---------------------------------------------------------------------------------
    def ingest(self, info: CampaignInfo, batch: Batch, t: int, *, conn: Connection | None = None) -> Outcome:
        """Store ``batch`` in its own writing transaction (the ingest thread's path).

        The reports are bulk-loaded first; when the load meets a report stored before (a resent
        batch, or a concurrent writer's), the transaction is rolled back and run again on the
        deduplicating path, so a batch without resent reports pays for no duplicate check. A batch
        whose sampled ids (:meth:`store_batch`) are stored goes to the deduplicating path at once.
        The reports stored are recorded in :attr:`recent` once committed.

        On PostgreSQL, for a campaign without tokens or assignments, the transaction is sent by its
        own statements (:meth:`_ingest_pg`: ``BEGIN`` and ``COMMIT`` inside the first and last
        messages); a batch of at most :data:`PG_INSERT_ROWS` reports is inserted by ``INSERT ...
        SELECT`` in those messages (:meth:`_small_pg`: two round trips, no ``COPY``, no sample).

        ``conn``: an open connection outside any transaction to run it on (the writer thread's own,
        :class:`Ingestor`); without it, one from the pool.
        """
        dedup = False
        own = self.engine.dialect.name == "postgresql" and not (info.enrollment or info.kind.assigned)
        for _ in range(5):
            try:
                got = self._ingest_pg(info, batch, t, conn, dedup=dedup) if own else None
                if got is not None:
                    out, new = got
                elif conn is None:
                    with write_tx(self.engine) as c:
                        out, new = self._store_batch(c, info, batch, t, dedup=dedup)
                else:
                    with conn.begin():
                        out, new = self._store_batch(conn, info, batch, t, dedup=dedup)
                self.recent.add(info.id, _id_keys(batch.ids[new]))
                return out
            except Resent:
                dedup = True
        raise Unavailable("the reports could not be stored while other writers stored the same ids; "
                          "send them again with the same report ids")

    def _ingest_pg(self, info: CampaignInfo, batch: Batch, t: int, conn: Connection | None, *, dedup: bool
                   ) -> tuple[Outcome, NDArray[np.int64]] | None:
        """PostgreSQL, a campaign without tokens or assignments: :meth:`_store_batch` in a
        transaction its own statements begin and end, on the DBAPI connection in autocommit mode.

        ``BEGIN`` travels with the transaction's first statement and ``COMMIT`` with its last
        (one message each, parameters bound client-side), so the transaction takes the round trips
        of the reference bulk load (``BEGIN``, ``COPY``, ``COMMIT``) and none of SQLAlchemy's
        transaction machinery. Anything left open (an error, a closed campaign, a unique violation:
        :class:`Resent`) is rolled back. Returns None when ``conn`` is inside a transaction already
        (the caller then takes the general path)."""
        import psycopg

        idle = psycopg.pq.TransactionStatus.IDLE
        with contextlib.ExitStack() as stack:
            c = conn if conn is not None else stack.enter_context(self.engine.connect())
            raw = c.connection.driver_connection
            assert raw is not None  # an open connection's DBAPI connection
            if c.in_transaction() or raw.info.transaction_status != idle:
                return None
            raw.autocommit = True  # BEGIN and COMMIT are sent inside the statements' messages
            try:
                if len(batch) <= PG_INSERT_ROWS:
                    return self._small_pg(c, info, batch, t, dedup=dedup)
                return self._store_batch(c, info, batch, t, dedup=dedup, own=True)
            except psycopg.Error as exc:  # e.g. a lost connection during the COPY: as SQLAlchemy reports it
                raise sa.exc.DBAPIError.instance(None, None, exc, psycopg.Error, hide_parameters=True,
                                                 dialect=c.dialect) from exc
            finally:
                if not raw.closed and raw.info.transaction_status != idle:  # not committed: nothing stored
                    try:
                        raw.execute("ROLLBACK")
                    except psycopg.Error:  # the connection is broken: the writer (or pre-ping) drops it
                        pass
                if not raw.closed and raw.info.transaction_status == idle:
                    raw.autocommit = False

    def store_batch(self, conn: Connection, info: CampaignInfo, batch: Batch, t: int, *,
                    dedup: bool = True) -> Outcome:
        """Append the new reports of ``batch`` and add them to the aggregates (inside ``conn``'s tx).

        ``dedup=False`` skips the full duplicate check and raises :class:`Resent` (the transaction
        is then unusable on PostgreSQL) when a report was stored before; see :meth:`ingest`. Even
        then, the transaction's first statement probes the reports :attr:`recent` predicts stored
        (they are then not loaded) and :data:`SAMPLE` of the others; when one of the sampled ones
        is stored, the batch takes the deduplicating path at once (every id probed).
        """
        return self._store_batch(conn, info, batch, t, dedup=dedup)[0]

    def _store_batch(self, conn: Connection, info: CampaignInfo, batch: Batch, t: int, *,
                     dedup: bool, own: bool = False) -> tuple[Outcome, NDArray[np.int64]]:
        """:meth:`store_batch`, also returning the rows stored, in id order. ``own``: PostgreSQL,
        ``conn``'s DBAPI connection is in autocommit mode outside any transaction; the first
        statement begins the transaction and the last commits it (:meth:`_ingest_pg`)."""
        n = len(batch)
        status, received, bucket, order, first, repeat = _start_outcome(batch, info, t)
        c = info.id
        pg = conn.dialect.name == "postgresql"
        checked = info.enrollment or info.kind.assigned  # known duplicates must not consume their tokens
        predicted = sample = np.zeros(0, dtype=np.int64)  # rows, in id order
        if not dedup and not checked:
            cand = order[~repeat[order]]
            known = self.recent.find(c, _id_keys(batch.ids[cand]))
            predicted, rest = cand[known], cand[~known]
            sample = rest if rest.size <= SAMPLE else rest[np.linspace(0, rest.size - 1, SAMPLE).astype(np.int64)]
        shard = next(self._shards)
        locked: dict[int, tuple[int, bytes]] = {}  # PostgreSQL: group -> its aggregate row (n, support), locked
        if pg:
            reason, hits, found, when, locked = self._open_pg(conn, info, t, batch, predicted, sample, shard, repeat,
                                                              begin=own)
        else:
            reason, hits, found, when, stored_rows = self._open_sqlite(conn, info, t, batch, predicted, sample)
        if reason is not None:
            status[:] = ARCHIVED if reason == "the campaign is archived" else CLOSED
            return Outcome(status, received), np.zeros(0, dtype=np.int64)
        if hits:  # a stored report the predictor did not know: probe them all
            dedup = True
        else:
            status[predicted[found]] = DUPLICATE
            received[predicted[found]] = when
        if checked:
            ids_b = [bytes(r) for r in batch.ids]
            cand = np.flatnonzero(~repeat)
            existing = self._existing(conn, c, [ids_b[i] for i in cand])
            for i in cand:
                if ids_b[i] in existing:
                    status[i] = DUPLICATE
                    received[i] = existing[ids_b[i]]
        if info.enrollment and info.kind.assigned:  # an assignment serves only the token it was issued to
            self._check_binding(conn, c, batch.tokens or [""] * n, batch.assignments or [""] * n, status)
        if info.enrollment:
            self._consume(conn, enrollment_tokens, c, batch.tokens or [""] * n, status, BAD_TOKEN, None, batch.groups)
        if info.kind.assigned:
            self._consume(conn, assignments, c, batch.assignments or [""] * n, status, BAD_ASSIGNMENT,
                          assignments.c.group_id, batch.groups)
        todo = order[status[order] == NEW]  # append in random-id order, not arrival order
        stored, when = _append(conn, c, batch, todo, bucket, dedup=dedup,
                               stored_rows=0 if pg else stored_rows)  # stored before
        status[stored] = DUPLICATE
        received[stored] = when
        new_mask = status == NEW
        if new_mask.any():
            sums = self._group_sums(info, batch, new_mask)
            if pg:
                self._add_pg(conn, c, shard, locked, sums, int(bucket), int(new_mask.sum()), commit=own)
            else:
                self._add_sqlite(conn, c, shard, sums, int(bucket), int(new_mask.sum()))
        elif own:  # nothing stored: release the aggregate rows' locks without a commit to flush
            with _cursor(conn) as cur:
                cur.execute("ROLLBACK")
        # duplicates of a report earlier in this same batch share its receipt
        received[repeat] = received[first][repeat]
        dup_of_new = repeat & (status[first] != NEW) & (status[first] != DUPLICATE)
        status[dup_of_new] = status[first][dup_of_new]
        return Outcome(status, received), order[new_mask[order]]

    def _group_sums(self, info: CampaignInfo, batch: Batch, new_mask: NDArray[np.bool_]
                    ) -> list[tuple[int, int, NDArray[np.int64]]]:
        """Per group with new reports (``new_mask``): its id, their number and their support sums."""
        sums: list[tuple[int, int, NDArray[np.int64]]] = []
        one = len(batch.rows_by_group) == 1  # then a row's index is its index in its group's payloads
        for gid in (list(batch.rows_by_group) if one else np.unique(batch.groups[new_mask]).tolist()):
            if one:
                take = np.flatnonzero(new_mask)
            else:
                in_group = batch.groups == gid
                rows_in_group = np.cumsum(in_group) - 1  # index of each row inside its group's payload array
                take = rows_in_group[new_mask & in_group]
            group = info.groups[gid] if gid in info.groups else self.group(info, gid)
            assert group is not None
            sums.append((gid, int(take.size), info.kind.support(group, batch.rows_by_group[gid][take])))
        return sums

    def _small_pg(self, conn: Connection, info: CampaignInfo, batch: Batch, t: int, *, dedup: bool
                  ) -> tuple[Outcome, NDArray[np.int64]]:
        """PostgreSQL, a batch of at most :data:`PG_INSERT_ROWS` reports of a campaign without tokens
        or assignments: :meth:`_store_batch` in two messages, without a ``COPY``.

        ``conn``'s DBAPI connection is in autocommit mode outside any transaction
        (:meth:`_ingest_pg`). The first message begins the transaction, runs the first statement of
        :meth:`_open_pg` (campaign state, aggregate rows locked, probe of the reports
        :attr:`recent` predicts stored) and inserts every other distinct report (``INSERT ... SELECT``
        slicing two ``bytea``). A report among those stored before (by another process, before a
        restart, or by a concurrent writer) makes the insert fail: :class:`Resent`, and the caller
        runs it again with ``dedup=True``, where every distinct report is probed and none inserted
        by the first message. The second message inserts the predicted reports found not stored,
        updates the aggregates and the time bucket and commits. A closed or archived campaign rolls
        the transaction back (:meth:`_ingest_pg`): nothing stored.
        """
        import psycopg

        status, received, bucket, order, first, repeat = _start_outcome(batch, info, t)
        c = info.id
        cand = order[~repeat[order]]  # distinct reports, in id order
        if dedup:
            predicted, rest = cand, cand[:0]
        else:
            known = self.recent.find(c, _id_keys(batch.ids[cand]))
            predicted, rest = cand[known], cand[~known]
        shard = next(self._shards)
        gids = list(batch.rows_by_group) if len(batch.rows_by_group) == 1 else np.unique(batch.groups[cand]).tolist()
        sql, params = _pg_open_sql(c, batch, predicted, predicted[:0], shard, gids)
        inserts, more = _pg_insert_sql(batch, rest, int(bucket), "a")
        params.update(more)
        with _cursor(conn, client=True) as cur:
            try:
                cur.execute("; ".join(["BEGIN", sql, *inserts]), params)
            except psycopg.errors.UniqueViolation:  # a report stored before: the deduplicating path
                raise Resent("some reports were stored before") from None
            cur.nextset()  # BEGIN's empty result
            reason, _, found, when, locked = self._pg_opened(info, t, cur.fetchall())
            if reason is not None:
                status[:] = ARCHIVED if reason == "the campaign is archived" else CLOSED
                return Outcome(status, received), cand[:0]
            status[predicted[found]] = DUPLICATE
            received[predicted[found]] = when
            new_mask = status == NEW
            if not new_mask.any():  # nothing stored: release the locks without a commit to flush
                cur.execute("ROLLBACK")
            else:
                keep = np.ones(predicted.size, dtype=bool)
                keep[found] = False
                late, late_params = _pg_insert_sql(batch, predicted[keep], int(bucket), "b")
                sql, params = _pg_add_sql(c, shard, locked, self._group_sums(info, batch, new_mask), int(bucket),
                                          int(new_mask.sum()))
                params.update(late_params)
                try:
                    cur.execute("; ".join([*late, sql, "COMMIT"]), params)
                except psycopg.errors.UniqueViolation:  # stored by a concurrent writer since the probe
                    raise Resent("some reports were stored before") from None
        received[repeat] = received[first][repeat]
        return Outcome(status, received), order[new_mask[order]]

    def _open_pg(self, conn: Connection, info: CampaignInfo, t: int, batch: Batch, predicted: NDArray[np.int64],
                 sample: NDArray[np.int64], shard: int, repeat: NDArray[np.bool_], *, begin: bool = False
                 ) -> tuple[str | None, int, NDArray[np.int64], NDArray[np.int64], dict[int, tuple[int, bytes]]]:
        """PostgreSQL, the transaction's first statement (one round trip): whether the campaign is
        open; which of the ``predicted`` rows are stored (positions in ``predicted``) and when; how
        many of the ``sample`` rows are stored; and the batch's groups' aggregate rows of
        ``shard``, locked (``FOR UPDATE``, in group order) and read for :meth:`_add_pg`.

        It also turns JIT compilation off for the transaction (the duplicate probe of a large
        batch passes the JIT threshold; compiling costs more than it saves). ``begin``: the
        connection is in autocommit mode; ``BEGIN`` is sent with the statement, in one message."""
        gids = list(batch.rows_by_group) if len(batch.rows_by_group) == 1 else np.unique(batch.groups[~repeat]).tolist()
        sql, params = _pg_open_sql(info.id, batch, predicted, sample, shard, gids)
        with _cursor(conn, client=begin) as cur:
            cur.execute(("BEGIN; " if begin else "") + sql, params)
            if begin:
                cur.nextset()  # BEGIN's empty result
            return self._pg_opened(info, t, cur.fetchall())

    def _pg_opened(self, info: CampaignInfo, t: int, rows: list[Any]
                   ) -> tuple[str | None, int, NDArray[np.int64], NDArray[np.int64], dict[int, tuple[int, bytes]]]:
        """The rows of :func:`_pg_open_sql` as :meth:`_open_pg` returns them."""
        closed, archived_at, hits, at, when = rows[0][:5]
        found, stored_at = _positions(at, when)
        locked = {int(r[5]): (int(r[6]), bytes(r[7])) for r in rows if r[5] is not None}
        reason = "the campaign is archived" if archived_at is not None else self._closed_reason(info, t, bool(closed))
        return reason, int(hits), found, stored_at, locked

    def _open_sqlite(self, conn: Connection, info: CampaignInfo, t: int, batch: Batch, predicted: NDArray[np.int64],
                     sample: NDArray[np.int64]) -> tuple[str | None, int, NDArray[np.int64], NDArray[np.int64], int]:
        """SQLite, the transaction's first statements (:meth:`_open_pg` without the lock: the
        transaction holds the database's write lock), on the DBAPI cursor; also returns the number
        of reports the campaign holds (its aggregates' count, for :func:`_sqlite_insert`)."""
        hits = 0
        found = when = np.zeros(0, dtype=np.int64)
        with _cursor(conn) as cur:
            closed, archived_at, stored_rows = cur.execute(
                "SELECT closed, archived_at, (SELECT total(n) FROM aggregates WHERE campaign_id = ?) FROM campaigns "
                "WHERE id = ?", (info.id, info.id)).fetchone()
            reason = "the campaign is archived" if archived_at is not None else \
                self._closed_reason(info, t, bool(closed))
            if reason is None:
                if sample.size:
                    hits = cur.execute(_SQLITE_ROWS + _SQLITE_SAMPLE, (
                        int(sample.size), info.id, np.ascontiguousarray(batch.ids[sample]).tobytes())).fetchone()[0]
                if predicted.size and not hits:
                    found, when = _sqlite_probe(cur, info.id, batch, predicted)
        return reason, int(hits), found, when, int(stored_rows)

    @staticmethod
    def _add_pg(conn: Connection, cid: str, shard: int, locked: dict[int, tuple[int, bytes]],
                sums: list[tuple[int, int, NDArray[np.int64]]], bucket: int, n_new: int, *,
                commit: bool = False) -> None:
        """PostgreSQL: the aggregate rows read and locked by :meth:`_open_pg` get the new reports'
        counts and sums, and the time bucket its count, in one statement (``commit``: followed by
        ``COMMIT`` in the same message)."""
        sql, params = _pg_add_sql(cid, shard, locked, sums, bucket, n_new)
        with _cursor(conn, client=commit) as cur:
            cur.execute(sql + ("; COMMIT" if commit else ""), params)

    @staticmethod
    def _existing(conn: Connection, cid: str, ids: list[bytes]) -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        for s in range(0, len(ids), _CHUNK):
            rows = conn.execute(sa.select(reports.c.report_id, reports.c.received).where(
                reports.c.campaign_id == cid, reports.c.report_id.in_(ids[s:s + _CHUNK]))).all()
            out.update({bytes(r[0]): int(r[1]) for r in rows})
        return out

    @staticmethod
    def _check_binding(conn: Connection, cid: str, tokens: list[str], assigns: list[str],
                       status: NDArray[np.int64]) -> None:
        """NEW rows whose assignment was not issued to their enrollment token get BAD_ASSIGNMENT."""
        todo = np.flatnonzero(status == NEW).tolist()
        want = {i: token_hash(assigns[i]) for i in todo if assigns[i]}
        bound: dict[bytes, bytes | None] = {}
        hashes = list(set(want.values()))
        for s in range(0, len(hashes), _CHUNK):
            rows = conn.execute(sa.select(assignments.c.token_hash, assignments.c.enrollment_hash).where(
                assignments.c.campaign_id == cid, assignments.c.token_hash.in_(hashes[s:s + _CHUNK]))).all()
            bound.update({bytes(r[0]): (bytes(r[1]) if r[1] is not None else None) for r in rows})
        for i in todo:
            owner = bound.get(want.get(i, b""))
            if owner is None or not tokens[i] or owner != token_hash(tokens[i]):
                status[i] = BAD_ASSIGNMENT

    @staticmethod
    def _consume(conn: Connection, table: sa.Table, cid: str, tokens: list[str], status: NDArray[np.int64],
                 bad: int, group_col: Any, groups: NDArray[np.int64]) -> None:
        """Mark one-time tokens used for the NEW rows; rows without a valid unused token get ``bad``."""
        todo = np.flatnonzero(status == NEW)
        hashes = {i: token_hash(tokens[i]) if tokens[i] else b"" for i in todo}
        seen: set[bytes] = set()
        for i in todo:  # a token used twice in one batch: only its first report may have it
            h = hashes[i]
            if not h or h in seen:
                status[i] = bad
            seen.add(h)
        keys = sorted({(int(groups[i]) if group_col is not None else 0) for i in todo if status[i] == NEW})
        for g in keys:
            rows = [i for i in todo if status[i] == NEW and (group_col is None or int(groups[i]) == g)]
            got: set[bytes] = set()
            for s in range(0, len(rows), _CHUNK):
                part = [hashes[i] for i in rows[s:s + _CHUNK]]
                cond = [table.c.campaign_id == cid, table.c.token_hash.in_(part), table.c.used == sa.false()]
                if group_col is not None:
                    cond.append(group_col == g)
                res = conn.execute(sa.update(table).where(*cond).values(used=True).returning(table.c.token_hash))
                got.update(bytes(r[0]) for r in res)
            for i in rows:
                if hashes[i] not in got:
                    status[i] = bad

    @staticmethod
    def _add_sqlite(conn: Connection, cid: str, shard: int, sums: list[tuple[int, int, NDArray[np.int64]]],
                    bucket: int, n_new: int) -> None:
        """SQLite: the new reports' counts and sums added to the aggregate rows of ``shard`` (the
        writer holds the database), and the time bucket's count, on the DBAPI cursor."""
        with _cursor(conn) as cur:
            for gid, k, add in sums:
                key = (cid, gid, shard)
                old_n, old = cur.execute("SELECT n, support FROM aggregates WHERE campaign_id = ? AND group_id = ? "
                                         "AND shard = ?", key).fetchone()
                support = (np.frombuffer(old, dtype="<i8") + add).astype("<i8").tobytes()
                cur.execute("UPDATE aggregates SET n = ?, support = ? WHERE campaign_id = ? AND group_id = ? "
                            "AND shard = ?", (int(old_n) + k, support, *key))
            cur.execute("INSERT INTO report_buckets (campaign_id, bucket, shard, n) VALUES (?, ?, ?, ?) ON CONFLICT "
                        "(campaign_id, bucket, shard) DO UPDATE SET n = report_buckets.n + excluded.n",
                        (cid, bucket, shard, n_new))

    # -- assignments (multi-phase campaigns) -----------------------------------------------------
    def assign(self, cid: str, count: int, tokens: list[str] | None = None) -> dict[str, Any]:
        """Assign arriving participants to the current phase's group(s), advancing phases.

        With enrollment: one assignment per enrollment token in ``tokens`` (unknown or used tokens
        refuse the request), bound to that token; a token's earlier outstanding assignment expires
        (one outstanding assignment per token). Without: ``count`` must be 1.
        """
        info = self.campaign(cid)
        if not info.kind.assigned:
            raise Conflict("this campaign does not assign groups: every participant reports over the public "
                           "partition in its configuration")
        if info.enrollment:
            if not tokens:
                raise Forbidden("this campaign binds each assignment to a participant's enrollment token: send "
                                "token (or tokens, one per participant)", "token")
            if len(set(tokens)) != len(tokens):
                raise Forbidden("each enrollment token may appear once", "tokens")
            count = len(tokens)
        elif tokens:
            raise Conflict("this campaign does not use enrollment tokens")
        elif count != 1:
            raise Forbidden("this campaign runs without enrollment: one assignment per request", "count")
        from privpub.service._spatial import LEVEL0, SpatialKind

        kind = info.kind
        assert isinstance(kind, SpatialKind)
        t = now_s()
        with write_tx(self.engine) as conn:
            stage = conn.execute(sa.select(campaigns.c.stage).where(campaigns.c.id == cid).with_for_update()
                                 ).scalar_one()
            reason = self.is_open(conn, info, t)
            if reason is not None:
                raise (Gone if reason == "the campaign is archived" else Conflict)(reason)
            bound: list[bytes] = []
            if tokens:
                bound = [token_hash(tok) for tok in tokens]
                valid: set[bytes] = set()
                for s in range(0, len(bound), _CHUNK):
                    valid.update(bytes(r[0]) for r in conn.execute(sa.select(enrollment_tokens.c.token_hash).where(
                        enrollment_tokens.c.campaign_id == cid, enrollment_tokens.c.token_hash.in_(
                            bound[s:s + _CHUNK]), enrollment_tokens.c.used == sa.false())).all())
                bad = [i for i, h in enumerate(bound) if h not in valid]
                if bad:
                    raise Forbidden(f"enrollment token {bad[0]} is unknown or already used",
                                    "token" if len(bound) == 1 else f"tokens[{bad[0]}]")
                # one outstanding assignment per token: an earlier one expires now (its place frees)
                for s in range(0, len(bound), _CHUNK):
                    conn.execute(sa.update(assignments).where(
                        assignments.c.campaign_id == cid, assignments.c.enrollment_hash.in_(bound[s:s + _CHUNK]),
                        assignments.c.used == sa.false(), assignments.c.expires_at > t).values(expires_at=t))
            groups = self._groups(conn, cid)
            for _ in range(16):  # advance through as many completed phases as needed
                current = [groups[0], groups[1]] if stage == 0 else [groups[LEVEL0 + stage - 1]]
                n, support = self._sums(conn, cid, [g.group_id for g in current])
                free = {g.group_id: self._free(conn, cid, g, n[g.group_id], t) for g in current}
                if sum(free.values()) > 0:
                    break
                if not all(g.quota is not None and n[g.group_id] >= g.quota for g in current):
                    missing = sum(max(0, (g.quota or 0) - n[g.group_id]) for g in current)
                    raise Unavailable(f"the current phase is waiting for {missing} outstanding reports; "
                                      "try again shortly")
                new = (kind.level0(groups[0], groups[1], n, support) if stage == 0
                       else kind.next_level(current[0], n[current[0].group_id], support[current[0].group_id]))
                self._add_group(conn, cid, kind, new, t)
                groups[new.group_id] = new
                stage += 1
                conn.execute(sa.update(campaigns).where(campaigns.c.id == cid).values(stage=stage))
                log.info("campaign %s advanced to phase %s", cid, new.name)
            else:  # pragma: no cover
                raise Unavailable("phases could not advance")
            out: list[dict[str, Any]] = []
            order = sorted(free, key=lambda gid: -free[gid])
            k = 0
            while len(out) < count and any(free[g] > 0 for g in order):
                gid = order[k % len(order)]
                k += 1
                if free[gid] > 0:
                    free[gid] -= 1
                    out.append({"assignment": secrets.token_urlsafe(24), "group": gid})
            ttl = int(info.spec["assignment_ttl"])
            if not info.enrollment:
                ttl = min(ttl, UNENROLLED_MAX_TTL)
            expires = t + ttl
            if out:
                conn.execute(sa.insert(assignments), [
                    {"campaign_id": cid, "token_hash": token_hash(a["assignment"]), "group_id": a["group"],
                     "expires_at": expires, "used": False, "enrollment_hash": bound[i] if bound else None}
                    for i, a in enumerate(out)])
        info.groups = groups
        used = sorted({a["group"] for a in out})
        return {"assignments": [dict(a, expires_at=iso(expires)) for a in out],
                "partitions": {str(g): groups[g].public for g in used},
                "cells": {str(g): groups[g].domain_size for g in used}}

    @staticmethod
    def _free(conn: Connection, cid: str, g: Group, n_reports: int, t: int) -> int:
        if g.quota is None:
            return 1 << 30
        outstanding = conn.execute(sa.select(sa.func.count()).select_from(assignments).where(
            assignments.c.campaign_id == cid, assignments.c.group_id == g.group_id,
            assignments.c.used == sa.false(), assignments.c.expires_at > t)).scalar_one()
        return max(0, g.quota - n_reports - int(outstanding))

    # -- reading ---------------------------------------------------------------------------------
    @staticmethod
    def _sums(conn: Connection, cid: str, gids: Iterable[int] | None = None
              ) -> tuple[dict[int, int], dict[int, NDArray[np.int64]]]:
        cond = [aggregates.c.campaign_id == cid]
        if gids is not None:
            cond.append(aggregates.c.group_id.in_(list(gids)))
        rows = conn.execute(sa.select(aggregates.c.group_id, aggregates.c.n, aggregates.c.support).where(*cond)).all()
        n: dict[int, int] = {}
        support: dict[int, NDArray[np.int64]] = {}
        for r in rows:
            n[r.group_id] = n.get(r.group_id, 0) + int(r.n)
            arr = np.frombuffer(r.support, dtype="<i8").astype(np.int64)
            support[r.group_id] = support[r.group_id] + arr if r.group_id in support else arr
        return n, support

    def status(self, cid: str) -> dict[str, Any]:
        info = self.campaign(cid, refresh_groups=True)
        t = now_s()
        with self.engine.connect() as conn:
            n, _ = self._sums(conn, cid)
            reason = self.is_open(conn, info, t)
            buckets = conn.execute(sa.select(report_buckets.c.bucket, sa.func.sum(report_buckets.c.n))
                                   .where(report_buckets.c.campaign_id == cid).group_by(report_buckets.c.bucket)
                                   .order_by(report_buckets.c.bucket)).all()
            n_rel = conn.execute(sa.select(sa.func.count()).select_from(releases)
                                 .where(releases.c.campaign_id == cid)).scalar_one()
        total = sum(n.values())
        with self.engine.connect() as conn:
            archived = self.archived_at(conn, cid)
        return {"id": cid, "name": info.name, "kind": info.kind.kind, "open": reason is None,
                "archived_at": iso(archived),
                "state": "open" if reason is None else reason, "n_reports": total, "min_reports": info.min_reports,
                "publishable": total >= info.min_reports, "n_releases": int(n_rel),
                "groups": [{"group": g.group_id, "name": g.name, "cells": g.domain_size, "quota": g.quota,
                            "reports": n.get(g.group_id, 0)} for g in sorted(info.groups.values(),
                                                                           key=lambda g: g.group_id)],
                "reports_over_time": [{"time": iso(int(b)), "reports": int(k)} for b, k in buckets]}

    # -- releases --------------------------------------------------------------------------------
    def make_release(self, cid: str) -> dict[str, Any]:
        info = self.campaign(cid, refresh_groups=True)
        self.check_not_archived(cid)
        with self.engine.connect() as raw:
            conn = raw.execution_options(isolation_level="REPEATABLE READ") if raw.dialect.name == "postgresql" else raw
            tx = conn.begin()
            n, support = self._sums(conn, cid)
            total = sum(n.values())
            if total < info.min_reports:
                raise Conflict(f"the campaign has {total} reports, below its minimum of {info.min_reports}; "
                               "nothing is published until the minimum is reached")
            payloads = None
            if info.kind.needs_payloads:
                rows = conn.execute(sa.select(reports.c.group_id, reports.c.payload).where(reports.c.campaign_id == cid)
                                    .order_by(reports.c.report_id)).all()
                payloads = {}
                for gid, g in info.groups.items():
                    w = info.kind.width(g)
                    buf = b"".join(r.payload for r in rows if r.group_id == gid)
                    payloads[gid] = np.frombuffer(buf, dtype=np.uint8).reshape(-1, w)
            bins = self._size_bins(conn, info) if info.kind.needs_size_bins else None
            groups = [info.groups[k] for k in sorted(info.groups)]
            tx.commit()
        if bins is not None:  # the release is computed from exactly the reports read
            n = {gid: b.n for gid, b in bins.items()}
            total = sum(n.values())
        if payloads is not None:  # the release is computed from exactly the reports read
            n = {gid: int(p.shape[0]) for gid, p in payloads.items()}
            total = sum(n.values())
        try:
            result, params, ledger = info.kind.release(ReleaseInput(cid, groups, n, support, payloads, bins))
        except SpecError as exc:
            raise Conflict(exc.message) from None
        rid = secrets.token_hex(8)
        t = now_s()
        record = {"id": rid, "campaign_id": cid, "created_at": t, "n_reports": total, "epsilon": info.kind.epsilon,
                  "kind": info.kind.kind, "params": params, "ledger": ledger.to_records(), "result": result}
        with write_tx(self.engine) as conn:
            conn.execute(sa.insert(releases).values(**record))
        return self._release_json(record, info)

    @staticmethod
    def _size_bins(conn: Connection, info: CampaignInfo) -> dict[int, Any]:
        """The stored reports per group, summarised by :meth:`Kind.size_bins` in chunks of about
        16 MiB (memory O(domain), not O(reports))."""
        out: dict[int, Any] = {}
        for gid, g in info.groups.items():
            width = info.kind.width(g)
            chunk = max(1024, (16 << 20) // max(width, 1))
            rows = conn.execute(sa.select(reports.c.payload).where(reports.c.campaign_id == info.id,
                                                                   reports.c.group_id == gid)
                                .execution_options(yield_per=chunk))
            for part in rows.partitions():
                arr = np.frombuffer(b"".join(r[0] for r in part), dtype=np.uint8).reshape(-1, width)
                b = info.kind.size_bins(g, arr)
                out[gid] = out[gid] + b if gid in out else b
        return out

    def _release_json(self, rec: dict[str, Any], info: CampaignInfo) -> dict[str, Any]:
        out = {"id": rec["id"], "campaign_id": rec["campaign_id"], "kind": rec["kind"],
               "created_at": iso(rec["created_at"]), "n_reports": int(rec["n_reports"]),
               "epsilon": float(rec["epsilon"]), "ledger": rec["ledger"],
               "ledger_total": _ledger_total(rec["epsilon"], rec["ledger"]),
               "ledger_explained": _ledger_explained(rec["epsilon"], rec["ledger"]),
               "params": rec["params"], "privacy": info.kind.privacy_words()}
        out.update(rec["result"])
        return out

    def releases(self, cid: str) -> list[dict[str, Any]]:
        info = self.campaign(cid)
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(releases.c.id, releases.c.created_at, releases.c.n_reports)
                                .where(releases.c.campaign_id == cid).order_by(releases.c.created_at, releases.c.id)
                                ).all()
        del info
        return [{"id": r.id, "created_at": iso(r.created_at), "n_reports": int(r.n_reports)} for r in rows]

    def release(self, cid: str, rid: str | None) -> dict[str, Any]:
        info = self.campaign(cid)
        q = sa.select(releases).where(releases.c.campaign_id == cid)
        q = q.where(releases.c.id == rid) if rid is not None else q.order_by(releases.c.created_at.desc(),
                                                                              releases.c.id.desc()).limit(1)
        with self.engine.connect() as conn:
            row = conn.execute(q).first()
        if row is None:
            raise NotFound("no such release" if rid else "this campaign has no release yet")
        return self._release_json(dict(row._mapping), info)


def _ledger_total(epsilon: float, records: list[dict[str, Any]]) -> float:
    from privpub.core import BudgetLedger

    return BudgetLedger.from_records(float(epsilon), records).total


def _ledger_explained(epsilon: float, records: list[dict[str, Any]]) -> str:
    """How the ledger total composes, in words (:meth:`privpub.core.BudgetLedger.explain`)."""
    from privpub.core import BudgetLedger

    return BudgetLedger.from_records(float(epsilon), records).explain()


#: where a unit's outcome goes: a thread's future, or an event loop and one of its futures
_Waiter = concurrent.futures.Future[Outcome] | tuple[asyncio.AbstractEventLoop, "asyncio.Future[Outcome]"]
_Unit = tuple[CampaignInfo, Batch, _Waiter]


def _resolve(done: list[tuple[asyncio.Future[Outcome], Outcome | BaseException]]) -> None:
    """On the event loop: settle the futures of one commit (a request that timed out is left alone)."""
    for fut, result in done:
        if fut.done():
            continue
        if isinstance(result, BaseException):
            fut.set_exception(result)
        else:
            fut.set_result(result)


class Ingestor:
    """One writer thread per process: merges concurrent requests' reports into one transaction.

    :meth:`submit` enqueues a validated :class:`Batch` and returns a future resolved with its
    :class:`Outcome` once the transaction that stored it has committed; :meth:`submit_async`
    does the same from an event loop with an asyncio future: the writer settles all of one
    loop's futures of a commit with a single wake-up of that loop (not one per request).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        # The writer's own long-lived connection: no pool checkout (PostgreSQL: no pre-ping round
        # trip) and no reset per transaction; dropped after an error and opened again on next use.
        self._conn: Connection | None = None
        self._q: queue.SimpleQueue[_Unit | None] = queue.SimpleQueue()  # C: no lock or condition in Python
        self._last = 0  # requests in the last group
        self._thread = threading.Thread(target=self._run, name="privpub-ingestor", daemon=True)
        self._thread.start()

    def submit(self, info: CampaignInfo, batch: Batch) -> concurrent.futures.Future[Outcome]:
        fut: concurrent.futures.Future[Outcome] = concurrent.futures.Future()
        self._q.put((info, batch, fut))
        return fut

    def submit_async(self, info: CampaignInfo, batch: Batch) -> asyncio.Future[Outcome]:
        """:meth:`submit` for a caller on the running event loop."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Outcome] = loop.create_future()
        self._q.put((info, batch, (loop, fut)))
        return fut

    def stop(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._drop()

    def _connection(self) -> Connection:
        if self._conn is None:
            self._conn = self.store.engine.connect().execution_options(privpub_write=True)
        return self._conn

    def _drop(self) -> None:
        """Close the writer's connection (after an error its state is unknown: it is invalidated)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:  # already broken: nothing more to release
                pass

    def _run(self) -> None:
        while True:
            first = self._q.get()
            if first is None:
                return
            units = [first]
            rows = len(first[1])
            # under concurrent load (the last group had several requests), wait a moment for more
            # to join a small group: the writer's cost is per transaction, not per report
            linger = time.monotonic() + LINGER_SECONDS if self._last > 1 else 0.0
            while rows < MAX_TX_ROWS:
                try:
                    wait = linger - time.monotonic() if rows < LINGER_ROWS else 0.0
                    nxt = self._q.get(timeout=wait) if wait > 0 else self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._q.put(None)
                    break
                units.append(nxt)
                rows += len(nxt[1])
            self._last = len(units)
            by_campaign: dict[str, list[_Unit]] = {}
            for u in units:
                by_campaign.setdefault(u[0].id, []).append(u)
            for group in by_campaign.values():
                self._commit(group)

    def _commit(self, units: list[_Unit]) -> None:
        info = units[0][0]
        merged = _merge([u[1] for u in units])
        out: Outcome | None = None
        last: BaseException | None = None
        for attempt in range(3):
            try:
                conn, t = self._connection(), now_s()
                out = None
                if (conn.dialect.name == "postgresql" and len(merged) <= PIPELINED_ROWS
                        and not info.enrollment and not info.kind.assigned):
                    out = self.store.ingest_pipelined(info, merged, t, conn)
                if out is None:
                    out = self.store.ingest(info, merged, t, conn=conn)
                break
            except sa.exc.OperationalError as exc:  # deadlock, lock timeout, lost connection: try again
                last = exc
                self._drop()
                log.warning("report transaction failed (attempt %d): %s", attempt + 1, type(exc).__name__)
                time.sleep(0.05 * (attempt + 1))
            except Exception as exc:  # logged without the reports' content
                last = exc
                self._drop()
                log.error("report transaction failed: %s", type(exc).__name__)
                break
        results: list[Outcome | BaseException] = []
        start = 0
        for _, batch, _ in units:
            k = len(batch)
            results.append(Outcome(out.status[start:start + k], out.received[start:start + k]) if out is not None
                           else last or RuntimeError("report transaction failed"))
            start += k
        loops: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Outcome], Outcome | BaseException]]] = {}
        for (_, _, waiter), result in zip(units, results, strict=True):
            if isinstance(waiter, tuple):
                loops.setdefault(waiter[0], []).append((waiter[1], result))
            elif isinstance(result, BaseException):
                waiter.set_exception(result)
            else:
                waiter.set_result(result)
        for loop, done in loops.items():
            try:
                loop.call_soon_threadsafe(_resolve, done)
            except RuntimeError:  # the loop is closed (shutdown): nobody waits any more
                pass


def load_reports(engine: Engine, cid: str) -> dict[int, tuple[NDArray[np.uint8], NDArray[np.uint8]]]:
    """Every stored report of a campaign, per group: ``(report ids (n, 16), payloads (n, width))``.

    For audits and offline recomputation by the operator (never exposed over HTTP).
    """
    with engine.connect() as conn:
        groups = Store._groups(conn, cid)
        spec = conn.execute(sa.select(campaigns.c.spec).where(campaigns.c.id == cid)).scalar_one()
        rows = conn.execute(sa.select(reports.c.group_id, reports.c.report_id, reports.c.payload)
                            .where(reports.c.campaign_id == cid).order_by(reports.c.report_id)).all()
    kind = make_kind(spec)
    out = {}
    for gid, g in groups.items():
        sel = [r for r in rows if r.group_id == gid]
        ids = np.frombuffer(b"".join(r.report_id for r in sel), dtype=np.uint8).reshape(-1, 16)
        pay = np.frombuffer(b"".join(r.payload for r in sel), dtype=np.uint8).reshape(-1, kind.width(g))
        out[gid] = (ids, pay)
    return out

