"""Request and response bodies of the service (pydantic models; they make the OpenAPI schema).

Campaign and stream declarations are discriminated unions: one model per campaign ``kind``
(:data:`CAMPAIGN_SPECS`) and per stream ``publisher`` (:data:`STREAM_SPECS`), each with exactly its
fields (``extra="forbid"``). The endpoints and the CLI (:func:`validate_spec`) validate with the
same models and name a bad field the same way (:func:`spec_field`). This module imports no server
package (FastAPI, SQLAlchemy) and no publisher: the CLI checks a declaration before sending it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from privpub.core import check_bounds_2d
from privpub.errors import ParameterError

__all__ = [
    "AssignmentRequest",
    "AttributeSpec",
    "BatchIn",
    "CAMPAIGN_SPECS",
    "CampaignIn",
    "CampaignSpec",
    "FrequencySpec",
    "LOG_PER_CLIENT",
    "MAX_RHO",
    "MAX_WINDOW",
    "MIN_STEP_SECONDS",
    "PUBLISHER_KEYS",
    "ReportIn",
    "STREAM_SPECS",
    "SpatialSpec",
    "StreamIn",
    "StreamSpec",
    "StreamUnitIn",
    "SynthSpec",
    "TokenRequest",
    "UNSERVED_PUBLISHERS",
    "check_origins",
    "spec_field",
    "spec_loc",
    "validate_spec",
]

_HEX32 = r"^[0-9a-fA-F]{32}$"
_B64 = r"^[A-Za-z0-9+/]*={0,2}$"


#: the per-kind fields of a campaign declaration before issue 24 (one flat model, all optional) and
#: their defaults there: a client of that model may send another kind's field as ``null`` or at
#: that default, which is ignored (and a ``null`` of the kind's own field means its default)
_LEGACY_FIELDS: dict[str, Any] = {
    "allow_unenrolled_phases": False, "poisoning_defense": None, "oracle": None, "categories": None, "method": None,
    "bounds": None, "expected_participants": None, "g": None, "eta": 0.05, "intervals": None, "lam": 0.6,
    "rgdd_tau": 1.0, "kappa": 4.0, "h": None, "assignment_ttl": 600, "attributes": None, "degree": 2,
    "estimator": "em"}


def _legacy(key: str, value: Any, fields: Mapping[str, Any]) -> bool:
    """Whether ``key: value`` is a field of the flat model that a kind ignores."""
    if key not in _LEGACY_FIELDS:
        return False
    if value is None:
        return True
    default = _LEGACY_FIELDS[key]
    return key not in fields and default is not None and type(value) is type(default) and value == default


_ORIGIN = re.compile(r"^https?://[a-z0-9.\-]+(:[0-9]{1,5})?$|^https?://\[[0-9a-f:.]+\](:[0-9]{1,5})?$")


def check_origins(origins: list[str] | None) -> list[str] | None:
    """Validate and normalise ``allowed_origins``: each exactly ``scheme://host[:port]`` (lower case)."""
    if origins is None:
        return None
    out: list[str] = []
    for i, origin in enumerate(origins):
        o = str(origin).strip().lower().rstrip("/")
        if not _ORIGIN.match(o):
            raise ValueError(f"allowed_origins[{i}] must be an origin like https://example.org or "
                             f"http://127.0.0.1:8080 (scheme, host and optional port; no path, no '*'), got {origin!r}")
        if o not in out:
            out.append(o)
    return out


#: the type of the errors of rules across fields (their context names the field, which pydantic's
#: own value errors never have)
_SPEC_ERROR = "value_error"


def _not_here(data: dict[str, Any], model: type[BaseModel], models: Mapping[str, type[BaseModel]], tag: str,
              what: str) -> None:
    """Refuse, naming it, a field that ``model`` lacks but another kind or publisher takes."""
    for key in data:
        if key in model.model_fields:
            continue
        takers = [name for name, other in models.items() if key in other.model_fields]
        if takers:
            raise PydanticCustomError(_SPEC_ERROR, "does not apply to a {tag} {what} (only to {takers})",
                                      {"field": key, "tag": str(data.get(tag)), "what": what,
                                       "takers": ", ".join(takers)})


