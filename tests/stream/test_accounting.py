"""Privacy by construction: each publisher's ledger is what its node noise charged; sessions;
exact integer arithmetic; the validation findings of issue 12 (each test fails on the old code)."""

from __future__ import annotations

import re
import tracemalloc

import numpy as np
import pytest

from privpub import Session
from privpub.core import Accountant
from privpub.errors import BudgetExceededError, DomainError, ParameterError
from privpub.stream import BT, BTH, HQRTP, HQRTPMM, RTP, RTPMM, mm_budgets
from privpub.stream._kernels import fenwick_uppath

ALL = [RTP, HQRTP, RTPMM, HQRTPMM, BT, BTH]
BLOCK = "trees (disjoint blocks of the stream)"


# -- ledgers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("noise", ["discrete", "laplace"])
@pytest.mark.parametrize("cls", [RTP, BT, BTH])
def test_uniform_tree_ledger(cls, noise):
    eps, k = 0.6, 5
    pub = cls(window=64, epsilon=eps, rng=0, height=k, noise=noise, sensitivity=2.0)
    assert pub.ledger.entries == () and pub.ledger.total == 0.0  # nothing drawn yet
    pub.extend(np.arange(40))  # 2.5 trees of 16 items: 3 opened
    for x in range(30):  # and 30 more items one at a time: 5 trees in all
        pub.append(x)
    ledger = pub.ledger
    assert ledger.frozen and ledger.epsilon == eps
    assert [e.step for e in ledger] == [f"level {lev}" for lev in range(k)]
    for e in ledger:
        assert e.mechanism == ("discrete_laplace" if noise == "discrete" else "laplace")
        assert e.epsilon == eps / k and e.sensitivity == 2.0
        assert (e.composition, e.parts, e.block) == ("parallel", 5, BLOCK)
        assert e.branch.startswith(f"height-{k} {'trees' if cls is RTP else 'blocks'}")
    assert ledger.total == pytest.approx(eps, rel=1e-15)
    assert ledger.total <= eps * (1 + 1e-15)


def test_adaptive_heights_are_branches_of_one_parallel_block():
    pub = HQRTP(window=65536, epsilon=1.0, rng=0, noise="laplace", history=[5000] * 100)
    pub.extend(np.zeros(20000, dtype=int))  # height k*(5000) = 11
    pub.answer(np.array([[19990, 20000]] * 100))  # predicted length 11: height 1
    pub.extend(np.zeros(2048, dtype=int))  # the open height-11 tree ends at 20480
    ledger = pub.ledger
    kinds = {e.branch.split(" (")[0] for e in ledger}
    assert kinds == {"height-11 trees", "height-1 trees"}
    assert sum(e.step.startswith("level") for e in ledger) == 11 + 1
    assert {e.parts for e in ledger if e.branch.startswith("height-1 ")} == {22048 - 20480}
    assert {e.parts for e in ledger if e.branch.startswith("height-11 ")} == {20}
    assert ledger.total == pytest.approx(1.0, rel=1e-15)


@pytest.mark.parametrize("noise", ["discrete", "laplace"])
def test_mm_ledger_one_charge_per_height(noise):
    pub = RTPMM(window=256, epsilon=0.9, rng=0, noise=noise)
    pub.extend(np.arange(100))
    (entry,) = pub.ledger.entries
    assert (entry.step, entry.epsilon, entry.sensitivity, entry.parts) == ("tree nodes", 0.9, 1.0, 13)
    assert entry.branch.startswith("height-4 trees (per-node budgets)")
    # the charge is the largest per-item sum of node budgets: odd positions spend all of epsilon
    b = mm_budgets(4, 256.0, 0.9)
    assert max(sum(b[v - 1] for v in fenwick_uppath(m, 8)) for m in range(1, 9)) == pytest.approx(0.9)
    hq = HQRTPMM(window=4096, epsilon=0.9, rng=0, noise=noise, history=[300] * 3)
    qs = np.array([(t, t - L + 1, t) for t, L in zip(range(200, 3000, 7), range(150, 3000, 7))], dtype=np.int64)
    hq.replay(np.ones(3000, dtype=int), qs)
    heights = {k for _, k in hq.trees}
    assert len(heights) >= 3
    assert len(hq.ledger.entries) == len({int(e.branch.split("-")[1].split()[0]) for e in hq.ledger})
    assert hq.ledger.total == pytest.approx(0.9)



