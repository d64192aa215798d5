"""Server side: joint-distribution estimation from LDP reports (paper Alg. 2 and the linear estimator).

Functions here take only reports plus public metadata (schema sizes, f); they never see raw records.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from privpub.core import check_positive_int, check_real
from privpub.errors import ParameterError
from privpub.ldp_synth._client import LDPReports
from privpub.ldp_synth._em_tree import EMBatch, em_tree_batch
from privpub.ldp_synth._kernels import DENSE_LIMIT, em_collapsed, linear_contract, project_simplex

__all__ = [
    "METHODS",
    "JointEstimate",
    "JointSource",
    "ReportStore",
    "axis_order",
    "em_work_bound",
    "estimate_joint",
    "expected_patterns",
]

#: joint estimators: the paper's EM, the unbiased linear estimator, linear + EM refinement
METHODS = ("em", "linear", "hybrid")

#: compact grouping keys before they could overflow int64
_KEY_LIMIT = 2**62

#: rescale likelihood rows to {1/rho, 1} when rho^m would exceed e^500 (spec 2.3: "rho^m > 1e250")
_RESCALE_LOG = 500.0

#: dense (complete) tree levels run about this many times faster per multiply-add than sparse ones
DENSE_SPEEDUP = 3.0

#: matrix products over the full pattern grid run about this many times faster per multiply-add
GRID_SPEEDUP = 10.0

#: fixed cost of one small matrix product (call and allocation), in sparse-equivalent multiply-adds
GRID_CALL_COST = 200.0

#: reference EM speed, sparse-equivalent multiply-adds per second on one core (measured 7e8-9e8 on
#: the project's 2-core AMD EPYC machine under load, rounded down); only used to predict times
EM_RATE = 5e8

#: warn when one batch of EMs could run longer than this (seconds on one reference core)
EM_WARN_SECONDS = 60.0

#: run a batch through the one-joint NumPy EM (:func:`em_collapsed`, no compilation) instead of the
#: compiled kernel when its worst case (every joint to ``max_iter``) is predicted below this many
#: seconds: compiling the kernel on a cold cache costs about 9 s of CPU, so small batches (the demo,
#: a few small joints) finish sooner without it; the two agree to float rounding (tests/ldp_synth)
NUMPY_EM_SECONDS = 0.5

#: predicted cost of one NumPy EM iteration of one joint: a fixed call overhead (seconds) plus
#: seconds per entry of its dense ``patterns x cells`` likelihood matrix (two products per iteration)
_NUMPY_EM_CALL = 25e-6
_NUMPY_EM_ENTRY = 2e-9

#: refuse EM on one joint whose prefix-tree buffers would exceed this many float64 pairs (1 GiB)
_MAX_BUFFER = 2**26


#: collapsed EM inputs of one joint: likelihood tables, pattern counts, per-pattern log scale, constant
_EMInputs = tuple[list[NDArray[np.float64]], NDArray[np.float64], NDArray[np.float64], float]


def _numpy_em_seconds(trees: Sequence[_Tree], max_iter: int) -> float:
    """Predicted worst-case seconds of the batch through the dense NumPy EM (inf where a joint's
    likelihood matrix would not be dense)."""
    total = 0.0
    for t in trees:
        entries = t.counts.shape[0] * math.prod(t.sizes.tolist())
        if entries > DENSE_LIMIT:
            return math.inf
        total += max_iter * (_NUMPY_EM_CALL + _NUMPY_EM_ENTRY * entries)
    return total


@dataclass(frozen=True)
class _Tree:
    """One joint's EM input: its users grouped by canonical pattern tuple, as a prefix tree.

    Axes are permuted by ``perm`` (the cheaper contraction order). ``counts`` are the user counts
    of the distinct tuples (lexicographic order of the permuted axes) and ``leaf`` their slots among
    the last level's nodes (a complete last level also has slots no user occupies, weight 0).
    ``npat[t]`` is ``G`` for a complete level, 0 for a sparse one; ``node_par`` and the set-bit
    lists ``ones[optr[i]:optr[i + 1]]`` describe the nodes of sparse levels. ``grid``: every level
    complete and the joint runs as matrix products over the full pattern grid.
    """

    attrs: tuple[int, ...]
    perm: tuple[int, ...]
    sizes: NDArray[np.int64]
    npat: NDArray[np.int64]
    pat0: NDArray[np.int64]
    lev: NDArray[np.int64]
    node_par: NDArray[np.int64]
    optr: NDArray[np.int64]
    ones: NDArray[np.int64]
    counts: NDArray[np.float64]
    leaf: NDArray[np.int64]
    log_scale: NDArray[np.float64]
    kconst: float
    rescale: bool
    work: float
    grid: bool = False

    @property
    def level_counts(self) -> list[int]:
        """Nodes per tree level 1..m (level m: the distinct pattern tuples)."""
        return [int(x) for x in np.diff(self.lev)]

    @property
    def buffer(self) -> int:
        """Floats in one of the kernel's two level buffers (forward and backward)."""
        sizes = [int(n) for n in self.sizes]
        width = math.prod(sizes)
        total = width
        for n, u_t in zip(sizes, self.level_counts):
            width //= n
            total += u_t * width
        return total


