"""Stream counters under rho-zCDP: the Gaussian binary trees (bt, bth with rho=) and the
square-root matrix-factorisation counter (mf_sqrt)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from privpub import Session
from privpub.audit import audit_epsilon
from privpub.core import discrete_gaussian_sigma2, zcdp_to_approx_dp
from privpub.errors import ParameterError
from privpub.stream import (
    BLT,
    PUBLISHERS,
    MFSqrt,
    StreamPublisher,
    blt_max_variance,
    bt_gaussian_max_variance,
    mf_sqrt_coefficients,
    mf_sqrt_max_variance,
)

RHO = 0.5


def _items(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 5, n)


# -- the Gaussian binary tree -----------------------------------------------------------------------
@pytest.mark.parametrize("method", ["bt", "bth"])
def test_gaussian_trees_charge_rho_in_zcdp(method: str) -> None:
    pub = PUBLISHERS[method](window=32, rho=RHO, rng=1, height=4)
    x = _items(100)
    pub.extend(x)
    ledger = pub.ledger
    assert ledger.measure == "zcdp" and ledger.rho == RHO and ledger.total == pytest.approx(RHO)
    # one block: 4 levels of rho / 4 each, discrete Gaussian of sigma^2 = 4 / (2 rho)
    kinds = [e for e in ledger if e.parts > 1]
    assert [e.mechanism for e in kinds] == ["discrete_gaussian"] * 4
    assert all(e.epsilon == pytest.approx(RHO / 4) for e in kinds)
    out = pub.answer([[70, 100], [90, 90]])
    assert out.shape == (2,)
    assert pub._node_var() == pytest.approx(4 / (2 * RHO), rel=1e-6)


def test_gaussian_bt_answers_are_unbiased_with_the_stated_variance() -> None:
    """One long stream of n copies of the same 8 items: blocks of 8 (height 4) hold independent
    noise, so the answers to the same in-block range of every block are n independent runs."""
    n, x = 4000, _items(8, 3)
    pub = PUBLISHERS["bt"](window=8 * n, rho=RHO, rng=0, height=4)
    pub.extend(np.tile(x, n))
    starts = 8 * np.arange(n)
    for a, b in ((1, 8), (2, 7), (3, 3), (1, 5)):
        out = pub.answer(np.stack([starts + a, starts + b], axis=1)).astype(np.float64)
        var, truth = pub.answer_variance(a, b), x[a - 1 : b].sum()
        assert abs(out.mean() - truth) < 5 * math.sqrt(var / n)
        # variance of the sample variance of (nearly) Gaussian noise: 2 var^2 / (n - 1)
        assert abs(out.var(ddof=1) - var) < 5 * var * math.sqrt(2 / (n - 1))


def test_rho_and_epsilon_are_exclusive_and_sessions_keep_their_measure() -> None:
    with pytest.raises(ParameterError, match="exactly one"):
        PUBLISHERS["bt"](window=8, epsilon=1.0, rho=0.5)
    with pytest.raises(ParameterError, match="rho="):
        PUBLISHERS["bt"](window=8, rho=0.5, noise="laplace")
    assert [m for m in sorted(PUBLISHERS) if "zcdp" in PUBLISHERS[m].measures] == ["blt", "bt", "bth", "mf_range", "mf_sqrt"]
    session = Session(total_rho=1.0)
    PUBLISHERS["bt"](window=8, rho=0.6, rng=0, session=session)
    with pytest.raises(ParameterError, match="never adds an epsilon to a rho"):
        PUBLISHERS["bt"](window=8, epsilon=0.1, rng=0, session=session)
    with pytest.raises(ParameterError, match="never adds an epsilon to a rho"):
        PUBLISHERS["mf_sqrt"](window=8, rho=0.1, rng=0, session=Session(total_epsilon=5.0))
    assert session.spent == pytest.approx(0.6)


def test_gaussian_bt_state_round_trip() -> None:
    pub = PUBLISHERS["bt"](window=32, rho=RHO, rng=2)
    pub.extend(_items(50))
    back = StreamPublisher.from_state(pub.state(), rng=9)
    q = [[20, 50], [40, 45]]
    assert np.array_equal(back.answer(q), pub.answer(q))
    assert back.ledger == pub.ledger and back.rho == RHO and back.epsilon is None


# -- the square-root factorisation ------------------------------------------------------------------
def _c_exact(k: int) -> Fraction:
    return Fraction(math.comb(2 * k, k), 4**k)


def test_coefficients_square_to_the_prefix_sum_matrix() -> None:
    c = mf_sqrt_coefficients(64)
    assert np.allclose(c, [float(_c_exact(k)) for k in range(64)], rtol=1e-13, atol=0)
    # (L L)_{ij} = sum_{m} c_{i-m} c_{m-j} = 1 for j <= i: the convolution of c with itself is all ones
    assert np.allclose(np.convolve(c, c)[:64], 1.0, rtol=1e-12)


def test_max_variance_is_the_closed_form() -> None:
    for T in (1, 2, 5, 16, 100):
        col = sum(_c_exact(k) ** 2 for k in range(T))
        closed = float(col * col / (2 * Fraction(RHO)))
        assert mf_sqrt_max_variance(T, RHO) == pytest.approx(closed, rel=1e-12)
        pub = MFSqrt(window=T, rho=RHO, rng=0)
        # the exact grid (issue 34): the integer right factor r~ = round(2^k c), noise Z in grid
        # units at the L2 sensitivity ||r~||; the decoder A R~^-1 brings it back to prefix sums
        rt = [round(_c_exact(j) * 2**pub.grid_bits) for j in range(T)]
        assert pub._rt.tolist() == rt
        assert pub.sigma2 == pytest.approx(sum(v * v for v in rt) / (2 * RHO), rel=1e-7)
        assert pub.sigma2 >= sum(v * v for v in rt) / (2 * RHO)  # never below the sensitivity's need
        # the discrete Gaussian's exact variance, at a sigma^2 rounded up by < 2**-25, through the
        # rounded factorisation: within 1e-6 of the real factorisation's closed form at 2^-18
        assert pub.max_variance() == pytest.approx(closed, rel=1e-6)
        pub.extend(np.ones(T, dtype=np.int64))
        assert pub.answer_variance(1, T) == pytest.approx(pub.max_variance(), rel=1e-12)
    assert mf_sqrt_max_variance(16, 0.5, sensitivity=3.0) == pytest.approx(9 * mf_sqrt_max_variance(16, 0.5))


def test_mf_sqrt_beats_the_gaussian_binary_tree_at_every_horizon() -> None:
    """[HUU23]/[FHU23]: below the Gaussian binary tree at the same rho for T = 2^4 .. 2^20."""
    ratios = []
    for m in range(4, 21):
        T = 1 << m
        mf, bt = mf_sqrt_max_variance(T, RHO), bt_gaussian_max_variance(T, RHO)
        assert mf < bt, (T, mf, bt)
        ratios.append(mf / bt)
        # sum_{k<T} c_k^2 <= 1 + (1 + ln T) / pi (c_k^2 <= 1 / (pi k))
        assert math.sqrt(mf * 2 * RHO) <= 1 + (1 + math.log(T)) / math.pi
    assert ratios[0] < 0.2 and ratios[-1] < 0.1  # a constant factor, growing with T
    # the exact tree variance: popcount(2^m - 1) = m nodes of variance (m + 1) / (2 rho)
    assert bt_gaussian_max_variance(16, RHO) == 4 * 5 / (2 * RHO)
    pub = PUBLISHERS["bt"](window=16, rho=RHO, rng=0, height=5)
    pub.extend(np.ones(16, dtype=np.int64))
    node = discrete_gaussian_sigma2(rho=RHO / 5)
    assert max(pub.answer_variance(1, t) for t in range(1, 17)) == pytest.approx(4 * node, rel=1e-6)


@pytest.mark.statistical
def test_empirical_variance_matches_at_small_horizon() -> None:
    """n blocks of T = 16 copies of the same items: each block's noise is an independent run, so
    every in-block prefix (and every range across a block boundary, on disjoint block pairs) is
    checked against its exact variance, with a tolerance from the variance of the variance."""
    T, n = 16, 6000
    x = _items(T, 5)
    pub = MFSqrt(window=T * n, rho=RHO, rng=0, horizon=T)
    pub.extend(np.tile(x, n))
    starts = T * np.arange(n)
    tol = 5 * math.sqrt(2 / (n - 1))
    for t in (1, 4, 9, 16):
        out = pub.answer(np.stack([starts + 1, starts + t], axis=1))
        var = pub.answer_variance(1, t)
        # the decoder of the exact grid, L~ = A R~^-1 (issue 34); within 1e-6 of the square root's
        assert var == pytest.approx(pub.max_variance() * math.fsum(pub._c[:t] ** 2) / pub._col2)
        c = mf_sqrt_coefficients(T)
        assert var == pytest.approx(mf_sqrt_max_variance(T, RHO) * math.fsum(c[:t] ** 2) / math.fsum(c**2), rel=1e-5)
        assert abs(out.mean() - x[:t].sum()) < 5 * math.sqrt(var / n)
        assert abs(out.var(ddof=1) - var) < tol * var
    assert pub.answer_variance(1, T) == pytest.approx(pub.max_variance())
    # negative control: the tree's larger variance is rejected by the same tolerance
    out = pub.answer(np.stack([starts + 1, starts + T], axis=1))
    bt = bt_gaussian_max_variance(T, RHO)
    assert abs(out.var(ddof=1) - bt) > tol * bt
    # ranges across a block boundary (blocks 2j and 2j + 1: independent pairs)
    pairs = 2 * T * np.arange(n // 2)
    for a, b in ((5, 28), (16, 17), (2, 32)):
        out = pub.answer(np.stack([pairs + a, pairs + b], axis=1))
        var = pub.answer_variance(a, b)
        assert abs(out.mean() - np.tile(x, 2)[a - 1 : b].sum()) < 5 * math.sqrt(var / (n // 2))
        assert abs(out.var(ddof=1) - var) < 5 * math.sqrt(2 / (n // 2 - 1)) * var


def test_streaming_ingest_state_and_ledger() -> None:
    x = _items(70, 1)
    one = MFSqrt(window=20, rho=RHO, rng=4, horizon=16)
    for v in x:
        one.append(int(v))
    batch = MFSqrt(window=20, rho=RHO, rng=4, horizon=16)
    batch.extend(x[:33])
    batch.extend(x[33:])
    q = [[51, 70], [60, 64]]
    assert np.array_equal(one.answer(q), batch.answer(q))
    ledger = batch.ledger
    assert ledger.measure == "zcdp" and ledger.total == RHO and ledger.entries[0].parts == 5
    # restore: the released noise and the open block's noise are never redrawn
    back = StreamPublisher.from_state(batch.state(), rng=123)
    assert np.array_equal(back.answer(q), batch.answer(q)) and back.ledger == batch.ledger
    more = _items(10, 2)  # stays in the open block (items 65..74 of block 5)
    back.extend(more)
    batch.extend(more)
    assert np.array_equal(back.answer([[61, 80]]), batch.answer([[61, 80]]))
    # replay gives the same answers as ingesting and querying step by step
    rep = MFSqrt(window=20, rho=RHO, rng=4, horizon=16)
    got = rep.replay(x, np.array([[30, 11, 30], [70, 51, 70]]))
    assert got[1] == one.answer([[51, 70]])[0]


def test_mf_sqrt_refuses_epsilon_and_bad_parameters() -> None:
    with pytest.raises(ParameterError, match="give rho="):
        MFSqrt(window=8, epsilon=1.0)
    with pytest.raises(ParameterError):
        MFSqrt(window=8)
    with pytest.raises(ParameterError):
        MFSqrt(window=8, rho=0.5, horizon=0)
    with pytest.raises(ParameterError):
        MFSqrt(window=8, rho=-1.0)
    for bad in ({"height": 3}, {"noise": "laplace"}, {"real": True}):
        with pytest.raises(ParameterError):
            MFSqrt(window=8, rho=0.5, **bad)
    assert PUBLISHERS["mf_sqrt"] is MFSqrt


# -- BLT --------------------------------------------------------------------------------------------
def test_blt_max_error_is_within_a_few_percent_of_mf_sqrt() -> None:
    """Dvijotham et al. 2024: a BLT with d = 4 buffers is near the square-root factorisation (and far
    below the tree) up to T = 2^16; the exact variance of the publisher is the closed form."""
    for m in (4, 8, 12, 16):
        T = 1 << m
        blt, mf = blt_max_variance(T, RHO), mf_sqrt_max_variance(T, RHO)
        assert blt < 1.05 * mf, (T, blt / mf)  # measured: 1.001 (T = 16) to 1.020 (T = 2^16)
        assert blt < bt_gaussian_max_variance(T, RHO)
    pub = BLT(window=64, rho=RHO, rng=0)
    pub.extend(np.ones(64, dtype=np.int64))
    assert pub.answer_variance(1, 64) == pytest.approx(pub.max_variance())
    assert pub.max_variance() == pytest.approx(blt_max_variance(64, RHO), rel=1e-6)


@pytest.mark.statistical
def test_blt_streaming_noise_matches_its_variance_and_state() -> None:
    T, n = 16, 4000
    x = _items(T, 8)
    pub = BLT(window=T * n, rho=RHO, rng=0, horizon=T)
    pub.extend(np.tile(x, n))
    assert pub.ledger.measure == "zcdp" and pub.ledger.total == RHO and pub.ledger.entries[0].parts == n
    starts = T * np.arange(n)
    for t in (1, 5, 16):
        out = pub.answer(np.stack([starts + 1, starts + t], axis=1))
        var = pub.answer_variance(1, t)
        assert abs(out.mean() - x[:t].sum()) < 5 * math.sqrt(var / n)
        assert abs(out.var(ddof=1) - var) < 5 * math.sqrt(2 / (n - 1)) * var
    # one item at a time = batches; a restored publisher continues its open block exactly (the d
    # buffers are rebuilt from the saved z, never redrawn)
    a, b = BLT(window=40, rho=RHO, rng=3, horizon=16), BLT(window=40, rho=RHO, rng=3, horizon=16)
    y = _items(40, 9)
    for v in y[:21]:
        a.append(int(v))
    b.extend(y[:21])
    back = StreamPublisher.from_state(b.state(), rng=77)
    for p in (a, b, back):
        p.extend(y[21:30])  # inside the open block (items 17..32)
    q = [[1, 30], [20, 30]]
    assert np.array_equal(a.answer(q), b.answer(q)) and np.array_equal(back.answer(q), b.answer(q))
    a.extend(y[30:])
    b.extend(y[30:])
    assert np.array_equal(a.answer([[1, 40]]), b.answer([[1, 40]]))
    with pytest.raises(ParameterError):
        BLT(window=8, rho=RHO, buffers=9)


# -- privacy ----------------------------------------------------------------------------------------
PRIV_RHO = 0.02


def _mf(rho: float, cls: type = MFSqrt):
    """n runs of the counter on ``stream`` as the n blocks of one publisher (horizon = len(stream)):
    blocks have independent noise, and a block's in-block prefixes are one run's output."""
    def mech(stream: tuple[int, ...], rng: np.random.Generator, n: int) -> np.ndarray:
        T = len(stream)
        pub = cls(window=T * n, rho=rho, rng=rng, horizon=T)
        pub.extend(np.tile(stream, n))
        starts = T * np.arange(n)
        return np.stack([pub.answer(np.stack([starts + 1, starts + t], axis=1)) for t in range(1, T + 1)], axis=1)
    return mech


@pytest.mark.statistical
@pytest.mark.slow
@pytest.mark.parametrize("cls", [MFSqrt, BLT], ids=["mf_sqrt", "blt"])
def test_audit_mf_counters_on_neighbouring_streams(cls: type) -> None:
    """Streams differing at one step by 1: the lower bound stays below the (epsilon, delta)
    conversion of rho at delta = 1e-6; a counter running at 50 times its declared rho is flagged."""
    bound = zcdp_to_approx_dp(PRIV_RHO, 1e-6)
    x, y = (1, 0, 2, 1), (1, 1, 2, 1)
    ok = audit_epsilon(_mf(PRIV_RHO, cls), x, y, epsilon=bound, trials=10_000, batch=True, rng=0)
    assert ok.passed
    leaky = audit_epsilon(_mf(50 * PRIV_RHO, cls), x, y, epsilon=bound, trials=10_000, batch=True, rng=0)
    assert not leaky.passed, leaky


# -- issue 34: exact noise on an exact query ------------------------------------------------------
MF_METHODS = ["mf_sqrt", "blt", "mf_range"]


def _flawed_release(pub: MFSqrt, x: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """The pre-fix mechanism on the same factorisation (the control): integer noise on the real
    vector ``R x`` (here ``R~ x / 2^k``, a real vector as ``R x`` was), released as ``L~ 2^k (R x + z)``."""
    k = pub.grid_bits
    H = x.shape[0]
    Rx = np.convolve(pub._rt.astype(np.float64), x.astype(np.float64))[:H] / 2.0**k
    z = gen.integers(-3, 4, H)  # integer noise of any law: the lattice is what leaks
    return np.convolve(pub._c, (Rx + z) * 2.0**k)[:H]


def _integral(y: np.ndarray) -> bool:
    return bool(np.max(np.abs(y - np.rint(y))) < 1e-6)


@pytest.mark.parametrize("rho", [0.5, 0.001])
@pytest.mark.parametrize("method", MF_METHODS)
def test_lattice_attack_tells_no_neighbours_apart(method: str, rho: float) -> None:
    """Issue 34's attack: solve ``L y = answers`` with the public decoder and ask whether ``y`` lies
    on the noise's lattice. On the fixed counters it holds under both neighbours (``0^16`` and
    ``(1, 0, ..., 0)``) every time; on the flawed mechanism (the control) it tells them apart."""
    H, trials = 16, 300
    x0 = np.zeros(H, dtype=np.int64)
    x1 = x0.copy()
    x1[0] = 1
    hits = {0: 0, 1: 0}
    flawed = {0: 0, 1: 0}
    gen = np.random.default_rng(7)
    for i in range(trials):
        for side, x in ((0, x0), (1, x1)):
            pub = PUBLISHERS[method](window=H, rho=rho, rng=1000 * i + side)
            pub.extend(x)
            answers = pub.answer([[1, t] for t in range(1, H + 1)], record=False)
            hits[side] += _integral(pub.lattice_coordinates(answers))
            y = pub.lattice_coordinates(_flawed_release(pub, x, gen))
            flawed[side] += _integral(y / 2.0**pub.grid_bits)  # the old lattice: z integer
    assert hits == {0: trials, 1: trials}  # the same event with probability 1 on both sides
    assert flawed[0] == trials and flawed[1] == 0  # the control: told apart every time


def test_two_answers_no_longer_reveal_a_parity() -> None:
    """The advisory's two-query read: ``frac(q(1,2) - q(1,1)/2)`` was ``(x_1 mod 2) / 2``."""
    fr = {0: set(), 1: set()}
    for seed in range(20):
        for x1 in (0, 1):
            pub = MFSqrt(window=16, rho=0.5, rng=seed)
            pub.extend([x1] + [0] * 15)
            v = pub.query(1, 2) - pub.query(1, 1) / 2
            fr[x1].add(round(v - math.floor(v), 6))
    assert len(fr[0]) > 10 and len(fr[1]) > 10  # spread, not pinned to {0} and {0.5}


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("method", MF_METHODS)
def test_one_hundred_windows_by_append_and_extend(method: str) -> None:
    """100 windows of items, by append and by extend in several chunk sizes: the same answers,
    unbiased, with the closed-form variance (the old counters stopped after 1.6 windows)."""
    W, n = 64, 64 * 100
    x = _items(n, seed=3)
    pubs = []
    for chunk in (1, 7, 64, 1000):
        pub = PUBLISHERS[method](window=W, rho=RHO, rng=5)
        if chunk == 1:
            for v in x:
                pub.append(int(v))
        else:
            for a in range(0, n, chunk):
                pub.extend(x[a : a + chunk])
        pubs.append(pub)
    q = [[pubs[0].t - W + 1, pubs[0].t], [pubs[0].t - 10, pubs[0].t - 3]]
    for pub in pubs[1:]:
        np.testing.assert_allclose(pub.answer(q, record=False), pubs[0].answer(q, record=False), rtol=0, atol=1e-8)
    # the errors of the block totals: 100 independent draws of variance max_variance() (the block's
    # end), so their mean square is chi-square(100) / 100 around 1: [0.6, 1.5] holds with p > 0.999
    errs = []
    pub = PUBLISHERS[method](window=W, rho=RHO, rng=11)
    for b in range(100):
        pub.extend(x[b * W : (b + 1) * W])
        errs.append(pub.query(pub.t - W + 1, pub.t) - int(x[b * W : (b + 1) * W].sum()))
    ms = float(np.mean(np.square(errs))) / pub.max_variance()
    assert 0.6 < ms < 1.5, ms
    assert abs(float(np.mean(errs))) < 4 * math.sqrt(pub.max_variance() / 100)


