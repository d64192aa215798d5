"""DAWA against the numbers the DPBench study reports (issue 26, acceptance item 1).

Source of the numbers: Hay, Machanavajjhala, Miklau, Chen, Zhang, "Principled evaluation of
differentially private algorithms using DPBench", SIGMOD 2016 (arXiv 1512.04817), Figures 1(a) and
2(a): 1-D, ε = 0.1, the prefix workload over 4096 bins, DPBench's scaled error
``||Wx - Wx^||_2 / (|W| scale)`` averaged over runs, plotted on a log10 axis. The authors committed
the rendered figures with their reproducibility package: repository ``dpcomp-org/dpcomp_core``,
commit ``ac71460def9678978c2a8255218988e3a010dd26``, files
``reproducibility/plots/temp/figure_1a.pdf`` and ``figure_2a.pdf`` (R/ggplot2 vector PDFs made
by ``reproducibility/plots/plot.R`` from ``sigmod2016.py``'s runs: EPSILON = 0.1, 4 algorithm
seeds x 5 data samples = 20 runs per point, DAWA with ratio 0.25). The values below are read from
the PDFs' drawing coordinates, not by eye: Figure 2(a)'s DAWA polyline vertex for each data set
(y axis: 164.07 pt per decade, ticks at -4, -3, -2), and Figure 1(a)'s 18 DAWA dots per scale
panel (69.63 pt per decade). Reading error: 0.01 pt, i.e. below 1e-4 in log10; the two figures
come from the same runs (Figure 1(a)'s 18 dots at scale 1000 are exactly Figure 2(a)'s 18 values).

Tolerance. A reported value is the mean of 20 runs, so it carries its own sampling error: DAWA's
run-to-run coefficient of variation at scale 1000 is 0.52-0.75 on these six sets (measured with
the paper-noise DAWA below, 40 runs per set), so its standard error in log10 is at most
``0.75 / sqrt(20) / ln 10 = 0.073``. Ours is measured from the runs of the test (same formula, our
own CV and number of runs). A comparison passes when ``|log10(ours) - log10(reported)| <= 3 *
sqrt(se_reported^2 + se_ours^2)`` (about 0.25 in log10, a factor 1.8): three standard errors of
the difference.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from privpub.experiments.histogram import DPBENCH_DAWA_REPORTED, DPBENCH_REPORTED_SE
from privpub.histogram import (
    DAWA,
    LaplaceHistogram,
    dawa_best_partition,
    dawa_partition_costs,
    greedy_h_weights,
    tree_least_squares,
)

EPSILON = 0.1
RATIO = 0.25

#: DPBench Figure 2(a): log10 of DAWA's mean scaled error at scale 1000, ε = 0.1, per data set
#: (privpub registry name -> value; the figure's names are HEPTH, ADULT, NETTRACE, SEARCH,
#: LC-REQ-ALL, MD-SAL). One copy, in the reproduction report's module.
FIG2A_DAWA = {key.removeprefix("dpbench_1d/"): value for key, value in DPBENCH_DAWA_REPORTED.items()}
assert FIG2A_DAWA == {"HEPTH": -3.047, "ADULTFRANK": -3.094, "NETTRACE": -3.106, "SEARCHLOGS": -3.152,
                      "LC-REQ": -3.011, "MD-SAL": -3.061}
#: Figure 2(a)'s data-independent lines at scale 1000 (the same value on every set: the noise does
#: not depend on the data and the study reuses the 4 algorithm seeds): Identity and HB
FIG2A_IDENTITY = -2.149
FIG2A_HB = -2.619
#: Figure 1(a): the lowest and highest of DAWA's 18 per-data-set dots (the dots are not labelled;
#: the six sets we hold are among the 18)
FIG1A_DAWA_BAND = {1_000: (-3.152, -2.991), 100_000: (-5.044, -4.547), 10_000_000: (-6.758, -6.381)}

REPORTED_RUNS = 20
#: the largest run-to-run coefficient of variation of DAWA's error at scale 1000 on the six sets
REPORTED_CV = 0.75
SE_REPORTED = REPORTED_CV / math.sqrt(REPORTED_RUNS) / math.log(10)
assert math.isclose(SE_REPORTED, DPBENCH_REPORTED_SE)
#: Identity's points are means over the 4 algorithm seeds only (the data sample does not move
#: Identity's error); Identity's CV on the prefix workload is 0.53
SE_REPORTED_IDENTITY = 0.53 / math.sqrt(4) / math.log(10)


def _shape(name: str, data_dir: Path) -> np.ndarray:
    from privpub.datasets import load

    try:
        return np.asarray(load(f"dpbench_1d/{name}", data_dir=data_dir).counts, dtype=float)
    except FileNotFoundError:
        pytest.skip(f"DPBench {name} not in the data directory")


def _scaled_error(true: np.ndarray, est: np.ndarray, scale: int) -> float:
    d = np.cumsum(np.asarray(est, dtype=float) - true)
    return float(np.linalg.norm(d) / d.size / scale)


def _paper_noise_dawa(x: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """DAWA with the *paper's* stage-1 noise (Laplace of scale 2/ε1 per candidate bucket).

    Test-only calibration of the protocol: the same kernels as privpub's DAWA, but the noise level
    the paper and DPBench's code use (whose privacy privpub could not verify, see
    ``privpub.histogram.DAWA``). DPBench's DAWA uses the paper's approximate variant (intervals of
    length 2^k at every offset); this uses the aligned ones only.
    """
    n = x.size
    eps1, eps2 = RATIO * EPSILON, (1 - RATIO) * EPSILON
    noisy = [c + gen.laplace(0.0, 2.0 / eps1, c.size) for c in dawa_partition_costs(x)]
    bounds = dawa_best_partition(noisy, n, 1.0 / eps2)
    spans, children, weights = greedy_h_weights(bounds, n)
    prefix = np.concatenate([[0.0], np.cumsum(np.add.reduceat(x, bounds[:-1]))])
    answers = weights * (prefix[spans[:, 1]] - prefix[spans[:, 0]]) + gen.laplace(0.0, 1.0 / eps2, weights.size)
    est = tree_least_squares(children, weights, answers)
    leaves = children[:, 0] < 0
    buckets = np.empty(bounds.size - 1)
    buckets[spans[leaves, 0]] = est[leaves]
    return np.repeat(buckets / np.diff(bounds), np.diff(bounds))


def _publish(method: str, x: np.ndarray, seed: int) -> np.ndarray:
    if method == "privpub":
        return DAWA(ratio=RATIO).publish(x.astype(np.int64), epsilon=EPSILON, rng=seed).counts
    if method == "paper_noise":
        return _paper_noise_dawa(x, np.random.default_rng(seed))
    if method == "identity":
        return LaplaceHistogram(noise="laplace", clamp=False).publish(x.astype(np.int64), epsilon=EPSILON,
                                                                       rng=seed).counts
    raise AssertionError(method)


_CACHE: dict[tuple[str, str, int, int], tuple[float, float]] = {}


def measure(method: str, name: str, data_dir: Path, scale: int, trials: int) -> tuple[float, float]:
    """DPBench's protocol on the set ``name``: ``trials`` runs, each on a fresh sample of ``scale``
    records from the set's shape. Returns ``(log10 of the mean scaled error, its standard error in
    log10)``; cached per module (two tests read privpub's runs at scale 1000)."""
    key = (method, name, scale, trials)
    if key not in _CACHE:
        _CACHE[key] = _measure(method, _shape(name, data_dir), scale, trials)
    return _CACHE[key]


def _measure(method: str, shape: np.ndarray, scale: int, trials: int) -> tuple[float, float]:
    p = shape / shape.sum()
    errs = np.empty(trials)
    for t in range(trials):
        x = np.random.default_rng(t).multinomial(scale, p).astype(float)
        errs[t] = _scaled_error(x, _publish(method, x, 10_000 + t), scale)
    mean = float(errs.mean())
    return math.log10(mean), float(errs.std(ddof=1) / mean / math.sqrt(trials) / math.log(10))


def tolerance(se_ours: float, se_reported: float = SE_REPORTED) -> float:
    """Three standard errors of the difference of two log10 means."""
    return 3.0 * math.hypot(se_ours, se_reported)


TRIALS = 60
SETS = tuple(FIG2A_DAWA)


@pytest.mark.parametrize("name", SETS)
def test_protocol_reproduces_figure_2a_with_the_papers_noise(name: str, data_dir: Path) -> None:
    """Calibration: with the paper's stage-1 noise, this protocol gives Figure 2(a)'s DAWA value
    on every set we hold (measured: within 0.11 in log10), so a gap of privpub's DAWA below is
    privpub's, not the harness's."""
    ours, se = measure("paper_noise", name, data_dir, 1_000, TRIALS)
    assert abs(ours - FIG2A_DAWA[name]) <= tolerance(se), (name, ours, FIG2A_DAWA[name], tolerance(se))


def test_protocol_reproduces_figure_2a_identity(data_dir: Path) -> None:
    """Calibration: Identity (Laplace at ε on every bin, no clamp) in this protocol matches the
    figure's Identity line (4 noise draws there, hence the wider tolerance)."""
    ours, se = measure("identity", "HEPTH", data_dir, 1_000, TRIALS)
    assert abs(ours - FIG2A_IDENTITY) <= tolerance(se, SE_REPORTED_IDENTITY), (ours, FIG2A_IDENTITY)


@pytest.mark.parametrize("name", SETS)
def test_negative_control_identity_is_outside_dawas_reported_value(name: str, data_dir: Path) -> None:
    """The comparison can fail: a wrong method (plain Laplace per bin) measured the same way misses
    the reported DAWA value by far more than the tolerance (about 1 in log10, a factor 10)."""
    ours, se = measure("identity", name, data_dir, 1_000, TRIALS)
    assert ours - FIG2A_DAWA[name] > tolerance(se), (name, ours, FIG2A_DAWA[name])


#: sets on which privpub's DAWA misses Figure 2(a) at scale 1000 (measured log10 error, 60 runs,
#: reported in brackets, with the exact grid noise of issue 34: ADULT -2.57 (-3.09), NETTRACE -2.58
#: (-3.11), SEARCHLOGS -2.78 (-3.15), MD-SAL -2.63 (-3.06); HEPTH -2.90 (-3.05) and LC-REQ -2.81
#: (-3.01, 0.20 off against a tolerance of 0.30) are within. LC-REQ is borderline: with the earlier
#: float draws it measured -2.70, 0.31 off against 0.27, a draw-to-draw difference of about 1.3
#: standard errors, not a change of noise scale): its stage 1 adds Laplace noise of scale Δ/ε1 with Δ = 2 log2 n ≈ 22
#: (the sensitivity privpub can prove) instead of the paper's 2, so at 1000 records the noisy costs
#: swamp the deviations and spikes get merged into wide buckets. See docs/histogram.md.
KNOWN_GAP = {"ADULTFRANK", "NETTRACE", "SEARCHLOGS", "MD-SAL"}


@pytest.mark.parametrize("name", [
    pytest.param(s, marks=pytest.mark.xfail(strict=True, reason="privpub's provable stage-1 sensitivity "
                                            "(2 log2 n instead of the paper's 2): error 2-4x the reported "
                                            "value at scale 1000")) if s in KNOWN_GAP else s
    for s in SETS
])
def test_privpub_dawa_reproduces_figure_2a(name: str, data_dir: Path) -> None:
    """The headline figure: privpub's DAWA at scale 1000, ε = 0.1 within the tolerance of the value
    DPBench reports for the set. Holds on HEPTH and LC-REQ; strict xfail on the four sets of KNOWN_GAP."""
    ours, se = measure("privpub", name, data_dir, 1_000, TRIALS)
    assert abs(ours - FIG2A_DAWA[name]) <= tolerance(se), (name, ours, FIG2A_DAWA[name], tolerance(se))


@pytest.mark.parametrize("name", SETS)
def test_privpub_dawa_keeps_the_studys_small_scale_finding(name: str, data_dir: Path) -> None:
    """DPBench's finding at scale 1000 (data-dependent beats data-independent at small scale):
    privpub's DAWA is below the reported Identity by more than the tolerance on every set."""
    ours, se = measure("privpub", name, data_dir, 1_000, TRIALS)
    assert FIG2A_IDENTITY - ours > tolerance(se), (name, ours, FIG2A_IDENTITY)


@pytest.mark.parametrize("scale", [100_000, 10_000_000])
@pytest.mark.parametrize("name", SETS)
def test_privpub_dawa_within_figure_1a_band(name: str, scale: int, data_dir: Path) -> None:
    """Scales 10^5 and 10^7 (Figure 1(a), whose dots are not labelled by data set): privpub's DAWA
    lies within the range of DAWA's 18 reported dots, widened by the tolerance. Measured (log10,
    30 runs): 10^5 from -4.72 to -4.38 against the band [-5.04, -4.55]; 10^7 from -6.66 to -6.19
    against [-6.76, -6.38] (five sets above the band by 0.02-0.19, HEPTH the most, inside the
    tolerance of about 0.25)."""
    lo, hi = FIG1A_DAWA_BAND[scale]
    ours, se = measure("privpub", name, data_dir, scale, 30)
    tol = tolerance(se)
    assert lo - tol <= ours <= hi + tol, (name, ours, (lo, hi), tol)


# ------------------------------------------------------------------------------------------
# Why the gap is not closed by using the paper's noise level: that level is not ε1-DP
# ------------------------------------------------------------------------------------------
def _log_tail(t: float, b: float) -> float:
    """log P(Lap(b) > t)."""
    return math.log(0.5) - t / b if t >= 0 else math.log1p(-0.5 * math.exp(t / b))


def _all_singletons_thresholds(x: np.ndarray, penalty: float) -> np.ndarray:
    """The partition is all singletons iff every candidate bucket's noise exceeds its threshold.

    Bottom-up, a bucket of ``L`` bins whose sub-buckets all split costs ``L * penalty`` split, and
    ``max(dev + z + penalty, penalty)`` as one bucket: it splits iff ``z > (L - 1) penalty - dev``.
    """
    costs = dawa_partition_costs(x)
    return np.concatenate([((1 << level) - 1) * penalty - c for level, c in enumerate(costs, start=1)])


def test_all_singletons_event_is_the_threshold_event() -> None:
    """Brute force on the kernel: for random noise, ``dawa_best_partition`` returns all singletons
    exactly when every candidate's noise exceeds its threshold (so the probability below is the
    probability of the kernel's output)."""
    x = np.array([5, 30, 8, 0, 10, 3, 0, 7, 20, 20, 4, 0, 9, 1, 6, 50], dtype=float)
    penalty = 2.0
    thresholds = _all_singletons_thresholds(x, penalty)
    gen = np.random.default_rng(0)
    sizes = [c.size for c in dawa_partition_costs(x)]
    seen = 0
    for _ in range(2000):
        z = gen.laplace(0.0, 5.0, thresholds.size)
        noisy = [c + part for c, part in zip(dawa_partition_costs(x), np.split(z, np.cumsum(sizes)[:-1]), strict=True)]
        singletons = np.array_equal(dawa_best_partition(noisy, x.size, penalty), np.arange(x.size + 1))
        assert singletons == bool(np.all(z > thresholds))
        seen += singletons
    assert 50 < seen < 1950, seen  # both outcomes occur (about 9% all singletons)


@pytest.mark.parametrize("n", [4, 16, 4096])
def test_papers_noise_level_is_not_eps1_dp_and_privpubs_is(n: int) -> None:
    """Exact privacy loss of one output (all singletons) between x = 0 and x' = one record in bin 0.

    Each candidate containing bin 0 (one per level) moves its deviation by ``2 (1 - 1/L)`` and the
    event needs every noise above its threshold, so the probability ratio is ``exp(Δ / b)``, with
    ``Δ = dawa_sensitivity(n)``. At the paper's noise scale ``b = 2/ε1`` this is ``exp(ε1 Δ / 2)``,
    about ``exp(11 ε1)`` at n = 4096: the paper's level (and DPBench's, which adds even more
    candidates) is not ε1-DP. At privpub's ``b = Δ/ε1`` it is ``exp(ε1)``: the bound is attained.
    """
    from privpub.histogram import dawa_sensitivity

    eps1, penalty = 0.5, 2.0  # penalty >= 2 keeps every threshold >= 0 (exponential tails)
    x0 = np.zeros(n)
    x1 = x0.copy()
    x1[0] = 1.0
    t0, t1 = _all_singletons_thresholds(x0, penalty), _all_singletons_thresholds(x1, penalty)
    delta = dawa_sensitivity(n)

    def log_ratio(b: float) -> float:
        return float(sum(_log_tail(a, b) for a in t1) - sum(_log_tail(a, b) for a in t0))

    paper = log_ratio(2.0 / eps1)
    assert math.isclose(paper, eps1 * delta / 2.0, rel_tol=1e-9)
    assert paper > eps1 * 1.2  # n = 4: 1.25 eps1; n = 4096: 10.9 eps1
    assert math.isclose(log_ratio(delta / eps1), eps1, rel_tol=1e-9)


def test_report_section_counts_its_verdict_from_the_runs() -> None:
    """The reproduction report's DPBench subsection: one row per (set, trial) at scale 1000, and the
    verdict's k of n counted from the table's tolerances (here on surrogates under DPBench names)."""
    from privpub.experiments import histogram as exp

    hists = {"dpbench_1d/HEPTH": exp.synthetic_like("nettrace", n=256, seed=1),
             "dpbench_1d/NETTRACE": exp.synthetic_like("waitakere", n=300, seed=1), "other": np.ones(8)}
    rows = exp.dpbench_headline(hists, trials=5)
    assert set(rows["dataset"]) == {"dpbench_1d/HEPTH", "dpbench_1d/NETTRACE"} and len(rows) == 10
    text = exp._headline_md(rows)
    k = sum(abs(float(cell.split(" ± ")[0])) <= float(cell.split(" ± ")[1])
            for cell in (line.rsplit("|", 2)[1].strip() for line in text.splitlines() if line.startswith("| ")
                         and "±" in line and "tolerance" not in line))
    assert f"within the tolerance on {k} of 2 sets" in text
