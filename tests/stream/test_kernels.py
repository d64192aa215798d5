"""Error formulas, optimal heights and MM budgets against brute force (spec §3, §5, §6.1, §9.4)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from privpub.stream import (
    brute_force_nodes,
    expected_error,
    expected_error_bth,
    expected_error_mm,
    expected_error_mm_at,
    expected_nodes,
    expected_nodes_bt,
    mm_budgets,
    optimal_height,
    optimal_height_bt,
    optimal_height_bth,
    optimal_height_mm,
    paper_eq16,
)
from privpub.stream._kernels import bth_piece_variance, fenwick_path, fenwick_uppath


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("length", [1, 2, 3, 5, 7, 8, 13, 16, 31, 33])
def test_expected_nodes_equals_enumeration(k, length):
    assert expected_nodes(k, length) == pytest.approx(brute_force_nodes(k, length), abs=1e-12)


@pytest.mark.parametrize("length", [1, 2, 3, 5, 6, 9, 17, 40])
def test_optimal_height_equals_brute_force_argmin(length):
    kmax = int(np.floor(np.log2(length))) + 3
    errs = [2 * k**2 * brute_force_nodes(k, length) for k in range(1, kmax + 1)]
    assert optimal_height(length) == int(np.argmin(errs)) + 1


@pytest.mark.parametrize("length", [896, 897, 1090])
def test_optimal_height_brute_force_at_thresholds(length):
    ks = range(1, int(np.log2(length)) + 3)
    errs = [k**2 * brute_force_nodes(k, length) for k in ks]
    assert optimal_height(length) == int(np.argmin(errs)) + 1


def test_rtp_thresholds_of_spec():
    table = [(1, 1), (896, 1), (897, 8), (1089, 8), (1090, 9), (2081, 9), (2082, 10), (4018, 10), (4019, 11),
             (7815, 11), (7816, 12), (15282, 12), (15283, 13), (29998, 13), (29999, 14), (59060, 14),
             (59061, 15), (116545, 15), (116546, 16)]
    for L, k in table:
        assert optimal_height(L) == k, L
    assert optimal_height(32768) == 14 and optimal_height(65536) == 15
    # heights above i = floor(log2 L) + 1 never win
    for L in (3, 100, 1000, 5000):
        i = int(np.log2(L)) + 1
        errs = [expected_error(k, L, 1.0) for k in range(1, i + 6)]
        assert int(np.argmin(errs)) + 1 <= i


def test_mm_thresholds_and_budgets():
    table = [(113, 1), (114, 2), (136, 2), (137, 3), (216, 3), (217, 4), (380, 4), (381, 5), (699, 5),
             (700, 6), (1317, 6), (1318, 7), (2520, 7), (2521, 8), (4871, 9), (9476, 10), (18526, 11),
             (36355, 12), (71547, 13)]
    for L, k in table:
        assert optimal_height_mm(L) == k, L
    assert optimal_height_mm(32768) == 11
    np.testing.assert_allclose(mm_budgets(3, 4.0, 1.0), [0.287, 0.361, 0.648, 0.352], atol=5e-4)
    # per-item up-path spends: 1, 0.713, 1, 0.352 (odd positions exactly epsilon)
    b = mm_budgets(3, 4.0, 1.0)
    spent = [sum(b[v - 1] for v in fenwick_uppath(m, 4)) for m in range(1, 5)]
    np.testing.assert_allclose(spent, [1.0, 0.713, 1.0, 0.352], atol=5e-4)



def _usage(k, L):
    T = 1 << (k - 1)
    v = np.arange(1, T + 1)
    lev = np.log2(v & -v)
    return np.where(v == T, L / T, 2 * np.minimum(2.0**lev, L) / T)


@pytest.mark.parametrize(("k", "L"), [(3, 4.0), (3, 2.0), (4, 5.0), (4, 8.0)])
def test_mm_budgets_match_slsqp(k, L):
    T = 1 << (k - 1)
    c = _usage(k, L)
    cons = [{"type": "ineq", "fun": (lambda e, m=m: 1.0 - sum(e[v - 1] for v in fenwick_uppath(m, T)))}
            for m in range(1, T + 1)]
    res = minimize(lambda e: np.sum(c / e**2), np.full(T, 1.0 / k), constraints=cons,
                   bounds=[(1e-6, 1.0)] * T, method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    ours = np.sum(c / mm_budgets(k, L, 1.0) ** 2)
    assert ours == pytest.approx(res.fun, rel=1e-5)
    assert 2 * ours == pytest.approx(expected_error_mm(k, L, 1.0), rel=1e-12)


def test_mm_usage_matches_enumeration():
    # c_v: fraction of start offsets whose length-L query uses node v (k = 4, several L)
    from privpub.stream import decompose

    for k, L in [(4, 3), (4, 8), (3, 6)]:
        T = 1 << (k - 1)
        n = (T + L) // T + 2
        starts, heights = [1 + m * T for m in range(n)], [k] * n
        use = np.zeros(T)
        for s in range(1, T + 1):
            for _, v, _c in decompose(s, s + L - 1, starts, heights):
                use[v - 1] += 1
        np.testing.assert_allclose(use / T, _usage(k, L))


def test_expected_table_of_spec():
    rows = {1: (392, 178.6, 196, 136.5), 512: (2144, 881.8, 1764, 486.1),
            4096: (2646, 921.9, 2352, 600.9), 32768: (3332, 1243, 3136, 818.3)}
    for L, (rtp, rtpmm, bt, bth) in rows.items():
        assert expected_error(14, L, 1.0) / 2 == pytest.approx(rtp, rel=2e-3)
        assert expected_error_mm_at(11, L, 32768, 1.0) / 2 == pytest.approx(rtpmm, rel=2e-3)
        assert 196 * expected_nodes_bt(14, L) == pytest.approx(bt, rel=2e-3)
        assert expected_error_bth(15, L, 1.0) / 2 == pytest.approx(bth, rel=2e-3)
    assert optimal_height_bth(32768) == 15


def test_bt_thresholds_and_nodes():
    for L, k in [(769, 1), (770, 8), (995, 8), (996, 9), (1923, 9), (1924, 10), (32768, 14), (111309, 16)]:
        assert optimal_height_bt(L) == k, L
    # N_BT equals enumeration of greedy dyadic covers
    for k in (2, 3, 4):
        T = 1 << (k - 1)
        for L in (1, 2, 3, 5, 8, 11):
            total = 0
            for o in range(T):
                lo, hi = o, o + L
                while lo < hi:
                    lev = min(k - 1, (lo & -lo).bit_length() - 1 if lo else k - 1, (hi - lo).bit_length() - 1)
                    lo += 1 << lev
                    total += 1
            assert expected_nodes_bt(k, L) == pytest.approx(total / T)


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_bth_variance_equals_matrix_formula(k):
    T = 1 << (k - 1)
    rows = []
    for lev in range(k):
        size = 1 << lev
        for j in range(T // size):
            row = np.zeros(T)
            row[j * size : (j + 1) * size] = 1
            rows.append(row)
    A = np.array(rows)
    inv = np.linalg.inv(A.T @ A)
    for a in range(1, T + 1):
        for b in range(a, T + 1):
            q = np.zeros(T)
            q[a - 1 : b] = 1
            assert bth_piece_variance(k, np.array([a]), np.array([b]))[0] == pytest.approx(q @ inv @ q)


def test_paper_eq16_always_picks_height_one():
    for L in (2, 10, 100, 1000, 32768):
        i = int(np.log2(L)) + 1
        vals = [paper_eq16(k, L) for k in range(1, i + 1)]
        assert int(np.argmin(vals)) == 0


def test_fenwick_path():
    assert fenwick_path(13) == [13, 12, 8]
    assert fenwick_path(0) == []
