"""Publishers: shape, ledger, flags, validation, error model, range queries."""

from __future__ import annotations

import inspect
import math
import re
import warnings

import numpy as np
import pytest

from privpub.errors import DomainError, ParameterError, PrivacyWarning
from privpub.histogram import (
    AHP,
    DAWA,
    HPHP,
    PUBLISHERS,
    HistogramRelease,
    LaplaceHistogram,
    OptimalGrouping,
    ahp_structure,
    counts_from_records,
    hphp_structure,
    kld,
    lnmse,
    noise_variance,
    partition_cost,
)

H_SMALL = np.array([0, 0, 3, 120, 118, 0, 2, 121, 40, 41, 0, 0, 7, 39, 120, 0])

PRIVATE = [
    HPHP(),
    HPHP(noise="laplace"),
    HPHP(eta=0.35),
    HPHP(variant="unattributed"),
    AHP(),
    AHP(noise="laplace"),
    LaplaceHistogram(),
    LaplaceHistogram(noise="laplace"),
]
NON_PRIVATE = [HPHP(variant="paper"), OptimalGrouping(), OptimalGrouping(noise="laplace")]


@pytest.mark.parametrize("pub", PRIVATE, ids=repr)
def test_private_release_shape_and_ledger(pub: object) -> None:
    for eps in (0.01, 0.3, 1.0, 7.0):
        release = pub.publish(H_SMALL, epsilon=eps, rng=3)  # type: ignore[attr-defined]
        assert isinstance(release, HistogramRelease)
        assert release.private is True
        assert release.ledger.total == pytest.approx(eps, rel=1e-12)
        assert release.ledger.frozen
        assert release.counts.shape == H_SMALL.shape
        assert np.all(release.counts >= 0)
        assert not release.counts.flags.writeable
        # the groups partition the bins
        assert np.array_equal(np.sort(np.concatenate(release.groups)), np.arange(H_SMALL.size))
        assert release.n_groups == len(release.groups)
        # every bin of a group carries the same value
        for g in release.groups:
            assert np.all(release.counts[g] == release.counts[g][0])


@pytest.mark.parametrize("pub", NON_PRIVATE, ids=repr)
def test_non_private_release_is_flagged_and_warns(pub: object) -> None:
    with pytest.warns(PrivacyWarning, match="NOT differentially private"):
        release = pub.publish(H_SMALL, epsilon=0.5, rng=0)  # type: ignore[attr-defined]
    assert release.private is False
    # the record says so: a step with epsilon = inf, next to the finite charges of the noise
    assert release.ledger.total == math.inf
    assert any(math.isinf(e.epsilon) and "not differentially private" in e.note for e in release.ledger)
    finite = [e.epsilon for e in release.ledger if math.isfinite(e.epsilon)]
    assert 0 < math.fsum(finite) <= 0.5 * (1 + 1e-12)


def test_seeded_runs_reproduce() -> None:
    for name, factory in PUBLISHERS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            a = factory().publish(H_SMALL, epsilon=0.2, rng=11)
            b = factory().publish(H_SMALL, epsilon=0.2, rng=11)
        np.testing.assert_array_equal(a.counts, b.counts, err_msg=name)
        np.testing.assert_array_equal(a.boundaries, b.boundaries, err_msg=name)


def test_ledger_entries_follow_the_spec() -> None:
    rel = HPHP().publish(H_SMALL, epsilon=1.0, rng=0)
    steps = [(e.step, e.epsilon) for e in rel.ledger]
    assert steps == [("structure", pytest.approx(0.85)), ("publish", pytest.approx(0.15))]
    # the group sums are one vector mechanism of L1 sensitivity 1 over disjoint groups
    assert [(e.mechanism, e.sensitivity) for e in rel.ledger] == [("discrete_laplace", 1.0)] * 2
    assert f"{rel.n_groups} disjoint groups" in rel.ledger.entries[1].note
    assert rel.ledger.total == pytest.approx(1.0, rel=1e-12)
    rel = HPHP(split=0.3).publish(H_SMALL, epsilon=2.0, rng=0)
    assert rel.ledger.entries[0].epsilon == pytest.approx(0.6)
    with pytest.warns(PrivacyWarning):
        rel = HPHP(variant="paper").publish(H_SMALL, epsilon=1.0, rng=0)
    assert rel.ledger.entries[0].epsilon == pytest.approx(0.5)
    assert "not differentially private" in rel.ledger.entries[-1].note
    rel = LaplaceHistogram().publish(H_SMALL, epsilon=1.0, rng=0)
    assert len(rel.ledger) == 1 and rel.n_groups == H_SMALL.size


