"""``privpub audit run`` and ``privpub audit list``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from privpub.cli import app

runner = CliRunner()


def test_audit_run_one_part(tmp_path: Path) -> None:
    out = tmp_path / "audit.csv"
    result = runner.invoke(app, ["audit", "run", "--part", "ldp", "--output", str(out), "--markdown"])
    assert result.exit_code == 0, result.output
    assert "| ldp.GRR.perturb | 1 |" in result.output
    frame = pd.read_csv(out)
    assert set(frame["case"]) == {"ldp.GRR.perturb", "ldp.SUE.perturb", "ldp.OUE.perturb", "ldp.OLH.perturb"}
    assert frame["passed"].all() and frame["control_flagged"].all()
    assert (frame["lower_bound"] <= frame["epsilon"]).all()


def test_audit_list_and_bad_part() -> None:
    result = runner.invoke(app, ["audit", "list"])
    assert result.exit_code == 0 and "core.discrete_laplace" in result.output
    result = runner.invoke(app, ["audit", "run", "--part", "nope"])
    assert result.exit_code == 2 and "parts must be among" in result.output
