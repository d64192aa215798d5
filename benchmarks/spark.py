"""Benchmark of privpub.spark: each part's Spark path on synthetic records generated inside Spark.

Run on demand (not part of the test suite)::

    python benchmarks/spark.py [--sizes 1e6,1e7,1e8] [--memory-sizes 1e6,1e7] [--markdown docs/benchmarks/spark.md]

Every size runs in a fresh process (so peak memory is that size's own): a ``local[2]`` session
generates ``n`` records with ``spark.range`` (columns ``age`` in [0, 100), ``sex`` and ``edu``
categorical, class ``y``, event time ``t`` in seconds), then times

* histogram: ``privpub.spark.counts`` on ``age`` (100 bins) and ``HPHP().publish`` of the counts;
* decision: ``MAXGDDP(levels=3)`` and ``DiffGen(levels=3)`` on the Spark DataFrame;
* stream: ``privpub.spark.step_counts`` (1,000 steps) fed to ``HQRTP``.

It records wall time and the peak resident memory of the Python driver (``ru_maxrss``) and of
the Spark JVM (``VmHWM``; in local mode the JVM also runs the executors, with a fixed heap).
The in-memory path (NumPy/pandas, the same records generated with NumPy) runs at the sizes of
``--memory-sizes`` for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA_ARGS: dict[str, Any] = {"classes": ["no", "yes"], "class_name": "y"}
SEX = ["F", "M"]
EDU = ["none", "school", "college", "bachelor", "master", "phd"]


def _schema() -> Any:
    from privpub.core import CategoricalAttribute, NumericAttribute, Schema

    return Schema([NumericAttribute("age", lo=0, hi=100), CategoricalAttribute("sex", SEX),
                   CategoricalAttribute("edu", EDU)], **SCHEMA_ARGS)


def _spark_frame(spark: Any, n: int) -> Any:
    import pyspark.sql.functions as F

    u1, u2, u3, u4 = (F.rand(seed) for seed in (1, 2, 3, 4))
    age = F.floor(u1 * 100).cast("double")
    sex = F.element_at(F.array(*[F.lit(s) for s in SEX]), (F.floor(u2 * 2) + 1).cast("int"))
    edu_i = F.floor(u3 * 6)
    edu = F.element_at(F.array(*[F.lit(s) for s in EDU]), (edu_i + 1).cast("int"))
    signal = (age > 40).cast("int") + (edu_i >= 3).cast("int")
    y = F.when((signal >= 1) & (u4 < 0.8), "yes").when((signal == 0) & (u4 < 0.2), "yes").otherwise("no")
    return spark.range(0, n, numPartitions=max(2, n // 5_000_000)).select(
        age.alias("age"), sex.alias("sex"), edu.alias("edu"), y.alias("y"),
        F.floor(F.col("id") * 1000 / F.lit(n)).cast("long").alias("t"))


def _numpy_frame(n: int) -> Any:
    import pandas as pd

    gen = np.random.default_rng(0)
    age = np.floor(gen.random(n) * 100)
    edu_i = np.floor(gen.random(n) * 6).astype(np.int64)
    signal = (age > 40).astype(int) + (edu_i >= 3).astype(int)
    u4 = gen.random(n)
    y = np.where(((signal >= 1) & (u4 < 0.8)) | ((signal == 0) & (u4 < 0.2)), "yes", "no")
    return pd.DataFrame({"age": age, "sex": np.asarray(SEX)[np.floor(gen.random(n) * 2).astype(int)],
                         "edu": np.asarray(EDU)[edu_i], "y": y, "t": (np.arange(n) * 1000) // n})


def _jvm_peak_mb(spark: Any) -> float:
    pid = spark.sparkContext._gateway.proc.pid
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _py_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(n: int, engine: str) -> dict[str, Any]:
    """All parts at size ``n`` on one engine, in this process."""
    from privpub.decision import MAXGDDP, DiffGen
    from privpub.histogram import HPHP, counts_from_records
    from privpub.stream import HQRTP, step_counts

    out: dict[str, Any] = {"n": n, "engine": engine}
    edges = np.arange(101, dtype=np.float64)
    schema = _schema()
    t0 = time.perf_counter()
    if engine == "spark":
        import privpub.spark as ps

        spark = ps.local_session(2, app_name="privpub-bench", driver_memory="4g")
        data = _spark_frame(spark, n)
        hist = lambda: ps.counts(data, "age", edges)  # noqa: E731
        steps = lambda: ps.step_counts(data, "t", start=0, step=1, steps=1000)  # noqa: E731
    else:
        data = _numpy_frame(n)
        hist = lambda: counts_from_records(data["age"].to_numpy(), bins=edges)  # noqa: E731
        steps = lambda: step_counts(data["t"].to_numpy(), start=0, step=1, steps=1000)  # noqa: E731
    out["setup_s"] = time.perf_counter() - t0
    timings = {}
    t = time.perf_counter()
    c = hist()
    HPHP().publish(c, epsilon=1.0, rng=0)
    timings["histogram"] = time.perf_counter() - t
    assert int(c.sum()) == n
    for name, pub in (("maxgddp", MAXGDDP(levels=3)), ("diffgen", DiffGen(levels=3))):
        t = time.perf_counter()
        rel = pub.publish(data, schema=schema, epsilon=1.0, rng=0)
        timings[name] = time.perf_counter() - t
        out[f"{name}_cells"] = len(rel.counts)
    t = time.perf_counter()
    items = steps()
    HQRTP(window=1000, epsilon=1.0, rng=0).extend(items)
    timings["stream"] = time.perf_counter() - t
    assert int(items.sum()) == n
    out["seconds"] = timings
    out["python_peak_mb"] = _py_peak_mb()
    if engine == "spark":
        out["jvm_peak_mb"] = _jvm_peak_mb(spark)
        spark.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1e6,1e7,1e8")
    parser.add_argument("--memory-sizes", default="1e6,1e7")
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument("--one", nargs=2, metavar=("N", "ENGINE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(int(float(args.one[0])), args.one[1])))
        return
    runs = [(int(float(s)), "spark") for s in args.sizes.split(",") if s]
    runs += [(int(float(s)), "memory") for s in args.memory_sizes.split(",") if s]
    results = []
    for n, engine in runs:
        proc = subprocess.run([sys.executable, __file__, "--one", str(n), engine], capture_output=True, text=True,
                              env=os.environ.copy(), check=False)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"run n={n} engine={engine} failed")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        print(json.dumps(res), flush=True)
        results.append(res)
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"load average at the end {os.getloadavg()[0]:.1f}. Times in seconds (one run each); peak memory in MB.",
        "",
        "| engine | records | histogram | MAXGDDP h=3 | DiffGen h=3 | stream | Python driver peak | JVM peak |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        s = r["seconds"]
        lines.append(f"| {r['engine']} | {r['n']:.0e} | {s['histogram']:.1f} | {s['maxgddp']:.1f} | "
                     f"{s['diffgen']:.1f} | {s['stream']:.1f} | {r['python_peak_mb']:.0f} | "
                     f"{r.get('jvm_peak_mb', float('nan')):.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
