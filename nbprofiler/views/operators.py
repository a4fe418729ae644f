"""Operators view: per device kind, the operator-type share as a pie or bar chart (top N, the rest folded
into "Other") above a sortable, searchable operator table; clicking a type in the chart filters the table.

Figure factories take DataFrames (``prof.op_types``, ``prof.ops``) and return Bokeh models that work in a
standalone HTML file: the pie/bar toggle, the search box (case-insensitive substring over operator name
and type) and click-to-filter are CustomJS on named sources, and the table's columns sort by header
click. `OperatorsView` is the notebook widget: top N is an ipywidgets control, and the linking API
``set_type_filter(op_type)`` / ``set_step(step)`` re-fills the same sources from Python.

The frames keep microseconds (``_us`` columns); the page shows every time in one unit, `UNIT` (ms, as
the dashboard's other operator tables and the step trace do): table columns, hover and axes alike, with
up to six decimals so a sub-microsecond average still reads. ``percent`` is 0..100 of the kind's total time.
"""
from __future__ import annotations

import re

import math

import ipywidgets as W
import numpy as np
import pandas as pd
import traitlets
from bokeh.layouts import column, row
from bokeh.models import (Button, ColumnDataSource, CustomJS, DataTable, Div, HoverTool, NumberFormatter,
                          RadioButtonGroup, Select, TableColumn, TabPanel, Tabs, TapTool, TextInput)
from bokeh.plotting import figure

from ..analysis import operators as A
from ..schema import OP_KINDS
from . import theme
from .base import View
from .pages import frames_of

OTHER = "Other"     # the folded row of analysis.operators.top_types
ALL_TYPES = ""          # type filter value meaning "every type"
TABLE_COLUMNS = ["op_name", "op_type", "total_time_us", "count", "avg_time_us"]
TYPE_COLUMNS = ["op_type", "total_time_us", "count", "avg_time_us", "percent"]
# The one time unit of the operators page (table, hover, axis) and its size in microseconds.
UNIT, UNIT_US = "ms", 1e3
TIME_FORMAT = "0,0.000[000]"   # numbro: three decimals, up to six where they are not zeros


# -- data preparation ------------------------------------------------------------------------------
def top_types(op_types_df: pd.DataFrame, kind: str, top_n: int = 20) -> pd.DataFrame:
    """`nbprofiler.analysis.operators.top_types` reduced to the chart's columns: ``op_type``,
    ``total_time_us``, ``count``, ``avg_time_us``, ``percent`` (0..100 of the kind's total time); the
    folded rest is the ``"Other"`` row."""
    out = A.top_types(op_types_df, kind, top_n)
    return out[TYPE_COLUMNS].reset_index(drop=True)


def filter_ops(ops_df: pd.DataFrame, search: str = "", op_type: str | None = None,
               top: list[str] | None = None) -> pd.DataFrame:
    """Rows whose ``op_name`` or ``op_type`` contains ``search`` (case-insensitive substring) and, if
    ``op_type`` is given, of that type; ``"Other"`` means any type not in ``top`` (the chart's types)."""
    if op_type == OTHER:
        ops_df = ops_df[~ops_df["op_type"].isin(top or [])]
        op_type = None
    return A.filter_ops(ops_df, op_type=op_type or None, search=search or None)


def sort_ops(ops_df: pd.DataFrame, by: str = "total_time_us", descending: bool = True) -> pd.DataFrame:
    """Sorted copy, missing values last (default as MindInsight: execution time descending)."""
    return A.sort_ops(ops_df, by, descending)


