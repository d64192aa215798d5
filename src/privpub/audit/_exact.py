"""Exact epsilon of local randomisers with small output spaces, from enumerated output probabilities.

A local randomiser ``R`` is epsilon-LDP iff ``P[R(x) = o] <= e^epsilon P[R(x') = o]`` for all
inputs ``x, x'`` and outputs ``o``; on a small domain every output can be enumerated and the
smallest such epsilon computed exactly (LDP-Auditor's "analytic" epsilon).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import check_array
from privpub.errors import DomainError, ParameterError
from privpub.ldp import GRR, OLH, FrequencyOracle, UnaryEncoding

__all__ = ["exact_epsilon", "output_probabilities"]

#: largest domain whose unary-encoding outputs (2**d bit vectors) are enumerated
MAX_UNARY_DOMAIN = 16


def exact_epsilon(probabilities: ArrayLike) -> float:
    """The exact LDP epsilon of a randomiser given ``P[output | input]``.

    Parameters
    ----------
    probabilities : array_like, shape (n_inputs, n_outputs)
        Row ``i`` is the output distribution on input ``i`` (rows sum to 1).

    Returns
    -------
    float
        ``max over i, j, o of ln(P[i, o] / P[j, o])``; ``inf`` when some output is possible
        under one input and impossible under another.

    Examples
    --------
    >>> import math
    >>> e = math.e
    >>> round(exact_epsilon([[e / (e + 1), 1 / (e + 1)], [1 / (e + 1), e / (e + 1)]]), 9)
    1.0
    """
    p = check_array(probabilities, "probabilities", ndim=2)
    if p.shape[0] < 2 or p.shape[1] < 1:
        raise ParameterError(f"probabilities must have at least 2 rows and 1 column, got shape {p.shape}", param="probabilities")
    if np.any(p < 0) or not np.allclose(p.sum(axis=1), 1.0, atol=1e-9):
        raise DomainError("probabilities must be non-negative with rows summing to 1", param="probabilities")
    hi = p.max(axis=0)
    lo = p.min(axis=0)
    if np.any((hi > 0) & (lo == 0)):
        return math.inf
    live = hi > 0
    return float(np.max(np.log(hi[live]) - np.log(lo[live])))


def output_probabilities(
    oracle: FrequencyOracle, epsilon: float, *, hash_seed: int = 0, n_hashes: int = 64
) -> NDArray[np.float64]:
    """Enumerate ``P[report | value]`` of a frequency oracle's client randomiser.

    Parameters
    ----------
    oracle : GRR, SUE, OUE or OLH
        The oracle (its effective, quantised probabilities are used).
    epsilon : float
        The epsilon passed to ``perturb``.
    hash_seed, n_hashes : int
        OLH only: the report ``(a, b, y)`` has a public hash independent of the value, so the
        randomiser's epsilon is the largest epsilon of its bucket randomiser over hash functions.
        The matrix returned stacks, for ``n_hashes`` random hash functions ``h``, the columns
        ``P[y, h | x] = P[h] P[y | h(x)]`` with ``P[h] = 1 / n_hashes`` (an exact randomiser over
        that finite hash family).

    Returns
    -------
    numpy.ndarray, shape (domain_size, n_outputs)
        Rows: the input value; columns: every possible report (GRR: the value; unary encodings:
        the ``2**d`` bit vectors in lexicographic order; OLH: ``(hash, bucket)`` pairs).

    Examples
    --------
    >>> from privpub.ldp import OUE
    >>> round(exact_epsilon(output_probabilities(OUE(domain_size=3), 1.0)), 6)
    1.0
    """
    if not isinstance(oracle, (GRR, UnaryEncoding, OLH)):
        raise ParameterError(f"oracle must be a GRR, SUE, OUE or OLH instance, got {type(oracle).__name__}", param="oracle")
    d = oracle.domain_size
    if isinstance(oracle, GRR):
        p, q = oracle.probabilities(epsilon)
        return np.where(np.eye(d, dtype=bool), p, q)
    if isinstance(oracle, UnaryEncoding):
        if d > MAX_UNARY_DOMAIN:
            raise ParameterError(f"domain_size must be <= {MAX_UNARY_DOMAIN} to enumerate 2**d outputs, got {d}", param="domain_size")
        p, q = oracle.probabilities(epsilon)
        outputs = np.array(list(itertools.product([False, True], repeat=d)), dtype=bool)
        rows = []
        for x in range(d):
            own = np.zeros(d, dtype=bool)
            own[x] = True
            probs = np.where(own, np.where(outputs, p, 1 - p), np.where(outputs, q, 1 - q))
            rows.append(probs.prod(axis=1))
        return np.array(rows)
    # OLH
    p, _ = oracle._bucket_probabilities(epsilon)
    g = oracle.buckets(epsilon)
    q = (1.0 - p) / (g - 1)
    gen = np.random.default_rng(hash_seed)
    prime = (1 << 31) - 1
    a = gen.integers(1, prime, size=n_hashes, dtype=np.int64)
    b = gen.integers(0, prime, size=n_hashes, dtype=np.int64)
    xs = np.arange(d, dtype=np.int64)
    h = ((a[None, :] * xs[:, None] + b[None, :]) % prime) % g  # (d, n_hashes)
    cols = np.where(h[:, :, None] == np.arange(g)[None, None, :], p, q)  # (d, n_hashes, g)
    return cols.reshape(d, n_hashes * g) / n_hashes
