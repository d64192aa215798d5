"""Central DP mechanisms: Laplace, discrete Laplace, discrete Gaussian (rho-zCDP), exponential
mechanism, report-noisy-max.

References
----------
.. [DMNS06] Dwork, McSherry, Nissim, Smith. Calibrating noise to sensitivity in private data
   analysis. TCC 2006.
.. [GRS12] Ghosh, Roughgarden, Sundararajan. Universally utility-maximizing privacy mechanisms.
   SIAM J. Comput. 2012 (the two-sided geometric mechanism).
.. [CKS20] Canonne, Kamath, Steinke. The discrete Gaussian for differential privacy. NeurIPS
   2020, arXiv:2004.00010 (exact sampling of Bernoulli(exp(-gamma)) and discrete Laplace).
.. [MT07] McSherry, Talwar. Mechanism design via differential privacy. FOCS 2007.
.. [DR14] Dwork, Roth. The algorithmic foundations of differential privacy. 2014, Sec. 3.3-3.4.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core._accountant import Accountant, charge
from privpub.core._memory import check_allocation
from privpub.core._rng import RNGLike, as_generator
from privpub.core._validation import INT_LIMIT, check_array, check_epsilon, check_int_values, check_real
from privpub.errors import DomainError, ParameterError

if TYPE_CHECKING:
    from privpub.core._dgauss import GaussianScale

__all__ = [
    "FLOAT_EXACT_LIMIT",
    "LAPLACE_GRID_BITS",
    "add_int_noise",
    "check_float_exact",
    "discrete_gaussian",
    "discrete_gaussian_noise",
    "discrete_gaussian_pmf",
    "discrete_gaussian_sigma2",
    "discrete_gaussian_variance",
    "discrete_laplace",
    "discrete_laplace_noise",
    "discrete_laplace_pmf",
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "exponential_mechanism_zcdp",
    "laplace",
    "laplace_grid",
    "laplace_noise",
    "rational_scale",
    "report_noisy_max",
]

_DEN_LIMIT = 1 << 30


def _check_sensitivity(sensitivity: Any) -> float:
    out = check_real(sensitivity, "sensitivity")
    if out <= 0:
        raise ParameterError(f"sensitivity must be > 0, got {out}", param="sensitivity")
    return out


#: largest noise scale sensitivity / epsilon the samplers accept
MAX_SCALE = 2.0**52
#: largest magnitude a real value may have for float noise to be added exactly enough (2**52:
#: below it, float64 has a resolution of at most 1, so unit noise is not rounded away)
FLOAT_EXACT_LIMIT = 2.0**52


def check_float_exact(values: NDArray[Any], name: str = "values") -> None:
    """Refuse values too large for float64 noise (rounding would erase it; the issue of 2**60 counts)."""
    if values.size and float(np.max(np.abs(values))) > FLOAT_EXACT_LIMIT:
        raise DomainError(
            f"{name} must be at most 2**52 in magnitude for floating-point noise (float64 rounding would "
            f"erase the noise), got {float(np.max(np.abs(values))):.6g}; use integer counts with "
            "discrete Laplace noise (the default) for larger counts"
        , param=name)


def _check_scale(epsilon: float, sensitivity: float) -> float:
    """``sensitivity / epsilon`` after checking it is a usable noise scale (and its inverse too)."""
    scale = sensitivity / epsilon
    if not math.isfinite(scale) or scale > MAX_SCALE or not math.isfinite(epsilon / sensitivity):
        raise ParameterError(
            f"sensitivity / epsilon must be a noise scale in (0, 2**52] with a finite inverse, got "
            f"sensitivity={sensitivity:g}, epsilon={epsilon:g}"
        )
    return scale


def _check_shape(shape: Any) -> tuple[int, ...]:
    shp = (shape,) if not isinstance(shape, tuple | list) else tuple(shape)
    for dim in shp:
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or int(dim) < 0:
            raise ParameterError(f"shape must be a non-negative int or a tuple of them, got {shape!r}", param="shape")
    return tuple(int(d) for d in shp)


# ---------------------------------------------------------------------------------------------
# Laplace, exact: discrete Laplace on a dyadic grid
# ---------------------------------------------------------------------------------------------
#: the grid of the exact Laplace noise lies this many binary digits below the noise scale
#: (``grid = 2**(floor(log2(scale)) - LAPLACE_GRID_BITS)``, at most 1): the noise takes between
#: 2**20 and 2**21 grid steps per unit of scale, so it is continuous Laplace for every purpose but
#: exactness (variance ``2 scale^2 - grid^2 / 6``)
LAPLACE_GRID_BITS = 20
#: largest noise scale in grid steps: draws then stay below 2**53 steps (exact in float64) with
#: probability above ``1 - 2 exp(-64)``; a larger draw raises rather than being rounded
_MAX_GRID_STEPS = 2.0**47


def _pow2_floor(x: float) -> float:
    """The largest power of two at most ``x > 0`` (exact)."""
    _, expo = math.frexp(x)  # x = mant 2**expo, 0.5 <= mant < 1
    return math.ldexp(1.0, expo - 1)


def laplace_grid(epsilon: float, sensitivity: float = 1.0, *, changed: int = 0) -> float:
    """The dyadic grid ``2**-k`` on which :func:`laplace_noise` and :func:`laplace` draw exact noise.

    Parameters
    ----------
    epsilon, sensitivity : float
        The mechanism's parameters (noise scale ``b = sensitivity / epsilon``).
    changed : int
        0 (default): the grid of :func:`laplace_noise`, ``2**(floor(log2 b) - 20)``, at most 1 (so
        that integers lie on it). ``m > 0``: the grid :func:`laplace` rounds real-valued queries
        to when at most ``m`` coordinates differ between neighbours,
        ``2**(floor(log2(min(b, sensitivity) / m)) - 20)``, at most 1: the rounding adds at most
        ``m * grid <= 2**-20 sensitivity`` to the L1 sensitivity.

    Returns
    -------
    float
        A power of two, at most 1. Depends on the parameters only, never on the data.

    Examples
    --------
    >>> laplace_grid(1.0) == 2.0**-20, laplace_grid(1e-9)
    (True, 1.0)
    """
    eps = check_epsilon(epsilon)
    sens = _check_sensitivity(sensitivity)
    scale = _check_scale(eps, sens)
    m = int(changed)
    if isinstance(changed, bool) or m != changed or m < 0:
        raise ParameterError(f"changed must be an int >= 0, got {changed!r}", param="changed")
    base = scale if m == 0 else min(scale, sens) / m
    return min(1.0, math.ldexp(_pow2_floor(base), -LAPLACE_GRID_BITS))


def _grid_scale(eps: float, units: float, what: str) -> tuple[int, int]:
    """``rational_scale(eps, units)`` for a noise of ``units / eps`` grid steps, refusing more than 2**47."""
    steps = units / eps
    if not math.isfinite(steps) or steps > _MAX_GRID_STEPS:
        raise ParameterError(
            f"{what} needs a noise of {steps:.3g} grid steps, more than 2**47 (exact Laplace noise on its grid "
            "would no longer fit float64); use a larger epsilon or fewer coordinates (changed=), or "
            "integer values with discrete Laplace noise", param="epsilon")
    return rational_scale(eps, units)


def _grid_draws(size: int, t: int, s: int, grid: float, gen: np.random.Generator) -> NDArray[np.float64]:
    """``grid * Z`` for ``size`` exact discrete Laplace draws ``Z`` of scale ``t / s`` (exact floats)."""
    z = _discrete_laplace_exact(size, t, s, gen)
    if z.size and int(np.max(np.abs(z))) >= (1 << 53):  # probability below 2 exp(-64): never rounded
        raise DomainError("a Laplace draw exceeded 2**53 grid steps (probability below 1e-27)")
    out: NDArray[np.float64] = z.astype(np.float64)
    out *= grid  # a power of two: exact
    return out


def laplace_noise(
    shape: int | tuple[int, ...],
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> NDArray[np.float64]:
    """Exact Laplace noise of scale ``sensitivity / epsilon``: discrete Laplace on a dyadic grid.

    The noise is ``g Z`` with ``g = laplace_grid(epsilon, sensitivity)`` (a power of two, at most
    1, about ``2**-20`` of the scale) and ``Z`` the exact discrete Laplace of scale
    ``sensitivity / (epsilon g)`` in grid steps (:func:`rational_scale`, never below it; sampled
    with integer arithmetic, [CKS20]_). Its variance is ``2 b^2 - g^2 / 6`` for ``b = sensitivity /
    epsilon``: continuous Laplace to about 12 digits.

    Parameters
    ----------
    shape : int or tuple of int
        Shape of the noise.
    epsilon : float
        Privacy parameter, finite and > 0.
    sensitivity : float
        L1 sensitivity of the query the noise is added to.
    rng : int, Generator or None
        Randomness (same seed, same noise).
    accountant : Accountant, optional
        The accountant to charge (default: the active one, if any).
    note : str
        Recorded with the charge.

    Returns
    -------
    numpy.ndarray of float64
        Multiples of the grid ``g``, exactly representable.

    Notes
    -----
    **Privacy:** epsilon-DP, *exactly* (on a real computer, not only in real arithmetic), when
    added to a query whose values lie on the grid ``g`` and whose L1 sensitivity is
    ``sensitivity``: integer counts always do (``g <= 1`` is a power of two). The neighbours'
    query values then differ by a vector of grid steps of L1 norm at most ``sensitivity / g``,
    and the discrete Laplace of scale ``sensitivity / (epsilon g)`` is epsilon-DP for it
    [GRS12]_; the float64 sum ``x + g Z`` is the correctly rounded value of the exact sum, a
    function of that sum alone (post-processing). This closes the attack of [Mir12]_ on the
    low-order bits of floating-point Laplace. Real-valued queries must be rounded to a grid
    first: :func:`laplace` does it and accounts for the rounding. Charges ``accountant`` (or the
    active one) ``epsilon`` (mechanism ``"laplace"``, with ``sensitivity``) before drawing.

    References
    ----------
    .. [Mir12] Mironov. On significance of the least significant bits for differential privacy.
       CCS 2012.

    Examples
    --------
    >>> z = laplace_noise(3, epsilon=1.0, rng=0)
    >>> bool(np.all(z * 2**20 == np.round(z * 2**20)))   # on the grid 2**-20
    True
    """
    eps = check_epsilon(epsilon)
    sens = _check_sensitivity(sensitivity)
    grid = laplace_grid(eps, sens)
    t, s = _grid_scale(eps, sens / grid, "laplace_noise")
    shp = _check_shape(shape)
    check_allocation(math.prod(shp), 8, "the Laplace noise", "shape", unit="draws")
    charge("laplace", eps, sensitivity=sens, note=note, accountant=accountant)
    out = _grid_draws(math.prod(shp), t, s, grid, as_generator(rng))
    return out if shp == out.shape else out.reshape(shp)


@overload
def laplace(values: float, *, epsilon: float, sensitivity: float = ..., rng: RNGLike = ...,
            accountant: Accountant | None = ..., note: str = ..., changed: int | None = ...) -> float: ...
@overload
def laplace(
    values: ArrayLike, *, epsilon: float, sensitivity: float = ..., rng: RNGLike = ...,
    accountant: Accountant | None = ..., note: str = ..., changed: int | None = ...
) -> NDArray[np.float64] | float: ...
def laplace(
    values: ArrayLike,
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
    changed: int | None = None,
) -> NDArray[np.float64] | float:
    """The Laplace mechanism, exact: Laplace noise of scale ``sensitivity / epsilon`` on a dyadic grid.

    Parameters
    ----------
    values : float or array_like
        The true query answers (any shape). Integer arrays (dtype int, uint or bool) are used
        as they are; real (float) values are first rounded to the grid (see Notes).
    epsilon : float
        Privacy parameter, finite and > 0.
    sensitivity : float
        L1 sensitivity of the whole vector ``values`` under the caller's neighbouring relation.
    rng : int, Generator or None
        Randomness (see :func:`privpub.core.as_generator`).
    accountant : Accountant, optional
        The accountant to charge (default: the active one, if any).
    note : str
        Recorded with the charge.
    changed : int, optional
        For real values: the largest number of coordinates of ``values`` that differ between
        neighbours (default: all of them, ``values.size``, always safe). Ignored for integers.

    Returns
    -------
    float or numpy.ndarray
        ``values`` plus exact noise; a scalar for scalar input.

    Raises
    ------
    DomainError
        If a value exceeds 2**52 in magnitude.
    ParameterError
        If the noise would need more than 2**47 grid steps (``changed`` times ``1 / epsilon``
        beyond about 2**27 for real values).
    BudgetExceededError
        If the charge would take the accountant over its budget (nothing is drawn).

    Notes
    -----
    **Privacy:** epsilon-DP for any neighbouring relation under which the vector ``values`` has
    L1 sensitivity at most ``sensitivity`` [DMNS06]_, exactly on a real computer:

    * integer values lie on the grid ``g = laplace_grid(epsilon, sensitivity)`` and get the noise
      of :func:`laplace_noise` (see there);
    * real values are rounded to the grid ``g = laplace_grid(epsilon, sensitivity, changed=m)``
      (``x -> g rint(x / g)``, exact in float64). Rounding moves each coordinate by at most
      ``g / 2``, so the rounded vectors of neighbours differ by at most ``sensitivity + m g`` in
      L1 norm (``m`` coordinates differ, each rounding adds at most one step); the noise is the
      discrete Laplace of ``(sensitivity / g + m) / epsilon`` steps, at most ``2**-20`` more than
      ``sensitivity / epsilon``.

    The release is ``fl(x + g Z)``, the correctly rounded exact sum: post-processing of an exact
    mechanism, so the low-order-bit attack of [Mir12]_ does not apply. Charges ``epsilon`` (with
    ``sensitivity``) to the accountant before drawing.

    Examples
    --------
    >>> round(laplace(10.0, epsilon=1.0, rng=0), 3)
    8.997
    """
    arr = check_array(values, "values", allow_empty=True)
    check_float_exact(arr)
    eps = check_epsilon(epsilon)
    sens = _check_sensitivity(sensitivity)
    if arr.dtype.kind in "iub":
        grid = laplace_grid(eps, sens)
        units = sens / grid
        x = arr.astype(np.float64)
    else:
        m = max(arr.size, 1) if changed is None else changed
        if isinstance(m, bool) or not isinstance(m, int | np.integer) or int(m) < 1:
            raise ParameterError(f"changed must be an int >= 1, got {changed!r}", param="changed")
        m = min(int(m), max(arr.size, 1))
        grid = laplace_grid(eps, sens, changed=m)
        units = sens / grid + m
        x = np.rint(arr.astype(np.float64) / grid) * grid  # exact: grid is a power of two
    t, s = _grid_scale(eps, units, "laplace")
    check_allocation(arr.size, 8, "the Laplace noise", "values", unit="draws")
    charge("laplace", eps, sensitivity=sens, note=note, accountant=accountant)
    noisy = x + _grid_draws(arr.size, t, s, grid, as_generator(rng)).reshape(arr.shape)
    return float(noisy) if noisy.ndim == 0 else noisy


# ---------------------------------------------------------------------------------------------
# Discrete Laplace (two-sided geometric), sampled exactly
# ---------------------------------------------------------------------------------------------
def rational_scale(epsilon: float, sensitivity: float = 1.0) -> tuple[int, int]:
    """Return integers ``(t, s)`` with ``t / s >= sensitivity / epsilon`` (never less noise).

    The decimal reading of the arguments is used when it gives at least the exact float ratio
    (``epsilon=0.1`` gives scale 10/1); otherwise the exact float ratio, rounded *up* to a
    denominator of at most 2**30. Rounding up only adds noise, so the epsilon-DP guarantee holds
    for the requested epsilon.
    """
    eps = check_epsilon(epsilon)
    sens = _check_sensitivity(sensitivity)
    _check_scale(eps, sens)
    exact = Fraction(sens) / Fraction(eps)
    decimal = Fraction(repr(sens)) / Fraction(repr(eps))
    for cand in (decimal, exact):
        if cand >= exact and cand.denominator <= _DEN_LIMIT and cand.numerator < (1 << 52):
            return cand.numerator, cand.denominator
    num = math.ceil(exact * _DEN_LIMIT)
    up = Fraction(num, _DEN_LIMIT)
    if up.numerator >= (1 << 52):  # enormous scale: integer scale rounded up
        return math.ceil(exact), 1
    return up.numerator, up.denominator


def _discrete_laplace_exact(size: int, t: int, s: int, gen: np.random.Generator) -> NDArray[np.int64]:
    """``size`` draws of the discrete Laplace with scale ``t / s`` ([CKS20]_, compiled; see
    :mod:`privpub.core._dlap`)."""
    from privpub.core._dlap import discrete_laplace_exact  # local: loaded with the first draw

    out = discrete_laplace_exact(size, t, s, gen)
    return out


def _bernoulli_exp_unit(num: NDArray[np.int64], den: int, gen: np.random.Generator) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(-num/den)) for integers ``0 <= num < den`` ([CKS20]_ Alg. 1, compiled)."""
    from privpub.core._dlap import bernoulli_exp_exact

    return bernoulli_exp_exact(num, den, gen)


