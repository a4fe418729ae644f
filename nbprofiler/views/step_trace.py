"""Step-trace view: per-step stacked bars, the selected step (or the average) as a Gantt bar with its
reduce/communication sub-stages, a per-stage trend across steps, and a per-rank comparison for clusters.

Pure data preparation (`step_segments`, `average_frame`, `rank_frame`) turns the ``step_trace`` frames
into the rows the figures draw; figure factories (`step_trace_figure`, `cluster_step_figure`) take
DataFrames and return Bokeh layouts that also work in a standalone HTML file (the step selector there is
a Bokeh ``Select`` with a CustomJS callback). `StepTraceView` is the notebook widget: an ipywidgets
dropdown drives the ``step`` traitlet (0 = average) and re-fills the same Bokeh sources from Python. The
selection's chart (its title names the step) is a Bokeh widget of its own whose saved state is renewed
with each step, so a notebook saved with its widget state reopens with the picker and the chart agreeing.

All times are milliseconds; percents are shares (0..100) of the selection's ``total_ms``.
"""
from __future__ import annotations

import html

import ipywidgets as W
import numpy as np
import pandas as pd
import traitlets
from bokeh.layouts import column, gridplot
from bokeh.models import (ColumnDataSource, CustomJS, Div, FactorRange, HoverTool, Legend, LegendItem,
                          NumeralTickFormatter, Select, Span)
from bokeh.core.properties import value
from bokeh.plotting import figure

from . import theme
from .base import View
from .pages import frames_of

AVERAGE = 0
TOTAL_ROW = "Total"
STAGES_ROW = "Stages"
# Caption width estimate for reduce events: ~6 px per character at 10 px, on a ~1000 px wide plot.
CAPTION_PX_PER_CHAR = 6.0
NOMINAL_PLOT_PX = 1000.0
SEGMENT_COLUMNS = ["sel", "row", "stage", "label", "start_ms", "end_ms", "dur_ms", "percent", "color",
                   "text", "text_x", "text_align", "text_dx", "text_color"]


# -- data preparation ------------------------------------------------------------------------------
def recomputed_means(steps: pd.DataFrame, stages: list[str]) -> dict[str, dict[str, float]]:
    """Means of each stage and ``total_ms`` recomputed from the step rows (ms, rounded to 4 decimals):
    ``{"all_steps": {...}, "excluding_step_1": {...}}``; the second is empty with a single step."""
    cols = [*stages, "total_ms"]
    out = {"all_steps": steps[cols].mean().round(4).to_dict() if len(steps) else {}}
    rest = steps[steps["step"] != steps["step"].min()] if len(steps) > 1 else steps.iloc[0:0]
    out["excluding_step_1"] = rest[cols].mean().round(4).to_dict() if len(rest) else {}
    return out


def average_frame(steps: pd.DataFrame, stages: list[str], average: dict | None) -> pd.DataFrame:
    """The averages side by side, one row each: "as written" (the file's average row that MindInsight
    shows; absent when the source has none), "mean of all steps", "mean excluding step 1". Columns: the
    stages and ``total_ms`` (ms)."""
    cols = [*stages, "total_ms"]
    rows, index = [], []
    if average:
        rows.append({c: average.get(c, np.nan) for c in cols})
        index.append("as written (MindInsight)")
    means = recomputed_means(steps, stages)
    for key, label in (("all_steps", "mean of all steps"), ("excluding_step_1", "mean excluding step 1")):
        if means[key]:
            rows.append(means[key])
            index.append(label)
    return pd.DataFrame(rows, index=index, columns=cols)


def average_row(steps: pd.DataFrame, stages: list[str], average: dict | None) -> dict[str, float]:
    """What the "Average" selection shows: the file's average row as written, else the mean of all steps."""
    if average:
        return {c: float(average.get(c, 0.0) or 0.0) for c in [*stages, "total_ms"]}
    return recomputed_means(steps, stages)["all_steps"]


