"""Collection service: campaigns, groups, reports (append-only), aggregates, tokens, releases (immutable).

Revision ID: 0001_service
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_service"
down_revision = None
branch_labels = None
depends_on = None

_FROZEN = ("reports", "releases")


def upgrade() -> None:
    op.create_table(
        "campaigns",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("epsilon", sa.Float, nullable=False),
        sa.Column("min_reports", sa.Integer, nullable=False),
        sa.Column("opens_at", sa.BigInteger, nullable=True),
        sa.Column("closes_at", sa.BigInteger, nullable=True),
        sa.Column("time_precision", sa.Integer, nullable=False),
        sa.Column("enrollment", sa.Boolean, nullable=False),
        sa.Column("closed", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("stage", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "campaign_groups",
        sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), primary_key=True),
        sa.Column("group_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("domain_size", sa.Integer, nullable=False),
        sa.Column("quota", sa.Integer, nullable=True),
        sa.Column("public", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(  # no foreign key on the hot table: the service checks the campaign first
        "reports",
        sa.Column("campaign_id", sa.String(32), primary_key=True),
        sa.Column("report_id", sa.LargeBinary(16), primary_key=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("payload", sa.LargeBinary, nullable=False),
        sa.Column("received", sa.BigInteger, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "aggregates",
        sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), primary_key=True),
        sa.Column("group_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("support", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "report_buckets",
        sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), primary_key=True),
        sa.Column("bucket", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "enrollment_tokens",
        sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), primary_key=True),
        sa.Column("token_hash", sa.LargeBinary(32), primary_key=True),
        sa.Column("used", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "assignments",
        sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), primary_key=True),
        sa.Column("token_hash", sa.LargeBinary(32), primary_key=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.Column("used", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_index("ix_assignments_group", "assignments", ["campaign_id", "group_id", "used"])
    op.create_table(
        "releases",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("n_reports", sa.BigInteger, nullable=False),
        sa.Column("epsilon", sa.Float, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("ledger", sa.JSON, nullable=False),
        sa.Column("result", sa.JSON, nullable=False),
    )
    op.create_index("ix_releases_campaign_id", "releases", ["campaign_id"])
    _freeze(op.get_bind().dialect.name)


def _freeze(dialect: str) -> None:
    """Database triggers that refuse UPDATE and DELETE on the append-only tables."""
    if dialect == "sqlite":
        for table in _FROZEN:
            for action in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} are append-only'); END"
                )
    elif dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION privpub_append_only() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION '% are append-only', TG_TABLE_NAME; END $$"
        )
        for table in _FROZEN:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION privpub_append_only()"
            )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for table in ("releases", "assignments", "enrollment_tokens", "report_buckets", "aggregates", "reports",
                  "campaign_groups", "campaigns"):
        op.drop_table(table)
    if dialect == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS privpub_append_only()")
