"""Pure array kernels of the decision-data publishers (no pandas, no validation)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from privpub.core import sparse_release_probability, split
from privpub.errors import ParameterError

__all__ = [
    "candidate_max_scores",
    "class_counts_by_value",
    "child_class_counts",
    "compact_ids",
    "expected_noise_rows",
    "info_gain",
    "level_budgets",
    "max_levels",
    "max_score",
    "split_segments",
    "split_segments_from_counts",
    "weighted_bincount",
]

I64 = NDArray[np.int64]


#: smallest level budget allowed: report-noisy-max needs a noise scale 1/eps_i <= 2**52 (one bit of
#: margin for the rounding of the schedule)
MIN_LEVEL_EPSILON = 2.0**-51
#: :func:`max_levels` never reports more (an epsilon of 1e300 allows "unboundedly many" levels)
_LEVELS_CAP = 2.0**62


def _geometric_weights(levels: int, count: int, ratio: float) -> tuple[list[float], float]:
    """First ``count`` weights ``r^(i - h + 1)`` (the largest is 1) and the sum of all ``h`` of them."""
    log_r = math.log(ratio) / 3.0
    weights = [math.exp((i - levels + 1) * log_r) for i in range(count)]
    total = math.expm1(-levels * log_r) / math.expm1(-log_r)  # sum_{i<h} r^(i-h+1), no overflow
    return weights, total


def max_levels(eps1: float, schedule: str = "geometric", fanout_ratio: float = 3.0) -> int:
    """Largest ``h`` whose first level still gets a usable budget (>= :data:`MIN_LEVEL_EPSILON`) out of ``eps1``."""
    if schedule == "uniform":
        return max(1, math.floor(min(eps1 / MIN_LEVEL_EPSILON, _LEVELS_CAP)))
    # eps_1 = eps1 (1 - 1/r) / (r^h - 1) * ... >= MIN  <=>  r^h - 1 <= eps1 (r - 1) / MIN
    r = fanout_ratio ** (1.0 / 3.0)
    x = eps1 * (r - 1.0) / MIN_LEVEL_EPSILON
    log_x = math.log1p(x) if math.isfinite(x) else math.log(eps1) + math.log(r - 1.0) - math.log(MIN_LEVEL_EPSILON)
    return max(1, math.floor(min(log_x / math.log(r), _LEVELS_CAP)))


def level_budgets(
    eps1: float, levels: int, schedule: str = "geometric", fanout_ratio: float = 3.0, count: int | None = None
) -> tuple[float, ...]:
    """Per-level selection budgets ``eps_1..eps_h`` summing to ``eps1`` (spec §2.6).

    ``geometric``: ``eps_i = eps1 r^(i-1) (r-1) / (r^h - 1)`` with ``r = fanout_ratio^(1/3)``
    (the paper's Theorem 2 with its ``n`` corrected to ``h``); ``uniform``: ``eps1 / h``.
    ``count`` < ``levels`` returns only the first ``count`` budgets of the ``h``-level schedule
    (without materialising the rest).

    Raises
    ------
    ParameterError
        If the first level's budget would be below 2**-51 (a noise scale near the samplers' 2**52):
        ``levels`` is too large for ``eps1`` (the message gives the largest usable ``levels``).
    """
    n = levels if count is None else min(count, levels)
    if max_levels(eps1, schedule, fanout_ratio) < levels:
        log10_first = (math.log10(eps1 / levels) if schedule == "uniform"
                       else _log_first_geometric(eps1, levels, fanout_ratio) / math.log(10))
        raise ParameterError(
            f"levels={levels} with schedule={schedule!r} gives level 1 a budget of "
            f"{_fmt_pow10(log10_first)} out of "
            f"eps1={eps1:g}, below the smallest usable level budget 2**-51 (noise scales stop at 2**52); at most "
            f"{max_levels(eps1, schedule, fanout_ratio)} levels are possible: lower levels, "
            f"raise epsilon" + (" or use the uniform schedule" if schedule == "geometric" else ""),
            param="levels", fix={"schedule": "uniform"} if schedule == "geometric" else None)
    if n == levels:  # the whole schedule: split() makes the parts add up to eps1
        if schedule == "uniform":
            return split(eps1, [1.0] * levels)
        return split(eps1, _geometric_weights(levels, levels, fanout_ratio)[0])
    if schedule == "uniform":
        return tuple([eps1 / levels] * n)
    weights, total = _geometric_weights(levels, n, fanout_ratio)
    return tuple(eps1 * w / total for w in weights)


def _fmt_pow10(log10: float) -> str:
    return f"{10.0**log10:.2g}" if log10 > -300 else f"about 1e{math.floor(log10)}"


def _log_first_geometric(eps1: float, levels: int, fanout_ratio: float) -> float:
    """``ln eps_1`` with ``eps_1 = eps1 (r - 1) / (r^h - 1)``, computed in logs (``r^h`` may overflow)."""
    log_r = math.log(fanout_ratio) / 3.0
    return math.log(eps1) + math.log(math.expm1(log_r)) - levels * log_r - math.log(-math.expm1(-levels * log_r))


def compact_ids(columns: list[I64], sizes: list[int], n: int) -> tuple[I64, int]:
    """Mixed-radix id of the rows of ``columns`` (values in ``[0, sizes[j])``), compacted to ``0..P-1``."""
    if not columns:
        return np.zeros(n, dtype=np.int64), 1
    key = np.zeros(n, dtype=np.int64)
    bound = 1
    for col, size in zip(columns, sizes):
        if bound * size >= 1 << 62:
            uniq, key = np.unique(key, return_inverse=True)
            bound = len(uniq)
        key = key * size + col
        bound *= size
    uniq, inv = np.unique(key, return_inverse=True)
    return inv.astype(np.int64).reshape(-1), len(uniq)


def weighted_bincount(keys: I64, weights: I64 | None, size: int) -> I64:
    """``bincount`` of ``keys`` (each counted ``weights[i]`` times, once if None), exact in int64.

    Weighted rows are pre-aggregated counts (e.g. from Spark): summed in float64 only while the
    total stays below 2**53 (every partial sum is then exact), otherwise with ``np.add.at`` in int64.
    """
    if weights is None:
        return np.bincount(keys, minlength=size).astype(np.int64)
    w = np.asarray(weights, dtype=np.int64)
    if w.size and int(w.sum(dtype=np.int64)) < 1 << 53 and int(w.min()) >= 0:
        return np.bincount(keys, weights=w.astype(np.float64), minlength=size).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, keys, w)
    return out


def child_class_counts(
    pid: I64, n_parts: int, fine: I64, n_fine: int, y: I64, n_classes: int, lo: I64, hi: I64,
    weights: I64 | None = None,
) -> NDArray[np.int64]:
    """Class counts of every child range ``[lo[c], hi[c])`` of fine codes within each partition.

    ``weights`` (optional) gives each row's multiplicity (pre-aggregated rows). Returns an array
    of shape ``(n_parts, len(lo), n_classes)``; one ``bincount`` plus prefix sums.
    """
    flat = (pid * n_fine + fine) * n_classes + y
    cnt = weighted_bincount(flat, weights, n_parts * n_fine * n_classes).reshape(n_parts, n_fine, n_classes)
    cum = np.zeros((n_parts, n_fine + 1, n_classes), dtype=np.int64)
    np.cumsum(cnt, axis=1, out=cum[:, 1:, :])
    return cum[:, hi, :] - cum[:, lo, :]


def max_score(counts: NDArray[np.int64], owner: I64, n_candidates: int) -> I64:
    """Max (paper eq. 5) per candidate: sum over partitions and children of ``max_k count``.

    ``counts`` has shape ``(P, n_children, K)``; ``owner[c]`` is the candidate of child ``c``.
    """
    return _per_candidate(counts.max(axis=2).sum(axis=0), owner, n_candidates)


def _per_candidate(per_child: I64, owner: I64, n_candidates: int) -> I64:
    """Sum ``per_child`` by candidate, exactly in int64."""
    out = np.zeros(n_candidates, dtype=np.int64)
    np.add.at(out, owner, per_child.astype(np.int64))
    return out


#: largest dense block of (partition, fine code or child, class) counts the scoring allocates
SCORE_BLOCK = 1 << 22


def candidate_max_scores(
    pid: I64, n_parts: int, fine: I64, n_fine: int, y: I64, n_classes: int,
    lo: I64, hi: I64, owner: I64, n_candidates: int, *, disjoint: bool, weights: I64 | None = None,
) -> I64:
    """Max score per candidate: ``sum_P sum_c max_k |T_P,c^k|`` over partitions ``P`` (spec §2.4, §6).

    Child ``c`` is the range ``[lo[c], hi[c])`` of fine codes and belongs to candidate
    ``owner[c]``. ``disjoint``: the children of all candidates are pairwise disjoint (taxonomy
    nodes of one cut), so each record is counted once, sparsely (``O(n log n)`` time, ``O(n)``
    memory, whatever the number of partitions and categories). Otherwise (grid splits, whose
    children overlap) prefix sums over fine codes, a block of partitions at a time so that no
    array exceeds :data:`SCORE_BLOCK` elements. ``weights`` (optional): the multiplicity of
    every row, for pre-aggregated rows (the Spark backend); the scores are the same integers.
    """
    if disjoint:
        per_child = _disjoint_child_max(pid, n_parts, fine, y, n_classes, lo, hi, weights)
        return _per_candidate(per_child, owner, n_candidates)
    per_row = (n_fine + 1 + lo.size) * n_classes
    rows = max(1, SCORE_BLOCK // per_row)
    if n_parts <= rows:
        return max_score(child_class_counts(pid, n_parts, fine, n_fine, y, n_classes, lo, hi, weights),
                         owner, n_candidates)
    order = np.argsort(pid, kind="stable")
    sorted_pid = pid[order]
    per_child = np.zeros(lo.size, dtype=np.int64)
    for p0 in range(0, n_parts, rows):
        p1 = min(n_parts, p0 + rows)
        b0, b1 = np.searchsorted(sorted_pid, [p0, p1])
        sel = order[b0:b1]
        if sel.size:
            counts = child_class_counts(pid[sel] - p0, p1 - p0, fine[sel], n_fine, y[sel], n_classes, lo, hi,
                                        None if weights is None else weights[sel])
            per_child += counts.max(axis=2).sum(axis=0)
    return _per_candidate(per_child, owner, n_candidates)


def _disjoint_child_max(pid: I64, n_parts: int, fine: I64, y: I64, n_classes: int, lo: I64, hi: I64,
                        weights: I64 | None = None) -> I64:
    """``sum_P max_k count(P, c, k)`` for disjoint child ranges ``c`` (records outside all count nowhere)."""
    n_children = lo.size
    per_child = np.zeros(n_children, dtype=np.int64)
    if n_children == 0 or fine.size == 0:
        return per_child
    order = np.argsort(lo, kind="stable")
    slo, shi = lo[order], hi[order]
    c = np.searchsorted(slo, fine, side="right") - 1
    inside = (c >= 0) & (fine < shi[np.maximum(c, 0)])
    c, p, k = c[inside], pid[inside], y[inside]
    w = None if weights is None else weights[inside]
    if n_parts * n_children * n_classes >= 1 << 62:  # cannot happen for n_parts <= n records; be safe
        raise ParameterError(f"{n_parts} partitions x {n_children} children x {n_classes} classes overflow int64")
    size = n_parts * n_children * n_classes
    if size <= SCORE_BLOCK:
        cnt = weighted_bincount((p * n_children + c) * n_classes + k, w, size)
        sorted_max = cnt.reshape(n_parts, n_children, n_classes).max(axis=2).sum(axis=0)
    else:
        keys, inv = np.unique((p * n_children + c) * n_classes + k, return_inverse=True)
        counts = weighted_bincount(inv.reshape(-1), w, keys.size)
        group = keys // n_classes  # (partition, child), sorted
        first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        sorted_max = np.zeros(n_children, dtype=np.int64)
        np.add.at(sorted_max, group[first] % n_children, np.maximum.reduceat(counts, first))
    per_child[order] = sorted_max
    return per_child


def expected_noise_rows(n_cells: int, epsilon: float, noise: str) -> float:
    """Expected number of synthetic rows that the noise of ``n_cells`` empty cells creates.

    ``n_cells * p * E[value | value >= 1]``: ``p`` is :func:`privpub.core.sparse_release_probability`;
    the conditional mean is ``1 / (1 - q)`` (discrete, ``q = exp(-epsilon)``) or about
    ``1/epsilon + 1/2`` (rounded continuous Laplace).
    """
    p = sparse_release_probability(epsilon, noise=noise)
    mean = 1.0 / epsilon + 0.5 if noise == "laplace" else 1.0 / -math.expm1(-epsilon)
    return float(n_cells) * p * mean


def _entropy(counts: NDArray[np.float64]) -> NDArray[np.float64]:
    tot = counts.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(tot > 0, counts / np.where(tot > 0, tot, 1), 0.0)
        logs = np.where(p > 0, np.log2(np.where(p > 0, p, 1.0)), 0.0)
    out: NDArray[np.float64] = -(p * logs).sum(axis=-1)
    return out


def info_gain(child_counts: NDArray[np.int64], owner: I64, n_candidates: int) -> NDArray[np.float64]:
    """InfoGain ``H(D_v) - sum_c |D_c|/|D_v| H(D_c)`` (base 2) from pooled child class counts ``(n_children, K)``."""
    cc = child_counts.astype(np.float64)
    parent = np.zeros((n_candidates, cc.shape[1]))
    np.add.at(parent, owner, cc)
    n_parent = parent.sum(axis=1)
    n_child = cc.sum(axis=1)
    weighted = np.bincount(owner, weights=n_child * _entropy(cc), minlength=n_candidates)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(n_parent > 0, _entropy(parent) - weighted / np.where(n_parent > 0, n_parent, 1), 0.0)
    return np.asarray(out, dtype=np.float64)


def class_counts_by_value(values: I64, y: I64, n_classes: int) -> tuple[I64, NDArray[np.int64]]:
    """Distinct ``values`` (ascending) and the ``(m, K)`` class counts of each (an exact marginal)."""
    uniq, inv = np.unique(values, return_inverse=True)
    counts = weighted_bincount(inv.reshape(-1) * n_classes + y, None, uniq.size * n_classes)
    return uniq.astype(np.int64), counts.reshape(uniq.size, n_classes)


def split_segments(
    ticks: I64, y: I64, n_classes: int, lo: int, hi: int
) -> tuple[I64, I64, NDArray[np.int64], NDArray[np.int64]]:
    """Segments of split ticks ``s in {lo+1..hi-1}`` on which the split's class counts are constant.

    ``ticks`` and ``y`` are the records of the interval ``[lo, hi)``. A record goes left iff
    ``t < s``. Returns ``(seg_lo, seg_hi, left, right)``: inclusive segment bounds and the
    ``(m, K)`` class counts left and right of any ``s`` in each segment; empty segments are
    dropped (spec §3, "Split value"). Same as :func:`split_segments_from_counts` on the
    records' per-tick class counts.
    """
    uniq, counts = class_counts_by_value(np.asarray(ticks, dtype=np.int64), np.asarray(y, dtype=np.int64), n_classes)
    return split_segments_from_counts(uniq, counts, lo, hi)


def split_segments_from_counts(
    ticks: I64, counts: NDArray[np.int64], lo: int, hi: int
) -> tuple[I64, I64, NDArray[np.int64], NDArray[np.int64]]:
    """:func:`split_segments` from aggregated records: distinct ``ticks`` in ``[lo, hi)``
    (ascending) and their ``(m, K)`` class counts (rows with all-zero counts are ignored)."""
    n_classes = counts.shape[1]
    keep_rows = counts.sum(axis=1) > 0
    ticks, counts = ticks[keep_rows], counts[keep_rows]
    total = counts.sum(axis=0).astype(np.int64)
    if ticks.size == 0:
        seg_lo = np.array([lo + 1], dtype=np.int64)
        seg_hi = np.array([hi - 1], dtype=np.int64)
        z = np.zeros((1, n_classes), dtype=np.int64)
        return seg_lo, seg_hi, z, z.copy()
    left_after = np.cumsum(counts, axis=0)  # left counts once s > b_j
    b = ticks
    seg_lo = np.r_[lo + 1, b + 1]
    seg_hi = np.r_[b, hi - 1]
    left = np.vstack([np.zeros((1, n_classes), dtype=np.int64), left_after])
    keep = seg_hi >= seg_lo
    left = left[keep]
    return seg_lo[keep].astype(np.int64), seg_hi[keep].astype(np.int64), left, total[None, :] - left
