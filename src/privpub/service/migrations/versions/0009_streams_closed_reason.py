"""Streams the service closed itself say why (issue 34): ``streams.closed_reason``.

The matrix-factorisation counters (``mf_sqrt``, ``blt``, ``mf_range``) of privpub before the
issue-34 fix were not private; their stored streams (a state head without ``mf_format`` 2) are
never continued. ``privpub serve`` closes such a stream when it starts (and on its first access):
``closed_at`` is set (kept if the operator had closed it already) and ``closed_reason`` holds the
reason, which the stream's status and every refused request show. The stored state and parts
(the released noise) are left as they are. NULL: open, or closed by the operator (``DELETE``).

This revision only adds the column: which states are retired is decided by the running code
(:func:`privpub.stream.retired_state_reason`), never by a migration.

Downgrade drops the column and keeps ``closed_at``: an older privpub sees these streams as closed
by the operator, so it never continues them either (it would answer queries from their released
steps again, and it runs the flawed counters: do not go back below this revision in production).

Revision ID: 0009_streams_closed_reason
Revises: 0008_budget_sessions_measure
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_streams_closed_reason"
down_revision = "0008_budget_sessions_measure"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL: every stream of an older database (open, or closed by the operator); the service fills
    # it for the streams it refuses to continue
    op.add_column("streams", sa.Column("closed_reason", sa.Text, nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN (SQLite >= 3.35) rather than a batch copy of the table: SQLite cannot
    # drop and recreate ``streams`` while ``stream_parts`` rows refer to it (foreign keys are on)
    op.drop_column("streams", "closed_reason")
