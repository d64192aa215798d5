"""The publisher: LDP reports -> Bayesian network -> synthetic table (Ren et al. 2019)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from privpub.core import (
    Accountant,
    BudgetLedger,
    PrivacyUnit,
    Publisher,
    Release,
    RNGLike,
    Schema,
    Session,
    accounting,
    as_generator,
    check_positive_int,
    check_real,
    check_working_set,
    describe_data,
    readonly,
)
from privpub.errors import ParameterError
from privpub.ldp_synth._client import LDPReports, epsilon_from_f, resolve_flip_prob, simulate_clients
from privpub.ldp_synth._network import (
    SEARCHES,
    STARTS,
    Network,
    build_network,
    conditional_tables,
    sample_synthetic,
)
from privpub.ldp_synth._store import METHODS, ReportStore

__all__ = ["LDPBayesRelease", "LDPBayesSynthesizer", "report_ledger", "sample_independent"]


@dataclass(frozen=True, kw_only=True)
class LDPBayesRelease(Release):
    """A fitted network of degree k over LDP reports; samples synthetic tables.

    Attributes
    ----------
    schema : Schema
        The public schema (columns and categories of the synthetic table).
    structure : tuple of (int, tuple of int)
        The network as attribute indices, in insertion (topological) order.
    tables : tuple of arrays
        Per node, the conditional table ``(n_parent_configs, n_child)``.
    flip_prob : float
        The clients' flip probability f.
    epsilon_attribute : float
        Per-attribute epsilon ``2 ln((2 - f) / f)``; ``epsilon`` is ``d`` times it.
    n_users : int
        Number of reports (the default synthetic row count).
    columns : tuple of str
        Column order of the synthetic table.
    n_estimates : int
        Distinct joint distributions estimated while building the network.
    n_not_converged : int
        How many EM runs hit ``max_iter`` (normal at f >= 0.8).
    """

    schema: Schema
    structure: Network
    tables: tuple[NDArray[np.float64], ...]
    flip_prob: float
    epsilon_attribute: float
    n_users: int
    columns: tuple[str, ...]
    n_estimates: int = 0
    n_not_converged: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "tables", tuple(readonly(t) for t in self.tables))

    @property
    def network(self) -> list[tuple[str, tuple[str, ...]]]:
        """The network as ``(attribute, parents)`` name pairs in insertion order."""
        names = self.schema.names
        return [(names[c], tuple(names[p] for p in parents)) for c, parents in self.structure]

    def sample_codes(self, n: int | None = None, rng: RNGLike = None) -> NDArray[np.int64]:
        """Synthetic rows as an ``(n, d)`` code array (schema attribute order)."""
        n_rows = self.n_users if n is None else check_positive_int(n, "n")
        return sample_synthetic(self.structure, self.tables, self.schema.sizes, n_rows, rng)

    def sample(self, n: int | None = None, rng: RNGLike = None) -> pd.DataFrame:
        """A synthetic table of ``n`` rows (default: as many as there were users).

        Sampling is post-processing: it costs no privacy. Same ``rng``, same table.
        """
        gen = as_generator(rng)
        codes = self.sample_codes(n, gen)
        frame = self.schema.decode(codes, rng=gen)
        return frame[list(self.columns)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: network, f, epsilon, schema."""
        return {
            "method": self.method,
            "epsilon": self.epsilon,
            "epsilon_attribute": self.epsilon_attribute,
            "flip_prob": self.flip_prob,
            "n_users": self.n_users,
            "degree": (self.params or {}).get("degree"),
            "network": [{"attribute": a, "parents": list(p)} for a, p in self.network],
            "schema": self.schema.to_dict(),
        }


