"""Poisoning benchmark (issue 22): the target's frequency gain under none / detect / recover.

Library level (privpub.ldp.defend, privpub.ldp.fake_reports), deterministic seeds, about a minute:
16 categories, Zipf(1.1) truth, epsilon 2, 5,000 honest reports, the target is the least popular
category; fakes are 1-20% of all reports. Also the honest-only MSE of each defense (over 30 seeds).

    python benchmarks/poisoning.py [--plot docs/benchmarks/poisoning.png] [--seeds 5]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from privpub.ldp import GRR, OLH, OUE, SUE, defend, fake_reports

D, EPS, N_HONEST = 16, 2.0, 5000
FRACTIONS = (0.01, 0.02, 0.05, 0.10, 0.15, 0.20)
ORACLES = {"GRR": GRR(domain_size=D), "OUE": OUE(domain_size=D), "SUE": SUE(domain_size=D), "OLH": OLH(domain_size=D)}
ATTACKS = ("target", "mga", "adaptive")
DEFENSES = ("none", "detect", "recover")
TARGET = D - 1


def truth_values(seed: int) -> np.ndarray:
    w = 1.0 / np.arange(1, D + 1) ** 1.1
    return np.random.default_rng(seed).choice(D, size=N_HONEST, p=w / w.sum())


def run(seeds: int) -> dict[str, object]:
    out: dict[str, object] = {"gain": {}, "first": {}, "mse": {}}
    for name, oracle in ORACLES.items():
        for s in range(seeds):
            values = truth_values(1000 + s)
            truth = np.bincount(values, minlength=D) / N_HONEST
            honest = oracle.perturb(values, epsilon=EPS, rng=2000 + s)
            for attack in ATTACKS:
                for frac in FRACTIONS:
                    m = round(frac * N_HONEST / (1 - frac))
                    fakes = fake_reports(oracle, TARGET, m, attack=attack, epsilon=EPS, rng=3000 + s)
                    reports = np.concatenate([honest, fakes])
                    for defense in DEFENSES:
                        res = defend(oracle, reports, epsilon=EPS, method=defense)
                        f = res.estimate / res.n
                        key = f"{name}|{attack}|{frac}|{defense}"
                        out["gain"].setdefault(key, []).append(float(f[TARGET] - truth[TARGET]))
                        out["first"].setdefault(key, []).append(bool(np.argmax(f) == TARGET))
    for name, oracle in ORACLES.items():
        for defense in DEFENSES:
            errs = []
            for s in range(30):
                values = truth_values(5000 + s)
                truth = np.bincount(values, minlength=D) / N_HONEST
                res = defend(oracle, oracle.perturb(values, epsilon=EPS, rng=6000 + s), epsilon=EPS, method=defense)
                errs.append(float(((res.estimate / res.n - truth) ** 2).sum()))
            out["mse"][f"{name}|{defense}"] = float(np.mean(errs))
    out["gain"] = {k: float(np.mean(v)) for k, v in out["gain"].items()}
    out["first"] = {k: float(np.mean(v)) for k, v in out["first"].items()}
    return out


def table(res: dict[str, object]) -> str:
    lines = ["| oracle | attack | fakes | gain none | gain detect | gain recover | first (none / recover) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in ORACLES:
        for attack in ATTACKS:
            for frac in FRACTIONS:
                g = [res["gain"][f"{name}|{attack}|{frac}|{d}"] for d in DEFENSES]
                fs = [res["first"][f"{name}|{attack}|{frac}|{d}"] for d in ("none", "recover")]
                lines.append(f"| {name} | {attack} | {frac:.0%} | {g[0]:+.3f} | {g[1]:+.3f} | {g[2]:+.3f} | "
                             f"{fs[0]:.0%} / {fs[1]:.0%} |")
    lines += ["", "| oracle | honest-only MSE none | detect | recover |", "| --- | --- | --- | --- |"]
    for name in ORACLES:
        m = [res["mse"][f"{name}|{d}"] for d in DEFENSES]
        lines.append(f"| {name} | {m[0]:.5f} | {m[1]:.5f} ({m[1] / m[0] - 1:+.1%}) | {m[2]:.5f} ({m[2] / m[0] - 1:+.1%}) |")
    return "\n".join(lines)


def plot(res: dict[str, object], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(11, 2.8), sharey=True)
    for ax, name in zip(axes, ORACLES):
        for attack, style in zip(ATTACKS, ("-", "--", ":")):
            for defense, color in zip(DEFENSES, ("tab:red", "tab:orange", "tab:green")):
                ax.plot([100 * f for f in FRACTIONS], [res["gain"][f"{name}|{attack}|{f}|{defense}"] for f in FRACTIONS],
                        style, color=color, label=f"{attack}, {defense}" if name == "GRR" else None)
        ax.set_title(name)
        ax.set_xlabel("fake reports (%)")
        ax.axhline(0, color="grey", lw=0.5)
    axes[0].set_ylabel("target frequency gain")
    fig.legend(loc="center right", fontsize=6)
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    fig.savefig(path, dpi=80)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--plot", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    res = run(args.seeds)
    print(table(res))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    if args.plot:
        plot(res, args.plot)


if __name__ == "__main__":
    main()
