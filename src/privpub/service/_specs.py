"""Request and response bodies of the service (pydantic models; they make the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["AssignmentRequest", "BatchIn", "CampaignIn", "ReportIn", "TokenRequest"]

_HEX32 = r"^[0-9a-fA-F]{32}$"
_B64 = r"^[A-Za-z0-9+/]*={0,2}$"


class CampaignIn(BaseModel):
    """A campaign as an operator declares it (``POST /campaigns`` or ``privpub campaign create``).

    Everything here is public: participants' devices read it to perturb their values.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    kind: Literal["frequency", "spatial", "synth"]
    epsilon: float = Field(gt=0, le=40, allow_inf_nan=False,
                           description="per-participant epsilon (each participant sends one report)")
    min_reports: int = Field(default=1000, ge=1, le=1_000_000_000,
                             description="no release is published below this many reports")
    opens_at: datetime | None = None
    closes_at: datetime | None = None
    time_precision: int = Field(default=3600, ge=60, le=7 * 86400,
                                description="report times are stored rounded down to this many seconds")
    enrollment: bool = Field(default=False, description="reports need a one-time enrollment token")
    allow_unenrolled_phases: bool = Field(
        default=False, description="KDG-HT only: run the phases without enrollment (anyone can then steer the "
                                   "public partition; one assignment per request, assignment_ttl at most 3600 s)")
    poisoning_defense: Literal["none", "detect", "recover"] | None = Field(
        default=None, description="frequency campaigns: none, detect (default) or recover (see docs/service.md)")
    # frequency
    oracle: Literal["GRR", "OUE", "OLH", "SUE", "auto"] | None = None
    categories: list[str] | None = Field(default=None, min_length=2, max_length=10_000)
    # spatial
    method: Literal["kdght", "ug"] | None = None
    bounds: list[float] | None = Field(default=None, min_length=4, max_length=4)
    expected_participants: int | None = Field(default=None, ge=10, le=1_000_000_000)
    g: int | None = Field(default=None, ge=2, le=512)
    eta: float = Field(default=0.05, gt=0, lt=1)
    intervals: int | None = Field(default=None, ge=2, le=1024)
    lam: float = Field(default=0.6, gt=0, le=1)
    rgdd_tau: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    kappa: float = Field(default=4.0, gt=0, allow_inf_nan=False)
    h: int | None = Field(default=None, ge=1, le=10)
    assignment_ttl: int = Field(default=600, ge=10, le=7 * 86400)
    # synth
    attributes: list[dict[str, Any]] | None = Field(default=None, min_length=2, max_length=64)
    degree: int = Field(default=2, ge=1, le=8)
    estimator: Literal["em", "linear", "hybrid"] = "em"
    # web participants (the JS client, GET /client.js)
    allowed_origins: list[str] | None = Field(
        default=None, max_length=100,
        description="web origins (scheme://host[:port]) whose pages may submit from a browser (CORS)")

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, v: list[str] | None) -> list[str] | None:
        from privpub.service._web import check_origins

        return check_origins(v)


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
