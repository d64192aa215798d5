"""Server-rendered dashboards per campaign and per stream (Jinja2 with autoescaping; inline SVG, no
scripts; both pages refresh themselves with ``<meta http-equiv="refresh">``, every 5 s by default).

Shows the campaign's status, its reports over time, the latest release as a plot (bars for a
frequency campaign, a heat map of the leaves for a spatial one, the synthetic records' marginals
for a synth one) and the privacy parameters in words. Every plot has axes with ticks and labels
(tick values from matplotlib's ``MaxNLocator``), and every statistical term is explained where it
is used, with a link to ``/help`` (the same text as docs/service.md, "Reading the dashboards").
Everything it shows is public: counts of reports and published releases, never a report.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from privpub.service._store import NotFound

__all__ = ["router"]

_env = Environment(loader=FileSystemLoader(str(Path(__file__).with_name("templates"))),
                   autoescape=select_autoescape(default=True, default_for_string=True))

router = APIRouter(tags=["dashboard"])

_VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b",
            "#fde725"]


#: what each local randomiser is, in a few words (shown beside its name)
ORACLES = {
    "GRR": "generalised randomised response: the device sends its true category with a boosted probability, "
           "else a uniformly random other one",
    "OUE": "optimised unary encoding: the device sends one bit per category, its own category's bit kept "
           "with probability 1/2 and every other bit set with a small probability",
    "SUE": "symmetric unary encoding (basic RAPPOR): one bit per category, each flipped with the same probability",
    "OLH": "optimised local hashing: the device hashes its category into a small range and sends the hash "
           "function and a randomised hash value",
}
#: spatial methods, in a few words
SPATIAL_METHODS = {
    "kdght": "KDG-HT (paper 002): an adaptive KD/quad-tree partition built in phases from earlier reports",
    "ug": "a uniform grid of equal cells",
}


def _ticks(lo: float, hi: float, n: int = 5, *, integer: bool = False, cover: bool = False) -> list[float]:
    """Round tick values for ``[lo, hi]`` (matplotlib's ``MaxNLocator``): inside the range, or with
    ``cover`` up to the first tick at or above ``hi`` (the axis then ends on a tick)."""
    from matplotlib.ticker import MaxNLocator

    if not hi > lo:
        hi = lo + 1.0
    values = [float(v) for v in MaxNLocator(nbins=n, integer=integer, min_n_ticks=2).tick_values(lo, hi)]
    eps = 1e-9 * (hi - lo)
    inside = [v for v in values if lo - eps <= v <= hi + eps]
    if cover:
        above = [v for v in values if v > hi + eps]
        inside += above[:1]
    return inside


def _fmt_tick(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 and v == int(v) else f"{v:.4g}"


def _bars(values: dict[str, float], width: int = 640, label: str = "") -> dict[str, Any]:
    """Horizontal bars (labels left of x = 220) with a value axis below them: ticks and a label."""
    items = list(values.items())
    bar_h = 22
    span = width - 260
    ticks = _ticks(0.0, max([v for _, v in items] + [1e-12]), cover=True)
    top = max(ticks[-1], max([v for _, v in items] + [1e-12]))
    bars = [{"label": k, "value": v, "y": i * bar_h, "w": max(0.0, v) / top * span}
            for i, (k, v) in enumerate(items)]
    axis_y = len(items) * bar_h + 4
    axis = {"y": axis_y, "x0": 220, "x1": 220 + span, "label": label,
            "ticks": [{"x": 220 + t / top * span, "text": _fmt_tick(t)} for t in ticks]}
    return {"bars": bars, "height": axis_y + 38, "width": width, "axis": axis}


def _heatmap(release: dict[str, Any], size: int = 420) -> dict[str, Any]:
    """The leaves as cells of a ``size`` square (drawn at ``(left, 4)``), with x and y axes in the
    domain's units."""
    x0b, y0b, x1b, y1b = release["bounds"]
    lv = release["leaves"]
    sx = size / (x1b - x0b)
    sy = size / (y1b - y0b)
    left = 70
    dens = [max(0.0, v) / max((b - a) * (d - c), 1e-300)
            for a, b, c, d, v in zip(lv["x0"], lv["x1"], lv["y0"], lv["y1"], lv["value"])]
    pos = [d for d in dens if d > 0]
    lo, hi = (math.log(min(pos)), math.log(max(pos))) if pos else (0.0, 1.0)
    cells = []
    for a, b, c, d, den in zip(lv["x0"], lv["x1"], lv["y0"], lv["y1"], dens):
        k = 0 if den <= 0 else int((math.log(den) - lo) / max(hi - lo, 1e-12) * (len(_VIRIDIS) - 1))
        cells.append({"x": left + (a - x0b) * sx, "y": 4 + size - (d - y0b) * sy, "w": (b - a) * sx,
                      "h": (d - c) * sy, "fill": _VIRIDIS[k]})
    xticks = [{"x": left + (t - x0b) * sx, "text": _fmt_tick(t)} for t in _ticks(x0b, x1b)]
    yticks = [{"y": 4 + size - (t - y0b) * sy, "text": _fmt_tick(t)} for t in _ticks(y0b, y1b)]
    return {"cells": cells, "size": size, "left": left, "width": left + size + 10, "height": size + 48,
            "xticks": xticks, "yticks": yticks, "bottom": size + 4,
            "lo": f"{math.exp(lo):.3g}" if pos else "0", "hi": f"{math.exp(hi):.3g}" if pos else "0"}


@router.get("/campaigns/{campaign_id}/dashboard", response_class=HTMLResponse)
def dashboard(request: Request, campaign_id: str,
              refresh: int = Query(5, ge=1, le=3600, description="seconds between refreshes")) -> HTMLResponse:
    """The campaign's dashboard (HTML, refreshed by the browser every ``refresh`` seconds)."""
    store = request.app.state.store
    try:
        info = store.campaign(campaign_id)
    except NotFound:
        return HTMLResponse(_env.get_template("missing.html").render(), status_code=404)
    status = store.status(campaign_id)
    try:
        release = store.release(campaign_id, None)
    except NotFound:
        release = None
    plot: dict[str, Any] | None = None
    if release is not None:
        if release["kind"] == "frequency":
            plot = {"type": "bars", "title": "estimated number of participants per category (Norm-Sub)",
                    **_bars(release["normalised"], label="estimated participants (Norm-Sub)")}
        elif release["kind"] == "spatial":
            plot = {"type": "heatmap", "title": f"released density over {len(release['leaves']['value'])} cells",
                    **_heatmap(release)}
        else:
            plot = {"type": "marginals", "title": "marginals of the synthetic records",
                    "attributes": [{"name": a, **_bars(m, 480, label="share of the synthetic records")}
                                   for a, m in release["marginals"].items()]}
    times = status["reports_over_time"][-48:]
    timeline = _bars({t["time"]: t["reports"] for t in times}, label="reports received") if times else None
    config = info.public_config()
    html = _env.get_template("dashboard.html").render(
        info=info, config=config, status=status, release=release, plot=plot, timeline=timeline, refresh=refresh,
        oracle_words=ORACLES.get(str(config.get("oracle", ""))),
        method_words=SPATIAL_METHODS.get(str(config.get("method", ""))))
    return HTMLResponse(html)


def _series_plot(steps: list[int], est: list[float], std: list[float], width: int = 720,
                 height: int = 280) -> dict[str, Any]:
    left, bottom = 70, 46
    lo = [e - 1.96 * s for e, s in zip(est, std)]
    hi = [e + 1.96 * s for e, s in zip(est, std)]
    ymin, ymax = min(min(lo), 0.0), max(max(hi), 1.0)
    span = ymax - ymin
    n = len(steps)

    def x(i: int) -> float:
        return left + (width - left - 24) * (i / max(n - 1, 1))

    def y(v: float) -> float:
        return 4 + (height - bottom - 4) * (1 - (v - ymin) / span)

    line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(est))
    band = " ".join([f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(hi)]
                    + [f"{x(i):.1f},{y(v):.1f}" for i, v in reversed(list(enumerate(lo)))])
    def x_step(step: float) -> float:  # where step number ``step`` lies on the x axis
        return left + (width - left - 24) * ((step - steps[0]) / max(steps[-1] - steps[0], 1))

    yticks = [{"y": f"{y(t):.1f}", "text": _fmt_tick(t)} for t in _ticks(ymin, ymax)]
    xticks = [{"x": f"{x_step(t):.1f}", "text": _fmt_tick(t)}
              for t in _ticks(float(steps[0]), float(steps[-1]), 6, integer=True)]
    return {"line": line, "band": band, "width": width, "height": height, "left": left, "zero": f"{y(0.0):.1f}",
            "ymin": ymin, "ymax": ymax, "n": n, "first": steps[0], "last": steps[-1], "yticks": yticks,
            "xticks": xticks, "axis_y": height - bottom, "top": 4}


