"""The fast variance and one-range answer paths (issue 27) against straightforward references."""

from __future__ import annotations

import numpy as np
import pytest

from privpub.stream import PUBLISHERS, StreamPublisher
from privpub.stream import _kernels as K

RTOL = 1e-12


def reference_variance(pub: StreamPublisher, l: int, r: int) -> float:
    """The variance as computed before issue 27: decompositions, covers and kernels on arrays."""
    if pub._structure == "fenwick" and hasattr(pub, "_trees"):
        starts, cfgs = pub._trees.overlapping(l, r)
        total = 0.0
        for s, cfg in zip(starts, cfgs):
            nv = cfg.plan.variances[cfg.row]
            for _, v, _c in K.decompose(l, r, [int(s)], [cfg.k]):
                total += float(nv[v - 1])
        return total
    if pub.method == "bt":
        return len(pub._cover(np.array([l]), np.array([r]))[0]) * pub._node_var()
    if pub.method == "bth":
        T, k, t = pub._Tb, pub._k, pub.t
        B = (t // T) * T
        total, s = 0.0, ((l - 1) // T) * T
        while s < min(r, B):
            a, b = max(l, s + 1) - s, min(r, s + T) - s
            total += float(K.bth_piece_variance(k, np.array([a]), np.array([b]))[0])
            s += T
        u = t - B
        for lev in range(k - 2, -1, -1):
            if (u >> lev) & 1:
                start = B + ((u >> (lev + 1)) << (lev + 1))
                a, b = max(l, start + 1), min(r, start + (1 << lev))
                if a <= b:
                    total += float(K.bth_piece_variance(lev + 1, np.array([a - start]), np.array([b - start]))[0])
        return total * pub._node_var()
    return pub.answer_variance(l, r)  # the matrix-factorisation publishers keep their formula


def publishers() -> list[tuple[str, dict[str, object]]]:
    out: list[tuple[str, dict[str, object]]] = []
    for method, cls in sorted(PUBLISHERS.items()):
        budget: dict[str, object] = {"rho": 0.5} if "pure-dp" not in cls.measures else {"epsilon": 1.0}
        for window in (1, 7, 64, 300):
            out.append((method, {"window": window, **budget}))
        if method in ("bt", "bth", "rtp"):
            out.append((method, {"window": 100, "height": 3, **budget}))
    return out


@pytest.mark.parametrize(("method", "kw"), publishers(), ids=lambda x: str(x))
def test_variance_and_answer_paths_match_reference(method: str, kw: dict[str, object]) -> None:
    rng = np.random.default_rng(7)
    pub = PUBLISHERS[method](rng=1, **kw)
    checked = 0
    for chunk in (1, 5, 40, 13, 150, 3, 90):
        pub.extend(rng.integers(0, 6, chunk))
        t, W = pub.t, pub.window
        first = max(1, t - W + 1)
        a = rng.integers(first, t + 1, 60)
        b = rng.integers(first, t + 1, 60)
        pairs = [*zip(np.minimum(a, b).tolist(), np.maximum(a, b).tolist()), (first, t), (t, t), (first, first)]
        for l, r in pairs:
            ref = reference_variance(pub, l, r)
            assert pub.answer_variance(l, r) == pytest.approx(ref, rel=RTOL, abs=0.0)
            assert pub._variance_checked(l, r) == pytest.approx(ref, rel=RTOL, abs=0.0)
            one = pub._answer_one(l, r, t)
            assert one == pub._answer_at(np.array([l]), np.array([r]), np.array([t]))[0].item()
            assert type(one) is type(pub.query(l, r))
            checked += 1
        pub.answer(np.array(pairs))  # queries steer the adaptive publishers' next trees
    assert checked > 400


def test_bth_piece_variance_one_is_the_array_kernel() -> None:
    rng = np.random.default_rng(3)
    for k in range(1, 9):
        T = 1 << (k - 1)
        a = rng.integers(1, T + 1, 50)
        b = rng.integers(1, T + 1, 50)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        ref = K.bth_piece_variance(k, lo, hi)
        got = [K.bth_piece_variance_one(k, int(x), int(y)) for x, y in zip(lo, hi)]
        assert got == ref.tolist()  # the same operations in the same order: the same floats


def test_answer_variance_still_checks_its_arguments() -> None:
    from privpub.errors import ParameterError

    for method in ("rtp", "bt", "bth"):
        pub = PUBLISHERS[method](window=8, epsilon=1.0, rng=0)
        pub.extend([1, 2, 3])
        for l, r in ((0, 2), (2, 1), (1, 4), (True, 2), (1.0, 2)):
            with pytest.raises(ParameterError):
                pub.answer_variance(l, r)
        assert pub.answer_variance(np.int64(1), np.int64(3)) == pub.answer_variance(1, 3)
