"""Server-rendered dashboards per campaign and per stream (Jinja2 with autoescaping; inline SVG, no
scripts; a stream's page refreshes itself with ``<meta http-equiv="refresh">``).

Shows the campaign's status, its reports over time, the latest release as a plot (bars for a
frequency campaign, a heat map of the leaves for a spatial one, the synthetic records' marginals
for a synth one) and the privacy parameters in words. Everything it shows is public: counts of
reports and published releases, never a report.
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


def _bars(values: dict[str, float], width: int = 640) -> dict[str, Any]:
    items = list(values.items())
    top = max([v for _, v in items] + [1e-12])
    bar_h = 22
    bars = [{"label": k, "value": v, "y": i * bar_h, "w": max(0.0, v) / top * (width - 260)}
            for i, (k, v) in enumerate(items)]
    return {"bars": bars, "height": len(items) * bar_h + 4, "width": width}


def _heatmap(release: dict[str, Any], size: int = 420) -> dict[str, Any]:
    x0b, y0b, x1b, y1b = release["bounds"]
    lv = release["leaves"]
    sx = size / (x1b - x0b)
    sy = size / (y1b - y0b)
    dens = [max(0.0, v) / max((b - a) * (d - c), 1e-300)
            for a, b, c, d, v in zip(lv["x0"], lv["x1"], lv["y0"], lv["y1"], lv["value"])]
    pos = [d for d in dens if d > 0]
    lo, hi = (math.log(min(pos)), math.log(max(pos))) if pos else (0.0, 1.0)
    cells = []
    for a, b, c, d, den in zip(lv["x0"], lv["x1"], lv["y0"], lv["y1"], dens):
        k = 0 if den <= 0 else int((math.log(den) - lo) / max(hi - lo, 1e-12) * (len(_VIRIDIS) - 1))
        cells.append({"x": (a - x0b) * sx, "y": size - (d - y0b) * sy, "w": (b - a) * sx, "h": (d - c) * sy,
                      "fill": _VIRIDIS[k]})
    return {"cells": cells, "size": size}


@router.get("/campaigns/{campaign_id}/dashboard", response_class=HTMLResponse)
def dashboard(request: Request, campaign_id: str) -> HTMLResponse:
    """The campaign's dashboard (HTML)."""
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
                    **_bars(release["normalised"])}
        elif release["kind"] == "spatial":
            plot = {"type": "heatmap", "title": f"released density over {len(release['leaves']['value'])} cells",
                    **_heatmap(release)}
        else:
            plot = {"type": "marginals", "title": "marginals of the synthetic records",
                    "attributes": [{"name": a, **_bars(m, 480)} for a, m in release["marginals"].items()]}
    times = status["reports_over_time"]
    top = max([t["reports"] for t in times] + [1])
    timeline = [{"time": t["time"], "reports": t["reports"], "w": t["reports"] / top * 300} for t in times[-48:]]
    html = _env.get_template("dashboard.html").render(
        info=info, config=info.public_config(), status=status, release=release, plot=plot, timeline=timeline)
    return HTMLResponse(html)


def _series_plot(steps: list[int], est: list[float], std: list[float], width: int = 720,
                 height: int = 260) -> dict[str, Any]:
    left, bottom = 60, 26
    lo = [e - 1.96 * s for e, s in zip(est, std)]
    hi = [e + 1.96 * s for e, s in zip(est, std)]
    ymin, ymax = min(min(lo), 0.0), max(max(hi), 1.0)
    span = ymax - ymin
    n = len(steps)

    def x(i: int) -> float:
        return left + (width - left - 4) * (i / max(n - 1, 1))

    def y(v: float) -> float:
        return 4 + (height - bottom - 4) * (1 - (v - ymin) / span)

    line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(est))
    band = " ".join([f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(hi)]
                    + [f"{x(i):.1f},{y(v):.1f}" for i, v in reversed(list(enumerate(lo)))])
    return {"line": line, "band": band, "width": width, "height": height, "left": left, "zero": f"{y(0.0):.1f}",
            "ymin": ymin, "ymax": ymax, "n": n, "first": steps[0], "last": steps[-1]}


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
    data = series_data(store, stream_id, points)
    plot = _series_plot(data["steps"], data["estimates"], data["std"]) if data["steps"] else None
    html = _env.get_template("stream.html").render(status=status, plot=plot, refresh=refresh)
    return HTMLResponse(html)


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index() -> HTMLResponse:
    return HTMLResponse(_env.get_template("index.html").render())
