"""The empirical epsilon auditor: a one-sided lower confidence bound on a mechanism's epsilon.

For a mechanism ``M`` and neighbouring inputs ``x, x'``, every output event ``E`` gives
``epsilon >= ln(P[M(x) in E] / P[M(x') in E])``. The auditor estimates these probabilities
from many independent runs and turns them into a lower confidence bound with exact
Clopper-Pearson bounds, in the style of StatDP [DWWZK18]_ and LDP-Auditor [ALS24]_:

1. **Selection.** A first, independent batch of runs (a quarter by default) proposes events:
   outputs are mapped to cells (the exact output on small output spaces; quantile bins of a
   scalar statistic otherwise) and candidate events are tails of the cell order and unions of the
   cells with the largest estimated likelihood ratio, in both directions. The ``n_events`` best
   candidates on the selection batch are kept.
2. **Estimation.** On the remaining, fresh runs, each kept event gets a one-sided lower bound
   ``ln(lower_p / upper_q)`` with Clopper-Pearson bounds at level ``alpha / (2 n_events)``
   (Bonferroni), so the reported maximum is a valid ``1 - alpha`` lower bound on the true
   epsilon. Events are fixed before the estimation runs are drawn, so choosing them does not
   bias the bound.

A correct epsilon-DP mechanism gives ``lower_bound <= epsilon`` with probability at least
``1 - alpha`` (the bound is conservative); a mechanism with too little noise gives a bound
above ``epsilon`` once the number of trials is large enough for the events to be resolved.

References
----------
.. [DWWZK18] Ding, Wang, Wang, Zhang, Kifer. Detecting violations of differential privacy.
   CCS 2018 (StatDP).
.. [ALS24] Arcolezi, Gambs. Revealing the true cost of locally differentially private
   protocols: an auditing perspective. PoPETs 2024 (LDP-Auditor).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from privpub.core import RNGLike, as_generator, check_epsilon, check_positive_int, check_probability
from privpub.errors import ParameterError

__all__ = ["AuditResult", "audit_epsilon", "clopper_pearson_bounds"]

#: outputs with at most this many distinct values (in the selection runs) are audited exactly
MAX_EXACT_CELLS = 256
#: number of quantile bins of a continuous statistic
N_BINS = 48


@dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`audit_epsilon`.

    Attributes
    ----------
    lower_bound : float
        One-sided ``confidence`` lower confidence bound on the mechanism's epsilon (>= 0).
    epsilon : float
        The declared epsilon.
    passed : bool
        ``lower_bound <= epsilon``: no evidence that the mechanism leaks more than declared.
    estimate : float
        The point estimate ``ln(p / q)`` of the best event on the estimation runs (may exceed
        ``lower_bound`` by the sampling error; not a bound).
    event : str
        Description of the best event.
    p, q : float
        Empirical probabilities of the best event under the two inputs (numerator, denominator).
    trials : int
        Runs of the mechanism on each input (selection plus estimation).
    confidence : float
        Confidence level of ``lower_bound``.
    n_events : int
        Number of events tested in the estimation phase (Bonferroni factor).
    output_kind : str
        How outputs were turned into events: ``"exact"``, ``"scalar"`` or ``"vector"``.
    """

    lower_bound: float
    epsilon: float
    passed: bool
    estimate: float
    event: str
    p: float
    q: float
    trials: int
    confidence: float
    n_events: int
    output_kind: str

    def __str__(self) -> str:
        verdict = "passed" if self.passed else "FLAGGED"
        return (f"epsilon lower bound {self.lower_bound:.3f} vs declared {self.epsilon:.3f} ({verdict}; "
                f"{self.confidence:.0%} one-sided, {self.trials} trials/input, event {self.event})")


# ---------------------------------------------------------------------------------------------
# Binomial bounds
# ---------------------------------------------------------------------------------------------
def clopper_pearson_bounds(
    k: NDArray[np.int64] | int, n: int, alpha: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """One-sided exact binomial bounds: ``P[p >= lower] >= 1 - alpha`` and ``P[p <= upper] >= 1 - alpha``.

    Parameters
    ----------
    k : int or array of int
        Successes.
    n : int
        Trials.
    alpha : float
        Error probability of each one-sided bound.

    Examples
    --------
    >>> lo, hi = clopper_pearson_bounds(50, 100, 0.01)
    >>> bool(0.38 < lo < 0.5 < hi < 0.62)
    True
    """
    kk = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        lower = np.where(kk > 0, stats.beta.ppf(alpha, kk, n - kk + 1), 0.0)
        upper = np.where(kk < n, stats.beta.ppf(1 - alpha, kk + 1, n - kk), 1.0)
    return np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)