Category = Annotated[str, Field(min_length=1, max_length=200)]


def _distinct(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError("categories must be distinct")
    return values


Categories = Annotated[list[Category], Field(min_length=2, max_length=10_000), AfterValidator(_distinct)]


class _CampaignBase(BaseModel):
    """The fields every campaign kind declares. Everything here is public: participants' devices
    read it to perturb their values."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    epsilon: float = Field(gt=0, le=40, allow_inf_nan=False,
                           description="per-participant epsilon (each participant sends one report)")
    min_reports: int = Field(default=1000, ge=1, le=1_000_000_000,
                             description="no release is published below this many reports")
    opens_at: datetime | None = None
    closes_at: datetime | None = None
    time_precision: int = Field(default=3600, ge=60, le=7 * 86400,
                                description="report times are stored rounded down to this many seconds")
    enrollment: bool = Field(default=False, description="reports need a one-time enrollment token")
    # web participants (the JS client, GET /client.js)
    allowed_origins: list[str] | None = Field(
        default=None, max_length=100,
        description="web origins (scheme://host[:port]) whose pages may submit from a browser (CORS)")

    @model_validator(mode="before")
    @classmethod
    def _former_and_other_kinds_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if not _legacy(k, v, cls.model_fields)}
            _not_here(data, cls, CAMPAIGN_SPECS, "kind", "campaign")
        return data

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, v: list[str] | None) -> list[str] | None:
        return check_origins(v)


class FrequencySpec(_CampaignBase):
    """A ``frequency`` campaign: one categorical answer through a local-DP frequency oracle."""

    kind: Literal["frequency"]
    categories: Categories = Field(description="the answers a participant may give (2 to 10,000, distinct)")
    oracle: Literal["GRR", "OUE", "OLH", "SUE", "auto"] = Field(
        default="auto", description="the frequency oracle; auto: the lowest analytic variance for the domain "
                                    "size and epsilon")
    poisoning_defense: Literal["none", "detect", "recover"] = Field(
        default="detect", description="none, detect or recover (see docs/service.md)")


class SpatialSpec(_CampaignBase):
    """A ``spatial`` campaign: 2-D locations, by KDG-HT's multi-phase protocol or a uniform grid (UG)."""

    kind: Literal["spatial"]
    bounds: list[float] = Field(min_length=4, max_length=4, description="the public box [x0, y0, x1, y1]")
    expected_participants: int = Field(ge=10, le=1_000_000_000,
                                       description="how many participants the campaign expects (it sizes the grid "
                                                   "and the phases)")
    method: Literal["kdght", "ug"] = "kdght"
    g: int | None = Field(default=None, ge=2, le=512, description="UG: grid side (default from n and epsilon)")
    eta: float = Field(default=0.05, gt=0, lt=1, description="KDG-HT: share of participants in phase 0")
    intervals: int | None = Field(default=None, ge=2, le=1024, description="KDG-HT: phase-0 intervals per axis")
    lam: float = Field(default=0.6, gt=0, le=1)
    rgdd_tau: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    kappa: float = Field(default=4.0, gt=0, allow_inf_nan=False)
    h: int | None = Field(default=None, ge=1, le=10)
    assignment_ttl: int = Field(default=600, ge=10, le=7 * 86400,
                                description="seconds a group assignment stays valid")
    allow_unenrolled_phases: bool = Field(
        default=False, description="KDG-HT only: run the phases without enrollment (anyone can then steer the "
                                   "public partition; one assignment per request, assignment_ttl at most 3600 s)")

    @field_validator("bounds")
    @classmethod
    def _bounds(cls, v: list[float]) -> list[float]:
        return [float(b) for b in check_bounds_2d(v)]

    @model_validator(mode="after")
    def _phases(self) -> SpatialSpec:
        if self.method != "kdght":
            if self.allow_unenrolled_phases:
                raise PydanticCustomError(_SPEC_ERROR, "applies to multi-phase (KDG-HT) campaigns only",
                                          {"field": "allow_unenrolled_phases"})
            return self
        if not self.enrollment:
            if not self.allow_unenrolled_phases:
                raise PydanticCustomError(
                    _SPEC_ERROR,
                    "a KDG-HT campaign builds its later phases from earlier reports, so anyone who can report can "
                    "steer its public partition: set enrollment: true (one assignment per enrollment token), or "
                    "opt out explicitly with allow_unenrolled_phases: true",
                    {"field": "enrollment"})
            if self.assignment_ttl > 3600:
                raise PydanticCustomError(
                    _SPEC_ERROR,
                    "must be at most 3600 seconds for a campaign without enrollment (an unused assignment holds a "
                    "place of its phase until it expires)",
                    {"field": "assignment_ttl"})
        return self


class AttributeSpec(BaseModel):
    """One categorical attribute of a ``synth`` campaign's schema."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    categories: Categories
    type: Literal["categorical"] = Field(default="categorical", description="only categorical attributes")


class SynthSpec(_CampaignBase):
    """A ``synth`` campaign: records over a categorical schema, released as synthetic data (paper 000)."""

    kind: Literal["synth"]
    attributes: list[AttributeSpec] = Field(min_length=2, max_length=64)
    degree: int = Field(default=2, ge=1, le=8, description="Bayesian network degree (below the number of attributes)")
    estimator: Literal["em", "linear", "hybrid"] = "em"

    @model_validator(mode="after")
    def _degree(self) -> SynthSpec:
        if self.degree >= len(self.attributes):
            raise PydanticCustomError(_SPEC_ERROR, "must be below the number of attributes ({d})",
                                      {"field": "degree", "d": len(self.attributes)})
        return self


#: one model per campaign kind, by its ``kind``
CAMPAIGN_SPECS: dict[str, type[_CampaignBase]] = {"frequency": FrequencySpec, "spatial": SpatialSpec,
                                                   "synth": SynthSpec}


class CampaignSpec(RootModel[Annotated[FrequencySpec | SpatialSpec | SynthSpec, Field(discriminator="kind")]]):
    """A campaign as an operator declares it (``POST /campaigns`` or ``privpub campaign create``):
    one model per ``kind`` (:data:`CAMPAIGN_SPECS`)."""


#: the name the endpoints used before issue 24
CampaignIn = CampaignSpec


# ---------------------------------------------------------------------------------------------
# streams
# ---------------------------------------------------------------------------------------------
#: names: no control characters (NUL, newlines ...)
_PRINTABLE = r"^[^\x00-\x1f\x7f]+$"
#: largest window a service stream may declare
MAX_WINDOW = 1 << 20
#: shortest step of a clocked stream (seconds): at most 100 steps a second per stream
MIN_STEP_SECONDS = 0.01
#: default cap of logged queries per client and stream per hour (the rest are answered, not logged)
LOG_PER_CLIENT = 1000
#: the keys of :data:`privpub.stream.PUBLISHERS` (spelled out: the CLI checks a declaration without
#: importing the publishers; tests/service/test_specs.py keeps the two equal)
PUBLISHER_KEYS = ("rtp", "hq_rtp", "rtp_mm", "hq_rtpmm", "bt", "bth", "mf_sqrt", "blt", "mf_range")
_ALIASES = {"binarytree": "bt", "binary": "bt", "honaker": "bth"}


def publisher_key(name: str) -> str | None:
    """The :data:`privpub.stream.PUBLISHERS` key of ``name`` ("HQRTP", "hq_rtp", "HQ_RTP" ...)."""
    norm = str(name).lower().replace("_", "").replace("-", "").replace(" ", "")
    table = {k.replace("_", ""): k for k in PUBLISHER_KEYS}
    table.update(_ALIASES)
    return table.get(norm)


class StreamUnitIn(BaseModel):
    """Person-per-step privacy: all of one person's events of one step, at most ``max_contributions``
    of them, are protected (events are posted with their ``privacy_ids``; the service keeps at
    most ``max_contributions`` of each person's events per step)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["person_per_step"] = "person_per_step"
    privacy_id: str = Field(min_length=1, max_length=200, pattern=_PRINTABLE,
                            description="what the events' privacy ids identify (e.g. 'user'), shown in the "
                                        "stream's description")
    max_contributions: int = Field(strict=True, ge=1, le=10**6,
                                   description="k: the events of one person counted in one step at most")


#: the largest rho of a service stream (zCDP): the pure-DP cap epsilon = 40 converted, 40**2 / 2
MAX_RHO = 800.0
#: the publishers that take ``rho=`` (zCDP, Gaussian noise), as the rule messages name them
_RHO_TAKERS = "bt, bth, mf_sqrt, blt and mf_range"


class _StreamBase(BaseModel):
    """The fields of every stream: its name, the window and how the service runs it (the budget,
    ``epsilon`` or ``rho``, is declared by the publisher's model)."""

    model_config = ConfigDict(extra="forbid")
    #: spec field -> the publisher's constructor keyword, where the two names differ
    RENAMED: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _other_publishers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            tag = str(data.get("publisher"))
            if "epsilon" in data and "epsilon" not in cls.model_fields:
                raise PydanticCustomError(
                    _SPEC_ERROR, "{tag} is a zCDP publisher (Gaussian noise): give rho, not epsilon "
                                 "(privpub.core.pure_dp_to_zcdp converts: rho = epsilon**2 / 2)",
                    {"field": "epsilon", "tag": tag})
            if "rho" in data and "rho" not in cls.model_fields:
                raise PydanticCustomError(
                    _SPEC_ERROR, "{tag} is a pure-DP publisher (Laplace noise): give epsilon, not rho; the "
                                 "publishers that take rho (zCDP) are {takers}",
                    {"field": "rho", "tag": tag, "takers": _RHO_TAKERS})
            _not_here(data, cls, STREAM_SPECS, "publisher", "stream")
        return data

    name: str = Field(min_length=1, max_length=200, pattern=_PRINTABLE,
                      description="a label (no control characters: PostgreSQL text cannot hold NUL)")
    window: int = Field(ge=1, le=MAX_WINDOW, description="sliding window W: ranges inside the last W steps")
    sensitivity: float = Field(default=1.0, gt=0, allow_inf_nan=False,
                               description="what one individual may contribute to one step's count "
                                           "(neighbouring streams differ by at most this in one step)")
    max_item: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                   description="largest count of one step; larger counts are refused")
    step_seconds: float | None = Field(default=None, ge=MIN_STEP_SECONDS, le=366 * 86400, allow_inf_nan=False,
                                       description=f"step length (at least {MIN_STEP_SECONDS} s): the service's "
                                                   "clock closes steps; omitted: steps close by POST counts or "
                                                   "close-step")
    origin: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                 description="Unix time where step 1 starts (default: now, aligned to the step); "
                                             "at most 1,000,000 steps in the past, 366 days in the future")
    horizon: int | None = Field(default=None, ge=1, le=2**52, description="last step of the stream")
    late: Literal["reject", "current"] = Field(
        default="reject", description="events of a closed step: rejected (default) or counted in the open step")
    session: str | None = Field(default=None, min_length=1, max_length=200, pattern=_PRINTABLE,
                                description="budget session (in this database) charged with the stream's budget: "
                                            "a pure-DP stream's epsilon in a pure-DP session, a zCDP stream's rho "
                                            "in a zCDP session (Session.open(url, total_rho=...)); a session of "
                                            "the other measure is refused, a rho is never added to epsilons")
    rng: int | None = Field(default=None, ge=0, le=2**63 - 1,
                            description="seed for reproducible tests; never stored; leave unset in production")
    queries_from: Literal["readers", "anyone", "none"] = Field(
        default="readers", description="which range queries feed the query log the HQ publishers learn tree "
                                       "heights from: those sent with the stream's reader token (or the admin "
                                       "token; default), anyone's, or none")
    log_per_client: int | None = Field(default=None, ge=1, le=10**7,
                                       description=f"logged queries per client and hour (default {LOG_PER_CLIENT}); "
                                                   "further queries are answered, not logged")
    privacy_unit: StreamUnitIn | None = Field(
        default=None, description="whom the stream protects: omitted, one event (event level); "
                                  "person_per_step: one person's events of one step, at most max_contributions")

    @classmethod
    def params(cls) -> tuple[str, ...]:
        """The fields that are the publisher's constructor parameters (spec names; see :attr:`RENAMED`)."""
        return ("window", "sensitivity", "max_item")

    @classmethod
    def constructor_kwargs(cls, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The publisher's constructor keywords of a validated spec (unset optional fields left out)."""
        return {cls.RENAMED.get(n, n): spec[n] for n in cls.params() if spec.get(n) is not None}


_EPSILON = Field(gt=0, le=40, allow_inf_nan=False, description="event-level epsilon of the whole stream, spent once "
                                                                "(pure DP)")


class _Trees(_StreamBase):
    """The tree publishers' constructor parameters (Fenwick trees and binary trees)."""

    height: int | None = Field(default=None, ge=1, le=62, description="tree height (default: the optimal one)")
    noise: Literal["discrete", "laplace"] = "discrete"
    real: bool = Field(default=False, description="real-valued counts (float64) instead of integers")

    @classmethod
    def params(cls) -> tuple[str, ...]:
        return (*super().params(), "height", "noise", "real")


class _TreeStream(_Trees):
    """The pure-DP tree publishers: ``epsilon``."""

    epsilon: float = _EPSILON

    @classmethod
    def params(cls) -> tuple[str, ...]:
        return (*super().params(), "epsilon")


class _AdaptiveStream(_TreeStream):
    history: list[int] | None = Field(default=None, max_length=10_000,
                                      description="public past query lengths the tree heights start from")

    @classmethod
    def params(cls) -> tuple[str, ...]:
        return (*super().params(), "history")


_RHO_DESC = "event-level rho of the whole stream, spent once (rho-zCDP, discrete Gaussian noise)"


class _BinaryStream(_Trees):
    """The binary trees take ``epsilon`` (pure DP, Laplace noise) or ``rho`` (zCDP, Gaussian noise):
    exactly one."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "oneOf": [{"required": ["epsilon"]}, {"required": ["rho"]}]})

    epsilon: float | None = Field(default=None, gt=0, le=40, allow_inf_nan=False,
                                  description="event-level epsilon of the whole stream, spent once (pure DP, "
                                              "Laplace noise); or give rho")
    rho: float | None = Field(default=None, gt=0, le=MAX_RHO, allow_inf_nan=False,
                              description=_RHO_DESC + "; or give epsilon")

    @model_validator(mode="after")
    def _one_budget(self) -> _BinaryStream:
        if self.epsilon is None and self.rho is None:
            raise PydanticCustomError(_SPEC_ERROR, "is required: give epsilon (pure DP, Laplace noise) or rho "
                                                   "(zCDP, Gaussian noise)", {"field": "epsilon"})
        if self.epsilon is not None and self.rho is not None:
            raise PydanticCustomError(_SPEC_ERROR, "give exactly one of epsilon (pure DP) and rho (zCDP), not both",
                                      {"field": "rho"})
        return self

    @classmethod
    def params(cls) -> tuple[str, ...]:
        return (*super().params(), "epsilon", "rho")


class _MFStream(_StreamBase):
    """The matrix-factorisation counters: ``rho`` (zCDP) and the length of a factorised block."""

    RENAMED: ClassVar[dict[str, str]] = {"block_length": "horizon"}

    rho: float = Field(gt=0, le=MAX_RHO, allow_inf_nan=False, description=_RHO_DESC)
    block_length: int | None = Field(
        default=None, ge=1, le=2**28,
        description="items per factorised block, the library's horizon= (default: the window); the stream's "
                    "own horizon is its last step")

    @classmethod
    def params(cls) -> tuple[str, ...]:
        return (*super().params(), "rho", "block_length")


class RTPSpec(_TreeStream):
    """``rtp``: Fenwick trees of one fixed height (paper 004)."""

    publisher: Literal["rtp"]


class HQRTPSpec(_AdaptiveStream):
    """``hq_rtp``: Fenwick trees whose heights follow the predicted query lengths (paper 004)."""

    publisher: Literal["hq_rtp"]


class RTPMMSpec(_TreeStream):
    """``rtp_mm``: RTP with the matrix mechanism's per-level budgets."""

    publisher: Literal["rtp_mm"]


class HQRTPMMSpec(_AdaptiveStream):
    """``hq_rtpmm``: HQ_RTP with the matrix mechanism's per-level budgets."""

    publisher: Literal["hq_rtpmm"]


class BTSpec(_BinaryStream):
    """``bt``: the binary-tree counter (Chan-Shi-Song, Dwork et al.); ``rho`` for the Gaussian tree."""

    publisher: Literal["bt"]


class BTHSpec(_BinaryStream):
    """``bth``: Honaker's least-squares binary tree; ``rho`` for its Gaussian variant."""

    publisher: Literal["bth"]


class MFSqrtSpec(_MFStream):
    """``mf_sqrt``: the square-root matrix-factorisation counter (rho-zCDP)."""

    publisher: Literal["mf_sqrt"]


class BLTSpec(_MFStream):
    """``blt``: the buffered-linear-Toeplitz matrix-factorisation counter (rho-zCDP)."""

    publisher: Literal["blt"]
    buffers: int = Field(default=4, ge=1, le=8, description="d, the buffers of the linear recurrence")

    @classmethod
    def params(cls) -> tuple[str, ...]:
        return (*super().params(), "buffers")


class MFRangeSpec(_MFStream):
    """``mf_range``: the matrix factorisation optimised for the range queries inside the window (rho-zCDP)."""

    publisher: Literal["mf_range"]
    block_length: int | None = Field(
        default=None, ge=1, le=2**20,
        description="items per factorised block, the library's horizon= (default: the window; at most 2**20: "
                    "the factorisation is optimised once per block length); the stream's own horizon is its "
                    "last step")


#: one model per stream publisher the service serves, by its ``publisher``
STREAM_SPECS: dict[str, type[_StreamBase]] = {"rtp": RTPSpec, "hq_rtp": HQRTPSpec, "rtp_mm": RTPMMSpec,
                                              "hq_rtpmm": HQRTPMMSpec, "bt": BTSpec, "bth": BTHSpec,
                                              "mf_sqrt": MFSqrtSpec, "blt": BLTSpec, "mf_range": MFRangeSpec}
#: publishers of :data:`privpub.stream.PUBLISHERS` the service does not serve, and why (none since
#: issue 26: the zCDP publishers are served with ``rho``)
UNSERVED_PUBLISHERS: dict[str, str] = {
    key: "is not served by the stream service: use privpub.stream directly" for key in PUBLISHER_KEYS
    if key not in STREAM_SPECS}


class StreamSpec(RootModel[Annotated[RTPSpec | HQRTPSpec | RTPMMSpec | HQRTPMMSpec | BTSpec | BTHSpec | MFSqrtSpec
                                     | BLTSpec | MFRangeSpec, Field(discriminator="publisher")]]):
    """A stream as an operator declares it (``POST /streams`` or ``privpub stream create``): one model
    per publisher (:data:`STREAM_SPECS`). ``publisher`` is a name of ``privpub.stream.PUBLISHERS``;
    class names such as ``"HQRTP"`` also work. The pure-DP publishers take ``epsilon``, the
    matrix-factorisation ones ``rho`` (zCDP), the binary trees either (exactly one)."""

    @model_validator(mode="before")
    @classmethod
    def _publisher_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("publisher"), str):
            key = publisher_key(data["publisher"])
            if key in UNSERVED_PUBLISHERS:
                raise PydanticCustomError(_SPEC_ERROR, "{key} {why}",
                                          {"field": "publisher", "key": key, "why": UNSERVED_PUBLISHERS[key]})
            if key is not None:
                return {**data, "publisher": key}
        return data


