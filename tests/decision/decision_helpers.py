"""Helpers of the decision tests: small random tables, a public schema, brute-force references."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pandas as pd

from privpub.decision import CategoricalAttribute, NumericAttribute, Schema, Taxonomy

CAT1 = list("abcdef")
TREE1 = {"Any": [{"L": ["a", "b"]}, {"R": ["c", {"R2": ["d", "e"]}]}, "f"]}
CAT2 = [f"v{i}" for i in range(9)]


def make_schema(n_classes: int = 2, tree1: object = TREE1) -> Schema:
    return Schema(
        [
            CategoricalAttribute("c1", CAT1, taxonomy=tree1),
            NumericAttribute("x", lo=0, hi=12, resolution=1),
            CategoricalAttribute("c2", CAT2),
            NumericAttribute("z", lo=0, hi=5, resolution=0.5),
        ],
        class_name="y",
        classes=[f"k{i}" for i in range(n_classes)],
    )


def make_frame(n: int, n_classes: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "c1": rng.choice(CAT1, n),
        "x": rng.integers(0, 12, n),
        "c2": rng.choice(CAT2, n),
        "z": rng.integers(0, 10, n) * 0.5,
    })
    signal = (df["x"] > 5).astype(int) + df["c1"].isin(["a", "b"]).astype(int)
    noise = rng.integers(0, n_classes, n)
    y = np.where(rng.random(n) < 0.7, signal % n_classes, noise)
    df["y"] = [f"k{v}" for v in y]
    return df



def entropy(counts: list[int]) -> float:
    n = sum(counts)
    return -sum(c / n * math.log2(c / n) for c in counts if c) if n else 0.0


class RefTDS:
    """Plain top-down specialisation over raw values, one Python loop per record.

    ``spec`` lists per attribute ``("cat", Taxonomy)`` or ``("num", lo, q, T, grid)``; a node
    of a categorical cut is a Taxonomy node, a numeric cut element an interval ``(l, u)`` of
    ticks. Candidates are enumerated in the spec's order (schema order; nodes by first leaf;
    grid splits ascending).
    """

    def __init__(self, spec: list[tuple], rows: list[tuple], labels: list[int], n_classes: int):
        self.spec = spec
        self.rows = rows
        self.y = labels
        self.k = n_classes
        self.cuts: list[list] = []
        for s in spec:
            self.cuts.append([s[1]] if s[0] == "cat" else [(0, s[3])])

    def value_key(self, a: int, v: object) -> object:
        s = self.spec[a]
        if s[0] == "cat":
            return v
        lo, q, T = s[1], s[2], s[3]
        return int(min(max(round((float(v) - lo) / q), 0), T - 1))

    def element(self, a: int, v: object) -> int:
        key = self.value_key(a, v)
        for j, e in enumerate(self.cuts[a]):
            if (self.spec[a][0] == "cat" and key in e.leaves()) or (self.spec[a][0] == "num" and e[0] <= key < e[1]):
                return j
        raise AssertionError("value not covered by the cut")

    def candidates(self) -> list[tuple[int, object, list]]:
        out = []
        for a, s in enumerate(self.spec):
            if s[0] == "cat":
                leaves = s[1].leaves()
                for node in sorted(self.cuts[a], key=lambda n: leaves.index(n.leaves()[0])):
                    if node.children:
                        out.append((a, node, [set(c.leaves()) for c in node.children]))
            else:
                for g in s[4]:
                    for (l, u) in self.cuts[a]:
                        if l < g < u:
                            out.append((a, (l, u, g), [(l, g), (g, u)]))
        return out

    def child_of(self, a: int, v: object, children: list) -> int | None:
        key = self.value_key(a, v)
        for c, ch in enumerate(children):
            if (self.spec[a][0] == "cat" and key in ch) or (self.spec[a][0] == "num" and ch[0] <= key < ch[1]):
                return c
        return None

    def counts(self, cand: tuple, pooled: bool) -> dict:
        a, _node, children = cand
        table: dict = defaultdict(Counter)
        for row, y in zip(self.rows, self.y):
            c = self.child_of(a, row[a], children)
            if c is None:
                continue
            part = () if pooled else tuple(self.element(b, row[b]) for b in range(len(self.spec)) if b != a)
            table[(part, c)][y] += 1
        return table

    def max_score(self, cand: tuple, pooled: bool) -> int:
        return sum(max(cnt.values()) for cnt in self.counts(cand, pooled).values())

    def info_gain(self, cand: tuple) -> float:
        table = self.counts(cand, pooled=True)
        parent = Counter()
        for cnt in table.values():
            parent.update(cnt)
        n = sum(parent.values())
        if n == 0:
            return 0.0
        h = entropy([parent[k] for k in range(self.k)])
        return h - sum(sum(c.values()) / n * entropy([c[k] for k in range(self.k)]) for c in table.values())

    def apply(self, cand: tuple) -> None:
        a, node, _ = cand
        if self.spec[a][0] == "cat":
            j = self.cuts[a].index(node)
            self.cuts[a][j : j + 1] = list(node.children)
        else:
            l, u, g = node
            j = self.cuts[a].index((l, u))
            self.cuts[a][j : j + 1] = [(l, g), (g, u)]

    def run(self, levels: int, pooled: bool) -> list[tuple]:
        history = []
        for _ in range(levels):
            cands = self.candidates()
            if not cands:
                break
            scores = [self.max_score(c, pooled) for c in cands]
            best = cands[int(np.argmax(scores))]
            self.apply(best)
            history.append(best)
        return history


def balanced_tree(cats: list[str]) -> Taxonomy:
    return Taxonomy.balanced(cats, fanout=2)