def _level(u_prev: int, u_sparse: int, n_pat: int, size: int, width: int, ones: float) -> tuple[bool, float]:
    """Layout of one prefix-tree level and its work per EM iteration (forward and backward).

    A level of ``u_prev`` parents, ``u_sparse`` distinct children among ``G = n_pat`` patterns,
    axis size ``n`` and ``R = width`` cells of the later axes costs ``2 (u_prev n R + u_sparse R (1 + ones))``
    multiply-adds when sparse (explicit nodes, one pass per set bit) and ``2 u_prev G n R`` when
    complete (every parent gets all ``G`` children; small dense products, about ``DENSE_SPEEDUP``
    times faster per multiply-add). Returns (complete?, work in sparse-equivalent multiply-adds).
    """
    sparse = 2.0 * (u_prev * size * width + u_sparse * width * (1.0 + ones))
    dense = 2.0 * u_prev * n_pat * size * width / DENSE_SPEEDUP
    return (True, dense) if dense <= sparse else (False, sparse)


def _grid_work(sizes: Sequence[int], n_patterns: Sequence[int]) -> float:
    """Work per EM iteration on the full pattern grid (sparse-equivalent multiply-adds).

    Contracting the axes in the given order costs ``2 sum_t G_1..G_{t-1} n_t G_t n_{t+1}..n_m``
    multiply-adds (forward and backward matrix products), plus one division per grid cell and the
    update; BLAS runs them about ``GRID_SPEEDUP`` times faster than the sparse tree loops, but each
    of the ``2 m`` products per iteration has a fixed cost of about ``GRID_CALL_COST``.
    """
    cells = math.prod(int(n) for n in sizes)
    grid = math.prod(int(g) for g in n_patterns)
    total, done = 2.0 * cells + grid, 1
    width = cells
    for n, g in zip(sizes, n_patterns):
        width //= int(n)
        total += 2.0 * done * int(n) * int(g) * width
        done *= int(g)
    return total / GRID_SPEEDUP + 2 * len(sizes) * GRID_CALL_COST


@functools.lru_cache(maxsize=4096)
def _axis_order_cached(axes: tuple[tuple[int, int, float], ...], n_users: int) -> tuple[tuple[int, ...], float]:
    m = len(axes)
    n_cells = math.prod(a[0] for a in axes)
    if m <= 4:
        cands = list(itertools.permutations(range(m)))
    else:
        cands = [tuple(sorted(range(m), key=lambda t: (axes[t][1], axes[t][0])))]
    best: tuple[float, tuple[int, ...]] | None = None
    for perm in cands:
        work, width, u_prev = 2.0 * n_cells, n_cells, 1
        for t in perm:
            size, n_pat, ones = axes[t]
            width //= size
            u_sparse = min(u_prev * n_pat, n_users)
            dense, w = _level(u_prev, u_sparse, n_pat, size, width, ones)
            work += w
            u_prev = u_prev * n_pat if dense else u_sparse
        work = min(work, _grid_work([axes[t][0] for t in perm], [axes[t][1] for t in perm]))
        if best is None or work < best[0]:
            best = (work, perm)
    assert best is not None
    return best[1], best[0]


def axis_order(sizes: Sequence[int], n_patterns: Sequence[int], mean_ones: Sequence[float],
               n_users: int) -> tuple[tuple[int, ...], float]:
    """The contraction order of a joint's prefix tree and its work bound per EM iteration.

    Level ``t`` of the tree holds at most ``min(N, prod_{s <= t} G_s)`` prefixes (``G_s`` distinct
    canonical patterns of axis ``s``); see :func:`_level` for the layout and cost of a level. Every
    order is scored for up to 4 axes; beyond that, axes are sorted by ``G``.

    Returns
    -------
    perm : tuple of int
        Axis positions in contraction order.
    work : float
        The work bound of that order (multiply-adds per EM iteration).
    """
    axes = tuple((int(n), int(g), round(float(o), 3)) for n, g, o in zip(sizes, n_patterns, mean_ones))
    return _axis_order_cached(axes, int(n_users))


