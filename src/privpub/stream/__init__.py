"""Real-time publishing of count streams under event-level differential privacy.

RTP (Fenwick trees of a fixed height), its adaptive variant HQ_RTP (tree heights chosen from
predicted query lengths), their matrix-mechanism versions RTP_MM and HQ_RTPMM, and the textbook
baselines BT (binary-tree counter, Chan-Shi-Song / Dwork et al.) and BTH (Honaker's
least-squares tree). Paper: Wu, Huang, Ge, Sun, Computer Science 46(9), 2019
(DOI 10.11896/j.issn.1002-137X.2019.09.013); spec: shared/specs/stream.md.

The publishers are stateful: ``pub = HQRTP(window=W, epsilon=1.0, rng=0)``, then
``pub.append(x)`` / ``pub.extend(items)``, ``pub.query(l, r)`` / ``pub.answer(queries)`` and
``pub.ledger`` (what the node noise charged: privacy by construction through
:class:`privpub.core.TreeNoise`). They keep no raw history beyond the open tree's partial sums;
``pub.state()`` / ``HQRTP.from_state(state, rng=...)`` persist and restore them
(``state(since=t0)``, ``split_state`` and ``join_state``: incrementally, O(new nodes) a write).
"""

from __future__ import annotations

from privpub.datasets import load_counts
from privpub.stream._base import NOISE_KINDS, StreamPublisher, retired_state_reason
from privpub.stream._binary import BT, BTH
from privpub.stream._fenwick import HQRTP, HQRTPMM, RTP, RTPMM
from privpub.stream._kernels import (
    brute_force_nodes,
    bt_gaussian_max_variance,
    decompose,
    expected_error,
    expected_error_bt,
    expected_error_bth,
    expected_error_mm,
    expected_error_mm_at,
    expected_nodes,
    expected_nodes_bt,
    max_height,
    mm_budgets,
    optimal_height,
    optimal_height_bt,
    optimal_height_bth,
    optimal_height_mm,
    optimal_height_mm_scalar,
    optimal_height_scalar,
    paper_eq16,
)
from privpub.stream._mf import (
    BLT,
    MFRange,
    MFSqrt,
    blt_max_variance,
    blt_parameters,
    mf_range_coefficients,
    mf_range_error,
    mf_sqrt_coefficients,
    mf_sqrt_max_variance,
)
from privpub.stream._persist import join_state, split_state, state_needs_from
from privpub.stream._predictors import EWMA, SMA
from privpub.stream._registry import PUBLISHERS, make_publisher
from privpub.stream._steps import step_counts, time_grid

__all__ = [
    "BLT",
    "BT",
    "BTH",
    "EWMA",
    "HQRTP",
    "HQRTPMM",
    "MFRange",
    "MFSqrt",
    "NOISE_KINDS",
    "PUBLISHERS",
    "RTP",
    "RTPMM",
    "SMA",
    "StreamPublisher",
    "blt_max_variance",
    "blt_parameters",
    "brute_force_nodes",
    "bt_gaussian_max_variance",
    "decompose",
    "expected_error",
    "expected_error_bt",
    "expected_error_bth",
    "expected_error_mm",
    "expected_error_mm_at",
    "expected_nodes",
    "expected_nodes_bt",
    "join_state",
    "load_counts",
    "make_publisher",
    "max_height",
    "mf_range_coefficients",
    "mf_range_error",
    "mf_sqrt_coefficients",
    "mf_sqrt_max_variance",
    "mm_budgets",
    "optimal_height",
    "optimal_height_bt",
    "optimal_height_bth",
    "optimal_height_mm",
    "optimal_height_mm_scalar",
    "optimal_height_scalar",
    "paper_eq16",
    "retired_state_reason",
    "split_state",
    "state_needs_from",
    "step_counts",
    "time_grid",
]