def test_budget_is_enforced_by_the_accountant(monkeypatch):
    """If a publisher passed more than its epsilon to the noise, the charge is refused before any
    draw (mutation check of the wiring: node budgets doubled)."""
    from privpub.stream import _kernels

    real = _kernels.mm_budgets
    monkeypatch.setattr(_kernels, "mm_budgets", lambda k, L, e: 2 * real(k, L, e))
    pub = RTPMM(window=256, epsilon=1.0, rng=0)
    with pytest.raises(BudgetExceededError, match="nothing was drawn"):
        pub.extend(np.arange(10))
    assert pub.t == 0 and pub.ledger.total == 0.0


def test_a_publisher_inside_an_outer_accountant_is_one_step():
    with Accountant(1.0) as outer:
        RTP(window=8, epsilon=0.75)
        with pytest.raises(BudgetExceededError):
            BT(window=8, epsilon=0.5)
    assert [(e.mechanism, e.epsilon) for e in outer.seal()] == [("rtp", 0.75)]


# -- sessions ------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL)
def test_session_reserves_epsilon_once(cls):
    session = Session(total_epsilon=1.0)
    pub = cls(window=64, epsilon=0.7, rng=0, session=session)
    assert session.spent == pytest.approx(0.7)
    pub.extend(np.arange(200))
    for x in range(50):
        pub.append(x)
    assert session.spent == pytest.approx(0.7)  # the stream's life costs its epsilon once
    assert [c.status for c in session.charges] == ["spent"]
    with pytest.raises(BudgetExceededError, match="cannot pay"):
        cls(window=64, epsilon=0.5, rng=0, session=session)
    assert len(session.charges) == 1  # the refused publisher created nothing
    cls(window=64, epsilon=0.3, rng=0, session=session)
    assert session.remaining == pytest.approx(0.0)


def test_invalid_parameters_reserve_nothing():
    session = Session(total_epsilon=1.0)
    with pytest.raises(ParameterError):
        RTP(window=0, epsilon=0.5, session=session)
    with pytest.raises(ParameterError):
        RTP(window=8, epsilon=0.5, height=50, session=session)  # too big for memory
    assert session.charges == ()


# -- exactness -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [RTP, HQRTP, RTPMM, HQRTPMM, BT])
def test_integer_streams_are_exact_in_int64(cls):
    """Same seed, same noise: answers on the data minus answers on zeros are the true sums,
    exactly, for counts far beyond float64's 2**53."""
    big = np.random.default_rng(0).integers(2**50, 2**51, size=300)
    a = cls(window=512, epsilon=1.0, rng=5)
    b = cls(window=512, epsilon=1.0, rng=5)
    a.extend(big[:100])
    for x in big[100:]:
        a.append(int(x))
    b.extend(np.zeros(300, dtype=np.int64))
    rng = np.random.default_rng(1)
    lo = rng.integers(1, 300, 500)
    hi = np.minimum(300, lo + rng.integers(0, 200, 500))
    q = np.stack([lo, hi], axis=1)
    c = np.concatenate([[0], np.cumsum(big)])
    diff = a.answer(q, record=False) - b.answer(q, record=False)
    assert diff.dtype == np.int64
    np.testing.assert_array_equal(diff, c[hi] - c[lo - 1])
    assert type(a.query(3, 250)) is int


# -- the findings of issue 12 --------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL)
def test_huge_items_are_refused(cls):
    """Finding: items like 1e300 were accepted (float rounding erased the noise)."""
    lap = cls(window=8, epsilon=1.0, noise="laplace")
    with pytest.raises(DomainError, match=re.escape("items must be at most 2**52")):
        lap.extend([1.0, 1e300])
    with pytest.raises(DomainError, match=re.escape("items must be at most 2**52")):
        lap.append(1e300)
    exact = cls(window=8, epsilon=1.0)
    with pytest.raises(DomainError, match=re.escape("items must be at most 2**61")):
        exact.append(2**62)
    with pytest.raises(DomainError, match=re.escape("items must be at most 2**61")):
        exact.extend(np.array([2**63], dtype=np.uint64))
    real = cls(window=8, epsilon=1.0, real=True, noise="laplace")
    with pytest.raises(DomainError, match=re.escape("items must be at most 2**52")):
        real.extend([2.0**53])
    assert lap.t == exact.t == real.t == 0


