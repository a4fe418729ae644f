"""Where the device waited for the host (`nbprofiler.analysis.dispatch`): the finding's sentence, a bar per
step of the device idle the host caused (beside all device idle of the step), the host ops whose launches
the device waited for, and the longest single waits with the host call and framework op behind each.

Clicking a step's bar or a wait's row sets ``DispatchView.window`` (the step's window, or the gap and the
task after it, on the timeline's clock); the dashboard moves the timeline there. In the report the same click
opens the Timeline tab at that window (`link_to_timeline`, CustomJS).
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import traitlets
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, DataTable, Div, HoverTool, NumberFormatter, TableColumn, TapTool
from bokeh.plotting import figure

from ..analysis.dispatch import Dispatch, host_dispatch, profile_dispatch
from . import theme
from .base import LayoutView
from .pages import frames_of

# The longest single waits listed (each a row that opens the timeline at the gap).
LONGEST_WAITS = 30
# Around a wait opened on the timeline, this share of the window's width is shown on each side.
WINDOW_PAD = 0.25
IDLE_COLOR, HOST_COLOR = "#BBBBBB", "#E69F00"


def _ms(us) -> np.ndarray:
    return np.asarray(us, dtype=float) / 1000.0


def headline_div(d: Dispatch) -> Div:
    """The analysis's sentence and how it was measured (escaped)."""
    how = ("" if not d.available else
           f"<p style='{theme.MUTED_CSS}'>Host-bound idle: the device idle (no task on any stream) before a task "
           f"whose launch came after the device ran out of work (within {d.tolerance_us:g} us of clock "
           f"disagreement). Steps from {html.escape(d.step_source)}. {d.launched:,} device tasks are joined to "
           f"their launch. Click a bar or a row to open the timeline there.</p>")
    return Div(text=f"<p><b>{html.escape(d.sentence())}</b></p>{how}", name="dispatch_headline",
               sizing_mode="stretch_width")


def steps_figure(d: Dispatch):
    """One bar per step: the host-bound device idle, over all device idle of the step (grey)."""
    st = d.steps
    labels = ["run" if pd.isna(s) else str(int(s)) for s in st["step"]]
    src = ColumnDataSource({"label": labels, "host_idle_ms": _ms(st["host_idle_us"]),
                            "device_idle_ms": _ms(st["device_idle_us"]), "step_ms": _ms(st["step_us"]),
                            "share_pct": st["idle_share"].to_numpy(float) * 100,
                            "waited": st["waited_tasks"].to_numpy(), "tasks": st["tasks"].to_numpy(),
                            "top_op": st["top_op"].astype(str).to_numpy(dtype=object),
                            "start_us": st["start_us"].to_numpy(float), "end_us": st["end_us"].to_numpy(float)},
                           name="dispatch_steps_src")
    fig = figure(x_range=labels, height=260, sizing_mode="stretch_width", name="dispatch_steps_fig",
                 title="Device idle per step: waiting for the host (orange) within all idle (grey)",
                 x_axis_label="Step", y_axis_label=theme.axis_label("time", "ms"), tools="tap,reset,save")
    fig.vbar(x="label", top="device_idle_ms", width=0.8, source=src, color=IDLE_COLOR, alpha=0.6,
             legend_label="device idle")
    bars = fig.vbar(x="label", top="host_idle_ms", width=0.5, source=src, color=HOST_COLOR,
                    legend_label="waiting for the host", name="dispatch_steps_bars")
    fig.add_tools(HoverTool(renderers=[bars], tooltips=[
        ("step", "@label"), ("waiting for the host", "@host_idle_ms{0,0.000} ms (@share_pct{0.0}% of the step)"),
        ("all device idle", "@device_idle_ms{0,0.000} ms"), ("step", "@step_ms{0,0.000} ms"),
        ("tasks that waited", "@waited of @tasks"), ("most idle before", "@top_op")]))
    fig.select_one(TapTool).renderers = [bars]
    fig.y_range.start = 0
    return theme.style(fig)


def ops_table(d: Dispatch) -> DataTable:
    """The ops whose launches the device waited for, most idle first."""
    ops = d.ops
    src = ColumnDataSource({"op": ops["responsible_op"].astype(str).to_numpy(dtype=object),
                            "idle_ms": _ms(ops["host_idle_us"]), "per_step_ms": _ms(ops["idle_per_step_us"]),
                            "waited": ops["waited_tasks"].to_numpy(),
                            "share": ops["share_of_host_idle"].to_numpy(float) * 100}, name="dispatch_ops_src")
    cols = [TableColumn(field="op", title="Host op (whose launch the device waited for)", width=300),
            TableColumn(field="idle_ms", title="Idle caused (ms)", formatter=NumberFormatter(format="0,0.000")),
            TableColumn(field="per_step_ms", title="Per step (ms)", formatter=NumberFormatter(format="0,0.000")),
            TableColumn(field="waited", title="Launches waited for"),
            TableColumn(field="share", title="% of host-bound idle", formatter=NumberFormatter(format="0.0"))]
    return DataTable(source=src, columns=cols, sortable=True, index_position=None, height=220,
                     sizing_mode="stretch_width", name="dispatch_ops_table")