@pytest.mark.slow
@pytest.mark.parametrize("method", MF_METHODS)
def test_window_4096_runs_past_the_old_stop(method: str) -> None:
    """Main at 3246757 failed at item 6,545 (append) and 7,000 (extend by 1,000) with window 4096."""
    pub = PUBLISHERS[method](window=4096, rho=RHO, rng=0)
    for _ in range(9):
        pub.extend(np.ones(1000, dtype=np.int64))
    for _ in range(3000):
        pub.append(1)
    assert pub.t == 12_000
    assert abs(pub.query(8000, 12_000) - 4001) < 10 * math.sqrt(pub.answer_variance(8000, 12_000))


def test_exact_grid_keeps_the_accuracy_at_every_horizon() -> None:
    """The rounded factorisation's exact max variance is within 1e-3 of the real one's closed form
    and below the Gaussian binary tree's at every T = 2^4 .. 2^20, at rho 0.5 and 0.001."""
    for rho in (RHO, 0.001):
        for m in range(4, 21, 2):
            T = 1 << m
            pub = MFSqrt(window=T, rho=rho, rng=0)
            ideal = mf_sqrt_max_variance(T, rho)
            assert pub.max_variance() == pytest.approx(ideal, rel=1e-3), (T, rho, pub.grid_bits)
            assert pub.max_variance() < bt_gaussian_max_variance(T, rho)


