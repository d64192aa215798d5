"""MAXGDDP and DiffGen on a Spark DataFrame: the aggregates equal the in-memory ones exactly,
the releases are identical for the same rng, bad data raises the same errors, and neighbouring
tables give aggregates that differ by the stated sensitivity (the Spark path adds no choice)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from decision_helpers import make_frame, make_schema
from sparkutils import to_spark

from privpub.core import Session
from privpub.decision import MAXGDDP, DiffGen
from privpub.decision._aggregate import InMemoryCounts
from privpub.decision._maxgddp import apply, candidates, scores_from_counts
from privpub.decision._model import Cut, encode_frame
from privpub.errors import BudgetExceededError, DomainError
from privpub.spark._decision import SparkDecisionCounts

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def data(spark):  # type: ignore[no-untyped-def]
    schema = make_schema(n_classes=3)
    frame = make_frame(400, 3, seed=4)
    return schema, frame, to_spark(spark, frame, partitions=3)


def _cut_sequence(attrs):  # type: ignore[no-untyped-def]
    """Three public cuts: the root, then two specialisations (a node and a grid split)."""
    cuts = [Cut.root(a) for a in attrs]
    out = [[c.copy() for c in cuts]]
    for pick in (0, -1):
        apply(cuts, candidates(cuts)[pick])
        out.append([c.copy() for c in cuts])
    return out


def test_aggregates_equal_the_in_memory_ones(data) -> None:  # type: ignore[no-untyped-def]
    schema, frame, sdf = data
    for pub in (MAXGDDP(levels=3), DiffGen(levels=3)):
        attrs = pub.compile(schema)
        fine, y = encode_frame(attrs, schema, frame, with_class=True)
        mem = InMemoryCounts(fine, y, 3)
        spk = SparkDecisionCounts(attrs, schema, sdf)
        got = spk.marginals()
        for a, (vals, cnt) in mem.marginals().items():
            np.testing.assert_array_equal(got[a][0], vals)
            np.testing.assert_array_equal(got[a][1], cnt)
            assert got[a][1].dtype == np.int64
        if isinstance(pub, MAXGDDP):
            for cuts in _cut_sequence(attrs):
                cands = candidates(cuts)
                for score in ("max_partition", "max"):
                    want = scores_from_counts(cands, cuts, mem, score)
                    have = scores_from_counts(cands, cuts, spk, score)
                    assert have.dtype == np.int64
                    np.testing.assert_array_equal(have, want)
                ids, cnt = spk.cell_counts(cuts)
                wids, wcnt = mem.cell_counts(cuts)
                np.testing.assert_array_equal(ids, wids)
                np.testing.assert_array_equal(cnt, wcnt)


@pytest.mark.parametrize("pub", [
    MAXGDDP(levels=4),
    MAXGDDP(levels=3, score="max", noise="laplace", schedule="uniform"),
    DiffGen(levels=4),
    DiffGen(levels=3, score="infogain", reuse_unspent=True),
], ids=["maxgddp", "maxgddp-max-laplace", "diffgen", "diffgen-infogain"])
def test_release_identical_for_the_same_rng(data, pub) -> None:  # type: ignore[no-untyped-def]
    schema, frame, sdf = data
    want = pub.publish(frame, schema=schema, epsilon=1.0, rng=17)
    have = pub.publish(sdf, schema=schema, epsilon=1.0, rng=17)
    assert have.history == want.history
    np.testing.assert_array_equal(have.cell_ids, want.cell_ids)
    np.testing.assert_array_equal(have.counts, want.counts)
    assert have.cuts == want.cuts and have.n_cells == want.n_cells
    assert have.ledger == want.ledger


def _bad_frames(frame: pd.DataFrame) -> list[pd.DataFrame]:
    nan = frame.astype({"z": "float64"})
    nan.loc[3, "z"] = np.nan
    return [
        frame.assign(c1=["zz" if i % 7 == 0 else v for i, v in enumerate(frame["c1"])]),  # undeclared categories
        frame.assign(x=frame["x"].where(frame.index != 5, 99)),  # out of range
        nan,  # NaN
        frame.drop(columns=["c2"]),  # a missing column
        frame.drop(columns=["y"]),  # no target
        frame.iloc[:0],  # empty
        frame.assign(x=frame["x"].astype(str)),  # a non-numeric numeric column
        frame.assign(y=["k9"] * len(frame)),  # an undeclared class
        frame.assign(c2=[None, *list(frame["c2"][1:])]),  # a missing category
    ]


def test_bad_data_raises_the_in_memory_errors_before_anything(spark, data) -> None:  # type: ignore[no-untyped-def]
    schema, frame, _ = data
    small = frame.iloc[:40].reset_index(drop=True)
    session = Session(total_epsilon=5.0)
    for bad in _bad_frames(small):
        with pytest.raises(DomainError) as want:
            MAXGDDP(levels=2).publish(bad, schema=schema, epsilon=1.0, rng=0)
        with pytest.raises(DomainError) as have:
            MAXGDDP(levels=2).publish(to_spark(spark, bad, 1), schema=schema, epsilon=1.0, rng=0, session=session)
        # the same message (a wrong column type is named in each engine's own type names)
        assert str(have.value).split(", got dtype")[0] == str(want.value).split(", got dtype")[0]
    assert session.charges == ()  # validation comes before the reservation


def test_session_charges_and_refuses_drawing_nothing(data) -> None:  # type: ignore[no-untyped-def]
    schema, _, sdf = data
    session = Session(total_epsilon=1.0)
    DiffGen(levels=2).publish(sdf, schema=schema, epsilon=0.7, rng=0, session=session)
    assert session.spent == pytest.approx(0.7)
    gen = np.random.default_rng(3)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError, match="the session cannot pay"):
        MAXGDDP(levels=2).publish(sdf, schema=schema, epsilon=0.7, rng=gen, session=session)
    assert gen.bit_generator.state == state
    assert len(session.charges) == 1


def test_neighbouring_tables_change_the_aggregates_by_the_sensitivity(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Privacy of the Spark path: on a tiny domain, adding one record moves every Max score by 0
    or +1 (monotone, sensitivity 1: report-noisy-max's premise), one leaf cell by exactly 1 and
    one entry of every marginal by exactly 1 (DiffGen's scores); and the Spark jobs a release
    runs are the same for both tables (validation, one per level, the leaves): the path makes no
    data-dependent choice of its own."""
    schema = make_schema(n_classes=2)
    base = make_frame(30, 2, seed=9)
    extra = make_frame(1, 2, seed=10)
    plus = pd.concat([base, extra], ignore_index=True)
    d0, d1 = to_spark(spark, base, 1), to_spark(spark, plus, 1)
    pub = MAXGDDP(levels=3)
    attrs = pub.compile(schema)
    s0, s1 = SparkDecisionCounts(attrs, schema, d0), SparkDecisionCounts(attrs, schema, d1)
    for cuts in _cut_sequence(attrs):
        cands = candidates(cuts)
        diff = scores_from_counts(cands, cuts, s1, "max_partition") - scores_from_counts(cands, cuts, s0, "max_partition")
        assert set(np.unique(diff)) <= {0, 1} and diff.max() == 1
        (i0, c0), (i1, c1) = s0.cell_counts(cuts), s1.cell_counts(cuts)
        dense0 = dict(zip(i0.tolist(), c0.tolist()))
        delta = [c - dense0.get(i, 0) for i, c in zip(i1.tolist(), c1.tolist())]
        assert sorted(d for d in delta if d) == [1] and set(i0.tolist()) <= set(i1.tolist())
    m0, m1 = s0.marginals(), s1.marginals()
    for a in m0:
        full0 = dict(zip(m0[a][0].tolist(), m0[a][1].tolist()))
        l1 = sum(int(np.abs(np.asarray(c) - np.asarray(full0.get(v, [0, 0]))).sum())
                 for v, c in zip(m1[a][0].tolist(), m1[a][1].tolist()))
        assert l1 == 1
    made: list[SparkDecisionCounts] = []
    real_init = SparkDecisionCounts.__init__

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        real_init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(SparkDecisionCounts, "__init__", spy)
    for d in (d0, d1):
        pub.publish(d, schema=schema, epsilon=1.0, rng=1)
        DiffGen(levels=3).publish(d, schema=schema, epsilon=1.0, rng=1)
    assert [m.jobs for m in made] == [1 + 3 + 1, 1 + 1 + 1] * 2


