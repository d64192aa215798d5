"""Campaign kinds: what a campaign's participants report, how the server checks and sums reports,
and how a release is estimated -- each by calling the library's kernels.

* ``frequency``: one categorical attribute through a :mod:`privpub.ldp` oracle (GRR, OUE, OLH,
  SUE, or ``auto``: the lowest analytic variance for the domain size and epsilon).
* ``synth``: paper 000's RAPPOR blocks over a declared schema; the release fits
  :meth:`privpub.ldp_synth.LDPBayesSynthesizer.fit_reports` and samples synthetic records.
* ``spatial``: UG (one phase) or KDG-HT's multi-phase protocol (:mod:`privpub.service._spatial`).

A kind never sees a participant's value: only reports (bytes in the public payload layout).
"""

from __future__ import annotations

import math
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpub._io import neutralise_cell
from privpub.core import Accountant, BudgetLedger, PrivacyUnit, Schema
from privpub.errors import PrivpubError
from privpub.ldp import GRR, MAX_LOCAL_EPSILON, OLH, OUE, SizeBins, defend_bins, norm_sub, size_bins
from privpub.ldp.wire import decode_payloads, frequency_oracle, payload_width
from privpub.ldp_synth import LDPBayesSynthesizer, f_from_epsilon

__all__ = ["FrequencyKind", "Group", "Kind", "ReportError", "SpecError", "SynthKind"]

_OLH_PRIME = (1 << 31) - 1


