"""The one publisher shape shared by every part.

``Publisher(**model_parameters).publish(data, *, epsilon, rng=None) -> Release``: the
constructor stores and validates model parameters only (a frozen dataclass, failing fast);
``publish`` touches the data, spends exactly ``epsilon`` through a :class:`BudgetLedger` and
returns an immutable :class:`Release` that carries the result and the frozen ledger.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from privpub.core._budget import BudgetLedger
from privpub.core._rng import RNGLike

__all__ = ["Publisher", "Release", "readonly"]


def readonly(arr: Any) -> Any:
    """Return ``arr`` as a numpy array whose write flag is off (releases are immutable)."""
    out = np.array(arr, copy=True)
    out.flags.writeable = False
    return out


@dataclass(frozen=True, kw_only=True)
class Release:
    """Base class of every release: immutable post-processing of one private run.

    Attributes
    ----------
    ledger : BudgetLedger
        The frozen ledger; ``ledger.total`` equals ``epsilon``.
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
        if not self.ledger.frozen:
            object.__setattr__(self, "ledger", self.ledger.freeze())
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray) and value.flags.writeable:
                object.__setattr__(self, f.name, readonly(value))


class Publisher(ABC):
    """Abstract publisher: subclasses are frozen keyword-only dataclasses of model parameters."""

    @abstractmethod
    def publish(self, data: Any, *, epsilon: float, rng: RNGLike = None) -> Release:
        """Run the mechanism on ``data`` with total budget ``epsilon`` and return a release."""
