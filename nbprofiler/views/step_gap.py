"""Where the time between steps goes (MindInsight's "Operator Time Consumption Analysis" under Step
Interval): per step, how long the host took to get a batch from the pipeline and push it to the device
(``host_queue``: ``get_ms``, ``push_ms``, ``batch_ms``), and how long the device's GetNext waited for data
(``device_queue.get_next_ms``). The averages in the titles are `analysis.minddata.queue_summary`'s, the
numbers the overview and the summary show.
"""
from __future__ import annotations

import pandas as pd
from bokeh.layouts import row
from bokeh.models import ColumnDataSource, HoverTool, NumeralTickFormatter
from bokeh.plotting import figure

from . import theme

TRANSFER_SERIES = (("batch_ms", "total", "#0072B2"), ("get_ms", "get from pipeline", "#E69F00"),
                   ("push_ms", "push to device", "#009E73"))


def _avg(value) -> str:
    return "–" if value is None else f"{value:,.3f} ms"


# Sources are built from the frames' arrays: ColumnDataSource(frame) goes through narwhals (imported on first
# use) and copies the frame, tens of ms for a few steps.
def _figure(name: str, title: str, n_steps: int):
    fig = figure(name=name, title=title, height=240, sizing_mode="stretch_width", min_width=320, max_width=800,
                 tools="xpan,xwheel_zoom,reset,save", x_axis_label="Step",
                 y_axis_label=theme.axis_label("time", "ms"))
    if n_steps <= 20:
        fig.xaxis.ticker = list(range(1, n_steps + 1))
    return fig


def transfer_figure(host_queue: pd.DataFrame, summary: dict):
    """Host-side batch time per step (total, get, push); title = MindInsight's averages."""
    df = host_queue[["step", "get_ms", "push_ms", "batch_ms"]].astype(float)
    fig = _figure("step_gap_transfer_fig", f"Data transmission per step: average total "
                  f"{_avg(summary.get('host_avg_batch_ms'))}, get {_avg((summary.get('host_queue') or {}).get('avg_get_ms'))}, "
                  f"push {_avg(summary.get('host_avg_push_ms'))}", len(df))
    src = ColumnDataSource({c: df[c].to_numpy() for c in df.columns}, name="step_gap_transfer_src")
    lines = []
    for col, label, color in TRANSFER_SERIES:
        lines.append(fig.line("step", col, source=src, color=color, line_width=2, legend_label=label))
        fig.scatter("step", col, source=src, color=color, size=4, legend_label=label)  # a 1-step run shows too
    fig.add_tools(HoverTool(renderers=lines[:1], mode="vline",
                            tooltips=[("step", "@step{0}"), ("total", "@batch_ms{0,0.000} ms"),
                                      ("get", "@get_ms{0,0.000} ms"), ("push", "@push_ms{0,0.000} ms")]))
    theme.style(fig)
    fig.add_layout(fig.legend[0], "right")
    return fig


def get_next_figure(device_queue: pd.DataFrame, summary: dict):
    """The device's GetNext time per record (one per step); title = its average."""
    df = pd.DataFrame({"step": device_queue["index"].astype(int) + 1,
                       "get_next_ms": device_queue["get_next_ms"].astype(float)})
    fig = _figure("step_gap_get_next_fig", f"Data obtaining (GetNext) per step: average "
                  f"{_avg(summary.get('device_avg_get_next_ms'))}", len(df))
    src = ColumnDataSource({c: df[c].to_numpy() for c in df.columns}, name="step_gap_get_next_src")
    fig.line("step", "get_next_ms", source=src, color="#0072B2", line_width=2)
    r = fig.scatter("step", "get_next_ms", source=src, color="#0072B2", size=6)
    fig.add_tools(HoverTool(renderers=[r], tooltips=[("step", "@step"), ("GetNext", "@get_next_ms{0,0.000} ms")]))
    fig.yaxis.formatter = NumeralTickFormatter(format="0,0.[0000]")  # microsecond waits: 0.0002 ms, not 2e-4
    fig.y_range.start = 0
    return theme.style(fig, legend=False)


def step_gap_figures(host_queue: pd.DataFrame | None, device_queue: pd.DataFrame | None, summary: dict):
    """A row of the figures the frames allow (None when neither has timing)."""
    figs = []
    if host_queue is not None and len(host_queue) and host_queue["batch_ms"].notna().any():
        figs.append(transfer_figure(host_queue, summary))
    if device_queue is not None and len(device_queue) and device_queue["get_next_ms"].notna().any():
        figs.append(get_next_figure(device_queue, summary))
    return row(*figs, sizing_mode="stretch_width", name="step_gap_row") if figs else None


__all__ = ["transfer_figure", "get_next_figure", "step_gap_figures"]
