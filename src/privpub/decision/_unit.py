"""Person-level decision releases: the privacy unit of a table and its contribution bounding.

A decision table often holds several rows per person (visits, transactions). With
``privacy_id="user", max_contributions=k`` the publishers protect *people*: every person's rows
are first bounded to at most ``k`` by :func:`privpub.core.bound_contributions` (a keyed hash of
the id and of the row's content as the release reads it, so which rows of a person are kept
depends only on that person's rows and the key), and the release is computed at record level
with ``epsilon / k`` (:attr:`privpub.core.Accountant.record_budget`), which by group privacy is
``epsilon``-DP for adding or removing one person. The id column itself is never published.

The content of a row is :func:`row_content`: a hash of its fine codes and class code (what the
scores and the leaf counts read), computed by the same function in pandas and, through
``applyInPandas``, in Spark, so the same key keeps the same rows on both paths.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privpub.core import PrivacyUnit, Schema, bound_contributions, check_privacy_unit
from privpub.errors import DomainError, ParameterError

__all__ = ["bound_rows", "check_id_column", "resolve_unit", "row_content"]

I64 = NDArray[np.int64]


def resolve_unit(
    privacy_unit: Any, privacy_id: Any, max_contributions: Any, schema: Schema
) -> PrivacyUnit:
    """The unit a decision release protects, from ``privacy_unit=`` and/or ``privacy_id=`` +
    ``max_contributions=`` (public parameters only; nothing is read from the data).

    The publishers protect one record added or removed (the default) or one person
    (``PrivacyUnit.person(column, k)``, add/remove) whose rows they bound to ``k``. Any other
    unit, a replace-one relation, or ``privacy_unit`` contradicting ``privacy_id`` /
    ``max_contributions`` is refused with :class:`~privpub.errors.ParameterError`.
    """
    if privacy_id is not None and (not isinstance(privacy_id, str) or not privacy_id):
        raise ParameterError(f"privacy_id must be the name of the table's privacy-id column, got {privacy_id!r}",
                             param="privacy_id")
    if (privacy_id is None) != (max_contributions is None) and privacy_unit is None:
        missing = "max_contributions (the bound k on each person's rows)" if privacy_id is not None \
            else "privacy_id (the column identifying each person)"
        raise ParameterError(f"privacy_id and max_contributions go together: give {missing} too",
                             param="max_contributions" if privacy_id is not None else "privacy_id")
    stated = None if privacy_id is None or max_contributions is None else PrivacyUnit.person(
        privacy_id, max_contributions)
    unit = check_privacy_unit(privacy_unit, default=stated or PrivacyUnit.record())
    if unit.kind not in ("record", "person"):
        raise ParameterError(f"the decision publishers protect one record or one person of a table, not {unit}",
                             param="privacy_unit")
    if unit.relation != "add_remove":
        raise ParameterError(f"the decision publishers are epsilon-DP for adding or removing one {unit.kind}; "
                             f"a replace-one unit ({unit}) costs 2 epsilon: state the add/remove unit",
                             param="privacy_unit")
    if privacy_unit is not None and (privacy_id is not None or max_contributions is not None):
        if unit.kind != "person" or (privacy_id is not None and privacy_id != unit.column) or (
                max_contributions is not None and max_contributions != unit.max_contributions):
            raise ParameterError(f"privacy_unit={unit} contradicts privacy_id={privacy_id!r}, "
                                 f"max_contributions={max_contributions!r}; give one of them", param="privacy_unit")
    if unit.kind == "person":
        assert unit.column is not None
        if unit.column in schema.names or unit.column == schema.class_name:
            raise ParameterError(f"privacy_id {unit.column!r} is an attribute of the schema: the id column must "
                                 "not be released (drop it from the schema)", param="privacy_id")
    return unit


def check_id_column(data: pd.DataFrame, column: str) -> None:
    """The privacy-id column exists and has no missing id (a row of nobody cannot be bounded)."""
    if column not in data.columns:
        raise DomainError(f"data has no privacy-id column {column!r} (privacy_id)", param="privacy_id")
    missing = int(data[column].isna().sum())
    if missing:
        raise DomainError(f"privacy-id column {column!r} has {missing} missing ids (a row with no person cannot "
                          "be bounded)", param="privacy_id")


def row_content(fine: I64, y: I64) -> NDArray[np.uint64]:
    """What the release reads of each row, as one deterministic 64-bit hash of its fine codes and
    class code (unkeyed; the keyed hash of :func:`~privpub.core.bound_contributions` is applied to it)."""
    frame = pd.DataFrame(np.column_stack([np.asarray(fine, dtype=np.int64).reshape(len(y), -1),
                                          np.asarray(y, dtype=np.int64)]))
    hashed: Any = pd.util.hash_pandas_object(frame, index=False).to_numpy(dtype=np.uint64)
    out: NDArray[np.uint64] = hashed
    return out


def bound_rows(fine: I64, y: I64, ids: Any, unit: PrivacyUnit, key: str) -> NDArray[np.bool_]:
    """The rows kept: at most ``unit.max_contributions`` per person (:func:`privpub.core.bound_contributions`)."""
    assert unit.max_contributions is not None
    return bound_contributions(ids, unit.max_contributions, key=key, content=row_content(fine, y))
