"""``privpub budget show PATH``: what a budget file (``--budget-file``) has spent, on which data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privpub.cli._common import handle_errors
from privpub.errors import DataNotFoundError, ParameterError

budget_app = typer.Typer(
    help="Privacy-budget sessions kept in a file (the --budget-file of the publishing commands).",
    no_args_is_help=True,
)


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub budget ...`` to the application."""
    app.add_typer(budget_app, name="budget")


@budget_app.command("show")
@handle_errors
def show(
    path: Annotated[Path, typer.Argument(help="The budget file (JSON) given to --budget-file.")],
) -> None:
    """List the releases a budget file paid for: total, spent and remaining epsilon, per data label."""
    from privpub.core import Session

    if path.is_dir():
        raise ParameterError(f"budget file {str(path)!r} is a directory")
    if not path.exists():
        raise DataNotFoundError(f"budget file {str(path)!r} does not exist (a publishing command with "
                                "--budget-file PATH --budget-total EPS creates it)")
    session = Session.open(path)
    charges = session.charges
    typer.echo(f"budget file {path}: total epsilon {session.total_epsilon:g}, spent {session.spent:.6g}, "
               f"remaining {session.remaining:.6g}")
    typer.echo("(releases add up, by sequential composition; each is charged its declared epsilon, which is at "
               "least the total its ledger composes to)")
    if not charges:
        typer.echo("no releases yet")
        return
    typer.echo("\nspent per data:")
    for label, eps in session.spent_on().items():
        typer.echo(f"  {eps:<10.6g} {label or '(no label)'}")
    typer.echo("\nreleases (oldest first; 'reserved' = interrupted while publishing, counted as spent):")
    header = f"  {'time':<25} {'method':<18} {'epsilon':>10}  {'status':<9} data"
    typer.echo(header)
    for c in charges:
        typer.echo(f"  {c.time:<25} {c.method:<18} {c.epsilon:>10.6g}  {c.status:<9} {c.data}"
                   + (f"  ({c.note})" if c.note else ""))
        if c.unit is not None or c.converted_from is not None:  # record-level charges say nothing, as before
            typer.echo(f"  {'':<25} protects {c.describe()}")
