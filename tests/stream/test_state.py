"""Data minimisation and persistence (issue 16's needs): no raw history, bounded memory,
``state()`` / ``from_state()`` answer and continue identically without redrawing released noise."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from privpub.errors import ParameterError
from privpub.stream import BT, BTH, EWMA, HQRTP, HQRTPMM, RTP, RTPMM, SMA
from privpub.stream._base import StreamPublisher

ALL = [RTP, HQRTP, RTPMM, HQRTPMM, BT, BTH]


def _pub(cls, gen, noise="discrete", **kw):
    kw = {"window": 96, "epsilon": 0.8, "rng": gen, "noise": noise, **kw}
    if cls in (HQRTP, HQRTPMM):
        kw.setdefault("history", [150, 40, 300])
        kw.setdefault("predictor", SMA(5) if cls is HQRTP else EWMA(4, 0.8))
    elif "height" not in kw:
        kw["height"] = 5
    return cls(**kw)


def _raw_fields(state):
    """The only raw-data-derived fields of a state: the open tree's partial sums."""
    ot = state.get("open_tree") or state.get("open_block")
    return {k: v for k, v in ot.items() if k in ("local_sum", "anchors")} if ot else {}


@pytest.mark.parametrize("noise", ["discrete", "laplace"])
@pytest.mark.parametrize("cls", ALL)
def test_restored_publisher_answers_and_continues_identically(cls, noise):
    data = np.random.default_rng(0).integers(0, 20, size=700)
    gen = np.random.default_rng(42)
    pub = _pub(cls, gen, noise)
    pub.extend(data[:300])
    for x in data[300:333]:
        pub.append(int(x))
    pub.answer(np.array([[300, 333], [320, 333]]))  # adaptive: recorded lengths
    state = pickle.loads(pickle.dumps(pub.state()))  # plain data that survives serialisation
    assert "rng" not in str(state.keys()) and state["t"] == 333
    clone = StreamPublisher.from_state(state, rng=copy.deepcopy(gen))
    assert type(clone) is cls
    # released values: identical answers, no noise redrawn
    q = np.array([[l, r] for l in range(333 - 95, 334, 7) for r in range(l, 334, 11)])
    np.testing.assert_array_equal(clone.answer(q, record=False), pub.answer(q, record=False))
    assert clone.trees == pub.trees
    assert clone.ledger.entries == pub.ledger.entries
    # the same generator state: the same continuation, through appends, extends and queries
    for p in (pub, clone):
        p.extend(data[333:500])
        for x in data[500:520]:
            p.append(int(x))
        p.answer(np.array([[430, 520]]))
        p.extend(data[520:])
    q2 = np.array([[l, r] for l in range(700 - 95, 701, 5) for r in range(l, 701, 9)])
    np.testing.assert_array_equal(clone.answer(q2, record=False), pub.answer(q2, record=False))
    assert clone.trees == pub.trees
    assert clone.ledger.entries == pub.ledger.entries
    assert clone.ledger.total == pytest.approx(0.8)


@pytest.mark.parametrize("cls", ALL)
def test_state_keeps_no_raw_history(cls):
    """Two streams that differ only before the open tree leave the same raw fields in the state:
    of the raw data the state holds only the open tree's partial sums."""
    rng = np.random.default_rng(3)
    head_a, head_b = rng.integers(0, 50, size=160), rng.integers(0, 50, size=160)
    tail = rng.integers(0, 50, size=37)
    a, b = _pub(cls, 5, window=64), _pub(cls, 5, window=64)
    a.extend(np.concatenate([head_a, tail]))
    b.extend(np.concatenate([head_b, tail]))
    sa, sb = a.state(), b.state()
    assert a.trees[-1] == b.trees[-1] and a.trees[-1][0] > 160  # the streams differ before the open tree
    assert _raw_fields(sa) == _raw_fields(sb)
    assert len(_raw_fields(sa)["anchors"]) == a.trees[-1][1]  # at most one partial sum per level
    # everything else in the state is released noise, parameters or public layout
    assert set(sa) <= {"format", "version", "method", "params", "t", "ledger", "store_from", "Y", "NP", "R",
                       "Z", "H", "trees", "open_tree", "open_block", "predictor"}


