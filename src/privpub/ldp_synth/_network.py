"""Bayesian-network construction (paper Alg. 3 and the reconstructed Alg. 4) and synthetic sampling."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from privpub.core import RNGLike, as_generator, check_positive_int
from privpub.errors import ParameterError
from privpub.ldp_synth._kernels import entropy, mutual_information, sample_conditional
from privpub.ldp_synth._store import JointSource

__all__ = [
    "Network",
    "build_network",
    "conditional_tables",
    "edges",
    "sample_synthetic",
]

#: a network: ordered (child, parents) pairs; the order is a topological order
Network = tuple[tuple[int, tuple[int, ...]], ...]

STARTS = ("entropy", "random")
SEARCHES = ("incremental", "exhaustive", "single_carry")

ProgressFn = Callable[[int, int], None]
#: a scored candidate: (mutual information, child, parents)
_Pair = tuple[float, int, tuple[int, ...]]


class _MICache:
    """Mutual information I(X; Pi) per (X, sorted Pi), from joints over sorted({X} | Pi)."""

    def __init__(self, source: JointSource) -> None:
        self.source = source
        self.values: dict[tuple[int, tuple[int, ...]], float] = {}

    def prefetch(self, pairs: Sequence[tuple[int, tuple[int, ...]]]) -> None:
        """Let the source estimate all joints a round needs in one batch (batched EM), if it can."""
        self.prefetch_joints([(c, *p) for c, p in pairs if (c, p) not in self.values])

    def prefetch_joints(self, attr_sets: Sequence[tuple[int, ...]]) -> None:
        fetch = getattr(self.source, "prefetch", None)
        if fetch is not None and len(attr_sets) > 1:
            fetch(attr_sets)

    def __call__(self, child: int, parents: tuple[int, ...]) -> float:
        key = (child, parents)
        val = self.values.get(key)
        if val is None:
            joint = self.source.joint((child, *parents))
            val = round(mutual_information(joint), 12)
            self.values[key] = val
        return val


def _beats(a: _Pair, b: _Pair | None) -> bool:
    """Tie order of spec 2.5: larger rounded MI, then smaller child, then lexicographically smaller parents."""
    if b is None:
        return True
    if a[0] != b[0]:
        return a[0] > b[0]
    if a[1] != b[1]:
        return a[1] < b[1]
    return a[2] < b[2]


def _check_network_args(d: int, degree: int, start: str, search: str) -> int:
    k = check_positive_int(degree, "degree")
    if k >= d:
        raise ParameterError(
            f"degree (max parents k) must be an integer in [1, {d - 1}] (below the number of attributes {d}), "
            f"got {k}"
        , param="degree")
    if start not in STARTS:
        raise ParameterError(f"start must be one of {list(STARTS)}, got {start!r}", param="start")
    if search not in SEARCHES:
        raise ParameterError(f"search must be one of {list(SEARCHES)}, got {search!r}", param="search")
    return k


def build_network(
    source: JointSource,
    degree: int = 2,
    *,
    start: str = "entropy",
    search: str = "incremental",
    rng: RNGLike = None,
    progress: ProgressFn | None = None,
) -> Network:
    """Greedy Bayesian network of max in-degree ``degree`` (paper Alg. 3 / Alg. 4, spec 2.5).

    Parameters
    ----------
    source : ReportStore or EmpiricalJoints
        Gives joint distributions over attribute subsets (estimated from reports, or exact).
    degree : int
        Max number of parents k, ``1 <= k < d``.
    start : {"entropy", "random"}
        First node: the maximum-entropy attribute of the estimated 1-way marginals (Alg. 4) or a
        uniformly random attribute drawn as the first ``rng`` draw (Alg. 3).
    search : {"incremental", "exhaustive", "single_carry"}
        ``"incremental"`` keeps the best pair per unselected child and scores only parent sets that
        contain the node just added (Alg. 4 as reconstructed; the same network as ``"exhaustive"``);
        ``"exhaustive"`` rescans every candidate each round (Alg. 3); ``"single_carry"`` is the
        paper's literal Alg. 4 (ablation only).
    rng : int, Generator or None
        Used only by ``start="random"``.
    progress : callable or None
        Called as ``progress(i, d)`` after node ``i`` is placed.

    Returns
    -------
    tuple of (child, parents) pairs
        In insertion (topological) order; ``len(parents) == min(k, i)`` for the i-th node (0-based).

    Notes
    -----
    **Privacy:** post-processing of LDP reports when ``source`` is a :class:`ReportStore`; no budget.
    """
    d = len(source.sizes)
    k = _check_network_args(d, degree, start, search)
    mi = _MICache(source)
    first = _first_node(source, mi, start, rng)
    selected = [first]
    net: list[tuple[int, tuple[int, ...]]] = [(first, ())]
    if progress is not None:
        progress(1, d)
    best: dict[int, _Pair] = {}  # the best pair per unselected child (incremental search)
    carry: _Pair | None = None  # the runner-up carried to the next round (single_carry search)
    for i in range(1, d):
        rest = [x for x in range(d) if x not in selected]
        if len(selected) <= k:  # every selected node is a parent: one parent set per child
            chosen, best = _round_all_parents(mi, selected, rest)
            if search == "single_carry":
                carry = _runner_up(best.values(), chosen)
        elif search == "exhaustive":
            chosen = _round_exhaustive(mi, selected, rest, k)
        elif search == "incremental":
            chosen = _round_incremental(mi, selected, rest, k, best)
        else:
            chosen, carry = _round_single_carry(mi, selected, rest, k, carry)
        if chosen is None:  # pragma: no cover - rest is never empty here
            raise RuntimeError("no candidate pair")
        selected.append(chosen[1])
        net.append((chosen[1], chosen[2]))
        best.pop(chosen[1], None)
        if progress is not None:
            progress(i + 1, d)
    return tuple(net)


def _first_node(source: JointSource, mi: _MICache, start: str, rng: RNGLike) -> int:
    """The network's root: a uniformly random attribute (Alg. 3) or the maximum-entropy one (Alg. 4)."""
    d = len(source.sizes)
    if start == "random":
        return int(as_generator(rng).integers(d))
    mi.prefetch_joints([(j,) for j in range(d)])
    ents = [round(entropy(source.joint((j,))), 12) for j in range(d)]
    return int(np.argmax(ents))  # first maximum: lowest index on ties


