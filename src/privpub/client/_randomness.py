"""The randomness of a participant's device: a cryptographic stream keyed from the OS CSPRNG.

In local DP the randomiser's coins are the participant's whole protection, so a device must not
draw them from a generator whose state could be recovered from its outputs (PCG64, Mersenne
Twister). :func:`device_generator` is a :class:`numpy.random.Generator` over ChaCha20 (20
rounds; ``randomgen.ChaCha``), keyed with 256 bits from the operating system's CSPRNG
(:mod:`secrets`, i.e. ``getrandom``/``os.urandom``). ChaCha20 is the stream cipher the Linux
kernel's own CSPRNG runs, so its output is computationally indistinguishable from the OS's; the
SDK keys a fresh one for every perturbation call (every report of a :class:`Participant`), so no
long-lived stream links a device's reports. The library's exact dyadic samplers read raw 64-bit
words from it, so the realised probabilities are exactly the published ones.

Seeded generators (an int or a :class:`numpy.random.Generator`) stay available for tests and
simulations, where reproducibility matters more than unpredictability.
"""

from __future__ import annotations

import secrets

import numpy as np
from randomgen import ChaCha

from privpub.core import RNGLike, as_generator

__all__ = ["device_generator", "device_rng"]

#: ChaCha rounds (20: the cryptographic strength of ChaCha20)
ROUNDS = 20


def device_generator() -> np.random.Generator:
    """A fresh generator over ChaCha20 keyed with 256 bits from the OS CSPRNG (not reproducible).

    Examples
    --------
    >>> type(device_generator().bit_generator).__name__
    'ChaCha'
    """
    return np.random.Generator(ChaCha(key=secrets.randbits(256), rounds=ROUNDS))  # the key itself: 256 bits


def device_rng(rng: RNGLike) -> np.random.Generator:
    """``rng`` as a generator, with ``"secure"`` (the SDK's default) meaning :func:`device_generator`."""
    if isinstance(rng, str) and rng == "secure":
        return device_generator()
    return as_generator(rng)
