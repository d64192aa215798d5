"""Conformance audit of a participant client over the wire format (``privpub audit client``).

In local DP the client is the privacy boundary, so the code a device runs must randomise exactly
as the campaign's public configuration says. :func:`audit_client` holds *any* implementation to
that, as a black box behind a small line protocol:

1. the client command is started; its first stdin line is the campaign's public configuration
   as JSON (for a multi-phase kind with ``"assignment"`` and ``"partition"`` added, as
   ``POST /campaigns/{id}/assignments`` hands them to a participant);
2. then one input value per line (JSON: a category name, a record object or an ``[x, y]``
   point); stdin is closed after the last one;
3. for each input, in order, the client writes one line with the base64 wire report (the
   ``report`` field of ``POST /campaigns/{id}/reports``) and exits 0.

For every scenario (a frequency oracle, the UG grid or one KDG-HT phase with its partition, a
synthetic-data record) the audit feeds two neighbouring inputs many times and runs three checks:

``wire``
    every report is strict base64 of the declared width, within the layout's ranges (GRR value
    below ``d``; OLH ``1 <= a < 2^31 - 1``, ``b < 2^31 - 1``, ``y < g``; unary padding bits 0).
``distribution``
    goodness of fit of the reports to the exact probabilities of the oracle at the
    configuration's epsilon (:meth:`privpub.ldp.FrequencyOracle.probabilities`): per value (GRR,
    OLH bucket offsets, OLH hash seeds) or per bit, pooled by probability, and the distribution of
    the number of set bits (which also catches correlated bits). Exact binomial tests and
    chi-square tests (:mod:`scipy.stats`), Bonferroni-combined at level ``alpha``.
``epsilon``
    a black-box lower confidence bound on epsilon from the two neighbouring inputs
    (:func:`privpub.audit.audit_epsilon`, Clopper-Pearson bounds at confidence ``1 - alpha``),
    on the bits (or values) that tell the two inputs apart; it must not exceed the declared
    epsilon.

Each distribution and epsilon check has a **negative control**: the same client gets the
configuration at twice the epsilon (synth: the flip probability of twice the epsilon) and its
reports are tested against the *original* parameters; the control is *caught* when the check
rejects them. A scenario whose control no check catches makes the audit inconclusive at that
sample size (raise ``reports``).

What this proves: at the stated error rate, the client's reports on the audited inputs are not
distinguishable from the declared randomiser's by these tests, and its privacy loss on those
neighbours is not above epsilon. It cannot prove that a client is private on inputs it was not
fed, that it does not leak through other channels (timing, extra requests, the report id), or
that its randomness is unpredictable (a seeded PRNG passes); see docs/clients.md.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from privpub.audit._auditor import audit_epsilon
from privpub.core import Schema, check_bounds_2d, check_positive_int, check_probability
from privpub.errors import ParameterError, PrivpubError
from privpub.ldp import GRR, OUE, SUE
from privpub.ldp.wire import b64decode, payload_width
from privpub.ldp_synth import f_from_epsilon

__all__ = ["ClientAudit", "ClientCheck", "ClientError", "ClientScenario", "audit_client", "client_scenarios",
           "run_client"]

#: OLH's hash modulus (the service's validation bound)
OLH_PRIME = (1 << 31) - 1
#: smallest expected count of a chi-square cell (cells are merged up to it)
MIN_EXPECTED = 5.0


class ClientError(PrivpubError):
    """The client command failed (did not start, crashed, timed out or broke the line protocol)."""


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClientCheck:
    """One check of one scenario.

    Attributes
    ----------
    scenario : str
        E.g. ``"frequency OUE"`` or ``"spatial kdght phase U^0 (leaves)"``.
    check : str
        ``"wire"``, ``"distribution"`` or ``"epsilon"``.
    passed : bool
        The client's reports at the declared parameters passed the check.
    detail : str
        The statistic (smallest Bonferroni-adjusted p-value, or the epsilon lower bound).
    control_caught : bool or None
        Whether the check rejected the reports made at twice the epsilon (None: no control).
    control_detail : str
        The same statistic on the control's reports.
    reports : int
        Reports per input the check used.
    """

    scenario: str
    check: str
    passed: bool
    detail: str
    control_caught: bool | None
    control_detail: str
    reports: int


@dataclass(frozen=True)
class ClientAudit:
    """The outcome of :func:`audit_client`: every check, and the verdict."""

    checks: tuple[ClientCheck, ...]
    scenarios: tuple[str, ...] = field(default=())

    @property
    def failed(self) -> list[ClientCheck]:
        """Checks the client failed."""
        return [c for c in self.checks if not c.passed]

    @property
    def uncaught(self) -> list[str]:
        """Scenarios whose negative control no check caught (the audit is inconclusive there)."""
        return [s for s in self.scenarios
                if not any(c.control_caught for c in self.checks if c.scenario == s)]

    @property
    def passed(self) -> bool:
        """Every check passed and every scenario's negative control was caught."""
        return not self.failed and not self.uncaught

    def table(self) -> list[dict[str, Any]]:
        """The checks as rows (for printing or a data frame)."""
        return [{"scenario": c.scenario, "check": c.check, "passed": c.passed, "detail": c.detail,
                 "control": ("n/a" if c.control_caught is None else "caught" if c.control_caught else "NOT caught"),
                 "control_detail": c.control_detail, "reports": c.reports} for c in self.checks]


