"""FLOPs view: the run's FLOPs figures and an icicle of floating-point work by name scope (width = share
of all operators' MFLOPs, one row per scope level, colour = utilisation where the files give it), over a
table of the operators. Figure factories take the ``flops`` frame and the ``flops_summary`` dict."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
from bokeh.layouts import column
from bokeh.models import (ColorBar, ColumnDataSource, DataTable, Div, HoverTool, LinearColorMapper,
                          NumberFormatter, TableColumn)
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from ..analysis import flops as A
from . import theme
from .base import LayoutView
from .pages import frames_of

ROW_HEIGHT = 34


def figures_div(figures: dict, ops: pd.DataFrame) -> Div:
    cells = []
    if "total_mflops" in figures:
        cells.append(("Total FLOPs", f"{figures['total_mflops']:,.3f} MFLOPs"))
    if not np.isnan(figures.get("gflops_per_s", np.nan)):
        cells.append(("FLOPS", f"{figures['gflops_per_s']:,.3f} GFLOPS"))
    if not np.isnan(figures.get("utilization_pct", np.nan)):
        cells.append(("FLOPS utilisation", f"{figures['utilization_pct']:.2f} %"))
    cells.append(("Operators with FLOPs", f"{int((ops['mflops'] > 0).sum()):,}"))
    body = "".join(f'<div style="display:inline-block;min-width:160px;margin:0 18px 6px 0">'
                   f'<div style="{theme.MUTED_CSS}font-size:11px">{html.escape(k)}</div>'
                   f'<div style="font-size:18px;font-weight:600">{html.escape(v)}</div></div>' for k, v in cells)
    return Div(text=f'<div style="{theme.PANEL_CSS}">{body}</div>', name="flops_figures",
               sizing_mode="stretch_width")


def icicle_figure(rollup: pd.DataFrame, utilization: pd.Series | None = None):
    """Scopes as rectangles: x = share of MFLOPs (children inside their parent), y = depth (top level
    first). Labels only where the rectangle is wide enough to hold them; full names on hover."""
    depth = int(rollup["depth"].max()) + 1 if len(rollup) else 1
    fig = figure(height=max(160, depth * ROW_HEIGHT + 70), sizing_mode="stretch_width", x_range=(0, 100),
                 y_range=(depth, 0), title="FLOPs by name scope (width = share of MFLOPs)",
                 tools="xwheel_zoom,xpan,reset,save", active_scroll="xwheel_zoom", name="flops_icicle",
                 x_axis_label="share of all operators' MFLOPs (%)")
    data = rollup.copy()
    data["left"], data["right"] = data["x0"] * 100, data["x1"] * 100
    data["bottom"], data["top"] = data["depth"] + 0.95, data["depth"] + 0.05
    data["label"] = [n if (r - l) > 0.9 * len(n) else "" for n, l, r in zip(data["name"], data["left"], data["right"])]
    data["label_x"] = data["left"] + 0.3
    data["label_y"] = data["depth"] + 0.5
    util = (utilization.reindex(data["scope"]).to_numpy(float) if utilization is not None
            else np.full(len(data), np.nan))
    data["utilization_pct"] = util
    src = ColumnDataSource({c: data[c].tolist() for c in ["scope", "name", "mflops", "share_pct", "ops", "left",
                                                           "right", "bottom", "top", "label", "label_x",
                                                           "label_y", "utilization_pct"]},
                           name="flops_icicle_src")
    if np.isfinite(util).any():
        mapper = LinearColorMapper(palette=Viridis256, low=0, high=max(1.0, float(np.nanmax(util))),
                                   nan_color="#bbbbbb")
        fill = {"field": "utilization_pct", "transform": mapper}
        fig.add_layout(ColorBar(color_mapper=mapper, width=10, title="utilisation %"), "right")
    else:
        fill = "#56B4E9"
    fig.quad(left="left", right="right", bottom="bottom", top="top", source=src, fill_color=fill,
             line_color="white", fill_alpha=0.9)
    fig.text(x="label_x", y="label_y", text="label", source=src, text_font_size="11px", text_baseline="middle")
    fig.add_tools(HoverTool(tooltips=[("scope", "@scope"), ("MFLOPs", "@mflops{0,0.000}"),
                                      ("share", "@share_pct{0.00} %"), ("operators", "@ops"),
                                      ("utilisation", "@utilization_pct{0.00} %")]))
    fig.yaxis.visible = False
    return theme.style(fig, legend=False)


def op_table(ops: pd.DataFrame, height: int = 260) -> DataTable:
    """The operators, most MFLOPs first; the operator (the name's last part) apart from its scope, so
    the distinguishing end of a long name is always visible."""
    ops = ops.sort_values("mflops", ascending=False, kind="stable")
    scope, _, op = ops["op_name"].str.rpartition("/").T.to_numpy() if len(ops) else ([], [], [])
    src = ColumnDataSource({"op": list(op), "scope": list(scope), "mflops": ops["mflops"].astype(float).tolist(),
                            "utilization_pct": ops["utilization_pct"].astype(float).tolist()},
                           name="flops_ops_src")
    cols = [TableColumn(field="op", title="Operator", width=220),
            TableColumn(field="mflops", title="MFLOPs", formatter=NumberFormatter(format="0,0.000"), width=100),
            TableColumn(field="utilization_pct", title="Utilisation (%)", formatter=NumberFormatter(format="0.00"),
                        width=100),
            TableColumn(field="scope", title="Scope", width=600)]
    return DataTable(source=src, columns=cols, sortable=True, index_position=None, height=height,
                     sizing_mode="stretch_width", name="flops_ops_table")


def _scope_utilization(ops: pd.DataFrame, rollup: pd.DataFrame) -> pd.Series:
    """MFLOPs-weighted mean utilisation of the operators under each scope."""
    ops = ops[ops["utilization_pct"].notna() & (ops["mflops"] > 0)]
    out = {}
    for scope in rollup["scope"]:
        under = ops[(ops["op_name"] == scope) | ops["op_name"].str.startswith(scope + "/")]
        if len(under):
            out[scope] = float(np.average(under["utilization_pct"], weights=under["mflops"]))
    return pd.Series(out, dtype=float)


def flops_layout(flops: pd.DataFrame, flops_summary: dict | None):
    ops = A.op_flops(flops)
    rollup = A.scope_rollup(flops)
    parts = [figures_div(A.summary_figures(flops_summary, flops), ops)]
    if not len(ops) and flops_summary:
        parts.append(Div(text=f"<div style='{theme.MUTED_CSS}'>These figures are the run's own summary "
                              "(flops_summary_*.json); no per-operator FLOPs (flops_*.txt) were recorded, so "
                              "there is no breakdown by operator or name scope.</div>",
                         sizing_mode="stretch_width", name="flops_summary_only"))
    if len(rollup):
        parts.append(icicle_figure(rollup, _scope_utilization(ops, rollup)))
        parts.append(op_table(ops))
    return theme.themed(column(*parts, sizing_mode="stretch_width", name="flops_layout"))


class FlopsView(LayoutView):
    """``FlopsView.from_profile(prof)``, or ``FlopsView(frames)`` with a dict of `FRAMES` (or
    ``(flops_df, flops_summary)``): ``.widget``, ``.display()``."""

    FRAMES = ("flops", "flops_summary")   # what it reads of a Profile

    @staticmethod
    def report_layout(prof):
        """The report's section of a `Profile`."""
        return flops_layout(prof.flops, prof.flops_summary)

    def __init__(self, prof_or_frames):
        frames = frames_of(prof_or_frames, self.FRAMES)
        self.flops, self.flops_summary = frames["flops"], frames["flops_summary"]
        self.layout = flops_layout(self.flops, self.flops_summary)


__all__ = ["figures_div", "icicle_figure", "op_table", "flops_layout", "FlopsView"]