def _reduce_average(reduce: pd.DataFrame | None, steps: pd.DataFrame, stages: list[str],
                    average: dict | None) -> pd.DataFrame:
    """Mean start and duration of each reduce event over the steps where it was recorded. When the
    file's average row is the mean of steps 2..N (as in the real legacy files, FORMATS.md 3.2), step 1 is
    left out here too, so the reduce bars agree with the stage bars they are drawn under."""
    if reduce is None or reduce.empty:
        return pd.DataFrame(columns=["name", "stream_id", "start_ms", "dur_ms"])
    if average and len(steps) > 1:
        rest = recomputed_means(steps, stages)["excluding_step_1"]
        if abs(rest.get("total_ms", np.nan) - float(average.get("total_ms", np.nan))) < 1e-3:
            reduce = reduce[reduce["step"] != steps["step"].min()]
    return (reduce.groupby(["stream_id", "name"], sort=False)[["start_ms", "dur_ms"]].mean().round(4)
            .reset_index())


def _segments_for(sel: int, values: dict, stages: list[str], reduce: pd.DataFrame | None) -> list[dict]:
    total = float(values.get("total_ms", 0.0) or 0.0)

    def pct(d):
        return round(100.0 * d / total, 2) if total else 0.0

    out = [dict(sel=sel, row=TOTAL_ROW, stage="total_ms", label=theme.stage_label("total_ms"), start_ms=0.0,
                end_ms=total, dur_ms=total, percent=100.0 if total else 0.0, color=theme.stage_color("total_ms"))]
    start = 0.0
    # Stages stack in display order: for legacy files interval + fp_and_bp + tail = total, so each
    # stage starts where the previous ends (MindInsight's fp_point - start_point, bp_point - start_point).
    for s in stages:
        d = float(values.get(s, 0.0) or 0.0)
        out.append(dict(sel=sel, row=STAGES_ROW, stage=s, label=theme.stage_label(s), start_ms=round(start, 4),
                        end_ms=round(start + d, 4), dur_ms=d, percent=pct(d), color=theme.stage_color(s)))
        start += d
    if reduce is not None and len(reduce):
        streams = list(dict.fromkeys(reduce["stream_id"]))
        for r in reduce.itertuples(index=False):
            # MindInsight drops points with a negative start or duration (FORMATS.md 5.1).
            if r.start_ms < 0 or r.dur_ms <= 0:
                continue
            i = streams.index(r.stream_id)
            out.append(dict(sel=sel, row=f"stream {r.stream_id}", stage=str(r.name), label=str(r.name),
                            start_ms=float(r.start_ms), end_ms=round(float(r.start_ms + r.dur_ms), 4),
                            dur_ms=float(r.dur_ms), percent=pct(float(r.dur_ms)), color=theme.reduce_color(i)))
    return out