def expected_patterns(size: int, n_users: int, flip_prob: float) -> float:
    """Bound on the expected number of distinct canonical patterns of one attribute among N reports.

    Uses only public metadata. A block ``s`` with ``h >= 1`` set bits has probability at most
    ``q^(h-1) p^(n-h+1)`` (its nearest one-hot code), the zero block (which also stands for
    all-ones) at most ``q p^(n-1) + p q^(n-1)``; ``E[#distinct] <= sum_s min(1, N P(s))``.
    """
    n = int(size)
    cap = float(n_users) if n >= 62 else float(min(n_users, max(1, 2**n - 1)))
    q = flip_prob / 2.0
    p = 1.0 - q
    total = min(1.0, n_users * (q * p ** (n - 1) + p * q ** (n - 1)))
    log_n, log_q, log_p = math.log(n_users), math.log(q), math.log(p)
    for h in range(1, n):  # h = n (all ones) is canonicalised to the zero block
        log_mass = log_n + (h - 1) * log_q + (n - h + 1) * log_p  # N P(s) for one block of weight h
        if n <= 1000:
            total += math.comb(n, h) * math.exp(min(log_mass, 0.0))
        else:
            log_comb = math.lgamma(n + 1) - math.lgamma(h + 1) - math.lgamma(n - h + 1)
            total += math.exp(log_comb + min(log_mass, 0.0))
        if total >= cap:
            break
    return min(total, cap)


def em_work_bound(sizes: Sequence[int], n_users: int, flip_prob: float, degree: int) -> tuple[float, int]:
    """Bound on the EM work of a whole degree-k network search, per EM iteration, from public metadata.

    Counts every joint the search estimates: all ``C(d, k+1)`` (k+1)-subsets, ``d - r`` joints of
    ``r + 1`` attributes for ``r < k`` (each bounded by the costliest such subset) and the ``d``
    1-way marginals. Each joint's work follows :func:`axis_order` with the pattern counts of
    :func:`expected_patterns` and ``n / 2`` set bits per pattern.

    Returns
    -------
    work : float
        Sparse-equivalent multiply-adds of one EM iteration of every joint; ``work * max_iter /
        EM_RATE`` is the worst-case time on one reference core (every joint runs to ``max_iter``).
    cells : int
        The largest joint's number of cells.
    """
    d = len(sizes)
    k = min(int(degree), d - 1)
    by_size: dict[int, int] = {}
    for n in sizes:
        by_size[int(n)] = by_size.get(int(n), 0) + 1
    axis = {n: (n, max(1, round(expected_patterns(n, n_users, flip_prob))), n / 2.0) for n in by_size}

    def subsets(m: int) -> list[tuple[float, int, int]]:
        """(work, cells, how many subsets) per multiset of m sizes."""
        out = []
        for combo in itertools.combinations_with_replacement(sorted(by_size), m):
            mult = math.prod(math.comb(by_size[n], combo.count(n)) for n in set(combo))
            if mult:
                _, work = _axis_order_cached(tuple(axis[n] for n in combo), int(n_users))
                out.append((work, math.prod(combo), mult))
        return out

    top = subsets(k + 1)
    total = sum(w * c for w, _, c in top)
    cells = max(x for _, x, _ in top)
    for r in range(1, k):
        total += (d - r) * max(w for w, _, _ in subsets(r + 1))
    total += sum(w * c for w, _, c in subsets(1))
    return total, cells


class JointSource(Protocol):
    """Anything that returns (estimated or exact) joint distributions over attribute subsets."""

    @property
    def sizes(self) -> tuple[int, ...]: ...

    def joint(self, attrs: Sequence[int]) -> NDArray[np.float64]:
        """The joint over ``attrs`` with axes in the given order (sums to 1)."""
        ...


@dataclass(frozen=True)
class JointEstimate:
    """One estimated joint distribution.

    Attributes
    ----------
    attrs : tuple of int
        The attributes (axes of ``p`` in this order).
    p : ndarray
        The estimate, >= 0 and summing to 1.
    n_iter : int
        EM iterations (0 for the linear estimator).
    converged : bool
        True iff the last EM iteration passed the tolerance test (always True for ``linear``).
    loglik : float or None
        Full log-likelihood of the reports at ``p`` (EM and hybrid only).
    var : ndarray or None
        Unbiased per-cell variance estimate of the linear estimator before projection (``linear``).
    method : str
    raw : ndarray or None
        The linear estimate before the simplex projection (``linear`` only; unbiased, may be < 0).
    """

    attrs: tuple[int, ...]
    p: NDArray[np.float64]
    n_iter: int
    converged: bool
    loglik: float | None
    var: NDArray[np.float64] | None
    method: str
    raw: NDArray[np.float64] | None = None