# ---------------------------------------------------------------------------------------------
# Models of the exact report distribution
# ---------------------------------------------------------------------------------------------
def _bonferroni(pvalues: Sequence[float]) -> float:
    return float(min(1.0, min(pvalues) * len(pvalues))) if pvalues else 1.0


def _chisquare(counts: NDArray[np.int64], probs: NDArray[np.float64]) -> float:
    """Chi-square p-value of ``counts`` against ``probs``, cells merged (in order) to >= MIN_EXPECTED."""
    n = int(counts.sum())
    exp = probs * n
    merged_c: list[float] = []
    merged_e: list[float] = []
    acc_c = acc_e = 0.0
    for c, e in zip(counts.tolist(), exp.tolist(), strict=True):
        acc_c += c
        acc_e += e
        if acc_e >= MIN_EXPECTED:
            merged_c.append(acc_c)
            merged_e.append(acc_e)
            acc_c = acc_e = 0.0
    if acc_e > 0 or acc_c > 0:
        if merged_e:
            merged_c[-1] += acc_c
            merged_e[-1] += acc_e
        else:
            merged_c.append(acc_c)
            merged_e.append(acc_e)
    if len(merged_e) < 2:
        return 1.0
    obs = np.array(merged_c)
    ex = np.array(merged_e)
    ex *= obs.sum() / ex.sum()
    return float(stats.chisquare(obs, ex).pvalue)


def _binom(k: int, n: int, p: float) -> float:
    return float(stats.binomtest(int(k), int(n), p).pvalue)


class _Model:
    """The exact law of one scenario's reports (subclasses: unary bits, GRR, OLH)."""

    layout: str
    width: int  # bytes per report

    def decode(self, payloads: list[bytes]) -> NDArray[Any]:
        raise NotImplementedError

    def invalid(self, payloads: list[bytes]) -> str | None:
        bad = [i for i, p in enumerate(payloads) if len(p) != self.width]
        if bad:
            return f"report {bad[0]} has {len(payloads[bad[0]])} bytes, the layout {self.layout} needs {self.width}"
        return None

    def gof(self, reports: NDArray[Any], which: int) -> float:
        """Bonferroni-adjusted p-value of the reports made on input ``which`` (0: x, 1: x')."""
        raise NotImplementedError

    def project(self, reports: NDArray[Any]) -> NDArray[np.int64]:
        """The reports mapped to the few cells that tell the two inputs apart (post-processing)."""
        raise NotImplementedError


