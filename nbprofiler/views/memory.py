"""Memory view: the headline figures (peak allocated and reserved memory, what stayed allocated, the
allocations never released), what is alive at the peak (`analysis.memory_peak`: the sentence, the split by
allocator component, the operators alive), the allocator's usage curves on the timeline's clock with each
curve's peak marked, the peak curve stacked by component, the CANN modules' reserved memory
(``npu_module_mem``) on the same axis, and the operator allocation table (size, allocated at, released at,
lifetime; sortable, searchable). Selecting a time range on the curve (box select) narrows the table to the allocations alive
in it and sets ``MemoryView.window``, which the dashboard uses to move the timeline there.

Figure factories take the ``memory`` and ``operator_memory`` frames (or a user's filtered copies) and
work in a standalone HTML file: filtering is CustomJS on named sources.
"""
from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import traitlets
from bokeh.events import SelectionGeometry
from bokeh.layouts import column, row
from bokeh.models import (BoxSelectTool, ColumnDataSource, CustomJS, DataTable, Div, HoverTool, LabelSet,
                          LinearAxis, NumberFormatter, Range1d, Span, TableColumn, TextInput)
from bokeh.plotting import figure

from ..analysis import memory as M
from ..analysis import memory_peak as MP
from . import theme
from .base import LayoutView
from .pages import frames_of

CURVE_COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8E44AD", "#7F3B08"]


def _time(us: float) -> str:
    """A time from the start of the run in the unit a person reads at that size."""
    if abs(us) >= 1e6:
        return f"{us / 1e6:,.3f} s"
    return f"{us / 1e3:,.3f} ms" if abs(us) >= 1e3 else f"{us:,.1f} us"


def _mb(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x / 1024:,.2f} GB" if x >= 1024 else f"{x:,.2f} MB"


def figures_div(peaks: pd.DataFrame, stats: dict) -> Div:
    """The numbers a reader looks for first, each with where it comes from; every value escaped."""
    cells = []
    if len(peaks) and peaks["peak_allocated_mb"].notna().any():
        top = peaks.iloc[0]
        cells.append(("Peak allocated", _mb(top["peak_allocated_mb"]),
                      f"{top['component']} on {top['device']}, at {_time(top['peak_allocated_at_us'])}"))
        cells.append(("Allocated at the end", _mb(top["final_allocated_mb"]), f"{top['component']}, last sample"))
    if len(peaks) and peaks["peak_reserved_mb"].notna().any():
        r = peaks.loc[peaks["peak_reserved_mb"].idxmax()]
        cells.append(("Peak reserved", _mb(r["peak_reserved_mb"]), f"{r['component']} on {r['device']}"))
    if stats:
        cells.append(("Operator allocations", f"{stats['allocations']:,}", f"{_mb(stats['total_mb'])} in total"))
        cells.append(("Never released", _mb(stats["never_released_mb"]),
                      f"{stats['never_released']:,} allocations held to the end (static memory)"))
        cells.append(("Largest allocation", _mb(stats["largest_mb"]), stats["largest_name"]))
    body = "".join(
        f'<div style="display:inline-block;min-width:170px;margin:0 18px 6px 0;vertical-align:top">'
        f'<div style="{theme.MUTED_CSS}font-size:11px">{html.escape(k)}</div>'
        f'<div style="font-size:18px;font-weight:600">{html.escape(v)}</div>'
        f'<div style="{theme.MUTED_CSS}font-size:11px;max-width:260px;overflow-wrap:anywhere">{html.escape(n)}</div></div>'
        for k, v, n in cells)
    return Div(text=f'<div style="{theme.PANEL_CSS}">{body}</div>', name="memory_figures",
               sizing_mode="stretch_width")


# Headroom above the highest line of each y axis: the peak labels (drawn level with their marker) and the
# top of the curves stay inside the plot frame.
Y_HEADROOM = 0.15
# Reserved memory this many times the largest allocated peak gets its own (right-hand) axis, whose top is
# this far above the largest reserved value: a flat pool then runs well below the allocated peak's label
# (both at the same height would put the dashed line through it).
RESERVED_OWN_AXIS = 4.0
RESERVED_AXIS_HEADROOM = 0.35


def _peak_label_side(t: float, t_min: float, t_max: float) -> tuple[str, int]:
    """(text_align, x_offset) of a peak label: towards the wider side of the time span from its marker,
    so the text stays inside the plot frame whether the peak is at the start or at the end of the run."""
    return ("left", 9) if t - t_min < (t_max - t_min) / 2 else ("right", -9)