@pytest.mark.parametrize("cls", ALL)
def test_memory_does_not_grow_with_the_stream(cls):
    """Only the window's released values (plus the open tree) are kept, however long the stream."""
    W = 256
    pub = _pub(cls, 1, window=W)
    rng = np.random.default_rng(2)
    sizes = []
    for step in range(40):
        pub.extend(rng.integers(0, 9, size=997))
        for x in rng.integers(0, 9, size=50):
            pub.append(int(x))
        if step >= 5:
            sizes.append(_stored(pub))
    T = max(1 << (k - 1) for _, k in pub.trees)
    assert pub.t == 40 * 1047
    assert max(sizes) <= 4 * (W + T + 2 * 1047)
    assert max(sizes[-10:]) <= max(sizes[:10])  # flat, not growing with t
    state = pub.state()
    n_state = sum(np.asarray(v).size for k, v in state.items() if k in ("Y", "NP", "R", "Z", "H"))
    assert n_state <= 3 * pub._k * (W + T) if hasattr(pub, "_k") else n_state <= 2 * (W + T + 1)


def _stored(pub):
    if hasattr(pub, "_store"):
        return pub._store.capacity + len(pub._open_lp)
    return pub._cap


def test_restore_uses_the_new_rng_for_new_nodes_only():
    data = np.arange(100)
    pub = RTP(window=64, epsilon=1.0, rng=0, height=4)
    pub.extend(data)
    state = pub.state()
    a = RTP.from_state(state, rng=1)
    b = RTP.from_state(state, rng=2)
    q = np.array([[40, 100], [37, 90]])
    np.testing.assert_array_equal(a.answer(q), b.answer(q))
    a.extend(data)
    b.extend(data)
    assert not np.array_equal(a.answer([[150, 200], [101 + 50, 170]]), b.answer([[150, 200], [151, 170]]))


def test_from_state_refuses_foreign_or_damaged_states():
    pub = RTP(window=16, epsilon=1.0, rng=0)
    pub.extend(np.arange(20))
    state = pub.state()
    with pytest.raises(ParameterError, match="cannot restore a BT"):
        BT.from_state(state)
    with pytest.raises(ParameterError, match="made by a stream publisher's state"):
        RTP.from_state({"format": "x"})
    bad = dict(state, Y=state["Y"][:-1])
    with pytest.raises(ParameterError, match="damaged"):
        RTP.from_state(bad)
    with pytest.raises(ParameterError, match="version"):
        RTP.from_state(dict(state, version=99))


@pytest.mark.parametrize("cls", ALL)
def test_state_without_checkpoint_does_not_change_the_noise(cls):
    """``state(checkpoint=False)`` (what the service calls after every write) leaves the publisher
    exactly as it was: same answers as a publisher never asked for its state; a publisher restored
    from it answers identically about the past and draws only nodes not yet released anew."""
    items = np.random.default_rng(5).integers(0, 40, size=700)
    plain, saved = _pub(cls, 3), _pub(cls, 3)
    states = []
    for a in range(0, 700, 70):
        plain.extend(items[a : a + 70])
        saved.extend(items[a : a + 70])
        states.append(saved.state(checkpoint=False))
    q = np.array([[t, t] for t in range(700 - 95, 701)] + [[610, 700], [650, 651]])
    assert np.array_equal(plain.answer(q, record=False), saved.answer(q, record=False))
    restored = StreamPublisher.from_state(copy.deepcopy(states[-1]), rng=99)
    assert np.array_equal(restored.answer(q, record=False), saved.answer(q, record=False))
    # the restored one continues with its own noise for new nodes; the past stays as it was
    restored.extend(items[:70])
    saved.extend(items[:70])
    q2 = np.array([[t, t] for t in range(700 - 25, 771)])
    assert not np.array_equal(restored.answer(q2[-70:], record=False), saved.answer(q2[-70:], record=False))
    if cls is not BTH:  # BTH's least squares re-estimates the open block's past steps as new nodes arrive
        assert np.array_equal(restored.answer(q2[:26], record=False), saved.answer(q2[:26], record=False))


def _same(a, b, path="state"):
    """Exact equality of two states (same keys, same Python types, identical arrays)."""
    if isinstance(a, dict):
        assert set(a) == set(b), (path, set(a) ^ set(b))
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert np.array_equal(np.asarray(a), np.asarray(b)), path
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b and type(a) is type(b), (path, a, b)


@pytest.mark.parametrize(("cls", "noise"), [(c, n) for c in ALL for n in ("discrete", "laplace")
                                             if not (c is BTH and n == "discrete")])  # BTH: laplace only
