"""Budget charges state their privacy unit (issue 25): ``unit`` and ``converted_from`` (JSON text).

Revision ID: 0006_budget_charge_units
Revises: 0005_campaigns_sybil_archive
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_budget_charge_units"
down_revision = "0005_campaigns_sybil_archive"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL: one record (every charge written before units existed protects one record)
    op.add_column("budget_charges", sa.Column("unit", sa.Text, nullable=True))
    # NULL: the release was made for the charge's unit; else {"unit": ..., "epsilon": ...} it was converted from
    op.add_column("budget_charges", sa.Column("converted_from", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("budget_charges") as batch:
        batch.drop_column("converted_from")
        batch.drop_column("unit")
