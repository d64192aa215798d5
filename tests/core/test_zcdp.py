"""rho-zCDP in the core: the exact discrete Gaussian sampler and mechanism, the zCDP measure of
accountants, ledgers and sessions, the explicit conversions, and the privacy audit."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from statutils import chisquare_pvalue

from privpub import Session
from privpub.audit import audit_epsilon
from privpub.core import (
    Accountant,
    BudgetLedger,
    accounting,
    discrete_gaussian,
    discrete_gaussian_noise,
    discrete_gaussian_pmf,
    discrete_gaussian_sigma2,
    discrete_laplace,
    pure_dp_to_zcdp,
    zcdp_to_approx_dp,
)
from privpub.core._dgauss import _acceptance_parts, discrete_gaussian_exact, rational_sigma2
from privpub.errors import BudgetExceededError, DomainError, ParameterError


def _exact_pmf(support: np.ndarray, sigma2: Fraction) -> np.ndarray:
    s2 = float(sigma2)
    k = np.arange(-int(60 * math.sqrt(s2)) - 60, int(60 * math.sqrt(s2)) + 61, dtype=np.float64)
    return np.exp(-support.astype(np.float64) ** 2 / (2 * s2)) / math.fsum(np.exp(-k * k / (2 * s2)))


# -- the sampler --------------------------------------------------------------------------------
@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [Fraction(1, 10), Fraction(1, 2), Fraction(1), Fraction(3), Fraction(29, 3)])
def test_sampler_has_the_exact_pmf(sigma2: Fraction) -> None:
    scale = rational_sigma2(sigma2)
    assert scale.fraction >= sigma2 and float(scale.fraction / sigma2 - 1) < 2**-25
    n = 200_000
    z = discrete_gaussian_exact(n, scale, np.random.default_rng(7))
    lo, hi = int(z.min()), int(z.max())
    support = np.arange(lo, hi + 1)
    observed = np.bincount(z - lo, minlength=hi - lo + 1)
    expected = _exact_pmf(support, scale.fraction)
    expected = np.append(expected, 1 - expected.sum())  # the mass outside the observed range
    assert chisquare_pvalue(np.append(observed, 0), expected) > 1e-4
    # mean 0 and variance (below sigma^2 for a discrete Gaussian: the exact value) within 5 sd
    var = float((_exact_pmf(support, scale.fraction) * support**2).sum())
    m4 = float((_exact_pmf(support, scale.fraction) * support**4).sum())
    assert abs(z.mean()) < 5 * math.sqrt(var / n)
    assert abs(z.var() - var) < 5 * math.sqrt((m4 - var**2) / n)


@pytest.mark.statistical
def test_chi_square_tells_a_slightly_wrong_variance() -> None:
    """Negative control: the same test rejects sigma^2 = 3 against draws at sigma^2 = 3.3."""
    z = discrete_gaussian_exact(200_000, rational_sigma2(Fraction(33, 10)), np.random.default_rng(7))
    lo, hi = int(z.min()), int(z.max())
    expected = _exact_pmf(np.arange(lo, hi + 1), Fraction(3))
    observed = np.bincount(z - lo, minlength=hi - lo + 1)
    assert chisquare_pvalue(np.append(observed, 0), np.append(expected, 1 - expected.sum())) < 1e-6


def test_acceptance_split_is_exact_integer_arithmetic() -> None:
    rng = np.random.default_rng(0)
    big_b = (1 << 62) - 12345
    x = np.concatenate([rng.integers(-(2**40), 2**40, 1000), [0, 1, -1, 2**31 + 7, 3037000499]]).astype(np.int64)
    g0, r = _acceptance_parts(x, big_b)
    for xi, gi, ri in zip(x.tolist(), g0.tolist(), r.tolist()):
        assert (gi, ri) == divmod(xi * xi, big_b)


def test_same_seed_same_draws_and_shapes() -> None:
    a = discrete_gaussian_noise((3, 4), rho=0.2, rng=5)
    b = discrete_gaussian_noise((3, 4), rho=0.2, rng=5)
    assert a.shape == (3, 4) and a.dtype == np.int64 and np.array_equal(a, b)
    assert discrete_gaussian_noise(0, rho=1.0, rng=0).shape == (0,)
    assert isinstance(discrete_gaussian(5, rho=1.0, rng=0), int)


def test_sigma2_calibration_and_pmf() -> None:
    assert discrete_gaussian_sigma2(rho=0.5) == 1.0
    s2 = discrete_gaussian_sigma2(rho=0.01, sensitivity=3.0)
    assert 450.0 <= s2 <= 450.0 * (1 + 2**-25)
    pmf = discrete_gaussian_pmf(np.arange(-200, 201), rho=0.01, sensitivity=3.0)
    assert abs(pmf.sum() - 1) < 1e-12 and pmf[200] == pmf.max()


def test_bad_parameters_are_refused_before_any_charge() -> None:
    with Accountant(1.0, measure="zcdp") as acc:
        for kwargs in ({"rho": 0}, {"rho": -1.0}, {"rho": math.nan}, {"rho": 1.0, "sensitivity": 0},
                       {"rho": 1e-20}):
            with pytest.raises(ParameterError):
                discrete_gaussian_noise(3, rng=0, **kwargs)
        with pytest.raises(DomainError):
            discrete_gaussian([0.5], rho=1.0, rng=0)
    assert acc.n_charges == 0


# -- charging and composition ---------------------------------------------------------------------
def test_mechanism_charges_rho_and_rhos_add() -> None:
    with Accountant(1.0, measure="zcdp") as acc:
        discrete_gaussian([1, 2], rho=0.25, sensitivity=math.sqrt(2), rng=0)
        with acc.parallel("groups") as block:
            for g in range(3):
                with block.branch(f"g{g}"):
                    discrete_gaussian_noise(4, rho=0.5, rng=g)
        with pytest.raises(BudgetExceededError, match=r"rho=0\.5"):
            discrete_gaussian_noise(1, rho=0.5, rng=0)
    ledger = acc.seal()
    assert ledger.measure == "zcdp" and ledger.rho == 1.0 and ledger.total == 0.75
    assert [(e.mechanism, e.epsilon) for e in ledger] == [("discrete_gaussian", 0.25), ("discrete_gaussian", 0.5)]
    assert ledger.entries[0].sensitivity == math.sqrt(2)
    assert "rho" in str(ledger)
    # the ledger's (epsilon, delta) guarantee comes from its total rho
    assert ledger.approx_dp(1e-6) == pytest.approx(0.75 + 2 * math.sqrt(0.75 * math.log(1e6)))


def test_measures_never_mix_without_an_explicit_conversion() -> None:
    with Accountant(1.0) as pure, pytest.raises(ParameterError, match="never added to a rho"):
        discrete_gaussian_noise(2, rho=0.1, rng=0)
    assert pure.n_charges == 0
    with Accountant(1.0, measure="zcdp") as z, pytest.raises(ParameterError, match="convert explicitly"):
        discrete_laplace([3], epsilon=0.5, rng=0)
    assert z.n_charges == 0
    # the explicit conversion: pure epsilon-DP charges recorded as epsilon^2 / 2
    with Accountant(0.5, measure="zcdp", convert_pure=True) as conv:
        discrete_laplace([3], epsilon=0.6, rng=0)
        discrete_gaussian_noise(1, rho=0.3, rng=0)
    assert conv.seal().total == pytest.approx(0.18 + 0.3)
    assert "converted" in conv.seal().entries[0].note
    with pytest.raises(ParameterError):
        Accountant(1.0, convert_pure=True)


def test_conversions() -> None:
    assert pure_dp_to_zcdp(1.0) == 0.5 and pure_dp_to_zcdp(0.2) == pytest.approx(0.02)
    assert zcdp_to_approx_dp(0.5, 1e-5) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e5)))
    for bad in (0.0, 1.0, -1e-3):
        with pytest.raises(ParameterError):
            zcdp_to_approx_dp(0.5, bad)
    ledger = BudgetLedger(1.0)
    ledger.spend("a", "laplace", 0.6)
    ledger.spend("b", "laplace", 0.4)
    z = ledger.freeze().to_zcdp()
    assert z.measure == "zcdp" and z.rho == 0.5
    assert z.total == pytest.approx(0.18 + 0.08)  # per entry: tighter than (0.6 + 0.4)^2 / 2
    assert ledger.approx_dp(1e-9) == 1.0 and ledger.rho is None


def test_old_ledgers_and_records_read_as_pure_dp() -> None:
    ledger = BudgetLedger.from_records(1.0, [{"step": "s", "mechanism": "laplace", "epsilon": 0.5}])
    assert ledger.measure == "pure-dp" and ledger.total == 0.5
    z = BudgetLedger.from_records(1.0, [{"step": "s", "mechanism": "discrete_gaussian", "epsilon": 0.5}],
                                  measure="zcdp")
    assert z != ledger and z.rho == 1.0
    with pytest.raises(ParameterError):
        BudgetLedger(1.0, measure="renyi")


# -- sessions -------------------------------------------------------------------------------------
def test_zcdp_session_adds_rhos_and_refuses_epsilons() -> None:
    session = Session(total_rho=1.0)
    assert session.measure == "zcdp" and session.total_rho == 1.0
    for s in range(2):
        with accounting(0.4, method="gauss", session=session, measure="zcdp") as acc:
            discrete_gaussian_noise(3, rho=0.4, rng=s)
            acc.seal()
    assert session.spent == pytest.approx(0.8) and session.can_pay(0.2, measure="zcdp")
    assert not session.can_pay(0.1)  # an epsilon: never payable by a rho session
    with pytest.raises(BudgetExceededError, match=r"rho=0\.4"):
        session.reserve(0.4, method="gauss", measure="zcdp")
    with pytest.raises(ParameterError, match="never adds an epsilon to a rho"):
        with accounting(0.1, method="laplace", session=session):
            pass
    pure = Session(total_epsilon=1.0)
    with pytest.raises(ParameterError, match="never adds an epsilon to a rho"):
        pure.reserve(0.1, method="gauss", measure="zcdp")
    assert pure.spent == 0 and session.spent == pytest.approx(0.8)
    assert "rho" in str(session) and "total_rho" in repr(session)
    with pytest.raises(ParameterError):
        Session(total_epsilon=1.0, total_rho=1.0)


def test_session_files_state_the_measure(tmp_path) -> None:
    path = tmp_path / "rho.json"
    session = Session.open(path, total_rho=2.0)
    session.reserve(0.5, method="gauss", measure="zcdp").settle(spent=True)
    payload = json.loads(path.read_text())
    assert payload["measure"] == "zcdp" and payload["charges"][0]["measure"] == "zcdp"
    again = Session.open(path)
    assert again.measure == "zcdp" and again.spent == 0.5
    with pytest.raises(ParameterError, match="cannot be reopened as a pure-dp session"):
        Session.open(path, total_epsilon=2.0)
    with pytest.raises(ParameterError, match="never adds an epsilon to a rho"):
        again.reserve(0.1, method="x")
    # a pure-DP file has no measure key (as files written before zCDP) and reads as pure DP
    old = tmp_path / "old.json"
    Session.open(old, total_epsilon=1.0).reserve(0.25, method="laplace").settle(spent=True)
    text = json.loads(old.read_text())
    assert "measure" not in text and "measure" not in text["charges"][0]
    assert Session.open(old).measure == "pure-dp"
    with pytest.raises(ParameterError, match="cannot be reopened"):
        Session.open(old, total_rho=1.0)


# -- privacy --------------------------------------------------------------------------------------
RHO = 0.02
DELTA = 1e-6


def _gauss(rho: float, sens: float = 1.0):
    def mech(data: int, rng: np.random.Generator, n: int) -> np.ndarray:
        return discrete_gaussian(np.full(n, data), rho=rho, sensitivity=sens, rng=rng)
    return mech


@pytest.mark.statistical
def test_audit_discrete_gaussian_against_its_approx_dp_bound() -> None:
    """Neighbouring counts 0 and 1 (L2 sensitivity 1): the auditor's lower bound stays below the
    (epsilon, delta) conversion of rho at delta = 1e-6; a mechanism calibrated to a rho 50 times
    larger than it declares is flagged (negative control)."""
    bound = zcdp_to_approx_dp(RHO, DELTA)
    ok = audit_epsilon(_gauss(RHO), 0, 1, epsilon=bound, trials=100_000, batch=True, rng=0)
    assert ok.passed and ok.lower_bound > 0.05  # the audit sees the signal, below the bound
    leaky = audit_epsilon(_gauss(50 * RHO), 0, 1, epsilon=bound, trials=100_000, batch=True, rng=0)
    assert not leaky.passed, leaky
