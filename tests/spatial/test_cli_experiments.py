"""CLI (``privpub spatial``, ``privpub reproduce spatial``), the demo and the reproduction runner."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privpub.cli import app
from privpub.spatial import SpatialRelease, synthetic_checkin

runner = CliRunner()


@pytest.fixture()
def csv_file(tmp_path):
    pts = synthetic_checkin(5000, rng=0)
    path = tmp_path / "pts.csv"
    pd.DataFrame({"lon": pts[:, 0] * 10 - 5, "lat": pts[:, 1] * 4 + 40}).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("method", ["kdght", "ug", "gtr", "rappor", "hdg", "ahead"])
def test_cli_publish_json_and_plot(method, csv_file, tmp_path) -> None:
    out = tmp_path / f"{method}.json"
    png = tmp_path / f"{method}.png"
    res = runner.invoke(app, ["spatial", str(csv_file), "--x", "lon", "--y", "lat", "--epsilon", "1",
                              "--bounds", "-5,40,5,44", "--method", method, "-o", str(out), "--plot", str(png),
                              "--seed", "0", "--query", "-5,40,5,44"])
    assert res.exit_code == 0, res.output
    assert "query -5,40,5,44: 5000.0" in res.output
    rel = SpatialRelease.from_json(out)
    assert rel.method == method and rel.n_users == 5000 and rel.ledger.total == 1.0
    assert rel.bounds == (-5.0, 40.0, 5.0, 44.0)
    assert json.loads(out.read_text())["format"] == "privpub.spatial/1"
    assert png.stat().st_size > 1000


def test_cli_errors(csv_file, tmp_path) -> None:
    base = ["spatial", str(csv_file), "--x", "lon", "--y", "lat", "--epsilon", "1", "-o", str(tmp_path / "r.json"),
            "--force"]
    res = runner.invoke(app, base)
    assert res.exit_code == 2 and "--bounds must be given" in res.output
    res = runner.invoke(app, [*base, "--bounds", "0,0,1,1"])
    assert res.exit_code == 2 and "inside the declared bounds" in res.output
    res = runner.invoke(app, [*base, "--bounds", "0,0,1,1", "--clip"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, [*base, "--bounds", "-5,40,5"])
    assert res.exit_code == 2 and "four numbers" in res.output
    res = runner.invoke(app, [*base, "--bounds", "-5,40,5,44", "--method", "quadtree"])
    assert res.exit_code == 2 and "method must be one of" in res.output
    res = runner.invoke(app, [*base[:7], "0", *base[8:], "--bounds", "-5,40,5,44"])
    assert res.exit_code == 2 and "epsilon must be finite and > 0" in res.output
    res = runner.invoke(app, ["spatial", str(csv_file), "--x", "nope", "--y", "lat", "--epsilon", "1",
                              "--bounds", "-5,40,5,44", "-o", str(tmp_path / "r2.json")])
    assert res.exit_code == 2 and "column 'nope'" in res.output
    res = runner.invoke(app, ["spatial", str(tmp_path / "missing.csv"), "--x", "lon", "--y", "lat", "--epsilon",
                              "1", "--bounds", "0,0,1,1", "-o", str(tmp_path / "r2.json")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_demo_rows() -> None:
    from privpub.experiments.spatial import demo

    rows = demo(rng=0)
    assert {r.method for r in rows} == {"RAPPOR", "UG", "GT-R", "KDG-HT", "KDG-HT(last)", "HDG", "AHEAD"}
    by = {r.method: r.value for r in rows}
    assert all(np.isfinite(v) and v >= 0 for v in by.values())
    assert by["KDG-HT"] < by["RAPPOR"]


def test_reproduce_smoke_on_tiny_grids(tmp_path) -> None:
    """The whole runner on two tiny fake grids laid out like the shared data directory."""
    from privpub.experiments import spatial as exp

    gen = np.random.default_rng(0)
    (tmp_path / "data" / "gowalla_dpbench_hist").mkdir(parents=True)
    (tmp_path / "data" / "dpbench" / "2D").mkdir(parents=True)
    a = np.zeros((256, 256))
    a[gen.integers(0, 256, 300), gen.integers(0, 256, 300)] = gen.integers(1, 200, 300)
    np.save(tmp_path / "data" / "gowalla_dpbench_hist" / "checkin_256_256.npy", a)
    np.save(tmp_path / "data" / "dpbench" / "2D" / "BeijingTaxiS_256_256.npy", a.T.copy())
    summary = exp.reproduce(tmp_path / "out", quick=True, data_dir=tmp_path / "data", n_points=5000,
                            n_queries=50)
    text = summary.read_text()
    assert "## The paper's claims" in text and "Checkin" in text and "Landmark*" in text
    for name in ("runs.csv", "summary.csv", "runtime.csv", "fig4_re_checkin.png", "fig5_re_landmark.png", "fig6_ne.png",
                 "claims.csv", "ledgers.csv"):
        assert (tmp_path / "out" / name).exists(), name
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert len(runs) == 2 * 3 * 2 * 7 * 3  # datasets x eps x seeds x methods x size classes
    assert {"HDG", "AHEAD"} <= set(runs.method)
    assert (runs.RE >= 0).all() and (runs.NE >= 0).all()


def test_calibration_smoke(tmp_path) -> None:
    """The issue-17 accuracy check on a generator and a missing data file (skipped, not fatal)."""
    from privpub.experiments import spatial as exp

    rows = exp.calibration(datasets=["sparse", "LC-2D"], epsilons=(0.5, 2.0), seeds=range(2), n_queries=50,
                           n_generated=20_000, data_dir=tmp_path / "empty")
    assert set(rows.dataset) == {"sparse"} and len(rows) == 2 * 2 * len(exp.CALIBRATION_METHODS)
    assert (rows.RE > 0).all()
    text = exp.calibration_markdown(rows)
    assert "sparse (20,000 users)" in text and "| KDG-HT |" in text and "eps=2" in text


def test_reproduce_without_data_gives_clear_error(tmp_path) -> None:
    res = runner.invoke(app, ["reproduce", "spatial", "--quick", "--out", str(tmp_path / "o"),
                              "--data-dir", str(tmp_path / "empty")])
    assert res.exit_code == 2
    assert "checkin_256_256.npy" in res.output or "gowalla" in res.output
