"""Issue 17 on the real data: privpub's spatial default (KDG-HT) is never worse than UG on every 2-D
data set we hold, at epsilon in {0.5, 1, 2}.

Runs ``privpub.experiments.spatial.calibration`` on the full point sets (the simulation path) with
3 seeds and 300 queries of [5%, 20%] of the domain; a data set whose file is missing under
``PRIVPUB_DATA`` is skipped (CI has them). The full 5-seed, 1,000-query tables are in
docs/results/spatial.md; the comparison there leaves a margin of 2-60x, far outside the seeds'
spread, so three seeds decide it.
"""

from __future__ import annotations

import pytest

from privpub.errors import DataNotFoundError
from privpub.experiments import spatial as exp

pytestmark = [pytest.mark.statistical, pytest.mark.slow]

EPSILONS = (0.5, 1.0, 2.0)


@pytest.mark.parametrize("dataset", sorted(exp.CALIBRATION_DATASETS))
def test_default_is_never_worse_than_ug_on_real_data(dataset: str) -> None:
    try:
        exp.load_points(dataset)
    except DataNotFoundError as exc:
        pytest.skip(str(exc))
    rows = exp.calibration(datasets=[dataset], epsilons=EPSILONS, seeds=range(3), n_queries=300,
                           methods=["KDG-HT", "UG"])
    mean = rows.groupby(["method", "epsilon"]).RE.mean()
    for eps in EPSILONS:
        assert mean["KDG-HT", eps] <= mean["UG", eps], (dataset, eps, mean.to_dict())
