"""The Spark frame backend: registered with :func:`privpub.core.register_frame_backend`.

The inner layers never import :mod:`privpub.spark`; they ask the core's registry for the backend
of a frame they do not hold in memory (:func:`privpub.core.frame_backend`), and this backend
answers for ``pyspark.sql.DataFrame``. PySpark is imported only when an operation runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpub.core import Schema, register_frame_backend
from privpub.spark._detect import is_spark_frame

__all__ = ["SparkBackend"]


class SparkBackend:
    """Data-sized counting of local-DP reports and decision tables in Spark."""

    name = "spark"

    def accepts(self, data: Any) -> bool:
        return is_spark_frame(data)

    def ldp_aggregate(self, oracle: Any, reports: Any, *, epsilon: float | None = None) -> NDArray[np.int64]:
        from privpub.spark._ldp import aggregate_reports

        return aggregate_reports(oracle, reports, epsilon=epsilon)

    def ldp_n_reports(self, reports: Any) -> int:
        from privpub.spark._ldp import n_reports

        return n_reports(reports)

    def decision_counts(self, attrs: tuple[Any, ...], schema: Schema, data: Any, *,
                        privacy_unit: Any = None, key: str | None = None) -> Any:
        from privpub.spark._decision import SparkDecisionCounts

        return SparkDecisionCounts(attrs, schema, data, privacy_unit=privacy_unit, key=key)


register_frame_backend(SparkBackend())
