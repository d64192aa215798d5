"""Prometheus metrics of the service: what an operator watches to see an attack happen (issue 22).

Served at ``GET /metrics`` to the admin token only (``Authorization: Bearer <PRIVPUB_ADMIN_TOKEN>``;
a scraper sets it with ``authorization: {credentials: ...}``). Under ``privpub serve`` the metrics
use prometheus-client's *multiprocess mode*: ``privpub serve`` makes a private directory for the
workers' memory-mapped value files (``PROMETHEUS_MULTIPROC_DIR``), so one scrape of any worker
returns the sum over all workers (``--workers 2`` included). An application created otherwise
(``create_app`` in a test, another ASGI server without that variable) counts in its own process.

Labels have bounded cardinality: campaign and stream ids appear only once the campaign or stream
exists (the admin created it), request paths are route templates (``/streams/{stream_id}/counts``),
never raw paths, and methods and status codes come from fixed sets.

Other parts of the service count through the small functions here (:func:`count_reports`, :func:`count_report`,
:func:`count_auth_failure`, :func:`count_stream`, :func:`observe_request`).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = [
    "CONTENT_TYPE",
    "count_auth_failure",
    "count_report",
    "count_reports",
    "count_stream",
    "observe_request",
    "render",
]

#: the exposition format's content type
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _Metrics:
    """The metric objects, made on first use: prometheus-client picks its multiprocess mode when it
    is imported, so it is imported only once ``privpub serve`` has set ``PROMETHEUS_MULTIPROC_DIR``."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram, values

        if values.ValueClass is not values.MutexValue:  # multiprocess mode; no value made yet here
            # every increment asks whether the process forked: with the default identifier that is
            # a getpid() system call per increment (3 per report); _pid is kept current at fork
            values.ValueClass = values.MultiProcessValue(process_identifier=_pid)  # type: ignore[no-untyped-call]
        self.reports = Counter(
            "privpub_reports", "Reports per campaign and outcome: accepted (stored), duplicate (a resent "
            "report id), refused (malformed, bad token or assignment, campaign closed), suspected "
            "(flagged by the poisoning defence)", ["campaign", "outcome"])
        self.auth_failures = Counter(
            "privpub_auth_failures", "Refused authentications: kind = admin or producer; reason = missing "
            "(no bearer token), invalid (a wrong token was checked), limited (refused unchecked by the "
            "failed-auth rate limit)", ["kind", "reason"])
        self.stream_requests = Counter(
            "privpub_stream_requests", "Successful stream requests per stream: ingest (POST counts or "
            "events) and query (GET range, POST ranges)", ["stream", "kind"])
        self.requests = Histogram("privpub_request_duration_seconds",
                                  "Request latency by method, route template and status",
                                  ["method", "path", "status"], buckets=_BUCKETS)


_made: _Metrics | None = None
_the_pid = os.getpid()


def _refresh_pid() -> None:
    global _the_pid
    _the_pid = os.getpid()


os.register_at_fork(after_in_child=_refresh_pid)


def _pid() -> int:
    """This process's id, kept current across fork() (prometheus-client's process identifier)."""
    return _the_pid
_lock = threading.Lock()


def _m() -> _Metrics:
    global _made
    if _made is None:
        with _lock:
            if _made is None:
                _made = _Metrics()
    return _made


def count_reports(campaign_id: str, *, accepted: int = 0, duplicate: int = 0, refused: int = 0,
                  suspected: int = 0) -> None:
    """Count reports of an existing campaign by outcome (call only after the campaign was found)."""
    for outcome, n in (("accepted", accepted), ("duplicate", duplicate), ("refused", refused),
                       ("suspected", suspected)):
        if n:
            count_report(campaign_id, outcome, n)


def count_report(campaign_id: str, outcome: str, n: int = 1) -> None:
    """``n`` reports (default one) of an existing campaign (``outcome``: accepted, duplicate,
    refused or suspected); the labelled counter is looked up once per (campaign, outcome)."""
    key = (campaign_id, outcome)
    child = _reports.get(key)
    if child is None:
        child = _reports[key] = _m().reports.labels(campaign_id, outcome)
    child.inc(n)


def count_auth_failure(kind: str, reason: str) -> None:
    """One refused authentication (``kind``: admin or producer; ``reason``: missing, invalid, limited)."""
    _m().auth_failures.labels(kind, reason).inc()


def count_stream(stream_id: str, kind: str, n: int = 1) -> None:
    """A successful stream request (``kind``: ingest or query) of an existing stream."""
    key = (stream_id, kind)
    child = _streams.get(key)
    if child is None:
        child = _streams[key] = _m().stream_requests.labels(stream_id, kind)
    child.inc(n)


# label children, looked up once per label set (``labels`` takes a lock and builds its key every
# call); bounded: routes x statuses, and campaigns and streams, which only admins create
_latency: dict[tuple[str, str, int], Any] = {}
_reports: dict[tuple[str, str], Any] = {}
_streams: dict[tuple[str, str], Any] = {}


def observe_request(method: str, template: str, status: int, seconds: float) -> None:
    """A request's latency, labelled by its route template (never the raw path)."""
    key = (method if method in _METHODS else "other", template, status)
    child = _latency.get(key)
    if child is None:
        child = _latency[key] = _m().requests.labels(key[0], template, str(status))
    child.observe(seconds)


class ClockLag:
    """``privpub_stream_clock_lag_seconds``: per clocked stream, how long ago its open step should
    have been closed by the service's clock (0 when on time), read from the database at scrape time
    so that every worker reports the same value. Closed streams (``DELETE``, or closed by the
    service for a retired state) have no clock: they are left out, not reported ever later."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Any]:
        import sqlalchemy as sa
        from prometheus_client.core import GaugeMetricFamily

        from privpub.service._tables import streams

        fam = GaugeMetricFamily("privpub_stream_clock_lag_seconds",
                                "Seconds since the open step of a clocked stream should have closed (0: on time)",
                                labels=["stream"])
        now = time.time()
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(sa.select(streams.c.id, streams.c.t, streams.c.origin, streams.c.step_seconds)
                                    .where(streams.c.step_seconds.is_not(None), streams.c.closed_at.is_(None))).all()
        except Exception:  # the database is unreachable: /health says so; no clock lag to report
            rows = []
        for sid, t, origin, step in rows:
            due = float(origin or 0.0) + (int(t) + 1) * float(step)
            lag = max(0.0, now - due)
            fam.add_metric([str(sid)], lag if math.isfinite(lag) else 0.0)
        yield fam


def render(engine: Any) -> bytes:
    """The exposition text: every worker's counters and histograms, and the clock lag from ``engine``."""
    from prometheus_client import CollectorRegistry, generate_latest

    m = _m()
    reg = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(reg)  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
    else:  # one process: this module's metrics only (not the interpreter's own collectors)
        for collector in (m.reports, m.auth_failures, m.stream_requests, m.requests):
            reg.register(collector)
    reg.register(ClockLag(engine))
    return generate_latest(reg)
