"""Exactness of the oracles' samplers and compiled kernels, checked bit for bit against big-integer
references, and the distribution of whole bytes of unary reports (chi-square, with controls)."""

from __future__ import annotations

import itertools
from decimal import Decimal
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
from statutils import chisquare_pvalue

import privpub.ldp._base as base
import privpub.ldp._unary as unary
from privpub.ldp import OLH, OUE, SUE, UnaryEncoding
from privpub.ldp import _kernels as kernels
from privpub.ldp._base import Dyadic, bernoulli_exact, dyadic_down, dyadic_up, flip_probability
from privpub.ldp._olh import collision_probability
from privpub.ldp._unary import _byte_sampler, _fill_bytes, _fill_bytes_numpy

# ---------------------------------------------------------------------------------------------
# dyadic thresholds
# ---------------------------------------------------------------------------------------------


def test_dyadic_rounding_is_directed_and_tight() -> None:
    gen = np.random.default_rng(0)
    xs = [Fraction(int(a), int(b)) for a, b in gen.integers(1, 10**12, size=(200, 2)) if a < b]
    xs += [Fraction(1, 2**40), Fraction(1, 3), Fraction(2**-5), Fraction(1, 2), Fraction(2**64 - 1, 2**64)]
    for x in xs:
        up, down = dyadic_up(x), dyadic_down(x)
        for t in (up, down):
            assert 2**31 <= t.numerator < 2**32 or t.numerator == 2**31
        assert down.fraction <= x <= up.fraction
        assert up.fraction - Fraction(1, 2**up.bits) < x  # the smallest such threshold
        assert down.fraction + Fraction(1, 2**down.bits) > x
        if x.denominator & (x.denominator - 1) == 0 and x.numerator < 2**32:  # a 32-bit dyadic: exact
            assert up.fraction == down.fraction == x
    # a Decimal approximation is rounded with a margin that keeps the direction
    third = Decimal(1) / Decimal(3)
    assert dyadic_up(third).fraction >= Fraction(1, 3) >= dyadic_down(third).fraction
    with pytest.raises(ValueError, match="response probability"):
        dyadic_up(Fraction(1))


def test_flip_probability_privacy_direction() -> None:
    for eps, k in itertools.product([1e-6, 0.5, 1.0, 10.0, 40.0], [2, 3, 1000, 2**40]):
        r = flip_probability(eps, k).fraction
        assert 0 < r < 1
        # realised ratio (1 - r)(k - 1) / r <= e^eps, checked with 60-digit arithmetic
        ratio = (1 - r) * (k - 1) / r
        assert Decimal(ratio.numerator) / Decimal(ratio.denominator) <= base.exp_decimal(eps)


class _Words:
    """A stand-in generator whose raw words are given (to steer ties)."""

    def __init__(self, *batches: list[int]) -> None:
        self.batches = [np.array(b, dtype=np.uint64) for b in batches]
        self.bit_generator = SimpleNamespace(random_raw=self._raw)

    def _raw(self, size: int) -> np.ndarray:
        out = self.batches.pop(0)
        assert out.size == size
        return out


def test_bernoulli_exact_breaks_ties_on_later_words() -> None:
    t = Dyadic(0xABCDEF0123456789 * 2**36 + 0x0F0F0F0F, 100)  # 100 bits: two words
    w0, w1 = (int(w) for w in t.words())
    assert t.fraction == Fraction(w0 * 2**64 + w1, 2**128)
    gen = _Words([w0 - 1, w0, w0, w0 + 1, w0], [w1 - 1, w1, w1 + 1])
    out = bernoulli_exact(t, 5, gen)  # type: ignore[arg-type]
    # U < T: smaller first word; tie then smaller second word; equal on every word is U >= T
    assert out.tolist() == [True, True, False, False, False]


# ---------------------------------------------------------------------------------------------
# the byte sampler of unary encodings
# ---------------------------------------------------------------------------------------------


def _cdf(q: Dyadic) -> list[int]:
    one = 1 << q.bits
    cdf = [0]
    for o in range(256):
        c = o.bit_count()
        cdf.append(cdf[-1] + q.numerator**c * (one - q.numerator) ** (8 - c))
    return cdf


def _reference_byte(q: Dyadic, prefix: int, tail: list[int]) -> int:
    """The byte o with C_o <= U < C_(o+1), U = prefix . tail (64-bit words), by big integers."""
    cdf = _cdf(q)
    n_bits = 16 + 64 * len(tail)
    u = prefix
    for w in tail:
        u = (u << 64) | w
    assert n_bits >= 8 * q.bits
    return sum(1 for c in cdf[1:256] if c << (n_bits - 8 * q.bits) <= u)


