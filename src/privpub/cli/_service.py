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

from privpub.cli._common import handle_errors
from privpub.errors import ParameterError

db_app = typer.Typer(help="The service's database: schema upgrades (Alembic).", no_args_is_help=True)
campaign_app = typer.Typer(help="Create and manage collection campaigns on a running service.",
                           no_args_is_help=True)

_DB = typer.Option("--db", help="Database: a SQLite file path or URL (sqlite:///x.db, postgresql+psycopg://...).")
_URL = typer.Option("--url", envvar="PRIVPUB_URL", help="The service's base URL (default $PRIVPUB_URL).")


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add the service commands to the application."""
    app.command("serve")(serve)
    app.command("participate")(participate)
    app.add_typer(db_app, name="db")
    app.add_typer(campaign_app, name="campaign")


def _need_extra() -> None:
    try:
        import fastapi  # noqa: F401
        import sqlalchemy  # noqa: F401
    except ImportError as exc:
        raise ParameterError(f"the service needs the privpub[service] extra: pip install 'privpub[service]' ({exc})") from None


@handle_errors
def serve(
    db: Annotated[str, _DB] = "campaigns.db",
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option("--workers", help="Worker processes.")] = 1,
    upgrade: Annotated[bool, typer.Option("--upgrade/--no-upgrade",
                                          help="Upgrade the database schema before starting.")] = True,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning, error.")] = "info",
) -> None:
    """Run the service: collection campaigns and real-time streams (admin token: $PRIVPUB_ADMIN_TOKEN).

    The default database is a SQLite file created on first start. Put the service behind a TLS
    proxy for anything but loopback (docs/service.md).
    """
    _need_extra()
    import uvicorn

    from privpub.service import database_url
    from privpub.service import upgrade as do_upgrade

    url = database_url(db)
    if upgrade:
        rev = do_upgrade(url)
        typer.echo(f"database schema at revision {rev}", err=True)
    if not os.environ.get("PRIVPUB_ADMIN_TOKEN"):
        typer.echo("warning: PRIVPUB_ADMIN_TOKEN is not set: admin endpoints (creating campaigns, releases) "
                   "are disabled", err=True)
    os.environ["PRIVPUB_DB"] = url
    uvicorn.run("privpub.service._app:create_app_from_env", factory=True, host=host, port=port,
                workers=workers, access_log=False, log_level=log_level, server_header=False)


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


def _client(url: str | None) -> tuple[Any, str]:
    import httpx

    base = (url or "http://127.0.0.1:8000").rstrip("/")
    token = os.environ.get("PRIVPUB_ADMIN_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # a service that is still starting: retry the connection for about 15 seconds
    transport = httpx.HTTPTransport(retries=6)
    return httpx.Client(base_url=base, headers=headers, timeout=600.0, transport=transport), base


def _check(resp: Any) -> Any:
    if resp.status_code >= 400:
        try:
            err = resp.json().get("error", {})
            msg = err.get("message", resp.text) + (f" (field {err['field']!r})" if err.get("field") else "")
        except ValueError:
            msg = resp.text
        raise ParameterError(f"the service answered {resp.status_code}: {msg}")
    return resp


@campaign_app.command("create")
@handle_errors
def campaign_create(
    spec: Annotated[Path, typer.Argument(help="Campaign declaration (YAML or JSON).")],
    url: Annotated[str | None, _URL] = None,
) -> None:
    """Create a campaign from a YAML/JSON declaration; prints its public configuration (JSON)."""
    _need_extra()
    import yaml

    if not spec.is_file():
        raise ParameterError(f"campaign file {str(spec)!r} does not exist")
    try:
        body = yaml.safe_load(spec.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ParameterError(f"campaign file {str(spec)!r} is not valid YAML: {exc}") from None
    client, _ = _client(url)
    typer.echo(json.dumps(_check(client.post("/campaigns", json=body)).json(), indent=2))


@campaign_app.command("status")
@handle_errors
def campaign_status(campaign_id: str, url: Annotated[str | None, _URL] = None) -> None:
    """A campaign's status (JSON)."""
    client, _ = _client(url)
    typer.echo(json.dumps(_check(client.get(f"/campaigns/{campaign_id}/status")).json(), indent=2))


@campaign_app.command("release")
@handle_errors
def campaign_release(
    campaign_id: str,
    url: Annotated[str | None, _URL] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the release (JSON) here.")] = None,
) -> None:
    """Publish a release from the stored reports (admin); prints a summary."""
    client, _ = _client(url)
    rel = _check(client.post(f"/campaigns/{campaign_id}/releases")).json()
    if output is not None:
        output.write_text(json.dumps(rel, indent=2))
    summary = {k: rel[k] for k in ("id", "n_reports", "epsilon", "ledger_total")}
    if "estimates" in rel:
        summary["estimates"] = rel["estimates"]
    typer.echo(json.dumps(summary, indent=2))


@campaign_app.command("tokens")
@handle_errors
def campaign_tokens(campaign_id: str, count: Annotated[int, typer.Option("--count")] = 1,
                    url: Annotated[str | None, _URL] = None) -> None:
    """Create one-time enrollment tokens (admin); one per line."""
    client, _ = _client(url)
    for t in _check(client.post(f"/campaigns/{campaign_id}/tokens", json={"count": count})).json()["tokens"]:
        typer.echo(t)


@campaign_app.command("close")
@handle_errors
def campaign_close(campaign_id: str, url: Annotated[str | None, _URL] = None) -> None:
    """Stop accepting reports (admin)."""
    client, _ = _client(url)
    _check(client.post(f"/campaigns/{campaign_id}/close"))
    typer.echo(f"campaign {campaign_id} closed")


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
) -> None:
    """Take part in a campaign: perturb locally, upload the reports, print the receipt(s).

    Each value is one participant, randomised on this machine with the library's client code;
    only reports are sent.
    """
    _need_extra()
    import pandas as pd

    from privpub.client import Gateway, Participant

    base = (url or "http://127.0.0.1:8000").rstrip("/")
    rng: Any = "secure" if rng_seed is None else rng_seed
    if sum(x is not None for x in (value, values, simulate)) != 1:
        raise ParameterError("give exactly one of --value, --values or --simulate")
    if value is not None:
        p = Participant(base, campaign, token=token, rng=rng)
        kind = p.config()["kind"]
        v: Any = value
        if kind == "spatial":
            v = [float(t) for t in value.split(",")]
        elif kind == "synth":
            v = json.loads(value)
        r = p.submit(v)
        typer.echo(json.dumps({"report_id": r.report_id, "received": r.received, "queued": r.queued}))
        return
    gw = Gateway(base, campaign, batch_size=batch_size, rng=rng)
    cfg = gw.config()
    if simulate is not None:
        if simulate < 1:
            raise ParameterError(f"--simulate must be >= 1, got {simulate}")
        data = simulate_values(cfg, simulate, np.random.default_rng(seed))
    else:
        assert values is not None
        frame = pd.read_csv(values, dtype=str if cfg["kind"] != "spatial" else float)
        if cfg["kind"] == "frequency":
            data = frame["value" if "value" in frame.columns else frame.columns[0]].astype(str).tolist()
        elif cfg["kind"] == "spatial":
            data = frame[["x", "y"]].to_numpy(dtype=np.float64)
        else:
            data = frame
    res = gw.submit_many(data)
    typer.echo(json.dumps({"participants": len(data), "new": res.new, "duplicates": res.duplicates,
                           "rejected": len(res.rejected)}))
    if res.rejected:
        sys.exit(1)
