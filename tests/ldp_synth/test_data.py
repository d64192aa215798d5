"""The reproduction's dataset preparation (spec 3.1, test oracle 14); skipped without the files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from privpub.experiments.ldp_synth import load_adult_codes, load_nltcs_codes

DATA = Path(os.environ.get("PRIVPUB_DATA", "../shared/datasets"))


@pytest.mark.skipif(not (DATA / "adult" / "adult.data").exists(),
                    reason="Adult not found: set PRIVPUB_DATA to the datasets directory (adult/adult.data)")
def test_adult_binning() -> None:
    a = load_adult_codes(DATA)
    assert a.codes.shape == (45_222, 15)
    assert a.sizes == (4, 4, 4, 4, 4, 4, 4, 4, 4, 2, 3, 2, 4, 2, 2) and sum(a.sizes) == 51
    expected = {0: [13045, 12362, 10305, 9510], 1: [33307, 3817, 1646, 6452], 2: [7915, 13767, 13561, 9979],
                3: [5661, 14783, 13365, 11413], 10: [41432, 1829, 1961], 12: [7024, 24421, 8576, 5201],
                14: [34014, 11208]}
    for j, counts in expected.items():
        assert np.bincount(a.codes[:, j]).tolist() == counts
    np.testing.assert_array_equal(a.codes[:, 3], a.codes[:, 4])  # education-num copies education


@pytest.mark.skipif(not (DATA / "nltcs" / "nltcs.csv").exists(),
                    reason="NLTCS not found: set PRIVPUB_DATA to the datasets directory (nltcs/nltcs.csv)")
def test_nltcs() -> None:
    n = load_nltcs_codes(DATA)
    assert n.codes.shape == (21_574, 16) and n.sizes == (2,) * 16