def curve_figure(memory: pd.DataFrame, peaks: pd.DataFrame):
    """Allocated memory over time, one line per (device, component), reserved memory dashed beside it,
    each curve's allocated peak marked and labelled. Named ``memory_curve``; the x axis is µs on the
    timeline's clock, labelled in s/ms/us. Every line listed in the legend is on screen: the y ranges are
    fixed (`Range1d`) to cover each line's values with headroom for the peak labels. Reserved memory far
    above every allocated peak (a 1 GB pool holding 5 MB) is drawn against a second axis on the right
    (``extra_y_ranges["reserved"]``)."""
    fig = figure(height=320, sizing_mode="stretch_width", title="Memory over time", name="memory_curve",
                 tools="xpan,xwheel_zoom,reset,save", active_scroll="xwheel_zoom",
                 y_axis_label=theme.axis_label("Memory", "MB"), x_axis_label="time from the start of the run")
    # Selecting a time range is what this chart is for (it narrows the table and moves the timeline), so a
    # drag selects; the wheel zooms and the toolbar's pan tool pans.
    select = BoxSelectTool(dimensions="width", name="memory_range_select")
    fig.add_tools(select)
    fig.toolbar.active_drag = select
    theme.time_us_axis(fig.xaxis[0])

    def top(metric: str) -> float:
        col = memory[metric] if len(memory) and metric in memory else pd.Series(dtype=float)
        return float(col.max()) if col.notna().any() else 0.0
    alloc_top, reserved_top = top("allocated_mb"), top("reserved_mb")
    # A performance engineer reads the allocated curve for the peak, its timing and leaks (MB), and the
    # reserved pool for how much the allocator holds (here 1 GB, a near-flat step). On one linear axis a
    # 1 GB pool flattens a 5 MB curve to the bottom pixel; a log axis keeps both but squeezes the allocated
    # swing (3.2 -> 5.3 MB) into a sliver and reads differences as ratios; hiding the pool lists a line
    # that is never on screen. So the pool gets its own axis on the right, labelled as the dashed lines:
    # both keep a linear, readable scale and every listed line is on screen.
    own_axis = alloc_top > 0 and reserved_top > RESERVED_OWN_AXIS * alloc_top
    left_top = alloc_top if own_axis else max(alloc_top, reserved_top)
    fig.y_range = Range1d(0, (left_top or 1.0) * (1 + Y_HEADROOM), name="memory_y_range")
    if own_axis:
        fig.extra_y_ranges = {"reserved": Range1d(0, reserved_top * (1 + RESERVED_AXIS_HEADROOM),
                                                  name="memory_reserved_range")}
        fig.add_layout(LinearAxis(y_range_name="reserved", axis_label=theme.axis_label("Reserved, dashed", "MB"),
                                  name="memory_reserved_axis"), "right")
        fig.yaxis[0].axis_label = theme.axis_label("Allocated, solid", "MB")
    peak_rows = []
    groups = memory.sort_values("time_us", kind="stable").groupby(["device", "component"], sort=False) \
        if len(memory) else []
    t_all = memory["time_us"].to_numpy(float) if len(memory) else []
    t_min, t_max = (float(min(t_all)), float(max(t_all))) if len(t_all) else (0.0, 0.0)
    for i, ((device, comp), g) in enumerate(groups):
        color = CURVE_COLORS[i % len(CURVE_COLORS)]
        label = f"{comp} ({device})" if memory["device"].nunique() > 1 else str(comp)
        t = g["time_us"].to_numpy(float)
        for metric, dash, alpha in (("allocated_mb", "solid", 1.0), ("reserved_mb", "dashed", 0.6)):
            ts, ys = M.downsample(t, g[metric].to_numpy(float))
            if not len(ts):
                continue
            src = ColumnDataSource({"t": ts, "mb": ys, "curve": [f"{label} {metric[:-3]}"] * len(ts)},
                                   name=f"memory_{metric}_src_{i}")
            on_right = own_axis and metric == "reserved_mb"
            fig.step("t", "mb", source=src, mode="after", color=color, line_dash=dash, line_alpha=alpha,
                     line_width=2 if dash == "solid" else 1.5,
                     legend_label=f"{label}: {metric[:-3]}" + (" (right axis)" if on_right else ""),
                     **({"y_range_name": "reserved"} if on_right else {}))
        p = peaks[(peaks["device"] == device) & (peaks["component"] == comp)]
        if len(p) and pd.notna(p["peak_allocated_mb"].iloc[0]):
            at = float(p["peak_allocated_at_us"].iloc[0])
            align, dx = _peak_label_side(at, t_min, t_max)
            peak_rows.append({"t": at, "mb": float(p["peak_allocated_mb"].iloc[0]),
                              "label": f"peak {_mb(float(p['peak_allocated_mb'].iloc[0]))}", "color": color,
                              "curve": label, "align": align, "dx": dx})
    if peak_rows:
        psrc = ColumnDataSource({k: [r[k] for r in peak_rows] for k in peak_rows[0]}, name="memory_peaks_src")
        fig.scatter("t", "mb", source=psrc, size=9, color="color", marker="triangle")
        # beside the marker, towards the wider side of the run; level with it, under the y range's headroom
        fig.add_layout(LabelSet(x="t", y="mb", text="label", source=psrc, x_offset="dx", text_align="align",
                                text_baseline="middle", text_font_size="11px", text_color="color",
                                name="memory_peak_labels"))
    fig.add_tools(HoverTool(tooltips=[("curve", "@curve"), ("time", "@t{0,0.0} us"), ("memory", "@mb{0,0.000} MB")]))
    theme.style(fig)
    if fig.legend:
        fig.legend[0].click_policy = "hide"
        fig.add_layout(fig.legend[0], "right")
    return fig


