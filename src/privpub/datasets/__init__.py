"""Dataset loaders for the papers' real data and generators with known ground truth.

:func:`load` reads a dataset from the data directory (the ``data_dir`` argument or the
``PRIVPUB_DATA`` environment variable); nothing is downloaded and nothing ships with privpub.
:func:`available` lists what is present, :func:`list_datasets` what is registered, and
:func:`info` describes one entry (files, public source, derivation), and
:func:`load_counts` reads a user-supplied count file from any path. :func:`table_format`
describes a tabular dataset's raw files (column names of header-less files, missing-value
policy, public encodings) so the CLI can read them as they come. Tables come with a schema
declared from public metadata, never inferred from the data.

The generators (:func:`zipf_histogram`, :func:`bayesnet_table`, :func:`clustered_points`,
:func:`bursty_stream`, :func:`iris`) need no files and take ``rng``.

Examples
--------
>>> from privpub.datasets import zipf_histogram
>>> zipf_histogram(4, 100, 1.0, rng=0).sum()
np.int64(100)
"""

from __future__ import annotations

from privpub.core import Schema
from privpub.datasets._base import CountsDataset, Dataset, SeriesDataset, TableDataset
from privpub.datasets._files import load_counts
from privpub.datasets._formats import Recode, TableFormat, table_format, table_formats
from privpub.datasets._generators import (
    BayesNetSample,
    PointSample,
    bayesnet_table,
    bursty_stream,
    clustered_points,
    iris,
    zipf_histogram,
    zipf_probabilities,
)
from privpub.datasets._registry import (
    DATA_ENV,
    DatasetInfo,
    available,
    data_directory,
    info,
    list_datasets,
    load,
)
from privpub.datasets._schemas import ADULT_COLUMNS
from privpub.datasets._taxonomies import ADULT_TAXONOMIES

__all__ = [
    "ADULT_COLUMNS",
    "ADULT_TAXONOMIES",
    "BayesNetSample",
    "CountsDataset",
    "DATA_ENV",
    "Dataset",
    "DatasetInfo",
    "PointSample",
    "Recode",
    "SeriesDataset",
    "TableDataset",
    "TableFormat",
    "available",
    "bayesnet_table",
    "bursty_stream",
    "clustered_points",
    "data_directory",
    "info",
    "iris",
    "list_datasets",
    "load",
    "load_counts",
    "schema",
    "table_format",
    "table_formats",
    "zipf_histogram",
    "zipf_probabilities",
]


def schema(name: str) -> Schema:
    """The declared public schema of a built-in tabular dataset (no data is read).

    Parameters
    ----------
    name : {"adult", "iris", "nltcs", "census_income_kdd"}
        Dataset name.

    Examples
    --------
    >>> schema("iris").class_name
    'class'
    """
    from privpub.datasets import _schemas
    from privpub.errors import ParameterError

    makers = {
        "adult": _schemas.adult_schema,
        "iris": _schemas.iris_schema,
        "nltcs": _schemas.nltcs_schema,
        "census_income_kdd": _schemas.census_schema,
    }
    key = name.lower()
    if key not in makers:
        raise ParameterError(f"schema name must be one of {sorted(makers)}, got {name!r}")
    return makers[key]()

