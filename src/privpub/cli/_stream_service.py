"""``privpub stream create|produce|query``: live streams of a running ``privpub serve`` (issue 16).

Every argument is checked before the service is contacted; a service that does not answer is
reported within ``--connect-timeout`` seconds (default 2).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from privpub.cli._common import Checks, handle_errors
from privpub.cli._series import read_privacy_ids, read_series
from privpub.cli._service import (
    _CONNECT,
    _URL,
    ADMIN_TOKEN_ENV,
    DEFAULT_CONNECT_TIMEOUT,
    PRODUCER_TOKEN_ENV,
    _id,
    _need_extra,
    base_url,
    check_connect_timeout,
    check_spec,
    connect,
    submission_errors,
)
from privpub.errors import ParameterError

_TOKEN = typer.Option("--token", envvar=PRODUCER_TOKEN_ENV,
                      help="The stream's producer token (default $PRIVPUB_PRODUCER_TOKEN, else $PRIVPUB_ADMIN_TOKEN).")
_METHOD_HELP = ("Stream publisher: hq_rtp (default), rtp, rtp_mm, hq_rtpmm (--epsilon), bt or bth (--epsilon or --rho), "
                "mf_sqrt, blt or mf_range (--rho), as privpub stream publish.")
#: most items of one request (the service's and the producer's limit)
MAX_BATCH = 200_000
#: with --speed, a request carries about this many seconds of steps
PACE_SECONDS = 0.1


def paced_batch_size(batch_size: int, speed: float | None) -> int:
    """Items per request: ``batch_size``, or with ``--speed`` about a tenth of a second's worth.

    Examples
    --------
    >>> paced_batch_size(10_000, None), paced_batch_size(10_000, 2000.0), paced_batch_size(10_000, 1.0)
    (10000, 200, 1)
    """
    if speed is None:
        return batch_size
    return max(1, min(batch_size, math.ceil(speed * PACE_SECONDS)))


def _check_common(checks: Checks, url: str | None, connect_timeout: float) -> None:
    checks(base_url, url)
    checks(check_connect_timeout, connect_timeout)


def register_service_commands(stream_app: typer.Typer) -> None:
    @stream_app.command("create")
    @handle_errors
    def create(
        name: Annotated[str, typer.Option("--name", help="The stream's name.")],
        window: Annotated[int, typer.Option("--window", "-w", help="Sliding window W (steps).")],
        epsilon: Annotated[float | None, typer.Option(
            "--epsilon", "-e", help="Event-level epsilon of the whole stream (pure DP).")] = None,
        rho: Annotated[float | None, typer.Option(
            "--rho", help="Event-level rho of the whole stream (zCDP, Gaussian noise): mf_sqrt, blt, mf_range, and bt or bth "
                          "instead of --epsilon.")] = None,
        block_length: Annotated[int | None, typer.Option(
            "--block-length", help="mf_sqrt, blt and mf_range: items per factorised block (default: the window).")] = None,
        method: Annotated[str, typer.Option("--method", "-m", help=_METHOD_HELP)] = "hq_rtp",
        publisher: Annotated[str | None, typer.Option(
            "--publisher", hidden=True, help="Deprecated name of --method.")] = None,
        step_seconds: Annotated[float | None, typer.Option(
            "--step-seconds", help="Step length: the service's clock closes steps (events). Omitted: one step "
                                   "per posted count.")] = None,
        sensitivity: Annotated[float, typer.Option(
            "--sensitivity", help="What one individual may contribute to one step's count.")] = 1.0,
        late: Annotated[str, typer.Option("--late", help="Late events: reject or current.")] = "reject",
        session: Annotated[str | None, typer.Option("--session", help="Budget session (service database).")] = None,
        origin: Annotated[float | None, typer.Option(
            "--origin", help="Unix time where step 1 starts (with --step-seconds; default now, aligned).")] = None,
        queries_from: Annotated[str, typer.Option(
            "--queries-from", help="Which queries feed the HQ query log: readers (reader or admin token), "
                                   "anyone, or none.")] = "readers",
        log_per_client: Annotated[int | None, typer.Option(
            "--log-per-client", help="Logged queries per client and hour (default 1000).")] = None,
        privacy_id: Annotated[str | None, typer.Option(
            "--privacy-id", help="Person per step: what the events' ids identify (e.g. user); with "
                                 "--max-contributions. Events are then sent with their ids (produce --privacy-id).")] = None,
        max_contributions: Annotated[int | None, typer.Option(
            "--max-contributions", help="Person per step: at most this many events of one person count in one "
                                        "step (k; with --privacy-id).")] = None,
        url: Annotated[str | None, _URL] = None,
        connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """Create a stream on a running service (admin token: $PRIVPUB_ADMIN_TOKEN); prints its status,
        its producer token and its reader token (shown once) as JSON. Event level by default; with
        --privacy-id and --max-contributions one person's events of one step are protected."""

        if publisher is not None:
            typer.echo("warning: --publisher is deprecated; use --method", err=True)
            method = publisher
        checks = Checks()
        if not name.strip():
            checks.add("--name must not be empty")
        elif len(name) > 200:
            checks.add(f"--name must be at most 200 characters, got {len(name)}")
        if not method.strip():
            checks.add("--method must name a stream publisher (hq_rtp, rtp, rtp_mm, hq_rtpmm, bt, bth, mf_sqrt, blt, mf_range)")
        checks.budget(epsilon, rho, which="pure DP | zCDP: mf_sqrt, blt, mf_range, bt, bth")
        if block_length is not None and block_length < 1:
            checks.add(f"--block-length must be >= 1, got {block_length}", param="--block-length")
        if window < 1:
            checks.add(f"--window must be >= 1, got {window}")
        if step_seconds is not None and not (math.isfinite(step_seconds) and step_seconds > 0):
            checks.add(f"--step-seconds must be finite and > 0, got {step_seconds}")
        if not (math.isfinite(sensitivity) and sensitivity > 0):
            checks.add(f"--sensitivity must be finite and > 0, got {sensitivity}")
        if late not in ("reject", "current"):
            checks.add(f"--late must be reject or current, got {late!r}")
        if session is not None and not session.strip():
            checks.add("--session must not be empty")
        if queries_from not in ("readers", "anyone", "none"):
            checks.add(f"--queries-from must be readers, anyone or none, got {queries_from!r}")
        if log_per_client is not None and log_per_client < 1:
            checks.add(f"--log-per-client must be >= 1, got {log_per_client}")
        if origin is not None and not (math.isfinite(origin) and origin >= 0):
            checks.add(f"--origin must be a Unix time >= 0, got {origin}")
        if (privacy_id is None) != (max_contributions is None):
            checks.add("--privacy-id and --max-contributions go together (a person-per-step stream)",
                       param="--privacy-id" if privacy_id is None else "--max-contributions")
        _check_common(checks, url, connect_timeout)
        checks.done()
        _need_extra(client=True)
        body: dict[str, Any] = {"name": name, "publisher": method, "window": window, "sensitivity": sensitivity,
                                "late": late}
        optional = {"epsilon": epsilon, "rho": rho, "block_length": block_length, "step_seconds": step_seconds,
                    "session": session, "origin": origin, "log_per_client": log_per_client}
        body.update({k: v for k, v in optional.items() if v is not None})  # omitted: the service's default
        body["queries_from"] = queries_from
        if privacy_id is not None:
            body["privacy_unit"] = {"kind": "person_per_step", "privacy_id": privacy_id,
                                    "max_contributions": max_contributions}
        check_spec("stream", body, "stream")
        client, _ = connect(url, connect_timeout)
        typer.echo(json.dumps(client.post("/streams", json=body).json(), indent=2))

    @stream_app.command("produce")
    @handle_errors
    def produce(
        input: Annotated[Path, typer.Argument(help="CSV/Parquet (with --column), or .txt: counts or event times.",
                                              show_default=False)],
        stream_id: Annotated[str, typer.Option("--stream", help="The stream's id.")],
        kind: Annotated[str, typer.Option("--kind", help="counts (one per step) or times (Unix seconds or "
                                                         "timestamps, one event each).")] = "counts",
        column: Annotated[str | None, typer.Option("--column", "-c", help="Column to read.")] = None,
        privacy_id: Annotated[str | None, typer.Option(
            "--privacy-id", help="With --kind times: the column of each event's person (a person-per-step "
                                 "stream; the ids are sent with the events).")] = None,
        speed: Annotated[float | None, typer.Option(
            "--speed", help="counts: steps per second (requests of about a tenth of a second's steps); times: "
                            "replay speed-up of the recorded gaps (events are stamped when sent). Default: as "
                            "fast as possible (times: sent with their own times).")] = None,
        batch_size: Annotated[int, typer.Option("--batch-size", help="Most items per request (1..200000).")] = 10_000,
        token: Annotated[str | None, _TOKEN] = None,
        url: Annotated[str | None, _URL] = None,
        connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """Post a file of per-step counts or event times to a stream, at a chosen speed (demos, tests)."""
        checks = Checks()
        if kind not in ("counts", "times"):
            checks.add(f"--kind must be counts or times, got {kind!r}")
        if speed is not None and not (math.isfinite(speed) and speed > 0):
            checks.add(f"--speed must be finite and > 0, got {speed}")
        if not 1 <= batch_size <= MAX_BATCH:
            checks.add(f"--batch-size must be in 1..{MAX_BATCH}, got {batch_size}")
        if privacy_id is not None and kind != "times":
            checks.add("--privacy-id goes with --kind times (a person's events; counts carry no person)",
                       param="--privacy-id")
        tok = token or os.environ.get(ADMIN_TOKEN_ENV)
        if not tok:
            checks.add(f"--token (or ${PRODUCER_TOKEN_ENV} / ${ADMIN_TOKEN_ENV}) is needed")
        checks(_id, stream_id, "stream")
        _check_common(checks, url, connect_timeout)
        checks.done()
        data = read_series(input, column, timestamps=kind == "times")
        ids = None if privacy_id is None else read_privacy_ids(input, privacy_id, data.shape[0])
        if np.isnan(data).any():
            raise ParameterError(f"{input.name} has missing values (row {int(np.flatnonzero(np.isnan(data))[0])}): "
                                 "every count and every event needs a value")
        _need_extra(client=True)
        assert tok is not None  # checked above
        _, base = connect(url, connect_timeout, tok, PRODUCER_TOKEN_ENV)
        from privpub.client import StreamProducer
        per_request = paced_batch_size(batch_size, speed) if kind == "counts" else batch_size
        producer = StreamProducer(base, stream_id, token=tok, batch_size=per_request)
        try:
            with submission_errors(PRODUCER_TOKEN_ENV):
                if kind == "counts":
                    res = producer.send_counts(data, rate=speed)
                elif speed is None:
                    res = producer.send_events(data, privacy_ids=ids)
                else:
                    res = producer.replay_times(data, privacy_ids=ids, speed=speed)
        finally:
            producer.close()
        typer.echo(f"sent {res.items} {kind} in {res.batches} batches ({res.duplicates} already counted); "
                   f"the stream has released {res.t} steps")

    @stream_app.command("query")
    @handle_errors
    def query(
        stream_id: Annotated[str, typer.Argument(help="The stream's id (16 hexadecimal digits).", show_default=False)],
        start: Annotated[int, typer.Option("--start", help="First step (from 1).")],
        end: Annotated[int, typer.Option("--end", help="Last step (inclusive).")],
        token: Annotated[str | None, typer.Option(
            "--token", envvar="PRIVPUB_READER_TOKEN",
            help="The stream's reader token (default $PRIVPUB_READER_TOKEN): the query is logged for the "
                 "HQ heights (the admin token, from $PRIVPUB_ADMIN_TOKEN, also counts).")] = None,
        url: Annotated[str | None, _URL] = None,
        connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """Ask a stream for the noisy count of steps START..END (JSON)."""
        checks = Checks()
        checks(_id, stream_id, "stream")
        if start < 1:
            checks.add(f"--start must be >= 1 (steps count from 1), got {start}")
        if end < start:
            checks.add(f"--end must be >= --start, got --start {start} --end {end}")
        _check_common(checks, url, connect_timeout)
        checks.done()
        _need_extra(client=True)
        client, _ = connect(url, connect_timeout)
        headers = {"Authorization": f"Bearer {token}"} if token else None
        resp = client.get(f"/streams/{stream_id}/range", params={"start": start, "end": end}, headers=headers)
        typer.echo(json.dumps(resp.json(), indent=2))

    @stream_app.command("close-step")
    @handle_errors
    def close_step(
        stream_id: Annotated[str, typer.Argument(help="The stream's id (16 hexadecimal digits).", show_default=False)],
        step: Annotated[int | None, typer.Option(
            "--step", help="The step to close (default: the open one, t + 1); closing it again is a no-op.")] = None,
        token: Annotated[str | None, _TOKEN] = None,
        url: Annotated[str | None, _URL] = None,
        connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """Close a stream's open step (streams without --step-seconds); prints t."""
        checks = Checks()
        checks(_id, stream_id, "stream")
        if step is not None and step < 1:
            checks.add(f"--step must be >= 1, got {step}")
        tok = token or os.environ.get(ADMIN_TOKEN_ENV)
        if not tok:
            checks.add(f"--token (or ${PRODUCER_TOKEN_ENV} / ${ADMIN_TOKEN_ENV}) is needed")
        _check_common(checks, url, connect_timeout)
        checks.done()
        _need_extra()
        from privpub.client import StreamProducer

        _, base = connect(url, connect_timeout)
        assert tok  # checks.done() refused a missing token
        producer = StreamProducer(base, stream_id, token=tok)
        try:
            with submission_errors(PRODUCER_TOKEN_ENV):  # a refusal in the CLI's one wording (status, reason)
                typer.echo(f"t = {producer.close_step(step)}")
        finally:
            producer.close()

    @stream_app.command("delete")
    @handle_errors
    def delete(
        stream_id: Annotated[str, typer.Argument(help="The stream's id (16 hexadecimal digits).", show_default=False)],
        url: Annotated[str | None, _URL] = None,
        connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """Close and archive a stream (admin token: $PRIVPUB_ADMIN_TOKEN): ingest and its clock stop for
        good, its released steps stay queryable (JSON)."""
        checks = Checks()
        checks(_id, stream_id, "stream")
        _check_common(checks, url, connect_timeout)
        checks.done()
        _need_extra()
        client, _ = connect(url, connect_timeout)
        typer.echo(json.dumps(client._do("DELETE", f"/streams/{stream_id}").json(), indent=2))
