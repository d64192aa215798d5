"""Server side: EM (collapsed vs per-user, likelihood, accuracy) and the linear estimator (spec 7.4-7.6)."""

from __future__ import annotations

import inspect
import itertools
import math
import re

import numpy as np
import pytest

from privpub.errors import ParameterError
from privpub.ldp_synth import LDPReports, ReportStore, encode, estimate_joint, perturb_codes
from privpub.ldp_synth._kernels import em_collapsed, project_simplex
from privpub.ldp_synth._store import _group


def _sample(joint: np.ndarray, n: int, seed: int) -> np.ndarray:
    gen = np.random.default_rng(seed)
    cells = gen.choice(joint.size, size=n, p=joint.ravel())
    return np.stack(np.unravel_index(cells, joint.shape), axis=1).astype(np.int64)


def _empirical(codes: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    key = np.ravel_multi_index(tuple(codes.T), sizes)
    return np.bincount(key, minlength=math.prod(sizes)).reshape(sizes) / codes.shape[0]


def _avd(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a - b).sum())


def _per_user_em(bits: np.ndarray, sizes: tuple[int, ...], f: float, tol: float, max_iter: int):
    """Brute force: per-user likelihood P(s|w) = prod over all bits of p or q, no grouping."""
    p, q = 1 - f / 2, f / 2
    cells = list(itertools.product(*[range(s) for s in sizes]))
    onehots = encode(np.array(cells), sizes).astype(bool)  # (D, L)
    same = bits[:, None, :] == onehots[None, :, :]
    lik = np.exp(np.where(same, math.log(p), math.log(q)).sum(axis=2))  # (N, D)
    prob = np.full(len(cells), 1.0 / len(cells))
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 - returned
        post = lik * prob
        post /= post.sum(axis=1, keepdims=True)
        new = post.mean(axis=0)
        done = np.max(np.abs(new - prob)) < tol
        prob = new
        if done:
            break
    loglik = float(np.log(lik @ prob).sum())
    return prob.reshape(sizes), n_iter, loglik


@pytest.mark.parametrize("f", [0.3, 0.7])
def test_collapsed_em_equals_per_user_em(f: float) -> None:
    sizes = (2, 3, 4)
    truth = np.random.default_rng(1).dirichlet(np.ones(24)).reshape(sizes)
    codes = _sample(truth, 600, seed=2)
    rep = perturb_codes(codes, sizes, flip_prob=f, rng=3)
    store = ReportStore(rep, tol=1e-8, max_iter=300)
    est = estimate_joint(store, [0, 1, 2])
    brute, n_iter, loglik = _per_user_em(rep.bits, sizes, f, 1e-8, 300)
    assert np.max(np.abs(est.p - brute)) < 1e-9
    assert est.n_iter == n_iter
    assert est.loglik is not None and math.isclose(est.loglik, loglik, rel_tol=1e-9)


def test_rescaled_likelihood_for_tiny_f_matches() -> None:
    """At very small f the likelihood rows are rescaled (rho^m huge); the result is unchanged."""
    sizes = (2, 2, 2)
    codes = _sample(np.full(sizes, 1 / 8), 300, seed=4)
    rep = perturb_codes(codes, sizes, flip_prob=1e-30, rng=5)
    est = estimate_joint(ReportStore(rep), [0, 1, 2])
    np.testing.assert_allclose(est.p, _empirical(codes, sizes), atol=1e-6)
    assert np.isfinite(est.loglik)


def test_loglik_never_decreases() -> None:
    sizes = (3, 3)
    codes = _sample(np.random.default_rng(0).dirichlet(np.ones(9)).reshape(sizes), 3000, seed=1)
    rep = perturb_codes(codes, sizes, flip_prob=0.6, rng=2)
    store = ReportStore(rep)
    prev = -np.inf
    p0 = None
    blocks = [store._blocks[a] for a in (0, 1)]
    reps, counts = _group([b.canon_ids for b in blocks], [b.canon_patterns.shape[0] for b in blocks])
    tabs = [np.where(b.canon_patterns[r], store.rho, 1.0) for b, r in zip(blocks, reps)]
    for _ in range(40):  # one EM step at a time; the log-likelihood (up to its constant) must not fall
        p0, _, _, z = em_collapsed(tabs, counts / counts.sum(), max_iter=1, init=p0)
        ll = float(counts @ np.log(z))
        assert ll >= prev - 1e-9
        prev = ll


