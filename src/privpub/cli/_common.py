"""Helpers shared by the CLI commands: error mapping and table I/O."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import typer

from privpub.errors import DataNotFoundError, ParameterError, PrivpubError

__all__ = ["handle_errors", "read_json", "read_table", "write_table"]

F = TypeVar("F", bound=Callable[..., Any])

#: exit code of a command that failed with a privpub error (bad input, missing data, budget)
ERROR_EXIT_CODE = 2


def handle_errors(func: F) -> F:
    """Map a :class:`PrivpubError` raised by a command to a one-line message and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except PrivpubError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=ERROR_EXIT_CODE) from None

    return wrapper  # type: ignore[return-value]


def read_table(path: Path | str) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame; errors name the file."""
    p = Path(path)
    if not p.is_file():
        raise DataNotFoundError(f"input file {str(p)!r} does not exist or is not a file")
    suffix = p.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            return pd.read_parquet(p)
        except ImportError as exc:
            raise ParameterError(
                "reading Parquet needs pyarrow: pip install 'privpub[parquet]'"
            ) from exc
    try:
        return pd.read_csv(p)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise ParameterError(f"could not read {str(p)!r} as CSV: {exc}") from exc


def read_json(path: Path | str, what: str) -> Any:
    """Read a JSON file (a schema, a taxonomy); every failure is a privpub error naming the file."""
    import json

    p = Path(path)
    if not p.is_file():
        raise DataNotFoundError(f"{what} file {str(p)!r} does not exist or is not a file")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, OSError) as exc:
        raise ParameterError(f"{what} file {str(p)!r} is not valid UTF-8 JSON: {exc}") from exc


def write_table(frame: pd.DataFrame, path: Path | str) -> Path:
    """Write ``frame`` as CSV (or Parquet for .parquet), creating parent directories."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() in (".parquet", ".pq"):
        frame.to_parquet(p, index=False)
    else:
        frame.to_csv(p, index=False)
    return p