def step_segments(steps: pd.DataFrame, stages: list[str], average: dict | None = None,
                  reduce: pd.DataFrame | None = None, step: int | None = None) -> pd.DataFrame:
    """The bars of the step-detail chart, one row per bar.

    ``step``: None = every selection (the average, sel 0, and each step), else just that one (0 = average).
    Columns: ``sel`` (int: 0 = average, else the step number), ``row`` (str: "Total", "Stages" or
    "stream <id>"), ``stage`` (stage column or reduce event name), ``label`` (display name), ``start_ms``,
    ``end_ms``, ``dur_ms`` (float ms from the step's start), ``percent`` (0..100 of the selection's
    total), ``color``. Reduce events of the average are the means over the steps that recorded them.
    """
    rows: list[dict] = []
    by_step = reduce.groupby("step", sort=False) if reduce is not None and len(reduce) else None
    if step in (None, AVERAGE):
        rows += _segments_for(AVERAGE, average_row(steps, stages, average), stages,
                              _reduce_average(reduce, steps, stages, average))
    wanted = steps if step in (None, AVERAGE) else steps[steps["step"] == step]
    if step == AVERAGE:
        wanted = steps.iloc[0:0]
    groups = dict(iter(by_step)) if by_step is not None else {}
    for rec in wanted[["step", *stages, "total_ms"]].to_dict("records"):
        s = int(rec["step"])
        rows += _segments_for(s, rec, stages, groups.get(s))
    out = pd.DataFrame(rows, columns=SEGMENT_COLUMNS[:9])
    # Bar captions: stage bars are wide, so the caption sits inside in white; reduce events are thin,
    # so theirs follows the bar's end in the neutral grey.
    inside = out["row"].isin([TOTAL_ROW, STAGES_ROW])
    out["text"] = out["label"] + ": " + out["dur_ms"].map("{:,.4f} ms".format)
    span = out.groupby("sel")["end_ms"].transform("max").where(lambda v: v > 0)

    def width_ms(text):
        return text.str.len() * CAPTION_PX_PER_CHAR / NOMINAL_PLOT_PX * span
    # A stage caption that would run past its bar into the next stage's is shortened to the duration,
    # or left out (hover still gives the numbers).
    stage = inside & (out["row"] == STAGES_ROW)
    short = out["dur_ms"].map("{:,.4f} ms".format)
    too_long = stage & (width_ms(out["text"]) > 0.95 * out["dur_ms"])
    out.loc[too_long, "text"] = short[too_long]
    out.loc[stage & (width_ms(out["text"]) > 0.95 * out["dur_ms"]), "text"] = ""
    # A reduce caption that would run into the next event on its row is dropped too (busy streams would
    # smear dozens of captions into one another). Its width is estimated for a nominal plot width; the
    # last event of a crowded run keeps its caption.
    caption_ms = width_ms(out["text"])
    events = out[~inside].sort_values(["sel", "row", "start_ms"])
    next_start = events.groupby(["sel", "row"])["start_ms"].shift(-1)
    crowded = next_start < events["end_ms"] + caption_ms.loc[events.index]
    out.loc[crowded[crowded].index, "text"] = ""
    # A reduce caption that would run past the right edge goes before its bar instead.
    before = ~inside & (out["end_ms"] + caption_ms > span)
    out["text_x"] = np.where(inside, out["start_ms"], np.where(before, out["start_ms"], out["end_ms"]))
    out["text_align"] = np.where(before, "right", "left")
    out["text_dx"] = np.where(before, -3, 3)
    out["text_color"] = np.where(inside, "#ffffff", theme.TEXT)
    return out


def step_percent_frame(steps: pd.DataFrame, stages: list[str]) -> pd.DataFrame:
    """``steps`` plus ``<stage>_pct`` columns (0..100 of each step's ``total_ms``; 0 when the total is 0)."""
    out = steps[["step", *stages, "total_ms"]].copy()
    total = out["total_ms"].where(out["total_ms"] != 0)
    for s in stages:
        out[s[:-3] + "_pct"] = (100.0 * out[s] / total).round(2).fillna(0.0)
    return out


def rank_frame(cluster, step: int = AVERAGE) -> pd.DataFrame:
    """One row per rank of a `Cluster` for one selection (0 = each rank's average as shown in
    `average_row`): ``rank`` (str), the stage columns, ``total_ms``, ``slowest`` (bool, the largest
    total), ``outlier`` (bool: its total's robust z passes `analysis.cluster.Z_THRESHOLD`). Ranks without step trace or without that step are left out. Stages: those of the first rank
    with step trace (ranks with another stage set are left out)."""
    stages: list[str] | None = None
    rows = []
    for rank in cluster.ranks:
        p = cluster[rank]
        df = p.step_trace
        if df is None or df.empty:
            continue
        st = p.step_stages
        if stages is None:
            stages = st
        if st != stages:
            continue
        if step == AVERAGE:
            vals = average_row(df, st, p.step_trace_average)
        else:
            hit = df[df["step"] == step]
            if hit.empty:
                continue
            vals = hit.iloc[0][[*st, "total_ms"]].astype(float).to_dict()
        rows.append({"rank": str(rank), **{c: vals.get(c, 0.0) for c in [*st, "total_ms"]}})
    out = pd.DataFrame(rows, columns=["rank", *(stages or []), "total_ms"])
    out["slowest"] = out["total_ms"] == out["total_ms"].max() if len(out) else pd.Series(dtype=bool)
    # an outlier by the cluster analysis' rule (robust z of the step total): what is outlined in red
    from ..analysis.cluster import Z_THRESHOLD, robust_z
    out["outlier"] = (robust_z(out["total_ms"]) > Z_THRESHOLD).to_numpy() if len(out) > 2 else False
    out.attrs["stages"] = stages or []
    return out


