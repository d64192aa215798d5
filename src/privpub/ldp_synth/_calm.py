"""CALM: consistent adaptive local marginals (Zhang, Wang, Li, He, Chen, CCS 2018).

The standard comparison for LoPub-style high-dimensional data release under local DP (issue 26).
The users are split at random into ``m`` groups, one per chosen ``l``-way marginal (a set of
``l`` attributes); each user reports the joint value of *its* group's attributes through a
frequency oracle at epsilon (GRR when the joint domain is small, ``C < 3 e^eps + 2``, else OLH,
the rule of Wang et al. 2017). The server estimates each marginal, makes the marginals agree on
their shared attributes (weighted by their variances), projects each onto the probability
simplex (Norm-Sub), and answers any other marginal by maximum entropy (iterative proportional
fitting) from the measured ones; synthetic rows are sampled from a maximum-spanning tree of the
attributes' mutual information over the measured pairs.

What privpub does differently from the paper (stated, not hidden): the paper picks ``l`` and ``m``
by minimising an error model; here ``l`` is a parameter (default 2, the paper's most frequent
choice at small epsilon) and the marginals are the fewest ``l``-subsets, drawn at random, that
cover every pair of attributes (all pairs when ``l = 2``). Synthetic data uses a spanning tree
rather than the paper's marginal-based sampling.

References
----------
.. [ZWLHC18] Zhang Z., Wang T., Li N., He S., Chen J. CALM: Consistent Adaptive Local Marginal
   for Marginal Release under Local Differential Privacy. CCS 2018.
.. [WBLJ17] Wang T., Blocki J., Li N., Jha S. Locally differentially private protocols for
   frequency estimation. USENIX Security 2017.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privpub.core import (
    PrivacyUnit,
    Publisher,
    Release,
    RNGLike,
    Schema,
    Session,
    accounting,
    active_accountant,
    as_generator,
    check_epsilon,
    check_positive_int,
    describe_data,
)
from privpub.errors import ParameterError
from privpub.ldp import GRR, OLH, FrequencyOracle, norm_sub

__all__ = ["CALM", "CALMRelease", "calm_marginals", "calm_reports", "choose_oracle"]


def choose_oracle(domain_size: int, epsilon: float) -> FrequencyOracle:
    """GRR when ``domain_size < 3 e^epsilon + 2`` (its variance is then smaller), else OLH ([WBLJ17]_)."""
    c = check_positive_int(domain_size, "domain_size", minimum=2)
    eps = check_epsilon(epsilon)
    return GRR(domain_size=c) if c < 3.0 * math.exp(eps) + 2.0 else OLH(domain_size=c)


def calm_marginals(n_attributes: int, size: int, *, count: int | None = None,
                   rng: RNGLike = None) -> list[tuple[int, ...]]:
    """The attribute sets CALM measures: the fewest ``size``-subsets (greedy, random ties) that
    cover every pair of the ``n_attributes`` attributes; all pairs for ``size = 2``.

    With ``count`` the greedy cover stops after ``count`` subsets (fewer marginals, each
    measured by more users, covering only some pairs; the paper's ``m``). ``count`` at or above
    the size of the full cover changes nothing.

    Depends only on the public ``n_attributes``, ``size``, ``count`` and the random draw, never
    on the data.

    Examples
    --------
    >>> calm_marginals(3, 2)
    [(0, 1), (0, 2), (1, 2)]
    >>> calm_marginals(3, 3)
    [(0, 1, 2)]
    """
    d = check_positive_int(n_attributes, "n_attributes", minimum=2)
    ell = check_positive_int(size, "marginal_size", minimum=2)
    if ell > d:
        raise ParameterError(f"marginal_size must be at most the number of attributes ({d}), got {ell}",
                             param="marginal_size")
    limit = None if count is None else check_positive_int(count, "n_marginals")
    if limit is None and (ell == 2 or ell == d):
        return [tuple(c) for c in itertools.combinations(range(d), ell)]
    gen = as_generator(rng)
    uncovered = set(itertools.combinations(range(d), 2))
    chosen: list[tuple[int, ...]] = []
    candidates = [tuple(c) for c in itertools.combinations(range(d), ell)]
    while uncovered and (limit is None or len(chosen) < limit):
        gains = np.array([sum(1 for p in itertools.combinations(c, 2) if p in uncovered) for c in candidates])
        best = np.flatnonzero(gains == gains.max())
        pick = candidates[int(best[gen.integers(best.size)])]
        chosen.append(pick)
        uncovered -= set(itertools.combinations(pick, 2))
    return sorted(chosen)


def _project(table: NDArray[np.float64], attrs: tuple[int, ...], onto: tuple[int, ...]) -> NDArray[np.float64]:
    axes = tuple(i for i, a in enumerate(attrs) if a not in onto)
    return table.sum(axis=axes) if axes else table


def _expand(delta: NDArray[np.float64], attrs: tuple[int, ...], onto: tuple[int, ...],
            shape: tuple[int, ...]) -> NDArray[np.float64]:
    """``delta`` (over ``onto``) broadcast to a table over ``attrs``."""
    idx = tuple(slice(None) if a in onto else np.newaxis for a in attrs)
    return np.broadcast_to(delta[idx], shape)


def _make_consistent(tables: list[NDArray[np.float64]], marginals: list[tuple[int, ...]],
                     cell_var: list[float]) -> None:
    """CALM's consistency step: on every attribute set shared by two or more marginals (smallest
    sets first), replace each marginal's projection by the inverse-variance weighted mean of all
    of them, spreading the difference uniformly over the cells that project onto each cell."""
    shared: set[tuple[int, ...]] = set()
    for a, b in itertools.combinations(marginals, 2):
        common = tuple(sorted(set(a) & set(b)))
        if common:
            shared.add(common)
    for common in sorted(shared, key=lambda s: (len(s), s)):
        holders = [i for i, m in enumerate(marginals) if set(common) <= set(m)]
        if len(holders) < 2:
            continue
        projs, weights = [], []
        for i in holders:
            ratio = tables[i].size / math.prod(tables[i].shape[marginals[i].index(a)] for a in common)
            projs.append(_project(tables[i], marginals[i], common))
            weights.append(1.0 / (cell_var[i] * ratio))  # a projected cell sums `ratio` cells
        target = np.tensordot(np.asarray(weights) / math.fsum(weights), np.stack(projs), axes=1)
        for i, proj in zip(holders, projs):
            ratio = tables[i].size / proj.size
            tables[i] += _expand((target - proj) / ratio, marginals[i], common, tables[i].shape)


def calm_reports(
    codes: NDArray[np.int64],
    sizes: tuple[int, ...],
    marginals: list[tuple[int, ...]],
    *,
    epsilon: float,
    rng: RNGLike = None,
) -> tuple[list[NDArray[np.int64]], list[FrequencyOracle], list[NDArray[Any]]]:
    """The users' side of CALM: split the users at random into one group per marginal, and let
    each user report its group's joint value through :func:`choose_oracle` at ``epsilon``.

    Returns ``(groups, oracles, reports)``: the users (row indices) of each group, its oracle and
    the group's reports. Charges the active accountant one parallel block (the groups are
    disjoint) of ``epsilon``.

    **Privacy:** each user sends exactly one report, epsilon-LDP for its whole record; the split
    does not look at the data.
    """
    gen = as_generator(rng)
    eps = check_epsilon(epsilon)
    n = codes.shape[0]
    groups = np.array_split(gen.permutation(n), len(marginals))
    oracles: list[FrequencyOracle] = []
    reports: list[NDArray[Any]] = []
    acc = active_accountant()
    block = acc.open_parallel("one marginal per user") if acc is not None else None
    for m, users in zip(marginals, groups):
        shape = tuple(sizes[a] for a in m)
        oracle = choose_oracle(math.prod(shape), eps)
        joint = np.ravel_multi_index(tuple(codes[users][:, a] for a in m), shape)
        if acc is not None and block is not None:
            with acc.within(block), block.branch(f"marginal {m}"):
                rep = oracle.perturb(joint, epsilon=eps, rng=gen, note=f"the joint value of attributes {list(m)}")
        else:
            rep = oracle.perturb(joint, epsilon=eps, rng=gen)
        oracles.append(oracle)
        reports.append(rep)
    return groups, oracles, reports


@dataclass(frozen=True, kw_only=True)
class CALMRelease(Release):
    """A CALM release: the consistent measured marginals (frequencies), and answers from them.

    Attributes
    ----------
    marginals : tuple of tuple of int
        The measured attribute sets (indices into ``columns``).
    tables : tuple of ndarray
        Their estimated frequency tables (non-negative, each summing to 1).
    schema : Schema
        The public schema (domains) of the attributes.
    columns : tuple of str
        The attribute names, in schema order.
    group_sizes : tuple of int
        Users per marginal.
    oracles : tuple of str
        The frequency oracle each group used.
    """

    marginals: tuple[tuple[int, ...], ...]
    tables: tuple[NDArray[np.float64], ...]
    schema: Schema
    columns: tuple[str, ...]
    group_sizes: tuple[int, ...]
    oracles: tuple[str, ...] = field(default=())

    def _index(self, attrs: Any) -> tuple[int, ...]:
        names = [attrs] if isinstance(attrs, str) else list(attrs)
        out = []
        for a in names:
            if a not in self.columns:
                raise ParameterError(f"unknown attribute {a!r}; the release has {list(self.columns)}",
                                     param="attributes")
            out.append(self.columns.index(a))
        if len(set(out)) != len(out) or not out:
            raise ParameterError(f"attributes must be distinct and non-empty, got {names}", param="attributes")
        return tuple(out)

    def marginal(self, attributes: Any, *, max_iter: int = 200, tol: float = 1e-9) -> NDArray[np.float64]:
        """The estimated frequency table of ``attributes`` (names, in the order given).

        A subset of a measured marginal is its projection (post-processing); any other set is
        the maximum-entropy table matching the measured marginals' projections onto it
        (iterative proportional fitting from uniform, ``max_iter`` sweeps or until the largest
        change is below ``tol``).
        """
        want = self._index(attributes)
        order = tuple(sorted(want))
        sizes = tuple(self.schema.sizes[a] for a in order)
        holders = [i for i, m in enumerate(self.marginals) if set(order) <= set(m)]
        if holders:
            i = max(holders, key=lambda j: self.group_sizes[j])
            table = _project(self.tables[i], self.marginals[i], order)
        else:
            parts = []
            for m, t in zip(self.marginals, self.tables):
                common = tuple(a for a in order if a in m)
                if common:
                    parts.append((common, _project(t, m, common)))
            table = np.full(sizes, 1.0 / math.prod(sizes))
            for _ in range(check_positive_int(max_iter, "max_iter")):
                change = 0.0
                for common, target in parts:
                    cur = _project(table, order, common)
                    factor = np.divide(target, cur, out=np.zeros_like(target), where=cur > 0)
                    new = table * _expand(factor, order, common, table.shape)
                    change = max(change, float(np.abs(new - table).max()))
                    table = new
                if change < tol:
                    break
        perm = [order.index(a) for a in want]
        return np.ascontiguousarray(np.transpose(table, perm))

    def sample(self, n: int, *, rng: RNGLike = None) -> pd.DataFrame:
        """``n`` synthetic rows: a maximum-spanning tree of the pairwise mutual information over the
        measured pairs, sampled root first (post-processing of the release)."""
        from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

        rows = check_positive_int(n, "n")
        gen = as_generator(rng)
        d = len(self.columns)
        sizes = self.schema.sizes
        pairs: dict[tuple[int, int], NDArray[np.float64]] = {}
        weight = np.zeros((d, d))
        for a, b in itertools.combinations(range(d), 2):
            if any(a in m and b in m for m in self.marginals):
                p = self.marginal([self.columns[a], self.columns[b]])
                pairs[(a, b)] = p
                pa, pb = p.sum(axis=1, keepdims=True), p.sum(axis=0, keepdims=True)
                mi = float(np.sum(p * np.log(np.divide(p, pa * pb, out=np.ones_like(p), where=(p > 0)))))
                weight[a, b] = weight[b, a] = 1.0 + mi  # > 0: scipy reads 0 as "no edge"
        tree = -minimum_spanning_tree(-weight).toarray()
        tree = np.maximum(tree, tree.T)
        codes = np.zeros((rows, d), dtype=np.int64)
        done = np.zeros(d, dtype=bool)
        for root in range(d):
            if done[root]:
                continue
            order, parents = breadth_first_order(tree, root, directed=False, return_predecessors=True)
            for node_ in order:
                node = int(node_)
                one = self.marginal([self.columns[node]])
                parent = int(parents[node])
                if parent < 0:
                    codes[:, node] = gen.choice(sizes[node], size=rows, p=one / one.sum())
                else:
                    key = (min(parent, node), max(parent, node))
                    joint = pairs[key] if key[0] == parent else pairs[key].T  # rows: parent's value
                    for v in np.unique(codes[:, parent]):
                        sel = codes[:, parent] == v
                        cond = joint[v]
                        cond = cond / cond.sum() if cond.sum() > 0 else one / one.sum()
                        codes[sel, node] = gen.choice(sizes[node], size=int(sel.sum()), p=cond)
                done[node] = True
        return self.schema.decode(codes, rng=gen)


@dataclass(frozen=True, kw_only=True)
class CALM(Publisher):
    """CALM ([ZWLHC18]_): l-way marginals under local DP, made consistent, and synthetic data.

    Parameters
    ----------
    marginal_size : int
        ``l``, the number of attributes of each measured marginal (default 2).
    rounds : int
        Rounds of (consistency, Norm-Sub) post-processing (default 3; CALM iterates them).
    n_marginals : int, optional
        ``m``, the number of marginals (user groups). Default: the fewest that cover every pair
        of attributes. Fewer marginals give each more users (less noise) but leave some pairs
        to maximum entropy; on small populations that trade wins (see ``docs/ldp_synth.md``).
        Public and data-independent, so it costs no privacy.

    Notes
    -----
    **Privacy:** epsilon-LDP per user (the user's whole record is the unit, replace-one). Each
    user is assigned to one marginal's group by a data-independent random split and sends one
    report of the joint value of that marginal's attributes through GRR or OLH at ``epsilon``;
    the groups are disjoint sets of users, so the ledger is one parallel block costing
    ``epsilon``. Everything after the reports (estimates, consistency, Norm-Sub, maximum
    entropy, sampling) is post-processing.

    Examples
    --------
    >>> import pandas as pd
    >>> from privpub.core import CategoricalAttribute, Schema
    >>> from privpub.ldp_synth import CALM
    >>> schema = Schema([CategoricalAttribute(c, ["0", "1"]) for c in "abc"])
    >>> data = pd.DataFrame({c: ["0", "1"] * 500 for c in "abc"})
    >>> release = CALM().publish(data, schema=schema, epsilon=1.0, rng=0)
    >>> release.marginals, release.ledger.total
    (((0, 1), (0, 2), (1, 2)), 1.0)
    """

    marginal_size: int = 2
    rounds: int = 3
    n_marginals: int | None = None

    def __post_init__(self) -> None:
        check_positive_int(self.marginal_size, "marginal_size", minimum=2)
        check_positive_int(self.rounds, "rounds")
        if self.n_marginals is not None:
            check_positive_int(self.n_marginals, "n_marginals")

    def publish(
        self,
        data: pd.DataFrame,
        *,
        schema: Schema,
        epsilon: float,
        rng: RNGLike = None,
        session: Session | None = None,
    ) -> CALMRelease:
        """Simulate every user's report (one marginal each) from ``data`` and return the release.

        Parameters
        ----------
        data : DataFrame
            One row per user; its columns are the attributes of ``schema`` (public domains).
        schema : Schema
            The attributes' public domains.
        epsilon : float
            Each user's local epsilon.
        rng : seed or Generator
            Drives the split into groups, the choice of marginals (``l > 2`` or ``n_marginals``) and the reports.
        session : Session, optional
            Charged ``epsilon`` before anything is drawn.
        """
        if not isinstance(schema, Schema):
            raise ParameterError(f"schema must be a privpub.core.Schema, got {type(schema).__name__}",
                                 param="schema")
        if not isinstance(data, pd.DataFrame):
            raise ParameterError(f"data must be a pandas DataFrame, got {type(data).__name__}", param="data")
        eps = check_epsilon(epsilon)
        d = len(schema)
        gen = as_generator(rng)
        marginals = calm_marginals(d, self.marginal_size, count=self.n_marginals, rng=gen) if d >= 2 else []
        if not marginals:
            raise ParameterError("CALM needs at least two attributes", param="schema")
        codes = schema.encode(data)
        n = codes.shape[0]
        if n < len(marginals):
            raise ParameterError(f"CALM needs at least one user per marginal ({len(marginals)}), got {n} rows",
                                 param="data")
        sizes = schema.sizes
        for m in marginals:
            c = math.prod(sizes[a] for a in m)
            if c > 2**24:
                raise ParameterError(f"the joint domain of marginal {[schema.names[a] for a in m]} has {c} cells "
                                     "(over 2**24); use a smaller marginal_size", param="marginal_size")
        tables: list[NDArray[np.float64]] = []
        cell_var: list[float] = []
        with accounting(eps, method="calm", session=session, data=describe_data(data),
                        unit=PrivacyUnit.participant()) as acc:
            groups, oracles, reports = calm_reports(codes, sizes, marginals, epsilon=eps, rng=gen)
            for m, users, oracle, rep in zip(marginals, groups, oracles, reports):
                est = oracle.estimate(rep, epsilon=eps) / users.size
                tables.append(est.reshape(tuple(sizes[a] for a in m)))
                cell_var.append(oracle.variance(users.size, epsilon=eps) / users.size**2)
            used = [type(o).__name__ for o in oracles]
            ledger = acc.seal()
        for _ in range(self.rounds):
            _make_consistent(tables, marginals, cell_var)
            for i, t in enumerate(tables):
                tables[i] = norm_sub(t.ravel(), total=1.0).reshape(t.shape)
        for t in tables:
            t.flags.writeable = False
        return CALMRelease(
            ledger=ledger, epsilon=eps, method="calm",
            params={"marginal_size": self.marginal_size, "rounds": self.rounds, "n_marginals": self.n_marginals},
            marginals=tuple(marginals), tables=tuple(tables), schema=schema, columns=tuple(schema.names),
            group_sizes=tuple(int(g.size) for g in groups), oracles=tuple(used),
        )
