"""Per-node noise of trees over disjoint time blocks: the core mechanism of continual release.

A stream publisher (RTP, the binary mechanism, ...) cuts the stream into consecutive blocks and
builds one tree of noisy partial sums ("nodes") over each block. :class:`TreeNoise` is the only
source of that noise. It is created once per publisher with the publisher's ``epsilon``, the
per-item ``sensitivity`` and the publisher's :class:`~privpub.core.Accountant`, and it charges
that accountant, *before* it draws, for every tree configuration it is asked to serve, with the
composition of the privacy proof:

* inside one tree, the nodes that contain a given item compose **sequentially** (a Fenwick or
  binary tree has at most one such node per level); the tree costs the largest total over its
  items;
* different trees hold disjoint items, so they compose in **parallel**: all trees are branches
  of one open parallel block of the accountant, recorded in bulk
  (:meth:`~privpub.core.ParallelBlock.charge_branches`), so charging costs nothing per item.

References
----------
.. [DNPR10] Dwork, Naor, Pitassi, Rothblum. Differential privacy under continual observation.
   STOC 2010.
.. [CSS11] Chan, Shi, Song. Private and continual release of statistics. ACM TISSEC 14(3), 2011.
.. [CKS20] Canonne, Kamath, Steinke. The discrete Gaussian for differential privacy. NeurIPS 2020
   (the exact discrete Laplace sampler used for ``noise="discrete"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core._accountant import Accountant, Charge, ParallelBlock
from privpub.core._dgauss import GaussianScale, discrete_gaussian_exact
from privpub.core._mechanisms import (
    _DEN_LIMIT,
    _MAX_GRID_STEPS,
    MAX_SCALE,
    _check_scale,
    _check_sensitivity,
    _discrete_laplace_exact,
    _gaussian_scale,
    discrete_gaussian_variance,
    laplace_grid,
    rational_scale,
)
from privpub.core._rng import RNGLike, as_generator
from privpub.core._validation import check_epsilon, check_positive_int
from privpub.errors import ParameterError, PrivpubError

__all__ = ["TreeNoise", "TreePlan"]

TREE_STRUCTURES = ("fenwick", "binary")
TREE_NOISES = ("discrete", "laplace", "gaussian")
#: largest tree height a plan accepts (2**61 items per tree)
MAX_TREE_HEIGHT = 62
#: exact samplers refill in chunks growing 4x per call up to 65536 draws per distinct scale
#: (16384 for the many scales of per-node budgets): few, large sampler calls. The first chunk
#: holds about 64 trees' worth of the scale (64 to 4096 draws), so rarely used scales waste little.
_TREES_PER_FIRST_CHUNK = 64
_MIN_FIRST_CHUNK = 64
_MAX_FIRST_CHUNK = 4096
_MAX_CHUNK = 1 << 16
_MAX_CHUNK_WEIGHTED = 1 << 14
#: per-node scales of non-uniform plans are rounded *up* to this many significant bits
SCALE_BITS = 7
#: a per-item total within this relative distance of epsilon is recorded as epsilon
_TOTAL_RTOL = 1e-12


def _sample_discrete(size: int, t: int | GaussianScale, s: int, gen: np.random.Generator) -> NDArray[np.int64]:
    """``size`` exact discrete Laplace draws of scale ``t / s`` (the core sampler, uncharged), or
    exact discrete Gaussian draws when ``t`` is a :class:`~privpub.core._dgauss.GaussianScale`."""
    if isinstance(t, GaussianScale):
        return discrete_gaussian_exact(size, t, gen)
    return _discrete_laplace_exact(size, t, s, gen)


#: a pool's scale: ``(t, s, max_chunk)``, ``t / s`` a discrete Laplace scale, or ``(GaussianScale, 0, max_chunk)``
_ScaleKey = tuple[int | GaussianScale, int, int]


class _Pool:
    """Pre-drawn exact noise of one scale, refilled in a fixed schedule of chunk sizes.

    The sampler's output depends on the size of each call, so every pool draws its own
    generator's stream in the same chunks (``first``, 4 ``first``, ... up to ``max_chunk``)
    whatever the pattern of requests: one node at a time and a million at once get the same
    numbers. ``first`` depends only on the configuration that first uses the scale.
    """

    __slots__ = ("buf", "chunk", "gen", "max_chunk", "pos", "s", "t")

    def __init__(self, t: int | GaussianScale, s: int, gen: np.random.Generator, first: int, max_chunk: int) -> None:
        self.t, self.s, self.gen, self.max_chunk = t, s, gen, max_chunk
        self.buf: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.pos = 0
        self.chunk = first

    def _next_chunk(self) -> NDArray[np.int64]:
        out = _sample_discrete(self.chunk, self.t, self.s, self.gen)
        self.chunk = min(4 * self.chunk, self.max_chunk)
        return out

    def take(self, n: int) -> NDArray[np.int64]:
        rest = self.buf.shape[0] - self.pos
        if n <= rest:
            out = self.buf[self.pos : self.pos + n]
            self.pos += n
            return out
        parts = [self.buf[self.pos :]]
        need = n - rest
        while True:
            chunk = self._next_chunk()
            if chunk.shape[0] >= need:
                parts.append(chunk[:need])
                self.buf, self.pos = chunk, need
                break
            parts.append(chunk)
            need -= chunk.shape[0]
        return np.concatenate(parts)


@dataclass
class _Kind:
    """One distinct charge pattern (a branch kind of the accountant's parallel block)."""

    name: str
    charges: tuple[Charge, ...]
    charged: int = 0  # trees recorded in the accountant
    pending: int = 0  # trees served since, recorded at the next flush (same cost: no check needed)


class TreePlan:
    """Node calibration of one or more tree configurations (made by :meth:`TreeNoise.plan`).

    Attributes
    ----------
    height : int
        Tree height ``k``: ``T = 2**(k-1)`` items per tree.
    T : int
        Items per tree.
    size : int
        Nodes per tree: ``T`` (Fenwick) or ``2T - 1`` (binary).
    rows : int
        Number of configurations (trees with their own budgets) the plan holds.
    budgets : ndarray, shape (rows, size)
        Epsilon of each node (its noise is calibrated to ``sensitivity / budget`` or more).
    scales : ndarray, shape (rows, size)
        The noise scale actually used per node (``t / s`` of the exact sampler for discrete noise).
    variances : ndarray, shape (rows, size)
        Exact variance of each node's noise.
    uniform : bool
        True when every node of every row has the same scale.
    totals : ndarray, shape (rows,)
        Largest per-item epsilon of each row (what one tree of that row is charged).

    Nodes are numbered 0..size-1: Fenwick node ``v`` (local items ``(v - lowbit(v), v]``) is
    ``v - 1``; binary node ``(l, j)`` (local items ``(j 2**l, (j + 1) 2**l]``) is
    ``sum_{i<l} T / 2**i + j``.
    """

    __slots__ = ("T", "_groups", "_kinds", "_pools", "_sid", "_t", "budgets", "height", "rows", "scales", "size", "structure",
                 "totals", "uniform", "variances")

    height: int
    T: int
    size: int
    rows: int
    structure: str
    budgets: NDArray[np.float64]
    scales: NDArray[np.float64]
    variances: NDArray[np.float64]
    uniform: bool
    totals: NDArray[np.float64]
    _kinds: list[int]
    _pools: NDArray[np.int32] | None  # scale ids per node (discrete, non-uniform)
    _t: _ScaleKey | None  # the one scale key of a uniform discrete plan
    _sid: int  # its pool id (-1: none)
    _groups: dict[int, list[tuple[int, NDArray[np.int64]]]] | None  # per row: (scale id, node positions)

    def take(self, rows: slice) -> TreePlan:
        """The plan of a slice of its rows."""
        out = TreePlan()
        for name in ("height", "T", "size", "structure", "uniform", "_t", "_sid"):
            setattr(out, name, getattr(self, name))
        out.budgets, out.scales, out.variances = self.budgets[rows], self.scales[rows], self.variances[rows]
        out.rows = out.budgets.shape[0]
        out._groups = None
        out.totals = self.totals[rows]
        out._kinds = self._kinds[rows]
        out._pools = None if self._pools is None else self._pools[rows]
        return out

    def __repr__(self) -> str:
        return (f"TreePlan(structure={self.structure!r}, height={self.height}, rows={self.rows}, "
                f"uniform={self.uniform})")


def _binary_offsets(k: int) -> list[int]:
    T = 1 << (k - 1)
    out = [0]
    for lev in range(k - 1):
        out.append(out[-1] + (T >> lev))
    return out


def _item_totals(structure: str, k: int, budgets: NDArray[np.float64]) -> NDArray[np.float64]:
    """Epsilon spent by each item of a tree (rows, T): the sum of the budgets of its nodes."""
    T = 1 << (k - 1)
    if structure == "fenwick":
        S = budgets.copy()
        for lev in range(k - 2, -1, -1):  # parents (higher levels) are final before their children
            v = np.arange(1 << lev, T + 1, 1 << (lev + 1))
            S[:, v - 1] += S[:, v - 1 + (1 << lev)]
        return S  # item m's nodes are its up-path, which starts at node m
    off = _binary_offsets(k)
    S = np.zeros((budgets.shape[0], T))
    for lev in range(k):
        S += np.repeat(budgets[:, off[lev] : off[lev] + (T >> lev)], 1 << lev, axis=1)
    return S


def _item_nodes(structure: str, k: int, item: int) -> list[tuple[int, int]]:
    """``(level, node index)`` of the nodes holding local item ``item`` (1-based)."""
    T = 1 << (k - 1)
    if structure == "fenwick":
        out = []
        v = item
        while v <= T:
            out.append(((v & -v).bit_length() - 1, v - 1))
            v += v & -v
        return out
    off = _binary_offsets(k)
    return [(lev, off[lev] + ((item - 1) >> lev)) for lev in range(k)]


def _round_scales_up(scale: NDArray[np.float64]) -> NDArray[np.float64]:
    """Scales rounded *up* to ``SCALE_BITS`` significant bits (exact floats ``m 2**e``)."""
    mant, expo = np.frexp(scale)
    out: NDArray[np.float64] = np.ldexp(np.ceil(mant * (1 << SCALE_BITS)), expo - SCALE_BITS)
    return out


def _discrete_variance(t: NDArray[np.float64] | float, s: NDArray[np.float64] | float) -> Any:
    p = np.exp(-np.asarray(s, dtype=np.float64) / np.asarray(t, dtype=np.float64))
    return 2.0 * p / (1.0 - p) ** 2


class TreeNoise:
    """Noise for the nodes of trees over disjoint blocks of a stream, charged as it is served.

    Parameters
    ----------
    epsilon : float
        Event-level epsilon of the whole stream; a plan's node budgets are fractions of it.
    sensitivity : float
        Largest change of one item between neighbouring streams (Δ). Node noise has scale
        ``Δ / budget`` (at least).
    accountant : Accountant
        The stream publisher's accountant. Trees are branches of one open parallel block
        ``name`` in it; a configuration is charged before any of its noise is drawn.
    rng : int, Generator or None
        Randomness: one child generator per distinct scale, seeded in order of first use.
    noise : {"discrete", "laplace", "gaussian"}
        Exact discrete Laplace ([CKS20]_, integer values; the node values must be integers),
        exact Laplace on the dyadic grid :attr:`grid` (``g Z`` with ``Z`` the discrete Laplace of
        the node's scale in grid steps, float64 values; the node values must lie on the grid:
        integer node sums always do, real items are rounded to it, see ``real``), or the exact discrete Gaussian
        ([CKS20]_; rho-zCDP: ``epsilon`` is then the stream's **rho**, the node budgets are
        rhos, the accountant must account in zCDP, and only uniform plans are offered: node
        noise ``N_Z(0, k Δ^2 / (2 rho))`` for trees of height ``k``).
    structure : {"fenwick", "binary"}
        Which nodes a tree of height ``k`` (``T = 2**(k-1)`` items) has: the ``T`` Fenwick nodes
        (local items ``(v - lowbit(v), v]``, at most one per level holds an item) or the
        ``2T - 1`` dyadic nodes of the complete binary tree (exactly one per level).
    name : str
        Name of the parallel block in the ledger.
    real : bool
        ``noise="laplace"`` only: the items are real numbers that the publisher rounds to
        :attr:`grid` (``g rint(x / g)``) before summing them into nodes. Rounding moves one
        item's contribution by at most one more grid step, so the node noise is calibrated to
        ``sensitivity / g + 1`` steps (at most ``2**-20`` more noise); the charges still state
        ``sensitivity``.

    Attributes
    ----------
    grid : float
        ``noise="laplace"``: :func:`~privpub.core.laplace_grid` of ``(epsilon, sensitivity)``, a
        power of two at most 1 and about ``2**-20`` of the smallest node scale; 1.0 otherwise.

    Notes
    -----
    **Privacy:** each tree configuration (a :class:`TreePlan` row) is charged, for every tree
    it serves, as a branch of a parallel block: the trees hold disjoint items. Within a tree,
    changing one item by at most Δ changes exactly the nodes that contain it, each by at most
    Δ, so the tree costs the largest per-item sum of node budgets (sequential composition over
    those nodes). The recorded charges are the nodes of the item that spends most: one charge
    per level when every level has a single budget (e.g. uniform ``ε/k``), otherwise one
    charge for that item's total (a per-item total within ``1e-12`` of ε is recorded as ε).
    Exact noise rounds non-uniform scales *up* to 7 significant bits (at most 1/64 more noise)
    so that few exact samplers are needed; the charge is the requested budget. A plan whose
    items would spend more than the accountant holds raises
    :class:`~privpub.errors.BudgetExceededError` when it is opened, before anything is drawn;
    noise is drawn only for nodes of trees that were opened.

    Examples
    --------
    >>> from privpub.core import Accountant
    >>> acc = Accountant(1.0)
    >>> noise = TreeNoise(epsilon=1.0, sensitivity=1.0, accountant=acc, rng=0)
    >>> plan = noise.plan(3)                   # Fenwick trees of 4 items, budget 1/3 per node
    >>> noise.open(plan, 2)                    # two trees
    >>> noise.draw(plan, 8).dtype              # their 8 nodes, in completion order
    dtype('int64')
    >>> noise.flush(); acc.total
    1.0
    """

    def __init__(
        self,
        *,
        epsilon: float,
        sensitivity: float = 1.0,
        accountant: Accountant,
        rng: RNGLike = None,
        noise: str = "discrete",
        structure: str = "fenwick",
        name: str = "trees",
        real: bool = False,
    ) -> None:
        self.epsilon = check_epsilon(epsilon, "rho" if noise == "gaussian" else "epsilon")
        self.sensitivity = _check_sensitivity(sensitivity)
        if noise == "gaussian":
            _gaussian_scale(self.epsilon, self.sensitivity)  # a usable variance
        else:
            _check_scale(self.epsilon, self.sensitivity)  # as every core mechanism: a usable scale and inverse
        if not isinstance(accountant, Accountant):
            raise ParameterError(f"accountant must be a privpub.core.Accountant, got {type(accountant).__name__}", param="accountant")
        if noise not in TREE_NOISES:
            raise ParameterError(f"noise must be one of {TREE_NOISES}, got {noise!r}", param="noise")
        if structure not in TREE_STRUCTURES:
            raise ParameterError(f"structure must be one of {TREE_STRUCTURES}, got {structure!r}", param="structure")
        if not isinstance(real, bool) or (real and noise != "laplace"):
            raise ParameterError(f"real must be a bool, and True only with noise='laplace', got {real!r}", param="real")
        self.noise = noise
        self.real = real
        # exact Laplace: discrete Laplace in steps of the grid, node sensitivity in steps (the rounding of real
        # items adds one step); discrete noise is the same with a grid of 1
        self.grid = laplace_grid(self.epsilon, self.sensitivity) if noise == "laplace" else 1.0
        self._units = self.sensitivity / self.grid + (1 if real else 0)
        self.structure = structure
        self.name = str(name)
        self._acc = accountant
        self._block: ParallelBlock | None = None
        self._gen = as_generator(rng)
        self._mechanism = {"discrete": "discrete_laplace", "laplace": "laplace",
                           "gaussian": "discrete_gaussian"}[noise]
        self._measure = "zcdp" if noise == "gaussian" else "pure-dp"
        if accountant.measure != self._measure:
            raise ParameterError(f"noise={noise!r} needs an accountant of measure {self._measure!r}, got "
                                 f"{accountant.measure!r}", param="noise")
        self._laplace = noise == "laplace"
        self._kinds: list[_Kind] = []
        self._kind_index: dict[tuple[str, tuple[Charge, ...]], int] = {}
        self._capacity = 0  # nodes of opened trees
        self._drawn = 0  # nodes drawn
        # exact noise: distinct (t, s, max_chunk) -> id; pools by id, created on first use
        self._scale_ids: dict[_ScaleKey, int] = {}
        self._scale_list: list[_ScaleKey] = []
        self._pools: list[_Pool | None] = []
        self._uniform_plans: dict[int, TreePlan] = {}

    # -- plans -------------------------------------------------------------------------------------
    def plan(self, height: int, weights: ArrayLike | None = None) -> TreePlan:
        """The node calibration of trees of ``height`` (no charge yet; see :meth:`open`).

        Parameters
        ----------
        height : int
            Tree height ``k`` (``1 <= k <= 62``).
        weights : array_like, shape (size,) or (rows, size), optional
            Node budgets as fractions of ``epsilon`` (one row per configuration). Default: the
            uniform ``1 / k`` per node, i.e. noise ``Lap(k Δ / ε)`` (exact rational scale).
        """
        k = check_positive_int(height, "height")
        if k > MAX_TREE_HEIGHT:
            raise ParameterError(f"height must be at most {MAX_TREE_HEIGHT}, got {k}", param="height")
        if weights is None:
            cached = self._uniform_plans.get(k)
            if cached is None:
                cached = self._make_uniform(k)
                self._uniform_plans[k] = cached
            return cached
        return self._make_weighted(k, weights)

    def _check_steps(self, steps: float) -> None:
        """Exact Laplace: refuse node noise of more than 2**47 grid steps (draws must stay exact in float64)."""
        if self._laplace and (not math.isfinite(steps) or steps > _MAX_GRID_STEPS):
            raise ParameterError(f"the node noise would need {steps:.3g} grid steps, more than 2**47: use a larger "
                                 "epsilon or a smaller height", param="epsilon")

    def _sizes(self, k: int) -> tuple[int, int]:
        T = 1 << (k - 1)
        return T, (T if self.structure == "fenwick" else 2 * T - 1)

    def _make_uniform(self, k: int) -> TreePlan:
        T, size = self._sizes(k)
        plan = TreePlan()
        plan.height, plan.T, plan.size, plan.rows, plan.structure = k, T, size, 1, self.structure
        budget = self.epsilon / k
        if self.noise == "gaussian":  # per-node rho / k: sigma^2 = k Δ^2 / (2 rho)
            g = _gaussian_scale(budget, self.sensitivity)
            scale, var = math.sqrt(g.sigma2), discrete_gaussian_variance(g.sigma2)
            plan._t = (g, 0, _MAX_CHUNK)
            self._scale_id(g, 0, _MAX_CHUNK)
        else:
            self._check_steps(k * self._units / self.epsilon)
            t, s = rational_scale(self.epsilon, k * self._units)
            grid = self.grid
            scale, var = grid * t / s, grid * grid * float(_discrete_variance(float(t), float(s)))
            plan._t = (t, s, _MAX_CHUNK)
            self._scale_id(t, s, _MAX_CHUNK)
        plan.budgets = np.full((1, size), budget)
        plan.scales = np.full((1, size), scale)
        plan.variances = np.full((1, size), var)
        plan.uniform = True
        plan._pools = None
        self._finish(plan)
        return plan

    def _make_weighted(self, k: int, weights: ArrayLike) -> TreePlan:
        if self.noise == "gaussian":
            raise ParameterError("per-node budgets (weights) are not offered with Gaussian noise; "
                                 "use the uniform plan", param="weights")
        T, size = self._sizes(k)
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim == 1:
            w = w[None, :]
        if w.ndim != 2 or w.shape[1] != size:
            raise ParameterError(f"weights must have shape ({size},) or (rows, {size}) for height {k}, "
                                 f"got {np.shape(weights)}", param="weights")
        if not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ParameterError("weights must be finite and > 0", param="weights")
        plan = TreePlan()
        plan.height, plan.T, plan.size, plan.rows, plan.structure = k, T, size, w.shape[0], self.structure
        budgets = self.epsilon * w
        with np.errstate(over="ignore", divide="ignore"):
            scale = self.sensitivity / budgets
        if not np.all(np.isfinite(scale)) or scale.max() > MAX_SCALE:
            raise ParameterError(f"sensitivity / (epsilon * weight) must be a noise scale <= 2**52, got {scale.max():g}")
        if True:  # discrete and exact Laplace: the scale in grid steps (grid 1 for discrete noise)
            units = self._units / budgets
            self._check_steps(float(units.max()))
            # rounded up, and never below 2**-30 (rational_scale's floor: the sampler's t / s need integers
            # <= 2**52; an epsilon of 1e300 would otherwise ask for s ~ 2**1000); more noise, never less
            scale_q = np.maximum(_round_scales_up(units), 1.0 / _DEN_LIMIT)
            uniq, inverse = np.unique(scale_q, return_inverse=True)
            fracs = [float(v).as_integer_ratio() for v in uniq]  # exact t / s of each scale
            ids = np.array([self._scale_id(a, b, _MAX_CHUNK_WEIGHTED) for a, b in fracs], dtype=np.int32)
            plan._pools = ids[inverse.reshape(-1)].reshape(w.shape)
            plan.scales = scale_q * self.grid
            ts = np.array(fracs, dtype=np.float64).reshape(-1, 2)
            plan.variances = (self.grid * self.grid
                              * _discrete_variance(ts[:, 0], ts[:, 1])[inverse.reshape(-1)].reshape(w.shape))
            plan._t = (*fracs[0], _MAX_CHUNK_WEIGHTED) if uniq.shape[0] == 1 else None
            plan.uniform = uniq.shape[0] == 1
            if plan.uniform:
                plan._pools = None
        plan.budgets = budgets
        self._finish(plan)
        return plan

    def _finish(self, plan: TreePlan) -> None:
        """Per-row largest item total and the charge kind of each row."""
        plan._sid = -1 if plan._t is None else self._scale_ids[plan._t]
        plan._groups = None
        k, b = plan.height, plan.budgets
        totals = _item_totals(self.structure, k, b)
        worst = np.argmax(totals, axis=1)
        plan.totals = totals[np.arange(plan.rows), worst]
        if self.structure == "fenwick":
            lev = np.log2(np.arange(1, plan.T + 1) & -np.arange(1, plan.T + 1)).astype(np.int64)
        else:
            lev = np.concatenate([np.full(plan.T >> i, i) for i in range(k)])
        level_uniform = all(
            bool(np.all(b[:, lev == i] == b[:, lev == i][:, :1])) for i in range(k)
        )
        unit = "trees" if self.structure == "fenwick" else "blocks"
        kinds = []
        cache: dict[Any, int] = {}
        for r in range(plan.rows):
            if level_uniform:
                key: Any = ("levels", tuple(b[r, lev == i][0] for i in range(k)), int(worst[r]))
                if key not in cache:
                    charges = tuple(
                        Charge(self._mechanism, float(b[r, node]), self.sensitivity,
                               self._level_note(k, level, float(plan.scales[r, node])), f"level {level}",
                               self._measure)
                        for level, node in _item_nodes(self.structure, k, int(worst[r]) + 1)
                    )
                    cache[key] = self._kind(f"height-{k} {unit}", charges)
            else:
                total = float(plan.totals[r])
                if abs(total - self.epsilon) <= _TOTAL_RTOL * self.epsilon:
                    total = self.epsilon
                key = ("total", total)
                if key not in cache:
                    note = (f"height-{k} {unit} with per-node budgets: the nodes holding any one item "
                            f"(at most {k}, one per level) spend at most this in total (sequential composition)")
                    charges = (Charge(self._mechanism, total, self.sensitivity, note, "tree nodes", self._measure),)
                    cache[key] = self._kind(f"height-{k} {unit} (per-node budgets)", charges)
            kinds.append(cache[key])
        plan._kinds = kinds

    def _level_note(self, k: int, level: int, scale: float) -> str:
        T = 1 << (k - 1)
        if self.structure == "fenwick":
            what = (f"the root ({T} items)" if level == k - 1
                    else f"{T >> (level + 1)} disjoint nodes of {1 << level} items")
        else:
            what = f"{T >> level} disjoint nodes of {1 << level} items"
        if self.noise == "gaussian":
            return f"{what} per height-{k} tree, noise sigma {scale:.6g} (rho-zCDP)"
        return f"{what} per height-{k} tree, noise scale {scale:.6g}"

    def _kind(self, name: str, charges: tuple[Charge, ...]) -> int:
        key = (name, charges)
        idx = self._kind_index.get(key)
        if idx is None:
            idx = len(self._kinds)
            self._kinds.append(_Kind(name, charges))
            self._kind_index[key] = idx
        return idx

    def _scale_id(self, t: int | GaussianScale, s: int, max_chunk: int) -> int:
        key = (t, s, max_chunk)
        sid = self._scale_ids.get(key)
        if sid is None:
            sid = len(self._scale_list)
            self._scale_ids[key] = sid
            self._scale_list.append(key)
            self._pools.append(None)
        return sid

    # -- charging ----------------------------------------------------------------------------------
    def _get_block(self) -> ParallelBlock:
        if self._block is None:
            self._block = self._acc.open_parallel(self.name)
        return self._block

    def _charge_kind(self, kind: int, count: int) -> None:
        rec = self._kinds[kind]
        if rec.charged == 0:
            self._get_block().charge_branches(count, rec.charges, name=rec.name)
            rec.charged = count
        else:
            rec.pending += count

    def open(self, plan: TreePlan, count: int = 1, row: int | None = None) -> None:
        """Charge ``count`` trees of every row of ``plan`` (or of row ``row`` only) before
        their noise is drawn.

        The first tree of a charge pattern is checked against the accountant's budget
        (:class:`~privpub.errors.BudgetExceededError` if over it); later trees of the same
        pattern cost nothing more (parallel composition) and are recorded at :meth:`flush`.
        """
        if row is not None or plan.rows == 1:
            self._charge_kind(plan._kinds[0 if row is None else row], count)
            self._capacity += count * plan.size
            return
        kinds, counts = np.unique(np.asarray(plan._kinds), return_counts=True)
        for kind, c in zip(kinds.tolist(), counts.tolist()):
            self._charge_kind(kind, c * count)
        self._capacity += plan.rows * count * plan.size

    def flush(self) -> None:
        """Record the pending tree counts in the accountant (their cost was already checked)."""
        for rec in self._kinds:
            if rec.pending:
                self._get_block().charge_branches(rec.pending, rec.charges, name=rec.name)
                rec.charged += rec.pending
                rec.pending = 0

    # -- drawing -----------------------------------------------------------------------------------
    def _use(self, n: int) -> None:
        self._drawn += n
        if self._drawn > self._capacity:
            self._drawn -= n
            raise PrivpubError(
                f"noise requested for {n} more nodes than the trees opened so far hold "
                f"({self._capacity} nodes); open (charge) a tree before drawing its noise"
            )

    def _pool(self, sid: int, plan: TreePlan, row: int) -> _Pool:
        """The pool of scale ``sid``, created at its first use (by ``plan`` row ``row``)."""
        pool = self._pools[sid]
        if pool is None:
            seed = self._gen.integers(0, 1 << 63, size=2, dtype=np.int64)
            t, s, max_chunk = self._scale_list[sid]
            per_tree = plan.size if plan._pools is None else int(np.count_nonzero(plan._pools[row] == sid))
            first = min(_MAX_FIRST_CHUNK, max(_MIN_FIRST_CHUNK, _TREES_PER_FIRST_CHUNK * per_tree))
            pool = _Pool(t, s, np.random.default_rng([int(x) for x in seed]), min(first, max_chunk), max_chunk)
            self._pools[sid] = pool
        return pool

    def draw_one(self, plan: TreePlan, node: int, row: int = 0) -> Any:
        """Noise of one node (``int`` for discrete noise, ``float`` otherwise); see :meth:`draw`."""
        drawn = self._drawn + 1
        if drawn > self._capacity:
            self._use(1)  # raises
        self._drawn = drawn
        sid = plan._sid if plan._pools is None else int(plan._pools[row, node])
        pool = self._pools[sid]
        if pool is None:
            pool = self._pool(sid, plan, row)
        pos = pool.pos
        if pos == pool.buf.shape[0]:
            pool.buf, pos = pool._next_chunk(), 0
        pool.pos = pos + 1
        if self._laplace:
            return pool.buf.item(pos) * self.grid  # exact: |Z| < 2**53, the grid a power of two
        return pool.buf.item(pos)

    def draw_span(self, plan: TreePlan, start: int, count: int, row: int = 0) -> NDArray[Any]:
        """Noise of ``count`` consecutive nodes of consecutive trees of configuration ``row``,
        starting at node ``start`` of the first tree (node-completion order).

        The same numbers as :meth:`draw` with ``nodes = (start + arange(count)) % size``; exact
        noise of a plan with per-node scales is drawn per scale over whole rows of trees,
        without sorting.
        """
        if plan.uniform:
            return self.draw(plan, count)
        self._use(count)
        size = plan.size
        end = start + count
        R = -(-end // size)  # rows touched
        nfull = max(0, end // size - 1)  # full rows after the first
        last = end - (R - 1) * size if R > 1 and end % size else 0  # items of a partial last row
        M = np.empty((R, size), dtype=np.int64)
        parts = []
        for sid, P in self._groups(plan, row):
            P0 = P[(P >= start) & (P < min(end, size))]
            PL = P[P < last] if last else P[:0]
            n_sigma = P0.shape[0] + nfull * P.shape[0] + PL.shape[0]
            if n_sigma == 0:
                continue
            first = int(P0[0]) if P0.size else (size + int(P[0]) if nfull else (R - 1) * size + int(PL[0]))
            parts.append((first, sid, P, P0, PL, n_sigma))
        parts.sort(key=lambda e: e[0])  # pools are created in order of first use
        for _, sid, P, P0, PL, n_sigma in parts:
            vals = self._pool(sid, plan, row).take(n_sigma)
            a = P0.shape[0]
            M[0, P0] = vals[:a]
            if nfull:
                b = a + nfull * P.shape[0]
                M[1 : 1 + nfull, P] = vals[a:b].reshape(nfull, P.shape[0])
                a = b
            if PL.size:
                M[R - 1, PL] = vals[a:]
        return self._scaled(M.reshape(-1)[start:end])

    def _groups(self, plan: TreePlan, row: int) -> list[tuple[int, NDArray[np.int64]]]:
        """``(scale id, sorted node positions)`` of one configuration (cached on the plan)."""
        cache = plan._groups
        if cache is None:
            cache = plan._groups = {}
        out = cache.get(row)
        if out is None:
            assert plan._pools is not None
            ids = plan._pools[row]
            order = np.argsort(ids, kind="stable")
            counts = np.bincount(ids)
            bounds = np.concatenate([[0], np.cumsum(counts)])
            out = [(int(sid), np.sort(order[bounds[sid] : bounds[sid + 1]]))
                   for sid in np.flatnonzero(counts).tolist()]
            cache[row] = out
        return out

    def draw(self, plan: TreePlan, count: int, nodes: NDArray[np.int64] | None = None,
             rows: NDArray[np.int64] | None = None) -> NDArray[Any]:
        """Noise of ``count`` nodes of opened trees, in node-completion order.

        ``nodes`` (node indices, see :class:`TreePlan`) and ``rows`` (plan rows) are needed only
        when the plan is not uniform. Returns int64 (discrete) or float64 (laplace) values, to be
        added to the true node values.
        """
        self._use(count)
        if plan._pools is None:
            return self._scaled(self._pool(plan._sid, plan, 0).take(count))
        assert nodes is not None
        ids = plan._pools[0][nodes] if rows is None else plan._pools[rows, nodes]
        return self._scaled(self._draw_ids(ids, plan, rows))

    def _scaled(self, z: NDArray[np.int64]) -> NDArray[Any]:
        """Exact Laplace: the steps ``z`` times the grid (float64, exact: ``|z| < 2**53``); else ``z``."""
        if not self._laplace:
            return z
        if z.size and int(np.max(np.abs(z))) >= (1 << 53):  # probability below 2 exp(-64)
            raise PrivpubError("a Laplace node draw exceeded 2**53 grid steps (probability below 1e-27)")
        out: NDArray[np.float64] = z.astype(np.float64)
        out *= self.grid
        return out

    def _draw_ids(self, ids: NDArray[np.int32], plan: TreePlan, rows: NDArray[np.int64] | None) -> NDArray[np.int64]:
        """Draws for nodes whose scale ids are ``ids`` (in completion order), grouped by scale."""
        n = ids.shape[0]
        out = np.empty(n, dtype=np.int64)
        if n == 0:
            return out
        nsc = len(self._scale_list)
        counts = np.bincount(ids, minlength=nsc)
        present = np.flatnonzero(counts)
        if present.shape[0] == 1:
            out[:] = self._pool(int(present[0]), plan, 0 if rows is None else int(rows[0])).take(n)
            return out
        key = ids.astype(np.int16) if nsc < (1 << 15) else ids
        order = np.argsort(key, kind="stable")  # radix sort for 16-bit keys
        bounds = np.concatenate([[0], np.cumsum(counts)])
        # pools are created (seeded from the parent generator) in order of first use; the
        # first index of a scale's stably sorted group is its first use
        new = [int(i) for i in present if self._pools[i] is None]
        for i in sorted(new, key=lambda j: int(order[bounds[j]])):
            first_use = int(order[bounds[i]])
            self._pool(i, plan, 0 if rows is None else int(rows[first_use]))
        for i in present.tolist():
            pool = self._pools[i]
            assert pool is not None  # created above
            out[order[bounds[i] : bounds[i + 1]]] = pool.take(int(counts[i]))
        return out

    # -- persistence -------------------------------------------------------------------------------
    def checkpoint(self) -> None:
        """Discard pre-drawn noise that no node has used (the generator moves on).

        After a checkpoint, the noise of later nodes depends only on the generator's state, so
        a copy restored with an equal generator (:meth:`restore`) draws exactly the same.
        """
        self._pools = [None] * len(self._scale_list)

    def record(self) -> dict[str, Any]:
        """The charges made so far (plain data; no noise and no generator state)."""
        self.flush()
        return {
            "kinds": [{"name": r.name, "count": r.charged,
                       "charges": [{"mechanism": c.mechanism, "epsilon": c.epsilon, "sensitivity": c.sensitivity,
                                    "note": c.note, "step": c.step,
                                    **({"measure": c.measure} if c.measure != "pure-dp" else {})}
                                   for c in r.charges]}
                      for r in self._kinds if r.charged],
            "capacity": self._capacity,
            "drawn": self._drawn,
        }

    def restore(self, record: dict[str, Any]) -> None:
        """Re-charge a fresh accountant with a :meth:`record` (the ledger of a restored stream)."""
        if self._capacity or any(r.charged or r.pending for r in self._kinds):
            raise PrivpubError("restore() needs a TreeNoise that has not served any tree")
        for rec in record["kinds"]:
            charges = tuple(Charge(c["mechanism"], float(c["epsilon"]), c["sensitivity"], c["note"], c["step"],
                                   str(c.get("measure", "pure-dp")))
                            for c in rec["charges"])
            self._charge_kind(self._kind(str(rec["name"]), charges), int(rec["count"]))
        self._capacity = int(record["capacity"])
        self._drawn = int(record["drawn"])
