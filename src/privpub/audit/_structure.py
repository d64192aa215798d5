"""Structural privacy checks: distinguishers that read the joint structure of a release.

The epsilon auditor (:func:`~privpub.audit.audit_epsilon`) looks at a release's values, one
statistic at a time; it measures the noise's *scale*. A mechanism can have the right scale and
still leak through the *structure* of what it releases (issue 34): integer noise added to a
non-integer query leaves the query's fractional parts in public linear combinations of the
answers; float Laplace leaves the input in the low-order bits of its output [Mir12]_; a value
released only when a count is non-zero makes an output reachable under one neighbour only.
:func:`audit_structure` runs a publisher many times on two neighbouring inputs and tests three
families of events, each computed from the release alone (post-processing, so every event
``E`` of an ``(epsilon, delta)``-DP release obeys ``P[E | D] <= e^epsilon P[E | D'] + delta``):

``"lattice"``
    On the *lattice coordinates* (the public decoder's inverse of a linear release,
    ``lattice_coordinates(answers)`` of a stream publisher; otherwise the numeric leaves of
    the release): how many coordinates are off the integers, each coordinate's fractional part
    (eight bins and "integer"), its residue modulo 2 and 3, and the coarsest dyadic grid
    ``2^-k`` (``k <= 8``) that holds every coordinate.
``"float_bits"``
    On the numeric leaves as float64: each leaf's lowest set bit (the finest grid ``2^e`` it
    lies on; Mironov's set of representable outputs), its number of significant bits, its four
    lowest mantissa bits, and the finest grid over all leaves.
``"support"``
    The release's skeleton (fields, shapes, dtypes, strings), its number of leaves, the
    patterns of exact zeros, signs and non-finite values, each leaf's zero/sign, and the exact
    release: an outcome that appears under one input and never under the other.

**The test.** As in the epsilon auditor, a first batch of runs (``selection``) proposes
events: each feature's values are cells, and candidates are tails of ordered features and
unions of the cells with the largest likelihood ratio, in both directions; the ``n_events``
best per check are kept. Fresh runs then estimate each kept event ``E`` (more likely under
input ``A`` than ``B``): the check *flags* when, for some kept event,
``lower_p - delta > e^epsilon upper_q`` with exact one-sided Clopper-Pearson bounds
``lower_p`` on ``P[E | A]`` and ``upper_q`` on ``P[E | B]`` at level ``alpha / (2 n_events)``
each (``alpha = 1 - confidence``). For an ``(epsilon, delta)``-DP release a flag needs one of
the ``2 n_events`` bounds to fail, so **each check flags an honest release with probability at
most** ``alpha`` (0.001 by default), whatever the events chosen. A flag is evidence, at that
confidence, that the release is not ``(epsilon, delta)``-DP for this pair of inputs; a pass
proves nothing beyond the events tried. zCDP releases are tested at the ``(epsilon, delta)``
that ``rho`` implies (:func:`~privpub.core.zcdp_to_approx_dp`, ``delta = 1e-6`` by default).

:func:`structure_targets` builds one target per publisher of every registry
(``privpub.histogram/spatial/decision/stream/ldp_synth.PUBLISHERS``), each running the
publisher's own ``publish`` (or ``extend`` and ``answer``) on tiny worst-case neighbouring
inputs; a publisher added to a registry is covered without new code. :func:`lattice_attack`
is issue 34's attack on a stream publisher: decode the prefix answers with the publisher's
public decoder and ask whether every coordinate is an integer.

References
----------
.. [Mir12] Mironov. On significance of the least significant bits for differential privacy.
   CCS 2012.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpub.audit._auditor import _candidates, clopper_pearson_bounds, split_trials
from privpub.core import RNGLike, as_generator, check_epsilon, check_positive_int, check_probability
from privpub.errors import ParameterError

__all__ = [
    "CHECKS",
    "LatticeAttack",
    "StructureResult",
    "StructureTarget",
    "audit_structure",
    "lattice_attack",
    "observed",
    "release_leaves",
    "stream_run",
    "structure_targets",
]

#: the structural checks, in the order they are reported
CHECKS = ("lattice", "float_bits", "support")
#: leaves (and lattice coordinates) that get per-coordinate features; aggregates use all of them
PER_COORDINATE = 24
#: at most this many leaves of one release are read (a synthetic table is summarised by its head)
MAX_LEAVES = 4096
#: a coordinate within INTEGER_TOL + RELATIVE_TOL |v| of an integer counts as an integer (a decoder's
#: float rounding stays far below it; a non-integer query's fractional parts are far above)
INTEGER_TOL = 1e-6
RELATIVE_TOL = 1e-10
#: coordinates larger than this cannot show a fractional part reliably in float64 (the tolerance
#: reaches 1e-2): they are "unresolved", and a lattice attack on them is inconclusive, not at chance
MAX_RESOLVED = 1e8
#: distinct values a categorical feature keeps as cells (the rest share one cell)
MAX_CELLS = 256
#: the delta at which a zCDP release is tested
ZCDP_DELTA = 1e-6


# ---------------------------------------------------------------------------------------------
# Reading a release: its skeleton and numeric leaves
# ---------------------------------------------------------------------------------------------
def release_leaves(release: Any) -> tuple[tuple[Any, ...], NDArray[np.float64]]:
    """The skeleton and the numeric leaves of a release.

    Walks dataclasses (every field but ``ledger``, ``schema`` and private ones), mappings,
    sequences, NumPy arrays and pandas frames. Numbers (booleans, integers, floats, numeric
    arrays) become leaves, in order, as float64 (integers beyond 2**53 lose their low bits);
    everything else (strings, shapes, dtypes, field names, ``None``) goes to the skeleton.
    Schemas and ledgers are public inputs or accounting and are skipped.

    Parameters
    ----------
    release : object
        A release (or any nested structure of numbers).

    Returns
    -------
    skeleton : tuple
        A hashable description of everything but the numbers.
    leaves : ndarray of float64
        The numbers, flattened (at most :data:`MAX_LEAVES`).

    Examples
    --------
    >>> import numpy as np
    >>> skel, leaves = release_leaves({"counts": np.array([1, 2]), "name": "x", "total": 3.5})
    >>> leaves.tolist()
    [1.0, 2.0, 3.5]
    """
    skel: list[Any] = []
    vals: list[NDArray[np.float64]] = []
    _walk(release, skel, vals, 0)
    leaves = np.concatenate(vals) if vals else np.zeros(0)
    return tuple(skel), np.asarray(leaves[:MAX_LEAVES], dtype=np.float64)


_SKIPPED_FIELDS = frozenset({"ledger", "schema"})


def _walk(obj: Any, skel: list[Any], vals: list[NDArray[np.float64]], depth: int) -> None:
    if depth > 12:
        skel.append(("deep", type(obj).__name__))
        return
    if obj is None:
        skel.append("None")
    elif isinstance(obj, (bool, np.bool_, int, float, np.integer, np.floating)):
        skel.append("n")
        vals.append(np.array([float(obj)]))
    elif isinstance(obj, (str, bytes)):
        skel.append(("s", obj))
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind in "biuf":
            skel.append(("a", obj.shape, obj.dtype.kind))
            vals.append(obj.astype(np.float64).ravel())
        else:
            skel.append(("o", obj.shape))
            for item in obj.ravel()[:MAX_LEAVES]:
                _walk(item, skel, vals, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        skel.append(("d", type(obj).__name__))
        for f in dataclasses.fields(obj):
            if f.name.startswith("_") or f.name in _SKIPPED_FIELDS:
                continue
            skel.append(f.name)
            _walk(getattr(obj, f.name), skel, vals, depth + 1)
    elif isinstance(obj, dict):
        skel.append(("m", len(obj)))
        for k in sorted(obj, key=repr):
            skel.append(repr(k))
            _walk(obj[k], skel, vals, depth + 1)
    elif isinstance(obj, (list, tuple)):
        skel.append(("l", len(obj)))
        for item in obj:
            _walk(item, skel, vals, depth + 1)
    elif type(obj).__module__.startswith("pandas"):
        import pandas as pd

        frame = obj.to_frame() if isinstance(obj, pd.Series) else obj
        if isinstance(frame, pd.DataFrame):
            skel.append(("f", frame.shape, tuple(map(str, frame.columns))))
            for col in frame.columns:
                _walk(_column(frame[col]), skel, vals, depth + 1)
        else:
            skel.append(("p", repr(obj)))
    elif type(obj).__name__ in ("BudgetLedger", "Schema"):
        skel.append(type(obj).__name__)
    else:
        skel.append(("?", type(obj).__name__, repr(obj)[:200]))


def _column(col: Any) -> Any:
    arr = np.asarray(col)
    return arr if arr.dtype.kind in "biuf" else np.array([str(v) for v in arr], dtype=object)


# ---------------------------------------------------------------------------------------------
# Features: per release, a dict name -> (value, ordered)
# ---------------------------------------------------------------------------------------------
def _near_integer(v: NDArray[np.float64]) -> NDArray[np.bool_]:
    with np.errstate(invalid="ignore"):
        return np.isfinite(v) & (np.abs(v - np.round(v)) <= INTEGER_TOL + RELATIVE_TOL * np.abs(v))


def _resolved(v: NDArray[np.float64]) -> NDArray[np.bool_]:
    with np.errstate(invalid="ignore"):
        return np.isfinite(v) & (np.abs(v) <= MAX_RESOLVED)


def _lsb(v: NDArray[np.float64]) -> NDArray[np.int64]:
    """Exponent ``e`` of the lowest set bit (``v = odd * 2^e``); zeros and non-finite get 2000."""
    out = np.full(v.shape, 2000, dtype=np.int64)
    ok = np.isfinite(v) & (v != 0)
    if np.any(ok):
        m, e = np.frexp(np.abs(v[ok]))  # |v| = m 2^e, m in [0.5, 1): m 2^53 is an integer
        sig = (m * 2.0**53).astype(np.int64)
        tz = _trailing_zeros(sig)
        out[ok] = e.astype(np.int64) - 53 + tz
    return out


def _trailing_zeros(x: NDArray[np.int64]) -> NDArray[np.int64]:
    low = x & -x
    return np.round(np.log2(low.astype(np.float64))).astype(np.int64)


def _hash(*parts: Any) -> int:
    return hash(tuple(p.tobytes() if isinstance(p, np.ndarray) else p for p in parts))


Features = dict[str, tuple[int, bool]]


def _lattice_features(c: NDArray[np.float64]) -> Features:
    f: Features = {}
    resolved = _resolved(c)
    integer = _near_integer(c) & resolved
    f["coordinates off the integers"] = (int((~integer & resolved).sum()), True)
    f[f"coordinates beyond {MAX_RESOLVED:g} (fractional part unresolved)"] = (int((~resolved).sum()), True)
    grid = 9
    for k in range(9):
        if np.all(_near_integer(c[resolved] * 2.0**k)):
            grid = k
            break
    f["finest dyadic grid 2^-k of the coordinates (k, 9: none <= 8)"] = (grid, True)
    with np.errstate(invalid="ignore"):
        frac = np.where(np.isfinite(c), c - np.floor(c), -1.0)
        rounded = np.where(integer, np.round(c), 0.0)
    for j in range(min(c.size, PER_COORDINATE)):
        fb = -2 if not resolved[j] else 0 if integer[j] else 1 + min(7, int(frac[j] * 8)) if frac[j] >= 0 else -1
        f[f"coordinate {j}: fractional part (0 integer, 1..8 eighths)"] = (fb, False)
        for m in (2, 3):
            f[f"coordinate {j} mod {m} (-1 off the integers)"] = (
                int(rounded[j] % m) if integer[j] else -1, False)
    return f


def _bits_features(v: NDArray[np.float64]) -> Features:
    f: Features = {}
    lsb = _lsb(v)
    f["finest grid 2^e over the leaves (lowest set bit)"] = (int(lsb.min()) if lsb.size else 2000, True)
    raw = v.astype(np.float64).view(np.int64)
    _, e = np.frexp(np.abs(v))
    for j in range(min(v.size, PER_COORDINATE)):
        f[f"leaf {j}: lowest set bit"] = (int(lsb[j]), True)
        sig = int(e[j]) - int(lsb[j]) if lsb[j] < 2000 else -1
        f[f"leaf {j}: significant bits"] = (sig, True)
        f[f"leaf {j}: 4 lowest mantissa bits"] = (int(raw[j] & 0xF), False)
    return f


def _support_features(skeleton: tuple[Any, ...], v: NDArray[np.float64]) -> Features:
    f: Features = {}
    zero = v == 0
    finite = np.isfinite(v)
    sign = np.sign(np.where(finite, v, 0.0)).astype(np.int8)
    f["skeleton (fields, shapes, dtypes, strings)"] = (_hash(skeleton), False)
    f["number of leaves"] = (int(v.size), True)
    f["pattern of exact zeros"] = (_hash(np.packbits(zero)), False)
    f["pattern of signs"] = (_hash(sign), False)
    f["pattern of non-finite leaves"] = (_hash(np.packbits(~finite)), False)
    f["exact zeros"] = (int(zero.sum()), True)
    f["negative leaves"] = (int((v < 0).sum()), True)
    f["exact release"] = (_hash(skeleton, v), False)
    for j in range(min(v.size, PER_COORDINATE)):
        f[f"leaf {j}: sign (0: exactly zero; 2: non-finite)"] = (int(sign[j]) if finite[j] else 2, False)
    return f


def _features(release: Any, coordinates: NDArray[np.float64] | None, checks: Sequence[str]) -> dict[str, Features]:
    skeleton, leaves = release_leaves(release)
    out: dict[str, Features] = {}
    if "lattice" in checks:
        c = leaves if coordinates is None else np.asarray(coordinates, dtype=np.float64).ravel()[:MAX_LEAVES]
        out["lattice"] = _lattice_features(c)
    if "float_bits" in checks:
        out["float_bits"] = _bits_features(leaves)
    if "support" in checks:
        out["support"] = _support_features(skeleton, leaves)
    return out


# ---------------------------------------------------------------------------------------------
# The test
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StructureResult:
    """The outcome of one structural check (:func:`audit_structure`).

    Attributes
    ----------
    check : str
        ``"lattice"``, ``"float_bits"`` or ``"support"``.
    flagged : bool
        Some kept event ``E`` has ``lower_p - delta > e^epsilon upper_q``: at the stated
        confidence the release is not ``(epsilon, delta)``-DP for this pair of inputs.
    event : str
        The most violating event (feature, cells, and which input makes it more likely).
    p, q : float
        Its frequencies on the estimation runs under the more and the less likely input.
    lower_p, upper_q : float
        Their one-sided Clopper-Pearson bounds at level ``alpha / (2 n_events)``.
    epsilon_lower : float
        ``ln((lower_p - delta) / upper_q)`` (>= 0): a lower confidence bound on the epsilon of
        the release at this delta. Finite even for an outcome never seen under the other input
        (``upper_q`` is then about ``ln(2 n_events / alpha) / trials``, not 0).
    epsilon, delta : float
        The guarantee tested.
    trials : int
        Runs per input (selection plus estimation).
    confidence : float
        ``1 - alpha``: the probability that an honest release is not flagged, at least.
    n_events : int
        Events estimated (the Bonferroni factor).
    """

    check: str
    flagged: bool
    event: str
    p: float
    q: float
    lower_p: float
    upper_q: float
    epsilon_lower: float
    epsilon: float
    delta: float
    trials: int
    confidence: float
    n_events: int

    def __str__(self) -> str:
        verdict = "FLAGGED" if self.flagged else "passed"
        return (f"{self.check}: {verdict} (epsilon >= {self.epsilon_lower:.3g} vs {self.epsilon:.3g}, delta "
                f"{self.delta:g}; {self.trials} trials/input; event {self.event}: p={self.p:.4g}, q={self.q:.4g})")


@dataclass
class _Feature:
    name: str
    ordered: bool
    values: NDArray[np.int64]  # sorted distinct values of the ranking runs (the cells)

    def assign(self, raw: NDArray[np.int64]) -> NDArray[np.int64]:
        if self.ordered:  # cells: the distinct values, with the gaps below/between/above
            pos = np.searchsorted(self.values, raw, side="left")
            hit = (pos < self.values.size) & (self.values[np.minimum(pos, self.values.size - 1)] == raw)
            return np.where(hit, 2 * pos + 1, 2 * pos)
        pos = np.searchsorted(self.values, raw)
        hit = (pos < self.values.size) & (self.values[np.minimum(pos, self.values.size - 1)] == raw)
        return np.where(hit, pos, self.values.size)

    @property
    def n_cells(self) -> int:
        return 2 * self.values.size + 1 if self.ordered else self.values.size + 1

    def label(self, cells: NDArray[np.int64]) -> str:
        cs = sorted(int(c) for c in cells)
        if self.ordered:
            def show(c: int) -> str:
                if c % 2:
                    return str(int(self.values[c // 2]))
                lo = "-inf" if c == 0 else str(int(self.values[c // 2 - 1]))
                hi = "inf" if c // 2 >= self.values.size else str(int(self.values[c // 2]))
                return f"({lo}, {hi})"
            if len(cs) > 1 and cs[-1] - cs[0] + 1 == len(cs):
                return f"{self.name} in [{show(cs[0])} .. {show(cs[-1])}]"
            return f"{self.name} in {{{', '.join(show(c) for c in cs[:6])}{', ...' if len(cs) > 6 else ''}}}"
        names = ["<unseen>" if c >= self.values.size else str(int(self.values[c])) for c in cs[:6]]
        if "value" not in self.name and ("pattern" in self.name or "skeleton" in self.name or "exact" in self.name):
            names = ["<one value>" if n != "<unseen>" else n for n in names]
        return f"{self.name} in {{{', '.join(names)}{', ...' if len(cs) > 6 else ''}}}"


def _bounds(num: NDArray[np.int64], den: NDArray[np.int64], n: int, alpha: float, eps: float,
            delta: float) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    lo, _ = clopper_pearson_bounds(num, n, alpha)
    _, hi = clopper_pearson_bounds(den, n, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps_lb = np.where(lo - delta > 0, np.log(np.maximum(lo - delta, 1e-300)) - np.log(hi), -np.inf)
    return lo, hi, eps_lb


def _table(feats: list[Features], name: str) -> NDArray[np.int64]:
    return np.array([fs[name][0] if name in fs else -(2**62) for fs in feats], dtype=np.int64)


def _select(check: str, sel_a: list[dict[str, Features]], sel_b: list[dict[str, Features]], alpha: float,
            eps: float, delta: float, n_events: int, n_est: int) -> list[tuple[float, _Feature, NDArray[np.int64], int]]:
    fa = [f[check] for f in sel_a]
    fb = [f[check] for f in sel_b]
    names: dict[str, bool] = {}
    for fs in fa + fb:
        for k, (_, ordered) in fs.items():
            names.setdefault(k, ordered)
    n = len(fa)
    half = n // 2
    scored: list[tuple[float, _Feature, NDArray[np.int64], int]] = []
    for name, ordered in names.items():
        ta, tb = _table(fa, name), _table(fb, name)
        rank = np.concatenate([ta[:half], tb[:half]])
        vals, counts = np.unique(rank, return_counts=True)
        if not ordered and vals.size > MAX_CELLS:
            vals = np.sort(vals[np.argsort(-counts, kind="stable")[:MAX_CELLS]])
        feat = _Feature(name, ordered, vals)
        ca, cb = feat.assign(ta), feat.assign(tb)
        r1 = np.bincount(ca[:half], minlength=feat.n_cells)
        r2 = np.bincount(cb[:half], minlength=feat.n_cells)
        s1 = np.bincount(ca[half:], minlength=feat.n_cells)
        s2 = np.bincount(cb[half:], minlength=feat.n_cells)
        cands = _candidates(r1, r2, ordered)
        if not cands:
            continue
        k1 = np.array([s1[s].sum() for s, _ in cands])
        k2 = np.array([s2[s].sum() for s, _ in cands])
        d = np.array([dr for _, dr in cands])
        # score: the bound the estimation runs would give if they saw the same frequencies (counts
        # scaled to n_est): a small scoring half then still ranks a frequent one-sided outcome first
        scale = n_est / max(1, n - half)
        num = np.round(np.where(d > 0, k1, k2) * scale).astype(np.int64)
        den = np.round(np.where(d > 0, k2, k1) * scale).astype(np.int64)
        _, _, eps_lb = _bounds(num, den, n_est, alpha / (2 * n_events), eps, delta)
        for i in np.argsort(-eps_lb, kind="stable")[:n_events]:
            scored.append((float(eps_lb[i]), feat, cands[i][0], int(cands[i][1])))
    scored.sort(key=lambda t: -t[0])
    return scored[:n_events]


def audit_structure(
    run: Callable[[Any, np.random.Generator], Any],
    x: Any,
    x_neighbour: Any,
    *,
    epsilon: float,
    delta: float = 0.0,
    trials: int,
    checks: Sequence[str] = CHECKS,
    rng: RNGLike = 0,
    confidence: float = 0.999,
    n_events: int = 4,
    selection: float = 0.3,
) -> dict[str, StructureResult]:
    """Structural privacy checks of a mechanism on two neighbouring inputs.

    Parameters
    ----------
    run : callable
        ``run(data, rng) -> release``: one release of the publisher's own code on ``data`` with
        randomness ``rng`` (a Generator). To give the lattice check the release's lattice
        coordinates (a 1-D float array from the publisher's public decoder), return
        :func:`observed` ``(release, coordinates)``; without them (or with None) it reads the
        release's numeric leaves.
    x, x_neighbour : object
        Two neighbouring inputs (a worst case of the neighbouring relation).
    epsilon : float
        The epsilon the release declares (for zCDP, the epsilon its rho implies at ``delta``).
    delta : float
        The delta the release declares (0 for pure DP).
    trials : int
        Runs per input (at least 100); a fraction ``selection`` chooses the events.
    checks : sequence of str
        Among :data:`CHECKS`.
    rng : int, Generator or None
        Randomness of the audit (default seed 0: reproducible).
    confidence : float
        ``1 - alpha``: each check flags an honest release with probability at most ``alpha``.
    n_events : int
        Events per check carried from selection to estimation (Bonferroni factor).
    selection : float
        Fraction of the runs that chooses the events, in (0, 1).

    Returns
    -------
    dict of str to StructureResult
        One result per check.

    Raises
    ------
    ParameterError
        For an unknown check or invalid epsilon, delta, trials, confidence or selection.

    Notes
    -----
    The runs are shared by the checks (one release feeds the three), events are chosen on
    runs independent of those that estimate them, and each check's ``n_events`` events are
    combined by a Bonferroni correction, so the false-alarm bound holds per check whatever the
    release. See the module docstring for the features of each check.

    Examples
    --------
    Noise added only when the count is non-zero: an exact 0 is an outcome of one input only.

    >>> import numpy as np
    >>> from privpub.core import laplace
    >>> def leaky(count, rng):
    ...     return float(count) if count == 0 else float(laplace(np.array([float(count)]), epsilon=1.0, rng=rng)[0])
    >>> audit_structure(leaky, 0, 1, epsilon=1.0, trials=400, checks=["support"])["support"].flagged
    True
    """
    unknown = [c for c in checks if c not in CHECKS]
    if unknown or not checks:
        raise ParameterError(f"checks must be among {list(CHECKS)}, got {list(checks)}", param="checks")
    eps = check_epsilon(epsilon)
    dlt = check_probability(delta, "delta", closed="left")
    n_sel, n_est, k_events, conf = split_trials(trials, selection, n_events, confidence, min_selection=40)
    n_trials, alpha = n_sel + n_est, 1.0 - conf
    gen = as_generator(rng)
    g = gen.spawn(4)

    def runs(data: Any, gg: np.random.Generator, n: int) -> list[dict[str, Features]]:
        out = []
        for _ in range(n):
            r = run(data, gg)
            rel, coords = r if isinstance(r, _Observed) else (r, None)
            out.append(_features(rel, coords, checks))
        return out

    sel_a, sel_b = runs(x, g[0], n_sel), runs(x_neighbour, g[1], n_sel)
    est_a, est_b = runs(x, g[2], n_est), runs(x_neighbour, g[3], n_est)
    results: dict[str, StructureResult] = {}
    for check in checks:
        chosen = _select(check, sel_a, sel_b, alpha, eps, dlt, k_events, n_est)
        a = alpha / (2 * max(1, len(chosen)))
        best: StructureResult | None = None
        for _, feat, cells, direction in chosen:
            ca = np.isin(feat.assign(_table([f[check] for f in est_a], feat.name)), cells)
            cb = np.isin(feat.assign(_table([f[check] for f in est_b], feat.name)), cells)
            ka, kb = int(ca.sum()), int(cb.sum())
            num, den = (ka, kb) if direction > 0 else (kb, ka)
            lo, hi, eps_lb = _bounds(np.array([num]), np.array([den]), n_est, a, eps, dlt)
            where = "x" if direction > 0 else "x_neighbour"
            res = StructureResult(
                check=check, flagged=bool(lo[0] - dlt > math.exp(eps) * hi[0]),
                event=f"{feat.label(cells)} (more likely under {where})", p=num / n_est, q=den / n_est,
                lower_p=float(lo[0]), upper_q=float(hi[0]), epsilon_lower=max(0.0, float(eps_lb[0])),
                epsilon=eps, delta=dlt, trials=n_trials, confidence=conf, n_events=len(chosen))
            if best is None or res.epsilon_lower > best.epsilon_lower:
                best = res
        if best is None:
            best = StructureResult(check, False, "<no event: every feature constant>", 0.0, 0.0, 0.0, 1.0, 0.0,
                                   eps, dlt, n_trials, conf, 0)
        results[check] = best
    return results


class _Observed(tuple):  # type: ignore[type-arg]
    """``(release, coordinates)`` returned by a target's run (a tuple the auditor unpacks)."""

    __slots__ = ()


def observed(release: Any, coordinates: Any) -> Any:
    """Mark a run's output as ``(release, lattice coordinates)`` for :func:`audit_structure`."""
    return _Observed((release, None if coordinates is None else np.asarray(coordinates, dtype=np.float64)))


# ---------------------------------------------------------------------------------------------
# Targets: one per publisher of every registry
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StructureTarget:
    """One publisher, run as a user runs it, on two neighbouring inputs.

    Attributes
    ----------
    name : str
        ``"<part>.<registry key>"``.
    part : str
        The part whose registry holds the publisher.
    run : callable
        ``run(data, rng) -> release`` (or :func:`observed` ``(release, coordinates)``): the
        publisher's own code.
    x, x_neighbour : object
        Worst-case neighbouring inputs.
    epsilon, delta : float
        The guarantee tested (zCDP converted at :data:`ZCDP_DELTA`).
    budget : str
        The budget the publisher is given, as a user writes it (``"epsilon=2.0"``).
    trials : int
        Runs per input in the fast tier.
    neighbours : str
        The neighbouring relation and the pair.
    """

    name: str
    part: str
    run: Callable[[Any, np.random.Generator], Any]
    x: Any
    x_neighbour: Any
    epsilon: float
    delta: float
    budget: str
    trials: int
    neighbours: str

    def probe(self) -> tuple[float, bool]:
        """One release on ``x`` (seed 0): its seconds, and whether it declares itself private.

        A release with ``private = False`` (a paper's leaky baseline, which warns) is not
        expected to pass; callers exclude it explicitly.
        """
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = self.run(self.x, np.random.default_rng(0))
        seconds = time.perf_counter() - start
        rel = rel[0] if isinstance(rel, _Observed) else rel
        return seconds, getattr(rel, "private", True) is not False

    def audit(self, checks: Sequence[str] = CHECKS, *, trials: int | None = None, rng: RNGLike = 0,
              confidence: float = 0.999) -> dict[str, StructureResult]:
        """:func:`audit_structure` of this target (``trials`` defaults to the target's)."""
        return audit_structure(self.run, self.x, self.x_neighbour, epsilon=self.epsilon, delta=self.delta,
                               trials=self.trials if trials is None else trials, checks=checks, rng=rng,
                               confidence=confidence)


def _budget(measures: Sequence[str], eps: float, rho: float) -> tuple[dict[str, float], float, float, str]:
    """Keyword, tested epsilon and delta of a publisher: pure DP when offered, else zCDP."""
    from privpub.core import zcdp_to_approx_dp

    if "pure-dp" in measures:
        return {"epsilon": eps}, eps, 0.0, f"epsilon={eps:g}"
    return {"rho": rho}, zcdp_to_approx_dp(rho, ZCDP_DELTA), ZCDP_DELTA, f"rho={rho:g}"


def _small(cls: Any, **choices: Any) -> dict[str, Any]:
    """The keyword arguments among ``choices`` that ``cls`` accepts (small models for audits)."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in choices.items() if k in params}


def _histogram_targets() -> list[StructureTarget]:
    from privpub.histogram import PUBLISHERS

    h, h_nb = np.array([0, 0, 3, 5]), np.array([0, 0, 3, 6])
    out = []
    for key, factory in PUBLISHERS.items():
        pub = factory()

        def run(counts: Any, rng: np.random.Generator, pub: Any = pub) -> Any:
            return pub.publish(counts, epsilon=2.0, rng=rng)
        out.append(StructureTarget(f"histogram.{key}", "histogram", run, h, h_nb, 2.0, 0.0, "epsilon=2", 600,
                                   "add/remove one record: histograms [0, 0, 3, 5] and [0, 0, 3, 6]"))
    return out


def _spatial_targets() -> list[StructureTarget]:
    from privpub.spatial import PUBLISHERS

    pts = np.array([(0.1, 0.1), (0.1, 0.1)])
    pts_nb = np.array([(0.9, 0.9), (0.1, 0.1)])
    out = []
    for key, cls in PUBLISHERS.items():
        kw, eps, delta, label = _budget(getattr(cls, "measures", ("pure-dp",)), 1.0, 0.5)
        pub = cls()

        def run(points: Any, rng: np.random.Generator, pub: Any = pub, kw: Any = kw) -> Any:
            return pub.publish(points, bounds=(0.0, 0.0, 1.0, 1.0), rng=rng, **kw)
        out.append(StructureTarget(f"spatial.{key}", "spatial", run, pts, pts_nb, eps, delta, label, 300,
                                   "replace one user's location (2 users): (0.1, 0.1) moves to (0.9, 0.9)"))
    return out


def _decision_targets() -> list[StructureTarget]:
    import pandas as pd

    from privpub.core import CategoricalAttribute, Schema
    from privpub.decision import PUBLISHERS

    schema = Schema([CategoricalAttribute(a, ["x", "y"]) for a in "abc"], class_name="cls", classes=["p", "q"])
    table = pd.DataFrame({"a": ["x", "x"], "b": ["x", "x"], "c": ["x", "x"], "cls": ["q", "q"]})
    added = pd.DataFrame({"a": ["x"], "b": ["x"], "c": ["y"], "cls": ["p"]})
    table_nb = pd.concat([table, added], ignore_index=True)
    out = []
    for key, cls in PUBLISHERS.items():
        kw, eps, delta, label = _budget(getattr(cls, "measures", ("pure-dp",)), 2.0, 0.5)
        pub = cls(**_small(cls, levels=1, bins=2, max_iters=20, max_rounds=1, degree=2))

        def run(frame: Any, rng: np.random.Generator, pub: Any = pub, kw: Any = kw) -> Any:
            return pub.publish(frame, schema=schema, rng=rng, **kw)
        out.append(StructureTarget(f"decision.{key}", "decision", run, table, table_nb, eps, delta, label, 200,
                                   "add/remove one record: 2 records vs the same plus (x, x, y, p); three binary "
                                   "attributes and a binary class"))
    return out


def _ldp_synth_targets() -> list[StructureTarget]:
    import pandas as pd

    from privpub.core import CategoricalAttribute, Schema
    from privpub.ldp_synth import PUBLISHERS

    schema = Schema([CategoricalAttribute("a", ["x", "y"]), CategoricalAttribute("b", ["u", "v", "w"])])
    one, other = pd.DataFrame({"a": ["x"], "b": ["u"]}), pd.DataFrame({"a": ["y"], "b": ["w"]})
    out = []
    for key, cls in PUBLISHERS.items():
        kw, eps, delta, label = _budget(getattr(cls, "measures", ("pure-dp",)), 2.0, 0.5)
        pub = cls(**_small(cls, degree=1, marginal_size=2, rounds=1))

        def run(frame: Any, rng: np.random.Generator, pub: Any = pub, kw: Any = kw) -> Any:
            return pub.publish(frame, schema=schema, rng=rng, **kw)
        out.append(StructureTarget(f"ldp_synth.{key}", "ldp_synth", run, one, other, eps, delta, label, 300,
                                   "replace one user's whole record (a one-user table): (x, u) and (y, w)"))
    return out


#: the neighbouring streams of issue 34: 0^16 and (1, 0, ..., 0)
STREAM_LENGTH = 16


def stream_run(cls: Any, *, epsilon: float = 1.0, rho: float = 0.05) -> Callable[[Any, np.random.Generator], Any]:
    """A run of a stream publisher class: every prefix answer ``q(1, t)`` of a stream, and their lattice
    coordinates from the publisher's public decoder (``lattice_coordinates``; None without one).

    The publisher is built with ``window=len(items)`` and ``epsilon=`` (when it offers pure DP)
    or ``rho=``, fed with ``extend`` and asked every prefix with ``answer``.
    """
    kw = _budget(getattr(cls, "measures", ("pure-dp",)), epsilon, rho)[0]

    def run(items: Any, rng: np.random.Generator) -> Any:
        items = np.asarray(items)
        pub = cls(window=items.size, rng=rng, **kw)
        pub.extend(items)
        n = items.size
        answers = pub.answer(np.column_stack([np.ones(n, dtype=np.int64), np.arange(1, n + 1)]))
        decode = getattr(pub, "lattice_coordinates", None)
        coords = decode(np.asarray(answers, dtype=np.float64)) if decode is not None else None
        return observed(answers, coords)
    return run


def _stream_targets() -> list[StructureTarget]:
    from privpub.stream import PUBLISHERS

    zero = np.zeros(STREAM_LENGTH, dtype=np.int64)
    one = zero.copy()
    one[0] = 1
    out = []
    for key, cls in PUBLISHERS.items():
        _, eps, delta, label = _budget(getattr(cls, "measures", ("pure-dp",)), 1.0, 0.05)
        run = stream_run(cls)
        out.append(StructureTarget(f"stream.{key}", "stream", run, zero, one, eps, delta, label, 400,
                                   f"event level: 0^{STREAM_LENGTH} and (1, 0, ..., 0); every prefix answer, "
                                   "decoded by lattice_coordinates when the publisher has it"))
    return out


_TARGET_BUILDERS: dict[str, Callable[[], list[StructureTarget]]] = {
    "histogram": _histogram_targets,
    "spatial": _spatial_targets,
    "decision": _decision_targets,
    "ldp_synth": _ldp_synth_targets,
    "stream": _stream_targets,
}


def structure_targets(parts: Sequence[str] | None = None) -> list[StructureTarget]:
    """One :class:`StructureTarget` per publisher of each part's ``PUBLISHERS`` registry.

    Read from the registries when called, so a publisher added to a registry is audited without
    new code. Nothing is run here (:meth:`StructureTarget.probe` tells a publisher that declares
    itself not private, ``release.private is False``).

    Parameters
    ----------
    parts : sequence of str, optional
        Among ``"histogram"``, ``"spatial"``, ``"decision"``, ``"ldp_synth"``, ``"stream"``
        (default: all).

    Examples
    --------
    >>> names = [t.name for t in structure_targets(["stream"])]
    >>> "stream.mf_sqrt" in names and "stream.rtp" in names
    True
    """
    names = list(_TARGET_BUILDERS) if parts is None else list(parts)
    unknown = [p for p in names if p not in _TARGET_BUILDERS]
    if unknown:
        raise ParameterError(f"parts must be among {sorted(_TARGET_BUILDERS)}, got {unknown}", param="parts")
    out: list[StructureTarget] = []
    for p in names:
        out.extend(_TARGET_BUILDERS[p]())
    return out


# ---------------------------------------------------------------------------------------------
# Issue 34's attack on a stream publisher
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LatticeAttack:
    """The outcome of :func:`lattice_attack`.

    Attributes
    ----------
    rate_x, rate_neighbour : float
        How often the attacker answers "every coordinate is an integer" under each stream.
    advantage : float
        ``rate_x - rate_neighbour``: the attacker guessing ``x`` on "integer" is right with
        probability ``(1 + advantage) / 2`` on a fair coin between the two streams.
    advantage_lower, advantage_upper : float
        A two-sided ``confidence`` interval of the advantage (Clopper-Pearson bounds of the two
        rates at ``alpha / 4`` each).
    decoded : bool
        Whether the publisher's decoder (``lattice_coordinates``) gave coordinates; without it
        the attack reads the answers themselves.
    resolved : bool
        Whether every coordinate of every run was at most :data:`MAX_RESOLVED` in magnitude, so
        that float64 shows its fractional part; otherwise the attack is inconclusive.
    trials : int
        Runs per stream.
    confidence : float
        Level of the interval.
    """

    rate_x: float
    rate_neighbour: float
    advantage: float
    advantage_lower: float
    advantage_upper: float
    decoded: bool
    resolved: bool
    trials: int
    confidence: float

    @property
    def distinguishes(self) -> bool:
        """The attack beats chance by more than 5 points at the stated confidence (``|advantage| > 0.05``)."""
        return self.advantage_lower > 0.05 or self.advantage_upper < -0.05

    @property
    def at_chance(self) -> bool:
        """The interval of the advantage lies within ``[-0.05, 0.05]`` and every coordinate was
        resolved: no better than chance."""
        return self.resolved and self.advantage_lower >= -0.05 and self.advantage_upper <= 0.05


def lattice_attack(
    run: Callable[[Any, np.random.Generator], Any],
    x: Any,
    x_neighbour: Any,
    *,
    trials: int = 500,
    rng: RNGLike = 0,
    confidence: float = 0.999,
) -> LatticeAttack:
    """Issue 34's attack: decode the release and ask whether every coordinate is an integer.

    For each run, the attacker takes the lattice coordinates of the release (the publisher's
    public decoder, e.g. ``y`` solving ``L y = answers`` for a matrix-factorisation counter; the
    numeric leaves when the publisher has none) and answers "x" when every coordinate ``y`` is
    within ``INTEGER_TOL + RELATIVE_TOL |y|`` (``1e-6 + 1e-10 |y|``) of an integer; coordinates
    beyond :data:`MAX_RESOLVED` make the attack inconclusive (``resolved`` False, never
    ``at_chance``). A release that is exact integer noise on an exactly represented query makes the answer the same under both inputs (advantage 0); integer noise
    on a non-integer query ``R x`` shows ``R x mod 1`` (advantage 1 on ``0^n`` vs
    ``(1, 0, ..., 0)``).

    Parameters
    ----------
    run : callable
        ``run(data, rng)`` returning :func:`observed` ``(release, coordinates)`` (as
        :func:`stream_run`) or a release.
    x, x_neighbour : object
        The two inputs.
    trials : int
        Runs per input.
    rng : int, Generator or None
        Randomness of the runs.
    confidence : float
        Level of the interval of the advantage.

    Returns
    -------
    LatticeAttack

    Examples
    --------
    >>> import numpy as np
    >>> from privpub.stream import RTP
    >>> zero = np.zeros(16, dtype=np.int64); one = zero.copy(); one[0] = 1
    >>> lattice_attack(stream_run(RTP), zero, one, trials=200).at_chance
    True
    """
    n = check_positive_int(trials, "trials", minimum=20)
    conf = check_probability(confidence, "confidence")
    ga, gb = as_generator(rng).spawn(2)
    decoded = resolved = True

    def rate(data: Any, gen: np.random.Generator) -> int:
        nonlocal decoded, resolved
        hits = 0
        for _ in range(n):
            r = run(data, gen)
            rel, coords = r if isinstance(r, _Observed) else (r, None)
            if coords is None:
                decoded = False
                coords = release_leaves(rel)[1]
            c = np.asarray(coords, dtype=np.float64)
            resolved = resolved and bool(np.all(_resolved(c)))
            hits += bool(np.all(_near_integer(c)))
        return hits

    ka, kb = rate(x, ga), rate(x_neighbour, gb)
    a = (1.0 - conf) / 4
    lo, hi = clopper_pearson_bounds(np.array([ka, kb]), n, a)
    return LatticeAttack(rate_x=ka / n, rate_neighbour=kb / n, advantage=(ka - kb) / n,
                         advantage_lower=float(lo[0] - hi[1]), advantage_upper=float(hi[0] - lo[1]),
                         decoded=decoded, resolved=resolved, trials=n, confidence=conf)