def _bits_of(ids: NDArray[np.int64], n_bits: int) -> NDArray[np.bool_]:
    return ((ids[:, None] >> np.arange(n_bits)[None, :]) & 1).astype(bool)


class _AttributeBlock:
    """Per-attribute pattern ids (computed once) and the likelihood tables of its patterns."""

    __slots__ = ("canon_ids", "canon_lam_has_one", "canon_patterns", "kconst", "mean_ones", "raw_counts",
                 "raw_ids", "raw_patterns", "size")

    def __init__(self, block: NDArray[np.bool_], f: float) -> None:
        size = block.shape[1]
        self.size = size
        if size <= 62:
            keys = block.astype(np.int64) @ (np.int64(1) << np.arange(size, dtype=np.int64))
            uniq, raw_ids = np.unique(keys, return_inverse=True)
            patterns = _bits_of(uniq, size)
        else:
            patterns, raw_ids = np.unique(block, axis=0, return_inverse=True)
        self.raw_ids = raw_ids.astype(np.int64).ravel()
        self.raw_patterns = patterns
        self.raw_counts = np.bincount(self.raw_ids, minlength=patterns.shape[0]).astype(np.float64)
        # canonical form for EM: an all-ones block has the same (constant) likelihood row as all-zeros
        ones = patterns.sum(axis=1)
        all_ones = ones == size
        canon = patterns.copy()
        canon[all_ones] = False
        canon_uniq, canon_of_raw = np.unique(canon, axis=0, return_inverse=True)
        self.canon_patterns = canon_uniq
        self.canon_ids = canon_of_raw.astype(np.int64).ravel()[self.raw_ids]
        self.canon_lam_has_one: NDArray[np.bool_] = np.asarray(canon_uniq.any(axis=1), dtype=bool)
        self.mean_ones = float(canon_uniq.sum(axis=1).mean())
        # log-likelihood constant of each raw pattern (spec 2.3): n ln p + (|s|+1) ln(q/p) + ln(rho)[all ones]
        p, q = 1.0 - f / 2.0, f / 2.0
        log_rho = 2.0 * math.log(p / q)
        self.kconst = size * math.log(p) + (ones + 1) * math.log(q / p) + log_rho * all_ones


def _group(ids: Sequence[NDArray[np.int64]], radices: Sequence[int]) -> tuple[list[NDArray[np.int64]], NDArray[np.float64]]:
    """Collapse users by their tuple of pattern ids: representative ids per group and group counts."""
    n = ids[0].shape[0]
    key = ids[0].copy()
    bound = int(radices[0])
    for t in range(1, len(ids)):
        r = int(radices[t])
        if bound * r >= _KEY_LIMIT:
            _, key = np.unique(key, return_inverse=True)
            key = key.astype(np.int64).ravel()
            bound = int(key.max()) + 1
        key = key * r + ids[t]
        bound *= r
    if bound <= 4 * n + 1024:
        counts_all = np.bincount(key, minlength=bound)
        present = np.flatnonzero(counts_all)
        # representative user per present key: any user with that key
        first = np.full(bound, -1, dtype=np.int64)
        first[key[::-1]] = np.arange(n - 1, -1, -1)
        reps = first[present]
        counts = counts_all[present].astype(np.float64)
    else:
        _, reps, counts_i = np.unique(key, return_index=True, return_counts=True)
        counts = counts_i.astype(np.float64)
    return [i[reps] for i in ids], counts