def module_figure(module_mem: pd.DataFrame, x_range=None, top: int = 8):
    """Reserved memory of the CANN modules over time (``npu_module_mem``), one step line per module that
    reserves any, the ``top`` modules with the highest peak (the title says how many there are). Named
    ``memory_modules``; shares ``x_range`` with the allocator curve when given. None without data."""
    if module_mem is None or module_mem.empty or module_mem["reserved_mb"].notna().sum() == 0:
        return None
    peaks = module_mem.groupby("component")["reserved_mb"].max().sort_values(ascending=False)
    peaks = peaks[peaks > 0]  # modules that never reserved anything (most of CANN's 77) are left out
    if peaks.empty:
        return None
    shown = list(peaks.index[:top])
    more = f" (top {top} of {len(peaks)} that reserve memory)" if len(peaks) > top else ""
    fig = figure(height=260, sizing_mode="stretch_width", title=f"Memory reserved per CANN module{more}",
                 name="memory_modules", tools="xpan,xwheel_zoom,reset,save", active_scroll="xwheel_zoom",
                 y_axis_label=theme.axis_label("Reserved", "MB"), x_axis_label="time from the start of the run",
                 **({"x_range": x_range} if x_range is not None else {}))
    theme.time_us_axis(fig.xaxis[0])
    for i, comp in enumerate(shown):
        g = module_mem[module_mem["component"] == comp].sort_values("time_us", kind="stable")
        ts, ys = M.downsample(g["time_us"].to_numpy(float), g["reserved_mb"].to_numpy(float))
        src = ColumnDataSource({"t": ts, "mb": ys, "module": [str(comp)] * len(ts)}, name=f"memory_module_src_{i}")
        fig.step("t", "mb", source=src, mode="after", color=CURVE_COLORS[i % len(CURVE_COLORS)], line_width=1.8,
                 legend_label=f"{comp} (peak {_mb(float(peaks[comp]))})")
    fig.add_tools(HoverTool(tooltips=[("module", "@module"), ("time", "@t{0,0.0} us"), ("reserved", "@mb{0,0.000} MB")]))
    fig.y_range.start = 0
    theme.style(fig)
    fig.legend[0].click_policy = "hide"
    fig.add_layout(fig.legend[0], "right")
    return fig


