"""Minimal reproducers of the defects the fuzzers found in code this suite may not edit.

Each is a strict xfail: it fails today (a non-privpub exception or a silently wrong value) and
will XPASS -- failing the suite -- once fixed, as a reminder to delete the reproducer and the
matching entry of ``fuzz_strategies.KNOWN``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from privpub import core, ldp
from privpub.errors import PrivpubError


def _raises_privpub(fn) -> None:
    with pytest.raises(PrivpubError):
        fn()


KNOWN_DEFECTS = [
    ("core.discrete_laplace: integral float beyond int64 is cast to garbage",
     lambda: _raises_privpub(lambda: core.discrete_laplace([1e300], epsilon=1.0, rng=0))),
    ("core.check_in_domain: integral float beyond int64 is cast to garbage",
     lambda: _raises_privpub(lambda: core.check_in_domain([1e300], "values", 5))),
    ("core.discrete_laplace: epsilon=1e-300 (scale >= 2**63) fails inside numpy",
     lambda: _raises_privpub(lambda: core.discrete_laplace([1], epsilon=1e-300, rng=0))),
    ("core.laplace_noise: a negative shape reaches numpy",
     lambda: _raises_privpub(lambda: core.laplace_noise(-1, epsilon=1.0, rng=0))),
    ("core.discrete_laplace_noise: a NaN shape reaches numpy",
     lambda: _raises_privpub(lambda: core.discrete_laplace_noise(math.nan, epsilon=1.0, rng=0))),
    ("core.laplace: sensitivity / epsilon overflowing to inf gives infinite noise silently",
     lambda: _raises_privpub(lambda: core.laplace([0.0], epsilon=0.5, sensitivity=1.7e308, rng=0))),
    ("core.exponential_mechanism_probabilities: sensitivity 5e-324 overflows epsilon / sensitivity",
     lambda: _raises_privpub(lambda: core.exponential_mechanism_probabilities([1.0], epsilon=1.0,
                                                                              sensitivity=5e-324))),
    ("ldp.norm_sub: estimates near the float maximum overflow the cumulative sum",
     lambda: _raises_privpub(lambda: ldp.norm_sub([1.7e308, 1.7e308], 1.0))),
    ("metrics.lnmse: a NaN range_length raises TypeError",
     lambda: _raises_privpub(lambda: __import__("privpub.metrics", fromlist=["x"]).lnmse([0.0], [0.0],
                                                                                         float("nan")))),
    ("core.discrete_laplace_pmf: NaN z gives NaN instead of an error",
     lambda: _raises_privpub(lambda: core.discrete_laplace_pmf([math.nan], epsilon=1.0))),
    ("core.split: a scalar weights argument raises TypeError",
     lambda: _raises_privpub(lambda: core.split(1.0, 2.0))),
    ("core.CategoricalAttribute: scalar categories raise TypeError",
     lambda: _raises_privpub(lambda: core.CategoricalAttribute("c", 3.0))),
    ("ldp: epsilon > 709 overflows math.exp",
     lambda: _raises_privpub(lambda: ldp.OUE(domain_size=4).perturb([0], epsilon=1000.0, rng=0))),
    ("ldp.OUE: epsilon ~ 5e-324 gives p == q and a division by zero in estimate",
     lambda: _raises_privpub(lambda: _finite_or_raise(
         ldp.OUE(domain_size=2).estimate(np.ones((1, 2), dtype=bool), epsilon=5e-324)))),
    ("ldp: ragged values reach numpy",
     lambda: _raises_privpub(lambda: ldp.GRR(domain_size=3).perturb([[0], [1, 2]], epsilon=1.0, rng=0))),
    ("ldp.sue_epsilon: f ~ 5e-324 divides by zero",
     lambda: _raises_privpub(lambda: ldp.sue_epsilon(5e-324))),
    ("ldp_synth.f_from_epsilon: epsilon > ~1400 overflows math.exp",
     lambda: _raises_privpub(lambda: __import__("privpub.ldp_synth", fromlist=["x"]).f_from_epsilon(2840.0, 2))),
    ("ldp.variance: frequency=None compares None",
     lambda: _raises_privpub(lambda: ldp.GRR(domain_size=3).variance(10, epsilon=1.0, frequency=None))),
]


def _finite_or_raise(est: np.ndarray) -> None:
    if not np.all(np.isfinite(est)):
        raise AssertionError("non-finite estimate")


@pytest.mark.parametrize(("name", "check"), KNOWN_DEFECTS, ids=[n.split(":")[0] + f"[{i}]" for i, (n, _) in
                                                               enumerate(KNOWN_DEFECTS)])
@pytest.mark.xfail(strict=True, reason="known defect outside tests/fuzz (reported); remove when fixed")
def test_known_defect(name: str, check) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        check()
