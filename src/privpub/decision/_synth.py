"""Marginal-based synthetic data baselines for decision-data release: AIM and MST (rho-zCDP).

Both measure noisy marginals of the table (discrete Gaussian noise, :func:`privpub.core.discrete_gaussian`)
and choose which ones by the exponential mechanism (:func:`privpub.core.exponential_mechanism_zcdp`);
every draw charges the release's zCDP accountant. The estimator -- a graphical model fit to the
noisy marginals by mirror descent -- is private-pgm's (``mbi``, ``privpub[baselines]``), and is
post-processing; the synthetic table is sampled from it with the release's ``rng``.

References: McKenna, Mullins, Sheldon, Miklau. AIM: an adaptive and iterative mechanism for
differentially private synthetic data. PVLDB 15(11), 2022, arXiv:2201.12677. McKenna, Miklau,
Sheldon. Winning the NIST contest: a scalable and general approach to differentially private
synthetic data. J. Privacy and Confidentiality 11(3), 2021 (MST).
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from privpub.core import (
    ZCDP,
    RNGLike,
    Schema,
    Session,
    accounting,
    as_generator,
    check_epsilon,
    check_positive_int,
    contribution_key,
    describe_data,
    discrete_gaussian,
    exponential_mechanism_zcdp,
    zcdp_to_approx_dp,
)
from privpub.decision._aggregate import open_counts
from privpub.decision._model import Attr, Cut, compile_schema, n_cells_of
from privpub.decision._release import DecisionRelease, TablePublisher
from privpub.decision._unit import resolve_unit
from privpub.errors import ParameterError, PrivpubError

__all__ = ["AIM", "MST", "SyntheticRelease"]

log = logging.getLogger(__name__)

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
Clique = tuple[int, ...]


def _mbi() -> Any:
    try:
        import mbi
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise PrivpubError("AIM and MST need private-pgm's estimator: pip install 'privpub[baselines]'") from exc
    return mbi


@dataclass(frozen=True, kw_only=True)
class SyntheticRelease(DecisionRelease):
    """The release of :class:`AIM` or :class:`MST`: a synthetic table over the finest public cut.

    A :class:`~privpub.decision.DecisionRelease` whose cut is every attribute's finest public
    grid (numbers: ``bins`` equal-width intervals, or the leaves of a numeric taxonomy;
    categories: themselves) and whose cells count the synthetic records, so ``encode_cells``,
    ``encode`` and ``synthetic`` work as for MAXGDDP. The release is **rho-zCDP**: ``ledger``
    accounts in zCDP (``ledger.measure == "zcdp"``) and ``epsilon`` holds that rho (the
    :class:`~privpub.core.Release` field is the budget of the ledger), also :attr:`rho`.
    :meth:`approx_dp` converts it to ``(epsilon, delta)``-DP; a rho is never an epsilon.

    Attributes
    ----------
    measured : tuple of tuple of str
        The marginals measured, in order (public: chosen by the exponential mechanism).
    """

    measured: tuple[tuple[str, ...], ...] = ()

    @property
    def rho(self) -> float:
        """The zCDP parameter of the release (for its privacy unit)."""
        return float(self.epsilon)

    def approx_dp(self, delta: float) -> float:
        """The epsilon of ``(epsilon, delta)``-DP the release satisfies ([BS16] Prop. 1.3).

        ``rho + 2 sqrt(rho ln(1/delta))`` (:func:`privpub.core.zcdp_to_approx_dp`).
        """
        return zcdp_to_approx_dp(self.rho, delta)


def _finest_cuts(attrs: tuple[Attr, ...]) -> list[Cut]:
    cuts = []
    for a in attrs:
        if a.hierarchical:
            leaves = sorted((v for v, kids in enumerate(a.node_children) if not kids), key=lambda v: a.node_lo[v])
            cuts.append(Cut(a, [a.node_lo[v] for v in leaves], list(leaves)))
        else:
            cuts.append(Cut(a, list(range(a.n_fine)), None))
    return cuts


class _Table:
    """The (bounded) records as distinct rows of codes with multiplicities; marginals by bincount."""

    def __init__(self, codes: I64, weights: I64, shape: tuple[int, ...]) -> None:
        self.codes = codes
        self.weights = weights
        self.shape = shape

    def marginal(self, cl: Clique) -> I64:
        idx = np.ravel_multi_index(tuple(self.codes[:, j] for j in cl), tuple(self.shape[j] for j in cl))
        size = math.prod(self.shape[j] for j in cl)
        out: I64 = np.bincount(idx, weights=self.weights, minlength=size).astype(np.int64)
        return out


def _decode(ids: I64, shape: tuple[int, ...]) -> I64:
    return np.stack(np.unravel_index(ids, shape), axis=1).astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class _MarginalPublisher(TablePublisher):
    """Shared parts of AIM and MST: the public domain, the data, the estimator and the release."""

    bins: int = 16
    taxonomies: Any = field(default=None, compare=False)
    fanout: int = 4
    max_iters: int = 1000
    max_synthetic_rows: float = 5e7

    #: the privacy measure of ``publish`` (``rho=``, not ``epsilon=``)
    measures: ClassVar[tuple[str, ...]] = (ZCDP,)
    method: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for name in ("bins", "max_iters"):
            v = getattr(self, name)
            if isinstance(v, bool):
                raise ParameterError(f"{name} must be an integer >= 1, got {v!r}", param=name)
            check_positive_int(v, name, minimum=2 if name == "bins" else 1)
        check_positive_int(self.fanout, "fanout", minimum=2)
        if not float(self.max_synthetic_rows) > 0:
            raise ParameterError(f"max_synthetic_rows must be > 0, got {self.max_synthetic_rows!r}",
                                 param="max_synthetic_rows")

    def compile(self, schema: Schema) -> tuple[Attr, ...]:
        return compile_schema(schema, self.taxonomies, fanout=self.fanout, grid_size=self.bins - 1, tick_mode=False)

    def params(self) -> dict[str, Any]:
        return {"bins": self.bins, "fanout": self.fanout, "max_iters": self.max_iters}

    # -- the run -------------------------------------------------------------------------------
    def publish(  # type: ignore[override]
        self, data: Any, *, schema: Schema, rho: float, rng: RNGLike = None, session: Session | None = None,
        privacy_id: str | None = None, max_contributions: int | None = None, privacy_unit: Any = None,
    ) -> SyntheticRelease:
        """Release a synthetic version of ``data`` under ``rho``-zCDP.

        Parameters
        ----------
        data : pandas.DataFrame or pyspark.sql.DataFrame
            The table: the schema's columns, the target and (person level) the privacy-id column.
        schema : Schema
            The public domains and the class.
        rho : float
            The zCDP budget for the privacy unit (one record, or one person). To compare with an
            ``epsilon``-DP publisher, ``rho = epsilon^2 / 2`` is what epsilon-DP implies
            (:func:`privpub.core.pure_dp_to_zcdp`): a weaker guarantee than epsilon-DP.
        rng : seed or Generator
            All randomness (bounding key, noise, selections, sampling of the synthetic table).
        session : Session, optional
            A zCDP session; ``rho`` is reserved before anything is drawn.
        privacy_id, max_contributions, privacy_unit
            The person-level unit as for :class:`~privpub.decision.MAXGDDP`: each person's rows
            are bounded to ``k`` and the mechanisms spend ``rho / k^2`` (group privacy under zCDP).

        Raises
        ------
        ParameterError, DomainError, BudgetExceededError
            As for :class:`~privpub.decision.MAXGDDP`, all before anything is drawn.
        """
        r = check_epsilon(rho, "rho")
        attrs = self.compile(schema)
        unit = resolve_unit(privacy_unit, privacy_id, max_contributions, schema)
        n_classes = len(schema.classes or ())
        shape = (*(a.n_fine for a in attrs), n_classes)
        if math.prod(shape) >= 1 << 62:
            raise ParameterError(f"the finest cut has {math.prod(shape):.3g} cells (>= 2**62); use fewer bins",
                                 param="bins")
        self._check_params(len(shape))
        mbi = _mbi()
        gen = as_generator(rng)
        key = contribution_key(gen) if unit.kind == "person" else None
        counts = open_counts(attrs, schema, data, unit=unit, key=key)
        cuts = _finest_cuts(attrs)
        ids, mult = counts.cell_counts(cuts)
        table = _Table(_decode(ids, shape), mult, shape)
        names = [*(a.name for a in attrs), str(schema.class_name)]
        domain = mbi.Domain(names, shape)
        with accounting(r, method=self.method, session=session, data=describe_data(data), measure=ZCDP,
                        unit=unit) as acc:
            model, measured = self._run(table, domain, acc.record_budget, gen, mbi)
            synth = _sample(model, domain, gen, self.max_synthetic_rows, mbi)
            cell_ids = np.ravel_multi_index(tuple(synth.T), shape).astype(np.int64) if len(synth) else \
                np.zeros(0, dtype=np.int64)
            out_ids, out_counts = np.unique(cell_ids, return_counts=True)
            return SyntheticRelease(
                ledger=acc.seal(), epsilon=r, method=self.method, private=True, params=self.params(), schema=schema,
                cuts={c.attr.name: tuple(c.labels()) for c in cuts}, history=(), cell_ids=out_ids.astype(np.int64),
                counts=out_counts.astype(np.int64), n_cells=n_cells_of([a.n_fine for a in attrs], n_classes),
                final_cuts=tuple(c.copy() for c in cuts),
                measured=tuple(tuple(names[j] for j in cl) for cl in measured))

    def _check_params(self, d: int) -> None:
        """Public checks on the parameters against the number of columns ``d`` (class included)."""

    def _run(self, table: _Table, domain: Any, rho: float, gen: np.random.Generator,
             mbi: Any) -> tuple[Any, list[Clique]]:
        raise NotImplementedError

    def _measure(self, table: _Table, cl: Clique, rho: float, gen: np.random.Generator, mbi: Any,
                 names: list[str], what: str) -> Any:
        """One marginal with discrete Gaussian noise (L2 sensitivity 1: one record moves one cell by 1)."""
        x = table.marginal(cl)
        y = np.asarray(discrete_gaussian(x, rho=rho, sensitivity=1.0, rng=gen,
                                         note=f"{what} {'x'.join(names[j] for j in cl)} ({x.size} cells), "
                                              "L2 sensitivity 1"), dtype=np.float64)
        return mbi.LinearMeasurement(y, tuple(names[j] for j in cl), stddev=math.sqrt(1.0 / (2.0 * rho)))

    def _fit(self, domain: Any, measurements: list[Any], mbi: Any, potentials: Any = None) -> Any:
        return mbi.estimation.mirror_descent(domain, measurements, iters=self.max_iters, potentials=potentials)


def _sample(model: Any, domain: Any, gen: np.random.Generator, max_rows: float, mbi: Any) -> I64:
    """Records drawn from the fitted graphical model with ``gen`` (post-processing).

    Ancestral sampling along the junction tree's elimination order (as private-pgm's
    ``synthetic_data(method="sample")``, but vectorised and driven by the release's generator);
    the number of rows is the model's total, itself estimated from the noisy marginals.
    """
    names = list(domain.attrs)
    total = max(1, round(float(model.total)))
    if total > max_rows:
        raise ParameterError(f"the model's estimated total {total} exceeds max_synthetic_rows={max_rows:g}",
                             param="max_synthetic_rows")
    cliques = [set(cl) for cl in model.cliques]
    _, order = mbi.junction_tree.make_junction_tree(domain, cliques)
    out = np.zeros((total, len(names)), dtype=np.int64)
    used: list[str] = []
    for col in order[::-1]:
        related = set().union(*[cl for cl in cliques if col in cl]) if cliques else set()
        parents = [c for c in used if c in related]
        marg = np.asarray(model.project((*parents, col)).datavector(flatten=False), dtype=np.float64)
        marg = np.clip(marg, 0.0, None).reshape(-1, domain.size(col))
        if parents:
            pidx = np.ravel_multi_index(tuple(out[:, names.index(p)] for p in parents),
                                        tuple(domain.size(p) for p in parents))
        else:
            pidx = np.zeros(total, dtype=np.int64)
        rows = marg.sum(axis=1, keepdims=True)
        cond = np.where(rows > 0, marg / np.where(rows > 0, rows, 1.0), 1.0 / marg.shape[1])
        cum = np.cumsum(cond, axis=1)
        u = gen.random(total) * cum[pidx, -1]
        out[:, names.index(col)] = np.minimum((cum[pidx] < u[:, None]).sum(axis=1), marg.shape[1] - 1)
        used.append(col)
    return out


# ---------------------------------------------------------------------------------------------
# AIM
# ---------------------------------------------------------------------------------------------
def _downward_closure(workload: list[Clique]) -> list[Clique]:
    out: set[Clique] = set()
    for cl in workload:
        for r in range(1, len(cl) + 1):
            out.update(itertools.combinations(cl, r))
    return sorted(out, key=lambda c: (len(c), c))


@dataclass(frozen=True, kw_only=True)
class AIM(_MarginalPublisher):
    """AIM: adaptive and iterative marginal selection + graphical-model synthetic data (rho-zCDP).

    The workload is every ``degree``-way marginal of the columns (attributes and class) with at
    most ``max_cells`` cells, weight 1. AIM measures every 1-way marginal, then, round by round,
    chooses by the exponential mechanism the marginal of the workload's downward closure whose
    current model estimate is worst (quality ``w_r (||M_r(D) - M_r(p)||_1 - sqrt(2/pi) sigma n_r)``,
    ``w_r`` the workload weight of ``r``, sensitivity ``max w_r``), among those that keep the
    model below ``max_model_size`` MB scaled by the budget used so far; measures it; refits the
    model (private-pgm's mirror descent, warm-started). When a new measurement barely moved the
    model, sigma is halved and the selection epsilon doubled (the paper's annealing). The last
    round spends what is left.

    Parameters
    ----------
    degree : int
        Order of the workload marginals (paper: 3).
    rounds : int, optional
        The budget schedule's number of rounds ``T`` (default ``16 d``, ``d`` the number of
        columns): each round gets ``0.9 rho / T`` for its measurement and ``0.1 rho / T`` for its
        selection until the annealing changes them.
    max_model_size : float
        Limit on the junction tree's size in MB (paper: 80); smaller is faster.
    max_cells : int
        Workload marginals with more cells are left out (paper's scripts: 10000).
    max_rounds : int, optional
        A hard cap on the selection rounds, for quick runs: the round that reaches it spends the
        rest of the budget (the ledger still sums to ``rho``).
    class_workload : bool
        Keep only the workload marginals that contain the class column (what a classifier
        trained on the synthetic table needs); the default is the paper's workload of all
        ``degree``-way marginals. Public: it changes the candidates, not the privacy.
    bins : int
        Equal-width public intervals of each numeric attribute without a taxonomy.
    max_iters : int
        Mirror-descent iterations per fit (paper: 1000).

    Notes
    -----
    **Privacy:** ``rho``-zCDP for adding or removing one record (person level: one person of at
    most ``k`` rows, the mechanisms spending ``rho / k^2``). Each 1-way marginal and each
    selected marginal is a count vector of L2 sensitivity 1, released with discrete Gaussian
    noise of variance ``1 / (2 rho_t)`` (``rho_t``-zCDP, [CKS20]); each selection is the
    exponential mechanism at ``epsilon_t = sqrt(8 rho'_t)`` on scores of sensitivity ``max w_r``,
    ``rho'_t``-zCDP by bounded range. They compose to ``rho`` (the ledger's total, by
    construction). The selection rule, the annealing test and the model are functions of the
    noisy measurements only. ``(epsilon, delta)``: :meth:`SyntheticRelease.approx_dp`.

    References
    ----------
    McKenna R., Mullins B., Sheldon D., Miklau G. AIM: an adaptive and iterative mechanism for
    differentially private synthetic data. PVLDB 15(11), 2022. arXiv:2201.12677.
    """

    degree: int = 3
    rounds: int | None = None
    max_model_size: float = 80.0
    max_cells: int = 10_000
    max_rounds: int | None = None
    class_workload: bool = False

    method: ClassVar[str] = "aim"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int(self.degree, "degree")
        check_positive_int(self.max_cells, "max_cells")
        for name in ("rounds", "max_rounds"):
            v = getattr(self, name)
            if v is not None:
                if isinstance(v, bool):
                    raise ParameterError(f"{name} must be an integer >= 1 or None, got {v!r}", param=name)
                check_positive_int(v, name)
        if not float(self.max_model_size) > 0:
            raise ParameterError(f"max_model_size must be > 0, got {self.max_model_size!r}", param="max_model_size")
        if not isinstance(self.class_workload, bool):
            raise ParameterError(f"class_workload must be True or False, got {self.class_workload!r}",
                                 param="class_workload")

    def params(self) -> dict[str, Any]:
        return {**super().params(), "degree": self.degree, "rounds": self.rounds,
                "max_model_size": self.max_model_size, "max_cells": self.max_cells, "max_rounds": self.max_rounds,
                "class_workload": self.class_workload}

    def workload(self, shape: tuple[int, ...]) -> list[Clique]:
        """The workload cliques (column indices) for a domain of ``shape`` (public; the class is
        the last column)."""
        d = len(shape)
        k = min(self.degree, d)
        return [cl for cl in itertools.combinations(range(d), k)
                if math.prod(shape[j] for j in cl) <= self.max_cells and (not self.class_workload or d - 1 in cl)]

    def _run(self, table: _Table, domain: Any, rho: float, gen: np.random.Generator,
             mbi: Any) -> tuple[Any, list[Clique]]:
        names = list(domain.attrs)
        shape = table.shape
        d = len(shape)
        workload = self.workload(shape)
        weights = {cl: 1.0 for cl in workload}
        # candidate weight: the workload weight of every workload clique it overlaps, by overlap size
        candidates = {cl: sum(w * len(set(cl) & set(wc)) for wc, w in weights.items())
                      for cl in _downward_closure(workload or [(j,) for j in range(d)])}
        answers = {cl: table.marginal(cl).astype(np.float64) for cl in candidates}
        rounds = self.rounds or 16 * d
        rho_m = 0.9 * rho / rounds  # one measurement: sigma^2 = 1 / (2 rho_m)
        rho_s = 0.1 * rho / rounds  # one selection: epsilon = sqrt(8 rho_s)
        oneway: list[Clique] = [(j,) for j in range(d)]
        used = 0.0
        measurements = []
        measured: list[Clique] = []
        with _step("1-way marginals"):
            for one in oneway:
                measurements.append(self._measure(table, one, rho_m, gen, mbi, names, "1-way marginal"))
                measured.append(one)
                used += rho_m
        model = self._fit(domain, measurements, mbi)
        t = 0
        while True:
            t += 1
            last = rho - used < 2 * (rho_m + rho_s) or (self.max_rounds is not None and t >= self.max_rounds)
            if last:  # spend what is left on one final round
                rest = rho - used
                rho_m, rho_s = 0.9 * rest, rest - 0.9 * rest
            used += rho_m + rho_s
            sigma = math.sqrt(1.0 / (2.0 * rho_m))
            limit = self.max_model_size * min(1.0, used / rho)
            free = set(_downward_closure(_clique_indices(model.cliques, names)))
            cands = [cl for cl in candidates if cl in free or mbi.junction_tree.hypothetical_model_size(
                domain, [*model.cliques, tuple(names[j] for j in cl)]) <= limit]
            scores = np.empty(len(cands))
            for i, cl in enumerate(cands):
                est = np.asarray(model.project(tuple(names[j] for j in cl)).datavector(), dtype=np.float64)
                bias = math.sqrt(2.0 / math.pi) * sigma * est.size
                scores[i] = candidates[cl] * (float(np.abs(answers[cl] - est).sum()) - bias)
            sens = max(candidates[cl] for cl in cands)
            with _step("selection"):
                pick = exponential_mechanism_zcdp(scores, rho=rho_s, sensitivity=sens, rng=gen,
                                                  note=f"round {t}: {len(cands)} candidate marginals")
            cl = cands[pick]
            n = int(math.prod(shape[j] for j in cl))
            before = np.asarray(model.project(tuple(names[j] for j in cl)).datavector(), dtype=np.float64)
            with _step("measurement"):
                measurements.append(self._measure(table, cl, rho_m, gen, mbi, names, f"round {t} marginal"))
            measured.append(cl)
            pcliques = list({m.clique for m in measurements})
            model = self._fit(domain, measurements, mbi, potentials=model.potentials.expand(pcliques))
            if last:
                break
            after = np.asarray(model.project(tuple(names[j] for j in cl)).datavector(), dtype=np.float64)
            if float(np.abs(after - before).sum()) <= sigma * math.sqrt(2.0 / math.pi) * n:
                log.info("AIM round %d: the model barely moved; halving sigma", t)
                rho_m, rho_s = 4.0 * rho_m, 4.0 * rho_s
        return model, measured


def _clique_indices(cliques: Any, names: list[str]) -> list[Clique]:
    return [tuple(sorted(names.index(a) for a in cl)) for cl in cliques]


class _NoStep:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _step(name: str) -> Any:
    from privpub.core import active_accountant

    acc = active_accountant()
    return acc.step(name) if acc is not None else _NoStep()


# ---------------------------------------------------------------------------------------------
# MST
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class MST(_MarginalPublisher):
    """MST: 1-way marginals, a maximum spanning tree of 2-way marginals chosen privately, and a
    graphical-model synthetic table (rho-zCDP; the NIST 2018 synthetic-data contest winner).

    A third of ``rho`` measures every 1-way marginal; a third selects a spanning tree over the
    columns with ``d - 1`` exponential-mechanism draws (Kruskal order: each draw picks an edge
    joining two components, quality the L1 error ``||M_ab(D) - M_ab(p)||_1`` of the independence
    model fit to the noisy 1-way marginals, sensitivity 1); a third measures the tree's 2-way
    marginals. The model (private-pgm's mirror descent) fit to all measurements gives the
    synthetic table.

    Parameters
    ----------
    bins : int
        Equal-width public intervals of each numeric attribute without a taxonomy.
    max_iters : int
        Mirror-descent iterations of the final fit (the selection's fit uses a quarter).

    Notes
    -----
    **Privacy:** ``rho``-zCDP for adding or removing one record (person level: one person of at
    most ``k`` rows, ``rho / k^2`` at record level). Each of the ``d`` 1-way and ``d - 1`` 2-way
    marginals is a count vector of L2 sensitivity 1 with discrete Gaussian noise at
    ``rho / (3 d)`` and ``rho / (3 (d - 1))``; each of the ``d - 1`` selections is the
    exponential mechanism at ``rho / (3 (d - 1))`` (bounded range). Total ``rho``. Unlike the
    contest code, the domain is not compressed (the public bins keep domains small).

    References
    ----------
    McKenna R., Miklau G., Sheldon D. Winning the NIST contest: a scalable and general approach
    to differentially private synthetic data. Journal of Privacy and Confidentiality 11(3), 2021.
    """

    method: ClassVar[str] = "mst"

    def _run(self, table: _Table, domain: Any, rho: float, gen: np.random.Generator,
             mbi: Any) -> tuple[Any, list[Clique]]:
        from scipy.cluster.hierarchy import DisjointSet

        names = list(domain.attrs)
        d = len(table.shape)
        if d < 2:
            raise ParameterError("MST needs at least one attribute besides the class", param="schema")
        rho1 = rho2 = rho / 3.0
        rho3 = rho - rho1 - rho2
        measured: list[Clique] = [(j,) for j in range(d)]
        with _step("1-way marginals"):
            log1 = [self._measure(table, cl, rho1 / d, gen, mbi, names, "1-way marginal") for cl in measured]
        est = mbi.estimation.mirror_descent(domain, log1, iters=max(1, self.max_iters // 4))
        pairs = list(itertools.combinations(range(d), 2))
        errs = {}
        for a, b in pairs:
            xhat = np.asarray(est.project((names[a], names[b])).datavector(), dtype=np.float64)
            errs[a, b] = float(np.abs(table.marginal((a, b)) - xhat).sum())
        ds = DisjointSet(range(d))
        tree: list[Clique] = []
        with _step("spanning tree selection"):
            for i in range(d - 1):
                cands = [e for e in pairs if not ds.connected(*e)]
                pick = exponential_mechanism_zcdp([errs[e] for e in cands], rho=rho2 / (d - 1), sensitivity=1.0,
                                                  rng=gen, note=f"edge {i + 1} of {d - 1}: {len(cands)} candidates")
                tree.append(cands[pick])
                ds.merge(*cands[pick])
        with _step("2-way marginals"):
            log2 = [self._measure(table, cl, rho3 / (d - 1), gen, mbi, names, "2-way marginal") for cl in tree]
        return self._fit(domain, log1 + log2, mbi), measured + tree
