"""Fuzzing the five parts' publishers: constructors and ``publish`` with malformed data and parameters.

Every name of every part's ``PUBLISHERS`` registry is fuzzed (a test checks the lists against the
registries). Each call either raises a privpub error or succeeds; a success must keep every input
record (no silent dropping), reject non-finite data, return no NaN or infinity, and carry a
ledger of the requested epsilon. Some calls run under a :class:`privpub.Session` too small or
large enough to pay: a session that cannot pay raises a privpub error and records nothing. Each
example must finish within 30 s (the Hypothesis deadline of ``FUZZ``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fuzz_strategies import FUZZ, arrays, call, epsilons, has_non_finite, mostly, rngs, scalars
from hypothesis import given
from hypothesis import strategies as st

from privpub.core import CategoricalAttribute, NumericAttribute, Schema, Session
from privpub.errors import BudgetExceededError

#: sessions of the fuzzed calls: none, one that cannot pay any epsilon drawn, and a roomy one
sessions = st.sampled_from([None, 1e-12, 1e6])


def _session(total: float | None) -> Session | None:
    return None if total is None else Session(total_epsilon=total)


def _check_session(session: Session | None, ok: bool, result: object) -> None:
    """A session pays for a successful release; one that cannot pay refuses with a privpub error."""
    if session is None:
        return
    if not ok and isinstance(result, BudgetExceededError):
        assert session.spent == 0.0  # nothing released, nothing recorded
    if ok:
        assert session.spent > 0.0


def _finite_values(release: object, *names: str) -> None:
    for name in names:
        value = getattr(release, name)
        arr = np.asarray(value() if callable(value) else value, dtype=np.float64)
        assert np.all(np.isfinite(arr)), f"{type(release).__name__}.{name} holds NaN or infinity"


HISTOGRAMS = ["ahp", "dawa", "hphp", "hphp_paper", "hphp_unattributed", "laplace", "optimal"]
STREAMS = ["bt", "bth", "hq_rtp", "hq_rtpmm", "rtp", "rtp_mm"]
SPATIALS = ["ahead", "gtr", "hdg", "kdght", "rappor", "ug"]
DECISIONS = ["diffgen", "maxgddp"]


def test_every_registered_publisher_is_fuzzed() -> None:
    from privpub import decision, histogram, spatial, stream

    assert sorted(histogram.PUBLISHERS) == HISTOGRAMS
    assert sorted(stream.PUBLISHERS) == sorted([*STREAMS, "blt", "mf_range", "mf_sqrt"])  # zCDP only (stream/test_zcdp)
    assert sorted(spatial.PUBLISHERS) == SPATIALS
    assert sorted(decision.PUBLISHERS) == sorted([*DECISIONS, "aim", "mst"])  # zCDP: decision/test_synth

#: no huge ints where a parameter sizes an allocation (window, height, grid): memory bombs are not bugs
small = st.one_of(st.integers(-2, 12), scalars().filter(lambda v: not isinstance(v, int) or abs(v) < 64))
words = st.one_of(st.sampled_from(["discrete", "laplace", "bogus", "", "private", "unattributed", "paper",
                                   "simulate", "per_user", "fast", "em"]), scalars())


def _module(name: str):
    return pytest.importorskip(f"privpub.{name}", reason=f"privpub.{name} is not importable")


# -- histogram -----------------------------------------------------------------------------------
counts = st.lists(st.integers(0, 200), min_size=1, max_size=12)


@pytest.mark.parametrize("name", HISTOGRAMS)
@FUZZ
@given(data=mostly(counts, arrays()),
       epsilon=epsilons(), rng=rngs(), total=sessions)
def test_histogram_publish(name, data, epsilon, rng, total) -> None:
    import warnings

    from privpub.errors import PrivacyWarning

    hist = _module("histogram")
    session = _session(total)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # hphp_paper and optimal say they are not private
        ok, rel = call(lambda: hist.PUBLISHERS[name]().publish(data, epsilon=epsilon, rng=rng, session=session),
                       known="parts")
    _check_session(session, ok, rel)
    if ok:
        assert not has_non_finite(data)
        assert rel.counts.shape == (np.asarray(data).size,)
        assert np.all(np.isfinite(rel.counts))
        # the non-private reproductions (hphp_paper, optimal) carry an infinite ledger
        assert rel.ledger.total == (pytest.approx(float(epsilon)) if rel.private else float("inf"))


@FUZZ
@given(variant=words, split=scalars(), noise=words, eta=scalars(), ratio=scalars(), clamp=scalars())
def test_histogram_constructors(variant, split, noise, eta, ratio, clamp) -> None:
    hist = _module("histogram")
    call(lambda: hist.HPHP(variant=variant, split=split, noise=noise, eta=eta))
    call(lambda: hist.AHP(ratio=ratio, eta=eta, noise=noise))
    call(lambda: hist.LaplaceHistogram(noise=noise, clamp=clamp))


# -- stream --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", STREAMS)
@FUZZ
@given(window=mostly(st.integers(1, 16), small), epsilon=epsilons(),
       height=mostly(st.one_of(st.none(), st.integers(1, 5)), small),
       noise=mostly(st.sampled_from(["discrete", "laplace"]), words),
       sensitivity=mostly(st.sampled_from([1.0, 2.0]), scalars()),
       items=mostly(st.lists(st.integers(0, 5), max_size=12), arrays()),
       l=mostly(st.integers(1, 12), small), r=mostly(st.integers(1, 12), small))
def test_stream(name, window, epsilon, height, noise, sensitivity, items, l, r) -> None:
    stream = _module("stream")
    cls = stream.PUBLISHERS[name]
    ok, pub = call(lambda: cls(window=window, epsilon=epsilon, rng=0, height=height, noise=noise,
                               sensitivity=sensitivity))
    if not ok:
        return
    ok, _ = call(lambda: pub.extend(items), known="parts")
    if ok:
        assert not has_non_finite(items)
        assert pub.t == np.asarray(items).size  # every item counted
    ok, answer = call(lambda: pub.query(l, r), known="parts")
    if ok:
        assert np.isfinite(answer)


# -- spatial -------------------------------------------------------------------------------------
points = mostly(st.lists(st.tuples(st.floats(-0.5, 1.5), st.floats(-0.5, 1.5)), min_size=1,
                                      max_size=12).map(np.asarray), arrays())
bounds = mostly(st.just((0.0, 0.0, 1.0, 1.0)), st.one_of(
    st.just((1.0, 1.0, 0.0, 0.0)), st.just("0,0,1,1"), st.tuples(scalars(), scalars(), scalars(), scalars()),
    arrays()))


@pytest.mark.parametrize("name", SPATIALS)
@FUZZ
@given(pts=points, box=bounds, epsilon=epsilons(),
       rng=rngs(), mode=mostly(st.sampled_from(["simulate", "per_user"]), words), total=sessions)
def test_spatial_publish(name, pts, box, epsilon, rng, mode, total) -> None:
    spatial = _module("spatial")
    pub = spatial.PUBLISHERS[name]()
    session = _session(total)
    ok, rel = call(lambda: pub.publish(pts, bounds=box, epsilon=epsilon, rng=rng, mode=mode, session=session))
    _check_session(session, ok, rel)
    if ok:
        assert not has_non_finite(pts)
        assert rel.n_users == len(pts)  # every point reported (or the call refused)
        _finite_values(rel, "values")
        assert np.all(np.isfinite(rel.range_count([[0.1, 0.1, 0.6, 0.9]])))
        assert rel.ledger.total == pytest.approx(float(epsilon))


# -- decision and ldp_synth: tables --------------------------------------------------------------
SCHEMA = Schema([CategoricalAttribute("a", ["x", "y"]), NumericAttribute("n", 0, 9)],
                class_name="cls", classes=["p", "q"])
cells = st.one_of(st.sampled_from(["x", "y", "p", "q", "zz", "", None]), st.integers(-2, 12), scalars())


@st.composite
def tables(draw) -> pd.DataFrame:
    n = draw(st.integers(0, 8))
    cols = {c: draw(st.lists(cells, min_size=n, max_size=n)) for c in ("a", "n", "cls")}
    frame = pd.DataFrame({c: pd.Series(v, dtype=object) for c, v in cols.items()})
    if draw(st.booleans()):  # mostly valid rows
        frame = pd.DataFrame({"a": (["x", "y"] * 8)[:n], "n": [i % 10 for i in range(n)],
                              "cls": (["p", "q", "q"] * 8)[:n]})
        if n and draw(st.booleans()):
            col = draw(st.sampled_from(["a", "n", "cls"]))
            frame[col] = frame[col].astype(object)
            frame.loc[draw(st.integers(0, n - 1)), col] = draw(cells)
    if draw(st.booleans()) and frame.shape[1]:
        frame = frame.drop(columns=draw(st.sampled_from(list(frame.columns))))
    return frame


@pytest.mark.parametrize("name", DECISIONS)
@FUZZ
@given(frame=tables(), epsilon=epsilons(), rng=rngs(),
       levels=mostly(st.integers(1, 3), small), total=sessions)
def test_decision_publish(name, frame, epsilon, rng, levels, total) -> None:
    decision = _module("decision")
    ok, pub = call(lambda: decision.PUBLISHERS[name](levels=levels))
    if not ok:
        pub = decision.PUBLISHERS[name](levels=1)
    session = _session(total)
    ok, rel = call(lambda: pub.publish(frame, schema=SCHEMA, epsilon=epsilon, rng=rng, session=session),
                   known="parts")
    _check_session(session, ok, rel)
    if ok:
        assert set(frame["a"]) <= {"x", "y"} and set(frame["cls"]) <= {"p", "q"}
        _finite_values(rel, "counts")
        assert rel.ledger.total == pytest.approx(float(epsilon))


LDP_SCHEMA = Schema([CategoricalAttribute("a", ["x", "y"]), CategoricalAttribute("cls", ["p", "q"])])


@FUZZ
@given(frame=tables(), epsilon=epsilons(), flip=mostly(st.none(), scalars()),
       degree=mostly(st.integers(0, 2), small), rng=rngs())
def test_ldp_synth_publish(frame, epsilon, flip, degree, rng) -> None:
    synth = _module("ldp_synth")
    ok, pub = call(lambda: synth.LDPBayesSynthesizer(degree=degree, max_iter=50))
    if not ok:
        pub = synth.LDPBayesSynthesizer(degree=1, max_iter=50)
    data = frame.drop(columns=[c for c in frame.columns if c == "n"])
    ok, rel = call(lambda: pub.publish(data, schema=LDP_SCHEMA, epsilon=epsilon, flip_prob=flip, rng=rng),
                   known="parts")
    if ok:
        assert set(data["a"]) <= {"x", "y"} and set(data["cls"]) <= {"p", "q"}
        ok, sample = call(lambda: rel.sample(5, rng=0))
        assert ok, sample
        assert len(sample) == 5 and set(sample["a"]) <= {"x", "y"}