#: the name the endpoints used before issue 24
StreamIn = StreamSpec
#: discriminator tags (a pydantic error's location starts with the tag of the model it is about)
_TAGS = frozenset(CAMPAIGN_SPECS) | frozenset(STREAM_SPECS)


#: where a request's part is (the first element of a FastAPI error location)
_PLACES = ("body", "query", "path", "header", "cookie")


#: pydantic's error types for a missing or unknown tag of a discriminated union
_UNION_TAG_ERRORS = ("union_tag_not_found", "union_tag_invalid")
#: pydantic's ``ctx["discriminator"]`` (the tag's name, quoted) -> the field it names
_DISCRIMINATORS = {"'kind'": "kind", "'publisher'": "publisher"}


def spec_loc(error: Mapping[str, Any]) -> list[str | int]:
    """The path of the field a pydantic error is about, without its place (``body`` ...) and
    without the discriminator tag of a campaign kind or stream publisher."""
    ctx = error.get("ctx")
    ctx = ctx if isinstance(ctx, Mapping) else {}
    kind = str(error.get("type", ""))
    if kind == _SPEC_ERROR and isinstance(ctx.get("field"), str):  # a rule across fields names its field
        return [str(ctx["field"])]
    loc: list[str | int] = [p if isinstance(p, int) else str(p) for p in error.get("loc", ())]
    loc = [p for p in loc if p not in _PLACES]
    if len(loc) > 1 and isinstance(loc[0], str) and loc[0] in _TAGS:  # the union's tag: not a field
        loc = loc[1:]
    if not loc and kind in _UNION_TAG_ERRORS:  # no or an unknown kind / publisher
        return [_DISCRIMINATORS.get(str(ctx.get("discriminator")), "kind")]
    return loc


