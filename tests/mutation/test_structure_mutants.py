"""Structure mutants (issue 34): changing *where* or *what kind* of noise is added must make a test fail.

The epsilon/rho-doubling harness (``test_epsilon_mutants.py``) changes the noise's scale only;
the flaw of issue 34 (integer noise on the non-integer query ``R x`` of the matrix-factorisation
counters) had the right scale and the wrong structure, and no test saw it. Each mutant here
applies one structural edit (to one module, or two where the code's types must follow) to a copy
of the package (the shared ``pristine_copy`` fixture), runs the tests that must kill it (by node
id: a few seconds each) and requires that one of them fails **on an assertion** (``AssertionError`` in the native
traceback): a mutant that merely crashes the code would prove nothing about the test. Every
edit keeps the budget charged as before (the exact draw still happens and is charged), so only
the structure differs, never the ledger.

Integer noise on a non-integer query
    ``mf_noninteger_query`` (``stream/_mf.py``): the exact query ``R~ x`` (``R~ = round(2^k R)``,
    int64) is computed with the unrounded ``2^k r`` instead (float), so ``y = 2^k R x + Z`` is
    integer noise on a real vector: the pre-fix flaw on the grid. Killed by
    ``tests/stream/test_zcdp.py::test_lattice_attack_tells_no_neighbours_apart`` (the public
    decoder's inverse of the answers is off the lattice for ``x_1 = 1``).

Float noise where exact noise was drawn (same scale, same charge)
    ``mf_float_block_noise`` (``stream/_mf.py``, ``_BlockNoise.draw``): the block noise ``Z`` is
    ``gen.normal`` of the discrete Gaussian's scale instead of the exact discrete Gaussian.
    Killed by the lattice attack test (``y`` is off the integer lattice).

    ``histogram_float_laplace`` (``histogram/_publishers.py``, ``_noisy``: the counts' noise of
    HPHP, AHP and the Laplace histogram): ``gen.laplace`` of scale ``1/epsilon`` instead of the
    exact discrete Laplace. Killed by ``tests/histogram/test_exactness.py::
    test_laplace_histogram_keeps_huge_counts_exact_and_noisy`` (the counts are no longer int64).

    ``stream_tree_float_laplace`` (``core/_tree_noise.py``, ``_sample_discrete``: the exact
    sampler behind every stream tree's discrete noise: RTP, HQ_RTP, RTP_MM, HQ_RTPMM, BT, BTH):
    ``gen.laplace`` of scale ``t / s`` instead of the exact discrete Laplace; the trees are made
    float64 too (``stream/_base.py``), else the int64 node sums refuse the float noise with a
    crash, not a test. Killed by ``tests/stream/test_publishers.py::
    test_discrete_noise_answers_lie_on_the_integer_lattice`` (answers off the integer lattice;
    the float64 trees alone, with exact noise, pass it).

    ``core_laplace_noise_as_float`` and ``core_laplace_as_float`` (``core/_mechanisms.py``, only
    once the exact grid Laplace of issue 34 is in the package, ``privpub.core.laplace_grid``):
    ``laplace_noise`` (DAWA's draws) and ``laplace`` (every ``noise="laplace"`` publisher) draw
    ``gen.laplace`` of scale ``sensitivity / epsilon`` instead of discrete Laplace on the dyadic
    grid, after the same charge. Killed by ``tests/core/test_laplace_exact.py::
    test_laplace_noise_lies_on_the_documented_grid`` and ``::
    test_low_order_bits_do_not_tell_neighbours_apart`` (Mironov's residue below the grid).

A release computed from the true value plus noise instead of from the noisy vector
    ``mf_true_plus_noise`` (``stream/_mf.py``): the answers are ``A x + L~ Z`` (exact prefix sums
    of the raw items plus the decoded noise) instead of ``L~ y``: equal up to rounding, but the
    rounding is a function of ``x`` and ``Z`` separately, not of ``y``. Killed by
    ``tests/stream/test_zcdp.py::test_answers_are_a_function_of_the_noisy_vector_alone`` (a
    publisher of the zero stream holding the same ``y`` releases other float64 answers).

    ``hphp_structure_from_true_counts`` (``histogram/_publishers.py``, ``HPHP.publish``): the
    private HPHP's grouping (post-processing of the noisy counts ``y``) is computed from the true
    counts; ``y`` is still drawn and charged. Killed by ``tests/histogram/test_privacy.py::
    test_publishers_use_the_tested_structure_functions`` (the groups are the structure function
    of the noisy vector).

``tests/stream/test_zcdp.py::test_lattice_attack_tells_no_neighbours_apart`` does not kill
``mf_true_plus_noise`` (its lattice coordinates stay integral up to rounding) and
``test_answer_types`` kills ``stream_tree_float_laplace`` only by its dtype: the two tests named
above were written for these mutants.

Run with the other mutants (``python -m pytest -m mutation -n 2 tests/mutation``): about 40 s of
CPU for the six (eight with the grid Laplace), one subprocess each.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import privpub
import privpub.core

SRC = Path(privpub.__file__).resolve().parent
REPO = SRC.parent.parent


@dataclass(frozen=True)
class Mutant:
    """One structural edit: every ``(file, old, new)`` replacement (``file`` relative to
    ``src/privpub``) must match its file exactly once; most mutants edit one module."""

    name: str
    edits: tuple[tuple[str, str, str], ...]
    killers: tuple[str, ...]  # node ids (relative to the repository) of the tests that must fail

    def __str__(self) -> str:
        return self.name

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(f for f, _, _ in self.edits))

    def apply(self, file: str, source: str) -> str:
        """``source`` (the pristine text of ``file``) with this mutant's edits of that file."""
        for f, old, new in self.edits:
            if f != file:
                continue
            n = source.count(old)
            assert n == 1, f"mutant {self.name}: {old!r} occurs {n} times in {file} (stale mutant)"
            source = source.replace(old, new)
        return source