class ReportStore:
    """The server's view of N LDP reports: pattern ids, joint estimation and caches.

    Parameters
    ----------
    reports : LDPReports
        The collected reports and their public metadata (sizes, f).
    method : {"em", "linear", "hybrid"}
        Joint estimator. ``"em"`` is the paper's Alg. 2 (corrected likelihood, spec 2.2-2.3);
        ``"linear"`` is the unbiased estimator from de-biased bits projected onto the simplex
        (spec 2.3a; fast, poor at large f); ``"hybrid"`` starts EM on the linear estimate's support
        (mixed with 10% uniform) and runs at most ``refine_iter`` iterations.
    tol, max_iter : float, int
        EM stopping rule: ``max |P_t - P_{t-1}| < tol`` or ``max_iter`` iterations.
    stop : {"max_abs", "paper"}
        ``"paper"`` keeps the paper's signed rule (ablation only).
    refine_iter : int or None
        Iteration cap of the hybrid EM (None: ``max_iter``).

    Notes
    -----
    **Privacy:** post-processing of epsilon-LDP reports; no budget is spent here and no raw record
    is read. Exact speed-ups: users are collapsed by canonical projected pattern, per-attribute
    pattern ids and likelihood tables are computed once, and joints are cached by sorted attribute set.
    """

    def __init__(
        self,
        reports: LDPReports,
        *,
        method: str = "em",
        tol: float = 1e-6,
        max_iter: int = 1000,
        stop: str = "max_abs",
        refine_iter: int | None = None,
    ) -> None:
        if not isinstance(reports, LDPReports):
            raise ParameterError(f"reports must be LDPReports, got {type(reports).__name__}", param="reports")
        if method not in METHODS:
            raise ParameterError(f"method must be one of {list(METHODS)}, got {method!r}", param="method")
        if stop not in ("max_abs", "paper"):
            raise ParameterError(f"stop must be 'max_abs' or 'paper', got {stop!r}", param="stop")
        self.tol = check_real(tol, "tol")
        if self.tol <= 0:
            raise ParameterError(f"tol must be > 0, got {self.tol}", param="tol")
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.refine_iter = None if refine_iter is None else check_positive_int(refine_iter, "refine_iter")
        self.method = method
        self.stop = stop
        self.reports = reports
        self.f = reports.flip_prob
        self.q = self.f / 2.0
        self.p_keep = 1.0 - self.q
        ratio = self.p_keep / self.q
        if not ratio < 1e150:  # rho = ratio^2 must be a finite float (f below about 2e-150 is not)
            raise ParameterError(
                f"flip_prob must be at least 2e-150 for the estimator (the likelihood ratio (1 - f/2)^2 / (f/2)^2 "
                f"overflows below), got {self.f!r}"
            , param="flip_prob")
        self.rho = ratio**2
        self.n_users = reports.n_users
        offsets = reports.offsets
        self._blocks = [
            _AttributeBlock(reports.bits[:, offsets[j]:offsets[j + 1]], self.f) for j in range(len(reports.sizes))
        ]
        self._cache: dict[tuple[tuple[int, ...], str], JointEstimate] = {}
        self.n_estimates = 0
        #: multiply-adds spent in EM so far (work per iteration x iterations, summed over joints)
        self.em_work = 0.0
        self._warned = False
        # all attributes' canonical patterns, numbered globally: set bits (CSR) and row bases
        pats = [b.canon_patterns for b in self._blocks]
        self._pat_off = np.concatenate([[0], np.cumsum([p.shape[0] for p in pats])]).astype(np.int64)
        self._ones_idx = np.concatenate([np.nonzero(p)[1] for p in pats]).astype(np.int64)
        self._ones_ptr = np.concatenate([[0], np.cumsum(np.concatenate([p.sum(axis=1) for p in pats]))]).astype(np.int64)

    # -- metadata ----------------------------------------------------------------------------
    @property
    def sizes(self) -> tuple[int, ...]:
        return self.reports.sizes

    @property
    def d(self) -> int:
        return len(self.reports.sizes)

    # -- estimation --------------------------------------------------------------------------
    def _check_attrs(self, attrs: Sequence[int]) -> tuple[int, ...]:
        out = tuple(int(a) for a in attrs)
        if not out or len(set(out)) != len(out) or min(out) < 0 or max(out) >= self.d:
            raise ParameterError(f"attrs must be distinct attribute indices in [0, {self.d - 1}], got {list(attrs)}", param="attrs")
        return out

    def estimate(self, attrs: Sequence[int], *, method: str | None = None) -> JointEstimate:
        """Estimate the joint over ``attrs`` (axes in the caller's order); cached by sorted set."""
        a = self._check_attrs(attrs)
        meth = self.method if method is None else method
        if meth not in METHODS:
            raise ParameterError(f"method must be one of {list(METHODS)}, got {meth!r}", param="method")
        key = (tuple(sorted(a)), meth)
        est = self._cache.get(key)
        if est is None:
            if meth == "linear":
                raw, var = self._linear(key[0])
                est = JointEstimate(key[0], project_simplex(raw), 0, True, None, var, meth, raw)
                self._cache[key] = est
                self.n_estimates += 1
            else:
                self._em_batch([key[0]], meth)
                est = self._cache[key]
        if a == est.attrs:
            return est
        perm = [est.attrs.index(x) for x in a]
        return JointEstimate(a, np.transpose(est.p, perm), est.n_iter, est.converged, est.loglik,
                             None if est.var is None else np.transpose(est.var, perm), est.method,
                             None if est.raw is None else np.transpose(est.raw, perm))

    def joint(self, attrs: Sequence[int]) -> NDArray[np.float64]:
        """The estimated joint over ``attrs`` (axes in the given order)."""
        return self.estimate(attrs).p

    def _linear(self, attrs: tuple[int, ...]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        blocks = [self._blocks[a] for a in attrs]
        reps, counts = _group([b.raw_ids for b in blocks], [b.raw_patterns.shape[0] for b in blocks])
        scale = 1.0 - self.f
        ys = [(b.raw_patterns.astype(np.float64) - self.q) / scale for b in blocks]
        tabs = [y[r] for y, r in zip(ys, reps)]
        n = float(self.n_users)
        est = linear_contract(tabs, counts) / n
        m2 = linear_contract([t * t for t in tabs], counts) / n
        a = self.q * self.p_keep / scale**2
        var = np.maximum(m2 - est, a ** len(attrs)) / n
        return est, var

    def _em_inputs(self, attrs: tuple[int, ...]) -> _EMInputs:
        """Reference path: collapsed likelihood tables, pattern counts, per-pattern log scale, constant.

        Inputs of the one-joint dense EM :func:`em_collapsed` (kept as the reference the batched
        kernel is tested against; the library itself runs every EM through :meth:`_run_em`).
        """
        blocks = [self._blocks[a] for a in attrs]
        reps, counts = _group([b.canon_ids for b in blocks], [b.canon_patterns.shape[0] for b in blocks])
        m = len(attrs)
        log_rho = math.log(self.rho)
        rescale = m * log_rho > _RESCALE_LOG
        tabs = []
        log_scale = np.zeros(counts.shape[0])
        for b, r in zip(blocks, reps):
            pat = b.canon_patterns[r]
            if rescale:
                has = np.asarray(b.canon_lam_has_one, dtype=bool)[r]
                tabs.append(np.where(pat, 1.0, np.where(has[:, None], 1.0 / self.rho, 1.0)))
                log_scale += log_rho * has
            else:
                tabs.append(np.where(pat, self.rho, 1.0))
        kconst = math.fsum(float(b.raw_counts @ b.kconst) for b in blocks)
        return tabs, counts, log_scale, kconst

    def _em_reference(self, attrs: Sequence[int], init: NDArray[np.float64] | None = None,
                      max_iter: int | None = None) -> tuple[NDArray[np.float64], int, bool, float]:
        """One joint through the dense reference EM (:func:`em_collapsed`); for tests and benchmarks."""
        key = tuple(sorted(self._check_attrs(attrs)))
        tabs, counts, log_scale, kconst = self._em_inputs(key)
        weights = counts / counts.sum()
        p, n_iter, converged, z = em_collapsed(tabs, weights, tol=self.tol,
                                               max_iter=self.max_iter if max_iter is None else max_iter,
                                               stop=self.stop, init=init)
        loglik = float(counts @ (np.log(z) + log_scale)) + kconst
        return p, n_iter, converged, loglik

    def _tree(self, attrs: tuple[int, ...]) -> _Tree:
        """Group the users of a joint by canonical pattern tuple and lay the tuples out as a prefix tree.

        Each level is complete or sparse by :func:`_level`; if the full pattern grid (every level
        complete, run as matrix products) is cheaper by :func:`_grid_work`, the joint runs on it.
        """
        blocks = [self._blocks[a] for a in attrs]
        n_pat = [b.canon_patterns.shape[0] for b in blocks]
        perm, _ = axis_order([b.size for b in blocks], n_pat, [b.mean_ones for b in blocks], self.n_users)
        reps, counts = _group([blocks[t].canon_ids for t in perm], [n_pat[t] for t in perm])
        sizes = [blocks[t].size for t in perm]
        grid_work = _grid_work(sizes, [n_pat[t] for t in perm])
        tree = self._layout(attrs, perm, reps, counts, grid=False)
        if grid_work < tree.work:
            tree = self._layout(attrs, perm, reps, counts, grid=True)
        return tree

    def _layout(self, attrs: tuple[int, ...], perm: tuple[int, ...], reps: list[NDArray[np.int64]],
                counts: NDArray[np.float64], *, grid: bool) -> _Tree:
        blocks = [self._blocks[a] for a in attrs]
        n_leaf = counts.shape[0]
        changed = np.zeros(n_leaf, dtype=bool)
        changed[0] = True
        prev = np.zeros(n_leaf, dtype=np.int64)  # node of each tuple's prefix at the previous level
        u_prev = 1
        pars, cnts, ones, lev, npat = [], [], [], [0], []
        width = math.prod(b.size for b in blocks)
        work = 2.0 * width
        rescale = len(attrs) * math.log(self.rho) > _RESCALE_LOG
        log_scale = np.zeros(n_leaf)
        for t, col in zip(perm, reps):
            b = blocks[t]
            g_t = b.canon_patterns.shape[0]
            width //= b.size
            changed = changed.copy()
            changed[1:] |= col[1:] != col[:-1]
            dense, w = _level(u_prev, int(changed.sum()), g_t, b.size, width, b.mean_ones)
            dense = dense or grid
            work += w
            if dense:
                prev = prev * g_t + col
                u_prev *= g_t
                pars.append(np.zeros(u_prev, dtype=np.int64))
                cnts.append(np.zeros(u_prev, dtype=np.int64))
            else:
                pars.append(prev[changed])
                gidx = col[changed] + self._pat_off[attrs[t]]
                cnt = self._ones_ptr[gidx + 1] - self._ones_ptr[gidx]
                start = np.repeat(self._ones_ptr[gidx] - (np.cumsum(cnt) - cnt), cnt)
                ones.append(self._ones_idx[start + np.arange(start.size)])
                cnts.append(cnt)
                prev = np.cumsum(changed) - 1
                u_prev = int(prev[-1]) + 1
            npat.append(g_t if dense else 0)
            lev.append(lev[-1] + u_prev)
            if rescale:
                log_scale += math.log(self.rho) * b.canon_lam_has_one[col]
        if grid:
            work = _grid_work([b.size for b in (blocks[t] for t in perm)],
                              [b.canon_patterns.shape[0] for b in (blocks[t] for t in perm)])
        optr = np.concatenate([[0], np.cumsum(np.concatenate(cnts))]).astype(np.int64)
        kconst = math.fsum(float(b.raw_counts @ b.kconst) for b in blocks)
        return _Tree(attrs, tuple(perm), np.array([blocks[t].size for t in perm], dtype=np.int64),
                     np.array(npat, dtype=np.int64), np.array([self._pat_off[attrs[t]] for t in perm], dtype=np.int64),
                     np.asarray(lev, dtype=np.int64), np.concatenate(pars), optr,
                     np.concatenate(ones) if ones else np.zeros(0, dtype=np.int64), counts, prev.astype(np.int64),
                     log_scale, kconst, rescale, work, grid)

    def _run_em(self, keys: Sequence[tuple[int, ...]], inits: Sequence[NDArray[np.float64] | None],
                max_iter: int, method: str) -> None:
        """Run the EMs of sorted attribute sets ``keys`` as one batch and cache the estimates."""
        trees = [self._tree(k) for k in keys]
        biggest = max(t.buffer for t in trees)
        if biggest > _MAX_BUFFER:
            worst = trees[[t.buffer for t in trees].index(biggest)]
            raise ParameterError(
                f"EM on attributes {list(worst.attrs)} needs {biggest * 16 / 2**30:.1f} GiB of working memory "
                f"({worst.counts.shape[0]} distinct report patterns, {math.prod(worst.sizes.tolist())} cells); "
                "use the linear estimator for domains this large", param="method", fix={"method": "linear"})
        seconds = sum(t.work for t in trees) * max_iter / EM_RATE
        if seconds > EM_WARN_SECONDS and not self._warned:
            self._warned = True
            worst = max(trees, key=lambda t: t.work)
            warnings.warn(
                f"EM on {len(trees)} joint(s) may take up to ~{seconds / 60:.0f} min on one core (up to {max_iter} "
                f"iterations each; the costliest, attributes {list(worst.attrs)}, has "
                f"{worst.counts.shape[0]} distinct report patterns over {math.prod(worst.sizes.tolist())} cells). "
                "method='linear' takes seconds; smaller domains or a smaller f make EM faster",
                UserWarning,
                stacklevel=3,
            )
        if _numpy_em_seconds(trees, max_iter) <= NUMPY_EM_SECONDS:
            for t, init in zip(trees, inits):
                est, iters, conv, ll = self._em_reference(t.attrs, init=init, max_iter=max_iter)
                self._cache[(t.attrs, method)] = JointEstimate(t.attrs, est, iters, conv, ll, None, method)
                self.n_estimates += 1
                self.em_work += t.work * iters
            return
        p0 = []
        for t, init in zip(trees, inits):
            n_cells = math.prod(t.sizes.tolist())
            if init is None:
                p0.append(np.full(n_cells, 1.0 / n_cells))
            else:
                p0.append(np.transpose(np.asarray(init, dtype=np.float64), t.perm).ravel())

        def off(arrays: Sequence[NDArray[Any]]) -> NDArray[np.int64]:
            return np.concatenate([[0], np.cumsum([a.shape[0] for a in arrays])]).astype(np.int64)

        leaf_w = []
        for t in trees:
            wt = np.zeros(t.level_counts[-1])
            wt[t.leaf] = t.counts / t.counts.sum()
            leaf_w.append(wt)
        log_rho = math.log(self.rho)
        delta = np.array([-math.expm1(-log_rho) if t.rescale else self.rho - 1.0 for t in trees])
        base1 = np.array([1.0 / self.rho if t.rescale else 1.0 for t in trees])
        batch = EMBatch(
            p=np.concatenate(p0), p_off=off(p0), w=np.concatenate(leaf_w), leaf_off=off(leaf_w),
            sizes=np.concatenate([t.sizes for t in trees]), npat=np.concatenate([t.npat for t in trees]),
            pat0=np.concatenate([t.pat0 for t in trees]), size_off=off([t.sizes for t in trees]),
            lev=np.concatenate([t.lev for t in trees]), node_par=np.concatenate([t.node_par for t in trees]),
            node_off=off([t.node_par for t in trees]), optr=np.concatenate([t.optr for t in trees]),
            ones=np.concatenate([t.ones for t in trees]), ones_off=off([t.ones for t in trees]),
            base1=base1, delta=delta, grid=np.array([t.grid for t in trees], dtype=bool),
        )
        p, z, n_iter, converged = em_tree_batch(
            batch, self._ones_ptr, self._ones_idx, tol=self.tol,
            max_iter=np.full(len(trees), max_iter, dtype=np.int64), stop=self.stop,
            cost=np.array([t.work for t in trees]),
        )
        p_off, z_off = off(p0), off(leaf_w)
        for j, t in enumerate(trees):
            pj = p[p_off[j]:p_off[j + 1]].reshape(t.sizes.tolist())
            pj = np.ascontiguousarray(np.transpose(pj, np.argsort(t.perm)))
            zj = z[z_off[j]:z_off[j + 1]][t.leaf]
            loglik = float(t.counts @ (np.log(zj) + t.log_scale)) + t.kconst
            self._cache[(t.attrs, method)] = JointEstimate(t.attrs, pj, int(n_iter[j]), bool(converged[j]), loglik,
                                                          None, method)
            self.n_estimates += 1
            self.em_work += t.work * int(n_iter[j])

    def _hybrid_init(self, attrs: tuple[int, ...]) -> NDArray[np.float64]:
        raw, _ = self._linear(attrs)
        proj = project_simplex(raw)
        support = proj > 0
        out: NDArray[np.float64] = 0.9 * proj + 0.1 * support / support.sum()
        return out

    def prefetch(self, attr_sets: Sequence[Sequence[int]]) -> None:
        """Estimate many joints at once: every EM (and hybrid) joint runs in one batched kernel call.

        Exact: each joint stops at its own iteration, as if run alone (up to float rounding).
        Joints already cached are skipped; ``linear`` estimates one by one (a single pass each).
        """
        todo: dict[tuple[int, ...], None] = {}
        for attrs in attr_sets:
            key = tuple(sorted(self._check_attrs(attrs)))
            if (key, self.method) not in self._cache:
                todo[key] = None
        if not todo:
            return
        if self.method == "linear":
            for key in todo:
                self.estimate(key)
            return
        self._em_batch(list(todo), self.method)

    def _em_batch(self, keys: Sequence[tuple[int, ...]], method: str) -> None:
        if method == "hybrid":
            inits: list[NDArray[np.float64] | None] = [self._hybrid_init(k) for k in keys]
            max_iter = self.refine_iter if self.refine_iter is not None else self.max_iter
        else:
            inits = [None] * len(keys)
            max_iter = self.max_iter
        self._run_em(keys, inits, max_iter, method)

    @property
    def cache_size(self) -> int:
        return len(self._cache)


def estimate_joint(
    store: ReportStore, attrs: Sequence[int], *, method: str | None = None
) -> JointEstimate:
    """Estimate the joint distribution of ``attrs`` from the reports in ``store`` (paper Alg. 2).

    Parameters
    ----------
    store : ReportStore
    attrs : sequence of int
        Attribute indices; the result's axes follow this order (cached by the sorted set).
    method : {"em", "linear", "hybrid"} or None
        Overrides the store's method.

    Returns
    -------
    JointEstimate

    Notes
    -----
    **Privacy:** post-processing of the reports (no budget spent).

    Examples
    --------
    >>> from privpub.ldp_synth import perturb_codes
    >>> gen = np.random.default_rng(0)
    >>> codes = np.stack([gen.integers(2, size=5000), gen.integers(3, size=5000)], axis=1)
    >>> store = ReportStore(perturb_codes(codes, [2, 3], flip_prob=0.2, rng=1))
    >>> est = estimate_joint(store, [0, 1])
    >>> est.p.shape, round(float(est.p.sum()), 12), est.converged
    ((2, 3), 1.0, True)
    """
    return store.estimate(attrs, method=method)
