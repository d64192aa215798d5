"""Exact sampling of the discrete Laplace distribution with a rational scale (integer arithmetic only).

The sampler behind :func:`privpub.core.discrete_laplace_noise`: ``P[Z = z]`` proportional to
``exp(-|z| s / t)`` for integers ``t, s >= 1``. Two exact routes, chosen by ``(size, t, s)`` only
(:func:`uses_tables`), so that a seed fixes the draws:

* **Threshold tables** (:mod:`privpub.core._dlap_table`; scales below about 150, and scales
  below about 2,300 in batches at least 64 times the table length): inversion of one uniform
  63-bit word against the integer floors of ``2**63 P[|Z| >= k]``, computed once per scale with
  integer interval arithmetic; a word equal to a threshold (probability ``2**-63`` per
  threshold) is resolved exactly by the following bits of the uniform. About one word and
  5-10 ns per draw on every scale (``docs/benchmarks.md``: 0.3-0.8x NumPy's float Laplace on
  40 epsilons in [0.05, 10]).
* **The loop of Canonne, Kamath and Steinke** [CKS20]_ otherwise: Bernoulli(exp(-gamma)) for
  rational ``gamma <= 1`` by their Algorithm 1, whose events ``K > j`` have the rational
  probabilities ``gamma^j / j!``, so one uniform integer compared with precomputed integer
  thresholds decides the first ``m`` steps of the loop at once (the rare remainder continues the
  loop step by step); the discrete Laplace by their Algorithm 2 when the scale is above 1, and by
  a direct geometric count of Bernoulli(exp(-s/t)) successes when it is at most 1. 0.4-2 random
  64-bit words and 20-45 ns per draw for the usual scales (about 5 words and 45-60 ns when the
  scale's numerator exceeds about 4 * 10^8, e.g. ``rational_scale(0.7, 3)``).

No floating-point number is involved anywhere, so the output distribution is exactly the
discrete Laplace (up to the quality of the generator's bits). The kernels run compiled
(:mod:`privpub.core._dlap_jit`, Numba, imported on first use and cached on disk).

References
----------
.. [CKS20] Canonne, Kamath, Steinke. The discrete Gaussian for differential privacy. NeurIPS
   2020, arXiv:2004.00010, Algorithms 1 and 2.
"""

from __future__ import annotations

import functools
import math
from types import ModuleType
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from privpub.core._dlap_table import MAX_LEN, guide_bits, inverse_tables, resolve_tie, table_length
from privpub.errors import DomainError, ParameterError

__all__ = ["bernoulli_exp_exact", "discrete_laplace_exact", "geometric_exact", "fill_tables", "sampler_tables",
           "uses_tables"]

_WORD = 1 << 63  # the kernel uses 63-bit uniform words
#: a word is rejected with probability below 1 / _MIN_MULTIPLE (the thresholds' multiplier >= it)
_MIN_MULTIPLE = 64
#: cap on the steps decided by one word (the loop's remainder has probability <= 1 / m!)
_MAX_STEPS = 19
#: largest t and s (rational_scale keeps the scale's numerator and denominator below it)
_MAX_INT = 1 << 52
#: largest denominator of a single Bernoulli(exp(-num/den)) (the kernel's bound)
_MAX_DEN = 1 << 62
#: tables at most this long are used for any number of draws (see uses_tables)
SHORT_TABLE = 512


class SamplerTables(NamedTuple):
    """Integer constants of the kernel for one scale ``t / s`` (see :func:`sampler_tables`)."""

    s_shift: int  # log2(s) if s is a power of two, else -1
    kt: int  # floor((2**63 - 1) / t) ...
    lim_t: int  # ... and kt * t: a word below lim_t gives the uniform w // kt on [0, t)
    lim_u: int  # s < t: one word per proposal (see _low_part)
    kd: int
    kc: NDArray[np.int64]
    g0: int  # s >= t: s / t = g0 + r / t
    r: int
    lim_f: int
    thr_f: NDArray[np.int64]


@functools.cache
def _jit() -> ModuleType:
    """The compiled kernel, imported on first use (``import privpub`` does not load Numba)."""
    from privpub.core import _dlap_jit

    return _dlap_jit


