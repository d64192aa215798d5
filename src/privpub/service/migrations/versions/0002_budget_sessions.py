"""Budget sessions in the database (privpub.service.database_session_store).

Revision ID: 0002_budget_sessions
Revises: 0001_service
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_budget_sessions"
down_revision = "0001_service"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "budget_sessions",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("total_epsilon", sa.Float, nullable=False),
        sa.Column("created", sa.String(32), nullable=False),
    )
    op.create_table(
        "budget_charges",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=False, unique=True),
        sa.Column("session_name", sa.String(200), sa.ForeignKey("budget_sessions.name"), nullable=False),
        sa.Column("time", sa.String(32), nullable=False),
        sa.Column("method", sa.String(200), nullable=False),
        sa.Column("epsilon", sa.Float, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("note", sa.Text, nullable=False),
    )
    op.create_index("ix_budget_charges_session_name", "budget_charges", ["session_name"])


def downgrade() -> None:
    op.drop_table("budget_charges")
    op.drop_table("budget_sessions")
