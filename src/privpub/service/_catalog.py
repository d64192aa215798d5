"""Every campaign kind by name: the one place that knows all of them (frequency, synth, spatial)."""

from __future__ import annotations

from typing import Any

from privpub.service._kinds import FrequencyKind, Kind, SpecError, SynthKind, check_epsilon_useful
from privpub.service._spatial import SpatialKind

__all__ = ["KINDS", "make_kind", "normalise_spec"]

#: the campaign kinds by their spec name
KINDS: dict[str, type[Kind]] = {"frequency": FrequencyKind, "synth": SynthKind, "spatial": SpatialKind}


def make_kind(spec: dict[str, Any]) -> Kind:
    """The :class:`Kind` of a stored (normalised) campaign spec."""
    kinds = KINDS
    return kinds[spec["kind"]](spec)


def normalise_spec(spec: dict[str, Any]) -> dict[str, Any]:
    kinds = KINDS
    other = {"frequency": ("method", "bounds", "attributes"), "synth": ("oracle", "categories", "method", "bounds"),
             "spatial": ("oracle", "categories", "attributes")}
    for name in other[spec["kind"]]:
        if spec.get(name) is not None:
            raise SpecError(name, f"does not apply to a {spec['kind']} campaign")
    if spec["kind"] != "frequency" and spec.get("poisoning_defense") is not None:
        raise SpecError("poisoning_defense", "applies to frequency campaigns only")
    check_epsilon_useful(spec)
    out = kinds[spec["kind"]].normalise(spec)
    multiphase = spec["kind"] == "spatial" and (spec.get("method") or "kdght") == "kdght"
    if spec.get("allow_unenrolled_phases") and not multiphase:
        raise SpecError("allow_unenrolled_phases", "applies to multi-phase (KDG-HT) campaigns only")
    if multiphase and not spec.get("enrollment"):
        if not spec.get("allow_unenrolled_phases"):
            raise SpecError("enrollment", "a KDG-HT campaign builds its later phases from earlier reports, so "
                                          "anyone who can report can steer its public partition: set enrollment: "
                                          "true (one assignment per enrollment token), or opt out explicitly "
                                          "with allow_unenrolled_phases: true")
        if int(spec.get("assignment_ttl", 600)) > 3600:
            raise SpecError("assignment_ttl", "must be at most 3600 seconds for a campaign without enrollment "
                                              "(an unused assignment holds a place of its phase until it expires)")
    return out
