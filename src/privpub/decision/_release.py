"""The release of a decision-data publisher: a generalised contingency table with noisy counts."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privpub.core import (
    BudgetLedger,
    Publisher,
    Release,
    RNGLike,
    Schema,
    Session,
    as_generator,
    sparse_noisy_counts,
)
from privpub.decision._aggregate import DecisionCounts
from privpub.decision._kernels import expected_noise_rows
from privpub.decision._model import Attr, Cut, Specialization, encode_frame
from privpub.errors import ParameterError

__all__ = ["DecisionRelease", "TablePublisher"]


@dataclass(frozen=True, kw_only=True)
class DecisionRelease(Release):
    """The output of :class:`MAXGDDP` or :class:`DiffGen` (all fields are public, DP output).

    Attributes
    ----------
    schema : Schema
        The public schema the release was built against.
    cuts : dict of str to tuple of str
        Final cut of every attribute: node labels, or ``"[a,b)"`` intervals for numbers.
    history : tuple of Specialization
        The candidate chosen at each level, in order.
    cells : pandas.DataFrame
        One row per (leaf partition, class) cell with noisy count >= 1: the generalised value of
        every attribute, the class and ``count``.
    cell_ids : numpy.ndarray, shape (m,)
        Mixed-radix id of each released cell over (cut index of every attribute, class);
        :attr:`cell_index` unpacks it.
    counts : numpy.ndarray, shape (m,)
        The noisy counts (``cells["count"]``).
    n_cells : int
        Number of cells of the cut, empty ones included (``K * prod |cut_a|``); all were noised.
    """

    schema: Schema
    cuts: dict[str, tuple[str, ...]]
    history: tuple[Specialization, ...]
    cell_ids: NDArray[np.int64]
    counts: NDArray[np.int64]
    n_cells: int
    final_cuts: tuple[Cut, ...] = field(repr=False, compare=False)

    # -- the synthetic table -----------------------------------------------------------------
    @property
    def radix(self) -> tuple[int, ...]:
        """Sizes of the cell-id digits: ``|cut_a|`` for every attribute, then the number of classes."""
        return (*(len(c.starts) for c in self.final_cuts), len(self.schema.classes or ()))

    def cell_digit(self, j: int) -> NDArray[np.int64]:
        """Digit ``j`` of every cell id: the cut index of attribute ``j`` (``j = d``: the class code)."""
        r = self.radix
        stride = int(np.prod(np.asarray(r[j + 1 :], dtype=object))) if j + 1 < len(r) else 1
        return (self.cell_ids // stride) % r[j]

    @functools.cached_property
    def cell_index(self) -> NDArray[np.int64]:
        """``(m, d + 1)`` cut index of every attribute and class code of each row of ``cells``."""
        return np.stack([self.cell_digit(j) for j in range(len(self.radix))], axis=1)

    @functools.cached_property
    def cells(self) -> pd.DataFrame:
        """One row per released cell (count >= 1): generalised values, class and ``count``."""
        data: dict[str, Any] = {}
        for j, c in enumerate(self.final_cuts):
            data[c.attr.name] = pd.Categorical.from_codes(self.cell_digit(j), categories=pd.Index(c.labels()))
        data[str(self.schema.class_name)] = pd.Categorical.from_codes(
            self.cell_digit(len(self.final_cuts)), categories=pd.Index(list(self.schema.classes or ())))
        data["count"] = self.counts
        return pd.DataFrame(data)

    @property
    def attrs(self) -> tuple[Attr, ...]:
        return tuple(c.attr for c in self.final_cuts)

    def synthetic(self, kind: str = "generalized", *, rng: RNGLike = None) -> pd.DataFrame:
        """The synthetic table: every cell row repeated ``count`` times.

        Parameters
        ----------
        kind : {"generalized", "concrete"}
            ``"generalized"`` keeps the cut labels; ``"concrete"`` draws a uniform tick inside
            each interval (value ``lo + t * resolution``) and a uniform leaf category below each
            taxonomy node (post-processing, so still DP).
        rng : int, Generator or None
            Randomness for ``kind="concrete"``.
        """
        if kind not in ("generalized", "concrete"):
            raise ParameterError(f"kind must be 'generalized' or 'concrete', got {kind!r}", param="kind")
        rep = np.repeat(np.arange(len(self.counts)), self.counts)
        if kind == "generalized":
            return self.cells.drop(columns="count").iloc[rep].reset_index(drop=True)
        gen = as_generator(rng)
        idx = self.cell_index[rep].astype(np.int64)
        out: dict[str, Any] = {}
        for j, cut in enumerate(self.final_cuts):
            a = cut.attr
            lo = np.asarray(cut.starts, dtype=np.int64)[idx[:, j]]
            hi = np.asarray(cut.ends(), dtype=np.int64)[idx[:, j]]
            if a.kind == "cat":
                fine = gen.integers(lo, hi) if len(rep) else lo
                inv = np.empty(a.n_fine, dtype=np.int64)
                inv[np.asarray(a.cat_to_fine)] = np.arange(a.n_fine)
                out[a.name] = np.asarray(a.source.categories, dtype=object)[inv[fine]]
            else:
                tlo = lo if a.kind == "ticks" else np.asarray(a.edges, dtype=np.int64)[lo]
                thi = hi if a.kind == "ticks" else np.asarray(a.edges, dtype=np.int64)[hi]
                t = gen.integers(tlo, thi) if len(rep) else tlo
                out[a.name] = np.round(a.lo + t * a.q, 9)
        classes = np.asarray(self.schema.classes, dtype=object)
        out[str(self.schema.class_name)] = classes[idx[:, -1]]
        return pd.DataFrame(out)

    # -- mapping raw rows onto the cut -------------------------------------------------------
    def cut_index(self, data: pd.DataFrame) -> NDArray[np.int64]:
        """The cut index of every attribute for each raw row, shape ``(n, d)``."""
        fine, _ = encode_frame(self.attrs, self.schema, data, with_class=False)
        return np.stack([c.index(fine[:, j]) for j, c in enumerate(self.final_cuts)], axis=1)

    def generalize(self, data: pd.DataFrame) -> pd.DataFrame:
        """Map raw rows (e.g. a test set) onto the released cut; no noise, no budget.

        Unknown categories, NaN and numbers outside the declared range raise
        :class:`~privpub.errors.DomainError`. The class column is copied when present.
        """
        idx = self.cut_index(data)
        out = {c.attr.name: np.asarray(c.labels(), dtype=object)[idx[:, j]] for j, c in enumerate(self.final_cuts)}
        frame = pd.DataFrame(out, index=data.index)
        cls = self.schema.class_name
        if cls is not None and cls in data.columns:
            frame[cls] = data[cls].to_numpy()
        return frame

    # -- classifier features -----------------------------------------------------------------
    def feature_names(self) -> list[str]:
        names: list[str] = []
        for c in self.final_cuts:
            if c.attr.kind == "cat":
                names.extend(f"{c.attr.name}={lab}" for lab in c.labels())
            else:
                names.append(c.attr.name)
        return names

    def _features(self, column: Any, m: int) -> NDArray[np.float32]:
        width = sum(len(c.starts) if c.attr.kind == "cat" else 1 for c in self.final_cuts)
        out = np.zeros((m, width), dtype=np.float32)
        k = 0
        for j, c in enumerate(self.final_cuts):
            a, idx = c.attr, column(j)
            if a.kind == "cat":
                out[np.arange(m), k + idx] = 1.0
                k += len(c.starts)
            else:
                tl = np.asarray([a.tick_of_fine(s) for s in c.starts], dtype=np.float64)
                th = np.asarray([a.tick_of_fine(e) for e in c.ends()], dtype=np.float64)
                out[:, k] = (a.lo + a.q * (tl + th) / 2.0)[idx]
                k += 1
        return out

    def encode(self, data: pd.DataFrame) -> NDArray[np.float32]:
        """Classifier features of raw rows generalised by the cut: interval midpoints (original
        units) for numbers, one-hot over the final cut's nodes for categories (spec §4)."""
        idx = self.cut_index(data)
        return self._features(lambda j: idx[:, j], idx.shape[0])

    def encode_cells(self) -> tuple[NDArray[np.float32], NDArray[np.int64], NDArray[np.int64]]:
        """``(X, y, weight)`` of the released cells, for a classifier fit with ``sample_weight``."""
        d = len(self.final_cuts)
        return self._features(self.cell_digit, len(self.cell_ids)), self.cell_digit(d), self.counts.copy()


