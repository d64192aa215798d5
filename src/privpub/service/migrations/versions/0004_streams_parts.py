"""Streams against hostile participants and careless operators (issue 22): incremental state,
archived streams, readers' query log.

* ``stream_parts``: the time-indexed part of each write's state delta (released node values and
  noisy prefix sums of the steps it closed); ``streams.state`` keeps only the small head. A write
  costs O(steps closed), not O(window). Existing streams are converted: their full state becomes
  one part and a head (the released noise is kept bit for bit, never redrawn).
* ``streams.closed_at``: ``DELETE /streams/{id}`` closes and archives a stream (released data stays
  queryable; ingest stops).
* ``streams.reader_token_hash``, ``queries_from``, ``log_per_client``: which queries feed the
  HQ publishers' query log (NULL on older streams: anyone, as before).

Revision ID: 0004_streams_parts
Revises: 0003_streams
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_streams_parts"
down_revision = "0003_streams"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stream_parts",
        sa.Column("stream_id", sa.String(32), sa.ForeignKey("streams.id"), primary_key=True),
        sa.Column("t_end", sa.BigInteger, primary_key=True),
        sa.Column("t_from", sa.BigInteger, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    with op.batch_alter_table("streams") as batch:
        batch.add_column(sa.Column("closed_at", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("reader_token_hash", sa.LargeBinary(32), nullable=True))
        batch.add_column(sa.Column("queries_from", sa.String(16), nullable=True))
        batch.add_column(sa.Column("log_per_client", sa.BigInteger, nullable=True))
    # convert each stream's full state into a head and one part (same bytes of released noise)
    from privpub.service._streams import pack_state, unpack_state
    from privpub.stream import split_state

    conn = op.get_bind()
    streams = sa.table("streams", sa.column("id", sa.String), sa.column("state", sa.LargeBinary))
    parts = sa.table("stream_parts", sa.column("stream_id", sa.String), sa.column("t_end", sa.BigInteger),
                     sa.column("t_from", sa.BigInteger), sa.column("data", sa.LargeBinary))
    for sid, blob in conn.execute(sa.select(streams.c.id, streams.c.state)).all():
        head, part = split_state(unpack_state(bytes(blob)))
        conn.execute(sa.insert(parts).values(stream_id=sid, t_end=part["t"], t_from=part["arrays_from"],
                                             data=pack_state(part)))
        conn.execute(sa.update(streams).where(streams.c.id == sid).values(state=pack_state(head)))


def downgrade() -> None:
    from privpub.service._streams import pack_state, unpack_state
    from privpub.stream import join_state

    conn = op.get_bind()
    streams = sa.table("streams", sa.column("id", sa.String), sa.column("state", sa.LargeBinary))
    parts = sa.table("stream_parts", sa.column("stream_id", sa.String), sa.column("t_end", sa.BigInteger),
                     sa.column("data", sa.LargeBinary))
    for sid, blob in conn.execute(sa.select(streams.c.id, streams.c.state)).all():
        rows = conn.execute(sa.select(parts.c.data).where(parts.c.stream_id == sid).order_by(parts.c.t_end)).all()
        full = join_state(unpack_state(bytes(blob)), [unpack_state(bytes(r.data)) for r in rows])
        conn.execute(sa.update(streams).where(streams.c.id == sid).values(state=pack_state(full)))
    with op.batch_alter_table("streams") as batch:
        batch.drop_column("log_per_client")
        batch.drop_column("queries_from")
        batch.drop_column("reader_token_hash")
        batch.drop_column("closed_at")
    op.drop_table("stream_parts")
