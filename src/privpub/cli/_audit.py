"""CLI commands of privpub.audit: ``privpub audit run``, ``list``, ``structure`` and ``client``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from privpub.cli._common import ForceOption, check_output, handle_errors, write_table

#: formats of the audit table (--output)
FORMATS = ("csv", "json", "parquet")

audit_app = typer.Typer(
    help="Empirical privacy audits: lower confidence bounds on epsilon with negative controls.",
    no_args_is_help=True,
)


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub audit ...`` to the application."""
    app.add_typer(audit_app, name="audit")


def _fmt(v: object) -> str:
    return "" if isinstance(v, float) and math.isnan(v) else f"{v:.3f}"


def markdown_table(frame: pd.DataFrame) -> str:
    """The audit table as markdown (the format of docs/privacy.md)."""
    lines = ["| step | declared ε | trials/input | 99% lower bound | exact ε | control | control bound | flagged |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in frame.itertuples():
        lines.append(
            f"| {r.case} | {r.epsilon:g} | {r.trials} | {_fmt(r.lower_bound)}{'' if r.passed else ' **FAIL**'} | "
            f"{_fmt(r.exact_epsilon)} | {r.control} | {_fmt(r.control_lower_bound)} | "
            f"{'yes' if r.control_flagged else '**NO**'} |"
        )
    return "\n".join(lines)


@audit_app.command("run")
@handle_errors
def run(
    full: Annotated[bool, typer.Option("--full", help="The full tier: 5x the trials, extra cases.")] = False,
    part: Annotated[list[str] | None, typer.Option(
        "--part", help="Only this part (repeatable): core, ldp, histogram, stream, spatial, decision, ldp_synth.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed of the audit.")] = 0,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Also write the table: .csv, .json or .parquet (from the suffix).")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print a markdown table.")] = False,
    force: ForceOption = False,
) -> None:
    """Audit every private step against its declared epsilon, with its negative control.

    Exits with code 1 if a step's lower bound exceeds its epsilon or a control is not flagged.
    """
    from privpub.audit import run_audits

    if output is not None:
        check_output(output, force=force, supported=FORMATS)
    tier = "full" if full else "fast"
    frame = run_audits(tier, parts=part, rng=seed,
                       progress=lambda name: typer.echo(f"auditing {name} ...", err=True))
    if output is not None:
        write_table(frame, output, force=force, formats=FORMATS)
    if markdown:
        typer.echo(markdown_table(frame))
    else:
        cols = ["case", "epsilon", "trials", "lower_bound", "passed", "control_lower_bound", "control_flagged"]
        typer.echo(frame[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    bad = frame[~frame["passed"] | ~frame["control_flagged"]]
    if not bad.empty:
        typer.echo(f"FAILED: {', '.join(bad['case'])}", err=True)
        raise typer.Exit(code=1)
    typer.echo(f"all {len(frame)} audits passed; every negative control flagged", err=True)


@audit_app.command("list")
@handle_errors
def list_cases(
    full: Annotated[bool, typer.Option("--full", help="List the full tier.")] = False,
) -> None:
    """List the audited steps with their neighbouring inputs."""
    from privpub.audit import audit_cases

    for case in audit_cases("full" if full else "fast"):
        typer.echo(f"{case.name}  (epsilon {case.epsilon:g}; control: {case.control_note})\n    {case.neighbours}")


@audit_app.command("structure")
@handle_errors
def structure(
    part: Annotated[list[str] | None, typer.Option(
        "--part", help="Only this part's registry (repeatable): histogram, spatial, decision, ldp_synth, stream.")
    ] = None,
    trials: Annotated[int | None, typer.Option(
        "--trials", help="Runs per input (default: each part's; AIM and MST take seconds per run).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed of the audit.")] = 0,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Also write the table: .csv, .json or .parquet (from the suffix).")] = None,
    force: ForceOption = False,
) -> None:
    """Structural checks (lattice, float low-order bits, support) of every registered publisher.

    Each publisher runs on worst-case neighbouring inputs; a check is flagged when an event of the
    release breaks P[E|D] <= e^eps P[E|D'] + delta at 99.9% confidence (an honest publisher is
    flagged by a check with probability at most 0.001). Publishers whose release says
    private=False are listed and not checked. Exits with code 1 if a check is flagged.
    """
    import time

    from privpub.audit import CHECKS, structure_targets
    from privpub.core import check_positive_int

    if output is not None:
        check_output(output, force=force, supported=FORMATS)
    n = None if trials is None else check_positive_int(trials, "trials", minimum=100)
    rows = []
    for target in structure_targets(part):
        typer.echo(f"auditing {target.name} ...", err=True)
        start = time.perf_counter()
        _, private = target.probe()
        row: dict[str, object] = {"publisher": target.name, "budget": target.budget, "private": private}
        if private:
            results = target.audit(trials=n, rng=seed)
            for check in CHECKS:
                res = results[check]
                row[check] = "FLAGGED" if res.flagged else "passed"
                row[f"{check}_epsilon_lower"] = res.epsilon_lower
                row[f"{check}_event"] = res.event
            row["trials"] = results[CHECKS[0]].trials
        row["seconds"] = time.perf_counter() - start
        rows.append(row)
    frame = pd.DataFrame(rows)
    if output is not None:
        write_table(frame, output, force=force, formats=FORMATS)
    cols = ["publisher", "budget", *[c for c in CHECKS if c in frame], "seconds"]
    typer.echo(frame[cols].fillna("declared not private").to_string(
        index=False, float_format=lambda v: f"{v:.1f}"))
    flagged = [r["publisher"] for r in rows if any(r.get(c) == "FLAGGED" for c in CHECKS)]
    if flagged:
        typer.echo(f"FLAGGED: {', '.join(map(str, flagged))}", err=True)
        raise typer.Exit(code=1)
    typer.echo(f"no structural check flagged on {sum(bool(r['private']) for r in rows)} publishers", err=True)


@audit_app.command("client", context_settings={"allow_interspersed_args": False})
@handle_errors
def client(
    command: Annotated[list[str], typer.Argument(
        help="The client's conformance entry point and its arguments, after `--`.", show_default=False)],
    config: Annotated[Path, typer.Option(
        "--config", help="The campaign's public configuration (JSON, as GET /campaigns/{id} returns it).")],
    reports: Annotated[int, typer.Option("--reports", help="Reports per input and configuration.")] = 3000,
    alpha: Annotated[float, typer.Option(
        "--alpha", help="False-alarm rate of each check on a conforming client.")] = 1e-6,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds allowed for each run of the client.")] = 300.0,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Also write the checks as a table: .csv, .json or .parquet.")] = None,
    force: ForceOption = False,
) -> None:
    """Hold a client implementation to a campaign's configuration over the wire format.

    The command gets the public configuration as JSON on its first stdin line (for a KDG-HT
    phase with its assignment and partition), then one input value per line, and must write
    one base64 wire report per input, in order. Every scenario is checked for the wire format,
    the exact report distribution and an epsilon lower bound, each with a negative control at
    twice the epsilon. Exits 0 when every check passes and every control is caught, 1 otherwise.
    """
    import json

    from privpub.audit import ClientError, audit_client
    from privpub.errors import ParameterError

    if output is not None:
        check_output(output, force=force, supported=FORMATS)
    try:
        cfg = json.loads(config.read_text())
    except FileNotFoundError:
        raise ParameterError(f"config file {str(config)!r} does not exist") from None
    except (OSError, ValueError) as exc:
        raise ParameterError(f"config file {str(config)!r} is not readable JSON: {exc}") from None
    try:
        audit = audit_client(cfg, command, reports=reports, alpha=alpha, timeout=timeout,
                             progress=lambda name: typer.echo(f"auditing {name} ...", err=True))
    except ClientError as exc:
        typer.echo(f"FAILED: the client broke the protocol: {exc}", err=True)
        raise typer.Exit(code=1) from None
    frame = pd.DataFrame(audit.table())
    if output is not None:
        write_table(frame, output, force=force, formats=FORMATS)
    with pd.option_context("display.max_colwidth", 60, "display.width", 200):
        typer.echo(frame.drop(columns=["reports"]).to_string(index=False))
    if audit.failed:
        typer.echo("FAILED: " + "; ".join(f"{c.scenario} {c.check}" for c in audit.failed), err=True)
        raise typer.Exit(code=1)
    if audit.uncaught:
        typer.echo("INCONCLUSIVE: no check caught the negative control of " + ", ".join(audit.uncaught)
                   + f" at {reports} reports; raise --reports", err=True)
        raise typer.Exit(code=1)
    typer.echo(f"all {len(frame)} checks passed on {len(audit.scenarios)} scenarios; every negative control "
               f"caught at {reports} reports per input", err=True)