def _geometric_exp1(n: int, gen: np.random.Generator) -> NDArray[np.int64]:
    """Number of successes of Bernoulli(exp(-1)) before the first failure, exactly (compiled)."""
    from privpub.core._dlap import geometric_exact

    return geometric_exact(n, 1, 1, gen)


def discrete_laplace_noise(
    shape: int | tuple[int, ...],
    *,
    epsilon: float,
    sensitivity: float = 1,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> NDArray[np.int64]:
    """Exact discrete Laplace noise: ``P[Z = z]`` proportional to ``exp(-|z| epsilon / sensitivity)``.

    Sampled with integer arithmetic only ([CKS20]_), so the distribution has no floating-point
    holes. The scale is :func:`rational_scale` (never below ``sensitivity / epsilon``).

    **Privacy:** the caller adds it to an integer vector of L1 sensitivity ``sensitivity``; that
    is epsilon-DP. Charges ``accountant`` (or the active one) ``epsilon`` before drawing.
    """
    t, s = rational_scale(epsilon, sensitivity)
    shp = _check_shape(shape)
    size = math.prod(shp)
    # the exact sampler's peak is its int64 output (8.0 bytes per draw, tracemalloc at 10^6 and 4 10^6)
    check_allocation(size, 8, "the discrete Laplace noise", "shape", unit="draws")
    charge("discrete_laplace", check_epsilon(epsilon), sensitivity=_check_sensitivity(sensitivity),
           note=note, accountant=accountant)
    out = _discrete_laplace_exact(size, t, s, as_generator(rng))
    return out if shp == out.shape else out.reshape(shp)


def discrete_laplace_pmf(z: ArrayLike, *, epsilon: float, sensitivity: float = 1) -> NDArray[np.float64]:
    """The pmf of the discrete Laplace with scale ``sensitivity / epsilon`` at integers ``z``.

    ``P[Z = z] = (1 - p) / (1 + p) * p**|z|`` with ``p = exp(-epsilon / sensitivity)``.
    """
    eps = check_epsilon(epsilon)
    p = math.exp(-eps / _check_sensitivity(sensitivity))
    zz = np.abs(check_array(z, "z", allow_empty=True).astype(np.float64))
    return (1 - p) / (1 + p) * np.power(p, zz)


def discrete_laplace(
    values: ArrayLike,
    *,
    epsilon: float,
    sensitivity: float = 1,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> NDArray[np.int64] | int:
    """The discrete Laplace (two-sided geometric) mechanism for integer-valued queries.

    Parameters
    ----------
    values : int or array_like of int
        True integer answers (integral floats are accepted); NaN, infinities and fractions
        raise :class:`~privpub.errors.DomainError`.
    epsilon : float
        Privacy parameter, finite and > 0.
    sensitivity : float
        L1 sensitivity of the vector ``values`` (usually 1 for counts).
    rng : int, Generator or None
        Randomness.
    accountant : Accountant, optional
        The accountant to charge (default: the active one, if any).
    note : str
        Recorded with the charge.

    Returns
    -------
    int or numpy.ndarray of int64
        ``values`` plus noise ``Z`` with ``P[Z = z]`` proportional to
        ``exp(-epsilon |z| / sensitivity)``, computed in int64 (exact; an overflow raises).

    Notes
    -----
    **Privacy:** epsilon-DP for any neighbouring relation under which the integer vector
    ``values`` changes by at most ``sensitivity`` in L1 norm [GRS12]_. The noise is sampled
    exactly with integer arithmetic ([CKS20]_) and added in int64, so the guarantee holds on a
    real computer, not just in real arithmetic (up to the quality of the PCG64 bit stream), at
    any count up to 2**62. Charges ``epsilon`` to the accountant before drawing.

    Examples
    --------
    >>> discrete_laplace([10, 0, 3], epsilon=1.0, rng=0).dtype
    dtype('int64')
    """
    return _integer_mechanism(values, "the discrete Laplace mechanism; use privpub.core.laplace for real-valued "
                              "queries", lambda shape: discrete_laplace_noise(
                                  shape, epsilon=epsilon, sensitivity=sensitivity, rng=rng, accountant=accountant,
                                  note=note))


def _integer_mechanism(values: ArrayLike, what: str,
                       draw: Callable[[tuple[int, ...]], NDArray[np.int64]]) -> NDArray[np.int64] | int:
    """``values`` (integers) plus ``draw(shape)`` in exact int64: the body of :func:`discrete_laplace`
    and :func:`discrete_gaussian` (``what`` completes "values must be integers for ...")."""
    arr = check_array(values, "values", allow_empty=True)
    if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
        raise DomainError(f"values must be integers for {what}", param="values")
    ints = check_int_values(arr, "values")
    noisy = add_int_noise(ints, draw(ints.shape))
    return int(noisy) if noisy.ndim == 0 else noisy


def add_int_noise(values: NDArray[np.int64], noise: NDArray[np.int64]) -> NDArray[np.int64]:
    """``values + noise`` in int64, refusing any result beyond ``±2**62`` (never wraps around).

    The sum is written into ``noise`` when it is a writeable int64 array (no extra copy).
    """
    v = np.asarray(values, dtype=np.int64)
    z = np.asarray(noise, dtype=np.int64)

    def too_big(a: NDArray[np.int64]) -> bool:
        return bool(a.size) and (int(a.max()) > INT_LIMIT or int(a.min()) < -INT_LIMIT)

    if too_big(v) or too_big(z):
        raise DomainError("counts or noise exceed 2**62 in magnitude; int64 arithmetic would overflow")
    out: NDArray[np.int64] = np.add(v, z, out=z) if (z.flags.writeable and z.shape == np.broadcast_shapes(
        v.shape, z.shape)) else v + z  # |v|, |z| <= 2**62: the sum fits in int64
    if too_big(out):
        raise DomainError("a noisy count exceeds 2**62 in magnitude; int64 arithmetic would overflow")
    return out


# ---------------------------------------------------------------------------------------------
# Discrete Gaussian (rho-zCDP), sampled exactly
# ---------------------------------------------------------------------------------------------
def _gaussian_scale(rho: float, sensitivity: float) -> GaussianScale:
    """The sampler's rational variance for ``sensitivity^2 / (2 rho)`` (never below it)."""
    return _gaussian_scale_checked(check_epsilon(rho, "rho"), _check_sensitivity(sensitivity))


@functools.lru_cache(maxsize=256)
def _gaussian_scale_checked(r: float, sens: float) -> GaussianScale:
    from privpub.core._dgauss import MAX_SIGMA2, rational_sigma2

    target = Fraction(sens) ** 2 / (2 * Fraction(r))
    if not 0 < target <= MAX_SIGMA2:
        raise ParameterError(
            f"sensitivity^2 / (2 rho) must be a variance in (0, 2**40], got sensitivity={sens:g}, rho={r:g}",
            param="rho")
    return rational_sigma2(target)


def discrete_gaussian_sigma2(*, rho: float, sensitivity: float = 1.0) -> float:
    """The variance parameter ``sigma^2`` the discrete Gaussian mechanism uses at ``rho``.

    ``sensitivity^2 / (2 rho)`` rounded up to the sampler's rational (relative excess below
    about 2**-25): what the noise of :func:`discrete_gaussian_noise` is calibrated to.

    Examples
    --------
    >>> discrete_gaussian_sigma2(rho=0.5)
    1.0
    """
    return float(_gaussian_scale(rho, sensitivity).sigma2)


def discrete_gaussian_noise(
    shape: int | tuple[int, ...],
    *,
    rho: float,
    sensitivity: float = 1.0,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> NDArray[np.int64]:
    """Exact discrete Gaussian noise: ``P[Z = z]`` proportional to ``exp(-z^2 / (2 sigma^2))``.

    ``sigma^2 = sensitivity^2 / (2 rho)`` (:func:`discrete_gaussian_sigma2`, never below it),
    sampled with integer arithmetic only ([CKS20]_ Alg. 3, see :mod:`privpub.core._dgauss`).

    **Privacy:** the caller adds it to an integer vector of **L2** sensitivity ``sensitivity``;
    that is rho-zCDP ([CKS20]_ Thm. 14). Charges ``accountant`` (or the active one) ``rho``
    under the ``"zcdp"`` measure before drawing: a pure-DP accountant refuses it.
    """
    scale = _gaussian_scale(rho, sensitivity)
    shp = _check_shape(shape)
    size = math.prod(shp)
    # the sampler's peak: the output and a round of proposals (about 1.5 draws per output)
    check_allocation(size, 40, "the discrete Gaussian noise", "shape", unit="draws")
    charge("discrete_gaussian", check_epsilon(rho, "rho"), sensitivity=_check_sensitivity(sensitivity),
           note=note, accountant=accountant, measure="zcdp")
    from privpub.core._dgauss import discrete_gaussian_exact

    out = discrete_gaussian_exact(size, scale, as_generator(rng))
    return out if shp == out.shape else out.reshape(shp)


def discrete_gaussian_pmf(z: ArrayLike, *, rho: float, sensitivity: float = 1.0) -> NDArray[np.float64]:
    """The pmf of the discrete Gaussian of :func:`discrete_gaussian_noise` at integers ``z``.

    ``exp(-z^2 / (2 sigma^2)) / sum_k exp(-k^2 / (2 sigma^2))`` with ``sigma^2`` from
    :func:`discrete_gaussian_sigma2` (the normaliser summed to ``|k| <= 40 sigma + 40``).
    """
    s2 = discrete_gaussian_sigma2(rho=rho, sensitivity=sensitivity)
    _, w = _dgauss_support(s2)
    zz = check_array(z, "z", allow_empty=True).astype(np.float64)
    return np.exp(-zz * zz / (2 * s2)) / math.fsum(w)


def _dgauss_support(sigma2: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The integers ``|k| <= 40 sigma + 40`` and their unnormalised weights ``exp(-k^2 / (2 sigma^2))``
    (the rest of the mass is below 1e-340: both the pmf and the variance sum over this support)."""
    half = math.ceil(40 * math.sqrt(sigma2)) + 40
    k = np.arange(-half, half + 1, dtype=np.float64)
    return k, np.exp(-k * k / (2 * sigma2))


def discrete_gaussian_variance(sigma2: float) -> float:
    """Exact variance of the discrete Gaussian with parameter ``sigma2`` (below ``sigma2``).

    From ``sigma2 >= 2**10`` on it is ``sigma2`` to float precision: [CKS20]_ (Corollary 9)
    bound it below by ``sigma2 (1 - 4 pi^2 sigma2 / (e^{4 pi^2 sigma2} - 1))``, a relative gap
    below ``e^-40000``; the sum over the support (``O(sigma)`` terms) is skipped there.
    """
    if float(sigma2) >= 2.0**10:
        return float(sigma2)
    k, w = _dgauss_support(sigma2)
    return float(math.fsum(w * k * k) / math.fsum(w))


def discrete_gaussian(
    values: ArrayLike,
    *,
    rho: float,
    sensitivity: float = 1.0,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> NDArray[np.int64] | int:
    """The discrete Gaussian mechanism for integer-valued queries, under rho-zCDP.

    Parameters
    ----------
    values : int or array_like of int
        True integer answers (integral floats are accepted); NaN, infinities and fractions
        raise :class:`~privpub.errors.DomainError`.
    rho : float
        zCDP parameter, finite and > 0.
    sensitivity : float
        **L2** sensitivity of the vector ``values`` (1 for one count; ``sqrt(k)`` when one
        record changes ``k`` counts by 1).
    rng : int, Generator or None
        Randomness.
    accountant : Accountant, optional
        The accountant to charge (default: the active one, if any); it must account in zCDP.
    note : str
        Recorded with the charge.

    Returns
    -------
    int or numpy.ndarray of int64
        ``values`` plus noise ``Z`` with ``P[Z = z]`` proportional to ``exp(-z^2 / (2 sigma^2))``,
        ``sigma^2 = sensitivity^2 / (2 rho)``, added in int64 (exact; an overflow raises).

    Notes
    -----
    **Privacy:** rho-zCDP ([CKS20]_ Thm. 14) for any neighbouring relation under which the
    integer vector ``values`` changes by at most ``sensitivity`` in L2 norm; by
    :func:`~privpub.core.zcdp_to_approx_dp` it is ``(rho + 2 sqrt(rho ln(1/delta)), delta)``-DP
    for every delta. The noise is sampled exactly with integer arithmetic, so the guarantee
    holds on a real computer. Charges ``rho`` (measure ``"zcdp"``) before drawing.

    Examples
    --------
    >>> from privpub.core import Accountant
    >>> with Accountant(1.0, measure="zcdp") as acc:
    ...     noisy = discrete_gaussian([10, 0, 3], rho=0.5, rng=0)
    >>> noisy.dtype, acc.total, acc.measure
    (dtype('int64'), 0.5, 'zcdp')
    """
    return _integer_mechanism(values, "the discrete Gaussian mechanism", lambda shape: discrete_gaussian_noise(
        shape, rho=rho, sensitivity=sensitivity, rng=rng, accountant=accountant, note=note))


# ---------------------------------------------------------------------------------------------
# Selection: exponential mechanism and report-noisy-max
# ---------------------------------------------------------------------------------------------
def _check_scores(scores: ArrayLike) -> NDArray[np.float64]:
    return check_array(scores, "scores", ndim=1).astype(np.float64)


def _logits(u: NDArray[np.float64], eps: float, sens: float, monotone: bool) -> NDArray[np.float64]:
    factor = eps / ((1.0 if monotone else 2.0) * sens)
    with np.errstate(over="ignore", invalid="ignore"):
        logits = factor * u
    if not np.all(np.isfinite(logits)):
        raise ParameterError(
            "epsilon * scores / sensitivity overflows; rescale the scores or the sensitivity "
            f"(largest |score| {np.max(np.abs(u)):g}, epsilon={eps:g}, sensitivity={sens:g})"
        )
    return logits


def exponential_mechanism_probabilities(
    scores: ArrayLike, *, epsilon: float, sensitivity: float = 1.0, monotone: bool = False
) -> NDArray[np.float64]:
    """The exact output distribution of :func:`exponential_mechanism` (a stable softmax)."""
    u = _check_scores(scores)
    eps = check_epsilon(epsilon)
    sens = _check_sensitivity(sensitivity)
    _check_scale(eps, sens)
    logits = _logits(u, eps, sens, monotone)
    logits -= logits.max()
    w = np.exp(logits)
    return np.asarray(w / w.sum(), dtype=np.float64)


def exponential_mechanism(
    scores: ArrayLike,
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    monotone: bool = False,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> int:
    """The exponential mechanism: return index ``i`` with probability proportional to
    ``exp(epsilon * scores[i] / (2 * sensitivity))``.

    Parameters
    ----------
    scores : array_like, shape (k,)
        Utility of each candidate (higher is better), finite.
    epsilon : float
        Privacy parameter.
    sensitivity : float
        Largest change of any single score between neighbouring datasets.
    monotone : bool
        Set when, between any two neighbours, all scores move in the same direction (e.g.
        counting scores); the exponent is then ``epsilon * score / sensitivity``.
    rng : int, Generator or None
        Randomness.
    accountant : Accountant, optional
        The accountant to charge (default: the active one, if any).
    note : str
        Recorded with the charge.

    Notes
    -----
    **Privacy:** epsilon-DP [MT07]_ (``monotone``: [DR14]_, Thm 3.10 remark). Sampled with the
    Gumbel-max trick, ``argmax(logits + Gumbel)``, which is exact in distribution and never
    overflows. Charges ``epsilon`` to the accountant before drawing.

    Examples
    --------
    >>> exponential_mechanism([0.0, 100.0, 0.0], epsilon=1.0, rng=0)
    1
    """
    u = _check_scores(scores)
    eps = check_epsilon(epsilon)
    sens = _check_sensitivity(sensitivity)
    _check_scale(eps, sens)
    gen = as_generator(rng)
    logits = _logits(u, eps, sens, monotone)
    charge("exponential_mechanism", eps, sensitivity=sens, note=note, accountant=accountant)
    return int(np.argmax(logits + gen.gumbel(size=u.shape[0])))


def exponential_mechanism_zcdp(
    scores: ArrayLike,
    *,
    rho: float,
    sensitivity: float = 1.0,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> int:
    """The exponential mechanism accounted under rho-zCDP: index ``i`` with probability
    proportional to ``exp(epsilon * scores[i] / (2 * sensitivity))``, ``epsilon = sqrt(8 rho)``.

    Parameters
    ----------
    scores : array_like, shape (k,)
        Utility of each candidate (higher is better), finite.
    rho : float
        zCDP parameter, finite and > 0.
    sensitivity : float
        Largest change of any single score between neighbouring datasets (the scores may move
        in different directions).
    rng : int, Generator or None
        Randomness.
    accountant : Accountant, optional
        The accountant to charge (default: the active one, if any); it must account in zCDP.
    note : str
        Recorded with the charge.

    Notes
    -----
    **Privacy:** the exponential mechanism at ``epsilon`` is ``epsilon``-bounded-range, hence
    ``epsilon^2 / 8``-zCDP ([CR21]_ Lemma 3.2, used by AIM and MST), four times less than the
    ``epsilon^2 / 2`` of the generic pure-DP conversion. The same sampler as
    :func:`exponential_mechanism` (Gumbel-max, exact in distribution); charges ``rho`` (measure
    ``"zcdp"``) before drawing, so a pure-DP accountant refuses it.

    References
    ----------
    .. [CR21] Cesar, Rogers. Bounding, concentrating, and truncating: unifying privacy loss
       composition for data analytics. ALT 2021, arXiv:2004.07223.

    Examples
    --------
    >>> from privpub.core import Accountant
    >>> with Accountant(1.0, measure="zcdp") as acc:
    ...     i = exponential_mechanism_zcdp([0.0, 100.0, 0.0], rho=0.5, rng=0)
    >>> i, acc.total
    (1, 0.5)
    """
    u = _check_scores(scores)
    r = check_epsilon(rho, "rho")
    eps = math.sqrt(8.0 * r)
    sens = _check_sensitivity(sensitivity)
    _check_scale(eps, sens)
    gen = as_generator(rng)
    logits = _logits(u, eps, sens, False)
    charge("exponential_mechanism", r, sensitivity=sens, note=(f"{note}; " if note else "")
           + f"epsilon=sqrt(8 rho)={eps:.6g}, bounded range: rho=epsilon^2/8", accountant=accountant,
           measure="zcdp")
    return int(np.argmax(logits + gen.gumbel(size=u.shape[0])))


def report_noisy_max(
    scores: ArrayLike,
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    monotone: bool = False,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> int:
    """Report-noisy-max with Laplace noise: ``argmax_i(scores[i] + Lap(b))``; only the index is released.

    Parameters
    ----------
    scores : array_like, shape (k,)
        Candidate scores, finite.
    epsilon : float
        Privacy parameter.
    sensitivity : float
        Largest change of any single score between neighbouring datasets.
    monotone : bool
        True when between any two neighbours all scores change in the same direction (e.g.
        counts under add/remove-one); then scale ``b = sensitivity / epsilon`` suffices
        ([DR14]_, Claim 3.9). Otherwise ``b = 2 * sensitivity / epsilon``, which is epsilon-DP
        for arbitrary scores of that sensitivity.
    rng : int, Generator or None
        Randomness.
    accountant : Accountant, optional
        The accountant to charge (default: the active one, if any).
    note : str
        Recorded with the charge.

    Returns
    -------
    int
        The index of the noisy maximum.

    Notes
    -----
    **Privacy:** epsilon-DP; only the argmax is released, never the noisy value. Charges
    ``epsilon`` to the accountant before drawing.

    Examples
    --------
    >>> report_noisy_max([3, 50, 7], epsilon=1.0, monotone=True, rng=0)
    1
    """
    u = _check_scores(scores)
    eps = check_epsilon(epsilon)
    sens = _check_sensitivity(sensitivity)
    scale = (1.0 if monotone else 2.0) * _check_scale(eps, sens)
    gen = as_generator(rng)
    charge("report_noisy_max", eps, sensitivity=sens, note=note, accountant=accountant)
    return int(np.argmax(u + gen.laplace(0.0, scale, size=u.shape[0])))
