"""Reproduction of paper 001 (HPHP, Li et al. 2020) and the no-download demo of privpub.histogram.

``reproduce`` runs the paper's Fig. 2 (KLD of Optimal, HPHP, AHP and DP at ε in {0.01, 0.1, 1})
on the Hay et al. histograms (nettrace, search_logs, social_network) and the six DPBench 1-D
histograms (stand-ins for the unavailable waitakere), and Fig. 3 (LNMSE versus range size
50..450) on every dataset, with the DPBench sets labelled as waitakere stand-ins. Methods:
``laplace`` (the paper's DP), ``ahp``, ``hphp`` (private), ``hphp_paper`` (the paper's leaky
HPHP, NOT private) and ``optimal`` (NOT private). Grid, seeds and metrics follow the histogram
spec section 6; continuous Laplace noise everywhere, as in the paper.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from privpub.errors import ParameterError, PrivacyWarning
from privpub.experiments._common import (
    Claim,
    DemoRow,
    claims_markdown,
    resolve_data_dir,
    save_figure,
    write_claims,
    write_ledgers,
)
from privpub.histogram import AHP, DAWA, HPHP, LaplaceHistogram, OptimalGrouping, kld

__all__ = ["DATASETS", "DPBENCH_DAWA_REPORTED", "DPBENCH_REPORTED_SE", "DPBENCH_SCALE", "EPSILONS", "METHODS", "RANGE_LENGTHS", "SOTA_EPSILON",
           "demo", "dpbench_headline", "evaluate", "prefix_error", "reproduce", "state_of_the_art", "synthetic_like"]

log = logging.getLogger(__name__)

#: dataset name in privpub.datasets -> label in the report
DATASETS: dict[str, str] = {
    "social_network": "socialnetwork (Hay)",
    "search_logs": "search_log (Hay)",
    "nettrace": "nettrace (Hay)",
    "dpbench_1d/HEPTH": "HEPTH (DPBench, waitakere stand-in)",
    "dpbench_1d/ADULTFRANK": "ADULT (DPBench, waitakere stand-in)",
    "dpbench_1d/NETTRACE": "NETTRACE-4096 (DPBench, waitakere stand-in)",
    "dpbench_1d/SEARCHLOGS": "SEARCHLOGS-4096 (DPBench, waitakere stand-in)",
    "dpbench_1d/LC-REQ": "Lending Club (DPBench, waitakere stand-in)",
    "dpbench_1d/MD-SAL": "MD salary (DPBench, waitakere stand-in)",
}
EPSILONS = (0.01, 0.1, 1.0)
METHODS = ("laplace", "ahp", "hphp", "hphp_paper", "optimal")
NON_PRIVATE = ("hphp_paper", "optimal")
RANGE_LENGTHS = tuple(range(50, 451, 50))
PAPER_LABEL = {
    "laplace": "DP (Laplace)",
    "ahp": "AHP",
    "hphp": "HPHP (private)",
    "hphp_paper": "HPHP (paper, NOT private)",
    "optimal": "Optimal (NOT private)",
    "dawa": "DAWA",
}


def _publisher(method: str) -> Any:
    noise = "laplace"  # the paper's continuous Laplace noise
    if method == "laplace":
        return LaplaceHistogram(noise=noise)
    if method == "ahp":
        return AHP(noise=noise)
    if method == "hphp":
        return HPHP(noise=noise)
    if method == "hphp_paper":
        return HPHP(variant="paper", noise=noise)
    if method == "optimal":
        return OptimalGrouping(noise=noise)
    if method == "dawa":
        return DAWA()  # continuous Laplace in both stages, as the paper
    raise ParameterError(f"method must be one of {', '.join(METHODS)}, got {method!r}", param="method")


def trial_seed(base: int, dataset: str, method: str, epsilon: float, trial: int) -> np.random.SeedSequence:
    """Spec 6.2: ``SeedSequence([base, crc32(dataset), crc32(method), round(1e6 eps), trial])``."""
    return np.random.SeedSequence([
        int(base), zlib.crc32(dataset.encode()), zlib.crc32(method.encode()), round(1e6 * epsilon), int(trial)
    ])


def synthetic_like(name: str, *, n: int | None = None, seed: int = 0) -> np.ndarray:
    """Deterministic surrogate histograms (spec 6.1); results on them must be labelled as such.

    ``"nettrace"``: ~3.4% non-zero bins, discrete Pareto values capped at 1400, sorted descending;
    ``"search_log"``: zero-inflated Poisson time series; ``"socialnetwork"``: lognormal degrees
    >= 1 capped at 1700, sorted ascending; ``"waitakere"``: negative-binomial populations, mean
    about 100, rounded to multiples of 3, unsorted.

    Examples
    --------
    >>> synthetic_like("nettrace", n=1000).shape
    (1000,)
    """
    gen = np.random.default_rng([zlib.crc32(name.encode()), int(seed)])
    defaults = {"nettrace": 65_536, "search_log": 32_768, "socialnetwork": 11_342, "waitakere": 7_725}
    if name not in defaults:
        raise ParameterError(f"name must be one of {', '.join(defaults)}, got {name!r}", param="name")
    size = defaults[name] if n is None else int(n)
    if size < 1:
        raise ParameterError(f"n must be >= 1, got {size}", param="n")
    if name == "nettrace":
        out = np.zeros(size, dtype=np.int64)
        nz = gen.random(size) < 0.034
        out[nz] = np.minimum(np.floor(gen.pareto(0.75, int(nz.sum())) + 1), 1400).astype(np.int64)
        return np.sort(out)[::-1].copy()
    if name == "search_log":
        t = np.arange(size)
        rate = 12 * (1 + np.sin(2 * np.pi * t / 16)) * (1 + 3 * (t > 0.8 * size))
        return np.where(gen.random(size) < 0.5, 0, gen.poisson(rate)).astype(np.int64)
    if name == "socialnetwork":
        return np.sort(np.clip(np.floor(gen.lognormal(3.0, 1.2, size)), 1, 1700)).astype(np.int64)
    return (3 * np.round(gen.negative_binomial(2, 2 / 102, size) / 3)).astype(np.int64)


def _range_mse(true: np.ndarray, est: np.ndarray, lengths: Iterable[int]) -> list[float]:
    """MSE over all contiguous ranges of each length (prefix sums), -> list aligned with lengths."""
    diff = np.concatenate([[0.0], np.cumsum(est - true)])
    n = true.size
    out = []
    for r in lengths:
        if r > n:
            out.append(math.nan)
            continue
        err = diff[r:] - diff[: n - r + 1]
        out.append(float(np.mean(err * err)))
    return out


def prefix_error(true: np.ndarray, est: np.ndarray) -> float:
    """DPBench's scaled average per-query error on the prefix workload (Hay et al., SIGMOD 2016;
    dpcomp_core ``metric.py``, ``workload.Prefix1D``): ``||W x - W x_hat||_2 / (|W| scale)``, with
    ``W`` the ``n`` prefix queries and ``scale`` the histogram's total."""
    d = np.cumsum(np.asarray(est, dtype=np.float64) - true)
    total = float(np.sum(true))
    return float(np.linalg.norm(d) / d.size / total) if total > 0 else math.nan


