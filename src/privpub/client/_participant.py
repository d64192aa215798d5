"""The client SDK: a participant's device (or a gateway) perturbs locally and uploads reports.

Raw values never leave this process: :class:`Participant` fetches the campaign's public
configuration, randomises the value with the library's client code
(:func:`privpub.client.perturb_values`) and sends only the report, under a fresh random 128-bit
report id. A failed upload is retried with exponential back-off; a report that still could not be
sent waits in an offline queue (in memory, or a JSON-lines file) holding the *perturbed* payload
and its id, never the value, and :meth:`Participant.flush` sends it later. A resend reuses the id,
so the server stores it once; a value is never randomised twice (that would leak more).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privpub.client._perturb import perturb_values
from privpub.client._randomness import device_rng
from privpub.client.codec import b64encode, new_report_ids
from privpub.core import RNGLike, as_generator
from privpub.errors import PrivpubError

if TYPE_CHECKING:
    import httpx  # imported where a request is made: perturbing alone never loads it

__all__ = ["BatchResult", "Gateway", "OfflineError", "Participant", "Receipt", "SubmissionError"]

#: HTTP statuses worth retrying (the server or the network may recover)
_RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class SubmissionError(PrivpubError):
    """The service refused a request (4xx); ``status`` and ``field`` say why. Not retried."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(f"{status}: {message}" + (f" (field {field!r})" if field else ""))
        self.status = status
        self.field = field
        self.message = message


class OfflineError(PrivpubError):
    """The service could not be reached after every retry."""


@dataclass(frozen=True)
class Receipt:
    """The service's acknowledgement of one stored report.

    ``received`` is the coarse time bucket (ISO 8601) the server stored; ``queued`` is True when
    the report is waiting in the offline queue (then ``received`` is None).
    """

    campaign_id: str
    report_id: str
    received: str | None
    queued: bool = False


@dataclass(frozen=True)
class BatchResult:
    """What a gateway's upload achieved: reports newly stored, already stored, refused."""

    new: int
    duplicates: int
    rejected: list[dict[str, Any]] = field(default_factory=list)
    report_ids: list[str] = field(default_factory=list)