# -- figures ---------------------------------------------------------------------------------------
def _source(df: pd.DataFrame, name: str) -> ColumnDataSource:
    """The source ``ColumnDataSource(df)`` makes (the frame's columns and its index, ``index`` unless named),
    without Bokeh's DataFrame path: it imports narwhals and converts column by column through it, which cost
    ~0.3-0.6 s of CPU on the first open of the tab for a 3-step run."""
    flat = df.reset_index()
    return ColumnDataSource({str(c): flat[c].to_numpy(copy=True) for c in flat.columns}, name=name)


def _selection_options(steps: pd.DataFrame) -> list[tuple[str, str]]:
    return [("0", "Average")] + [(str(int(s)), f"Step {int(s)}") for s in steps["step"]]


def _detail_figure(seg: pd.DataFrame, rows: list[str], title: str) -> tuple:
    src = _source(seg, "step_trace_selected_src")
    fig = figure(y_range=FactorRange(*reversed(rows)), height=max(160, 46 * len(rows) + 70),
                 sizing_mode="stretch_width", title=title, tools="xpan,xwheel_zoom,reset,save",
                 x_axis_label=theme.axis_label("Time from step start", "ms"), name="step_trace_detail")
    fig.hbar(y="row", left="start_ms", right="end_ms", height=0.7, fill_color="color", line_color="color",
             fill_alpha=0.85, source=src)
    fig.text(x="text_x", y="row", text="text", source=src, text_font_size="10px", x_offset="text_dx",
             text_align="text_align", text_baseline="middle", text_color="text_color", text_font=value(theme.FONT))
    fig.add_tools(HoverTool(tooltips=[("", "@label"), ("duration", "@dur_ms{0,0.0000} ms"),
                                      ("share", "@percent{0.00} %"), ("from", "@start_ms{0,0.0000} ms")]))
    return theme.style(fig), src


def point_info_text(point_info: dict | list | None, step: int = AVERAGE) -> str:
    """The operators that mark where a step's forward pass starts and its backward pass ends (as
    MindInsight shows above its step-trace chart), for ``step`` when the file gives them per step; ""
    when unknown."""
    info = point_info
    if isinstance(point_info, list):  # one object per step: MindInsight indexes it with step - 1
        info = point_info[step - 1] if step and 0 < step <= len(point_info) else (point_info[0] if point_info else None)
    if not isinstance(info, dict) or not (info.get("fp_start") or info.get("bp_end")):
        return ""
    return f"FP start operator: {info.get('fp_start') or '–'}    BP end operator: {info.get('bp_end') or '–'}"