def _one_byte(q: Dyadic, prefix: int, tail: list[int], compiled: bool = True) -> tuple[int, int]:
    smp = _byte_sampler(q.numerator, q.bits)
    out = np.zeros(1, dtype=np.uint8)
    if not compiled:  # the NumPy sampler (a stand-in generator with no words: running out fails)
        used = _fill_bytes_numpy(out, smp, np.array([prefix], dtype=np.uint64), np.array(tail, dtype=np.uint64),
                                 _Words())  # type: ignore[arg-type]
        return int(out[0]), used
    vbuf = np.empty(smp.amb_bounds.shape[1], dtype=np.uint64)
    done, used = kernels.ue_bytes(np.array([prefix], dtype=np.uint64), smp.table8, smp.table, smp.amb_base,
                                  smp.amb_off, smp.amb_bounds, np.array(tail, dtype=np.uint64), out, 0,
                                  np.empty(2, dtype=np.int64), vbuf)
    assert done == 1
    return int(out[0]), used


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0, 40.0, None])
def test_byte_sampler_is_exact_inversion(eps: float | None, compiled: bool) -> None:
    q = OUE(domain_size=8)._dyadic(eps)[1] if eps is not None else Dyadic(1, 1)  # None: q = 1/2
    smp = _byte_sampler(q.numerator, q.bits)
    n_words = smp.amb_bounds.shape[1]
    assert 0 <= smp.ambiguous <= 255 / 65536
    gen = np.random.default_rng(int((eps or 0) * 10))
    # unambiguous prefixes: the table is the reference whatever the following bits
    for prefix in gen.integers(0, 1 << 16, 300):
        if smp.table[prefix] < 256:
            lo = _reference_byte(q, int(prefix), [0] * n_words)
            hi = _reference_byte(q, int(prefix), [2**64 - 1] * n_words)
            assert lo == hi == smp.table[prefix]
    # every ambiguous prefix, with random tails and tails equal to / just below each boundary
    ambiguous = np.flatnonzero(smp.table >= 256)
    assert ambiguous.size == smp.amb_base.size
    for prefix in ambiguous:
        a = smp.table[prefix] - 256
        tails = [[int(w) for w in gen.integers(0, 2**64, n_words, dtype=np.uint64)] for _ in range(20)]
        for bound in smp.amb_bounds[smp.amb_off[a] : smp.amb_off[a + 1]]:
            exact = [int(w) for w in bound]
            tails.append(exact)
            below = list(exact)
            i = n_words - 1
            while below[i] == 0:  # borrow
                below[i] = 2**64 - 1
                i -= 1
            below[i] -= 1
            tails.append(below)
        for tail in tails:
            got, used = _one_byte(q, int(prefix), tail, compiled)
            assert got == _reference_byte(q, int(prefix), tail)
            assert 1 <= used <= n_words
            # the answer does not depend on the words it did not read
            other = tail[:used] + [2**64 - 1 - w for w in tail[used:]]
            assert _one_byte(q, int(prefix), other, compiled)[0] == got


def test_fill_bytes_resumes_when_refinement_words_run_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starved refinement and pending buffers give the same bytes as ample ones (same stream)."""
    q = OUE(domain_size=8)._dyadic(1.0)[1]
    smp = _byte_sampler(q.numerator, q.bits)
    out = np.empty(40_003, dtype=np.uint8)  # a last, partial word too
    _fill_bytes(out, q, np.random.default_rng(4))
    monkeypatch.setattr(unary, "_FALLBACK_WORDS", 1)
    monkeypatch.setattr(unary, "_BLOCK_WORDS", 3)
    monkeypatch.setattr(unary, "_FALLBACK_SCALE", 0.0)
    again = np.empty_like(out)
    _fill_bytes(again, q, np.random.default_rng(4))
    np.testing.assert_array_equal(again, out)
    # every byte starts from its own 16 bits of the raw words
    raw = np.random.default_rng(4).bit_generator.random_raw(10_001)
    prefixes = raw.view("<u2")[: out.size]  # little-endian: word c // 4, bits 16 (c % 4) ...
    direct = smp.table[prefixes] < 256
    assert 0.97 < direct.mean() < 1
    np.testing.assert_array_equal(out[direct], smp.table[prefixes][direct])


@pytest.mark.parametrize("starved", [False, True])
@pytest.mark.parametrize("eps", [0.5, 1.0, 40.0, None])
def test_numpy_sampler_draws_the_compiled_kernels_bytes(eps: float | None, starved: bool,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The NumPy sampler (small jobs: a device never imports Numba) writes the same bytes as the
    compiled kernel and consumes the same words of the stream, also when the refinement words
    run out and are extended again and again (starved)."""
    q = OUE(domain_size=8)._dyadic(eps)[1] if eps is not None else Dyadic(1, 1)
    if starved:
        monkeypatch.setattr(unary, "_FALLBACK_WORDS", 1)
        monkeypatch.setattr(unary, "_FALLBACK_SCALE", 0.0)
    for n in (1, 3, 4, 5, 4099, 40_003):
        got = {}
        for compiled in (True, False):
            out = np.empty(n, dtype=np.uint8)
            gen = np.random.default_rng(n)
            _fill_bytes(out, q, gen, compiled=compiled)
            got[compiled] = out, int(gen.bit_generator.random_raw())  # the next word: as many were drawn
        np.testing.assert_array_equal(got[False][0], got[True][0])
        assert got[False][1] == got[True][1]