def peak_div(peak: MP.MemoryPeak) -> Div:
    """What is alive at the memory peak: `MemoryPeak.headline` first, then the peak split by allocator
    component (operator allocations alive and the rest), the reserved memory above it and the CANN modules'
    reservations then, each line naming its file. Named ``memory_peak``; every value escaped."""
    esc = html.escape
    if not peak.available:
        body = f"<b>Memory peak</b>: not available ({esc(peak.why)})"
        return Div(text=f'<div style="{theme.PANEL_CSS}">{body}</div>', name="memory_peak",
                   sizing_mode="stretch_width")
    lines = []
    for r in peak.categories.itertuples():
        if r.category == MP.UNCATEGORISED:
            lines.append((f"{MP.mb_text(r.alive_mb)} in {r.allocations:,} operator allocations of no single component",
                          r.source))
            continue
        alive = (f"{MP.mb_text(r.alive_mb)} in {r.allocations:,} operator allocation{'s' if r.allocations != 1 else ''} "
                 f"alive" if r.allocations else "no operator allocation alive")
        lines.append((f"{r.category}: {MP.mb_text(r.allocated_mb)} allocated; {alive}; {MP.mb_text(r.unexplained_mb)} not "
                      f"explained by operator allocations (allocated before the recording, or not recorded per "
                      f"operator)", r.source))
    if not math.isnan(peak.cached_mb):
        lines.append((f"{MP.mb_text(peak.cached_mb)} reserved by the allocators but not allocated (their cache and "
                      f"fragmentation): {peak.curve} reserved {MP.mb_text(peak.reserved_mb)}",
                      "memory record: Total Reserved"))
    if not math.isnan(peak.outside_mb):
        lines.append((f"{MP.mb_text(peak.outside_mb)} reserved by the process beyond these allocators: APP reserved "
                      f"{MP.mb_text(peak.process_reserved_mb)}", "memory record: component APP"))
    if len(peak.modules):
        mods = ", ".join(f"{m.module} {MP.mb_text(m.reserved_mb)}" for m in peak.modules.itertuples())
        lines.append((f"CANN modules reserving memory then: {mods}", "npu_module_mem"))
    items = "".join(f'<li>{esc(text)} <span style="{theme.MUTED_CSS}font-size:11px">({esc(src)})</span></li>'
                    for text, src in lines)
    body = f"<b>{esc(peak.headline[0].upper() + peak.headline[1:])}.</b><ul style=\"margin:4px 0\">{items}</ul>"
    return Div(text=f'<div style="{theme.PANEL_CSS}">{body}</div>', name="memory_peak", sizing_mode="stretch_width")


def category_figure(curves: pd.DataFrame, peak: MP.MemoryPeak | None = None, x_range=None):
    """The peak curve split by allocator component over time (``memory_category_curves``): one stacked
    step area per component, their top the sum curve; the peak's moment marked. Named
    ``memory_categories``; shares ``x_range`` with the allocator curve when given. None unless the curve
    has several parts (one part is the curve itself)."""
    if curves is None or not len(curves) or curves["category"].nunique() < 2:
        return None
    wide = curves.pivot_table(index="time_us", columns="category", values="allocated_mb", sort=True)
    cats = [c for c in dict.fromkeys(curves["category"]) if c in wide.columns]
    wide = wide[cats].fillna(0.0)
    idx = M.downsample_index(wide.sum(axis=1).to_numpy(float))
    wide = wide.iloc[idx]
    # a step drawn as areas: each value held until the next sample (x repeated, y shifted by one)
    t = wide.index.to_numpy(float)
    xs = np.repeat(t, 2)[1:]
    data = {"t": xs}
    names = {}
    for i, c in enumerate(cats):
        names[c] = f"part_{i}"
        data[names[c]] = np.repeat(wide[c].to_numpy(float), 2)[:-1]
    src = ColumnDataSource(data, name="memory_categories_src")
    curve = str(curves["curve"].iloc[0])
    fig = figure(height=240, sizing_mode="stretch_width", name="memory_categories",
                 title=f"Allocated memory by component ({curve} = {' + '.join(cats)})",
                 tools="xpan,xwheel_zoom,reset,save", active_scroll="xwheel_zoom",
                 y_axis_label=theme.axis_label("Allocated", "MB"), x_axis_label="time from the start of the run",
                 **({"x_range": x_range} if x_range is not None else {}))
    theme.time_us_axis(fig.xaxis[0])
    fig.varea_stack([names[c] for c in cats], x="t", source=src,
                    color=[CURVE_COLORS[i % len(CURVE_COLORS)] for i in range(len(cats))], fill_alpha=0.75,
                    legend_label=[str(c) for c in cats])
    if peak is not None and peak.available:
        fig.add_layout(Span(location=peak.peak_at_us, dimension="height", line_color=theme.HIGHLIGHT,
                            line_dash="dashed", line_width=1.5, name="memory_categories_peak"))
    fig.add_tools(HoverTool(tooltips=[("time", "@t{0,0.0} us")] + [(str(c), f"@{names[c]}{{0,0.000}} MB")
                                                                   for c in cats]))
    fig.y_range.start = 0
    theme.style(fig)
    fig.legend[0].click_policy = "hide"
    fig.add_layout(fig.legend[0], "right")
    return fig