@router.get("/streams/{stream_id}/dashboard", response_class=HTMLResponse)
def stream_dashboard(request: Request, stream_id: str,
                     refresh: int = Query(5, ge=1, le=3600, description="seconds between refreshes"),
                     points: int = Query(200, ge=2, le=2000, description="steps shown")) -> HTMLResponse:
    """The stream's dashboard (HTML, refreshed by the browser): its noisy series with a 95% band."""
    from privpub.service._stream_api import series_data

    store = request.app.state.streams
    try:
        status = store.status(stream_id)
    except NotFound:
        return HTMLResponse(_env.get_template("missing.html").render(), status_code=404)
    plot = None
    if status["closed_reason"] is None:  # a stream closed for a retired state shows its reason, no answers
        data = series_data(store, stream_id, points)
        plot = _series_plot(data["steps"], data["estimates"], data["std"]) if data["steps"] else None
    html = _env.get_template("stream.html").render(status=status, plot=plot, refresh=refresh)
    return HTMLResponse(html)


@router.get("/help", response_class=HTMLResponse, include_in_schema=False)
def help_page() -> HTMLResponse:
    """What the dashboards' terms mean (Norm-Sub, standard error, confidence band, ledger, ...)."""
    return HTMLResponse(_env.get_template("help.html").render(oracles=ORACLES, methods=SPATIAL_METHODS))


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index() -> HTMLResponse:
    return HTMLResponse(_env.get_template("index.html").render())
