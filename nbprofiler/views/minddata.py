"""MindData (dataset pipeline) views: the pipeline graph, queue series, host/device queues, CPU use.

Figure factories take the Profile's DataFrames (never a Profile, never files) and return Bokeh models
that work in a notebook and in a standalone HTML file. Interactivity that must survive in a static
report (click a queue in the graph -> its size over time) is CustomJS over data already in the page.

- `pipeline_layout(pipeline_df)`: node positions from the parent/children tree (no graphviz).
- `pipeline_graph(pipeline_df, bottleneck_ids=())`: ops as nodes, queues as coloured edges.
- `queue_usage_chart(pipeline_df, bottleneck_ids=())`: average usage of every queue (MindInsight's bars).
- `queue_size_figure(queues_df, op_id=None)`: one queue's sampled size over time.
- `pipeline_panel(pipeline_df, queues_df, bottleneck_ids=())`: the three above, linked by a click.
- `queue_figure(host_queue_df, device_queue_df=None)`: host and device queue size per step.
- `cpu_figure(cpu_df, op_cpu_df=None, pipeline_df=None)`: CPU utilisation over time.
- `verdict_html(labels, suggestions)`: the bottleneck verdict and the advisor's MindData suggestions.
- `MindDataView(prof_or_frames)`: all of it as one ipywidgets widget.

Names of the Bokeh models tests look for: ``minddata_graph``, ``minddata_edges_src`` (one row per
queue; its selection is the clicked queue), ``minddata_queue_src`` (the selected queue's series),
``minddata_queue_info_src``, ``host_queue_src``, ``device_queue_src``, ``cpu_src``, ``op_cpu_src_<op_id>``.
"""
from __future__ import annotations

import html
from collections import deque

import numpy as np
import pandas as pd
import traitlets
from bokeh.layouts import column, row
from bokeh.models import ColorBar, ColumnDataSource, CustomJS, Div, HoverTool, LinearColorMapper, Range1d, TapTool
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from . import theme
from .base import View
from .pages import frames_of
from .step_gap import step_gap_figures

# Queue usage 0..100 %: a perceptually uniform ramp; a nearly empty queue is dark, a full one yellow.
USAGE_PALETTE = Viridis256
EMPTY_COLOR = theme.HIGHLIGHT   # steps where the queue was empty: training waited for data
FULL_COLOR = "#009E73"          # steps where the queue was full: the consumer is the slow side
NORMAL_COLOR = "#0072B2"
SELECTED_COLOR = "#E69F00"      # the clicked queue's outline: orange, apart from a flagged queue's red
COL_SPACING = 2.0               # data units between pipeline levels; the queue box sits halfway
NODE_W, NODE_H = 1.1, 0.5
QUEUE_W, QUEUE_H = 0.8, 0.24
MIN_WIDTH_PX, MAX_WIDTH_PX = 480, 1600   # plots stretch to the notebook cell between these widths
# The pipeline graph is drawn to scale: ``UNIT_PX`` pixels per data unit (more when a label needs it), its plot
# area never wider than ``GRAPH_MAX_FRAME_PX`` (a long pipeline wraps into bands of levels, read like lines of
# text), so that no node or label is cut at a notebook cell's edge.
UNIT_PX = 80.0
GRAPH_MAX_FRAME_PX = 800
BAND_GAP = 0.6                  # rows between two bands of a wrapped pipeline
NODE_FONT_PX, QUEUE_FONT_PX = 12, 11


def _present(df) -> bool:
    return df is not None and len(df) > 0


def _cds(df: pd.DataFrame, name: str | None = None) -> ColumnDataSource:
    """A ColumnDataSource of the frame's columns (no index column)."""
    return ColumnDataSource({c: df[c].to_numpy() for c in df.columns}, name=name)


def op_label(op_type, op_id) -> str:
    """MindInsight's display name of a pipeline op: ``MapOp_1``."""
    return f"{op_type}_{op_id}"


# -- pipeline graph ---------------------------------------------------------------------------------
def pipeline_layout(pipeline_df: pd.DataFrame, levels_per_band: int | None = None) -> pd.DataFrame:
    """Tidy-tree positions of the pipeline ops, data flowing left to right (sources left, root right).

    Returns one row per op: ``op_id`` (int64), ``depth`` (int64, 0 = root), ``x`` (float64, column of
    the op, ``COL_SPACING`` per level), ``y`` (float64: leaves take consecutive rows in depth-first
    order, a parent sits at the mean of its children). Built from ``parent_id``; ops whose parent is
    missing from the frame become extra roots, and a cycle is cut where it is met.

    ``levels_per_band``: wrap a pipeline deeper than that into bands of that many levels, each band below
    the one before (``BAND_GAP`` rows apart) and starting again at x = 0, as text wraps into lines.
    """
    if pipeline_df is None or pipeline_df.empty:
        return pd.DataFrame({"op_id": pd.Series(dtype="int64"), "depth": pd.Series(dtype="int64"),
                             "x": pd.Series(dtype="float64"), "y": pd.Series(dtype="float64")})
    ids = [int(i) for i in pipeline_df["op_id"]]
    known = set(ids)
    parents = {}
    for op_id, parent in zip(ids, pipeline_df["parent_id"]):
        parents[op_id] = int(parent) if pd.notna(parent) and int(parent) in known else None
    children: dict[int, list[int]] = {i: [] for i in ids}
    for op_id, parent in parents.items():
        if parent is not None:
            children[parent].append(op_id)
    roots = [i for i in ids if parents[i] is None] or ids[:1]

    depth: dict[int, int] = {}
    order: list[int] = []
    for root in roots:
        queue = deque([(root, 0)])
        while queue:
            op_id, d = queue.popleft()
            if op_id in depth:
                continue
            depth[op_id] = d
            order.append(op_id)
            queue.extend((c, d + 1) for c in sorted(children[op_id]))
    for op_id in ids:                       # ops only reachable through a cycle
        if op_id not in depth:
            depth[op_id] = 0
            roots.append(op_id)

    y: dict[int, float] = {}
    next_row = [0.0]

    def place(op_id: int, seen: set[int]) -> float:
        seen.add(op_id)
        kids = [c for c in sorted(children[op_id]) if c not in seen and depth[c] == depth[op_id] + 1]
        if not kids:
            y[op_id] = next_row[0]
            next_row[0] += 1.0
        else:
            y[op_id] = float(np.mean([place(c, seen) for c in kids]))
        return y[op_id]

    seen: set[int] = set()
    for root in roots:
        if root not in seen:
            place(root, seen)
    for op_id in ids:
        if op_id not in y:
            y[op_id] = next_row[0]
            next_row[0] += 1.0
    max_depth = max(depth.values())
    out = pd.DataFrame({"op_id": ids, "depth": [depth[i] for i in ids]})
    col = max_depth - out["depth"]
    out["y"] = [y[i] for i in ids]
    if levels_per_band and max_depth + 1 > levels_per_band:
        band = col // int(levels_per_band)
        col = col % int(levels_per_band)
        out["y"] = out["y"] + band * (next_row[0] + BAND_GAP)
    out["x"] = col * COL_SPACING
    return out[["op_id", "depth", "x", "y"]].astype({"op_id": "int64", "depth": "int64", "x": "float64",
                                                     "y": "float64"})


