"""Histogram publishers: HPHP (private, unattributed, paper), AHP, Laplace and Optimal grouping.

Reference: Li Kunming, Wang Chaoqian, Ni Weiwei, Bao Xiaohan, "High-precision histogram
publishing method based on differential privacy", Journal of Computer Applications 40(11), 2020
(DOI 10.11772/j.issn.1001-9081.2020030335); privpub spec ``histogram.md`` (which fixes the
paper's privacy error, section 3). Baselines: Zhang et al., "Towards accurate histogram
publication under differential privacy" (AHP), SDM 2014; Dwork et al., TCC 2006 (Laplace).
"""

from __future__ import annotations

import math
import warnings
from abc import abstractmethod
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from privpub.core import (
    FLOAT_EXACT_LIMIT,
    BudgetLedger,
    DataPublisher,
    PrivacyUnit,
    Release,
    RNGLike,
    Session,
    accounting,
    as_generator,
    bound_contributions,
    check_array,
    check_counts,
    check_epsilon,
    check_privacy_unit,
    check_probability,
    check_real,
    check_working_set,
    describe_data,
    discrete_laplace,
    discrete_laplace_noise,
    isotonic_regression,
    laplace,
    laplace_noise,
    rational_scale,
    split,
)
from privpub.errors import DomainError, ParameterError, PrivacyWarning
from privpub.histogram._kernels import ahp_clusters, dp_group, publish_groups, stable_order

__all__ = [
    "AHP",
    "HPHP",
    "HistogramPublisher",
    "HistogramRelease",
    "LaplaceHistogram",
    "OptimalGrouping",
    "PEAK_BYTES_PER_BIN",
    "PUBLISHERS",
    "UnitCounts",
    "ahp_structure",
    "counts_from_records",
    "hphp_structure",
    "noise_variance",
    "noise_vector",
    "peak_bytes",
    "rank_structure",
    "release_unit",
]

_NOISES = ("discrete", "laplace")


def _check_noise(noise: str) -> str:
    if noise not in _NOISES:
        raise ParameterError(f"noise must be 'discrete' or 'laplace', got {noise!r}", param="noise")
    return noise


def _check_grouping(grouping: str) -> str:
    if grouping not in ("fast", "deque", "wavefront", "quadratic"):
        raise ParameterError(f"grouping must be 'fast', 'deque', 'wavefront' or 'quadratic', got {grouping!r}", param="grouping")
    return grouping


def _check_split(value: Any, name: str = "split") -> float:
    return check_probability(value, name, low=0.0, high=1.0, closed="neither")


class UnitCounts(np.ndarray):
    """Histogram counts that carry the privacy unit they were built for (``counts.privacy_unit``).

    :func:`counts_from_records` returns them: with ``privacy_ids`` and ``max_contributions`` the
    rows were bounded to at most ``k`` per person and the unit is
    ``PrivacyUnit.person(column, k)``; without, one record. Every histogram publisher's
    ``publish`` reads the unit and charges for it (an ndarray subclass, so everything else treats
    them as the int64 counts they are; arithmetic on them keeps the unit).

    Examples
    --------
    >>> from privpub import PrivacyUnit
    >>> c = UnitCounts([3, 1], PrivacyUnit.person("user", 2))
    >>> c.tolist(), c.privacy_unit.max_contributions
    ([3, 1], 2)
    """

    privacy_unit: PrivacyUnit

    def __new__(cls, counts: ArrayLike, privacy_unit: PrivacyUnit | None = None) -> UnitCounts:
        obj = np.asarray(counts, dtype=np.int64).view(cls)
        obj.privacy_unit = check_privacy_unit(privacy_unit)
        return obj

    def __array_finalize__(self, obj: Any) -> None:
        self.privacy_unit = getattr(obj, "privacy_unit", PrivacyUnit.record())

    def __array_wrap__(self, array: Any, context: Any = None, return_scalar: bool = False) -> Any:
        if array.ndim == 0:  # reductions (sum, max) give plain numbers, as for an ndarray
            return array[()]
        return super().__array_wrap__(array, context, return_scalar)

    def __reduce__(self) -> Any:  # pickling keeps the unit
        reduced: Any = super().__reduce__()
        return reduced[0], reduced[1], (reduced[2], self.privacy_unit.as_dict())

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            super().__setstate__(state[0])
            self.privacy_unit = PrivacyUnit.from_dict(state[1])
        else:  # pragma: no cover - plain ndarray state
            super().__setstate__(state)


#: the unit kinds a central histogram protects (add/remove neighbours; counts have L1 sensitivity 1
#: per record, k per person bounded to k rows)
_HISTOGRAM_KINDS = ("record", "person")


def release_unit(data: Any, privacy_unit: Any, publisher: str) -> PrivacyUnit:
    """The unit a histogram ``publish`` protects: ``privacy_unit`` if given, else the one ``data``
    carries (:class:`UnitCounts`), else one record.

    ``privacy_unit=PrivacyUnit.person(column, k)`` on counts that carry no person unit (a plain
    array, or record-level counts) is the explicit conversion of the caller who knows the rows
    hold at most ``k`` per person: the release spends ``epsilon / k`` at record level. On counts
    bounded to ``k`` it must protect the same people with a bound of at least ``k``. Units a
    histogram cannot state (streams, local DP, the replace relation) are refused with
    :class:`~privpub.errors.ParameterError` (``param="privacy_unit"``), never ignored.
    """
    given = None if privacy_unit is None else check_privacy_unit(privacy_unit)
    carried_raw = getattr(data, "privacy_unit", None)
    carried = None if carried_raw is None else check_privacy_unit(carried_raw)
    if given is None:
        unit = carried if carried is not None else PrivacyUnit.record()
    elif carried is None or carried.kind == "record":
        unit = given
    elif carried.same_protection(given) and given.factor >= carried.factor:
        unit = given
    else:
        raise ParameterError(
            f"{publisher}: the counts were built for {carried}, but privacy_unit={given} was given; a release "
            "can only state the unit its data was bounded for (or a larger bound k for the same people)",
            param="privacy_unit")
    if unit.kind not in _HISTOGRAM_KINDS or unit.relation != "add_remove":
        raise ParameterError(
            f"{publisher} protects one record or one person's bounded rows, added or removed; it cannot state "
            f"{unit} (the counts' sensitivity is derived for add/remove neighbours)", param="privacy_unit")
    return unit


