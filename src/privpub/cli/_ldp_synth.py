"""CLI commands of privpub.ldp_synth (filled in by that part)."""

from __future__ import annotations

import typer


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add this part's commands to the application."""
