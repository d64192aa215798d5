"""Stateful publishers: batch = online, identities, ledger, predictors and bad input."""

from __future__ import annotations

import re

import numpy as np
import pytest

from privpub.errors import DomainError, ParameterError
from privpub.stream import BT, BTH, EWMA, HQRTP, HQRTPMM, RTP, RTPMM, SMA, make_publisher

ALL = [RTP, HQRTP, RTPMM, HQRTPMM, BT, BTH]


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("noise", ["discrete", "laplace"])
def test_batch_equals_online(cls, noise, make_queries, run_online):
    data = np.random.default_rng(1).integers(0, 30, size=1500)
    queries = make_queries(1500, 256, 1, 200, seed=2)
    kw = {"window": 256, "epsilon": 0.7, "rng": 11, "noise": noise}
    a, b, c = cls(**kw), cls(**kw), cls(**kw)
    ans_online = run_online(a, data, queries)
    ans_replay = b.replay(data, queries)
    np.testing.assert_array_equal(ans_online, ans_replay)
    assert a.trees == b.trees
    # extend in pieces then answer equals append-loop then answer (no queries in between)
    c.extend(data[:700])
    c.extend(data[700:])
    d = cls(**kw)
    for x in data:
        d.append(int(x))
    qs = np.array([[1400, 1500], [1245, 1500], [1500, 1500]])
    np.testing.assert_array_equal(c.answer(qs), d.answer(qs))
    # the states stay in step afterwards
    b.append(3)
    a.append(3)
    assert a.query(1490, 1501) == b.query(1490, 1501)


def test_hq_rtp_is_rtp_for_window_length_queries():
    W, n = 128, 1200
    data = np.random.default_rng(4).integers(0, 9, size=n)
    qs = np.array([(t, t - W + 1, t) for t in range(W, n + 1)], dtype=np.int64)
    for base, hq in ((RTP, HQRTP), (RTPMM, HQRTPMM)):
        for noise in ("laplace", "discrete"):
            p, h = base(window=W, epsilon=1.0, rng=5, noise=noise), hq(window=W, epsilon=1.0, rng=5, noise=noise)
            np.testing.assert_array_equal(p.replay(data, qs), h.replay(data, qs))
            assert p.trees == h.trees


def test_hq_adapts_height_to_query_length():
    pub = HQRTP(window=65536, epsilon=1.0, rng=0, noise="laplace", history=[5000] * 100)
    pub.extend(np.zeros(20000))
    assert {h for _, h in pub.trees} == {11}  # k*(5000) = 11
    pub.answer(np.array([[19990, 20000]] * 100))  # now predict length 11: height 1
    pub.extend(np.zeros(2048))
    assert pub.trees[-1][1] == 1
    mm = HQRTPMM(window=65536, epsilon=1.0, rng=0, history=[300] * 3)
    mm.extend(np.ones(100, dtype=int))
    assert mm.trees[0][1] == 4


def test_default_heights():
    assert RTP(window=32768, epsilon=1.0).height is None
    assert RTP(window=32768, epsilon=1.0)._default_height() == 14
    assert RTPMM(window=32768, epsilon=1.0)._default_height() == 11
    assert BT(window=32768, epsilon=1.0).height == 14
    assert BTH(window=32768, epsilon=1.0).height == 15


@pytest.mark.parametrize("cls", ALL)
def test_same_seed_same_output_and_repeat_query(cls):
    a, b = cls(window=100, epsilon=1.0, rng=3), cls(window=100, epsilon=1.0, rng=3)
    a.extend(np.arange(50))
    b.extend(np.arange(50))
    assert a.query(10, 40) == b.query(10, 40)
    assert a.query(10, 40) == a.query(10, 40)  # noise is drawn once per node


def test_registry():
    assert isinstance(make_publisher("hq_rtp", window=4, epsilon=1.0), HQRTP)
    with pytest.raises(ParameterError, match="method must be one of"):
        make_publisher("nope", window=4, epsilon=1.0)


def test_predictors_recurrences_match_direct():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 10000, size=100_000)
    sma, ew = SMA(100), EWMA(100, 0.9)
    for L in lengths[:5000]:
        sma.update(int(L))
    assert sma.value == np.mean(lengths[4900:5000])
    ew.update_many(lengths.tolist())
    last = lengths[-100:][::-1]
    w = 0.9 ** np.arange(100)
    assert ew.value == pytest.approx(np.sum(w * last) / np.sum(w), rel=1e-9)
    assert SMA(3).value is None
    vals = SMA(3).values_after(np.array([3, 6, 9, 12]))
    np.testing.assert_array_equal(vals, [np.nan, 3.0, 4.5, 6.0, 9.0])
    direct = SMA(3)
    for L, want in zip([3, 6, 9, 12], vals[1:]):
        direct.update(L)
        assert direct.value == want
    ew = EWMA(4, 0.7)
    after = ew.values_after(np.array([5, 1, 8, 2, 9, 4]))
    for L, want in zip([5, 1, 8, 2, 9, 4], after[1:]):
        ew.update(L)
        assert ew.value == want


