"""MAXGDDP: top-down specialisation with report-noisy-max and geometric level budgets.

Reference: Fu Jibin, Zhang Xiaojian, Ding Liping. MAXGDDP: decision data release with
differential privacy. Journal on Communications 39(3), 2018. doi:10.11959/j.issn.1000-436x.2018049
(shared/seeds/003); implementation spec shared/specs/decision.md.
"""

from __future__ import annotations

import logging
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
    report_noisy_max,
)
from privpub.decision._aggregate import DecisionCounts, InMemoryCounts, open_counts
from privpub.decision._kernels import candidate_max_scores, level_budgets
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

__all__ = ["MAXGDDP", "candidates", "score_candidates", "scores_from_counts"]

log = logging.getLogger(__name__)

I64 = NDArray[np.int64]


@dataclass(frozen=True)
class Candidate:
    """A specialisation candidate: a node (``node >= 0``) or a grid split at fine ``boundary``."""

    attr: int
    node: int = -1
    boundary: int = -1
    child_lo: tuple[int, ...] = ()
    child_hi: tuple[int, ...] = ()


def candidates(cuts: list[Cut]) -> list[Candidate]:
    """The public candidate vector C (spec §2.3): schema order; nodes in DFS order; splits ascending."""
    out: list[Candidate] = []
    for a, cut in enumerate(cuts):
        at = cut.attr
        if at.hierarchical:
            assert cut.nodes is not None
            for v in cut.nodes:
                kids = at.node_children[v]
                if kids:
                    out.append(Candidate(a, node=v, child_lo=tuple(at.node_lo[k] for k in kids),
                                         child_hi=tuple(at.node_hi[k] for k in kids)))
        else:
            starts = cut.starts
            ends = cut.ends()
            j = 0
            for b in range(1, at.n_fine):
                while ends[j] <= b:
                    j += 1
                if b == starts[j]:
                    continue
                out.append(Candidate(a, boundary=b, child_lo=(starts[j], b), child_hi=(b, ends[j])))
    return out


def score_candidates(
    cands: list[Candidate], cuts: list[Cut], fine: I64, y: I64, n_classes: int, score: str
) -> I64:
    """Max scores of all candidates from the records' fine codes and classes (spec §2.4, §6); exact int64."""
    return scores_from_counts(cands, cuts, InMemoryCounts(fine, y, n_classes), score)


def scores_from_counts(cands: list[Candidate], cuts: list[Cut], counts: DecisionCounts, score: str) -> I64:
    """Max scores of all candidates from the aggregates ``counts`` answers for this cut.

    One :meth:`~privpub.decision._aggregate.DecisionCounts.level_tables` request per level (one
    Spark job for a Spark DataFrame); the scores are vectorised per attribute and exact int64.
    """
    out = np.zeros(len(cands), dtype=np.int64)
    by_attr: dict[int, list[int]] = {}
    for i, c in enumerate(cands):
        by_attr.setdefault(c.attr, []).append(i)
    tables = counts.level_tables(cuts, sorted(by_attr), pooled=score == "max")
    for a, members in by_attr.items():
        t = tables[a]
        lo = np.asarray([x for i in members for x in cands[i].child_lo], dtype=np.int64)
        hi = np.asarray([x for i in members for x in cands[i].child_hi], dtype=np.int64)
        owner = np.asarray([k for k, i in enumerate(members) for _ in cands[i].child_lo], dtype=np.int64)
        at = cuts[a].attr
        out[np.asarray(members)] = candidate_max_scores(t.pid, t.n_parts, t.fine, at.n_fine, t.y, counts.n_classes,
                                                        lo, hi, owner, len(members), disjoint=at.hierarchical,
                                                        weights=t.weights)
    return out


def apply(cuts: list[Cut], cand: Candidate) -> Specialization:
    """Specialise the cut in place; return the public description of the step."""
    cut = cuts[cand.attr]
    at = cut.attr
    if cand.node >= 0:
        before = at.node_labels[cand.node] if at.kind == "cat" else at.interval_label(
            at.node_lo[cand.node], at.node_hi[cand.node])
        cut.specialize_node(cand.node)
    else:
        before = at.interval_label(cand.child_lo[0], cand.child_hi[-1])
        cut.split_at(cand.boundary)
    kids = tuple(at.node_labels[k] if at.kind == "cat" else at.interval_label(a, b)
                 for k, a, b in zip(at.node_children[cand.node] if cand.node >= 0 else (0, 0),
                                    cand.child_lo, cand.child_hi))
    return Specialization(at.name, before, kids)


