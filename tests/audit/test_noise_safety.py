"""Noise safety: integer counts get exact discrete Laplace by default; continuous noise only where documented.

Since issue 34 ``noise="laplace"`` is exact too (discrete Laplace on a dyadic grid, ``core.laplace`` /
``core.laplace_noise``): no part draws ``Generator.laplace`` or ``Generator.exponential`` for a
released value; the one ``Generator.laplace`` left is report-noisy-max's (only an index is released).

The grep below lists every call that draws continuous noise (``Generator.laplace``, ``.normal``,
``.gumbel``, ``.exponential``, ... and the core's continuous ``laplace`` / ``laplace_noise``) in
``src/privpub``. Each (file, call) must be on the allow-list with its reason: the core's own
mechanisms, the parts' documented ``noise="laplace"`` options (to match a paper), and data
generators that are not privacy mechanisms. A new, unlisted call fails the test: review it and
either switch it to discrete noise or document it and extend the list.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import privpub
from privpub.core import as_generator, discrete_laplace, discrete_laplace_noise, secure_generator

SRC = Path(privpub.__file__).resolve().parent

CALLS = {
    "Generator.laplace": r"\.laplace\(",
    "Generator.normal": r"\.(?:standard_)?normal\(",
    "Generator.gumbel": r"\.gumbel\(",
    "Generator.exponential": r"\.(?:standard_)?exponential\(",
    "Generator.other continuous": r"\.(?:standard_cauchy|logistic|standard_t|wald|lognormal)\(",
    "core.laplace": r"(?<![\w.])laplace\(",
    "core.laplace_noise": r"(?<![\w.])laplace_noise\(",
}

DATA_GENERATOR = "synthetic data generator for demos/tests, not a privacy mechanism"

#: (file relative to src/privpub, call) -> reason
ALLOWED: dict[tuple[str, str], str] = {
    ("core/_mechanisms.py", "Generator.laplace"): "report_noisy_max (only the index is released)",
    ("core/_mechanisms.py", "Generator.gumbel"): "exponential mechanism via Gumbel-max (only the index is released)",
    ("core/_mechanisms.py", "core.laplace"): "the exact (grid) Laplace mechanism itself (docstring example)",
    ("core/_mechanisms.py", "core.laplace_noise"): "the exact (grid) Laplace mechanism itself",
    ("histogram/_publishers.py", "core.laplace_noise"): "histogram noise='laplace' option (paper setting)",
    ("histogram/_publishers.py", "core.laplace"): "histogram noise='laplace' option (paper setting)",
    ("histogram/_dawa.py", "core.laplace"):
        "DAWA's stage-1 bucket costs (real L1 deviations) and Greedy-H's weighted range sums (weights < 1): "
        "exact grid Laplace, the real values rounded to the grid with the rounding in the noise",
    ("core/_sparse.py", "Generator.exponential"):
        "sparse_noisy_counts: the number of released empty cells when p is tiny (geometric gaps of _binomial); "
        "the documented approximation of the binomial count, no released value",
    ("core/_ranges.py", "Generator.gumbel"): "exponential_mechanism_ranges via Gumbel-max (only the integer is released)",
    ("experiments/core.py", "core.laplace"): "demo comparing continuous with discrete Laplace",
    ("audit/_cases_core.py", "core.laplace"): "the audit of the core Laplace mechanism",
    ("spatial/_data.py", "Generator.normal"): DATA_GENERATOR,
}

#: folders of data generators and experiment runners (not privacy mechanisms): non-Laplace draws allowed
GENERATOR_FOLDERS = ("datasets/", "experiments/")
GENERATOR_CALLS = ("Generator.normal", "Generator.other continuous")


def _allowed(rel: str, call: str) -> bool:
    if (rel, call) in ALLOWED:
        return True
    return rel.startswith(GENERATOR_FOLDERS) and call in GENERATOR_CALLS


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """Source lines without comments and docstring-example lines (``>>>`` / ``...``)."""
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(("#", ">>>", "...")):
            continue
        out.append((i, line.split("#", 1)[0]))
    return out


def continuous_noise_calls() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for lineno, line in _code_lines(path):
            for call, pattern in CALLS.items():
                if re.search(pattern, line):
                    found.setdefault((rel, call), []).append(lineno)
    return found


def test_continuous_noise_only_in_documented_places() -> None:
    found = continuous_noise_calls()
    unlisted = {f"{f}:{lines} {call}" for (f, call), lines in found.items() if not _allowed(f, call)}
    assert not unlisted, "continuous noise outside the documented places: " + "; ".join(sorted(unlisted))
    assert ("core/_mechanisms.py", "Generator.laplace") in found  # the grep does find real calls


def test_grep_catches_a_planted_call(tmp_path: Path) -> None:
    planted = tmp_path / "leaky.py"
    planted.write_text("def f(gen, c):\n    return c + gen.laplace(0, 1)  # noisy\n", encoding="utf-8")
    lines = _code_lines(planted)
    assert any(re.search(CALLS["Generator.laplace"], line) for _, line in lines)
    assert not re.search(CALLS["core.laplace"], "discrete_laplace(x)")


def test_core_default_count_noise_is_exact_discrete_laplace() -> None:
    # the count mechanism returns integers and its sampler never touches floating point
    out = discrete_laplace(np.arange(5), epsilon=0.5, rng=0)
    assert out.dtype == np.int64
    from privpub.core import _dlap, _dlap_jit, _mechanisms

    for fn in (discrete_laplace_noise, _mechanisms._discrete_laplace_exact, _dlap, _dlap_jit):
        body = inspect.getsource(fn).split('"""')[-1]
        assert not re.search(r"\.(laplace|random|uniform|exponential|geometric)\(|np\.exp|math\.exp", body), fn


def test_parts_default_to_discrete_noise() -> None:
    # every publisher that offers a `noise` choice defaults to discrete noise
    checked = 0
    for part in ("histogram", "stream", "spatial", "decision", "ldp_synth"):
        try:
            module = __import__(f"privpub.{part}", fromlist=["__all__"])
        except ImportError:
            continue
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name, None)
            if not inspect.isclass(obj):
                continue
            try:
                params = inspect.signature(obj).parameters
            except (TypeError, ValueError):
                continue
            if "noise" in params and params["noise"].default is not inspect.Parameter.empty:
                assert params["noise"].default == "discrete", f"privpub.{part}.{name} noise default"
                checked += 1
    if checked == 0:
        pytest.skip("no part publisher with a `noise` parameter is importable yet")


def test_secure_generator_option() -> None:
    a, b = as_generator("secure"), secure_generator()
    assert isinstance(a, np.random.Generator)
    assert a.integers(0, 2**62) != b.integers(0, 2**62)  # fresh OS entropy each time
    noisy = discrete_laplace([10, 20], epsilon=1.0, rng="secure")
    assert noisy.shape == (2,)