def _unit_params(params: dict[str, Any], unit: PrivacyUnit) -> dict[str, Any]:
    """A release's params, with the unit when it is not one record (older outputs unchanged)."""
    return params if unit.kind == "record" else {**params, "privacy_unit": unit.as_dict()}


def noise_variance(epsilon: float, noise: str = "discrete") -> float:
    """Variance of the sensitivity-1 noise privpub adds at ``epsilon``.

    ``2 / epsilon**2`` for Laplace (the exact grid Laplace's variance is that to about 12 digits); ``2 p / (1 - p)**2`` with ``p = exp(-1/scale)``
    for the discrete Laplace (whose scale is :func:`privpub.core.rational_scale`).

    Examples
    --------
    >>> noise_variance(0.5, "laplace")
    8.0
    >>> round(noise_variance(0.5, "discrete"), 4)
    7.8354
    """
    eps = check_epsilon(epsilon)
    if _check_noise(noise) == "laplace":
        return 2.0 / eps**2
    t, s = rational_scale(eps, 1.0)
    p = math.exp(-s / t)
    return 2.0 * p / (1.0 - p) ** 2


def noise_vector(size: int, epsilon: float, noise: str, gen: np.random.Generator, note: str = "") -> NDArray[Any]:
    """Noise for a vector of ``size`` values of L1 sensitivity 1 (int64 discrete, or exact Laplace on the
    dyadic grid of :func:`privpub.core.laplace_noise`, float64: the values it is added to are integers).

    Every noisy vector HPHP, AHP and the Laplace histogram release is drawn here (the auditor
    audits this function). The mechanism charges the active accountant ``epsilon`` as it draws.
    """
    if noise == "discrete":
        return discrete_laplace_noise(size, epsilon=epsilon, sensitivity=1, rng=gen, note=note)
    return laplace_noise(size, epsilon=epsilon, sensitivity=1.0, rng=gen, note=note)


def _noisy(counts: NDArray[np.int64], epsilon: float, noise: str, gen: np.random.Generator, note: str
           ) -> NDArray[Any]:
    """``counts`` plus noise: exact int64 for discrete Laplace, float64 for the exact grid Laplace."""
    if noise == "discrete":
        return np.asarray(discrete_laplace(counts, epsilon=epsilon, sensitivity=1, rng=gen, note=note))
    return np.asarray(laplace(counts, epsilon=epsilon, sensitivity=1.0, rng=gen, note=note))


#: peak bytes per bin of a whole ``publish`` call (every array alive at once, the int64 copy of a
#: non-int64 input included), by publisher and grouping algorithm. Measured as the growth of the
#: process's peak RSS (which, unlike tracemalloc, sees the Numba kernels' arrays) at 2 10^6 bins,
#: int64 and float64 input, zipf and constant counts: Laplace 8-16, HPHP (all variants) 88-96
#: ("fast", "deque"), 128 ("wavefront"), Optimal 72-80, AHP 210-232 and HPHP "quadratic" 170
#: (3 10^4 bins), DAWA 132 (zipf, half the bins in buckets of their own) to 240 (every bin its own bucket);
#: the values below add a margin of at least 15%, and
#: tests/histogram/test_memory.py checks that they bound the measured peak.
PEAK_BYTES_PER_BIN: dict[str, int] = {"laplace": 24, "ahp": 320, "dawa": 288, "fast": 112, "deque": 112, "wavefront": 192,
                                      "quadratic": 256}
#: bytes of a call that do not grow with the bins (allocator slack, small tables)
PEAK_FIXED_BYTES = 1 << 24


def peak_bytes(method: str, n_bins: int, *, grouping: str = "fast") -> int:
    """Upper bound on the peak memory of ``publish`` of ``method`` on ``n_bins`` bins.

    ``method`` is a key of :data:`PUBLISHERS`; ``grouping`` matters for the grouping publishers
    (HPHP's variants and Optimal).

    Examples
    --------
    >>> peak_bytes("laplace", 10**6)
    40777216
    """
    key = method if method in ("laplace", "ahp", "dawa") else grouping
    return PEAK_FIXED_BYTES + PEAK_BYTES_PER_BIN[key] * int(n_bins)


def _n_bins(data: ArrayLike) -> int | None:
    """The number of bins of ``data`` without converting it (None when only a conversion tells)."""
    shape = getattr(data, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(d, int) for d in shape):
        return math.prod(shape)
    if isinstance(data, list | tuple):
        return len(data)
    return None


def _counts(data: ArrayLike, publisher: str, method: str, grouping: str = "fast") -> NDArray[np.int64]:
    """``data`` as int64 counts, after checking the call's peak memory fits the budget (before any
    allocation when the size is known without converting ``data``)."""
    key = method if method in ("laplace", "ahp", "dawa") else grouping
    if isinstance(data, UnitCounts):  # the unit was read by the caller; compute on plain int64
        data = data.view(np.ndarray)
    n = _n_bins(data)
    if n is not None:
        check_working_set(n, PEAK_BYTES_PER_BIN[key], f"{publisher}.publish", "the number of bins of data",
                          unit="bins", fixed=PEAK_FIXED_BYTES)
    counts = check_counts(data, "counts", ndim=1)
    if n is None:
        check_working_set(counts.size, PEAK_BYTES_PER_BIN[key], f"{publisher}.publish", "the number of bins of data",
                          unit="bins", fixed=PEAK_FIXED_BYTES)
    return counts


def _check_float_output(counts: NDArray[np.int64], method: str) -> None:
    """Publishers whose output is real (group means, float noise) refuse totals above 2**52."""
    total = float(np.sum(counts, dtype=np.float64))
    if total > FLOAT_EXACT_LIMIT:
        raise DomainError(
            f"{method} publishes real-valued counts, which float64 cannot hold exactly beyond 2**52; the "
            f"counts total {total:.6g}. Use LaplaceHistogram with the default discrete noise (exact int64 "
            "up to 2**62) or rescale the counts"
        )