@dataclass(frozen=True, kw_only=True)
class MAXGDDP(TablePublisher):
    """MAXGDDP decision-data release (Fu, Zhang, Ding 2018).

    Starting from the fully generalised table, each of ``levels`` rounds scores every
    specialisation candidate -- every specialisable taxonomy node of every categorical
    attribute and every public grid split point inside a numeric interval -- by the Max
    measure (paper eq. 5), puts all scores in one vector and releases only the index of the
    noisy maximum (report-noisy-max, "MAXDP"). The chosen candidate specialises every
    partition. Finally every (leaf partition, class) cell gets a noisy count.

    Parameters
    ----------
    levels : int
        Number of specialisation levels ``h`` (>= 1). Stops early, leaving the rest of the
        schedule unspent, when nothing is left to specialise.
    split : float
        Share ``eps1 / epsilon`` of the budget spent on selection, in (0, 1); the leaf counts get
        ``eps2 = (1 - split) * epsilon``.
    schedule : {"geometric", "uniform"}
        Level budgets: ``eps_i = eps1 r^(i-1)(r-1)/(r^h-1)`` with ``r = fanout_ratio^(1/3)``
        (the paper's Theorem 2 with its index error fixed), or ``eps1 / h``.
    fanout_ratio : float
        Assumed ratio ``f_i / f_{i-1}`` of total fan-outs of consecutive levels (paper: 3).
    score : {"max_partition", "max"}
        Max summed over the current leaf partitions (Algorithm 1, steps 5-7; default) or pooled
        over the whole table (DiffGen's Max).
    max_split_candidates : int
        Size ``G`` of the public split grid of each numeric attribute (spec §2.2).
    noise : {"discrete", "laplace"}
        Leaf noise: exact discrete Laplace (default) or the paper's Laplace (exact, on a dyadic grid), rounded.
    taxonomies : mapping of str to tree, optional
        Taxonomy per attribute, overriding the schema's ``CategoricalAttribute.taxonomy``; a tree
        given for a numeric attribute puts it in taxonomy mode (nodes ``"[a,b)"``).
    fanout : int
        Fan-out of the default balanced taxonomy for categorical attributes without one.
    max_synthetic_rows : float
        Refuse cuts whose empty-cell noise alone would create more rows than this (public check).

    Notes
    -----
    **Privacy:** ``epsilon``-DP under add/remove-one-record neighbours (replace-one: ``2 epsilon``).
    Level ``i`` releases one argmax with Laplace noise of scale ``1/eps_i``: every Max score is a
    count that moves by 0 or +1 (all the same direction) when a record is added, so
    report-noisy-max with ``Lap(1/eps_i)`` is ``eps_i``-DP ([DR14] Claim 3.9; paper Theorem 1).
    The levels compose to ``eps1``. The leaf histogram (every cell, empty ones included) has L1
    sensitivity 1 and gets discrete Laplace noise with ``eps2``, through
    :func:`privpub.core.sparse_noisy_counts` (all cells noised, only those >= 1 materialised).
    Candidates, grids and taxonomies are public; the data only enter through the scores and the
    leaf counts.

    **Person level** (``privacy_id="user", max_contributions=k``): each person's rows are first
    bounded to ``k`` (:func:`privpub.core.bound_contributions`, a keyed hash of the id and of the
    row's fine codes and class, so what a person keeps depends only on their rows), and every
    budget above is computed from ``epsilon / k`` (:attr:`privpub.core.Accountant.record_budget`).
    Adding or removing one person changes at most ``k`` kept rows, so by group privacy the release
    is ``epsilon``-DP for one person; the ledger records each charge for the unit (``k x`` the
    record-level epsilon and sensitivity) and ``ledger.unit`` states it. The id column is not
    published.

    **Ledger** (privacy by construction): the mechanisms charge the release's accountant as they
    draw, so the sealed ledger is ``("level i selection", report_noisy_max, eps_i, sensitivity 1)``
    for every level that ran, then ``("leaf counts", discrete_laplace, eps2, sensitivity 1)`` (one
    charge: the ``n_cells`` cells are disjoint). Its total is ``epsilon`` when all ``levels`` run,
    less after an early stop. Under a :class:`~privpub.core.Session`, ``epsilon`` is reserved
    before anything is drawn.

    **Size checks** (public: they use only the schema, ``levels`` and ``epsilon``, or the DP
    cut): ``levels`` whose first level budget is unusably small, a run that specialises every
    attribute to its finest cut whose leaves would exceed ``max_synthetic_rows``, and a cut that
    outgrows it after some level are refused with :class:`~privpub.errors.ParameterError` (the
    first two before anything is drawn).

    References
    ----------
    Fu J., Zhang X., Ding L. MAXGDDP: decision data release with differential privacy. Journal on
    Communications, 2018, 39(3). doi:10.11959/j.issn.1000-436x.2018049.

    Examples
    --------
    >>> import pandas as pd
    >>> from privpub.decision import MAXGDDP, Schema, NumericAttribute, CategoricalAttribute
    >>> schema = Schema([NumericAttribute("age", lo=0, hi=100), CategoricalAttribute("sex", ["F", "M"])],
    ...                 class_name="y", classes=["no", "yes"])
    >>> df = pd.DataFrame({"age": [20, 30, 60, 70] * 50, "sex": ["F", "M"] * 100, "y": ["no", "no", "yes", "yes"] * 50})
    >>> release = MAXGDDP(levels=2).publish(df, schema=schema, epsilon=1.0, rng=0)
    >>> round(release.ledger.total, 12)
    1.0
    >>> len(release.history)
    2
    """

    levels: int
    split: float = 0.5
    schedule: str = "geometric"
    fanout_ratio: float = 3.0
    score: str = "max_partition"
    max_split_candidates: int = 32
    noise: str = "discrete"
    taxonomies: Mapping[str, Any] | None = field(default=None, compare=False)
    fanout: int = 4
    max_synthetic_rows: float = 5e7

    def __post_init__(self) -> None:
        check_common(self)
        if self.schedule not in ("geometric", "uniform"):
            raise ParameterError(f"schedule must be 'geometric' or 'uniform', got {self.schedule!r}", param="schedule")
        if self.score not in ("max_partition", "max"):
            raise ParameterError(f"score must be 'max_partition' or 'max', got {self.score!r}", param="score")
        if not 0.0 < float(self.split) < 1.0:
            raise ParameterError(f"split must be in (0, 1), got {self.split!r}", param="split")
        if not float(self.fanout_ratio) > 1.0:
            raise ParameterError(f"fanout_ratio must be > 1, got {self.fanout_ratio!r}", param="fanout_ratio")

    def level_budgets(self, epsilon: float, *, max_contributions: int | None = None) -> tuple[float, ...]:
        """The per-level selection budgets ``eps_1..eps_h`` for a total ``epsilon`` (sum ``eps1``).

        With ``max_contributions=k`` (a person-level release) they are what the mechanisms draw
        at, per record: the person's budgets divided by ``k`` (group privacy), as
        ``publish(..., max_contributions=k)`` spends them.
        """
        eps = check_epsilon(epsilon)
        k = 1 if max_contributions is None else check_positive_int(max_contributions, "max_contributions")
        return level_budgets(eps * self.split / k, self.levels, self.schedule, self.fanout_ratio)

    def compile(self, schema: Schema) -> tuple[Attr, ...]:
        return compile_schema(schema, self.taxonomies, fanout=self.fanout,
                              grid_size=self.max_split_candidates, tick_mode=False)

    def publish(
        self, data: Any, *, schema: Schema, epsilon: float, rng: RNGLike = None, session: Session | None = None,
        privacy_id: str | None = None, max_contributions: int | None = None, privacy_unit: Any = None,
    ) -> DecisionRelease:
        """Release ``data`` (a DataFrame with the schema's columns and target) under ``epsilon``-DP.

        Everything is validated before anything is drawn; under a ``session``, ``epsilon`` is
        reserved there first (refused, drawing nothing, if the session cannot pay).

        Parameters
        ----------
        data : pandas.DataFrame or pyspark.sql.DataFrame
            The table: the schema's columns, the target and (person level) the privacy-id column.
        schema : Schema
            The public domains and the class.
        epsilon : float
            The budget, for the privacy unit (one record, or one person).
        rng : seed or Generator
            All randomness (the bounding key, the selections, the leaf noise).
        session : Session, optional
            Reserves ``epsilon`` (for the unit) before anything is drawn.
        privacy_id : str, optional
            The column identifying each person; with ``max_contributions=k`` the release protects
            one person (all of their rows) added or removed: each person's rows are bounded to
            ``k`` (:func:`privpub.core.bound_contributions`, keyed from ``rng``; inside Spark for a
            Spark DataFrame) and the release spends ``epsilon / k`` at record level (group
            privacy). The id column is never published.
        max_contributions : int, optional
            The public bound ``k`` on each person's rows (with ``privacy_id``).
        privacy_unit : PrivacyUnit, optional
            The unit stated directly: ``PrivacyUnit.record()`` (the default) or
            ``PrivacyUnit.person(column, k)`` (same as ``privacy_id=column, max_contributions=k``).
            Any other unit, or a replace-one relation, is refused.

        Raises
        ------
        ParameterError
            Bad epsilon, schema without a target, malformed taxonomy; ``levels`` too large for
            the schedule at this epsilon or for the size of the release (the message gives the
            size and the limit); a unit the publisher cannot state.
        DomainError
            Missing target or column, unknown category, NaN or out-of-range number, a taxonomy
            whose leaves differ from the declared categories; a missing privacy-id column or id.
        BudgetExceededError
            The session cannot pay ``epsilon`` (nothing is published).
        """
        return self._run(data, schema=schema, epsilon=epsilon, rng=rng, session=session, exact=False,
                         privacy_unit=privacy_unit, privacy_id=privacy_id, max_contributions=max_contributions)

    def _budgets(self, budget: float, attrs: tuple[Attr, ...]) -> tuple[float, float, tuple[float, ...]]:
        """``(eps1, eps2, level budgets)`` from the record-level budget: the split :meth:`publish` spends.

        The level budgets are for the levels that can run on ``attrs`` (at most
        ``n_specializations(attrs)``). The audit cases ``decision.MAXGDDP.selection`` and
        ``decision.MAXGDDP.leaf_counts`` take their epsilons from here, so a change of the split
        is seen by them.
        """
        n_runnable = min(self.levels, n_specializations(attrs))
        eps1 = budget * self.split
        eps2 = budget - eps1
        if not (eps1 > 0.0 and eps2 > 0.0):  # an epsilon near the smallest float underflows to 0
            raise ParameterError(
                f"epsilon must be large enough to split into selection (split={self.split:g}) and leaf budgets "
                f"> 0, got a record-level budget of {budget:g}", param="epsilon"
            )
        return eps1, eps2, level_budgets(eps1, self.levels, self.schedule, self.fanout_ratio, count=n_runnable)

    def _run(self, data: Any, *, schema: Schema, epsilon: float, rng: RNGLike, exact: bool,
             session: Session | None = None, privacy_unit: Any = None, privacy_id: str | None = None,
             max_contributions: int | None = None) -> DecisionRelease:
        """The algorithm; ``exact=True`` is the non-private reference (noiseless TDS, tests only):
        its ledger records the leaks (``epsilon = inf``) and it is refused under a session."""
        eps = check_epsilon(epsilon)
        attrs = self.compile(schema)
        unit = resolve_unit(privacy_unit, privacy_id, max_contributions, schema)
        gen = as_generator(rng)
        key = contribution_key(gen) if unit.kind == "person" else None
        # validates the data (in Spark for a Spark DataFrame) and bounds each person's rows
        counts = open_counts(attrs, schema, data, unit=unit, key=key)
        k = len(schema.classes or ())
        # public checks, before any reservation or draw: a level that can run gets a usable
        # budget, and a run that specialises everything (levels >= what the schema allows) has a
        # known final size
        _, eps2, _ = self._budgets(unit.record_amount(eps), attrs)
        if self.levels >= n_specializations(attrs) and not exact:
            check_cells(n_cells_of([a.n_fine for a in attrs], k), leaf_epsilon=eps2, noise=self.noise,
                        max_rows=self.max_synthetic_rows,
                        when=f"levels={self.levels} specialises every attribute to its finest cut (the schema "
                             f"allows {n_specializations(attrs)} specialisations), of")
        with accounting(eps, method="maxgddp", session=session, data=describe_data(data), private=not exact,
                        unit=unit) as acc:
            # every mechanism spends the record-level budget (epsilon / k for a person of k rows)
            _, eps2, sched = self._budgets(acc.record_budget, attrs)
            cuts = [Cut.root(a) for a in attrs]
            history: list[Specialization] = []
            for i in range(self.levels):
                cands = candidates(cuts)
                if not cands:
                    log.info("MAXGDDP: nothing left to specialise after %d levels", i)
                    break
                with acc.step(f"level {i + 1} selection"):
                    j = int(self._select(cands, cuts, counts, sched[i], gen, exact=exact)[0])
                history.append(apply(cuts, cands[j]))
                if not exact:  # the cut only grows: stop as soon as the leaves cannot be released
                    check_cells(n_cells_of([len(c.starts) for c in cuts], k), leaf_epsilon=eps2, noise=self.noise,
                                max_rows=self.max_synthetic_rows, when=f"the cut after level {i + 1} has")
            if exact:
                acc.leak("selection", f"{len(history)} levels: exact argmax of the Max scores, no noise")
                acc.leak("leaf counts", "the true cell counts, no noise")
            with acc.step("leaf counts"):
                cells = self._leaves(cuts, counts, k, eps2, gen, exact=exact)
            return build_release(cuts=cuts, cells=cells, schema=schema, history=history, ledger=acc.seal(),
                                 epsilon=eps, method="maxgddp", private=not exact, params=self.params())

    def _select(self, cands: list[Candidate], cuts: list[Cut], counts: DecisionCounts, epsilon: float,
                gen: np.random.Generator, *, exact: bool = False, draws: int = 1) -> NDArray[np.int64]:
        """One level's selection exactly as :meth:`publish` runs it: ``draws`` independent picks.

        The Max scores of ``cands`` on the current ``cuts`` (:func:`scores_from_counts`, the
        publisher's ``score``), then :func:`privpub.core.report_noisy_max` at the level budget
        ``epsilon`` with sensitivity 1, monotone (a record moves every score by 0 or +1): ``Lap(1 /
        epsilon)`` per candidate, one charge per draw to the active accountant. ``exact`` (the
        non-private reference) is the plain argmax. ``publish`` calls it with ``draws=1`` and the
        level budget of :meth:`_budgets`; the audit case ``decision.MAXGDDP.selection`` calls it
        with many draws and the same budget, so the audited selection is the published one.
        """
        scores = scores_from_counts(cands, cuts, counts, self.score)
        if exact:
            return np.full(draws, int(np.argmax(scores)), dtype=np.int64)
        note = f"{len(cands)} candidates, Lap(1/eps_i), monotone Max scores"
        return np.array([report_noisy_max(scores, epsilon=epsilon, sensitivity=1.0, monotone=True, rng=gen, note=note)
                         for _ in range(draws)], dtype=np.int64)

    def _leaves(self, cuts: list[Cut], counts: DecisionCounts, n_classes: int, epsilon: float,
                gen: np.random.Generator, *, exact: bool = False, draws: int = 1
                ) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
        """The leaf step exactly as :meth:`publish` runs it: :func:`leaf_cells` on the final ``cuts``
        at the leaf budget ``epsilon`` (eps2 of :meth:`_budgets`) with the publisher's ``noise`` and
        ``max_synthetic_rows``. ``publish`` calls it with ``draws=1``; the audit case
        ``decision.MAXGDDP.leaf_counts`` calls it with many draws (``leaf_cells``'s ``draws``: one
        call, release ``i`` in the cell ids ``i * n_cells ..``) and the same leaf budget."""
        return leaf_cells(cuts, counts, n_classes, epsilon=epsilon, noise=self.noise, exact=exact,
                          max_rows=self.max_synthetic_rows, gen=gen, draws=draws)

    def params(self) -> dict[str, Any]:
        return {"levels": self.levels, "split": self.split, "schedule": self.schedule,
                "fanout_ratio": self.fanout_ratio, "score": self.score,
                "max_split_candidates": self.max_split_candidates, "noise": self.noise, "fanout": self.fanout}
