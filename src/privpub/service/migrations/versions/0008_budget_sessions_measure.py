"""Budget sessions state their privacy measure (issue 26): ``budget_sessions.measure``.

A database session may account in rho-zCDP (``Session.open("sqlite:///...", total_rho=...)``): its
total and every charge are rhos, and a zCDP stream can be charged to it. Sessions of older
databases keep NULL: pure epsilon-DP, as they were.

Revision ID: 0008_budget_sessions_measure
Revises: 0007_streams_measure
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_budget_sessions_measure"
down_revision = "0007_streams_measure"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL: pure DP (every session written before zCDP sessions existed holds epsilons)
    op.add_column("budget_sessions", sa.Column("measure", sa.String(16), nullable=True))


def downgrade() -> None:
    conn = op.get_bind()
    n = conn.execute(sa.text("SELECT count(*) FROM budget_sessions WHERE measure = 'zcdp'")).scalar_one()
    if n:
        raise RuntimeError(f"the database holds {n} zCDP budget session(s): an older privpub would read their "
                           "rhos as epsilons; delete them before downgrading")
    with op.batch_alter_table("budget_sessions") as batch:
        batch.drop_column("measure")
