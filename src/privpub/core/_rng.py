"""Normalising the ``rng`` argument (SPEC 7 style): one place, no global state."""

from __future__ import annotations

import numbers
import secrets

import numpy as np

from privpub.errors import ParameterError

__all__ = ["RNGLike", "as_generator", "secure_generator", "spawn"]

RNGLike = int | np.random.Generator | np.random.SeedSequence | str | None


def as_generator(rng: RNGLike = None) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``rng``.

    Parameters
    ----------
    rng : int, numpy.random.Generator, numpy.random.SeedSequence, "secure" or None
        An int or seed sequence seeds a new PCG64 generator (same seed, same output); a
        Generator is returned unchanged (so callers share its stream); None draws fresh
        entropy from the operating system; ``"secure"`` is :func:`secure_generator` (for
        production releases). The legacy global ``np.random`` state is never used.

    Raises
    ------
    ParameterError
        If ``rng`` is of another type (e.g. a float, a bool, a ``RandomState``) or a negative int.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, str):
        if rng == "secure":
            return secure_generator()
        raise ParameterError(f"rng must be an int seed, a Generator, None or 'secure', got {rng!r}", param="rng")
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if int(rng) < 0:
            raise ParameterError(f"rng must be a non-negative int seed, got {int(rng)}", param="rng")
        return np.random.default_rng(int(rng))
    raise ParameterError(
        "rng must be an int seed, a numpy.random.Generator, a SeedSequence or None, "
        f"got {type(rng).__name__}"
    , param="rng")


def secure_generator() -> np.random.Generator:
    """A generator seeded with 256 bits from the operating system's CSPRNG (:mod:`secrets`).

    Use it for production releases where seeds must not be guessable. The stream itself is
    PCG64, which is fast but not a cryptographic generator: an attacker who learns enough
    outputs could in principle recover the state. Results are not reproducible by design.
    """
    return np.random.default_rng(np.random.SeedSequence(secrets.randbits(256)))


def spawn(rng: RNGLike, n: int) -> list[np.random.Generator]:
    """Return ``n`` independent child generators of ``rng`` (for parallel or repeated runs)."""
    gen = as_generator(rng)
    return list(gen.spawn(n))