class _Http:
    """Requests with retries and exponential back-off (with jitter)."""

    def __init__(self, base_url: str, *, client: httpx.Client | None, timeout: float, retries: int,
                 backoff: float, max_backoff: float, sleep: Callable[[float], None]) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.client = client if client is not None else httpx.Client(timeout=timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.sleep = sleep
        self._jitter = np.random.default_rng()  # back-off jitter only; no privacy role

    def request(self, method: str, path: str, *, json_body: Any = None) -> httpx.Response:
        import httpx

        delay = self.backoff
        last: str = ""
        for attempt in range(self.retries + 1):
            try:
                resp = self.client.request(method, self.base_url + path, json=json_body)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code < 400:
                    return resp
                if resp.status_code not in _RETRY_STATUS:
                    raise _error(resp)
                last = f"HTTP {resp.status_code}"
                retry_after = resp.headers.get("retry-after")
                if retry_after and retry_after.replace(".", "", 1).isdigit():
                    delay = max(delay, float(retry_after))
            if attempt < self.retries:
                self.sleep(min(self.max_backoff, delay) * (0.5 + self._jitter.random()))
                delay = min(self.max_backoff, delay * 2.0)
        raise OfflineError(f"{method} {path} failed after {self.retries + 1} attempts ({last})")


def _is_secure(rng: RNGLike) -> bool:
    return isinstance(rng, str) and rng == "secure"


class _Coins:
    """The randomness of an SDK object: a seeded stream kept across calls, or (``"secure"``) a
    fresh ChaCha20 stream keyed from the OS CSPRNG on every call."""

    _gen: np.random.Generator | None

    def _coins(self) -> np.random.Generator:
        return self._gen if self._gen is not None else device_rng("secure")


def _error(resp: httpx.Response) -> SubmissionError:
    try:
        err = resp.json().get("error", {})
        return SubmissionError(resp.status_code, str(err.get("message", resp.text)), err.get("field"))
    except (ValueError, AttributeError):
        return SubmissionError(resp.status_code, resp.text[:200])


class Participant(_Coins):
    """One participant's device taking part in a campaign.

    Parameters
    ----------
    base_url : str
        The service, e.g. ``"http://127.0.0.1:8000"``.
    campaign_id : str
        The campaign's id.
    token : str, optional
        A one-time enrollment token, when the campaign requires one.
    rng : int, Generator, "secure" or None
        Randomness of the local randomiser. The default ``"secure"`` keys a fresh ChaCha20
        stream from the operating system's CSPRNG for every report
        (:func:`privpub.client.device_generator`); an int or a Generator is a seeded PCG64
        stream, for tests and simulations only.
    retries, backoff, max_backoff, timeout : optional
        Upload retries with exponential back-off (seconds) and the per-request timeout.
    queue_path : path, optional
        A JSON-lines file that keeps reports that could not be sent (perturbed payloads only).
    client : httpx.Client, optional
        The HTTP client to use (e.g. with event hooks, or a proxy).

    Examples
    --------
    >>> Participant("http://127.0.0.1:8000", "c123").campaign_id   # doctest: +SKIP
    'c123'
    >>> receipt = Participant(url, campaign_id).submit("b")       # doctest: +SKIP
    """

    def __init__(self, base_url: str, campaign_id: str, *, token: str | None = None, rng: RNGLike = "secure",
                 retries: int = 5, backoff: float = 0.2, max_backoff: float = 5.0, timeout: float = 10.0,
                 queue_path: str | Path | None = None, client: httpx.Client | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.campaign_id = str(campaign_id)
        self.token = token
        self._gen = None if _is_secure(rng) else as_generator(rng)
        self._http = _Http(base_url, client=client, timeout=timeout, retries=retries, backoff=backoff,
                           max_backoff=max_backoff, sleep=sleep)
        self._config: dict[str, Any] | None = None
        self._queue_path = Path(queue_path) if queue_path is not None else None
        self._queue: list[dict[str, Any]] = []
        if self._queue_path is not None and self._queue_path.exists():
            self._queue = [json.loads(line) for line in self._queue_path.read_text().splitlines() if line.strip()]

    # -- configuration --------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """The campaign's public configuration (fetched once)."""
        if self._config is None:
            self._config = self._http.request("GET", f"/campaigns/{self.campaign_id}").json()
        return self._config

    @property
    def pending(self) -> int:
        """Reports waiting in the offline queue."""
        return len(self._queue)

    # -- submitting -----------------------------------------------------------------------------
    def submit(self, value: Any) -> Receipt:
        """Randomise ``value`` locally, upload the report and return the service's receipt.

        A frequency campaign takes a category name, a spatial one an ``(x, y)`` point, a
        synthetic-data one a record (dict of attribute -> value). If the upload fails after
        every retry, the report is queued (``Receipt.queued``) and sent by :meth:`flush`.

        Raises
        ------
        SubmissionError
            The service refused the report (bad token, closed campaign, ...).
        DomainError
            ``value`` is outside the campaign's declared domain (checked on the device).
        OfflineError
            A spatial campaign's group assignment could not be fetched (nothing was perturbed).
        """
        cfg = self.config()
        item: dict[str, Any] = {}
        partition = cfg.get("partition")
        group = 0
        if cfg["kind"] == "spatial":
            if cfg.get("assigned", False):
                # with enrollment the assignment is bound to this participant's token
                ask: dict[str, Any] = {"token": self.token} if self.token is not None else {"count": 1}
                assigned = self._http.request("POST", f"/campaigns/{self.campaign_id}/assignments",
                                              json_body=ask).json()
                group = int(assigned["assignments"][0]["group"])
                item["assignment"] = assigned["assignments"][0]["assignment"]
                partition = assigned["partitions"][str(group)]
            value = np.asarray(value, dtype=np.float64).reshape(1, 2)
            values: Any = value
        elif cfg["kind"] == "synth":
            values = [dict(value)]
        else:
            values = [value]
        payload = perturb_values(cfg, values, partition=partition, rng=self._coins())[0]
        item.update({"report_id": new_report_ids(1)[0].tobytes().hex(), "report": b64encode(payload),
                     "group": group})
        if self.token is not None:
            item["token"] = self.token
        return self._send(item)

    def _send(self, item: dict[str, Any]) -> Receipt:
        try:
            resp = self._http.request("POST", f"/campaigns/{self.campaign_id}/reports", json_body=item)
        except OfflineError:
            self._enqueue(item)
            return Receipt(self.campaign_id, item["report_id"], None, queued=True)
        body = resp.json()
        return Receipt(body["campaign_id"], body["report_id"], body["received"])

    def _enqueue(self, item: dict[str, Any]) -> None:
        self._queue.append(item)
        self._save_queue()

    def _save_queue(self) -> None:
        if self._queue_path is not None:
            tmp = self._queue_path.with_name(self._queue_path.name + ".tmp")
            tmp.write_text("".join(json.dumps(i) + "\n" for i in self._queue))
            tmp.replace(self._queue_path)

    def flush(self) -> list[Receipt]:
        """Send the queued reports (same ids: the server stores each once); returns their receipts.

        Reports that still cannot be sent stay queued.
        """
        done: list[Receipt] = []
        rest: list[dict[str, Any]] = []
        for item in self._queue:
            try:
                resp = self._http.request("POST", f"/campaigns/{self.campaign_id}/reports", json_body=item)
            except OfflineError:
                rest.append(item)
                continue
            body = resp.json()
            done.append(Receipt(body["campaign_id"], body["report_id"], body["received"]))
        self._queue = rest
        self._save_queue()
        return done


class Gateway(_Coins):
    """A gateway or simulator that perturbs and relays many participants' reports in batches.

    Each value is one participant: it is randomised independently (vectorised with the library's
    client code) under its own random report id; batches go to the batch endpoint and are resent
    with the same ids on failure, so nothing is stored twice.

    Parameters
    ----------
    base_url, campaign_id : str
        The service and the campaign.
    batch_size : int
        Reports per request (at most the server's limit, 50,000).
    rng : int, Generator, "secure" or None
        The randomisers' randomness (``"secure"``: a fresh ChaCha20 stream keyed from the OS
        CSPRNG for every batch; an int or Generator: seeded, for simulations).
    """

    def __init__(self, base_url: str, campaign_id: str, *, batch_size: int = 10_000, rng: RNGLike = "secure",
                 retries: int = 8, backoff: float = 0.2, max_backoff: float = 5.0, timeout: float = 120.0,
                 client: httpx.Client | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.campaign_id = str(campaign_id)
        self.batch_size = int(batch_size)
        self._gen = None if _is_secure(rng) else as_generator(rng)
        self._http = _Http(base_url, client=client, timeout=timeout, retries=retries, backoff=backoff,
                           max_backoff=max_backoff, sleep=sleep)
        self._config: dict[str, Any] | None = None

    def config(self) -> dict[str, Any]:
        if self._config is None:
            self._config = self._http.request("GET", f"/campaigns/{self.campaign_id}").json()
        return self._config

    def submit_many(self, values: Any, *, tokens: Sequence[str] | None = None) -> BatchResult:
        """Perturb every value (one participant each) and upload the reports; returns the totals.

        For a campaign that assigns groups (KDG-HT), assignments are fetched for at most 1,000
        participants at a time and their reports uploaded before more are asked for (a phase
        opens only when the previous one's reports are in).
        """
        cfg = self.config()
        if cfg["kind"] == "spatial":
            seq: Any = np.asarray(values, dtype=np.float64).reshape(-1, 2)
        else:
            seq = values if hasattr(values, "iloc") else list(values)
        n = len(seq)
        total = BatchResult(0, 0, [], [])
        pos = 0
        while pos < n:
            body: dict[str, Any] = {}
            groups: list[int] | None = None
            if cfg["kind"] == "spatial":
                step = min(self.batch_size, n - pos)
                if cfg.get("assigned", False):
                    step = min(step, 1000)
                payload, groups, extra = self._spatial_chunk(
                    cfg, seq[pos:pos + step], None if tokens is None else list(tokens[pos:pos + step]))
                step = len(groups)
                body.update(extra)
            else:
                step = min(self.batch_size, n - pos)
                chunk = seq.iloc[pos:pos + step] if hasattr(seq, "iloc") else seq[pos:pos + step]
                payload = perturb_values(cfg, chunk, rng=self._coins()).reshape(-1)
            ids = new_report_ids(step)
            body["report_ids"] = b64encode(ids)
            body["reports"] = b64encode(payload)
            if groups is not None:
                body["groups"] = groups
            if tokens is not None:
                body["tokens"] = list(tokens[pos:pos + step])
            out = self._http.request("POST", f"/campaigns/{self.campaign_id}/reports/batch", json_body=body).json()
            total.rejected.extend(dict(r, index=int(r["index"]) + pos) for r in out.get("rejected", []))
            total.report_ids.extend(bytes(r).hex() for r in ids)
            total = BatchResult(total.new + int(out["new"]), total.duplicates + int(out["duplicates"]),
                                total.rejected, total.report_ids)
            pos += step
        return total

    def _spatial_chunk(self, cfg: dict[str, Any], pts: np.ndarray, tokens: list[str] | None = None
                       ) -> tuple[np.ndarray, list[int], dict[str, Any]]:
        """Payloads (concatenated in order), groups and assignments of the first participants of ``pts``.

        With enrollment tokens, one request asks for one assignment per token (each bound to its
        participant's token); without, the service gives one assignment per request.
        """
        n = pts.shape[0]
        if not cfg.get("assigned", False):
            return perturb_values(cfg, pts, partition=cfg["partition"], rng=self._coins()).reshape(-1), [0] * n, {}
        if tokens is not None:
            resp = self._http.request("POST", f"/campaigns/{self.campaign_id}/assignments",
                                      json_body={"tokens": tokens[:n]}).json()
            got = resp["assignments"]
            partitions = resp["partitions"]
        else:
            got, partitions = [], {}
            for _ in range(n):
                try:
                    one = self._http.request("POST", f"/campaigns/{self.campaign_id}/assignments",
                                             json_body={"count": 1}).json()
                except (OfflineError, SubmissionError):
                    if got:  # the phase waits for reports: send those assigned so far first
                        break
                    raise
                if not one["assignments"]:
                    break
                got.extend(one["assignments"])
                partitions.update(one["partitions"])
        m = len(got)
        pts = pts[:m]
        groups = np.array([int(a["group"]) for a in got], dtype=np.int64)
        blocks = {int(g): perturb_values(cfg, pts[groups == g], partition=partitions[str(int(g))], rng=self._coins())
                  for g in np.unique(groups)}
        widths = np.zeros(m, dtype=np.int64)
        for g, block in blocks.items():
            widths[groups == g] = block.shape[1]
        starts = np.cumsum(widths) - widths
        flat = np.empty(int(widths.sum()), dtype=np.uint8)
        for g, block in blocks.items():  # one vectorised scatter per group, rows in report order
            rows = np.flatnonzero(groups == g)
            flat[(starts[rows][:, None] + np.arange(block.shape[1])[None, :]).ravel()] = block.ravel()
        return flat, groups.tolist(), {"assignments": [a["assignment"] for a in got]}
