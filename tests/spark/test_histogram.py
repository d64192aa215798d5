"""privpub.spark.counts against privpub.histogram.counts_from_records: equal integers, same errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sparkutils import to_spark

from privpub.errors import DomainError, ParameterError
from privpub.histogram import HPHP, LaplaceHistogram, counts_from_records
from privpub.spark import counts

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def frames(spark):  # type: ignore[no-untyped-def]
    gen = np.random.default_rng(7)
    n = 2000
    x = np.clip(gen.normal(5.0, 3.0, n), 0.0, 10.0)
    x[:5] = [0.0, 10.0, 2.5, 9.999999, 5.0]  # edges: the first and the closed last bin
    pdf = pd.DataFrame({"x": x, "i": gen.integers(0, 50, n), "c": gen.choice(list("abcde"), n)})
    return pdf, to_spark(spark, pdf)


@pytest.mark.parametrize("edges", [np.linspace(0, 10, 11), np.linspace(0, 10, 2), np.linspace(0, 10, 301),
                                   np.array([0.0, 2.5, 2.6, 7.0, 10.0])])
def test_numeric_counts_equal_in_memory(frames, edges) -> None:  # type: ignore[no-untyped-def]
    pdf, sdf = frames
    got = counts(sdf, "x", edges)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, counts_from_records(pdf["x"], bins=edges))
    assert int(got.sum()) == len(pdf)


def test_integer_column_and_categories(frames) -> None:  # type: ignore[no-untyped-def]
    pdf, sdf = frames
    edges = np.arange(0, 51, 5)
    np.testing.assert_array_equal(counts(sdf, "i", edges), counts_from_records(pdf["i"], bins=edges))
    cats = ["e", "a", "b", "c", "d", "z"]  # declared order; "z" never occurs
    got = counts(sdf, "c", categories=cats)
    np.testing.assert_array_equal(got, counts_from_records(pdf["c"], categories=cats))
    assert got[-1] == 0


def test_release_identical_for_the_same_rng(frames) -> None:  # type: ignore[no-untyped-def]
    pdf, sdf = frames
    edges = np.linspace(0, 10, 21)
    for pub in (HPHP(), LaplaceHistogram()):
        a = pub.publish(counts(sdf, "x", edges), epsilon=0.5, rng=11)
        b = pub.publish(counts_from_records(pdf["x"], bins=edges), epsilon=0.5, rng=11)
        np.testing.assert_array_equal(a.counts, b.counts)
        assert a.ledger == b.ledger


def test_out_of_domain_values_raise(spark) -> None:  # type: ignore[no-untyped-def]
    sdf = to_spark(spark, pd.DataFrame({"x": [1.0, 2.0, 11.0, -1.0, 3.0], "c": ["a", "b", "q", "a", None]}))
    with pytest.raises(DomainError, match=r"declared range \[0.0, 10.0\]; 1 below and 1 above"):
        counts(sdf, "x", [0, 5, 10])
    with pytest.raises(DomainError, match=r"declared categories, got 'q'"):
        counts(sdf.where("c is not null"), "c", categories=["a", "b"])
    with pytest.raises(DomainError, match="missing entries"):
        counts(sdf, "c", categories=["a", "b", "q"])
    nan = to_spark(spark, pd.DataFrame({"x": [1.0, np.nan]}))
    with pytest.raises(DomainError, match="numeric and not NaN; 1 missing"):
        counts(nan, "x", [0, 10])
    text = to_spark(spark, pd.DataFrame({"x": ["1", "two"]}))
    with pytest.raises(DomainError, match="numeric and not NaN"):
        counts(text, "x", [0, 10])


def test_bad_arguments(spark, frames) -> None:  # type: ignore[no-untyped-def]
    pdf, sdf = frames
    with pytest.raises(ParameterError, match=r"pyspark\.sql\.DataFrame"):
        counts(pdf, "x", [0, 10])
    with pytest.raises(ParameterError, match="exactly one of bins"):
        counts(sdf, "x")
    with pytest.raises(ParameterError, match="strictly increasing"):
        counts(sdf, "x", [0, 0])
    with pytest.raises(DomainError, match="missing the columns"):
        counts(sdf, "nope", [0, 10])


def test_neighbours_differ_by_one_in_one_bin(spark) -> None:  # type: ignore[no-untyped-def]
    base = pd.DataFrame({"x": [0.5, 1.5, 1.5, 2.5]})
    plus = pd.concat([base, pd.DataFrame({"x": [1.2]})], ignore_index=True)
    a = counts(to_spark(spark, base), "x", [0, 1, 2, 3])
    b = counts(to_spark(spark, plus), "x", [0, 1, 2, 3])
    assert np.abs(b - a).sum() == 1 and (b - a)[1] == 1
