"""Campaigns against hostile participants (issue 22): assignments bound to enrollment tokens,
archived campaigns.

Revision ID: 0005_campaigns_sybil_archive
Revises: 0004_streams_parts
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_campaigns_sybil_archive"
down_revision = "0004_streams_parts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # the enrollment token (hash) an assignment was issued to: one outstanding assignment per token,
    # and only that token's report may use it (NULL: a campaign without enrollment, or older rows)
    op.add_column("assignments", sa.Column("enrollment_hash", sa.LargeBinary(32), nullable=True))
    op.create_index("ix_assignments_enrollment", "assignments", ["campaign_id", "enrollment_hash"])
    # DELETE /campaigns/{id}: archived campaigns keep their releases and refuse reports
    op.add_column("campaigns", sa.Column("archived_at", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("archived_at")
    op.drop_index("ix_assignments_enrollment", table_name="assignments")
    with op.batch_alter_table("assignments") as batch:
        batch.drop_column("enrollment_hash")