def split_trials(trials: Any, selection: Any, n_events: Any, confidence: Any, *,
                 min_selection: int) -> tuple[int, int, int, float]:
    """The checked ``(selection runs, estimation runs, events, confidence)`` of an audit: events are
    chosen on the first runs and estimated on the others (at least 50)."""
    n_trials = check_positive_int(trials, "trials", minimum=100)
    conf = check_probability(confidence, "confidence")
    frac = check_probability(selection, "selection")
    k_events = check_positive_int(n_events, "n_events")
    n_sel = max(min_selection, round(frac * n_trials))
    n_est = n_trials - n_sel
    if n_est < 50:
        raise ParameterError(f"trials must leave at least 50 estimation runs, got trials={n_trials}", param="trials")
    return n_sel, n_est, k_events, conf


def _log_ratio_lower(k1: NDArray[np.int64], k2: NDArray[np.int64], n: int, alpha: float) -> NDArray[np.float64]:
    lo, _ = clopper_pearson_bounds(k1, n, alpha)
    _, hi = clopper_pearson_bounds(k2, n, alpha)
    with np.errstate(divide="ignore"):
        return np.log(lo) - np.log(hi)


# ---------------------------------------------------------------------------------------------
# Running the mechanism and normalising its outputs
# ---------------------------------------------------------------------------------------------
def _run(
    mechanism: Callable[..., Any], data: Any, gen: np.random.Generator, n: int, batch: bool
) -> list[Any] | NDArray[Any]:
    if batch:
        out = mechanism(data, gen, n)
        arr = np.asarray(out)
        if arr.ndim == 0 or arr.shape[0] != n:
            raise ParameterError(
                f"a batch mechanism must return {n} outputs along the first axis, got shape {arr.shape}"
            )
        return arr
    return [mechanism(data, gen) for _ in range(n)]


def _as_numeric(outputs: list[Any] | NDArray[Any]) -> NDArray[np.float64] | None:
    """Outputs as an ``(n, k)`` float array when they are numbers or equal-shape numeric arrays."""
    try:
        arr = np.asarray(outputs)
    except ValueError:  # ragged
        return None
    if arr.dtype.kind not in "biuf" or arr.ndim == 0:
        return None
    arr = arr.reshape(arr.shape[0], -1).astype(np.float64)
    if not np.all(np.isfinite(arr)):
        return None
    return arr


def _keys(outputs: list[Any] | NDArray[Any]) -> list[Any]:
    keys: list[Any] = []
    for o in outputs:
        if isinstance(o, np.ndarray):
            keys.append((o.shape, o.dtype.str, o.tobytes()))
        elif isinstance(o, list):
            keys.append(("list", repr(o)))
        else:
            try:
                hash(o)
                keys.append(o)
            except TypeError:
                keys.append(("repr", repr(o)))
    return keys


@dataclass
class _Cells:
    """A map from outputs to integer cells, fixed on the selection runs."""

    kind: str
    n_cells: int
    assign: Callable[[list[Any] | NDArray[Any]], NDArray[np.int64]]
    ordered: bool  # cells have a natural order (bins of a statistic): tails are candidates
    label: Callable[[Sequence[int]], str]


def _exact_cells(sel_x: list[Any] | NDArray[Any], sel_y: list[Any] | NDArray[Any]) -> _Cells | None:
    keys = _keys(sel_x) + _keys(sel_y)
    table: dict[Any, int] = {}
    for k in keys:
        if k not in table:
            table[k] = len(table)
            if len(table) > MAX_EXACT_CELLS:
                return None
    other = len(table)
    reverse = {v: k for k, v in table.items()}

    def assign(outs: list[Any] | NDArray[Any]) -> NDArray[np.int64]:
        return np.array([table.get(k, other) for k in _keys(outs)], dtype=np.int64)

    def label(cells: Sequence[int]) -> str:
        shown = [_show(reverse[c]) if c in reverse else "<unseen>" for c in list(cells)[:4]]
        more = f" (+{len(cells) - 4} more)" if len(cells) > 4 else ""
        return "output in {" + ", ".join(shown) + "}" + more

    return _Cells("exact", other + 1, assign, False, label)


