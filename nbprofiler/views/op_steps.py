"""Operators per step: each top operator type's time across the steps (one line per type), and, for the
step clicked on the chart, that step's operator executions with their input shapes; below, the kernels
grouped by type and input shape where the files carry shapes.

Clicking a point sets ``OpStepsView.step`` (the dashboard links it to the step-trace and timeline views);
in a standalone HTML file the same click filters the step table with CustomJS on named sources.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import traitlets
from bokeh.layouts import column
from bokeh.models import (BooleanFilter, CDSView, ColumnDataSource, CustomJS, DataTable, Div, HoverTool,
                          NumberFormatter, TableColumn, TapTool)
from bokeh.plotting import figure

from ..analysis import op_steps as A
from . import theme
from .base import LayoutView
from .pages import frames_of

TOP_TYPES = 8
# Per step, the longest executions shipped to the page: enough to find what made a step slow, few enough
# that a run of thousands of steps stays a page the browser opens at once.
OPS_PER_STEP = 50

_TAP_JS = """
const i = points.selected.indices;
if (!i.length) return;
const step = points.data.step[i[0]];
const steps = ops.data.step;
filter.booleans = Array.from(steps, (s) => s === step);
ops.change.emit();
title.text = 'Step ' + step + ': its longest operator executions';
"""


def _ms(us: float) -> float:
    return float(us) / 1000.0


def steps_figure(by_step: pd.DataFrame, types: list[str]):
    """One line per operator type (time per step in ms), points clickable."""
    steps = np.sort(by_step["step"].unique())
    fig = figure(height=300, sizing_mode="stretch_width", title="Operator time per step (top types)",
                 x_axis_label="step", y_axis_label=theme.axis_label("time", "ms"), tools="pan,wheel_zoom,reset,save",
                 name="op_steps_chart")
    colors = theme.op_type_colors(types)
    points = {"step": [], "op_type": [], "time_ms": [], "count": [], "color": []}
    for op_type, color in zip(types, colors):
        rows = by_step[by_step["op_type"] == op_type].set_index("step").reindex(steps)
        time_ms = rows["total_time_us"].fillna(0).to_numpy(float) / 1000
        fig.line(steps, time_ms, color=color, line_width=2, legend_label=op_type)
        points["step"] += steps.tolist()
        points["op_type"] += [op_type] * len(steps)
        points["time_ms"] += time_ms.tolist()
        points["count"] += rows["count"].fillna(0).astype(int).tolist()
        points["color"] += [color] * len(steps)
    src = ColumnDataSource(points, name="op_steps_points")
    glyph = fig.scatter("step", "time_ms", color="color", size=7, source=src)
    fig.add_tools(HoverTool(renderers=[glyph], tooltips=[("step", "@step"), ("type", "@op_type"),
                                                         ("time", "@time_ms{0,0.000} ms"), ("calls", "@count")]),
                  TapTool(renderers=[glyph]))
    if len(steps) <= 20:
        fig.xaxis.ticker = steps.tolist()
    theme.style(fig)
    fig.legend.click_policy = "hide"
    fig.add_layout(fig.legend[0], "right")  # beside the lines, never over them
    return fig, src


def step_ops_table(step_ops: pd.DataFrame, first_step: int):
    data = {"step": step_ops["step"].astype(int).tolist(), "name": step_ops["name"].astype(str).tolist(),
            "op_type": step_ops["op_type"].astype(str).tolist(),
            "dur_ms": (step_ops["dur_us"].to_numpy(float) / 1000).tolist(),
            "start_ms": (step_ops["start_us"].to_numpy(float) / 1000).tolist(),
            "input_shapes": step_ops["input_shapes"].astype(object).where(step_ops["input_shapes"].notna(), "")
            .astype(str).tolist()}
    src = ColumnDataSource(data, name="op_steps_ops")
    filt = BooleanFilter([s == first_step for s in data["step"]])
    cols = [TableColumn(field="name", title="Operator", width=260),
            TableColumn(field="op_type", title="Type", width=140),
            TableColumn(field="dur_ms", title="Duration (ms)", formatter=NumberFormatter(format="0,0.000"), width=100),
            TableColumn(field="start_ms", title="Start (ms)", formatter=NumberFormatter(format="0,0.000"), width=100),
            TableColumn(field="input_shapes", title="Input shapes", width=320)]
    table = DataTable(source=src, view=CDSView(filter=filt), columns=cols, sortable=True, index_position=None,
                      height=240, sizing_mode="stretch_width", name="op_steps_table")
    return table, src, filt


def shapes_table(by_shape: pd.DataFrame):
    data = {c: by_shape[c].astype(object).where(by_shape[c].notna(), "").tolist()
            for c in ("op_type", "input_shapes")}
    data.update(count=by_shape["count"].astype(int).tolist(),
                total_ms=(by_shape["total_time_us"].to_numpy(float) / 1000).tolist(),
                avg_ms=(by_shape["avg_time_us"].to_numpy(float) / 1000).tolist(),
                percent=by_shape["percent"].astype(float).tolist())
    cols = [TableColumn(field="op_type", title="Type", width=160),
            TableColumn(field="input_shapes", title="Input shapes", width=360),
            TableColumn(field="count", title="Calls", width=70),
            TableColumn(field="total_ms", title="Total (ms)", formatter=NumberFormatter(format="0,0.000"), width=100),
            TableColumn(field="avg_ms", title="Average (ms)", formatter=NumberFormatter(format="0,0.000"), width=100),
            TableColumn(field="percent", title="%", formatter=NumberFormatter(format="0.00"), width=70)]
    return DataTable(source=ColumnDataSource(data, name="op_shapes_src"), columns=cols, sortable=True,
                     index_position=None, height=240, sizing_mode="stretch_width", name="op_shapes_table")


def op_steps_layout(frames: dict):
    """The per-step chart with its step table and the by-shape table, linked by CustomJS. ``frames``
    holds ``step_windows``, ``kernels``, ``timeline``, ``timeline_tracks`` (any may be None)."""
    by_step = A.op_time_by_step(frames.get("step_windows"), kernels=frames.get("kernels"),
                                timeline=frames.get("timeline"), tracks=frames.get("timeline_tracks"))
    by_shape = A.ops_by_input_shape(frames.get("kernels"))
    parts = []
    if len(by_step):
        steps = by_step["step"].nunique()
        parts.append(Div(text=f'<div style="{theme.MUTED_CSS}">{steps:,} steps; '
                              f'{html.escape(str(by_step.attrs.get("source")))}. Click a point for that step\'s '
                              f'operators.</div>', name="op_steps_source", sizing_mode="stretch_width"))
        fig, points = steps_figure(by_step, A.top_types_over_steps(by_step, TOP_TYPES))
        first = int(by_step["step"].min())
        step_ops = A.step_operators(frames.get("step_windows"), kernels=frames.get("kernels"),
                                    timeline=frames.get("timeline"), tracks=frames.get("timeline_tracks"),
                                    per_step=OPS_PER_STEP)
        table, ops_src, filt = step_ops_table(step_ops, first)
        title = Div(text=f"Step {first}: its longest operator executions", name="op_steps_table_title",
                    render_as_text=True)
        points.selected.js_on_change("indices", CustomJS(args=dict(points=points, ops=ops_src, filter=filt,
                                                                   title=title), code=_TAP_JS))
        parts += [fig, title, table]
    if len(by_shape):
        parts += [Div(text="<b>Operators by input shape</b>", name="op_shapes_title"), shapes_table(by_shape)]
    if not parts:
        return None
    return theme.themed(column(*parts, sizing_mode="stretch_width", name="op_steps_layout"))


class OpStepsView(traitlets.HasTraits, LayoutView):
    """``OpStepsView.from_profile(prof)`` or ``OpStepsView(dict(step_windows=..., kernels=..., timeline=...,
    timeline_tracks=...))``. ``step`` is the step last clicked on the chart (0: none)."""

    step = traitlets.Int(0)
    FRAMES = ("step_windows", "kernels", "timeline", "timeline_tracks")  # what it reads of a Profile

    @classmethod
    def report_layout(cls, prof):
        """The report's section of a `Profile`."""
        return op_steps_layout(frames_of(prof, cls.FRAMES))

    def __init__(self, prof_or_frames):
        super().__init__()
        self.frames = frames_of(prof_or_frames, self.FRAMES)
        self.layout = op_steps_layout(self.frames)
        if self.layout is None:
            raise ValueError("no operator can be placed in a step (no kernel step ids, or no timeline and "
                             "step windows on one clock) and no kernel carries input shapes")
        points = self.layout.select_one({"name": "op_steps_points"})
        if points is not None:
            points.selected.on_change("indices", self._on_tap)

    def _on_tap(self, attr, old, new):
        points = self.layout.select_one({"name": "op_steps_points"})
        if new:
            self.step = int(points.data["step"][new[0]])


def has_op_steps(prof) -> bool:
    """Whether `OpStepsView` has anything to show for ``prof`` (without building the timeline when the
    kernels answer)."""
    k = prof.kernels
    if len(k) and (("step" in k and k["step"].notna().any()) or "input_shapes" in k):
        return True
    windows = prof.step_windows
    return windows is not None and len(windows) > 0 and not prof.timeline.empty


__all__ = ["steps_figure", "step_ops_table", "shapes_table", "op_steps_layout", "OpStepsView", "has_op_steps"]
