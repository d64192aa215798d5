"""Benchmark: OUE with d = 1024 and 10^6 users -- privpub's per-user path and exact simulation,
side by side with pure-ldp's OUE on the same workload.

Run on demand (pure-ldp is installed only for this benchmark)::

    python -m pip install pure-ldp statsmodels
    python benchmarks/ldp_oracles.py [--users 1000000] [--domain 1024] [--repeats 5]

pure-ldp loops over users in Python, so it is timed on a subsample (``--pure-users``) and its
throughput is reported in users per second. Medians are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import median_time as _median_time

from privpub.ldp import OUE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--domain", type=int, default=1024)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pure-users", type=int, default=20_000)
    args = parser.parse_args()

    gen = np.random.default_rng(0)
    values = gen.integers(0, args.domain, size=args.users)
    counts = np.bincount(values, minlength=args.domain)
    oracle = OUE(domain_size=args.domain)
    eps = args.epsilon
    rows = []

    def per_user_packed() -> None:
        oracle.estimate(oracle.perturb(values, epsilon=eps, rng=gen, packed=True), epsilon=eps)

    def per_user_bool() -> None:
        oracle.estimate(oracle.perturb(values, epsilon=eps, rng=gen), epsilon=eps)

    def simulate() -> None:
        oracle.simulate(counts, epsilon=eps, rng=gen)

    t = _median_time(per_user_packed, args.repeats)
    rows.append(("privpub OUE perturb+estimate (packed reports)", args.users / t, t))
    t = _median_time(per_user_bool, max(1, args.repeats // 2))
    rows.append(("privpub OUE perturb+estimate (bool reports)", args.users / t, t))
    t = _median_time(simulate, args.repeats)
    rows.append(("privpub OUE simulate", args.users / t, t))

    pure_rate = None
    try:
        from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer
    except ImportError:
        print("pure-ldp not installed: pip install pure-ldp statsmodels  (skipping the comparison)")
    else:
        sub = values[: args.pure_users] + 1  # pure-ldp indexes values from 1

        def pure() -> None:
            client = UEClient(epsilon=eps, d=args.domain, use_oue=True)
            server = UEServer(epsilon=eps, d=args.domain, use_oue=True)
            for v in sub:
                server.aggregate(client.privatise(int(v)))
            [server.estimate(i) for i in range(1, args.domain + 1)]

        t = _median_time(pure, max(1, args.repeats // 2))
        pure_rate = sub.size / t
        rows.append((f"pure-ldp OUE privatise+aggregate+estimate ({sub.size} users)", pure_rate, t))

    print(f"OUE, d={args.domain}, epsilon={eps}, n={args.users}, medians of {args.repeats} runs")
    print(f"{'path':<62} {'users/s':>14} {'seconds':>9} {'x pure-ldp':>11}")
    for name, rate, secs in rows:
        ratio = f"{rate / pure_rate:.1f}" if pure_rate else "-"
        print(f"{name:<62} {rate:>14,.0f} {secs:>9.3f} {ratio:>11}")


if __name__ == "__main__":
    main()