def peak_table(peak: MP.MemoryPeak, height: int = 240) -> DataTable | None:
    """The operators whose allocations are alive at the peak (``memory_peak_operators``), largest first:
    operator, allocations, size (MB), share of the peak (%), component. Named ``memory_peak_table`` on
    ``memory_peak_src``; None when nothing is alive."""
    ops = peak.operators
    if not peak.available or not len(ops):
        return None
    src = ColumnDataSource({"name": ops["name"].astype(str).tolist(), "allocations": ops["allocations"].tolist(),
                            "size_mb": ops["size_mb"].astype(float).tolist(),
                            "share_pct": (ops["share"].astype(float) * 100).tolist(),
                            "category": ops["category"].astype(str).tolist()}, name="memory_peak_src")
    cols = [TableColumn(field="name", title="Operator alive at the peak", width=360),
            TableColumn(field="allocations", title="Allocations", width=90),
            TableColumn(field="size_mb", title="Size (MB)", formatter=NumberFormatter(format="0,0.000"), width=90),
            TableColumn(field="share_pct", title="Of the peak (%)", formatter=NumberFormatter(format="0,0.0"),
                        width=100),
            TableColumn(field="category", title="Component", width=100)]
    return DataTable(source=src, columns=cols, sortable=True, index_position=None, height=height,
                     sizing_mode="stretch_width", name="memory_peak_table")


def _table_data(allocs: pd.DataFrame) -> dict:
    return {"name": allocs["name"].astype(str).tolist(),
            "size_mb": allocs["size_mb"].astype(float).tolist(),
            "alloc_ms": (allocs["alloc_us"] / 1e3).astype(float).tolist(),
            "release_ms": (allocs["release_us"] / 1e3).astype(float).tolist(),
            "lifetime_ms": (allocs["lifetime_us"] / 1e3).astype(float).tolist(),
            "released": ["yes" if r else "no (held to the end)" for r in allocs["released"]]}


def allocation_table(allocs: pd.DataFrame, height: int = 300) -> DataTable:
    """Sortable allocation table on ``memory_alloc_src``: operator, size (MB), allocated and released at
    (ms from the start), lifetime (ms), released; largest first."""
    src = ColumnDataSource(_table_data(allocs), name="memory_alloc_src")
    ms = NumberFormatter(format="0,0.000")
    cols = [TableColumn(field="name", title="Operator", width=360),
            TableColumn(field="size_mb", title="Size (MB)", formatter=NumberFormatter(format="0,0.000"), width=90),
            TableColumn(field="alloc_ms", title="Allocated at (ms)", formatter=ms, width=110),
            TableColumn(field="release_ms", title="Released at (ms)", formatter=ms, width=110),
            TableColumn(field="lifetime_ms", title="Lifetime (ms)", formatter=ms, width=100),
            TableColumn(field="released", title="Released", width=130)]
    return DataTable(source=src, columns=cols, sortable=True, index_position=None, height=height,
                     sizing_mode="stretch_width", name="memory_alloc_table")


# Filters the allocation table by the search box and the selected window (both optional).
_FILTER_JS = """
const q = search.value_input != null ? search.value_input : search.value;
const needle = (q || '').toLowerCase();
const w = win.data, has = w.t0.length > 0, t0 = has ? w.t0[0] / 1e3 : 0, t1 = has ? w.t1[0] / 1e3 : 0;
const d = all.data, n = d.name.length, out = {};
for (const k of Object.keys(d)) out[k] = [];
for (let i = 0; i < n; i++) {
  const textOk = needle === '' || String(d.name[i]).toLowerCase().includes(needle);
  const rel = d.release_ms[i];
  const timeOk = !has || (d.alloc_ms[i] <= t1 && (rel == null || Number.isNaN(rel) || rel >= t0));
  if (textOk && timeOk) for (const k of Object.keys(d)) out[k].push(d[k][i]);
}
table_src.data = out;
const span = has ? ' alive in ' + t0.toLocaleString('en-US', {maximumFractionDigits: 3}) + ' - ' +
  t1.toLocaleString('en-US', {maximumFractionDigits: 3}) + ' ms' : '';
count.text = out.name.length + ' of ' + n + ' allocations' + span;
"""