def _figure_parts(step_trace_df: pd.DataFrame, stages: list[str], average: dict | None, step: int,
                  reduce_df: pd.DataFrame | None, point_info: dict | list | None,
                  all_seg: pd.DataFrame | None = None) -> dict:
    """The models of a step-trace layout, by role (so a view keeps what it links without searching the
    layout for it): ``points`` (Div or None), ``detail`` and its source ``sel_src``, ``all_seg`` (every
    selection's bars), ``avg`` (Div), ``bars`` with its ``marker`` and ``steps_src`` (per-step rows)."""
    if all_seg is None:
        all_seg = step_segments(step_trace_df, stages, average, reduce_df)
    rows = list(dict.fromkeys(all_seg["row"]))
    seg = all_seg[all_seg["sel"] == step]
    detail, sel_src = _detail_figure(seg, rows, _detail_title(step, seg))

    per_step = step_percent_frame(step_trace_df, stages)
    steps_src = _source(per_step, "step_trace_steps_src")
    labels = [theme.stage_label(s) for s in stages]
    colors = [theme.stage_color(s) for s in stages]
    bars = figure(height=260, sizing_mode="stretch_width", title="Stages per step",
                  x_axis_label="Step", y_axis_label=theme.axis_label("Time", "ms"),
                  tools="xpan,xwheel_zoom,box_zoom,reset,save", name="step_trace_bars")
    renderers = bars.vbar_stack(stages, x="step", width=0.8, color=colors, line_color=None, source=steps_src)
    for r, s, lab in zip(renderers, stages, labels):
        bars.add_tools(HoverTool(renderers=[r], tooltips=[
            ("step", "@step"), (lab, f"@{s}{{0,0.0000}} ms"), ("share", f"@{s[:-3]}_pct{{0.00}} %"),
            ("step total", "@total_ms{0,0.0000} ms")]))
    bars.add_layout(Legend(items=[LegendItem(label=lab, renderers=[r]) for lab, r in zip(labels, renderers)],
                           orientation="horizontal", click_policy="hide"), "above")
    marker = Span(location=step if step else -1e9, dimension="height", line_color=theme.HIGHLIGHT,
                  line_width=2, line_dash="dashed", name="step_trace_marker")
    bars.add_layout(marker)
    bars.xaxis.ticker.min_interval = 1  # whole steps only, also on a 1- or 3-step run
    avg = Div(text=averages_html(step_trace_df, stages, average), name="step_trace_averages",
              sizing_mode="stretch_width")
    points = point_info_text(point_info, step)
    # operator names are user strings: the Div renders them as text
    points = Div(text=points, render_as_text=True, name="step_trace_points",
                 styles={"font-size": "12px", "white-space": "pre"}) if points else None
    return dict(points=points, detail=detail, sel_src=sel_src, all_seg=all_seg, avg=avg,
                bars=theme.style(bars), marker=marker, steps_src=steps_src)


def trend_grid(steps_src: ColumnDataSource, stages: list[str], x_range=None):
    """One trend per stage (``step_trace_trend_<stage>``) from the per-step rows of ``steps_src``, each on its
    own scale (as MindInsight draws them): on one shared axis a 0.2 ms step interval would be a flat line
    under a 200 ms forward + backward pass. They share one x range (``x_range``, else the first's); returns
    their grid, ``step_trace_trend``."""
    trends = []
    for s in stages:
        lab = theme.stage_label(s)
        f = figure(height=200, sizing_mode="stretch_width", title=lab,
                   **({"x_range": x_range} if x_range is not None else {}),
                   x_axis_label="Step", y_axis_label=theme.axis_label(lab, "ms"),
                   tools="xpan,xwheel_zoom,reset,save", name=f"step_trace_trend_{s}")
        x_range = f.x_range
        r = f.line("step", s, source=steps_src, color=theme.stage_color(s), line_width=1.5)
        f.scatter("step", s, source=steps_src, color=theme.stage_color(s), size=3)
        f.add_tools(HoverTool(renderers=[r], mode="vline", tooltips=[("step", "@step"), (lab, f"@{s}{{0,0.0000}} ms")]))
        f.yaxis.formatter = NumeralTickFormatter(format="0,0.[0000]")
        f.xaxis.ticker.min_interval = 1  # whole steps only, also on a 1- or 3-step run
        trends.append(theme.style(f, legend=False))
    trend = gridplot(trends, ncols=min(3, len(trends)), sizing_mode="stretch_width", merge_tools=False,
                     toolbar_location=None)
    trend.name = "step_trace_trend"
    return trend


