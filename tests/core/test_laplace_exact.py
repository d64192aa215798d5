"""``laplace`` and ``laplace_noise`` draw exact noise: discrete Laplace on a dyadic grid (issue 34).

Floating-point Laplace (``x + Generator.laplace``) has outputs whose low-order bits depend on
``x`` [Mir12]_; exact grid noise puts every output of ``x`` on the lattice ``x + g Z``. The tests:

* every output lies on the documented grid (``2**-20`` at scale 1), for integer and real queries
  (float Laplace fails this: its draws are not multiples of ``2**-20``);
* a low-order-bit distinguisher in the manner of Mironov (the output's residue modulo the grid)
  has the same law under the neighbours ``0`` and ``1``;
* the law is the discrete Laplace of the requested scale: the steps ``Z = out / g`` against the
  exact cdf at scale-sized cells (chi-square), the variance within 5 standard deviations of
  ``g^2 2p / (1 - p)^2``;
* the rounding of real values is paid for: the noise in steps is at least
  ``(sensitivity / g + m) / epsilon`` for ``m`` coordinates that can change;
* the charge is the float mechanism's: ``("laplace", epsilon, sensitivity)``; same seed, same output.

References
----------
.. [Mir12] Mironov. On significance of the least significant bits for differential privacy. CCS 2012.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privpub.core import Accountant, laplace, laplace_noise
from privpub.errors import ParameterError

N = 200_000


def _on_grid(x: np.ndarray, grid: float) -> bool:
    return bool(np.all(np.rint(x / grid) * grid == x))


@pytest.mark.parametrize(("epsilon", "sensitivity", "grid"), [(1.0, 1.0, 2.0**-20), (0.1, 1.0, 2.0**-17),
                                                               (2.0, 3.0, 2.0**-20), (1e-9, 1.0, 1.0)])
def test_laplace_noise_lies_on_the_documented_grid(epsilon: float, sensitivity: float, grid: float) -> None:
    # grid = 2**(floor(log2(sensitivity / epsilon)) - 20), at most 1 (the docstring's formula)
    z = laplace_noise(50_000, epsilon=epsilon, sensitivity=sensitivity, rng=1)
    assert _on_grid(z, grid)
    assert grid == min(1.0, 2.0 ** (math.floor(math.log2(sensitivity / epsilon)) - 20))


def test_integer_queries_stay_on_the_grid_and_real_ones_are_rounded_to_it() -> None:
    counts = np.arange(1000, dtype=np.int64)
    assert _on_grid(laplace(counts, epsilon=1.0, rng=2), 2.0**-20)
    # real values: the grid of m = 1000 changing coordinates, 2**(floor(log2(1 / 1000)) - 20) = 2**-30
    real = np.linspace(0.0, 1.0, 1000) + 1e-13
    out = laplace(real, epsilon=1.0, rng=2)
    assert _on_grid(out, 2.0**-30)
    assert not _on_grid(out, 2.0**-20)  # the grid really is finer (the rounding cost is 2**-20)
    out1 = laplace(real, epsilon=1.0, rng=2, changed=1)  # one coordinate changes: 2**-20
    assert _on_grid(out1, 2.0**-20)


def test_low_order_bits_do_not_tell_neighbours_apart() -> None:
    """Mironov's distinguisher reads bits below the grid: the residue of the output modulo
    ``2**-30`` (the float Laplace's draws fill them; exact noise leaves them 0 for both)."""
    for x in (0.0, 1.0):
        out = laplace(np.full(N, x), epsilon=1.0, rng=3, changed=1)
        resid = out - np.rint(out / 2.0**-20) * 2.0**-20
        assert np.count_nonzero(resid) == 0


@pytest.mark.statistical
@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1.0), (0.25, 2.0), (4.0, 1.0)])
def test_law_is_the_discrete_laplace_of_the_requested_scale(epsilon: float, sensitivity: float) -> None:
    b = sensitivity / epsilon
    g = min(1.0, 2.0 ** (math.floor(math.log2(b)) - 20))
    z = laplace_noise(N, epsilon=epsilon, sensitivity=sensitivity, rng=4) / g  # integer steps
    assert np.all(z == np.rint(z))
    # the discrete Laplace of scale B = b / g steps: P[Z <= k] for k < 0 is p^-k / (1 + p), p = exp(-1/B)
    B = b / g
    p = math.exp(-1.0 / B)
    edges = np.rint(np.array([-4, -2, -1, -0.5, -0.1, 0.1, 0.5, 1, 2, 4]) * B)
    def cdf(k: np.ndarray) -> np.ndarray:  # P[Z <= k] for integers k
        return np.where(k < 0, p ** (-k) / (1 + p), 1 - p ** (k + 1) / (1 + p))
    probs = np.diff(np.concatenate([[0.0], cdf(edges), [1.0]]))
    obs = np.bincount(np.searchsorted(edges, z, side="left"), minlength=edges.size + 1)
    assert stats.chisquare(obs, probs * N).pvalue > 1e-6
    var = 2 * p / (1 - p) ** 2  # in steps; kurtosis of the Laplace: E Z^4 = 24 B^4 (to 1e-12)
    m4 = 24 * B**4
    assert abs(float(np.mean(z * z)) - var) <= 5 * math.sqrt((m4 - var**2) / N)
    assert abs(var * g * g / (2 * b * b) - 1) < 1e-10  # continuous Laplace's variance


