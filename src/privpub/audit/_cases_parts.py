"""Audit cases of the five parts' private steps, on tiny worst-case neighbouring inputs.

Each builder imports its part lazily; :func:`privpub.audit.audit_cases` skips a part whose
module (or one of the steps audited here) cannot be imported, and records why. Steps are
audited where they draw noise -- the parts' own noise functions, called the way ``publish``
calls them -- and, in the full tier, whole releases end to end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from privpub.audit._case import AuditCase
from privpub.audit._exact import exact_epsilon, output_probabilities

__all__ = ["PART_BUILDERS"]

Mech = Callable[..., Any]


# ---------------------------------------------------------------------------------------------
# histogram: HPHP's two noisy releases (structure noise on the counts, noise on group sums)
# ---------------------------------------------------------------------------------------------
def histogram_cases() -> list[AuditCase]:
    from privpub.histogram import HPHP, LaplaceHistogram

    h = np.array([0, 0, 3, 5])
    h_nb = np.array([0, 0, 3, 6])  # add one record to bin 3
    rel = "add/remove one record: histograms [0, 0, 3, 5] and [0, 0, 3, 6]"
    # groups {0, 1}, {2, 3}: a partition fixed by the structure step (public by the second step)
    fixed = (np.arange(4), np.array([0, 2, 4]))

    def structure(pub: HPHP, epsilon: float, factor: float = 1.0) -> Mech:
        """The structure step of ``pub.publish(..., epsilon)``: :meth:`HPHP._structure_noise` (the
        noisy counts the grouping is computed from) at eps1 of :meth:`HPHP._split`."""
        eps1 = pub._split(epsilon)[0]

        def mech(counts: Any, rng: np.random.Generator, n: int) -> Any:
            return pub._structure_noise(np.asarray(counts, dtype=np.int64), factor * eps1, rng, draws=n)
        return mech

    def group_sums(pub: HPHP, epsilon: float, factor: float = 1.0) -> Mech:
        """The publishing step of ``pub.publish(..., epsilon)``: :meth:`HPHP._group_sums` at eps2 of
        :meth:`HPHP._split`; the data is ``(counts, order, boundaries)``, the partition the same on
        both sides (fixed by the structure step)."""
        eps2 = pub._split(epsilon)[1]

        def mech(data: Any, rng: np.random.Generator, n: int) -> Any:
            counts, order, bounds = data
            return pub._group_sums(np.asarray(counts, dtype=np.int64), order, bounds, factor * eps2, rng, draws=n)
        return mech

    def whole(publisher: Any, eps: float) -> Mech:
        def mech(counts: Any, rng: np.random.Generator) -> Any:
            r = publisher.publish(counts, epsilon=eps, rng=rng)
            pad = np.full(counts.size + 1 - r.boundaries.size, -1)
            return np.concatenate([r.counts, r.order, r.boundaries, pad])
        return mech

    # HPHP(split=0.5) at epsilon 2: each of the two steps spends 1 (HPHP._split)
    hphp = HPHP(split=0.5)
    cases = []
    for noise in ("discrete", "laplace"):
        tag = "" if noise == "discrete" else "[laplace]"
        pub = HPHP(split=0.5, noise=noise)
        cases += [
            AuditCase(f"histogram.HPHP.structure{tag}", "histogram", structure(pub, 2.0), h, h_nb, 1.0,
                      20_000, rel + f"; HPHP(split=0.5, noise={noise!r}) at epsilon 2 spends eps1 = 1 here "
                      "(HPHP._split); its own structure noise (HPHP._structure_noise, as publish draws it)",
                      control=structure(pub, 2.0, 2.0), control_note="eps1 doubled (noise scale halved)",
                      batch=True),
            AuditCase(f"histogram.HPHP.group_sums{tag}", "histogram", group_sums(pub, 2.0), (h, *fixed),
                      (h_nb, *fixed), 1.0, 10_000,
                      rel + "; groups {0,1}, {2,3} fixed by the structure step; eps2 = 1 (HPHP._split); its own "
                      "publishing step (HPHP._group_sums, as publish runs it)",
                      control=group_sums(pub, 2.0, 2.0), control_note="eps2 doubled (noise scale halved)",
                      batch=True),
        ]
    # AHP's whole release is not audited end to end: its clustering averages the change away, so
    # even its epsilon-doubled control stays below the declared epsilon at any feasible number of
    # trials (a weak control). Its two noise steps draw through the module functions HPHP's steps
    # call (`_noisy`, `noise_vector`), but no case runs AHP's own steps (a gap, not a re-implementation).
    # the releases as a user gets them (fast tier): trials chosen so that the epsilon-doubled
    # control is flagged at the fast tier too
    publishers: tuple[tuple[str, Any, int], ...] = (
        ("HPHP", hphp, 4_000), ("HPHP[unattributed]", HPHP(variant="unattributed", split=0.5), 6_000),
        ("LaplaceHistogram", LaplaceHistogram(), 1_500))
    for name, publisher, trials in publishers:
        cases.append(AuditCase(
            f"histogram.{name}.publish", "histogram", whole(publisher, 2.0), h, h_nb, 2.0, trials,
            rel + "; whole release (counts, order, boundaries)", control=whole(publisher, 4.0),
            control_note="epsilon doubled"))
    return cases + dawa_cases() + person_histogram_cases()


def dawa_cases() -> list[AuditCase]:
    """DAWA (issues 26, 34): its stage-1 partition and its whole release, both computed by the
    publisher's own code. The partition case calls :meth:`DAWA._partitions`, the stage 1 that
    ``DAWA.publish`` runs (exact grid Laplace on the dyadic-bucket deviations, the dynamic
    programme), with the ``(eps1, eps2)`` of :meth:`DAWA._split`, which ``DAWA().publish(..., epsilon=2)`` spends: never a
    re-implementation of it, so a change of stage 1's noise in ``_dawa.py`` is seen here.
    Negative controls: the partition at 4 eps1 (a quarter of the noise, the sensitivity
    understated), and the release at twice the declared epsilon."""
    from privpub.histogram import DAWA

    h = np.array([0, 0, 3, 5])
    h_nb = np.array([0, 0, 3, 6])
    rel = "add/remove one record: histograms [0, 0, 3, 5] and [0, 0, 3, 6]"

    def partition(epsilon: float, eps1_factor: float = 1.0) -> Mech:
        pub = DAWA()
        eps1, eps2 = pub._split(epsilon)  # publish's own split

        def mech(counts: Any, rng: np.random.Generator, n: int) -> Any:
            parts = pub._partitions(np.asarray(counts, dtype=np.int64), eps1_factor * eps1, eps2, rng, draws=n)
            return np.array([np.concatenate([b, np.full(counts.size + 1 - b.size, -1)]) for b in parts])
        return mech

    def whole(eps: float) -> Mech:
        pub = DAWA()

        def mech(counts: Any, rng: np.random.Generator) -> Any:
            r = pub.publish(counts, epsilon=eps, rng=rng)
            pad = np.full(counts.size + 1 - r.boundaries.size, -1)
            return np.concatenate([r.counts, r.boundaries, pad])
        return mech

    # DAWA at epsilon 2: eps1 = 0.5 (penalty 1/eps2 = 2/3)
    return [
        AuditCase("histogram.DAWA.partition", "histogram", partition(2.0), h, h_nb, 0.5, 20_000,
                  rel + "; DAWA() at epsilon 2 spends 0.5 on the partition (dyadic buckets, sensitivity 2.5); "
                  "DAWA's own stage 1 (DAWA._partitions, as publish calls it)",
                  control=partition(2.0, 4.0), control_note="noise scale quartered (sensitivity understated)",
                  batch=True),
        AuditCase("histogram.DAWA.publish", "histogram", whole(2.0), h, h_nb, 2.0, 4_000,
                  rel + "; whole release (counts, bucket boundaries)", control=whole(4.0),
                  control_note="epsilon doubled"),
    ]


def person_histogram_cases() -> list[AuditCase]:
    """Person-level histograms (issue 25): a table of people vs the same table with one more person
    who holds 3k rows, all in one bin (the worst case: bounded to k, they move one count by k).

    ``counts_from_records(..., privacy_ids=..., max_contributions=k)`` bounds every person to ``k``
    rows and the publisher, given counts that carry ``PrivacyUnit.person(id, k)``, spends
    ``epsilon / k`` per row: the release must pass at ``epsilon``. The negative control publishes the
    same person-level claim on counts that were NOT bounded (the 3k rows all count): it is flagged.
    The bounding key is drawn once per batch of runs: the guarantee holds for every key (for this
    table the bounded counts do not even depend on it).
    """
    from privpub.core import PrivacyUnit
    from privpub.histogram import HPHP, LaplaceHistogram, UnitCounts, counts_from_records

    k = 2
    edges = np.arange(5)
    others = (np.array(["a", "b", "b", "c", "c", "d", "d"], dtype=object), np.array([2, 2, 2, 3, 3, 3, 3]))
    heavy = (np.r_[others[0], np.array(["x"] * (3 * k), dtype=object)], np.r_[others[1], [3] * (3 * k)])
    rel = (f"add/remove one person with all their rows: people with <= {k} rows (counts [0, 0, 3, 4]) vs the same "
           f"plus a person holding {3 * k} rows in bin 3 (beyond k = {k})")
    unit = PrivacyUnit.person("privacy_id", k)

    def counts(table: Any, rng: np.random.Generator, bounded: bool) -> Any:
        ids, values = table
        if bounded:
            return counts_from_records(values, bins=edges, privacy_ids=ids, max_contributions=k, rng=rng)
        return UnitCounts(counts_from_records(values, bins=edges), unit)  # the claim without the bound

    def laplace_release(eps: float, bounded: bool) -> Mech:
        def mech(table: Any, rng: np.random.Generator, n: int) -> Any:
            c = counts(table, rng, bounded)
            # one publish of n copies: the noise is independent per bin, so this is n independent releases
            out = LaplaceHistogram().publish(UnitCounts(np.tile(c, n), c.privacy_unit), epsilon=eps, rng=rng)
            return np.asarray(out.counts).reshape(n, c.size)
        return mech

    def hphp(eps: float, bounded: bool) -> Mech:
        pub = HPHP(split=0.5)

        def mech(table: Any, rng: np.random.Generator, n: int) -> Any:
            c = counts(table, rng, bounded)
            rows = []
            for _ in range(n):
                r = pub.publish(c, epsilon=eps, rng=rng)
                pad = np.full(c.size + 1 - r.boundaries.size, -1)
                rows.append(np.concatenate([r.counts, r.order, r.boundaries, pad]))
            return np.array(rows)
        return mech

    return [
        AuditCase("histogram.LaplaceHistogram.publish[person]", "histogram", laplace_release(2.0 * k, True), others,
                  heavy, 2.0 * k, 3_000, rel + f"; epsilon {2 * k} per person is {2.0:g} per row",
                  control=laplace_release(2.0 * k, False),
                  control_note=f"person-level claim without bounding ({3 * k} rows)", batch=True),
        AuditCase("histogram.HPHP.publish[person]", "histogram", hphp(0.5 * k, True), others, heavy, 0.5 * k, 1_000,
                  rel + f"; epsilon {k // 2} per person is 0.5 per row; whole release (counts, order, boundaries)",
                  control=hphp(0.5 * k, False),
                  control_note=f"person-level claim without bounding ({3 * k} rows)", batch=True),
    ]


# ---------------------------------------------------------------------------------------------
# stream: one Fenwick node, one Fenwick tree (RTP, RTP_MM), one BT block; person per step
# ---------------------------------------------------------------------------------------------
def stream_cases() -> list[AuditCase]:
    from privpub.stream import BT, RTP, RTPMM

    def nodes(cls: Any, eps: float, height: int, noise: str = "discrete") -> Mech:
        """Node values of ``n`` independent trees: the pattern repeated, one tree per repeat
        (trees cover disjoint items and get independent noise)."""
        def mech(items: Any, rng: np.random.Generator, n: int) -> Any:
            t = len(items)
            pub = cls(window=n * t, epsilon=eps, rng=rng, height=height, noise=noise)
            pub.extend(np.tile(items, n))
            return pub.node_values(np.arange(1, n * t + 1)).reshape(n, t)
        return mech

    def bt_block(eps: float) -> Mech:
        dyadic = [(1, 1), (2, 2), (3, 3), (4, 4), (1, 2), (3, 4), (1, 4)]

        def mech(items: Any, rng: np.random.Generator, n: int) -> Any:
            pub = BT(window=4 * n, epsilon=eps, rng=rng, height=3)
            pub.extend(np.tile(items, n))
            queries = np.array([(4 * i + lo, 4 * i + hi) for i in range(n) for lo, hi in dyadic])
            return pub.answer(queries).reshape(n, len(dyadic))
        return mech

    def whole(eps: float) -> Mech:
        """The release as a user gets it: every prefix answer of a 4-item stream (height 3)."""
        def mech(items: Any, rng: np.random.Generator) -> Any:
            pub = RTP(window=4, epsilon=eps, rng=rng, height=3)
            pub.extend(items)
            return np.array([pub.query(1, r) for r in range(1, 5)])
        return mech

    def person_steps(eps: float, k: int, bounded: bool = True) -> Mech:
        """Person per step: ``n`` steps, each made of the events ``ids``, through a height-1 RTP
        declared ``person_per_step("user", k)`` (each step one node). Bounded: the events go
        through ``extend_events`` (at most ``k`` per person and step); unbounded (the negative
        control): the step's raw event count is given as the item."""
        from privpub import PrivacyUnit

        unit = PrivacyUnit.person_per_step("user", k)

        def mech(ids: Any, rng: np.random.Generator, n: int) -> Any:
            pub = RTP(window=n, epsilon=eps, rng=rng, height=1, privacy_unit=unit)
            m = len(ids)
            if bounded:
                pub.extend_events(np.repeat(np.arange(n), m), np.tile(np.asarray(ids, dtype=object), n), n_steps=n)
            else:
                pub.extend(np.full(n, m, dtype=np.int64))
            return pub.node_values(np.arange(1, n + 1)).reshape(n, 1)
        return mech

    one = "event level: streams differing in one item by 1"
    tree = [1, 0, 0, 0]
    zero = [0, 0, 0, 0]
    k = 2
    with_a = ["b", "c", "c"] + ["a"] * (3 * k)  # person a has 3k events in the step
    without_a = ["b", "c", "c"]
    return [
        AuditCase("stream.RTP.person_per_step", "stream", person_steps(1.0, k), with_a, without_a, 1.0, 20_000,
                  f"person per step (k={k}): one step with and without person a's {3 * k} events (beyond k; "
                  "the others' events are the same); height 1, each step one node",
                  control=person_steps(1.0, k, bounded=False),
                  control_note=f"no bounding: a's {3 * k} events all counted (3k x the per-event sensitivity)",
                  batch=True),
        AuditCase("stream.RTP.publish", "stream", whole(1.0), tree, zero, 1.0, 3_000,
                  one + "; whole release: the four prefix answers of RTP (height 3)",
                  control=whole(2.0), control_note="epsilon doubled"),
        AuditCase("stream.RTP.node", "stream", nodes(RTP, 1.0, 1), [1], [0], 1.0, 20_000,
                  one + "; height 1: each item is one Fenwick node with Lap(1/epsilon)",
                  control=nodes(RTP, 2.0, 1), control_note="noise scale halved", batch=True),
        AuditCase("stream.RTP.tree", "stream", nodes(RTP, 1.0, 3), tree, zero, 1.0, 20_000,
                  one + "; height 3, item 1 lies in 3 nodes (1, 2, 4) with Lap(3/epsilon) each",
                  control=nodes(RTP, 2.0, 3), control_note="noise scale halved", batch=True),
        AuditCase("stream.RTP.tree[laplace]", "stream", nodes(RTP, 1.0, 3, "laplace"), tree, zero, 1.0, 20_000,
                  one + "; as stream.RTP.tree with continuous Laplace",
                  control=nodes(RTP, 2.0, 3, "laplace"), control_note="noise scale halved", batch=True),
        AuditCase("stream.RTPMM.tree", "stream", nodes(RTPMM, 1.0, 3), tree, zero, 1.0, 20_000,
                  one + "; height 3 with the matrix-mechanism level budgets",
                  control=nodes(RTPMM, 2.0, 3), control_note="epsilon doubled", batch=True),
        AuditCase("stream.BT.block", "stream", bt_block(1.0), tree, zero, 1.0, 10_000,
                  one + "; one block of 4 items, its 7 dyadic nodes read through query()",
                  control=bt_block(2.0), control_note="noise scale halved", batch=True),
    ]