def evaluate(
    histograms: dict[str, np.ndarray],
    *,
    epsilons: Iterable[float] = EPSILONS,
    methods: Iterable[str] = METHODS,
    trials: int = 20,
    rng: int = 0,
    progress: bool = False,
    ledgers: dict[str, Any] | None = None,
) -> pd.DataFrame:
    """Run the grid; one row per (dataset, epsilon, method, trial) with KLD, per-range MSE and time.

    ``ledgers``, if given, receives the ledger of each (method, epsilon)'s first release (first
    dataset, trial 0): the budget schedule behind the figures.
    """
    cells = [(d, e, m) for d in histograms for e in epsilons for m in methods]
    iterator: Iterable[tuple[str, float, str]] = cells
    if progress:
        from tqdm import tqdm

        iterator = tqdm(cells, desc="histogram grid", unit="cell")
    rows = []
    for dataset, eps, method in iterator:
        h = np.asarray(histograms[dataset])
        pub = _publisher(method)
        for t in range(trials):
            seed = trial_seed(rng, dataset, method, eps, t)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyWarning)
                release = pub.publish(h, epsilon=eps, rng=seed)
            elapsed = time.perf_counter() - start
            key = f"{PAPER_LABEL[method]} ε={eps:g} (Laplace noise, {dataset}, trial 0)"
            if ledgers is not None and t == 0 and not any(k.startswith(f"{PAPER_LABEL[method]} ε={eps:g} ")
                                                           for k in ledgers):
                ledgers[key] = release.ledger
            row = {
                "dataset": dataset, "n": h.size, "epsilon": eps, "method": method, "trial": t,
                "private": release.private, "groups": release.n_groups, "seconds": elapsed,
                "kld": kld(h, release.counts), "kld_lam1e-6": kld(h, release.counts, lam=1e-6),
                "prefix_err": prefix_error(h.astype(float), release.counts),
            }
            for r, v in zip(RANGE_LENGTHS, _range_mse(h.astype(float), release.counts, RANGE_LENGTHS)):
                row[f"mse_r{r}"] = v
            rows.append(row)
    return pd.DataFrame(rows)