def step_trace_figure(step_trace_df: pd.DataFrame, stages: list[str], average: dict | None = None,
                      step: int | None = None, reduce_df: pd.DataFrame | None = None,
                      selector: bool = True, point_info: dict | list | None = None):
    """The step-trace layout: a step selector (average or one step), the selected step as a Gantt bar
    (total, stacked stages, one line per reduce stream), the averages, per-step stacked bars, and a
    per-stage trend line (`trend_grid`, zoomed with the bars), and (``point_info``:
    `Profile.step_point_info`) the FP-start and BP-end operator names (``step_trace_points``). ``step``:
    initial selection (None or 0 = average). With ``selector`` the layout carries a Bokeh ``Select`` (name
    ``step_select``) whose CustomJS swaps the detail bars, so the selection works in a standalone HTML
    file. Returns a Bokeh layout; sources are named ``step_trace_selected_src``, ``step_trace_steps_src``,
    ``step_trace_all_segments_src``."""
    if step_trace_df is None or step_trace_df.empty or not stages:
        return Div(text=_no_data_html("step trace", "no step rows"), name="step_trace_empty")
    step = int(step or AVERAGE)
    p = _figure_parts(step_trace_df, stages, average, step, reduce_df, point_info)
    trend = trend_grid(p["steps_src"], stages, p["bars"].x_range)
    parts = [p["detail"], p["avg"], p["bars"], trend]
    if p["points"] is not None:
        parts.insert(0, p["points"])
    if selector:
        all_src = _source(p["all_seg"], "step_trace_all_segments_src")
        select = Select(title="Step", value=str(step), options=_selection_options(step_trace_df),
                        name="step_select", width=160)
        select.js_on_change("value", CustomJS(args=dict(all=all_src, sel=p["sel_src"], marker=p["marker"],
                                                        title=p["detail"].title), code=_SELECT_JS))
        parts.insert(0, select)
    return theme.themed(column(*parts, sizing_mode="stretch_width", name="step_trace_layout"))


_SELECT_JS = """
const want = Number(cb_obj.value);
const d = all.data, n = d.sel.length, out = {};
for (const k of Object.keys(d)) out[k] = [];
for (let i = 0; i < n; i++) if (d.sel[i] === want) for (const k of Object.keys(d)) out[k].push(d[k][i]);
sel.data = out;
marker.location = want ? want : -1e9;
const tot = out.dur_ms.length ? out.dur_ms[0] : 0;
title.text = (want ? 'Step ' + want : 'Average') + ': total ' + tot.toFixed(4) + ' ms';
"""


def _detail_title(step: int, seg: pd.DataFrame) -> str:
    total = float(seg["dur_ms"].iloc[0]) if len(seg) else 0.0
    return f"{'Step ' + str(step) if step else 'Average'}: total {total:.4f} ms"


def averages_html(steps: pd.DataFrame, stages: list[str], average: dict | None) -> str:
    """A small HTML table of `average_frame` (numbers only; labels are ours, escaped anyway)."""
    df = average_frame(steps, stages, average)
    head = "".join(f"<th style='text-align:right;padding:0 8px'>{html.escape(theme.stage_label(c))} (ms)</th>"
                   for c in df.columns)
    body = ""
    for name, r in df.iterrows():
        cells = "".join(f"<td style='text-align:right;padding:0 8px'>{v:,.4f}</td>" for v in r.to_numpy(float))
        body += f"<tr><td style='padding:0 8px'>{html.escape(str(name))}</td>{cells}</tr>"
    return (f"<div style=\"{theme.PANEL_CSS}\"><table style='border-collapse:collapse'>"
            f"<tr><th></th>{head}</tr>{body}</table></div>")


def cluster_step_figure(rank_df: pd.DataFrame, stages: list[str] | None = None, step: int = AVERAGE):
    """One stacked horizontal bar per rank (from `rank_frame`) for one selection; outlier ranks are
    outlined in red, the slowest named in the title with whether it is an outlier. Source
    ``step_trace_ranks_src``."""
    stages = stages if stages is not None else rank_df.attrs.get("stages", [])
    if rank_df is None or rank_df.empty or not stages:
        return Div(text=_no_data_html("cluster step trace", "no rank has step-trace rows"),
                   name="step_trace_ranks_empty")
    df = rank_df.copy()
    df["rank_label"] = "rank " + df["rank"].astype(str)
    df["outline"] = np.where(df["outlier"], theme.HIGHLIGHT, "rgba(0,0,0,0)")
    src = _source(df, "step_trace_ranks_src")
    slow = df.loc[df["slowest"], "rank"].tolist()
    verdict = "an outlier" if df.loc[df["slowest"], "outlier"].any() else "not an outlier"
    what = f"step {step}" if step else "average"
    fig = figure(y_range=FactorRange(*reversed(df["rank_label"].tolist())), height=60 + 32 * len(df),
                 sizing_mode="stretch_width", x_axis_label=theme.axis_label("Time", "ms"),
                 title=f"Per rank, {what}; slowest: rank {', '.join(slow)} ({verdict})",
                 tools="xpan,xwheel_zoom,reset,save",
                 name="step_trace_ranks")
    labels = [theme.stage_label(s) for s in stages]
    rs = fig.hbar_stack(stages, y="rank_label", height=0.7, color=[theme.stage_color(s) for s in stages],
                        line_color="outline", line_width=2, source=src)
    for r, s, lab in zip(rs, stages, labels):
        fig.add_tools(HoverTool(renderers=[r], tooltips=[("rank", "@rank"), (lab, f"@{s}{{0,0.0000}} ms"),
                                                         ("rank total", "@total_ms{0,0.0000} ms")]))
    fig.add_layout(Legend(items=[LegendItem(label=lab, renderers=[r]) for lab, r in zip(labels, rs)],
                          orientation="horizontal"), "above")
    return theme.style(fig)


