"""Poisoning defenses for local-DP frequency oracles: detect fabricated reports and recover the
honest frequencies.

A local-DP server cannot check a participant's value, but it can check that a *report* is one an
honest client produces. For the unary encodings (OUE, SUE), the number of values a report supports (its
ones) has a distribution that does not depend
on the participant's value (:func:`support_size_pmf`). (OLH's hash family
makes that law depend on the value, so the tests below apply to OUE and SUE; GRR and OLH results
say so.) Two levels of detection follow:

* **per report** (Li, Li, Wang, Sun 2025, "Diffstats"): a report supporting ``k`` values with
  ``P[K >= k] <= alpha`` under the honest law is set aside. Because ``K`` is independent of the
  value, setting reports aside by ``K`` alone keeps the estimator exactly unbiased (the kept
  reports are re-weighted with the conditional support probabilities of :func:`truncated_probabilities`).
  The false-positive rate on honest reports is exactly ``P[K >= k*]`` (stated in every result).
* **per group**: the histogram of ``K`` over all kept reports against the honest law (a
  chi-square test; any frequency vector gives the same law). Fake reports that support only their
  target (``K = 1``), or a fixed number of values (MGA, Cao, Jia, Gong 2021), pile up in a few bins.

``"recover"`` then estimates the honest frequencies in the spirit of LDPRecover (Sun et al. 2024):
the poisoned support is the genuine part plus the malicious part; the number of genuine reports is
estimated from the size bins that fit the honest law (a bin more than 3 standard deviations above
it is set aside, worst first), the malicious reports of each set-aside bin are its excess, and the genuine frequencies and the attackers' target distribution are fitted jointly over
the bins (in bin ``k`` a genuine report supports its own value with probability ``a_k`` and another
with ``b_k``; a fake one supports its target and ``k - 1`` other values at random), under the
constraints ``0 <= f <= 1`` and ``sum f = 1``.

**What cannot be detected:** a GRR report is one value, which an honest client sends for any
input: no test separates a fake GRR report naming the target from an honest one (enrollment, one
report per participant, is the defense there). An attacker who draws each fake report's size from
the honest law (the adaptive attack) leaves the histogram honest; it still cannot exceed the gain
of honest-looking reports that all support the target.

The defenses are post-processing of the reports: they spend no privacy budget.

References
----------
Cao, Jia, Gong. Data poisoning attacks to local differential privacy protocols. USENIX Security 2021.
Sun, Ye, Hu, Duan, Wo, Xu, Yang. LDPRecover: recovering frequencies from poisoning attacks against
local differential privacy. ICDE 2024 (arXiv 2403.09351).
Li, Li, Wang, Sun. Mitigating data poisoning attacks to local differential privacy. arXiv 2506.02156.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from privpub.core import RNGLike, as_generator
from privpub.errors import ParameterError
from privpub.ldp._base import FrequencyOracle
from privpub.ldp._grr import GRR
from privpub.ldp._olh import _PRIME, OLH, _hash
from privpub.ldp._postprocess import norm_sub
from privpub.ldp._unary import UnaryEncoding

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_GROUP_ALPHA",
    "POISONING_DEFENSES",
    "PoisoningResult",
    "SizeBins",
    "defend",
    "defend_bins",
    "fake_reports",
    "report_threshold",
    "size_bins",
    "support_size_pmf",
    "support_sizes",
    "truncated_probabilities",
]

#: per-report false-positive rate bound of the default threshold
DEFAULT_ALPHA = 1e-3
#: level of the per-group test (the histogram of support sizes against the honest law)
DEFAULT_GROUP_ALPHA = 1e-3
POISONING_DEFENSES = ("none", "detect", "recover")
Defense = Literal["none", "detect", "recover"]


_GRR_NOTE = ("GRR: a report is one value, which an honest client sends for any input, so no report or group of "
             "reports can be told from honest ones; enrollment (one report per participant) is the defense")
_OLH_NOTE = ("OLH: the number of values a report supports depends on the value under this hash family and has no "
             "closed form, so no report-level test with a stated false-positive rate applies; enrollment (one "
             "report per participant) is the defense")


def _check_oracle(oracle: FrequencyOracle) -> None:
    if not isinstance(oracle, UnaryEncoding | OLH | GRR):
        raise ParameterError(f"oracle must be GRR, OUE, SUE or OLH, got {type(oracle).__name__}", param="oracle")


def support_size_pmf(oracle: FrequencyOracle, *, epsilon: float | None = None) -> NDArray[np.float64]:
    """The law of ``K``, the number of values an honest report supports: ``pmf[k] = P[K = k]``.

    Unary encodings: ``K = Bernoulli(p) + Binomial(d - 1, q)`` exactly, the same law for every
    input value. GRR: ``K = 1`` always. OLH has no such law: its hash family
    ``((a x + b) mod P) mod g`` is only pairwise independent, and over consecutive values the number
    of values sharing a bucket depends on the value and is far from binomial (about 4 in 1000
    honest reports support all 16 values of a 16-value domain), so it raises :class:`ParameterError`.

    Returns
    -------
    ndarray, shape (domain_size + 1,)

    Examples
    --------
    >>> from privpub.ldp import OUE
    >>> pmf = support_size_pmf(OUE(domain_size=4), epsilon=1.0)
    >>> round(float(pmf.sum()), 12), pmf.shape
    (1.0, (5,))
    """
    _check_oracle(oracle)
    d = oracle.domain_size
    k = np.arange(d + 1)
    out = np.zeros(d + 1)
    if isinstance(oracle, GRR):
        oracle.probabilities(epsilon)  # validates epsilon
        out[1] = 1.0
        return out
    if isinstance(oracle, OLH):
        raise ParameterError("OLH reports have no value-independent law of support sizes (the hash family is "
                             "only pairwise independent); report-level tests apply to OUE and SUE")
    own, other_given_own, other_given_not = _support_parameters(oracle, epsilon)
    out[1:] += own * stats.binom.pmf(k[:-1], d - 1, other_given_own)
    out += (1 - own) * stats.binom.pmf(k, d - 1, other_given_not)
    return out


def _support_parameters(oracle: FrequencyOracle, epsilon: float | None) -> tuple[float, float, float]:
    """``(P[own supported], P[other supported | own], P[other supported | not own])`` (unary)."""
    p, q = oracle.probabilities(epsilon)
    return p, q, q


def _bin_conditionals(oracle: FrequencyOracle, epsilon: float | None,
                      pmf: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per size ``k``: ``a_k = P[own supported | K = k]``, ``b_k = P[a given other supported | K = k]``."""
    d = oracle.domain_size
    k = np.arange(d + 1)
    own, other_given_own, _ = _support_parameters(oracle, epsilon)
    joint = np.zeros(d + 1)
    joint[1:] = own * stats.binom.pmf(k[:-1], d - 1, other_given_own)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(pmf > 0, joint / pmf, 0.0)
    b = (k - a) / (d - 1)
    return np.clip(a, 0.0, 1.0), np.clip(b, 0.0, 1.0)