def test_em_output_is_distribution_and_transpose_consistent() -> None:
    sizes = (2, 3)
    codes = _sample(np.array([[0.1, 0.2, 0.3], [0.05, 0.15, 0.2]]), 5000, seed=3)
    store = ReportStore(perturb_codes(codes, sizes, flip_prob=0.5, rng=4))
    ab = estimate_joint(store, [0, 1])
    ba = estimate_joint(store, [1, 0])
    assert np.all(ab.p >= 0) and math.isclose(float(ab.p.sum()), 1.0, rel_tol=1e-12)
    np.testing.assert_array_equal(ba.p, ab.p.T)
    assert store.n_estimates == 1  # cached by sorted attribute set


@pytest.mark.statistical
def test_em_2x3_recovery_at_f_half() -> None:
    truth = np.array([[0.3, 0.1, 0.05], [0.05, 0.2, 0.3]])
    codes = _sample(truth, 200_000, seed=5)
    est = estimate_joint(ReportStore(perturb_codes(codes, (2, 3), flip_prob=0.5, rng=6)), [0, 1])
    assert _avd(est.p, _empirical(codes, (2, 3))) < 0.03


@pytest.mark.statistical
def test_em_3way_recovery_small_f() -> None:
    sizes = (2, 3, 2)
    truth = np.random.default_rng(7).dirichlet(np.ones(12)).reshape(sizes)
    codes = _sample(truth, 20_000, seed=8)
    est = estimate_joint(ReportStore(perturb_codes(codes, sizes, flip_prob=0.02, rng=9)), [0, 1, 2])
    assert _avd(est.p, _empirical(codes, sizes)) < 0.01


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["em", "linear"])
def test_error_shrinks_with_n(method: str) -> None:
    """Mean AVD over 5 seeds: N = 1e5 beats N = 1e4 (the error scales like 1/sqrt(N))."""
    sizes = (2, 3, 2)
    truth = np.random.default_rng(10).dirichlet(np.ones(12) * 2).reshape(sizes)
    errs = {}
    for n in (10_000, 100_000):
        vals = []
        for seed in range(5):
            codes = _sample(truth, n, seed=100 + seed)
            store = ReportStore(perturb_codes(codes, sizes, flip_prob=0.4, rng=200 + seed), method=method)
            vals.append(_avd(estimate_joint(store, [0, 1, 2]).p, _empirical(codes, sizes)))
        errs[n] = np.mean(vals)
    assert errs[100_000] < 0.6 * errs[10_000]


def _linear_runs(n_runs: int, n: int, f: float):
    sizes = (2, 3)
    codes = _sample(np.array([[0.3, 0.1, 0.05], [0.05, 0.2, 0.3]]), n, seed=11)
    truth = _empirical(codes, sizes)
    raws, vars_ = [], []
    for seed in range(n_runs):
        est = ReportStore(perturb_codes(codes, sizes, flip_prob=f, rng=seed), method="linear").estimate([0, 1])
        raws.append(est.raw)
        vars_.append(est.var)
    return truth, np.array(raws), np.array(vars_), codes


