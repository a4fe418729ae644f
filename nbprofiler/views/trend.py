"""The trend of checked numbers over a check history (`nbprofiler.analysis.checks.read_history`).

One small figure per checked number, sharing the run axis: the number's line over the history's runs,
each run's marker coloured by its verdict (pass, flaky, fail), and the thresholds: a dashed line at a
``max`` or ``min`` limit, and for ``max_regression_pct`` the allowed band from the baseline median to
that median grown by the threshold. Run labels, sources and metric names reach the page only as Bokeh
data (tooltips and titles are rendered as text), never as HTML.
"""
from __future__ import annotations

import math

from bokeh.layouts import column
from bokeh.models import ColumnDataSource, Div, HoverTool
from bokeh.plotting import figure

from . import theme

VERDICT_COLORS = {"pass": "#009E73", "flaky": "#E69F00", "fail": "#D55E00"}
_LIMIT_COLORS = {"max": "#D55E00", "min": "#0072B2"}


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else math.nan


def trend_data(records: list[dict]) -> dict[str, dict]:
    """Per checked number (in the order first checked), the columns drawn: ``run`` (position in the
    history), ``value``, ``label``, ``timestamp``, ``verdict``, and per check kind its limits per run
    (``max``, ``min``; ``band_lo``/``band_hi`` for regressions; NaN where a run did not check it)."""
    metrics: dict[str, dict] = {}
    for rec in records:
        for c in rec.get("checks") or []:
            metrics.setdefault(c.get("metric"), {})
        for m in (rec.get("values") or {}):
            metrics.setdefault(m, {})
    for m in metrics:
        cols = {k: [] for k in ("run", "value", "label", "timestamp", "verdict", "max", "min", "band_lo",
                                "band_hi")}
        for i, rec in enumerate(records):
            cols["run"].append(i + 1)
            cols["value"].append(_num((rec.get("values") or {}).get(m)))
            cols["label"].append(str(rec.get("label", "")))
            cols["timestamp"].append(str(rec.get("timestamp", "")))
            cols["verdict"].append(str(rec.get("verdict", "")))
            lim = {"max": math.nan, "min": math.nan, "band_lo": math.nan, "band_hi": math.nan}
            for c in rec.get("checks") or []:
                if c.get("metric") != m:
                    continue
                if c.get("kind") in ("max", "min"):
                    lim[c["kind"]] = _num(c.get("limit"))
                elif c.get("kind") == "max_regression_pct":
                    base = _num(c.get("baseline_median"))
                    lim["band_lo"] = base
                    lim["band_hi"] = base + abs(base) * _num(c.get("limit")) / 100.0
            for k, v in lim.items():
                cols[k].append(v)
        metrics[m] = cols
    return metrics


def trend_layout(records: list[dict], *, width: int = 760, height: int = 220):
    """The trend of every checked number over ``records`` as one Bokeh layout (a column of figures)."""
    data = trend_data(records)
    if not data:
        return Div(text="<i>No checked runs in this history yet.</i>")
    figs = []
    x_range = None
    for metric, cols in data.items():
        shared = {"x_range": x_range} if x_range is not None else {}
        fig = figure(title=metric, width=width, height=height, tools="pan,wheel_zoom,reset,save",
                     x_axis_label="run (history order)", y_axis_label="value", **shared)
        x_range = x_range or fig.x_range
        src = ColumnDataSource(dict(cols, color=[VERDICT_COLORS.get(v, theme.OTHER) for v in cols["verdict"]]))
        if any(not math.isnan(v) for v in cols["band_lo"]):
            fig.varea(x="run", y1="band_lo", y2="band_hi", source=src, fill_color="#56B4E9", fill_alpha=0.25,
                      legend_label="allowed regression band")
        for kind in ("max", "min"):
            if any(not math.isnan(v) for v in cols[kind]):
                fig.step(x="run", y=kind, source=src, mode="center", line_dash="dashed",
                         line_color=_LIMIT_COLORS[kind], legend_label=f"{kind} limit")
        fig.line(x="run", y="value", source=src, line_width=2, color="#555555", legend_label=metric)
        dots = fig.scatter(x="run", y="value", source=src, size=8, color="color")
        fig.add_tools(HoverTool(renderers=[dots], tooltips=[("run", "@run"), ("label", "@label"),
                                                            ("time", "@timestamp"), ("value", "@value{0.[000]}"),
                                                            ("verdict", "@verdict")]))
        theme.style(fig)
        fig.legend.location = "top_left"
        fig.legend.click_policy = "hide"
        figs.append(fig)
    return column(*figs)