@dataclass(frozen=True, kw_only=True)
class LDPBayesSynthesizer(Publisher):
    """Local-DP synthetic data through a Bayesian network (LoPub-style; Ren et al. 2019).

    Each user one-hot encodes every attribute over its declared domain and flips each bit with
    probability f (RAPPOR, paper Eq. 4); the server estimates low-order joints by EM, builds a
    Bayesian network of in-degree k from their mutual information, and samples a synthetic table.

    Parameters
    ----------
    degree : int
        Max parents per node, ``1 <= k < d``.
    start : {"entropy", "random"}
        First node: max estimated entropy (paper Alg. 4, default) or random (Alg. 3).
    search : {"incremental", "exhaustive", "single_carry"}
        Candidate search (see :func:`build_network`); the first two give identical networks.
    method : {"em", "linear", "hybrid"}
        Joint estimator: the paper's EM (default), the fast unbiased linear estimator projected onto
        the simplex, or EM started from it on its support.
    tol, max_iter : float, int
        EM stopping rule ``max |P_t - P_{t-1}| < tol``, at most ``max_iter`` iterations.
    refine_iter : int or None
        Iteration cap of the hybrid EM refinement.

    Notes
    -----
    **Privacy:** each user's report is epsilon-LDP with ``epsilon = 2 d ln((2 - f) / f)`` against a
    change of the whole record (``2 ln((2 - f)/f)`` per attribute; tight). This is the only
    spending step; the EM, network, conditional tables and sampling are post-processing, so the
    synthetic table is epsilon-LDP for every user. One report per user: collecting again with
    fresh noise costs epsilon again. The schema must be public (declared, not read from data).

    References
    ----------
    Ren X B, Xu J Y, Yang X Y, Yang S S. Bayesian network-based high-dimensional crowdsourced data
    publication with local differential privacy. Sci Sin Inform 49:1586-1605, 2019.
    doi:10.1360/SSI-2019-0119. (Builds on LoPub, Ren et al., IEEE TIFS 2018, and RAPPOR, CCS 2014.)

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from privpub.core import CategoricalAttribute, Schema
    >>> gen = np.random.default_rng(0)
    >>> a = gen.integers(2, size=2000)
    >>> df = pd.DataFrame({"a": a, "b": np.where(gen.random(2000) < 0.9, a, 1 - a), "c": gen.integers(3, size=2000)})
    >>> schema = Schema([CategoricalAttribute("a", ["0", "1"]), CategoricalAttribute("b", ["0", "1"]),
    ...                  CategoricalAttribute("c", ["0", "1", "2"])])
    >>> release = LDPBayesSynthesizer(degree=1).publish(df.astype(str), schema=schema, flip_prob=0.2, rng=0)
    >>> round(release.epsilon, 3), release.ledger.total == release.epsilon
    (13.183, True)
    >>> release.sample(5, rng=0).shape
    (5, 3)
    """

    degree: int = 2
    start: str = "entropy"
    search: str = "incremental"
    method: str = "em"
    tol: float = 1e-6
    max_iter: int = 1000
    refine_iter: int | None = None

    def __post_init__(self) -> None:
        check_positive_int(self.degree, "degree")
        if self.start not in STARTS:
            raise ParameterError(f"start must be one of {list(STARTS)}, got {self.start!r}", param="start")
        if self.search not in SEARCHES:
            raise ParameterError(f"search must be one of {list(SEARCHES)}, got {self.search!r}", param="search")
        if self.method not in METHODS:
            raise ParameterError(f"method must be one of {list(METHODS)}, got {self.method!r}", param="method")
        if not check_real(self.tol, "tol") > 0:
            raise ParameterError(f"tol must be > 0, got {self.tol}", param="tol")
        check_positive_int(self.max_iter, "max_iter")
        if self.refine_iter is not None:
            check_positive_int(self.refine_iter, "refine_iter")

    def _params(self) -> dict[str, Any]:
        return {"degree": self.degree, "start": self.start, "search": self.search, "method": self.method,
                "tol": self.tol, "max_iter": self.max_iter, "refine_iter": self.refine_iter}

    def _check_degree(self, d: int) -> None:
        if self.degree >= d:
            raise ParameterError(
                f"degree (max parents k) must be in [1, {d - 1}] (below the number of attributes {d}), "
                f"got {self.degree}"
            , param="degree")

    def publish(
        self,
        data: pd.DataFrame,
        *,
        schema: Schema,
        epsilon: float | None = None,
        flip_prob: float | None = None,
        rng: RNGLike = None,
        progress: Callable[[int, int], None] | None = None,
        session: Session | None = None,
    ) -> LDPBayesRelease:
        """Simulate every user's local perturbation of ``data``, then fit and return the release.

        Parameters
        ----------
        data : DataFrame
            One row per user; its columns must be exactly declared attributes of ``schema``.
        schema : Schema
            Public domains of the attributes.
        epsilon, flip_prob : float
            Exactly one: the total per-report epsilon or the flip probability f in (0, 1).
        rng : int, Generator or None
            Drives the clients' flips, then the random start node (if any).
        progress : callable or None
            ``progress(i, d)`` after each network node.
        session : Session, optional
            Budget session charged the per-report epsilon ``2 d ln((2 - f) / f)`` (refused,
            perturbing nothing, if it cannot pay).

        Raises
        ------
        ParameterError
            Bad f / epsilon, or ``degree >= d``.
        DomainError
            A value outside its declared domain, a missing value, or a column without a domain.
        """
        if not isinstance(schema, Schema):
            raise ParameterError(f"schema must be a privpub.core.Schema, got {type(schema).__name__}", param="schema")
        self._check_degree(len(schema))
        f, eps = self._flip_prob(epsilon, flip_prob, len(schema))
        if not isinstance(data, pd.DataFrame):
            raise ParameterError(f"data must be a pandas DataFrame, got {type(data).__name__}")
        # the users' one-hot reports, perturbed per attribute (unpacked bits, their packed draw and the
        # concatenated copy: 2.25 bytes per user and domain value), checked before any reservation
        check_working_set(len(data), 2.5 * sum(schema.sizes), "LDPBayesSynthesizer.publish (the users' reports)",
                          "the rows of data or the schema's domain sizes", unit="users")
        gen = as_generator(rng)
        with accounting(eps, method="ldp_bayes", session=session, data=describe_data(data),
                        unit=PrivacyUnit.participant()) as acc:
            with acc.step("local perturbation"):
                reports = self._client_reports(data, schema, f, gen)
            ledger = acc.seal()
        columns = tuple(str(c) for c in data.columns)
        return self._fit(reports, schema, gen, progress, columns, ledger)

    @staticmethod
    def _flip_prob(epsilon: float | None, flip_prob: float | None, d: int) -> tuple[float, float]:
        """``(f, epsilon)`` of a ``d``-attribute report, exactly as :meth:`publish` resolves them
        (:func:`resolve_flip_prob`: ``f = 2 / (1 + exp(epsilon / (2 d)))``). The audit case
        ``ldp_synth.client_report`` takes its flip probability from here."""
        return resolve_flip_prob(epsilon, flip_prob, d)

    @staticmethod
    def _client_reports(data: pd.DataFrame, schema: Schema, flip_prob: float, gen: np.random.Generator) -> LDPReports:
        """The local-perturbation step exactly as :meth:`publish` runs it: every row (one user)
        through :func:`simulate_clients` at ``flip_prob`` (from :meth:`_flip_prob`). The audit
        case ``ldp_synth.client_report`` calls it on many copies of one user's record."""
        return simulate_clients(data, schema, flip_prob=flip_prob, rng=gen)

    def fit_reports(
        self,
        reports: LDPReports | ArrayLike,
        *,
        schema: Schema,
        flip_prob: float | None = None,
        epsilon: float | None = None,
        rng: RNGLike = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> LDPBayesRelease:
        """Deployment path: fit from reports already collected from the users' devices.

        Parameters
        ----------
        reports : LDPReports or (N, L) 0/1 array
            An :class:`LDPReports` carries its f; a bare array needs ``flip_prob`` or ``epsilon``
            (the total per-report epsilon the clients used). Block ``j`` of each row is attribute
            ``j``'s perturbed one-hot vector, ``L = sum(schema.sizes)``.
        schema : Schema
            The schema the clients encoded with.
        rng : int, Generator or None
            Used only by ``start="random"``.

        Raises
        ------
        ParameterError
            Reports of the wrong width, non-binary reports, f mismatch, ``degree >= d``.
        """
        if not isinstance(schema, Schema):
            raise ParameterError(f"schema must be a privpub.core.Schema, got {type(schema).__name__}", param="schema")
        self._check_degree(len(schema))
        if isinstance(reports, LDPReports):
            if reports.sizes != schema.sizes:
                raise ParameterError(
                    f"reports were encoded with domain sizes {list(reports.sizes)}, but the schema has "
                    f"{list(schema.sizes)}"
                )
            if flip_prob is not None or epsilon is not None:
                f_given, _ = resolve_flip_prob(epsilon, flip_prob, len(schema))
                if not math.isclose(f_given, reports.flip_prob, rel_tol=1e-9):
                    raise ParameterError(
                        f"flip_prob {f_given} disagrees with the reports' flip_prob {reports.flip_prob}"
                    )
            rep = LDPReports(reports.bits, reports.sizes, reports.flip_prob, schema.names)
        else:
            f, _ = resolve_flip_prob(epsilon, flip_prob, len(schema))
            rep = LDPReports(np.asarray(reports), schema.sizes, f, schema.names)
        return self._fit(rep, schema, as_generator(rng), progress, schema.names, report_ledger(rep.flip_prob, len(schema)))

    def _fit(
        self,
        reports: LDPReports,
        schema: Schema,
        gen: np.random.Generator,
        progress: Callable[[int, int], None] | None,
        columns: tuple[str, ...],
        ledger: BudgetLedger,
    ) -> LDPBayesRelease:
        f = reports.flip_prob
        eps = ledger.epsilon
        eps_attr = epsilon_from_f(f, 1)
        store = ReportStore(reports, method=self.method, tol=self.tol, max_iter=self.max_iter,
                            refine_iter=self.refine_iter)
        net = build_network(store, self.degree, start=self.start, search=self.search, rng=gen, progress=progress)
        tables = conditional_tables(store, net)
        not_conv = sum(1 for e in store._cache.values() if not e.converged)
        return LDPBayesRelease(
            ledger=ledger,
            epsilon=eps,
            method="ldp_bayes",
            params=self._params(),
            schema=schema,
            structure=net,
            tables=tuple(tables),
            flip_prob=f,
            epsilon_attribute=eps_attr,
            n_users=reports.n_users,
            columns=columns,
            n_estimates=store.n_estimates,
            n_not_converged=not_conv,
        )


def report_ledger(flip_prob: float, d: int) -> BudgetLedger:
    """The ledger of reports perturbed on the clients' devices (the :meth:`fit_reports` path).

    The clients ran :class:`privpub.ldp.SUE` with flip probability ``f`` on each of the ``d``
    attribute blocks; the server never draws privacy noise. The record is made by charging an
    accountant for those declared client-side draws (each at SUE's per-attribute epsilon
    ``2 ln((2 - f) / f)``), so its total is ``2 d ln((2 - f) / f)``. Everything the server does
    afterwards is post-processing and spends nothing.
    """
    eps = epsilon_from_f(flip_prob, d)
    acc = Accountant(eps, label="ldp_bayes (reports collected on the clients)", unit=PrivacyUnit.submission())
    with acc.step("local perturbation"):
        for j in range(d):
            acc.charge("SUE", epsilon_from_f(flip_prob, 1),
                       note=f"attribute {j}: declared, perturbed on the clients' devices with f={flip_prob:.6g}")
    return acc.seal()


def sample_independent(store: ReportStore, n: int, rng: RNGLike = None) -> NDArray[np.int64]:
    """Baseline: sample every attribute independently from its estimated 1-way marginal (k = 0).

    The option the paper rejects: it keeps each marginal but loses every correlation.

    Notes
    -----
    **Privacy:** post-processing of the reports in ``store``.
    """
    net: Network = tuple((j, ()) for j in range(store.d))
    return sample_synthetic(net, conditional_tables(store, net), store.sizes, n, rng)