def truncated_probabilities(oracle: FrequencyOracle, *, epsilon: float | None = None,
                            threshold: int | None = None) -> tuple[float, float]:
    """``(p, q)`` of the honest reports supporting fewer than ``threshold`` values.

    ``K`` does not depend on the value, so keeping reports by ``K`` keeps a value-independent
    sample; its support probabilities are ``p~ = P[own supported | K < k*]`` and ``q~`` likewise
    for another value, and ``(support - n q~) / (p~ - q~)`` is exactly unbiased on the kept reports.
    """
    pmf = support_size_pmf(oracle, epsilon=epsilon)
    d = oracle.domain_size
    if threshold is None or threshold > d:
        return oracle.probabilities(epsilon)
    a, b = _bin_conditionals(oracle, epsilon, pmf)
    keep = np.arange(d + 1) < threshold
    mass = float(pmf[keep].sum())
    if mass <= 0:
        raise ParameterError(f"threshold={threshold} keeps no honest report")
    return float((pmf * a)[keep].sum() / mass), float((pmf * b)[keep].sum() / mass)


def report_threshold(pmf: ArrayLike, alpha: float = DEFAULT_ALPHA) -> tuple[int | None, float]:
    """The smallest size ``k*`` with ``P[K >= k*] <= alpha``, and that exact false-positive rate.

    Returns ``(None, 0.0)`` when no size is that unlikely (e.g. GRR, or tiny domains).

    Examples
    --------
    >>> report_threshold([0.5, 0.3, 0.19, 0.01], alpha=0.05)
    (3, 0.01)
    """
    if not 0.0 < float(alpha) < 1.0:
        raise ParameterError(f"alpha must be in (0, 1), got {alpha}", param="alpha")
    p = np.asarray(pmf, dtype=np.float64)
    tail = np.cumsum(p[::-1])[::-1]  # tail[k] = P[K >= k]
    ok = np.flatnonzero((tail <= alpha) & (np.arange(p.size) > 0) & (p > 0))
    ok = ok[ok >= 1]
    if ok.size == 0:
        return None, 0.0
    k = int(ok[0])
    return k, float(tail[k])