def test_rounding_of_real_values_is_in_the_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    import privpub.core._mechanisms as mech

    seen: list[tuple[int, int]] = []
    real = mech._discrete_laplace_exact
    monkeypatch.setattr(mech, "_discrete_laplace_exact", lambda size, t, s, gen: seen.append((t, s)) or real(size, t, s, gen))
    laplace(np.zeros(8) + 0.5, epsilon=0.5, sensitivity=2.0, rng=0, changed=3)
    g = 2.0 ** (math.floor(math.log2(min(4.0, 2.0) / 3)) - 20)
    (t, s), = seen
    assert t / s >= (2.0 / g + 3) / 0.5  # the rounding's 3 extra steps are in the scale
    seen.clear()
    laplace(np.zeros(8, dtype=np.int64), epsilon=0.5, sensitivity=2.0, rng=0)  # integers: no rounding
    (t, s), = seen
    assert t / s == 2.0 / 2.0**-18 / 0.5


def test_charge_is_the_laplace_mechanisms_and_seed_fixes_the_output() -> None:
    with Accountant(1.0) as acc:
        a = laplace(np.array([1.5, 2.0]), epsilon=0.5, sensitivity=2.0, rng=9, note="x")
        laplace_noise(3, epsilon=0.5, rng=9)
    assert [(e.mechanism, e.epsilon, e.sensitivity) for e in acc.snapshot().entries] == [("laplace", 0.5, 2.0),
                                                                                ("laplace", 0.5, 1.0)]
    assert np.array_equal(a, laplace(np.array([1.5, 2.0]), epsilon=0.5, sensitivity=2.0, rng=9))
    assert np.array_equal(laplace_noise(5, epsilon=0.3, rng=7), laplace_noise(5, epsilon=0.3, rng=7))


def test_bad_changed_and_too_fine_grids_are_refused_naming_the_parameter() -> None:
    with pytest.raises(ParameterError) as err:
        laplace([0.5, 1.5], epsilon=1.0, changed=0)
    assert err.value.param == "changed"
    with pytest.raises(ParameterError) as err:
        laplace(np.zeros(10), epsilon=1e-12, changed=10)  # 2**20 * 10 / 1e-12 steps
    assert err.value.param == "epsilon"


def test_empty_and_scalar_inputs() -> None:
    assert laplace(np.zeros(0), epsilon=1.0, rng=0).shape == (0,)
    assert laplace(np.zeros(0, dtype=np.int64), epsilon=1.0, rng=0).shape == (0,)
    assert laplace_noise(0, epsilon=1.0, rng=0).shape == (0,)
    x = laplace(0.3, epsilon=1.0, rng=0)  # a real scalar: rounded to the grid of changed=1, 2**-20
    assert isinstance(x, float) and x * 2**20 == round(x * 2**20)
