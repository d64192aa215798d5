"""Node-noise streams shared by the online and the batch paths (bit-identical by construction).

* ``"laplace"``: one standard Laplace draw per node, in node-completion order, from one generator,
  times the node's scale ``sensitivity / epsilon``. ``Generator.laplace`` yields the same numbers
  for one call of size n as for n scalar calls, so any chunking gives the same stream.
* ``"discrete"``: exact discrete Laplace (``privpub.core.discrete_laplace_noise``). That sampler is
  vectorised rejection sampling, so its output depends on the call sizes; each distinct
  ``(epsilon, sensitivity)`` pair therefore gets its own child generator (seeded from the parent in
  order of first use) drawn in a fixed schedule of chunk sizes 16, 32, ..., 65536. Online and
  batch consume the same schedule and get the same numbers.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from privpub.core import discrete_laplace_noise

__all__ = ["NOISE_KINDS", "NoiseStream"]

NOISE_KINDS = ("discrete", "laplace")
_MIN_CHUNK = 16
_MAX_CHUNK = 1 << 16


class _Pool:
    __slots__ = ("buf", "chunk", "eps", "gen", "pos", "sens")

    def __init__(self, eps: float, sens: float, gen: np.random.Generator) -> None:
        self.eps, self.sens, self.gen = eps, sens, gen
        self.buf = np.zeros(0, dtype=np.int64)
        self.pos = 0
        self.chunk = _MIN_CHUNK

    def _refill(self) -> None:
        self.buf = discrete_laplace_noise(self.chunk, epsilon=self.eps, sensitivity=self.sens, rng=self.gen)
        self.pos = 0
        self.chunk = min(self.chunk * 2, _MAX_CHUNK)

    def take_one(self) -> int:
        if self.pos == self.buf.shape[0]:
            self._refill()
        v = self.buf[self.pos]
        self.pos += 1
        return int(v)

    def take(self, n: int) -> NDArray[np.int64]:
        parts = []
        need = n
        while need > 0:
            if self.pos == self.buf.shape[0]:
                self._refill()
            k = min(need, self.buf.shape[0] - self.pos)
            parts.append(self.buf[self.pos : self.pos + k])
            self.pos += k
            need -= k
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


class NoiseStream:
    """Noise for stored nodes, drawn once per node in completion order."""

    def __init__(self, kind: str, gen: np.random.Generator) -> None:
        self.kind = kind
        self._gen = gen
        self._zbuf = np.zeros(0)
        self._zpos = 0
        self._pools: dict[tuple[float, float], _Pool] = {}

    # -- continuous -----------------------------------------------------------------------
    def z_one(self) -> float:
        if self._zpos == self._zbuf.shape[0]:
            self._zbuf = self._gen.laplace(0.0, 1.0, size=4096)
            self._zpos = 0
        z = self._zbuf[self._zpos]
        self._zpos += 1
        return float(z)

    def z_many(self, n: int) -> NDArray[np.float64]:
        rest = self._zbuf[self._zpos :]
        if n <= rest.shape[0]:
            self._zpos += n
            return rest[:n].copy()
        out = np.concatenate([rest, self._gen.laplace(0.0, 1.0, size=n - rest.shape[0])])
        self._zbuf = np.zeros(0)
        self._zpos = 0
        return out

    # -- discrete -------------------------------------------------------------------------
    def _pool(self, eps: float, sens: float) -> _Pool:
        key = (eps, sens)
        pool = self._pools.get(key)
        if pool is None:
            seed = self._gen.integers(0, 1 << 63, size=2, dtype=np.int64)
            pool = _Pool(eps, sens, np.random.default_rng([int(s) for s in seed]))
            self._pools[key] = pool
        return pool

    def discrete_one(self, eps: float, sens: float) -> int:
        return self._pool(eps, sens).take_one()

    def discrete_many(self, eps: NDArray[np.float64], sens: NDArray[np.float64]) -> NDArray[np.int64]:
        """Draws for nodes with parameters ``(eps[i], sens[i])`` in order ``i = 0, 1, ...``."""
        n = eps.shape[0]
        out = np.empty(n, dtype=np.int64)
        if n == 0:
            return out
        if np.all(eps == eps[0]) and np.all(sens == sens[0]):
            out[:] = self._pool(float(eps[0]), float(sens[0])).take(n)
            return out
        if np.all(eps == eps[0]):  # one epsilon (e.g. MM scales folded into sens): 1-D keys
            u_s, first, inverse = np.unique(sens, return_index=True, return_inverse=True)
            uniq = np.stack([np.full(u_s.shape[0], eps[0]), u_s], axis=1)
        else:
            pairs = np.stack([eps, sens], axis=1)
            uniq, first, inverse = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        order_keys = np.argsort(first, kind="stable")
        for key_id in order_keys:  # create pools in order of first use
            self._pool(float(uniq[key_id, 0]), float(uniq[key_id, 1]))
        by_key = np.argsort(inverse, kind="stable")
        counts = np.bincount(inverse, minlength=uniq.shape[0])
        bounds = np.concatenate([[0], np.cumsum(counts)])
        for key_id in range(uniq.shape[0]):
            idx = by_key[bounds[key_id] : bounds[key_id + 1]]
            out[idx] = self._pool(float(uniq[key_id, 0]), float(uniq[key_id, 1])).take(idx.shape[0])
        return out