# ---------------------------------------------------------------------------------------------
# spatial: KDG-HT's client report (one OUE report of a cell), and the budget-split mode
# ---------------------------------------------------------------------------------------------
def spatial_cases() -> list[AuditCase]:
    from privpub.core import PrivacyUnit, accounting
    from privpub.ldp import OUE
    from privpub.spatial import KDGHT
    from privpub.spatial.protocol import grid_edges, interval_index, user_groups

    edges = grid_edges(0.0, 1.0, 4)

    def kdg_reports(pub: KDGHT, epsilon: float) -> Mech:
        """Phase B of ``pub.publish(..., epsilon, mode="per_user")``: :meth:`KDGHT._kdg_round` (the
        axis budget of :meth:`KDGHT._axis_epsilon`, the OUE reports) for ``n`` sampled users at one
        point, 4 intervals per axis, inside the accounting ``publish`` opens; the drawn reports are
        kept by the collection. ``kdg_split="users"``: the users report x (the data is x); "budget":
        each user reports x and y (the data is the point), a row is both reports."""
        both = pub.kdg_split == "budget"

        def mech(point: Any, rng: np.random.Generator, n: int) -> Any:
            x, y = (float(point[0]), float(point[1])) if both else (float(point), 0.0)
            ix = interval_index(edges, np.full(n, x))
            iy = interval_index(edges, np.full(n, y)) if both else np.zeros(0, dtype=np.int64)
            with accounting(epsilon, method="kdght", unit=PrivacyUnit.participant()) as acc:
                with user_groups(acc, "per_user", rng) as coll:
                    coll.kept = []
                    pub._kdg_round(coll, ix, iy, 4, 4, epsilon)
                acc.seal()
            assert coll.kept is not None
            rows = np.zeros((n, 8 if both else 4), dtype=bool)
            for _, k, first, rep in coll.kept:
                bits = np.unpackbits(rep, axis=1, bitorder="little")[:, :4].astype(bool)
                rows[first:first + bits.shape[0], 4 * k:4 * k + 4] = bits
            return rows
        return mech

    def exact(pub: KDGHT, eps: float) -> Callable[[], float]:
        """The exact epsilon of one axis report at the publisher's axis budget."""
        return lambda: exact_epsilon(output_probabilities(OUE(domain_size=4), pub._axis_epsilon(eps)))

    def whole(eps: float) -> Mech:
        """The release as a user gets it: UG on a 2 x 2 grid, its four cell estimates."""
        from privpub.spatial import UniformGrid

        def mech(points: Any, rng: np.random.Generator) -> Any:
            rel = UniformGrid(g=2, postprocess="none").publish(np.asarray(points, dtype=np.float64),
                                                                bounds=(0.0, 0.0, 1.0, 1.0), epsilon=eps, rng=rng)
            assert rel.ledger.epsilon == eps  # the charged ledger is what the release states
            return np.round(np.asarray(rel.values, dtype=np.float64), 9)
        return mech

    return [
        AuditCase("spatial.UG.publish", "spatial", whole(1.0), [(0.1, 0.1), (0.1, 0.1)], [(0.9, 0.9), (0.1, 0.1)],
                  1.0, 3_000, "replace one user's location (2 users): it moves to the opposite cell of a 2 x 2 "
                  "grid; whole release: the four cell estimates", control=whole(2.0), control_note="epsilon doubled"),
        AuditCase("spatial.KDGHT.client_report", "spatial", kdg_reports(KDGHT(), 1.0), 0.1, 0.9, 1.0, 20_000,
                  "replace one user's location: x = 0.1 and 0.9 fall in different intervals of 4; KDGHT's own "
                  "phase-B round (KDGHT._kdg_round at KDGHT._axis_epsilon, per-user reports as publish draws them)",
                  control=kdg_reports(KDGHT(), 2.0), control_note="publish at 2 epsilon", batch=True,
                  exact=exact(KDGHT(), 1.0), exact_control=exact(KDGHT(), 2.0)),
        AuditCase("spatial.KDGHT.client_report[budget]", "spatial", kdg_reports(KDGHT(kdg_split="budget"), 1.0),
                  (0.1, 0.1), (0.9, 0.9), 1.0, 20_000,
                  "replace one user's location; both axes change interval; KDGHT(kdg_split='budget')'s own phase-B "
                  "round: two reports at KDGHT._axis_epsilon = epsilon/2",
                  control=kdg_reports(KDGHT(kdg_split="budget"), 2.0),
                  control_note="publish at 2 epsilon (each axis report at the full epsilon)", batch=True),
    ]


