"""The objects :func:`privpub.datasets.load` returns: one frozen dataclass per kind of data."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privpub.core import Schema

__all__ = ["CountsDataset", "Dataset", "SeriesDataset", "TableDataset"]


@dataclass(frozen=True, kw_only=True)
class Dataset:
    """Common fields of every loaded dataset.

    Attributes
    ----------
    name : str
        Canonical registry name (e.g. ``"adult"``, ``"dpbench_1d/HEPTH"``).
    kind : str
        ``"table"``, ``"histogram"`` (1-D counts), ``"grid"`` (2-D counts) or ``"stream"``.
    paths : tuple of Path
        The files that were read.
    source : str
        Public source of the files (repository, path, commit), from the data folder's README.
    description : str
        What the data counts and how the loader derived it from the files.
    """

    name: str
    kind: str
    paths: tuple[Path, ...]
    source: str
    description: str = field(default="", repr=False)


@dataclass(frozen=True, kw_only=True)
class TableDataset(Dataset):
    """A table of records with its public schema.

    Attributes
    ----------
    frame : pandas.DataFrame
        All records (for split sources: ``train`` then ``test``, index reset).
    schema : Schema
        Public domain declared from metadata (never inferred from ``frame``).
    train, test : pandas.DataFrame or None
        The source's own split, when it has one (Adult); None otherwise.
    """

    frame: pd.DataFrame = field(repr=False)
    schema: Schema = field(repr=False)
    train: pd.DataFrame | None = field(default=None, repr=False)
    test: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def n_records(self) -> int:
        return len(self.frame)


@dataclass(frozen=True, kw_only=True)
class CountsDataset(Dataset):
    """A 1-D histogram (``kind="histogram"``) or a 2-D grid of cell counts (``kind="grid"``).

    Attributes
    ----------
    counts : ndarray of int64 (read-only)
        Shape (n,) for histograms, (nx, ny) for grids (first axis = x; the sources record no
        map extent, treat cells as abstract).
    series : ndarray of int64 (read-only) or None
        For data that can be replayed as a count stream (``search_logs``, ``nettrace``): the
        same counts in file order, which is time order for ``search_logs`` (stream spec §7:
        "Stream order = file order"). None otherwise.
    """

    counts: NDArray[np.int64] = field(repr=False)
    series: NDArray[np.int64] | None = field(default=None, repr=False)

    @property
    def total(self) -> int:
        return int(self.counts.sum())


@dataclass(frozen=True, kw_only=True)
class SeriesDataset(Dataset):
    """A count stream in time order.

    Attributes
    ----------
    series : ndarray of int64 (read-only)
        One count per time step, dense (missing steps filled with 0 by the loader).
    start : pandas.Timestamp or None
        Time of the first step, when known.
    freq : str or None
        pandas frequency of the steps (``"min"`` for WorldCup98).
    """

    series: NDArray[np.int64] = field(repr=False)
    start: pd.Timestamp | None = None
    freq: str | None = None

    @property
    def index(self) -> pd.DatetimeIndex:
        """Timestamps of the steps (needs ``start`` and ``freq``)."""
        if self.start is None or self.freq is None:
            raise AttributeError(f"dataset {self.name!r} has no time index")
        return pd.date_range(self.start, periods=len(self.series), freq=self.freq)

    @property
    def total(self) -> int:
        return int(self.series.sum())