def test_unattributed_release_has_rank_order_and_no_bin_labels() -> None:
    rel = HPHP(variant="unattributed").publish(H_SMALL, epsilon=50.0, rng=0)
    assert rel.attributed is False
    assert np.all(np.diff(rel.counts) >= -1.0)  # close to sorted at large epsilon
    np.testing.assert_array_equal(rel.order, np.arange(H_SMALL.size))
    assert list(rel.to_frame().columns) == ["rank", "count", "group"]
    assert kld(np.sort(H_SMALL), rel.counts) < 0.05


def test_large_epsilon_recovers_the_histogram() -> None:
    for pub in (HPHP(), AHP(eta=0.0), LaplaceHistogram(noise="laplace")):
        rel = pub.publish(H_SMALL, epsilon=1e5, rng=0)
        np.testing.assert_allclose(rel.counts, H_SMALL, atol=0.05)


def test_structure_function_never_sees_the_counts() -> None:
    """Spec test 11: the structure step is a function of the noisy vector and public values only."""
    params = list(inspect.signature(hphp_structure).parameters)
    assert params[0] == "noisy" and "counts" not in params
    # coupled noise: neighbours with the same noisy vector get identical groups
    y = np.array([3.2, -1.0, 118.7, 2.2, 40.1])
    a = hphp_structure(y, epsilon1=0.8, epsilon2=0.2)
    b = hphp_structure(y.copy(), epsilon1=0.8, epsilon2=0.2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_structure_orders_bins_by_stable_sort_of_the_noisy_values(rng: np.random.Generator) -> None:
    """HPHP and AHP order the bins exactly as np.argsort(kind="stable") (ties in bin order)."""
    y = (rng.poisson(3, 20_000) + rng.integers(-4, 5, 20_000)).astype(np.float64)  # many ties
    expected = np.argsort(y, kind="stable")
    np.testing.assert_array_equal(hphp_structure(y, epsilon1=0.8, epsilon2=0.2)[0], expected)
    thresholded = np.where(y <= 0.35 * np.log(y.size) / 0.8, 0.0, y)
    np.testing.assert_array_equal(ahp_structure(y, epsilon1=0.8, epsilon2=0.2)[0],
                                  np.argsort(thresholded, kind="stable"))


def test_sorted_vector_sensitivity_is_one(rng: np.random.Generator) -> None:
    """Spec test 10: ||sort(H) - sort(H')||_1 = 1 for add/remove-one neighbours."""
    for _ in range(300):
        h = rng.integers(0, 5, int(rng.integers(1, 12)))
        j = int(rng.integers(h.size))
        h2 = h.copy()
        h2[j] += 1 if (h[j] == 0 or rng.random() < 0.5) else -1
        assert np.abs(np.sort(h) - np.sort(h2)).sum() == 1


@pytest.mark.parametrize("noise, runs", [("laplace", 3000), ("discrete", 1500)])
def test_hphp_mse_matches_the_group_error_model(noise: str, runs: int) -> None:
    """Spec test 8 on HPHP's actual output.

    Given the released groups (a function of the structure noise only), the publishing noise is
    independent, so E[sum (Ĥ - H)^2 | groups] = sum_G SSE_G(H) + Var/|G|. The mean of the
    measured error minus that conditional expectation must be 0 within 4 standard errors.
    Counts are large, so the clamp at 0 never binds.
    """
    h = np.array([500, 510, 505, 900, 905, 300, 302, 298, 700, 1000, 1003, 520, 299, 702, 905, 5000])
    pub = HPHP(noise=noise)
    eps = 0.5
    var2 = noise_variance((1 - pub.rho) * eps, noise)
    measured, approx_err, laplace_err = [], [], []
    for seed in range(runs):
        rel = pub.publish(h, epsilon=eps, rng=seed)
        sizes = np.diff(rel.boundaries)
        approx_err.append(partition_cost(h[rel.order].astype(float), rel.boundaries, c=0.0))
        laplace_err.append(float(np.sum(var2 / sizes)))
        measured.append(float(np.sum((rel.counts - h) ** 2)))
    m, ae, le = np.asarray(measured), np.asarray(approx_err), np.asarray(laplace_err)

    def z_score(model: np.ndarray) -> float:
        d = m - model
        return abs(d.mean()) / (d.std(ddof=1) / np.sqrt(d.size))

    assert z_score(ae + le) < 4
    # the test has power: a model with half (or double) the Laplace error is rejected
    assert z_score(ae + 0.5 * le) > 4
    assert z_score(ae + 2.0 * le) > 4


def test_range_query() -> None:
    rel = LaplaceHistogram(noise="laplace").publish(H_SMALL, epsilon=1e7, rng=0)
    assert rel.range_query(0, H_SMALL.size - 1) == pytest.approx(H_SMALL.sum(), abs=1e-3)
    np.testing.assert_allclose(rel.range_query(np.array([0, 3]), np.array([3, 4])), [123, 238], atol=1e-3)
    with pytest.raises(ParameterError, match="0 <= lo <= hi"):
        rel.range_query(3, 2)
    with pytest.raises(ParameterError, match="0 <= lo <= hi"):
        rel.range_query(0, H_SMALL.size)
    with pytest.raises(ParameterError, match="integers"):
        rel.range_query(0.5, 2)


def test_kld_and_lnmse_follow_the_spec() -> None:
    h = np.array([5, 0, 5])
    assert 0.0 <= kld(h, h) <= -np.log(1 - 1e-4)
    # hand computation: p = (.5, 0, .5), q0 = (.25, .5, .25), q = (1-lam) q0 + lam/3
    lam = 1e-4
    q = (1 - lam) * np.array([0.25, 0.5, 0.25]) + lam / 3
    assert kld(h, [1, 2, 1]) == pytest.approx(0.5 * np.log(0.5 / q[0]) * 2)
    with pytest.raises(ValueError):
        kld([0, 0], [1, 1])
    # LNMSE: brute force over all ranges of length 2 (spec test 17)
    rng = np.random.default_rng(0)
    true = rng.integers(0, 9, 12)
    est = rng.normal(4, 3, (3, 12))
    brute = np.mean([[(true[a : a + 2].sum() - e[a : a + 2].sum()) ** 2 for a in range(11)] for e in est])
    assert lnmse(true, est, 2) == pytest.approx(np.log(brute))


# ------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data, error, message",
    [
        ([1, -2, 3], DomainError, "counts must be non-negative, got minimum -2"),
        ([1.5, 2.0], DomainError, "counts must hold integers"),
        ([1.0, np.nan], DomainError, "counts must be finite"),
        ([], ParameterError, "counts"),
        ([[1, 2], [3, 4]], ParameterError, "counts"),
    ],
)
@pytest.mark.parametrize("pub", [HPHP(), AHP(), LaplaceHistogram(), OptimalGrouping(), DAWA()], ids=repr)
def test_bad_counts(pub: object, data: list[float], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        pub.publish(data, epsilon=1.0, rng=0)  # type: ignore[attr-defined]


@pytest.mark.parametrize("eps", [0.0, -1.0, float("inf"), float("nan")])
def test_bad_epsilon(eps: float) -> None:
    with pytest.raises(ParameterError, match="epsilon"):
        HPHP().publish(H_SMALL, epsilon=eps, rng=0)


@pytest.mark.parametrize(
    "factory, message",
    [
        (lambda: HPHP(split=0.0), "split"),
        (lambda: HPHP(split=1.0), "split"),
        (lambda: HPHP(split=1.5), "split"),
        (lambda: AHP(ratio=0.0), "ratio"),
        (lambda: DAWA(ratio=1.0), "ratio"),
        (lambda: OptimalGrouping(split=-0.1), "split"),
        (lambda: HPHP(variant="leaky"), "variant must be"),
        (lambda: HPHP(noise="gauss"), "noise must be"),
        (lambda: HPHP(grouping="smawk"), "grouping must be"),
        (lambda: HPHP(eta=-1.0), "eta must be >= 0"),
        (lambda: AHP(eta=-0.1), "eta must be >= 0"),
    ],
)
def test_bad_parameters(factory: object, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        factory()  # type: ignore[operator]


def test_counts_from_records() -> None:
    assert counts_from_records(["x", "y", "x"], categories=["y", "x", "z"]).tolist() == [1, 2, 0]
    assert counts_from_records([0, 9.99, 10, 5], bins=[0, 5, 10]).tolist() == [1, 3]
    with pytest.raises(DomainError, match="declared categories"):
        counts_from_records(["x", "w"], categories=["x"])
    with pytest.raises(DomainError, match="declared range"):
        counts_from_records([11], bins=[0, 5, 10])
    with pytest.raises(DomainError, match="NaN"):
        counts_from_records([1.0, np.nan], bins=[0, 5, 10])
    with pytest.raises(ParameterError, match="exactly one"):
        counts_from_records([1], bins=[0, 1], categories=[1])
    with pytest.raises(ParameterError, match="increasing"):
        counts_from_records([1], bins=[1, 0])
