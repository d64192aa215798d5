"""CALM's headline measurement: the error of 3-way marginals against epsilon (issue 26, acceptance 1).

The CALM paper (Zhang, Wang, Li, He, Chen, CCS 2018) evaluates the error of k-way marginals
against epsilon on its data sets. **Its numbers are not reachable from this project**: the paper is
not in the stored corpora (only its abstract and reference lists are), and the authors never
released CALM's code (github.com/vvv214/LDP_Protocols README: "The source code is not opened yet").
So this test cannot compare with the paper's figure; it pins privpub's own measurement on the data
we hold, in the paper's metric, so that a reader with the paper can put its reading beside it
(``docs/ldp_synth.md`` has the table), and so that any change that moves CALM's accuracy fails:

* data: NLTCS (21,574 users x 16 binary attributes) and Adult (45,222 users, 15 attributes binned
  to 2-4 values, privpub's public binning), all users, no subsampling;
* metric: the average variation distance ``1/2 sum |p - p_hat|`` over 20 fixed 3-way marginals
  (drawn once with seed 0 from all ``C(d, 3)``), each answered by ``CALMRelease.marginal``
  (maximum entropy from the measured marginals);
* epsilon 1 and 2, CALM's defaults (2-way marginals covering every pair).

**Reference and tolerance.** ``PINNED`` holds the mean and the standard deviation of eight
independent runs (seeds 10-17, not the seeds the test uses). The test makes one run (seed 0), so its
difference from the pinned mean has standard deviation ``sd * sqrt(1 + 1/8)``; it must lie within 5
of those (5 rather than 4 because ``sd`` is itself estimated from 8 runs): a correct CALM fails
with probability well below 1e-3, while the negative controls (uniform marginals, and CALM at
epsilon / 8) lie 16-33 of them away.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from privpub.experiments.ldp_synth import TabularCodes, load_adult_codes, load_nltcs_codes
from privpub.ldp_synth import CALM, CALMRelease

pytestmark = pytest.mark.slow

TRIPLES = 20
N_PIN = 8
#: (data set, epsilon) -> (mean, sd) of the 3-way AVD over N_PIN runs, seeds 10-17 (CALM's defaults)
PINNED: dict[tuple[str, float], tuple[float, float]] = {
    ("nltcs", 1.0): (0.1570, 0.0098),
    ("nltcs", 2.0): (0.0892, 0.0079),
    ("adult", 1.0): (0.3014, 0.0147),
    ("adult", 2.0): (0.1741, 0.0124),
}
#: the same for CALM(marginal_size=3, n_marginals=16): fewer, larger groups (see the last test)
PINNED_L3M16: dict[tuple[str, float], tuple[float, float]] = {
    ("adult", 1.0): (0.2077, 0.0165),
}
SIGMAS = 5.0


def _tolerance(sd: float, runs: int = 1) -> float:
    """SIGMAS standard deviations of (mean of ``runs`` test runs) - (mean of the N_PIN pinned runs)."""
    return SIGMAS * sd * math.sqrt(1.0 / runs + 1.0 / N_PIN)


def _load(name: str, data_dir: Path) -> TabularCodes:
    path = data_dir / ("nltcs/nltcs.csv" if name == "nltcs" else "adult/adult.data")
    if not path.is_file():
        pytest.skip(f"{path} not found: set PRIVPUB_DATA to the datasets directory")
    return load_nltcs_codes(data_dir) if name == "nltcs" else load_adult_codes(data_dir)


def _triples(d: int) -> list[tuple[int, ...]]:
    every = list(itertools.combinations(range(d), 3))
    return [every[i] for i in sorted(np.random.default_rng(0).choice(len(every), TRIPLES, replace=False))]


def _truth(data: TabularCodes, idx: tuple[int, ...]) -> np.ndarray:
    shape = tuple(data.sizes[i] for i in idx)
    flat = np.ravel_multi_index(tuple(data.codes[:, i] for i in idx), shape)
    return np.bincount(flat, minlength=math.prod(shape)).reshape(shape) / data.codes.shape[0]


def _avd3(release: CALMRelease, data: TabularCodes) -> float:
    names = data.schema.names
    return float(np.mean([0.5 * np.abs(release.marginal([names[i] for i in t]) - _truth(data, t)).sum()
                          for t in _triples(len(data.sizes))]))


def _uniform_avd3(data: TabularCodes) -> float:
    return float(np.mean([0.5 * np.abs(1.0 / _truth(data, t).size - _truth(data, t)).sum()
                          for t in _triples(len(data.sizes))]))


@pytest.mark.parametrize("name", ["nltcs", "adult"])
def test_calm_3way_error_matches_its_pinned_level_at_epsilon_1_and_2(name: str, data_dir: Path) -> None:
    data = _load(name, data_dir)
    frame = data.frame()
    measured = {}
    for eps in (1.0, 2.0):
        mean, sd = PINNED[(name, eps)]
        release = CALM().publish(frame, schema=data.schema, epsilon=eps, rng=0)
        measured[eps] = _avd3(release, data)
        assert abs(measured[eps] - mean) <= _tolerance(sd), (name, eps, measured[eps], mean)
    # the paper's trend: the error falls with epsilon
    assert measured[2.0] < measured[1.0]
    # negative control 1: uniform marginals are far outside the band at epsilon 1
    mean, sd = PINNED[(name, 1.0)]
    assert _uniform_avd3(data) - mean > 2 * _tolerance(sd)


def test_negative_control_calm_at_an_eighth_of_the_epsilon_fails_the_band(data_dir: Path) -> None:
    data = _load("nltcs", data_dir)
    mean, sd = PINNED[("nltcs", 1.0)]
    weak = _avd3(CALM().publish(data.frame(), schema=data.schema, epsilon=1.0 / 8, rng=0), data)
    assert weak - mean > 2 * _tolerance(sd)


def test_fewer_larger_groups_beat_the_full_pair_cover_on_adult(data_dir: Path) -> None:
    # CALM's point ("adaptive"): on 45k users the full cover of 105 pairs leaves ~430 users per
    # marginal; 16 3-way marginals (~2,800 users each, 48 of the 105 pairs) cut the 3-way error
    data = _load("adult", data_dir)
    frame = data.frame()
    mean, sd = PINNED_L3M16[("adult", 1.0)]
    got = float(np.mean([_avd3(CALM(marginal_size=3, n_marginals=16).publish(
        frame, schema=data.schema, epsilon=1.0, rng=seed), data) for seed in (0, 1)]))
    assert abs(got - mean) <= _tolerance(sd, runs=2), (got, mean)
    # below the default's level by more than 2.5 sd of the difference (expected: about 7)
    default_mean, default_sd = PINNED[("adult", 1.0)]
    assert default_mean - got > 2.5 * math.hypot(sd / math.sqrt(2), default_sd / math.sqrt(N_PIN)), (got, default_mean)
