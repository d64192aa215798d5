"""The registry of the papers' datasets and :func:`load`.

Files are read from a data directory laid out like the project's shared datasets folder
(``adult/adult.data``, ``hay2010_histograms/nettrace.txt``, ...). Nothing is downloaded and
nothing ships with privpub: some sources ask not to be redistributed (Hay et al. 2010).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from privpub.core import check_counts, readonly
from privpub.datasets._base import CountsDataset, Dataset, SeriesDataset, TableDataset
from privpub.datasets._schemas import (
    CENSUS_COLUMNS,
    adult_schema,
    census_schema,
    iris_schema,
    nltcs_schema,
)
from privpub.errors import DataNotFoundError, ParameterError

__all__ = ["DATA_ENV", "DatasetInfo", "available", "data_directory", "info", "list_datasets", "load"]

#: environment variable naming the data directory
DATA_ENV = "PRIVPUB_DATA"

Reader = Callable[["DatasetInfo", tuple[Path, ...]], Dataset]


@dataclass(frozen=True)
class DatasetInfo:
    """Registry entry of one dataset.

    Attributes
    ----------
    name : str
        Canonical name accepted by :func:`load` (case-insensitive; ``aliases`` also work).
    kind : str
        ``"table"``, ``"histogram"``, ``"grid"`` or ``"stream"``.
    files : tuple of str
        Paths relative to the data directory.
    source : str
        Where the files come from (public repository, path, commit).
    description : str
        What the loader returns.
    reader : callable
        ``reader(info, paths) -> Dataset``.
    aliases : tuple of str
        Other accepted names.
    also_stream : bool
        True when ``.series`` is also set (histograms replayed as streams).
    fallback : str
        A file-free alternative, named in the error when the files are missing.
    """

    name: str
    kind: str
    files: tuple[str, ...]
    source: str
    description: str
    reader: Reader
    aliases: tuple[str, ...] = ()
    also_stream: bool = False
    fallback: str = ""

    @property
    def kinds(self) -> str:
        return f"{self.kind}, stream" if self.also_stream else self.kind


# --------------------------------------------------------------------------------------------
# readers
# --------------------------------------------------------------------------------------------
def _strip(frame: pd.DataFrame) -> pd.DataFrame:
    """Strip surrounding whitespace from every text column (the UCI files pad some values)."""
    for col in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[col]):
            frame[col] = frame[col].astype(str).str.strip()
    return frame


def _read_adult_file(path: Path) -> pd.DataFrame:
    from privpub.datasets._formats import table_format

    fmt = table_format("adult")  # '|' comment line of adult.test, '?' records dropped, labels' '.' stripped
    frame = pd.read_csv(path, header=None, names=list(fmt.columns), sep=",", engine="c", **fmt.read_options())
    return fmt.clean(frame)[0]


def _read_adult(info: DatasetInfo, paths: tuple[Path, ...]) -> Dataset:
    train = _read_adult_file(paths[0])
    test = _read_adult_file(paths[1])
    frame = pd.concat([train, test], ignore_index=True)
    schema = adult_schema()
    schema.validate(frame, require_class=True)
    return TableDataset(name=info.name, kind=info.kind, paths=paths, source=info.source,
                        description=info.description, frame=frame, schema=schema, train=train, test=test)


def _read_census(info: DatasetInfo, paths: tuple[Path, ...]) -> Dataset:
    frame = pd.read_csv(
        paths[0], header=None, names=list(CENSUS_COLUMNS), sep=",", skipinitialspace=True,
        keep_default_na=False, na_filter=False, skip_blank_lines=True, engine="c",
    )
    frame = _strip(frame)
    frame["income class"] = frame["income class"].str.rstrip(".")
    keep = ~(frame == "?").any(axis=1)
    frame = frame.loc[keep].reset_index(drop=True)
    schema = census_schema()
    schema.validate(frame, require_class=True)
    return TableDataset(name=info.name, kind=info.kind, paths=paths, source=info.source,
                        description=info.description, frame=frame, schema=schema)


def _read_iris(info: DatasetInfo, paths: tuple[Path, ...]) -> Dataset:
    frame = pd.read_csv(paths[0], skip_blank_lines=True)
    schema = iris_schema()
    schema.validate(frame, require_class=True)
    return TableDataset(name=info.name, kind=info.kind, paths=paths, source=info.source,
                        description=info.description, frame=frame, schema=schema)


def _read_nltcs(info: DatasetInfo, paths: tuple[Path, ...]) -> Dataset:
    frame = pd.read_csv(paths[0], dtype=np.int64)
    frame.columns = [str(c).strip() for c in frame.columns]
    schema = nltcs_schema()
    schema.validate(frame)
    return TableDataset(name=info.name, kind=info.kind, paths=paths, source=info.source,
                        description=info.description, frame=frame, schema=schema)


def _read_lines(info: DatasetInfo, paths: tuple[Path, ...]) -> Dataset:
    values = pd.read_csv(paths[0], header=None, dtype=np.int64).iloc[:, 0].to_numpy()
    counts = readonly(check_counts(values, paths[0].name))
    return CountsDataset(name=info.name, kind=info.kind, paths=paths, source=info.source,
                         description=info.description, counts=counts,
                         series=counts if info.also_stream else None)


def _read_npy(info: DatasetInfo, paths: tuple[Path, ...]) -> Dataset:
    arr = np.load(paths[0], allow_pickle=False)
    counts = readonly(check_counts(arr, paths[0].name, ndim=2 if info.kind == "grid" else 1))
    return CountsDataset(name=info.name, kind=info.kind, paths=paths, source=info.source,
                         description=info.description, counts=counts)


def _read_worldcup(info: DatasetInfo, paths: tuple[Path, ...]) -> Dataset:
    raw = pd.read_csv(paths[0])
    period = pd.to_datetime(raw["period"])
    full = pd.date_range(period.iloc[0], period.iloc[-1], freq="min")
    dense = pd.Series(raw["count"].to_numpy(np.int64), index=period).reindex(full, fill_value=0)
    series = readonly(check_counts(dense.to_numpy(np.int64), paths[0].name))
    return SeriesDataset(name=info.name, kind=info.kind, paths=paths, source=info.source,
                         description=info.description, series=series, start=full[0], freq="min")


# --------------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------------
_DPCOMP = "https://github.com/dpcomp-org/dpcomp_core (dpcomp_core/datafiles/{}) @ 233cfcc"
_HAY = ("https://github.com/michaelghay/vldb2010data ({}) @ cbf004d; internal use only: the source asks "
        "not to redistribute it")

_DPBENCH_1D = {
    "HEPTH": ("HEPTH.n4096.npy", "citations per arXiv hep-th paper (rescaled)", ()),
    "ADULTFRANK": ("ADULTFRANK.n4096.npy", "Adult capital-loss values", ()),
    "NETTRACE": ("NETTRACE.n4096.npy", "nettrace.txt coarsened by 16-bin sums", ()),
    "SEARCHLOGS": ("SEARCHLOGS.n4096.npy", "search_logs.txt coarsened by 8-bin sums", ()),
    "LC-REQ": ("RejectStats_0_4096_no_outliers.npy", "Lending Club rejected loans, amount requested",
               ("RejectStats", "RejectStats_0_4096_no_outliers")),
    "MD-SAL": ("GrossCompenMDSalary1.npy", "Maryland 2012 state salaries, YTD gross compensation",
               ("GrossCompenMDSalary1",)),
}
_DPBENCH_2D = {
    "BJ-CABS-S": ("BeijingTaxiS_256_256.npy", "start points of Beijing taxi trips (May 2009)",
                  ("BeijingTaxiS", "BeijingTaxiS_256_256")),
    "BJ-CABS-E": ("BeijingTaxiE_256_256.npy", "end points of the same Beijing taxi trips",
                  ("BeijingTaxiE", "BeijingTaxiE_256_256")),
    "ADULT-2D": ("Adult_2D_256_256.npy", "Adult capital-gain x capital-loss",
                 ("Adult_2D", "Adult_2D_256_256")),
    "LC-2D": ("Loan_2D_256_256.npy", "Lending Club funded amount x annual income",
              ("Loan_2D", "Loan_2D_256_256")),
}


def _build_registry() -> dict[str, DatasetInfo]:
    entries = [
        DatasetInfo(
            "adult", "table", ("adult/adult.data", "adult/adult.test"),
            "https://github.com/vukk/lfr (data/adult-delve/Source/adult.{data,test}.gz, gunzipped) "
            "@ ed62ba9; originally UCI Machine Learning Repository, Adult",
            "UCI Adult: adult.data (train) then adult.test (test; its '|1x3' line skipped, the '.' of "
            "its labels stripped); every record with a '?' in any field is dropped, leaving "
            "30,162 + 15,060 = 45,222 records as in the papers.",
            _read_adult,
        ),
        DatasetInfo(
            "census_income_kdd", "table", ("census_income_kdd/census-income.test.gz",),
            "https://github.com/drawbridge/keras-mmoe (data/census-income.test.gz) @ 2718f56; "
            "originally UCI Census-Income (KDD)",
            "UCI Census-Income (KDD), test split only (99,762 records; the training file is not "
            "available). Read with 'NA' kept as a category, the '.' of labels stripped, and every "
            "record with a '?' dropped, leaving 47,391 records (all from 1994). The 'instance "
            "weight' column is kept in the frame but is not a schema attribute.",
            _read_census, aliases=("census", "census_kdd"),
        ),
        DatasetInfo(
            "iris", "table", ("iris/iris.data",),
            "https://github.com/csc-training/python-introduction (data/iris.data) @ be4cec9; "
            "originally UCI Iris",
            "UCI iris.data (150 records, 50 per class; not the corrected bezdekIris rows 35 and 38). "
            "privpub.datasets.iris() gives scikit-learn's bundled copy without any file.",
            _read_iris, fallback="privpub.datasets.iris() needs no file (scikit-learn's copy)",
        ),
        DatasetInfo(
            "nltcs", "table", ("nltcs/nltcs.csv",),
            "https://github.com/caicre/PrivMRF (data/nltcs.csv) @ 12f2cae",
            "NLTCS as used by PrivBayes: 21,574 records x 16 binary attributes named '0'..'15' "
            "(rows are sorted in the file; shuffle if order matters).",
            _read_nltcs,
        ),
        DatasetInfo(
            "nettrace", "histogram", ("hay2010_histograms/nettrace.txt",), _HAY.format("nettrace.txt"),
            "Hay et al. 2010 NetTrace: 65,536 bins, external hosts connected to each internal host, "
            "in file order (by internal IP). Also available as .series, replayed in file order.",
            _read_lines, also_stream=True,
        ),
        DatasetInfo(
            "search_logs", "histogram", ("hay2010_histograms/search_logs.txt",),
            _HAY.format("search_logs.txt"),
            "Hay et al. 2010 Search Logs: 32,768 time bins of 'obama' searches (2004-01-01 to "
            "2009-08-09, 16 bins a day), in time order; .series is the same array.",
            _read_lines, aliases=("search_log", "searchlogs"), also_stream=True,
        ),
        DatasetInfo(
            "social_network", "histogram", ("hay2010_histograms/social_network.txt",),
            _HAY.format("social_network.txt"),
            "Hay et al. 2010 Social Network: the degrees of 11,342 nodes in file order, one line = "
            "one bin (histogram spec); np.bincount(counts) gives the degree histogram.",
            _read_lines, aliases=("socialnetwork",),
        ),
        DatasetInfo(
            "gowalla", "grid", ("gowalla_dpbench_hist/checkin_256_256.npy",),
            _DPCOMP.format("2D/checkin_256_256.npy") + "; originally SNAP loc-gowalla",
            "Gowalla check-ins as DPBench's 256x256 histogram (6,442,863 check-ins; no raw points, "
            "no recorded map extent).",
            _read_npy, aliases=("checkin", "dpbench_2d/gowalla"),
        ),
        DatasetInfo(
            "worldcup98", "stream", ("worldcup98/invocation_count.csv",),
            "https://github.com/nimamahmoudi/worldcup98-dataset (invocation_count.csv) @ 8246021; "
            "originally the ITA WorldCup98 access logs (Arlitt and Jin 1998)",
            "Requests per minute to the 1998 World Cup site, 1998-04-30 21:30 to 1998-07-26 21:59. "
            "The file has 125,300 rows; the 10 minutes without a row are filled with 0, giving a "
            "dense series of 125,310 minutes (total 1,352,804,107).",
            _read_worldcup, aliases=("worldcup",),
        ),
    ]
    for key, (file, what, aliases) in _DPBENCH_1D.items():
        entries.append(DatasetInfo(
            f"dpbench_1d/{key}", "histogram", (f"dpbench/1D/{file}",), _DPCOMP.format(f"1D/{file}"),
            f"DPBench 1-D histogram, 4096 bins: {what}.", _read_npy,
            aliases=tuple(f"dpbench_1d/{a}" for a in aliases),
        ))
    for key, (file, what, aliases) in _DPBENCH_2D.items():
        entries.append(DatasetInfo(
            f"dpbench_2d/{key}", "grid", (f"dpbench/2D/{file}",), _DPCOMP.format(f"2D/{file}"),
            f"DPBench 2-D histogram, 256x256 cells: {what}.", _read_npy,
            aliases=tuple(f"dpbench_2d/{a}" for a in aliases),
        ))
    return {e.name: e for e in entries}


REGISTRY: dict[str, DatasetInfo] = _build_registry()
_LOOKUP: dict[str, str] = {
    key.lower(): e.name for e in REGISTRY.values() for key in (e.name, *e.aliases)
}


# --------------------------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------------------------
def list_datasets() -> tuple[str, ...]:
    """Canonical names of every registered dataset, in registry order.

    Examples
    --------
    >>> "adult" in list_datasets() and "dpbench_1d/HEPTH" in list_datasets()
    True
    """
    return tuple(REGISTRY)


def info(name: str) -> DatasetInfo:
    """The registry entry of ``name`` (case-insensitive; aliases accepted).

    Examples
    --------
    >>> info("search_logs").files
    ('hay2010_histograms/search_logs.txt',)
    """
    if not isinstance(name, str):
        raise ParameterError(f"name must be a dataset name (str), got {name!r}", param="name")
    key = _LOOKUP.get(name.strip().lower())
    if key is None:
        raise ParameterError(
            f"name must be one of the registered datasets {list(REGISTRY)}, got {name!r}"
        , param="name")
    return REGISTRY[key]


def data_directory(data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The data directory: ``data_dir`` if given, else ``$PRIVPUB_DATA``, else None."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else None


def available(data_dir: str | os.PathLike[str] | None = None) -> tuple[str, ...]:
    """Names of the registered datasets whose files are all present in the data directory.

    Returns an empty tuple when no directory is given and ``PRIVPUB_DATA`` is unset.
    """
    root = data_directory(data_dir)
    if root is None:
        return ()
    return tuple(n for n, e in REGISTRY.items() if all((root / f).is_file() for f in e.files))


def load(name: str, data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """Load one of the papers' datasets from the data directory.

    Parameters
    ----------
    name : str
        A name from :func:`list_datasets` (case-insensitive), e.g. ``"adult"``, ``"nettrace"``,
        ``"dpbench_1d/HEPTH"``, ``"dpbench_2d/BJ-CABS-S"``, ``"gowalla"``, ``"worldcup98"``.
    data_dir : path-like or None
        Directory laid out like the shared datasets folder; None reads ``$PRIVPUB_DATA``.

    Returns
    -------
    TableDataset, CountsDataset or SeriesDataset
        Tables have ``.frame`` (and ``.train`` / ``.test`` for Adult) and ``.schema``;
        histograms and grids ``.counts`` (read-only int64; ``search_logs`` and ``nettrace``
        also ``.series``); streams ``.series``.

    Raises
    ------
    ParameterError
        If ``name`` is not registered.
    DataNotFoundError
        If a file is missing: the message names the file, the expected path and its public source.

    Notes
    -----
    Loaders only parse and clean as documented per dataset (``info(name).description``); every
    schema is declared from public metadata, and each table is checked against it on load
    (a :class:`~privpub.errors.DomainError` means the file differs from the documented one).

    Examples
    --------
    >>> import os
    >>> ds = load("nettrace") if "nettrace" in available() else None
    >>> ds is None or (ds.counts.shape == (65536,) and ds.total == 25714)
    True
    """
    entry = info(name)
    root = data_directory(data_dir)
    paths = []
    for rel in entry.files:
        if root is None:
            raise DataNotFoundError(
                f"dataset {entry.name!r} needs the file {Path(rel).name!r}, but no data directory was "
                f"given: pass data_dir or set {DATA_ENV} to a folder holding {rel!r}. "
                f"Public source: {entry.source}"
            )
        path = root / rel
        if not path.is_file():
            raise DataNotFoundError(
                f"dataset {entry.name!r} needs the file {Path(rel).name!r}, expected at {str(path)!r}, "
                f"which does not exist. Public source: {entry.source}"
                + (f". Without the file: {entry.fallback}" if entry.fallback else "")
            )
        paths.append(path)
    return entry.reader(entry, tuple(paths))
