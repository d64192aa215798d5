"""CLI commands of the combined report (``privpub reproduce all``), filled in by that work."""

from __future__ import annotations

import typer


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add this part's commands to the application."""
