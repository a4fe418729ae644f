"""Many runs side by side (`nbprofiler.compare_many` / `compare(a, b, c, ...)`): the headline table, one
trend chart per headline number across the runs (in the order given: a sweep reads left to right), and
each run's verdict against the baseline. Figure factories take the `RunSet`'s DataFrames."""
from __future__ import annotations

import html
import math

import pandas as pd
from bokeh.layouts import column, gridplot
from bokeh.models import (ColumnDataSource, DataTable, Div, FactorRange, HoverTool, NumberFormatter,
                          NumeralTickFormatter, TableColumn)
from bokeh.plotting import figure

from ..analysis.runs import HEADLINE
from . import theme
from .base import LayoutView

LINE = "#0072B2"


def _finite(values) -> list:
    """Plain floats with NaN as None's stand-in BokehJS draws as a gap (NaN)."""
    return [float(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) else float("nan")
            for v in values]


def headline_table(headline: pd.DataFrame, change_pct: pd.DataFrame) -> DataTable:
    """One row per run: the headline numbers with their change against the baseline (%)."""
    numbers = [c for c in HEADLINE if headline[c].notna().any()]
    data = {"run": [f"{r} (baseline)" if b else str(r) for r, b in zip(headline["run"], headline["baseline"])],
            "steps": headline["steps"].astype(int).tolist(),
            "bottleneck_ops": headline["bottleneck_ops"].astype(str).tolist(),
            "top_op_type": headline["top_op_type"].astype(str).tolist(),
            "top_op_type_pct": _finite(headline["top_op_type_pct"])}
    cols = [TableColumn(field="run", title="Run", width=260), TableColumn(field="steps", title="Steps", width=50)]
    for c in numbers:
        data[c] = _finite(headline[c])
        data[f"{c}_change"] = _finite(change_pct[c])
        cols.append(TableColumn(field=c, title=HEADLINE[c][0], width=150, formatter=NumberFormatter(format="0,0.000")))
        cols.append(TableColumn(field=f"{c}_change", title="vs baseline (%)", width=90,
                                formatter=NumberFormatter(format="+0,0.0")))
    cols += [TableColumn(field="bottleneck_ops", title="MindData bottleneck", width=160),
             TableColumn(field="top_op_type", title="Longest op type", width=160),
             TableColumn(field="top_op_type_pct", title="Its share (%)", formatter=NumberFormatter(format="0.0"),
                         width=100)]
    src = ColumnDataSource(data, name="runs_headline_src")
    # one column per headline number and its change: wider than a cell, so it scrolls sideways, each
    # column as wide as its title ("Host queue empty (% of steps)", not "Host queue e")
    return theme.fit_headers(DataTable(source=src, columns=cols, height=min(400, 28 * len(headline) + 40),
                                       sizing_mode="stretch_width", index_position=None,
                                       name="runs_headline_table"))


def trend_figures(headline: pd.DataFrame) -> list:
    """One small chart per headline number that some run holds, runs on the x axis in the given order,
    each on its own scale (a 0.2 ms step interval is not flattened by a 200 ms step)."""
    runs = headline["run"].astype(str).tolist()
    figs = []
    for c, (label, _) in HEADLINE.items():
        if not headline[c].notna().any():
            continue
        src = ColumnDataSource({"run": runs, "value": _finite(headline[c]),
                                "role": ["baseline" if b else "" for b in headline["baseline"]]},
                               name=f"runs_trend_{c}_src")
        fig = figure(x_range=FactorRange(*runs), height=220, sizing_mode="stretch_width", title=label,
                     tools="save", name=f"runs_trend_{c}", toolbar_location=None)
        fig.line("run", "value", source=src, color=LINE, line_width=2)
        fig.scatter("run", "value", source=src, color=LINE, size=8)
        fig.add_tools(HoverTool(tooltips=[("run", "@run @role"), (label, "@value{0,0.000}")]))
        fig.y_range.start = 0
        fig.yaxis.formatter = NumeralTickFormatter(format="0,0.[000]")
        fig.xaxis.major_label_orientation = 0.5 if len(runs) > 4 else 0
        figs.append(theme.style(fig, legend=False))
    return figs


def verdicts_div(verdicts: pd.DataFrame, baseline: str) -> Div:
    """Each run's verdict against the baseline, escaped."""
    items = "".join(f"<li><b>{html.escape(str(r.run))}</b>: {html.escape(str(r.verdict))}</li>"
                    for r in verdicts.itertuples())
    return Div(text=f'<div style="{theme.PANEL_CSS}">Against the baseline <b>{html.escape(baseline)}</b>:'
                    f'<ul style="margin:4px 0">{items}</ul></div>',
               name="runs_verdicts", sizing_mode="stretch_width")


def runs_layout(runset):
    """The whole `RunSet` as one Bokeh layout (notebook or `file_html`)."""
    figs = trend_figures(runset.headline)
    parts = [verdicts_div(runset.verdicts, runset.baseline), headline_table(runset.headline, runset.change_pct)]
    if figs:
        parts.append(gridplot(figs, ncols=min(3, len(figs)), sizing_mode="stretch_width", merge_tools=False,
                              toolbar_location=None))
    return column(*parts, sizing_mode="stretch_width", name="runs_layout")


class RunSetView(LayoutView):
    """Widget for a `RunSet` (or a list of runs: ``RunSetView([a, b, c])``): ``.widget``, ``.display()``."""

    def __init__(self, runset_or_runs, **kwargs):
        if isinstance(runset_or_runs, (list, tuple)):
            from ..analysis.runs import compare_many
            runset_or_runs = compare_many(runset_or_runs, **kwargs)
        self.runset = runset_or_runs
        self.layout = runs_layout(runset_or_runs)


__all__ = ["headline_table", "trend_figures", "verdicts_div", "runs_layout", "RunSetView"]