# ---------------------------------------------------------------------------------------------
# decision: MAXGDDP's report-noisy-max over Max scores, the leaf counts, the whole releases
# ---------------------------------------------------------------------------------------------
def decision_cases() -> list[AuditCase]:
    import pandas as pd

    from privpub.core import CategoricalAttribute, NumericAttribute, Schema
    from privpub.decision import MAXGDDP, DiffGen
    from privpub.decision.model import Cut, candidates, encode_frame, open_counts

    schema = Schema([CategoricalAttribute("a", ["x", "y"]), CategoricalAttribute("b", ["u", "v"]),
                     CategoricalAttribute("c", ["r", "s"]), NumericAttribute("n", 0, 7)],
                    class_name="cls", classes=["p", "q"])
    # found by search: 9 candidates tied at Max score 2; the added record raises exactly one of them
    added = pd.DataFrame({"a": ["x"], "b": ["u"], "c": ["r"], "n": [1], "cls": ["p"]})
    table = pd.DataFrame({"a": ["x", "x"], "b": ["u", "u"], "c": ["r", "r"], "n": [0, 0], "cls": ["q", "q"]})
    table_nb = pd.concat([table, added], ignore_index=True)
    pub = MAXGDDP(levels=1)

    def first_level(publisher: MAXGDDP, frame: pd.DataFrame, sch: Schema = schema) -> tuple[Any, list[Cut], Any]:
        """What ``publish`` holds before its first draw: the compiled attributes, the root cuts and
        the counts backend (``open_counts``, as ``publish`` opens it)."""
        attrs = publisher.compile(sch)
        return attrs, [Cut.root(a) for a in attrs], open_counts(attrs, sch, frame)

    def selection(publisher: MAXGDDP, epsilon: float, factor: float = 1.0) -> Mech:
        """Level 1 of ``publisher.publish(..., epsilon)``: :meth:`MAXGDDP._select` (the scores and
        the report-noisy-max ``publish`` runs) at the level-1 budget of :meth:`MAXGDDP._budgets`."""
        def mech(frame: pd.DataFrame, rng: np.random.Generator, n: int) -> Any:
            attrs, cuts, counts = first_level(publisher, frame)
            eps_level = publisher._budgets(epsilon, attrs)[2][0]
            return publisher._select(candidates(cuts), cuts, counts, factor * eps_level, rng, draws=n)
        return mech

    # one attribute of one category: nothing to specialise, so publish(levels=1) is its leaf step
    # alone on the root cut (1 partition x 2 classes)
    leaf_schema = Schema([CategoricalAttribute("a", ["x"])], class_name="cls", classes=["p", "q"])
    leaf_table = pd.DataFrame({"a": ["x", "x"], "cls": ["q", "q"]})
    leaf_table_nb = pd.concat([leaf_table, pd.DataFrame({"a": ["x"], "cls": ["p"]})], ignore_index=True)

    def leaves(publisher: MAXGDDP, epsilon: float, factor: float = 1.0) -> Mech:
        """The leaf step of ``publisher.publish(..., epsilon)``: :meth:`MAXGDDP._leaves` at eps2 of
        :meth:`MAXGDDP._budgets` on the root cut of ``leaf_schema`` (cell (root, p) empty vs 1);
        each row is one release, the released count per cell (0 if absent)."""
        def mech(frame: pd.DataFrame, rng: np.random.Generator, n: int) -> Any:
            attrs, cuts, counts = first_level(publisher, frame, leaf_schema)
            eps2 = publisher._budgets(epsilon, attrs)[1]
            ids, cnt, n_cells = publisher._leaves(cuts, counts, 2, factor * eps2, rng, draws=n)
            out = np.zeros(n * n_cells)
            out[ids] = cnt
            return out.reshape(n, n_cells)
        return mech

    def whole(publisher: Any, sch: Schema, record: pd.DataFrame, eps: float, cap: int = 3) -> Mech:
        """The release as a user gets it, reduced to a public outcome: the history and the released
        count of the cell that holds ``record`` (0 when absent; at most ``cap``). Extra keywords
        of the mechanism go to ``publish``."""
        attrs = publisher.compile(sch)
        fine, y = encode_frame(attrs, sch, record, with_class=True)  # public codes of the record
        assert y is not None
        digits = [*fine[0].tolist(), int(y[0])]

        def mech(frame: pd.DataFrame, rng: np.random.Generator, **kw: Any) -> Any:
            r = publisher.publish(frame, schema=sch, epsilon=eps, rng=rng, **kw)
            cell = 0
            for j, size in enumerate(r.radix):
                d = int(r.final_cuts[j].index(np.array([digits[j]]))[0]) if j < len(attrs) else digits[j]
                cell = cell * size + d
            hit = np.flatnonzero(r.cell_ids == cell)
            return (" | ".join(map(str, r.history)), int(min(r.counts[hit[0]], cap)) if hit.size else 0)
        return mech

    rel = "add/remove one record"
    cases = [
        AuditCase("decision.MAXGDDP.selection", "decision", selection(pub, 2.0), table, table_nb, 1.0, 10_000,
                  rel + "; MAXGDDP(levels=1) at epsilon 2 spends 1 on level 1 (MAXGDDP._budgets); its own "
                  "selection (MAXGDDP._select: Max scores, report-noisy-max as publish runs it); 9 candidates, "
                  "Max scores all 2 -> one of them 3",
                  control=selection(pub, 2.0, 2.0), control_note="level budget doubled (noise scale halved)",
                  batch=True),
    ]
    for noise in ("discrete", "laplace"):
        tag = "" if noise == "discrete" else "[laplace]"
        leaf_pub = MAXGDDP(levels=1, noise=noise)
        cases.append(AuditCase(
            f"decision.MAXGDDP.leaf_counts{tag}", "decision", leaves(leaf_pub, 2.0), leaf_table, leaf_table_nb, 1.0,
            10_000, rel + f"; MAXGDDP(levels=1, noise={noise!r}) at epsilon 2 spends eps2 = 1 on the leaves "
            "(MAXGDDP._budgets); its own leaf step (MAXGDDP._leaves), a one-category attribute (nothing to "
            "specialise): cell (root, p) empty vs "
            "count 1 (released only when the noisy count >= 1)",
            control=leaves(leaf_pub, 2.0, 2.0), control_note="leaf budget doubled (noise scale halved)",
            batch=True))
    # whole releases (fast tier; trials chosen so that the epsilon-doubled control is flagged):
    # MAXGDDP(levels=1) at epsilon 2 spends 1 on the 9 tied candidates and 1 on the leaves
    cases.append(AuditCase(
        "decision.MAXGDDP.publish", "decision", whole(pub, schema, added, 2.0), table, table_nb, 2.0, 800,
        rel + "; whole release (history, cell of the added record), 9 tied candidates then the leaves",
        control=whole(pub, schema, added, 4.0), control_note="epsilon doubled"))
    # DiffGen(levels=1, reuse_unspent=True), three binary attributes: selection eps/4, leaves 3 eps/4
    em_schema = Schema([CategoricalAttribute(a, ["x", "y"]) for a in "abc"], class_name="cls", classes=["p", "q"])
    em_added = pd.DataFrame({"a": ["x"], "b": ["x"], "c": ["y"], "cls": ["p"]})
    em_table = pd.DataFrame({"a": ["x", "x"], "b": ["x", "x"], "c": ["x", "x"], "cls": ["q", "q"]})
    diffgen = DiffGen(levels=1, reuse_unspent=True)
    cases.append(AuditCase(
        "decision.DiffGen.publish", "decision", whole(diffgen, em_schema, em_added, 1.0), em_table,
        pd.concat([em_table, em_added], ignore_index=True), 1.0, 1_200,
        rel + "; whole release (history, cell of the added record), reuse_unspent: leaves get 3/4",
        control=whole(diffgen, em_schema, em_added, 2.0), control_note="epsilon doubled"))
    cases += person_decision_cases(whole, [(pub, schema, table, added, 2.0, 800),
                                           (diffgen, em_schema, em_table, em_added, 1.0, 800)])
    return cases


