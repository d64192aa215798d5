"""Real-time streams (issue 16): streams, stream_batches, stream_queries.

Revision ID: 0003_streams
Revises: 0002_budget_sessions
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_streams"
down_revision = "0002_budget_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "streams",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("epsilon", sa.Float, nullable=False),
        sa.Column("step_seconds", sa.Float, nullable=True),
        sa.Column("origin", sa.Float, nullable=True),
        sa.Column("late", sa.String(16), nullable=False),
        sa.Column("horizon", sa.BigInteger, nullable=True),
        sa.Column("session", sa.String(200), nullable=True),
        sa.Column("producer_token_hash", sa.LargeBinary(32), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("t", sa.BigInteger, nullable=False),
        sa.Column("state", sa.LargeBinary, nullable=False),
        sa.Column("open_count", sa.BigInteger, nullable=False),
        sa.Column("open_since", sa.Float, nullable=False),
        sa.Column("log_seq", sa.BigInteger, nullable=False),
        sa.Column("true_total", sa.BigInteger, nullable=True),
    )
    op.create_table(
        "stream_batches",
        sa.Column("stream_id", sa.String(32), sa.ForeignKey("streams.id"), primary_key=True),
        sa.Column("batch_id", sa.String(64), primary_key=True),
        sa.Column("n_items", sa.BigInteger, nullable=False),
        sa.Column("received", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "stream_queries",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("stream_id", sa.String(32), sa.ForeignKey("streams.id"), nullable=False),
        sa.Column("asked_at", sa.Float, nullable=False),
        sa.Column("t", sa.BigInteger, nullable=False),
        sa.Column("range_start", sa.BigInteger, nullable=False),
        sa.Column("range_end", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_stream_queries_stream", "stream_queries", ["stream_id", "seq"])


def downgrade() -> None:
    op.drop_table("stream_queries")
    op.drop_table("stream_batches")
    op.drop_table("streams")