def step_ops(kernels_df: pd.DataFrame, step: int) -> pd.DataFrame:
    """The operators of one step from the ``kernels`` frame (which carries ``step``), in the ``ops``
    layout: ``kind`` ("npu"), ``op_name``, ``op_type``, ``total_time_us`` (sum of ``dur_us``), ``count``,
    ``avg_time_us`` and, where the kernels say, ``accelerator_core``; sorted by total time descending."""
    k = kernels_df[kernels_df["step"] == step]
    keys = ["name", "type"] + (["accelerator_core"] if "accelerator_core" in k.columns else [])
    g = k.groupby(keys, sort=False, observed=True)["dur_us"].agg(["sum", "count"]).reset_index()
    out = pd.DataFrame({"kind": "npu", "op_name": g["name"].astype(str), "op_type": g["type"].astype(str),
                        "total_time_us": g["sum"].astype(float), "count": g["count"].astype("int64")})
    if "accelerator_core" in g.columns:
        out["accelerator_core"] = g["accelerator_core"].astype(str).to_numpy()
    out["avg_time_us"] = out["total_time_us"] / out["count"]
    return sort_ops(out).reset_index(drop=True)


def core_kind(core) -> str:
    """The panel key of NPU operators that ran on accelerator core ``core``: ``AI_VECTOR_CORE`` ->
    ``npu_ai_vector_core`` (its tab reads "NPU · AI Vector Core"); a core the file leaves out (N/A)
    -> ``npu_unknown``."""
    key = re.sub(r"[^a-z0-9]+", "_", str(core).strip().lower()).strip("_")
    return "npu_" + (key if key not in ("", "n_a", "nan", "none") else "unknown")


