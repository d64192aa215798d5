"""CLI: ``privpub synth`` and ``privpub reproduce ldp_synth`` through Typer's runner."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privpub.cli import app
from privpub.core import CategoricalAttribute, Schema

from .conftest import chain_codes

runner = CliRunner()


@pytest.fixture
def table(tmp_path: Path) -> tuple[Path, Path, pd.DataFrame]:
    x = chain_codes(2000, 4, k=3, seed=0)
    cats = ["lo", "mid", "hi"]
    df = pd.DataFrame({f"c{j}": np.asarray(cats, dtype=object)[x[:, j]] for j in range(4)})
    data = tmp_path / "in.csv"
    df.to_csv(data, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(Schema([CategoricalAttribute(f"c{j}", cats) for j in range(4)]).to_dict()))
    return data, schema, df


def test_synth_command(table: tuple[Path, Path, pd.DataFrame], tmp_path: Path) -> None:
    data, schema, df = table
    out, net = tmp_path / "out.csv", tmp_path / "net.json"
    res = runner.invoke(app, ["synth", str(data), "--schema", str(schema), "--flip-prob", "0.2", "--degree", "2",
                              "--seed", "3", "-o", str(out), "--network-out", str(net), "--quiet"])
    assert res.exit_code == 0, res.output
    assert "epsilon = " in res.output
    syn = pd.read_csv(out)
    assert list(syn.columns) == list(df.columns) and len(syn) == len(df)
    info = json.loads(net.read_text())
    assert len(info["network"]) == 4 and info["flip_prob"] == 0.2
    assert [len(n["parents"]) for n in info["network"]] == [0, 1, 2, 2]
    again = tmp_path / "again.csv"
    runner.invoke(app, ["synth", str(data), "--schema", str(schema), "--flip-prob", "0.2", "--degree", "2",
                        "--seed", "3", "-o", str(again), "--quiet"])
    assert again.read_text() == out.read_text()  # same seed, same output


def test_synth_columns_and_epsilon(table: tuple[Path, Path, pd.DataFrame], tmp_path: Path) -> None:
    data, schema, _ = table
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["synth", str(data), "--schema", str(schema), "--epsilon", "12", "--degree", "1",
                              "--columns", "c0,c2", "--rows", "50", "-o", str(out)])
    assert res.exit_code == 0, res.output
    syn = pd.read_csv(out)
    assert list(syn.columns) == ["c0", "c2"] and len(syn) == 50


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--flip-prob", "1.5"], "--flip-prob: flip_prob must be in (0, 1)"),
        (["--flip-prob", "0.5", "--epsilon", "3"], "give exactly one of --epsilon"),
        (["--flip-prob", "0.5", "--degree", "4"], "degree (max parents k) must be in [1, 3]"),
        (["--flip-prob", "0.5", "--columns", "c0,zz"], "--columns names columns not in"),
    ],
)
def test_synth_errors(table: tuple[Path, Path, pd.DataFrame], tmp_path: Path, extra: list[str],
                      message: str) -> None:
    data, schema, _ = table
    res = runner.invoke(app, ["synth", str(data), "--schema", str(schema), "-o", str(tmp_path / "o.csv"),
                              "--quiet", *extra])
    assert res.exit_code == 2
    assert message in res.output


def test_synth_undeclared_column(table: tuple[Path, Path, pd.DataFrame], tmp_path: Path) -> None:
    data, schema, df = table
    df.assign(extra=1).to_csv(data, index=False)
    res = runner.invoke(app, ["synth", str(data), "--schema", str(schema), "--flip-prob", "0.5",
                              "-o", str(tmp_path / "o.csv"), "--quiet"])
    assert res.exit_code == 2 and "without a declared domain" in res.output


def test_synth_auto_method_runs_em_on_small_domains(table: tuple[Path, Path, pd.DataFrame],
                                                    tmp_path: Path) -> None:
    data, schema, _ = table
    res = runner.invoke(app, ["synth", str(data), "--schema", str(schema), "--flip-prob", "0.9", "--seed", "1",
                              "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 0, res.output
    assert "estimator: em (the paper's EM" in res.output  # the automatic choice is stated
    assert "network (em)" in res.output and "4/4" in res.output  # one progress step per node
    assert res.output.rstrip().endswith("estimator em)")


def test_synth_auto_method_picks_linear_when_em_is_too_slow(tmp_path: Path) -> None:
    """Four 24-value columns at f = 0.5: EM's worst case is minutes, so auto uses linear and says why."""
    from privpub.cli._ldp_synth import choose_method

    gen = np.random.default_rng(0)
    cats = [f"v{i}" for i in range(24)]
    df = pd.DataFrame({f"c{j}": np.asarray(cats, dtype=object)[gen.integers(24, size=3000)] for j in range(4)})
    data = tmp_path / "in.csv"
    df.to_csv(data, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(Schema([CategoricalAttribute(f"c{j}", cats) for j in range(4)]).to_dict()))
    res = runner.invoke(app, ["synth", str(data), "--schema", str(schema), "--flip-prob", "0.5", "--seed", "1",
                              "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 0, res.output
    assert "estimator: linear. EM could take up to" in res.output and "pass --method em" in res.output
    assert res.output.rstrip().endswith("estimator linear)")
    # the choice uses public metadata only, is deterministic and leaves an explicit method alone
    assert choose_method("auto", (24,) * 4, 3000, None, 0.5, 2)[0] == "linear"
    assert choose_method("auto", (24,) * 4, 3000, None, 1e-4, 2)[0] == "em"  # few patterns at tiny f
    assert choose_method("em", (24,) * 4, 3000, None, 0.5, 2) == ("em", "")
    bad = runner.invoke(app, ["synth", str(data), "--schema", str(schema), "--flip-prob", "0.5", "--method", "fast",
                              "-o", str(tmp_path / "o2.csv")])
    assert bad.exit_code == 2 and "--method must be one of ['auto', 'em', 'linear', 'hybrid']" in bad.output


def test_reproduce_quick_on_tiny_data(tmp_path: Path) -> None:
    """The reproduction runner end to end on a tiny NLTCS stand-in (Adult absent: skipped)."""
    x = chain_codes(400, 5, seed=1)
    (tmp_path / "data" / "nltcs").mkdir(parents=True)
    pd.DataFrame(x, columns=[str(j) for j in range(5)]).to_csv(tmp_path / "data" / "nltcs" / "nltcs.csv",
                                                                index=False)
    out = tmp_path / "out"
    res = runner.invoke(app, ["reproduce", "ldp_synth", "--quick", "--out", str(out),
                              "--data-dir", str(tmp_path / "data")])
    assert res.exit_code == 0, res.output
    summary = (out / "summary.md").read_text()
    assert "## nltcs" in summary and "qualitative claims" in summary
    frame = pd.read_csv(out / "results.csv")
    assert set(frame["method"]) >= {"LDP BN (entropy, EM)", "LDP BN (random, EM)", "independent", "non-private BN",
                                    "CALM (2-way)"}
    # the state-of-the-art section (issue 26): CALM on the same runs, and a verdict counted over its 12 cells
    assert "### State of the art: CALM" in summary
    assert re.search(r"\*\*Verdict:\*\* the seed method's \(LDP BN, k = 2\) AVD is below CALM's in \d+ of 12 cells",
                     summary), summary
    assert (out / "fig9_10_nltcs.png").exists()
    from privpub.experiments._common import read_claims, read_ledgers

    claims = read_claims(out)
    assert claims and any(c.verdict == "not applicable" and "TPC-E" in c.claim for c in claims)
    ledgers = read_ledgers(out)
    # one release per f of the quick grid, one charge per attribute (5 attributes)
    assert set(ledgers["step"]) == {"local perturbation"} and ledgers["release"].nunique() == 3
    assert len(ledgers) == 15


def test_reproduce_without_data(tmp_path: Path) -> None:
    res = runner.invoke(app, ["reproduce", "ldp_synth", "--quick", "--out", str(tmp_path / "o"),
                              "--data-dir", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "neither NLTCS nor Adult" in res.output


def test_demo_rows() -> None:
    from privpub.experiments.ldp_synth import demo

    rows = demo(rng=0)
    acc = [r.value for r in rows if r.metric == "chain edges recovered"]
    assert acc and min(acc) == 1.0
    assert all(r.part == "ldp_synth" for r in rows)
    assert all(r.ledger is None or r.ledger.total == r.epsilon for r in rows)
