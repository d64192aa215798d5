"""Stream items from Spark: step counts equal the in-memory ones; the foreachBatch sink feeds a
publisher exactly as the in-memory items would, on a public clock."""

from __future__ import annotations

import datetime as dt
import os

import numpy as np
import pandas as pd
import pytest
from sparkutils import to_spark

from privpub.errors import DomainError, ParameterError
from privpub.spark import StreamSink, step_counts
from privpub.stream import HQRTP
from privpub.stream import step_counts as memory_step_counts

pytestmark = pytest.mark.spark


def test_step_counts_equal_in_memory_numbers_and_timestamps(spark) -> None:  # type: ignore[no-untyped-def]
    gen = np.random.default_rng(3)
    secs = gen.integers(0, 600, 500)
    t0 = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
    frame = pd.DataFrame({"i": secs, "f": secs + gen.random(500), "ts": [t0 + dt.timedelta(seconds=int(s)) for s in secs]})
    sdf = to_spark(spark, frame)
    for col, start, step in (("i", 0, 7), ("f", 0.0, 7.5), ("ts", t0, dt.timedelta(seconds=30)),
                             ("ts", "2024-03-01T00:00:00Z", pd.Timedelta(minutes=1))):
        steps = 100 if col != "ts" else 20
        have = step_counts(sdf, col, start=start, step=step, steps=steps)
        want = memory_step_counts(frame[col], start=start, step=step, steps=steps)
        assert have.dtype == np.int64 and int(have.sum()) == 500
        np.testing.assert_array_equal(have, want)
    with pytest.raises(DomainError, match=r"\d+ events before it and \d+ after it"):
        step_counts(sdf, "i", start=100, step=10, steps=3)
    with pytest.raises(DomainError, match="must be a timestamp"):
        step_counts(sdf, "i", start=t0, step=dt.timedelta(seconds=1), steps=3)
    with pytest.raises(ParameterError, match="step must be > 0"):
        step_counts(sdf, "i", start=0, step=0, steps=3)


def test_foreach_batch_sink_feeds_the_publisher_on_a_public_clock(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    gen = np.random.default_rng(8)
    src = tmp_path / "events"
    src.mkdir()
    times = np.sort(gen.integers(0, 40, 300))
    for k, part in enumerate(np.array_split(times, 3)):  # three files, in time order: three micro-batches
        path = src / f"part{k}.json"
        pd.DataFrame({"t": part}).to_json(path, orient="records", lines=True)
        os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))
    ticks = iter([10.0, 20.0, 30.0])  # the public clock at the end of each batch
    pub = HQRTP(window=64, epsilon=1.0, rng=5)
    sink = StreamSink(pub, "t", start=0, step=1, lateness=5, clock=lambda: next(ticks))
    stream = spark.readStream.schema("t LONG").option("maxFilesPerTrigger", 1).json(str(src))
    query = stream.writeStream.foreachBatch(sink).trigger(availableNow=True).start()
    query.awaitTermination(timeout=300)
    assert query.exception() is None and sink.batches == 3
    assert sink.closed == 25 and pub.t == 25  # steps ending by 30 - lateness
    sink.flush(40)
    ref = HQRTP(window=64, epsilon=1.0, rng=5)
    ref.extend(memory_step_counts(times, start=0, step=1, steps=40))
    assert pub.t == ref.t == 40
    q = np.array([[l, r] for l in range(1, 41, 3) for r in range(l, 41, 7)])
    np.testing.assert_array_equal(pub.answer(q), ref.answer(q))
    # an event in a published step: raised by default, or dropped and counted
    late = to_spark(spark, pd.DataFrame({"t": [3, 45]}), 1)
    with pytest.raises(DomainError, match="1 events of batch 7 fall before"):
        sink(late, 7)
    lenient = StreamSink(HQRTP(window=64, epsilon=1.0, rng=5), "t", start=0, step=1, on_late="drop",
                         clock=lambda: 0.0)
    lenient.flush(10)
    lenient(late, 0)
    assert lenient.dropped == 1 and lenient._pending == {45: 1}


def test_neighbouring_event_sets_differ_in_one_item_by_one(spark) -> None:  # type: ignore[no-untyped-def]
    base = pd.DataFrame({"t": [0, 1, 1, 5, 9]})
    plus = pd.DataFrame({"t": [0, 1, 1, 5, 9, 4]})
    a = step_counts(to_spark(spark, base, 1), "t", start=0, step=2, steps=5)
    b = step_counts(to_spark(spark, plus, 1), "t", start=0, step=2, steps=5)
    assert np.abs(b - a).sum() == 1 and (b - a)[2] == 1
