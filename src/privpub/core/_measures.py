"""Privacy measures: pure epsilon-DP (the default) and rho-zero-concentrated DP, and the explicit
conversions between them.

A ledger, an accountant and a session each state one measure; charges compose within it
(epsilons add under pure DP, rhos add under zCDP [BS16]_; parallel composition on disjoint
records costs the costliest branch in both) and never across: an epsilon is never added to a
rho. Conversions are functions the caller applies on purpose:

* pure epsilon-DP implies ``epsilon^2 / 2``-zCDP ([BS16]_ Prop. 1.4): :func:`pure_dp_to_zcdp`;
* rho-zCDP implies ``(rho + 2 sqrt(rho ln(1 / delta)), delta)``-DP for every ``delta > 0``
  ([BS16]_ Prop. 1.3): :func:`zcdp_to_approx_dp`.

References
----------
.. [BS16] Bun, Steinke. Concentrated differential privacy: simplifications, extensions, and
   lower bounds. TCC 2016, arXiv:1605.02065.
"""

from __future__ import annotations

import math
from typing import Any

from privpub.core._validation import check_epsilon, check_probability
from privpub.errors import ParameterError

__all__ = ["MEASURES", "PURE_DP", "ZCDP", "check_measure", "measure_unit", "pure_dp_to_zcdp", "zcdp_to_approx_dp"]

PURE_DP = "pure-dp"
ZCDP = "zcdp"
#: the privacy measures an accountant, a ledger or a session may state
MEASURES = (PURE_DP, ZCDP)


def check_measure(measure: Any) -> str:
    """Return ``measure`` (``"pure-dp"`` or ``"zcdp"``) or raise :class:`ParameterError`."""
    if measure not in MEASURES:
        raise ParameterError(f"measure must be one of {MEASURES}, got {measure!r}", param="measure")
    return str(measure)


def measure_unit(measure: str) -> str:
    """The name of the measure's privacy parameter: ``"epsilon"`` or ``"rho"``."""
    return "rho" if measure == ZCDP else "epsilon"


def pure_dp_to_zcdp(epsilon: float) -> float:
    """The rho of an epsilon-DP mechanism: ``epsilon^2 / 2`` ([BS16]_ Prop. 1.4).

    Examples
    --------
    >>> pure_dp_to_zcdp(1.0)
    0.5
    """
    eps = check_epsilon(epsilon)
    return eps * eps / 2.0


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """The epsilon of ``(epsilon, delta)``-DP implied by rho-zCDP: ``rho + 2 sqrt(rho ln(1/delta))``.

    ([BS16]_ Prop. 1.3.) ``delta`` must be in (0, 1).

    Examples
    --------
    >>> round(zcdp_to_approx_dp(0.5, 1e-6), 4)
    5.7565
    """
    r = check_epsilon(rho, "rho")
    d = check_probability(delta, "delta")
    if not 0.0 < d < 1.0:
        raise ParameterError(f"delta must be in (0, 1), got {d}", param="delta")
    return r + 2.0 * math.sqrt(r * math.log(1.0 / d))