@pytest.mark.parametrize("oracle", [OUE(domain_size=13), SUE(domain_size=9), OUE(domain_size=1000)],
                         ids=["OUE", "SUE", "OUE-1000"])
def test_small_and_large_reports_take_either_path_with_the_same_result(oracle: UnaryEncoding,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``perturb`` uses NumPy up to ``_NUMPY_MAX_BYTES`` and Numba above: same reports per seed."""
    values = np.random.default_rng(0).integers(0, oracle.domain_size, 3000)
    monkeypatch.setattr(unary, "_NUMPY_MAX_BYTES", 0)
    compiled = oracle.perturb(values, epsilon=1.0, rng=5)
    monkeypatch.setattr(unary, "_NUMPY_MAX_BYTES", 1 << 40)
    np.testing.assert_array_equal(oracle.perturb(values, epsilon=1.0, rng=5), compiled)


@pytest.mark.statistical
@pytest.mark.parametrize("eps", [0.5, 4.0])
def test_bytes_follow_the_exact_product_law(eps: float) -> None:
    """All 256 bytes of 8 Bernoulli(q) cells, against the exact law; control: the law of 2 eps."""
    q = OUE(domain_size=8)._dyadic(eps)[1]
    law = np.array([c1 - c0 for c0, c1 in itertools.pairwise(_cdf(q))], dtype=np.float64) / 2.0 ** (8 * q.bits)
    out = np.empty(200_000, dtype=np.uint8)
    _fill_bytes(out, q, np.random.default_rng(7))
    assert chisquare_pvalue(np.bincount(out, minlength=256), law) > 1e-4
    q2 = OUE(domain_size=8)._dyadic(2 * eps)[1]
    _fill_bytes(out, q2, np.random.default_rng(8))
    assert chisquare_pvalue(np.bincount(out, minlength=256), law) < 1e-8


def _exact_report_law(p: float, q: float, d: int, x: int) -> np.ndarray:
    cells = np.array(list(itertools.product([0, 1], repeat=d)), dtype=bool)[:, ::-1]  # cell j = bit j
    own = np.arange(d) == x
    return np.where(own, np.where(cells, p, 1 - p), np.where(cells, q, 1 - q)).prod(axis=1)


@pytest.mark.statistical
def test_own_cell_paths_realise_the_exact_law() -> None:
    """OUE (a fair own bit), SUE (complemented own bit) and a generic p (an exact Bernoulli(p))."""

    class ThreeQuarters(UnaryEncoding):
        def _dyadic(self, epsilon: float | None) -> tuple[Dyadic, Dyadic]:
            return Dyadic(3, 2), Dyadic(5, 4)

    d = 5
    for oracle, eps in ((OUE(domain_size=d), 1.0), (SUE(domain_size=d), 1.0), (ThreeQuarters(domain_size=d), None)):
        p, q = oracle.probabilities(eps)
        for x in (0, 3):
            reports = oracle.perturb(np.full(60_000, x), epsilon=eps, rng=20 + x)
            assert reports.shape == (60_000, 1) and not np.any(reports >> d)
            obs = np.bincount(reports[:, 0], minlength=2**d)
            assert chisquare_pvalue(obs, _exact_report_law(p, q, d, x)) > 1e-4, type(oracle).__name__
            # control: the law of another input is rejected
            assert chisquare_pvalue(obs, _exact_report_law(p, q, d, (x + 1) % d)) < 1e-8
    assert ThreeQuarters(domain_size=d).effective_epsilon() == pytest.approx(np.log(3 * (11 / 16) / (5 / 16)))


def test_reports_do_not_depend_on_the_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.random.default_rng(1).integers(0, 1000, 5_000)
    oracle = OUE(domain_size=1000)
    threaded = oracle.perturb(values, epsilon=1.0, rng=3)
    monkeypatch.setattr(base, "N_THREADS", 1)
    np.testing.assert_array_equal(oracle.perturb(values, epsilon=1.0, rng=3), threaded)


def test_column_counts_match_unpacked_sums() -> None:
    gen = np.random.default_rng(2)
    cases = [(0, 3), (1, 1), (254, 2), (255, 17), (256, 128), (1000, 5), (3000, 1), (2041, 12), (600, 8),
             (16 * 255 * 2 + 37, 128), (16 * 256 * 8 + 5, 1), (5000, 120), (700, 1000), (33, 8192)]
    for n, width in cases:
        rows = gen.integers(0, 256, size=(n, width), dtype=np.uint8)
        counts = np.zeros(8 * width, dtype=np.int64)
        kernels.column_counts(rows.reshape(-1), width, counts)
        np.testing.assert_array_equal(counts, np.unpackbits(rows, axis=1, bitorder="little").sum(axis=0))


def test_small_counts_in_numpy_equal_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reports up to ``_NUMPY_COUNT_BYTES`` are counted in NumPy (no compilation): same counts as
    the kernel for packed uint8, packed uint64 and bool rows."""
    from privpub.ldp import _unary

    gen = np.random.default_rng(4)
    for d, n in [(2, 5), (8, 300), (61, 1000), (130, 2000)]:
        oracle = OUE(domain_size=d)
        packed = oracle.perturb(gen.integers(0, d, n), epsilon=1.0, rng=int(gen.integers(1 << 30)))
        truth = np.unpackbits(packed, axis=1, bitorder="little")[:, :d].sum(axis=0)
        words = np.zeros((n, (d + 63) // 64 * 8), dtype=np.uint8)
        words[:, : packed.shape[1]] = packed
        forms = [packed, words.view("<u8"), np.unpackbits(packed, axis=1, count=d, bitorder="little").view(bool)]
        for limit in (_unary._NUMPY_COUNT_BYTES, -1):  # NumPy, then the kernel
            monkeypatch.setattr(_unary, "_NUMPY_COUNT_BYTES", limit)
            for r in forms:
                np.testing.assert_array_equal(oracle.aggregate(r), truth)


# ---------------------------------------------------------------------------------------------
# OLH
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("prime", [7, 13])
def test_collision_probability_by_enumerating_the_hash_family(prime: int) -> None:
    for g in range(2, prime + 3):
        same = total = 0
        for a in range(1, prime):
            for b in range(prime):
                h = [((a * x + b) % prime) % g for x in (2, 5)]
                same += h[0] == h[1]
                total += 1
        assert collision_probability(g, prime) == Fraction(same, total)


def _brute_support(reports: np.ndarray, g: int, d: int) -> np.ndarray:
    a, b, y = (reports[:, j : j + 1].astype(object) for j in range(3))
    v = np.arange(d, dtype=object)[None, :]
    return ((((a * v + b) % (2**31 - 1)) % g) == y).sum(axis=0).astype(np.int64)


@pytest.mark.parametrize("g", [2, 3, 56, 1000, 2**20 + 7, 2**31 - 2, 2**31 - 1, 2**31 + 5, 2**40])
def test_olh_kernels_agree_with_brute_force(g: int) -> None:
    d = 300
    gen = np.random.default_rng(g % 1000)
    n = 400
    a = gen.integers(1, 2**31 - 1, n)
    b = gen.integers(0, 2**31 - 1, n)
    v = gen.integers(0, d, n)
    y = ((a * v + b) % (2**31 - 1)) % g
    y[::3] = gen.integers(0, g, y[::3].size)  # some randomised buckets
    reports = np.stack([a, b, y], axis=1)
    expected = _brute_support(reports, g, d)
    for kernel in (kernels.olh_support_scan, kernels.olh_support_enumerate):
        if kernel is kernels.olh_support_scan and g >= 2**31:
            continue
        if kernel is kernels.olh_support_enumerate and g < 1000:
            continue  # P / g pre-images per user: too slow for a test
        counts = np.zeros(d, dtype=np.int64)
        if kernel is kernels.olh_support_scan:
            for block in (64, kernels.OLH_BLOCK):  # 64: several blocks of values, the last one partial
                counts[:] = 0
                acc = np.zeros(block, dtype=np.uint32)
                kernel(a, b, y, g, d, counts, acc)
                np.testing.assert_array_equal(counts, expected, err_msg=f"scan, block {block}")
                assert not acc.any()
            continue
        kernel(a, b, y, g, d, counts)
        np.testing.assert_array_equal(counts, expected, err_msg=kernel.__name__)
    np.testing.assert_array_equal(OLH(domain_size=d, g=g).aggregate(reports), expected)


def test_olh_aggregate_rejects_hashes_outside_the_family() -> None:
    oracle = OLH(domain_size=4)
    from privpub.errors import DomainError

    for bad in ([0, 1, 0], [2**31 - 1, 1, 0], [1, -1, 0], [1, 2**31 - 1, 0]):
        with pytest.raises(DomainError, match=r"\(a, b\)"):
            oracle.aggregate(np.array([bad]), epsilon=1.0)
