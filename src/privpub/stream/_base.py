"""The stateful stream-publisher base: validation, accounting, window store, append/extend/query/answer.

Privacy by construction: every publisher owns an :class:`~privpub.core.Accountant` of its
epsilon for its whole life, and its node noise comes only from a :class:`~privpub.core.TreeNoise`
that charges that accountant per tree configuration before drawing. ``publisher.ledger`` is the
accountant's record. With ``session=``, the epsilon is reserved in the session once, when the
publisher is created.

Data minimisation: the publishers keep no raw history. Of the raw items they keep only what
future nodes need, the partial sums of the open nodes of the current tree (at most one per
level); everything else they store is released noise (nodes and noisy prefix sums) over the
window. :meth:`StreamPublisher.state` exposes that state and :meth:`StreamPublisher.from_state`
restores it, so a service can persist a stream without ever redrawing the noise of a released
node.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import (
    FLOAT_EXACT_LIMIT,
    MEMORY_BUDGET_ENV,
    PURE_DP,
    ZCDP,
    Accountant,
    BudgetLedger,
    PrivacyUnit,
    RNGLike,
    Session,
    TreeNoise,
    active_accountant,
    as_generator,
    bound_contributions,
    charge,
    check_array,
    check_epsilon,
    check_positive_int,
    check_privacy_ids,
    check_privacy_unit,
    check_real,
    check_session,
    contribution_key,
    discrete_gaussian_sigma2,
    measure_unit,
    memory_budget,
    warn_meaningless_epsilon,
)
from privpub.errors import DomainError, ParameterError, RetiredStateError

__all__ = ["StreamPublisher"]

#: items ingested per vectorised step (bounds the temporary memory of a batch)
_CHUNK = 1 << 20
NOISE_KINDS = ("discrete", "laplace")
#: exact integer streams: largest tree-local sum of true items (int64 with room for noise)
INT_SUM_LIMIT = 2**61
#: exact integer streams: largest noisy prefix sum (int64 headroom)
INT_NP_LIMIT = 2**62
#: exact integer streams: largest |noise| of one node accepted (far beyond any usable scale)
INT_NOISE_LIMIT = 2**54
#: exact integer streams: room kept below INT_NP_LIMIT for the noise of nodes not yet drawn
_NP_MARGIN = 2**56
#: integer streams: items given as floats must be below this (from it on, a float64 cannot hold every integer)
FLOAT_INT_LIMIT = 2**53
#: the unit every stream publisher protects by default: one event
EVENT = PrivacyUnit.event()
#: the privacy units a stream publisher offers (``w_event`` is refused: no publisher provides it)
STREAM_UNITS = ("event", "person_per_step")
_STATE_FORMAT = "privpub-stream-state"
_STATE_VERSION = 1


#: shared parameter documentation of the stream publishers
COMMON_PARAMS = """
    Parameters
    ----------
    window : int
        Sliding window W: queries ``[l, r]`` must satisfy ``t - W < l <= r <= t``. It bounds
        memory (about ``16 W`` bytes of released values) and the ranges that may be asked; it
        does not renew the budget.
    epsilon : float
        Event-level privacy parameter of the whole (unbounded) stream.
    rng : int, Generator or None
        Randomness for the node noise.
    sensitivity : float
        Δ, the largest change of one item between neighbouring streams (default 1: one record
        added to or removed from one time step).
    height : int or None
        Tree height (HQ variants: the initial height, used while no query length is known).
    noise : {"discrete", "laplace"}
        Exact discrete Laplace (default: integer node values, int64 sums and answers, exact end
        to end) or Laplace (the paper's choice, and required with ``real=True``), drawn exactly on a
        dyadic grid (:class:`~privpub.core.TreeNoise`: discrete Laplace in steps of
        ``laplace_grid(epsilon, sensitivity)``; real items are rounded to that grid and the node noise
        pays the rounding's one extra step), so no floating-point Laplace is drawn (Mironov 2012).
    real : bool
        Declare a real-valued stream (default False: items must be integers). Real items and the
        items of one tree must stay below 2**52 (float64 resolution). The items are rounded to the
        noise's grid ``g`` (about ``2**-20 sensitivity / epsilon``); the in-tree sums are then exact
        while one tree's items sum to less than ``2**53 g`` (about ``2**33 sensitivity / epsilon``),
        which items of at most ``sensitivity`` always do; beyond it float64 rounding of the sums
        could move a node by a few grid steps more than the sensitivity (a known limit, issue 34).
    max_item : float, optional
        The declared bound of one item (the public data domain is ``[0, max_item]``); larger
        items are refused, never clipped. Default: the exactness limit (2**61 for exact integer
        streams, 2**52 otherwise).
    session : Session, optional
        Budget session: ``epsilon`` is reserved in it once, at construction (refused, creating
        nothing, if the session cannot pay).
    memory_limit : int, optional
        Bytes the publisher's state may need (default: :func:`privpub.core.memory_budget`, i.e.
        ``PRIVPUB_MEMORY_BUDGET`` or half the physical memory, at most 64 GiB unless the variable
        sets it); checked at construction, before anything is allocated.
    privacy_unit : PrivacyUnit, optional
        Whom the stream protects: ``PrivacyUnit.event()`` (default: one event, i.e. one item
        changing by at most ``sensitivity``) or ``PrivacyUnit.person_per_step(column, k)``: all of
        one person's events of one step, at most ``k`` of them, each contributing at most
        ``sensitivity``. The nodes then draw at ``epsilon / k`` (``rho / k^2``), i.e. noise for
        the per-step sensitivity ``k x sensitivity``, and the ledger states every charge for the
        person (group privacy). Feed events with their ids through :meth:`append_events` /
        :meth:`extend_events`, which keep at most ``k`` events per person and step; counts given
        to ``append``/``extend`` must already respect that bound. ``w_event`` is refused: no
        stream publisher provides it.
"""

#: the neighbouring relation, shared by the publishers' docstrings
NEIGHBOURS = (
    "neighbouring streams have the same length and differ at one time step by at most "
    "``sensitivity`` (event level; not user level, not w-event); with "
    "``privacy_unit=PrivacyUnit.person_per_step(column, k)`` they differ by one person's events of "
    "one step, at most ``k x sensitivity``"
)


def default_memory_limit() -> int:
    """The core memory budget (:func:`privpub.core.memory_budget`: ``$PRIVPUB_MEMORY_BUDGET`` or half
    the machine's memory), capped at 64 GiB unless ``PRIVPUB_MEMORY_BUDGET`` sets it."""
    budget = memory_budget()
    return budget if os.environ.get(MEMORY_BUDGET_ENV, "").strip() else int(min(budget, 64 << 30))


def _gib(n: float) -> str:
    return f"{n / (1 << 30):.3g} GiB" if n >= (1 << 28) else f"{n / (1 << 20):.3g} MiB"


class _Store:
    """Time-indexed arrays of released values (index ``time - base``): node value ``Y`` of the
    node completed at that time and the noisy prefix ``NP``."""

    def __init__(self, capacity: int, dtype: type) -> None:
        self.base = 0
        self.capacity = capacity
        self.dtype = dtype
        self.Y: NDArray[Any] = np.zeros(capacity, dtype=dtype)
        self.NP: NDArray[Any] = np.zeros(capacity, dtype=dtype)

    def reserve(self, keep_from: int, last: int) -> None:
        """Drop times before ``keep_from`` and make room up to time ``last``."""
        keep_from = max(keep_from, self.base)
        shift = keep_from - self.base
        need = last - keep_from + 1
        cap = self.capacity
        if need > cap or need < cap // 4:
            cap = max(1024, need + need // 4)
        used = max(0, self.capacity - shift)
        for name in ("Y", "NP"):
            old = getattr(self, name)
            if cap != self.capacity:
                new: NDArray[Any] = np.zeros(cap, dtype=self.dtype)
                new[: min(used, cap)] = old[shift : shift + min(used, cap)]
                setattr(self, name, new)
            elif shift:
                old[:used] = old[shift:].copy()
        self.base = keep_from
        self.capacity = cap


class _Trees:
    """Start times and configurations of the stored trees (sorted by start)."""

    def __init__(self) -> None:
        self.starts = np.zeros(64, dtype=np.int64)
        self.cfg_ids = np.zeros(64, dtype=np.int64)
        self.n = 0
        self.table: dict[int, Any] = {}

    def _grow(self, extra: int) -> None:
        if self.n + extra > self.starts.shape[0]:
            cap = max(2 * self.starts.shape[0], self.n + extra)
            self.starts = np.concatenate([self.starts[: self.n], np.zeros(cap - self.n, dtype=np.int64)])
            self.cfg_ids = np.concatenate([self.cfg_ids[: self.n], np.zeros(cap - self.n, dtype=np.int64)])

    def append(self, start: int, cfg: Any) -> None:
        self._grow(1)
        self.table[id(cfg)] = cfg
        self.starts[self.n] = start
        self.cfg_ids[self.n] = id(cfg)
        self.n += 1

    def extend(self, starts: NDArray[np.int64], cfg: Any) -> None:
        m = starts.shape[0]
        if m == 0:
            return
        self._grow(m)
        self.table[id(cfg)] = cfg
        self.starts[self.n : self.n + m] = starts
        self.cfg_ids[self.n : self.n + m] = id(cfg)
        self.n += m

    def extend_rows(self, starts: NDArray[np.int64], cfgs: list[Any]) -> None:
        """Append trees with one configuration each."""
        m = starts.shape[0]
        if m == 0:
            return
        self._grow(m)
        ids = [id(c) for c in cfgs]
        self.table.update(zip(ids, cfgs))
        self.starts[self.n : self.n + m] = starts
        self.cfg_ids[self.n : self.n + m] = ids
        self.n += m

    def first_overlapping(self, time: int) -> int:
        """Index of the tree containing ``time`` (or the first tree after it)."""
        return max(0, int(np.searchsorted(self.starts[: self.n], time, side="right")) - 1)

    def trim_before(self, time: int) -> None:
        """Forget trees that end before ``time`` (keep the one containing it)."""
        i = self.first_overlapping(time)
        if i > 0 and i > self.n // 2:
            keep = self.n - i
            self.starts[:keep] = self.starts[i : self.n].copy()
            self.cfg_ids[:keep] = self.cfg_ids[i : self.n].copy()
            self.n = keep
            live = set(np.unique(self.cfg_ids[: self.n]).tolist())
            self.table = {k: v for k, v in self.table.items() if k in live}

    def overlapping(self, l: int, r: int) -> tuple[NDArray[np.int64], list[Any]]:
        lo = self.first_overlapping(l)
        hi = int(np.searchsorted(self.starts[: self.n], r, side="right"))
        ids = self.cfg_ids[lo:hi]
        return self.starts[lo:hi].copy(), [self.table[int(i)] for i in ids]

    def listing(self, from_time: int) -> list[tuple[int, int]]:
        lo = self.first_overlapping(from_time)
        return [(int(s), int(self.table[int(c)].k)) for s, c in zip(self.starts[lo : self.n], self.cfg_ids[lo : self.n])]


class StreamPublisher:
    """Base class of the stateful stream publishers (see the subclasses)."""

    method: ClassVar[str] = ""
    _structure: ClassVar[str] = "fenwick"
    #: the privacy measures the publisher offers (``"pure-dp"``: ``epsilon=``; ``"zcdp"``: ``rho=``)
    measures: ClassVar[tuple[str, ...]] = (PURE_DP,)
    #: whether the publisher takes ``rho=`` (zCDP, Gaussian noise) instead of ``epsilon=``
    _takes_rho: ClassVar[bool] = False
    #: whether a zCDP stream may be real-valued (its answers are real anyway)
    _real_with_rho: ClassVar[bool] = False
    measure: str = PURE_DP
    #: the event-level epsilon (pure DP; None under zCDP)
    epsilon: float | None = None
    #: the event-level rho (zCDP; None under pure DP)
    rho: float | None = None
    #: the budget in the publisher's measure: ``epsilon`` (pure DP) or ``rho`` (zCDP)
    budget: float
    #: validate the parameters and set the publisher up (``restoring=True``: no session, no charge);
    #: each subclass takes its own keyword parameters (those of its constructor)
    _init: Callable[..., None]
    #: every concrete publisher by its ``method`` (filled as subclasses are defined; :meth:`from_state`)
    _by_method: ClassVar[dict[str, type[StreamPublisher]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("method")
        if isinstance(name, str) and name:
            StreamPublisher._by_method.setdefault(name, cls)
    _T = 0  # items per tree of the open tree
    _u = 0  # items received by the open tree

    def __init__(self, **params: Any) -> None:
        """The concrete publishers (:data:`PUBLISHERS`) take keyword parameters; this base is abstract."""
        raise TypeError(f"{type(self).__name__} is abstract: use one of the stream publishers "
                        "(privpub.stream.PUBLISHERS)")

    # -- construction ---------------------------------------------------------------------------
    def _check_common(
        self,
        *,
        window: Any,
        epsilon: Any,
        sensitivity: Any,
        noise: Any,
        real: Any,
        max_item: Any,
        memory_limit: Any,
        rho: Any = None,
        privacy_unit: Any = None,
    ) -> None:
        """Validate the shared parameters (nothing is allocated or reserved yet).

        Exactly one of ``epsilon`` (pure DP) and ``rho`` (zCDP, publishers with ``_takes_rho``)
        is given; :attr:`measure` and :attr:`budget` state which. :attr:`privacy_unit` is the
        unit (event by default) and ``_node_budget`` what the record-level (per-event) node
        noise may spend: ``budget / k`` (``rho / k^2``) for ``k`` events per person and step.
        """
        self.window = check_positive_int(window, "window")
        if self.window > 2**52:
            raise ParameterError(f"window must be at most 2**52, got {self.window}", param="window")
        sens = check_real(sensitivity, "sensitivity")
        if sens <= 0:
            raise ParameterError(f"sensitivity must be > 0, got {sens}", param="sensitivity")
        self.privacy_unit = self._check_unit(privacy_unit)
        if rho is not None or epsilon is None:
            self._check_rho(epsilon, rho, sens, noise, real)
        else:
            self.measure = PURE_DP
            self.rho = None
            self.epsilon = self.budget = check_epsilon(epsilon)
        self._node_budget = self.privacy_unit.record_amount(self.budget, self.measure)
        nb = self._node_budget
        if self.measure == PURE_DP and not (sens / nb <= 2.0**52 and math.isfinite(nb / sens)):
            # the node noise's check (privpub.core.TreeNoise), made here before any session is charged
            k = self.privacy_unit.factor
            per = f" / max_contributions={k}" if k != 1 else ""
            raise ParameterError(
                f"sensitivity / epsilon must be a noise scale in (0, 2**52] with a finite inverse, got "
                f"sensitivity={sens:g}, epsilon={self.budget:g}{per}"
            )
        self.sensitivity = sens
        if not isinstance(real, bool):
            raise ParameterError(f"real must be True or False, got {real!r}", param="real")
        self.real = real
        if noise not in NOISE_KINDS:
            raise ParameterError(f"noise must be one of {NOISE_KINDS}, got {noise!r}", param="noise")
        if real and noise == "discrete":
            raise ParameterError(
                "the default discrete noise needs an integer stream; a stream of real values takes Laplace noise",
                param="noise", fix={"noise": "laplace"})
        self.noise = noise
        self._discrete = noise == "discrete"
        # exact: integer items, int64 sums and int64 noise end to end
        self._exact = self._discrete
        self._dtype: type = np.int64 if self._exact else np.float64
        self._sum_limit = INT_SUM_LIMIT if self._exact else FLOAT_EXACT_LIMIT
        if max_item is None:
            self.max_item: float | int | None = None
            self._item_limit: float = float(self._sum_limit)
        else:
            mi = check_real(max_item, "max_item")
            if mi <= 0 or mi > self._sum_limit:
                raise ParameterError(
                    f"max_item must be in (0, {'2**61' if self._exact else '2**52'}], got {mi:g}"
                , param="max_item")
            self.max_item = int(mi) if (not real and mi == math.floor(mi)) else mi
            self._item_limit = mi
        if memory_limit is None:
            self.memory_limit = default_memory_limit()
        else:
            self.memory_limit = check_positive_int(memory_limit, "memory_limit")

    def _check_rho(self, epsilon: Any, rho: Any, sens: float, noise: Any, real: Any) -> None:
        """The zCDP branch of :meth:`_check_common`: ``rho=`` instead of ``epsilon=``."""
        if not self._takes_rho:
            if rho is None:
                check_epsilon(epsilon)  # raises: epsilon missing or invalid
            raise ParameterError(f"{self.method} takes epsilon= (pure DP); the publishers that take rho= "
                                 "(zCDP, Gaussian noise) are bt, bth, mf_sqrt, blt and mf_range", param="rho")
        if epsilon is not None:
            raise ParameterError("give exactly one of epsilon= (pure DP, Laplace noise) and rho= "
                                 "(zCDP, Gaussian noise), not both", param="rho")
        if rho is None:
            raise ParameterError("epsilon= (or rho= for zCDP) is required", param="epsilon")
        self.measure = ZCDP
        self.epsilon = None
        self.rho = self.budget = check_epsilon(rho, "rho")
        # a usable variance (raises) at the per-event rho (rho / k^2 for k events per person and step)
        discrete_gaussian_sigma2(rho=self.privacy_unit.record_amount(self.rho, ZCDP), sensitivity=sens)
        if noise != "discrete" or (real is True and not self._real_with_rho):
            raise ParameterError(
                f"rho= (zCDP) uses exact discrete Gaussian noise on integer streams: leave noise='discrete' "
                f"and real=False, got noise={noise!r}, real={real!r}", param="noise")

    def _check_unit(self, privacy_unit: Any) -> PrivacyUnit:
        """The stream's :class:`~privpub.PrivacyUnit` (default one event); refuses the units no
        stream publisher provides."""
        unit = check_privacy_unit(privacy_unit, default=EVENT)
        if unit.kind == "w_event":
            raise ParameterError(
                f"{self.method or 'this publisher'} does not provide w-event privacy (no privpub stream publisher "
                "does: its budget is spent once for the whole stream, per event); use PrivacyUnit.event() or "
                "PrivacyUnit.person_per_step(column, k)", param="privacy_unit")
        if unit.kind not in STREAM_UNITS:
            raise ParameterError(
                f"a stream publisher protects events: privacy_unit must be PrivacyUnit.event() or "
                f"PrivacyUnit.person_per_step(column, k), got {unit}", param="privacy_unit")
        return unit

    def _check_memory(self, nbytes: float, what: str, option: str) -> None:
        """Refuse (before any allocation) a configuration whose state would not fit in memory."""
        if nbytes > self.memory_limit:
            raise ParameterError(
                f"{what} need about {_gib(nbytes)} of memory, more than memory_limit={_gib(self.memory_limit)}; "
                f"{option}"
            )

    def _start(self, rng: RNGLike, session: Session | None, *, restoring: bool = False) -> None:
        """Reserve the budget (session), create the accountant and the node noise."""
        unit = self.privacy_unit
        per_person = unit.kind == "person_per_step"
        if not restoring:
            session = check_session(session)
            if per_person and active_accountant() is not None:
                raise ParameterError(
                    "a stream publisher used as a step of another release is event level (the outer release "
                    "states the unit): leave privacy_unit unset here and give the unit to the outer release",
                    param="privacy_unit")
            if session is not None:
                # an event-level stream is reserved as before (one event is one record of the stream,
                # and stores written before units existed take no unit); a person-level one states its unit
                res = session.reserve(self.budget, method=self.method,
                                      data="stream (person per step)" if per_person else "stream (event level)",
                                      measure=self.measure, unit=unit if per_person else None)
                res.settle(spent=True, note=f"stream publisher: {measure_unit(self.measure)} for the stream's whole "
                                            f"life; unit: {unit}")
            if active_accountant() is None and self.measure == PURE_DP:
                warn_meaningless_epsilon(self.budget, f"the {self.method} stream")
            charge(self.method, self.budget, note="a whole stream publisher used as one step", measure=self.measure)
        self._contribution_key: str | None = None
        if per_person:
            # the key of the per-step bounding: drawn once from the publisher's rng (before any noise),
            # kept for the stream's life and in its state (a restored stream keeps the same choice)
            rng = as_generator(rng)
            if not restoring:
                self._contribution_key = contribution_key(rng)
        self._acc = Accountant(self.budget, label=self.method, measure=self.measure, unit=unit)
        self._noise = self._make_noise(rng)
        self._t = 0

    def _make_noise(self, rng: RNGLike) -> Any:
        """The node noise (a :class:`~privpub.core.TreeNoise` charging the accountant at the
        per-event budget; the accountant states each charge for the unit)."""
        gaussian = self.measure == ZCDP
        return TreeNoise(epsilon=self._node_budget, sensitivity=self.sensitivity, accountant=self._acc,
                         rng=rng, noise="gaussian" if gaussian else self.noise,
                         structure=self._structure, name="trees (disjoint blocks of the stream)",
                         real=self.real and not gaussian)

    def _to_grid(self, v: Any) -> Any:
        """Real items rounded to the node noise's grid (``g rint(x / g)``, exact; the noise pays the
        rounding's one extra step per item, see :class:`~privpub.core.TreeNoise`)."""
        g = self._noise.grid
        return np.rint(v / g) * g

    # -- read-only state ------------------------------------------------------------------------
    @property
    def ledger(self) -> BudgetLedger:
        """What the node noise has charged so far: epsilon for the whole stream, stated for its
        :attr:`privacy_unit` (event level by default; person per step: each charge ``x k``).

        One parallel block; each tree configuration is a branch kind (trees hold disjoint
        items) whose charges are the nodes of the item that spends most (sequential). The
        total never exceeds ``epsilon``.
        """
        self._noise.flush()
        return self._acc.snapshot()

    @property
    def contribution_key(self) -> str | None:
        """The 16-character key of the per-step bounding (person-per-step streams; None at event
        level): drawn once from the publisher's rng, kept in its state. Knowing it does not weaken
        the guarantee (the bound holds for any key); it fixes which of a person's events are kept."""
        return self._contribution_key

    @property
    def t(self) -> int:
        """Number of items received so far (the current time)."""
        return self._t

    @property
    def trees(self) -> list[tuple[int, int]]:
        """``(start, height)`` of the stored trees (or blocks) that meet the window, oldest first.

        ``height`` is the number of levels of the tree; the matrix-factorisation publishers
        (:class:`MFSqrt`, :class:`BLT`) have no tree and list their blocks of ``horizon`` items
        with height 0.
        """
        raise NotImplementedError  # pragma: no cover - every publisher defines it

    def lattice_coordinates(self, answers: ArrayLike) -> NDArray[np.float64] | None:
        """The coordinates in which the prefix answers ``q(1, t)``, ``t = 1..len(answers)``, are exact
        noise on an exact query (a linear release's public decoder), or None (no such structure).

        Used by :func:`privpub.audit.lattice_attack`; publishers with a linear release override it."""
        return None

    def answer_variance(self, l: int, r: int) -> float:
        """Exact variance of the noisy answer to the range ``[l, r]`` (inside the window)."""
        raise NotImplementedError  # pragma: no cover - every publisher defines it

    def _variance_checked(self, l: int, r: int) -> float:
        """:meth:`answer_variance` of a range the caller has already checked (ints in the window)."""
        return self.answer_variance(l, r)

    def _answer_one(self, l: int, r: int, t: int) -> Any:
        """The answer to one checked range ``[l, r]`` as of time ``t`` (a Python scalar)."""
        return self._answer_at(np.array([l]), np.array([r]), np.array([t]))[0].item()

    def __repr__(self) -> str:
        budget = f"rho={self.rho}" if self.measure == ZCDP else f"epsilon={self.epsilon}"
        return f"{type(self).__name__}(window={self.window}, {budget}, noise={self.noise!r}, t={self._t})"

    # -- input validation -----------------------------------------------------------------------
    def _item_error(self, v: Any) -> DomainError:
        name = f"max_item={self.max_item:g}" if self.max_item is not None else (
            "2**61 (int64 sums; declare max_item to bound the stream)" if self._exact
            else "2**52 (float64 resolution; noise added to larger values would be rounded away)")
        shown = f"{v:.6g}" if isinstance(v, float) else (str(v) if len(str(v)) < 30 else f"{str(v)[:25]}...")
        return DomainError(f"items must be at most {name}, got {shown}")

    def _check_item(self, x: Any) -> int | float:
        if type(x) is int:
            if x < 0:
                raise DomainError(f"items must be >= 0 (counts), got {x}", param="items")
            if x > self._item_limit:
                raise self._item_error(x)
            return x if not self.real else float(x)
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise DomainError(f"items must be real numbers, got {x!r}", param="items")
        if isinstance(x, numbers.Integral):
            return self._check_item(int(x))
        v = float(x)
        if not math.isfinite(v) or v < 0:
            raise DomainError(f"items must be finite and >= 0, got {v}", param="items")
        if v > self._item_limit:
            raise self._item_error(v)
        if self.real:
            return float(self._to_grid(v))
        if v != math.floor(v):
            raise DomainError(f"items must be integers (a stream of real values is declared so, with Laplace noise), "
                              f"got {v}", param="items", fix={"real": True, "noise": "laplace"})
        if v >= FLOAT_INT_LIMIT:
            raise self._float_int_error(v)
        return int(v)

    def _check_items(self, items: ArrayLike) -> NDArray[Any]:
        arr = check_array(items, "items", ndim=1, allow_empty=True)
        if arr.dtype.kind == "b":
            raise DomainError("items must be numbers (counts), got booleans", param="items")
        if arr.size == 0:
            return np.zeros(0, dtype=np.float64 if self.real else np.int64)
        if arr.dtype.kind == "u":
            if int(arr.max()) > self._item_limit:
                raise self._item_error(float(arr.max()))
            return arr.astype(np.float64 if self.real else np.int64, copy=False)
        lo = arr.min()
        if lo < 0:
            raise DomainError(f"items must be >= 0 (counts), got {lo}", param="items")
        hi = arr.max()
        if hi > self._item_limit:
            raise self._item_error(float(hi))
        if self.real:
            return np.asarray(self._to_grid(arr.astype(np.float64)), dtype=np.float64)
        if arr.dtype.kind == "f":
            frac = arr != np.floor(arr)
            if frac.any():
                raise DomainError(
                    "items must be integers (a stream of real values is declared so, with Laplace noise), "
                    f"got {arr[frac].flat[0]} at index {int(np.argmax(frac))}", param="items",
                    fix={"real": True, "noise": "laplace"})
            if hi >= FLOAT_INT_LIMIT:
                raise self._float_int_error(float(hi))
        return arr.astype(np.int64, copy=False)

    @staticmethod
    def _float_int_error(v: float) -> DomainError:
        return DomainError(
            f"items of an integer stream given as floats must be below 2**53, got {v:.6g}: from there on a float64 "
            "cannot hold every integer (2**53 + 1 is read as 2**53), so neighbouring counts could differ by more "
            "than the sensitivity; pass Python ints or an int64 array")

    def _noisy_total(self) -> float:
        """The noisy running total at the current time (bounds every later int64 sum)."""
        return 0.0

    def _check_total(self, added: float) -> None:
        """Refuse, before anything changes, items that would take an exact (int64) stream's noisy
        running total beyond 2**62 (less room for noise): it would wrap, never round."""
        if not self._exact:
            return
        total = abs(float(self._noisy_total())) + float(added)
        if total > INT_NP_LIMIT - _NP_MARGIN:
            raise DomainError(
                f"the stream's running total would reach about {total:.4g}, beyond 2**62 - 2**56 (int64 sums of "
                f"an exact integer stream; {self._t} items so far): refused, never wrapped; rescale the stream "
                "(count in larger units) or start a new one")

    def _query_msg(self, l: int, r: int) -> str:
        t, W = self._t, self.window
        if l > r:
            why = "the range is reversed (l > r)"
        elif r > t:
            why = f"r is in the future (only {t} items were received)"
        elif l < 1:
            why = "l must be >= 1"
        else:
            why = f"l is before the window (items {max(1, t - W + 1)}..{t})"
        return (f"query must satisfy max(1, t - window + 1) <= l <= r <= t with t={t}, window={W}, "
                f"got l={l}, r={r}: {why}")

    def _check_query(self, l: Any, r: Any) -> tuple[int, int]:
        for name, v in (("l", l), ("r", r)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ParameterError(f"{name} must be an integer time index, got {v!r}", param=name)
        l_, r_ = int(l), int(r)
        if not (self._t - self.window < l_ <= r_ <= self._t and l_ >= 1):
            raise ParameterError(self._query_msg(l_, r_))
        return l_, r_

    @staticmethod
    def _int_array(values: ArrayLike, name: str, shape_msg: str, ncol: int) -> NDArray[np.int64]:
        q = np.asarray(values)
        if q.size == 0:
            return np.zeros((0, ncol), dtype=np.int64)
        if q.ndim == 1 and q.shape[0] == ncol:
            q = q.reshape(1, ncol)
        if q.ndim != 2 or q.shape[1] != ncol:
            raise ParameterError(f"{name} must have shape {shape_msg}, got shape {q.shape}", param=name)
        if q.dtype.kind == "u":
            if int(q.max()) > 2**62:
                raise ParameterError(f"{name} must hold time indices below 2**62, got {int(q.max())}", param=name)
        elif q.dtype.kind != "i":
            extra = " (NaN is not a time index)" if q.dtype.kind == "f" and np.isnan(q).any() else ""
            raise ParameterError(f"{name} must be integer time indices, got dtype {q.dtype}{extra}", param=name)
        return q.astype(np.int64)

    def _check_queries(self, queries: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        q = self._int_array(queries, "queries", "(q, 2) of (l, r)", 2)
        l, r = q[:, 0], q[:, 1]
        bad = ~((l >= 1) & (l > self._t - self.window) & (l <= r) & (r <= self._t))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ParameterError(f"queries[{i}]: " + self._query_msg(int(l[i]), int(r[i])))
        return l, r

    # -- public API -----------------------------------------------------------------------------
    def append(self, x: float) -> None:
        """Receive one item (the count of the next time step)."""
        v = self._check_item(x)
        self._check_total(float(v))
        self._push(v)

    def extend(self, items: ArrayLike) -> None:
        """Receive many items at once (vectorised; same result as appending them one by one)."""
        arr = self._check_items(items)
        self._check_total(float(np.sum(arr, dtype=np.float64)))
        for a in range(0, arr.shape[0], _CHUNK):
            self._ingest(arr[a : a + _CHUNK])

    # -- events with a privacy id (person-per-step streams) ---------------------------------------
    def _bounded_events(self, steps: NDArray[np.int64], privacy_ids: ArrayLike, values: ArrayLike | None,
                        n_steps: int) -> tuple[NDArray[Any], int]:
        """Per-step items of events bounded to ``k`` per person and step (validated first), and
        the number of events kept."""
        unit = self.privacy_unit
        if unit.kind != "person_per_step" or self._contribution_key is None:
            raise ParameterError(
                f"events with privacy ids are bounded per person and step only by a stream declared with "
                f"privacy_unit=PrivacyUnit.person_per_step(column, k); this one protects {unit}: give it counts "
                "(append/extend)", param="privacy_unit")
        ids = np.asarray(privacy_ids, dtype=object)
        if ids.ndim != 1 or ids.shape[0] != steps.shape[0]:
            raise ParameterError(f"privacy_ids must hold one id per event ({steps.shape[0]}), got shape {ids.shape}",
                                 param="privacy_ids")
        if values is None:
            if self.sensitivity < 1:
                raise DomainError(f"each event counts 1, more than sensitivity={self.sensitivity:g}: give values "
                                  "(at most sensitivity each) or declare sensitivity >= 1")
            vals: NDArray[Any] = np.ones(steps.shape[0], dtype=np.float64 if self.real else np.int64)
        else:
            vals = self._check_items(values)
            if vals.shape[0] != steps.shape[0]:
                raise ParameterError(f"values must hold one value per event ({steps.shape[0]}), got {vals.shape[0]}",
                                     param="values")
            if vals.shape[0] and float(vals.max()) > self.sensitivity:
                i = int(np.argmax(vals > self.sensitivity))
                raise DomainError(f"an event contributes at most sensitivity={self.sensitivity:g}, got "
                                  f"values[{i}]={vals[i]}")
        out: NDArray[Any] = np.zeros(n_steps, dtype=vals.dtype)
        if steps.shape[0] == 0:
            return out, 0
        import pandas as pd

        pid = check_privacy_ids(ids)
        # one bounding group per (step, person): the keyed hash keeps k of a person's events of a
        # step, chosen from that person's events and the key alone
        groups = (pd.Series(steps).astype(str) + "\x1f" + pid.astype(str)).to_numpy(dtype=object)
        keep = bound_contributions(groups, int(unit.factor), key=self._contribution_key,
                                   content=None if values is None else vals)
        np.add.at(out, steps[keep], vals[keep])
        return out, int(keep.sum())

    def append_events(self, privacy_ids: ArrayLike, values: ArrayLike | None = None) -> int:
        """Receive one time step made of events with a privacy id (person-per-step streams).

        Keeps at most ``k`` events per person (``k`` of the unit; :func:`privpub.core.bound_contributions`,
        keyed by the stream's contribution key, drawn once from its rng and kept in its state) and
        appends their sum (each event counts 1, or its value, at most ``sensitivity``) as the
        step's item. Returns the number of events kept.

        Parameters
        ----------
        privacy_ids : array_like
            One id per event (missing ids are refused).
        values : array_like, optional
            Each event's contribution in ``[0, sensitivity]`` (default 1 each).
        """
        n = int(np.asarray(privacy_ids, dtype=object).reshape(-1).shape[0])
        item, kept = self._bounded_events(np.zeros(n, dtype=np.int64), privacy_ids, values, 1)
        self.extend(item)
        return kept

    def extend_events(self, steps: ArrayLike, privacy_ids: ArrayLike, values: ArrayLike | None = None, *,
                      n_steps: int | None = None) -> NDArray[Any]:
        """Receive many steps of events with privacy ids at once (person-per-step streams).

        ``steps[i]`` is event ``i``'s step counted from the next one (``0``: time ``t + 1``);
        ``n_steps`` steps are appended (default ``max(steps) + 1``; steps without events get 0).
        Each person keeps at most ``k`` events per step (as :meth:`append_events`). Returns the
        items appended (one per step).
        """
        items = self.bound_events(steps, privacy_ids, values, n_steps=n_steps)
        self.extend(items)
        return items

    def bound_events(self, steps: ArrayLike, privacy_ids: ArrayLike, values: ArrayLike | None = None, *,
                     n_steps: int | None = None) -> NDArray[Any]:
        """The items :meth:`extend_events` would append, without appending them (nothing changes).

        For callers that feed the items another way (:meth:`replay` with queries along the way).
        """
        st = np.asarray(steps)
        if st.ndim != 1 or (st.size and st.dtype.kind not in "iu"):
            raise ParameterError(f"steps must be a 1-D array of integer step offsets, got shape {st.shape}, "
                                 f"dtype {st.dtype}", param="steps")
        st = st.astype(np.int64)
        if st.size and int(st.min()) < 0:
            raise ParameterError(f"steps must be >= 0 (0 is the next step), got {int(st.min())}", param="steps")
        last = int(st.max()) + 1 if st.size else 0
        n = last if n_steps is None else check_positive_int(n_steps, "n_steps")
        if n < last:
            raise ParameterError(f"n_steps={n} is less than the last event's step + 1 ({last})", param="n_steps")
        items, _ = self._bounded_events(st, privacy_ids, values, n)
        return items

    def query(self, l: int, r: int) -> Any:
        """Noisy sum of items ``l..r`` (1-based, inclusive, inside the window).

        An ``int`` for integer streams with exact noise, else a ``float``.
        """
        l_, r_ = self._check_query(l, r)
        out = self._answer_checked(np.array([l_]), np.array([r_]))[0].item()
        self._record(np.array([r_ - l_ + 1]))
        return out

    def answer(self, queries: ArrayLike, *, record: bool = True) -> NDArray[Any]:
        """Noisy answers to a (q, 2) array of ranges ``(l, r)`` at the current time.

        int64 for integer streams with exact noise, else float64. Adaptive publishers record
        the lengths in order (as if :meth:`query` were called in a loop) unless ``record=False``.
        """
        l, r = self._check_queries(queries)
        out = self._answer_checked(l, r)
        if record:
            self._record(r - l + 1)
        return out

    def replay(self, items: ArrayLike, queries: ArrayLike) -> NDArray[Any]:
        """Ingest ``items`` while answering ``queries`` asked along the way, vectorised.

        ``queries`` is a (q, 3) integer array of ``(time, l, r)``, sorted by ``time``, where
        ``time`` is the number of items received when the query is asked. Same answers and same
        final state as appending the items one by one and calling :meth:`query` at those times.
        """
        arr = self._check_items(items)
        self._check_total(float(np.sum(arr, dtype=np.float64)))
        q = self._int_array(queries, "queries", "(q, 3) of (time, l, r)", 3)
        qt, l, r = q[:, 0], q[:, 1], q[:, 2]
        t0, n = self._t, arr.shape[0]
        if q.shape[0]:
            if np.any(np.diff(qt) < 0) or qt[0] < t0 or qt[-1] > t0 + n:
                raise ParameterError(f"query times must be sorted and within [{t0}, {t0 + n}]")
            bad = ~((l >= 1) & (l > qt - self.window) & (l <= r) & (r <= qt))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ParameterError(
                    f"queries[{i}] must satisfy max(1, time - window + 1) <= l <= r <= time "
                    f"(window={self.window}), got time={qt[i]}, l={l[i]}, r={r[i]}"
                )
        lengths = r - l + 1
        layout = self._replay_layout(t0, n, qt, lengths)
        out: NDArray[Any] = np.empty(q.shape[0], dtype=self._answer_dtype())
        done = 0
        j = int(np.searchsorted(qt, t0, side="right"))  # queries asked before any new item
        if j:
            out[:j] = self._answer_at(l[:j], r[:j], qt[:j])
            done = j
        for a in range(0, n, self._replay_step()):
            chunk = arr[a : a + self._replay_step()]
            self._ingest(chunk, self._cut_layout(layout))
            j = int(np.searchsorted(qt, self._t, side="right"))
            if j > done:
                out[done:j] = self._answer_at(l[done:j], r[done:j], qt[done:j])
                done = j
        self._record(lengths)
        return out

    # -- persistence ----------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        out = {"window": self.window, "epsilon": self.epsilon, "sensitivity": self.sensitivity,
               "noise": self.noise, "real": self.real, "max_item": self.max_item,
               "memory_limit": self.memory_limit}
        if self.measure == ZCDP:
            out["rho"] = self.rho
        return {**out, **self._unit_params()}

    def _unit_params(self) -> dict[str, Any]:
        """The unit among the saved parameters (left out for the default event unit)."""
        return {} if self.privacy_unit == EVENT else {"privacy_unit": self.privacy_unit.as_dict()}

    def state(self, *, checkpoint: bool = True, since: int | None = None) -> dict[str, Any]:
        """Everything the stream needs to continue, for persistence (see :meth:`from_state`).

        The state holds the parameters, the released noise over the window (node values and
        noisy prefix sums), the tree layout, the predictor, the ledger's charges and, of the
        raw data, only the partial sums of the open tree's unfinished nodes (at most one per
        level): **store it as confidentially as the raw stream.** It holds no generator state
        and no pre-drawn noise: calling ``state()`` discards noise drawn ahead for nodes not yet
        released, so that a publisher restored with a generator in the same state as this one's
        continues exactly as this one does. Values are Python scalars, lists and numpy arrays.

        With ``checkpoint=False`` the noise drawn ahead stays in place: this publisher continues
        exactly as if ``state()`` had not been called (a service persisting its stream after
        every step gives the same answers as the library on the same items and rng), and a
        publisher restored from the state draws the noise of nodes not yet released anew from
        its own ``rng`` (released nodes are in the state and are never redrawn).

        With ``since=t0`` (an earlier :attr:`t`), the state is a *delta*: its time-indexed arrays
        (released node values, noisy prefix sums) cover only the times that may have changed
        after ``t0`` and its tree list only the trees opened after ``t0``, so that persisting a
        stream after every write costs O(new nodes), not O(window). :func:`split_state` cuts a
        state into its small head and its time-indexed part; :func:`join_state` rebuilds the
        full state from the last head and the parts written since the window's start.
        """
        if checkpoint:
            self._noise.checkpoint()
        if since is not None:
            if isinstance(since, bool) or not isinstance(since, numbers.Integral) or not 0 <= since <= self._t:
                raise ParameterError(f"since must be an integer time in [0, t={self._t}], got {since!r}", param="since")
            since = int(since)
        out = {"format": _STATE_FORMAT, "version": _STATE_VERSION, "method": self.method,
               "params": self._params(), "t": self._t, "ledger": self._noise.record(), **self._get_state(since)}
        if self._contribution_key is not None:
            out["contribution_key"] = self._contribution_key
        if since is not None:
            out["since"] = since
        return out

    @classmethod
    def from_state(cls, state: dict[str, Any], *, rng: RNGLike = None) -> StreamPublisher:
        """Restore a publisher from :meth:`state`; later noise comes from ``rng``.

        Released nodes are never redrawn: answers over the window are identical. The restored
        publisher's ledger continues the saved one; no session is charged again (the epsilon
        was reserved when the stream was created).
        """
        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
            raise ParameterError("state must be a dict made by a stream publisher's state()", param="state")
        if state.get("since") is not None:
            raise ParameterError("state is a delta (state(since=...)): rebuild the full state with join_state first", param="state")
        if state.get("version") != _STATE_VERSION:
            raise ParameterError(f"state version {state.get('version')!r} is not supported (expected {_STATE_VERSION})")
        target = StreamPublisher._by_method.get(str(state.get("method")))
        if target is None or (cls is not StreamPublisher and not issubclass(target, cls)):
            raise ParameterError(f"state of method {state.get('method')!r} cannot restore a {cls.__name__}")
        why = target._retired(state)
        if why is not None:
            raise RetiredStateError(why, method=target.method)
        pub = target._restoring(dict(state["params"]), rng, state)
        if pub.privacy_unit.kind == "person_per_step":
            key = state.get("contribution_key")
            if not isinstance(key, str) or len(key.encode("utf-8")) != 16:
                raise ParameterError("state of a person-per-step stream must hold its 16-character contribution_key")
            pub._contribution_key = key
        pub._noise.restore(state["ledger"])
        pub._t = int(state["t"])
        pub._set_state(state)
        return pub

    @classmethod
    def _retired(cls, state: dict[str, Any]) -> str | None:
        """Why a stored ``state`` (full, or a head) of this method must not be continued, or None.

        Overridden by publishers that once stored states of a flawed mechanism."""
        return None

    @classmethod
    def _restoring(cls, params: dict[str, Any], rng: RNGLike, state: dict[str, Any]) -> StreamPublisher:
        """A publisher built from its saved parameters without drawing or charging (``from_state``)."""
        pub = cls.__new__(cls)
        pub._init(rng=rng, session=None, restoring=True, **params)
        return pub

    # -- hooks ----------------------------------------------------------------------------------
    def _answer_dtype(self) -> type:
        return self._dtype

    def _replay_step(self) -> int:
        return _CHUNK

    def _answer_at(self, l: NDArray[np.int64], r: NDArray[np.int64], t: NDArray[np.int64]) -> NDArray[Any]:
        return self._answer_checked(l, r)

    def _cut_layout(self, layout: Any) -> Any:
        return layout

    def _record(self, lengths: NDArray[np.int64]) -> None:
        return None

    def _push(self, x: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _ingest(self, x: NDArray[Any], layout: Any = None) -> None:  # pragma: no cover
        raise NotImplementedError

    def _answer_checked(self, l: NDArray[np.int64], r: NDArray[np.int64]) -> NDArray[Any]:
        raise NotImplementedError  # pragma: no cover

    def _replay_layout(self, t0: int, n: int, q_times: NDArray[np.int64], lengths: NDArray[np.int64]) -> Any:
        return None

    def _get_state(self, since: int | None = None) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _set_state(self, state: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def retired_state_reason(state: dict[str, Any]) -> str | None:
    """Why a stored stream state (full, or the head of a split state) must not be continued.

    ``None`` when the state's method and version are sound. Otherwise the reason, the same text
    :meth:`StreamPublisher.from_state` raises as :class:`~privpub.errors.RetiredStateError`: a
    service shows such a stream as closed with this reason instead of loading it.

    Examples
    --------
    >>> retired_state_reason({"method": "rtp", "params": {}}) is None
    True
    """
    if not isinstance(state, dict):
        raise ParameterError("state must be a dict made by a stream publisher's state()", param="state")
    target = StreamPublisher._by_method.get(str(state.get("method")))
    return None if target is None else target._retired(state)