def support_sizes(oracle: FrequencyOracle, reports: ArrayLike, *, epsilon: float | None = None) -> NDArray[np.int64]:
    """``K`` of every report: the number of values it supports (unary: its ones, padding ignored;
    OLH: the values whose hash is its bucket; GRR: 1)."""
    _check_oracle(oracle)
    d = oracle.domain_size
    if isinstance(oracle, GRR):
        return np.ones(int(np.asarray(reports).shape[0]), dtype=np.int64)
    r = np.asarray(reports)
    if isinstance(oracle, OLH):
        if r.ndim != 2 or r.shape[1] != 3:
            raise ParameterError(f"OLH reports must be an (n, 3) integer array, got shape {r.shape}")
        r = r.astype(np.int64)
        g = oracle.buckets(epsilon)
        out = np.zeros(r.shape[0], dtype=np.int64)
        a, b, y = r[:, 0], r[:, 1], r[:, 2]
        for v in range(d):  # d passes of array code (campaign domains are small)
            out += _hash(a, b, np.int64(v), g) == y
        return out
    if r.ndim == 2 and r.dtype == np.uint8 and r.shape[1] == (d + 7) // 8 and r.shape[1] != d:
        return _packed_ones(r, d)
    if r.ndim == 2 and r.shape[1] == d:
        return np.asarray(r, dtype=bool).sum(axis=1, dtype=np.int64)
    raise ParameterError(f"reports must have shape (n, {d}) (bool) or (n, {(d + 7) // 8}) (packed uint8), "
                         f"got {r.shape}", param="reports")


_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def _packed_ones(r: NDArray[np.uint8], d: int) -> NDArray[np.int64]:
    """Ones per packed little-endian row of ``d`` bits (padding bits ignored)."""
    ones = _POPCOUNT[r].sum(axis=1)
    if d % 8:  # padding bits do not count
        ones -= _POPCOUNT[r[:, -1] & np.uint8(0xFF ^ ((1 << (d % 8)) - 1))]
    return ones


@dataclass
class SizeBins:
    """Reports of a unary encoding summarised by their number of ones ``k``: ``counts[k]`` reports,
    and ``support[k]`` their ones per cell. Enough for :func:`defend_bins`; chunks merge with ``+``.
    """

    counts: NDArray[np.int64]
    support: dict[int, NDArray[np.int64]]

    def __add__(self, other: SizeBins) -> SizeBins:
        support = dict(self.support)
        for k, v in other.support.items():
            support[k] = support[k] + v if k in support else v.copy()
        return SizeBins(self.counts + other.counts, support)

    @property
    def n(self) -> int:
        return int(self.counts.sum())