def _fmt_count(n: int) -> str:
    """An exact integer of any size, short: ``123456`` or ``1.23e+45``."""
    digits = str(n)
    return digits if len(digits) <= 12 else f"{digits[0]}.{digits[1:3]}e+{len(digits) - 1}"


def check_cells(n_cells: int, *, leaf_epsilon: float, noise: str, max_rows: float, when: str) -> None:
    """Refuse a cut whose leaf release cannot be made (a public check on ``n_cells`` and ``epsilon``).

    Raises :class:`~privpub.errors.ParameterError` if ``n_cells >= 2**62`` (cell ids would not
    fit in int64) or if the noise of the empty cells alone would create more than ``max_rows``
    synthetic rows. ``when`` names the cut: ``"the cut after level 3 has"``.
    """
    if n_cells >= 1 << 62:
        raise ParameterError(
            f"{when} {_fmt_count(n_cells)} cells (>= 2**62, beyond int64 cell ids); use fewer levels "
            "(levels=, CLI --levels)"
        )
    rows = expected_noise_rows(n_cells, leaf_epsilon, noise)
    if rows > max_rows:
        raise ParameterError(
            f"{when} {_fmt_count(n_cells)} cells; at leaf epsilon={leaf_epsilon:g} their noise alone "
            f"would create about {rows:.3g} synthetic rows (> max_synthetic_rows={max_rows:g}); use fewer "
            "levels (levels=, CLI --levels), a larger epsilon or a larger max_synthetic_rows"
        )


