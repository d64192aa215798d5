"""The accountant: the record of what the mechanisms of one release actually spent.

Privacy by construction: a publisher never writes its ledger. It opens an :class:`Accountant`
(through :func:`accounting`, which also charges a budget :class:`~privpub.core.Session`), and
every mechanism of :mod:`privpub.core` and :mod:`privpub.ldp` *charges* the accountant at the
moment it draws its noise: ``(mechanism, epsilon, sensitivity, note)``. A charge that would take
the record over the declared budget raises :class:`~privpub.errors.BudgetExceededError` before
anything is drawn, so a release whose mechanisms spend more than its epsilon is never made. The
release carries the sealed record (:meth:`Accountant.seal`) as its ledger; nothing can be charged
after that.

Mechanisms find the accountant either as an explicit ``accountant=`` argument or, inside an
``with accountant:`` block, as the *active* accountant of the current context (a
:class:`contextvars.ContextVar`, so threads and async tasks do not share it). Outside both, a
mechanism charges nothing: calling a mechanism directly is the caller's own accounting.

Measures: an accountant states one privacy measure, ``"pure-dp"`` (the default: the budget and
the charges are epsilons) or ``"zcdp"`` (they are rhos of rho-zCDP, charged by the Gaussian
mechanisms such as :func:`~privpub.core.discrete_gaussian`). A charge in the other measure is
refused with :class:`~privpub.errors.ParameterError` (an epsilon is never added to a rho), unless
a zCDP accountant was created with ``convert_pure=True``: pure epsilon-DP charges are then
recorded, explicitly converted, as ``epsilon^2 / 2``.

Composition (basic composition, the same in both measures):

* charges at the top level add up (sequential composition);
* inside :meth:`Accountant.parallel`, charges are grouped into *branches* that each run on a
  disjoint part of the records (or users); the block costs its most expensive branch (parallel
  composition). Branches with the same sequence of charges are recorded once with a count.

Examples
--------
>>> from privpub.core import Accountant, discrete_laplace
>>> with Accountant(1.0) as acc:
...     noisy = discrete_laplace([10, 3], epsilon=0.5, rng=0)
...     with acc.parallel("per group") as block:
...         for g in range(3):
...             with block.branch(f"group {g}"):
...                 _ = discrete_laplace([4], epsilon=0.5, rng=g)
>>> acc.total
1.0
>>> [(e.mechanism, e.epsilon, e.parts) for e in acc.seal()]
[('discrete_laplace', 0.5, 1), ('discrete_laplace', 0.5, 3)]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

from privpub.core._budget import BUDGET_RTOL, BudgetLedger, LedgerEntry
from privpub.core._measures import PURE_DP, ZCDP, check_measure, measure_unit, pure_dp_to_zcdp
from privpub.core._session import Session
from privpub.core._unit import RECORD, PrivacyUnit, check_privacy_unit
from privpub.core._validation import check_epsilon, check_positive_int, check_real, warn_meaningless_epsilon
from privpub.errors import BudgetExceededError, LedgerFrozenError, ParameterError, PrivpubError

__all__ = ["Accountant", "Charge", "accounting", "active_accountant", "charge", "check_session"]

_ACTIVE: ContextVar[Accountant | None] = ContextVar("privpub_accountant", default=None)


def active_accountant() -> Accountant | None:
    """The accountant of the innermost ``with accountant:`` block of this context, if any."""
    return _ACTIVE.get()


@dataclass(frozen=True)
class Charge:
    """One charge, as a mechanism reports it (used by :meth:`ParallelBlock.charge_branches`)."""

    mechanism: str
    epsilon: float
    sensitivity: float | None = None
    note: str = ""
    step: str = ""
    measure: str = PURE_DP


def _entry_eps(e: LedgerEntry) -> float:
    return e.epsilon


class ParallelBlock:
    """A parallel-composition block of an :class:`Accountant` (see :meth:`Accountant.parallel`).

    Each :meth:`branch` holds the charges made for one disjoint part of the records. The block
    costs the largest branch total; the ledger lists each distinct branch (same charges in the
    same order) once, with the number of parts that ran it.
    """

    def __init__(self, accountant: Accountant, name: str) -> None:
        self._acc = accountant
        self.name = name
        # signature -> [count, names (first few), entries]
        self._kinds: dict[tuple[Any, ...], list[Any]] = {}
        self._closed_max = 0.0
        self._cur_name: str | None = None
        self._cur: list[LedgerEntry] = []

    # -- branches ------------------------------------------------------------------------------
    @contextmanager
    def branch(self, name: str = "") -> Iterator[None]:
        """Charges made inside belong to one disjoint part of the records, named ``name``."""
        if self._cur_name is not None:
            raise PrivpubError(f"branch {name!r} opened inside branch {self._cur_name!r} of block {self.name!r}")
        self._cur_name = str(name)
        self._cur = []
        try:
            yield
        finally:
            self._close_branch()

    def _close_branch(self) -> None:
        if self._cur_name is None:
            return
        entries, name = self._cur, self._cur_name
        self._cur_name, self._cur = None, []
        if entries:
            self._add_kind(entries, name, 1)

    def _add_kind(self, entries: list[LedgerEntry], name: str, count: int) -> None:
        sig = tuple((e.step, e.mechanism, e.epsilon, e.sensitivity, e.note) for e in entries)
        kind = self._kinds.get(sig)
        if kind is None:
            self._kinds[sig] = [count, [name], entries]
        else:
            kind[0] += count
            if len(kind[1]) < 3 and name not in kind[1]:
                kind[1].append(name)
        self._closed_max = max(self._closed_max, math.fsum(map(_entry_eps, entries)))

    def charge_branches(self, count: int, charges: Sequence[Charge], *, name: str = "") -> None:
        """Record ``count`` closed branches that each made exactly ``charges`` (bulk form).

        For mechanisms that serve many disjoint parts with one configuration (e.g. the nodes
        of one level of a stream tree, each covering disjoint time steps).
        """
        n = check_positive_int(count, "count")
        if self._cur_name is not None:
            raise PrivpubError(f"charge_branches inside the open branch {self._cur_name!r}")
        entries = [self._acc._entry(c.mechanism, c.epsilon, c.sensitivity, c.note, c.step, c.measure)
                   for c in charges]
        if not entries:
            return
        total = math.fsum(map(_entry_eps, entries))
        self._acc._check(self, max(self._closed_max, total), entries[-1])
        self._add_kind(entries, name, n)
        self._acc._n_charges += n * len(entries)

    # -- accounting ----------------------------------------------------------------------------
    def cost(self) -> float:
        """The block's epsilon: its most expensive branch."""
        return max(self._closed_max, math.fsum(map(_entry_eps, self._cur)))

    def _charge(self, entry: LedgerEntry) -> None:
        if self._cur_name is None:
            raise PrivpubError(
                f"{entry.mechanism} charged inside parallel block {self.name!r} but outside any of its "
                "branches; open `with block.branch(name):` for each disjoint part"
            )
        new_cur = math.fsum([*map(_entry_eps, self._cur), entry.epsilon])
        self._acc._check(self, max(self._closed_max, new_cur), entry)
        self._cur.append(entry)

    def entries(self) -> list[LedgerEntry]:
        """The block's charges as ledger entries (one group per branch kind)."""
        kinds = list(self._kinds.values())
        if self._cur:
            kinds.append([1, [self._cur_name or ""], list(self._cur)])
        labels: list[str] = []
        for i, (count, names, _) in enumerate(kinds):
            label = names[0] or f"kind {i + 1}"
            if count > 1:
                label += f" (+{count - 1} more)" if len(names) == 1 else f", {names[1]}, ... ({count} parts)"
            if label in labels:
                label += f" #{i + 1}"
            labels.append(label)
        out: list[LedgerEntry] = []
        for (count, _, entries), label in zip(kinds, labels):
            for e in entries:
                out.append(LedgerEntry(e.step, e.mechanism, e.epsilon, "parallel", count, e.note,
                                       e.sensitivity, self.name, label, e.unit))
        return out


