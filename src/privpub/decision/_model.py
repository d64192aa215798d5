"""Compiled public domains, cuts and leaf-cell release shared by MAXGDDP and DiffGen.

Every attribute is mapped to a small *fine* domain of codes ``0..F-1`` such that every node a
cut can hold is a contiguous range of fine codes:

* categorical: the taxonomy leaves in depth-first order;
* numeric, grid mode: the cells between the public grid points ``S_a`` (spec §2.2);
* numeric, taxonomy mode: the elementary intervals between all node bounds of the tree;
* numeric, tick mode (DiffGen): the ticks themselves.

A *cut* is then a sorted array of range starts; hierarchical attributes also carry the node id
of every cut element. Nothing here reads private data except the two encoders.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privpub.core import CategoricalAttribute, NumericAttribute, Schema
from privpub.decision._kernels import compact_ids
from privpub.decision._taxonomy import Taxonomy
from privpub.errors import DomainError, ParameterError

I64 = NDArray[np.int64]


@dataclass(frozen=True)
class Attr:
    """One attribute compiled against its public domain (no data)."""

    name: str
    kind: str  # "cat" | "grid" | "ntax" | "ticks"
    n_fine: int
    # hierarchy (cat / ntax): node ranges over fine codes, children, labels; node 0 is the root
    node_lo: tuple[int, ...] = ()
    node_hi: tuple[int, ...] = ()
    node_children: tuple[tuple[int, ...], ...] = ()
    node_labels: tuple[str, ...] = ()
    # categorical: category code -> fine code; leaf fine code -> category code
    cat_to_fine: tuple[int, ...] = ()
    # numeric: lo, resolution, number of ticks T and tick edges of the fine cells (grid / ntax)
    lo: float = 0.0
    q: float = 1.0
    n_ticks: int = 0
    edges: tuple[int, ...] = ()
    source: Any = field(default=None, repr=False, compare=False)

    @property
    def hierarchical(self) -> bool:
        return self.kind in ("cat", "ntax")

    @property
    def numeric(self) -> bool:
        return self.kind != "cat"

    # -- encoding raw values ---------------------------------------------------------------
    def ticks(self, values: Any) -> I64:
        """Integer ticks ``rint((x - lo)/q)`` in ``[0, T)``; values outside ``[lo, hi]`` or NaN raise."""
        arr = np.asarray(self.source.check(values), dtype=np.float64)
        out: I64 = np.clip(np.rint((arr - self.lo) / self.q), 0, self.n_ticks - 1).astype(np.int64)
        return out

    def fine(self, values: Any) -> I64:
        """Fine codes of raw column values."""
        if self.kind == "cat":
            codes: I64 = np.asarray(self.cat_to_fine, dtype=np.int64)[self.source.encode(values)]
            return codes
        t = self.ticks(values)
        if self.kind == "ticks":
            return t
        return np.searchsorted(np.asarray(self.edges, dtype=np.int64), t, side="right").astype(np.int64) - 1

    # -- labels ----------------------------------------------------------------------------
    def tick_of_fine(self, f: int) -> int:
        return f if self.kind == "ticks" else self.edges[f]

    def value(self, tick: float) -> float:
        return round(self.lo + tick * self.q, 9)

    def interval_label(self, lo_fine: int, hi_fine: int) -> str:
        a, b = self.value(self.tick_of_fine(lo_fine)), self.value(self.tick_of_fine(hi_fine))
        return f"[{_num(a)},{_num(b)})"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


# ---------------------------------------------------------------------------------------------
# compilation
# ---------------------------------------------------------------------------------------------
def _flatten(tree: Taxonomy, to_fine: Any) -> tuple[list[int], list[int], list[tuple[int, ...]], list[str]]:
    """Pre-order node arrays; ``to_fine(leaf)`` gives a leaf's fine range ``(lo, hi)``."""
    lo: list[int] = []
    hi: list[int] = []
    kids: list[tuple[int, ...]] = []
    labels: list[str] = []

    def visit(node: Taxonomy) -> int:
        i = len(lo)
        lo.append(0)
        hi.append(0)
        kids.append(())
        labels.append(node.label)
        if node.is_leaf:
            lo[i], hi[i] = to_fine(node)
        else:
            ch = tuple(visit(c) for c in node.children)
            kids[i] = ch
            lo[i], hi[i] = lo[ch[0]], hi[ch[-1]]
        return i

    visit(tree)
    return lo, hi, kids, labels


