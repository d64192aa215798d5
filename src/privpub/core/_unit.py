"""The privacy unit: *whom* a release protects, as a value every charge carries.

A guarantee "epsilon-DP" means nothing until it says which pairs of datasets are neighbours.
privpub's central mechanisms are calibrated for **records** (add or remove one row). A table with
many rows per person protects such a person only at ``rows x epsilon``. A :class:`PrivacyUnit`
states the unit of a release; the sensitivities follow from it, and nobody writes one by hand:

* ``PrivacyUnit.record()``: one row added or removed (``relation="replace"``: one row changed);
* ``PrivacyUnit.person("user", max_contributions=k)``: all rows of one person (identified by the
  column ``user``) added or removed, each person holding at most ``k`` rows. The bound must hold:
  privpub enforces it by :func:`bound_contributions` (a seeded, per-person truncation) wherever
  the data carry the id;
* stream units: ``PrivacyUnit.event()`` (one event), ``PrivacyUnit.person_per_step("user", k)``
  (all of one person's events of one step, at most ``k``), ``PrivacyUnit.w_event(w)`` (any
  events within ``w`` consecutive steps, stated by the w-event publishers);
* local DP: ``PrivacyUnit.participant()`` (one enrolled participant's report replaced: the unit of
  a campaign with enrollment) and ``PrivacyUnit.submission()`` (one submission replaced: without
  enrollment, a person who submits many times is protected once per submission).

**How a person-level release is computed.** For a unit that groups ``k`` records, the release's
budget is spent by the record-level mechanisms at ``epsilon / k`` (``rho / k^2`` under zCDP), and
each charge is recorded at the unit's level (``k x`` the record-level epsilon, ``k^2 x`` the rho)
with the sensitivity ``k x`` the record-level one. By group privacy ([DR14]_ Thm 2.2; [BS16]_
Prop. 1.9 for zCDP) a mechanism that is ``epsilon/k``-DP for records is ``epsilon``-DP for any
change of ``k`` records, and removing a person whose rows were bounded to ``k`` removes at most
``k`` rows; for counts (L1 sensitivity adds over rows) the noise is exactly that of sensitivity
``k``. The record-level amount is :meth:`PrivacyUnit.record_amount`, its inverse
:meth:`PrivacyUnit.unit_amount`.

References
----------
.. [DR14] Dwork, Roth. The algorithmic foundations of differential privacy. 2014.
.. [BS16] Bun, Steinke. Concentrated differential privacy: simplifications, extensions, and
   lower bounds. TCC 2016, arXiv:1605.02065.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core._measures import PURE_DP, ZCDP, check_measure
from privpub.core._rng import RNGLike, as_generator
from privpub.core._validation import check_positive_int
from privpub.errors import ParameterError

__all__ = ["RELATIONS", "UNIT_KINDS", "PrivacyUnit", "bound_contributions", "check_privacy_unit",
           "contribution_key"]

#: the kinds of privacy unit
UNIT_KINDS = ("record", "person", "event", "person_per_step", "w_event", "participant", "submission")
#: neighbouring relations: add/remove one unit, or replace one unit's data
RELATIONS = ("add_remove", "replace")
_GROUPED = ("person", "person_per_step")  # units made of up to max_contributions records or events


@dataclass(frozen=True)
class PrivacyUnit:
    """Whom a release protects, and under which neighbouring relation (see the module).

    Build one with the class methods (:meth:`record`, :meth:`person`, :meth:`event`,
    :meth:`person_per_step`, :meth:`w_event`, :meth:`participant`, :meth:`submission`).

    Attributes
    ----------
    kind : str
        One of :data:`UNIT_KINDS`.
    relation : {"add_remove", "replace"}
        Neighbours differ by adding/removing one unit, or by replacing one unit's data.
    column : str or None
        The privacy-id column of a ``person`` / ``person_per_step`` unit.
    max_contributions : int or None
        The bound ``k`` on a person's rows (``person``) or events per step (``person_per_step``).
    window : int or None
        The window ``w`` of a ``w_event`` unit.

    Examples
    --------
    >>> from privpub import PrivacyUnit
    >>> unit = PrivacyUnit.person("user", max_contributions=40)
    >>> unit.factor, unit.record_amount(1.0)
    (40, 0.025)
    >>> print(unit)
    one person (all rows with the same 'user', at most 40 rows each), added or removed
    """

    kind: str = "record"
    relation: str = "add_remove"
    column: str | None = None
    max_contributions: int | None = None
    window: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in UNIT_KINDS:
            raise ParameterError(f"privacy unit kind must be one of {UNIT_KINDS}, got {self.kind!r}",
                                 param="privacy_unit")
        if self.relation not in RELATIONS:
            raise ParameterError(f"neighbouring relation must be one of {RELATIONS}, got {self.relation!r}",
                                 param="privacy_unit")
        if self.kind in _GROUPED:
            if not isinstance(self.column, str) or not self.column:
                raise ParameterError(f"a {self.kind} unit needs the privacy-id column name, got {self.column!r}",
                                     param="privacy_id")
            if self.max_contributions is None:
                raise ParameterError(f"a {self.kind} unit needs max_contributions (the bound k on each "
                                     "person's contributions)", param="max_contributions")
            object.__setattr__(self, "max_contributions",
                               check_positive_int(self.max_contributions, "max_contributions"))
        elif self.column is not None or self.max_contributions is not None:
            raise ParameterError(f"a {self.kind} unit takes no privacy-id column or max_contributions",
                                 param="privacy_unit")
        if self.kind == "w_event":
            object.__setattr__(self, "window", check_positive_int(self.window, "window"))
        elif self.window is not None:
            raise ParameterError(f"a {self.kind} unit takes no window", param="privacy_unit")

    # -- constructors ------------------------------------------------------------------------------
    @classmethod
    def record(cls, relation: str = "add_remove") -> PrivacyUnit:
        """One record (row), added or removed (``relation="replace"``: changed)."""
        return cls("record", relation)

    @classmethod
    def person(cls, column: str, max_contributions: int, relation: str = "add_remove") -> PrivacyUnit:
        """All rows of one person (same value in ``column``), at most ``max_contributions`` of them."""
        return cls("person", relation, column, max_contributions)

    @classmethod
    def event(cls) -> PrivacyUnit:
        """One event of a stream, added or removed."""
        return cls("event")

    @classmethod
    def person_per_step(cls, column: str, max_contributions: int) -> PrivacyUnit:
        """All of one person's events of one step (at most ``max_contributions``), added or removed."""
        return cls("person_per_step", "add_remove", column, max_contributions)

    @classmethod
    def w_event(cls, window: int) -> PrivacyUnit:
        """Any events within ``window`` consecutive steps of a stream."""
        return cls("w_event", "add_remove", window=window)

    @classmethod
    def participant(cls) -> PrivacyUnit:
        """Local DP: one enrolled participant's report, replaced (one report per participant)."""
        return cls("participant", "replace")

    @classmethod
    def submission(cls) -> PrivacyUnit:
        """Local DP without enrollment: one submission, replaced (a person who submits many is
        protected once per submission)."""
        return cls("submission", "replace")

    # -- arithmetic --------------------------------------------------------------------------------
    @property
    def factor(self) -> int:
        """How many records (events) one unit may change: ``max_contributions`` for grouped units, else 1."""
        return int(self.max_contributions) if self.kind in _GROUPED and self.max_contributions else 1

    def record_amount(self, amount: float, measure: str = PURE_DP) -> float:
        """What the record-level mechanisms may spend so that the release costs ``amount`` for this
        unit: ``amount / k`` (pure DP) or ``amount / k^2`` (zCDP, a rho), by group privacy."""
        k = self.factor
        return amount / (k * k if check_measure(measure) == ZCDP else k)

    def unit_amount(self, record_amount: float, measure: str = PURE_DP) -> float:
        """The inverse of :meth:`record_amount`: the unit-level cost of a record-level charge."""
        k = self.factor
        return record_amount * (k * k if check_measure(measure) == ZCDP else k)

    def same_protection(self, other: PrivacyUnit) -> bool:
        """Whether releases for ``self`` and ``other`` compose directly: they protect the same
        entity under the same relation (bounds ``k`` may differ: each release is already stated
        per person)."""
        return (self.kind, self.relation, self.column, self.window) == (
            other.kind, other.relation, other.column, other.window)

    # -- words and records -------------------------------------------------------------------------
    def describe(self) -> str:
        """The unit in words (what the CLI, reports and the service show)."""
        how = "added or removed" if self.relation == "add_remove" else "replaced"
        k = self.max_contributions
        if self.kind == "record":
            return f"one record (row), {how}"
        if self.kind == "person":
            rows = "row" if k == 1 else "rows"
            return f"one person (all rows with the same {self.column!r}, at most {k} {rows} each), {how}"
        if self.kind == "event":
            return f"one event, {how}"
        if self.kind == "person_per_step":
            return (f"one person's events of one step (same {self.column!r}, at most {k} per step), {how}")
        if self.kind == "w_event":
            return f"any events within {self.window} consecutive steps, {how}"
        if self.kind == "participant":
            return "one enrolled participant's report (one report per participant), replaced"
        return "one submission (a person who submits many times is protected once per submission), replaced"

    def __str__(self) -> str:
        return self.describe()

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready record (keys with ``None`` left out)."""
        out: dict[str, Any] = {"kind": self.kind, "relation": self.relation}
        for key in ("column", "max_contributions", "window"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> PrivacyUnit:
        """Inverse of :meth:`as_dict` (``None``, from records written before units existed: a record)."""
        if d is None:
            return cls.record()
        if not isinstance(d, dict):
            raise ParameterError(f"a privacy unit record must be a mapping, got {type(d).__name__}",
                                 param="privacy_unit")
        unknown = set(d) - {"kind", "relation", "column", "max_contributions", "window"}
        if unknown:
            raise ParameterError(f"unknown privacy unit fields {sorted(unknown)}", param="privacy_unit")
        return cls(**d)


#: the record unit (what every publisher protects unless told otherwise)
RECORD = PrivacyUnit.record()


def check_privacy_unit(unit: Any, default: PrivacyUnit = RECORD) -> PrivacyUnit:
    """Return ``unit`` as a :class:`PrivacyUnit` (``None``: ``default``; ``"record"``, ``"event"``,
    ``"participant"``, ``"submission"`` by name) or raise :class:`~privpub.errors.ParameterError`."""
    if unit is None:
        return default
    if isinstance(unit, PrivacyUnit):
        return unit
    if isinstance(unit, str) and unit in ("record", "event", "participant", "submission"):
        return getattr(PrivacyUnit, unit)()  # type: ignore[no-any-return]
    if isinstance(unit, dict):
        return PrivacyUnit.from_dict(unit)
    raise ParameterError(f"privacy_unit must be a privpub.PrivacyUnit, got {unit!r:.60}", param="privacy_unit")


def check_privacy_ids(privacy_ids: ArrayLike) -> Any:
    """``privacy_ids`` as a pandas Series of objects (one id per row), or raise
    :class:`~privpub.errors.ParameterError` (``param="privacy_ids"``) for a missing id."""
    import pandas as pd

    ids = pd.Series(np.asarray(privacy_ids, dtype=object) if not isinstance(privacy_ids, pd.Series)
                    else privacy_ids.to_numpy(dtype=object), dtype=object)
    if ids.ndim != 1:
        raise ParameterError("privacy_ids must be one id per row (1-D)", param="privacy_ids")
    if bool(ids.isna().any()):
        raise ParameterError("privacy_ids must not be missing (a row with no person cannot be bounded)",
                             param="privacy_ids")
    return ids


def contribution_key(rng: RNGLike = None) -> str:
    """A fresh 16-character key for :func:`bound_contributions`, drawn from ``rng``."""
    return as_generator(rng).bytes(8).hex()


def bound_contributions(
    privacy_ids: ArrayLike,
    max_contributions: int,
    *,
    rng: RNGLike = None,
    key: str | None = None,
    content: ArrayLike | None = None,
) -> NDArray[np.bool_]:
    """Keep at most ``max_contributions`` rows per person: a boolean mask over the rows.

    Each row gets a keyed hash (SipHash with a 16-character key, :func:`pandas.util.hash_array`)
    of its privacy id and ``content`` (the row's values that the release reads); each person keeps
    the ``k`` rows of smallest hash. So exactly ``min(rows, k)`` rows of every person are kept, a
    uniformly random subset for a random key, and **which rows of a person are kept depends only on
    that person's rows and the key**, never on other people's data: removing a person removes at
    most ``k`` kept rows and changes no other kept row, which is what the group-privacy argument
    of a person-level release needs (see the module). Rows with equal id and content hash equally;
    which of them is kept does not change any release computed from that content.

    Parameters
    ----------
    privacy_ids : array_like
        One id per row (any hashable scalars; missing ids are refused).
    max_contributions : int
        The public bound ``k`` (>= 1).
    rng : seed or Generator
        Draws the key when ``key`` is not given.
    key : str, optional
        A 16-character key (e.g. :func:`contribution_key`): the same key keeps the same rows (the
        Spark path and the pandas path agree for one key).
    content : array_like, optional
        The rows' values the release reads (one per row); without it rows are told apart only by
        their id and position is not used (all rows of a person hash alike and the first ``k`` in
        input order are kept).

    Returns
    -------
    ndarray of bool
        True for the rows kept.

    Examples
    --------
    >>> mask = bound_contributions(["a", "a", "a", "b"], 2, key="0123456789abcdef", content=[1, 2, 3, 1])
    >>> int(mask.sum()), int(mask[3])
    (3, 1)
    """
    import pandas as pd

    k = check_positive_int(max_contributions, "max_contributions")
    ids = check_privacy_ids(privacy_ids)
    if key is None:
        key = contribution_key(rng)
    if not isinstance(key, str) or len(key.encode("utf-8")) != 16:
        raise ParameterError("key must be a 16-character string (see contribution_key)", param="key")
    n = len(ids)
    if n == 0:
        return np.zeros(0, dtype=bool)
    frame = {"id": ids.astype(str)}
    if content is not None:
        vals = pd.Series(np.asarray(content, dtype=object)).astype(str)
        if len(vals) != n:
            raise ParameterError(f"content must have one value per row ({n}), got {len(vals)}", param="content")
        frame["content"] = vals
    hashes = pd.util.hash_pandas_object(pd.DataFrame(frame), index=False, hash_key=key).to_numpy()
    codes, _ = pd.factorize(ids)
    order = np.lexsort((hashes, codes))
    sorted_codes = codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_codes)) + 1]
    sizes = np.diff(np.r_[starts, n])
    rank = np.arange(n) - np.repeat(starts, sizes)
    mask = np.zeros(n, dtype=bool)
    mask[order[rank < k]] = True
    return mask

