"""Support counts of local-DP reports stored in Spark equal the in-memory ones (OUE, SUE, OLH)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privpub.errors import DomainError
from privpub.ldp import OLH, OUE, SUE

pytestmark = pytest.mark.spark


def packed_frame(spark, packed: np.ndarray, partitions: int = 3):  # type: ignore[no-untyped-def]
    """One binary column ``report`` of packed rows (the table a collection server would store)."""
    n, width = packed.shape
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * width).tobytes())
    col = pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(packed.tobytes())])
    return spark.createDataFrame(pa.table({"report": col})).repartition(partitions)


@pytest.mark.parametrize("oracle", [OUE(domain_size=37), SUE(domain_size=9)], ids=["oue", "sue"])
def test_unary_support_counts_equal_in_memory(spark, oracle) -> None:  # type: ignore[no-untyped-def]
    gen = np.random.default_rng(1)
    values = gen.integers(0, oracle.domain_size, 3000)
    reports = oracle.perturb(values, epsilon=1.0, rng=2)
    frame = packed_frame(spark, reports)
    have = oracle.aggregate(frame, epsilon=1.0)
    assert have.dtype == np.int64
    np.testing.assert_array_equal(have, oracle.aggregate(reports, epsilon=1.0))
    np.testing.assert_array_equal(oracle.estimate(frame, epsilon=1.0), oracle.estimate(reports, epsilon=1.0))
    with pytest.raises(DomainError, match="reports are missing or not"):
        oracle.aggregate(packed_frame(spark, reports[:, :-1] if reports.shape[1] > 1 else reports[:, :0]), epsilon=1.0)


def test_olh_support_counts_equal_in_memory(spark) -> None:  # type: ignore[no-untyped-def]
    oracle = OLH(domain_size=50)
    values = np.random.default_rng(3).integers(0, 50, 2000)
    reports = oracle.perturb(values, epsilon=2.0, rng=4)
    frame = spark.createDataFrame(pa.Table.from_pandas(pd.DataFrame(reports, columns=["a", "b", "y"]))).repartition(2)
    np.testing.assert_array_equal(oracle.aggregate(frame, epsilon=2.0), oracle.aggregate(reports, epsilon=2.0))
    bad = reports.copy()
    bad[0, 2] = 10**6
    frame = spark.createDataFrame(pa.Table.from_pandas(pd.DataFrame(bad, columns=["a", "b", "y"])))
    with pytest.raises(DomainError, match="buckets must lie in"):
        oracle.aggregate(frame, epsilon=2.0)
