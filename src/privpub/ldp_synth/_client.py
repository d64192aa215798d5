"""Client side of the LDP synthesizer (paper Alg. 1): one-hot blocks, per-bit RAPPOR flipping.

This is the only module of :mod:`privpub.ldp_synth` that sees raw records (besides the evaluation
helpers). Everything the server does starts from :class:`LDPReports`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from privpub.core import RNGLike, Schema, as_generator, check_epsilon, check_in_domain, check_real
from privpub.errors import DomainError, ParameterError
from privpub.ldp import SUE, sue_flip_probability

__all__ = [
    "LDPReports",
    "encode",
    "epsilon_from_f",
    "f_from_epsilon",
    "perturb_codes",
    "resolve_flip_prob",
    "simulate_clients",
]


#: the local randomisers' epsilon cap (``privpub.ldp.MAX_LOCAL_EPSILON``; a test checks they agree)
MAX_LOCAL_EPSILON = 40.0
#: smallest flip probability: each attribute's SUE randomiser is at most MAX_LOCAL_EPSILON-LDP
_MIN_F = sue_flip_probability(MAX_LOCAL_EPSILON)
#: smallest flip probability the estimators can take: below it their (p / q)**2 overflows a float (f = 1e-150
#: is a per-attribute epsilon of about 690); _MIN_F above is the tighter bound a release accepts
MIN_FLIP_PROB = 1e-150


def _check_f(f: Any, name: str = "flip_prob") -> float:
    value = check_real(f, name)
    if not 0.0 < value < 1.0:
        raise ParameterError(f"{name} must be in (0, 1), got {value}", param=name)
    if value < MIN_FLIP_PROB:
        raise ParameterError(f"{name} must be >= {MIN_FLIP_PROB:g} (smaller values overflow the estimators; "
                             f"the epsilon would be about {2 * math.log(2 / value):.0f} per attribute), got {value}", param=name)
    return value


def _check_d(d: Any) -> int:
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or int(d) < 1:
        raise ParameterError(f"d (number of attributes) must be an integer >= 1, got {d!r}", param="d")
    return int(d)


def epsilon_from_f(f: float, d: int = 1) -> float:
    """The LDP epsilon of one report of ``d`` one-hot blocks flipped with probability ``f``.

    ``epsilon = 2 d ln((2 - f) / f)`` (paper Theorem 1; tight). ``d = 1`` gives the per-attribute
    epsilon (RAPPOR's ``2 ln((1 - f/2) / (f/2))``).

    Examples
    --------
    >>> round(epsilon_from_f(0.5, 16), 4)
    35.1556
    """
    ff = _check_f(f, "f")
    return 2.0 * _check_d(d) * math.log((2.0 - ff) / ff)


def f_from_epsilon(epsilon: float, d: int = 1) -> float:
    """The flip probability whose ``d``-attribute report is exactly ``epsilon``-LDP.

    ``f = 2 / (1 + exp(epsilon / (2 d)))``, the inverse of :func:`epsilon_from_f`.

    Examples
    --------
    >>> round(f_from_epsilon(epsilon_from_f(0.3, 15), 15), 12)
    0.3
    """
    eps = check_epsilon(epsilon)
    x = math.exp(-eps / (2.0 * _check_d(d)))  # stable form of 2 / (1 + e^(eps / 2d))
    f = 2.0 * x / (1.0 + x)
    if f == 0.0:
        raise ParameterError(f"epsilon={eps:g} is too large: the flip probability underflows to 0")
    return f


def resolve_flip_prob(epsilon: float | None, flip_prob: float | None, d: int) -> tuple[float, float]:
    """Return ``(f, epsilon)`` from exactly one of them (total epsilon over ``d`` attributes)."""
    if (epsilon is None) == (flip_prob is None):
        raise ParameterError(
            "give exactly one of epsilon (total, per report) or flip_prob, "
            f"got epsilon={epsilon!r}, flip_prob={flip_prob!r}"
        )
    if flip_prob is not None:
        f = _check_f(flip_prob)
        if not f >= _MIN_F:  # each attribute's randomiser is SUE at 2 ln((2 - f) / f) <= MAX_LOCAL_EPSILON
            raise ParameterError(
                f"flip_prob must be at least {_MIN_F:.3g} (each attribute's report is 2 ln((2 - f) / f)-LDP, "
                f"at most {MAX_LOCAL_EPSILON:g}), got {f!r}"
            , param="flip_prob")
        return f, epsilon_from_f(f, d)
    eps = check_epsilon(epsilon)
    if eps / _check_d(d) > MAX_LOCAL_EPSILON:
        raise ParameterError(
            f"epsilon must be at most {MAX_LOCAL_EPSILON:g} per attribute ({MAX_LOCAL_EPSILON * d:g} for {d} "
            f"attributes: the per-attribute randomisers accept no more), got {eps:g}"
        , param="epsilon")
    f = f_from_epsilon(eps, d)
    if not MIN_FLIP_PROB <= f < 1.0:
        raise ParameterError(f"epsilon={eps} is too large for {d} attributes: its flip probability {f:.3g} is below "
                             f"{MIN_FLIP_PROB:g} (the estimators overflow; at most about "
                             f"{epsilon_from_f(MIN_FLIP_PROB, d):.0f})")
    return f, eps


@dataclass(frozen=True)
class LDPReports:
    """The perturbed reports of N users with the public metadata the server needs.

    Attributes
    ----------
    bits : (N, L) bool array
        Concatenated perturbed one-hot blocks, block ``j`` at columns
        ``offsets[j]:offsets[j] + sizes[j]``.
    sizes : tuple of int
        Domain size of each attribute (public).
    flip_prob : float
        The flip probability ``f`` every client used (public).
    names : tuple of str or None
        Attribute names, when known.
    """

    bits: NDArray[np.bool_]
    sizes: tuple[int, ...]
    flip_prob: float
    names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        sizes = tuple(int(s) for s in self.sizes)
        if not sizes or any(s < 1 for s in sizes):
            raise ParameterError(f"sizes must be a non-empty list of integers >= 1, got {list(self.sizes)}", param="sizes")
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "flip_prob", _check_f(self.flip_prob))
        bits = check_report_bits(self.bits, sum(sizes))
        bits.flags.writeable = False
        object.__setattr__(self, "bits", bits)
        if self.names is not None:
            names = tuple(str(n) for n in self.names)
            if len(names) != len(sizes):
                raise ParameterError(f"names must have {len(sizes)} entries, got {len(names)}", param="names")
            object.__setattr__(self, "names", names)

    @property
    def n_users(self) -> int:
        return int(self.bits.shape[0])

    @property
    def epsilon(self) -> float:
        """The LDP epsilon of each report: ``2 d ln((2 - f) / f)``."""
        return epsilon_from_f(self.flip_prob, len(self.sizes))

    @property
    def offsets(self) -> NDArray[np.int64]:
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)


def check_report_bits(bits: ArrayLike, width: int) -> NDArray[np.bool_]:
    """Return ``bits`` as an (N, width) bool array, or raise a clear error."""
    arr = np.asarray(bits)
    if arr.ndim != 2 or arr.shape[1] != width:
        raise ParameterError(
            f"reports must have shape (n_users, {width}) (the sum of the schema's domain sizes), "
            f"got shape {arr.shape}"
        , param="reports")
    if arr.shape[0] == 0:
        raise ParameterError("reports must not be empty, got 0 users", param="reports")
    if arr.dtype != np.bool_:
        if arr.dtype.kind not in "biuf" or not np.isin(arr, (0, 1)).all():
            raise ParameterError("reports must hold 0/1 bits", param="reports")
        arr = arr.astype(bool)
    return np.array(arr, dtype=bool, copy=True)


def encode(codes: ArrayLike, sizes: Sequence[int]) -> NDArray[np.uint8]:
    """One-hot encode integer codes: an (N, d) array to (N, L) bits, ``L = sum(sizes)``.

    Examples
    --------
    >>> encode([[0, 2], [1, 0]], [2, 3])
    array([[1, 0, 0, 0, 1],
           [0, 1, 1, 0, 0]], dtype=uint8)
    """
    arr = _check_codes(codes, sizes)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    out = np.zeros((arr.shape[0], int(np.sum(sizes))), dtype=np.uint8)
    out[np.arange(arr.shape[0])[:, None], arr + offsets[None, :]] = 1
    return out


def _check_codes(codes: ArrayLike, sizes: Sequence[int]) -> NDArray[np.int64]:
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.shape[1] != len(sizes):
        raise ParameterError(f"codes must have shape (n, {len(sizes)}), got {arr.shape}", param="codes")
    cols = [check_in_domain(arr[:, j], f"codes of attribute {j}", int(s)) for j, s in enumerate(sizes)]
    return np.stack(cols, axis=1)


def perturb_codes(
    codes: ArrayLike,
    sizes: Sequence[int],
    *,
    flip_prob: float,
    rng: RNGLike = None,
    names: Sequence[str] | None = None,
) -> LDPReports:
    """Client side for N users at once: one-hot encode each attribute and flip each bit.

    Each attribute block goes through :class:`privpub.ldp.SUE` with flip probability ``f`` (each bit
    kept with probability ``1 - f``, else replaced by a fair coin; paper Eq. 4); the blocks are
    concatenated in attribute order.

    Notes
    -----
    **Privacy:** each report is epsilon-LDP with ``epsilon = 2 d ln((2 - f) / f)`` against any change of
    the user's whole record (``2 ln((2 - f) / f)`` per attribute, composed over the d blocks). Each
    block's randomiser charges the active accountant (if any) as it draws.
    """
    f = _check_f(flip_prob)
    gen = as_generator(rng)
    sizes_t = tuple(int(s) for s in sizes)
    arr = _check_codes(codes, sizes_t)
    label = (lambda j: names[j]) if names is not None else (lambda j: f"attribute {j}")
    blocks = [SUE(domain_size=s, f=f).perturb(arr[:, j], rng=gen,
                                              packed=False,
                                              note=f"{label(j)}: {arr.shape[0]} users, one report each")
              for j, s in enumerate(sizes_t)]
    return LDPReports(np.concatenate(blocks, axis=1), sizes_t, f, None if names is None else tuple(names))


def simulate_clients(
    data: pd.DataFrame,
    schema: Schema,
    *,
    epsilon: float | None = None,
    flip_prob: float | None = None,
    rng: RNGLike = None,
) -> LDPReports:
    """Simulate every user's local perturbation of a table with a declared schema.

    Parameters
    ----------
    data : DataFrame
        One row per user; every attribute of ``schema`` must be a column.
    schema : Schema
        The public domains (categorical attributes; numeric attributes are binned by their
        declared resolution).
    epsilon, flip_prob : float
        Exactly one: the total per-report epsilon, or the flip probability ``f``.
    rng : int, Generator or None

    Notes
    -----
    **Privacy:** each report is epsilon-LDP (whole record as the unit); see :func:`perturb_codes`.

    Examples
    --------
    >>> from privpub.core import CategoricalAttribute, Schema
    >>> schema = Schema([CategoricalAttribute("a", ["x", "y"]), CategoricalAttribute("b", ["u", "v", "w"])])
    >>> reports = simulate_clients(pd.DataFrame({"a": ["x", "y"], "b": ["w", "u"]}), schema,
    ...                            flip_prob=0.5, rng=0)
    >>> reports.bits.shape, round(reports.epsilon, 4)
    ((2, 5), 4.3944)
    """
    if not isinstance(schema, Schema):
        raise ParameterError(f"schema must be a privpub.core.Schema, got {type(schema).__name__}", param="schema")
    f, _ = resolve_flip_prob(epsilon, flip_prob, len(schema))
    if not isinstance(data, pd.DataFrame):
        raise ParameterError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    extra = [str(c) for c in data.columns if c not in schema.names]
    if extra:
        raise DomainError(
            f"data has columns without a declared domain: {extra}; declare them in the schema "
            "(with their public categories) or drop them"
        )
    codes = schema.encode(data)
    return perturb_codes(codes, schema.sizes, flip_prob=f, rng=rng, names=schema.names)
