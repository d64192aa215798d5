"""Central kernels against their limits (issue 17): HPHP exact grouping and exact discrete Laplace.

Run on demand from the repository root (not part of the test suite)::

    python benchmarks/kernels.py [--n 1000000] [--repeats 5] [--clock cpu|wall]
        [--baseline f3a90b8] [--markdown docs/benchmarks/kernels.md]

1. **HPHP exact grouping** (``dp_group``, method "fast") on 10^6 bins, per input family
   (uniform, Poisson, Zipf 1.1 and 1.5, mostly zero: the generator of
   ``tests/histogram/test_grouping_identity.py``, whose 10^4-bin outputs are pinned there) at
   two budgets. Timed: the grouping of the sorted noisy values, and HPHP's whole structure step
   (``hphp_structure``: stable order of the unsorted noisy values + grouping). Limit: the
   goal (< 2 s on every family, worst family <= 1.5x the best); for scale, ``np.sort`` of the
   same values is timed alongside. The stable order is also timed against
   ``np.argsort(kind="stable")``.
2. **Exact discrete Laplace** (``discrete_laplace_noise``), ``--dlap-sizes`` draws (10^6 and
   10^7) per epsilon on 40 epsilons geometrically spaced in [0.05, 10] plus the former grid's
   extremes, sensitivity 1 and 2 (and 3 on the extremes), against NumPy's float Laplace
   (``Generator.laplace``, same size and scale), timed alternately in the same loop. Limit
   (issue 27): 2x the float Laplace per draw at every epsilon and sensitivity.
3. **First call**: the one-off Numba compile into an empty cache, and the load from a warm
   cache, each in a fresh interpreter.

``--baseline COMMIT`` also times the kernels of that commit (the pure-Python deque and the
NumPy-vectorised sampler, taken with ``git show``) on the same inputs, once each.
Reports medians (and the worst input family) of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from _timing import emit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "histogram"))
from test_grouping_identity import EPSILONS, FAMILIES, grouping_input  # noqa: E402

from privpub.core import discrete_laplace_noise, rational_scale  # noqa: E402
from privpub.core._dlap import uses_tables  # noqa: E402
from privpub.histogram import dp_group, hphp_structure  # noqa: E402
from privpub.histogram._kernels import stable_order  # noqa: E402

#: issue 27: 40 epsilons in [0.05, 10]; most are not short decimals, so rational_scale rounds the
#: scale up to a denominator near 2**30 (numerators beyond 10^9)
DLAP_EPSILONS = tuple(float(e) for e in np.geomspace(0.05, 10.0, 40))
DLAP_SENSITIVITIES = (1.0, 2.0)
#: off the grid: the former grid's extremes and scales whose numerator is beyond 10^9
DLAP_EXTRA = ((1e-3, 1.0), (0.01, 1.0), (0.7, 3.0), (0.123456789, 1.0), (1e-6, 1.0))

CLOCK: Callable[[], float] = time.process_time
LOAD_START = os.getloadavg()


def _timed(fn: Callable[[], Any]) -> float:
    start = CLOCK()
    fn()
    return CLOCK() - start


def _side_by_side(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median time of each function, the functions alternating inside every repeat."""
    for fn in fns.values():
        fn()  # warm-up (and compile)
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(_timed(fn))
    return {k: statistics.median(v) for k, v in times.items()}


def _old_module(commit: str, path: str, name: str) -> ModuleType:
    src = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    tmp = Path(tempfile.mkdtemp()) / f"{name}.py"
    tmp.write_text(src)
    spec = importlib.util.spec_from_file_location(name, tmp)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_grouping(n: int, repeats: int, baseline: ModuleType | None) -> list[dict[str, Any]]:
    rows = []
    for eps in EPSILONS:
        for family in FAMILIES:
            y, c, gamma = grouping_input(family, eps, n)
            noisy = np.random.default_rng(1).permutation(y)  # HPHP sorts the unsorted noisy histogram
            eps1, eps2 = 0.85 * eps, 0.15 * eps
            t = _side_by_side({
                "grouping": lambda y=y, c=c, g=gamma: dp_group(y, c, g, method="fast"),
                "structure": lambda v=noisy, a=eps1, b=eps2: hphp_structure(v, epsilon1=a, epsilon2=b),
                "order": lambda v=noisy: stable_order(v),
                "argsort_stable": lambda v=noisy: np.argsort(v, kind="stable"),
                "np_sort": lambda v=noisy: np.sort(v),
            }, repeats)
            groups = dp_group(y, c, gamma)[1].size - 1
            row = {"epsilon": eps, "family": family, "groups": groups, **t}
            if baseline is not None:
                row["baseline_grouping"] = _timed(lambda y=y, c=c, g=gamma: baseline.dp_group_fast(y, c, g))
            rows.append(row)
            print(f"grouping eps={eps} {family:12s} groups={groups:7d} " +
                  " ".join(f"{k}={v:.3f}" for k, v in row.items() if isinstance(v, float) and k != "epsilon"),
                  flush=True)
    return rows


