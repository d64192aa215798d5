"""Benchmark of privpub.ldp_synth: the whole pipeline (perturb, network k = 2, sample) on Adult and NLTCS.

Run on demand (not in CI)::

    PRIVPUB_DATA=../shared/datasets python benchmarks/ldp_synth.py --repeats 3 \
        [--privbayes-python /path/to/venv/bin/python]

Each configuration is timed ``--repeats`` times and the median reported (wall clock, and the process CPU
time, which is less sensitive to a shared machine), together with AVD_2 (all
2-way marginals) and edge accuracy against the non-private network. With ``--privbayes-python`` the
same binned table goes through DataSynthesizer's PrivBayes (correlated attribute mode, k = 2) in that
interpreter (DataSynthesizer 0.1.13 needs numpy < 2 and pandas < 3, so it lives in its own venv:
``python -m venv v && v/bin/pip install "numpy<2" "pandas<3" DataSynthesizer==0.1.13``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from privpub.experiments.ldp_synth import TabularCodes, load_adult_codes, load_nltcs_codes
from privpub.ldp_synth import (
    EmpiricalJoints,
    ReportStore,
    build_network,
    conditional_tables,
    edge_accuracy,
    marginal_errors,
    perturb_codes,
    sample_synthetic,
)

CONFIGS = (
    ("linear", 0.5, {}),
    ("hybrid", 0.5, {"refine_iter": 20}),
    ("em", 0.1, {}),
    ("em", 0.5, {}),
    ("em", 0.9, {}),
)

PRIVBAYES_SCRIPT = r"""
import sys, time, json
import pandas as pd
from DataSynthesizer.DataDescriber import DataDescriber
from DataSynthesizer.DataGenerator import DataGenerator
src, desc, out, eps, k = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
df = pd.read_csv(src, dtype=str)
t0 = time.perf_counter()
describer = DataDescriber(category_threshold=20)
describer.describe_dataset_in_correlated_attribute_mode(
    dataset_file=src, epsilon=eps, k=k, attribute_to_is_categorical={c: True for c in df.columns})
describer.save_dataset_description_to_file(desc)
t1 = time.perf_counter()
gen = DataGenerator()
gen.generate_dataset_in_correlated_attribute_mode(len(df), desc, seed=0)
gen.save_synthetic_data(out)
t2 = time.perf_counter()
print(json.dumps({"describe_s": t1 - t0, "generate_s": t2 - t1, "total_s": t2 - t0}))
"""


def _pipeline(data: TabularCodes, method: str, f: float, kw: dict, seed: int) -> tuple[dict, np.ndarray, tuple]:
    codes, sizes = data.codes, data.sizes
    c0 = time.process_time()
    t0 = time.perf_counter()
    reports = perturb_codes(codes, sizes, flip_prob=f, rng=seed)
    t1 = time.perf_counter()
    store = ReportStore(reports, method=method, **kw)
    net = build_network(store, 2)
    tables = conditional_tables(store, net)
    t2 = time.perf_counter()
    syn = sample_synthetic(net, tables, sizes, codes.shape[0], seed + 1)
    t3 = time.perf_counter()
    cpu = time.process_time() - c0
    times = {"perturb_s": t1 - t0, "network_s": t2 - t1, "sample_s": t3 - t2, "total_s": t3 - t0, "cpu_s": cpu}
    return times, syn, net


def bench_dataset(data: TabularCodes, repeats: int) -> list[dict]:
    ref = build_network(EmpiricalJoints(data.codes, data.sizes), 2)
    rows = []
    for method, f, kw in CONFIGS:
        times, accs, avds = [], [], []
        for r in range(repeats):
            t, syn, net = _pipeline(data, method, f, kw, seed=100 + r)
            times.append(t)
            accs.append(edge_accuracy(ref, net))
            avds.append(marginal_errors(data.codes, syn, data.sizes, 2)[0])
        label = method + (f" (refine {kw['refine_iter']})" if kw else "")
        row = {"dataset": data.name, "estimator": label, "f": f}
        for key in ("perturb_s", "network_s", "sample_s", "total_s", "cpu_s"):
            row[key] = statistics.median(t[key] for t in times)
        row["edge_acc"] = float(np.median(accs))
        row["avd2"] = float(np.median(avds))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def bench_privbayes(data: TabularCodes, python: str, epsilon: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.csv"
        data.frame().to_csv(src, index=False)
        res = subprocess.run(
            [python, "-c", PRIVBAYES_SCRIPT, str(src), str(Path(tmp) / "d.json"), str(Path(tmp) / "out.csv"),
             str(epsilon), "2"],
            capture_output=True, text=True, check=True,
        )
        out = json.loads(res.stdout.strip().splitlines()[-1])
        import pandas as pd

        syn = pd.read_csv(Path(tmp) / "out.csv", dtype=str)[list(data.schema.names)]
        out["avd2"] = marginal_errors(data.codes, data.schema.encode(syn), data.sizes, 2)[0]
    row = {"dataset": data.name, "estimator": f"DataSynthesizer PrivBayes (central eps={epsilon})", **out}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--datasets", default="adult,nltcs")
    parser.add_argument("--privbayes-python", default=None)
    parser.add_argument("--privbayes-epsilon", type=float, default=1.0)
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args()
    data_dir = os.environ.get("PRIVPUB_DATA")
    loaders = {"adult": load_adult_codes, "nltcs": load_nltcs_codes}
    rows = []
    for name in args.datasets.split(","):
        data = loaders[name](data_dir)
        rows += bench_dataset(data, args.repeats)
        if args.privbayes_python:
            rows.append(bench_privbayes(data, args.privbayes_python, args.privbayes_epsilon))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=2))
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs", flush=True)


if __name__ == "__main__":
    main()
