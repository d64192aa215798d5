"""DiffGen (Mohammed, Chen, Fung, Yu, KDD 2011): the baseline of paper 003.

Global top-down specialisation where each level picks a cut node with the exponential
mechanism, and every numeric interval carries a split tick chosen privately (exponential
mechanism over all ticks, uniform base measure) when the interval is created. Spec §3.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpub.core import (
    RNGLike,
    Schema,
    Session,
    accounting,
    as_generator,
    check_epsilon,
    check_positive_int,
    contribution_key,
    describe_data,
    exponential_mechanism,
    exponential_mechanism_ranges,
)
from privpub.decision._aggregate import open_counts
from privpub.decision._kernels import (
    MIN_LEVEL_EPSILON,
    child_class_counts,
    class_counts_by_value,
    info_gain,
    split_segments_from_counts,
)
from privpub.decision._model import (
    Attr,
    Cut,
    Specialization,
    compile_schema,
    n_cells_of,
    n_specializations,
)
from privpub.decision._release import DecisionRelease, TablePublisher, build_release, check_cells, leaf_cells
from privpub.decision._unit import resolve_unit
from privpub.decision._validation import check_common
from privpub.errors import ParameterError

__all__ = ["DiffGen", "segment_scores", "segment_scores_from_counts"]

I64 = NDArray[np.int64]


def _scores_from_counts(counts: NDArray[np.int64], owner: I64, n: int, score: str) -> NDArray[np.float64]:
    """Max or InfoGain per candidate from pooled child class counts ``(n_children, K)``."""
    if score == "infogain":
        return info_gain(counts, owner, n)
    return np.bincount(owner, weights=counts.max(axis=1), minlength=n).astype(np.float64)


def _specialize(cut: Cut, a: int, v: int, end: int, splits: dict[tuple[int, int], int],
                history: list[Specialization]) -> list[tuple[int, int]]:
    """Apply the selected candidate ``(a, v, end)`` to attribute ``a``'s cut and record it in ``history``.

    A taxonomy node is replaced by its children; a numeric interval ``[v, end)`` is split at its
    split tick (taken from ``splits``). Returns the new intervals that need a split tick of their
    own (those with at least two ticks; none for a taxonomy node).
    """
    at = cut.attr

    def label(c: int) -> str:
        return at.node_labels[c] if at.kind == "cat" else at.interval_label(at.node_lo[c], at.node_hi[c])

    if at.hierarchical:
        before = label(v)
        kids = at.node_children[v]
        cut.specialize_node(v)
        history.append(Specialization(at.name, before, tuple(label(c) for c in kids)))
        return []
    s = splits.pop((a, v))
    cut.split_at(s)
    history.append(Specialization(at.name, at.interval_label(v, end), (at.interval_label(v, s), at.interval_label(s, end))))
    return [(c0, c1) for c0, c1 in ((v, s), (s, end)) if c1 - c0 >= 2]


def segment_scores(
    ticks: I64, y: I64, n_classes: int, lo: int, hi: int, score: str
) -> tuple[I64, I64, NDArray[np.float64]]:
    """Split segments of ``[lo, hi)`` and their scores (Max or InfoGain of the two halves)."""
    uniq, counts = class_counts_by_value(np.asarray(ticks, dtype=np.int64), np.asarray(y, dtype=np.int64), n_classes)
    return segment_scores_from_counts(uniq, counts, lo, hi, score)


def segment_scores_from_counts(
    ticks: I64, class_counts: NDArray[np.int64], lo: int, hi: int, score: str
) -> tuple[I64, I64, NDArray[np.float64]]:
    """:func:`segment_scores` from the distinct ticks of ``[lo, hi)`` and their ``(m, K)`` class counts."""
    n_classes = class_counts.shape[1]
    seg_lo, seg_hi, left, right = split_segments_from_counts(ticks, class_counts, lo, hi)
    m = seg_lo.size
    counts = np.empty((2 * m, n_classes), dtype=np.int64)
    counts[0::2], counts[1::2] = left, right
    return seg_lo, seg_hi, _scores_from_counts(counts, np.repeat(np.arange(m), 2), m, score)


@dataclass(frozen=True, kw_only=True)
class DiffGen(TablePublisher):
    """DiffGen, the differentially private generalisation baseline (Mohammed et al. 2011).

    Parameters
    ----------
    levels : int
        Number of specialisations ``h`` (>= 1); stops early when nothing is specialisable.
    score : {"max", "infogain"}
        Utility of a candidate, pooled over the table: Max (sensitivity 1) or base-2 InfoGain
        (sensitivity ``log2 K``).
    reuse_unspent : bool
        Give the budget left by an early stop or by categorical picks to the leaf counts (as the
        authors' code does; DP because what is unspent depends only on public outputs). Default
        False, as in the paper: the ledger total is then <= ``epsilon``.
    noise : {"discrete", "laplace"}
        Leaf noise (see :class:`MAXGDDP`).
    taxonomies, fanout, max_synthetic_rows
        As for :class:`MAXGDDP`.

    Notes
    -----
    **Privacy:** ``epsilon``-DP under add/remove-one neighbours. With ``|A_n|`` numeric attributes
    (not in taxonomy mode) and ``eps' = epsilon / (2(|A_n| + 2h))``: each root split is an
    exponential mechanism with ``eps'`` over every tick of the interval
    (:func:`privpub.core.exponential_mechanism_ranges`); each level's selection costs ``eps'``
    (:func:`privpub.core.exponential_mechanism`); the splits of the two children of a
    specialised interval cost ``eps'`` together (disjoint records, parallel composition); the
    leaf cells get noise with ``epsilon / 2`` (L1 sensitivity 1, :func:`privpub.core.sparse_noisy_counts`).
    Total <= ``epsilon``, with equality when every pick is a splittable numeric interval.

    **Person level** (``privacy_id=``, ``max_contributions=k``): as for :class:`MAXGDDP`, each
    person's rows are bounded to ``k`` and every budget above is computed from ``epsilon / k``
    (``Accountant.record_budget``); the release is ``epsilon``-DP for adding or removing one person.

    **Ledger:** charged by the mechanisms as they draw: ``("root split <attribute>",
    exponential_mechanism, eps', du)`` per splittable numeric attribute; per level ``("level i
    selection", exponential_mechanism, eps', du)`` and, after a numeric pick, a parallel block
    ``"level i child splits"`` with one branch per child interval of >= 2 ticks (``parts`` = 1 or
    2); then ``("leaf counts", discrete_laplace, epsilon / 2 or the unspent rest, 1)``. ``du`` is
    1 (Max) or ``log2 K`` (InfoGain).

    References
    ----------
    N. Mohammed, R. Chen, B. C. M. Fung, P. S. Yu. Differentially private data release for data
    mining. KDD 2011, doi:10.1145/2020408.2020487.

    Examples
    --------
    >>> import pandas as pd
    >>> from privpub.decision import DiffGen, Schema, NumericAttribute
    >>> schema = Schema([NumericAttribute("x", lo=0, hi=10)], class_name="y", classes=["a", "b"])
    >>> df = pd.DataFrame({"x": list(range(10)) * 20, "y": ["a"] * 100 + ["b"] * 100})
    >>> release = DiffGen(levels=2).publish(df, schema=schema, epsilon=1.0, rng=0)
    >>> release.ledger.total <= 1.0
    True
    """

    levels: int
    score: str = "max"
    reuse_unspent: bool = False
    noise: str = "discrete"
    taxonomies: Mapping[str, Any] | None = field(default=None, compare=False)
    fanout: int = 4
    max_synthetic_rows: float = 5e7

    def __post_init__(self) -> None:
        check_common(self)
        if self.score not in ("max", "infogain"):
            raise ParameterError(f"score must be 'max' or 'infogain', got {self.score!r}", param="score")
        if not isinstance(self.reuse_unspent, bool):
            raise ParameterError(f"reuse_unspent must be True or False, got {self.reuse_unspent!r}", param="reuse_unspent")

    def compile(self, schema: Schema) -> tuple[Attr, ...]:
        return compile_schema(schema, self.taxonomies, fanout=self.fanout, grid_size=1, tick_mode=True)

    def step_epsilon(self, epsilon: float, schema: Schema, *, max_contributions: int | None = None) -> float:
        """``eps' = epsilon / (2 (|A_n| + 2h))`` for this schema.

        With ``max_contributions=k`` (a person-level release): what each step draws at per record,
        the person's ``eps'`` divided by ``k`` (group privacy), as ``publish(..., max_contributions=k)``.
        """
        n_num = sum(a.kind == "ticks" for a in self.compile(schema))
        k = 1 if max_contributions is None else check_positive_int(max_contributions, "max_contributions")
        return check_epsilon(epsilon) / (2 * (n_num + 2 * self.levels)) / k

    def publish(
        self, data: Any, *, schema: Schema, epsilon: float, rng: RNGLike = None, session: Session | None = None,
        privacy_id: str | None = None, max_contributions: int | None = None, privacy_unit: Any = None,
    ) -> DecisionRelease:
        """Release ``data`` under ``epsilon``-DP (same inputs, units, session rule and errors as
        :meth:`MAXGDDP.publish`; ``privacy_id=``/``max_contributions=`` make it person-level)."""
        return self._run(data, schema=schema, epsilon=epsilon, rng=rng, session=session, exact=False,
                         privacy_unit=privacy_unit, privacy_id=privacy_id, max_contributions=max_contributions)

    def _run(self, data: Any, *, schema: Schema, epsilon: float, rng: RNGLike, exact: bool,
             session: Session | None = None, privacy_unit: Any = None, privacy_id: str | None = None,
             max_contributions: int | None = None) -> DecisionRelease:
        """The algorithm; ``exact=True`` is the non-private reference (noiseless, lowest best split;
        tests only): its ledger records the leaks and it is refused under a session."""
        eps = check_epsilon(epsilon)
        attrs = self.compile(schema)
        unit = resolve_unit(privacy_unit, privacy_id, max_contributions, schema)
        gen = as_generator(rng)
        key = contribution_key(gen) if unit.kind == "person" else None
        # validates the data (in Spark for a Spark DataFrame) and bounds each person's rows
        data_counts = open_counts(attrs, schema, data, unit=unit, key=key)
        rec = unit.record_amount(eps)  # public: the record-level budget (epsilon / k for a person)
        k = len(schema.classes or ())
        e, du = self._step_budget(eps, attrs, k, exact, rec)
        # DiffGen's scores are pooled over the table: the class counts per fine code of every
        # attribute (one aggregation) are all the selection reads
        marg = data_counts.marginals()
        splits: dict[tuple[int, int], int] = {}  # (attribute, interval start) -> the interval's split tick

        def em_split(a: int, lo: int, hi: int, note: str) -> int:
            """Split tick of ``[lo, hi)``: the exponential mechanism over every tick ``lo < s < hi``."""
            ts, cs = marg[a]
            i0, i1 = np.searchsorted(ts, [lo, hi])
            seg_lo, seg_hi, u = segment_scores_from_counts(ts[i0:i1], cs[i0:i1], lo, hi, self.score)
            if exact:
                return int(seg_lo[int(np.argmax(u))])
            return exponential_mechanism_ranges(seg_lo, seg_hi + 1, u, epsilon=e, sensitivity=du, rng=gen, note=note)

        cuts = [Cut.root(a) for a in attrs]
        history: list[Specialization] = []
        with accounting(eps, method="diffgen", session=session, data=describe_data(data), private=not exact,
                        unit=unit) as acc:
            # every mechanism spends the record-level budget (epsilon / k for a person of k rows)
            for a, at in enumerate(attrs):
                if at.kind == "ticks" and at.n_fine >= 2:
                    with acc.step(f"root split {at.name}"):
                        splits[(a, 0)] = em_split(a, 0, at.n_fine, "split tick over all ticks, uniform base measure")
            for i in range(self.levels):
                cands, scores = self._candidates(cuts, attrs, splits, marg)
                if not cands:
                    break
                with acc.step(f"level {i + 1} selection"):
                    j = int(np.argmax(scores)) if exact else exponential_mechanism(
                        scores, epsilon=e, sensitivity=du, rng=gen, note=f"{len(cands)} candidates")
                a, v, end = cands[j]
                children = _specialize(cuts[a], a, v, end, splits, history)
                if children:  # the children hold disjoint records: parallel composition
                    with acc.step(f"level {i + 1} child splits"), acc.parallel(f"level {i + 1} child splits") as block:
                        for c0, c1 in children:
                            with block.branch(attrs[a].interval_label(c0, c1)):
                                splits[(a, c0)] = em_split(a, c0, c1, "split tick of a new interval")
                if not exact:  # the cut only grows: stop as soon as the leaves cannot be released
                    check_cells(n_cells_of([len(c.starts) for c in cuts], k),
                                leaf_epsilon=rec - acc.unit.record_amount(acc.total) if self.reuse_unspent else rec / 2.0,
                                noise=self.noise, max_rows=self.max_synthetic_rows, when=f"the cut after level {i + 1} has")
            if exact:
                acc.leak("selection", f"{len(history)} levels and their split ticks: exact argmax, no noise")
                acc.leak("leaf counts", "the true cell counts, no noise")
            leaf_eps = rec - acc.unit.record_amount(acc.total) if self.reuse_unspent and not exact else rec / 2.0
            with acc.step("leaf counts"):
                cells = leaf_cells(cuts, data_counts, k, epsilon=leaf_eps, noise=self.noise, exact=exact,
                                   max_rows=self.max_synthetic_rows, gen=gen)
            return build_release(cuts=cuts, cells=cells, schema=schema, history=history, ledger=acc.seal(),
                                 epsilon=eps, method="diffgen", private=not exact, params=self.params())

    def _step_budget(self, eps: float, attrs: tuple[Attr, ...], k: int, exact: bool,
                     rec: float | None = None) -> tuple[float, float]:
        """The budget of every selection and split step, ``eps'``, and the score's sensitivity.

        ``rec`` is the record-level budget the mechanisms spend (``epsilon / k`` for a person of ``k``
        rows; default ``eps``).

        Refuses (before anything is reserved or drawn) levels whose steps get a budget too small for
        the noise, and levels that specialise every attribute into a leaf table too large to release.
        """
        rec = eps if rec is None else rec
        du = math.log2(k) if self.score == "infogain" else 1.0
        n_num = sum(a.kind == "ticks" for a in attrs)
        e = rec / (2 * (n_num + 2 * self.levels))
        if e < du * MIN_LEVEL_EPSILON:
            most = max(1, math.floor((rec / (du * MIN_LEVEL_EPSILON) / 2 - n_num) / 2))
            raise ParameterError(
                f"levels={self.levels} gives each DiffGen step eps'={e:.3g}, below the smallest usable budget "
                f"{MIN_LEVEL_EPSILON * du:.3g} (noise scales stop at 2**52); at "
                f"epsilon={eps:g}{'' if rec == eps else f' (record-level {rec:g})'} at most {most} levels are "
                "possible: lower levels (CLI --levels)"
            )
        n_spec = n_specializations(attrs)
        n_root = sum(1 for a in attrs if a.kind == "ticks" and a.n_fine >= 2)
        if self.levels >= n_spec and not exact:  # everything is specialised: the final size is known now
            leaf_max = rec - (n_root + n_spec) * e if self.reuse_unspent else rec / 2.0
            check_cells(n_cells_of([a.n_fine for a in attrs], k), leaf_epsilon=leaf_max, noise=self.noise,
                        max_rows=self.max_synthetic_rows,
                        when=f"levels={self.levels} specialises every attribute to its finest cut (the schema "
                             f"allows {n_spec} specialisations), of")
        return e, du

    def _candidates(
        self, cuts: list[Cut], attrs: tuple[Attr, ...], splits: dict[tuple[int, int], int],
        marg: dict[int, tuple[I64, NDArray[np.int64]]],
    ) -> tuple[list[tuple[int, int, int]], NDArray[np.float64]]:
        """The specialisable cut nodes and intervals ``(attr, node or start, end)`` and their scores,
        from the per-attribute class marginals ``marg`` (distinct fine codes, ``(m, K)`` counts)."""
        cands: list[tuple[int, int, int]] = []
        node_rows: list[int] = []
        tick_rows: list[int] = []
        for a, cut in enumerate(cuts):
            at = cut.attr
            if at.hierarchical:
                assert cut.nodes is not None
                for v in cut.nodes:
                    if at.node_children[v]:
                        node_rows.append(len(cands))
                        cands.append((a, v, -1))
            else:
                for s0, s1 in zip(cut.starts, cut.ends()):
                    if (a, s0) in splits:
                        tick_rows.append(len(cands))
                        cands.append((a, s0, s1))
        scores = np.zeros(len(cands))
        by_attr: dict[int, list[int]] = {}
        for idx in node_rows:
            by_attr.setdefault(cands[idx][0], []).append(idx)
        for a, members in by_attr.items():
            at = attrs[a]
            kid_lists = [at.node_children[cands[idx][1]] for idx in members]
            lo = np.asarray([at.node_lo[c] for ks in kid_lists for c in ks], dtype=np.int64)
            hi = np.asarray([at.node_hi[c] for ks in kid_lists for c in ks], dtype=np.int64)
            own = np.asarray([idx for idx, ks in zip(members, kid_lists) for _ in ks], dtype=np.int64)
            vals, cs = marg[a]
            k = cs.shape[1]
            cnt = child_class_counts(np.zeros(cs.size, dtype=np.int64), 1, np.repeat(vals, k), at.n_fine,
                                     np.tile(np.arange(k, dtype=np.int64), vals.size), k, lo, hi,
                                     weights=cs.reshape(-1))[0]
            scores += _scores_from_counts(cnt, own, len(cands), self.score)
        if tick_rows:
            rows = []
            for idx in tick_rows:
                a, s0, s1 = cands[idx]
                bounds = np.asarray([s0, splits[(a, s0)], s1])
                vals, cs = marg[a]
                cum = np.vstack([np.zeros((1, cs.shape[1]), dtype=np.int64), np.cumsum(cs, axis=0)])
                rows.append(np.diff(cum[np.searchsorted(vals, bounds)], axis=0))
            t_owner = np.repeat(np.asarray(tick_rows, dtype=np.int64), 2)
            scores += _scores_from_counts(np.vstack(rows), t_owner, len(cands), self.score)
        return cands, scores

    def params(self) -> dict[str, Any]:
        return {"levels": self.levels, "score": self.score, "reuse_unspent": self.reuse_unspent,
                "noise": self.noise, "fanout": self.fanout}
