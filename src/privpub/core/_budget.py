"""Privacy budget: a frozen :class:`Budget` value, a :class:`BudgetLedger` and :func:`split`.

Composition rules (pure epsilon-DP by default; the same rules hold for rho under zCDP, see
:mod:`privpub.core._measures`, and a ledger states its ``measure``):

* **sequential** -- steps that read the same data add up: the ledger total is the sum of the
  entries.
* **parallel** -- a step that runs one mechanism with budget ``epsilon`` on each of ``parts``
  disjoint partitions of the records (each record in exactly one part) costs ``epsilon`` once.
  It is recorded as a single entry with ``composition="parallel"`` and ``parts=k``.

A ledger never holds more than its budget: :meth:`BudgetLedger.spend` raises
:class:`~privpub.errors.BudgetExceededError` if the running total would exceed the budget by
more than a relative tolerance of ``1e-9`` (floating-point slack from :func:`split`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from privpub.core._measures import (
    PURE_DP,
    ZCDP,
    check_measure,
    measure_unit,
    pure_dp_to_zcdp,
    zcdp_to_approx_dp,
)
from privpub.core._unit import RECORD, PrivacyUnit
from privpub.core._validation import check_epsilon, check_positive_int, check_real
from privpub.errors import BudgetExceededError, LedgerFrozenError, ParameterError

__all__ = ["Budget", "BudgetLedger", "LedgerEntry", "explain_entries", "ledger_total", "split"]

#: relative slack allowed when checking a total against a budget
BUDGET_RTOL = 1e-9


@dataclass(frozen=True)
class Budget:
    """A pure epsilon-DP privacy budget (a validated value).

    Examples
    --------
    >>> Budget(1.0).epsilon
    1.0
    """

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))


@dataclass(frozen=True)
class LedgerEntry:
    """One charge of a release: which mechanism spent how much epsilon, and how it composes.

    Attributes
    ----------
    step : str
        What the charge was for (e.g. ``"structure"``).
    mechanism : str
        The mechanism that drew the noise and made the charge.
    epsilon : float
        Its epsilon (``inf`` for a step that is not differentially private at all).
    composition : {"sequential", "parallel"}
        ``"parallel"``: the charge belongs to parallel block ``block``: it ran on ``parts``
        disjoint parts of the records (branches of kind ``branch``).
    parts : int
        Number of disjoint parts (branches) that ran exactly this sequence of charges.
    note : str
        Free text (neighbouring relation, sizes).
    sensitivity : float or None
        The sensitivity the mechanism was calibrated to, when it has one.
    block, branch : str
        The parallel block and the branch kind the charge belongs to (empty: top level).
    unit : PrivacyUnit
        Whom the charge protects (:class:`~privpub.PrivacyUnit`; records written before units
        existed read as one record). Under a unit of ``k`` records, ``epsilon`` and
        ``sensitivity`` are the unit's (``k x`` the record-level ones; see :mod:`privpub.core._unit`).
    """

    step: str
    mechanism: str
    epsilon: float
    composition: str = "sequential"
    parts: int = 1
    note: str = ""
    sensitivity: float | None = None
    block: str = ""
    branch: str = ""
    unit: PrivacyUnit = RECORD

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "composition": self.composition,
            "parts": self.parts,
            "note": self.note,
            "sensitivity": self.sensitivity,
            "block": self.block,
            "branch": self.branch,
            "unit": self.unit.as_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LedgerEntry:
        """Inverse of :meth:`as_dict` (older records without the newer keys are accepted)."""
        sens = d.get("sensitivity")
        return cls(
            step=str(d["step"]),
            mechanism=str(d["mechanism"]),
            epsilon=float(d["epsilon"]),
            composition=str(d.get("composition", "sequential")),
            parts=int(d.get("parts", 1)),
            note=str(d.get("note", "")),
            sensitivity=None if sens is None else float(sens),
            block=str(d.get("block", "") or ""),
            branch=str(d.get("branch", "") or ""),
            unit=PrivacyUnit.from_dict(d.get("unit")),
        )


def ledger_total(entries: Sequence[LedgerEntry]) -> float:
    """Total epsilon of ``entries`` under basic composition.

    Top-level entries add up. Entries of one parallel block are grouped by branch kind; a
    branch kind costs the sum of its entries, and the block costs its most expensive branch
    kind (the branches hold disjoint records). An old-style parallel entry with no block name
    is a block of its own.
    """
    seq: list[float] = []
    blocks: dict[str, dict[str, list[float]]] = {}
    for i, e in enumerate(entries):
        if e.composition == "parallel":
            block = e.block or f"#{i}"
            blocks.setdefault(block, {}).setdefault(e.branch, []).append(e.epsilon)
        else:
            seq.append(e.epsilon)
    for kinds in blocks.values():
        seq.append(max(math.fsum(v) for v in kinds.values()))
    if any(math.isinf(v) for v in seq):
        return math.inf
    return math.fsum(seq)


def _block_terms(entries: Sequence[LedgerEntry]) -> list[tuple[str, float, Any]]:
    """Top-level terms of the total, in order: ``("seq", eps, entry)`` or ``("block", cost, info)``."""
    terms: list[tuple[str, float, Any]] = []
    blocks: dict[str, dict[str, Any]] = {}
    for i, e in enumerate(entries):
        if e.composition != "parallel":
            terms.append(("seq", e.epsilon, e))
            continue
        name = e.block or f"#{i}"
        info = blocks.get(name)
        if info is None:
            info = blocks[name] = {"name": e.block or e.step, "kinds": {}, "parts": {}, "n_entries": 0}
            terms.append(("block", 0.0, info))
        info["kinds"].setdefault(e.branch, []).append(e.epsilon)
        info["parts"][e.branch] = e.parts
        info["n_entries"] += 1
    out = []
    for kind, cost, info in terms:
        if kind == "block":
            sums = {b: math.fsum(v) for b, v in info["kinds"].items()}
            top = max(sums, key=lambda b: sums[b])
            info.update(cost=sums[top], top=top, naive=math.fsum(math.fsum(v) for v in info["kinds"].values()),
                        n_parts=sum(info["parts"].values()))
            cost = sums[top]
        out.append((kind, cost, info))
    return out


def _branch_words(b: dict[str, Any]) -> str:
    n = len(b["kinds"][b["top"]])
    steps = f"{n} steps in sequence, " if n > 1 else ""
    return f" ({b['top']}: {steps}{b['cost']:.6g})" if b["top"] else f" ({steps}{b['cost']:.6g})"


def explain_entries(entries: Sequence[LedgerEntry], budget: float | None = None) -> str:
    """How the total of ``entries`` composes, in words (see :meth:`BudgetLedger.explain`).

    The total stated is :func:`ledger_total` of the entries.
    """
    total = ledger_total(entries)
    if not entries:
        return "spent 0: no mechanism drew any noise"
    leaks = [e for e in entries if math.isinf(e.epsilon)]
    if leaks:
        return (f"spent inf: not private, step {leaks[0].step!r} reads the true data "
                f"({leaks[0].note or 'a non-private reference'})")
    terms = _block_terms(entries)
    head = f"spent {total:.6g}"
    if len(terms) > 1:
        head += " = " + " + ".join(_formula_parts(terms))
    words = _composition_words(terms)
    out = head + (": " + "; ".join(words) if words else "")
    if budget is not None and math.isfinite(budget) and total < budget * (1 - 1e-9):
        out += f"; {budget - total:.6g} of the budget left unspent"
    return out


def _formula_parts(terms: list[tuple[str, float, Any]]) -> list[str]:
    """The terms of the total's formula: consecutive sequential entries of one step and equal
    epsilon grouped (``3 x 0.1 (level)``), at most 8 terms shown."""
    groups: list[list[Any]] = []
    for kind, cost, obj in terms:
        label = obj.step if kind == "seq" else obj["name"]
        if groups and groups[-1][0] == kind == "seq" and groups[-1][1] == label and groups[-1][2] == cost:
            groups[-1][3] += 1
        else:
            groups.append([kind, label, cost, 1])
    parts = [f"{n} x {cost:.6g} ({label})" if n > 1 else f"{cost:.6g} ({label})" for _kind, label, cost, n in groups]
    if len(parts) > 8:
        parts = [*parts[:6], f"... {len(parts) - 7} more terms ...", parts[-1]]
    return parts


def _composition_words(terms: list[tuple[str, float, Any]]) -> list[str]:
    """Why the terms add up as they do: sequential steps add, a parallel block costs its costliest branch."""
    n_seq = sum(1 for k, _, _ in terms if k == "seq")
    blocks = [obj for k, _, obj in terms if k == "block"]
    words: list[str] = []
    if n_seq > 1 or (n_seq and blocks):
        words.append("sequential steps add up")
    elif n_seq == 1 and not blocks:
        words.append("one step")
    if len(blocks) == 1:
        b = blocks[0]
        if b["n_parts"] > 1:
            words.append(_one_block_words(b))
        elif not n_seq:
            words.append("one step")
    elif blocks:
        naive = math.fsum(b["naive"] for b in blocks)
        cost = math.fsum(b["cost"] for b in blocks)
        n_parts = sum(b["n_parts"] for b in blocks)
        text = (f"each of the {len(blocks)} parallel blocks ran on disjoint parts ({n_parts} parts in all) "
                "and costs its costliest branch")
        if naive > cost * (1 + 1e-9):
            text += f" ({cost:.6g} in all, not the sum of their entries, {naive:.6g})"
        words.append(text)
    return words


def _one_block_words(b: dict[str, Any]) -> str:
    """One parallel block of several branches, in words."""
    n_kinds = len(b["kinds"])
    kinds = f" ({n_kinds} kinds of branch)" if 1 < n_kinds < b["n_parts"] else ""
    text = (f"block {b['name']!r} ran its {b['n_parts']} branches{kinds} in parallel on disjoint parts "
            "of the data, so it costs its costliest branch"
            + _branch_words(b))
    if b["naive"] > b["cost"] * (1 + 1e-9):
        text += f", not the sum of its entries ({b['naive']:.6g})"
    return text


def split(epsilon: float, weights: Sequence[float]) -> tuple[float, ...]:
    """Split ``epsilon`` into parts proportional to ``weights`` that add up to ``epsilon``.

    The last part is ``epsilon - fsum(others)``, so ``math.fsum(parts) == epsilon`` up to one
    rounding of that subtraction.

    Examples
    --------
    >>> split(1.0, [1, 3])
    (0.25, 0.75)
    """
    eps = check_epsilon(epsilon)
    if isinstance(weights, str | bytes) or not hasattr(weights, "__iter__"):
        raise ParameterError(f"weights must be a sequence of positive numbers, got {weights!r}", param="weights")
    ws = [check_real(w, "weights") for w in weights]
    if not ws:
        raise ParameterError("weights must not be empty, got []", param="weights")
    if any(w <= 0 for w in ws):
        raise ParameterError(f"weights must all be > 0, got {ws}", param="weights")
    total = math.fsum(ws)
    parts = [eps * w / total for w in ws[:-1]]
    parts.append(eps - math.fsum(parts))
    if not all(p > 0.0 for p in parts):  # an epsilon near the smallest float underflows to 0
        raise ParameterError(
            f"epsilon must be large enough to split into {len(ws)} parts > 0 (weights {ws}), got {eps:g}"
        , param="epsilon")
    return tuple(parts)


@dataclass
class BudgetLedger:
    """The record of every privacy-spending step of one release.

    Releases carry a frozen ledger made by a :class:`~privpub.core.Accountant`: the mechanisms
    charge the accountant when they draw, and the accountant's record *is* the ledger. The
    low-level :meth:`spend` remains for building a record by hand outside a release (tests,
    tutorials); the publishers never call it.

    Parameters
    ----------
    epsilon : float
        The budget the ledger may spend (the epsilon the user asked for).
    private : bool
        False for the record of a non-private reference run (a step with ``epsilon = inf``
        may then be recorded and :attr:`total` is ``inf``).
    measure : {"pure-dp", "zcdp"}
        The privacy measure of the budget and of every entry: under ``"zcdp"`` the numbers
        called ``epsilon`` (the budget, the entries' amounts, :attr:`total`) are rhos of
        rho-zCDP (also readable as :attr:`rho`). Old records without it are pure DP.

    Examples
    --------
    >>> ledger = BudgetLedger(1.0)
    >>> eps_sort, eps_means = split(1.0, [1, 1])
    >>> ledger.spend("sort", "laplace", eps_sort)
    0.5
    >>> ledger.spend("group means", "laplace", eps_means, composition="parallel", parts=7)
    0.5
    >>> ledger.total
    1.0
    """

    epsilon: float
    _entries: list[LedgerEntry] = field(default_factory=list, repr=False)
    _frozen: bool = field(default=False, repr=False)
    private: bool = True
    measure: str = PURE_DP

    def __post_init__(self) -> None:
        if isinstance(self.epsilon, Budget):
            self.epsilon = self.epsilon.epsilon
        self.measure = check_measure(self.measure)
        self.epsilon = check_epsilon(self.epsilon, measure_unit(self.measure))

    # -- recording -------------------------------------------------------------------------
    def spend(
        self,
        step: str,
        mechanism: str,
        epsilon: float,
        *,
        composition: str = "sequential",
        parts: int = 1,
        note: str = "",
    ) -> float:
        """Record one step by hand and return its epsilon (low level; publishers never call it).

        Parameters
        ----------
        step, mechanism : str
            What the step does and which mechanism it runs.
        epsilon : float
            The step's epsilon (for a parallel step: the epsilon each disjoint part gets).
        composition : {"sequential", "parallel"}
            ``"parallel"`` means the mechanism ran on ``parts`` disjoint partitions.
        parts : int
            Number of disjoint partitions of a parallel step.

        Raises
        ------
        BudgetExceededError
            If the total would exceed the budget (relative tolerance ``1e-9``).
        LedgerFrozenError
            If the ledger belongs to a published release.
        """
        eps = check_epsilon(epsilon, name=f"epsilon of step {step!r}")
        if composition not in ("sequential", "parallel"):
            raise ParameterError(
                f"composition must be 'sequential' or 'parallel', got {composition!r}"
            , param="composition")
        n_parts = check_positive_int(parts, "parts")
        self._append_checked(LedgerEntry(step, mechanism, eps, composition, n_parts, note))
        return eps

    def _append_checked(self, entry: LedgerEntry) -> None:
        if self._frozen:
            raise LedgerFrozenError("this ledger belongs to a release and is frozen; start a new one")
        new_total = ledger_total([*self._entries, entry])
        if new_total > self.epsilon * (1.0 + BUDGET_RTOL) and not (math.isinf(new_total) and not self.private):
            raise BudgetExceededError(
                f"step {entry.step!r} would spend epsilon={entry.epsilon:g}, bringing the total to "
                f"{new_total:.12g}, over the budget epsilon={self.epsilon:g} (remaining {self.remaining:.12g})"
            )
        self._entries.append(entry)

    def spend_rest(self, step: str, mechanism: str, **kwargs: Any) -> float:
        """Spend exactly the remaining budget on one step (avoids rounding gaps)."""
        rest = self.epsilon - self.total
        if rest <= self.epsilon * BUDGET_RTOL:
            raise BudgetExceededError(f"step {step!r}: no budget left (total {self.total:.12g})")
        return self.spend(step, mechanism, rest, **kwargs)

    def freeze(self) -> BudgetLedger:
        """Return a frozen copy: what a release carries."""
        return BudgetLedger(self.epsilon, list(self._entries), True, self.private, self.measure)

    @classmethod
    def from_records(cls, epsilon: float, records: Sequence[dict[str, Any]], *, private: bool = True,
                     measure: str = PURE_DP) -> BudgetLedger:
        """A frozen ledger from :meth:`to_records` output (reading a saved release)."""
        entries = [LedgerEntry.from_dict(r) for r in records]
        return BudgetLedger(epsilon, entries, True, private, measure)

    # -- measures --------------------------------------------------------------------------
    @property
    def rho(self) -> float | None:
        """The rho budget of a zCDP ledger (None for a pure-DP ledger: convert with :meth:`to_zcdp`)."""
        return self.epsilon if self.measure == ZCDP else None

    def to_zcdp(self) -> BudgetLedger:
        """This pure-DP ledger restated under zCDP (explicit conversion; a zCDP ledger is returned as is).

        Each entry's epsilon becomes ``epsilon^2 / 2`` (Bun and Steinke 2016, Prop. 1.4) and the budget
        ``epsilon^2 / 2``; composition is then re-done in rho (which is never looser than
        converting the total).
        """
        if self.measure == ZCDP:
            return self
        if not self.private or math.isinf(self.total):
            raise ParameterError("a non-private record has no zCDP guarantee to convert to")
        entries = [LedgerEntry(e.step, e.mechanism, pure_dp_to_zcdp(e.epsilon), e.composition, e.parts,
                               (e.note + "; " if e.note else "") + f"converted from epsilon={e.epsilon:g}",
                               e.sensitivity, e.block, e.branch, e.unit) for e in self._entries]
        return BudgetLedger(pure_dp_to_zcdp(self.epsilon), entries, True, True, ZCDP)

    def approx_dp(self, delta: float) -> float:
        """The epsilon of the ``(epsilon, delta)``-DP guarantee this ledger's total implies.

        Pure DP: the total itself (for any delta). zCDP: ``rho + 2 sqrt(rho ln(1/delta))``
        (Bun and Steinke 2016, Prop. 1.3) of the total rho.
        """
        total = self.total
        if self.measure == PURE_DP or math.isinf(total):
            return total
        return zcdp_to_approx_dp(total, delta) if total > 0 else 0.0

    # -- reading ---------------------------------------------------------------------------
    @property
    def frozen(self) -> bool:
        return self._frozen

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries)

    @property
    def total(self) -> float:
        """Epsilon spent (sequential entries add, each parallel block costs its costliest branch)."""
        return ledger_total(self._entries)

    @property
    def remaining(self) -> float:
        return max(0.0, self.epsilon - self.total)

    def is_exhausted(self, rtol: float = 1e-9) -> bool:
        """True when the whole budget has been spent (within ``rtol``)."""
        return abs(self.total - self.epsilon) <= rtol * self.epsilon

    def __iter__(self) -> Iterator[LedgerEntry]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BudgetLedger):
            return NotImplemented
        return ((self.epsilon, self._entries, self.private, self.measure)
                == (other.epsilon, other._entries, other.private, other.measure))

    __hash__ = None  # type: ignore[assignment]

    @property
    def unit(self) -> PrivacyUnit:
        """Whom the release protects: the unit of its charges (one record when there are none).

        Raises :class:`~privpub.errors.ParameterError` for a ledger whose charges state units
        that do not compose (a ledger made by an accountant never holds such charges)."""
        units = {e.unit for e in self._entries}
        if not units:
            return RECORD
        first = self._entries[0].unit
        if any(not first.same_protection(u) for u in units):
            raise ParameterError(f"the ledger mixes privacy units {sorted(map(str, units))}", param="privacy_unit")
        return first

    def to_records(self) -> list[dict[str, Any]]:
        return [e.as_dict() for e in self._entries]

    def to_frame(self) -> Any:
        """The entries as a :class:`pandas.DataFrame` (one row per step)."""
        import pandas as pd

        return pd.DataFrame(
            self.to_records(),
            columns=["step", "mechanism", "epsilon", "composition", "parts", "note", "sensitivity",
                     "block", "branch", "unit"],
        )

    def explain(self) -> str:
        """The total in words, computed from the composition the entries state.

        Sequential entries add up; each parallel block costs its costliest branch (its branches
        ran on disjoint parts of the records), not the sum of its entries. The number after
        ``spent`` is :attr:`total`.

        Examples
        --------
        >>> ledger = BudgetLedger(1.0)
        >>> _ = ledger.spend("sort", "laplace", 0.5)
        >>> _ = ledger.spend("group means", "laplace", 0.5, composition="parallel", parts=7)
        >>> print(ledger.explain())  # doctest: +NORMALIZE_WHITESPACE
        spent 1 = 0.5 (sort) + 0.5 (group means): sequential steps add up; block 'group means' ran its 7 branches in
        parallel on disjoint parts of the data, so it costs its costliest branch (0.5)
        """
        return explain_entries(self._entries, self.epsilon)

    def __str__(self) -> str:
        unit = measure_unit(self.measure)
        head = "budget epsilon" if self.measure == PURE_DP else "budget rho (zCDP)"
        lines = [f"{head}={self.epsilon:g}, {self.explain()}"]
        if self._entries and self.unit != RECORD:
            lines.append(f"  protects: {self.unit}")
        for e in self._entries:
            if e.composition == "parallel":
                where = f" in block {e.block!r}" if e.block else ""
                kind = f", branch {e.branch}" if e.branch else ""
                extra = f" over {e.parts} disjoint parts{where}{kind}"
            else:
                extra = ""
            lines.append(f"  {e.step}: {e.mechanism}, {unit}={e.epsilon:.6g} ({e.composition}{extra})")
        return "\n".join(lines)