def waits_table(d: Dispatch, n: int = LONGEST_WAITS) -> DataTable:
    """The longest single waits: the task, its launch and the host call and framework op behind it."""
    w = d.longest_waits(n)   # their rows alone: the frame of every launched task is not made for them
    text = lambda c: w[c].astype(str).to_numpy(dtype=object)  # noqa: E731
    src = ColumnDataSource({"step": ["" if pd.isna(s) else str(int(s)) for s in w["step"]],
                            "task": text("task"), "stream": text("stream"), "host_op": text("host_op"),
                            "framework_op": text("framework_op"), "idle_us": w["host_idle_us"].to_numpy(float),
                            "latency_us": w["launch_latency_us"].to_numpy(float),
                            "start_ms": _ms(w["task_start_us"]),
                            "t0": (w["task_start_us"] - w["gap_us"]).to_numpy(float),
                            "t1": w["task_end_us"].to_numpy(float)}, name="dispatch_waits_src")
    num = lambda f: NumberFormatter(format=f)  # noqa: E731
    cols = [TableColumn(field="step", title="Step", width=50),
            TableColumn(field="idle_us", title="Device idle before (us)", formatter=num("0,0.0")),
            TableColumn(field="task", title="Device task", width=220),
            TableColumn(field="framework_op", title="Framework op", width=160),
            TableColumn(field="host_op", title="Host call (launch)", width=200),
            TableColumn(field="latency_us", title="Launch latency (us)", formatter=num("0,0.0")),
            TableColumn(field="start_ms", title="Task start (ms)", formatter=num("0,0.000")),
            TableColumn(field="stream", title="Stream", width=160)]
    return DataTable(source=src, columns=cols, sortable=True, index_position=None, height=260,
                     sizing_mode="stretch_width", name="dispatch_waits_table")


def dispatch_layout(d: Dispatch):
    """The view's layout: the headline alone when the analysis is not available."""
    parts = [headline_div(d)]
    if d.available:
        parts += [steps_figure(d), Div(text="<b>Host ops the device waited for</b>"), ops_table(d),
                  Div(text=f"<b>The longest waits</b> (top {LONGEST_WAITS})"), waits_table(d)]
    return theme.themed(column(*parts, sizing_mode="stretch_width", name="dispatch_layout"))


# A static page (the report): a clicked bar or row opens the Timeline tab at its window. BokehJS 3 keeps
# ColumnDataSource data in a Map.
_OPEN_TIMELINE_JS = """
const i = cb_obj.indices;
if (!i.length) return;
const col = (c) => (src.data.get ? src.data.get(c) : src.data[c]);
const a = col(lo)[i[0]], b = col(hi)[i[0]], p = (b - a) * pad;
x_range.start = a - p; x_range.end = b + p;
if (tabs !== null && tab >= 0) { tabs.active = tab; }
"""


def link_to_timeline(find, x_range, tabs=None, tab_index: int = -1) -> int:
    """In a static page, make a click on a step's bar or a wait's row show its window on the timeline whose
    x range is ``x_range`` (opening ``tabs``' tab ``tab_index``), as `DispatchView.window` does in the
    dashboard. ``find(name)``: the page's model of that name. Returns how many sources were linked."""
    from bokeh.models import CustomJS
    linked = 0
    for name, lo, hi, pad in (("dispatch_steps_src", "start_us", "end_us", 0.0),
                              ("dispatch_waits_src", "t0", "t1", WINDOW_PAD)):
        src = find(name)
        if src is not None:
            src.selected.js_on_change("indices", CustomJS(
                args=dict(src=src, lo=lo, hi=hi, pad=pad, x_range=x_range, tabs=tabs, tab=tab_index),
                code=_OPEN_TIMELINE_JS))
            linked += 1
    return linked


class DispatchView(traitlets.HasTraits, LayoutView):
    """``DispatchView.from_profile(prof)`` or ``DispatchView(dict(timeline=..., timeline_tracks=...,
    timeline_flows=..., step_windows=...))``. ``window`` is the (t0_us, t1_us) last clicked (a step, or a wait
    with the task after it), on the timeline's clock."""

    window = traitlets.Tuple(default_value=())
    FRAMES = ("timeline", "timeline_tracks", "timeline_flows", "step_windows")  # what it reads of a Profile

    @staticmethod
    def report_layout(prof):
        """The report's section of a `Profile`."""
        return dispatch_layout(profile_dispatch(prof))

    def __init__(self, prof_or_frames):
        super().__init__()
        if hasattr(prof_or_frames, "cached"):   # a Profile: its analysis, computed once for every face
            self.dispatch = profile_dispatch(prof_or_frames)
        else:
            self.dispatch = host_dispatch(*frames_of(prof_or_frames, self.FRAMES).values())
        self.layout = dispatch_layout(self.dispatch)
        for name, handler in (("dispatch_steps_src", self._on_step), ("dispatch_waits_src", self._on_wait)):
            src = self.layout.select_one({"name": name})
            if src is not None:
                src.selected.on_change("indices", handler)

    def _on_step(self, attr, old, new):
        if new:
            src = self.layout.select_one({"name": "dispatch_steps_src"})
            self.window = (float(src.data["start_us"][new[0]]), float(src.data["end_us"][new[0]]))

    def _on_wait(self, attr, old, new):
        if new:
            src = self.layout.select_one({"name": "dispatch_waits_src"})
            t0, t1 = float(src.data["t0"][new[0]]), float(src.data["t1"][new[0]])
            pad = (t1 - t0) * WINDOW_PAD
            self.window = (t0 - pad, t1 + pad)


def has_dispatch(prof) -> bool:
    """Whether the profile has device tasks joined to host launches (the page's data rule)."""
    return profile_dispatch(prof).available


def why_not(prof) -> str | None:
    """Why the profile has no host-dispatch view (None: it has one)."""
    return profile_dispatch(prof).why


__all__ = ["headline_div", "steps_figure", "ops_table", "waits_table", "dispatch_layout", "link_to_timeline",
           "DispatchView", "has_dispatch", "why_not"]
