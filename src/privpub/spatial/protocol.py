"""The spatial collection protocol as public building blocks (paper 002; KDG-HT, UG).

A deployed KDG-HT campaign splits the algorithm between devices and an untrusted server:
the server publishes a grid or a partition, each device locates its point in it and randomises
the one-hot vector of its cell (OUE), and the server merges sparse intervals, partitions and
combines the noisy counts. :mod:`privpub.service` (the server) and :mod:`privpub.client` (the
devices) both speak this protocol through the names below, which are the same functions the
in-process publishers (:class:`privpub.spatial.KDGHT`, :class:`privpub.spatial.UniformGrid`)
run, so a deployed campaign and the library agree by construction.

Geometry: :func:`grid_edges`, :func:`interval_index`, :func:`leaf_lookup`,
:func:`locate_in_leaves`, :func:`check_points`. Client side: :func:`client_reports`,
:func:`oue_v1`. Server side: :func:`merge_sparse`, :func:`kd_partition`, :func:`kdg_height`,
:func:`mtr_split`, :func:`ci_combine`.
"""

from __future__ import annotations

from privpub.spatial._collect import check_points, client_reports, user_groups
from privpub.spatial._kernels import (
    Block,
    ci_combine,
    grid_edges,
    interval_index,
    kd_partition,
    kdg_height,
    leaf_lookup,
    locate_in_leaves,
    merge_sparse,
    mtr_split,
    oue_v1,
)

__all__ = [
    "Block",
    "check_points",
    "ci_combine",
    "client_reports",
    "grid_edges",
    "interval_index",
    "kd_partition",
    "kdg_height",
    "leaf_lookup",
    "locate_in_leaves",
    "merge_sparse",
    "mtr_split",
    "oue_v1",
    "user_groups",
]