# -- bad input --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window": 0, "epsilon": 1.0}, "window must be an integer >= 1, got 0"),
        ({"window": 8, "epsilon": 0.0}, "epsilon must be finite and > 0, got 0.0"),
        ({"window": 8, "epsilon": 1.0, "height": 0}, "height must be an integer >= 1, got 0"),
        ({"window": 8, "epsilon": 1.0, "noise": "gauss"}, "noise must be one of"),
        ({"window": 8, "epsilon": 1.0, "sensitivity": -1}, "sensitivity must be > 0, got -1.0"),
        ({"window": 8, "epsilon": 1.0, "real": True},
         "the default discrete noise needs an integer stream; a stream of real values takes Laplace noise; "
         "pass noise='laplace'"),
        ({"window": 8, "epsilon": 1.0, "real": 1}, "real must be True or False, got 1"),
        ({"window": 8, "epsilon": 1.0, "max_item": 0}, "max_item must be in (0, 2**61], got 0"),
        ({"window": 8, "epsilon": 1.0, "max_item": 2.0**53, "real": True, "noise": "laplace"},
         "max_item must be in (0, 2**52]"),
        ({"window": 8, "epsilon": 1.0, "height": 63}, "height must be at most 62, got 63"),
        ({"window": 2**53, "epsilon": 1.0}, "window must be at most 2**52"),
        ({"window": 8, "epsilon": 1.0, "session": "s"}, "session must be a privpub.Session"),
    ],
)
@pytest.mark.parametrize("cls", ALL)
def test_bad_parameters(cls, kwargs, message):
    with pytest.raises(ParameterError, match=re.escape(message)):
        cls(**kwargs)


def test_bad_history_and_predictor():
    with pytest.raises(ParameterError, match="history must hold integer query lengths >= 1"):
        HQRTP(window=8, epsilon=1.0, history=[0])
    with pytest.raises(ParameterError, match="history is only used by adaptive"):
        RTP(window=8, epsilon=1.0, history=[3])
    with pytest.raises(ParameterError, match="predictor is only used by adaptive"):
        RTPMM(window=8, epsilon=1.0, predictor=SMA(3))
    with pytest.raises(ParameterError, match="predictor must be an SMA or EWMA"):
        HQRTP(window=8, epsilon=1.0, predictor=5)


@pytest.mark.parametrize("cls", ALL)
def test_bad_items(cls):
    pub = cls(window=8, epsilon=1.0)
    with pytest.raises(DomainError, match="items must be >= 0"):
        pub.append(-1)
    with pytest.raises(DomainError, match="finite"):
        pub.append(float("nan"))
    with pytest.raises(DomainError, match=re.escape("items must be integers (a stream of real values")):
        pub.append(1.5)
    with pytest.raises(DomainError, match="items must be >= 0"):
        pub.extend([1, -2])
    with pytest.raises(DomainError, match="finite"):
        pub.extend([1, np.inf])
    with pytest.raises(DomainError, match="real numbers"):
        pub.append("3")
    with pytest.raises(DomainError, match="booleans"):
        pub.extend(np.array([True, False]))
    with pytest.raises(DomainError, match=re.escape("got 2.5 at index 1")):
        pub.extend([1.0, 2.5])
    assert pub.t == 0  # nothing was ingested
    real = cls(window=8, epsilon=1.0, real=True, noise="laplace")
    real.append(1.5)
    real.extend([0.25, 3.0])
    assert real.t == 3
    # items bounded by the declared per-step bound
    bounded = cls(window=8, epsilon=1.0, max_item=100)
    bounded.extend([100, 0, 7])
    with pytest.raises(DomainError, match=re.escape("items must be at most max_item=100, got 101")):
        bounded.append(101)
    with pytest.raises(DomainError, match=re.escape("items must be at most max_item=100, got 250")):
        bounded.extend([3, 250])
    assert bounded.t == 3


@pytest.mark.parametrize("cls", [c for c in ALL if c is not BTH], ids=lambda c: c.__name__)
def test_discrete_noise_answers_lie_on_the_integer_lattice(cls):
    """Exact noise (issue 34): with the default discrete noise every answer is an integer (integer
    node sums plus exact discrete Laplace), whatever the array type; float noise of the same scale
    would put almost every answer off the lattice. BTH's least-squares answers are real numbers."""
    pub = cls(window=16, epsilon=1.0, rng=3)
    x = np.random.default_rng(1).integers(0, 4, 40)
    pub.extend(x)
    q = np.array([(l, r) for r in range(25, 41) for l in range(25, r + 1)], dtype=np.int64)  # the window
    ans = pub.answer(q, record=False)
    true = np.array([x[l - 1 : r].sum() for l, r in q])
    assert np.any(ans != true)  # noisy
    np.testing.assert_array_equal(ans, np.rint(ans))  # on the lattice, value by value


