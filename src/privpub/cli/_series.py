"""Reading a count series or event times from a file (``privpub stream publish`` and ``produce``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from privpub.cli._common import read_table
from privpub.errors import DataNotFoundError, ParameterError

__all__ = ["read_privacy_ids", "read_series"]


def read_series(path: Path, column: str | None, *, timestamps: bool = False) -> np.ndarray:
    """A numeric column (or .txt / .npy series); ``timestamps``: text times become Unix seconds."""
    suffix = path.suffix.lower()
    if suffix == ".npy" and column is None:
        from privpub._io import read_npy

        arr = read_npy(path)
        if arr.dtype.names is None:
            return np.asarray(arr)
    if suffix == ".txt":
        from privpub.stream import load_counts

        if not path.is_file():
            raise DataNotFoundError(f"input file {str(path)!r} does not exist or is not a file")
        try:
            return load_counts(path)
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            raise ParameterError(f"could not read {str(path)!r} as a count series (one number per line): "
                                 f"{' '.join(str(exc).split())[:200]}") from exc
    frame = read_table(path)
    if column is None:
        if frame.shape[1] != 1:
            raise ParameterError(f"--column is required: {str(path)!r} has columns {list(frame.columns)}")
        column = str(frame.columns[0])
    if column not in frame.columns:
        raise ParameterError(f"--column must name a column of {str(path)!r} {list(frame.columns)}, got {column!r}")
    values = frame[column]
    if timestamps and not pd.api.types.is_numeric_dtype(values):
        try:
            stamps = pd.to_datetime(values, utc=True)
        except (ValueError, TypeError):
            raise ParameterError(f"column {column!r} must hold Unix times or timestamps") from None
        return (stamps - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    if not pd.api.types.is_numeric_dtype(values):
        raise ParameterError(f"column {column!r} must be numeric, got dtype {values.dtype}")
    return np.asarray(values.to_numpy())


def read_privacy_ids(path: Path, column: str, n: int) -> list[str | int]:
    """The privacy-id column of a table of events (``--privacy-id``): integers stay integers, any
    other value is sent as its text; a missing id is an error naming its row."""
    if path.suffix.lower() in (".txt", ".npy"):
        raise ParameterError(f"--privacy-id needs a table (CSV or Parquet) with an id column, got {path.name}",
                             param="--privacy-id")
    frame = read_table(path)
    if column not in frame.columns:
        raise ParameterError(f"--privacy-id must name a column of {str(path)!r} {list(frame.columns)}, got {column!r}",
                             param="--privacy-id")
    values = frame[column]
    if len(values) != n:  # the same table as the times
        raise ParameterError(f"--privacy-id: {len(values)} ids for {n} events", param="--privacy-id")
    missing = values.isna().to_numpy()
    if missing.any():
        raise ParameterError(f"{path.name} has a missing privacy id (row {int(np.flatnonzero(missing)[0])}): every "
                             "event of a person-per-step stream needs its person", param="--privacy-id")
    if pd.api.types.is_integer_dtype(values):
        return [int(v) for v in values.to_numpy()]
    return [str(v) for v in values.to_numpy()]
