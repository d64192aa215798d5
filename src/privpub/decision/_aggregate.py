"""The aggregation seam of the decision publishers: the integer counts they ask of the data.

MAXGDDP and DiffGen never read records directly. They ask a :class:`DecisionCounts` for

* :meth:`~DecisionCounts.level_tables`: for every attribute ``a`` with candidates, the class
  counts per (leaf partition of the *other* specialised attributes, fine code of ``a``) under
  the current (public) cut -- what the Max scores of one MAXGDDP level are computed from;
* :meth:`~DecisionCounts.marginals`: the class counts per fine code of every attribute,
  pooled over the table -- all that DiffGen's selection and split scores need;
* :meth:`~DecisionCounts.cell_counts`: the true count of every non-empty (leaf partition,
  class) cell of the final cut -- what the leaf mechanism noises.

:class:`InMemoryCounts` answers from NumPy arrays of fine codes (one row per record);
``privpub.spark`` answers the same questions with one Spark job each, from a
``pyspark.sql.DataFrame``, returning pre-aggregated rows with their multiplicities. The private
algorithm (candidates, scores, mechanisms, budgets) is the same code for both, and the integers
it sees are identical, so the same ``rng`` gives the identical release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from privpub.core import PrivacyUnit, Schema, frame_backend, require_operation
from privpub.decision._kernels import class_counts_by_value
from privpub.decision._model import Attr, Cut, cell_ids, cut_partition_ids, encode_frame
from privpub.decision._unit import bound_rows, check_id_column
from privpub.errors import ParameterError

__all__ = ["DecisionCounts", "InMemoryCounts", "LevelTable", "open_counts", "partition_attributes"]

I64 = NDArray[np.int64]


@dataclass(frozen=True)
class LevelTable:
    """Rows ``(partition, fine code, class)`` with multiplicities (``weights`` None: one record each).

    ``pid`` are compact partition ids ``0..n_parts-1`` over the grouping attributes; the
    numbering is arbitrary (scores sum over partitions).
    """

    pid: I64
    n_parts: int
    fine: I64
    y: I64
    weights: I64 | None = None


def partition_attributes(cuts: list[Cut], a: int, pooled: bool) -> list[int]:
    """The attributes whose cut index forms the partitions that attribute ``a`` is scored in:
    every specialised attribute (cut of size > 1) except ``a`` (none when ``pooled``)."""
    if pooled:
        return []
    return [j for j, c in enumerate(cuts) if len(c.starts) > 1 and j != a]


class DecisionCounts(Protocol):
    """What MAXGDDP and DiffGen ask of the data (all answers are exact int64 counts)."""

    n_classes: int

    def level_tables(self, cuts: list[Cut], attributes: list[int], pooled: bool) -> dict[int, LevelTable]:
        """Per attribute in ``attributes``: class counts per (partition, fine code); see module doc."""
        ...

    def marginals(self) -> dict[int, tuple[I64, NDArray[np.int64]]]:
        """Per attribute: its distinct fine codes (ascending) and their ``(m, K)`` class counts."""
        ...

    def cell_counts(self, cuts: list[Cut]) -> tuple[I64, I64]:
        """Sorted ids (:func:`~privpub.decision._model.cell_ids`) of the non-empty cells and their counts."""
        ...


class InMemoryCounts:
    """:class:`DecisionCounts` over the fine codes ``(n, d)`` and class codes ``(n,)`` of records."""

    def __init__(self, fine: I64, y: I64, n_classes: int) -> None:
        self.fine = fine
        self.y = y
        self.n_classes = n_classes

    def _cut_index(self, cuts: list[Cut]) -> I64:
        return np.stack([c.index(self.fine[:, j]) for j, c in enumerate(cuts)], axis=1)

    def level_tables(self, cuts: list[Cut], attributes: list[int], pooled: bool) -> dict[int, LevelTable]:
        n = self.fine.shape[0]
        sizes = [len(c.starts) for c in cuts]
        cidx = self._cut_index(cuts)
        out: dict[int, LevelTable] = {}
        cache: dict[tuple[int, ...], tuple[I64, int]] = {}
        for a in attributes:
            group = tuple(partition_attributes(cuts, a, pooled))
            if group not in cache:
                if group:
                    keep = [j for j in range(len(cuts)) if j in group]
                    cache[group] = cut_partition_ids(cidx[:, keep], [sizes[j] for j in keep])
                else:
                    cache[group] = (np.zeros(n, dtype=np.int64), 1)
            pid, n_parts = cache[group]
            out[a] = LevelTable(pid, n_parts, self.fine[:, a], self.y)
        return out

    def marginals(self) -> dict[int, tuple[I64, NDArray[np.int64]]]:
        return {a: class_counts_by_value(self.fine[:, a], self.y, self.n_classes) for a in range(self.fine.shape[1])}

    def cell_counts(self, cuts: list[Cut]) -> tuple[I64, I64]:
        sizes = [len(c.starts) for c in cuts]
        ids = cell_ids(self._cut_index(cuts), self.y, [*sizes, self.n_classes])
        uniq, true = np.unique(ids, return_counts=True)
        return uniq.astype(np.int64), true.astype(np.int64)


def open_counts(attrs: tuple[Attr, ...], schema: Schema, data: Any, *, unit: PrivacyUnit | None = None,
                key: str | None = None) -> DecisionCounts:
    """Validate ``data`` against the public schema and return the backend that answers the counts.

    A ``pyspark.sql.DataFrame`` is validated and aggregated in Spark (``privpub[spark]``);
    anything else goes through :func:`~privpub.decision._model.encode_frame` (pandas). Both
    raise the same :class:`~privpub.errors.DomainError` on bad data, before anything is drawn.

    With a person ``unit`` (``PrivacyUnit.person(column, k)``) the rows are first bounded to at
    most ``k`` per value of ``column`` by :func:`privpub.core.bound_contributions` with ``key``
    and the content :func:`~privpub.decision._unit.row_content` (inside Spark for a Spark
    DataFrame: the same rows are kept for the same key); every count then reads the kept rows only.
    """
    k = len(schema.classes or ())
    person = unit is not None and unit.kind == "person"
    if person and key is None:
        raise ParameterError("a person-level release needs the key of its contribution bounding", param="key")
    backend = frame_backend(data)
    if backend is not None:  # e.g. a Spark DataFrame: aggregated where it lives (privpub.spark)
        op = require_operation(backend, "decision_counts")
        counts: DecisionCounts = op(attrs, schema, data, privacy_unit=unit, key=key) if person \
            else op(attrs, schema, data)
        return counts
    fine, y = encode_frame(attrs, schema, data, with_class=True)
    assert y is not None
    if person:
        assert unit is not None and unit.column is not None and key is not None
        check_id_column(data, unit.column)
        keep = bound_rows(fine, y, data[unit.column], unit, key)
        fine, y = fine[keep], y[keep]
    return InMemoryCounts(fine, y, k)
