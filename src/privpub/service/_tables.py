"""The service's tables (SQLAlchemy Core). Alembic migrations in ``migrations/versions`` create them.

Times are integer Unix seconds. Report times are rounded down to the campaign's precision before
they are stored; no device id, IP address or exact time is stored anywhere.

Streams (issue 16, migration ``0003_streams``): ``streams`` holds each stream's declaration and its
publisher's state (released noise over the window and, of the raw data, only the open nodes'
partial sums and the open step's count), ``stream_batches`` the ids of the batches already
counted (never their contents) and ``stream_queries`` the query log the HQ publishers learn from.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = [
    "aggregates",
    "assignments",
    "budget_charges",
    "budget_sessions",
    "campaign_groups",
    "campaigns",
    "enrollment_tokens",
    "metadata",
    "releases",
    "report_buckets",
    "reports",
    "stream_batches",
    "stream_parts",
    "stream_queries",
    "streams",
]

metadata = sa.MetaData()

campaigns = sa.Table(
    "campaigns", metadata,
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
    sa.Column("archived_at", sa.BigInteger, nullable=True),  # 0004: DELETE /campaigns/{id}
)

# the public cells a group of participants reports over (one group for frequency/synth/UG;
# KDG-HT: the x and y interval groups, then one group per tree level, created as phases advance)
campaign_groups = sa.Table(
    "campaign_groups", metadata,
    sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), primary_key=True),
    sa.Column("group_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("domain_size", sa.Integer, nullable=False),
    sa.Column("quota", sa.Integer, nullable=True),
    sa.Column("public", sa.JSON, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

# append-only (database triggers refuse UPDATE and DELETE); primary key on the random report id
# (no foreign key on this hot table: the service checks the campaign before appending; no
# sequence or rowid either, so the stored order does not reveal the order of arrival)
reports = sa.Table(
    "reports", metadata,
    sa.Column("campaign_id", sa.String(32), primary_key=True),
    sa.Column("report_id", sa.LargeBinary(16), primary_key=True),
    sa.Column("group_id", sa.Integer, nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("received", sa.BigInteger, nullable=False),
    sqlite_with_rowid=False,  # SQLite: rows live in primary-key (random id) order, no arrival-order rowid
)

# running sums of the reports, sharded to spread row locks; updated in the reports' transaction
aggregates = sa.Table(
    "aggregates", metadata,
    sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), primary_key=True),
    sa.Column("group_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("n", sa.BigInteger, nullable=False),
    sa.Column("support", sa.LargeBinary, nullable=False),
)

report_buckets = sa.Table(
    "report_buckets", metadata,
    sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), primary_key=True),
    sa.Column("bucket", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("n", sa.BigInteger, nullable=False),
)

enrollment_tokens = sa.Table(
    "enrollment_tokens", metadata,
    sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), primary_key=True),
    sa.Column("token_hash", sa.LargeBinary(32), primary_key=True),
    sa.Column("used", sa.Boolean, nullable=False, server_default=sa.false()),
)

assignments = sa.Table(
    "assignments", metadata,
    sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), primary_key=True),
    sa.Column("token_hash", sa.LargeBinary(32), primary_key=True),
    sa.Column("group_id", sa.Integer, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Column("used", sa.Boolean, nullable=False, server_default=sa.false()),
    # 0004: the enrollment token (hash) the assignment is bound to (one outstanding per token)
    sa.Column("enrollment_hash", sa.LargeBinary(32), nullable=True),
    sa.Index("ix_assignments_group", "campaign_id", "group_id", "used"),
    sa.Index("ix_assignments_enrollment", "campaign_id", "enrollment_hash"),
)

# immutable (database triggers refuse UPDATE and DELETE)
releases = sa.Table(
    "releases", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("campaign_id", sa.String(32), sa.ForeignKey("campaigns.id"), nullable=False, index=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("n_reports", sa.BigInteger, nullable=False),
    sa.Column("epsilon", sa.Float, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("params", sa.JSON, nullable=False),
    sa.Column("ledger", sa.JSON, nullable=False),
    sa.Column("result", sa.JSON, nullable=False),
)

# budget sessions (privpub.core.Session.open("sqlite:///...") / database_session_store)
budget_sessions = sa.Table(
    "budget_sessions", metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("total_epsilon", sa.Float, nullable=False),
    sa.Column("created", sa.String(32), nullable=False),
    # "zcdp": the total and every charge are rhos; NULL: pure epsilon-DP (migration 0008)
    sa.Column("measure", sa.String(16), nullable=True),
)

budget_charges = sa.Table(
    "budget_charges", metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(32), nullable=False, unique=True),
    sa.Column("session_name", sa.String(200), sa.ForeignKey("budget_sessions.name"), nullable=False, index=True),
    sa.Column("time", sa.String(32), nullable=False),
    sa.Column("method", sa.String(200), nullable=False),
    sa.Column("epsilon", sa.Float, nullable=False),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("note", sa.Text, nullable=False),
    # the charge's privacy unit as JSON (PrivacyUnit.as_dict; NULL: one record), and the unit and amount of
    # a release converted explicitly (Session.convert_record_level; NULL: none) -- migration 0006
    sa.Column("unit", sa.Text, nullable=True),
    sa.Column("converted_from", sa.Text, nullable=True),
)

# real-time streams (issue 16): one row per stream; ``state`` is the publisher's state (see
# privpub.service._streams.pack_state), rewritten in the transaction that closes steps
streams = sa.Table(
    "streams", metadata,
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
    # issue 22 (migration 0004_streams_parts): archived streams, who feeds the HQ query log
    sa.Column("closed_at", sa.BigInteger, nullable=True),
    sa.Column("reader_token_hash", sa.LargeBinary(32), nullable=True),
    sa.Column("queries_from", sa.String(16), nullable=True),
    sa.Column("log_per_client", sa.BigInteger, nullable=True),
    # issue 26 (migration 0007_streams_measure): the privacy measure of ``epsilon``: "zcdp" (the
    # column holds the stream's rho) or "pure-dp"; NULL (streams of older databases): pure DP
    sa.Column("measure", sa.String(16), nullable=True),
    # issue 34 (migration 0009_streams_closed_reason): why the service closed the stream itself (a
    # state written by a flawed publisher version: never continued); NULL: open or closed by DELETE
    sa.Column("closed_reason", sa.Text, nullable=True),
)

# the time-indexed part of each write's state delta (privpub.stream._persist): released node values
# and noisy prefix sums of the steps the write closed; ``streams.state`` holds the head
stream_parts = sa.Table(
    "stream_parts", metadata,
    sa.Column("stream_id", sa.String(32), sa.ForeignKey("streams.id"), primary_key=True),
    sa.Column("t_end", sa.BigInteger, primary_key=True),
    sa.Column("t_from", sa.BigInteger, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
)

stream_batches = sa.Table(
    "stream_batches", metadata,
    sa.Column("stream_id", sa.String(32), sa.ForeignKey("streams.id"), primary_key=True),
    sa.Column("batch_id", sa.String(64), primary_key=True),
    sa.Column("n_items", sa.BigInteger, nullable=False),
    sa.Column("received", sa.BigInteger, nullable=False),
)

stream_queries = sa.Table(
    "stream_queries", metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("stream_id", sa.String(32), sa.ForeignKey("streams.id"), nullable=False),
    sa.Column("asked_at", sa.Float, nullable=False),
    sa.Column("t", sa.BigInteger, nullable=False),
    sa.Column("range_start", sa.BigInteger, nullable=False),
    sa.Column("range_end", sa.BigInteger, nullable=False),
    sa.Index("ix_stream_queries_stream", "stream_id", "seq"),
)