def _show(key: Any) -> str:
    if isinstance(key, tuple) and len(key) == 3 and isinstance(key[2], bytes):
        shape, dtype, raw = key
        arr = np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape)
        return str(arr.astype(int).tolist() if arr.dtype == bool else arr.tolist())
    if isinstance(key, np.generic):
        return repr(key.item())
    return repr(key)


def _statistic_cells(stat_x: NDArray[np.float64], stat_y: NDArray[np.float64], name: str,
                     statistic: Callable[[NDArray[np.float64]], NDArray[np.float64]], kind: str) -> _Cells:
    pooled = np.concatenate([stat_x, stat_y])
    edges = np.unique(np.quantile(pooled, np.linspace(0, 1, N_BINS + 1)[1:-1]))
    values = np.unique(pooled)
    if values.size <= N_BINS:  # few distinct values: one cell per value (plus the gaps between)
        edges = np.unique(np.concatenate([values, values + 1e-9 * (1 + np.abs(values))]))[:-1]
    edges = edges[np.isfinite(edges)]

    def assign(outs: list[Any] | NDArray[Any]) -> NDArray[np.int64]:
        arr = _as_numeric(outs)
        if arr is None:
            raise ParameterError("mechanism outputs changed type between runs")
        return np.searchsorted(edges, statistic(arr), side="right").astype(np.int64)

    def label(cells: Sequence[int]) -> str:
        cs = sorted(cells)
        lo = -math.inf if cs[0] == 0 else edges[cs[0] - 1]
        hi = math.inf if cs[-1] >= edges.size else edges[cs[-1]]
        contiguous = len(cs) == cs[-1] - cs[0] + 1
        if contiguous and math.isfinite(lo) and hi - lo <= 1e-6 * (1.0 + abs(lo)):  # the cell of one discrete value
            return f"{name} = {lo:.4g}"
        span = f"[{lo:.4g}, {hi:.4g})" if contiguous else f"{len(cs)} bins within [{lo:.4g}, {hi:.4g})"
        return f"{name} in {span}"

    return _Cells(kind, edges.size + 1, assign, True, label)


def _vector_statistics(
    a: NDArray[np.float64], b: NDArray[np.float64]
) -> list[tuple[str, Callable[[NDArray[np.float64]], NDArray[np.float64]]]]:
    """Scalar statistics of vector outputs, chosen from the selection runs only."""
    out: list[tuple[str, Callable[[NDArray[np.float64]], NDArray[np.float64]]]] = []
    med_a, med_b = np.median(a, axis=0), np.median(b, axis=0)
    diff = med_a != med_b
    if np.any(diff):  # L1 likelihood ratio of Laplace-like noise around the two medians
        ma, mb = med_a[diff], med_b[diff]
        out.append(("L1 log-likelihood ratio", lambda v: (np.abs(v[:, diff] - mb).sum(axis=1)
                                                            - np.abs(v[:, diff] - ma).sum(axis=1))))
    mean_diff = a.mean(axis=0) - b.mean(axis=0)
    if np.any(mean_diff != 0):
        w = mean_diff.copy()
        out.append(("projection on the mean difference", lambda v: v @ w))
        spread = np.sqrt(0.5 * (a.var(axis=0) + b.var(axis=0))) + 1e-12
        j = int(np.argmax(np.abs(mean_diff) / spread))
        out.append((f"coordinate {j}", lambda v: v[:, j]))
    if not out:
        out.append(("coordinate 0", lambda v: v[:, 0]))
    return out


# ---------------------------------------------------------------------------------------------
# Candidate events
# ---------------------------------------------------------------------------------------------
def _candidates(c1: NDArray[np.int64], c2: NDArray[np.int64], ordered: bool) -> list[tuple[NDArray[np.int64], int]]:
    """Candidate events as (cell indices, direction); direction +1 bounds P1/P2, -1 bounds P2/P1.

    ``c1, c2`` are cell counts of the runs used to *rank* cells by likelihood ratio; the
    candidates are then scored on other runs, so that unions of cells which look extreme only by
    chance do not win the selection.
    """
    m = c1.size
    cells = np.arange(m)
    cands: list[tuple[NDArray[np.int64], int]] = []
    lr = np.log((c1 + 0.5) / (c2 + 0.5))
    seen = (c1 + c2) > 0
    order = cells[seen][np.argsort(-lr[seen], kind="stable")]
    for k in range(1, order.size + 1):
        cands.append((order[:k], +1))
        cands.append((order[order.size - k:], -1))
    if ordered:
        for t in range(1, m):
            for direction in (+1, -1):
                cands.append((cells[:t], direction))
                cands.append((cells[t:], direction))
    return cands


