"""``--engine spark`` of the CLI: the same release as the default pandas engine for the same seed."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from decision_helpers import make_frame, make_schema
from typer.testing import CliRunner

from privpub.cli import app

pytestmark = pytest.mark.spark
runner = CliRunner()


def _same_on_both_engines(tmp_path, name: str, args: list[str], says: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """``args`` with ``--engine pandas`` and ``--engine spark`` write the same table (and both say ``says``)."""
    outs = {}
    for engine in ("pandas", "spark"):
        out = tmp_path / f"{name}-{engine}.csv"
        res = runner.invoke(app, [*args, "-o", str(out), "--engine", engine])
        assert res.exit_code == 0, res.output
        if says is not None:
            assert says in res.output
        outs[engine] = pd.read_csv(out)
    pd.testing.assert_frame_equal(outs["spark"], outs["pandas"])


def test_engine_spark_gives_the_pandas_release(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    make_frame(200, 2, seed=2).to_parquet(tmp_path / "train.parquet")
    data = tmp_path / "train.parquet"
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(make_schema().to_dict()))
    _same_on_both_engines(tmp_path, "cells", ["decision", str(data), "--target", "y", "--epsilon", "1",
                                              "--levels", "3", "--schema", str(schema), "--seed", "4"])
    csv = tmp_path / "train.csv"
    make_frame(200, 2, seed=2).to_csv(csv, index=False)
    _same_on_both_engines(tmp_path, "hist", ["histogram", str(csv), "--column", "x", "--bins", "0,3,6,9,12",
                                             "--epsilon", "1", "--seed", "2"])
    res = runner.invoke(app, ["histogram", str(csv), "--counts-column", "x", "--epsilon", "1", "-o",
                              str(tmp_path / "h.csv"), "--engine", "spark"])
    assert res.exit_code != 0 and "--engine spark counts raw records" in res.output


def test_engine_spark_person_level_gives_the_pandas_release(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    frame = make_frame(200, 2, seed=3)
    frame["user"] = np.minimum(np.random.default_rng(4).zipf(1.6, len(frame)), 20).astype(np.int64)
    data = tmp_path / "visits.parquet"
    frame.to_parquet(data)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(make_schema().to_dict()))
    _same_on_both_engines(tmp_path, "cells", ["decision", str(data), "--target", "y", "--epsilon", "2", "--levels",
                                              "2", "--schema", str(schema), "--seed", "5", "--privacy-id", "user",
                                              "--max-contributions", "2"], says="at most 2 rows each")
