"""Benchmark: the local-DP frequency oracles' per-user paths against the random-bit limit.

Run on demand (pure-ldp is installed only for the optional comparison)::

    python benchmarks/ldp_oracles.py [--repeats 3] [--quick] [--out docs/benchmarks/ldp.md]
    python -m pip install pure-ldp statsmodels   # optional: adds pure-ldp's OUE

What is measured, side by side in one run (ratios survive machine load):

* **The random-bit limit.** ``bit_generator.random_raw`` throughput of the default generator
  (PCG64), in 64-bit words per second, with the same number of threads as the oracles use
  (and with one thread). A unary-encoding report of ``d`` cells needs ``(d - 1) c(q) + c(p)``
  random bits if every cell is decided exactly on its own, where ``c(t) = 2 - 2**(1 - L)`` is
  the expected number of fair bits the exact lazy comparison ``U < t`` consumes (``L`` = index
  of the last 1 bit of the dyadic ``t``; this is the Knuth-Yao optimum for one Bernoulli draw:
  2 bits for a non-dyadic probability, 1 for ``p = 1/2``). The limit is
  ``64 * words_per_second / bits_per_user`` users per second: the rate at which the machine
  produces the random bits the reports need. The entropy ``(d - 1) H(q) + H(p)`` (a joint
  sampler's floor) is printed for reference.
* **OUE / SUE per-user path.** ``perturb`` (packed reports) + ``aggregate`` for ``d`` in
  {16, 1024, 65536} and epsilon in {0.5, 1, 4}, users/s and the ratio to the limit; the bool
  reports (``packed=False``) at ``d = 1024``; ``simulate`` for scale.
* **OLH aggregation.** ns per (user, value) pair of ``aggregate``, next to the former NumPy
  block implementation (kept here as the reference).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from _timing import median_time

import privpub.ldp._base as ldp_base
from privpub.ldp import OLH, OUE, SUE, UnaryEncoding
from privpub.ldp._base import Dyadic

PRIME = (1 << 31) - 1


def raw_supply(total_words: int, threads: int) -> Callable[[], None]:
    """A job drawing ``total_words`` raw 64-bit words over ``threads`` threads (one generator
    each, in calls of 2**20 words, as the oracles' chunks draw them)."""
    gens = [np.random.default_rng(i).bit_generator for i in range(threads)]
    share = -(-total_words // threads)

    def one(k: int) -> None:
        left = share
        while left > 0:
            gens[k].random_raw(min(left, 1 << 20))
            left -= 1 << 20

    def run() -> None:
        if threads == 1:
            one(0)
            return
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(one, range(threads)))

    return run


def side_by_side(
    job: Callable[[], Any], reference: Callable[[], Any], rounds: int, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, float, float]:
    """Alternate ``reference`` and ``job`` for ``rounds`` rounds (after one warm-up round): the
    median seconds of each and the median of the per-round ratios ``t_reference / t_job``."""
    job()
    reference()
    t_job, t_ref, ratios = [], [], []
    for _ in range(max(1, rounds)):
        t0 = clock()
        reference()
        t1 = clock()
        job()
        t2 = clock()
        t_ref.append(t1 - t0)
        t_job.append(t2 - t1)
        ratios.append((t1 - t0) / (t2 - t1))
    return statistics.median(t_job), statistics.median(t_ref), statistics.median(ratios)


def comparison_bits(t: Dyadic) -> float:
    """Expected fair bits of the exact lazy comparison ``U < t`` (2 - 2**(1 - L))."""
    num, bits = t.numerator, t.bits
    while num % 2 == 0:
        num //= 2
        bits -= 1
    return 2.0 - 2.0 ** (1 - bits)


def entropy(t: Dyadic) -> float:
    x = float(t)
    return 0.0 if x in (0.0, 1.0) else -(x * math.log2(x) + (1 - x) * math.log2(1 - x))


def bits_per_user(oracle: UnaryEncoding, eps: float) -> tuple[float, float]:
    p, q = oracle._dyadic(eps)
    d = oracle.domain_size
    return (d - 1) * comparison_bits(q) + comparison_bits(p), (d - 1) * entropy(q) + entropy(p)


def olh_aggregate_numpy(reports: np.ndarray, g: int, d: int) -> np.ndarray:
    """The former aggregation (NumPy blocks of values, O(n d) temporaries), for comparison."""
    a, b, y = reports[:, 0:1], reports[:, 1:2], reports[:, 2:3]
    out = np.empty(d, dtype=np.int64)
    block = max(1, (1 << 22) // max(1, reports.shape[0]))
    for start in range(0, d, block):
        vs = np.arange(start, min(d, start + block), dtype=np.int64)[None, :]
        out[start : start + vs.shape[1]] = np.count_nonzero(((a * vs + b) % PRIME) % g == y, axis=0)
    return out


def timed(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up (compilation, caches)
    return median_time(fn, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="fewer users (a smoke run)")
    parser.add_argument("--pure-users", type=int, default=20_000)
    parser.add_argument("--out", default=None, help="also write the tables to this markdown file")
    parser.add_argument("--domains", default="16,1024,65536", help="domain sizes of the limit table")
    parser.add_argument("--limit-only", action="store_true", help="only the table against the limit")
    args = parser.parse_args()
    scale = 16 if args.quick else 1
    threads = ldp_base.N_THREADS
    lines: list[str] = []

    def emit(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    load0 = os.getloadavg()[0]
    emit(f"`python benchmarks/ldp_oracles.py --repeats {args.repeats}` on {platform.machine()} "
         f"({os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}), "
         f"{threads} worker threads. 1-minute load average {load0:.1f} before the run.")
    emit()

    # -- unary encodings ---------------------------------------------------------------------
    emit("### OUE / SUE per-user path: `perturb` (packed) + `aggregate` against the random-bit limit")
    emit()
    emit("Each round draws the raw words the reports need (n x bits/user / 64, PCG64 `random_raw`) and then "
         "runs the oracle, with the same number of threads; medians over the rounds. Limit = users/s of the "
         f"raw draw alone; ratio = median per-round t_raw / t_oracle (wall clock, {threads} threads). "
         "1-thread ratio: both on one thread, timed in CPU seconds (robust to other jobs on the machine). "
         f"{args.repeats} rounds after a warm-up.")
    emit()
    emit("| oracle | d | epsilon | users | bits/user (entropy) | limit users/s | measured users/s | ratio "
         "| 1-thread ratio |")
    emit("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    domains = [int(x) for x in args.domains.split(",")]
    cases = [("OUE", d, eps) for d in domains for eps in (0.5, 1.0, 4.0)]
    cases += [("SUE", 1024, eps) for eps in (0.5, 1.0, 4.0) if 1024 in domains]
    for name, d, eps in cases:
        oracle: UnaryEncoding = OUE(domain_size=d) if name == "OUE" else SUE(domain_size=d)
        n = min(4_000_000, (1 << 30) // d) // scale
        values = np.random.default_rng(d).integers(0, d, n)
        gen = np.random.default_rng(0)

        def per_user(
            o: UnaryEncoding = oracle, v: np.ndarray = values, e: float = eps, g: np.random.Generator = gen
        ) -> None:
            o.aggregate(o.perturb(v, epsilon=e, rng=g))

        bits, ent = bits_per_user(oracle, eps)
        words = math.ceil(n * bits / 64)
        t_job, t_raw, ratio = side_by_side(per_user, raw_supply(words, threads), args.repeats)
        saved = ldp_base.N_THREADS
        ldp_base.N_THREADS = 1
        try:
            _, _, ratio_1 = side_by_side(per_user, raw_supply(words, 1), args.repeats, time.process_time)
        finally:
            ldp_base.N_THREADS = saved
        emit(f"| {name} | {d} | {eps:g} | {n:,} | {bits:,.0f} ({ent:,.0f}) | {n / t_raw:,.0f} | {n / t_job:,.0f} "
             f"| {ratio:.2f} | {ratio_1:.2f} |")
    emit()
    if args.limit_only:
        emit(f"1-minute load average {os.getloadavg()[0]:.1f} after the run.")
        if args.out:
            with open(args.out, "w", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
        return

    d, eps = 1024, 1.0
    n = 1_000_000 // scale
    oracle = OUE(domain_size=d)
    values = np.random.default_rng(1).integers(0, d, n)
    counts = np.bincount(values, minlength=d)
    gen = np.random.default_rng(2)
    rows = []
    t = timed(lambda: oracle.perturb(values, epsilon=eps, rng=gen), args.repeats)
    rows.append(("OUE `perturb` (packed)", n / t, t))
    reports = oracle.perturb(values, epsilon=eps, rng=gen)
    t = timed(lambda: oracle.aggregate(reports), args.repeats)
    rows.append(("OUE `aggregate` (packed)", n / t, t))
    t = timed(lambda: oracle.estimate(oracle.perturb(values, epsilon=eps, rng=gen), epsilon=eps), args.repeats)
    rows.append(("OUE `perturb` + `estimate` (packed)", n / t, t))
    t = timed(lambda: oracle.estimate(oracle.perturb(values, epsilon=eps, rng=gen, packed=False), epsilon=eps),
              args.repeats)
    rows.append(("OUE `perturb(packed=False)` + `estimate` (bool)", n / t, t))
    t = timed(lambda: oracle.simulate(counts, epsilon=eps, rng=gen), args.repeats)
    rows.append(("OUE `simulate`", n / t, t))
    try:
        from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer
    except ImportError:
        emit("(pure-ldp not installed: `pip install pure-ldp statsmodels` adds its OUE to the table)")
    else:
        sub = values[: args.pure_users] + 1  # pure-ldp indexes values from 1

        def pure() -> None:
            client = UEClient(epsilon=eps, d=d, use_oue=True)
            server = UEServer(epsilon=eps, d=d, use_oue=True)
            for v in sub:
                server.aggregate(client.privatise(int(v)))
            [server.estimate(i) for i in range(1, d + 1)]

        t = median_time(pure, max(1, args.repeats // 2))
        rows.append((f"pure-ldp OUE privatise + aggregate + estimate ({sub.size:,} users)", sub.size / t, t))
    emit(f"### OUE paths, d = {d}, epsilon = {eps:g}, {n:,} users")
    emit()
    emit("| path | users/s | seconds |")
    emit("| --- | ---: | ---: |")
    for label, rate, secs in rows:
        emit(f"| {label} | {rate:,.0f} | {secs:.4f} |")
    emit()

    # -- OLH aggregation ---------------------------------------------------------------------
    emit("### OLH `aggregate`: ns per (user, value) pair")
    emit()
    emit("| d | epsilon | g | users | privpub ns/pair | former NumPy ns/pair | speed-up |")
    emit("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for d, eps, n in ((1024, 1.0, 200_000), (1024, 4.0, 200_000), (65536, 1.0, 4_000), (4096, 20.0, 200_000)):
        n //= scale
        olh = OLH(domain_size=d)
        g = olh.buckets(eps)
        reports = olh.perturb(np.random.default_rng(3).integers(0, d, n), epsilon=eps, rng=4)
        t_new = timed(lambda o=olh, r=reports, e=eps: o.aggregate(r, epsilon=e), args.repeats)
        sub = reports[: max(1, n // 10)]
        t_old = timed(lambda s=sub, gg=g, dd=d: olh_aggregate_numpy(s, gg, dd), 1) * n / sub.shape[0]
        assert np.array_equal(olh.aggregate(sub, epsilon=eps), olh_aggregate_numpy(sub, g, d))
        pairs = n * d
        emit(f"| {d} | {eps:g} | {g:,} | {n:,} | {t_new / pairs * 1e9:.3f} | {t_old / pairs * 1e9:.2f} "
             f"| {t_old / t_new:.0f}x |")
    emit()
    emit(f"1-minute load average {os.getloadavg()[0]:.1f} after the run.")

    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write("# privpub.ldp benchmarks\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"(total {time.perf_counter() - t0:.0f} s)")