_SELECT_JS = """
const g = cb_obj.geometry;
if (g.type === 'rect' && cb_obj.final) {
  win.data = {t0: [Math.min(g.x0, g.x1)], t1: [Math.max(g.x0, g.x1)]};
  refilter.execute(cb_obj);
}
"""


def memory_layout(memory: pd.DataFrame, operator_memory: pd.DataFrame, module_mem: pd.DataFrame | None = None):
    """Figures, curve, the CANN modules' curve (``module_mem``, where the files have it) and the allocation
    table as one Bokeh layout, linked by CustomJS."""
    peaks, allocs = M.memory_peaks(memory), M.allocations(operator_memory)
    peak = MP.alive_at_peak({"memory": memory, "operator_memory": operator_memory, "npu_module_mem": module_mem})
    parts = [figures_div(peaks, M.allocation_stats(operator_memory)), peak_div(peak)]
    fig = curve_figure(memory, peaks) if len(memory) else None
    if fig is not None:
        parts.append(fig)
    split = category_figure(MP.category_curves(memory), peak, fig.x_range if fig is not None else None)
    if split is not None:
        parts.append(split)
    alive = peak_table(peak)
    if alive is not None:
        parts.append(alive)
    modules = module_figure(module_mem, fig.x_range if fig is not None else None)
    if modules is not None:
        parts.append(modules)
    if len(allocs):
        table = allocation_table(allocs)
        all_src = ColumnDataSource(dict(table.source.data), name="memory_alloc_all_src")
        win = ColumnDataSource({"t0": [], "t1": []}, name="memory_window_src")
        search = TextInput(placeholder="search operator (case-insensitive)", width=320, name="memory_search")
        count = Div(text=f"{len(allocs)} of {len(allocs)} allocations", name="memory_alloc_count",
                    render_as_text=True)
        refilter = CustomJS(args=dict(search=search, win=win, all=all_src, table_src=table.source, count=count),
                            code=_FILTER_JS)
        search.js_on_change("value_input", refilter)
        search.js_on_change("value", refilter)
        if fig is not None:
            fig.js_on_event(SelectionGeometry, CustomJS(args=dict(win=win, refilter=refilter), code=_SELECT_JS))
            clear = CustomJS(args=dict(win=win, refilter=refilter),
                             code="win.data = {t0: [], t1: []}; refilter.execute(cb_obj);")
            fig.js_on_event("reset", clear)
        parts += [row(search, count, sizing_mode="stretch_width"), table]
    return theme.themed(column(*parts, sizing_mode="stretch_width", name="memory_layout"))


class MemoryView(traitlets.HasTraits, LayoutView):
    """``MemoryView.from_profile(prof)``, or ``MemoryView(frames)`` with a dict of `FRAMES` (or
    ``(memory_df, operator_memory_df[, npu_module_mem_df])``):
    ``.widget``, ``.display()``.
    ``window`` is the (t0_us, t1_us) range last box-selected on the curve (empty: none), on the
    timeline's clock."""

    window = traitlets.Tuple(default_value=())
    FRAMES = ("memory", "operator_memory", "npu_module_mem")  # what it reads of a Profile

    @staticmethod
    def report_layout(prof):
        """The report's section of a `Profile`."""
        return memory_layout(prof.memory, prof.operator_memory, prof.npu_module_mem)

    def __init__(self, prof_or_frames):
        super().__init__()
        frames = frames_of(prof_or_frames, self.FRAMES)
        self.memory, self.operator_memory, self.module_mem = frames.values()
        self.layout = memory_layout(self.memory, self.operator_memory, self.module_mem)
        # the curve is a child of the layout's column: no search of all its models (~25 ms)
        curve = next((m for m in self.layout.children if m.name == "memory_curve"), None)
        if curve is not None:
            curve.on_event(SelectionGeometry, self._on_select)

    def _on_select(self, event):
        g = event.geometry
        if g.get("type") == "rect" and event.final:
            self.window = (float(min(g["x0"], g["x1"])), float(max(g["x0"], g["x1"])))


__all__ = ["figures_div", "peak_div", "curve_figure", "category_figure", "peak_table", "module_figure",
           "allocation_table", "memory_layout", "MemoryView"]
