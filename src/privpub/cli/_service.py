"""CLI of the collection service: ``privpub serve``, ``privpub db upgrade``, ``privpub campaign ...``
and ``privpub participate`` (needs the ``privpub[service]`` extra)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from privpub.cli._common import ForceOption, Terminated, _one_line, handle_errors
from privpub.errors import DataNotFoundError, ParameterError, PrivpubError

db_app = typer.Typer(help="The service's database: schema upgrades (Alembic).", no_args_is_help=True)
campaign_app = typer.Typer(help="Create and manage collection campaigns on a running service.",
                           no_args_is_help=True)

_DB = typer.Option("--db", help="Database: a SQLite file path or URL (sqlite:///x.db, postgresql+psycopg://...).")
_LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
_URL = typer.Option("--url", envvar="PRIVPUB_URL", help="The service's base URL (default $PRIVPUB_URL).")

#: environment variables of the two tokens, named in 401/403 errors
ADMIN_TOKEN_ENV = "PRIVPUB_ADMIN_TOKEN"
PRODUCER_TOKEN_ENV = "PRIVPUB_PRODUCER_TOKEN"
#: seconds between two attempts to connect to a service that is not (yet) listening
_CONNECT_RETRY_PAUSE = 0.25
#: default of --connect-timeout: a missing service is reported at once, a starting one needs more
DEFAULT_CONNECT_TIMEOUT = 2.0

_CONNECT = typer.Option(
    "--connect-timeout", envvar="PRIVPUB_CONNECT_TIMEOUT", metavar="SECONDS",
    help="How long to keep trying to connect to a service that does not answer, in seconds (default 2; "
         "also $PRIVPUB_CONNECT_TIMEOUT). Give more (e.g. 60) right after starting `privpub serve`.")
_CAMPAIGN_ID = typer.Argument(help="The campaign's id (16 hexadecimal digits, printed by `privpub campaign create`).",
                              show_default=False)


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add the service commands to the application."""
    app.command("serve")(serve)
    app.command("participate")(participate)
    app.add_typer(db_app, name="db")
    app.add_typer(campaign_app, name="campaign")


def _need_extra(client: bool = False) -> None:
    """The privpub[service] extra: the server's packages, or with ``client`` only the client's (lighter)."""
    try:
        if client:
            import httpx  # noqa: F401
            import yaml  # noqa: F401
        else:
            import fastapi  # noqa: F401
            import sqlalchemy  # noqa: F401
    except ImportError as exc:
        raise ParameterError(f"the service needs the privpub[service] extra: pip install 'privpub[service]' ({exc})") from None


def check_spec(kind: str, body: Any, what: str) -> None:
    """Validate a campaign (``kind="campaign"``) or stream declaration with the service's own model
    (:class:`privpub.service.CampaignSpec` / :class:`~privpub.service.StreamSpec`) before sending it:
    the error names the same field as the service's 422."""
    try:
        from privpub.service import CampaignSpec, StreamSpec, validate_spec
    except ImportError as exc:
        raise ParameterError(f"the service needs the privpub[service] extra: pip install 'privpub[service]' ({exc})") from None
    validate_spec(CampaignSpec if kind == "campaign" else StreamSpec, body, what)


