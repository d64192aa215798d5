"""``privpub stream create|produce|query``: live streams of a running ``privpub serve`` (issue 16)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from privpub.cli._common import handle_errors
from privpub.cli._service import _URL, ServiceUnreachableError, _check, _client, _id, _need_extra
from privpub.cli._stream import _read_series
from privpub.errors import ParameterError

_TOKEN = typer.Option("--token", envvar="PRIVPUB_PRODUCER_TOKEN",
                      help="The stream's producer token (default $PRIVPUB_PRODUCER_TOKEN, else $PRIVPUB_ADMIN_TOKEN).")


def _connect(url: str | None, wait: float = 60.0) -> tuple[Any, str]:
    """A client of the service, after waiting (up to ``wait`` seconds) for a service that is starting."""
    import time

    client, base = _client(url)
    deadline = time.monotonic() + wait
    while True:
        try:
            client.get("/health", timeout=5.0)
            return client, base
        except ServiceUnreachableError as exc:
            if time.monotonic() > deadline:
                raise ServiceUnreachableError(f"{exc}; is `privpub serve` running there?") from None
            time.sleep(0.25)


def register_service_commands(stream_app: typer.Typer) -> None:
    @stream_app.command("create")
    @handle_errors
    def create(
        name: Annotated[str, typer.Option("--name", help="The stream's name.")],
        epsilon: Annotated[float, typer.Option("--epsilon", "-e", help="Event-level epsilon of the whole stream.")],
        window: Annotated[int, typer.Option("--window", "-w", help="Sliding window W (steps).")],
        publisher: Annotated[str, typer.Option("--publisher", "-m",
                                               help="hq_rtp|rtp|rtp_mm|hq_rtpmm|bt|bth.")] = "hq_rtp",
        step_seconds: Annotated[float | None, typer.Option(
            "--step-seconds", help="Step length: the service's clock closes steps (events). Omitted: "
                                   "one step per posted count.")] = None,
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
        url: Annotated[str | None, _URL] = None,
    ) -> None:
        """Create a stream on a running service (admin token: $PRIVPUB_ADMIN_TOKEN); prints its status,
        its producer token and its reader token (shown once) as JSON."""
        import math

        from privpub.core import check_epsilon

        check_epsilon(epsilon, "--epsilon")
        if window < 1:
            raise ParameterError(f"--window must be >= 1, got {window}")
        if step_seconds is not None and not (math.isfinite(step_seconds) and step_seconds > 0):
            raise ParameterError(f"--step-seconds must be finite and > 0, got {step_seconds}")
        if not (math.isfinite(sensitivity) and sensitivity > 0):
            raise ParameterError(f"--sensitivity must be finite and > 0, got {sensitivity}")
        if queries_from not in ("readers", "anyone", "none"):
            raise ParameterError(f"--queries-from must be readers, anyone or none, got {queries_from!r}")
        if log_per_client is not None and log_per_client < 1:
            raise ParameterError(f"--log-per-client must be >= 1, got {log_per_client}")
        if origin is not None and not (math.isfinite(origin) and origin >= 0):
            raise ParameterError(f"--origin must be a Unix time >= 0, got {origin}")
        _need_extra()
        body: dict[str, Any] = {"name": name, "publisher": publisher, "epsilon": epsilon, "window": window,
                                "sensitivity": sensitivity, "late": late}
        if step_seconds is not None:
            body["step_seconds"] = step_seconds
        if session is not None:
            body["session"] = session
        if origin is not None:
            body["origin"] = origin
        body["queries_from"] = queries_from
        if log_per_client is not None:
            body["log_per_client"] = log_per_client
        client, _ = _connect(url)
        typer.echo(json.dumps(_check(client.post("/streams", json=body)).json(), indent=2))

    @stream_app.command("produce")
    @handle_errors
    def produce(
        input: Annotated[Path, typer.Argument(help="CSV/Parquet (with --column), or .txt: counts or event times.")],
        stream_id: Annotated[str, typer.Option("--stream", help="The stream's id.")],
        kind: Annotated[str, typer.Option("--kind", help="counts (one per step) or times (Unix seconds or "
                                                         "timestamps, one event each).")] = "counts",
        column: Annotated[str | None, typer.Option("--column", "-c", help="Column to read.")] = None,
        speed: Annotated[float | None, typer.Option(
            "--speed", help="counts: steps per second; times: replay speed-up of the recorded gaps (events are "
                            "stamped when sent). Default: as fast as possible (times: sent with their own "
                            "times).")] = None,
        batch_size: Annotated[int, typer.Option("--batch-size", help="Items per request.")] = 10_000,
        token: Annotated[str | None, _TOKEN] = None,
        url: Annotated[str | None, _URL] = None,
    ) -> None:
        """Post a file of per-step counts or event times to a stream, at a chosen speed (demos, tests)."""
        _need_extra()
        from privpub.client import StreamProducer

        if kind not in ("counts", "times"):
            raise ParameterError(f"--kind must be counts or times, got {kind!r}")
        if speed is not None and not speed > 0:
            raise ParameterError(f"--speed must be > 0, got {speed}")
        tok = token or os.environ.get("PRIVPUB_ADMIN_TOKEN")
        if not tok:
            raise ParameterError("--token (or $PRIVPUB_PRODUCER_TOKEN / $PRIVPUB_ADMIN_TOKEN) is needed")
        data = _read_series(input, column, timestamps=kind == "times")
        if np.isnan(data).any():
            raise ParameterError(f"{input.name} has missing values (row {int(np.flatnonzero(np.isnan(data))[0])}): "
                                 "every count and every event needs a value")
        _, base = _connect(url)
        if batch_size < 1:
            raise ParameterError(f"--batch-size must be >= 1, got {batch_size}")
        producer = StreamProducer(base, _id(stream_id), token=tok, batch_size=batch_size)
        try:
            if kind == "counts":
                res = producer.send_counts(data, rate=speed)
            elif speed is None:
                res = producer.send_events(data)
            else:
                res = producer.replay_times(data, speed=speed)
        finally:
            producer.close()
        typer.echo(f"sent {res.items} {kind} in {res.batches} batches ({res.duplicates} already counted); "
                   f"the stream has released {res.t} steps")

    @stream_app.command("query")
    @handle_errors
    def query(
        stream_id: Annotated[str, typer.Argument(help="The stream's id.")],
        start: Annotated[int, typer.Option("--start", help="First step (from 1).")],
        end: Annotated[int, typer.Option("--end", help="Last step (inclusive).")],
        token: Annotated[str | None, typer.Option(
            "--token", envvar="PRIVPUB_READER_TOKEN",
            help="The stream's reader token (default $PRIVPUB_READER_TOKEN): the query is logged for the "
                 "HQ heights (the admin token, from $PRIVPUB_ADMIN_TOKEN, also counts).")] = None,
        url: Annotated[str | None, _URL] = None,
    ) -> None:
        """Ask a stream for the noisy count of steps START..END (JSON)."""
        client, _ = _connect(url)
        headers = {"Authorization": f"Bearer {token}"} if token else None
        resp = client.get(f"/streams/{_id(stream_id)}/range", params={"start": start, "end": end}, headers=headers)
        typer.echo(json.dumps(_check(resp).json(), indent=2))

    @stream_app.command("close-step")
    @handle_errors
    def close_step(
        stream_id: Annotated[str, typer.Argument(help="The stream's id.")],
        step: Annotated[int | None, typer.Option(
            "--step", help="The step to close (default: the open one, t + 1); closing it again is a no-op.")] = None,
        token: Annotated[str | None, _TOKEN] = None,
        url: Annotated[str | None, _URL] = None,
    ) -> None:
        """Close a stream's open step (streams without --step-seconds); prints t."""
        _need_extra()
        from privpub.client import StreamProducer

        if step is not None and step < 1:
            raise ParameterError(f"--step must be >= 1, got {step}")
        tok = token or os.environ.get("PRIVPUB_ADMIN_TOKEN")
        if not tok:
            raise ParameterError("--token (or $PRIVPUB_PRODUCER_TOKEN / $PRIVPUB_ADMIN_TOKEN) is needed")
        _, base = _connect(url)
        producer = StreamProducer(base, _id(stream_id), token=tok)
        try:
            typer.echo(f"t = {producer.close_step(step)}")
        finally:
            producer.close()

    @stream_app.command("delete")
    @handle_errors
    def delete(
        stream_id: Annotated[str, typer.Argument(help="The stream's id.")],
        url: Annotated[str | None, _URL] = None,
    ) -> None:
        """Close and archive a stream (admin token: $PRIVPUB_ADMIN_TOKEN): ingest and its clock stop for
        good, its released steps stay queryable (JSON)."""
        client, _ = _connect(url)
        typer.echo(json.dumps(client._do("DELETE", f"/streams/{_id(stream_id)}").json(), indent=2))
