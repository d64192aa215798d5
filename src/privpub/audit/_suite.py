"""The library's own audit suite: one :class:`AuditCase` per private step, each with a negative control.

A case names a mechanism, a worst-case pair of neighbouring inputs and the declared epsilon;
its *control* is the same mechanism deliberately broken (noise scale halved or epsilon doubled),
which the auditor must flag. :func:`run_audits` runs the cases of a tier and returns a table;
``privpub audit run [--full]`` prints it (the numbers in docs/privacy.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pandas as pd

from privpub.audit._case import AuditCase, check_tier
from privpub.core import RNGLike, as_generator
from privpub.errors import ParameterError, PrivpubError

__all__ = ["AuditCase", "audit_cases", "run_audits"]

def _builders() -> dict[str, Callable[[], list[AuditCase]]]:
    from privpub.audit import _cases_core, _cases_parts

    out: dict[str, Callable[[], list[AuditCase]]] = {
        "core": _cases_core.core_cases,
        "ldp": _cases_core.ldp_cases,
    }
    out.update(_cases_parts.PART_BUILDERS)
    return out


def audit_cases(tier: str = "fast", parts: list[str] | None = None) -> list[AuditCase]:
    """The audit cases of a tier (``"fast"`` or ``"full"``), optionally for some parts only.

    Every part must contribute cases that run its publisher as a user runs it (``part.X.publish``
    cases). A part whose cases cannot be built (an import or attribute error: a renamed step) or
    that has no case in the tier is an error, never a silent skip.

    Raises
    ------
    PrivpubError
        If a part's builder fails or yields no case for the tier.
    """
    t = check_tier(tier)
    builders = _builders()
    names = list(builders) if parts is None else list(parts)
    unknown = [p for p in names if p not in builders]
    if unknown:
        raise ParameterError(f"parts must be among {sorted(builders)}, got {unknown}", param="parts")
    cases: list[AuditCase] = []
    for name in names:
        try:
            built = builders[name]()
        except (ImportError, AttributeError) as exc:
            raise PrivpubError(f"the audit cases of part {name!r} cannot be built: {type(exc).__name__}: {exc}") from exc
        kept = [c for c in built if t == "full" or not c.full_only]
        if not kept:
            raise PrivpubError(f"part {name!r} has no audit case in the {t} tier")
        cases.extend(kept)
    return cases


def run_audits(tier: str = "fast", *, parts: list[str] | None = None, rng: RNGLike = 0,
               progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Run every case of a tier and its negative control; one row per case.

    Columns: ``case``, ``part``, ``epsilon``, ``neighbours``, ``trials``, ``lower_bound``,
    ``passed``, ``exact_epsilon``, ``control``, ``control_lower_bound``, ``control_flagged``,
    ``exact_control``, ``seconds``.
    """
    gen = as_generator(rng)
    rows = []
    for case in audit_cases(tier, parts):
        if progress is not None:
            progress(case.name)
        start = time.perf_counter()
        res = case.audit(tier=tier, rng=gen)
        ctl = case.audit(tier=tier, rng=gen, control=True) if case.control is not None else None
        rows.append({
            "case": case.name,
            "part": case.part,
            "epsilon": case.epsilon,
            "neighbours": case.neighbours,
            "trials": res.trials,
            "lower_bound": res.lower_bound,
            "passed": res.passed,
            "exact_epsilon": case.exact() if case.exact is not None else float("nan"),
            "control": case.control_note if ctl is not None else "",
            "control_lower_bound": ctl.lower_bound if ctl is not None else float("nan"),
            "control_flagged": (not ctl.passed) if ctl is not None else False,
            "exact_control": case.exact_control() if case.exact_control is not None else float("nan"),
            "seconds": time.perf_counter() - start,
        })
    return pd.DataFrame(rows)