@handle_errors
def serve(
    db: Annotated[str, _DB] = "campaigns.db",
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option("--workers", help="Worker processes.")] = 1,
    upgrade: Annotated[bool, typer.Option("--upgrade/--no-upgrade",
                                          help="Upgrade the database schema before starting.")] = True,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning, error.")] = "info",
    timeout_headers: Annotated[float, typer.Option(
        "--timeout-headers", envvar="PRIVPUB_TIMEOUT_HEADERS",
        help="Seconds for a request's line and headers to arrive, else 408 and the connection is closed.")] = 10.0,
    timeout_body: Annotated[float, typer.Option(
        "--timeout-body", envvar="PRIVPUB_TIMEOUT_BODY",
        help="Seconds for a request's body to arrive after its headers, else 408 and the connection is closed.")] = 60.0,
    timeout_keep_alive: Annotated[float, typer.Option(
        "--timeout-keep-alive", help="Seconds an idle kept-alive connection stays open.")] = 5.0,
    auth_burst: Annotated[int, typer.Option(
        "--auth-burst", envvar="PRIVPUB_AUTH_BURST",
        help="Failed authentications one client address may make at once (then --auth-rate per second; "
             "more get 429 unchecked).")] = 30,
    auth_rate: Annotated[float, typer.Option(
        "--auth-rate", envvar="PRIVPUB_AUTH_RATE",
        help="Failed authentications per second a client address regains.")] = 1.0,
    body_memory: Annotated[float, typer.Option(
        "--body-memory", envvar="PRIVPUB_BODY_MEMORY",
        help="MiB of large request bodies (over 1 MiB each) one worker reads at once; more get 503.")] = 256.0,
) -> None:
    """Run the service: collection campaigns and real-time streams (admin token: $PRIVPUB_ADMIN_TOKEN).

    The default database is a SQLite file created on first start (mode 0600). The admin token must
    be at least 32 random characters (``python -c "import secrets; print(secrets.token_urlsafe(32))"``).
    Put the service behind a TLS proxy for anything but loopback (docs/service.md).
    """
    if not 0 <= port <= 65535:
        raise ParameterError(f"--port must be in 0..65535 (0: any free port), got {port}")
    if workers < 1:
        raise ParameterError(f"--workers must be >= 1, got {workers}")
    if log_level.lower() not in _LOG_LEVELS:
        raise ParameterError(f"--log-level must be one of {list(_LOG_LEVELS)}, got {log_level!r}")
    if not host.strip():
        raise ParameterError("--host must name an interface, got ''")
    for name, value in (("--timeout-headers", timeout_headers), ("--timeout-body", timeout_body),
                        ("--timeout-keep-alive", timeout_keep_alive)):
        if not (value > 0 and value < 86400):
            raise ParameterError(f"{name} must be in (0, 86400) seconds, got {value}")
    if auth_burst < 1:
        raise ParameterError(f"--auth-burst must be >= 1, got {auth_burst}")
    if not (auth_rate > 0 and auth_rate < 1e6):
        raise ParameterError(f"--auth-rate must be in (0, 1e6) per second, got {auth_rate}")
    if not (body_memory >= 1 and body_memory <= 2**20):
        raise ParameterError(f"--body-memory must be in [1, 1048576] MiB, got {body_memory}")
    _need_extra()
    _serve(db, host, port, workers, upgrade, log_level, {
        "PRIVPUB_TIMEOUT_HEADERS": repr(timeout_headers), "PRIVPUB_TIMEOUT_BODY": repr(timeout_body),
        "PRIVPUB_AUTH_BURST": str(auth_burst), "PRIVPUB_AUTH_RATE": repr(auth_rate),
        "PRIVPUB_BODY_MEMORY": repr(body_memory)}, timeout_keep_alive)