def size_bins(oracle: FrequencyOracle, reports: ArrayLike, *, epsilon: float | None = None) -> SizeBins:
    """:class:`SizeBins` of unary-encoding reports (packed uint8 rows or ``(n, d)`` bool rows).

    One pass of compiled column counts over the reports sorted by their number of ones.
    """
    if not isinstance(oracle, UnaryEncoding):
        raise ParameterError("size bins apply to unary encodings (OUE, SUE)")
    d = oracle.domain_size
    r = np.asarray(reports)
    if not (r.ndim == 2 and r.dtype == np.uint8 and r.shape[1] == (d + 7) // 8 and r.shape[1] != d):
        if r.ndim != 2 or r.shape[1] != d:
            raise ParameterError(f"reports must have shape (n, {d}) (bool) or (n, {(d + 7) // 8}) (packed uint8), "
                                 f"got {r.shape}", param="reports")
        r = np.packbits(np.asarray(r, dtype=bool), axis=1, bitorder="little")
    sizes = _packed_ones(r, d)
    order = np.argsort(sizes, kind="stable")
    sorted_sizes = sizes[order]
    ks, starts = np.unique(sorted_sizes, return_index=True)
    ends = np.append(starts[1:], sorted_sizes.size)
    rows = r[order]
    support = {int(k): oracle.aggregate(rows[a:b]).astype(np.int64) for k, a, b in zip(ks, starts, ends)}
    return SizeBins(np.bincount(sizes, minlength=d + 1).astype(np.int64), support)


@dataclass(frozen=True)
class PoisoningResult:
    """What a defense did: the estimate it stands behind and what it set aside.

    Attributes
    ----------
    method : str
        ``"none"``, ``"detect"`` or ``"recover"``.
    estimate : ndarray
        Estimated counts of the participants the defense believes honest (sums to about ``n``).
    n : float
        The number of reports the estimate speaks for.
    suspected : int
        Reports set aside (per-report test) plus, for ``recover``, the excess attributed to fakes.
    flagged : ndarray of bool
        Per report: set aside by the per-report test.
    threshold : int or None
        Reports supporting this many values or more are set aside (None: no test applies).
    false_positive_rate : float
        ``P[K >= threshold]`` for an honest report, exactly (the share of honest reports set aside).
    group_p_value : float or None
        p-value of the histogram of support sizes against the honest law (None: not applicable).
    group_alpha : float
        The level below which the group test flags the campaign.
    note : str
        What the defense could and could not check.
    """

    method: str
    estimate: NDArray[np.float64]
    n: float
    suspected: int
    flagged: NDArray[np.bool_] = field(repr=False)
    threshold: int | None
    false_positive_rate: float
    group_p_value: float | None
    group_alpha: float
    note: str

    @property
    def group_flagged(self) -> bool:
        return self.group_p_value is not None and self.group_p_value < self.group_alpha

    def to_dict(self) -> dict[str, Any]:
        """The release's ``"poisoning"`` object (JSON-ready)."""
        return {"method": self.method, "suspected": int(self.suspected),
                "report_threshold": self.threshold, "false_positive_rate": float(self.false_positive_rate),
                "group_p_value": None if self.group_p_value is None else float(self.group_p_value),
                "group_alpha": float(self.group_alpha), "group_flagged": bool(self.group_flagged),
                "honest_reports": float(self.n), "note": self.note}


def _chi_square(obs: NDArray[np.float64], expected: NDArray[np.float64]) -> float:
    """p-value of ``obs`` against ``expected`` with bins pooled until each expects at least 5."""
    pooled_o: list[float] = []
    pooled_e: list[float] = []
    acc_o = acc_e = 0.0
    for o, e in zip(obs.tolist(), expected.tolist()):
        acc_o += o
        acc_e += e
        if acc_e >= 5.0:
            pooled_o.append(acc_o)
            pooled_e.append(acc_e)
            acc_o = acc_e = 0.0
    if pooled_e:
        pooled_o[-1] += acc_o
        pooled_e[-1] += acc_e
    if len(pooled_e) < 2:
        return 1.0
    o_arr, e_arr = np.asarray(pooled_o), np.asarray(pooled_e)
    e_arr = e_arr * (o_arr.sum() / e_arr.sum())
    stat = float(((o_arr - e_arr) ** 2 / e_arr).sum())
    return float(stats.chi2.sf(stat, len(pooled_e) - 1))


def _fit_bins(h: NDArray[np.float64], m: NDArray[np.float64], a: NDArray[np.float64], b: NDArray[np.float64],
              e: NDArray[np.float64], support: dict[int, NDArray[np.int64]], obs: NDArray[np.float64],
              d: int) -> NDArray[np.float64]:
    """Per value, least squares over the size bins of ``S_k = h_k (b_k + (a_k - b_k) f) + m_k (e_k + (1 - e_k) t)``
    for ``(f, t)`` in ``[0, 1]^2`` (weights ``1 / obs_k``). Returns ``f``."""
    w = 1.0 / np.maximum(obs, 1.0)
    x1 = h * (a - b)
    x2 = m * (1.0 - e)
    s11, s12, s22 = (w * x1 * x1).sum(), (w * x1 * x2).sum(), (w * x2 * x2).sum()
    r1 = np.zeros(d)
    r2 = np.zeros(d)
    for k, sup in support.items():  # one bin at a time: memory O(d)
        if k >= obs.size or obs[k] <= 0:
            continue
        y = sup - h[k] * b[k] - m[k] * e[k]
        r1 += w[k] * x1[k] * y
        r2 += w[k] * x2[k] * y
    if s11 <= 0:
        return np.zeros(d)
    det = s11 * s22 - s12 * s12
    if det <= 1e-12 * max(s11 * s22, 1e-300):
        return np.clip(r1 / s11, 0.0, 1.0)
    f = (s22 * r1 - s12 * r2) / det
    t = (s11 * r2 - s12 * r1) / det
    # box constraints: where one coordinate leaves [0, 1], fix it at the bound and refit the other
    t_fixed = np.clip(t, 0.0, 1.0)
    out_t = t_fixed != t
    f = np.where(out_t, (r1 - s12 * t_fixed) / s11, f)
    f_fixed = np.clip(f, 0.0, 1.0)
    out_f = f_fixed != f
    if out_f.any() and s22 > 0:
        t2 = np.clip((r2 - s12 * f_fixed) / s22, 0.0, 1.0)
        f = np.where(out_f, np.clip((r1 - s12 * t2) / s11, 0.0, 1.0), f)
    return np.clip(f, 0.0, 1.0)


def defend(oracle: FrequencyOracle, reports: ArrayLike, *, epsilon: float | None = None,
           method: Defense = "detect", alpha: float = DEFAULT_ALPHA,
           group_alpha: float = DEFAULT_GROUP_ALPHA) -> PoisoningResult:
    """Estimate counts from ``reports`` under a poisoning defense.

    Parameters
    ----------
    oracle : GRR, OUE, SUE or OLH
        The oracle the reports claim to come from.
    reports : array_like
        The reports (the oracle's report format; unary: packed uint8 or bool rows).
    epsilon : float
        The oracle's epsilon.
    method : {"none", "detect", "recover"}
        ``"none"``: the plain unbiased estimate (the tests still run and are reported).
        ``"detect"``: reports an honest client sends with probability at most ``alpha`` are set
        aside; the histogram of support sizes is tested against the honest law at ``group_alpha``.
        ``"recover"``: as detect, and when the group test flags the reports, the honest counts are
        recovered (see the module notes).
    alpha : float
        Bound on the per-report false-positive rate (the exact rate is in the result).
    group_alpha : float
        Level of the group test.

    Returns
    -------
    PoisoningResult
        Post-processing only: spends no privacy budget.

    Examples
    --------
    >>> from privpub.ldp import OUE
    >>> oracle = OUE(domain_size=8)
    >>> honest = oracle.perturb([0, 1, 2, 3] * 250, epsilon=2.0, rng=1)
    >>> res = defend(oracle, honest, epsilon=2.0)
    >>> res.method, res.threshold, res.false_positive_rate < 1e-3
    ('detect', 6, True)
    """
    _check_oracle(oracle)
    if method not in POISONING_DEFENSES:
        raise ParameterError(f"method must be one of {', '.join(POISONING_DEFENSES)}, got {method!r}", param="method")
    for name, val in (("alpha", alpha), ("group_alpha", group_alpha)):
        if not (isinstance(val, int | float) and 0.0 < float(val) < 1.0):
            raise ParameterError(f"{name} must be in (0, 1), got {val!r}", param=name)
    r = np.asarray(reports)
    n_total = oracle.n_reports(r)
    d = oracle.domain_size
    if not isinstance(oracle, UnaryEncoding):
        est = oracle.estimate(r, epsilon=epsilon) if n_total else np.zeros(d)
        why = (_GRR_NOTE if isinstance(oracle, GRR) else _OLH_NOTE)
        return PoisoningResult(method, est, float(n_total), 0, np.zeros(n_total, dtype=bool), None, 0.0, None,
                               float(group_alpha), why)
    res = defend_bins(oracle, size_bins(oracle, r, epsilon=epsilon), epsilon=epsilon, method=method, alpha=alpha,
                      group_alpha=group_alpha)
    if res.threshold is not None and method != "none":
        flagged = support_sizes(oracle, r, epsilon=epsilon) >= res.threshold
    else:
        flagged = np.zeros(n_total, dtype=bool)
    return dataclasses.replace(res, flagged=flagged)


def defend_bins(oracle: FrequencyOracle, bins: SizeBins, *, epsilon: float | None = None,
                method: Defense = "detect", alpha: float = DEFAULT_ALPHA,
                group_alpha: float = DEFAULT_GROUP_ALPHA) -> PoisoningResult:
    """:func:`defend` from :class:`SizeBins` (OUE, SUE): the same result without holding the reports
    (a server reads them in chunks, :func:`size_bins` of each, and adds the bins). ``flagged`` is empty."""
    if not isinstance(oracle, UnaryEncoding):
        raise ParameterError("size bins apply to unary encodings (OUE, SUE)")
    if method not in POISONING_DEFENSES:
        raise ParameterError(f"method must be one of {', '.join(POISONING_DEFENSES)}, got {method!r}", param="method")
    for name, val in (("alpha", alpha), ("group_alpha", group_alpha)):
        if not (isinstance(val, int | float) and 0.0 < float(val) < 1.0):
            raise ParameterError(f"{name} must be in (0, 1), got {val!r}", param=name)
    d = oracle.domain_size
    none_flagged = np.zeros(0, dtype=bool)
    counts = np.asarray(bins.counts, dtype=np.int64)
    n_total = int(counts.sum())
    pmf = support_size_pmf(oracle, epsilon=epsilon)
    k_star, fpr = report_threshold(pmf, alpha)
    top = (k_star if k_star is not None else d + 1)
    obs = counts[:top].astype(np.float64)
    n_kept = int(obs.sum())
    honest_pmf = pmf[:top] / (1.0 - fpr)
    p_value = _chi_square(obs, n_kept * honest_pmf) if n_kept else 1.0
    if method == "none":
        total = sum(bins.support.values(), np.zeros(d, dtype=np.int64))
        est = oracle.estimate_from_support(total, n_total, epsilon=epsilon) if n_total else np.zeros(d)
        return PoisoningResult("none", est, float(n_total), 0, none_flagged, k_star, 0.0,
                               p_value, float(group_alpha), "no reports set aside (poisoning_defense: none)")
    suspected = n_total - n_kept
    if n_kept == 0:
        return PoisoningResult(method, np.zeros(d), 0.0, suspected, none_flagged, k_star, fpr, p_value,
                               float(group_alpha), "every report was set aside")
    pt, qt = truncated_probabilities(oracle, epsilon=epsilon, threshold=k_star)
    kept = {k: v for k, v in bins.support.items() if k < top}
    support = sum(kept.values(), np.zeros(d, dtype=np.int64)).astype(np.float64)
    scale = 1.0 / (1.0 - fpr)  # the kept reports speak for n_kept / (1 - fpr) honest participants
    est = (support - n_kept * qt) / (pt - qt) * scale
    n_est = n_kept * scale
    note = (f"reports supporting {k_star} or more values set aside (an honest report does so with probability "
            f"{fpr:.2e})" if k_star is not None else "no report size is improbable enough to set reports aside")
    if method == "recover" and p_value < group_alpha:
        a, b = _bin_conditionals(oracle, epsilon, pmf)
        a, b = a[:top], b[:top]
        # genuine reports: pooled over the bins the fakes left alone; a bin whose count exceeds the
        # honest expectation by more than 3 standard deviations is set aside, worst first
        clean = honest_pmf > 0
        n_honest = float(n_kept)
        while clean.sum() >= 2:
            n_honest = float(obs[clean].sum() / honest_pmf[clean].sum())
            z = np.where(clean, (obs - n_honest * honest_pmf) / np.sqrt(n_honest * honest_pmf + 1.0), -np.inf)
            if z.max() <= 3.0:
                break
            clean[int(np.argmax(z))] = False
        excess = np.where(clean, 0.0, np.maximum(0.0, obs - n_honest * honest_pmf))
        fake = float(excess.sum())
        n_honest = float(n_kept) - fake
        if fake > 0:
            h = np.maximum(obs - excess, 0.0)
            e = np.clip((np.arange(top) - 1.0) / (d - 1), 0.0, 1.0)
            f = _fit_bins(h, excess, a, b, e, kept, obs, d)
            f = norm_sub(f, 1.0) if f.sum() > 0 else np.full(d, 1.0 / d)
            n_est = n_honest * scale
            est = f * n_est
            suspected += round(fake)
            note += (f"; the histogram of report sizes is not an honest one (p = {p_value:.2e}): about "
                     f"{fake:.0f} reports attributed to fakes and the honest frequencies recovered")
    elif p_value < group_alpha:
        note += (f"; the histogram of report sizes is not an honest one (p = {p_value:.2e}): reports are "
                 "likely poisoned (use poisoning_defense: recover)")
    return PoisoningResult(method, np.asarray(est, dtype=np.float64), float(n_est), suspected, none_flagged,
                           k_star, fpr, p_value, float(group_alpha), note)


ATTACKS = ("target", "mga", "adaptive")


def fake_reports(oracle: FrequencyOracle, target: int, n: int, *, attack: str = "target",
                 epsilon: float | None = None, rng: RNGLike = None) -> NDArray[Any]:
    """Reports an attacker fabricates to promote the value ``target`` (for audits and benchmarks).

    ``attack``:

    * ``"target"``: each report supports the target only (GRR: the target; unary: only the target's
      bit; OLH: a random hash and the target's bucket).
    * ``"mga"``: the maximal-gain attack of Cao, Jia, Gong (2021): unary reports set the target's
      bit and ``l = floor(p + (d - 1) q - 1)`` random others (the honest mean number of ones); OLH
      picks, of 64 random hashes, one that maps the fewest other values to the target's bucket; GRR
      as ``"target"``.
    * ``"adaptive"``: mimics honest reports' sizes: each report's number of supported values is drawn
      from the honest law (:func:`support_size_pmf`, at least 1) and includes the target (unary);
      OLH and GRR as ``"target"`` (their honest reports already look like this).

    Returns reports in the oracle's format (unary: packed uint8 rows).
    """
    _check_oracle(oracle)
    if attack not in ATTACKS:
        raise ParameterError(f"attack must be one of {', '.join(ATTACKS)}, got {attack!r}", param="attack")
    d = oracle.domain_size
    if not 0 <= int(target) < d:
        raise ParameterError(f"target must be in [0, {d - 1}], got {target}", param="target")
    gen = as_generator(rng)
    n = int(n)
    if isinstance(oracle, GRR):
        return np.full(n, int(target), dtype=np.int64)
    if isinstance(oracle, OLH):
        g = oracle.buckets(epsilon)
        tries = 64 if attack == "mga" else 1
        a = gen.integers(1, _PRIME, size=(n, tries), dtype=np.int64)
        b = gen.integers(0, _PRIME, size=(n, tries), dtype=np.int64)
        y = _hash(a, b, np.int64(target), g)
        hits = np.zeros((n, tries), dtype=np.int64)
        for v in range(d):
            hits += _hash(a, b, np.int64(v), g) == y
        best = np.argmin(hits, axis=1)
        rows = np.arange(n)
        return np.stack([a[rows, best], b[rows, best], y[rows, best]], axis=1)
    p, q = oracle.probabilities(epsilon)
    if attack == "target":
        ones = np.ones(n, dtype=np.int64)
    elif attack == "mga":
        ones = np.full(n, max(1, int(np.floor(p + (d - 1) * q))), dtype=np.int64)
    else:
        pmf = support_size_pmf(oracle, epsilon=epsilon)
        pmf[0] = 0.0
        ones = gen.choice(d + 1, size=n, p=pmf / pmf.sum())
    bits = np.zeros((n, d), dtype=bool)
    bits[:, target] = True
    others = np.delete(np.arange(d), target)
    keys = gen.random((n, d - 1))
    order = np.argsort(keys, axis=1)  # a random permutation of the other values per report
    take = np.arange(d - 1)[None, :] < (ones - 1)[:, None]
    chosen = others[order]
    rows = np.repeat(np.arange(n), d - 1).reshape(n, d - 1)
    bits[rows[take], chosen[take]] = True
    return np.packbits(bits, axis=1, bitorder="little")