def _best(pairs: Iterable[_Pair], chosen: _Pair | None = None) -> _Pair | None:
    """The pair that beats every other (``_beats``; the first one on exact ties), starting from ``chosen``."""
    for c in pairs:
        if _beats(c, chosen):
            chosen = c
    return chosen


def _runner_up(pairs: Iterable[_Pair], chosen: _Pair | None) -> _Pair | None:
    """The best pair whose child is not ``chosen``'s (None when ``chosen`` is None: an empty pool)."""
    return _best(c for c in pairs if chosen is not None and c[1] != chosen[1])


def _new_parent_sets(selected: Sequence[int], k: int) -> list[tuple[int, ...]]:
    """The k-subsets of ``selected`` that contain its newest node, each sorted."""
    newest = selected[-1]
    others = sorted(set(selected) - {newest})
    return [tuple(sorted((*sub, newest))) for sub in itertools.combinations(others, k - 1)]


def _round_all_parents(mi: _MICache, selected: Sequence[int],
                       rest: Sequence[int]) -> tuple[_Pair | None, dict[int, _Pair]]:
    """A round while at most k nodes are placed: every child's parents are all of them."""
    s = tuple(sorted(selected))
    mi.prefetch([(x, s) for x in rest])
    cands = [(mi(x, s), x, s) for x in rest]
    return _best(cands), {c[1]: c for c in cands}


