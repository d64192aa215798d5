"""The producer side of a real-time stream of ``privpub serve`` (issue 16, paper 004).

A producer is a trusted data source (a web server's log shipper, a sensor gateway): it sends the
raw per-step counts or the event times, and the service adds the noise. Every batch carries a
fresh random batch id that is reused when the batch is resent after a failure, so the service
counts it once whatever the network does.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from privpub.client._participant import _Http
from privpub.errors import ParameterError

if TYPE_CHECKING:
    import httpx  # imported where a request is made: perturbing alone never loads it

__all__ = ["ProduceResult", "StreamProducer"]


@dataclass(frozen=True)
class ProduceResult:
    """What a producer sent: batches, items (counts or events), batches the service had already
    counted (resends), and ``t``, the steps released after the last batch."""

    batches: int
    items: int
    duplicates: int
    t: int


class StreamProducer:
    """Send counts or timed events to one stream of a ``privpub serve`` service.

    Parameters
    ----------
    base_url : str
        The service, e.g. ``"http://127.0.0.1:8000"``.
    stream_id : str
        The stream's id (``POST /streams`` returns it).
    token : str
        The stream's producer token (returned once when the stream was created) or the admin token.
    batch_size : int
        Items per request (at most 200,000).
    timeout, retries, backoff, max_backoff : float, int, float, float
        HTTP timeout, attempts after the first, and the exponential back-off between them.
    client : httpx.Client, optional
        A client to reuse (its headers are kept; the token is added per request).

    Notes
    -----
    The counts and event times sent are raw data: use TLS for anything but loopback. Privacy is
    added by the service. Event level (the default): neighbouring streams differ in one step's
    count by at most the stream's ``sensitivity``. A person-per-step stream (created with
    ``privacy_unit``: ``person_per_step``, its ``privacy_id`` and ``max_contributions`` k) takes
    events only with their person's id (``send_events(times, privacy_ids=...)``): the service
    counts at most k events of one person in one step, so one person is protected, not one event.

    Examples
    --------
    >>> p = StreamProducer("http://127.0.0.1:8000", "0123456789abcdef", token="t")
    >>> p.stream_id
    '0123456789abcdef'
    """

    def __init__(self, base_url: str, stream_id: str, *, token: str, batch_size: int = 10_000,
                 timeout: float = 60.0, retries: int = 5, backoff: float = 0.2, max_backoff: float = 10.0,
                 client: httpx.Client | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        if not isinstance(batch_size, int) or not 1 <= batch_size <= 200_000:
            raise ParameterError(f"batch_size must be an integer in [1, 200000], got {batch_size!r}", param="batch_size")
        if not token:
            raise ParameterError("token must be the stream's producer token or the admin token", param="token")
        self.stream_id = str(stream_id)
        self.batch_size = batch_size
        import httpx

        own = client if client is not None else httpx.Client(timeout=timeout)
        own.headers["Authorization"] = f"Bearer {token}"
        self._http = _Http(base_url, client=own, timeout=timeout, retries=retries, backoff=backoff,
                           max_backoff=max_backoff, sleep=sleep)
        self._sleep = sleep

    def _post(self, what: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self._http.request("POST", f"/streams/{self.stream_id}/{what}", json_body=body)
        out: dict[str, Any] = resp.json()  # the service answers a JSON object
        return out

    def status(self) -> dict[str, Any]:
        """The stream's public status (``GET /streams/{id}``)."""
        status: dict[str, Any] = self._http.request("GET", f"/streams/{self.stream_id}").json()
        return status

    def send_counts(self, counts: ArrayLike, *, rate: float | None = None) -> ProduceResult:
        """Append per-step counts (streams without ``step_seconds``), ``batch_size`` per request.

        ``rate`` (steps per second) paces the batches for demos; None sends as fast as possible.
        """
        arr = np.asarray(counts)
        if arr.ndim != 1 or arr.size == 0:
            raise ParameterError(f"counts must be a non-empty 1-d array, got shape {arr.shape}", param="counts")
        if arr.dtype.kind not in "iuf":
            raise ParameterError(f"counts must be numbers, got dtype {arr.dtype}", param="counts")
        if arr.dtype.kind == "f" and np.isfinite(arr).all() and (arr == np.floor(arr)).all() \
                and float(np.abs(arr).max()) < 2.0**53:
            arr = arr.astype(np.int64)  # sent as JSON integers (exact); other floats go as they are
        return self._send("counts", arr, rate)

    def send_events(self, times: ArrayLike, *, privacy_ids: Sequence[str | int] | ArrayLike | None = None,
                    rate: float | None = None) -> ProduceResult:
        """Send event times (Unix seconds), ``batch_size`` per request; ``rate`` in events per second.

        ``privacy_ids``: one person's id per event (strings of 1-200 characters or integers), for a
        person-per-step stream (which refuses events without them); sent with the events, each
        batch keeping every event with its id.
        """
        arr = np.asarray(times, dtype=np.float64)
        if arr.ndim != 1 or arr.size == 0:
            raise ParameterError(f"times must be a non-empty 1-d array, got shape {arr.shape}", param="times")
        if not np.all(np.isfinite(arr)):
            raise ParameterError("times must be finite Unix times (every event needs a time)", param="times")
        ids = None if privacy_ids is None else _privacy_ids(privacy_ids, arr.shape[0])
        return self._send("events", arr, rate, ids)

    def _send(self, what: str, arr: np.ndarray, rate: float | None, ids: list[str | int] | None = None
              ) -> ProduceResult:
        if rate is not None and not (rate > 0 and np.isfinite(rate)):
            raise ParameterError(f"rate must be > 0 or None, got {rate!r}", param="rate")
        key = "counts" if what == "counts" else "times"
        batches = dups = 0
        t = 0
        start = time.monotonic()
        for a in range(0, arr.shape[0], self.batch_size):
            chunk = arr[a : a + self.batch_size]
            body: dict[str, Any] = {key: chunk.tolist(), "batch_id": uuid.uuid4().hex}
            if ids is not None:
                body["privacy_ids"] = ids[a : a + self.batch_size]
            out = self._post(what, body)
            batches += 1
            dups += bool(out.get("duplicate"))
            t = int(out.get("t", t))
            if rate is not None:
                wait = start + (a + chunk.shape[0]) / rate - time.monotonic()
                if wait > 0:
                    self._sleep(wait)
        return ProduceResult(batches=batches, items=int(arr.shape[0]), duplicates=dups, t=t)

    def replay_times(self, times: ArrayLike, *, privacy_ids: Sequence[str | int] | ArrayLike | None = None,
                     speed: float = 1.0, batch_seconds: float = 0.5) -> ProduceResult:
        """Replay recorded event times as live events: each event is stamped with the moment it is
        sent, keeping the recorded gaps divided by ``speed`` (``speed=60``: an hour in a minute).
        Events are sent every ``batch_seconds`` (or ``batch_size`` events, whichever comes first).
        ``privacy_ids``: as :meth:`send_events` (each id stays with its event's time)."""
        raw = np.asarray(times, dtype=np.float64)
        if raw.ndim != 1 or raw.size == 0 or not np.all(np.isfinite(raw)):
            raise ParameterError("times must be a non-empty 1-d array of finite times", param="times")
        order = np.argsort(raw, kind="stable")
        rec = raw[order]
        ids = None
        if privacy_ids is not None:
            given = _privacy_ids(privacy_ids, raw.shape[0])
            ids = [given[i] for i in order.tolist()]
        if not speed > 0:
            raise ParameterError(f"speed must be > 0, got {speed!r}", param="speed")
        offsets = (rec - rec[0]) / speed
        t0 = time.time()
        batches = dups = 0
        t = 0
        i = 0
        while i < offsets.shape[0]:
            now = time.time() - t0
            k = min(int(np.searchsorted(offsets, now, side="right")), i + self.batch_size)
            if k == i:  # nothing due yet
                self._sleep(min(offsets[i] - now, batch_seconds))
                continue
            body: dict[str, Any] = {"times": [t0 + now] * (k - i), "batch_id": uuid.uuid4().hex}
            if ids is not None:
                body["privacy_ids"] = ids[i:k]
            out = self._post("events", body)
            batches += 1
            dups += bool(out.get("duplicate"))
            t = int(out.get("t", t))
            i = k
            if i < offsets.shape[0] and offsets[min(i + self.batch_size, offsets.shape[0]) - 1] > now + batch_seconds:
                self._sleep(batch_seconds)  # gather the next batch
        return ProduceResult(batches=batches, items=int(rec.shape[0]), duplicates=dups, t=t)

    def close_step(self, step: int | None = None) -> int:
        """Close the open step now (streams without ``step_seconds``); returns ``t``.

        The request names the step it closes (``{"t": step}``; default: the open step, ``t + 1``
        from the stream's status), so a retry after a lost answer closes nothing twice: the
        service answers a repeated close of the same step with the same ``t``. A ``step`` that is
        not the open one is refused (409 naming the current ``t``).
        """
        if step is None:
            step = int(self.status()["t"]) + 1
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise ParameterError(f"step must be an integer >= 1 (the open step, t + 1), got {step!r}", param="step")
        return int(self._post("close-step", {"t": step})["t"])

    def close(self) -> None:
        self._http.client.close()


#: the service's limit on one privacy id (characters)
MAX_ID_LENGTH = 200


def _privacy_ids(values: Sequence[str | int] | ArrayLike, n: int) -> list[str | int]:
    """The events' privacy ids as JSON-ready values, checked as the service checks them (one per
    event; a string of 1-200 characters or an integer, never a bool or a missing value)."""
    seq = values.tolist() if isinstance(values, np.ndarray) else list(values)  # type: ignore[arg-type]
    if len(seq) != n:
        raise ParameterError(f"privacy_ids must hold one id per event ({n}), got {len(seq)}", param="privacy_ids")
    out: list[str | int] = []
    for i, v in enumerate(seq):
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, bool) or not isinstance(v, (str, int)) or (isinstance(v, str) and not 1 <= len(v) <= MAX_ID_LENGTH):
            raise ParameterError(f"privacy_ids[{i}] must be a string of 1-{MAX_ID_LENGTH} characters or an integer, "
                                 f"got {str(v)[:40]!r} ({type(v).__name__})", param="privacy_ids")
        out.append(v)
    return out
