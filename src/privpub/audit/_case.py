"""One audited private step (:class:`AuditCase`), shared by the suite and the case modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from privpub.audit._auditor import AuditResult, audit_epsilon
from privpub.core import RNGLike
from privpub.errors import ParameterError

__all__ = ["FULL_FACTOR", "TIERS", "AuditCase", "check_tier"]

TIERS = ("fast", "full")
#: trials of the full tier relative to the fast tier
FULL_FACTOR = 5


@dataclass(frozen=True)
class AuditCase:
    """One audited private step.

    Attributes
    ----------
    name : str
        ``"<part>.<step>"``.
    part : str
        ``"core"``, ``"ldp"`` or a part name.
    mechanism : callable
        ``mechanism(data, rng)`` (or ``mechanism(data, rng, n)`` when ``batch``).
    x, x_neighbour : object
        Worst-case neighbouring inputs.
    epsilon : float
        The epsilon the step declares.
    trials : int
        Runs per input in the fast tier (``FULL_FACTOR`` times more in the full tier).
    neighbours : str
        The neighbouring relation and why the pair is a worst case.
    control : callable or None
        The deliberately broken variant (same signature) that must be flagged.
    control_note : str
        What the control breaks.
    batch : bool
        Whether the mechanisms are batch mechanisms.
    statistic : callable or None
        Passed to :func:`audit_epsilon`.
    exact : callable or None
        Returns the exact epsilon of the step (small output spaces); checked to be ``<= epsilon``.
    exact_control : callable or None
        Returns the exact epsilon of the control (must exceed ``epsilon``).
    full_only : bool
        Run in the full tier only.
    """

    name: str
    part: str
    mechanism: Callable[..., Any]
    x: Any
    x_neighbour: Any
    epsilon: float
    trials: int
    neighbours: str
    control: Callable[..., Any] | None = None
    control_note: str = "epsilon doubled"
    batch: bool = False
    statistic: Callable[[Any], float] | None = None
    exact: Callable[[], float] | None = None
    exact_control: Callable[[], float] | None = None
    full_only: bool = False

    def n_trials(self, tier: str) -> int:
        return self.trials * (FULL_FACTOR if tier == "full" else 1)

    def audit(self, *, tier: str = "fast", rng: RNGLike = 0, control: bool = False) -> AuditResult:
        """Audit the mechanism (or, with ``control=True``, its broken variant)."""
        mech = self.control if control else self.mechanism
        if mech is None:
            raise ParameterError(f"case {self.name!r} has no negative control")
        return audit_epsilon(mech, self.x, self.x_neighbour, epsilon=self.epsilon,
                             trials=self.n_trials(check_tier(tier)), rng=rng, batch=self.batch,
                             statistic=self.statistic)


def check_tier(tier: str) -> str:
    if tier not in TIERS:
        raise ParameterError(f"tier must be one of {TIERS}, got {tier!r}", param="tier")
    return tier