def person_decision_cases(whole: Callable[..., Mech], setups: list[tuple[Any, ...]]) -> list[AuditCase]:
    """Person-level releases (``privacy_id="user", max_contributions=k``): neighbours differ by one
    person, all of whose rows equal the worst-case record (every row pushes the same score and
    cell). A person with ``k`` rows and one with ``3k`` rows (bounded to ``k``) pass at the
    declared epsilon; the controls are the same release at twice the epsilon and, for the ``3k``
    person, the release without bounding (record-level at ``epsilon / k`` over every row: what
    group privacy would claim if the rows were not truncated), which must be flagged."""
    import pandas as pd

    k = 2
    out: list[AuditCase] = []
    for publisher, sch, table, record, eps, trials in setups:
        base = table.assign(user=[f"o{i}" for i in range(len(table))])
        name = type(publisher).__name__

        def person(eps_: float, publisher: Any = publisher, sch: Any = sch, record: Any = record) -> Mech:
            inner = whole(publisher, sch, record, eps_, cap=3 * k + 1)

            def mech(frame: pd.DataFrame, rng: np.random.Generator) -> Any:
                return inner(frame, rng, privacy_id="user", max_contributions=k)
            return mech

        def unbounded(eps_: float, publisher: Any = publisher, sch: Any = sch, record: Any = record) -> Mech:
            inner = whole(publisher, sch, record, eps_ / k, cap=3 * k + 1)

            def mech(frame: pd.DataFrame, rng: np.random.Generator) -> Any:
                return inner(frame.drop(columns="user"), rng)
            return mech

        for rows in (k, 3 * k):
            neighbour = pd.concat([base, pd.concat([record] * rows, ignore_index=True).assign(user="p")],
                                  ignore_index=True)
            rel = (f"add/remove one person (privacy_id='user', max_contributions={k}) with {rows} rows, all the "
                   f"worst-case record; whole release")
            control, note = ((unbounded(eps), f"no bounding: record-level at epsilon/{k} over all {rows} rows")
                             if rows > k else (person(2 * eps), "epsilon doubled"))
            # the fast tier audits the person beyond k (bounded to the k-row person); the full tier both
            out.append(AuditCase(f"decision.{name}.publish[person k={k}, {rows} rows]", "decision", person(eps),
                                 base, neighbour, eps, trials, rel, control=control, control_note=note,
                                 full_only=rows <= k))
    return out


