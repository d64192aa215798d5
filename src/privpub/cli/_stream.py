"""CLI commands of privpub.stream: ``privpub stream [publish]``, ``privpub stream create|produce|query``
(a stream of a running service) and ``privpub reproduce stream``."""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer

from privpub.cli._common import (
    SEED_HELP,
    BudgetFileOption,
    BudgetTotalOption,
    Checks,
    DataLabelOption,
    ForceOption,
    PlainHelpGroup,
    check_out_dir,
    check_output,
    echo_session,
    handle_errors,
    open_session,
    progress_bar,
    publish_kwargs,
    read_table,
    unit_notice,
    write_table,
)
from privpub.cli._series import read_series
from privpub.core import check_allocation
from privpub.errors import ParameterError

_METHODS = ("hq_rtp (default), rtp, rtp_mm, hq_rtpmm (--epsilon); bt, bth (--epsilon or --rho); mf_sqrt, blt, "
            "mf_range (--rho)")
#: output formats of the answers / noisy series
FORMATS = ("csv", "json", "parquet", "npy")
#: bytes per tree node of the stream publishers (tracemalloc, docs/benchmarks.md), with a 2x margin
BYTES_PER_NODE = {"bt": 16, "bth": 400}
DEFAULT_BYTES_PER_NODE = 96


def check_stream_sizes(method: str, window: int, height: int | None, n_items: int) -> None:
    """Refuse a window or tree height whose trees would not fit in memory (before building them)."""
    from privpub.stream import max_height

    if window < 1:
        raise ParameterError(f"--window must be >= 1, got {window}")
    if height is not None and height < 1:
        raise ParameterError(f"--height must be >= 1, got {height}")
    k = height if height is not None else max_height(window)
    nodes = 2**k if k < 256 else math.inf
    option = "--height" if height is not None else "--window"
    check_allocation(nodes, BYTES_PER_NODE.get(method, DEFAULT_BYTES_PER_NODE),
                     f"the stream's trees (height {k})", option, unit="nodes")
    check_allocation(n_items, 48, "the stream's series and answers", "the length of the input", unit="items")


def _read_queries(path: Path, window: int) -> pd.DataFrame:
    """The --queries file, checked against --window (the data is not read yet)."""
    q = read_table(path)
    missing = {"l", "r"} - set(q.columns)
    if missing:
        raise ParameterError(f"--queries file must have columns l, r (and optionally time), missing {sorted(missing)}")
    for c in [c for c in ("time", "l", "r") if c in q.columns]:
        if not pd.api.types.is_integer_dtype(q[c]):
            raise ParameterError(f"--queries column {c!r} must hold integers, got dtype {q[c].dtype}")
    bad = (q["l"] < 1) | (q["r"] < q["l"]) | ((q["r"] - q["l"] + 1) > window)
    if "time" in q.columns:
        bad |= q["r"] > q["time"]
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ParameterError(f"--queries row {i + 1}: need 1 <= l <= r (<= time) and at most --window {window} "
                             f"items, got l={q['l'].iloc[i]}, r={q['r'].iloc[i]}")
    return q


def _privacy_unit(privacy_id: str | None, max_contributions: int | None, column: str | None) -> Any:
    """The --privacy-id / --max-contributions unit (None: event level), checked before any read."""
    from privpub.core import PrivacyUnit

    if privacy_id is None:
        if max_contributions is not None:
            raise ParameterError("--max-contributions needs --privacy-id (the column naming each event's person)")
        return None
    if max_contributions is None:
        raise ParameterError("--privacy-id needs --max-contributions K (at most K events per person and step)")
    if max_contributions < 1:
        raise ParameterError(f"--max-contributions must be >= 1, got {max_contributions}")
    if column is None:
        raise ParameterError("--privacy-id needs --column: the event table's step column (integers from 1)")
    if column == privacy_id:
        raise ParameterError(f"--column and --privacy-id must be different columns, got {column!r} for both")
    return PrivacyUnit.person_per_step(privacy_id, max_contributions)


def _read_events(path: Path, column: str | None, privacy_id: str) -> tuple[np.ndarray, np.ndarray]:
    """The event table of --privacy-id: (1-based steps, ids), checked."""
    frame = read_table(path)
    missing = [c for c in (column, privacy_id) if c not in frame.columns]
    if missing:
        raise ParameterError(f"--column/--privacy-id must name columns of {str(path)!r} {list(frame.columns)}, "
                             f"missing {missing}")
    steps = frame[column]
    if not pd.api.types.is_integer_dtype(steps):
        raise ParameterError(f"--column {column!r} must hold integer steps (from 1), got dtype {steps.dtype}")
    st = steps.to_numpy(np.int64)
    if st.size and int(st.min()) < 1:
        i = int(np.argmin(st))
        raise ParameterError(f"--column {column!r} must hold steps >= 1, got {int(st[i])} in row {i + 1}")
    ids = frame[privacy_id]
    if bool(ids.isna().any()):
        i = int(np.flatnonzero(ids.isna().to_numpy())[0])
        raise ParameterError(f"--privacy-id {privacy_id!r} is missing in row {i + 1} (an event with no person "
                             "cannot be bounded)")
    return st, ids.to_numpy(dtype=object)