def compile_categorical(attr: CategoricalAttribute, tax: Any, fanout: int) -> Attr:
    tree = Taxonomy.balanced(attr.categories, fanout) if tax is None else Taxonomy.parse(tax)
    tree.check_leaves(attr.categories, attr.name)
    tree = tree.collapsed()
    leaves = tree.leaves()
    pos = {c: i for i, c in enumerate(leaves)}
    lo, hi, kids, labels = _flatten(tree, lambda leaf: (pos[leaf.label], pos[leaf.label] + 1))
    return Attr(attr.name, "cat", len(leaves), tuple(lo), tuple(hi), tuple(kids), tuple(labels),
                cat_to_fine=tuple(pos[c] for c in attr.categories), source=attr)


def _n_ticks(attr: NumericAttribute) -> int:
    return max(1, int(np.rint((attr.hi - attr.lo) / attr.resolution)))


_INTERVAL = re.compile(r"^\s*\[?\s*([-+0-9.eE]+)\s*(?:,|-|\.\.)\s*([-+0-9.eE]+)\s*\)?\s*$")


def _bounds(label: str, attr: NumericAttribute, T: int) -> tuple[int, int]:
    m = _INTERVAL.match(label)
    if not m:
        raise ParameterError(f"numeric taxonomy node of {attr.name!r} must be labelled '[a,b)' or 'a-b', got {label!r}")
    out = []
    for s in m.groups():
        x = float(s)
        t = (x - attr.lo) / attr.resolution
        if abs(t - round(t)) > 1e-6 or not 0 <= round(t) <= T:
            raise DomainError(f"numeric taxonomy bound {x} of {attr.name!r} must be a tick lo + t*resolution "
                              f"inside [{attr.lo}, {attr.hi}]")
        out.append(round(t))
    return out[0], out[1]


def compile_numeric(attr: NumericAttribute, tax: Any, grid_size: int, tick_mode: bool) -> Attr:
    T = _n_ticks(attr)
    common: dict[str, Any] = {"lo": attr.lo, "q": attr.resolution, "n_ticks": T, "source": attr}
    if tax is not None:
        tree = Taxonomy.parse(tax).collapsed()
        for node in tree.nodes():
            a, b = _bounds(node.label, attr, T)
            if node.is_leaf:
                if b <= a:
                    raise DomainError(f"numeric taxonomy node {node.label!r} of {attr.name!r} is empty")
                continue
            kb = [_bounds(c.label, attr, T) for c in node.children]
            if kb[0][0] != a or kb[-1][1] != b or any(kb[i][1] != kb[i + 1][0] for i in range(len(kb) - 1)):
                raise DomainError(f"children of numeric taxonomy node {node.label!r} of {attr.name!r} "
                                  "must partition it in ascending order")
        if _bounds(tree.label, attr, T) != (0, T):
            raise DomainError(f"numeric taxonomy root of {attr.name!r} must be [lo, hi) = "
                              f"[{_num(attr.lo)},{_num(attr.hi)}), got {tree.label!r}")
        edges = sorted({x for n in tree.nodes() for x in _bounds(n.label, attr, T)})
        index = {e: i for i, e in enumerate(edges)}

        def leaf_range(leaf: Taxonomy) -> tuple[int, int]:
            a, b = _bounds(leaf.label, attr, T)
            return index[a], index[b]

        lo, hi, kids, _ = _flatten(tree, leaf_range)
        tmp = Attr(attr.name, "ntax", len(edges) - 1, edges=tuple(edges), **common)
        labels = tuple(tmp.interval_label(a, b) for a, b in zip(lo, hi))
        return Attr(attr.name, "ntax", len(edges) - 1, tuple(lo), tuple(hi), tuple(kids), labels,
                    edges=tuple(edges), **common)
    if tick_mode:
        return Attr(attr.name, "ticks", T, **common)
    if T - 1 <= grid_size:
        grid = list(range(1, T))
    else:
        grid = sorted({int(np.rint(k * T / (grid_size + 1))) for k in range(1, grid_size + 1)} - {0, T})
    grid_edges = (0, *grid, T)
    return Attr(attr.name, "grid", len(grid_edges) - 1, edges=grid_edges, **common)


def compile_schema(
    schema: Schema, taxonomies: Mapping[str, Any] | None, *, fanout: int, grid_size: int, tick_mode: bool
) -> tuple[Attr, ...]:
    """Compile every attribute of ``schema`` (public metadata only)."""
    if not isinstance(schema, Schema):
        raise ParameterError(f"schema must be a privpub Schema, got {type(schema).__name__}", param="schema")
    if schema.class_name is None or schema.classes is None:
        raise ParameterError("schema must declare the target: Schema(..., class_name=..., classes=[...])", param="schema")
    taxes = dict(taxonomies or {})
    unknown = sorted(set(taxes) - set(schema.names))
    if unknown:
        raise ParameterError(f"taxonomies name attributes not in the schema: {unknown}")
    out = []
    for a in schema.attributes:
        if isinstance(a, CategoricalAttribute):
            out.append(compile_categorical(a, taxes.get(a.name, a.taxonomy), fanout))
        else:
            out.append(compile_numeric(a, taxes.get(a.name), grid_size, tick_mode))
    return tuple(out)


