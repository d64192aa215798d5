"""Streams state their privacy measure (issue 26): ``streams.measure``.

The zCDP stream publishers (``mf_sqrt``, ``blt``, and ``bt``/``bth`` with ``rho``) are served: a
stream's ``epsilon`` column holds its budget in its ``measure`` (``"zcdp"``: a rho, as a zCDP
session's charges hold rhos). Streams of older databases keep NULL: pure epsilon-DP, as they were.

Revision ID: 0007_streams_measure
Revises: 0006_budget_charge_units
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_streams_measure"
down_revision = "0006_budget_charge_units"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL: pure DP (every stream written before zCDP streams existed spends an epsilon)
    op.add_column("streams", sa.Column("measure", sa.String(16), nullable=True))


def downgrade() -> None:
    conn = op.get_bind()
    n = conn.execute(sa.text("SELECT count(*) FROM streams WHERE measure = 'zcdp'")).scalar_one()
    if n:
        raise RuntimeError(f"the database holds {n} zCDP stream(s): an older privpub would read their rho as "
                           "an epsilon; delete them before downgrading")
    with op.batch_alter_table("streams") as batch:
        batch.drop_column("measure")
