"""The decision publishers' building blocks, public for backends and auditors (paper 003).

MAXGDDP and DiffGen (:mod:`privpub.decision`) run on these pieces; outer layers use them
through this module only:

* the data model: :class:`Attr` (an attribute's public fine grid or categories),
  :class:`Cut` (the current specialisation of one attribute), :func:`encode_frame` (records to
  fine codes, validated against the public schema);
* the aggregation seam: :class:`DecisionCounts` (the integer counts the publishers ask of the
  data), :class:`InMemoryCounts`, :class:`LevelTable`, :func:`open_counts`,
  :func:`partition_attributes`, :func:`row_content` (what contribution bounding hashes of a
  row, so a backend keeps the same rows), :func:`resolve_unit` (the privacy unit a release will
  protect, checked from public parameters); ``privpub.spark`` registers a backend that answers the same
  questions in Spark (:func:`privpub.core.register_frame_backend`);
* one MAXGDDP level's private step: :func:`candidates` and :func:`score_candidates` (the
  scores report-noisy-max selects from), audited by :mod:`privpub.audit`.
"""

from __future__ import annotations

from privpub.decision._aggregate import (
    DecisionCounts,
    InMemoryCounts,
    LevelTable,
    open_counts,
    partition_attributes,
)
from privpub.decision._maxgddp import candidates, score_candidates
from privpub.decision._model import Attr, Cut, encode_frame
from privpub.decision._unit import resolve_unit, row_content

__all__ = [
    "Attr",
    "Cut",
    "DecisionCounts",
    "InMemoryCounts",
    "LevelTable",
    "candidates",
    "encode_frame",
    "open_counts",
    "partition_attributes",
    "resolve_unit",
    "row_content",
    "score_candidates",
]