@pytest.mark.parametrize("method", MF_METHODS)
def test_answers_are_a_function_of_the_noisy_vector_alone(method: str) -> None:
    """Post-processing, bit for bit: the answers depend on the stream and the noise only through
    the noisy vector ``y = R~ x + Z``. A publisher of the all-zero stream whose block noise is
    the first publisher's ``y`` holds the same ``y`` and must release the same float64 answers,
    bit for bit (true prefix sums plus decoded noise, ``A x + L~ Z``, equal ``L~ y`` only up to
    rounding); and the public decoder's inverse of the answers is ``y`` itself."""
    H, n = 32, 31  # one open block: ``pub._y`` holds y (a complete block's is released and dropped)
    x = _items(n, seed=4)
    pub = PUBLISHERS[method](window=H, rho=RHO, rng=9)
    pub.extend(x[:5])
    for v in x[5:9]:
        pub.append(int(v))  # the scalar path too
    pub.extend(x[9:])
    qs = [[1, t] for t in range(1, n + 1)]
    answers = pub.answer(qs, record=False)
    y = pub._y[:n].copy()
    assert y.dtype == np.int64 and np.any(y != pub._z[:n])  # the noisy vector, not the noise
    twin = PUBLISHERS[method](window=H, rho=RHO, rng=9)
    noise = np.concatenate([y, pub._z[n:]])
    twin._noise.draw = lambda size: noise.copy()  # the same y from x = 0 and Z = y
    twin.extend(np.zeros(5, dtype=np.int64))
    for _ in range(4):
        twin.append(0)
    twin.extend(np.zeros(n - 9, dtype=np.int64))
    np.testing.assert_array_equal(twin._y[:n], y)
    assert answers.tobytes() == twin.answer(qs, record=False).tobytes()
    np.testing.assert_array_equal(np.rint(pub.lattice_coordinates(answers)), y)
    assert _integral(pub.lattice_coordinates(answers))