def spec_field(error: Mapping[str, Any]) -> str:
    """The field a pydantic error is about, as the service's 422 and the CLI name it: ``a.0.b``
    (:func:`spec_loc` joined)."""
    return ".".join(str(p) for p in spec_loc(error))


def validate_spec(model: type[BaseModel], body: Any, what: str) -> dict[str, Any]:
    """``body`` validated by ``model`` (a campaign or stream spec), as JSON-ready dict; a bad body
    raises :class:`~privpub.errors.ParameterError` naming the field as the service's 422 does."""
    try:
        spec = model.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = spec_field(err)
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ParameterError(f"{what}: {field}: {err['msg']}{more}", param=field) from None
    out: dict[str, Any] = spec.model_dump(mode="json")
    return out


class ReportIn(BaseModel):
    """One participant's report."""

    model_config = ConfigDict(extra="forbid")

    report_id: str = Field(pattern=_HEX32, description="random 128-bit id chosen by the client (32 hex digits)")
    report: str = Field(max_length=8192, pattern=_B64, description="the perturbed report, base64 (see payload)")
    group: int = Field(default=0, ge=0, le=1_000_000)
    assignment: str | None = Field(default=None, min_length=16, max_length=64)
    token: str | None = Field(default=None, min_length=16, max_length=64)


class BatchIn(BaseModel):
    """Many participants' reports relayed by a gateway, column-wise."""

    model_config = ConfigDict(extra="forbid")

    report_ids: str = Field(pattern=_B64, description="base64 of n x 16 bytes")
    reports: str = Field(pattern=_B64, description="base64 of the n payloads, concatenated in order")
    groups: list[Annotated[int, Field(ge=0, le=1_000_000)]] | None = Field(default=None, max_length=50_000)
    assignments: list[str] | None = Field(default=None, max_length=50_000)
    tokens: list[str] | None = Field(default=None, max_length=50_000)


class AssignmentRequest(BaseModel):
    """Ask for group assignments (KDG-HT). With enrollment: one per enrollment token (``token`` or
    ``tokens``), each bound to its token; without: ``count`` must be 1."""

    model_config = ConfigDict(extra="forbid")

    count: int = Field(default=1, ge=1, le=1000)
    token: str | None = Field(default=None, min_length=16, max_length=64)
    tokens: list[Annotated[str, Field(min_length=16, max_length=64)]] | None = Field(
        default=None, min_length=1, max_length=1000)


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(default=1, ge=1, le=100_000)