def bench_dlap(n: int, repeats: int, baseline: ModuleType | None) -> list[dict[str, Any]]:
    rows = []
    gen_d, gen_l = np.random.default_rng(0), np.random.default_rng(1)
    grid = [(eps, sens) for sens in DLAP_SENSITIVITIES for eps in DLAP_EPSILONS] + list(DLAP_EXTRA)
    for eps, sens in grid:
        if n > 1_000_000 and eps < 0.01:  # the loop sampler at huge scales: 10^6 draws suffice
            continue
        t, s = rational_scale(eps, sens)
        times = _side_by_side({
            "exact": lambda e=eps, d=sens: discrete_laplace_noise(n, epsilon=e, sensitivity=d, rng=gen_d),
            "float": lambda e=eps, d=sens: gen_l.laplace(0.0, d / e, size=n),
        }, repeats)
        row = {"n": n, "epsilon": eps, "sensitivity": sens, "scale": f"{t}/{s}", **times,
               "ratio": times["exact"] / times["float"]}
        if baseline is not None:
            gen_b = np.random.default_rng(2)
            row["baseline"] = _timed(lambda t=t, s=s, g=gen_b: baseline._discrete_laplace_exact(n, t, s, g))
        rows.append(row)
        print(f"dlap n={n:.0e} eps={eps:g} sens={sens:g} scale={t}/{s}: exact {times['exact'] / n * 1e9:.1f} ns, "
              f"float {times['float'] / n * 1e9:.1f} ns, ratio {row['ratio']:.2f}"
              + (f", baseline {row['baseline'] / n * 1e9:.0f} ns" if baseline is not None else ""), flush=True)
    return rows


_FIRST_CALL = """
import time
c0 = time.process_time()
import numpy as np
import privpub.core, privpub.histogram
c1 = time.process_time()
import numba
c2 = time.process_time()
privpub.core.discrete_laplace_noise(10, epsilon=1.0, rng=0)
c3 = time.process_time()
privpub.histogram.dp_group(np.arange(10.0), 1.0)
from privpub.histogram._kernels import stable_order
stable_order(np.arange(10.0))
c4 = time.process_time()
print(c1 - c0, c2 - c1, c3 - c2, c4 - c3)
"""


def bench_first_call() -> dict[str, list[float]]:
    """CPU seconds of the first calls in fresh interpreters: empty Numba cache, then warm cache."""
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT / "src")}
        for label in ("cold", "warm"):
            res = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True,
                                 check=True)
            out[label] = [float(v) for v in res.stdout.split()]
            print(f"first call, {label} cache (CPU s): import privpub.core + histogram {out[label][0]:.2f}, "
                  f"import numba {out[label][1]:.2f}, first sampler call {out[label][2]:.2f}, "
                  f"first grouping + order {out[label][3]:.2f}", flush=True)
    return out


