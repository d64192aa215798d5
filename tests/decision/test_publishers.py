"""MAXGDDP and DiffGen end to end: noiseless runs equal plain TDS, coverage, release API."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from decision_helpers import RefTDS, make_frame, make_schema

from privpub.decision import (
    MAXGDDP,
    CategoricalAttribute,
    DecisionRelease,
    DiffGen,
    NumericAttribute,
    Schema,
    Taxonomy,
)


def _ref_for(schema: Schema, df: pd.DataFrame, grid: int = 32) -> RefTDS:
    spec = []
    for a in schema.attributes:
        if isinstance(a, CategoricalAttribute):
            tree = Taxonomy.parse(a.taxonomy) if a.taxonomy else Taxonomy.balanced(a.categories)
            spec.append(("cat", tree.collapsed()))
        else:
            T = round((a.hi - a.lo) / a.resolution)
            g = list(range(1, T)) if T - 1 <= grid else sorted(
                {int(np.rint(k * T / (grid + 1))) for k in range(1, grid + 1)})
            spec.append(("num", a.lo, a.resolution, T, g))
    rows = list(df[list(schema.names)].itertuples(index=False, name=None))
    labels = [schema.classes.index(v) for v in df[schema.class_name]]
    return RefTDS(spec, rows, labels, len(schema.classes))


def _describe(ref: RefTDS, cand: tuple, schema: Schema) -> tuple[str, tuple[str, ...]]:
    a, node, _children = cand
    attr = schema.attributes[a]
    if ref.spec[a][0] == "cat":
        return node.label, tuple(c.label for c in node.children)

    def lab(lo: int, hi: int) -> str:
        f = lambda t: f"{attr.lo + t * attr.resolution:g}"  # noqa: E731
        return f"[{f(lo)},{f(hi)})"
    l, u, g = node
    return lab(l, u), (lab(l, g), lab(g, u))


@pytest.mark.parametrize(("k", "seed", "score"), [(2, 0, "max_partition"), (3, 1, "max_partition"),
                                                  (2, 2, "max"), (3, 3, "max")])
def test_noiseless_maxgddp_equals_plain_tds(k, seed, score) -> None:
    schema = make_schema(k)
    df = make_frame(120, k, seed)
    rel = MAXGDDP(levels=7, score=score)._run(df, schema=schema, epsilon=1.0, rng=0, exact=True)
    ref = _ref_for(schema, df)
    hist = ref.run(7, pooled=score == "max")
    assert [(h.node, h.children) for h in rel.history] == [_describe(ref, c, schema) for c in hist]
    assert [h.attribute for h in rel.history] == [schema.attributes[c[0]].name for c in hist]
    # the noiseless synthetic table is the generalised training table (as a multiset)
    syn = rel.synthetic().astype(str)
    gen = rel.generalize(df).astype(str)
    assert Counter(map(tuple, syn.to_numpy())) == Counter(map(tuple, gen[syn.columns].to_numpy()))
    assert not rel.private


def _ref_diffgen(schema: Schema, df: pd.DataFrame, levels: int) -> list[tuple[str, str, tuple[str, ...]]]:
    """Noiseless DiffGen by brute force: pooled Max, best split = lowest best tick."""
    y = np.asarray([schema.classes.index(v) for v in df[schema.class_name]])
    k = len(schema.classes)

    def mx(masks: list[np.ndarray]) -> int:
        return sum(int(np.bincount(y[m], minlength=k).max()) for m in masks)

    state: dict[str, list] = {}
    vals: dict[str, np.ndarray] = {}
    for a in schema.attributes:
        if isinstance(a, CategoricalAttribute):
            tree = (Taxonomy.parse(a.taxonomy) if a.taxonomy else Taxonomy.balanced(a.categories)).collapsed()
            state[a.name] = [tree]
            vals[a.name] = df[a.name].to_numpy()
        else:
            T = round((a.hi - a.lo) / a.resolution)
            vals[a.name] = np.clip(np.rint((df[a.name].to_numpy() - a.lo) / a.resolution), 0, T - 1)
            state[a.name] = [[0, T, None]]

    def best_split(name: str, l: int, u: int) -> int | None:
        if u - l < 2:
            return None
        t = vals[name]
        inside = (t >= l) & (t < u)
        scores = [mx([inside & (t < s), inside & (t >= s)]) for s in range(l + 1, u)]
        return l + 1 + int(np.argmax(scores))

    for a in schema.attributes:
        if isinstance(a, NumericAttribute):
            iv = state[a.name][0]
            iv[2] = best_split(a.name, iv[0], iv[1])
    out = []
    for _ in range(levels):
        cands = []
        for a in schema.attributes:
            t = vals[a.name]
            if isinstance(a, CategoricalAttribute):
                for node in state[a.name]:
                    if node.children:
                        s = mx([np.isin(t, c.leaves()) for c in node.children])
                        cands.append((s, a, node))
            else:
                for iv in state[a.name]:
                    if iv[2] is not None:
                        l, u, s = iv
                        cands.append((mx([(t >= l) & (t < s), (t >= s) & (t < u)]), a, iv))
        if not cands:
            break
        best = max(range(len(cands)), key=lambda i: (cands[i][0], -i))
        _, a, node = cands[best]
        if isinstance(a, CategoricalAttribute):
            j = state[a.name].index(node)
            state[a.name][j : j + 1] = list(node.children)
            out.append((a.name, node.label, tuple(c.label for c in node.children)))
        else:
            l, u, s = node
            j = state[a.name].index(node)
            kids = [[l, s, best_split(a.name, l, s)], [s, u, best_split(a.name, s, u)]]
            state[a.name][j : j + 1] = kids
            f = lambda t, a=a: f"{a.lo + t * a.resolution:g}"  # noqa: E731
            out.append((a.name, f"[{f(l)},{f(u)})", (f"[{f(l)},{f(s)})", f"[{f(s)},{f(u)})")))
    return out


@pytest.mark.parametrize(("k", "seed"), [(2, 5), (3, 6)])
def test_noiseless_diffgen_equals_brute_force(k, seed) -> None:
    schema = make_schema(k)
    df = make_frame(150, k, seed)
    rel = DiffGen(levels=6)._run(df, schema=schema, epsilon=1.0, rng=0, exact=True)
    got = [(h.attribute, h.node, h.children) for h in rel.history]
    assert got == _ref_diffgen(schema, df, 6)


@pytest.mark.parametrize("publisher", [MAXGDDP(levels=6), DiffGen(levels=6), MAXGDDP(levels=4, score="max")])
def test_cuts_partition_and_cells_cover_every_record_once(publisher, frame, schema) -> None:
    rel = publisher._run(frame, schema=schema, epsilon=1.0, rng=0, exact=True)
    for cut in rel.final_cuts:
        assert cut.starts[0] == 0 and all(np.diff(cut.starts) > 0) and cut.ends()[-1] == cut.attr.n_fine
    assert rel.n_cells == 2 * np.prod([len(v) for v in rel.cuts.values()])
    assert rel.counts.sum() == len(frame)  # exact counts: each record in exactly one cell
    test = make_frame(200, 2, seed=9)
    idx = rel.cut_index(test)
    assert idx.shape == (200, 4)
    assert all((idx[:, j] >= 0).all() and (idx[:, j] < len(c.starts)).all() for j, c in enumerate(rel.final_cuts))
    g = rel.generalize(test)
    for name, labels in rel.cuts.items():
        assert set(g[name]) <= set(labels)


def test_release_api_and_determinism(frame, schema) -> None:
    pub = MAXGDDP(levels=5)
    r1 = pub.publish(frame, schema=schema, epsilon=1.0, rng=7)
    r2 = pub.publish(frame, schema=schema, epsilon=1.0, rng=7)
    assert isinstance(r1, DecisionRelease) and r1.method == "maxgddp" and r1.private
    assert r1.history == r2.history and np.array_equal(r1.cell_ids, r2.cell_ids)
    pd.testing.assert_frame_equal(r1.cells, r2.cells)
    assert list(r1.cells.columns) == [*schema.names, "y", "count"] and (r1.cells["count"] >= 1).all()
    syn = r1.synthetic()
    assert len(syn) == r1.counts.sum() and list(syn.columns) == [*schema.names, "y"]
    conc = r1.synthetic("concrete", rng=0)
    gen_back = r1.generalize(conc)
    pd.testing.assert_frame_equal(gen_back.astype(str), syn.astype(str))
    with pytest.raises(AttributeError):
        r1.cuts = {}  # type: ignore[misc]
    with pytest.raises(ValueError):
        r1.counts[0] = 5
    r3 = DiffGen(levels=5).publish(frame, schema=schema, epsilon=1.0, rng=7)
    assert r3.method == "diffgen" and len(r3.history) == 5


def test_weighted_cells_fit_equals_fit_on_synthetic_rows(frame, schema) -> None:
    from sklearn.tree import DecisionTreeClassifier

    rel = MAXGDDP(levels=6).publish(frame, schema=schema, epsilon=2.0, rng=4)
    X, y, w = rel.encode_cells()
    rep = np.repeat(np.arange(len(w)), w)
    t1 = DecisionTreeClassifier(criterion="entropy", ccp_alpha=2e-4, random_state=0).fit(X, y, sample_weight=w)
    t2 = DecisionTreeClassifier(criterion="entropy", ccp_alpha=2e-4, random_state=0).fit(X[rep], y[rep])
    test = rel.encode(make_frame(300, 2, seed=3))
    np.testing.assert_array_equal(t1.predict(test), t2.predict(test))


def test_large_cut_is_released_through_the_sparse_path() -> None:
    """8,000,000 cells (above the core's dense limit): every cell is noised, only the ones >= 1 are
    materialised (the distribution is checked in tests/core/test_sparse.py)."""
    from privpub.core import DENSE_CELL_LIMIT, sparse_release_probability

    cats = [f"v{i}" for i in range(2000)]
    flat = {"Any": cats}
    schema = Schema([CategoricalAttribute("c", cats, taxonomy=flat), CategoricalAttribute("d", cats, taxonomy=flat)],
                    class_name="y", classes=["k0", "k1"])
    gen = np.random.default_rng(0)
    df = pd.DataFrame({"c": gen.choice(cats[:50], 3000), "d": gen.choice(cats[:50], 3000), "y": ["k0", "k1"] * 1500})
    rel = MAXGDDP(levels=2, split=0.1).publish(df, schema=schema, epsilon=10.0, rng=1)
    assert rel.n_cells == 8_000_000 > DENSE_CELL_LIMIT and len(rel.history) == 2
    assert rel.counts.dtype == np.int64 and rel.cell_ids.dtype == np.int64 and (rel.counts >= 1).all()
    exact = MAXGDDP(levels=2)._run(df, schema=schema, epsilon=10.0, rng=0, exact=True)
    true = dict(zip(exact.cell_ids.tolist(), exact.counts.tolist()))
    got = dict(zip(rel.cell_ids.tolist(), rel.counts.tolist()))
    assert sum(abs(got.get(c, 0) - v) for c, v in true.items()) < 0.01 * len(df)  # eps2 = 9: little noise
    n0 = rel.n_cells - len(true)
    p = sparse_release_probability(9.0)
    empty = sum(1 for c in got if c not in true)
    assert abs(empty - n0 * p) < 5 * np.sqrt(n0 * p)