@pytest.mark.statistical
def test_linear_estimator_unbiased_and_variance_formula() -> None:
    f, n = 0.5, 2000
    truth, raws, vars_, _ = _linear_runs(400, n, f)
    mean = raws.mean(axis=0)
    se = raws.std(axis=0, ddof=1) / math.sqrt(raws.shape[0])
    assert np.all(np.abs(mean - truth) < 3 * se + 1e-12)
    # exact variance (spec 2.3a): N Var = sum_S a^{m-|S|} P_S(w_S) - P(w)
    q = f / 2
    a = q * (1 - q) / (1 - f) ** 2
    p_row, p_col = truth.sum(axis=1), truth.sum(axis=0)
    formula = (a * a + a * p_row[:, None] + a * p_col[None, :]) / n  # the S = {1, 2} term cancels P
    ratio_emp = raws.var(axis=0, ddof=1) / formula
    ratio_est = vars_.mean(axis=0) / formula
    assert 0.9 <= ratio_emp.mean() <= 1.1
    assert 0.9 <= ratio_est.mean() <= 1.1


def test_projection_onto_simplex() -> None:
    np.testing.assert_allclose(project_simplex(np.array([0.5, -0.01])), [0.755, 0.245])
    gen = np.random.default_rng(0)
    for _ in range(50):
        x = gen.normal(0.1, 0.3, size=7)
        y = project_simplex(x)
        assert np.all(y >= 0) and math.isclose(y.sum(), 1.0, rel_tol=1e-12)
        if np.maximum(x, 0).sum() >= 1:  # Norm-Sub agrees here
            z = np.maximum(x, 0)
            for _ in range(20):
                pos = z > 0
                z[pos] -= (z.sum() - 1) / pos.sum()
                z = np.maximum(z, 0)
            np.testing.assert_allclose(y, z, atol=1e-12)


def test_store_validation_and_hygiene() -> None:
    rep = LDPReports(np.zeros((3, 5), dtype=bool), (2, 3), 0.5)
    with pytest.raises(ParameterError, match=re.escape("method must be one of ['em', 'linear', 'hybrid']")):
        ReportStore(rep, method="lasso")
    with pytest.raises(ParameterError, match="attrs must be distinct attribute indices"):
        ReportStore(rep).estimate([0, 0])
    with pytest.raises(ParameterError, match="reports must be LDPReports"):
        ReportStore(np.zeros((3, 5)))  # type: ignore[arg-type]
    # server-side signatures accept no raw-data argument
    params = set(inspect.signature(ReportStore).parameters) | set(inspect.signature(estimate_joint).parameters)
    assert not params & {"data", "codes", "records", "frame", "df"}


def test_hybrid_is_close_to_em() -> None:
    sizes = (3, 3)
    codes = _sample(np.random.default_rng(1).dirichlet(np.ones(9)).reshape(sizes), 20_000, seed=2)
    rep = perturb_codes(codes, sizes, flip_prob=0.3, rng=3)
    em = ReportStore(rep).estimate([0, 1]).p
    hy = ReportStore(rep, method="hybrid", refine_iter=500).estimate([0, 1])
    assert hy.n_iter >= 1 and _avd(hy.p, em) < 0.02


def test_batched_em_equals_one_by_one() -> None:
    """prefetch() runs same-shape EMs in one tensor; each must match its own EM run exactly."""
    sizes = (2, 2, 3, 2, 2)
    gen = np.random.default_rng(3)
    codes = np.stack([gen.integers(s, size=4000) for s in sizes], axis=1)
    codes[:, 1] = np.where(gen.random(4000) < 0.7, codes[:, 0], codes[:, 1])
    rep = perturb_codes(codes, sizes, flip_prob=0.5, rng=4)
    keys = list(itertools.combinations(range(5), 3))
    single = ReportStore(rep, max_iter=400)
    batched = ReportStore(rep, max_iter=400)
    batched.prefetch(keys)
    assert batched.n_estimates == len(keys)
    iters = set()
    for k in keys:
        a, b = single.estimate(k), batched.estimate(k)
        assert np.max(np.abs(a.p - b.p)) < 1e-12
        assert a.n_iter == b.n_iter and a.converged == b.converged
        assert math.isclose(a.loglik, b.loglik, rel_tol=1e-12)
        iters.add(a.n_iter)
    assert len(iters) > 1  # the EMs stopped at different iterations
