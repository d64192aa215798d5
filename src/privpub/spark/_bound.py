"""Contribution bounding inside Spark: at most ``k`` rows per person, the same rows as pandas.

:func:`bound_frame` groups a DataFrame by its privacy-id column and, for every person, calls
:func:`privpub.core.bound_contributions` (``groupBy(id).applyInPandas``) with the same key and
the same content function as the in-memory path. The keyed hash of a row depends only on its id
and content, and a person's kept rows are the ``k`` of smallest hash among that person's rows,
so evaluating it one person at a time keeps exactly the rows the pandas path keeps over the
whole table (rows with equal id and content hash alike; which of them is kept changes no count).
Only the kept rows leave the groups; nothing reaches the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pandas as pd

from privpub.core import bound_contributions, check_positive_int
from privpub.errors import DomainError, ParameterError
from privpub.spark._frame import is_missing, require_pyspark

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["bound_frame", "check_id_column"]


def check_id_column(df: DataFrame, column: str) -> None:
    """The privacy-id column exists and has no missing id (one Spark job), as in pandas."""
    if not isinstance(column, str) or not column:
        raise ParameterError(f"privacy_id must be a column name, got {column!r}", param="privacy_id")
    if column not in df.columns:
        raise DomainError(f"data has no privacy-id column {column!r} (privacy_id)", param="privacy_id")
    missing = df.where(is_missing(df, column)).count()
    if missing:
        raise DomainError(f"privacy-id column {column!r} has {missing} missing ids (a row with no person cannot "
                          "be bounded)", param="privacy_id")


def bound_frame(
    df: DataFrame, column: str, max_contributions: int, key: str, content: Callable[[pd.DataFrame], Any]
) -> DataFrame:
    """``df`` with at most ``max_contributions`` rows per value of ``column``, bounded in Spark.

    ``content(rows)`` maps a pandas frame of a person's rows (every column but ``column``) to
    one value per row: what the release reads of it; it must be the content the in-memory path
    passes to :func:`privpub.core.bound_contributions`. The result has every column of ``df``
    but ``column`` (the id is not carried further); lazy.
    """
    require_pyspark()
    k = check_positive_int(max_contributions, "max_contributions")
    if not isinstance(key, str) or len(key.encode("utf-8")) != 16:
        raise ParameterError("key must be a 16-character string (see privpub.core.contribution_key)", param="key")
    cols = [c for c in df.columns if c != column]
    out_schema = df.select(*cols).schema

    def keep(rows: pd.DataFrame) -> pd.DataFrame:
        values = rows[cols]
        mask = bound_contributions(rows[column], k, key=key, content=content(values))
        return values.loc[mask]

    bounded: DataFrame = df.groupBy(column).applyInPandas(keep, schema=out_schema)
    return bounded
