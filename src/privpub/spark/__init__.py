"""Running privpub's data-sized aggregations on Apache Spark (the ``privpub[spark]`` extra).

Every publisher of privpub spends its privacy budget on aggregates that fit in memory (counts
per bin, per specialisation level, per time step, sums of local-DP reports); only computing
those aggregates is data-sized. This package computes them in Spark from a
``pyspark.sql.DataFrame`` and hands them to the same publisher code, so a release made from a
Spark DataFrame is identical to the in-memory release for the same ``rng``:

* histograms: :func:`counts` (counts per declared bin), fed to any histogram publisher;
* decision data: ``MAXGDDP(...).publish(spark_df, ...)`` / ``DiffGen(...).publish(spark_df, ...)``
  (one Spark job per specialisation level, one for the leaf cells);
* streams: :func:`step_counts` (events per declared time step) and :class:`StreamSink`, a
  Structured Streaming ``foreachBatch`` sink feeding a running stream publisher;
* local DP: ``OUE/SUE/OLH(...).aggregate(reports_df)`` and ``.estimate(reports_df, ...)`` sum
  stored reports (packed bits, OLH rows) in Spark.

PySpark is imported only when one of these runs (``import privpub.spark`` works without the
extra). Spark holds the raw data: differential privacy protects the *output*; see docs/spark.md.
"""

from __future__ import annotations

from privpub.spark._backend import SparkBackend
from privpub.spark._detect import is_spark_frame
from privpub.spark._frame import local_session
from privpub.spark._histogram import counts
from privpub.spark._stream import StreamSink, step_counts

__all__ = ["SparkBackend", "StreamSink", "counts", "is_spark_frame", "local_session", "step_counts"]
