"""Recognising a Spark DataFrame without importing PySpark (the ``privpub[spark]`` extra is optional)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["is_spark_frame"]


def is_spark_frame(data: Any) -> bool:
    """True if ``data`` is a ``pyspark.sql.DataFrame`` (classic or Spark Connect).

    Never imports PySpark: an object can only be a Spark DataFrame if PySpark is already loaded.

    Examples
    --------
    >>> import pandas as pd
    >>> is_spark_frame(pd.DataFrame({"x": [1]}))
    False
    """
    module = sys.modules.get("pyspark.sql")
    if module is None:
        return False
    return isinstance(data, module.DataFrame)
