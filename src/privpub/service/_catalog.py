"""Every campaign kind by name: the one place that knows all of them (frequency, synth, spatial)."""

from __future__ import annotations

from typing import Any

from privpub.service._kinds import FrequencyKind, Kind, SynthKind, check_epsilon_useful
from privpub.service._spatial import SpatialKind

__all__ = ["KINDS", "make_kind", "normalise_spec"]

#: the campaign kinds by their spec name
KINDS: dict[str, type[Kind]] = {"frequency": FrequencyKind, "synth": SynthKind, "spatial": SpatialKind}


def make_kind(spec: dict[str, Any]) -> Kind:
    """The :class:`Kind` of a stored (normalised) campaign spec."""
    return KINDS[spec["kind"]](spec)


def normalise_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A declaration validated by :class:`~privpub.service._specs.CampaignSpec` (its shape and the
    per-kind rules), checked for what needs the kind's privacy logic (a useful epsilon, the oracle,
    the report size) and completed with the values the kind derives (``g``, ``intervals``, ``flip_prob`` ...)."""
    check_epsilon_useful(spec)
    return KINDS[spec["kind"]].normalise(spec)