# ---------------------------------------------------------------------------------------------
# person level: the bounding runs inside Spark and keeps the rows pandas keeps for the same key
# ---------------------------------------------------------------------------------------------
def _with_people(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """``frame`` with a heavy-tailed ``user`` column (some people hold many rows)."""
    rng = np.random.default_rng(seed)
    out = frame.copy()
    out["user"] = np.minimum(rng.zipf(1.6, len(frame)), 40).astype(np.int64)
    return out


def test_person_bounding_in_spark_keeps_the_pandas_rows(spark) -> None:  # type: ignore[no-untyped-def]
    from privpub.core import PrivacyUnit
    from privpub.decision._aggregate import open_counts

    schema = make_schema(n_classes=3)
    frame = _with_people(make_frame(400, 3, seed=5), seed=6)
    sdf = to_spark(spark, frame, partitions=3)
    for pub, ks in ((MAXGDDP(levels=3), (1, 3)), (DiffGen(levels=3), (3,))):
        attrs = pub.compile(schema)
        for k in ks:
            unit = PrivacyUnit.person("user", k)
            mem = open_counts(attrs, schema, frame, unit=unit, key="0123456789abcdef")
            spk = SparkDecisionCounts(attrs, schema, sdf, privacy_unit=unit, key="0123456789abcdef")
            # bounded once (validation, id check, bounding: three jobs): the requests read the kept
            # rows, their plans run no per-person Python function again
            assert spk.jobs == 3
            assert "FlatMapGroupsInPandas" not in spk.encoded._jdf.queryExecution().executedPlan().toString()
            # exactly min(rows, k) rows per person are kept on both paths
            per_person = frame.groupby("user").size().clip(upper=k).sum()
            assert isinstance(mem, InMemoryCounts) and mem.y.size == per_person
            cuts = [Cut.root(a) for a in attrs]
            for a in attrs:
                if a.hierarchical:
                    cuts[attrs.index(a)].specialize_node(0)
            have, want = spk.cell_counts(cuts), mem.cell_counts(cuts)
            np.testing.assert_array_equal(have[0], want[0])
            np.testing.assert_array_equal(have[1], want[1])
            got = spk.marginals()
            for a, (vals, cnt) in mem.marginals().items():
                np.testing.assert_array_equal(got[a][0], vals)
                np.testing.assert_array_equal(got[a][1], cnt)


def test_person_level_release_identical_on_spark(spark) -> None:  # type: ignore[no-untyped-def]
    schema = make_schema(n_classes=2)
    frame = _with_people(make_frame(300, 2, seed=7), seed=8)
    sdf = to_spark(spark, frame, partitions=2)
    for pub in (MAXGDDP(levels=2), DiffGen(levels=2)):
        kw = {"schema": schema, "epsilon": 2.0, "privacy_id": "user", "max_contributions": 2}
        a = pub.publish(frame, rng=11, **kw)
        b = pub.publish(sdf, rng=11, **kw)
        assert a.history == b.history
        np.testing.assert_array_equal(a.cell_ids, b.cell_ids)
        np.testing.assert_array_equal(a.counts, b.counts)
        assert b.ledger.unit.max_contributions == 2 and b.ledger.unit.column == "user"


def test_person_level_spark_refuses_missing_ids(spark) -> None:  # type: ignore[no-untyped-def]
    schema = make_schema(n_classes=2)
    frame = make_frame(50, 2, seed=1)
    frame["user"] = [None if i == 3 else f"u{i % 7}" for i in range(50)]
    sdf = to_spark(spark, frame)
    with pytest.raises(DomainError, match="1 missing ids") as err:
        MAXGDDP(levels=1).publish(sdf, schema=schema, epsilon=1.0, rng=0, privacy_id="user", max_contributions=2)
    assert err.value.param == "privacy_id"
    with pytest.raises(DomainError, match="no privacy-id column 'who'"):
        MAXGDDP(levels=1).publish(sdf, schema=schema, epsilon=1.0, rng=0, privacy_id="who", max_contributions=2)