def _markdown(args: argparse.Namespace, groups: list[dict[str, Any]], dlap: list[dict[str, Any]],
              first: dict[str, list[float]]) -> str:
    clock = "CPU time of this process" if args.clock == "cpu" else "wall-clock time"
    load = os.getloadavg()
    lines = [
        "# Benchmark: central kernels (`benchmarks/kernels.py`)",
        "",
        f"Command: `python benchmarks/kernels.py --n {args.n} --repeats {args.repeats} --clock {args.clock}"
        + (f" --baseline {args.baseline}" if args.baseline else "") + "`",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, numpy {np.__version__}; {clock}; medians of {args.repeats} runs, "
        f"the compared functions alternating inside each run; load average (1, 5, 15 min) "
        f"{' '.join(f'{v:.2f}' for v in LOAD_START)} at the start, {' '.join(f'{v:.2f}' for v in load)} at the end "
        "(a shared machine: the ratios, timed alternately in one process, are what to compare).",
        "",
        f"## HPHP exact grouping, n = {args.n:,} bins",
        "",
        "Seconds. *grouping*: `dp_group(method=\"fast\")` on the sorted noisy values; *structure*: "
        "`hphp_structure` on the unsorted noisy values (stable order + grouping); *order*: `stable_order`; "
        "`argsort(stable)` and `np.sort` on the same values for scale"
        + ("; *before*: the same grouping at the baseline commit (its numpy wavefront, handing over to the pure-Python deque when groups are short), one run" if args.baseline else "")
        + ".",
        "",
        "| ε | family | groups | grouping | structure | order | argsort(stable) | np.sort |"
        + (" before |" if args.baseline else ""),
        "|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.baseline else ""),
    ]
    for r in groups:
        lines.append(f"| {r['epsilon']} | {r['family']} | {r['groups']:,} | {r['grouping']:.3f} | "
                     f"{r['structure']:.3f} | {r['order']:.3f} | {r['argsort_stable']:.3f} | {r['np_sort']:.3f} |"
                     + (f" {r['baseline_grouping']:.2f} |" if args.baseline else ""))
    lines += ["", "Per budget: median over the families, the worst family and the worst/best ratio.", "",
              "| ε | step | median (s) | worst family (s) | worst / best | limit |", "|---|---|---:|---|---:|---|"]
    for eps in EPSILONS:
        sub = [r for r in groups if r["epsilon"] == eps]
        if not sub:
            continue
        for key in ("grouping", "structure"):
            vals = [r[key] for r in sub]
            worst = max(sub, key=lambda r, k=key: r[k])
            lines.append(f"| {eps} | {key} | {statistics.median(vals):.3f} | {worst['family']} "
                         f"({worst[key]:.3f}) | {max(vals) / min(vals):.2f} | < 2 s, worst/best <= 1.5 |")
    lines += ["", "## Exact discrete Laplace", "",
              "ns per draw; *float*: `Generator.laplace` at the same scale (the limit: exact <= 2x float); "
              "*route*: the threshold tables or the loop of [CKS20] (`privpub.core._dlap.uses_tables`)"
              + ("; *before*: the baseline commit's sampler, one run" if args.baseline else "") + ".",
              "",
              "| draws | sensitivity | ε | scale t/s | route | exact | float | exact / float |"
              + (" before |" if args.baseline else ""),
              "|---:|---:|---:|---|---|---:|---:|---:|" + ("---:|" if args.baseline else "")]
    for r in dlap:
        n = r["n"]
        route = "tables" if uses_tables(n, *(int(v) for v in r["scale"].split("/"))) else "loop"
        lines.append(f"| {n:.0e} | {r['sensitivity']:g} | {r['epsilon']:.4g} | {r['scale']} | {route} | "
                     f"{r['exact'] / n * 1e9:.1f} | {r['float'] / n * 1e9:.1f} | {r['ratio']:.2f} |"
                     + (f" {r['baseline'] / n * 1e9:.0f} |" if args.baseline else ""))
    for n in sorted({r["n"] for r in dlap}):
        at_n = [r for r in dlap if r["n"] == n]
        on_grid = [r for r in at_n if (r["epsilon"], r["sensitivity"]) not in DLAP_EXTRA]
        for label, rows in ((f"{n:.0e} draws, the 40-epsilon grid", on_grid), (f"{n:.0e} draws, all rows", at_n)):
            if rows:
                ratios = [r["ratio"] for r in rows]
                worst = max(rows, key=lambda r: r["ratio"])
                lines += ["", f"{label}: median ratio {statistics.median(ratios):.2f}; worst {worst['ratio']:.2f} "
                          f"(ε = {worst['epsilon']:.4g}, sensitivity {worst['sensitivity']:g}, scale {worst['scale']})."]
    lines += ["",
              "## First call (fresh interpreter, CPU seconds)", "",
              "Numba is imported on the first kernel call, not with the package. *cold*: an empty Numba cache "
              "(the kernels compile once, then are cached); *warm*: a second interpreter on that cache.", "",
              "| Numba cache | `import privpub.core, privpub.histogram` | `import numba` "
              "| first `discrete_laplace_noise` | first grouping + order |",
              "|---|---:|---:|---:|---:|"]
    for label, vals in first.items():
        lines.append(f"| {label} | {vals[0]:.2f} | {vals[1]:.2f} | {vals[2]:.2f} | {vals[3]:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000, help="bins and draws (default 10^6)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                        help="this process's CPU time (default; robust on a shared machine) or wall-clock time")
    parser.add_argument("--baseline", default=None, help="also time the kernels of this git commit")
    parser.add_argument("--dlap-sizes", type=int, nargs="+", default=[1_000_000, 10_000_000],
                        help="draws per discrete Laplace timing (default 10^6 and 10^7)")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: grouping,dlap,first")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the tables here")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    skip = set(args.skip.split(",")) - {""}
    old_kernels = old_mech = None
    if args.baseline:
        old_kernels = _old_module(args.baseline, "src/privpub/histogram/_kernels.py", "old_kernels")
        old_mech = _old_module(args.baseline, "src/privpub/core/_mechanisms.py", "old_mechanisms")
    groups = [] if "grouping" in skip else bench_grouping(args.n, args.repeats, old_kernels)
    dlap = [] if "dlap" in skip else [row for n in args.dlap_sizes for row in bench_dlap(n, args.repeats, old_mech)]
    first = {} if "first" in skip else bench_first_call()
    text = _markdown(args, groups, dlap, first)
    emit(text, args.markdown)


if __name__ == "__main__":
    main()