class Accountant:
    """The record of the charges of one release (see the module documentation).

    Parameters
    ----------
    epsilon : float
        The declared budget; a charge that would take the total above it raises
        :class:`~privpub.errors.BudgetExceededError` before the mechanism draws.
    private : bool
        False for a non-private reference run: :meth:`leak` may then record a step with
        ``epsilon = inf``.
    label : str
        What is being released (shown in errors).
    measure : {"pure-dp", "zcdp"}
        The privacy measure of the budget and of the charges (default pure epsilon-DP). Under
        ``"zcdp"``, ``epsilon`` is the rho budget (also :attr:`rho`).
    convert_pure : bool
        zCDP accountants only: accept pure epsilon-DP charges, recorded as
        ``epsilon^2 / 2`` (an explicit conversion; default False: such a charge is refused).
    unit : PrivacyUnit, optional
        Whom the release protects (default one record). Under a unit of ``k`` records (a person
        bounded to ``k`` rows) the mechanisms draw at record level and spend
        :attr:`record_budget` (``epsilon / k``; ``rho / k^2`` under zCDP); each charge is recorded
        at the unit's level, ``k x`` (``k^2 x``) what the mechanism charged, with ``k x`` its
        sensitivity (group privacy; see :mod:`privpub.core._unit`).
    """

    def __init__(self, epsilon: float, *, private: bool = True, label: str = "", measure: str = PURE_DP,
                 convert_pure: bool = False, unit: PrivacyUnit | None = None) -> None:
        self.measure = check_measure(measure)
        self.epsilon = check_epsilon(epsilon, measure_unit(self.measure))
        if convert_pure and self.measure != ZCDP:
            raise ParameterError("convert_pure=True needs measure='zcdp'", param="convert_pure")
        self.convert_pure = bool(convert_pure)
        self.unit = check_privacy_unit(unit)
        self.private = bool(private)
        self.label = label
        self._items: list[LedgerEntry | ParallelBlock] = []
        self._step = ""
        self._block: ParallelBlock | None = None
        self._sealed: BudgetLedger | None = None
        self._n_charges = 0
        self._tokens: list[Token[Accountant | None]] = []

    # -- activation ----------------------------------------------------------------------------
    def __enter__(self) -> Accountant:
        self._tokens.append(_ACTIVE.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.reset(self._tokens.pop())

    # -- labels and blocks ---------------------------------------------------------------------
    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Charges made inside are labelled ``name`` in the ledger."""
        previous = self._step
        self._step = str(name)
        try:
            yield
        finally:
            self._step = previous

    @contextmanager
    def parallel(self, name: str) -> Iterator[ParallelBlock]:
        """A parallel-composition block: open one :meth:`ParallelBlock.branch` per disjoint part."""
        if self._block is not None:
            raise PrivpubError(f"parallel block {name!r} opened inside block {self._block.name!r}")
        self._ensure_open()
        block = ParallelBlock(self, str(name))
        self._items.append(block)
        self._block = block
        try:
            yield block
        finally:
            block._close_branch()
            self._block = None

    def open_parallel(self, name: str) -> ParallelBlock:
        """A parallel block that stays open (for stateful publishers that charge as they go)."""
        self._ensure_open()
        block = ParallelBlock(self, str(name))
        self._items.append(block)
        return block

    @contextmanager
    def within(self, block: ParallelBlock) -> Iterator[ParallelBlock]:
        """Charges made inside go to ``block`` (one made by :meth:`open_parallel`; open a
        :meth:`ParallelBlock.branch` in it): a stateful publisher resumes its block."""
        if not isinstance(block, ParallelBlock) or block._acc is not self:
            raise PrivpubError("within() takes a parallel block of this accountant")
        if self._block is not None:
            raise PrivpubError(f"block {block.name!r} resumed inside block {self._block.name!r}")
        self._ensure_open()
        self._block = block
        try:
            yield block
        finally:
            self._block = None

    # -- charging ------------------------------------------------------------------------------
    def _ensure_open(self) -> None:
        if self._sealed is not None:
            raise LedgerFrozenError(
                f"the ledger of {self.label or 'this release'} is sealed: a mechanism tried to draw after "
                "the release was made"
            )

    @property
    def rho(self) -> float | None:
        """The rho budget of a zCDP accountant (None under pure DP)."""
        return self.epsilon if self.measure == ZCDP else None

    @property
    def record_budget(self) -> float:
        """What the record-level mechanisms may spend in all: the budget for the unit, divided by
        ``k`` (``k^2`` under zCDP) for a unit of ``k`` records; the budget itself for one record."""
        return self.unit.record_amount(self.epsilon, self.measure)

    def _entry(self, mechanism: str, epsilon: float, sensitivity: float | None, note: str,
               step: str = "", measure: str = PURE_DP) -> LedgerEntry:
        measure = check_measure(measure)
        eps = check_epsilon(epsilon, name=f"{measure_unit(measure)} charged by {mechanism}")
        if measure != self.measure:
            if self.convert_pure and measure == PURE_DP:
                note = (f"{note}; " if note else "") + f"epsilon={eps:g} converted to rho=epsilon^2/2"
                eps = pure_dp_to_zcdp(eps)
            else:
                raise ParameterError(
                    f"{mechanism} charges {measure_unit(measure)} ({measure}) but {self.label or 'this release'} "
                    f"accounts in {measure_unit(self.measure)} ({self.measure}); an epsilon is never added to a "
                    "rho: convert explicitly (privpub.core.pure_dp_to_zcdp, or Accountant(rho, measure='zcdp', "
                    "convert_pure=True))", param="measure")
        sens = None if sensitivity is None else check_real(sensitivity, "sensitivity")
        k = self.unit.factor
        if k != 1:  # group privacy: a record-level charge, stated for the unit of k records
            unit_eps = self.unit.unit_amount(eps, self.measure)
            note = ((f"{note}; " if note else "") + f"record-level {measure_unit(self.measure)}={eps:.6g}, "
                    f"x {k if self.measure == PURE_DP else k * k} for {self.unit.kind}s of at most {k} records")
            eps, sens = unit_eps, None if sens is None else sens * k
        return LedgerEntry(step or self._step or mechanism, str(mechanism), eps, "sequential", 1, str(note), sens,
                           unit=self.unit)

    def _finite_total(self, block: ParallelBlock | None = None, block_cost: float = 0.0,
                      extra: float = 0.0) -> float:
        parts = [extra]
        for item in self._items:
            if isinstance(item, ParallelBlock):
                parts.append(block_cost if item is block else item.cost())
            elif math.isfinite(item.epsilon):
                parts.append(item.epsilon)
        return math.fsum(parts)

    def _check(self, block: ParallelBlock | None, block_cost: float, entry: LedgerEntry,
               extra: float = 0.0) -> None:
        self._ensure_open()
        total = self._finite_total(block, block_cost, extra)
        if total > self.epsilon * (1.0 + BUDGET_RTOL):
            where = f" in parallel block {block.name!r}" if block is not None else ""
            unit = measure_unit(self.measure)
            raise BudgetExceededError(
                f"{entry.mechanism} ({entry.step}) would charge {unit}={entry.epsilon:g}{where}, bringing "
                f"{self.label or 'the release'} to {total:.12g}, over its declared {unit}={self.epsilon:g}; "
                "nothing was drawn"
            )

    def charge(self, mechanism: str, epsilon: float, *, sensitivity: float | None = None, note: str = "",
               measure: str = PURE_DP) -> float:
        """Record that ``mechanism`` is about to draw at ``epsilon`` (raises if over budget).

        Called by the mechanisms themselves, just before they draw. ``measure`` is the measure
        of ``epsilon`` (``"zcdp"``: it is a rho); a charge in another measure than the
        accountant's is refused (see the class). Returns the amount recorded.
        """
        self._ensure_open()
        entry = self._entry(mechanism, epsilon, sensitivity, note, measure=measure)
        if self._block is not None:
            self._block._charge(entry)
        else:
            self._check(None, 0.0, entry, extra=entry.epsilon)
            self._items.append(entry)
        self._n_charges += 1
        return entry.epsilon

    def leak(self, step: str, note: str) -> None:
        """Record a step that is NOT differentially private (``epsilon = inf``); non-private runs only."""
        self._ensure_open()
        if self.private:
            raise PrivpubError(f"step {step!r} is not private, but {self.label or 'this release'} is declared private")
        self._items.append(LedgerEntry(step, "none (reads the true data)", math.inf, "sequential", 1, note,
                                       unit=self.unit))

    # -- reading -------------------------------------------------------------------------------
    @property
    def n_charges(self) -> int:
        """Number of charges made so far (0: no mechanism has touched the data)."""
        return self._n_charges

    @property
    def sealed(self) -> bool:
        return self._sealed is not None

    def _entries(self) -> list[LedgerEntry]:
        out: list[LedgerEntry] = []
        for item in self._items:
            out.extend(item.entries() if isinstance(item, ParallelBlock) else [item])
        return out

    @property
    def total(self) -> float:
        """Epsilon charged so far (``inf`` after a :meth:`leak`)."""
        if any(isinstance(i, LedgerEntry) and math.isinf(i.epsilon) for i in self._items):
            return math.inf
        return self._finite_total()

    @property
    def remaining(self) -> float:
        return max(0.0, self.epsilon - self._finite_total())

    def snapshot(self) -> BudgetLedger:
        """A frozen copy of the record so far (charging may go on)."""
        return BudgetLedger(self.epsilon, self._entries(), True, self.private, self.measure)

    def seal(self) -> BudgetLedger:
        """The frozen ledger of the release; any later charge raises :class:`LedgerFrozenError`."""
        if self._sealed is None:
            self._sealed = self.snapshot()
        return self._sealed


def charge(
    mechanism: str,
    epsilon: float,
    *,
    sensitivity: float | None = None,
    note: str = "",
    accountant: Accountant | None = None,
    measure: str = PURE_DP,
) -> None:
    """Charge ``accountant`` (or the active one, if any) for a draw; used by every mechanism.

    ``measure="zcdp"``: ``epsilon`` is a rho (the Gaussian mechanisms).
    """
    acc = accountant if accountant is not None else _ACTIVE.get()
    if acc is not None:
        if not isinstance(acc, Accountant):
            raise ParameterError(f"accountant must be a privpub.core.Accountant, got {type(acc).__name__}", param="accountant")
        acc.charge(mechanism, epsilon, sensitivity=sensitivity, note=note, measure=measure)


def check_session(session: Any) -> Session | None:
    """Return ``session`` (None or a :class:`~privpub.core.Session`) or raise :class:`ParameterError`.

    The one check of a ``session=`` argument, made by :func:`accounting` (and the stream
    publishers) before anything is reserved.
    """
    if session is None or isinstance(session, Session):
        return session
    raise ParameterError(f"session must be a privpub.Session or None, got {type(session).__name__} "
                         f"{session!r:.60}", param="session")


@contextmanager
def accounting(
    epsilon: float,
    *,
    method: str,
    session: Session | None = None,
    data: str = "",
    private: bool = True,
    measure: str = PURE_DP,
    unit: PrivacyUnit | None = None,
) -> Iterator[Accountant]:
    """The accounting frame of one ``publish`` call.

    Checks that ``session`` (if any) can pay ``epsilon`` and reserves it *before* anything is
    drawn; activates a fresh :class:`Accountant` that the mechanisms charge; on success requires
    that the publisher sealed the ledger (so the release carries the whole record) and settles
    the session. If the publisher fails before any mechanism drew, the reservation is returned;
    once noise was drawn, the session stays charged (an error that depends on the data is an
    output too).

    Inside an outer active accountant (a publisher used as a step of another), the whole
    ``epsilon`` is charged to the outer one as one mechanism.

    ``measure="zcdp"``: ``epsilon`` is the release's rho; the session must account in zCDP
    too and the outer accountant, if any, is charged a rho.

    ``unit``: whom the release protects (default one record). The session reserves ``epsilon``
    for that unit; the publisher must then spend :attr:`Accountant.record_budget` at record level
    (see :class:`Accountant`). A release used as a step of another is record-level: the outer
    release's unit applies to it.
    """
    measure = check_measure(measure)
    eps = check_epsilon(epsilon, measure_unit(measure))
    unit = check_privacy_unit(unit)
    if unit != RECORD and _ACTIVE.get() is not None:
        raise ParameterError("a release used as a step of another is stated at record level; give the privacy "
                             "unit to the outer release", param="privacy_unit")
    session = check_session(session)
    if session is not None and not private:
        raise ParameterError(
            f"{method} is not differentially private and cannot be published under a budget session"
        )
    reservation = (session.reserve(eps, method=method, data=data, measure=measure, unit=unit)
                   if session is not None else None)
    if _ACTIVE.get() is None and measure == PURE_DP:  # a step of another release was warned about by the outer one
        warn_meaningless_epsilon(eps, f"{method}'s release")
    acc: Accountant | None = None
    try:
        charge(method, eps, note="a whole release used as one step", measure=measure)
        acc = Accountant(eps, private=private, label=method, measure=measure, unit=unit)
        with acc:
            yield acc
    except BaseException as exc:
        if reservation is not None:
            drawn = acc is not None and acc.n_charges > 0
            reservation.settle(spent=drawn, note=f"failed with {type(exc).__name__}")
        raise
    assert acc is not None
    if not acc.sealed:
        if reservation is not None:
            reservation.settle(spent=True, note="failed: the publisher did not seal its ledger")
        raise PrivpubError(f"{method} returned without sealing its ledger (a bug in privpub; please report it)")
    if reservation is not None:
        reservation.settle(spent=True, note=f"ledger total {acc.total:.6g}")