def _prepared(
    data: ArrayLike, privacy_unit: PrivacyUnit | None, epsilon: float, rng: RNGLike, publisher: str, method: str,
    *, grouping: str = "fast", ratio: float | None = None,
) -> tuple[PrivacyUnit, NDArray[np.int64], float, np.random.Generator]:
    """The checks every histogram publisher makes before it reserves anything, in one order: the
    unit, the counts (and their memory), ``epsilon``, the generator; for a two-stage publisher
    (``ratio`` given) also the exactness of its real-valued output and the split of the
    record-level budget. Returns ``(unit, counts, epsilon, generator)``."""
    unit = release_unit(data, privacy_unit, publisher)
    counts = _counts(data, publisher, method, grouping)
    eps = check_epsilon(epsilon)
    gen = as_generator(rng)
    if ratio is not None:
        _check_float_output(counts, method)
        split(unit.record_amount(eps), [ratio, 1.0 - ratio])  # checked before anything is reserved
    return unit, counts, eps, gen


@dataclass(frozen=True, kw_only=True)
class HistogramRelease(Release):
    """A published histogram with its grouping and ledger.

    Attributes
    ----------
    counts : ndarray, shape (n,)
        The published counts, in bin order (for ``HPHP(variant="unattributed")``: in
        ascending rank order, with no bin labels). int64 for :class:`LaplaceHistogram` with
        discrete noise (exact end to end); float64 group means otherwise (computed from exact
        int64 noisy sums with discrete noise).
    order : ndarray of int64, shape (n,)  (property)
        A permutation of the bins (ranks for an unattributed release): group ``g`` is
        ``order[boundaries[g]:boundaries[g + 1]]``.
    boundaries : ndarray of int64, shape (K + 1,)  (property)
        ``0 = b_0 < ... < b_K = n``.
    noise : str
        ``"discrete"`` or ``"laplace"``.
    attributed : bool
        False when the release carries no bin labels (unattributed histogram).
    """

    counts: NDArray[Any]
    group_order: NDArray[np.int64] | None = None
    group_boundaries: NDArray[np.int64] | None = None
    noise: str = "discrete"
    attributed: bool = True

    @property
    def n_bins(self) -> int:
        return int(self.counts.shape[0])

    @property
    def privacy_unit(self) -> PrivacyUnit:
        """Whom the release protects (its ledger's unit: one record, or one person bounded to ``k``
        rows)."""
        return self.ledger.unit

    @property
    def order(self) -> NDArray[np.int64]:
        """The bins grouped by group (``group_order``; the identity, built on demand, when every
        bin is its own group)."""
        if self.group_order is None:
            out = np.arange(self.n_bins, dtype=np.int64)
            out.flags.writeable = False
            return out
        return self.group_order

    @property
    def boundaries(self) -> NDArray[np.int64]:
        """Group boundaries into :attr:`order` (``0, 1, ..., n`` when every bin is its own group)."""
        if self.group_boundaries is None:
            out = np.arange(self.n_bins + 1, dtype=np.int64)
            out.flags.writeable = False
            return out
        return self.group_boundaries

    @property
    def n_groups(self) -> int:
        if self.group_boundaries is None:
            return self.n_bins
        return int(self.group_boundaries.shape[0] - 1)

    @property
    def groups(self) -> list[NDArray[np.int64]]:
        """The groups as sorted arrays of bin ids (rank ids when unattributed)."""
        parts = np.split(self.order, self.boundaries[1:-1])
        return [np.sort(p) for p in parts]

    @property
    def group_labels(self) -> NDArray[np.int64]:
        """Group index of every bin (shape (n,))."""
        if self.group_order is None and self.group_boundaries is None:  # every bin its own group
            return np.arange(self.n_bins, dtype=np.int64)
        labels = np.empty(self.n_bins, dtype=np.int64)
        labels[self.order] = np.repeat(np.arange(self.n_groups), np.diff(self.boundaries))
        return labels

    def range_query(self, lo: ArrayLike, hi: ArrayLike) -> Any:
        """Answer range counts ``sum(counts[lo:hi + 1])`` (inclusive bounds, vectorised).

        Post-processing of the release (no privacy cost). For an unattributed release the
        ranges are over ranks.

        Examples
        --------
        >>> from privpub.histogram import LaplaceHistogram
        >>> release = LaplaceHistogram().publish([5, 0, 3, 9], epsilon=1e6, rng=0)
        >>> release.range_query(1, 3)
        12.0
        """
        lo_a = np.asarray(lo)
        hi_a = np.asarray(hi)
        if lo_a.dtype.kind not in "iu" or hi_a.dtype.kind not in "iu":
            raise ParameterError(f"lo and hi must be integers, got {lo!r} and {hi!r}")
        n = self.n_bins
        if np.any(lo_a < 0) or np.any(hi_a >= n) or np.any(lo_a > hi_a):
            raise ParameterError(f"ranges must satisfy 0 <= lo <= hi < n={n}, got lo={lo!r}, hi={hi!r}", param="ranges")
        prefix = np.concatenate([[0.0], np.cumsum(self.counts)])
        out = prefix[hi_a + 1] - prefix[lo_a]
        return float(out) if out.ndim == 0 else out

    def to_frame(self) -> pd.DataFrame:
        """One row per bin: ``bin``, ``count``, ``group``."""
        name = "bin" if self.attributed else "rank"
        return pd.DataFrame({name: np.arange(self.n_bins), "count": self.counts, "group": self.group_labels})


def _release(
    *,
    counts: NDArray[np.float64],
    order: NDArray[np.int64] | None,
    boundaries: NDArray[np.int64] | None,
    ledger: BudgetLedger,
    epsilon: float,
    method: str,
    noise: str,
    params: dict[str, Any],
    private: bool = True,
    attributed: bool = True,
) -> HistogramRelease:
    if not private:
        warnings.warn(
            f"{method} is NOT differentially private (it reads the true sort order of the counts); "
            "use it only to reproduce the paper's figures",
            PrivacyWarning,
            stacklevel=3,
        )
    return HistogramRelease(
        counts=counts,
        group_order=order,
        group_boundaries=boundaries,
        ledger=ledger,
        epsilon=epsilon,
        method=method,
        noise=noise,
        private=private,
        attributed=attributed,
        params=params,
    )


