"""Pure array kernels of the decision-data publishers (no pandas, no validation)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from privpub.core import split

__all__ = [
    "child_class_counts",
    "compact_ids",
    "info_gain",
    "level_budgets",
    "max_score",
    "split_segments",
]

I64 = NDArray[np.int64]


def level_budgets(eps1: float, levels: int, schedule: str = "geometric", fanout_ratio: float = 3.0) -> tuple[float, ...]:
    """Per-level selection budgets ``eps_1..eps_h`` summing to ``eps1`` (spec §2.6).

    ``geometric``: ``eps_i = eps1 r^(i-1) (r-1) / (r^h - 1)`` with ``r = fanout_ratio^(1/3)``
    (the paper's Theorem 2 with its ``n`` corrected to ``h``); ``uniform``: ``eps1 / h``.
    """
    if schedule == "uniform":
        return split(eps1, [1.0] * levels)
    r = fanout_ratio ** (1.0 / 3.0)
    return split(eps1, [r**i for i in range(levels)])


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


def child_class_counts(
    pid: I64, n_parts: int, fine: I64, n_fine: int, y: I64, n_classes: int, lo: I64, hi: I64
) -> NDArray[np.int64]:
    """Class counts of every child range ``[lo[c], hi[c])`` of fine codes within each partition.

    Returns an array of shape ``(n_parts, len(lo), n_classes)``; one ``bincount`` plus prefix sums.
    """
    flat = (pid * n_fine + fine) * n_classes + y
    cnt = np.bincount(flat, minlength=n_parts * n_fine * n_classes).reshape(n_parts, n_fine, n_classes)
    cum = np.zeros((n_parts, n_fine + 1, n_classes), dtype=np.int64)
    np.cumsum(cnt, axis=1, out=cum[:, 1:, :])
    return cum[:, hi, :] - cum[:, lo, :]


def max_score(counts: NDArray[np.int64], owner: I64, n_candidates: int) -> I64:
    """Max (paper eq. 5) per candidate: sum over partitions and children of ``max_k count``.

    ``counts`` has shape ``(P, n_children, K)``; ``owner[c]`` is the candidate of child ``c``.
    """
    per_child = counts.max(axis=2).sum(axis=0)
    return np.bincount(owner, weights=per_child, minlength=n_candidates).round().astype(np.int64)


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


def split_segments(
    ticks: I64, y: I64, n_classes: int, lo: int, hi: int
) -> tuple[I64, I64, NDArray[np.int64], NDArray[np.int64]]:
    """Segments of split ticks ``s in {lo+1..hi-1}`` on which the split's class counts are constant.

    ``ticks`` (sorted ascending) and ``y`` are the records of the interval ``[lo, hi)``. A record
    goes left iff ``t < s``. Returns ``(seg_lo, seg_hi, left, right)``: inclusive segment
    bounds and the ``(m, K)`` class counts left and right of any ``s`` in each segment; empty
    segments are dropped (spec §3, "Split value").
    """
    total = np.bincount(y, minlength=n_classes).astype(np.int64)
    if ticks.size == 0:
        seg_lo = np.array([lo + 1], dtype=np.int64)
        seg_hi = np.array([hi - 1], dtype=np.int64)
        z = np.zeros((1, n_classes), dtype=np.int64)
        return seg_lo, seg_hi, z, z.copy()
    onehot = np.zeros((ticks.size, n_classes), dtype=np.int64)
    onehot[np.arange(ticks.size), y] = 1
    cum = np.cumsum(onehot, axis=0)
    last = np.flatnonzero(np.r_[ticks[1:] != ticks[:-1], True])  # end of each distinct-tick group
    b = ticks[last]
    left_after = cum[last]  # left counts once s > b_j
    seg_lo = np.r_[lo + 1, b + 1]
    seg_hi = np.r_[b, hi - 1]
    left = np.vstack([np.zeros((1, n_classes), dtype=np.int64), left_after])
    keep = seg_hi >= seg_lo
    left = left[keep]
    return seg_lo[keep].astype(np.int64), seg_hi[keep].astype(np.int64), left, total[None, :] - left


def expected_noise_rows(n_cells: int, scale: float) -> float:
    """Approximate count of noise rows from empty cells: ``N * p * (b + 0.5)``, ``p = P(noise >= 1)``."""
    p = 0.5 * math.exp(-0.5 / scale)
    return n_cells * p * (scale + 0.5)