class _Unary(_Model):
    """Independent bits: ``probs[which][j]`` is ``P[bit j = 1]`` on input ``which``."""

    layout = "bits"

    def __init__(self, probs_x: NDArray[np.float64], probs_y: NDArray[np.float64]) -> None:
        self.probs = (probs_x, probs_y)
        self.d = probs_x.size
        self.width = payload_width("bits", self.d)
        self.diff = np.flatnonzero(probs_x != probs_y)
        self.pattern = probs_x[self.diff] > probs_y[self.diff]  # the bit value more likely under x

    def decode(self, payloads: list[bytes]) -> NDArray[np.bool_]:
        raw = np.frombuffer(b"".join(payloads), dtype=np.uint8).reshape(len(payloads), self.width)
        return np.unpackbits(raw, axis=1, bitorder="little").astype(bool)

    def invalid(self, payloads: list[bytes]) -> str | None:
        msg = super().invalid(payloads)
        if msg is not None:
            return msg
        bits = self.decode(payloads)
        pad = np.flatnonzero(bits[:, self.d:].any(axis=1))
        if pad.size:
            return f"report {pad[0]} sets padding bits beyond bit {self.d}"
        return None

    def gof(self, reports: NDArray[np.bool_], which: int) -> float:
        bits = reports[:, : self.d]
        n = bits.shape[0]
        probs = self.probs[which]
        ones = bits.sum(axis=0)
        pv: list[float] = []
        for value in np.unique(probs):  # pooled over the bits of one probability: most power
            sel = probs == value
            pv.append(_binom(int(ones[sel].sum()), n * int(sel.sum()), float(value)))
        var = n * probs * (1 - probs)
        chi = float(np.sum((ones - n * probs) ** 2 / var))  # per bit
        pv.append(float(stats.chi2.sf(chi, self.d)))
        # the number of set bits: a convolution of binomials (catches bits that are not independent)
        pmf = np.array([1.0])
        for value in np.unique(probs):
            pmf = np.convolve(pmf, stats.binom.pmf(np.arange(int((probs == value).sum()) + 1),
                                                   int((probs == value).sum()), float(value)))
        weight = np.bincount(bits.sum(axis=1), minlength=self.d + 1)
        pv.append(_chisquare(weight, pmf))
        return _bonferroni(pv)

    def project(self, reports: NDArray[np.bool_]) -> NDArray[np.int64]:
        sub = reports[:, self.diff]
        if self.diff.size <= 8:  # exact joint of the distinguishing bits
            return np.asarray((sub.astype(np.int64) << np.arange(self.diff.size)).sum(axis=1), dtype=np.int64)
        return np.asarray((sub == self.pattern).sum(axis=1), dtype=np.int64)  # the likelihood ratio's statistic


class _Grr(_Model):
    layout = "uint32le"
    width = 4

    def __init__(self, d: int, p: float, q: float, x: int, y: int) -> None:
        self.d, self.p, self.q, self.inputs = d, p, q, (x, y)

    def decode(self, payloads: list[bytes]) -> NDArray[np.int64]:
        return np.frombuffer(b"".join(payloads), dtype="<u4").astype(np.int64)

    def invalid(self, payloads: list[bytes]) -> str | None:
        msg = super().invalid(payloads)
        if msg is not None:
            return msg
        v = self.decode(payloads)
        bad = np.flatnonzero(v >= self.d)
        return f"report {bad[0]} encodes {v[bad[0]]}, not below the domain size {self.d}" if bad.size else None

    def gof(self, reports: NDArray[np.int64], which: int) -> float:
        x = self.inputs[which]
        n = reports.size
        probs = np.full(self.d, self.q)
        probs[x] = self.p
        counts = np.bincount(reports, minlength=self.d)
        return _bonferroni([_binom(int(counts[x]), n, self.p), _chisquare(counts, probs / probs.sum())])

    def project(self, reports: NDArray[np.int64]) -> NDArray[np.int64]:
        x, y = self.inputs
        return np.where(reports == x, 0, np.where(reports == y, 1, 2))


def _olh_hash(a: NDArray[np.int64], b: NDArray[np.int64], x: int, g: int) -> NDArray[np.int64]:
    return ((a * x + b) % OLH_PRIME) % g