class _StreamGroup(PlainHelpGroup):
    """``privpub stream``: a group whose default command is ``publish`` (``privpub stream INPUT ...``
    keeps working), beside the service commands ``create``, ``produce`` and ``query``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["publish", *args]
        return super().parse_args(ctx, args)


def register(app: typer.Typer, reproduce_app: typer.Typer) -> None:
    """Add ``privpub stream`` (publish, create, produce, query) and ``privpub reproduce stream``."""
    from privpub.cli._stream_service import register_service_commands

    stream_app = typer.Typer(
        cls=_StreamGroup, no_args_is_help=True,
        help="Publish a count stream under event-level DP (`privpub stream INPUT ...` is `privpub stream "
             "publish INPUT ...`), or create, feed and query a live stream of a running `privpub serve`.")
    app.add_typer(stream_app, name="stream")
    register_service_commands(stream_app)

    @stream_app.command("publish")
    @handle_errors
    def stream(
        input: Annotated[Path, typer.Argument(help="Count series: CSV/Parquet (with --column), .txt or .npy; "
                                                   "with --privacy-id an event table (one row per event).")],
        window: Annotated[int, typer.Option("--window", "-w", help="Sliding window W (queries must lie inside).")],
        output: Annotated[Path, typer.Option(
            "--output", "-o", help="Output: .csv, .json, .parquet or .npy (from the suffix).")],
        epsilon: Annotated[float | None, typer.Option(
            "--epsilon", "-e", help="Event-level epsilon of the whole stream (pure DP; give this or --rho).")] = None,
        rho: Annotated[float | None, typer.Option(
            "--rho", help="Event-level rho of the whole stream (zCDP, Gaussian noise): mf_sqrt, blt, mf_range, "
                          "and bt or bth. With --budget-file the session is a zCDP one (--budget-total is a rho).")] = None,
        column: Annotated[str | None, typer.Option("--column", "-c", help="Column holding the counts.")] = None,
        method: Annotated[str, typer.Option("--method", "-m", help=_METHODS)] = "hq_rtp",
        queries: Annotated[Path | None, typer.Option(
            "--queries", "-q",
            help="CSV with columns l, r (1-based, inclusive) and optionally time (items seen when asked; "
            "default: all asked at the end).",
        )] = None,
        noise: Annotated[str, typer.Option("--noise", help="discrete (exact; integer counts) or laplace.")] = "discrete",
        real: Annotated[bool, typer.Option("--real", help="Real-valued items (needs --noise laplace).")] = False,
        max_item: Annotated[float | None, typer.Option(
            "--max-item", help="Declared bound of one item; larger items are refused.")] = None,
        height: Annotated[int | None, typer.Option("--height", help="Tree height (HQ: the initial height).")] = None,
        sensitivity: Annotated[float, typer.Option("--sensitivity", help="Max change of one item.")] = 1.0,
        privacy_id: Annotated[str | None, typer.Option(
            "--privacy-id",
            help="Person-per-step privacy: the INPUT is an event table (one row per event), --column its "
            "step column (integers from 1), this its privacy-id column; at most --max-contributions events "
            "per person and step are kept.")] = None,
        max_contributions: Annotated[int | None, typer.Option(
            "--max-contributions", help="With --privacy-id: the bound k on a person's events in one step "
            "(the noise is that of k x --sensitivity).")] = None,
        seed: Annotated[int | None, typer.Option("--seed", help=SEED_HELP)] = None,
        force: ForceOption = False,
        budget_file: BudgetFileOption = None,
        budget_total: BudgetTotalOption = None,
        data_label: DataLabelOption = None,
        quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
    ) -> None:
        """Publish a count stream under event-level DP (person per step with --privacy-id): noisy
        answers to range queries, or (without --queries) the noisy per-step counts and prefix sums."""
        from privpub.stream import NOISE_KINDS, PUBLISHERS, make_publisher

        checks = Checks()
        checks.budget(epsilon, rho, which="pure DP | zCDP: mf_sqrt, blt, mf_range, bt, bth")
        checks(check_output, output, force=force, inputs=[input, queries], supported=FORMATS)
        if method not in PUBLISHERS:
            checks.add(f"--method must be one of {', '.join(sorted(PUBLISHERS))}, got {method!r}")
        elif rho is not None and epsilon is None and "rho" not in inspect.signature(PUBLISHERS[method]).parameters:
            checks.add(f"--rho: {method} is a pure-DP publisher (give --epsilon); the zCDP ones are "
                       f"{', '.join(m for m in sorted(PUBLISHERS) if 'rho' in inspect.signature(PUBLISHERS[m]).parameters)}",
                       param="--rho")
        if noise not in NOISE_KINDS:
            checks.add(f"--noise must be one of {', '.join(NOISE_KINDS)}, got {noise!r}")
        if not (sensitivity > 0 and math.isfinite(sensitivity)):
            checks.add(f"--sensitivity must be finite and > 0, got {sensitivity}")
        checks(check_stream_sizes, method, window, height, 0)
        unit = checks(_privacy_unit, privacy_id, max_contributions, column)
        q = checks(_read_queries, queries, window) if queries is not None else None
        checks.done()
        events = _read_events(input, column, privacy_id) if privacy_id is not None else None
        session = open_session(budget_file, budget_total, data_label or input.name, zcdp=rho is not None)
        extra = publish_kwargs(PUBLISHERS[method], session, "stream")
        budget = {"epsilon": epsilon} if rho is None else {"rho": rho}
        kw: dict[str, object] = {"window": window, **budget, "rng": seed, "noise": noise,
                                 "sensitivity": sensitivity, "real": real, "max_item": max_item}
        if height is not None:
            kw["height"] = height
        if unit is not None:
            kw["privacy_unit"] = unit
        pub = make_publisher(method, **kw, **extra)
        if events is not None:
            steps, ids = events
            check_stream_sizes(method, window, height, int(steps.max()) if steps.size else 0)
            # at most k events per person and step (keyed hash, key drawn from the publisher's rng)
            data = pub.bound_events(steps - 1, ids)
        else:
            data = read_series(input, column)
            amount = next(v for v in (epsilon, rho) if v is not None)  # checked: exactly one is given
            notice = unit_notice(None, privacy_id, amount, unit="event", zcdp=rho is not None)  # no public id statement
            if notice is not None and not quiet:
                typer.echo(notice, err=True)
        check_stream_sizes(method, window, height, len(data))
        if q is not None:
            n = len(data)
            qt = q["time"].to_numpy(np.int64) if "time" in q.columns else np.full(len(q), n, dtype=np.int64)
            order = np.argsort(qt, kind="stable")
            arr = np.stack([qt, q["l"].to_numpy(np.int64), q["r"].to_numpy(np.int64)], axis=1)[order]
            answers = np.empty(len(q), dtype=pub.answer(np.zeros((0, 2), dtype=np.int64), record=False).dtype)
            answers[order] = pub.replay(data, arr)
            out = q.copy()
            out["answer"] = answers
        else:
            arr = pub._check_items(data)
            noisy = np.empty(arr.shape[0], dtype=pub.answer(np.zeros((0, 2), dtype=np.int64), record=False).dtype)
            step = max(1, min(window, 1 << 20))
            bar = progress_bar(arr.shape[0], "stream", "items", quiet=quiet or arr.shape[0] < 1 << 22)
            try:
                for a in range(0, arr.shape[0], step):
                    pub.extend(arr[a : a + step])
                    t = np.arange(a + 1, pub.t + 1, dtype=np.int64)
                    noisy[a : pub.t] = pub.answer(np.stack([t, t], axis=1), record=False)
                    if bar is not None:
                        bar.update(pub.t - a)
            finally:
                if bar is not None:
                    bar.close()
            out = pd.DataFrame({"time": np.arange(1, arr.shape[0] + 1), "noisy_count": noisy,
                                "noisy_prefix": np.cumsum(noisy)})
        path = write_table(out, output, force=force, formats=FORMATS)
        level = "event-level" if unit is None else f"per person and step, at most {max_contributions} events each"
        spent = f"epsilon={epsilon:g}" if rho is None else f"rho={rho:g} (zCDP)"
        typer.echo(f"{pub.method}: {len(data)} items, {spent} ({level}), window={window}, "
                   f"wrote {len(out)} rows to {path}")
        if unit is not None:
            typer.echo(f"protects: {unit}")
        echo_session(session, budget_file)

    @reproduce_app.command("stream")
    @handle_errors
    def reproduce_stream(
        quick: Annotated[bool, typer.Option("--quick", help="2 repetitions, fewer sizes, 32768 items.")] = False,
        out_dir: Annotated[Path | None, typer.Option(
            "--out", "--out-dir", "-o", help="Output folder (default ./privpub-results/stream).")] = None,
        data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Dataset folder (default $PRIVPUB_DATA).")] = None,
        seed: Annotated[int, typer.Option("--seed", help="Root seed.")] = 0,
    ) -> None:
        """Reproduce Figs 6-12 of the stream paper (RTP, HQ_RTP, RTP_MM, HQ_RTPMM, BT, BT_H)."""
        from privpub.experiments import default_out_dir
        from privpub.experiments.stream import reproduce

        path = reproduce(check_out_dir(out_dir or default_out_dir("stream"), "--out"), quick=quick,
                         data_dir=data_dir, rng=seed)
        typer.echo(f"wrote {path}")