def _best_events(cells: _Cells, sel_x: Any, sel_y: Any, n_sel: int, alpha: float,
                 n_events: int) -> list[tuple[float, NDArray[np.int64], int, _Cells]]:
    cx, cy = cells.assign(sel_x), cells.assign(sel_y)
    half = n_sel // 2  # first half ranks the cells, second half scores the candidate events
    rank1 = np.bincount(cx[:half], minlength=cells.n_cells)
    rank2 = np.bincount(cy[:half], minlength=cells.n_cells)
    c1 = np.bincount(cx[half:], minlength=cells.n_cells)
    c2 = np.bincount(cy[half:], minlength=cells.n_cells)
    cands = _candidates(rank1, rank2, cells.ordered)
    if not cands:
        return []
    k1 = np.array([c1[s].sum() for s, _ in cands])
    k2 = np.array([c2[s].sum() for s, _ in cands])
    d = np.array([dr for _, dr in cands])
    num = np.where(d > 0, k1, k2)
    den = np.where(d > 0, k2, k1)
    score = _log_ratio_lower(num, den, n_sel - half, alpha)
    top = np.argsort(-score, kind="stable")[:n_events]
    return [(float(score[i]), cands[i][0], int(cands[i][1]), cells) for i in top]


# ---------------------------------------------------------------------------------------------
# The auditor
# ---------------------------------------------------------------------------------------------
def audit_epsilon(
    mechanism: Callable[..., Any],
    x: Any,
    x_neighbour: Any,
    *,
    epsilon: float,
    trials: int,
    rng: RNGLike = 0,
    confidence: float = 0.99,
    batch: bool = False,
    statistic: Callable[[Any], float] | None = None,
    n_events: int = 4,
    selection: float = 0.25,
) -> AuditResult:
    """Audit a mechanism: a one-sided lower confidence bound on its epsilon from neighbouring inputs.

    Parameters
    ----------
    mechanism : callable
        ``mechanism(data, rng) -> output`` where ``rng`` is a :class:`numpy.random.Generator`
        and the output is a scalar, an integer (or real) vector or any hashable value. With
        ``batch=True``: ``mechanism(data, rng, n)`` returns ``n`` independent outputs stacked
        along the first axis (much faster for vectorised mechanisms).
    x, x_neighbour : object
        Two neighbouring inputs (choose worst cases: the largest change the neighbouring
        relation allows).
    epsilon : float
        The epsilon the mechanism declares.
    trials : int
        Runs on each input (at least 100). A fraction ``selection`` of them chooses the events;
        the rest estimate their probabilities.
    rng : int, Generator or None
        Randomness of the audit (default seed 0: audits are reproducible).
    confidence : float
        Level of the one-sided bound (default 0.99).
    batch : bool
        Whether ``mechanism`` takes a third argument ``n`` and returns ``n`` outputs.
    statistic : callable or None
        Optional map from one output to a real number; events are then quantile bins of it.
        By default small output spaces are audited on exact outputs, real scalars on bins of
        the value, and vectors on bins of statistics chosen from the selection runs (a Laplace
        log-likelihood ratio, a projection, the most shifted coordinate).
    n_events : int
        Events carried from selection to estimation (Bonferroni factor of the bound).
    selection : float
        Fraction of the runs used to choose the events, in (0, 1).

    Returns
    -------
    AuditResult
        ``.lower_bound`` (>= 0) and ``.passed`` (``lower_bound <= epsilon``), with the best
        event and its empirical probabilities.

    Raises
    ------
    ParameterError
        For an invalid epsilon, trials, confidence or selection, or a batch mechanism that
        returns the wrong number of outputs.

    Notes
    -----
    The bound is valid for any mechanism, whatever the choice of events, because events are
    chosen on runs independent of those that estimate them, and the ``n_events`` bounds are
    combined with a Bonferroni correction. It is a *lower* bound: passing does not prove
    privacy (only the events tried are checked), but a bound above ``epsilon`` proves, at the
    stated confidence, that the mechanism is not epsilon-DP for this pair of inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from privpub.core import laplace
    >>> def mech(data, rng, n):
    ...     return laplace(np.full(n, data), epsilon=1.0, rng=rng)
    >>> result = audit_epsilon(mech, 0.0, 1.0, epsilon=1.0, trials=20_000, batch=True, rng=0)
    >>> result.passed, bool(0.5 < result.lower_bound <= 1.0)
    (True, True)
    >>> def broken(data, rng, n):  # noise scale halved
    ...     return laplace(np.full(n, data), epsilon=2.0, rng=rng)
    >>> audit_epsilon(broken, 0.0, 1.0, epsilon=1.0, trials=20_000, batch=True, rng=0).passed
    False
    """
    if not callable(mechanism):
        raise ParameterError(f"mechanism must be callable, got {type(mechanism).__name__}", param="mechanism")
    eps = check_epsilon(epsilon)
    n_sel, n_est, k_events, conf = split_trials(trials, selection, n_events, confidence, min_selection=50)
    n_trials, alpha = n_sel + n_est, 1.0 - conf

    gen = as_generator(rng)
    g_sel_x, g_sel_y, g_est_x, g_est_y = gen.spawn(4)
    mech = mechanism
    if statistic is not None:
        stat = statistic
        if batch:
            def mech(d: Any, g: np.random.Generator, n: int) -> NDArray[np.float64]:
                return np.array([float(stat(o)) for o in mechanism(d, g, n)])
        else:
            def mech(d: Any, g: np.random.Generator) -> float:
                return float(stat(mechanism(d, g)))

    sel_x = _run(mech, x, g_sel_x, n_sel, batch)
    sel_y = _run(mech, x_neighbour, g_sel_y, n_sel, batch)

    # -- choose how outputs become cells -----------------------------------------------------
    families: list[_Cells] = []
    num_x, num_y = _as_numeric(sel_x), _as_numeric(sel_y)
    exact = _exact_cells(sel_x, sel_y)
    if exact is not None:
        families.append(exact)
    if num_x is not None and num_y is not None and num_x.shape[1] == num_y.shape[1]:
        if num_x.shape[1] == 1:
            families.append(_statistic_cells(num_x[:, 0], num_y[:, 0], "output",
                                             lambda v: v[:, 0], "scalar"))
        else:
            for name, fn in _vector_statistics(num_x, num_y):
                families.append(_statistic_cells(fn(num_x), fn(num_y), name, fn, "vector"))
    if not families:
        raise ParameterError(
            "mechanism outputs have too many distinct values to audit exactly and are not numeric; "
            "pass statistic= to map each output to a number"
        )

    # -- selection ---------------------------------------------------------------------------
    scored: list[tuple[float, NDArray[np.int64], int, _Cells]] = []
    for fam in families:
        scored.extend(_best_events(fam, sel_x, sel_y, n_sel, alpha, k_events))
    scored.sort(key=lambda t: -t[0])
    chosen = scored[:k_events]

    # -- estimation on fresh runs -------------------------------------------------------------
    est_x = _run(mech, x, g_est_x, n_est, batch)
    est_y = _run(mech, x_neighbour, g_est_y, n_est, batch)
    a = alpha / (2 * len(chosen))
    best: tuple[float, float, str, float, float, str] | None = None
    assigned: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]] = {}
    for _, cells_sel, direction, fam in chosen:
        if id(fam) not in assigned:
            assigned[id(fam)] = (fam.assign(est_x), fam.assign(est_y))
        ex, ey = assigned[id(fam)]
        k1 = int(np.isin(ex, cells_sel).sum())
        k2 = int(np.isin(ey, cells_sel).sum())
        num, den = (k1, k2) if direction > 0 else (k2, k1)
        lb = float(_log_ratio_lower(np.array([num]), np.array([den]), n_est, a)[0])
        p, q = num / n_est, den / n_est
        point = math.log(p / q) if p > 0 and q > 0 else (math.inf if p > 0 else 0.0)
        where = "x" if direction > 0 else "x_neighbour"
        desc = f"{fam.label(cells_sel.tolist())} (more likely under {where})"
        if best is None or lb > best[0]:
            best = (lb, point, desc, p, q, fam.kind)
    assert best is not None
    lower = max(0.0, best[0])
    return AuditResult(
        lower_bound=lower,
        epsilon=eps,
        passed=bool(lower <= eps),
        estimate=best[1],
        event=best[2],
        p=best[3],
        q=best[4],
        trials=n_trials,
        confidence=conf,
        n_events=len(chosen),
        output_kind=best[5],
    )
