"""Experiments of paper 000 (LDP synthetic data via a Bayesian network): demo and reproduction.

``reproduce`` runs Figs. 5-7 (I_sum and edge accuracy vs f for each k), Fig. 6 (random vs entropy
start), Fig. 9 (AVD and KL of 2..5-way marginals at k = 2) and Fig. 10 (SVM accuracy) on NLTCS
and Adult, with the independent and non-private baselines and an estimator comparison (EM vs
linear vs hybrid). TPC-E is not public and is skipped.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privpub.core import CategoricalAttribute, RNGLike, Schema, as_generator
from privpub.datasets import ADULT_COLUMNS
from privpub.errors import DataNotFoundError, DomainError, PrivacyWarning
from privpub.experiments._common import (
    Claim,
    DemoRow,
    claims_markdown,
    resolve_data_dir,
    save_figure,
    write_claims,
    write_ledgers,
)
from privpub.ldp import MAX_LOCAL_EPSILON
from privpub.ldp_synth import (
    CALM,
    EmpiricalJoints,
    LDPBayesSynthesizer,
    ReportStore,
    build_network,
    conditional_tables,
    edge_accuracy,
    edges,
    epsilon_from_f,
    i_sum,
    marginal_errors,
    perturb_codes,
    report_ledger,
    sample_independent,
    sample_synthetic,
    svm_accuracy,
)

__all__ = ["DEMO_D", "DEMO_F", "TabularCodes", "demo", "demo_about", "load_adult_codes", "load_nltcs_codes", "reproduce"]

logger = logging.getLogger(__name__)


# -- datasets (spec 3.1): fixed, data-independent binning -------------------------------------
# NLTCS is used as is (16 binary attributes). Adult is read from the raw UCI text files and binned
# into 15 attributes with the public groupings of the spec; an unlisted category raises.



@dataclass(frozen=True)
class TabularCodes:
    """An integer-coded table with its public schema."""

    name: str
    codes: NDArray[np.int64]
    schema: Schema
    svm_labels: tuple[int, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.schema.sizes

    def frame(self) -> pd.DataFrame:
        return self.schema.decode(self.codes)


def _need(path: Path, source: str) -> Path:
    if not path.exists():
        raise DataNotFoundError(
            f"{path} not found; set PRIVPUB_DATA (or --data-dir) to the datasets directory. Source: {source}"
        )
    return path


def _data_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    d = resolve_data_dir(data_dir)
    if d is None:
        raise DataNotFoundError("no data directory: set PRIVPUB_DATA or pass --data-dir")
    return d


def load_nltcs_codes(data_dir: str | os.PathLike[str] | None = None) -> TabularCodes:
    """NLTCS: 21,574 x 16 binary (PrivMRF's ``data/nltcs.csv``)."""
    path = _need(_data_dir(data_dir) / "nltcs" / "nltcs.csv", "github.com/caicre/PrivMRF data/nltcs.csv")
    codes = pd.read_csv(path).to_numpy(dtype=np.int64)
    if codes.min() < 0 or codes.max() > 1:
        raise DomainError(f"{path} must hold 0/1 values")
    schema = Schema([CategoricalAttribute(f"a{j}", ["0", "1"]) for j in range(codes.shape[1])])
    return TabularCodes("nltcs", codes, schema, tuple(range(codes.shape[1])))


def load_adult_codes(data_dir: str | os.PathLike[str] | None = None) -> TabularCodes:
    """Adult (45,222 rows after dropping '?') binned into 15 attributes as in spec 3.1.

    The binning is the public encoding of :func:`privpub.datasets.table_format` ``("adult")``
    (``synth_schema``), the one ``privpub synth --dataset-schema adult`` uses.
    """
    from privpub.datasets import TableDataset, load, table_format

    fmt = table_format("adult")
    ds = load("adult", data_dir=_data_dir(data_dir))
    assert isinstance(ds, TableDataset)  # adult is a table
    frame = ds.frame
    codes = fmt.synth_schema.encode(fmt.to_synth(frame))
    return TabularCodes("adult", codes, fmt.synth_schema, (ADULT_COLUMNS.index("sex"), ADULT_COLUMNS.index("income")))


# -- demo ---------------------------------------------------------------------------------------
#: the demo's number of attributes and flip probability
DEMO_D, DEMO_F = 6, 0.2


def demo_about() -> str:
    """Markdown for the demo report: why the synthesizer's epsilon is what it is (paper 000's f to epsilon)."""
    d, f = DEMO_D, DEMO_F
    per_attr = epsilon_from_f(f, 1)
    return (
        f"**Why epsilon = {epsilon_from_f(f, d):.4g}.** Paper 000 (LoPub) sets the flip probability *f* of its "
        "RAPPOR-style bits, not epsilon: each user sends every attribute as a one-hot block whose bits are each "
        "replaced by a coin flip with probability *f* (kept with probability 1 - *f*/2). Two values of one "
        f"attribute differ in 2 bits, so one attribute costs 2 ln((2 - *f*)/*f*) = 2 ln({(2 - f) / f:g}) = "
        f"{per_attr:.4g}, and a whole record of *d* attributes costs epsilon = 2 *d* ln((2 - *f*)/*f*) per user "
        f"(the paper's Theorem 1; tight). Here *d* = {d} and *f* = {f:g}: epsilon = {2 * d} ln({(2 - f) / f:g}) = "
        f"{epsilon_from_f(f, d):.4g}. The ledger lists the {d} attributes as {d} sequential charges of "
        f"{per_attr:.4g} on the same users. The paper never states epsilon; its 'moderate' f = 0.5 is about "
        "33-53 per record on its datasets. Pass `epsilon=` instead of `flip_prob=` to choose the budget directly."
    )


def demo(rng: RNGLike = 0) -> list[DemoRow]:
    """A 6-attribute Markov chain (N = 20,000): the k = 1 network at f = 0.2 and its 2-way AVD."""
    gen = as_generator(rng)
    n, d = 20_000, DEMO_D
    x = np.zeros((n, d), dtype=np.int64)
    x[:, 0] = gen.integers(3, size=n)
    for j in range(1, d):
        x[:, j] = np.where(gen.random(n) < 0.85, x[:, j - 1], gen.integers(3, size=n))
    schema = Schema([CategoricalAttribute(f"x{j}", ["a", "b", "c"]) for j in range(d)])
    rows = []
    for method in ("em", "linear"):
        release = LDPBayesSynthesizer(degree=1, method=method).publish(
            schema.decode(x), schema=schema, flip_prob=DEMO_F, rng=gen
        )
        chain = frozenset(frozenset((j, j + 1)) for j in range(d - 1))
        acc = len(edges(release.structure) & chain) / len(chain)
        syn = release.sample_codes(rng=gen)
        avd2 = marginal_errors(x, syn, schema.sizes, 2)[0]
        eps = release.epsilon
        rows.append(DemoRow("ldp_synth", f"LDPBayes k=1 ({method})", eps, "chain edges recovered", acc,
                            "f=0.2, N=20000, d=6", ledger=release.ledger))
        rows.append(DemoRow("ldp_synth", f"LDPBayes k=1 ({method})", eps, "AVD 2-way marginals", avd2,
                            "f=0.2, N=20000, d=6"))
    return rows


# -- reproduction -------------------------------------------------------------------------------
def _seed(base: int, *parts: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([base, *parts]))


def _run_dataset(
    data: TabularCodes,
    *,
    ks: Sequence[int],
    fs: Sequence[float],
    reps: int,
    base: int,
    svm_labels: Sequence[int],
    svm_rows: int,
    max_subsets: int | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    codes, sizes = data.codes, data.sizes
    n, d = codes.shape
    exact = EmpiricalJoints(codes, sizes)
    refs = {k: build_network(exact, k) for k in ks}
    rows: list[dict[str, Any]] = []
    est_rows: list[dict[str, Any]] = []

    def marg(x: np.ndarray, row: dict[str, Any]) -> None:
        for a in range(2, 6):
            avd, kl = marginal_errors(codes, x, sizes, a, max_subsets=max_subsets if a > 2 else None, rng=a)
            row[f"avd{a}"], row[f"kl{a}"] = avd, kl

    svm_real = svm_accuracy(codes, codes, svm_labels, max_train_rows=svm_rows)[0]
    table = data.frame()  # CALM (the state of the art, issue 26) reads the decoded table
    # non-private reference (same construction on exact joints), k = 2
    if 2 in ks:
        npx = sample_synthetic(refs[2], conditional_tables(exact, refs[2]), sizes, n, _seed(base, 99))
        row = {"dataset": data.name, "method": "non-private BN", "f": 0.0, "epsilon": np.inf, "k": 2, "rep": 0,
               "isum_syn": i_sum(EmpiricalJoints(npx, sizes), refs[2]), "isum_true": i_sum(exact, refs[2]),
               "edge_acc": 1.0, "svm_real": svm_real,
               "svm_syn": svm_accuracy(codes, npx, svm_labels, max_train_rows=svm_rows, fit_real=False)[1]}
        marg(npx, row)
        rows.append(row)
    for fi, f in enumerate(fs):
        eps = epsilon_from_f(f, d)
        for rep in range(reps):
            t0 = time.perf_counter()
            reports = perturb_codes(codes, sizes, flip_prob=f, rng=_seed(base, fi, rep, 0))
            store = ReportStore(reports)
            for k in ks:
                t1 = time.perf_counter()
                net = build_network(store, k)
                t_net = time.perf_counter() - t1
                syn = sample_synthetic(net, conditional_tables(store, net), sizes, n, _seed(base, fi, rep, 10 + k))
                row = {"dataset": data.name, "method": "LDP BN (entropy, EM)", "f": f, "epsilon": eps, "k": k,
                       "rep": rep, "isum_syn": i_sum(EmpiricalJoints(syn, sizes), net), "isum_est": i_sum(store, net),
                       "isum_true": i_sum(exact, net), "edge_acc": edge_accuracy(refs[k], net),
                       "time_network_s": t_net}
                if k == 2:
                    marg(syn, row)
                    if rep == 0:
                        row["svm_real"] = svm_real
                        row["svm_syn"] = svm_accuracy(codes, syn, svm_labels, max_train_rows=svm_rows,
                                                      fit_real=False)[1]
                rows.append(row)
            if 2 in ks:
                # Fig. 6: Alg. 3 (random start, exhaustive) vs Alg. 4; reference with the same first node
                seed_r = int(_seed(base, fi, rep, 50).integers(2**31))
                net_r = build_network(store, 2, start="random", search="exhaustive", rng=seed_r)
                ref_r = build_network(exact, 2, start="random", search="exhaustive", rng=seed_r)
                syn_r = sample_synthetic(net_r, conditional_tables(store, net_r), sizes, n, _seed(base, fi, rep, 51))
                rows.append({"dataset": data.name, "method": "LDP BN (random, EM)", "f": f, "epsilon": eps, "k": 2,
                             "rep": rep, "isum_syn": i_sum(EmpiricalJoints(syn_r, sizes), net_r),
                             "isum_est": i_sum(store, net_r), "isum_true": i_sum(exact, net_r),
                             "edge_acc": edge_accuracy(ref_r, net_r)})
                # independent baseline (k = 0)
                ind = sample_independent(store, n, _seed(base, fi, rep, 60))
                row = {"dataset": data.name, "method": "independent", "f": f, "epsilon": eps, "k": 0, "rep": rep}
                marg(ind, row)
                rows.append(row)
                # state of the art (issue 26): CALM, 2-way marginals, at the same per-user epsilon; its
                # synthetic rows come from a spanning tree (a network of in-degree 1)
                # (at most MAX_LOCAL_EPSILON, which local randomisers accept: less budget than the seed's, never more)
                t1 = time.perf_counter()
                eps_c = min(eps, MAX_LOCAL_EPSILON)
                with warnings.catch_warnings():  # the paper's epsilons are far above 30; the table states them
                    warnings.simplefilter("ignore", PrivacyWarning)
                    calm = CALM().publish(table, schema=data.schema, epsilon=eps_c, rng=_seed(base, fi, rep, 80))
                syn_c = data.schema.encode(calm.sample(n, rng=_seed(base, fi, rep, 81)))
                row = {"dataset": data.name, "method": "CALM (2-way)", "f": f, "epsilon": eps, "epsilon_calm": eps_c,
                       "k": 1, "rep": rep, "time_network_s": time.perf_counter() - t1}
                marg(syn_c, row)
                rows.append(row)
                # estimator comparison at k = 2 (same reports, fresh caches, first repetition only)
                for meth, refine in (("em", None), ("linear", None), ("hybrid", 20)):
                    if rep > 0:
                        break
                    t1 = time.perf_counter()
                    st = ReportStore(reports, method=meth, refine_iter=refine)
                    net_m = build_network(st, 2)
                    dt = time.perf_counter() - t1
                    syn_m = sample_synthetic(net_m, conditional_tables(st, net_m), sizes, n, _seed(base, fi, rep, 70))
                    est_rows.append({"dataset": data.name, "estimator": meth, "f": f, "epsilon": eps, "rep": rep,
                                     "time_s": dt, "edge_acc": edge_accuracy(refs[2], net_m),
                                     "avd2": marginal_errors(codes, syn_m, sizes, 2)[0],
                                     "avd3": marginal_errors(codes, syn_m, sizes, 3, max_subsets=max_subsets,
                                                             rng=3)[0]})
            logger.info("%s f=%.1f rep=%d done in %.1f s", data.name, f, rep, time.perf_counter() - t0)
    return rows, est_rows


def _plot(frame: pd.DataFrame, est: pd.DataFrame, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    for ds, g in frame.groupby("dataset"):
        main = g[g["method"] == "LDP BN (entropy, EM)"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for k, gk in main.groupby("k"):
            m = gk.groupby("f")
            axes[0].errorbar(m["isum_syn"].mean().index, m["isum_syn"].mean(), m["isum_syn"].std().fillna(0),
                             label=f"k={k}", marker="o", capsize=2)
            axes[1].errorbar(m["edge_acc"].mean().index, m["edge_acc"].mean(), m["edge_acc"].std().fillna(0),
                             label=f"k={k}", marker="o", capsize=2)
        axes[0].set(xlabel="flip probability f", ylabel="I_sum of X* (nats)", title=f"{ds}: Fig. 5 I_sum")
        axes[1].set(xlabel="flip probability f", ylabel="edge accuracy", title=f"{ds}: Fig. 7 edge accuracy")
        name = f"fig5_7_{ds}.png"
        save_figure(fig, out / name, dpi=100)
        files.append(name)
        k2 = g[(g["k"] == 2) & g["method"].str.startswith("LDP")]
        if not k2.empty:
            fig, ax = plt.subplots(figsize=(5, 4))
            for meth, gm in k2.groupby("method"):
                by_flip = gm.groupby("f")["isum_syn"]
                ax.errorbar(by_flip.mean().index, by_flip.mean(), by_flip.std().fillna(0), label=meth, marker="o",
                            capsize=2)
            ax.set(xlabel="flip probability f", ylabel="I_sum of X* (nats)", title=f"{ds}: Fig. 6 start rule, k=2")
            name = f"fig6_{ds}.png"
            save_figure(fig, out / name, dpi=100)
            files.append(name)
            fig, axes = plt.subplots(1, 3, figsize=(14, 4))
            main2 = k2[k2["method"] == "LDP BN (entropy, EM)"]
            for a in range(2, 6):
                m = main2.groupby("f")
                axes[0].plot(m[f"avd{a}"].mean().index, m[f"avd{a}"].mean(), marker="o", label=f"a={a}")
                axes[1].plot(m[f"kl{a}"].mean().index, m[f"kl{a}"].mean(), marker="o", label=f"a={a}")
            ind = g[g["method"] == "independent"].groupby("f")
            if len(ind):
                axes[0].plot(ind["avd2"].mean().index, ind["avd2"].mean(), "k--", label="independent a=2")
            axes[0].set(xlabel="f", ylabel="AVD", title=f"{ds}: Fig. 9 AVD (k=2)")
            axes[1].set(xlabel="f", ylabel="KL", title=f"{ds}: Fig. 9 KL (k=2)")
            svm = main2.dropna(subset=["svm_syn"]).groupby("f")["svm_syn"].mean()
            axes[2].plot(svm.index, svm.values, marker="o", label="trained on X*")
            real = main2["svm_real"].dropna()
            if len(real):
                axes[2].axhline(float(real.iloc[0]), color="k", ls="--", label="trained on real data")
            axes[2].set(xlabel="f", ylabel="accuracy", title=f"{ds}: Fig. 10 SVM")
            name = f"fig9_10_{ds}.png"
            save_figure(fig, out / name, dpi=100)
            files.append(name)
    return files


def _fmt(x: Any) -> str:
    return "" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.4g}"


def _state_of_the_art(g: pd.DataFrame, seed: pd.DataFrame) -> list[str]:
    """The "state of the art" section: CALM (CCS 2018) against the seed method (LDP BN, k = 2) on the
    same data at the same per-user epsilon, and a plain verdict counted over the cells of the run."""
    calm = g[g["method"] == "CALM (2-way)"]
    if calm.empty:
        return []
    cm = calm.groupby(["f", "epsilon", "epsilon_calm"])[[f"avd{a}" for a in range(2, 6)]].mean()
    cm = cm.reset_index().set_index("f")
    sd = seed.set_index("f")
    lines = ["", "### State of the art: CALM (Zhang et al., CCS 2018) at the same per-user epsilon", "",
             "CALM sends each user's 2-way marginal of one attribute pair (GRR or OLH at the whole epsilon; "
             "users split at random over the pairs), then consistency, Norm-Sub and tree sampling "
             "(`privpub.ldp_synth.CALM`). The seed method is LDP BN at k = 2; AVD of the synthetic table. CALM "
             f"runs at min(epsilon, {MAX_LOCAL_EPSILON:g}) (the largest local epsilon privpub accepts): never more "
             "budget than the seed method. CALM's own paper could not be checked number for number (its "
             "figures and code are not available to the project); `tests/ldp_synth/test_calm_headline.py` pins "
             "privpub's 3-way error on NLTCS and Adult at epsilon 1 and 2, tabulated in `docs/ldp_synth.md`.", "",
             "| f | epsilon (LDP BN) | epsilon (CALM) | AVD2 LDP BN | AVD2 CALM | AVD3 LDP BN | AVD3 CALM | AVD5 LDP BN "
             "| AVD5 CALM |", "|---|---|---|---|---|---|---|---|---|"]
    cells = [(f, a) for f in cm.index if f in sd.index for a in range(2, 6)]
    for f in cm.index:
        if f not in sd.index:
            continue
        lines.append(f"| {f:.1f} | {cm.loc[f, 'epsilon']:.4g} | {cm.loc[f, 'epsilon_calm']:.4g} | " + " | ".join(
            f"{sd.loc[f, f'avd{a}']:.4f} | {cm.loc[f, f'avd{a}']:.4f}" for a in (2, 3, 5)) + " |")
    wins = sum(1 for f, a in cells if round(sd.loc[f, f"avd{a}"], 4) < round(cm.loc[f, f"avd{a}"], 4))
    ties = sum(1 for f, a in cells if round(sd.loc[f, f"avd{a}"], 4) == round(cm.loc[f, f"avd{a}"], 4))
    lines += ["", f"**Verdict:** the seed method's (LDP BN, k = 2) AVD is below CALM's in {wins} of {len(cells)} "
                  f"cells (a = 2..5 at each f of the run), ties in {ties} and is above it in "
                  f"{len(cells) - wins - ties}."]
    return lines


#: the main method and the random-start ablation (Fig. 6)
_ENT, _RND = "LDP BN (entropy, EM)", "LDP BN (random, EM)"


def _summary(frame: pd.DataFrame, est: pd.DataFrame, files: list[str], meta: dict[str, Any]
             ) -> tuple[str, list[Claim]]:
    """``summary.md``: per dataset the tables of Figs. 5-10 and the estimators, then the paper's claims."""
    lines = ["# ldp_synth reproduction (paper 000: LDP synthetic data via a Bayesian network)", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["", "epsilon is the per-user (whole record) LDP level 2 d ln((2 - f)/f).", ""]
    claims: list[Claim] = []
    for ds, g in frame.groupby("dataset"):
        main = g[g["method"] == _ENT]
        npbn = g[g["method"] == "non-private BN"]
        lines += [f"## {ds}", "", *_fig5_7_table(main, npbn)]
        k2 = g[(g["k"] == 2) & g["method"].str.startswith("LDP")]
        if not k2.empty:
            main2 = k2[k2["method"] == _ENT]
            for section in (_fig6(ds, k2), _fig9(ds, g, main2, npbn), _fig10(ds, main2)):
                lines += section[0]
                claims += section[1]
        claims += [_edge_claim(ds, main), _isum_claim(ds, main)]
        lines += _estimators_table(est[est["dataset"] == ds])
        lines.append("")
    claims.append(Claim("TPC-E panels of Figs. 5-10", "panels on TPC-E (40,000 x 24)", "", "not applicable",
                        "TPC-E (PrivBayes's 40,000 x 24 extract of TPC-E EGen output) is not public, so no panel on "
                        "it can be run"))
    lines += ["## The paper's qualitative claims", "", claims_markdown(claims), ""]
    lines += ["## Files", ""] + [f"- `{name}`" for name in ["results.csv", "estimators.csv", *files]] + [""]
    lines += ["TPC-E (40,000 x 24) is not public (PrivBayes's extract of TPC-E EGen output) and is skipped."]
    return "\n".join(lines) + "\n", claims


def _fig5_7_table(main: pd.DataFrame, npbn: pd.DataFrame) -> list[str]:
    """Figs. 5 and 7: I_sum and edge accuracy of the main method per (f, k), and the non-private BN."""
    lines = ["### Figs. 5 and 7: I_sum of X* and edge accuracy (mean over repetitions)", ""]
    piv = main.groupby(["f", "epsilon", "k"])[["isum_syn", "isum_true", "edge_acc"]].mean().reset_index()
    lines += ["| f | epsilon | k | I_sum (X*) | I_sum (true data, learned structure) | edge accuracy |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r.f:.1f} | {r.epsilon:.4g} | {r.k} | {r.isum_syn:.4f} | {r.isum_true:.4f} | {r.edge_acc:.3f} |"
              for r in piv.itertuples()]
    if len(npbn):
        lines += ["", f"Non-private BN (k=2): I_sum(X*) = {npbn['isum_syn'].iloc[0]:.4f}, "
                  f"I_sum(true) = {npbn['isum_true'].iloc[0]:.4f}."]
    return lines


def _fig6(ds: Any, k2: pd.DataFrame) -> tuple[list[str], list[Claim]]:
    """Fig. 6: random start (Alg. 3) against entropy start (Alg. 4) at k = 2, and its claim."""
    lines = ["", "### Fig. 6: random start (Alg. 3) vs entropy start (Alg. 4), k = 2", "",
             "| f | I_sum X* entropy | I_sum X* random | I_sum true entropy | I_sum true random | "
             "edge acc entropy | edge acc random |", "|---|---|---|---|---|---|---|"]
    p6 = k2.groupby(["f", "method"])[["isum_syn", "isum_true", "edge_acc"]].mean().unstack("method")
    for f, r in p6.iterrows():
        lines.append(f"| {f:.1f} | {r[('isum_syn', _ENT)]:.4f} | {r[('isum_syn', _RND)]:.4f} | "
                     f"{r[('isum_true', _ENT)]:.4f} | {r[('isum_true', _RND)]:.4f} | "
                     f"{r[('edge_acc', _ENT)]:.3f} | {r[('edge_acc', _RND)]:.3f} |")
    # compared as shown (4 decimals): every (metric, f) cell counts once
    won: list[str] = []
    lost: list[str] = []
    for metric, label in (("isum_syn", "I_sum(X*)"), ("isum_true", "I_sum(true)")):
        for f, r in p6.iterrows():
            (won if round(r[(metric, _ENT)], 4) >= round(r[(metric, _RND)], 4) else lost).append(f"{label} f={f:.1f}")
    n6 = len(won) + len(lost)
    claim = Claim.test(
        f"{ds}: entropy start (Alg. 4) >= random start (Alg. 3) in I_sum, k=2 (Fig. 6)", "almost everywhere",
        f"{len(won)} of {n6} cells", len(won) / n6, ">= 0.8",
        cells=f"{n6} cells: I_sum(X*) and I_sum(true data, learned structure) at f ∈ "
              f"{{{', '.join(f'{f:.1f}' for f in p6.index)}}}"
              + (f"; fails at {', '.join(lost)}" if lost else "; holds in every cell"),
        note="I_sum(true) = raw-data mutual information at the learned structure")
    return lines, [claim]


def _fig9(ds: Any, g: pd.DataFrame, main2: pd.DataFrame, npbn: pd.DataFrame) -> tuple[list[str], list[Claim]]:
    """Fig. 9: AVD and KL of a-way marginals at k = 2, and its two claims (AVD grows with f, and with a)."""
    lines = ["", "### Fig. 9: AVD and KL of a-way marginals, k = 2 (mean over repetitions)", "",
             "| f | epsilon | AVD2 | AVD3 | AVD4 | AVD5 | KL2 | KL3 | KL4 | KL5 | AVD2 independent |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    m9 = main2.groupby(["f", "epsilon"])[[f"avd{a}" for a in range(2, 6)] + [f"kl{a}" for a in range(2, 6)]] \
        .mean().reset_index()
    ind = g[g["method"] == "independent"].groupby("f")["avd2"].mean()
    for r in m9.itertuples():
        vals = " | ".join(f"{getattr(r, f'avd{a}'):.4f}" for a in range(2, 6))
        kls = " | ".join(f"{getattr(r, f'kl{a}'):.4f}" for a in range(2, 6))
        lines.append(f"| {r.f:.1f} | {r.epsilon:.4g} | {vals} | {kls} | {_fmt(ind.get(r.f))} |")
    if len(npbn):
        lines += ["", "Non-private BN (k=2): " + ", ".join(
            f"AVD{a} = {npbn[f'avd{a}'].iloc[0]:.4f}" for a in range(2, 6))]
    lines += _state_of_the_art(g, m9)
    f_lo, f_hi = m9["f"].iloc[0], m9["f"].iloc[-1]
    up_f = [a for a in range(2, 6) if round(m9[f"avd{a}"].iloc[-1], 4) > round(m9[f"avd{a}"].iloc[0], 4)]
    grows_with_f = Claim.test(
        f"{ds}: AVD of a-way marginals grows with f, k=2 (Fig. 9)", "yes",
        f"AVD2 {m9['avd2'].iloc[0]:.4f} -> {m9['avd2'].iloc[-1]:.4f}; grows for {len(up_f)} of 4 a",
        len(up_f) / 4, ">= 1",
        cells=f"a ∈ {{2, 3, 4, 5}}: AVD at f={f_hi:.1f} > AVD at f={f_lo:.1f}"
              + (f"; fails for a ∈ {{{', '.join(str(a) for a in range(2, 6) if a not in up_f)}}}"
                 if len(up_f) < 4 else ""))
    by_f = m9.set_index("f")
    steps = [(f, a) for f in by_f.index for a in range(2, 5)]
    down = [f"f={f:.1f} a={a}->{a + 1}" for f, a in steps
            if not round(by_f.loc[f, f"avd{a + 1}"], 4) > round(by_f.loc[f, f"avd{a}"], 4)]
    grows_with_a = Claim.test(
        f"{ds}: AVD of a-way marginals grows with a, k=2 (Fig. 9)", "yes",
        f"{len(steps) - len(down)} of {len(steps)} steps a -> a+1", (len(steps) - len(down)) / len(steps),
        ">= 1", cells=f"{len(steps)} steps: a = 2->3->4->5 at each f ∈ "
                      f"{{{', '.join(f'{f:.1f}' for f in by_f.index)}}}"
                      + (f"; fails at {', '.join(down)}" if down else ""))
    return lines, [grows_with_f, grows_with_a]


def _fig10(ds: Any, main2: pd.DataFrame) -> tuple[list[str], list[Claim]]:
    """Fig. 10: SVM accuracy trained on X* against real data at k = 2, and its claim (none without SVM runs)."""
    svm = main2.dropna(subset=["svm_syn"]).groupby("f")[["svm_real", "svm_syn"]].mean()
    if not len(svm):
        return [], []
    lines = ["", "### Fig. 10: SVM accuracy (k = 2; real-data training as the reference)", "",
             "| f | trained on real | trained on X* |", "|---|---|---|"]
    lines += [f"| {f:.1f} | {r.svm_real:.4f} | {r.svm_syn:.4f} |" for f, r in svm.iterrows()]
    low = svm[svm.index < 0.5]
    gap = round(float((low["svm_real"] - low["svm_syn"]).max()), 3) if len(low) else None
    claim = Claim.test(
        f"{ds}: SVM accuracy with X* close to real-data training for f < 0.5 (Fig. 10)", "close",
        f"largest gap {gap:.3f}" if gap is not None else "", gap, "< 0.05",
        cells=f"f ∈ {{{', '.join(f'{f:.1f}' for f in low.index)}}} (the f < 0.5 of the run); gap = "
              "accuracy trained on real data − trained on X*, largest over f",
        untestable="the run has no f below 0.5")
    return lines, [claim]


def _edge_claim(ds: Any, main: pd.DataFrame) -> Claim:
    """Fig. 7: edge accuracy falls as f grows, for every k."""
    edge = main.groupby(["k", "f"])["edge_acc"].mean()
    ks = sorted(main["k"].unique())
    falls = [k for k in ks if round(edge[k].iloc[-1], 2) <= round(edge[k].iloc[0], 2)]
    f_all = sorted(main["f"].unique())
    return Claim.test(
        f"{ds}: edge accuracy falls as f grows (Fig. 7)", "yes",
        "; ".join(f"k={k}: {edge[k].iloc[0]:.2f} -> {edge[k].iloc[-1]:.2f}" for k in ks),
        len(falls) / len(ks), ">= 1",
        cells=f"k ∈ {{{', '.join(map(str, ks))}}}: edge accuracy at f={f_all[-1]:.1f} <= at f={f_all[0]:.1f}")


def _isum_claim(ds: Any, main: pd.DataFrame) -> Claim:
    """Fig. 5: I_sum of X* grows with k at the smallest f."""
    isum = main.groupby(["f", "k"])["isum_syn"].mean().unstack("k")
    first = isum.iloc[0].round(3)
    step = float(first.diff().dropna().min()) if len(first) > 1 else None
    return Claim.test(
        f"{ds}: I_sum grows with k at small f (Fig. 5)", "yes",
        ", ".join(f"k={k}: {v:.3f}" for k, v in first.items()), step, ">= 0",
        cells=f"k ∈ {{{', '.join(map(str, first.index))}}} at f={isum.index[0]:.1f}; smallest increase of "
              "I_sum(X*) from one k to the next",
        untestable="the run has a single k")


def _estimators_table(e: pd.DataFrame) -> list[str]:
    """The joint estimators compared at k = 2 on the same reports (none when the run has no comparison)."""
    if not len(e):
        return []
    lines = ["", "### Estimators at k = 2 (network build time incl. all joint estimates; same reports)", "",
             "| f | estimator | time (s) | edge accuracy | AVD2 | AVD3 |", "|---|---|---|---|---|---|"]
    me = e.groupby(["f", "estimator"])[["time_s", "edge_acc", "avd2", "avd3"]].mean()
    lines += [f"| {r.f:.1f} | {r.estimator} | {r.time_s:.2f} | {r.edge_acc:.3f} | {r.avd2:.4f} | {r.avd3:.4f} |"
              for r in me.reset_index().itertuples()]
    return lines


def reproduce(
    out_dir: str | os.PathLike[str],
    *,
    quick: bool = False,
    data_dir: str | os.PathLike[str] | None = None,
    rng: int = 0,
    repetitions: int | None = None,
    datasets: Sequence[str] = ("nltcs", "adult"),
) -> Path:
    """Run the reproduction and write ``results.csv``, ``estimators.csv``, PNG plots and ``summary.md``.

    ``repetitions`` overrides R and ``datasets`` restricts the run (both default to the paper's setup).
    Quick mode: f in {0.1, 0.5, 0.9}, one repetition, k in {1, 2} on both datasets, 2,000 SVM training
    rows and 200 sampled subsets for a >= 3. Full mode: f = 0.1..0.9, R = 5, k = 1..4 (NLTCS) and
    1..2 (Adult), 3,000 SVM training rows (the unrestricted SVC takes ~45 s per fit on Adult).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fs = [0.1, 0.5, 0.9] if quick else [round(0.1 * i, 1) for i in range(1, 10)]
    reps = repetitions if repetitions is not None else (1 if quick else 5)
    svm_rows = 2000 if quick else 3000
    max_subsets = 200 if quick else 500
    plan = [(load, ks) for name, load, ks in (("nltcs", load_nltcs_codes, (1, 2) if quick else (1, 2, 3, 4)),
                                              ("adult", load_adult_codes, (1, 2))) if name in datasets]
    rows: list[dict[str, Any]] = []
    est_rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    loaded = []
    for loader, ks in plan:
        try:
            loaded.append((loader(data_dir), ks))
        except DataNotFoundError as exc:
            logger.warning("skipping: %s", exc)
    if not loaded:
        raise DataNotFoundError("neither NLTCS nor Adult was found; set PRIVPUB_DATA or pass --data-dir")
    for i, (data, ks) in enumerate(loaded):
        labels = data.svm_labels if not quick or len(data.svm_labels) <= 4 else data.svm_labels[:4]
        r, e = _run_dataset(data, ks=ks, fs=fs, reps=reps, base=rng * 1000 + i, svm_labels=labels,
                            svm_rows=svm_rows, max_subsets=max_subsets)
        rows += r
        est_rows += e
    frame = pd.DataFrame(rows)
    est = pd.DataFrame(est_rows)
    frame.to_csv(out / "results.csv", index=False)
    est.to_csv(out / "estimators.csv", index=False)
    files = _plot(frame, est, out)
    meta = {
        "command": f"privpub reproduce ldp_synth{' --quick' if quick else ''} --seed {rng}"
                   + ("" if repetitions is None and len(datasets) == 2 else
                      f" (Python: reproduce(..., repetitions={reps}, datasets={list(datasets)}))"),
        "datasets": ", ".join(f"{d.name} ({d.codes.shape[0]} x {d.codes.shape[1]}, k = {list(k)})"
                              for d, k in loaded),
        "f grid": fs,
        "repetitions": reps,
        "EM": "tol 1e-6 (max |dP|), max_iter 1000, collapsed patterns",
        "network": "Alg. 4 (entropy start, incremental search) unless stated",
        "SVM": f"RBF SVC, 80/20 split, training rows capped at {svm_rows}, labels "
               + "; ".join(f"{d.name}: {len(d.svm_labels if not quick or len(d.svm_labels) <= 4 else d.svm_labels[:4])}"
                           for d, _ in loaded) + ", repetition 0 only",
        "marginals": f"all 2-way subsets; a = 3..5 a fixed random sample of {max_subsets} subsets when more",
        "runtime": f"{time.perf_counter() - t0:.0f} s",
    }
    text, claims = _summary(frame, est, files, meta)
    write_claims(out, claims)
    write_ledgers(out, {f"LDP BN report, {d.name}, f={f}": report_ledger(f, d.codes.shape[1])
                        for d, _ in loaded for f in fs})
    summary = out / "summary.md"
    summary.write_text(text)
    return summary
