"""Helpers of the Spark tests: pandas frames to Spark DataFrames (through Arrow)."""

from __future__ import annotations

from typing import Any

import pandas as pd


def to_spark(spark: Any, frame: pd.DataFrame, partitions: int = 2) -> Any:
    """``frame`` as a Spark DataFrame with ``partitions`` partitions (types kept through Arrow)."""
    import pyarrow as pa

    return spark.createDataFrame(pa.Table.from_pandas(frame, preserve_index=False)).repartition(partitions)