def split_by_core(op_types_df: pd.DataFrame, ops_df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Where the NPU operators ran on several accelerator cores: ``ops`` with each NPU row's ``kind``
    re-keyed by its core (`core_kind`), and ``op_types`` with the NPU types regrouped from those rows per
    core (``percent`` of that core's time; a type on two cores is in both tabs). Else both unchanged."""
    if ops_df.empty or "accelerator_core" not in ops_df.columns:
        return op_types_df, ops_df
    npu = ops_df["kind"] == "npu"
    keys = ops_df.loc[npu, "accelerator_core"].map(core_kind)
    if keys.nunique() < 2:
        return op_types_df, ops_df
    ops = ops_df.copy()
    ops.loc[npu, "kind"] = keys
    g = (ops[npu].groupby(["kind", "op_type"], observed=True)
         .agg(total_time_us=("total_time_us", "sum"), count=("count", "sum")).reset_index())
    g["avg_time_us"] = g["total_time_us"] / g["count"].astype("float64")
    g["percent"] = g["total_time_us"] / g.groupby("kind")["total_time_us"].transform("sum") * 100
    g["file_percent"] = float("nan")
    types = pd.concat([op_types_df[op_types_df["kind"] != "npu"], g], ignore_index=True)
    return types, ops


def panel_kinds(op_types_df: pd.DataFrame, ops_df: pd.DataFrame) -> list[str]:
    """The operator panels in display order: the device kinds present in `OP_KINDS` order, the NPU's
    cores (after `split_by_core`) in its place, busiest first."""
    present = set(op_types_df["kind"].dropna()) | set(ops_df["kind"].dropna())
    cores = (op_types_df[op_types_df["kind"].astype(str).str.startswith("npu_")]
             .groupby("kind")["total_time_us"].sum().sort_values(ascending=False).index.tolist())
    out = []
    for k in OP_KINDS:
        out += cores if k == "npu" else []
        if k in present:
            out.append(k)
    return out


def pie_angles(types_df: pd.DataFrame) -> pd.DataFrame:
    """`top_types` rows plus ``start_angle``/``end_angle`` (radians, clockwise from 12 o'clock, by
    share of total time), ``color`` (stable per type), ``label`` ("MatMul 57.4%") and the times in the
    page's `UNIT`: ``total_time``, ``avg_time``."""
    df = types_df.copy()
    share = df["total_time_us"] / df["total_time_us"].sum() if df["total_time_us"].sum() else 0.0 * df["total_time_us"]
    ends = math.pi / 2 - 2 * math.pi * np.cumsum(np.asarray(share, float))
    df["end_angle"] = ends
    df["start_angle"] = np.concatenate([[math.pi / 2], ends[:-1]])
    df["color"] = theme.op_type_colors(df["op_type"])
    df["label"] = df["op_type"].astype(str) + " " + df["percent"].map("{:.1f}%".format)
    df["total_time"] = df["total_time_us"].astype(float) / UNIT_US
    df["avg_time"] = df["avg_time_us"].astype(float) / UNIT_US
    return df


def _table_data(df: pd.DataFrame, whole_us: float | None = None) -> dict:
    """The table's columns: the frame's (``op_name``, ``op_type``, times in us, ``count``) plus what is
    shown: ``op`` (the name's last part, the end that tells operators apart), ``scope`` (the rest),
    ``total_time`` / ``avg_time`` (in the page's `UNIT`) and ``percent`` (0..100 of ``whole_us``, default
    the rows' own total time)."""
    out = {c: df[c].to_numpy() if c in df else np.full(len(df), np.nan) for c in TABLE_COLUMNS}
    out["count"] = pd.to_numeric(pd.Series(out["count"]), errors="coerce").astype(float).to_numpy()
    out["op_name"] = df["op_name"].astype(str).to_numpy()
    out["op_type"] = df["op_type"].astype(str).to_numpy()
    scope, _, op = (pd.Series(out["op_name"], dtype=str).str.rpartition("/").T.to_numpy()
                    if len(df) else (np.array([], str),) * 3)
    out["op"], out["scope"] = op, scope
    total = np.asarray(out["total_time_us"], dtype=float)
    out["total_time"] = total / UNIT_US
    out["avg_time"] = np.asarray(out["avg_time_us"], dtype=float) / UNIT_US
    whole = np.nansum(total) if whole_us is None else whole_us
    out["percent"] = total / whole * 100 if whole > 0 else np.full(len(total), np.nan)
    return out


# -- figures ---------------------------------------------------------------------------------------
def _type_data(op_types_df, kind, top_n) -> dict:
    """The chart's columns (`pie_angles` of `top_types`) as arrays: a frame given to ``ColumnDataSource``
    goes through Bokeh's DataFrame path (narwhals, imported on first use, and a conversion per column),
    ~0.1 s of the tab's first open."""
    df = pie_angles(top_types(op_types_df, kind, top_n))
    return {str(c): df[c].to_numpy() for c in df.columns}


def _type_source(op_types_df, kind, top_n) -> ColumnDataSource:
    return ColumnDataSource(_type_data(op_types_df, kind, top_n), name=f"op_types_src_{kind}")


def op_type_chart(op_types_df: pd.DataFrame, kind: str, top_n: int = 20, mode: str = "pie",
                  source: ColumnDataSource | None = None):
    """Pie (``mode="pie"``) or horizontal bar (``"bar"``) chart of one kind's top-N operator types by
    total time, the rest as "Other". Hover shows total, count, average (in `UNIT`) and percent. The data
    source is named ``op_types_src_<kind>``; pass ``source`` to share one between pie and bar."""
    src = source or _type_source(op_types_df, kind, top_n)
    title = f"{theme.kind_label(kind)} operator types by total time (top {top_n})"
    hover = HoverTool(tooltips=[("type", "@op_type"), ("total", f"@total_time{{{TIME_FORMAT}}} {UNIT}"),
                                ("count", "@count"), ("average", f"@avg_time{{{TIME_FORMAT}}} {UNIT}"),
                                ("share", "@percent{0.00} %")])
    if mode == "pie":
        tap = TapTool()
        # A fixed square frame keeps the pie round; the legend sits outside, to its right.
        fig = figure(frame_width=300, frame_height=300, title=title, tools=[hover, tap, "save"],
                     x_range=(-1.05, 1.05), y_range=(-1.05, 1.05), name=f"op_pie_{kind}")
        # Wedges a click did not pick stay readable (Bokeh's default fades them to 0.2).
        wedges = fig.wedge(x=0, y=0, radius=1.0, start_angle="end_angle", end_angle="start_angle",
                           fill_color="color", line_color="white", line_width=1, source=src,
                           nonselection_fill_alpha=0.4, nonselection_line_alpha=0.6, name=f"op_pie_wedges_{kind}")
        # The legend is drawn from a zero-size glyph on its own source: BokehJS drops the swatches of a
        # legend whose renderer's source has a selection (a click on a wedge emptied the legend).
        legend_src = ColumnDataSource({"color": list(src.data["color"]), "label": list(src.data["label"])},
                                      name=f"op_types_legend_src_{kind}")
        fig.rect(x=0, y=0, width=0, height=0, fill_color="color", line_color=None, legend_field="label",
                 source=legend_src)
        hover.renderers = [wedges]
        tap.renderers = [wedges]
        fig.axis.visible = False
        fig.grid.visible = False
        theme.style(fig)
        legend = fig.legend[0]
        fig.center.remove(legend)
        fig.add_layout(legend, "right")
        legend.label_text_font_size = "11px"
        legend.spacing = 1
        legend.glyph_height = 12
        legend.glyph_width = 12
        return fig
    if mode != "bar":
        raise ValueError(f"mode must be 'pie' or 'bar', not {mode!r}")
    types = src.data["op_type"]
    fig = figure(y_range=list(reversed(list(types))), height=max(220, 22 * len(types) + 80),
                 sizing_mode="stretch_width", title=title, tools=[hover, "tap", "save"],
                 x_axis_label=theme.axis_label("Total time", UNIT), name=f"op_bar_{kind}")
    fig.hbar(y="op_type", right="total_time", height=0.75, fill_color="color", line_color=None, source=src)
    return theme.style(fig)


def op_table(ops_df: pd.DataFrame, kind: str = "", height: int = 360) -> DataTable:
    """Sortable operator table (click a header to sort) on a source named ``op_table_src[_<kind>]``:
    operator (the name's last part), type, total time and its % of the kind's, count, average time (both
    times in the page's `UNIT`, as its chart's hover and axis), scope; default order total time
    descending. Cells are rendered as text by Bokeh (no HTML)."""
    suffix = f"_{kind}" if kind else ""
    src = ColumnDataSource(_table_data(sort_ops(ops_df)), name=f"op_table_src{suffix}")
    num = NumberFormatter(format=TIME_FORMAT)
    # The operator (the name's end, which tells operators apart) first; its scope last, where a long
    # path may be cut without hiding which operator the row is.
    cols = [TableColumn(field="op", title="Operator", width=220),
            TableColumn(field="op_type", title="Type", width=150),
            TableColumn(field="total_time", title=f"Total time ({UNIT})", formatter=num, width=110),
            TableColumn(field="percent", title="%", formatter=NumberFormatter(format="0.00"), width=60),
            TableColumn(field="count", title="Count", formatter=NumberFormatter(format="0,0"), width=70),
            TableColumn(field="avg_time", title=f"Average time ({UNIT})", formatter=num, width=120),
            TableColumn(field="scope", title="Scope", width=420)]
    # each column at least as wide as its title; the table still fits its width (the scope gives way)
    return theme.fit_headers(DataTable(source=src, columns=cols, sortable=True, index_position=None, height=height,
                                       sizing_mode="stretch_width", name=f"op_table{suffix}"), scroll=False)


_FILTER_JS = """
const q = search.value_input !== undefined && search.value_input !== null ? search.value_input : search.value;
const needle = (q || '').toLowerCase();
const want = type_select.value;
const top = new Set(types.data.op_type);
const d = all.data, n = d.op_name.length, out = {};
for (const k of Object.keys(d)) out[k] = [];
for (let i = 0; i < n; i++) {
  const name = String(d.op_name[i]), type = String(d.op_type[i]);
  const typeOk = want === '' || (want === 'Other' ? !top.has(type) : type === want);
  const textOk = needle === '' || name.toLowerCase().includes(needle) || type.toLowerCase().includes(needle);
  if (typeOk && textOk) for (const k of Object.keys(d)) out[k].push(d[k][i]);
}
table_src.data = out;
count.text = out.op_name.length + ' of ' + n + ' operators' + (want ? ' of type ' : '');
count_type.text = want === 'Other' ? 'Other (not in the chart)' : want;
clear.visible = want !== '';
"""

_CLEAR_JS = """
type_select.value = '';
types.selected.indices = [];
"""

_TAP_JS = """
const i = types.selected.indices;
type_select.value = i.length ? String(types.data.op_type[i[0]]) : '';
"""


def operators_panel(op_types_df: pd.DataFrame, ops_df: pd.DataFrame, kind: str, top_n: int = 20,
                    mode: str = "pie"):
    """One kind's chart (pie/bar toggle) above its searchable, sortable table, linked by CustomJS:
    clicking a type (or choosing it in the "Type" select, name ``op_type_filter_<kind>``) filters the
    table; the search box (``op_search_<kind>``) matches name or type, case-insensitively. Returns a
    Bokeh column."""
    return _panel(op_types_df, ops_df, kind, top_n, mode)[0]


def _panel(op_types_df: pd.DataFrame, ops_df: pd.DataFrame, kind: str, top_n: int = 20, mode: str = "pie",
           both_charts: bool = True) -> tuple:
    """`operators_panel` and its named models by name (what a view links, without a search of the layout).
    Without ``both_charts`` only the chart of ``mode`` is built and the toggle has no CustomJS: the view
    builds the other chart when the toggle first asks for it (`OperatorsView`)."""
    types_src = _type_source(op_types_df, kind, top_n)
    charts = {m: op_type_chart(op_types_df, kind, top_n, m, types_src) if both_charts or m == mode else None
              for m in ("pie", "bar")}
    pie, bar = charts["pie"], charts["bar"]
    for m, fig in charts.items():
        if fig is not None:
            fig.visible = mode == m
    toggle = RadioButtonGroup(labels=["Pie", "Bar"], active=0 if mode == "pie" else 1, name=f"op_chart_mode_{kind}")
    if both_charts:
        toggle.js_on_change("active", CustomJS(args=dict(pie=pie, bar=bar),
                                               code="pie.visible = cb_obj.active === 0; bar.visible = cb_obj.active === 1;"))
    kind_ops = ops_df[ops_df["kind"] == kind] if "kind" in ops_df else ops_df
    table = op_table(kind_ops, kind)
    all_src = ColumnDataSource(dict(table.source.data), name=f"op_all_src_{kind}")
    search = TextInput(placeholder="search operator name or type (case-insensitive)", width=360,
                       name=f"op_search_{kind}")
    type_select = Select(title="", value=ALL_TYPES, width=220, name=f"op_type_filter_{kind}",
                         options=[(ALL_TYPES, "all types")] + [(t, t) for t in sorted(set(kind_ops["op_type"].astype(str)))]
                         + [(OTHER, "Other (not in chart)")])
    count = Div(text=f"{len(kind_ops)} of {len(kind_ops)} operators", name=f"op_count_{kind}")
    # Shown as Div text, never HTML: a type name is user data.
    count_type = Div(text="", name=f"op_count_type_{kind}", render_as_text=True)
    # The type filter a wedge click set is shown, with a button that removes it: a search never stays
    # silently limited to one type.
    clear = Button(label="✕ all types", width=100, visible=False, name=f"op_type_clear_{kind}")
    clear.js_on_click(CustomJS(args=dict(type_select=type_select, types=types_src), code=_CLEAR_JS))
    args = dict(search=search, type_select=type_select, types=types_src, all=all_src,
                table_src=table.source, count=count, count_type=count_type, clear=clear)
    refilter = CustomJS(args=args, code=_FILTER_JS)
    search.js_on_change("value_input", refilter)
    search.js_on_change("value", refilter)
    type_select.js_on_change("value", refilter)
    types_src.selected.js_on_change("indices", CustomJS(args=dict(types=types_src, type_select=type_select),
                                                        code=_TAP_JS))
    panel = column(toggle, *[c for c in (pie, bar) if c is not None],
                   row(search, type_select, count, count_type, clear), table,
                   sizing_mode="stretch_width", name=f"op_panel_{kind}")
    models = [panel, toggle, pie, bar, types_src, table, table.source, all_src, search, type_select, count,
              count_type, clear, *_legend_sources(pie)]
    return panel, {m.name: m for m in models if m is not None}


def _legend_sources(pie) -> list:
    """The pie's legend source (``op_types_legend_src_<kind>``), read off its renderers."""
    if pie is None:
        return []
    return [r.data_source for r in pie.renderers
            if (r.data_source.name or "").startswith("op_types_legend_src_")]


def operators_layout(op_types_df: pd.DataFrame, ops_df: pd.DataFrame, kinds: list[str] | None = None,
                     top_n: int = 20, mode: str = "pie"):
    """One tab per device kind present (AI Core, AI CPU, CPU, GPU, NPU: one per accelerator core where its
    operators ran on several, communication apart), each an `operators_panel`."""
    if kinds is None:
        op_types_df, ops_df = split_by_core(op_types_df, ops_df)
        kinds = panel_kinds(op_types_df, ops_df)
    if not kinds:
        return Div(text=f"<div style=\"{theme.PANEL_CSS}{theme.MUTED_CSS}\">No operator data.</div>",
                   name="operators_empty")
    tabs = [TabPanel(child=operators_panel(op_types_df, ops_df, k, top_n, mode), title=theme.kind_label(k))
            for k in kinds]
    return theme.themed(Tabs(tabs=tabs, sizing_mode="stretch_width", name="operators_tabs"))


# -- widget ----------------------------------------------------------------------------------------
class OperatorsView(traitlets.HasTraits, View):
    """Notebook operators view of a `Profile`. ``top_n`` (int) re-folds the charts; ``type_filter``
    (str, "" = all) and ``step`` (int or None) are the linkable state, set with `set_type_filter` /
    `set_step`; a click on a chart type updates ``type_filter`` through jupyter_bokeh. The first tab's panel
    is built with the view, each other tab's when it is first shown, the chart the toggle did not start on
    when it is first asked for (the toggle goes through the kernel here, not CustomJS as in the report)."""

    top_n = traitlets.Int(20)
    type_filter = traitlets.Unicode(ALL_TYPES)
    step = traitlets.Int(None, allow_none=True)
    FRAMES = ("op_types", "ops", "kernels")   # what it reads of a Profile; its frames dict holds these keys

    @staticmethod
    def report_layout(prof):
        """The report's section of a `Profile`: charts and searchable tables (CustomJS)."""
        return operators_layout(prof.op_types, prof.ops)

    def __init__(self, prof_or_frames, top_n: int = 20, mode: str = "pie"):
        super().__init__()
        from jupyter_bokeh import BokehModel
        frames = frames_of(prof_or_frames, self.FRAMES)
        self.op_types, self.ops, self.kernels = frames["op_types"], frames["ops"], frames["kernels"]
        # a Profile: a selected operator's call stacks can be looked up (built on the first selection)
        self._prof = None if isinstance(prof_or_frames, (dict, tuple, list)) else prof_or_frames
        self.set_trait("top_n", top_n)
        # NPU operators that ran on several accelerator cores get a tab per core (kind npu_<core>)
        self.op_types, self.ops = split_by_core(self.op_types, self.ops)
        self.kinds = panel_kinds(self.op_types, self.ops)
        self.kind = self.kinds[0] if self.kinds else None
        self._mode = mode
        self._named: dict = {}
        self._built: set[str] = set()
        if not self.kinds:
            self.layout = operators_layout(self.op_types, self.ops, self.kinds, top_n, mode)
        else:
            # The first tab's panel is built now; each other tab's, and the bar chart, when first shown
            # (a chart costs ~40 ms to build and send, a panel ~0.1 s).
            self._tab_panels = [TabPanel(child=self._panel(k) if i == 0 else Div(text="", name=f"op_panel_{k}"),
                                         title=theme.kind_label(k)) for i, k in enumerate(self.kinds)]
            self.layout = theme.themed(Tabs(tabs=self._tab_panels, sizing_mode="stretch_width",
                                            name="operators_tabs"))
            self._named["operators_tabs"] = self.layout
            self.layout.on_change("active", lambda attr, old, new: self._on_tab(new))
        self.top_control = W.BoundedIntText(value=top_n, min=1, max=500, description="Top N",
                                            layout=W.Layout(width="160px"))
        self.top_control.observe(lambda ch: setattr(self, "top_n", ch["new"]), names="value")
        self.step_note = W.HTML("")
        self.source_panel = W.HTML("", layout=W.Layout(width="100%"))   # `show_source`: a selected row's stack
        self.widget = W.VBox([W.HBox([self.top_control, self.step_note]), BokehModel(self.layout),
                              self.source_panel], layout=W.Layout(width="100%"))

    def _panel(self, kind: str):
        """Build the panel of ``kind`` (its chart in the view's mode, its table at the view's state)."""
        panel, models = _panel(self.op_types, self.ops, kind, self.top_n, self._mode, both_charts=False)
        self._named.update(models)
        self._built.add(kind)
        models[f"op_type_filter_{kind}"].on_change("value", self._on_js_filter)
        models[f"op_chart_mode_{kind}"].on_change("active", lambda attr, old, new: self._on_chart_mode(kind, new))
        models[f"op_table_src_{kind}"].selected.on_change("indices", lambda attr, old, new: self._on_row(kind, new))
        if self.step is not None:
            self._refill(kind)
        return panel

    def _ensure(self, kind: str) -> None:
        """Build the panel of ``kind`` into its tab if it is not yet."""
        if kind in self.kinds and kind not in self._built:
            self._tab_panels[self.kinds.index(kind)].child = theme.themed(self._panel(kind))

    def _on_tab(self, i: int) -> None:
        self._ensure(self.kinds[i])
        self.kind = self.kinds[i]

    def _on_chart_mode(self, kind: str, active: int) -> None:
        """Show the pie (``active`` 0) or the bar chart (1) of ``kind``, building the chart on first use."""
        mode = "pie" if active == 0 else "bar"
        chart = self._named.get(f"op_{mode}_{kind}")
        if chart is None:
            chart = theme.themed(op_type_chart(self.op_types, kind, self.top_n, mode,
                                               self._named[f"op_types_src_{kind}"]))
            chart.visible = False
            self._named[chart.name] = chart
            self._named.update({src.name: src for src in _legend_sources(chart if mode == "pie" else None)})
            panel = self._named[f"op_panel_{kind}"]
            panel.children = [*panel.children[:1], chart, *panel.children[1:]]
        for m in ("pie", "bar"):
            fig = self._named.get(f"op_{m}_{kind}")
            if fig is not None:
                fig.visible = m == mode

    def _model(self, name):
        """The named model ``name`` of the layout (its tab's panel, or the bar chart, built if it is not yet)."""
        kind = max((k for k in self.kinds if name.endswith("_" + k)), key=len, default=None)
        if kind is not None:
            self._ensure(kind)
            for m in ("pie", "bar"):
                if name == f"op_{m}_{kind}" and name not in self._named:
                    mode = self._named[f"op_chart_mode_{kind}"]
                    mode.active = 0 if m == "pie" else 1   # as a click on the toggle
        return self._named.get(name)

    def _on_js_filter(self, attr, old, new):
        if new != self.type_filter:
            self.type_filter = new

    def _kind_ops(self, kind) -> pd.DataFrame:
        if self.step is not None and self.kernels is not None and "step" in self.kernels and kind.startswith("npu"):
            ops = step_ops(self.kernels, self.step)
            if kind != "npu":
                ops = ops.assign(kind=ops["accelerator_core"].map(core_kind))
            return ops[ops["kind"] == kind]
        return self.ops[self.ops["kind"] == kind]

    def visible_ops(self, kind: str | None = None) -> pd.DataFrame:
        """The rows the table of ``kind`` (default: the current tab) shows, as computed in Python."""
        kind = kind or self.kind
        types = self._model(f"op_types_src_{kind}").data["op_type"]
        search = self._model(f"op_search_{kind}").value or ""
        return sort_ops(filter_ops(self._kind_ops(kind), search, self.type_filter or None, list(types)))

    def _refill(self, kind):
        kind_ops = self._kind_ops(kind)
        whole = float(kind_ops["total_time_us"].sum())
        self._model(f"op_all_src_{kind}").data = _table_data(sort_ops(kind_ops), whole)
        rows = self.visible_ops(kind)
        self._model(f"op_table_src_{kind}").data = _table_data(rows, whole)
        self._model(f"op_count_{kind}").text = f"{len(rows)} of {len(self._kind_ops(kind))} operators"

    def show_operator(self, name: str) -> bool:
        """Search the table of the kind that has an operator named ``name`` (or ending in it: a trace
        event carries the short name of a scoped operator) for it; False when no kind has it."""
        for kind in self.kinds:
            ops = self._kind_ops(kind)
            names = ops["op_name"].astype(str)
            if (names == name).any() or names.str.endswith("/" + name).any():
                self.select_kind(kind)
                self._model(f"op_search_{kind}").value = name
                self._refill(kind)
                return True
        return False

    def _on_row(self, kind: str, indices) -> None:
        if self._prof is not None and len(indices):
            self.show_source(str(self._named[f"op_table_src_{kind}"].data["op_name"][indices[0]]))

    def show_source(self, name: str):
        """Show where operator ``name`` was called from in the Source panel below the table (the `OpSource`
        of `nbprofiler.analysis.source.op_source`, which it returns; None for a view built from frames)."""
        if self._prof is None:
            return None
        from ..analysis.source import op_source
        from .source import source_html
        found = op_source(self._prof, name)
        self.source_panel.value = source_html(found)
        return found

    def select_kind(self, kind: str) -> None:
        """Show the tab of device kind ``kind`` (``ai_core``, ``cpu``, ...; ``npu`` is the busiest core's
        tab where NPU operators have a tab per core)."""
        if kind == "npu" and kind not in self.kinds:
            kind = next((k for k in self.kinds if k.startswith("npu_")), kind)
        if kind not in self.kinds:
            raise ValueError(f"no {kind!r} operators here; kinds: {self.kinds}")
        self._ensure(kind)
        self.kind = kind
        self.layout.active = self.kinds.index(kind)

    def set_type_filter(self, op_type: str | None):
        """Show only operators of ``op_type`` in the current tab's table (None or "" = all types)."""
        self.type_filter = op_type or ALL_TYPES

    def set_step(self, step: int | None):
        """Limit the table to one step's operators where the data has step ids (kernels' ``step``);
        elsewhere the table keeps the whole run and a note says why."""
        self.step = step

    @traitlets.observe("type_filter")
    def _on_type_filter(self, change):
        if self.kind is None:
            return
        sel = self._model(f"op_type_filter_{self.kind}")
        if sel.value != change["new"]:
            sel.value = change["new"]
        self._refill(self.kind)

    @traitlets.observe("step")
    def _on_step(self, change):
        has_steps = self.kernels is not None and "step" in self.kernels and self.kernels["step"].notna().any()
        if change["new"] is not None and not has_steps:
            self.step_note.value = (f"<span style=\"{theme.MUTED_CSS}\">Step {int(change['new'])} selected: this "
                                    "profile's operator data has no step ids, so the table shows the whole run."
                                    "</span>")
        else:
            self.step_note.value = "" if change["new"] is None else \
                f"<span style=\"{theme.MUTED_CSS}\">NPU table limited to step {int(change['new'])}.</span>"
        for k in self.kinds:
            if k in self._built:   # the others are filled when built
                self._refill(k)

    @traitlets.observe("top_n")
    def _on_top_n(self, change):
        for k in self.kinds:
            if k not in self._built:   # built with the new top N when shown
                continue
            types = _type_data(self.op_types, k, change["new"])
            self._named[f"op_types_src_{k}"].data = types
            legend = self._named.get(f"op_types_legend_src_{k}")
            if legend is not None:
                legend.data = {"color": types["color"].tolist(), "label": types["label"].tolist()}
            bar = self._named.get(f"op_bar_{k}")
            if bar is not None:
                bar.y_range.factors = list(reversed(list(types["op_type"])))
            self._refill(k)

