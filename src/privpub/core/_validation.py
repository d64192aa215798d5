"""Boundary validation: each checker returns the normalised value or raises a privpub error.

Messages follow one pattern: ``"<name> must <rule>, got <value>"``.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import sys
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.errors import DomainError, ParameterError, PrivacyWarning

#: integer inputs must stay within this magnitude (int64 with headroom for added noise)
INT_LIMIT = 2**62

#: epsilon above which a release is accepted (the definition allows any finite epsilon) but
#: warned about: e^30 is about 1.1e13, over a thousand times the world's population, so the
#: guarantee no longer stops an adversary whose prior on one person is "one in everyone"
#: (1 / 8e9, posterior odds up to 1300 : 1, i.e. 99.9%) from being certain; the discrete
#: Laplace noise is then 0 with probability 1 - 2e-13 (the exact counts). See docs/core.md.
MEANINGFUL_EPSILON = 30.0

__all__ = [
    "INT_LIMIT",
    "MEANINGFUL_EPSILON",
    "check_array",
    "check_bounds_2d",
    "check_int_values",
    "check_counts",
    "check_epsilon",
    "check_in_domain",
    "check_positive_int",
    "check_probability",
    "check_real",
    "warn_meaningless_epsilon",
]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_real(value: Any, name: str) -> float:
    """Return ``value`` as a finite float or raise :class:`ParameterError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a real number, got {_short(value)}", param=name)
    out = float(value)
    if not math.isfinite(out):
        raise ParameterError(f"{name} must be finite, got {out}", param=name)
    return out


def check_epsilon(epsilon: Any, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float after checking it is finite and > 0.

    Examples
    --------
    >>> check_epsilon(0.5)
    0.5
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ParameterError(f"{name} must be a finite number > 0, got {_short(epsilon)}", param=name)
    out = float(epsilon)
    if not math.isfinite(out) or out <= 0.0:
        raise ParameterError(f"{name} must be finite and > 0, got {out}", param=name)
    return out


def _outside_stacklevel() -> int:
    """The ``stacklevel`` (for a ``warnings.warn`` in the caller of this function) of the first
    frame outside privpub and contextlib: the user's line, however deep the publisher's call."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and (frame.f_code.co_filename.startswith(_PACKAGE_DIR)
                                 or frame.f_code.co_filename == contextlib.__file__):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_meaningless_epsilon(epsilon: float, what: str = "this release") -> None:
    """Warn (:class:`~privpub.errors.PrivacyWarning`) when ``epsilon`` exceeds :data:`MEANINGFUL_EPSILON`.

    Such an epsilon is allowed (it is finite, so the definition holds), but the guarantee no
    longer protects anyone. Called once per release by :func:`~privpub.core.accounting` (and
    once per stream publisher), on an epsilon that :func:`check_epsilon` already validated; the
    warning points at the user's line.
    """
    if epsilon > MEANINGFUL_EPSILON:
        warnings.warn(
            f"epsilon={epsilon:g} is above {MEANINGFUL_EPSILON:g}: {what} is epsilon-DP, but e^epsilon exceeds "
            f"10^13, so the guarantee no longer protects anyone (the output can be the exact data); "
            f"see docs/core.md, 'How large an epsilon protects'",
            PrivacyWarning,
            stacklevel=_outside_stacklevel(),
        )


def check_probability(
    value: Any,
    name: str,
    *,
    low: float = 0.0,
    high: float = 1.0,
    closed: str = "neither",
) -> float:
    """Return ``value`` as a float inside the interval from ``low`` to ``high``.

    ``closed`` is one of ``"neither"`` (the default, an open interval), ``"left"``, ``"right"``
    or ``"both"``.
    """
    out = check_real(value, name)
    left_ok = out >= low if closed in ("left", "both") else out > low
    right_ok = out <= high if closed in ("right", "both") else out < high
    if not (left_ok and right_ok):
        lb = "[" if closed in ("left", "both") else "("
        rb = "]" if closed in ("right", "both") else ")"
        raise ParameterError(f"{name} must be in {lb}{low}, {high}{rb}, got {out}", param=name)
    return out


def check_positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int >= ``minimum`` (integral floats such as 3.0 are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {_short(value)}", param=name)
    out = int(value)
    if out < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {out}", param=name)
    return out


def check_array(
    values: ArrayLike,
    name: str,
    *,
    ndim: int | None = None,
    finite: bool = True,
    allow_empty: bool = False,
    dtype: type | None = None,
) -> NDArray[Any]:
    """Return ``values`` as a numeric array after checking shape, emptiness and finiteness.

    Raises
    ------
    ParameterError
        On a non-numeric dtype, a wrong number of dimensions or an empty array.
    DomainError
        On NaN or infinite entries when ``finite`` is True.
    """
    try:
        arr = np.asarray(values) if dtype is None else np.asarray(values, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{name} must be a numeric array, got {_short(values)}", param=name) from exc
    if arr.dtype.kind not in "biuf":
        raise ParameterError(f"{name} must be a numeric array, got dtype {arr.dtype}", param=name)
    if ndim is not None and arr.ndim != ndim:
        raise ParameterError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}", param=name)
    if not allow_empty and arr.size == 0:
        raise ParameterError(f"{name} must not be empty, got shape {arr.shape}", param=name)
    if finite and arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        raise DomainError(f"{name} must be finite, got {bad} NaN or infinite entries", param=name)
    return arr


def check_int_values(arr: NDArray[Any], name: str) -> NDArray[np.int64]:
    """Convert an already checked numeric array of integral values to int64, refusing fractions
    and magnitudes beyond ``INT_LIMIT`` (which an int64 cast would silently corrupt)."""
    if arr.dtype.kind == "f":
        if not np.all(arr == np.round(arr)):
            bad = arr[arr != np.round(arr)].flat[0]
            raise DomainError(f"{name} must hold integers, got non-integral values such as {bad}", param=name)
        if arr.size and np.max(np.abs(arr)) > INT_LIMIT:
            raise DomainError(f"{name} must lie within +-2**62, got magnitude {np.max(np.abs(arr)):g}", param=name)
    elif arr.dtype.kind == "u" and arr.size and int(arr.max()) > INT_LIMIT:
        raise DomainError(f"{name} must lie within +-2**62, got {int(arr.max())}", param=name)
    return arr.astype(np.int64, copy=False)


def check_counts(counts: ArrayLike, name: str = "counts", *, ndim: int | None = 1) -> NDArray[np.int64]:
    """Return ``counts`` as an int64 array of non-negative integers.

    Floats are accepted only when every entry is integral (``3.0``); ``3.5``, negative entries,
    NaN and infinities raise :class:`DomainError`.
    """
    arr = check_array(counts, name, ndim=ndim)
    ints = check_int_values(arr, name)
    if ints.size and ints.min() < 0:
        raise DomainError(f"{name} must be non-negative, got minimum {ints.min()}", param=name)
    return ints


def check_in_domain(values: ArrayLike, name: str, size: int) -> NDArray[np.int64]:
    """Return ``values`` as int64 codes after checking each lies in ``{0, ..., size - 1}``."""
    arr = check_array(values, name, allow_empty=False)
    if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
        raise DomainError(f"{name} must hold integer codes in [0, {size - 1}], got non-integral values", param=name)
    if arr.dtype.kind == "f" and arr.size and np.max(np.abs(arr)) > INT_LIMIT:
        raise DomainError(f"{name} must hold integer codes in [0, {size - 1}] (the declared domain), "
                          f"got {arr[np.abs(arr) > INT_LIMIT].flat[0]:g}", param=name)
    codes = check_int_values(arr, name) if arr.dtype.kind != "f" else arr.astype(np.int64)
    if codes.size and (codes.min() < 0 or codes.max() >= size):
        bad = codes[(codes < 0) | (codes >= size)].flat[0]
        raise DomainError(
            f"{name} must hold integer codes in [0, {size - 1}] (the declared domain), got {bad}"
        , param=name)
    return codes


def check_bounds_2d(bounds: Any, name: str = "bounds") -> tuple[float, float, float, float]:
    """Validate a public 2-D box ``(x0, y0, x1, y1)``: four finite numbers with ``x1 > x0`` and
    ``y1 > y0``. The box is public knowledge, fixed in advance, never taken from the data."""
    if bounds is None:
        raise ParameterError(
            f"{name} must be given as (x0, y0, x1, y1): the domain is public and fixed in advance, "
            "never taken from the data, got None"
        , param=name)
    if isinstance(bounds, str | bytes) or not hasattr(bounds, "__iter__"):
        raise ParameterError(f"{name} must be a sequence (x0, y0, x1, y1), got {bounds!r}", param=name)
    vals = [check_real(b, name) for b in bounds]
    if len(vals) != 4:
        raise ParameterError(f"{name} must have 4 numbers (x0, y0, x1, y1), got {len(vals)}", param=name)
    x0, y0, x1, y1 = vals
    if not (x1 > x0 and y1 > y0):
        raise ParameterError(
            f"{name} must satisfy x1 > x0 and y1 > y0 (a non-degenerate box), got {tuple(vals)}"
        , param=name)
    return (x0, y0, x1, y1)