def pipeline_queues(pipeline_df: pd.DataFrame, bottleneck_ids=(), layout: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per queue = per op that has a parent and an output queue (the edge op -> parent).

    Columns: ``op_id``, ``parent_id`` (int64), ``queue`` (str, ``Queue_<op_id>`` as MindInsight names
    it), ``op``, ``parent`` (str display names), ``usage_pct`` (float64, 0..100 = average size /
    capacity), ``average_size`` (float64), ``capacity`` (int64), ``flagged`` (bool: the queue is the
    output of a bottleneck op), and the layout: ``x0, y0`` (child), ``x1, y1`` (parent), ``xm, ym``
    (the queue box: halfway along x, on the child's row; halfway between two bands of a wrapped layout).
    Ops without queue metrics (inline ops) are skipped, as MindInsight draws them.
    ``layout``: the positions to use (`pipeline_layout`'s frame; default: `pipeline_layout(pipeline_df)`).
    """
    from ..analysis.minddata import pipeline_edges
    layout = pipeline_layout(pipeline_df) if layout is None else layout
    at = dict(zip(layout["op_id"].tolist(), zip(layout["x"].tolist(), layout["y"].tolist())))
    flagged = {int(i) for i in bottleneck_ids}
    labels = {int(i): op_label(t, i) for i, t in zip(pipeline_df["op_id"].tolist(), pipeline_df["op_type"])}
    e = pipeline_edges(pipeline_df)
    rows = []
    for op_id, parent, usage, length, avg in zip(e["child_id"].tolist(), e["parent_id"].tolist(),
                                                 e["usage_rate"].tolist(), e["output_queue_length"],
                                                 e["output_queue_average_size"].tolist()):
        if parent not in at or pd.isna(length):
            continue
        (x0, y0), (x1, y1) = at[op_id], at[parent]
        rows.append({"op_id": op_id, "parent_id": parent, "queue": f"Queue_{op_id}", "op": labels[op_id],
                     "parent": labels[parent], "usage_pct": float(usage) * 100.0,
                     "average_size": float(avg) if pd.notna(avg) else 0.0,
                     "capacity": int(length), "flagged": op_id in flagged,
                     "x0": x0, "y0": y0, "x1": x1, "y1": y1, "xm": (x0 + x1) / 2,
                     # on the child's row, so that the queues of siblings never overlap; an edge from one
                     # band of a wrapped pipeline to the next: halfway
                     "ym": y0 if x1 > x0 else (y0 + y1) / 2})
    cols = ["op_id", "parent_id", "queue", "op", "parent", "usage_pct", "average_size", "capacity", "flagged",
            "x0", "y0", "x1", "y1", "xm", "ym"]
    return pd.DataFrame(rows, columns=cols)


def _usage_mapper() -> LinearColorMapper:
    from bokeh.core.property.validation import validate
    with validate(False):   # Bokeh's own palette: checking its 256 colours one by one took ~3.5 ms a mapper
        return LinearColorMapper(palette=USAGE_PALETTE, low=0.0, high=100.0)


def text_width_px(text: str, font_px: float) -> float:
    """A generous estimate of the width in pixels of ``text`` (its longest line) drawn in the UI font at
    ``font_px``: 0.62 em per character, wider than the average of the sans-serif fonts of `theme.FONT`
    (digits and capitals ~0.55-0.6 em, bold ~0.6-0.65)."""
    return max((len(line) for line in str(text).split("\n")), default=0) * 0.62 * font_px


def graph_geometry(labels, queue_texts, n_levels: int) -> dict:
    """How the pipeline graph is drawn to scale, so that every label fits: ``unit_px`` (pixels per data unit;
    levels are ``COL_SPACING`` units apart), ``node_w`` and ``queue_w`` (box widths in data units: an op's
    box as wide as the widest op name needs, at least ``NODE_W`` at `UNIT_PX`; a queue box ``QUEUE_W`` at
    `UNIT_PX`), and ``levels_per_band`` (levels drawn side by side before the pipeline wraps, so that the
    plot area stays within `GRAPH_MAX_FRAME_PX`)."""
    node_px = max(NODE_W * UNIT_PX, max((text_width_px(t, NODE_FONT_PX) for t in labels), default=0.0) + 16)
    queue_px = QUEUE_W * UNIT_PX
    gap_px = max((COL_SPACING - NODE_W) * UNIT_PX, queue_px + 8,
                 max((text_width_px(t, QUEUE_FONT_PX) for t in queue_texts), default=0.0) + 8)
    level_px = node_px + gap_px
    unit = level_px / COL_SPACING
    # the plot area of b levels: (b - 1) levels + one box + a 12 px margin each side
    per_band = int((GRAPH_MAX_FRAME_PX - node_px - 24) // level_px) + 1
    return {"unit_px": unit, "node_w": node_px / unit, "queue_w": queue_px / unit,
            "levels_per_band": max(1, min(per_band, max(1, n_levels)))}


def _pipeline_graph(pipeline_df: pd.DataFrame, bottleneck_ids=(), height: int | None = None):
    """`pipeline_graph`, and its edges source (the page links to it without searching the figure)."""
    from bokeh.models import LabelSet, MultiLine, Rect
    labels_by_id = {int(i): op_label(t, i) for t, i in zip(pipeline_df["op_type"], pipeline_df["op_id"])}
    flat = pipeline_layout(pipeline_df)
    n_levels = int(flat["depth"].max()) + 1 if len(flat) else 1
    texts = [f"Queue_{int(i)}\n100.00%" for i in labels_by_id]   # the widest a queue label can be
    geo = graph_geometry(labels_by_id.values(), texts, n_levels)
    # wrapped only when the levels do not fit in one band (else the flat layout is the one drawn)
    layout = flat if geo["levels_per_band"] >= n_levels else pipeline_layout(pipeline_df, geo["levels_per_band"])
    unit, node_w, queue_w = geo["unit_px"], geo["node_w"], geo["queue_w"]
    # The sources' columns as arrays (a frame's column assignments and lookups cost more than the graph's
    # arithmetic). `pipeline_layout` keeps the frame's rows in their order: the ops' columns line up with it.
    op_ids = layout["op_id"].to_numpy()
    flagged_ops = np.isin(op_ids, [int(i) for i in bottleneck_ids])
    nodes = {"op_id": op_ids, "label": np.array([labels_by_id[int(i)] for i in op_ids], dtype=object),
             "op_type": pipeline_df["op_type"].to_numpy(), "num_workers": pipeline_df["num_workers"].to_numpy(),
             "x": layout["x"].to_numpy(), "y": layout["y"].to_numpy(),
             "line_color": np.where(flagged_ops, theme.HIGHLIGHT, theme.AXIS).astype(object)}
    queues_df = pipeline_queues(pipeline_df, bottleneck_ids, layout)
    queues = {c: queues_df[c].to_numpy() for c in queues_df.columns}
    flagged = queues["flagged"].astype(bool)
    queues["line_color"] = np.where(flagged, theme.HIGHLIGHT, theme.AXIS).astype(object)
    queues["line_width"] = np.where(flagged, 3.0, 1.0)
    # two lines, so the label fits between two op boxes however many levels the pipeline has
    queues["text"] = np.array([f"{q}\n{u:.2f}%" for q, u in zip(queues["queue"], queues["usage_pct"])], dtype=object)
    queues["label_y"] = queues["ym"] + QUEUE_H / 2      # the y axis points down: the box's lower edge
    # each edge one polyline, child -> queue box -> parent (the box sits on the child's row)
    queues["xs"] = [list(p) for p in zip(queues["x0"].tolist(), queues["xm"].tolist(), queues["x1"].tolist())]
    queues["ys"] = [list(p) for p in zip(queues["y0"].tolist(), queues["ym"].tolist(), queues["y1"].tolist())]

    # Ranges: every box and label inside, with a margin; the plot area is the ranges at `unit` px per unit.
    pad = 12 / unit
    if len(op_ids):
        x0 = float((nodes["x"] - node_w / 2).min())
        x1 = float((nodes["x"] + node_w / 2).max())
        y0 = float(nodes["y"].min()) - NODE_H / 2
        y1 = float(nodes["y"].max()) + NODE_H / 2
    else:
        x0, x1, y0, y1 = -node_w / 2, node_w / 2, -NODE_H / 2, NODE_H / 2
    if len(flagged):
        half = np.array([text_width_px(t, QUEUE_FONT_PX) for t in queues["text"]]) / unit / 2
        x0 = min(x0, float((queues["xm"] - np.maximum(half, queue_w / 2)).min()))
        x1 = max(x1, float((queues["xm"] + np.maximum(half, queue_w / 2)).max()))
        # 3 px below the box, two lines of text
        y1 = max(y1, float(queues["label_y"].max()) + (3 + 2 * 1.3 * QUEUE_FONT_PX) / unit)
        y0 = min(y0, float((queues["ym"] - QUEUE_H / 2).min()))
    x0, x1, y0, y1 = x0 - pad, x1 + pad, y0 - pad, y1 + pad
    frame_w, frame_h = int(np.ceil((x1 - x0) * unit)), int(np.ceil((y1 - y0) * unit))
    if height:   # a taller plot area asked for: more room below, the same scale
        frame_h = max(frame_h, int(height) - 60)
    fig = figure(name="minddata_graph", title="Pipeline: ops and their output queues (click a queue)",
                 x_range=Range1d(x0, x0 + frame_w / unit), y_range=Range1d(y0 + frame_h / unit, y0),
                 frame_width=frame_w, frame_height=frame_h,
                 x_axis_type=None, y_axis_type=None, tools="reset,save", toolbar_location="right")
    fig.grid.visible = False
    # Drawn to scale in a plot area of its own size: not moved right to line up with the queue chart's frame
    # below it (that shifted the plot and cut the colour bar's labels at its right edge).
    fig.frame_align = False
    nodes_src = ColumnDataSource(nodes, name="minddata_nodes_src")
    edges_src = ColumnDataSource(queues, name="minddata_edges_src")
    mapper = _usage_mapper()
    # The edges, labels and boxes share one source; a selected queue is shown by its box's outline only,
    # so no other glyph fades (Bokeh's default dims every unselected glyph to 0.2-0.55). Nothing is muted
    # (no legend), so the renderers on it leave their muted glyphs to BokehJS ("auto").
    # No nonselection glyph (None): BokehJS then draws unselected items with the glyph itself, unfaded.
    fig.add_glyph(edges_src, MultiLine(xs="xs", ys="ys", line_width=3,
                                       line_color={"field": "usage_pct", "transform": mapper}),
                  nonselection_glyph=None)
    # The ops' boxes and names: no selection on their source, so no selection glyphs either.
    node_r = fig.add_glyph(nodes_src, Rect(x="x", y="y", width=node_w, height=NODE_H, fill_color="#e8eaf2",
                                           fill_alpha=0.9, line_color="line_color", line_width=2, border_radius=12))
    # Names and queue labels are annotations (one model each, never faded by a selection), not glyphs.
    fig.add_layout(LabelSet(x="x", y="y", text="label", source=nodes_src, text_align="center",
                            text_baseline="middle", text_font={"value": theme.FONT},
                            text_font_size=f"{NODE_FONT_PX}px", text_color="#333333", name="minddata_node_labels"))
    box = dict(x="xm", y="ym", width=queue_w, height=QUEUE_H, fill_color={"field": "usage_pct", "transform": mapper})
    queue_r = fig.add_glyph(edges_src, Rect(**box, line_color="line_color", line_width="line_width"),
                            selection_glyph=Rect(**box, line_color=SELECTED_COLOR, line_width=4),
                            nonselection_glyph=None, name="minddata_queue_boxes")
    # Below the box, clear of it (a yellow, nearly full queue box washed out text drawn over its edge).
    fig.add_layout(LabelSet(x="xm", y="label_y", text="text", source=edges_src, y_offset=-3, text_align="center",
                            text_baseline="top", text_font={"value": theme.FONT},
                            text_font_size=f"{QUEUE_FONT_PX}px", text_font_style="bold", text_color=theme.TEXT,
                            name="minddata_queue_labels"))
    fig.add_tools(TapTool(renderers=[queue_r]))
    fig.add_tools(HoverTool(renderers=[queue_r], tooltips=[
        ("queue", "@queue"), ("from", "@op"), ("to", "@parent"), ("usage", "@usage_pct{0.00} %"),
        ("average size", "@average_size{0.00} / @capacity")]))
    fig.add_tools(HoverTool(renderers=[node_r], tooltips=[("op", "@label"), ("workers", "@num_workers")]))
    fig.add_layout(ColorBar(color_mapper=mapper, title="queue usage (%)", width=10, title_text_color=theme.TEXT,
                            major_label_text_color=theme.TEXT, background_fill_color=None), "right")
    return theme.style(fig), edges_src


def pipeline_graph(pipeline_df: pd.DataFrame, bottleneck_ids=(), height: int | None = None) -> figure:
    """The pipeline as a graph: ops as rounded boxes, each output queue as the edge to the parent op,
    coloured by its average usage (0..100 %, colour bar), the queues of bottleneck ops outlined red.

    Drawn to scale (`graph_geometry`): the plot area (``frame_width`` x ``frame_height``) is the data
    ranges at a fixed number of pixels per unit, wide enough for every box and label, and a pipeline too
    deep for `GRAPH_MAX_FRAME_PX` wraps into bands, so nothing is cut at the edge of a notebook cell.
    ``height``: make the plot at least that tall (pixels; room is added below, the scale kept).

    Sources: ``minddata_nodes_src`` (op_id, label, num_workers, x, y) and ``minddata_edges_src`` (the
    columns of `pipeline_queues`, and ``xs``/``ys``: each edge's polyline through its queue box). A TapTool selects a queue box; `pipeline_panel` links that selection
    to the queue series.
    """
    return _pipeline_graph(pipeline_df, bottleneck_ids, height)[0]


def queue_usage_chart(pipeline_df: pd.DataFrame, bottleneck_ids=()) -> figure:
    """Average usage (%) of each queue between ops, one horizontal bar per queue (as in MindInsight's
    "Average usage of queues between operators"), bottleneck outputs in the highlight colour."""
    queues = pipeline_queues(pipeline_df, bottleneck_ids).sort_values("op_id", ascending=False)
    queues["color"] = np.where(queues["flagged"], theme.HIGHLIGHT, NORMAL_COLOR)
    queues["text"] = [f"{u:.4f}%" for u in queues["usage_pct"]]
    fig = figure(name="minddata_usage_chart", title="Average queue usage", y_range=list(queues["queue"]),
                 x_range=Range1d(0, 115), height=60 + 34 * max(1, len(queues)), width=560,
                 tools="", toolbar_location=None, x_axis_label=theme.axis_label("Usage", "%"))
    src = _cds(queues[["queue", "op", "parent", "usage_pct", "color", "text"]], "minddata_usage_src")
    r = fig.hbar(y="queue", right="usage_pct", height=0.6, color="color", source=src)
    fig.text(x="usage_pct", y="queue", text="text", source=src, x_offset=4, text_baseline="middle",
             text_font_size="11px", text_color=theme.TEXT)
    fig.add_tools(HoverTool(renderers=[r], tooltips=[("queue", "@queue (@op -> @parent)"),
                                                     ("usage", "@usage_pct{0.0000} %")]))
    return theme.style(fig)


def _queue_series(queues_df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Long-form queue samples with an ``x`` column: seconds since the first sample where the samples
    have time stamps, else the sample index. Returns the frame and the x-axis label."""
    df = queues_df[["op_id", "sample", "time_ms", "size", "length"]].copy()
    if len(df) and df["time_ms"].notna().all():
        df["x"] = (df["time_ms"] - df["time_ms"].min()) / 1000.0
        return df, theme.axis_label("Time since first sample", "s")
    df["x"] = df["sample"].astype("float64")
    return df, "Sample"


def queue_size_figure(queues_df: pd.DataFrame, op_id: int | None = None) -> figure:
    """Sampled size of one op's output queue over time (``minddata_queue_src``: x, size, length), with the
    capacity as a dashed line. ``op_id`` None: the first op that has samples."""
    return _queue_size_figure(_queue_series(queues_df), op_id)[0]


def _queue_size_figure(series_and_label, op_id: int | None = None):
    """`queue_size_figure` from `_queue_series`'s result, and the figure's source."""
    series, xlabel = series_and_label
    if op_id is None and len(series):
        op_id = int(series["op_id"].iloc[0])
    one = series[series["op_id"] == op_id]
    fig = figure(name="minddata_queue_fig", title=f"Queue_{op_id}: size over time" if op_id is not None
                 else "Queue size over time", height=240, sizing_mode="stretch_width", min_width=360,
                 max_width=900, tools="xpan,xwheel_zoom,reset,save",
                 x_axis_label=xlabel, y_axis_label="Items in queue")
    src = ColumnDataSource({"x": one["x"].to_numpy(), "size": one["size"].to_numpy(),
                            "length": one["length"].to_numpy()}, name="minddata_queue_src")
    # Nothing selects or mutes these lines: no selection or muted glyphs of their own ("auto" in BokehJS).
    from bokeh.models import Legend, LegendItem, Line, Step
    size_r = fig.add_glyph(src, Step(x="x", y="size", mode="after", line_width=1.5, line_color=NORMAL_COLOR))
    cap_r = fig.add_glyph(src, Line(x="x", y="length", line_dash="dashed", line_color=theme.AXIS))
    fig.add_layout(Legend(items=[LegendItem(label="size", renderers=[size_r]),
                                 LegendItem(label="capacity", renderers=[cap_r])], location="top_left"))
    fig.add_tools(HoverTool(tooltips=[("x", "@x{0.000}"), ("size", "@size"), ("capacity", "@length")],
                            mode="vline"))
    fig.y_range.start = 0
    return theme.style(fig), src


_SELECT_QUEUE_JS = """
const col = (s, c) => (s.data instanceof Map ? s.data.get(c) : s.data[c]);
const i = edges.selected.indices.length ? edges.selected.indices[0] : -1;
if (i < 0) { return; }
const op = col(edges, 'op_id')[i];
const ids = col(all, 'op_id'), xs = col(all, 'x'), sz = col(all, 'size'),
      ln = col(all, 'length');
const x = [], size = [], length = [];
for (let k = 0; k < ids.length; k++) {
  if (ids[k] === op) { x.push(xs[k]); size.push(sz[k]); length.push(ln[k]); }
}
series.data = {x: x, size: size, length: length};
fig.title.text = col(edges, 'queue')[i] + ': size over time';
const keys = ['queue', 'from op', 'to op', 'workers of from op', 'average size', 'capacity', 'usage (%)'];
const vals = [col(edges, 'queue')[i], col(edges, 'op')[i], col(edges, 'parent')[i],
              String((workers instanceof Map ? workers.get(String(op)) : workers[String(op)]) ?? ''),
              col(edges, 'average_size')[i].toFixed(3), String(col(edges, 'capacity')[i]),
              col(edges, 'usage_pct')[i].toFixed(4)];
info.data = {key: keys, value: vals};
const esc = (v) => String(v).replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;',
                                                          "'": '&#39;'}[c]));
table.text = head + keys.map((k, j) => row.replace('{k}', () => esc(k)).replace('{v}', () => esc(vals[j]))).join('')
             + tail;
"""
# The selected queue's facts: an HTML table in a Div (a DataTable with its columns, editors and formatters is ~10
# Bokeh models more to build and send when the tab opens). Values are user strings (op names): escaped, in
# Python here and in `_SELECT_QUEUE_JS`.
_INFO_HEAD = (f'<table class="nbp-queue-info" style="{theme.PANEL_CSS}border-collapse:collapse;min-width:300px">'
              '<tr><th colspan="2" style="text-align:left;padding:2px 8px">Selected queue</th></tr>')
_INFO_ROW = ('<tr><td style="padding:2px 8px;opacity:0.75">{k}</td>'
             '<td style="padding:2px 8px;font-variant-numeric:tabular-nums">{v}</td></tr>')
_INFO_TAIL = "</table>"


def _queue_info_html(keys, values) -> str:
    return _INFO_HEAD + "".join(_INFO_ROW.replace("{k}", html.escape(str(k))).replace("{v}", html.escape(str(v)))
                                for k, v in zip(keys, values)) + _INFO_TAIL


def pipeline_panel(pipeline_df: pd.DataFrame, queues_df: pd.DataFrame | None, bottleneck_ids=(),
                   selected_op: int | None = None):
    """Graph + usage bars + the size series of the clicked queue + an info table, linked by CustomJS
    (works in a static HTML file). Initially selected: ``selected_op``, else the first flagged queue, else
    the first queue. The queue info (``minddata_queue_info_src``: key, value) is shown as an HTML table in the Div
    ``minddata_queue_info``, its values escaped."""
    return _pipeline_panel(pipeline_df, queues_df, bottleneck_ids, selected_op)[0]


def _pipeline_panel(pipeline_df: pd.DataFrame, queues_df: pd.DataFrame | None, bottleneck_ids=(),
                    selected_op: int | None = None, usage: bool = True):
    """`pipeline_panel` (``usage``: with the usage bars), and the graph's edges source (its selection is the
    shown queue)."""
    graph, edges = _pipeline_graph(pipeline_df, bottleneck_ids)
    data = edges.data
    queue_ids = [int(i) for i in data["op_id"]]
    if queues_df is None:
        queues_df = pd.DataFrame({"op_id": [], "sample": [], "time_ms": [], "size": [], "length": []})
    series, xlabel = _queue_series(queues_df)
    if selected_op is None and queue_ids:
        flagged = [i for i, f in zip(queue_ids, data["flagged"]) if f]
        selected_op = (flagged or queue_ids)[0]
    qfig, qsrc = _queue_size_figure((series, xlabel), selected_op)
    all_src = ColumnDataSource({c: series[c].to_numpy() for c in ("op_id", "x", "size", "length")},
                               name="minddata_queues_all_src")
    info_src = ColumnDataSource({"key": [], "value": []}, name="minddata_queue_info_src")
    table = Div(text=_queue_info_html([], []), width=330, name="minddata_queue_info")
    workers = {str(int(i)): int(w) for i, w in zip(pipeline_df["op_id"], pipeline_df["num_workers"])
               if pd.notna(w)}
    callback = CustomJS(args=dict(edges=edges, all=all_src, series=qsrc, fig=qfig, info=info_src, table=table,
                                  workers=workers, head=_INFO_HEAD, row=_INFO_ROW, tail=_INFO_TAIL),
                        code=_SELECT_QUEUE_JS)
    edges.selected.js_on_change("indices", callback)
    if selected_op is not None and int(selected_op) in queue_ids:
        i = queue_ids.index(int(selected_op))
        edges.selected.indices = [i]
        info_src.data = {"key": ["queue", "from op", "to op", "workers of from op", "average size", "capacity",
                                 "usage (%)"],
                         "value": [data["queue"][i], data["op"][i], data["parent"][i],
                                   str(workers.get(str(queue_ids[i]), "")), f"{data['average_size'][i]:.3f}",
                                   str(int(data["capacity"][i])), f"{data['usage_pct'][i]:.4f}"]}
        table.text = _queue_info_html(info_src.data["key"], info_src.data["value"])
    parts = [graph, row(qfig, table, sizing_mode="stretch_width")]
    if usage:
        parts.append(queue_usage_chart(pipeline_df, bottleneck_ids))
    return column(*parts, sizing_mode="stretch_width"), edges


# -- host / device queues ---------------------------------------------------------------------------
def host_queue_states(host_queue_df: pd.DataFrame) -> pd.DataFrame:
    """Host queue per step with its state: ``step``, ``size``, ``capacity`` and ``state`` (str: "empty"
    when size is 0, "full" when size equals the capacity, else "partial")."""
    df = host_queue_df[["step", "size", "capacity"]].copy()
    df["state"] = np.select([df["size"] == 0, df["size"] == df["capacity"]], ["empty", "full"], "partial")
    return df


def queue_figure(host_queue_df: pd.DataFrame | None, device_queue_df: pd.DataFrame | None = None):
    """Host queue size per step (``host_queue_src``) and, where recorded, the device (GetNext) queue size
    per record (``device_queue_src``); empty steps red, full steps green, capacity dashed. Titles carry
    the counts MindInsight shows (empty/total, full/total). Returns a row of one or two figures."""
    figs = []
    state_colors = {"empty": EMPTY_COLOR, "full": FULL_COLOR, "partial": NORMAL_COLOR}
    if host_queue_df is not None and len(host_queue_df):
        df = host_queue_states(host_queue_df)
        df["color"] = df["state"].map(state_colors)
        n = len(df)
        title = (f"Host queue per step: empty {int((df['state'] == 'empty').sum())}/{n}, "
                 f"full {int((df['state'] == 'full').sum())}/{n}")
        fig = figure(name="host_queue_fig", title=title, height=260, sizing_mode="stretch_width", min_width=320,
                     max_width=800, tools="xpan,xwheel_zoom,reset,save",
                     x_axis_label="Step", y_axis_label="Items in queue")
        src = _cds(df, "host_queue_src")
        fig.line("step", "size", source=src, color=theme.AXIS, line_width=1)
        fig.line("step", "capacity", source=src, color=theme.AXIS, line_dash="dashed", legend_label="capacity")
        r = fig.scatter("step", "size", source=src, color="color", size=6, legend_field="state")
        fig.add_tools(HoverTool(renderers=[r], tooltips=[("step", "@step"), ("size", "@size / @capacity"),
                                                         ("state", "@state")]))
        fig.y_range.start = -0.5
        fig.legend.location = "top_left"
        figs.append(theme.style(fig))
    if device_queue_df is not None and len(device_queue_df) and device_queue_df["size"].notna().any():
        df = device_queue_df[["index", "size", "get_next_ms"]].copy()
        df["step"] = df["index"] + 1
        df["size"] = df["size"].astype("float64")
        df["state"] = np.where(df["size"] == 0, "empty", "partial")
        df["color"] = df["state"].map(state_colors)
        n = len(df)
        fig = figure(name="device_queue_fig", title=f"Device (data) queue per step: empty "
                     f"{int((df['state'] == 'empty').sum())}/{n}", height=260, sizing_mode="stretch_width",
                     min_width=320, max_width=800,
                     tools="xpan,xwheel_zoom,reset,save", x_axis_label="Step (GetNext record)",
                     y_axis_label="Items in queue")
        src = _cds(df, "device_queue_src")
        fig.line("step", "size", source=src, color=theme.AXIS)
        r = fig.scatter("step", "size", source=src, color="color", size=6, legend_field="state")
        fig.add_tools(HoverTool(renderers=[r], tooltips=[("step", "@step"), ("size", "@size"),
                                                         ("GetNext", "@get_next_ms{0.000} ms")]))
        fig.y_range.start = -0.5
        fig.legend.location = "top_right"
        figs.append(theme.style(fig))
    if not figs:
        return Div(text="<i>No host or device queue records in this profile.</i>", name="queue_figure_empty")
    return row(*figs, sizing_mode="stretch_width")


# -- CPU utilisation --------------------------------------------------------------------------------
def cpu_samples(cpu_df: pd.DataFrame) -> pd.DataFrame:
    """The machine-CPU samples worth plotting, with ``t_s`` (float64, seconds since the first sample).

    MindSpore 2.10 interleaves all-zero samples into its series (FORMATS.md 3.11); a sample whose user,
    sys, io and idle shares are all 0 is not a measurement (a real one always adds up to ~100 %), so it is
    dropped here. The DataFrame on the Profile keeps every sample as written.
    """
    df = cpu_df.copy()
    share_cols = [c for c in ("user_pct", "sys_pct", "io_pct", "idle_pct") if c in df.columns]
    if share_cols:
        df = df[df[share_cols].fillna(0).sum(axis=1) > 0]
    t0 = cpu_df["time_ms"].min() if "time_ms" in cpu_df.columns and len(cpu_df) else 0.0
    df["t_s"] = (df["time_ms"] - t0) / 1000.0
    return df.reset_index(drop=True)


MACHINE_SERIES = [("user_pct", "user", "#0072B2"), ("sys_pct", "sys", "#D55E00"),
                  ("io_pct", "io wait", "#CC79A7"), ("idle_pct", "idle", "#999999")]
PROCESS_SERIES = [("process_user_pct", "user", "#56B4E9"), ("process_sys_pct", "sys", "#E69F00")]


def cpu_averages_html(cpu_df: pd.DataFrame, start_step: int = 1, end_step: int | None = None) -> str:
    """The CPU averages MindInsight shows for a step range (`analysis.minddata.cpu_summary`): machine
    user/sys/io wait/idle (% of all cores) and this process's user/sys (% of one core, so above 100 % on
    several cores), with the step range and samples they cover."""
    from ..analysis.minddata import cpu_summary
    c = cpu_summary(cpu_df, start_step, end_step)

    def cell(label, key):
        v = c.get(f"{key}_mean")
        return (f"<td style='padding:0 14px 0 0'>{html.escape(label)}<br><b>"
                f"{'–' if v is None else f'{v:.2f} %'}</b></td>")
    steps = cpu_df.attrs.get("step_total")
    span = f"steps {start_step}–{end_step or steps}" if steps else "the whole run"
    return (f"<div style=\"{theme.PANEL_CSS}\"><b>Average CPU use</b> <span style='{theme.MUTED_CSS}'>"
            f"({html.escape(span)}, {c['samples']:,} samples)</span><table><tr>"
            + cell("machine user", "device_user_pct") + cell("machine sys", "device_sys_pct")
            + cell("machine io wait", "device_io_pct") + cell("machine idle", "device_idle_pct")
            + cell("process user", "process_user_pct") + cell("process sys", "process_sys_pct")
            + "</tr></table></div>")


def cpu_figure(cpu_df: pd.DataFrame | None, op_cpu_df: pd.DataFrame | None = None,
               pipeline_df: pd.DataFrame | None = None):
    """The averages (``cpu_averages``), then on one time axis: the whole machine's CPU (``cpu_fig``: user,
    sys, io wait, idle; % of all cores), this process's (``process_cpu_fig``: user and sys; % of one core,
    so it passes 100 % on several cores) and each pipeline op's user+sys (``op_cpu_fig``, one line per op,
    source ``op_cpu_src_<op_id>``). The machine and the process are apart: their percents are of
    different wholes. Legends sit right of the plots, not over the data."""
    if cpu_df is None or cpu_df.empty:
        return Div(text="<i>No CPU utilisation records in this profile.</i>", name="cpu_figure_empty")
    df = cpu_samples(cpu_df)
    src = _cds(df, "cpu_src")
    figs = [Div(text=cpu_averages_html(cpu_df), name="cpu_averages", sizing_mode="stretch_width")]
    x_range = None
    for name, title, series, axis in (
            ("cpu_fig", "Whole machine", MACHINE_SERIES, "CPU, % of all cores"),
            ("process_cpu_fig", "This process", PROCESS_SERIES, "CPU, % of one core")):
        cols = [(c, lab, color) for c, lab, color in series if c in df.columns and df[c].notna().any()]
        if not cols:
            continue
        f = figure(name=name, title=title, height=220, sizing_mode="stretch_width", min_width=MIN_WIDTH_PX,
                   max_width=MAX_WIDTH_PX, tools="xpan,xwheel_zoom,box_zoom,reset,save",
                   x_axis_label=theme.axis_label("Time", "s"), y_axis_label=axis,
                   **({"x_range": x_range} if x_range is not None else {}))
        x_range = f.x_range
        lines = [f.line("t_s", c, source=src, color=color, legend_label=lab, line_width=1.5) for c, lab, color in cols]
        f.add_tools(HoverTool(renderers=lines[:1], mode="vline", tooltips=[("t", "@t_s{0.00} s")] +
                              [(lab, f"@{c}{{0.0}} %") for c, lab, _ in cols]))
        f.y_range.start = 0
        theme.style(f)
        f.legend.click_policy = "hide"
        f.add_layout(f.legend[0], "right")
        figs.append(f)
    fig = figs[1] if len(figs) > 1 else None
    if op_cpu_df is not None and len(op_cpu_df):
        ops = op_cpu_df.copy()
        ops["cpu_pct"] = ops["user_pct"].fillna(0) + ops["sys_pct"].fillna(0)
        ops["t_s"] = (ops["time_ms"] - cpu_df["time_ms"].min()) / 1000.0
        labels = {}
        if pipeline_df is not None and len(pipeline_df):
            labels = {int(i): op_label(t, i) for i, t in zip(pipeline_df["op_id"], pipeline_df["op_type"])}
        ops["op"] = [labels.get(int(i), f"op_{int(i)}") for i in ops["op_id"]]
        ofig = figure(name="op_cpu_fig", title="Per pipeline op (user + sys)", height=220,
                      sizing_mode="stretch_width", min_width=MIN_WIDTH_PX, max_width=MAX_WIDTH_PX,
                      tools="xpan,xwheel_zoom,reset,save", **({"x_range": fig.x_range} if fig is not None else {}),
                      x_axis_label=theme.axis_label("Time", "s"), y_axis_label="CPU, % of one core")
        ofig.add_tools(HoverTool(tooltips=[("op", "@op"), ("t", "@t_s{0.00} s"), ("cpu", "@cpu_pct %")]))
        # One source per op (``op_cpu_src_<op_id>``): Bokeh draws a line over a whole source, not a
        # filtered view of one.
        for (op_id, op), one in ops.groupby(["op_id", "op"], sort=False):
            color = theme.op_type_color(op.rsplit("_", 1)[0])
            ofig.line("t_s", "cpu_pct", source=_cds(one[["t_s", "cpu_pct", "op"]], f"op_cpu_src_{int(op_id)}"),
                      color=color, legend_label=op, line_width=1.2)
        ofig.y_range.start = 0
        theme.style(ofig)
        ofig.legend.click_policy = "hide"
        ofig.add_layout(ofig.legend[0], "right")
        figs.append(ofig)
    return column(*figs, sizing_mode="stretch_width", name="cpu_panel")


# -- verdict ----------------------------------------------------------------------------------------
def verdict_html(bottleneck_labels: list[str], suggestions, queue_summary: dict | None = None,
                 consumer_bound: bool = False) -> str:
    """The bottleneck verdict as an HTML fragment (every user string escaped).

    ``bottleneck_labels``: display names of the ops MindInsight's pipeline rule flagged (``MapOp_1``);
    ``suggestions``: the advisor's MindData suggestions (`nbprofiler.analysis.advisor`), drawn by the one
    suggestion renderer (`nbprofiler.views.suggestions`) with their evidence behind "why?";
    ``queue_summary``: the host/device queue counts of `queue_summary`.
    """
    from ..analysis.minddata import CHILD_MARGIN, HIGH_USAGE, LOW_USAGE
    from .suggestions import suggestions_html
    esc = html.escape
    parts = [f'<div style="{theme.PANEL_CSS}">']
    if bottleneck_labels:
        parts.append("<b>Bottleneck:</b> " + ", ".join(f"<code>{esc(lbl)}</code>" for lbl in bottleneck_labels)
                     + " <span style=\"" + theme.MUTED_CSS + "\">(MindInsight's pipeline rule: an op whose input "
                     f"queue is fuller than its output queue by more than {CHILD_MARGIN * 100:g} points, or a source "
                     f"op whose output queue is below {LOW_USAGE * 100:g} % full)</span>")
    elif consumer_bound:
        parts.append(f"<b>No pipeline bottleneck:</b> every queue is at least {HIGH_USAGE * 100:g} % full, so the "
                     "training step consumes data slower than the pipeline produces it; look at the step's compute "
                     "instead.")
    else:
        parts.append("<b>No pipeline op is flagged</b> by MindInsight's pipeline rule.")
    q = queue_summary or {}
    hq, dq = q.get("host_queue"), q.get("device_queue")
    counts = []
    if hq and hq.get("steps"):
        counts.append(f"host queue empty at {int(hq['empty_steps'])}/{int(hq['steps'])} steps, "
                      f"full at {int(hq.get('full_steps', 0))}/{int(hq['steps'])}")
    if dq and dq.get("steps"):
        counts.append(f"device queue empty at {int(dq['empty_steps'])}/{int(dq['steps'])} GetNext calls")
    if counts:
        parts.append(f'<div style="{theme.MUTED_CSS}">' + esc("; ".join(counts)) + "</div>")
    if suggestions:
        parts.append(suggestions_html(suggestions, title=None))
    parts.append("</div>")
    return "".join(parts)


# -- widget -----------------------------------------------------------------------------------------
_FRAMES = ("minddata_pipeline", "minddata_queues", "host_queue", "device_queue", "cpu_utilization",
           "op_cpu_utilization")


def _frames_of(prof_or_frames) -> dict:
    return frames_of(prof_or_frames, _FRAMES)


def minddata_analysis(frames: dict, advice: list | None = None) -> dict:
    """The analysis results the MindData view shows, computed by `nbprofiler.analysis.minddata`:
    ``bottleneck_ids`` (list of int, MindInsight's pipeline rule, root excluded), ``consumer_bound``
    (bool: every queue nearly full, the training step is the slow side), ``advice`` (the advisor's
    MindData suggestions: `nbprofiler.analysis.advisor.advise` on these frames, the same the summary and the
    overview show; ``advice``, when given, instead), ``queue_summary`` (host/device queue counts)."""
    from ..analysis import minddata as md
    from ..analysis.advisor import advise
    pipeline = frames.get("minddata_pipeline")
    out = {"bottleneck_ids": [], "consumer_bound": False, "advice": [], "queue_summary": {}}
    if pipeline is not None and len(pipeline):
        b = md.bottleneck_ops(pipeline)
        out["bottleneck_ids"] = [int(i) for i in b.op_ids]
        out["consumer_bound"] = bool(b.consumer_bound)
    if advice is None:
        advice = [s for s in advise(**{k: frames.get(k) for k in _FRAMES}) if s.area == "minddata"]
    out["advice"] = advice
    out["queue_summary"] = md.queue_summary(frames.get("host_queue"), frames.get("device_queue")) or {}
    return out


def _page_top(frames: dict, result: dict, usage: bool = True):
    """The top of the MindData page: the verdict, the advisor's MindData suggestions and the pipeline panel
    (``usage``: with its usage bars). Returns (list of Bokeh models, the graph's edges source or None)."""
    pipeline = frames.get("minddata_pipeline")
    labels = {}
    if pipeline is not None and len(pipeline):
        labels = {int(i): op_label(t, i) for i, t in zip(pipeline["op_id"], pipeline["op_type"])}
    verdict = Div(text=verdict_html([labels.get(i, str(i)) for i in result["bottleneck_ids"]], [],
                                    result["queue_summary"], result["consumer_bound"]),
                  name="minddata_verdict", sizing_mode="stretch_width")
    panel = edges = None
    if pipeline is not None and len(pipeline):
        panel, edges = _pipeline_panel(pipeline, frames.get("minddata_queues"), result["bottleneck_ids"],
                                       usage=usage)
    # The advisor's MindData suggestions, each with buttons selecting the queues it cites in the graph below.
    from .suggestions import suggestions_layout
    named = {"minddata_edges_src": edges} if edges is not None else {}
    parts = [verdict, suggestions_layout(result["advice"], named.get, name="minddata_suggestions", empty=None)]
    if panel is not None:
        parts.append(panel)
    return parts, edges


def _page_queues(frames: dict, result: dict, usage: bool = False, steps: bool = True) -> list:
    """(``usage``: the pipeline's queue usage bars, then) host and device queues per step (left out when
    ``steps`` is False and the bars are there), then where the time between steps goes (`step_gap_figures`)."""
    pipeline = frames.get("minddata_pipeline")
    parts = []
    if usage and _present(pipeline) and len(pipeline_queues(pipeline)):
        parts.append(queue_usage_chart(pipeline, result["bottleneck_ids"]))
    if steps or not parts:
        parts.append(queue_figure(frames.get("host_queue"), frames.get("device_queue")))
    gap = step_gap_figures(frames.get("host_queue"), frames.get("device_queue"), result["queue_summary"])
    if gap is not None:
        parts.append(gap)
    return parts


def minddata_layout(frames: dict):
    """The whole MindData page as one Bokeh layout (verdict, pipeline panel, queues, CPU), usable with
    ``bokeh.embed.file_html``. ``frames``: the Profile's MindData frames by property name."""
    result = minddata_analysis(frames)
    top, _ = _page_top(frames, result)
    parts = [*top, *_page_queues(frames, result),
             cpu_figure(frames.get("cpu_utilization"), frames.get("op_cpu_utilization"),
                        frames.get("minddata_pipeline"))]
    return theme.themed(column(*parts, sizing_mode="stretch_width", name="minddata_layout"))


# The MindDataView's sections below the pipeline, folded until opened (each is built then): the tab opens
# with the verdict and the pipeline at once, not after every chart of the page is built (~30 ms a figure).
SECTIONS = ("queues", "cpu")


class MindDataView(traitlets.HasTraits, View):
    """The MindData page in a notebook: verdict, pipeline graph (click a queue to see its size over
    time), and folded below it (built when first opened) the host/device queues per step and the CPU
    utilisation.

    ``prof_or_frames``: a `Profile` or a dict of its frames by property name (``minddata_pipeline``,
    ``minddata_queues``, ``host_queue``, ``device_queue``, ``cpu_utilization``, ``op_cpu_utilization``).
    ``.widget`` is an ipywidgets widget (jupyter_bokeh ``BokehModel``s inside a VBox); ``.layout`` the Bokeh
    layout of the top (verdict, suggestions, pipeline panel); ``.section(name)`` the Bokeh layout of a
    folded section (``"queues"``, ``"cpu"``; building it if needed, as opening its fold does);
    ``.display()`` shows it. Linkable state: ``queue`` (op_id whose output queue is selected in the graph,
    None for none; a click in the graph sets it too).
    """

    queue = traitlets.Int(None, allow_none=True)
    FRAMES = _FRAMES   # what it reads of a Profile (and its diagnosis's MindData findings)

    @staticmethod
    def report_layout(prof):
        """The report's section of a `Profile`: the whole page, its folds unfolded."""
        return minddata_layout(_frames_of(prof))

    def __init__(self, prof_or_frames):
        super().__init__()
        import ipywidgets as W
        from jupyter_bokeh import BokehModel
        self.frames = _frames_of(prof_or_frames)
        advice = None
        if not isinstance(prof_or_frames, dict):  # a Profile: its diagnosis's MindData findings, as every page
            from ..analysis.diagnosis import diagnose
            advice = [s for s in diagnose(prof_or_frames).findings if s.area == "minddata"]
        self._result = minddata_analysis(self.frames, advice)
        top, self._edges_src = _page_top(self.frames, self._result, usage=False)
        layout = column(*top, sizing_mode="stretch_width", name="minddata_layout")
        self.layout = theme.themed(layout, theme.ui_elements(layout))
        self._sections: dict[str, object] = {}
        self._cpu_range = None
        self._shown: set[str] = set()
        self._holders = {name: W.VBox([], layout=W.Layout(width="100%")) for name in SECTIONS}
        folds = []
        for name, title in (("queues", self._queues_title()), ("cpu", "CPU utilisation")):
            if name == "cpu" and not _present(self.frames.get("cpu_utilization")):
                continue
            if name == "queues" and not (self._has_usage() or self._has_steps()):
                continue
            fold = W.Accordion(children=[self._holders[name]], titles=(title,), selected_index=None,
                               layout=W.Layout(width="100%"))
            fold.observe(lambda ch, name=name: ch["new"] == 0 and self._open(name), names="selected_index")
            folds.append(fold)
        self.folds = folds
        cpu = self.frames.get("cpu_utilization")
        steps = cpu.attrs.get("step_total") if cpu is not None and len(cpu) else None
        if steps and int(steps) > 1:
            # MindInsight's step-range control of the CPU averages (cpu_summary's start/end steps)
            self.cpu_steps = W.IntRangeSlider(value=(1, int(steps)), min=1, max=int(steps), step=1,
                                              description="CPU steps", continuous_update=False,
                                              layout=W.Layout(width="480px"))
            self.cpu_steps.observe(lambda ch: self.set_cpu_steps(*ch["new"]), names="value")
            self._holders["cpu"].children = [self.cpu_steps]
        self.widget = W.VBox([BokehModel(self.layout), *folds], layout=W.Layout(width="100%"))
        if self._edges_src is not None:
            self.set_trait("queue", self.selected_queue)   # the graph starts on the flagged queue
            self._edges_src.selected.on_change("indices", lambda attr, old, new: self._on_js_select())

    def _has_usage(self) -> bool:
        """The pipeline has queues between ops (usage bars to show)."""
        pipeline = self.frames.get("minddata_pipeline")
        return _present(pipeline) and bool(pipeline["parent_id"].notna().any())

    def _has_steps(self) -> bool:
        return _present(self.frames.get("host_queue")) or _present(self.frames.get("device_queue"))

    def _queues_title(self) -> str:
        what = [w for w, has in (("Queue usage", self._has_usage()),
                                 ("queues and data transmission per step", self._has_steps())) if has]
        q = self._result["queue_summary"]
        hq, dq = q.get("host_queue"), q.get("device_queue")
        counts = []
        if hq and hq.get("steps"):
            counts.append(f"host queue empty at {int(hq['empty_steps'])}/{int(hq['steps'])} steps")
        if dq and dq.get("steps"):
            counts.append(f"device queue empty at {int(dq['empty_steps'])}/{int(dq['steps'])}")
        title = ", ".join(what)
        return title[:1].upper() + title[1:] + (f" ({'; '.join(counts)})" if counts else "")

    def section(self, name: str):
        """The Bokeh layout of the folded section ``name`` (one of `SECTIONS`), built on first use."""
        if name not in SECTIONS:
            raise ValueError(f"unknown section {name!r}; sections are {SECTIONS}")
        if name not in self._sections:
            f = self.frames
            if name == "queues":
                parts = _page_queues(f, self._result, usage=True, steps=self._has_steps())
            else:
                parts = [cpu_figure(f.get("cpu_utilization"), f.get("op_cpu_utilization"), f.get("minddata_pipeline"))]
            layout = column(*parts, sizing_mode="stretch_width", name=f"minddata_{name}_section")
            self._sections[name] = theme.themed(layout, theme.ui_elements(layout))
            if name == "cpu" and self._cpu_range is not None:
                self.set_cpu_steps(*self._cpu_range)
        return self._sections[name]

    def _open(self, name: str) -> None:
        """Show section ``name`` in its fold (the fold was opened)."""
        if name in self._shown:
            return
        from jupyter_bokeh import BokehModel
        self._shown.add(name)
        holder = self._holders[name]
        holder.children = [*holder.children, BokehModel(self.section(name))]

    def set_cpu_steps(self, start_step: int, end_step: int) -> None:
        """Show the CPU averages of steps ``start_step``..``end_step`` (MindInsight's step range; applied
        when the CPU section is built if it is not yet)."""
        self._cpu_range = (int(start_step), int(end_step))
        cpu = self._sections.get("cpu")
        div = cpu.select_one({"name": "cpu_averages"}) if cpu is not None else None
        if div is not None:
            div.text = cpu_averages_html(self.frames["cpu_utilization"], int(start_step), int(end_step))

    def _edges(self):
        return self._edges_src

    def _queue_ids(self) -> list[int]:
        edges = self._edges()
        return [int(i) for i in edges.data["op_id"]] if edges is not None else []

    def _on_js_select(self):
        if self.selected_queue != self.queue:
            self.queue = self.selected_queue

    @property
    def selected_queue(self) -> int | None:
        """op_id whose output queue is selected in the graph (None when nothing is selected)."""
        edges = self._edges()
        if edges is None or not edges.selected.indices:
            return None
        return int(edges.data["op_id"][edges.selected.indices[0]])

    def select_queue(self, op_id: int) -> None:
        """Select the output queue of ``op_id`` (as a click in the graph does)."""
        ids = self._queue_ids()
        if int(op_id) not in ids:
            raise ValueError(f"op {op_id} has no output queue in the pipeline graph; queues: {ids}")
        self.queue = int(op_id)

    def select_op(self, op_id: int) -> int | None:
        """Select the queue that shows ``op_id`` best: its output queue, else (the root op) its input queue.
        Returns the op_id whose queue is selected (None when the pipeline draws no queue for it)."""
        ids = self._queue_ids()
        pipeline = self.frames.get("minddata_pipeline")
        candidates = [int(op_id)]
        if pipeline is not None and len(pipeline):
            row = pipeline[pipeline["op_id"] == int(op_id)]
            if len(row):
                candidates += [int(c) for c in (row["children_ids"].iloc[0] or [])]
        hit = next((c for c in candidates if c in ids), None)
        if hit is not None:
            self.queue = hit
        return hit

    @traitlets.observe("queue")
    def _on_queue(self, change):
        edges = self._edges()
        if edges is None:
            return
        want = [] if change["new"] is None else [self._queue_ids().index(int(change["new"]))]
        if list(edges.selected.indices) != want:
            edges.selected.indices = want

