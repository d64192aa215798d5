"""Max / InfoGain scores, candidates and split segments against brute force (oracles 1, 7, 9)."""

from __future__ import annotations

import numpy as np
import pytest
from decision_helpers import RefTDS, make_frame, make_schema

from privpub.decision import Taxonomy
from privpub.decision._diffgen import segment_scores
from privpub.decision._kernels import info_gain
from privpub.decision._maxgddp import MAXGDDP, apply, candidates, score_candidates
from privpub.decision._model import Cut, encode_frame


def _grid(T: int, G: int) -> list[int]:
    if T - 1 <= G:
        return list(range(1, T))
    return sorted({int(np.rint(k * T / (G + 1))) for k in range(1, G + 1)})


def _setup(n: int, k: int, seed: int, grid: int):
    schema = make_schema(k)
    df = make_frame(n, k, seed)
    pub = MAXGDDP(levels=1, max_split_candidates=grid)
    attrs = pub.compile(schema)
    fine, y = encode_frame(attrs, schema, df, with_class=True)
    spec = [("cat", Taxonomy.parse(schema["c1"].taxonomy).collapsed()),
            ("num", 0.0, 1.0, 12, _grid(12, grid)),
            ("cat", Taxonomy.balanced(schema["c2"].categories)),
            ("num", 0.0, 0.5, 10, _grid(10, grid))]
    rows = list(df[["c1", "x", "c2", "z"]].itertuples(index=False, name=None))
    labels = [int(v[1:]) for v in df["y"]]
    return attrs, fine, y, RefTDS(spec, rows, labels, k)


@pytest.mark.parametrize(("n", "k", "seed", "grid"), [(60, 2, 0, 32), (45, 3, 1, 4), (60, 3, 2, 6), (30, 2, 3, 32)])
@pytest.mark.parametrize("score", ["max_partition", "max"])
def test_max_scores_equal_brute_force_along_a_forced_history(n, k, seed, grid, score) -> None:
    attrs, fine, y, ref = _setup(n, k, seed, grid)
    cuts = [Cut.root(a) for a in attrs]
    pick = np.random.default_rng(seed)
    for _ in range(6):
        cands = candidates(cuts)
        ref_cands = ref.candidates()
        assert len(cands) == len(ref_cands)
        got = score_candidates(cands, cuts, fine, y, k, score)
        want = [ref.max_score(c, pooled=score == "max") for c in ref_cands]
        np.testing.assert_array_equal(got, want)
        j = int(pick.integers(len(cands)))
        apply(cuts, cands[j])
        ref.apply(ref_cands[j])


@pytest.mark.parametrize(("k", "seed"), [(2, 4), (3, 5)])
def test_info_gain_equals_brute_force(k, seed) -> None:
    attrs, fine, y, ref = _setup(50, k, seed, 32)
    cuts = [Cut.root(a) for a in attrs]
    for _ in range(3):
        cands = candidates(cuts)
        ref_cands = ref.candidates()
        for c, rc in zip(cands, ref_cands):
            cnt = np.zeros((len(c.child_lo), k), dtype=np.int64)
            for j, (lo, hi) in enumerate(zip(c.child_lo, c.child_hi)):
                inside = (fine[:, c.attr] >= lo) & (fine[:, c.attr] < hi)
                cnt[j] = np.bincount(y[inside], minlength=k)
            got = info_gain(cnt, np.zeros(len(cnt), dtype=np.int64), 1)[0]
            assert got == pytest.approx(ref.info_gain(rc), abs=1e-12)
        apply(cuts, cands[-1])
        ref.apply(ref_cands[-1])


def test_candidates_are_public() -> None:
    """Two different datasets, one schema, one forced history: identical candidate vectors."""
    schema = make_schema()
    pub = MAXGDDP(levels=1)
    attrs = pub.compile(schema)
    cuts_a = [Cut.root(a) for a in attrs]
    cuts_b = [Cut.root(a) for a in attrs]
    for step in (0, 3, 7, 1):
        ca, cb = candidates(cuts_a), candidates(cuts_b)
        assert ca == cb
        apply(cuts_a, ca[step])
        apply(cuts_b, cb[step])
    # the data never enter candidate generation: scores differ, candidates do not
    f1, y1 = encode_frame(attrs, schema, make_frame(80, 2, 10), with_class=True)
    f2, y2 = encode_frame(attrs, schema, make_frame(80, 2, 11), with_class=True)
    cands = candidates(cuts_a)
    assert not np.array_equal(score_candidates(cands, cuts_a, f1, y1, 2, "max"),
                              score_candidates(cands, cuts_a, f2, y2, 2, "max"))