def _round_exhaustive(mi: _MICache, selected: Sequence[int], rest: Sequence[int], k: int) -> _Pair | None:
    """Alg. 3: score every (child, k-subset of the placed nodes) pair."""
    combos = list(itertools.combinations(sorted(selected), k))
    mi.prefetch([(x, combo) for combo in combos for x in rest])
    return _best((mi(x, combo), x, combo) for combo in combos for x in rest)


def _round_incremental(mi: _MICache, selected: Sequence[int], rest: Sequence[int], k: int,
                       best: dict[int, _Pair]) -> _Pair | None:
    """Alg. 4 as reconstructed: score only the parent sets with the newest node; ``best`` keeps the rest."""
    combos = _new_parent_sets(selected, k)
    mi.prefetch([(x, combo) for combo in combos for x in rest])
    for combo in combos:
        for x in rest:
            c = (mi(x, combo), x, combo)
            if _beats(c, best.get(x)):
                best[x] = c
    return _best(best[x] for x in rest)


def _round_single_carry(mi: _MICache, selected: Sequence[int], rest: Sequence[int], k: int,
                        carry: _Pair | None) -> tuple[_Pair | None, _Pair | None]:
    """The paper's literal Alg. 4: parent sets with the newest node plus the pair carried from the last round.

    Returns the chosen pair and the runner-up to carry to the next round.
    """
    combos = _new_parent_sets(selected, k)
    mi.prefetch([(x, combo) for combo in combos for x in rest])
    pool = [(mi(x, combo), x, combo) for combo in combos for x in rest]
    if carry is not None and carry[1] in rest:
        pool.append(carry)
    chosen = _best(pool)
    return chosen, _runner_up(pool, chosen)


def edges(network: Network) -> frozenset[frozenset[int]]:
    """Undirected edge set of a network."""
    return frozenset(frozenset((child, p)) for child, parents in network for p in parents)


def conditional_tables(source: JointSource, network: Network) -> list[NDArray[np.float64]]:
    """Per node, the conditional table ``(n_parent_configs, n_child)`` (root: ``(1, n_child)``).

    Rows whose parent configuration has mass <= 1e-12 fall back to the child's marginal
    (spec 2.6, A9).
    """
    sizes = source.sizes
    out: list[NDArray[np.float64]] = []
    for child, parents in network:
        j = np.asarray(source.joint((*parents, child)), dtype=np.float64)
        j = np.maximum(j.reshape(-1, sizes[child]), 0.0)
        mass = j.sum(axis=1, keepdims=True)
        marginal = j.sum(axis=0)
        marginal = marginal / marginal.sum() if marginal.sum() > 0 else np.full(sizes[child], 1.0 / sizes[child])
        safe = np.where(mass > 1e-12, mass, 1.0)
        table = np.where(mass > 1e-12, j / safe, marginal[None, :])
        out.append(table)
    return out


def sample_synthetic(
    network: Network,
    tables: Sequence[NDArray[np.float64]],
    sizes: Sequence[int],
    n: int,
    rng: RNGLike = None,
) -> NDArray[np.int64]:
    """Sample ``n`` rows in insertion order, one ``rng.random(n)`` per node (spec 2.6).

    Returns an ``(n, d)`` int64 code array with columns in attribute order.
    """
    n_rows = check_positive_int(n, "n")
    gen = as_generator(rng)
    d = len(sizes)
    out = np.zeros((n_rows, d), dtype=np.int64)
    for (child, parents), table in zip(network, tables):
        u = gen.random(n_rows)
        if parents:
            idx = np.zeros(n_rows, dtype=np.int64)
            for p in parents:  # mixed radix, first parent most significant
                idx = idx * int(sizes[p]) + out[:, p]
            out[:, child] = sample_conditional(table, idx, u)
        else:
            out[:, child] = sample_conditional(table[0] if table.ndim == 2 else table, None, u)
    return out