def _load(data_dir: Path | None, names: Iterable[str]) -> dict[str, np.ndarray]:
    from privpub.datasets import CountsDataset, load

    out: dict[str, np.ndarray] = {}
    for name in names:
        ds = load(name, data_dir=data_dir)
        assert isinstance(ds, CountsDataset), name  # the histogram datasets
        out[name] = np.asarray(ds.counts)
    return out


def _summaries(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    keys = ["dataset", "epsilon", "method"]
    kld_sum = trials.groupby(keys, sort=False).agg(
        kld_mean=("kld", "mean"), kld_sd=("kld", "std"), kld_lam1e6_mean=("kld_lam1e-6", "mean"),
        groups_mean=("groups", "mean"), seconds_mean=("seconds", "mean"), private=("private", "first"),
        trials=("trial", "count"),
    ).reset_index()
    rows = []
    for (dataset, eps, method), g in trials.groupby(keys, sort=False):
        for r in RANGE_LENGTHS:
            vals = g[f"mse_r{r}"].to_numpy(dtype=float)
            if np.all(np.isnan(vals)):
                continue
            mean = float(np.mean(vals))
            logs = np.log(vals[vals > 0]) if np.any(vals > 0) else np.array([])
            rows.append({
                "dataset": dataset, "epsilon": eps, "method": method, "range_length": r,
                "lnmse": math.log(mean) if mean > 0 else -math.inf,
                "lnmse_sd": float(np.std(logs, ddof=1)) if logs.size > 1 else math.nan,
            })
    return kld_sum, pd.DataFrame(rows)


def _plots(kld_sum: pd.DataFrame, lnmse_sum: pd.DataFrame, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    datasets = list(dict.fromkeys(kld_sum["dataset"]))
    cols = 3
    rows = math.ceil(len(datasets) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, dataset in zip(axes.ravel(), datasets):
        sub = kld_sum[kld_sum["dataset"] == dataset]
        methods = list(dict.fromkeys(sub["method"]))
        eps_list = list(dict.fromkeys(sub["epsilon"]))
        width = 0.8 / len(methods)
        for k, method in enumerate(methods):
            s = sub[sub["method"] == method].set_index("epsilon").loc[eps_list]
            ax.bar(np.arange(len(eps_list)) + k * width, s["kld_mean"], width, yerr=s["kld_sd"].fillna(0),
                   label=PAPER_LABEL[method], capsize=2, hatch="//" if method in NON_PRIVATE else None)
        ax.set_xticks(np.arange(len(eps_list)) + 0.4 - width / 2, [f"ε={e:g}" for e in eps_list])
        ax.set_yscale("log")
        ax.set_title(DATASETS.get(dataset, dataset), fontsize=9)
        ax.set_ylabel("KLD")
    for ax in axes.ravel()[len(datasets):]:
        ax.axis("off")
    fig.suptitle("Fig. 2: KLD (mean ± sd over trials; hatched = NOT private)")
    paths.append(save_figure(fig, out / "fig2_kld.png"))
    for eps in sorted(set(lnmse_sum["epsilon"])):
        fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
        for ax, dataset in zip(axes.ravel(), datasets):
            sub = lnmse_sum[(lnmse_sum["dataset"] == dataset) & (lnmse_sum["epsilon"] == eps)]
            for method in dict.fromkeys(sub["method"]):
                s = sub[sub["method"] == method]
                ax.errorbar(s["range_length"], s["lnmse"], yerr=s["lnmse_sd"].fillna(0), label=PAPER_LABEL[method],
                            linestyle="--" if method in NON_PRIVATE else "-", marker="o", markersize=3, capsize=2)
            ax.set_title(DATASETS.get(dataset, dataset), fontsize=9)
            ax.set_xlabel("range size")
            ax.set_ylabel("LNMSE")
        for ax in axes.ravel()[len(datasets):]:
            ax.axis("off")
        fig.suptitle(f"Fig. 3: LNMSE vs range size, ε={eps:g} (dashed = NOT private)")
        paths.append(save_figure(fig, out / f"fig3_lnmse_eps{eps:g}.png"))
    return paths


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if np.isfinite(v) else str(v)


def _markdown(kld_sum: pd.DataFrame, lnmse_sum: pd.DataFrame, *, trials: int, command: str,
              seconds: float) -> str:
    piv = kld_sum.pivot_table(index=["dataset", "epsilon"], columns="method", values="kld_mean", sort=False)
    sd = kld_sum.pivot_table(index=["dataset", "epsilon"], columns="method", values="kld_sd", sort=False)
    methods = [m for m in METHODS if m in piv.columns]
    lines = [
        "# Reproduction of paper 001 (HPHP): results",
        "",
        f"Command: `{command}` ({trials} trials per cell, {seconds / 60:.1f} min). Continuous Laplace noise "
        "(as the paper); KLD with λ = 1e-4 (spec 6.3); LNMSE = ln of the mean squared error over all "
        "ranges of each length and all trials (spec 6.4).",
        "",
        "**Read this first.** `hphp_paper` (the paper's HPHP) and `optimal` are **NOT differentially "
        "private**: they group bins by the *true* sort order (spec section 3). They are shown only to "
        "reproduce the paper's figures. `hphp` is privpub's private HPHP.",
        "",
        "## Fig. 2: KLD (mean ± sd)",
        "",
        "| dataset | ε | " + " | ".join(PAPER_LABEL[m] for m in methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    for key, row in piv.iterrows():
        dataset, eps = cast("tuple[str, float]", key)  # the pivot's index: (dataset, epsilon)
        cells = [f"{_fmt(row[m])} ± {_fmt(sd.at[key, m])}" for m in methods]
        lines.append(f"| {DATASETS.get(dataset, dataset)} | {eps:g} | " + " | ".join(cells) + " |")
    lines += ["", "## The paper's claims against our numbers", "", claims_markdown(_claims(kld_sum, lnmse_sum))]
    # LNMSE table at the smallest and largest range for each eps
    lines += ["", "## Fig. 3: LNMSE (range size 50 / 250 / 450)", "",
              "| dataset | ε | " + " | ".join(PAPER_LABEL[m] for m in methods) + " |",
              "|---|---|" + "---|" * len(methods)]
    for key, g in lnmse_sum.groupby(["dataset", "epsilon"], sort=False):
        dataset, eps = cast("tuple[str, float]", key)
        cells = []
        for m in methods:
            s = g[g["method"] == m].set_index("range_length")["lnmse"]
            cells.append(" / ".join(_fmt(s.get(r, math.nan)) for r in (50, 250, 450)))
        lines.append(f"| {DATASETS.get(dataset, dataset)} | {eps:g} | " + " | ".join(cells) + " |")
    lines += ["", "Files: `trials.csv` (one row per run), `kld_summary.csv`, `lnmse_summary.csv`, "
              "`fig2_kld.png`, `fig3_lnmse_eps*.png`."]
    return "\n".join(lines) + "\n"


def _cells(piv: pd.DataFrame) -> str:
    """The (dataset, epsilon) cells of a KLD pivot in words."""
    datasets = list(dict.fromkeys(piv.index.get_level_values("dataset")))
    eps = sorted(set(piv.index.get_level_values("epsilon")))
    return (f"{len(piv)} cells: {len(datasets)} datasets x ε ∈ {{{', '.join(f'{e:g}' for e in eps)}}} "
            "(mean KLD over the trials of each cell)")


def _claims(kld_sum: pd.DataFrame, lnmse_sum: pd.DataFrame) -> list[Claim]:
    """The paper's claims (Figs. 2 and 3), each with the number its verdict is computed from."""
    piv = kld_sum.pivot_table(index=["dataset", "epsilon"], columns="method", values="kld_mean", sort=False)
    have = set(piv.columns)
    claims: list[Claim] = []
    cells = _cells(piv)
    if {"hphp", "ahp"} <= have:
        r = float((piv["hphp"] / piv["ahp"]).median())
        leak = float((piv["hphp_paper"] / piv["ahp"]).median()) if "hphp_paper" in have else math.nan
        claims.append(Claim.test(
            "HPHP's KLD is about 10% of AHP's (Fig. 2)", "≈ 0.1", f"private HPHP/AHP median {r:.3g}; "
            f"leaky paper HPHP/AHP {leak:.3g}", r, "<= 0.2", cells=cells + "; median of the per-cell ratios",
            note="only the non-private paper version (true sort order) reaches it" if r > 0.2 and leak <= 0.2 else ""))
    if {"hphp", "optimal"} <= have:
        r = float((piv["hphp"] / piv["optimal"]).median())
        leak = float((piv["hphp_paper"] / piv["optimal"]).median()) if "hphp_paper" in have else math.nan
        claims.append(Claim.test(
            "HPHP's KLD is close to Optimal's (Fig. 2)", "close (within 2x)",
            f"private HPHP/Optimal median {r:.3g}; leaky {leak:.3g}", r, "<= 2", cells=cells + "; median ratio",
            note="Optimal and the paper's HPHP read the true order; the private HPHP cannot" if r > 2 else ""))
    if {"hphp", "laplace"} <= have:
        beats = piv["hphp"] < piv["laplace"]
        fails = [f"{d} ε={e:g}" for (d, e), b in cast("Iterable[tuple[tuple[str, float], bool]]", beats.items()) if not b]
        claims.append(Claim.test(
            "HPHP's KLD is below DP's (Laplace) (Fig. 2)", "every setting",
            f"{int(beats.sum())} of {beats.size} cells", float(beats.mean()), ">= 0.9",
            cells=cells + ("; fails at " + ", ".join(fails) if fails else "; holds in every cell")))
    if not lnmse_sum.empty and {"hphp", "ahp"} <= set(lnmse_sum["method"]):
        eps = sorted(set(lnmse_sum["epsilon"]))

        def gap(e: float) -> tuple[float, str]:
            sub = lnmse_sum[lnmse_sum["epsilon"] == e].pivot_table(
                index=["dataset", "range_length"], columns="method", values="lnmse")
            n_ds = sub.index.get_level_values("dataset").nunique()
            n_r = sub.index.get_level_values("range_length").nunique()
            return float((sub["ahp"] - sub["hphp"]).mean()), f"{len(sub)} cells: {n_ds} datasets x {n_r} range sizes"

        lo, lo_cells = gap(eps[0])
        hi, hi_cells = gap(eps[-1])
        claims.append(Claim.test(
            f"LNMSE: AHP well above HPHP at ε = {eps[0]:g} (Fig. 3)", "AHP ≫ HPHP",
            f"mean ln-gap AHP − private HPHP {lo:.3g}", lo, "> 1",
            cells=f"{lo_cells} at ε={eps[0]:g}; mean of ln MSE(AHP) − ln MSE(HPHP)"))
        claims.append(Claim.test(
            f"LNMSE: AHP and HPHP converge at ε = {eps[-1]:g} (Fig. 3)", "about equal",
            f"|mean ln-gap| {abs(hi):.3g}", abs(hi), "< 0.5",
            cells=f"{hi_cells} at ε={eps[-1]:g}; |mean of ln MSE(AHP) − ln MSE(HPHP)|"))
    return claims


def reproduce(
    out_dir: str | Path,
    *,
    quick: bool = False,
    data_dir: str | Path | None = None,
    rng: int = 0,
    trials: int | None = None,
    datasets: Iterable[str] | None = None,
    histograms: dict[str, np.ndarray] | None = None,
    progress: bool = False,
) -> Path:
    """Run the reproduction grid and write CSV, PNG plots and ``summary.md``; returns the summary path.

    Parameters
    ----------
    out_dir : path
        Output directory (created).
    quick : bool
        3 trials per cell instead of 20 (spec 6.2).
    data_dir : path, optional
        Data directory (default ``$PRIVPUB_DATA``).
    rng : int
        Base seed of the per-trial seed sequences.
    trials : int, optional
        Override the number of trials.
    datasets : iterable of str, optional
        Subset of :data:`DATASETS`.
    histograms : dict, optional
        Use these histograms instead of loading (e.g. surrogates in tests; label them as such).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n_trials = trials if trials is not None else (3 if quick else 20)
    if histograms is None:
        names = list(datasets) if datasets is not None else list(DATASETS)
        histograms = _load(resolve_data_dir(data_dir), names)
    start = time.perf_counter()
    ledgers: dict[str, Any] = {}
    frame = evaluate(histograms, trials=n_trials, rng=rng, progress=progress, ledgers=ledgers)
    sota = state_of_the_art(histograms, frame, trials=n_trials, rng=rng)
    headline = dpbench_headline(histograms, trials=max(n_trials, DPBENCH_TRIALS), rng=rng)
    seconds = time.perf_counter() - start
    frame.to_csv(out / "trials.csv", index=False)
    kld_sum, lnmse_sum = _summaries(frame)
    kld_sum.to_csv(out / "kld_summary.csv", index=False)
    lnmse_sum.to_csv(out / "lnmse_summary.csv", index=False)
    _plots(kld_sum, lnmse_sum, out)
    command = "privpub reproduce histogram" + (" --quick" if quick else "") + (
        f" --trials {trials}" if trials is not None else "")
    summary = out / "summary.md"
    sota.to_csv(out / "state_of_the_art.csv", index=False)
    headline.to_csv(out / "dpbench_headline.csv", index=False)
    summary.write_text(_markdown(kld_sum, lnmse_sum, trials=n_trials, command=command, seconds=seconds)
                       + _state_of_the_art_md(sota) + _headline_md(headline))
    write_claims(out, _claims(kld_sum, lnmse_sum))
    write_ledgers(out, ledgers)
    log.info("histogram reproduction written to %s", out)
    return summary


#: the state of the art (issue 26): DAWA (Li et al., VLDB 2014), the strongest 1-D method of DPBench
SOTA_EPSILON = 0.1
SOTA_METHODS = ("laplace", "ahp", "hphp", "dawa")


def state_of_the_art(histograms: dict[str, np.ndarray], frame: pd.DataFrame, *, trials: int, rng: int = 0
                     ) -> pd.DataFrame:
    """HPHP, its paper's private baselines (Laplace, AHP) and DAWA on the DPBench 1-D sets at ε = 0.1.

    HPHP and the baselines are the grid's own runs (the rows of ``frame``); DAWA runs on the same
    histograms with the same number of trials and the grid's seed scheme. One row per (dataset,
    method, trial) with DPBench's prefix error (:func:`prefix_error`) and the KLD.
    """
    sets = [d for d in histograms if d.startswith("dpbench_1d/")]
    if not sets:
        return pd.DataFrame(columns=["dataset", "method", "trial", "prefix_err", "kld"])
    rows = []
    grid = frame[(frame["epsilon"] == SOTA_EPSILON) & frame["dataset"].isin(sets)
                 & frame["method"].isin(SOTA_METHODS)]
    for r in grid.itertuples():
        rows.append({"dataset": r.dataset, "method": r.method, "trial": r.trial, "prefix_err": r.prefix_err,
                     "kld": r.kld})
    pub = _publisher("dawa")
    for dataset in sets:
        h = np.asarray(histograms[dataset])
        for t in range(trials):
            release = pub.publish(h, epsilon=SOTA_EPSILON, rng=trial_seed(rng, dataset, "dawa", SOTA_EPSILON, t))
            rows.append({"dataset": dataset, "method": "dawa", "trial": t,
                         "prefix_err": prefix_error(h.astype(float), release.counts), "kld": kld(h, release.counts)})
    return pd.DataFrame(rows)


#: DPBench's own DAWA numbers (Hay et al., SIGMOD 2016, Fig. 2(a)): log10 of DAWA's mean scaled prefix
#: error at scale 1000 records, ε = 0.1, per data set (mean of 20 runs: 4 algorithm seeds x 5 samples).
#: Read from the drawing coordinates of the vector PDF the authors committed with their reproducibility
#: package (dpcomp-org/dpcomp_core@ac71460def96, reproducibility/plots/temp/figure_2a.pdf; reading
#: error below 1e-4 in log10). ``tests/histogram/test_dawa_headline.py`` derives the tolerance.
DPBENCH_DAWA_REPORTED: dict[str, float] = {
    "dpbench_1d/HEPTH": -3.047,
    "dpbench_1d/ADULTFRANK": -3.094,
    "dpbench_1d/NETTRACE": -3.106,
    "dpbench_1d/SEARCHLOGS": -3.152,
    "dpbench_1d/LC-REQ": -3.011,
    "dpbench_1d/MD-SAL": -3.061,
}
#: the scale (records) of Fig. 2(a): each trial samples this many records from the set's shape
DPBENCH_SCALE = 1000
#: at least this many trials per set (DAWA's error varies by a factor 2 run to run at this scale; 60
#: runs of the six sets take about 5 s)
DPBENCH_TRIALS = 60


def dpbench_headline(histograms: dict[str, np.ndarray], *, trials: int, rng: int = 0) -> pd.DataFrame:
    """privpub's DAWA under DPBench's protocol at the scale of its Fig. 2(a) (issue 26).

    For each set of :data:`DPBENCH_DAWA_REPORTED` present in ``histograms``: ``trials`` runs, each on
    a fresh sample of :data:`DPBENCH_SCALE` records drawn (multinomially) from the set's shape, DAWA
    at ε = 0.1, scored by :func:`prefix_error`. One row per (dataset, trial).
    """
    rows = []
    pub = _publisher("dawa")
    for dataset in (d for d in histograms if d in DPBENCH_DAWA_REPORTED):
        h = np.asarray(histograms[dataset], dtype=np.float64)
        p = h / h.sum()
        for t in range(trials):
            x = np.random.default_rng(trial_seed(rng, dataset, "dpbench_sample", SOTA_EPSILON, t)).multinomial(
                DPBENCH_SCALE, p)
            release = pub.publish(x, epsilon=SOTA_EPSILON, rng=trial_seed(rng, dataset, "dawa_dpbench", SOTA_EPSILON, t))
            rows.append({"dataset": dataset, "trial": t, "prefix_err": prefix_error(x.astype(np.float64), release.counts)})
    return pd.DataFrame(rows, columns=["dataset", "trial", "prefix_err"])


#: standard error (log10) of a DPBench point: DAWA's run-to-run coefficient of variation at scale 1000
#: is at most 0.75 on these sets, and a point is the mean of 20 runs
DPBENCH_REPORTED_SE = 0.75 / math.sqrt(20) / math.log(10)


def _headline_md(headline: pd.DataFrame) -> str:
    if headline.empty:
        return ""
    g = headline.groupby("dataset", sort=False)["prefix_err"]
    mean, std, size = g.mean(), g.std(ddof=1).to_dict(), g.size().to_dict()
    lines = ["", f"### DAWA against DPBench's own numbers (Fig. 2(a): scale {DPBENCH_SCALE}, ε = {SOTA_EPSILON:g})", "",
             f"Each trial samples {DPBENCH_SCALE} records from the set's shape (DPBench's protocol); mean prefix error "
             f"over {min(size.values())} trials. DPBench's value is the mean of its 20 runs, read from the authors' vector "
             "figure (dpcomp_core@ac71460). Agreement: |log10 ratio| within 3 standard errors of the difference "
             "(privpub's from its runs, DPBench's 0.073). privpub's stage 1 adds Laplace noise of scale Δ/ε1 with "
             "Δ ≈ 2 log2 n, the sensitivity it can prove, where the paper uses 2/ε1 (not ε1-DP: see "
             "`privpub.histogram.DAWA`); at 1000 records that noise swamps the bucket deviations.", "",
             "| dataset | DPBench's DAWA | privpub's DAWA | ratio | log10 ratio ± tolerance |", "|---|---|---|---|---|"]
    agree = 0
    for key, value in mean.items():
        dataset = str(key)
        reported = 10.0 ** DPBENCH_DAWA_REPORTED[dataset]
        n = int(size[key])
        se = float(std[key]) / float(value) / math.sqrt(n) / math.log(10) if n > 1 else math.inf
        tol = 3.0 * math.hypot(se, DPBENCH_REPORTED_SE)
        diff = math.log10(float(value)) - DPBENCH_DAWA_REPORTED[dataset]
        agree += abs(diff) <= tol
        lines.append(f"| {DATASETS.get(dataset, dataset)} | {reported:.3g} | {float(value):.3g} | "
                     f"{float(value) / reported:.2f} | {diff:+.2f} ± {tol:.2f} |")
    lines += ["", f"**Verdict:** privpub's DAWA reproduces DPBench's DAWA within the tolerance on {agree} of "
                  f"{len(mean)} sets at scale {DPBENCH_SCALE}.", ""]
    return "\n".join(lines)


def _state_of_the_art_md(sota: pd.DataFrame) -> str:
    if sota.empty:
        return ""
    mean = sota.pivot_table(index="dataset", columns="method", values="prefix_err", aggfunc="mean", sort=False)
    kl = sota.pivot_table(index="dataset", columns="method", values="kld", aggfunc="mean", sort=False)
    cols = [m for m in SOTA_METHODS if m in mean.columns]
    trials = int(sota.groupby(["dataset", "method"]).size().min())
    lines = ["", f"## State of the art: DAWA (Li et al., VLDB 2014) on the DPBench 1-D sets, ε = {SOTA_EPSILON:g}", "",
             "DAWA is the strongest 1-D method of DPBench (Hay et al., SIGMOD 2016). Error is DPBench's scaled average "
             "per-query error on the prefix workload, ||Wx − Wx̂||₂ / (|W| · scale) with scale the histogram's total "
             f"(mean over {trials} trials; lower is better), and the KLD of Fig. 2. HPHP, Laplace and AHP are the grid's "
             "own runs (continuous Laplace noise); privpub's DAWA uses aligned dyadic candidate buckets, whose stage-1 "
             "sensitivity is proved (see `privpub.histogram.DAWA`).", "",
             "| dataset | " + " | ".join(f"{PAPER_LABEL[m]} prefix error" for m in cols) + " | "
             + " | ".join(f"{PAPER_LABEL[m]} KLD" for m in cols) + " |",
             "|---|" + "---|" * (2 * len(cols))]
    for key, r in mean.iterrows():
        dataset = str(key)
        lines.append(f"| {DATASETS.get(dataset, dataset)} | " + " | ".join(f"{float(r[m]):.3g}" for m in cols) + " | "
                     + " | ".join(f"{float(kl[m].to_dict()[key]):.3g}" for m in cols) + " |")
    if {"hphp", "dawa"} <= set(cols):
        n = len(mean)
        k = int((mean["hphp"] < mean["dawa"]).sum())
        k_kl = int((kl["hphp"] < kl["dawa"]).sum())
        lap = int((mean["dawa"] < mean["laplace"]).sum()) if "laplace" in cols else 0
        lines += ["", f"**Verdict:** HPHP's error is below DAWA's on {k} of {n} DPBench sets at epsilon "
                      f"{SOTA_EPSILON:g} (prefix error; {k_kl} of {n} by KLD). DAWA's prefix error is below "
                      f"Laplace's on {lap} of {n}.", ""]
    return "\n".join(lines)


def demo(rng: int = 0) -> list[DemoRow]:
    """KLD of each private method on a built-in nettrace-like surrogate (4096 bins, ε = 0.1)."""
    h = synthetic_like("nettrace", n=4096, seed=int(rng))
    rows = []
    for method in ("laplace", "ahp", "hphp"):
        pub = {"laplace": LaplaceHistogram(), "ahp": AHP(), "hphp": HPHP()}[method]
        releases = [pub.publish(h, epsilon=0.1, rng=trial_seed(rng, "demo", method, 0.1, t)) for t in range(3)]
        vals = [kld(h, r.counts) for r in releases]
        rows.append(DemoRow("histogram", method, 0.1, "KLD", float(np.mean(vals)),
                            "nettrace-like surrogate, 4096 bins, mean of 3 runs", ledger=releases[0].ledger))
    return rows
