"""Small input files and valid invocations for the CLI tests (tiny: every command runs in under a second)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from privpub.core import CategoricalAttribute, NumericAttribute, Schema


def make_inputs(tmp_path: Path) -> dict[str, Path]:
    gen = np.random.default_rng(0)
    d = tmp_path / "in"
    d.mkdir()
    out: dict[str, Path] = {}
    out["counts"] = d / "counts.csv"
    pd.DataFrame({"count": [5, 0, 3, 9, 1, 0, 2, 7], "c": [1, 0, 2, 1, 0, 0, 3, 1]}).to_csv(out["counts"], index=False)
    out["table"] = d / "table.csv"
    pd.DataFrame({"a": gen.choice(["x", "y"], 40), "b": gen.choice(["u", "v", "w"], 40),
                  "n": gen.integers(0, 10, 40), "cls": gen.choice(["p", "q"], 40)}).to_csv(out["table"], index=False)
    out["points"] = d / "points.csv"
    pd.DataFrame({"x": gen.random(60), "y": gen.random(60)}).to_csv(out["points"], index=False)
    schema = Schema([CategoricalAttribute("a", ["x", "y"]), CategoricalAttribute("b", ["u", "v", "w"]),
                     NumericAttribute("n", 0, 9)], class_name="cls", classes=["p", "q"])
    out["schema"] = d / "schema.json"
    out["schema"].write_text(json.dumps(schema.to_dict()), encoding="utf-8")
    out["series"] = d / "series.npy"
    np.save(out["series"], gen.integers(0, 5, 64))
    return out


#: command -> (input, {option: value}) of a valid run; "@name" values are files of ``inputs``
VALID: dict[str, tuple[str, dict[str, str]]] = {
    "histogram": ("counts", {"--counts-column": "count", "--epsilon": "1", "--seed": "1"}),
    "synth": ("table", {"--schema": "@schema", "--epsilon": "2", "--columns": "a,b,n", "--rows": "20",
                        "--degree": "1", "--seed": "1", "--quiet": ""}),
    "spatial": ("points", {"--x": "x", "--y": "y", "--epsilon": "1", "--bounds": "0,0,1,1", "--seed": "1"}),
    "decision": ("table", {"--target": "cls", "--epsilon": "1", "--levels": "2", "--schema": "@schema",
                           "--seed": "1"}),
    "stream": ("series", {"--epsilon": "1", "--window": "8", "--seed": "1"}),
}
#: output suffixes each publishing command supports
SUFFIXES = {"histogram": (".csv", ".json", ".parquet", ".npy"), "synth": (".csv", ".json", ".parquet"),
            "spatial": (".json",), "decision": (".csv", ".json", ".parquet"),
            "stream": (".csv", ".json", ".parquet", ".npy")}


def args_for(command: str, inputs: dict[str, Path], output: Path,
             override: dict[str, str | None] | None = None, source: Path | None = None) -> list[str]:
    """The argument list of a valid run of ``command`` writing ``output`` (``override`` replaces options,
    None drops one, "" is a flag; ``source`` replaces the input file)."""
    name, options = VALID[command]
    opts = {**options, **(override or {})}
    args = [command, str(source if source is not None else inputs[name]), "--output", str(output)]
    for opt, val in opts.items():
        if val is None:
            continue
        if val == "":
            args.append(opt)
        else:
            args += [opt, str(inputs[val[1:]]) if val.startswith("@") else val]
    return args


def raw_adult_text(n: int, seed: int = 0, *, test: bool = False) -> str:
    """``n`` generated records in adult.data's raw format: ", "-separated, no header line, '?' for a
    missing workclass in about 5% of them (adult.test: its '|1x3' first line and labels ending in '.')."""
    from privpub.datasets import bayesnet_table, table_format

    fmt = table_format("adult")
    table = bayesnet_table(n, rng=seed, n_attributes=len(fmt.columns), domain_sizes=list(fmt.synth_schema.sizes))
    gen = np.random.default_rng(seed)
    out: dict[str, list[object]] = {}
    for j, name in enumerate(fmt.columns):
        codes = table.frame.iloc[:, j].to_numpy()
        rec = fmt.recode[name]
        if rec.groups is not None:
            choices = [list(g) for g in rec.groups] + ([["Peru", "Mexico"]] if rec.other else [])
            out[name] = [choices[c][gen.integers(len(choices[c]))] for c in codes]
        else:
            assert rec.edges is not None
            attr = fmt.schema[name]
            lows = [int(attr.lo), *map(int, rec.edges)]  # type: ignore[union-attr]
            highs = [*map(int, rec.edges), int(min(attr.hi, 2 * rec.edges[-1]))]  # type: ignore[union-attr]
            out[name] = [int(gen.integers(lows[c], highs[c])) for c in codes]
    frame = pd.DataFrame(out)
    frame.loc[gen.random(n) < 0.05, "workclass"] = "?"
    if test:
        frame["income"] = frame["income"] + "."
    lines = [", ".join(map(str, row)) for row in frame.itertuples(index=False)]
    return ("|1x3 Cross validator\n" if test else "") + "\n".join(lines) + "\n\n"
