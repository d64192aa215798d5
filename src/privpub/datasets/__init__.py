"""Dataset loaders for the papers' real data and generators with known ground truth.

:func:`load` reads a dataset from the data directory (the ``data_dir`` argument or the
``PRIVPUB_DATA`` environment variable); nothing is downloaded and nothing ships with privpub.
:func:`available` lists what is present, :func:`list_datasets` what is registered, and
:func:`info` describes one entry (files, public source, derivation), and
:func:`load_counts` reads a user-supplied count file from any path. Tables come with a schema
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

from privpub.datasets._base import CountsDataset, Dataset, SeriesDataset, TableDataset
from privpub.datasets._files import load_counts
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

__all__ = [
    "BayesNetSample",
    "CountsDataset",
    "DATA_ENV",
    "Dataset",
    "DatasetInfo",
    "PointSample",
    "SeriesDataset",
    "TableDataset",
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
    "zipf_histogram",
    "zipf_probabilities",
]