# ---------------------------------------------------------------------------------------------
# ldp_synth: the LoPub client report (RAPPOR bits of every attribute)
# ---------------------------------------------------------------------------------------------
def ldp_synth_cases() -> list[AuditCase]:
    import pandas as pd

    from privpub.core import CategoricalAttribute, Schema
    from privpub.ldp import SUE
    from privpub.ldp_synth import LDPBayesSynthesizer

    schema = Schema([CategoricalAttribute("a", ["x", "y"]), CategoricalAttribute("b", ["u", "v", "w"])])
    sizes = schema.sizes
    pub = LDPBayesSynthesizer(degree=1)

    def report(eps_total: float) -> Mech:
        """The local-perturbation step of ``pub.publish(..., epsilon=eps_total)``:
        :meth:`LDPBayesSynthesizer._client_reports` at the flip probability of
        :meth:`LDPBayesSynthesizer._flip_prob`, on ``n`` copies of one user's record."""
        f = pub._flip_prob(eps_total, None, len(schema))[0]

        def mech(record: pd.DataFrame, rng: np.random.Generator, n: int) -> Any:
            frame = record.iloc[np.zeros(n, dtype=np.int64)].reset_index(drop=True)
            return pub._client_reports(frame, schema, f, rng).bits
        return mech

    def exact(eps_total: float) -> Callable[[], float]:
        def compute() -> float:
            f = pub._flip_prob(eps_total, None, len(schema))[0]
            blocks = [output_probabilities(SUE(domain_size=s, f=f), None) for s in sizes]
            joint = np.kron(blocks[0], blocks[1])  # rows: records (a, b); columns: bit vectors
            return exact_epsilon(joint)
        return compute

    def whole(eps_total: float) -> Mech:
        """The release as a user gets it (network and conditional tables) for a one-user table."""
        def mech(frame: pd.DataFrame, rng: np.random.Generator) -> Any:
            r = pub.publish(frame, schema=schema, epsilon=eps_total, rng=rng)
            return np.round(np.concatenate([t.ravel() for t in r.tables]), 9)
        return mech

    one_user = "replace one user's whole record: (x, u) and (y, w) differ in both attributes (sizes 2 and 3)"
    return [
        AuditCase(
            "ldp_synth.client_report", "ldp_synth", report(2.0), pd.DataFrame({"a": ["x"], "b": ["u"]}),
            pd.DataFrame({"a": ["y"], "b": ["w"]}), 2.0, 20_000,
            one_user + "; LDPBayesSynthesizer's own client step (_client_reports at _flip_prob's f, as publish "
            "perturbs every user)",
            control=report(4.0), control_note="epsilon doubled", batch=True, exact=exact(2.0),
            exact_control=exact(4.0)),
        AuditCase(
            "ldp_synth.LDPBayesSynthesizer.publish", "ldp_synth", whole(2.0),
            pd.DataFrame({"a": ["x"], "b": ["u"]}), pd.DataFrame({"a": ["y"], "b": ["w"]}), 2.0, 3_000,
            one_user + "; whole release (tables of a degree-1 network) of a one-user table",
            control=whole(4.0), control_note="epsilon doubled"),
    ]


PART_BUILDERS: dict[str, Callable[[], list[AuditCase]]] = {
    "histogram": histogram_cases,
    "stream": stream_cases,
    "spatial": spatial_cases,
    "decision": decision_cases,
    "ldp_synth": ldp_synth_cases,
}