def test_score_monotone_under_adding_a_record() -> None:
    """Adding one record moves every score by 0 or +1 (the premise of RNM with Lap(1/eps))."""
    schema = make_schema(3)
    df = make_frame(80, 3, 12)
    attrs = MAXGDDP(levels=1).compile(schema)
    cuts = [Cut.root(a) for a in attrs]
    for j in (2, 0, 5):
        apply(cuts, candidates(cuts)[j])
    cands = candidates(cuts)
    f, y = encode_frame(attrs, schema, df, with_class=True)
    for score in ("max_partition", "max"):
        base = score_candidates(cands, cuts, f[1:], y[1:], 3, score)
        for i in range(20):
            rows = np.r_[np.arange(1, len(y)), i]
            diff = score_candidates(cands, cuts, f[rows], y[rows], 3, score) - base
            assert set(np.unique(diff)) <= {0, 1}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("score", ["max", "infogain"])
def test_split_segments_match_brute_force(seed, score) -> None:
    rng = np.random.default_rng(seed)
    lo, hi = int(rng.integers(0, 4)), int(rng.integers(8, 21))
    n = int(rng.integers(0, 15))
    ticks = np.sort(rng.integers(lo, hi, n)).astype(np.int64)
    y = rng.integers(0, 2, n).astype(np.int64)
    seg_lo, seg_hi, u = segment_scores(ticks, y, 2, lo, hi, score)
    # brute force: the score of every split tick s
    brute = []
    for s in range(lo + 1, hi):
        left = np.bincount(y[ticks < s], minlength=2)
        right = np.bincount(y[ticks >= s], minlength=2)
        if score == "max":
            brute.append(left.max() + right.max())
        else:
            brute.append(info_gain(np.vstack([left, right]), np.zeros(2, dtype=np.int64), 1)[0])
    brute = np.asarray(brute, dtype=float)
    assert seg_lo[0] == lo + 1 and seg_hi[-1] == hi - 1 and np.all(seg_lo[1:] == seg_hi[:-1] + 1)
    per_s = np.repeat(u, seg_hi - seg_lo + 1)
    np.testing.assert_allclose(per_s, brute, atol=1e-12)
    # DiffGen draws s with privpub.core.exponential_mechanism_ranges over these segments, whose law
    # over the integers is checked in tests/core/test_ranges.py; here: the segments cover exactly
    # the public candidate set {lo+1, ..., hi-1}, whatever the data
    assert np.array_equal(np.concatenate([np.arange(a, b + 1) for a, b in zip(seg_lo, seg_hi)]),
                          np.arange(lo + 1, hi))


@pytest.mark.parametrize("block", [1, 7, 10**9])
@pytest.mark.parametrize("score", ["max_partition", "max"])
def test_scores_are_the_same_on_every_memory_path(monkeypatch, block, score) -> None:
    """Blocks of partitions (grid splits) and the sparse count (taxonomy nodes) give the exact
    brute-force scores: SCORE_BLOCK = 1 forces both on every candidate."""
    from privpub.decision import _kernels

    monkeypatch.setattr(_kernels, "SCORE_BLOCK", block)
    attrs, fine, y, ref = _setup(70, 3, 8, 32)
    cuts = [Cut.root(a) for a in attrs]
    for j in (0, 5, 2, 11, 1, 3):
        cands = candidates(cuts)
        want = [ref.max_score(c, pooled=score == "max") for c in ref.candidates()]
        np.testing.assert_array_equal(score_candidates(cands, cuts, fine, y, 3, score), want)
        apply(cuts, cands[j])
        ref.apply(ref.candidates()[j])
