"""The one publisher shape shared by every part.

``Publisher(**model_parameters).publish(data, *, epsilon, rng=None, session=None) -> Release``:
the constructor stores and validates model parameters only (a frozen dataclass, failing fast);
``publish`` validates the data, opens :func:`~privpub.core.accounting` (which reserves
``epsilon`` in the ``session``, if any, before anything is drawn), lets the mechanisms charge
the accountant as they draw, and returns an immutable :class:`Release` that carries the result
and the sealed ledger: the record of what its mechanisms actually spent.

The parts differ in what ``publish`` needs besides the data (a spatial domain's ``bounds``, a
table's ``schema``), so each family declares its own abstract ``publish`` on a base of its own
(:class:`DataPublisher` for ``publish(data, *, epsilon, rng, session)``; ``SpatialPublisher`` in
:mod:`privpub.spatial`, ``TablePublisher`` in :mod:`privpub.decision`); :class:`Publisher` is
their common root. The stream publishers are stateful (``extend``/``answer``) and have a base
of their own, :class:`privpub.stream.StreamPublisher`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from privpub.core._budget import BudgetLedger
from privpub.core._rng import RNGLike
from privpub.errors import PrivpubError

if TYPE_CHECKING:
    from privpub.core._session import Session

__all__ = ["DataPublisher", "Publisher", "Release", "describe_data", "readonly"]


def describe_data(data: Any) -> str:
    """A coarse description of ``data`` for a session's record (its shape, never its content)."""
    shape = getattr(data, "shape", None)
    kind = type(data).__name__
    if shape is not None:
        return f"{kind} of shape {tuple(int(s) for s in shape)}"
    try:
        return f"{kind} of length {len(data)}"
    except TypeError:
        return kind


def readonly(arr: Any) -> NDArray[Any]:
    """Return ``arr`` as a numpy array whose write flag is off (releases are immutable).

    A copy is made, so the caller's array is untouched.
    """
    out: NDArray[Any] = np.array(arr, copy=True)
    out.flags.writeable = False
    return out


def _seal_array(arr: NDArray[Any]) -> NDArray[Any]:
    """A release's array, made read-only: in place when it owns its memory (the publishers hand
    over fresh arrays; no copy of a large result), else a read-only copy."""
    if arr.flags.owndata and arr.base is None:
        arr.flags.writeable = False
        return arr
    return readonly(arr)


@dataclass(frozen=True, kw_only=True)
class Release:
    """Base class of every release: immutable post-processing of one private run.

    Attributes
    ----------
    ledger : BudgetLedger
        The sealed record of the charges the release's mechanisms made as they drew;
        ``ledger.total <= epsilon`` (``inf`` for a non-private reference run).
    epsilon : float
        The budget the user asked for.
    method : str
        Name of the publisher that produced it.
    private : bool
        False only for explicitly non-private reproductions of a paper (never the default).
    params : dict
        The publisher's model parameters.
    """

    ledger: BudgetLedger
    epsilon: float
    method: str
    private: bool = True
    params: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.ledger, BudgetLedger):
            raise TypeError(f"ledger must be a BudgetLedger, got {type(self.ledger).__name__}")
        if not self.ledger.frozen:
            object.__setattr__(self, "ledger", self.ledger.freeze())
        if not math.isclose(float(self.epsilon), self.ledger.epsilon, rel_tol=1e-12):
            raise PrivpubError(
                f"a release's epsilon ({self.epsilon!r}) must be the budget its ledger was made under "
                f"({self.ledger.epsilon!r}); this is a bug in the publisher"
            )
        if self.private and not self.ledger.private:
            raise PrivpubError("a release marked private carries the ledger of a non-private run")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray) and value.flags.writeable:
                object.__setattr__(self, f.name, _seal_array(value))


class Publisher:
    """Root of the batch publishers: subclasses are frozen keyword-only dataclasses of model parameters.

    Each family declares ``publish`` on its own base (its inputs differ: see the module doc), so
    that every concrete ``publish`` is a true override of its family's signature.
    """


#: the data a :class:`DataPublisher` takes (an array, a DataFrame, ...)
DataT = TypeVar("DataT", contravariant=True)
#: the release a publisher returns
ReleaseT = TypeVar("ReleaseT", bound=Release, covariant=True)


class DataPublisher(Publisher, ABC, Generic[DataT, ReleaseT]):
    """A publisher whose ``publish`` needs the data and the budget only (``publish(data, *, epsilon, rng,
    session) -> release``), e.g. the histogram publishers (``DataPublisher[ArrayLike, HistogramRelease]``)."""

    @abstractmethod
    def publish(self, data: DataT, *, epsilon: float, rng: RNGLike = None,
                session: Session | None = None) -> ReleaseT:
        """Run the mechanism on ``data`` with total budget ``epsilon`` and return a release.

        Under a ``session``, the session must be able to pay ``epsilon`` or nothing is published
        (:class:`~privpub.errors.BudgetExceededError`).
        """
