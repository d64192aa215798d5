"""Differentially private histogram publishing: HPHP and its baselines.

Implements Li, Wang, Ni, Bao, "High-precision histogram publishing method based on differential
privacy" (Journal of Computer Applications 40(11), 2020) as corrected by privpub's histogram
spec: the default :class:`HPHP` is a private variant (the paper's version leaks the true sort
order and is available only as ``HPHP(variant="paper")``, flagged non-private), with the
baselines :class:`AHP` (Zhang et al., SDM 2014), :class:`LaplaceHistogram` (the paper's "DP")
and :class:`OptimalGrouping` (the paper's non-private reference).

Examples
--------
>>> from privpub.histogram import HPHP
>>> release = HPHP().publish([3, 0, 0, 41, 40, 2, 0, 39], epsilon=0.5, rng=1)
>>> release.counts.shape, round(release.ledger.total, 12)
((8,), 0.5)
"""

from __future__ import annotations

from privpub.core import ContributionSuggestion, suggest_max_contributions
from privpub.histogram._dawa import (
    DAWA,
    dawa_best_partition,
    dawa_partition_costs,
    dawa_sensitivity,
    greedy_h_weights,
    range_workload_gram,
    tree_least_squares,
)
from privpub.histogram._kernels import (
    ahp_clusters,
    dp_group,
    dp_group_deque,
    dp_group_fast,
    dp_group_quadratic,
    dp_group_wavefront,
    partition_cost,
    publish_groups,
    segment_cost,
)
from privpub.histogram._metrics import kld, lnmse
from privpub.histogram._publishers import (
    AHP,
    HPHP,
    PEAK_BYTES_PER_BIN,
    PUBLISHERS,
    HistogramPublisher,
    HistogramRelease,
    LaplaceHistogram,
    OptimalGrouping,
    UnitCounts,
    ahp_structure,
    counts_from_records,
    hphp_structure,
    noise_variance,
    noise_vector,
    peak_bytes,
    rank_structure,
    release_unit,
)

PUBLISHERS["dawa"] = lambda **kw: DAWA(**kw)

__all__ = [
    "AHP",
    "ContributionSuggestion",
    "DAWA",
    "HPHP",
    "HistogramPublisher",
    "HistogramRelease",
    "LaplaceHistogram",
    "OptimalGrouping",
    "PEAK_BYTES_PER_BIN",
    "PUBLISHERS",
    "UnitCounts",
    "ahp_clusters",
    "ahp_structure",
    "counts_from_records",
    "dawa_best_partition",
    "dawa_partition_costs",
    "dawa_sensitivity",
    "dp_group",
    "dp_group_deque",
    "dp_group_fast",
    "dp_group_quadratic",
    "dp_group_wavefront",
    "greedy_h_weights",
    "hphp_structure",
    "kld",
    "lnmse",
    "noise_variance",
    "noise_vector",
    "partition_cost",
    "peak_bytes",
    "publish_groups",
    "range_workload_gram",
    "rank_structure",
    "release_unit",
    "segment_cost",
    "suggest_max_contributions",
    "tree_least_squares",
]
