"""KLD and LNMSE as the histogram spec defines them (sections 6.3 and 6.4).

Thin wrappers over :mod:`privpub.metrics`, whose definitions match the spec: KL(H || Ĥ) with
``q`` the clamped, normalised release mixed with ``lam`` uniform mass, and the log of the mean
squared error of all contiguous ranges of one length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numpy.typing import ArrayLike

from privpub import metrics

__all__ = ["kld", "lnmse"]


def kld(true: ArrayLike, published: ArrayLike, *, lam: float = 1e-4) -> float:
    """``KL(p || q)`` with ``p = H / sum(H)`` and ``q = (1 - lam) q0 + lam / n`` (spec section 6.3).

    ``q0`` is the published histogram clamped at 0 and normalised (uniform if it sums to 0).
    Bins with ``p_i = 0`` contribute nothing, so the value is at most ``ln(n / lam)``.

    Raises
    ------
    ValueError
        If ``sum(true) == 0``.

    Examples
    --------
    >>> round(kld([1, 1], [1, 3], lam=0.0), 6)
    0.143841
    """
    return float(metrics.kl_divergence(true, published, smoothing=lam))


def lnmse(true: ArrayLike, published: ArrayLike, range_length: int | Sequence[int]) -> Any:
    """``ln`` of the mean squared error of all ``n - r + 1`` ranges of length ``r`` (spec 6.4).

    ``published`` may be one release (n,) or T trials (T, n); the mean runs over trials and
    ranges (log of the mean; ``-inf`` when exact).

    Examples
    --------
    >>> lnmse([0, 0, 0, 0], [1, 0, 1, 0], 2)
    0.0
    """
    return metrics.lnmse(true, published, range_length)
