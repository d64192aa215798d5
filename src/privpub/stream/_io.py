"""Reading count series (outside the kernels)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from privpub.errors import DataNotFoundError, DomainError

__all__ = ["load_counts"]


def load_counts(path: str | os.PathLike[str]) -> NDArray[np.int64]:
    """Read a count series in file order: one number per line (.txt), a .npy array, or the
    WorldCup98 ``period,count`` CSV (missing minutes filled with 0).

    Raises
    ------
    DataNotFoundError
        If the file does not exist.
    """
    p = Path(path)
    if not p.exists():
        raise DataNotFoundError(f"count series {str(p)!r} does not exist")
    if p.suffix == ".npy":
        arr = np.load(p)
    elif p.suffix == ".csv":
        import pandas as pd

        df = pd.read_csv(p)
        if {"period", "count"} <= set(df.columns):
            idx = pd.to_datetime(df["period"])
            s = pd.Series(df["count"].to_numpy(), index=idx)
            full = pd.date_range(idx.min(), idx.max(), freq="min")
            arr = s.reindex(full, fill_value=0).to_numpy()
        else:
            arr = df.iloc[:, -1].to_numpy()
    else:
        arr = np.loadtxt(p, dtype=np.float64, ndmin=1)
    arr = np.asarray(arr, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or not np.all(arr == np.floor(arr)):
        raise DomainError(f"{str(p)!r} must hold non-negative integer counts")
    return arr.astype(np.int64)
