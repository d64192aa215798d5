"""Command-line interface (``privpub``); a thin layer over the library."""

from __future__ import annotations

from privpub.cli._app import app, main, reproduce_app

__all__ = ["app", "main", "reproduce_app"]