def leaf_cells(
    cuts: list[Cut], data: DecisionCounts, n_classes: int, *,
    epsilon: float, noise: str, exact: bool, max_rows: float, gen: np.random.Generator, draws: int = 1,
) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """The released cells of the final cut: ``(cell ids, counts, n_cells)`` (spec §2.7-2.8).

    The true counts of the non-empty cells come from ``data`` (one aggregation, in Spark for a
    Spark DataFrame); the public size check runs before it.

    Private: every (partition, class) cell, empty ones included, gets noise through ONE core
    mechanism, :func:`privpub.core.sparse_noisy_counts`, which charges the active accountant
    ``epsilon`` once (the cell histogram has L1 sensitivity 1) and returns the cells whose
    rounded noisy count is >= 1. ``exact`` (non-private reference runs only): the true counts.

    ``draws`` (the auditor only; the publishers pass 1): ``draws`` independent releases in one
    call, release ``i`` in the cell ids ``i * n_cells ..`` (the same true counts repeated; every
    cell gets independent noise, so each block is one run of this step).
    """
    from privpub.decision._model import n_cells_of

    sizes = [len(c.starts) for c in cuts]
    n_cells = n_cells_of(sizes, n_classes)
    if not exact:
        check_cells(n_cells, leaf_epsilon=epsilon, noise=noise, max_rows=max_rows, when="the final cut has")
    uniq, true = data.cell_counts(cuts)
    if exact:
        return uniq.astype(np.int64), true.astype(np.int64), n_cells
    # one code path for every draws (draws=1: the ids and counts unchanged)
    uniq = (uniq[None, :] + n_cells * np.arange(draws, dtype=np.int64)[:, None]).reshape(-1)
    true = np.tile(true, draws)
    out_ids, counts = sparse_noisy_counts(
        uniq, true, n_cells=n_cells * draws, epsilon=epsilon, noise=noise, rng=gen, max_released=max_rows * draws,
        note=f"{n_cells} (partition, class) cells, empty ones included (disjoint); L1 sensitivity 1")
    return out_ids, counts, n_cells


def build_release(
    *,
    cuts: list[Cut],
    cells: tuple[NDArray[np.int64], NDArray[np.int64], int],
    schema: Schema,
    history: list[Specialization],
    ledger: BudgetLedger,
    epsilon: float,
    method: str,
    private: bool,
    params: dict[str, Any],
) -> DecisionRelease:
    """Wrap the released cells of the final cut (``leaf_cells`` output) and the sealed ledger."""
    out_ids, counts, n_cells = cells
    return DecisionRelease(
        ledger=ledger, epsilon=epsilon, method=method, private=private, params=params, schema=schema,
        cuts={c.attr.name: tuple(c.labels()) for c in cuts}, history=tuple(history),
        cell_ids=out_ids, counts=counts, n_cells=n_cells,
        final_cuts=tuple(c.copy() for c in cuts),
    )


class TablePublisher(Publisher, ABC):
    """Base of the decision-data publishers (:class:`~privpub.decision.MAXGDDP`, :class:`~privpub.decision.DiffGen`).

    ``publish(data, *, schema, epsilon, rng=None, session=None)`` releases the table ``data`` (a
    DataFrame, or a Spark DataFrame, with the ``schema``'s columns and target) as a
    :class:`DecisionRelease`. :attr:`measures` says which: ``("pure-dp",)`` publishers take
    ``epsilon=``; the zCDP ones (:class:`~privpub.decision.AIM`, :class:`~privpub.decision.MST`)
    take ``rho=``.
    """

    #: the privacy measure of ``publish``'s budget
    measures: ClassVar[tuple[str, ...]] = ("pure-dp",)

    @abstractmethod
    def publish(
        self, data: Any, *, schema: Schema, epsilon: float, rng: RNGLike = None, session: Session | None = None
    ) -> DecisionRelease:
        """Release ``data`` under ``epsilon``-DP (reserved in ``session`` first, if any)."""