def test_delta_states_join_to_the_full_state(cls, noise):
    """Issue 22, finding 8: ``state(since=t0)`` holds only what changed after ``t0`` (O(new
    nodes), not O(window)); the last head and the parts that still meet the window rebuild the
    full state exactly (same released noise, same trees, same open tree), through tree-height
    changes (HQ), block completions (BTH rewrites a block's leaf estimates) and dropped parts."""
    from privpub.stream._persist import join_state, split_state, state_needs_from

    g = np.random.default_rng(7)
    pub = _pub(cls, np.random.default_rng(3), noise, window=40)
    head, part = split_state(pub.state(checkpoint=False))
    parts = [part]
    for _ in range(120):
        t0 = pub.t
        n = int(g.integers(0, 12))
        if g.random() < 0.5:
            pub.extend(g.integers(0, 9, n))
        else:
            for _ in range(n):
                pub.append(int(g.integers(0, 9)))
        if pub.t > 2 and cls in (HQRTP, HQRTPMM):
            r = int(g.integers(max(1, pub.t - 39), pub.t + 1))
            pub.query(int(g.integers(max(1, pub.t - 39), r + 1)), r)
        delta = pub.state(checkpoint=False, since=t0)
        head, part = split_state(delta)
        # a delta holds the new times only (BTH: from the start of the block that changed)
        slack = pub._Tb if cls is BTH else 0
        assert part["Y"].shape[-1] <= pub.t - t0 + slack
        parts.append(part)
        parts = [p for p in parts if p["t"] >= state_needs_from(head)]
        _same(join_state(head, parts), pub.state(checkpoint=False))
    assert len(parts) < 60  # parts before the window were dropped
    restored = StreamPublisher.from_state(join_state(head, parts))
    q = np.array([[max(1, pub.t - 39), pub.t], [pub.t, pub.t]])
    assert np.array_equal(restored.answer(q, record=False), pub.answer(q, record=False))
    with pytest.raises(ParameterError, match="delta"):
        StreamPublisher.from_state(delta)
    with pytest.raises(ParameterError, match="do not cover"):
        join_state(head, parts[-1:] if pub.t - 40 > parts[-1]["arrays_from"] else parts[-2:-1])


@pytest.mark.parametrize("method", ["mf_sqrt", "blt"])
def test_delta_states_of_the_factorisation_counters(method):
    """Issue 26: the matrix-factorisation counters persist incrementally too. The open block's
    noise ``z`` (drawn once, when the block opens) is in the part of the write that opened the block,
    never in the head (which every write replaces); the head keeps that part alive, and the joined
    state is the full one: restored, the publisher releases the rest of the open block with the same
    noise. Without that part the state is refused as damaged, never given new noise."""
    from privpub.stream import PUBLISHERS
    from privpub.stream._persist import join_state, split_state, state_needs_from

    g = np.random.default_rng(4)
    pub = PUBLISHERS[method](window=40, rho=0.5, rng=3, horizon=25)
    head, part = split_state(pub.state(checkpoint=False))
    parts = [part]
    for _ in range(60):
        t0 = pub.t
        pub.extend(g.integers(0, 9, int(g.integers(0, 9))))
        head, part = split_state(pub.state(checkpoint=False, since=t0))
        assert not [k for k, v in head.items() if isinstance(v, np.ndarray)] and "z" not in head["open_block"]
        # z travels once per block: only with the write that opened it
        opened = (t0 - 1) // 25 != (pub.t - 1) // 25 and pub.t > t0
        assert ("block_z" in part) == (opened and pub.t % 25 != 0)
        parts.append(part)
        parts = [p for p in parts if p["t"] >= state_needs_from(head)]
        _same(join_state(head, parts), pub.state(checkpoint=False))
    assert pub.t % 25 and len(parts) < 40
    restored = StreamPublisher.from_state(join_state(head, parts), rng=99)
    more = g.integers(0, 9, 25 - pub.t % 25)  # the rest of the open block: its noise, not the new rng's
    pub.extend(more)
    restored.extend(more)
    q = np.array([[max(1, pub.t - 39), pub.t], [pub.t, pub.t]])
    assert np.array_equal(restored.answer(q, record=False), pub.answer(q, record=False))
    with pytest.raises(ParameterError, match="without its noise"):
        StreamPublisher.from_state(join_state(head, [{k: v for k, v in p.items() if k != "block_z"} for p in parts]))
