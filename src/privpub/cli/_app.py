"""The Typer application: ``privpub`` with one sub-command per task and ``privpub reproduce``."""

from __future__ import annotations

import importlib
import sys

import typer

import privpub

app = typer.Typer(
    name="privpub",
    help="Publish histograms, synthetic data, spatial data, decision tables and streams under "
    "differential privacy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
reproduce_app = typer.Typer(
    help="Reproduce a paper's experiments on the real datasets (see docs/results/).",
    no_args_is_help=True,
)
app.add_typer(reproduce_app, name="reproduce")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"privpub {privpub.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """privpub: differentially private data publishing."""


# Each part registers its commands in its own module: privpub.cli._<part>.register(app, reproduce_app)
_PART_MODULES = (
    "privpub.cli._datasets",
    "privpub.cli._demo",
    "privpub.cli._histogram",
    "privpub.cli._ldp_synth",
    "privpub.cli._spatial",
    "privpub.cli._decision",
    "privpub.cli._stream",
    "privpub.cli._audit",
    "privpub.cli._budget",
    "privpub.cli._schema",
    "privpub.cli._report",
    "privpub.cli._service",
)

for _name in _PART_MODULES:
    importlib.import_module(_name).register(app, reproduce_app)


def main() -> None:
    """Console entry point (SIGTERM cleans up like Ctrl-C: no partial output is left)."""
    from privpub.cli._common import install_sigterm_handler

    install_sigterm_handler()
    sys.exit(app())