def _steps(width: int, extra: int, cap: int) -> int:
    """Largest ``m <= cap`` with ``width^(m + extra) m! * _MIN_MULTIPLE <= 2**63``."""
    m = 0
    while m < cap and width ** (m + 1 + extra) * math.factorial(m + 1) * _MIN_MULTIPLE <= _WORD:
        m += 1
    return m


def _thresholds(num: int, den: int, m: int, extra: int) -> tuple[int, NDArray[np.int64], int]:
    """Pre-multiplied thresholds of the first ``m`` steps of Bernoulli(exp(-num/den)).

    ``D = den^m m!``, ``k = floor((2**63 - 1) / (den^extra D))``; returns ``(k D, [k num^j den^(m-j)
    m!/j!]_j, k den^extra D)``: a word ``w < k den^extra D`` is kept, and with ``R = w mod kD``
    the step ``j`` event is ``R < thr[j - 1]`` (times ``u^j`` when ``num`` is 1 and the
    numerator is drawn, see ``_low_part``).
    """
    big = den**m * math.factorial(m)
    k = (_WORD - 1) // (den**extra * big)  # the limit k den^extra D fits in a 63-bit word
    thr = [k * num**j * den ** (m - j) * (math.factorial(m) // math.factorial(j)) for j in range(1, m + 1)]
    return k * big, np.asarray(thr, dtype=np.int64), k * den**extra * big


@functools.lru_cache(maxsize=256)
def sampler_tables(t: int, s: int, max_steps: int = _MAX_STEPS) -> SamplerTables:
    """The integer thresholds for scale ``t / s`` (cached: a scale is usually sampled many times).

    ``max_steps`` caps the loop steps decided by one word (tests lower it to exercise the
    step-by-step continuation, which must give the same distribution).
    """
    empty = np.zeros(0, dtype=np.int64)
    s_shift = s.bit_length() - 1 if s & (s - 1) == 0 else -1
    kt = (_WORD - 1) // t
    common = {"s_shift": s_shift, "kt": kt, "lim_t": kt * t}
    if s < t:  # Algorithm 2: U from one word per proposal, thresholds u^j * kc[j - 1]
        m = _steps(t, 1, max_steps)
        kd, kc, lim_u = _thresholds(1, t, m, 1) if m else (1, empty, 1)
        return SamplerTables(**common, lim_u=lim_u, kd=kd, kc=kc, g0=0, r=0, lim_f=1, thr_f=empty)
    g0, r = divmod(s, t)  # rate s / t = g0 + r / t with g0 >= 1
    lim_f, thr_f = 1, empty
    if r:
        m = _steps(t, 0, max_steps)
        if m:
            _, thr_f, lim_f = _thresholds(r, t, m, 0)
    return SamplerTables(**common, lim_u=1, kd=1, kc=empty, g0=g0, r=r, lim_f=lim_f, thr_f=thr_f)


def _checked_scale(t: int, s: int) -> tuple[int, int]:
    t, s = int(t), int(s)
    if not (1 <= t <= _MAX_INT and 1 <= s <= _MAX_INT):
        raise ParameterError(f"the scale t / s needs integers in [1, 2**52], got t={t}, s={s}")
    return t, s


def uses_tables(size: int, t: int, s: int) -> bool:
    """Whether ``size`` draws of scale ``t / s`` use the threshold tables (:mod:`._dlap_table`).

    They do when the table is short enough (scale below about 2,300) and either cheap to build
    (at most ``SHORT_TABLE`` thresholds, scale below about 150: a fraction of a millisecond,
    then cached) or paid for by the draws (``size`` at least 64 times its length); else the loop
    sampler of [CKS20]_ runs. Small calls at everyday scales thus need no second compiled
    kernel. The choice depends on ``(size, t, s)`` only, so a seed still fixes the draws.
    """
    length = table_length(t, s)
    return length <= MAX_LEN and (length <= SHORT_TABLE or size >= 64 * length)


def fill_tables(out: NDArray[np.int64], t: int, s: int, gen: np.random.Generator, laplace: bool,
                bits: int = 63) -> bool:
    """Run the table kernel, resolving its (rare) ties exactly in Python; False on overflow.

    ``bits`` (63) is the width of the uniform words; tests use short words to make ties frequent.
    """
    tab = inverse_tables(t, s, bits)
    jit = _jit()
    st = np.zeros(6, dtype=np.int64)
    i = 0
    while True:
        i = jit.fill_table(gen, out, i, st, laplace, tab.lap, tab.lap_guide, tab.geo, tab.geo_guide,
                           63 - bits, bits - guide_bits(bits))
        if i < 0:
            return False
        if i == out.size:
            return True
        kind, k, acc = int(st[jit.ST_KIND]), int(st[jit.ST_K]), int(st[jit.ST_VALUE])
        thr = tab.lap if kind == 0 else tab.geo
        above = resolve_tie(gen, kind, k, int(thr[k]), t, s, bits)  # |Z| (or G) >= k?
        if above and k == thr.size - 2:  # beyond the table: the geometric tail continues
            st[jit.ST_PHASE], st[jit.ST_VALUE] = jit.PHASE_TAIL, acc + k
        else:
            st[jit.ST_PHASE], st[jit.ST_VALUE] = jit.PHASE_KNOWN, acc + k - 1 + int(above)


def discrete_laplace_exact(size: int, t: int, s: int, gen: np.random.Generator) -> NDArray[np.int64]:
    """``size`` exact draws of the discrete Laplace with scale ``t / s`` (integers ``1 <= t, s <= 2**52``).

    ``P[Z = z] = (1 - p) / (1 + p) * p^|z|`` with ``p = exp(-s / t)``. Consumes ``gen``'s bit
    stream (the same seed gives the same draws).
    """
    t, s = _checked_scale(t, s)
    out = np.empty(size, dtype=np.int64)
    if size and uses_tables(size, t, s):
        if not fill_tables(out, t, s, gen, True):
            raise DomainError("a discrete Laplace draw exceeded 2**62 in magnitude (probability below 2**-1000)")
        return out
    if size and not _jit().fill(gen, out, t, s, *sampler_tables(t, s)):
        raise DomainError("a discrete Laplace draw exceeded 2**62 in magnitude (probability below 2**-1000)")
    return out


def geometric_exact(size: int, t: int, s: int, gen: np.random.Generator) -> NDArray[np.int64]:
    """``size`` exact draws of ``Y >= 0`` with ``P[Y = y] = (1 - q) q^y``, ``q = exp(-s / t)``.

    The magnitude step of :func:`discrete_laplace_exact` without the sign (integers
    ``1 <= t, s <= 2**52``); ``geometric_exact(n, 1, 1, gen)`` counts the successes of
    Bernoulli(exp(-1)) before the first failure.
    """
    t, s = _checked_scale(t, s)
    out = np.empty(size, dtype=np.int64)
    if size and uses_tables(size, t, s):
        if not fill_tables(out, t, s, gen, False):
            raise DomainError("a geometric draw exceeded 2**62 (probability below 2**-1000)")
        return out
    if size and not _jit().fill_geometric(gen, out, t, s, *sampler_tables(t, s)):
        raise DomainError("a geometric draw exceeded 2**62 (probability below 2**-1000)")
    return out


def bernoulli_exp_exact(num: NDArray[np.int64], den: int, gen: np.random.Generator) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(-num[i] / den)) draws for integers ``0 <= num[i] <= den <= 2**62``
    ([CKS20]_ Alg. 1)."""
    arr = np.ascontiguousarray(num, dtype=np.int64)
    den = int(den)
    if not 1 <= den <= _MAX_DEN or (arr.size and (int(arr.min()) < 0 or int(arr.max()) > den)):
        raise ParameterError(f"need integers 0 <= num <= den <= 2**62, got den={den}")
    out = np.empty(arr.shape, dtype=np.bool_)
    if arr.size:
        _jit().fill_bernoulli_exp(gen, out.reshape(-1), arr.reshape(-1), den)
    return out