def _edits(file: str, *pairs: tuple[str, str]) -> tuple[tuple[str, str, str], ...]:
    return tuple((file, old, new) for old, new in pairs)


_LATTICE = "tests/stream/test_zcdp.py::test_lattice_attack_tells_no_neighbours_apart"

MUTANTS = [
    # -- integer noise on a non-integer query ---------------------------------------------------
    Mutant("mf_noninteger_query", _edits(
        "stream/_mf.py",
        ("rt, ct, Z = self._rt, self._c, self._z", "rt, ct, Z = np.ldexp(self._r, self.grid_bits), self._c, self._z"),
        ("self._y = np.zeros(H, dtype=np.int64)", "self._y = np.zeros(H, dtype=np.float64)"),
        ("self._accY = np.zeros(H, dtype=np.int64)", "self._accY = np.zeros(H, dtype=np.float64)"),
        ("yv = int(self._accY[p]) + int(rt[0]) * xv + int(Z[p])", "yv = float(self._accY[p]) + rt[0] * xv + int(Z[p])"),
        ("self._accY[q] += int(rt[1]) * xv", "self._accY[q] += rt[1] * xv")),
        (f"{_LATTICE}[mf_sqrt-0.001]",)),
    # -- float noise where exact noise was drawn (the exact draw still happens and is charged) ----
    Mutant("mf_float_block_noise", _edits(
        "stream/_mf.py",
        ("                                        accountant=self._acc, note=self._note)\n",
         "                                        accountant=self._acc, note=self._note)\n"
         "            z = self._gen.normal(0.0, math.sqrt(discrete_gaussian_sigma2(rho=self._rho, "
         "sensitivity=self._sens)), size)\n")),
        (f"{_LATTICE}[mf_sqrt-0.001]",)),
    Mutant("histogram_float_laplace", _edits(
        "histogram/_publishers.py",
        ("        return np.asarray(discrete_laplace(counts, epsilon=epsilon, sensitivity=1, rng=gen, note=note))\n",
         "        discrete_laplace(counts, epsilon=epsilon, sensitivity=1, rng=gen, note=note)\n"
         "        return counts + gen.laplace(0.0, 1.0 / epsilon, counts.shape)\n")),
        ("tests/histogram/test_exactness.py::test_laplace_histogram_keeps_huge_counts_exact_and_noisy",)),
    Mutant("stream_tree_float_laplace",
           _edits("core/_tree_noise.py",
                  ("    return _discrete_laplace_exact(size, t, s, gen)\n", "    return gen.laplace(0.0, t / s, size)\n"))
           # the trees hold float64 (else the int64 node sums refuse the float noise: a crash, not a test)
           + _edits("stream/_base.py",
                    ("self._dtype: type = np.int64 if self._exact else np.float64", "self._dtype: type = np.float64")),
           ("tests/stream/test_publishers.py::test_discrete_noise_answers_lie_on_the_integer_lattice",)),
    # -- a release computed from the true value plus noise instead of from the noisy vector ------
    Mutant("mf_true_plus_noise", _edits(
        "stream/_mf.py",
        ("self._accN[p] += ct[0] * yv", "self._accN[p] += ct[0] * int(Z[p])"),
        ("self._accN[q] += ct[1] * yv", "self._accN[q] += ct[1] * int(Z[p])"),
        ("yf = ys.astype(np.float64)", "yf = Z[p:q].astype(np.float64)"),
        ("_conv(self._y[s:q].astype(np.float64), ct[b : 2 * b])", "_conv(Z[s:q].astype(np.float64), ct[b : 2 * b])"),
        ("vals = self._R + self._accN[u : u + m]", "vals = self._R + (self._p + np.cumsum(seg)) + self._accN[u : u + m]")),
        ("tests/stream/test_zcdp.py::test_answers_are_a_function_of_the_noisy_vector_alone[mf_sqrt]",)),
    Mutant("hphp_structure_from_true_counts", _edits(
        "histogram/_publishers.py",
        ("                    y, epsilon1=eps1, epsilon2=eps2, noise=self.noise,\n",
         "                    counts, epsilon1=eps1, epsilon2=eps2, noise=self.noise,\n")),
        ("tests/histogram/test_privacy.py::test_publishers_use_the_tested_structure_functions",)),
]

