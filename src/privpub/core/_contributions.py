"""Choosing the contribution bound ``k`` of a person-level release, privately.

A person-level release bounds every person to ``k`` rows (:func:`~privpub.core.bound_contributions`)
and pays ``epsilon / k`` per row: a small ``k`` drops the rows of heavy contributors (bias), a large
``k`` adds noise to everything. ``k`` must be public, so it cannot be read off the data for free.
:func:`suggest_max_contributions` spends a stated epsilon on a differentially private quantile of
the rows-per-person distribution (the exponential mechanism over the candidates ``1..upper``, with
the rank utility of Smith 2011 / the "DP quantile" of OpenDP and Tumult), and its release carries
the ledger of that spend.

References
----------
.. [S11] Smith. Privacy-preserving statistical estimation with optimal convergence rates. STOC 2011.
.. [MT07] McSherry, Talwar. Mechanism design via differential privacy. FOCS 2007.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core._accountant import accounting
from privpub.core._mechanisms import exponential_mechanism
from privpub.core._publisher import Release, describe_data
from privpub.core._rng import RNGLike, as_generator
from privpub.core._session import Session
from privpub.core._unit import PrivacyUnit, check_privacy_ids
from privpub.core._validation import check_epsilon, check_positive_int, check_probability
from privpub.errors import ParameterError

__all__ = ["MAX_UPPER", "ContributionSuggestion", "quantile_scores", "suggest_max_contributions"]

#: the largest ``upper`` (candidates are scored as one array)
MAX_UPPER = 10**6


@dataclass(frozen=True, kw_only=True)
class ContributionSuggestion(Release):
    """A private suggestion of the contribution bound ``k`` (see :func:`suggest_max_contributions`).

    Attributes
    ----------
    max_contributions : int
        The suggested ``k`` (in ``1..upper``).
    quantile : float
        The quantile of the rows-per-person distribution it estimates.
    upper : int
        The largest candidate.
    """

    max_contributions: int
    quantile: float
    upper: int


def quantile_scores(rows_per_person: ArrayLike, quantile: float, upper: int) -> NDArray[np.float64]:
    """The rank utility of each candidate ``k = 1..upper`` for the ``quantile`` of ``rows_per_person``.

    ``-distance(quantile * n, [#{rows <= k - 1}, #{rows <= k}])``: 0 for the ``k`` at which the
    cumulative count crosses ``quantile * n``, and minus the number of people between otherwise.
    Adding or removing one person moves both counts by at most 1 and ``quantile * n`` by
    ``quantile``, so every score moves by at most ``max(quantile, 1 - quantile) <= 1``.
    """
    rows = np.minimum(np.asarray(rows_per_person, dtype=np.int64), upper)
    at_most = np.cumsum(np.bincount(rows, minlength=upper + 1)).astype(np.float64)  # people with <= c rows
    target = quantile * rows.size
    lo, hi = at_most[:-1], at_most[1:]  # for k = 1..upper: #{<= k - 1}, #{<= k}
    return -np.maximum(0.0, np.maximum(lo - target, target - hi))


def suggest_max_contributions(
    privacy_ids: ArrayLike,
    *,
    epsilon: float,
    quantile: float = 0.9,
    upper: int = 100,
    rng: RNGLike = None,
    session: Session | None = None,
    column: str | None = None,
) -> ContributionSuggestion:
    """Suggest ``max_contributions``: a differentially private ``quantile`` of the rows per person.

    The exponential mechanism picks ``k`` in ``1..upper`` with the rank utility of
    :func:`quantile_scores` (0 where the share of people with at most ``k`` rows crosses
    ``quantile``, minus the number of people in between elsewhere) and a data-independent
    log-uniform base measure over the candidates (``P(k)`` also proportional to ``1 / k``: where
    no data tells candidates apart, smaller bounds are favoured).

    **Cost: ``epsilon``, charged to the active accountant and reserved in ``session``**, at the
    person level: adding or removing one person (with any number of rows) changes each utility
    by at most 1 (sensitivity 1 in rank), so the suggestion is ``epsilon``-DP for whole people.
    Its ledger states the unit ``PrivacyUnit.person(column, 1)``: the mechanism reads one value
    per person (their row count, clipped to ``upper``), so it composes in a session with
    person-level releases on the same ``column`` at any ``k``. Budget it beside the release
    (e.g. 0.1 of a session of 1.1 for a release at 1.0).

    Parameters
    ----------
    privacy_ids : array_like
        One privacy id per row of the table (missing ids are refused).
    epsilon : float
        The budget of the suggestion.
    quantile : float in (0, 1]
        Which quantile of the rows-per-person distribution (default 0.9: about 90% of the people
        keep all their rows).
    upper : int
        The largest candidate ``k`` (public; default 100). A person with more rows counts as
        ``upper``.
    rng : seed or Generator
        Randomness.
    session : Session, optional
        The budget session to reserve ``epsilon`` in.
    column : str, optional
        The privacy-id column the unit names (default ``privacy_ids.name`` for a named
        :class:`pandas.Series`, else ``"privacy_id"``).

    Returns
    -------
    ContributionSuggestion
        ``.max_contributions`` and the ledger of the spend.

    Examples
    --------
    >>> ids = [p for p in range(1000) for _ in range(1 + p % 10)]   # 1 to 10 rows per person
    >>> s = suggest_max_contributions(ids, epsilon=1.0, quantile=0.9, upper=50, rng=0)
    >>> s.max_contributions, s.ledger.total
    (9, 1.0)
    """

    eps = check_epsilon(epsilon)
    q = check_probability(quantile, "quantile", low=0.0, high=1.0, closed="right")
    hi = check_positive_int(upper, "upper")
    if hi > MAX_UPPER:
        raise ParameterError(f"upper must be at most {MAX_UPPER}, got {hi}", param="upper")
    name = column
    if name is None:
        series_name = getattr(privacy_ids, "name", None)
        name = series_name if isinstance(series_name, str) and series_name else "privacy_id"
    unit = PrivacyUnit.person(name, max_contributions=1)
    ids = check_privacy_ids(privacy_ids)
    if ids.size == 0:
        raise ParameterError("privacy_ids must be a non-empty column of ids (one per row)", param="privacy_ids")
    gen = as_generator(rng)
    with accounting(eps, method="suggest_max_contributions", session=session, data=describe_data(ids),
                    unit=unit) as acc:
        eps_q = acc.record_budget
        scores = quantile_scores(ids.value_counts(sort=False).to_numpy(dtype=np.int64), q, hi)
        # a data-independent log-uniform base measure over 1..upper (it favours small k where the data
        # cannot tell candidates apart, as the powers-of-two grids of other libraries do); adding it to
        # every score leaves the sensitivity at 1
        scores = scores - (2.0 / eps_q) * np.log(np.arange(1, hi + 1))
        with acc.step("quantile"):
            pick = exponential_mechanism(
                scores, epsilon=eps_q, sensitivity=1.0, rng=gen,
                note=f"rank utility of the {q:g}-quantile of rows per person over k = 1..{hi} (sensitivity 1 "
                     "per person added or removed)")
        params: dict[str, Any] = {"quantile": q, "upper": hi, "column": name}
        return ContributionSuggestion(max_contributions=int(pick) + 1, quantile=q, upper=hi, ledger=acc.seal(),
                                      epsilon=eps, method="suggest_max_contributions", params=params)