@pytest.mark.parametrize("cls", ALL)
def test_answer_types(cls):
    exact = cls(window=16, epsilon=1.0, rng=0)
    exact.extend(np.arange(20))
    real = cls(window=16, epsilon=1.0, rng=0, real=True, noise="laplace")
    real.extend(np.linspace(0, 3, 20))
    lap = cls(window=16, epsilon=1.0, rng=0, noise="laplace")
    lap.extend(np.arange(20))
    if cls is BTH:  # least-squares answers are real numbers
        assert exact.answer([[5, 20]]).dtype == np.float64
    else:
        assert exact.answer([[5, 20]]).dtype == np.int64
        assert type(exact.query(5, 20)) is int
    assert real.answer([[5, 20]]).dtype == np.float64 and type(real.query(5, 20)) is float
    assert lap.answer([[5, 20]]).dtype == np.float64


@pytest.mark.parametrize("cls", ALL)
def test_bad_queries(cls):
    pub = cls(window=8, epsilon=1.0, rng=0)
    pub.extend(np.arange(20))
    msg = "query must satisfy max(1, t - window + 1) <= l <= r <= t with t=20, window=8, got l=12, r=20"
    with pytest.raises(ParameterError, match=re.escape(msg)):
        pub.query(12, 20)  # outside the window
    with pytest.raises(ParameterError, match="got l=15, r=14"):
        pub.query(15, 14)
    with pytest.raises(ParameterError, match="got l=15, r=21"):
        pub.query(15, 21)
    with pytest.raises(ParameterError, match="l must be an integer"):
        pub.query(15.0, 16)
    with pytest.raises(ParameterError, match=re.escape("queries[1]")):
        pub.answer(np.array([[13, 20], [0, 3]]))
    with pytest.raises(ParameterError, match="shape"):
        pub.answer(np.zeros((2, 3), dtype=int))
    assert pub.answer(np.array([[13, 20], [20, 20]])).shape == (2,)


@pytest.mark.parametrize("noise", ["discrete", "laplace"])
def test_hq_rtpmm_batch_equals_online_with_changing_heights(noise, make_queries, run_online):
    data = np.random.default_rng(3).integers(0, 30, size=4000)
    queries = make_queries(4000, 1024, 150, 900, seed=4)
    kw = {"window": 1024, "epsilon": 1.0, "rng": 7, "noise": noise, "predictor": SMA(5)}
    a = HQRTPMM(**kw)
    kw["predictor"] = SMA(5)
    b = HQRTPMM(**kw)
    np.testing.assert_array_equal(run_online(a, data, queries), b.replay(data, queries))
    assert a.trees == b.trees
    assert len({h for _, h in a.trees}) >= 3


def test_replay_with_ewma_predictor(make_queries, run_online):
    data = np.random.default_rng(3).integers(0, 30, size=3000)
    queries = make_queries(3000, 2048, 1, 2048, seed=5)
    a = HQRTP(window=2048, epsilon=1.0, rng=1, predictor=EWMA(20, 0.8), noise="laplace")
    b = HQRTP(window=2048, epsilon=1.0, rng=1, predictor=EWMA(20, 0.8), noise="laplace")
    np.testing.assert_array_equal(run_online(a, data, queries), b.replay(data, queries))
    assert a.predictor.value == b.predictor.value


@pytest.mark.parametrize("cls", [RTP, HQRTP, BT])
def test_laplace_answers_are_exact_grid_values(cls):
    """``noise="laplace"`` (issue 34): node noise is discrete Laplace on the grid
    ``laplace_grid(epsilon, sensitivity)`` and real items are rounded to it, so every answer (a sum
    of noisy nodes) is an exact multiple of the grid: no floating-point Laplace bits to read."""
    from privpub.core import laplace_grid

    rng = np.random.default_rng(3)
    g = laplace_grid(0.7, 2.0)
    for real, items in ((False, rng.integers(0, 3, 300)), (True, rng.random(300) * 2.0)):
        pub = cls(window=512, epsilon=0.7, rng=1, noise="laplace", real=real, sensitivity=2.0)
        pub.extend(items[:150])
        for x in items[150:]:
            pub.append(float(x) if real else int(x))
        qs = np.array([[t - L + 1, t] for t in range(200, 301, 7) for L in (1, 5, 60) if L <= t])
        ans = pub.answer(qs)
        assert np.all(np.rint(ans / g) * g == ans)
