"""``privpub audit run``, ``privpub audit list`` and ``privpub audit structure``."""

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


def test_audit_structure_one_part(tmp_path: Path) -> None:
    out = tmp_path / "structure.csv"
    result = runner.invoke(app, ["audit", "structure", "--part", "histogram", "--trials", "120",
                                 "--output", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert set(frame["publisher"]) == {f"histogram.{k}" for k in
                                       ("hphp", "hphp_paper", "hphp_unattributed", "ahp", "laplace", "optimal", "dawa")}
    private = frame[frame["private"]]
    assert set(frame[~frame["private"]]["publisher"]) == {"histogram.hphp_paper", "histogram.optimal"}
    assert (private[["lattice", "float_bits", "support"]] == "passed").all().all()
    assert (private["trials"] == 120).all()


def test_audit_structure_bad_arguments() -> None:
    result = runner.invoke(app, ["audit", "structure", "--part", "nope"])
    assert result.exit_code == 2 and "parts must be among" in result.output
    result = runner.invoke(app, ["audit", "structure", "--part", "stream", "--trials", "5"])
    assert result.exit_code == 2 and "trials" in result.output