class SpecError(PrivpubError):
    """A campaign declaration is invalid (-> 422 naming ``field``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ReportError(PrivpubError):
    """A report is malformed (-> 422 naming ``field``; nothing is stored). Never holds its content."""

    def __init__(self, field: str, message: str, index: int | None = None) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.index = index


@dataclass(frozen=True)
class Group:
    """A group of participants who report over the same public cells."""

    group_id: int
    name: str
    domain_size: int
    quota: int | None
    public: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReleaseInput:
    """What a release is computed from: per-group report counts and support sums (or payloads)."""

    campaign_id: str
    groups: list[Group]
    n: dict[int, int]
    support: dict[int, NDArray[np.int64]]
    payloads: dict[int, NDArray[np.uint8]] | None = None
    size_bins: dict[int, SizeBins] | None = None  # kinds with needs_size_bins: the reports, summarised


class Kind(ABC):
    """The server-side logic of one campaign kind (built from the stored, validated spec)."""

    kind: str
    layout: str = "bits"
    needs_payloads: bool = False  # True: the release reads the stored reports, not only the sums
    assigned: bool = False  # True: participants get their group from POST /assignments
    needs_size_bins: bool = False  # True: the release reads the stored reports in chunks (size_bins)

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.epsilon = float(spec["epsilon"])

    # -- declaration -----------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def normalise(cls, spec: dict[str, Any]) -> dict[str, Any]:
        """Check the kind-specific fields and resolve defaults (raises :class:`SpecError`)."""

    @abstractmethod
    def initial_groups(self) -> list[Group]: ...

    @abstractmethod
    def public_config(self, groups: list[Group]) -> dict[str, Any]: ...

    @abstractmethod
    def privacy_words(self) -> str:
        """The privacy parameters in plain words (dashboard, docs)."""

    # -- reports ---------------------------------------------------------------------------------
    def width(self, group: Group) -> int:
        return payload_width(self.layout, group.domain_size)

    def support_length(self, group: Group) -> int:
        return group.domain_size

    def size_bins(self, group: Group, payloads: NDArray[np.uint8]) -> SizeBins:
        """A chunk of stored reports summarised for the poisoning defense (kinds with needs_size_bins)."""
        raise NotImplementedError

    def validate(self, group: Group, payloads: NDArray[np.uint8]) -> None:
        """Check every payload of ``group`` (shape ``(k, width)``); raise :class:`ReportError`."""
        if self.layout == "bits":
            # one-cell groups are perturbed by OUE over two cells (the oracle's smallest domain): the
            # second bit is pure noise, allowed here and dropped by support()
            d = max(group.domain_size, 2)
            if d % 8:
                bad = payloads[:, -1] & np.uint8((0xFF << (d % 8)) & 0xFF)
                if bad.any():
                    raise ReportError("report", f"has bits set beyond the {d} cells of group {group.group_id}",
                                      int(np.flatnonzero(bad)[0]))

    def support(self, group: Group, payloads: NDArray[np.uint8]) -> NDArray[np.int64]:
        """Support counts of ``group``'s cells from validated payloads."""
        return OUE(domain_size=max(group.domain_size, 2)).aggregate(payloads)[: self.support_length(group)]

    # -- releases --------------------------------------------------------------------------------
    @abstractmethod
    def release(self, data: ReleaseInput) -> tuple[dict[str, Any], dict[str, Any], BudgetLedger]:
        """``(result, params, ledger)`` of a release from the stored reports."""

    def csv_rows(self, result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
        raise NotImplementedError


def reports_each(spec: dict[str, Any]) -> str:
    """The ledger's words for how many reports a participant sends: "one report each" only when
    enrollment (one one-time token per participant) enforces it."""
    return "one epsilon-LDP report each" if spec.get("enrollment") else "one epsilon-LDP report per submission"


def campaign_unit(spec: dict[str, Any]) -> PrivacyUnit:
    """Whom a campaign's release protects: one enrolled participant's report (replace-one), which
    holds only with enrollment; without it, one submission (a person who submits many reports is
    protected once per submission: see docs/privacy.md)."""
    return PrivacyUnit.participant() if spec.get("enrollment") else PrivacyUnit.submission()


def participants_words(spec: dict[str, Any]) -> str:
    if spec.get("enrollment"):
        return "Each enrolled participant sends one report (a one-time enrollment token enforces it)"
    return ("Each report is one submission: without enrollment the server cannot tell whether two reports come "
            "from the same person, so one participant may send several")


def csv_safe(value: Any) -> Any:
    """A release CSV cell that spreadsheets do not run as a formula (OWASP; :func:`privpub._io.neutralise_cell`)."""
    return neutralise_cell(value)


# ---------------------------------------------------------------------------------------------
# frequency
# ---------------------------------------------------------------------------------------------
def _auto_oracle(d: int, epsilon: float) -> str:
    """The oracle with the lowest analytic variance of one count for ``d`` values at ``epsilon``."""
    candidates = {"GRR": GRR(domain_size=d), "OUE": OUE(domain_size=d), "OLH": OLH(domain_size=d)}
    var = {}
    for name, oracle in candidates.items():
        try:
            var[name] = oracle.variance(1_000_000, epsilon=epsilon)
        except PrivpubError:
            continue
    if not var:
        raise SpecError("epsilon", f"{epsilon:g} is too small for every frequency oracle")
    return min(var, key=lambda k: (var[k], k))


class FrequencyKind(Kind):
    kind = "frequency"

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.categories: list[str] = list(spec["categories"])
        self.oracle = frequency_oracle(spec)
        self.layout = {"GRR": "uint32le", "OLH": "uint32le[3]"}.get(spec["oracle"], "bits")
        # campaigns stored before issue 22 have no field: they keep their releases' behaviour
        self.defense = str(spec.get("poisoning_defense") or "none")
        # the report-level tests read the stored reports in chunks (GRR and OLH have none: see
        # privpub.ldp.defend); memory stays O(domain) whatever the number of reports
        self.needs_size_bins = self.defense != "none" and spec["oracle"] in ("OUE", "SUE")

    @classmethod
    def normalise(cls, spec: dict[str, Any]) -> dict[str, Any]:
        cats = list(spec["categories"])  # the shape is the model's (FrequencySpec)
        oracle = spec.get("oracle") or "auto"
        eps = float(spec["epsilon"])
        if oracle == "auto":
            oracle = _auto_oracle(len(cats), eps)
        out = dict(spec, categories=cats, oracle=oracle, requested_oracle=spec.get("oracle") or "auto",
                   poisoning_defense=spec.get("poisoning_defense") or "detect")
        try:
            o = frequency_oracle(dict(out, g=OLH(domain_size=len(cats)).buckets(eps)))
            o.probabilities(eps)
            if oracle == "OLH":
                out["g"] = OLH(domain_size=len(cats)).buckets(eps)
        except PrivpubError as exc:
            raise SpecError("epsilon", str(exc)) from None
        return out

    def initial_groups(self) -> list[Group]:
        return [Group(0, "participants", len(self.categories), None, {"type": "categories"})]

    def public_config(self, groups: list[Group]) -> dict[str, Any]:
        d = len(self.categories)
        cfg = {"oracle": self.spec["oracle"], "categories": self.categories, "domain_size": d,
               "payload": {"layout": self.layout, "bytes": payload_width(self.layout, d)},
               "poisoning_defense": self.defense}
        if self.spec["oracle"] == "OLH":
            cfg["g"] = self.spec["g"]
        return cfg

    def privacy_words(self) -> str:
        e = self.epsilon
        return (f"Each participant's device randomises its answer with {self.spec['oracle']} before sending it: "
                f"whatever the true answer, every report is at most e^{e:g} ≈ {math.exp(e):.3g} times more likely "
                f"under one answer than under any other (epsilon = {e:g} local differential privacy). "
                f"{participants_words(self.spec)}; the server never sees an answer, and every published estimate "
                "is computed from the reports alone.")

    def validate(self, group: Group, payloads: NDArray[np.uint8]) -> None:
        d = group.domain_size
        if self.layout == "uint32le":
            v = decode_payloads(self.layout, payloads, d)
            bad = v >= d
            if bad.any():
                raise ReportError("report", f"must encode a value below {d}", int(np.flatnonzero(bad)[0]))
        elif self.layout == "uint32le[3]":
            v = decode_payloads(self.layout, payloads, d)
            g = int(self.spec["g"])
            bad = (v[:, 0] < 1) | (v[:, 0] >= _OLH_PRIME) | (v[:, 1] >= _OLH_PRIME) | (v[:, 2] >= g)
            if bad.any():
                raise ReportError("report", f"must encode (a, b, y) with 1 <= a < 2^31-1, b < 2^31-1, y < {g}",
                                  int(np.flatnonzero(bad)[0]))
        else:
            super().validate(group, payloads)

    def support(self, group: Group, payloads: NDArray[np.uint8]) -> NDArray[np.int64]:
        reports = decode_payloads(self.layout, payloads, group.domain_size)
        return self.oracle.aggregate(reports, epsilon=self.epsilon)

    def size_bins(self, group: Group, payloads: NDArray[np.uint8]) -> SizeBins:
        return size_bins(self.oracle, decode_payloads(self.layout, payloads, group.domain_size), epsilon=self.epsilon)

    def release(self, data: ReleaseInput) -> tuple[dict[str, Any], dict[str, Any], BudgetLedger]:
        n = data.n[0]
        if data.size_bins is not None:  # the defense read the stored reports (post-processing)
            bins = data.size_bins.get(0) or SizeBins(np.zeros(len(self.categories) + 1, dtype=np.int64), {})
            n = bins.n
            res = defend_bins(self.oracle, bins, epsilon=self.epsilon, method=self.defense)  # type: ignore[arg-type]
            est, n_est = res.estimate, res.n
            poisoning = res.to_dict()
        else:
            est = self.oracle.estimate_from_support(data.support[0], n, epsilon=self.epsilon)
            n_est = float(n)
            poisoning = {"method": self.defense, "suspected": 0, "false_positive_rate": 0.0,
                         "report_threshold": None, "group_p_value": None, "group_flagged": False,
                         "honest_reports": float(n),
                         "note": ("no reports set aside (poisoning_defense: none)" if self.defense == "none" else
                                  ("GRR: a report is one value, which an honest client sends for any input; "
                                   "enrollment is the defense" if self.spec["oracle"] == "GRR" else
                                   "OLH: no report-level test with a stated false-positive rate applies to its "
                                   "hash family; enrollment is the defense"))}
        normalised = norm_sub(est, n_est)
        se = math.sqrt(self.oracle.variance(max(1, round(n_est)), epsilon=self.epsilon))
        acc = Accountant(self.epsilon, label=f"campaign {data.campaign_id}", unit=campaign_unit(self.spec))
        with acc.step("local perturbation"):
            acc.charge(self.spec["oracle"], self.epsilon,
                       note=f"{n} reports, {reports_each(self.spec)}, randomised on participants' devices "
                            "(declared by the campaign); the estimate and the poisoning defense are "
                            "post-processing")
        result = {"estimates": dict(zip(self.categories, est.tolist())),
                  "normalised": dict(zip(self.categories, normalised.tolist())),
                  "standard_error": se, "poisoning": poisoning}
        params = {"oracle": self.spec["oracle"], "domain_size": len(self.categories),
                  "effective_epsilon": self.oracle.effective_epsilon(self.epsilon)}
        if self.spec["oracle"] == "OLH":
            params["g"] = self.spec["g"]
        return result, params, acc.seal()

    def csv_rows(self, result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
        return (["category", "estimate", "normalised"],
                [[csv_safe(c), result["estimates"][c], result["normalised"][c]] for c in self.categories])


# ---------------------------------------------------------------------------------------------
# synth
# ---------------------------------------------------------------------------------------------
class SynthKind(Kind):
    kind = "synth"
    needs_payloads = True

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.schema = Schema.from_dict({"attributes": spec["attributes"]})
        self.flip_prob = float(spec["flip_prob"])
        self.width_bits = int(sum(self.schema.sizes))

    @classmethod
    def normalise(cls, spec: dict[str, Any]) -> dict[str, Any]:
        # the shape is the model's (SynthSpec: names, categories, degree below the number of attributes)
        clean = [{"type": "categorical", "name": str(a["name"]), "categories": [str(c) for c in a["categories"]]}
                 for a in spec["attributes"]]
        try:
            schema = Schema.from_dict({"attributes": clean})
        except PrivpubError as exc:
            raise SpecError("attributes", str(exc)) from None
        if sum(schema.sizes) > 4096:
            raise SpecError("attributes", "the one-hot report would exceed 4096 bits")
        d = len(schema)
        eps = float(spec["epsilon"])
        try:
            f = f_from_epsilon(eps, d)
        except PrivpubError as exc:
            raise SpecError("epsilon", str(exc)) from None
        if eps / d > MAX_LOCAL_EPSILON:
            raise SpecError("epsilon", "is too large for the per-attribute randomisers")
        return dict(spec, attributes=clean, flip_prob=f)

    def initial_groups(self) -> list[Group]:
        return [Group(0, "participants", self.width_bits, None, {"type": "bits"})]

    def public_config(self, groups: list[Group]) -> dict[str, Any]:
        return {"schema": self.schema.to_dict(), "flip_prob": self.flip_prob, "degree": self.spec["degree"],
                "payload": {"layout": "bits", "bytes": payload_width("bits", self.width_bits),
                            "bits": self.width_bits}}

    def privacy_words(self) -> str:
        d = len(self.schema)
        return (f"Each participant's device one-hot encodes each of the {d} attributes and flips every bit with "
                f"probability f = {self.flip_prob:.4g} (RAPPOR) before sending: the whole record is protected at "
                f"epsilon = {self.epsilon:g} ({self.epsilon / d:.4g} per attribute). {participants_words(self.spec)}; "
                "the Bayesian network and the synthetic records are computed from the reports alone.")

    def release(self, data: ReleaseInput) -> tuple[dict[str, Any], dict[str, Any], BudgetLedger]:
        assert data.payloads is not None
        bits = np.unpackbits(data.payloads[0], axis=1, count=self.width_bits, bitorder="little").astype(bool)
        seed = secrets.randbits(63)
        n_rows = int(bits.shape[0])
        rel = LDPBayesSynthesizer(degree=int(self.spec["degree"]), method=self.spec["estimator"]).fit_reports(
            bits, schema=self.schema, flip_prob=self.flip_prob)
        records = rel.sample(n_rows, rng=seed)
        marginals = {a.name: records[a.name].value_counts(normalize=True)
                     .reindex(list(getattr(a, "categories", ())), fill_value=0.0).astype(float).to_dict()
                     for a in self.schema.attributes}  # every attribute of a synth campaign is categorical
        result = {"network": [{"attribute": c, "parents": list(p)} for c, p in rel.network],
                  "records": records.to_dict(orient="records"), "marginals": marginals}
        params = {"degree": int(self.spec["degree"]), "estimator": self.spec["estimator"], "flip_prob": self.flip_prob,
                  "sample_seed": seed, "n_records": n_rows}
        return result, params, rel.ledger

    def csv_rows(self, result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
        names = list(self.schema.names)
        return [csv_safe(n) for n in names], [[csv_safe(r[n]) for n in names] for r in result["records"]]


def check_epsilon_useful(spec: dict[str, Any]) -> None:
    """Refuse an epsilon at which the randomiser's two response probabilities coincide (e.g. 1e-300):
    every report would be pure noise and no release could be estimated."""
    eps = float(spec["epsilon"])
    if spec["kind"] == "synth":
        n_attrs = len(spec.get("attributes") or []) or 1
        try:
            useful = f_from_epsilon(eps, n_attrs) < 1.0
        except PrivpubError:
            useful = False
    else:
        try:
            p, q = OUE(domain_size=2).probabilities(eps)
            useful = p > q
            if spec["kind"] == "frequency" and spec.get("categories"):
                d = max(2, len(spec["categories"]))
                for o in (GRR(domain_size=d), OUE(domain_size=d)):
                    p, q = o.probabilities(eps)
                    useful = useful and p > q
        except PrivpubError:
            useful = False
    if not useful:
        raise SpecError("epsilon", f"{eps:g} is too small: the randomiser's response probabilities coincide at "
                                   "this epsilon, so the reports would carry no information")