def _serve(db: str, host: str, port: int, workers: int, upgrade: bool, log_level: str,
           settings: dict[str, str], timeout_keep_alive: float) -> None:
    import shutil
    import tempfile

    import uvicorn

    from privpub.service import admin_token_problem, database_url, private_sqlite_file
    from privpub.service import upgrade as do_upgrade

    token = os.environ.get("PRIVPUB_ADMIN_TOKEN")
    if token:
        problem = admin_token_problem(token)
        if problem is not None:
            raise ParameterError(f"PRIVPUB_ADMIN_TOKEN is too weak ({problem}); generate one with: export "
                                 "PRIVPUB_ADMIN_TOKEN=$(python -c \"import secrets; print(secrets.token_urlsafe(32))\")")
    url = database_url(db)
    path = private_sqlite_file(url)
    if path is not None and path.is_file() and path.stat().st_mode & 0o077:
        typer.echo(f"warning: the database file {path} can be read by other users (mode "
                   f"{path.stat().st_mode & 0o777:o}): chmod 600 it and its -wal and -shm files", err=True)
    if upgrade:
        rev = do_upgrade(url)
        typer.echo(f"database schema at revision {rev}", err=True)
    if not token:
        typer.echo("warning: PRIVPUB_ADMIN_TOKEN is not set: admin endpoints (creating campaigns, releases) "
                   "are disabled", err=True)
    # what the workers read from the environment: the database, the transport limits, and a
    # private directory for the metrics files (prometheus multiprocess mode), unless one is set
    settings = {**settings, "PRIVPUB_DB": url}
    own_metrics = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if own_metrics:
        _remove_stale_metrics_dirs()
        settings["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix=f"privpub-metrics-{os.getpid()}-")
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        uvicorn.run("privpub.service._app:create_app_from_env", factory=True, host=host, port=port,
                    workers=workers, access_log=False, log_level=log_level.lower(), server_header=False,
                    http="privpub.service._transport:HeaderTimeoutProtocol",
                    timeout_keep_alive=timeout_keep_alive)  # type: ignore[arg-type]  # uvicorn annotates int; it is a delay (float s)
    except (KeyboardInterrupt, Terminated):
        # uvicorn shut down cleanly, then re-raised the signal that stopped it: a normal stop, not a
        # command interrupted half-way (nothing is left unwritten)
        return
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if own_metrics:
            shutil.rmtree(settings["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


def _remove_stale_metrics_dirs() -> None:
    """Remove the metrics directories of ``privpub serve`` processes that no longer exist (a
    killed server cannot remove its own)."""
    import shutil
    import tempfile

    for path in Path(tempfile.gettempdir()).glob("privpub-metrics-*-*"):
        pid = path.name.split("-")[2]
        if not pid.isdigit() or not path.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:  # alive (another user's): keep
            pass


@db_app.command("upgrade")
@handle_errors
def db_upgrade(
    db: Annotated[str, _DB] = "campaigns.db",
    revision: Annotated[str, typer.Option("--revision", help="Target revision.")] = "head",
) -> None:
    """Create or upgrade the service's tables to the newest schema (safe to run repeatedly)."""
    _need_extra()
    from privpub.service import upgrade

    typer.echo(f"database schema at revision {upgrade(db, revision)}")


def base_url(url: str | None) -> str:
    """The service's base URL from ``--url``/$PRIVPUB_URL, checked (http or https, with a host)."""
    from urllib.parse import urlsplit

    base = (url or "http://127.0.0.1:8000").strip().rstrip("/")
    try:
        parts = urlsplit(base)
        parts.port  # noqa: B018 -- raises ValueError for a bad port
    except ValueError as exc:
        raise ParameterError(f"--url {base!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ParameterError(f"--url must be an http:// or https:// URL with a host, got {base!r}")
    return base


def check_connect_timeout(seconds: float) -> float:
    """``--connect-timeout`` checked: finite, >= 0 and at most a day."""
    import math

    if not (math.isfinite(seconds) and 0 <= seconds <= 86_400):
        raise ParameterError(f"--connect-timeout must be in 0..86400 seconds, got {seconds}")
    return seconds


class _Client:
    """An admin client whose failures are one-line privpub errors naming --url, the field or the token.

    A connection that is refused or not answered is retried until ``connect_timeout`` seconds have
    passed (nothing was sent, so a retry is safe); any other network failure ends the command.
    """

    def __init__(self, client: Any, base: str, connect_timeout: float, token_env: str = ADMIN_TOKEN_ENV) -> None:
        self._client = client
        self._base = base
        self._connect_timeout = connect_timeout
        self._token_env = token_env

    def _do(self, method: str, path: str, *, timeout: float = 600.0, **kwargs: Any) -> Any:
        import time

        import httpx

        deadline = time.monotonic() + self._connect_timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                resp = self._client.request(method, path, timeout=httpx.Timeout(
                    timeout, connect=min(max(remaining, 0.05), timeout)), **kwargs)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                left = deadline - time.monotonic()
                if left > 0:  # retry until the deadline, the last attempt at it
                    time.sleep(min(_CONNECT_RETRY_PAUSE, left))
                    continue
                raise ServiceUnreachableError(
                    f"could not reach the service at {self._base} within {self._connect_timeout:g} s "
                    f"({type(exc).__name__}: {_one_line(str(exc)) or 'no answer'}); is `privpub serve` running "
                    "there? Check --url / $PRIVPUB_URL, or wait longer with --connect-timeout") from None
            except httpx.HTTPError as exc:
                raise ServiceUnreachableError(
                    f"the service at {self._base} (--url / $PRIVPUB_URL) failed: {type(exc).__name__}: "
                    f"{_one_line(str(exc))}") from None
            return check_response(resp, self._token_env)

    def get(self, path: str, **kwargs: Any) -> Any:
        return self._do("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        return self._do("POST", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self._do("DELETE", path, **kwargs)


class ServiceUnreachableError(PrivpubError):
    """The service at --url could not be reached."""


class ServiceError(ParameterError):
    """The service refused a request (4xx/5xx), in the CLI's one error format."""




def _json(resp: Any) -> Any:
    try:
        return resp.json()
    except ValueError:
        raise ServiceUnreachableError(f"the service at {resp.request.url} answered {resp.status_code} with "
                                      "a body that is not JSON; is --url a privpub service?") from None


def _client(url: str | None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
            token: str | None = None, token_env: str = ADMIN_TOKEN_ENV) -> tuple[_Client, str]:
    _need_extra(client=True)
    import httpx

    base = base_url(url)
    check_connect_timeout(connect_timeout)
    token = token if token is not None else os.environ.get(ADMIN_TOKEN_ENV)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = httpx.Client(base_url=base, headers=headers, timeout=600.0)
    return _Client(client, base, connect_timeout, token_env), base


#: pydantic's error types whose message quotes the regular expression: shown as this instead
_PLAIN_TYPES = {"string_pattern_mismatch": "has the wrong format"}
#: the first element of a FastAPI ``loc`` (where the field is), not part of the field's name
_PLACES = ("body", "query", "path", "header")


def _problem(item: dict[str, Any]) -> tuple[str | None, str]:
    """``(field, message)`` of one problem a service listed: FastAPI's ``{"loc", "msg", "type"}``
    (from its data: the field from ``loc``, the wording from ``type``) or privpub's older
    ``{"field", "message"}``."""
    if "loc" in item or "msg" in item:
        loc = item.get("loc") or []
        field = ".".join(str(p) for p in (loc[1:] if loc and loc[0] in _PLACES else loc)) or None
        return field, _PLAIN_TYPES.get(str(item.get("type")), _one_line(str(item.get("msg", ""))))
    return item.get("field"), _one_line(str(item.get("message", "")))


def service_error_message(status: int, message: str, field: str | None = None,
                          errors: list[dict[str, Any]] | None = None, token_env: str = ADMIN_TOKEN_ENV) -> str:
    """The CLI's one wording of a service error: what was wrong, naming the field or the token variable.

    ``errors`` lists every problem, as the service's ``detail`` (FastAPI's ``loc``/``msg``/``type``)
    or its ``error.errors`` (``field``/``message``); without it, ``message`` and ``field`` are the one.

    Examples
    --------
    >>> service_error_message(404, "campaign 'abc' not found")
    "the service refused the request (404): campaign 'abc' not found"
    >>> service_error_message(422, "must be > 0", "epsilon")
    'the service refused the request (422): epsilon: must be > 0'
    >>> service_error_message(422, "", errors=[{"loc": ["body", "epsilon"], "msg": "must be > 0", "type": "x"},
    ...                                        {"loc": ["path", "id"], "msg": "String should match pattern '^a$'",
    ...                                         "type": "string_pattern_mismatch"}])
    'the service refused the request (422): epsilon: must be > 0; id: has the wrong format'
    >>> service_error_message(403, "the admin token is not valid")
    'the service refused the request (403): the admin token is not valid; set PRIVPUB_ADMIN_TOKEN to the token the service was started with'
    """
    items = [_problem(e) for e in errors or [] if isinstance(e, dict)]
    if not items:
        items = [(field, _one_line(message))]
    text = "; ".join(f"{f}: {m}" if f else m for f, m in items)
    if status in (401, 403) and token_env not in text:
        if token_env == PRODUCER_TOKEN_ENV:
            text += (f"; set {PRODUCER_TOKEN_ENV} (or --token) to the stream's producer token, or "
                     f"{ADMIN_TOKEN_ENV} to the admin token")
        elif not items[0][0]:  # an enrollment token or assignment names its own field
            text += f"; set {ADMIN_TOKEN_ENV} to the token the service was started with"
    return f"the service refused the request ({status}): {text}"


def check_response(resp: Any, token_env: str = ADMIN_TOKEN_ENV) -> Any:
    """``resp`` if it succeeded, else a :class:`ServiceError` in the CLI's one format (every problem
    the service listed, each naming its field)."""
    if resp.status_code < 400:
        return resp
    try:
        body = resp.json()
        err = body.get("error", {}) if isinstance(body, dict) else {}
        detail = body.get("detail") if isinstance(body, dict) else None
        message, field = str(err.get("message", resp.text[:300])), err.get("field")
        errors = detail if isinstance(detail, list) else err.get("errors")
    except ValueError:
        message, field, errors = _one_line(resp.text)[:300] or "no details", None, None
    raise ServiceError(service_error_message(resp.status_code, message, field, errors, token_env))


def submission_errors(token_env: str = ADMIN_TOKEN_ENV) -> Any:
    """A context manager: the client SDK's refusals and give-ups in the CLI's one format."""
    import contextlib

    from privpub.client import OfflineError, SubmissionError

    @contextlib.contextmanager
    def manager() -> Any:
        try:
            yield
        except SubmissionError as exc:
            raise ServiceError(service_error_message(exc.status, exc.message, exc.field,
                                                     token_env=token_env)) from None
        except OfflineError as exc:
            raise ServiceUnreachableError(f"the service stopped answering: {exc}") from None

    return manager()


def _check(resp: Any) -> Any:
    return check_response(resp)


def connect(url: str | None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, token: str | None = None,
            token_env: str = ADMIN_TOKEN_ENV) -> tuple[_Client, str]:
    """A client of a service that answers ``GET /health``, waiting up to ``connect_timeout`` seconds for it."""
    client, base = _client(url, connect_timeout, token, token_env)
    client.get("/health", timeout=10.0)
    return client, base


@campaign_app.command("create")
@handle_errors
def campaign_create(
    spec: Annotated[Path, typer.Argument(help="Campaign declaration (YAML or JSON).")],
    url: Annotated[str | None, _URL] = None,
    connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT,
) -> None:
    """Create a campaign from a YAML/JSON declaration; prints its public configuration (JSON)."""
    _need_extra(client=True)
    import yaml

    if not spec.is_file():
        what = "is a directory" if spec.is_dir() else "does not exist"
        raise DataNotFoundError(f"campaign file {str(spec)!r} {what}")
    try:
        body = yaml.safe_load(spec.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ParameterError(f"campaign file {str(spec)!r} is not UTF-8 text (YAML or JSON)") from None
    except yaml.YAMLError as exc:
        raise ParameterError(f"campaign file {str(spec)!r} is not valid YAML: {exc}") from None
    if not isinstance(body, dict):
        raise ParameterError(f"campaign file {str(spec)!r} must hold a mapping (name, kind, epsilon, ...), "
                             f"got {type(body).__name__}")
    check_spec("campaign", body, f"campaign file {str(spec)!r}")
    client, _ = _client(url, connect_timeout)
    typer.echo(json.dumps(_json(client.post("/campaigns", json=body)), indent=2))


@campaign_app.command("status")
@handle_errors
def campaign_status(campaign_id: Annotated[str, _CAMPAIGN_ID], url: Annotated[str | None, _URL] = None,
                    connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT) -> None:
    """A campaign's status (JSON)."""
    ident = _id(campaign_id)
    client, _ = _client(url, connect_timeout)
    typer.echo(json.dumps(_json(client.get(f"/campaigns/{ident}/status")), indent=2))


@campaign_app.command("release")
@handle_errors
def campaign_release(
    campaign_id: Annotated[str, _CAMPAIGN_ID],
    url: Annotated[str | None, _URL] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write the release here: .json, or .csv (cells that could start a spreadsheet "
                               "formula get a leading ')")] = None,
    force: ForceOption = False,
    connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT,
) -> None:
    """Publish a release from the stored reports (admin); prints a summary."""
    from privpub._io import atomic_output, check_output, output_format, write_json

    if output is not None:  # checked before the release spends budget
        check_output(output, force=force, supported=("json", "csv"))
    ident = _id(campaign_id)
    client, _ = _client(url, connect_timeout)
    rel = _json(client.post(f"/campaigns/{ident}/releases"))
    if output is not None and output_format(output, ("json", "csv")) == "csv":
        # the service's CSV (formula cells neutralised there), written atomically
        resp = client.get(f"/campaigns/{ident}/releases/{rel['id']}", params={"format": "csv"})
        with atomic_output(output, force=force) as tmp:
            tmp.write_bytes(resp.content)
    elif output is not None:
        write_json(rel, output, force=force)
    summary = {k: rel[k] for k in ("id", "n_reports", "epsilon", "ledger_total")}
    if "estimates" in rel:
        summary["estimates"] = rel["estimates"]
    typer.echo(json.dumps(summary, indent=2))


@campaign_app.command("tokens")
@handle_errors
def campaign_tokens(campaign_id: Annotated[str, _CAMPAIGN_ID],
                    count: Annotated[int, typer.Option("--count", help="How many tokens (1..100000).")] = 1,
                    url: Annotated[str | None, _URL] = None,
                    connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT) -> None:
    """Create one-time enrollment tokens (admin); one per line."""
    if not 1 <= count <= 100_000:
        raise ParameterError(f"--count must be in 1..100000, got {count}")
    ident = _id(campaign_id)
    client, _ = _client(url, connect_timeout)
    for t in _json(client.post(f"/campaigns/{ident}/tokens", json={"count": count}))["tokens"]:
        typer.echo(t)


@campaign_app.command("close")
@handle_errors
def campaign_close(campaign_id: Annotated[str, _CAMPAIGN_ID], url: Annotated[str | None, _URL] = None,
                   connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT) -> None:
    """Stop accepting reports (admin)."""
    ident = _id(campaign_id)
    client, _ = _client(url, connect_timeout)
    client.post(f"/campaigns/{ident}/close")
    typer.echo(f"campaign {campaign_id} closed")


@campaign_app.command("archive")
@handle_errors
def campaign_archive(campaign_id: Annotated[str, _CAMPAIGN_ID], url: Annotated[str | None, _URL] = None,
                     connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT) -> None:
    """Close and archive a campaign (admin): its releases stay readable, nothing else is accepted."""
    ident = _id(campaign_id)
    client, _ = _client(url, connect_timeout)
    client.delete(f"/campaigns/{ident}")
    typer.echo(f"campaign {campaign_id} archived")


def _id(ident: str, what: str = "campaign") -> str:
    """A campaign's or stream's id, checked before anything is sent (16 hexadecimal digits)."""
    import re

    if not ident.strip():
        raise ParameterError(f"the {what} id must not be empty")
    if not re.fullmatch(r"[0-9a-f]{16}", ident):
        raise ParameterError(f"the {what} id must be 16 hexadecimal digits (as `privpub {what} create` printed), "
                             f"got {ident!r}")
    return ident


def simulate_values(config: dict[str, Any], n: int, rng: np.random.Generator) -> Any:
    """``n`` made-up participants' values for a campaign (demos and load tests; not real data)."""
    import pandas as pd

    kind = config["kind"]
    if kind == "frequency":
        cats = config["categories"]
        w = 1.0 / np.arange(1, len(cats) + 1)
        return [cats[i] for i in rng.choice(len(cats), size=n, p=w / w.sum())]
    if kind == "spatial":
        from privpub.spatial import synthetic_checkin

        x0, y0, x1, y1 = config["bounds"]
        pts = rng.permutation(synthetic_checkin(n, rng=rng))  # arrivals in random order
        return np.column_stack([x0 + pts[:, 0] * (x1 - x0), y0 + pts[:, 1] * (y1 - y0)])
    attrs = config["schema"]["attributes"]
    codes = np.empty((n, len(attrs)), dtype=np.int64)
    codes[:, 0] = rng.integers(len(attrs[0]["categories"]), size=n)
    for j in range(1, len(attrs)):  # each attribute follows the previous one 70% of the time
        size = len(attrs[j]["categories"])
        follow = rng.random(n) < 0.7
        codes[:, j] = np.where(follow, codes[:, j - 1] % size, rng.integers(size, size=n))
    return pd.DataFrame({a["name"]: np.asarray(a["categories"], dtype=object)[codes[:, j]]
                         for j, a in enumerate(attrs)})


@handle_errors
def participate(
    campaign: Annotated[str, typer.Option("--campaign", help="The campaign's id.")],
    url: Annotated[str | None, _URL] = None,
    value: Annotated[str | None, typer.Option("--value", help="One device's value (a category; 'x,y' for a "
                                                               "spatial campaign; JSON for a record).")] = None,
    values: Annotated[Path | None, typer.Option("--values", help="CSV of participants' values, one per row "
                                                                  "(frequency: column 'value'; spatial: x,y; synth: "
                                                                  "the attributes).")] = None,
    simulate: Annotated[int | None, typer.Option("--simulate", help="Simulate this many participants.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of --simulate's values (the randomisers "
                                                             "always use the OS CSPRNG unless --rng-seed).")] = None,
    rng_seed: Annotated[int | None, typer.Option("--rng-seed", help="Seed the local randomisers "
                                                                     "(reproducible simulations only).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Reports per upload (gateway mode).")] = 1000,
    token: Annotated[str | None, typer.Option("--token", help="Enrollment token (with --value).")] = None,
    connect_timeout: Annotated[float, _CONNECT] = DEFAULT_CONNECT_TIMEOUT,
) -> None:
    """Take part in a campaign: perturb locally, upload the reports, print the receipt(s).

    Each value is one participant, randomised on this machine with the library's client code;
    only reports are sent.
    """
    base = base_url(url)
    if sum(x is not None for x in (value, values, simulate)) != 1:
        raise ParameterError("give exactly one of --value, --values or --simulate")
    if simulate is not None and simulate < 1:
        raise ParameterError(f"--simulate must be >= 1, got {simulate}")
    if batch_size < 1:
        raise ParameterError(f"--batch-size must be >= 1, got {batch_size}")
    if not campaign.strip():
        raise ParameterError("--campaign must not be empty")
    if values is not None and not values.is_file():
        raise DataNotFoundError(f"--values file {str(values)!r} does not exist or is not a file")
    campaign = _id(campaign)
    _need_extra(client=True)
    connect(url, connect_timeout)  # an unreachable service fails here, within --connect-timeout
    with submission_errors():
        _participate(base, campaign, value, values, simulate, seed, rng_seed, batch_size, token)


def _participate(base: str, campaign: str, value: str | None, values: Path | None, simulate: int | None,
                 seed: int | None, rng_seed: int | None, batch_size: int, token: str | None) -> None:
    from privpub.cli._common import read_table
    from privpub.client import Gateway, Participant

    rng: Any = "secure" if rng_seed is None else rng_seed
    if value is not None:
        p = Participant(base, campaign, token=token, rng=rng)
        kind = p.config()["kind"]
        v: Any = value
        if kind == "spatial":
            try:
                v = [float(t) for t in value.split(",")]
            except ValueError:
                raise ParameterError(f"--value must be 'x,y' for a spatial campaign, got {value!r}") from None
            if len(v) != 2:
                raise ParameterError(f"--value must be 'x,y' for a spatial campaign, got {value!r}")
        elif kind == "synth":
            try:
                v = json.loads(value)
            except ValueError:
                raise ParameterError(f"--value must be a JSON object of the attributes, got {value!r}") from None
            if not isinstance(v, dict):
                raise ParameterError(f"--value must be a JSON object of the attributes, got {value!r}")
        r = p.submit(v)
        typer.echo(json.dumps({"report_id": r.report_id, "received": r.received, "queued": r.queued}))
        return
    gw = Gateway(base, campaign, batch_size=batch_size, rng=rng)
    cfg = gw.config()
    if simulate is not None:
        data = simulate_values(cfg, simulate, np.random.default_rng(seed))
    else:
        assert values is not None
        frame = read_table(values)
        if len(frame) == 0:
            raise ParameterError(f"--values file {str(values)!r} has no rows")
        if cfg["kind"] == "frequency":
            data = frame["value" if "value" in frame.columns else frame.columns[0]].astype(str).tolist()
        elif cfg["kind"] == "spatial":
            if not {"x", "y"} <= set(map(str, frame.columns)):
                raise ParameterError(f"--values file {str(values)!r} needs columns x and y for a spatial campaign, "
                                     f"got {list(map(str, frame.columns))}")
            try:
                data = frame[["x", "y"]].to_numpy(dtype=np.float64)
            except (TypeError, ValueError):
                raise ParameterError(f"--values file {str(values)!r}: columns x and y must be numbers") from None
        else:
            data = frame.astype(str)
    res = gw.submit_many(data)
    typer.echo(json.dumps({"participants": len(data), "new": res.new, "duplicates": res.duplicates,
                           "rejected": len(res.rejected)}))
    if res.rejected:
        sys.exit(1)