class _Olh(_Model):
    layout = "uint32le[3]"
    width = 12

    def __init__(self, g: int, p: float, q: float, x: int, y: int) -> None:
        self.g, self.p, self.q, self.inputs = g, p, q, (x, y)

    def decode(self, payloads: list[bytes]) -> NDArray[np.int64]:
        return np.frombuffer(b"".join(payloads), dtype="<u4").reshape(-1, 3).astype(np.int64)

    def invalid(self, payloads: list[bytes]) -> str | None:
        msg = super().invalid(payloads)
        if msg is not None:
            return msg
        v = self.decode(payloads)
        bad = np.flatnonzero((v[:, 0] < 1) | (v[:, 0] >= OLH_PRIME) | (v[:, 1] >= OLH_PRIME) | (v[:, 2] >= self.g))
        if bad.size:
            return (f"report {bad[0]} encodes (a, b, y) = {tuple(v[bad[0]].tolist())}, outside "
                    f"1 <= a < 2^31-1, b < 2^31-1, y < {self.g}")
        return None

    def gof(self, reports: NDArray[np.int64], which: int) -> float:
        a, b, y = reports[:, 0], reports[:, 1], reports[:, 2]
        h = _olh_hash(a, b, self.inputs[which], self.g)
        offset = (y - h) % self.g  # 0: the own bucket, else one of the g - 1 others, uniformly
        probs = np.full(self.g, self.q)
        probs[0] = self.p
        counts = np.bincount(offset, minlength=self.g)
        bins = 16  # the hash seeds must be uniform (a client must not pick them)
        a_counts = np.bincount(np.minimum((a - 1) * bins // (OLH_PRIME - 1), bins - 1), minlength=bins)
        b_counts = np.bincount(np.minimum(b * bins // OLH_PRIME, bins - 1), minlength=bins)
        flat = np.full(bins, 1.0 / bins)
        return _bonferroni([_binom(int(counts[0]), y.size, self.p), _chisquare(counts, probs / probs.sum()),
                            _chisquare(a_counts, flat), _chisquare(b_counts, flat)])

    def project(self, reports: NDArray[np.int64]) -> NDArray[np.int64]:
        a, b, y = reports[:, 0], reports[:, 1], reports[:, 2]
        x, x2 = self.inputs
        return np.asarray((y == _olh_hash(a, b, x, self.g)).astype(np.int64)
                          + 2 * (y == _olh_hash(a, b, x2, self.g)).astype(np.int64), dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# Scenarios: what the client is fed for each campaign kind
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClientScenario:
    """One audited situation: the first stdin line (declared and doubled epsilon), two
    neighbouring inputs and the exact law of the reports on each."""

    name: str
    line: dict[str, Any]
    control_line: dict[str, Any]
    inputs: tuple[Any, Any]
    epsilon: float
    model: _Model


def _doubled(config: dict[str, Any]) -> dict[str, Any]:
    out = dict(config, epsilon=2.0 * float(config["epsilon"]))
    if config["kind"] == "synth":
        out["flip_prob"] = f_from_epsilon(out["epsilon"], len(config["schema"]["attributes"]))
    return out


def _frequency(config: dict[str, Any]) -> list[ClientScenario]:
    cats = [str(c) for c in config["categories"]]
    d = len(cats)
    if d < 2:
        raise ParameterError("categories must hold at least 2 values to audit a frequency client", param="categories")
    eps = float(config["epsilon"])
    oracle = config["oracle"]
    x, y = 0, d - 1
    inputs = (cats[x], cats[y])
    model: _Model
    if oracle == "GRR":
        p, q = GRR(domain_size=d).probabilities(eps)
        model = _Grr(d, p, q, x, y)
    elif oracle == "OLH":
        g = int(config["g"])
        p, q = GRR(domain_size=g).probabilities(eps)  # OLH's bucket randomiser is GRR over g buckets
        model = _Olh(g, p, q, x, y)
    elif oracle in ("OUE", "SUE"):
        o = OUE(domain_size=d) if oracle == "OUE" else SUE(domain_size=d)
        p, q = o.probabilities(eps)
        px, py = np.full(d, q), np.full(d, q)
        px[x], py[y] = p, p
        model = _Unary(px, py)
    else:
        raise ParameterError(f"oracle must be one of GRR, OUE, SUE, OLH, got {oracle!r}", param="oracle")
    return [ClientScenario(f"frequency {oracle}", config, _doubled(config), inputs, eps, model)]


def _synth(config: dict[str, Any]) -> list[ClientScenario]:
    schema = Schema.from_dict(config["schema"])
    f = float(config["flip_prob"])
    attrs = config["schema"]["attributes"]
    first = {a["name"]: str(a["categories"][0]) for a in attrs}
    last = {a["name"]: str(a["categories"][-1]) for a in attrs}
    sizes = list(schema.sizes)
    if any(s < 2 for s in sizes):
        raise ParameterError("every attribute must have at least 2 categories to audit a synth client")
    p, q = SUE(domain_size=2, f=f).probabilities()
    px, py = [], []
    for s in sizes:
        bx, by = np.full(s, q), np.full(s, q)
        bx[0], by[-1] = p, p
        px.append(bx)
        py.append(by)
    model = _Unary(np.concatenate(px), np.concatenate(py))
    return [ClientScenario("synth", config, _doubled(config), (first, last), float(config["epsilon"]), model)]


def _cell_centres(partition: dict[str, Any], bounds: tuple[float, float, float, float]) -> list[list[float]]:
    x0, y0, x1, y1 = bounds
    kind = partition["type"]
    if kind == "grid":
        g = int(partition["g"])
        ex, ey = np.linspace(x0, x1, g + 1), np.linspace(y0, y1, g + 1)
        return [[float((ex[i] + ex[i + 1]) / 2), float((ey[j] + ey[j + 1]) / 2)] for i in range(g) for j in range(g)]
    if kind == "intervals":
        e = partition["edges"]
        axis = int(partition["axis"])
        mid = [(y0 + y1) / 2, (x0 + x1) / 2][axis]
        return [[(e[i] + e[i + 1]) / 2, mid] if axis == 0 else [mid, (e[i] + e[i + 1]) / 2] for i in range(len(e) - 1)]
    if kind == "leaves":
        return [[(a + b) / 2, (c + d) / 2] for a, b, c, d in zip(partition["x0"], partition["x1"],
                                                                  partition["y0"], partition["y1"], strict=True)]
    raise ParameterError(f"unknown partition type {kind!r}")


def _leaves(bounds: tuple[float, float, float, float], level: int) -> dict[str, Any]:
    """A KD-style leaves partition of the bounds (uneven cells, one split further at level 1)."""
    x0, y0, x1, y1 = bounds
    w, h = x1 - x0, y1 - y0
    xs = [x0, x0 + 0.3 * w, x0 + 0.55 * w, x1]
    ys = [y0, y0 + 0.6 * h, y1]
    cells = [(xs[i], xs[i + 1], ys[j], ys[j + 1]) for i in range(3) for j in range(2)]
    parent = [-1] * len(cells)
    if level > 0:  # split the first leaf into four children, as MTR does
        a, b, c, d = cells[0]
        mx, my = (a + b) / 2, (c + d) / 2
        cells = [(a, mx, c, my), (a, mx, my, d), (mx, b, c, my), (mx, b, my, d), *cells[1:]]
        parent = [0, 0, 0, 0, *list(range(1, 6))]
    return {"type": "leaves", "level": level, "h": 1, "x0": [c[0] for c in cells], "x1": [c[1] for c in cells],
            "y0": [c[2] for c in cells], "y1": [c[3] for c in cells], "parent": parent}


def _spatial(config: dict[str, Any]) -> list[ClientScenario]:
    box = check_bounds_2d(config["bounds"])
    eps = float(config["epsilon"])
    phases: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
    if not config.get("assigned", False):
        phases.append((f"spatial {config.get('method', 'ug')} grid", config["partition"], None))
    else:
        m = next((int(ph["cells"]) for ph in config.get("phases", []) if int(ph["group"]) in (0, 1)), 8)
        x0, y0, x1, y1 = box
        for gid, name, axis, lo, hi in ((0, "U'_x", 0, x0, x1), (1, "U'_y", 1, y0, y1)):
            part = {"type": "intervals", "axis": axis, "edges": np.linspace(lo, hi, m + 1).tolist()}
            phases.append((f"spatial kdght phase {name} (intervals)", part, {"group": gid}))
        for level in (0, 1):
            phases.append((f"spatial kdght phase U^{level} (leaves)", _leaves(box, level), {"group": 2 + level}))
    out = []
    for name, part, assignment in phases:
        centres = _cell_centres(part, box)
        d = max(len(centres), 2)
        p, q = OUE(domain_size=d).probabilities(eps)
        x, y = 0, len(centres) - 1
        px, py = np.full(d, q), np.full(d, q)
        px[x], py[y] = p, p
        extra: dict[str, Any] = {}
        if assignment is not None:
            extra = {"assignment": {"assignment": "audit-" + secrets.token_urlsafe(18), **assignment},
                     "partition": part}
        line = dict(config, **extra)
        out.append(ClientScenario(name, line, dict(_doubled(config), **extra), (centres[x], centres[y]), eps,
                                  _Unary(px, py)))
    return out


def _check_layout(config: dict[str, Any], scenarios: list[ClientScenario]) -> list[ClientScenario]:
    declared = (config.get("payload") or {}).get("layout")
    for sc in scenarios:
        if declared is not None and declared != sc.model.layout:
            raise ParameterError(f"config payload.layout {declared!r} does not match the {sc.name} reports' "
                                 f"layout {sc.model.layout!r}")
    return scenarios


def client_scenarios(config: dict[str, Any]) -> list[ClientScenario]:
    """The scenarios :func:`audit_client` runs for a campaign's public configuration.

    Frequency: the declared oracle on its first and last category. Synth: the record of every
    attribute's first category against the one of every last category. Spatial UG: the grid;
    KDG-HT: each phase (``U'_x``, ``U'_y`` intervals, tree levels 0 and 1 as leaves partitions),
    with an assignment and partition as the service hands them out, on two cell centres.
    """
    if not isinstance(config, dict) or "kind" not in config or "epsilon" not in config:
        raise ParameterError("config must be a campaign's public configuration (with kind and epsilon)", param="config")
    kind = config["kind"]
    builders = {"frequency": _frequency, "synth": _synth, "spatial": _spatial}
    if kind not in builders:
        raise ParameterError(f"config kind must be frequency, synth or spatial, got {kind!r}")
    try:
        return _check_layout(config, builders[kind](config))
    except KeyError as exc:
        raise ParameterError(f"config is missing the field {exc.args[0]!r} of a {kind} campaign", param="config") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ParameterError):
            raise
        raise ParameterError(f"config is not a valid {kind} campaign configuration: {exc}", param="config") from None


# ---------------------------------------------------------------------------------------------
# Running the client
# ---------------------------------------------------------------------------------------------
def run_client(command: Sequence[str], line: dict[str, Any], inputs: Sequence[Any], *,
               timeout: float = 300.0) -> list[bytes]:
    """Run ``command`` once under the conformance protocol and return its decoded reports.

    Raises
    ------
    ClientError
        The command could not start, exited non-zero, timed out, or wrote a wrong number of
        lines or a line that is not strict base64.
    """
    text = json.dumps(line) + "\n" + "".join(json.dumps(v) + "\n" for v in inputs)
    try:
        proc = subprocess.run(list(command), input=text.encode(), capture_output=True, timeout=timeout,
                              check=False)
    except FileNotFoundError as exc:
        raise ClientError(f"cannot start the client command {command[0]!r}: {exc}") from None
    except subprocess.TimeoutExpired:
        raise ClientError(f"the client command timed out after {timeout:g} s") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise ClientError(f"the client command exited with code {proc.returncode}: {' | '.join(tail)}")
    lines = proc.stdout.decode(errors="replace").splitlines()
    if len(lines) != len(inputs):
        raise ClientError(f"the client wrote {len(lines)} lines for {len(inputs)} inputs")
    out = []
    for i, ln in enumerate(lines):
        try:
            out.append(b64decode(ln.strip()))
        except ValueError:
            raise ClientError(f"line {i + 1} of the client's output is not strict base64: {ln[:60]!r}") from None
    return out


def _reports(command: Sequence[str], line: dict[str, Any], inputs: tuple[Any, Any], n: int,
             timeout: float) -> tuple[list[bytes], list[bytes]]:
    """``n`` reports on each input, from one run of the client (inputs interleaved)."""
    feed = [inputs[i % 2] for i in range(2 * n)]
    payloads = run_client(command, line, feed, timeout=timeout)
    return payloads[0::2], payloads[1::2]


class _Pool:
    """Reports served in order to :func:`audit_epsilon`'s batch mechanism."""

    def __init__(self, cells: tuple[NDArray[np.int64], NDArray[np.int64]]) -> None:
        self.cells = cells
        self.pos = [0, 0]

    def __call__(self, which: int, _gen: np.random.Generator, n: int) -> NDArray[np.int64]:
        start = self.pos[which]
        self.pos[which] += n
        return self.cells[which][start:start + n]


def _eps_bound(model: _Model, decoded: tuple[NDArray[Any], NDArray[Any]], epsilon: float, alpha: float) -> float:
    cells = (model.project(decoded[0]), model.project(decoded[1]))
    res = audit_epsilon(_Pool(cells), 0, 1, epsilon=epsilon, trials=int(cells[0].size), batch=True, rng=0,
                        confidence=1.0 - alpha)
    return res.lower_bound


def audit_client(
    config: dict[str, Any],
    command: Sequence[str],
    *,
    reports: int = 3000,
    alpha: float = 1e-6,
    timeout: float = 300.0,
    progress: Callable[[str], None] | None = None,
) -> ClientAudit:
    """Hold a client implementation to a campaign's public configuration over the wire format.

    Parameters
    ----------
    config : dict
        The campaign's public configuration (``GET /campaigns/{id}``).
    command : sequence of str
        The client's conformance entry point (see the module docstring for the protocol), e.g.
        ``[sys.executable, "-m", "privpub.client.conformance"]`` or
        ``["node", "clients/js/bin/privpub-report.mjs"]``.
    reports : int
        Reports per input and per configuration (the epsilon bound uses them all; at least 400).
    alpha : float
        Error rate of each check on a conforming client (a p-value below it, or an epsilon bound
        at confidence ``1 - alpha`` above epsilon, fails the check). The client's randomness is
        its own (unseeded), so this is the false-alarm rate of a run.
    timeout : float
        Seconds allowed for each run of the client.
    progress : callable, optional
        Called with each scenario's name.

    Returns
    -------
    ClientAudit
        Every check with its negative control; ``.passed`` is the verdict.

    Raises
    ------
    ParameterError
        For a configuration that is not an auditable campaign, or bad ``reports`` / ``alpha``.
    ClientError
        When the command cannot be run under the protocol at all (a wire-format failure on
        well-formed lines is a failed check, not an exception).

    Examples
    --------
    >>> import sys
    >>> cfg = {"kind": "frequency", "epsilon": 1.0, "oracle": "GRR", "categories": ["a", "b", "c"],
    ...        "payload": {"layout": "uint32le", "bytes": 4}}
    >>> audit = audit_client(cfg, [sys.executable, "-m", "privpub.client.conformance"], reports=1000)
    >>> audit.passed
    True
    """
    n = check_positive_int(reports, "reports", minimum=400)
    a = check_probability(alpha, "alpha")
    scenarios = client_scenarios(config)
    checks: list[ClientCheck] = []
    for sc in scenarios:
        if progress is not None:
            progress(sc.name)
        with ThreadPoolExecutor(max_workers=2) as pool:  # the declared and the doubled run side by side
            runs = [pool.submit(_reports, command, line, sc.inputs, n, timeout)
                    for line in (sc.line, sc.control_line)]
            got, ctl = (r.result() for r in runs)
        bad = sc.model.invalid(got[0] + got[1])
        bad_ctl = sc.model.invalid(ctl[0] + ctl[1])
        checks.append(ClientCheck(sc.name, "wire", bad is None, bad or f"{2 * n} reports well-formed",
                                  None, bad_ctl or "well-formed", n))
        if bad is not None or bad_ctl is not None:
            continue
        dec = (sc.model.decode(got[0]), sc.model.decode(got[1]))
        dec_ctl = (sc.model.decode(ctl[0]), sc.model.decode(ctl[1]))
        pv = min(1.0, 2 * min(sc.model.gof(dec[0], 0), sc.model.gof(dec[1], 1)))
        pv_ctl = min(1.0, 2 * min(sc.model.gof(dec_ctl[0], 0), sc.model.gof(dec_ctl[1], 1)))
        checks.append(ClientCheck(sc.name, "distribution", pv >= a, f"p = {pv:.3g}", pv_ctl < a,
                                  f"p = {pv_ctl:.3g}", n))
        lb = _eps_bound(sc.model, dec, sc.epsilon, a)
        lb_ctl = _eps_bound(sc.model, dec_ctl, sc.epsilon, a)
        checks.append(ClientCheck(sc.name, "epsilon", lb <= sc.epsilon,
                                  f"lower bound {lb:.3f} vs declared {sc.epsilon:g}", lb_ctl > sc.epsilon,
                                  f"lower bound {lb_ctl:.3f}", n))
    return ClientAudit(tuple(checks), tuple(sc.name for sc in scenarios))