def _no_data_html(what: str, why: str) -> str:
    return (f"<div style=\"{theme.PANEL_CSS}{theme.MUTED_CSS}padding:8px\">No {html.escape(what)} data: "
            f"{html.escape(why)}.</div>")


# -- widget ----------------------------------------------------------------------------------------
class StepTraceView(traitlets.HasTraits, View):
    """Notebook step-trace view of a `Profile` (or a `Cluster`: adds one stacked bar per rank for the
    selected step). ``step`` (int, 0 = average) is the linkable state; ``.widget`` is the ipywidget: the step
    picker, the selection's chart, the averages and the stages per step, and folded below them (built when
    first opened, `trends`) one trend per stage. ``.trend_fold`` is that fold (None without step trace)."""

    step = traitlets.Int(AVERAGE)
    # what it reads of a Profile (of a Cluster's first rank): its frames dict holds these keys
    FRAMES = ("step_trace", "step_trace_average", "step_trace_reduce", "step_point_info")

    @staticmethod
    def report_layout(prof):
        """The report's section of a `Profile`: the static step-trace chart (with its step selector)."""
        return step_trace_figure(prof.step_trace, prof.step_stages, prof.step_trace_average,
                                 reduce_df=prof.step_trace_reduce, point_info=prof.step_point_info)

    def __init__(self, prof_or_frames, step: int = AVERAGE):
        super().__init__()
        from jupyter_bokeh import BokehModel
        from ..schema import step_stages
        self.cluster = prof_or_frames if hasattr(prof_or_frames, "ranks") else None
        prof = self.cluster[self.cluster.ranks[0]] if self.cluster is not None else prof_or_frames
        if isinstance(prof, dict):  # the short names of earlier versions ("average", "reduce", "point_info")
            prof = {**{k: prof.get(k.replace("step_trace_", "").replace("step_", "")) for k in self.FRAMES},
                    **prof}
        frames = frames_of(prof, self.FRAMES)
        self.steps, self.average = frames["step_trace"], frames["step_trace_average"]
        self.reduce, self.point_info = frames["step_trace_reduce"], frames["step_point_info"]
        self.stages = step_stages(self.steps) if self.steps is not None else []
        self.empty = self.steps is None or self.steps.empty or not self.stages
        self._segments = None if self.empty else step_segments(self.steps, self.stages, self.average, self.reduce)
        self._sources, self._marker, self._detail, self._points = {}, None, None, None
        self._head = self._head_model = self.trend_fold = self._trends = None
        if self.empty:
            layout = step_trace_figure(self.steps, self.stages)
        else:
            p = _figure_parts(self.steps, self.stages, self.average, AVERAGE, self.reduce, self.point_info,
                              self._segments)
            self._sources = {"step_trace_selected_src": p["sel_src"], "step_trace_steps_src": p["steps_src"]}
            self._marker, self._detail, self._points = p["marker"], p["detail"], p["points"]
            # The chart of the selection (and the FP/BP operator names above it) in a Bokeh widget of its
            # own: jupyter_bokeh sends later changes as patches, which a notebook's saved widget state never
            # sees (it keeps the widget's first snapshot), so `_on_step` re-snapshots this small part at each
            # step. Each part has its own stylesheet (a Bokeh model belongs to one document).
            head = [m for m in (p["points"], p["detail"]) if m is not None]
            self._head = theme.themed(column(*head, sizing_mode="stretch_width", name="step_trace_head"))
            self._head_model = BokehModel(self._head)
            layout = theme.themed(column(p["avg"], p["bars"], sizing_mode="stretch_width",
                                         name="step_trace_layout"))
            # The trends (a chart per stage, ~40 ms each to build and send) wait in a fold until opened.
            self._trend_holder = W.VBox([], layout=W.Layout(width="100%"))
            labels = ", ".join(theme.stage_label(s) for s in self.stages)
            self.trend_fold = W.Accordion(children=[self._trend_holder], selected_index=None,
                                          titles=(f"Each stage across steps ({labels})",),
                                          layout=W.Layout(width="100%"))
            self.trend_fold.observe(lambda ch: ch["new"] == 0 and self._open_trends(), names="selected_index")
        parts = []
        if not self.empty:
            opts = [(label, int(v)) for v, label in _selection_options(self.steps)]
            self.selector = W.Dropdown(options=opts, value=AVERAGE, description="Step",
                                       layout=W.Layout(width="220px"))
            self.selector.observe(lambda ch: setattr(self, "step", ch["new"]), names="value")
            parts.append(self.selector)
        self._rank_model = None
        if self.cluster is not None:
            self._rank_model = BokehModel(self._rank_figure(AVERAGE))
            parts.append(self._rank_model)
        if self._head_model is not None:
            parts.append(self._head_model)
        parts.append(BokehModel(layout))
        if self.trend_fold is not None:
            parts.append(self.trend_fold)
        self.widget = W.VBox(parts, layout=W.Layout(width="100%"))
        if step:
            self.step = step

    def trends(self):
        """The Bokeh layout of the folded trends (`trend_grid`, on a source of their own: a Bokeh model
        belongs to one document), built on first use; None without step trace."""
        if self._trends is None and not self.empty:
            src = _source(step_percent_frame(self.steps, self.stages), "step_trace_trend_src")
            self._trends = theme.themed(trend_grid(src, self.stages))
        return self._trends

    def _open_trends(self) -> None:
        """Show the trends in their fold (the fold was opened)."""
        if not self._trend_holder.children:
            from jupyter_bokeh import BokehModel
            self._trend_holder.children = [BokehModel(self.trends())]

    def _rank_figure(self, step):
        return cluster_step_figure(rank_frame(self.cluster, step), step=step)

    @traitlets.validate("step")
    def _check_step(self, proposal):
        s = int(proposal["value"])
        if s != AVERAGE and (self.empty or s not in set(self.steps["step"])):
            raise traitlets.TraitError(f"no step {s} in this step trace")
        return s

    @traitlets.observe("step")
    def _on_step(self, change):
        s = change["new"]
        if self.empty:
            return
        if self.selector.value != s:
            self.selector.value = s
        seg = self._segments[self._segments["sel"] == s]
        self._sources["step_trace_selected_src"].data = {c: seg[c].to_numpy() for c in SEGMENT_COLUMNS}
        if isinstance(self.point_info, list) and self._points is not None:
            self._points.text = point_info_text(self.point_info, s)
        self._marker.location = s if s else -1e9
        self._detail.title.text = _detail_title(s, seg)
        # what a saved notebook keeps of the chart: its snapshot, renewed to the step the picker shows
        self._head_model.update_from_model(self._head)
        if self._rank_model is not None:
            self._rank_model.update_from_model(self._rank_figure(s))

    @property
    def detail_title(self) -> str:
        """The title of the selection's chart ("Average: total ... ms", "Step 5: total ... ms")."""
        return "" if self._detail is None else self._detail.title.text

    def step_window_ms(self, step: int | None = None) -> tuple[float, float] | None:
        """(start_ms, end_ms) of a step on the step trace's own clock, or None (average / no points)."""
        s = self.step if step is None else step
        if not s or self.empty or "start_ms" not in self.steps or "end_ms" not in self.steps:
            return None
        hit = self.steps[self.steps["step"] == s]
        return (float(hit["start_ms"].iloc[0]), float(hit["end_ms"].iloc[0])) if len(hit) else None

