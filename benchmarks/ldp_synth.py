"""Benchmark of privpub.ldp_synth: the whole pipeline (perturb, network k = 2, sample) on Adult and NLTCS.

Run on demand (not in CI)::

    PRIVPUB_DATA=../shared/datasets python benchmarks/ldp_synth.py --repeats 3 \
        [--privbayes-python /path/to/venv/bin/python]
    PRIVPUB_DATA=../shared/datasets python benchmarks/ldp_synth.py --fit --repeats 3 [--reference]

``--fit`` times the synthesizer fit alone on Adult (15 attributes, k = 2: the 484 joint estimates,
the network search and the conditional tables, from the simulated reports) at f = 0.1, 0.5, 0.9 with
the paper's EM (batched prefix-tree kernel) and the linear estimator, side by side in each repeat,
then ``privpub synth`` end to end (a fresh process: reading the CSV, simulating the reports, the fit
with the default ``--method auto``, sampling and writing 45,222 rows). ``--reference`` adds the same
fit with every joint through the one-joint dense EM (``em_collapsed``, the reference of the tests).
The load average is printed before and after.

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
    JointEstimate,
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


class _ReferenceStore(ReportStore):
    """Every EM joint through the dense one-joint reference EM (for the speed-up of the batched kernel)."""

    def _em_batch(self, keys, method):  # type: ignore[no-untyped-def]
        for key in keys:
            p, n_iter, converged, loglik = self._em_reference(key)
            self._cache[(key, method)] = JointEstimate(key, p, n_iter, converged, loglik, None, method)
            self.n_estimates += 1


def _fit(store_cls: type, reports, method: str) -> dict:  # type: ignore[no-untyped-def]
    c0, t0 = time.process_time(), time.perf_counter()
    store = store_cls(reports, method=method)
    net = build_network(store, 2)
    conditional_tables(store, net)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    iters = [e.n_iter for e in store._cache.values()]
    return {"wall_s": wall, "cpu_s": cpu, "n_estimates": store.n_estimates, "net": net,
            "capped": sum(1 for e in store._cache.values() if not e.converged), "median_iter": float(np.median(iters))}


def bench_fit(data: TabularCodes, repeats: int, reference: bool) -> list[dict]:
    """Synthesizer fit on the simulated reports (EM vs linear, side by side), then the CLI end to end."""
    fits = [("em", ReportStore), ("linear", ReportStore)] + ([("em (dense reference)", _ReferenceStore)]
                                                           if reference else [])
    warm = perturb_codes(data.codes[:2000], data.sizes, flip_prob=0.5, rng=0)
    build_network(ReportStore(warm), 2)  # load (or compile) the Numba kernel once
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        csv, schema = Path(tmp) / "adult.csv", Path(tmp) / "schema.json"
        data.frame().to_csv(csv, index=False)
        schema.write_text(json.dumps(data.schema.to_dict()))
        for f in (0.1, 0.5, 0.9):
            reports = perturb_codes(data.codes, data.sizes, flip_prob=f, rng=100)
            runs: dict[str, list[dict]] = {label: [] for label, _ in fits}
            for _ in range(repeats):
                for label, cls in fits:
                    runs[label].append(_fit(cls, reports, "linear" if label == "linear" else "em"))
            nets = {label: r[-1]["net"] for label, r in runs.items()}
            for label, r in runs.items():
                row = {"dataset": data.name, "what": f"fit ({label})", "f": f,
                       "wall_s": statistics.median(x["wall_s"] for x in r),
                       "cpu_s": statistics.median(x["cpu_s"] for x in r),
                       "n_estimates": r[-1]["n_estimates"], "capped": r[-1]["capped"],
                       "median_iter": r[-1]["median_iter"], "same_network_as_em": nets[label] == nets["em"]}
                rows.append(row)
                print(json.dumps(row), flush=True)
            cli = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                res = subprocess.run(
                    [sys.executable, "-c", "from privpub.cli import main; main()", "synth", str(csv), "--schema",
                     str(schema), "--flip-prob", str(f), "--seed", "1", "--quiet", "--force",
                     "-o", str(Path(tmp) / "out.csv")],
                    capture_output=True, text=True, check=True,
                )
                cli.append(time.perf_counter() - t0)
            row = {"dataset": data.name, "what": "privpub synth (end to end, --method auto)", "f": f,
                   "wall_s": statistics.median(cli), "stdout": res.stdout.strip()}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fit", action="store_true", help="Time the fit and the CLI on Adult (EM vs linear).")
    parser.add_argument("--reference", action="store_true", help="With --fit: also the dense one-joint EM.")
    parser.add_argument("--datasets", default="adult,nltcs")
    parser.add_argument("--privbayes-python", default=None)
    parser.add_argument("--privbayes-epsilon", type=float, default=1.0)
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args()
    data_dir = os.environ.get("PRIVPUB_DATA")
    loaders = {"adult": load_adult_codes, "nltcs": load_nltcs_codes}
    rows = []
    print(f"load average before: {os.getloadavg()}", flush=True)
    if args.fit:
        rows = bench_fit(load_adult_codes(data_dir), args.repeats, args.reference)
        print(f"load average after: {os.getloadavg()}", flush=True)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(rows, indent=2, default=str))
        return
    for name in args.datasets.split(","):
        data = loaders[name](data_dir)
        rows += bench_dataset(data, args.repeats)
        if args.privbayes_python:
            rows.append(bench_privbayes(data, args.privbayes_python, args.privbayes_epsilon))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=2))
    print(f"load average after: {os.getloadavg()}", flush=True)
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs", flush=True)


if __name__ == "__main__":
    main()
