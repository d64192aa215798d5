"""Reading a user-supplied count file (histogram or stream) from any path."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privpub.core import check_counts
from privpub.errors import DataNotFoundError, ParameterError, PrivpubError

__all__ = ["load_counts"]


def load_counts(path: str | os.PathLike[str]) -> NDArray[np.int64]:
    """Read non-negative integer counts from a file, in file order.

    Accepted formats:

    * ``.npy``: a 1-D or 2-D array of integer-valued counts;
    * a CSV with a header holding a ``count`` column (other columns ignored). When it also has
      a ``period`` column of timestamps, the series is made dense at the smallest step between
      consecutive periods, missing steps filled with 0 (the WorldCup98 file gives 125,310
      minutes);
    * otherwise plain text with one integer per line and no header (the Hay et al. files).

    Parameters
    ----------
    path : path-like
        The file.

    Returns
    -------
    ndarray of int64

    Raises
    ------
    DataNotFoundError
        If the file does not exist.
    DomainError
        If a value is negative, non-integral, NaN or infinite.
    ParameterError
        If the file cannot be parsed.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = pathlib.Path(d) / "h.txt"
    ...     _ = p.write_text("3\\n0\\n5\\n")
    ...     load_counts(p).tolist()
    [3, 0, 5]
    """
    p = Path(path)
    if not p.is_file():
        raise DataNotFoundError(f"path must name an existing count file, got {str(p)!r}")
    if p.suffix.lower() == ".npy":
        arr = np.load(p, allow_pickle=False)
        return check_counts(arr, p.name, ndim=arr.ndim if arr.ndim in (1, 2) else 1)
    try:
        with p.open() as fh:
            first = fh.readline().strip()
        if first and not first.replace(",", "").replace(".", "").replace("-", "").strip().isdigit():
            frame = pd.read_csv(p)
            if "count" not in frame.columns:
                raise ParameterError(f"{p.name} has a header but no 'count' column: {list(frame.columns)}")
            if "period" in frame.columns:
                period = pd.to_datetime(frame["period"])
                steps = period.diff().dropna()
                step = steps[steps > pd.Timedelta(0)].min() if len(steps) else None
                if step is not None and not pd.isna(step):
                    full = pd.date_range(period.iloc[0], period.iloc[-1], freq=step)
                    series = pd.Series(frame["count"].to_numpy(), index=period)
                    return check_counts(series.reindex(full, fill_value=0).to_numpy(), p.name)
            return check_counts(frame["count"].to_numpy(), p.name)
        values = pd.read_csv(p, header=None).iloc[:, 0].to_numpy()
    except PrivpubError:
        raise
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise ParameterError(f"could not read counts from {str(p)!r}: {exc}") from exc
    return check_counts(values, p.name)