if hasattr(privpub.core, "laplace_grid"):  # the exact grid Laplace (issue 34, branch s8-float) is in the package
    MUTANTS += [
        Mutant("core_laplace_noise_as_float", _edits(
            "core/_mechanisms.py",
            ("    out = _grid_draws(math.prod(shp), t, s, grid, as_generator(rng))\n",
             "    out = as_generator(rng).laplace(0.0, sens / eps, math.prod(shp))\n")),
            ("tests/core/test_laplace_exact.py::test_laplace_noise_lies_on_the_documented_grid",)),
        Mutant("core_laplace_as_float", _edits(
            "core/_mechanisms.py",
            ("    noisy = x + _grid_draws(arr.size, t, s, grid, as_generator(rng)).reshape(arr.shape)\n",
             "    noisy = x + as_generator(rng).laplace(0.0, sens / eps, arr.shape)\n")),
            ("tests/core/test_laplace_exact.py::test_low_order_bits_do_not_tell_neighbours_apart",)),
    ]


def test_mutants_apply_and_parse() -> None:
    """Every edit matches the current source exactly once and leaves valid Python (fast tier)."""
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    for m in MUTANTS:
        for file in m.files:
            source = (SRC / file).read_text(encoding="utf-8")
            out = m.apply(file, source)
            assert out != source
            ast.parse(out)
        for node in m.killers:
            assert (REPO / node.split("::")[0]).is_file(), node


@pytest.mark.mutation
@pytest.mark.parametrize("mutant", MUTANTS, ids=str)
def test_structure_mutant_is_caught(mutant: Mutant, pristine_copy: Path) -> None:
    try:
        for file in mutant.files:
            target = pristine_copy / "privpub" / file
            target.write_text(mutant.apply(file, (SRC / file).read_text(encoding="utf-8")), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(pristine_copy), "PYTHONDONTWRITEBYTECODE": "1"}
        # explicit node ids: no marker filter (a killer may be marked statistical or slow)
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "-n", "0", "-m", "",
               "--tb=native", *mutant.killers]
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    finally:
        for file in mutant.files:  # the next mutant of this process starts from the pristine files
            shutil.copy2(SRC / file, pristine_copy / "privpub" / file)
    out = proc.stdout[-3000:] + proc.stderr[-1500:]
    assert proc.returncode != 5, f"{mutant}: no tests collected for {mutant.killers}\n{out}"
    assert proc.returncode != 0, f"mutant survived: {mutant} ({mutant.files}) makes none of {mutant.killers} fail\n{out}"
    assert proc.returncode == 1, f"pytest exited with {proc.returncode}:\n{out}"
    # killed by a test's assertion, not by a crash of the mutated code (a crash proves nothing about the test)
    assert "AssertionError" in proc.stdout, f"{mutant} crashed the code instead of failing a test's assertion:\n{out}"