@pytest.mark.parametrize("cls", ALL)
def test_tree_sums_beyond_the_exact_range_are_refused(cls):
    pub = cls(window=64, epsilon=1.0, real=True, noise="laplace", height=4)
    pub.extend([2.0**50] * 2)
    with pytest.raises(DomainError, match=re.escape("sum to more than 2**52")):
        pub.extend([2.0**51, 2.0**51])
    with pytest.raises(DomainError, match=re.escape("sum to more than 2**52")):
        for _ in range(3):
            pub.append(2.0**51)
    assert pub.t == 3  # the refused items left nothing behind (one append fitted)
    assert np.isfinite(pub.answer([[1, 3]])).all()
    pub.extend(np.zeros(5))  # the next tree starts from zero again
    pub.extend([2.0**51, 2.0**51])
    assert pub.t == 10


@pytest.mark.parametrize("cls", ALL)
def test_extreme_items_never_give_nan_answers(cls):
    """Finding: NaN range answers for extreme values (1e308 + 1e308 = inf)."""
    pub = cls(window=8, epsilon=1.0, noise="laplace")
    with pytest.raises(DomainError):
        pub.extend([1e308, 1e308, 1.0])
    pub.extend([2**40, 2**40, 1])
    assert np.isfinite(pub.answer([[1, 3], [2, 3], [3, 3]])).all()


@pytest.mark.parametrize("cls", ALL)
def test_query_bounds(cls):
    pub = cls(window=8, epsilon=1.0, rng=0)
    pub.extend(np.arange(20))
    cases = [((15, 14), "the range is reversed"), ((15, 21), "r is in the future"),
             ((12, 20), "l is before the window (items 13..20)"), ((0, 3), "l must be >= 1"),
             ((2**70, 2**70 + 1), "r is in the future"), ((-(2**70), 5), "l must be >= 1")]
    for (l, r), why in cases:
        with pytest.raises(ParameterError, match=re.escape(why)):
            pub.query(l, r)
        if abs(l) < 2**62:
            with pytest.raises(ParameterError, match=re.escape(why)):
                pub.answer([[13, 20], [l, r]])
    bad_arrays = [
        (np.array([[13.0, np.nan]]), "(NaN is not a time index)"),
        (np.array([[2**63, 2**63]], dtype=np.uint64), "below 2**62"),
        (np.array([[13, 2**70]], dtype=object), "integer time indices"),
        (np.array([[True, True]]), "integer time indices"),
        (np.zeros((2, 3), dtype=int), "shape (q, 2)"),
    ]
    for arr, msg in bad_arrays:
        with pytest.raises(ParameterError, match=re.escape(msg)):
            pub.answer(arr)
    with pytest.raises(ParameterError, match=re.escape("queries[0] must satisfy")):
        cls(window=8, epsilon=1.0).replay(np.arange(10), np.array([[5, 2**62, 2**62 + 1]]))
    assert pub.answer(np.zeros((0, 2), dtype=int)).shape == (0,)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: RTP(window=8, epsilon=1.0, height=40), ["height 40", "lower height"]),
        (lambda: BT(window=8, epsilon=1.0, height=36), ["height 36", "lower height"]),
        (lambda: BTH(window=2**40, epsilon=1.0, height=3), ["window=1099511627776", "lower window"]),
        (lambda: HQRTP(window=2**45, epsilon=1.0), ["window=35184372088832", "lower window"]),
        (lambda: HQRTP(window=64, epsilon=1.0, height=45), ["height 45", "lower height"]),
        (lambda: RTP(window=32768, epsilon=1.0, height=20, memory_limit=10**7),
         ["height 20", "memory_limit=9.54 MiB", "lower height"]),
    ],
)
def test_sizes_are_checked_before_allocation(make, words):
    """Finding: height and window had no bounds (5 GB at height 20)."""
    tracemalloc.start()
    try:
        with pytest.raises(ParameterError) as err:
            make()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    for w in words:
        assert w in str(err.value)
    assert peak < 5 * 2**20  # refused before anything big was allocated