def hphp_structure(
    noisy: ArrayLike,
    *,
    epsilon1: float,
    epsilon2: float,
    noise: str = "discrete",
    noise_correction: bool = True,
    eta: float | None = None,
    grouping: str = "fast",
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The structure step of the private HPHP: groups from the noisy unsorted histogram only.

    A pure function of the ε1-DP vector ``noisy = H + noise`` and public parameters; it never
    sees the counts, so everything it returns is post-processing.

    Parameters
    ----------
    noisy : array_like, shape (n,)
        The noisy histogram ``y`` (bin order).
    epsilon1, epsilon2 : float
        The structure and publishing budgets.
    noise : {"discrete", "laplace"}
        The noise distribution (sets the error constants through :func:`noise_variance`).
    noise_correction : bool
        Add ``gamma = Var(noise at epsilon1)`` per group (the expected inflation of a group's
        SSE by the structure noise, histogram spec section 3).
    eta : float, optional
        AHP-style threshold: ``y_i <= eta * ln(n) / epsilon1`` is set to 0 before sorting.
    grouping : {"fast", "deque", "wavefront", "quadratic"}
        DPCluster algorithm (all exact; see :func:`~privpub.histogram.dp_group`).

    Returns
    -------
    order : ndarray of int64
        Stable ascending argsort of the (thresholded) noisy values.
    boundaries : ndarray of int64
        Optimal group boundaries on the sorted noisy values.
    """
    y = check_array(noisy, "noisy", ndim=1).astype(np.float64)
    eps1 = check_epsilon(epsilon1, "epsilon1")
    eps2 = check_epsilon(epsilon2, "epsilon2")
    if eta is not None:
        theta = float(eta) * math.log(y.size) / eps1 if y.size > 1 else 0.0
        y = np.where(y <= theta, 0.0, y)
    order = stable_order(y)
    gamma = noise_variance(eps1, noise) if noise_correction else 0.0
    _, bounds = dp_group(y[order], noise_variance(eps2, noise), gamma, method=grouping)
    return order, bounds


def rank_structure(
    noisy_sorted: ArrayLike,
    *,
    epsilon2: float,
    noise: str = "discrete",
    nonneg_inference: bool = False,
    grouping: str = "fast",
) -> NDArray[np.int64]:
    """Lines 4-5 of the paper's Algorithm 2: isotonic fit of the noisy sorted counts, then DPCluster.

    A pure function of ``sort(H) + noise`` (ε1-DP, since sort(H) has sensitivity 1) and public
    parameters; returns rank-interval boundaries.
    """
    fitted = isotonic_regression(noisy_sorted)
    if nonneg_inference:
        fitted = np.maximum(fitted, 0.0)
    eps2 = check_epsilon(epsilon2, "epsilon2")
    _, bounds = dp_group(fitted, noise_variance(eps2, _check_noise(noise)), 0.0, method=grouping)
    return bounds


def ahp_structure(
    noisy: ArrayLike, *, epsilon1: float, epsilon2: float, eta: float = 0.35, noise: str = "discrete"
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """AHP's structure step, a pure function of the noisy histogram ``y`` and public parameters.

    Sets ``y_i <= eta * ln(n) / epsilon1`` to 0, sorts stably and clusters greedily
    (:func:`~privpub.histogram.ahp_clusters` with ``c = Var(noise at epsilon2)``).

    Returns
    -------
    order, boundaries : ndarray of int64
    """
    y = check_array(noisy, "noisy", ndim=1).astype(np.float64)
    eps1 = check_epsilon(epsilon1, "epsilon1")
    eps2 = check_epsilon(epsilon2, "epsilon2")
    theta = float(eta) * math.log(y.size) / eps1 if y.size > 1 else 0.0
    y = np.where(y <= theta, 0.0, y)
    order = stable_order(y)
    return order, ahp_clusters(y[order], noise_variance(eps2, _check_noise(noise)))


class HistogramPublisher(DataPublisher[ArrayLike, HistogramRelease]):
    """Base of the histogram publishers: ``publish(counts, *, epsilon, rng=None, session=None)``
    takes the 1-D non-negative integer counts (the bins in their public order) and returns a
    :class:`HistogramRelease`."""

    @abstractmethod
    def publish(self, data: ArrayLike, *, epsilon: float, rng: RNGLike = None,
                session: Session | None = None) -> HistogramRelease:
        """Publish the histogram ``data`` with budget ``epsilon`` (reserved in ``session`` first, if any)."""


@dataclass(frozen=True, kw_only=True)
class HPHP(HistogramPublisher):
    """High-precision histogram publishing (HPHP): noisy sort, exact optimal grouping, group means.

    Parameters
    ----------
    variant : {"private", "unattributed", "paper"}
        ``"private"`` (default): the differentially private variant of the spec: noise the
        unsorted histogram (ε1), sort bins by noisy value, group them optimally (exact DP with
        noise-corrected cost), publish noisy group means (ε2). ``"unattributed"``: the paper's
        steps on the sorted histogram, releasing rank-ordered values with no bin labels.
        ``"paper"``: the paper's algorithm as published, which maps groups to bins through the
        *true* sort order and is **not differentially private** (``release.private`` is False
        and a :class:`~privpub.errors.PrivacyWarning` is emitted).
    split : float in (0, 1), optional
        ρ, the fraction of ε spent on structure (ε1 = ρε, ε2 = ε − ε1). Default 0.85 for
        ``"private"`` and ``"unattributed"``, 0.5 for ``"paper"``. Fix it a priori or tune it on
        public data; choosing it by the error on the data being released is not private.
    noise : {"discrete", "laplace"}
        Discrete Laplace (default; integer noise on integer counts, exact sampler) or continuous
        Laplace (as in the paper).
    noise_correction : bool
        ``"private"`` only: add the structure-noise variance as a per-group constant to the
        grouping cost (default True).
    eta : float, optional
        ``"private"`` only: AHP-style threshold ``eta * ln(n) / ε1`` on the noisy values.
    nonneg_inference : bool
        ``"unattributed"``/``"paper"`` only: clamp the isotonic fit at 0 (default False).
    grouping : {"fast", "deque", "wavefront", "quadratic"}
        The exact fast grouping (default) or the O(n^2) reference (see
        :func:`~privpub.histogram.dp_group`).

    Notes
    -----
    **Privacy:** ε-DP under add/remove-one-record neighbours (``H' = H ± e_j``).
    ``"private"``: the Laplace mechanism on ``H`` (sensitivity 1) spends ε1; the order and
    groups are post-processing of that output; one noise draw per group on the group sums
    (a partition fixed before publishing, sensitivity 1) spends ε2; total ε1 + ε2 = ε.
    ``"unattributed"``: the same on ``sort(H)``, whose sensitivity is also 1 (Hay et al. 2010);
    the release has no bin labels. ``"paper"``: **not private** -- line 6 of the paper's
    Algorithm 2 assigns groups to bins with the true sort order, which nothing pays for; two
    neighbouring histograms can produce groupings that are impossible under the other
    (histogram spec section 3). The ledger records ε1 and ε2 for every variant, and for
    ``"paper"`` a step with epsilon = inf (its total is inf: it is not private).

    References
    ----------
    .. [1] Li K., Wang C., Ni W., Bao X. High-precision histogram publishing method based on
       differential privacy. Journal of Computer Applications 40(11), 2020.
    .. [2] Hay M., Rastogi V., Miklau G., Suciu D. Boosting the accuracy of differentially
       private histograms through consistency. PVLDB 3(1), 2010.

    Examples
    --------
    >>> from privpub.histogram import HPHP
    >>> release = HPHP().publish([0, 0, 3, 120, 118, 0, 2, 121], epsilon=1.0, rng=0)
    >>> release.counts.shape, release.ledger.total
    ((8,), 1.0)
    >>> release.private
    True
    """

    variant: str = "private"
    split: float | None = None
    noise: str = "discrete"
    noise_correction: bool = True
    eta: float | None = None
    nonneg_inference: bool = False
    grouping: str = "fast"

    def __post_init__(self) -> None:
        if self.variant not in ("private", "unattributed", "paper"):
            raise ParameterError(f"variant must be 'private', 'unattributed' or 'paper', got {self.variant!r}", param="variant")
        if self.split is not None:
            _check_split(self.split)
        _check_noise(self.noise)
        _check_grouping(self.grouping)
        if self.eta is not None:
            eta = check_real(self.eta, "eta")
            if eta < 0:
                raise ParameterError(f"eta must be >= 0, got {eta}", param="eta")

    @property
    def rho(self) -> float:
        """The structure fraction actually used."""
        if self.split is not None:
            return float(self.split)
        return 0.5 if self.variant == "paper" else 0.85

    @property
    def private(self) -> bool:
        return self.variant != "paper"

    def publish(
        self, data: ArrayLike, *, epsilon: float, rng: RNGLike = None, session: Session | None = None,
        privacy_unit: PrivacyUnit | None = None,
    ) -> HistogramRelease:
        """Publish the histogram ``data`` (1-D non-negative integer counts) with budget ``epsilon``.

        Under a ``session``, ``epsilon`` is reserved there first (refused if the session cannot pay;
        the ``"paper"`` variant is not private and is refused under any session).

        ``privacy_unit`` (default: the unit the counts carry, see :class:`UnitCounts`; else one
        record): for ``PrivacyUnit.person(column, k)`` every mechanism draws at ``epsilon / k`` per
        row and the ledger states the release per person (see :func:`release_unit`).
        """
        method = {"private": "hphp", "unattributed": "hphp_unattributed", "paper": "hphp_paper"}[self.variant]
        unit, counts, eps, gen = _prepared(data, privacy_unit, epsilon, rng, "HPHP", method, grouping=self.grouping,
                                           ratio=self.rho)
        n = counts.size
        with accounting(eps, method=method, session=session, data=describe_data(counts),
                        private=self.private, unit=unit) as acc:
            # every mechanism draws at record level from the unit's record budget (eps / k for a person)
            eps1, eps2 = self._split(acc.record_budget)
            params = _unit_params({**asdict(self), "rho": self.rho, "epsilon1": eps1, "epsilon2": eps2}, unit)
            if self.variant == "private":
                with acc.step("structure"):
                    y = self._structure_noise(counts, eps1, gen, note=f"the {n} counts (L1 sensitivity 1)")[0]
                order, bounds = hphp_structure(
                    y, epsilon1=eps1, epsilon2=eps2, noise=self.noise,
                    noise_correction=self.noise_correction, eta=self.eta, grouping=self.grouping,
                )
                with acc.step("publish"):
                    out = self._group_sums(counts, order, bounds, eps2, gen)[0]
                return _release(counts=out, order=order, boundaries=bounds, ledger=acc.seal(), epsilon=eps,
                                method=method, noise=self.noise, params=params)
            # lines 1-5 of the paper's Algorithm 2: noise on the sorted counts, isotonic fit, DPCluster
            perm = np.argsort(counts, kind="stable").astype(np.int64)
            sorted_counts = counts[perm]
            with acc.step("structure"):
                noisy_sorted = self._structure_noise(sorted_counts, eps1, gen,
                                                     note=f"the {n} sorted counts (L1 sensitivity 1, Hay et al. 2010)")[0]
            bounds = rank_structure(noisy_sorted, epsilon2=eps2, noise=self.noise,
                                    nonneg_inference=self.nonneg_inference, grouping=self.grouping)
            if self.variant == "unattributed":
                ranks = np.arange(n, dtype=np.int64)
                with acc.step("publish"):
                    out = self._group_sums(sorted_counts, ranks, bounds, eps2, gen)[0]
                return _release(counts=out, order=ranks, boundaries=bounds, ledger=acc.seal(), epsilon=eps,
                                method=method, noise=self.noise, params=params, attributed=False)
            with acc.step("publish"):
                out = self._group_sums(counts, perm, bounds, eps2, gen)[0]
            acc.leak("group-to-bin mapping", "line 6 of the paper's Algorithm 2 maps the groups to bins through "
                     "the TRUE sort order of the counts: not differentially private")
            return _release(counts=out, order=perm, boundaries=bounds, ledger=acc.seal(), epsilon=eps,
                            method=method, noise=self.noise, params=params, private=False)

    def _split(self, budget: float) -> tuple[float, float]:
        """``(eps1, eps2)``: the structure and publishing budgets :meth:`publish` spends out of the
        record-level ``budget`` (``rho`` and ``1 - rho``). The audit cases ``histogram.HPHP.structure``
        and ``histogram.HPHP.group_sums`` take their epsilons from here."""
        eps1, eps2 = split(budget, [self.rho, 1.0 - self.rho])
        return eps1, eps2

    def _structure_noise(self, values: NDArray[np.int64], epsilon: float, gen: np.random.Generator, *,
                         note: str = "", draws: int = 1) -> NDArray[Any]:
        """The structure step's noisy vector exactly as :meth:`publish` draws it: ``values`` (the
        counts, or the sorted counts of ``"unattributed"``/``"paper"``; L1 sensitivity 1) plus the
        publisher's ``noise`` at ``epsilon`` (eps1 of :meth:`_split`), one charge. ``publish`` calls
        it with ``draws=1``, the audit case ``histogram.HPHP.structure`` with many draws (one code
        path; shape ``(draws, n)``: independent noise on ``draws`` copies, one charge)."""
        return _noisy(np.tile(values, draws), epsilon, self.noise, gen, note=note).reshape(draws, values.size)

    def _group_sums(self, values: NDArray[np.int64], order: NDArray[np.int64], boundaries: NDArray[np.int64],
                    epsilon: float, gen: np.random.Generator, *, draws: int = 1) -> NDArray[Any]:
        """The publishing step exactly as :meth:`publish` runs it: one draw of the publisher's
        ``noise`` at ``epsilon`` (eps2 of :meth:`_split`) per group sum of the partition
        ``(order, boundaries)`` fixed by the structure step (disjoint groups, L1 sensitivity 1),
        then :func:`publish_groups` (each bin gets its group's noisy mean). ``publish`` calls it
        with ``draws=1``, the audit case ``histogram.HPHP.group_sums`` with many draws (one code
        path; shape ``(draws, n)``, one charge)."""
        k = boundaries.size - 1
        z = noise_vector(k * draws, epsilon, self.noise, gen,
                         note=f"one draw per group sum; {k} disjoint groups (L1 sensitivity 1)")
        return np.array([publish_groups(values, order, boundaries, row) for row in z.reshape(draws, k)])


@dataclass(frozen=True, kw_only=True)
class AHP(HistogramPublisher):
    """AHP (Zhang et al., SDM 2014): noisy threshold, sort, greedy clustering, noisy group means.

    Parameters
    ----------
    ratio : float in (0, 1)
        Fraction of ε spent on the structure (default 0.85, DPComp's default).
    eta : float >= 0
        Threshold ``eta * ln(n) / ε1`` below which noisy counts are set to 0 (default 0.35).
    noise : {"discrete", "laplace"}
        Noise distribution (default discrete Laplace).

    Notes
    -----
    **Privacy:** ε-DP under add/remove-one neighbours: Laplace on the counts (ε1 = ratio·ε);
    threshold, stable sort and clustering are post-processing; one noise draw per cluster sum
    (ε2 = ε − ε1). Follows DPComp's ``ahp_fast.pyx`` with a stable sort (histogram spec section 5).

    References
    ----------
    .. [1] Zhang X., Chen R., Xu J., Meng X., Xie Y. Towards accurate histogram publication
       under differential privacy. SDM 2014.

    Examples
    --------
    >>> from privpub.histogram import AHP
    >>> AHP().publish([0, 0, 3, 120, 118, 0, 2, 121], epsilon=1.0, rng=0).ledger.total
    1.0
    """

    ratio: float = 0.85
    eta: float = 0.35
    noise: str = "discrete"

    def __post_init__(self) -> None:
        _check_split(self.ratio, "ratio")
        eta = check_real(self.eta, "eta")
        if eta < 0:
            raise ParameterError(f"eta must be >= 0, got {eta}", param="eta")
        _check_noise(self.noise)

    def publish(
        self, data: ArrayLike, *, epsilon: float, rng: RNGLike = None, session: Session | None = None,
        privacy_unit: PrivacyUnit | None = None,
    ) -> HistogramRelease:
        """Publish the histogram ``data`` with budget ``epsilon`` (reserved in ``session`` first, if any).

        ``privacy_unit`` (default: the unit the counts carry, see :class:`UnitCounts`; else one
        record): for ``PrivacyUnit.person(column, k)`` every mechanism draws at ``epsilon / k`` per
        row and the ledger states the release per person (see :func:`release_unit`).
        """
        unit, counts, eps, gen = _prepared(data, privacy_unit, epsilon, rng, "AHP", "ahp", ratio=self.ratio)
        n = counts.size
        with accounting(eps, method="ahp", session=session, data=describe_data(counts), unit=unit) as acc:
            eps1, eps2 = split(acc.record_budget, [self.ratio, 1.0 - self.ratio])
            with acc.step("structure"):
                y = _noisy(counts, eps1, self.noise, gen, note=f"the {n} counts (L1 sensitivity 1)")
            order, bounds = ahp_structure(y, epsilon1=eps1, epsilon2=eps2, eta=self.eta, noise=self.noise)
            k = bounds.size - 1
            with acc.step("publish"):
                z = noise_vector(k, eps2, self.noise, gen,
                          note=f"one draw per cluster sum; {k} disjoint clusters (L1 sensitivity 1)")
            out = publish_groups(counts, order, bounds, z)
            params = _unit_params({**asdict(self), "epsilon1": eps1, "epsilon2": eps2}, unit)
            return _release(counts=out, order=order, boundaries=bounds, ledger=acc.seal(), epsilon=eps,
                            method="ahp", noise=self.noise, params=params)


@dataclass(frozen=True, kw_only=True)
class LaplaceHistogram(HistogramPublisher):
    """The Laplace (identity) baseline: independent noise on every bin, clamped at 0.

    The paper's "DP" baseline (Dwork et al. 2006).

    Parameters
    ----------
    noise : {"discrete", "laplace"}
        Discrete Laplace (default) or Laplace (exact, on the dyadic grid of :func:`privpub.core.laplace_noise`).
    clamp : bool
        Clamp the published counts at 0 (default True; post-processing).

    Notes
    -----
    **Privacy:** ε-DP under add/remove-one neighbours: the count vector has L1 sensitivity 1
    and gets noise of scale 1/ε on every bin; the whole budget goes to one step.

    Examples
    --------
    >>> from privpub.histogram import LaplaceHistogram
    >>> release = LaplaceHistogram().publish([10, 0, 7], epsilon=1.0, rng=0)
    >>> release.n_groups, release.ledger.total
    (3, 1.0)
    """

    noise: str = "discrete"
    clamp: bool = True

    def __post_init__(self) -> None:
        _check_noise(self.noise)

    def publish(
        self, data: ArrayLike, *, epsilon: float, rng: RNGLike = None, session: Session | None = None,
        privacy_unit: PrivacyUnit | None = None,
    ) -> HistogramRelease:
        """Publish the histogram ``data`` with budget ``epsilon`` (reserved in ``session`` first, if any).

        With the default discrete noise the counts stay int64 end to end (exact up to 2**62).

        ``privacy_unit`` (default: the unit the counts carry, see :class:`UnitCounts`; else one
        record): for ``PrivacyUnit.person(column, k)`` every mechanism draws at ``epsilon / k`` per
        row and the ledger states the release per person (see :func:`release_unit`).
        """
        unit, counts, eps, gen = _prepared(data, privacy_unit, epsilon, rng, "LaplaceHistogram", "laplace")
        n = counts.size
        with accounting(eps, method="laplace", session=session, data=describe_data(counts), unit=unit) as acc:
            with acc.step("publish"):
                out = _noisy(counts, acc.record_budget, self.noise, gen, note=f"the {n} counts (L1 sensitivity 1)")
            if self.clamp:
                np.maximum(out, 0, out=out)
            return _release(counts=out, order=None, boundaries=None, ledger=acc.seal(), epsilon=eps,
                            method="laplace", noise=self.noise, params=_unit_params(asdict(self), unit))


@dataclass(frozen=True, kw_only=True)
class OptimalGrouping(HistogramPublisher):
    """The paper's "Optimal" reference (Algorithm 3): exact grouping of the TRUE sorted counts.

    **Not differentially private**: the groups are computed from the exact counts. Only the
    group sums get noise. ``release.private`` is False and a
    :class:`~privpub.errors.PrivacyWarning` is emitted. Use it as an upper reference line.

    Parameters
    ----------
    split : float in (0, 1)
        ε2 = (1 − split)·ε goes to the group sums (default 0.5, as the paper's HPHP).
    noise : {"discrete", "laplace"}
        Noise on the group sums.
    grouping : {"fast", "deque", "wavefront", "quadratic"}
        DPCluster algorithm (all exact; see :func:`~privpub.histogram.dp_group`).

    Notes
    -----
    **Privacy:** none for the structure (it reads the exact counts). The ledger records that
    step with epsilon = inf next to the ε2 charge of the group sums; its total is inf.

    Examples
    --------
    >>> import warnings
    >>> from privpub.histogram import OptimalGrouping
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     release = OptimalGrouping().publish([0, 0, 3, 120, 118], epsilon=1.0, rng=0)
    >>> release.private
    False
    """

    split: float = 0.5
    noise: str = "discrete"
    grouping: str = "fast"

    def __post_init__(self) -> None:
        _check_split(self.split)
        _check_noise(self.noise)
        _check_grouping(self.grouping)

    def publish(
        self, data: ArrayLike, *, epsilon: float, rng: RNGLike = None, session: Session | None = None,
        privacy_unit: PrivacyUnit | None = None,
    ) -> HistogramRelease:
        """Publish the histogram ``data`` (non-private grouping); refused under any ``session``.

        ``privacy_unit`` (default: the unit the counts carry, see :class:`UnitCounts`; else one
        record): for ``PrivacyUnit.person(column, k)`` every mechanism draws at ``epsilon / k`` per
        row and the ledger states the release per person (see :func:`release_unit`).
        """
        unit, counts, eps, gen = _prepared(data, privacy_unit, epsilon, rng, "OptimalGrouping", "optimal",
                                           grouping=self.grouping, ratio=self.split)
        with accounting(eps, method="optimal", session=session, data=describe_data(counts),
                        private=False, unit=unit) as acc:
            eps1, eps2 = split(acc.record_budget, [self.split, 1.0 - self.split])
            acc.leak("structure", "exact sort and grouping of the TRUE counts: not differentially private")
            perm = np.argsort(counts, kind="stable").astype(np.int64)
            _, bounds = dp_group(counts[perm].astype(np.float64), noise_variance(eps2, self.noise), 0.0,
                                 method=self.grouping)
            k = bounds.size - 1
            with acc.step("publish"):
                z = noise_vector(k, eps2, self.noise, gen,
                          note=f"one draw per group sum; {k} disjoint groups (L1 sensitivity 1)")
            out = publish_groups(counts, perm, bounds, z)
            params = _unit_params({**asdict(self), "epsilon1": eps1, "epsilon2": eps2}, unit)
            return _release(counts=out, order=perm, boundaries=bounds, ledger=acc.seal(), epsilon=eps,
                            method="optimal", noise=self.noise, params=params, private=False)


#: the registry the CLI and the experiments use (name -> publisher factory)
PUBLISHERS: dict[str, Any] = {
    "hphp": lambda **kw: HPHP(**kw),
    "hphp_paper": lambda **kw: HPHP(variant="paper", **kw),
    "hphp_unattributed": lambda **kw: HPHP(variant="unattributed", **kw),
    "ahp": lambda **kw: AHP(**kw),
    "laplace": lambda **kw: LaplaceHistogram(**kw),
    "optimal": lambda **kw: OptimalGrouping(**kw),
}
# "dawa" (privpub.histogram._dawa, which builds on this module) is registered by the package


def counts_from_records(
    values: ArrayLike,
    *,
    bins: ArrayLike | None = None,
    categories: ArrayLike | None = None,
    privacy_ids: ArrayLike | None = None,
    max_contributions: int | None = None,
    privacy_id_column: str | None = None,
    rng: RNGLike = None,
    key: str | None = None,
) -> UnitCounts:
    """Build a histogram from a column of raw records with declared (public) bins or categories.

    Exactly one of ``bins`` (increasing numeric edges; bin ``k`` is ``[edges[k], edges[k+1])``,
    the last bin closed) or ``categories`` (the list of allowed values, one bin each, in that
    order) must be given. The domain must be declared, not read from the data: deriving it from
    the data would leak. Values outside the domain raise :class:`~privpub.errors.DomainError`.

    **Protecting people, not rows.** When one person may hold many rows, give ``privacy_ids``
    (one id per row) and ``max_contributions=k`` (a public bound, e.g. from
    :func:`~privpub.core.suggest_max_contributions`): each person's rows are bounded to exactly
    ``min(rows, k)`` by :func:`privpub.core.bound_contributions` (a keyed hash of the id and the
    value, seeded by ``rng`` or ``key``; which rows of a person are kept never depends on other
    people's data) and the counts carry ``PrivacyUnit.person(column, k)``. Every histogram
    publisher then protects a whole person at the ``epsilon`` it is given (the mechanisms draw at
    ``epsilon / k``). Without them the counts carry one record as their unit.

    Parameters
    ----------
    values : array_like
        One value per record.
    bins, categories : array_like
        The declared domain (exactly one).
    privacy_ids : array_like, optional
        One privacy id per record (missing ids are refused).
    max_contributions : int, optional
        The bound ``k`` on each person's rows (needed with ``privacy_ids``).
    privacy_id_column : str, optional
        The name of the id column stated in the unit (default: ``privacy_ids.name`` for a named
        :class:`pandas.Series`, else ``"privacy_id"``).
    rng : seed or Generator
        Draws the bounding key when ``key`` is not given.
    key : str, optional
        A 16-character bounding key (:func:`privpub.core.contribution_key`): the same key keeps
        the same rows (the Spark path agrees with this one for one key).

    Returns
    -------
    UnitCounts
        int64 counts (an ndarray) with ``.privacy_unit``.

    Examples
    --------
    >>> counts_from_records(["a", "c", "a"], categories=["a", "b", "c"]).tolist()
    [2, 0, 1]
    >>> counts_from_records([0.5, 1.5, 2.0], bins=[0, 1, 2]).tolist()
    [1, 2]
    >>> c = counts_from_records(["a", "a", "a", "c"], categories=["a", "b", "c"],
    ...                         privacy_ids=[7, 7, 7, 8], max_contributions=2, rng=0)
    >>> c.tolist(), str(c.privacy_unit)
    ([2, 0, 1], "one person (all rows with the same 'privacy_id', at most 2 rows each), added or removed")
    """
    if (bins is None) == (categories is None):
        raise ParameterError("give exactly one of bins (numeric edges) or categories (declared values)")
    if (privacy_ids is None) != (max_contributions is None):
        missing = "max_contributions" if max_contributions is None else "privacy_ids"
        raise ParameterError("give privacy_ids and max_contributions together (the rows of one person are bounded "
                             f"to max_contributions); {missing} is missing", param=missing)
    unit = PrivacyUnit.record()
    if privacy_ids is not None:
        name = privacy_id_column
        if name is None:
            series_name = getattr(privacy_ids, "name", None)
            name = series_name if isinstance(series_name, str) and series_name else "privacy_id"
        unit = PrivacyUnit.person(name, max_contributions=max_contributions)  # type: ignore[arg-type]
        n_ids, n_values = len(privacy_ids), len(values)  # type: ignore[arg-type]
        if n_ids != n_values:
            raise ParameterError(f"privacy_ids must hold one id per record ({n_values}), got {n_ids}",
                                 param="privacy_ids")
    if categories is not None:
        cats = pd.Index(np.asarray(categories, dtype=object))
        if cats.size == 0 or cats.has_duplicates:
            raise ParameterError("categories must be non-empty and unique", param="categories")
        vals = pd.Series(np.asarray(values, dtype=object))
        if vals.isna().any():
            raise DomainError("values must not contain missing entries (NaN/None)", param="values")
        codes = cats.get_indexer(vals.to_numpy())
        if np.any(codes < 0):
            bad = vals.to_numpy()[codes < 0][0]
            raise DomainError(f"values must lie in the declared categories, got {bad!r}", param="values")
        size = cats.size
    else:
        assert bins is not None  # exactly one of bins and categories (checked above)
        edges = check_array(bins, "bins", ndim=1).astype(np.float64)
        if edges.size < 2 or np.any(np.diff(edges) <= 0):
            raise ParameterError("bins must be at least two strictly increasing edges", param="bins")
        vals_f = np.asarray(pd.to_numeric(pd.Series(np.asarray(values)), errors="coerce"), dtype=np.float64)
        if np.any(np.isnan(vals_f)):
            raise DomainError("values must be numeric and not NaN", param="values")
        if np.any(vals_f < edges[0]) or np.any(vals_f > edges[-1]):
            raise DomainError(f"values must lie in the declared range [{edges[0]}, {edges[-1]}]", param="values")
        codes = np.clip(np.searchsorted(edges, vals_f, side="right") - 1, 0, edges.size - 2)
        size = edges.size - 1
    if privacy_ids is not None:
        # a row's hash reads its id and its value only: which rows of a person are kept is a function
        # of that person's rows and the key (the Spark path hashes the same id and value strings)
        keep = bound_contributions(privacy_ids, unit.factor, rng=rng, key=key, content=np.asarray(values))
        codes = codes[keep]
    return UnitCounts(np.bincount(codes, minlength=size).astype(np.int64), unit)
