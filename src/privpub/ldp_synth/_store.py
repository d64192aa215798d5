"""Server side: joint-distribution estimation from LDP reports (paper Alg. 2 and the linear estimator).

Functions here take only reports plus public metadata (schema sizes, f); they never see raw records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from privpub.core import check_positive_int, check_real
from privpub.errors import ParameterError
from privpub.ldp_synth._client import LDPReports
from privpub.ldp_synth._kernels import em_batched, em_collapsed, linear_contract, outer_rows, project_simplex

__all__ = ["METHODS", "JointEstimate", "JointSource", "ReportStore", "estimate_joint"]

#: joint estimators: the paper's EM, the unbiased linear estimator, linear + EM refinement
METHODS = ("em", "linear", "hybrid")

#: max cells (joints x patterns x cells) of one batched EM tensor
BATCH_LIMIT = 4_000_000

#: joints with at most this many patterns x cells run batched (small EMs are Python-overhead bound)
BATCH_MAX_JOINT = 16_384

#: compact grouping keys before they could overflow int64
_KEY_LIMIT = 2**62


#: collapsed EM inputs of one joint: likelihood tables, pattern counts, per-pattern log scale, constant
_EMInputs = tuple[list[NDArray[np.float64]], NDArray[np.float64], NDArray[np.float64], float]


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

    __slots__ = ("canon_ids", "canon_lam_has_one", "canon_patterns", "kconst", "raw_counts", "raw_ids",
                 "raw_patterns", "size")

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
        self.canon_lam_has_one = canon_uniq.any(axis=1)
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
            raise ParameterError(f"reports must be LDPReports, got {type(reports).__name__}")
        if method not in METHODS:
            raise ParameterError(f"method must be one of {list(METHODS)}, got {method!r}")
        if stop not in ("max_abs", "paper"):
            raise ParameterError(f"stop must be 'max_abs' or 'paper', got {stop!r}")
        self.tol = check_real(tol, "tol")
        if self.tol <= 0:
            raise ParameterError(f"tol must be > 0, got {self.tol}")
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.refine_iter = None if refine_iter is None else check_positive_int(refine_iter, "refine_iter")
        self.method = method
        self.stop = stop
        self.reports = reports
        self.f = reports.flip_prob
        self.q = self.f / 2.0
        self.p_keep = 1.0 - self.q
        self.rho = (self.p_keep / self.q) ** 2
        self.n_users = reports.n_users
        offsets = reports.offsets
        self._blocks = [
            _AttributeBlock(reports.bits[:, offsets[j]:offsets[j + 1]], self.f) for j in range(len(reports.sizes))
        ]
        self._cache: dict[tuple[tuple[int, ...], str], JointEstimate] = {}
        self.n_estimates = 0

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
            raise ParameterError(f"attrs must be distinct attribute indices in [0, {self.d - 1}], got {list(attrs)}")
        return out

    def estimate(self, attrs: Sequence[int], *, method: str | None = None) -> JointEstimate:
        """Estimate the joint over ``attrs`` (axes in the caller's order); cached by sorted set."""
        a = self._check_attrs(attrs)
        meth = self.method if method is None else method
        if meth not in METHODS:
            raise ParameterError(f"method must be one of {list(METHODS)}, got {meth!r}")
        key = (tuple(sorted(a)), meth)
        est = self._cache.get(key)
        if est is None:
            est = self._estimate_sorted(key[0], meth)
            self._cache[key] = est
            self.n_estimates += 1
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
        """Collapsed likelihood tables, pattern counts, per-pattern log scale and the loglik constant."""
        blocks = [self._blocks[a] for a in attrs]
        reps, counts = _group([b.canon_ids for b in blocks], [b.canon_patterns.shape[0] for b in blocks])
        m = len(attrs)
        log_rho = math.log(self.rho)
        rescale = m * log_rho > 500.0
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

    def _em(self, attrs: tuple[int, ...], init: NDArray[np.float64] | None, max_iter: int
            ) -> tuple[NDArray[np.float64], int, bool, float]:
        tabs, counts, log_scale, kconst = self._em_inputs(attrs)
        weights = counts / counts.sum()
        p, n_iter, converged, z = em_collapsed(tabs, weights, tol=self.tol, max_iter=max_iter,
                                               stop=self.stop, init=init)
        loglik = float(counts @ (np.log(z) + log_scale)) + kconst
        return p, n_iter, converged, loglik

    def prefetch(self, attr_sets: Sequence[Sequence[int]]) -> None:
        """Estimate many joints at once (EM only): same-shape EMs run batched in one tensor.

        Exact: each joint stops at its own iteration, as if run alone (up to float rounding).
        Joints already cached are skipped; other methods fall back to one-by-one estimation.
        """
        todo: dict[tuple[int, ...], None] = {}
        for attrs in attr_sets:
            key = tuple(sorted(self._check_attrs(attrs)))
            if (key, self.method) not in self._cache:
                todo[key] = None
        if self.method != "em":
            for key in todo:
                self.estimate(key)
            return
        by_shape: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for key in todo:
            by_shape.setdefault(tuple(self.sizes[a] for a in key), []).append(key)
        for shape, keys in by_shape.items():
            n_cells = math.prod(shape)
            inputs = [self._em_inputs(k) for k in keys]
            small = [i for i, inp in enumerate(inputs) if inp[1].shape[0] * n_cells <= BATCH_MAX_JOINT]
            for i in sorted(set(range(len(keys))) - set(small)) if len(small) > 1 else range(len(keys)):
                self._store_em(keys[i], inputs[i])  # large joints: BLAS per joint is already efficient
            if len(small) <= 1:
                continue
            small.sort(key=lambda i: inputs[i][1].shape[0])  # similar pattern counts share a batch
            start = 0
            while start < len(small):  # chunk to bound memory (B * U * D cells)
                stop, u_max = start, 0
                while stop < len(small):
                    u_new = max(u_max, inputs[small[stop]][1].shape[0])
                    if stop > start and (stop - start + 1) * u_new * n_cells > BATCH_LIMIT:
                        break
                    u_max, stop = u_new, stop + 1
                chunk = small[start:stop]
                self._run_batch([keys[i] for i in chunk], [inputs[i] for i in chunk], shape, u_max)
                start = stop

    def _store_em(self, key: tuple[int, ...], inputs: _EMInputs) -> None:
        tabs, counts, log_scale, kconst = inputs
        p, n_iter, converged, z = em_collapsed(tabs, counts / counts.sum(), tol=self.tol, max_iter=self.max_iter,
                                               stop=self.stop)
        loglik = float(counts @ (np.log(z) + log_scale)) + kconst
        self._cache[(key, "em")] = JointEstimate(key, p, n_iter, converged, loglik, None, "em")
        self.n_estimates += 1

    def _run_batch(self, keys: Sequence[tuple[int, ...]], inputs: Sequence[_EMInputs], shape: tuple[int, ...],
                   u_max: int) -> None:
        n_cells = math.prod(shape)
        lam = np.ones((len(keys), u_max, n_cells))
        weights = np.zeros((len(keys), u_max))
        for b, (tabs, counts, _, _) in enumerate(inputs):
            u = counts.shape[0]
            lam[b, :u] = outer_rows(tabs)
            weights[b, :u] = counts / counts.sum()
        p, n_iter, converged, z = em_batched(lam, weights, tol=self.tol, max_iter=self.max_iter, stop=self.stop)
        for b, key in enumerate(keys):
            tabs, counts, log_scale, kconst = inputs[b]
            u = counts.shape[0]
            loglik = float(counts @ (np.log(z[b, :u]) + log_scale)) + kconst
            self._cache[(key, "em")] = JointEstimate(key, p[b].reshape(shape), int(n_iter[b]), bool(converged[b]),
                                                     loglik, None, "em")
            self.n_estimates += 1

    def _estimate_sorted(self, attrs: tuple[int, ...], method: str) -> JointEstimate:
        if method == "linear":
            raw, var = self._linear(attrs)
            return JointEstimate(attrs, project_simplex(raw), 0, True, None, var, method, raw)
        init = None
        max_iter = self.max_iter
        if method == "hybrid":
            raw, _ = self._linear(attrs)
            proj = project_simplex(raw)
            support = proj > 0
            init = 0.9 * proj + 0.1 * support / support.sum()
            max_iter = self.refine_iter if self.refine_iter is not None else self.max_iter
        p, n_iter, converged, loglik = self._em(attrs, init, max_iter)
        return JointEstimate(attrs, p, n_iter, converged, loglik, None, method)

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