def encode_frame(attrs: tuple[Attr, ...], schema: Schema, data: Any, *, with_class: bool) -> tuple[I64, I64 | None]:
    """Fine codes ``(n, d)`` and class codes of a raw table; bad input raises clear errors."""
    if not isinstance(data, pd.DataFrame):
        raise ParameterError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    cls_name = schema.class_name
    if with_class and cls_name not in data.columns:
        raise DomainError(f"data has no target column {cls_name!r} (the schema's class_name)")
    missing = [a.name for a in attrs if a.name not in data.columns]
    if missing:
        raise DomainError(f"data is missing the schema's columns {missing}")
    if len(data) == 0:
        raise DomainError("data must not be empty, got 0 rows")
    fine = np.empty((len(data), len(attrs)), dtype=np.int64)
    for j, a in enumerate(attrs):
        col = data[a.name]
        if a.numeric and not pd.api.types.is_numeric_dtype(col):
            raise DomainError(f"column {a.name!r} must be numeric, got dtype {col.dtype}")
        fine[:, j] = a.fine(col.to_numpy())
    y = None
    if with_class and schema.class_attribute is not None:
        y = schema.class_attribute.encode(data[cls_name].to_numpy())
    return fine, y


# ---------------------------------------------------------------------------------------------
# cuts
# ---------------------------------------------------------------------------------------------
@dataclass
class Cut:
    """The current cut of one attribute: sorted range starts (and node ids if hierarchical)."""

    attr: Attr
    starts: list[int]
    nodes: list[int] | None

    @classmethod
    def root(cls, attr: Attr) -> Cut:
        return cls(attr, [0], [0] if attr.hierarchical else None)

    def ends(self) -> list[int]:
        return [*self.starts[1:], self.attr.n_fine]

    def index(self, fine: I64) -> I64:
        return np.searchsorted(np.asarray(self.starts, dtype=np.int64), fine, side="right").astype(np.int64) - 1

    def labels(self) -> list[str]:
        if self.nodes is not None and self.attr.kind == "cat":
            return [self.attr.node_labels[v] for v in self.nodes]
        return [self.attr.interval_label(a, b) for a, b in zip(self.starts, self.ends())]

    def specialize_node(self, node: int) -> None:
        assert self.nodes is not None
        j = self.nodes.index(node)
        kids = self.attr.node_children[node]
        self.nodes[j : j + 1] = list(kids)
        self.starts[j : j + 1] = [self.attr.node_lo[k] for k in kids]

    def split_at(self, boundary: int) -> None:
        j = int(np.searchsorted(self.starts, boundary, side="right"))
        self.starts.insert(j, boundary)

    def copy(self) -> Cut:
        return Cut(self.attr, list(self.starts), None if self.nodes is None else list(self.nodes))


@dataclass(frozen=True)
class Specialization:
    """One public step of the top-down specialisation: ``node`` of ``attribute`` became ``children``."""

    attribute: str
    node: str
    children: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.attribute}: {self.node} -> {', '.join(self.children)}"


def n_specializations(attrs: tuple[Attr, ...]) -> int:
    """How many specialisations the schema allows in all (public): after that many levels every
    cut is at its finest (taxonomy leaves, grid cells or ticks) and no candidate is left."""
    total = 0
    for a in attrs:
        total += sum(1 for kids in a.node_children if kids) if a.hierarchical else a.n_fine - 1
    return total


def n_cells_of(sizes: list[int], n_classes: int) -> int:
    """``K * prod |cut_a|`` as an exact Python integer."""
    return n_classes * math.prod(sizes)


# ---------------------------------------------------------------------------------------------
# leaf cells
# ---------------------------------------------------------------------------------------------
def cell_ids(cut_index: I64, y: I64, radix: list[int]) -> I64:
    """Mixed-radix cell id over (cut index of each attribute, class); class is the last digit."""
    key = np.zeros(y.shape[0], dtype=np.int64)
    for j, size in enumerate(radix[:-1]):
        key = key * size + cut_index[:, j]
    return key * radix[-1] + y


def cut_partition_ids(cut_index: I64, sizes: list[int], skip: int | None = None) -> tuple[I64, int]:
    """Compact ids of the leaf partitions over the specialised attributes, optionally leaving one out."""
    cols = [cut_index[:, j] for j, s in enumerate(sizes) if s > 1 and j != skip]
    szs = [s for j, s in enumerate(sizes) if s > 1 and j != skip]
    return compact_ids(cols, szs, cut_index.shape[0])
