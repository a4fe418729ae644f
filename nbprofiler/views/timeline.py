"""Timeline view: tracks grouped by process, events as bars coloured by op type, zoom/pan re-queries.

Figure factories take DataFrames and return Bokeh models that also work in a standalone HTML file:

- `track_table(tracks_df, order=None)`: display row and label of every track (process / thread).
- `timeline_figure(lod_df, tracks_df, x_range=None, order=None, flows_df=None)`: the event bars
  (``timeline_src``), flows as arrows (``timeline_flows_src``), hover with name/type/start/duration/args,
  a click shows the event's full details below the plot (``timeline_details``, rendered as text).
- `minimap_figure(density_df, x_range)`: event density of the whole trace with a RangeTool on the main
  view's time axis.
- `search_events(timeline_df, pattern)`: events whose name matches a regex.
- `TimelineView(prof_or_frames)`: the widget. It builds the level-of-detail index once and sends the page
  the bars of the window shown and of half its width on each side, as numbers only (codes into the
  names and op types it sent once). A pan or zoom inside what the page holds is redrawn by the browser
  alone; for one that leaves it, or zooms in more than `HELD_ZOOM` times past its detail, the page asks
  the kernel at once to re-query the index at the plot's width in pixels. Never more than `MAX_GLYPHS`
  bars a window's width. Also search with jump-to, pinned/reordered tracks, flows, range statistics and
  the minimap. ``set_window(t0_us, t1_us)`` links it from other views.

Times are microseconds relative to the profile's origin (the frames' ``start_us``).
"""
from __future__ import annotations

import json
import re
import threading

import numpy as np
import pandas as pd
import traitlets
from bokeh.layouts import column, row
from bokeh.models import (BoxSelectTool, CDSView, ColumnDataSource, CustomJS, CustomJSHover, DataTable,
                          Div, FixedTicker, GroupFilter, HBar, HoverTool, Label, LinearColorMapper, NumberFormatter,
                          Quad, Range1d, RangeTool, Scatter, Segment, Select, TableColumn, TapTool)
from bokeh.plotting import figure

from . import theme
from .base import View
from .pages import frames_of
from .timeline_bars import (Dictionary, bar_data, bar_table, dictionary_of, row_lookup, rows_of, track_rows,
                            track_table)

MAX_GLYPHS = 20_000          # never send more bars than this per window's width to the browser
# The page holds the window shown and this many of its widths on each side, so a pan inside them needs
# no kernel; a zoom may go this many times past the detail held before new detail is asked for.
NEIGHBOURS = 0.5
HELD_ZOOM = 2.0
# Flow arrows drawn at most: each is its own path and head, redrawn every frame of a pan (2,000 cost the
# page ~110 ms a frame in headless Chromium, and more than a few hundred across a view are a tangle anyway)
MAX_FLOWS = 500
_FLOW_BLOCK = 65_536         # flows `flows_in_window` tests at a time, at most
_FLOW_FIRST_BLOCK = 2_048    # ... in its first block (a wide window finds its MAX_FLOWS in a few thousand)
MAX_MATCHES = 1_000          # rows of the search table
MAX_ARGS_CHARS = 2_000       # args text carried per bar (hover and details)
DEBOUNCE_S = 0.04            # a wheel gesture's events arrive ~16 ms apart: one query for the gesture
ROW_HEIGHT_PX = 26
MIN_ROW_HEIGHT_PX = 14
# Tracks share at most this height: with many tracks the rows get thinner (down to MIN_ROW_HEIGHT_PX), so
# the plot fits a laptop screen below the controls; the time axis sits above the tracks, always in view.
MAX_TRACKS_HEIGHT_PX = 460
LEGEND_TYPES = 12            # op types named in the colour legend (the most frequent in view)
_NO_PIN = -1                 # the pin dropdown's "choose a track" entry (ipywidgets shows None as blank)
# Plots stretch to the notebook cell between these widths (a fixed width was clipped in JupyterLab's
# default layout); the widest plot is also the pixel resolution the level-of-detail query merges at.
MIN_WIDTH_PX = 480
MAX_WIDTH_PX = 1600



def prepare_flows(flows_df: pd.DataFrame | None, tracks: pd.DataFrame) -> dict:
    """The flows between shown tracks, in start order: ``x0``, ``x1`` (µs) and ``y0``, ``y1`` (rows) as
    arrays, ``pos``, their rows in the frame, whose ``cat`` and ``name`` stay there, and ``back`` /
    ``ahead``, how far before its end a flow starts at most / after it. Done once per track order, so a
    re-query only looks at the flows that can have an end in its window (`flows_in_window`) and turns
    just the ones it shows into text."""
    empty = {"x0": np.zeros(0), "y0": np.zeros(0, np.int32), "x1": np.zeros(0), "y1": np.zeros(0, np.int32),
             "pos": np.zeros(0, np.int64), "cat": pd.Series([], dtype=object), "name": pd.Series([], dtype=object),
             "back": 0.0, "ahead": 0.0}
    if flows_df is None or len(flows_df) == 0:
        return empty
    x0, x1 = flows_df["start_us"].to_numpy(dtype="float64"), flows_df["end_us"].to_numpy(dtype="float64")
    row_of = row_lookup(tracks)
    y0, y1 = (rows_of(row_of, _track_ids(flows_df[c])) for c in ("start_track", "end_track"))
    shown = y0 >= 0
    shown &= y1 >= 0
    shown &= x0 == x0   # (not NaN)
    shown &= x1 == x1
    keep = np.flatnonzero(shown)
    if len(keep) < len(flows_df):  # else every flow is shown: the frame's own columns, no copies (millions)
        x0, y0, x1, y1 = x0[keep], y0[keep], x1[keep], y1[keep]
    if np.any(x0[1:] < x0[:-1]):  # loaders write flows in start order; other frames are sorted here once
        order = np.argsort(x0, kind="stable")
        x0, y0, x1, y1, keep = x0[order], y0[order], x1[order], y1[order], keep[order]
    length = x1 - x0
    return {"x0": x0, "y0": y0, "x1": x1, "y1": y1, "pos": keep, "cat": flows_df["cat"], "name": flows_df["name"],
            "back": float(max(length.max(), 0.0)) if len(length) else 0.0,
            "ahead": float(max(-length.min(), 0.0)) if len(length) else 0.0}


def _track_ids(column: pd.Series) -> np.ndarray:
    """A column of track ids as an array: its own integers where it holds them (no float copy), else
    floats (a missing id NaN)."""
    plain = isinstance(column.dtype, np.dtype) and column.dtype.kind == "i"
    return column.to_numpy() if plain else column.to_numpy(dtype="float64")


def flows_in_window(prepared: dict, t0: float, t1: float, texts: bool = True) -> dict:
    """Column data of ``timeline_flows_src``: the `prepare_flows` flows with an end inside [t0, t1], the
    first `MAX_FLOWS` of them in start order. Columns x0, y0 (start), x1, y1 (end), ``angle`` of the head
    at the end (radians: down to a lower row, up, or right along one), and with ``texts`` cat and name
    (the page draws no text of a flow, so the views send none)."""
    x0, x1 = prepared["x0"], prepared["x1"]
    # A flow with its end in the window starts in [t0 - back, t1 + ahead]: only those are looked at (x0 is
    # sorted), a block at a time, each 4 times the last, until MAX_FLOWS are found.
    lo = int(np.searchsorted(x0, t0 - prepared["back"], side="left"))
    hi = int(np.searchsorted(x0, t1 + prepared["ahead"], side="right"))
    found, n, at, block = [], 0, lo, _FLOW_FIRST_BLOCK
    while at < hi and n < MAX_FLOWS:
        a, b = x0[at:min(at + block, hi)], x1[at:min(at + block, hi)]
        found.append(at + np.flatnonzero(((a >= t0) & (a <= t1)) | ((b >= t0) & (b <= t1))))
        n += len(found[-1])
        at, block = at + block, min(4 * block, _FLOW_BLOCK)
    hit = np.concatenate(found)[:MAX_FLOWS] if found else np.zeros(0, np.int64)
    rows = prepared["pos"][hit]
    y0, y1 = prepared["y0"][hit].astype(np.int64), prepared["y1"][hit].astype(np.int64)
    # rows grow downwards: a flow to a lower row ends in a head pointing down
    angle = np.where(y1 > y0, np.pi, np.where(y1 < y0, 0.0, -np.pi / 2))
    out = {"x0": x0[hit], "y0": y0, "x1": x1[hit], "y1": y1, "angle": angle}
    if texts:
        out.update(cat=_texts(prepared["cat"], rows), name=_texts(prepared["name"], rows))
    return out


def _texts(column: pd.Series, rows: np.ndarray) -> list[str]:
    """``column``'s values at ``rows`` as text. Taken from the slice the rows span first: a frame loaded
    from the cache holds its text in many Arrow chunks, and a take from all of them joins them all
    (~6 ms for a million flow names) where the slice holds the few the rows are in."""
    if not len(rows):
        return []
    lo, hi = int(rows.min()), int(rows.max()) + 1
    return column.iloc[lo:hi].iloc[rows - lo].astype(str).tolist()


def flow_data(flows_df: pd.DataFrame | None, tracks: pd.DataFrame, t0: float, t1: float) -> dict:
    """Column data of ``timeline_flows_src``: flows with an end inside [t0, t1] between shown tracks,
    at most `MAX_FLOWS`. Columns x0, y0 (start), x1, y1 (end), cat, name."""
    return flows_in_window(prepare_flows(flows_df, tracks), t0, t1)


def density(index, bins: int = 800) -> pd.DataFrame:
    """Events per time bin over the whole trace, all tracks together, for the minimap: ``left``,
    ``right`` (us bin edges) and ``events`` (count), from a `TimelineIndex` (`TimelineIndex.density`)."""
    if index.n == 0:
        return pd.DataFrame({"left": [], "right": [], "events": []})
    edges, counts = index.density(bins)
    return pd.DataFrame({"left": edges[:-1], "right": edges[1:], "events": counts})


def search_events(timeline_df: pd.DataFrame, pattern: str, limit: int = MAX_MATCHES) -> pd.DataFrame:
    """Events whose ``name`` matches the regex ``pattern`` (case-insensitive ``re.search``), in time order.

    Returns ``track``, ``name``, ``op_type``, ``start_us``, ``dur_us`` (at most ``limit`` rows) with
    ``attrs["total"]`` = the number of matches (`nbprofiler.analysis.timeline.search`).
    Raises ``re.error`` for an invalid pattern.
    """
    from ..analysis.timeline import search
    cols = [c for c in ("track", "name", "op_type", "start_us", "dur_us") if c in timeline_df.columns]
    out = search(timeline_df, pattern)[cols].sort_values("start_us", kind="stable")
    total = len(out)
    out = out.head(limit).reset_index(drop=True)
    out.attrs["total"] = total
    return out


# -- figures ----------------------------------------------------------------------------------------
# Hover and click read the names, op types and track labels from the dictionaries sent once.
_COL_JS = "const col = (s, c) => (s.data instanceof Map ? s.data.get(c) : s.data[c]);\n"
# The names come as one text (`names_text`), split once and kept on the source for as long as its text is
# the same.
_NAMES_JS = """const names_of = (s) => {
  const text = col(s, 'text')[0], sep = col(s, 'sep')[0];
  if (s.__nbpNamesText !== text) {
    s.__nbpNames = sep === '' ? JSON.parse(text) : text.split(sep);
    s.__nbpNamesText = text;
  }
  return s.__nbpNames;
};
"""
# Separators tried in turn: control characters no profiler puts in an op's name
_NAME_SEPARATORS = ("\x00", "\x1f", "\x1e")

_NAME_JS = _COL_JS + _NAMES_JS + (
    "return value < -1 ? (-value) + ' events (zoom in)' : value >= 0 ? names_of(names)[value] : '';")
_TYPE_JS = _COL_JS + "return value >= 0 ? col(types, 'type')[value + 1] : '';"
_TRACK_JS = _COL_JS + "return col(labels, 'label')[value] ?? '';"
_DETAILS_JS = _COL_JS + _NAMES_JS + """
const i = src.selected.indices.length ? src.selected.indices[0] : -1;
if (i < 0) { return; }
const get = (c) => col(src, c)[i];
const code = get('name_code'), type = get('type_code');
const name = code < -1 ? (-code) + ' events' : code >= 0 ? names_of(names)[code] : '';
let text = name + '\\n' + 'type: ' + (type >= 0 ? col(types, 'type')[type + 1] : '') + '    track: '
  + (col(labels, 'label')[get('y')] ?? '') + '\\n'
  + 'start: ' + get('left').toFixed(3) + ' us    duration: ' + get('dur_us').toFixed(3) + ' us';
if (get('count') > 1) { text += '    events merged: ' + get('count'); }
details.text = text;
"""


def names_text(names: list[str]) -> tuple[str, str]:
    """``names`` as one text and its separator, a character none of them holds (`_NAME_SEPARATORS`), or as a
    JSON array with the separator "" where every one is held somewhere."""
    for sep in _NAME_SEPARATORS:
        text = sep.join(names)
        if text.count(sep) == max(len(names) - 1, 0):
            return text, sep
    return json.dumps(names), ""


def dictionary_sources(dictionary: Dictionary, tracks: pd.DataFrame) -> dict:
    """The page's copies of the dictionaries: ``timeline_names_src`` (the names by name code as one
    ``text`` and its ``sep``arator, `names_text`), ``timeline_types_src`` (``type`` and ``color`` by type
    code + 1) and ``timeline_labels_src`` (each row's track label).

    The names go as one text: a trace has tens of thousands of them, and Bokeh's serializer encodes the
    items of a list one by one in Python, where a join makes the text at C speed (7x faster than
    `json.dumps` at 71k names; the page splits it once, `_NAMES_JS`)."""
    text, sep = names_text(dictionary.names)
    return {"names": ColumnDataSource({"text": [text], "sep": [sep]}, name="timeline_names_src"),
            "types": ColumnDataSource({"type": ["", *dictionary.types], "color": dictionary.colors},
                                      name="timeline_types_src"),
            "labels": ColumnDataSource({"label": [str(x) for x in tracks["label"]]}, name="timeline_labels_src")}


def timeline_figure(bars: pd.DataFrame, tracks_df: pd.DataFrame, dictionary: Dictionary,
                    x_range: Range1d | None = None, order: list[int] | None = None,
                    flows_df: pd.DataFrame | None = None, width: int = MAX_WIDTH_PX,
                    flows_prepared: dict | None = None, min_width_us: float | None = None):
    """The timeline: one row per track (labels "process / thread"), events as bars coloured by op type.

    ``bars``: `lod_query` bars with codes (``codes=True``, or `lod_columns`' arrays); ``dictionary``: the
    `Dictionary` their codes point into; ``tracks_df``: `Profile.timeline_tracks`; ``order``: pinned track
    ids; ``width``: the widest the plot grows (px): it stretches to its container, down to `MIN_WIDTH_PX`. Returns
    ``column(figure, details)``: the figure ``timeline_fig`` (wheel zoom, active on scroll, and pan on the
    time axis, box select of a time range, hover, tap) and the ``timeline_details`` Div that shows the
    clicked event's details as text. ``min_width_us``: the least width a bar is drawn at (default: a
    pixel of the whole run at ``width``).
    """
    tracks = track_table(tracks_df, order)
    if min_width_us is None and len(bars["start_us"]):
        min_width_us = float(np.max(bars["end_us"]) - np.min(bars["start_us"])) / max(width, 1)
    data = bar_data(bars, tracks, min_width_us or 0.0)
    if x_range is None:
        lo = float(np.min(data["left"])) if len(data["left"]) else 0.0
        hi = float(np.max(data["right"])) if len(data["right"]) else 1.0
        pad = max((hi - lo) * 0.01, 1.0)
        x_range = Range1d(lo - pad, hi + pad, bounds=(lo - pad, hi + pad), name="timeline_x_range")
    n = max(len(tracks), 1)
    row_px = max(MIN_ROW_HEIGHT_PX, min(ROW_HEIGHT_PX, MAX_TRACKS_HEIGHT_PX // n))
    fig = figure(name="timeline_fig", title=None, x_range=x_range, y_range=Range1d(n - 0.5, -0.5),
                 sizing_mode="stretch_width", min_width=MIN_WIDTH_PX, max_width=max(width, MIN_WIDTH_PX),
                 height=50 + row_px * n, tools="xpan,xwheel_zoom,reset,save",
                 active_scroll="xwheel_zoom", active_drag="xpan", x_axis_location="above",
                 x_axis_label="time from the start of the trace")
    src = ColumnDataSource(data, name="timeline_src")
    dicts = dictionary_sources(dictionary, tracks)
    # type code k -> palette entry k + 1 (entry 0: no type); the half steps keep every code off an edge
    colors = LinearColorMapper(palette=dictionary.colors, low=-1.5, high=len(dictionary.colors) - 1.5,
                               name="timeline_colors")
    fill = {"field": "type_code", "transform": colors}
    # Canvas, not WebGL: without a GPU (headless Chromium, many VMs) WebGL draws in software, and 20,000
    # bars took ~0.5 s a frame against ~0.1 s on the canvas (a GPU draws either in a frame).
    bars_r = fig.hbar(y="y", left="left", right="right", height=0.75, source=src, fill_color=fill,
                      fill_alpha="alpha", line_color=None, selection_line_color=theme.HIGHLIGHT,
                      selection_line_width=2, selection_fill_alpha="alpha", nonselection_fill_alpha="alpha",
                      name="timeline_bars")
    # the search matches in the window, outlined (glyphs added as they are: these sources are never
    # selected, so no selection variants of them are built and sent)
    highlight = ColumnDataSource({"y": [], "left": [], "right": []}, name="timeline_highlight_src")
    fig.add_glyph(highlight, HBar(y="y", left="left", right="right", height=0.95, fill_alpha=0.0,
                                  line_color=theme.HIGHLIGHT, line_width=2))
    # the search match the view jumped to: filled, so it stands out among the other matches
    current = ColumnDataSource({"y": [], "left": [], "right": []}, name="timeline_current_src")
    fig.add_glyph(current, HBar(y="y", left="left", right="right", height=1.0, fill_color=theme.HIGHLIGHT,
                                fill_alpha=0.35, line_color=theme.HIGHLIGHT, line_width=3))
    if flows_prepared is None:
        flows_prepared = prepare_flows(flows_df, tracks)
    flows = ColumnDataSource(flows_in_window(flows_prepared, x_range.start, x_range.end, texts=False),
                             name="timeline_flows_src")
    # a segment glyph and a head marker at the end, drawn as two batches (Arrow annotations drew each flow
    # on its own: 500 cost a pan ~50 ms a frame against ~5 ms), bare: never selected, so no variants
    fig.add_glyph(flows, Segment(x0="x0", y0="y0", x1="x1", y1="y1", line_color=theme.AXIS, line_alpha=0.7,
                                 line_width=1), name="timeline_flows")
    fig.add_glyph(flows, Scatter(x="x1", y="y1", marker="triangle", angle="angle", size=7, fill_color=theme.AXIS,
                                 line_color=None), name="timeline_flow_heads")
    fig.add_tools(HoverTool(renderers=[bars_r], tooltips=[
        ("name", "@name_code{custom}"), ("type", "@type_code{custom}"), ("track", "@y{custom}"),
        ("start", "@left{0,0.000} us"), ("duration", "@dur_us{0,0.000} us"), ("events", "@count"),
        ("busy", "@busy_us{0,0.000} us")], formatters={
        "@name_code": CustomJSHover(args=dict(names=dicts["names"]), code=_NAME_JS),
        "@type_code": CustomJSHover(args=dict(types=dicts["types"]), code=_TYPE_JS),
        "@y": CustomJSHover(args=dict(labels=dicts["labels"]), code=_TRACK_JS)}))
    fig.add_tools(TapTool(renderers=[bars_r]), BoxSelectTool(dimensions="width", renderers=[bars_r],
                                                             name="timeline_box_select"))
    fig.yaxis.ticker = FixedTicker(ticks=list(range(len(tracks))))
    fig.yaxis.major_label_overrides = {int(r): str(lbl) for r, lbl in zip(tracks["row"], tracks["label"])}
    fig.ygrid.visible = False
    theme.time_us_axis(fig.xaxis)
    details = Div(text="Click an event to see its details.", render_as_text=True, name="timeline_details",
                  sizing_mode="stretch_width", styles={"white-space": "pre-wrap", "font-family": theme.MONO_FONT,
                                       "font-size": "12px", "color": "var(--jp-ui-font-color1, #333)"})
    src.selected.js_on_change("indices", CustomJS(args=dict(src=src, details=details, **dicts), code=_DETAILS_JS))
    layout = column(theme.style(fig), details, sizing_mode="stretch_width")
    return theme.themed(layout, theme.ui_elements(layout))


def minimap_figure(density_df: pd.DataFrame, x_range: Range1d, width: int = MAX_WIDTH_PX) -> figure:
    """The whole trace's event count per time bin (``timeline_minimap_src``) with a RangeTool that drags and
    resizes the main view's time window."""
    lo = float(density_df["left"].min()) if len(density_df) else 0.0
    hi = float(density_df["right"].max()) if len(density_df) else 1.0
    fig = figure(name="timeline_minimap", height=90, sizing_mode="stretch_width", min_width=MIN_WIDTH_PX,
                 max_width=max(width, MIN_WIDTH_PX), x_range=Range1d(lo, hi), tools="",
                 toolbar_location=None, y_axis_label="events")
    src = ColumnDataSource({c: density_df[c].to_numpy() for c in density_df.columns}, name="timeline_minimap_src")
    fig.add_glyph(src, Quad(left="left", right="right", bottom=0, top="events", fill_color=theme.AXIS,
                            line_color=theme.AXIS, fill_alpha=0.7, line_alpha=0.7))
    tool = RangeTool(x_range=x_range)
    tool.overlay.fill_color = theme.HIGHLIGHT
    tool.overlay.fill_alpha = 0.15
    fig.add_tools(tool)
    fig.yaxis.visible = False
    fig.ygrid.visible = False
    theme.time_us_axis(fig.xaxis)
    return theme.style(fig)


def stats_table(stats_df: pd.DataFrame | None = None) -> DataTable:
    """Per-track, per-op-type statistics of a selected time range (``timeline_stats_src``; ``percent`` is
    of the track's busy time in the range)."""
    cols = ["track_label", "op_type", "count", "total_us", "avg_us", "percent"]
    data = {c: (stats_df[c].tolist() if stats_df is not None and c in stats_df.columns else []) for c in cols}
    src = ColumnDataSource(data, name="timeline_stats_src")
    num = NumberFormatter(format="0,0.000")
    return DataTable(source=src, name="timeline_stats", sizing_mode="stretch_width", min_width=300, height=220,
                     index_position=None, visible=bool(len(data["op_type"])),
                     columns=[TableColumn(field="track_label", title="track"),
                              TableColumn(field="op_type", title="op type"), TableColumn(field="count", title="events"),
                              TableColumn(field="total_us", title="total (us)", formatter=num),
                              TableColumn(field="avg_us", title="average (us)", formatter=num),
                              TableColumn(field="percent", title="% of the track's busy time",
                                          formatter=NumberFormatter(format="0.00"))])


_JUMP_JS = """
const col = (s, c) => (s.data instanceof Map ? s.data.get(c) : s.data[c]);
const i = matches.selected.indices.length ? matches.selected.indices[0] : -1;
if (i < 0) { return; }
const s = col(matches, 'start_us')[i], d = col(matches, 'dur_us')[i];
const span = Math.max(d * 20, 50);
xr.setv({start: s - span / 2, end: s + d + span / 2});
"""


def matches_table(matches_df: pd.DataFrame | None, x_range: Range1d, tracks: pd.DataFrame) -> DataTable:
    """Search results (``timeline_matches_src``); selecting a row jumps the time axis to that event."""
    labels = dict(zip(tracks["track"].astype(int), tracks["label"]))
    df = matches_df if matches_df is not None else pd.DataFrame(columns=["track", "name", "start_us", "dur_us"])
    data = {"name": df["name"].astype(str).tolist(), "track_label": [labels.get(int(t), str(t)) for t in df["track"]],
            "start_us": df["start_us"].to_numpy(dtype="float64"), "dur_us": df["dur_us"].to_numpy(dtype="float64")}
    src = ColumnDataSource(data, name="timeline_matches_src")
    src.selected.js_on_change("indices", CustomJS(args=dict(matches=src, xr=x_range), code=_JUMP_JS))
    num = NumberFormatter(format="0,0.000")
    return DataTable(source=src, name="timeline_matches", sizing_mode="stretch_width", min_width=300, height=220,
                     index_position=None, visible=bool(len(data["name"])),
                     columns=[TableColumn(field="name", title="name"), TableColumn(field="track_label", title="track"),
                              TableColumn(field="start_us", title="start (us)", formatter=num),
                              TableColumn(field="dur_us", title="duration (us)", formatter=num)])


# Pixels a column of a counter line spans (its first, lowest, highest and last samples are drawn): the
# browser redraws the line at every zoom, tens of us a point (headless Chromium), and 4 points a pixel
# across a 1,600 px view made a wide zoom 0.3-0.4 s slower.
COUNTER_COLUMN_PX = 4

_COUNTER_SELECT_JS = """
filter.group = labels.indexOf(cb_obj.value);
src.change.emit();
fig.title.text = cb_obj.value;
"""


def prepare_counters(counters_df: pd.DataFrame | None) -> dict | None:
    """The counter samples as arrays for `counter_window`: ``labels`` (one per series: "name (series)",
    or the name alone for a series called "value"), and per series, contiguous and in time order,
    ``start_us``, ``value`` and its ``series`` code, with ``bounds`` (the offset where each series starts,
    and the end). None without counters."""
    if counters_df is None or counters_df.empty:
        return None
    # a label per distinct (name, series), not per sample: hundreds of thousands of samples, a few series
    # (a missing name or series reads "nan")
    names, name_values = pd.factorize(counters_df["name"], use_na_sentinel=False)
    series, series_values = pd.factorize(counters_df["series"], use_na_sentinel=False)
    k = len(series_values)
    pair, keys = pd.factorize(names.astype(np.int64) * k + series)
    pair_label = pd.Series([f"{name_values[p // k]} ({series_values[p % k]})" for p in keys]).str.replace(
        r" \(value\)$", "", regex=True)
    label_of_pair, labels = pd.factorize(pair_label)
    code = label_of_pair[pair]
    start = counters_df["start_us"].to_numpy(float)
    order = np.lexsort((start, code))
    code = code[order].astype(np.int32)
    return {"labels": list(labels), "series": code, "start_us": start[order],
            "value": counters_df["value"].to_numpy(float)[order],
            "bounds": np.searchsorted(code, np.arange(len(labels) + 1))}


def counter_window(prepared: dict, t0: float, t1: float, columns: int, series: int | None = None) -> dict:
    """Column data of ``timeline_counters_src`` for the window [t0, t1] cut in ``columns`` columns: per
    series (every one, or the one coded ``series``), its samples from the one the window opens on to the
    one after it, all of them where they are at most 4 a column, else per column the first, lowest,
    highest and last (the samples that give a line through all of them its shape at that resolution).
    Columns start_us, value, series."""
    x, v = prepared["start_us"], prepared["value"]
    bounds = prepared["bounds"]
    keep = []
    for lo, hi in zip(bounds[:-1], bounds[1:]) if series is None else [bounds[series:series + 2]]:
        a = lo + max(int(np.searchsorted(x[lo:hi], t0, side="right")) - 1, 0)
        b = lo + min(int(np.searchsorted(x[lo:hi], t1, side="right")) + 1, hi - lo)
        if b - a <= 4 * columns or not t1 > t0:
            keep.append(np.arange(a, b))
            continue
        column = np.clip(np.floor((x[a:b] - t0) * (columns / (t1 - t0))), -1, columns).astype(np.int64)
        start = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
        end = np.r_[start[1:], b - a] - 1
        group = np.repeat(np.arange(len(start)), end - start + 1)
        vals = v[a:b]
        picked = [start, end]
        place = np.arange(b - a)
        for extreme in (np.minimum, np.maximum):
            # each column's first sample equal to its extreme (none where it is NaN: first/last only)
            at = np.minimum.reduceat(np.where(vals == extreme.reduceat(vals, start)[group], place, b - a), start)
            picked.append(at[at < b - a])
        picked = np.sort(np.concatenate(picked))   # (np.unique hashes: ~10x a sort of these few thousand)
        keep.append(a + picked[_starts(picked)])
    rows = np.concatenate(keep) if keep else np.zeros(0, np.int64)
    return {"start_us": x[rows], "value": v[rows], "series": prepared["series"][rows]}


def _starts(sorted_values: np.ndarray) -> np.ndarray:
    """Where each run of equal values of a sorted array begins (bool per value)."""
    out = np.ones(len(sorted_values), bool)
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=out[1:])
    return out


def counter_columns(width: int) -> int:
    """How many columns `counter_window` cuts a counter line ``width`` pixels wide in: one per
    `COUNTER_COLUMN_PX` pixels."""
    return max(width // COUNTER_COLUMN_PX, 1)


def counter_figure(prepared: dict | None, x_range: Range1d, width: int = MAX_WIDTH_PX, every_series: bool = True):
    """The trace's counter samples (``prepared``: `prepare_counters` of ``timeline_counters``: memory,
    bandwidth, frequency ...) under the timeline on the same time axis: one series at a time, chosen in a
    select (``timeline_counter_select``, CustomJS, works in a standalone file), drawn as a step line of
    `counter_window`'s samples over the counters' whole span: of every series, or with
    ``every_series=False`` of the first one only (`TimelineView` sends the chosen series' samples of the
    shown range as it zooms). None without counters."""
    if prepared is None:
        return None
    labels = prepared["labels"]
    span = float(prepared["start_us"].min()), float(prepared["start_us"].max())
    src = ColumnDataSource(counter_window(prepared, *span, counter_columns(width), None if every_series else 0),
                           name="timeline_counters_src")
    filt = GroupFilter(column_name="series", group=0)
    fig = figure(name="timeline_counters", title=labels[0], height=150, sizing_mode="stretch_width",
                 min_width=MIN_WIDTH_PX, max_width=max(width, MIN_WIDTH_PX), x_range=x_range,
                 tools="xpan,xwheel_zoom,reset,save", active_scroll="xwheel_zoom")
    fig.step("start_us", "value", source=src, view=CDSView(filter=filt), mode="after", color=theme.OP_TYPE_PALETTE[0],
             line_width=1.5)
    fig.add_tools(HoverTool(tooltips=[("at", "@start_us{0,0.0} us"), ("value", "@value{0,0.000}")]))
    theme.time_us_axis(fig.xaxis)
    select = Select(title="Counter", value=labels[0], options=labels, width=360, name="timeline_counter_select")
    select.js_on_change("value", CustomJS(args=dict(src=src, filter=filt, fig=fig, labels=labels),
                                          code=_COUNTER_SELECT_JS))
    return column(select, theme.style(fig, legend=False), sizing_mode="stretch_width", name="timeline_counters_panel")


# -- the static report's timeline ---------------------------------------------------------------------
TIMELINE_BUDGET = 8_000  # bars in the report's timeline: ~2-3 MB of HTML, responsive in a browser
TIMELINE_WIDTH_PX = 1600


def timeline_lod(timeline_df: pd.DataFrame, budget: int, width_px: int, index=None
                 ) -> tuple[pd.DataFrame, str, Dictionary]:
    """Whole-run level of detail for a static report (no kernel to re-query on zoom):
    `nbprofiler.analysis.timeline.lod_query` over the full time range at ``width_px`` pixels, at most
    about ``budget`` bars (sub-pixel runs merged into aggregate bars whose ``count`` says how many
    events they stand for). Returns the bars with codes (what `timeline_figure` draws), a sentence saying
    how many events were merged, and the `Dictionary` of the codes. ``index``: the frame's
    `TimelineIndex` if already built."""
    from ..analysis import timeline as T
    if index is None:
        index = T.build_index(timeline_df, levels=False)  # one query: merging the events is cheaper
    t0, t1 = index.t_min, index.t_max
    bars = T.lod_query(index, t0, t1, width_px, max_glyphs=budget, codes=True)
    n_events = len(timeline_df)
    drawn = int(bars["count"].sum())
    merged_events = int(bars.loc[bars["count"] > 1, "count"].sum())
    merged_bars = int((bars["count"] > 1).sum())
    dictionary = dictionary_of(index)
    if merged_events == 0 and drawn == n_events:
        return bars, f"All {n_events:,} events are drawn.", dictionary
    note = (f"{n_events:,} events drawn as {len(bars):,} bars: {merged_events:,} events too short to see at the "
            f"full-run zoom ({(t1 - t0) / width_px:,.1f} us per pixel) are merged into {merged_bars:,} "
            "aggregate bars (each in its main op type's colour, as opaque as it is busy; hover shows how many)")
    if drawn < n_events:
        note += f"; {n_events - drawn:,} events are left out"
    return bars, note + ". In a notebook (prof.show()) a zoom queries the events themselves.", dictionary


def report_timeline(timeline_df: pd.DataFrame, tracks_df: pd.DataFrame, counters_df: pd.DataFrame | None = None,
                    width_px: int = TIMELINE_WIDTH_PX):
    """The report's timeline: the whole run at `TIMELINE_BUDGET` bars (`timeline_lod`) under its note,
    with the finer levels of detail stored as tiles (`nbprofiler.views.timeline_tiles`) that the page
    draws as the view zooms, a ``timeline_level_note`` saying which level is shown, and the counters."""
    import html
    from ..analysis import timeline as T
    from . import timeline_tiles
    index = T.build_index(timeline_df)   # the coarse levels serve the wide tiles
    lod, note, dictionary = timeline_lod(timeline_df, TIMELINE_BUDGET, width_px, index=index)
    tiles, bars = timeline_tiles.lod_tiles(index, index.t_min, index.t_max, width_px,
                                           timeline_tiles.TILE_BUDGET_BYTES, root=lod)
    index._release()
    bars, dictionary = timeline_tiles.names_in_use(bars, dictionary)
    fig = timeline_figure(bars[0], tracks_df, dictionary, width=width_px)
    level, _ = timeline_tiles.tiled_timeline(fig, tiles, bars, tracks_df, width_px)
    counters = counter_figure(prepare_counters(counters_df), fig.select_one({"name": "timeline_fig"}).x_range,
                              width=width_px)
    return column(Div(text=f"<p>{html.escape(note)}</p>", name="timeline_lod_note", sizing_mode="stretch_width"),
                  level, fig, *([counters] if counters is not None else []), sizing_mode="stretch_width")


# -- widget -----------------------------------------------------------------------------------------
# The page's side of a move of the time axis (wheel, drag, minimap, reset, a jump). The axis is not synced
# to the kernel by BokehJS (``syncable`` off: its start and its end would be a message each, and each
# message costs the page two kernel status messages that JupyterLab redraws its indicator for); the page
# says each move once, whole, in ``ask.tags`` = [start, end, n, the plot's width in px, need]. A window it
# can draw from the bars it holds (``src.tags``: start, end and µs per pixel held, and the plot's width;
# the rule of `TimelineView.covers`) is told with need 0: the kernel takes the window and sends its flows
# once the axis rests. Any other window is asked for with need 1 and answered at once, one question at a
# time: a window that moved on while the answer was on its way is said when the answer arrives
# (`_ANSWERED_JS`), and a question left unanswered for 2 s is asked again. A move the kernel's own patch
# makes (`set_window`, which sends the bars with it; the loader marks the document while it applies one)
# says nothing. ``busy`` is a label drawn on the plot: changing it costs a repaint, where a text outside
# the plot made BokehJS lay out the whole view again (~50 ms of the page's time, twice a zoom).
_ASK_FN = """
function ask(busy, ask_src, src, xr, fig, zoom) {
  const doc = xr.document;
  if (doc != null && doc.__nbprofilerPatched != null && doc.__nbprofilerPatched.size > 0) { return; }
  if (ask_src.__nbpQueued) { return; }
  // once the move is whole: BokehJS calls back for its start before it has set its end
  ask_src.__nbpQueued = true;
  queueMicrotask(() => {
    ask_src.__nbpQueued = false;
    const [h0, h1, px, width] = src.tags.length ? src.tags : [0, 0, 0, 1];
    const covered = xr.start >= h0 && xr.end <= h1 && (xr.end - xr.start) / width * zoom >= px;
    busy.setv({text: covered ? '' : 'loading detail…', visible: !covered});
    if (!covered) {   // a question: one at a time
      const now = Date.now();
      if (ask_src.__nbpAsked && now - ask_src.__nbpAsked < 2000) { ask_src.__nbpAgain = true; return; }
      ask_src.__nbpAsked = now;
    }
    ask_src.__nbpAgain = false;
    const plot_px = fig.inner_width > 0 ? fig.inner_width : width;
    ask_src.tags = [xr.start, xr.end, (ask_src.tags.length > 2 ? ask_src.tags[2] : 0) + 1, plot_px, covered ? 0 : 1];
  });
}
"""
_ASK_JS = _ASK_FN + "ask(busy, ask_src, src, xr, fig, zoom);"
_ANSWERED_JS = _ASK_FN + """
busy.setv({text: '', visible: false});
ask_src.__nbpAsked = 0;
// after the patch that brought the answer is applied (a question asked while it is would be taken for
// the kernel's own move)
if (ask_src.__nbpAgain) { ask_src.__nbpAgain = false; setTimeout(() => ask(busy, ask_src, src, xr, fig, zoom), 0); }
"""


def _frames_of(prof_or_frames, ranks=None, align: str = "clock", offsets_us: dict | None = None,
               anchor=None) -> dict:
    if hasattr(prof_or_frames, "ranks"):  # a Cluster: the chosen ranks stacked on one clock
        from ..analysis.cluster_timeline import stacked_timeline
        return stacked_timeline(prof_or_frames, ranks, align, offsets_us, anchor)
    return frames_of(prof_or_frames, TimelineView.FRAMES)


class TimelineView(traitlets.HasTraits, View):
    """The timeline in a notebook: pans and zooms drawn by the page, new detail queried from Python.

    ``prof_or_frames``: a `Profile`, a dict with ``timeline``, ``timeline_tracks`` and optionally
    ``timeline_flows``, or a `Cluster`: its ``ranks`` (default all) stacked, each rank's tracks together,
    on one clock (``align`` "clock" or "communication", ``anchor`` a collective to pin the alignment on,
    plus ``offsets_us`` per rank: see `nbprofiler.analysis.cluster_timeline`; how well they met is in
    ``events.attrs["alignment"]``). The level-of-detail index is built once. The page holds
    the bars of the window shown and of `NEIGHBOURS` widths on each side (``held``: start, end and µs per
    pixel); a change of the time axis (wheel zoom, pan, minimap) that stays inside them, at no more than
    `HELD_ZOOM` times their detail, is drawn by the page alone; for any other the page asks at once
    (`_on_ask`) and the index is re-queried (`set_window` re-queries at once too), replacing
    ``timeline_src``'s data with at most `MAX_GLYPHS` bars per window's width. Every change of
    the axis is also answered after ``debounce_s`` seconds of quiet (`refresh`: the window's flows, and its
    bars where the page holds none, as after a change made from Python). Also: regex search
    (`search`) highlighting matches and listing them with jump-to, pinned tracks (`pin_tracks`), flows,
    per-op-type statistics of a box-selected time range (`select_range`) and a minimap. ``queries`` counts
    the re-queries. ``marks``: events to outline, a frame with ``track``, ``start_us``, ``dur_us`` and
    ``color`` (``timeline_marks_src``; the timeline diff's changed operators).
    """

    # the single event last clicked (name, op_type, track, start_us, dur_us; empty: none): linkable state
    event = traitlets.Dict()
    FRAMES = ("timeline", "timeline_tracks", "timeline_flows", "timeline_counters")  # what it reads of a Profile

    @staticmethod
    def report_layout(prof):
        """The report's section of a `Profile` (`report_timeline`): the whole run reduced by level of
        detail under a note saying how many events were merged or left out, finer levels stored for the
        page to draw as it zooms, and the counters below it."""
        return report_timeline(prof.timeline, prof.timeline_tracks, prof.timeline_counters)

    def __init__(self, prof_or_frames, width: int = MAX_WIDTH_PX, debounce_s: float = DEBOUNCE_S,
                 ranks=None, align: str = "clock", offsets_us: dict | None = None, anchor=None,
                 marks: pd.DataFrame | None = None):
        super().__init__()
        import ipywidgets as W
        from bokeh.events import SelectionGeometry
        from .bokeh_widget import BokehWidget
        frames = _frames_of(prof_or_frames, ranks, align, offsets_us, anchor)
        # one Profile: a tapped event's call stack can be looked up (`show_source`)
        self._prof = (None if isinstance(prof_or_frames, (dict, tuple, list)) or hasattr(prof_or_frames, "ranks")
                      else prof_or_frames)
        self.events = frames["timeline"]
        self.tracks_df = frames["timeline_tracks"]
        self.flows = frames["timeline_flows"]
        self.width = width
        self.plot_px = width         # the plot's drawing width (px) as the page last said: the bars' resolution
        self.debounce_s = debounce_s
        self.queries = 0
        self.pinned: list[int] = []
        self.matches: pd.DataFrame | None = None
        self.match_index: int | None = None   # the match the view jumped to (row of `matches`)
        self._pending = None
        self._answered = None        # the page's last question answered (`_on_ask`)
        self._shown = None           # the window whose flows and status the page has (`_send_flows`)
        self._setting_window = False
        self.held: tuple[float, float, float] | None = None
        from ..analysis import timeline as engine
        self._engine = engine
        # The coarse levels (fast wide windows) are built beside the kernel's work once the view is up:
        # the first open does not wait for them, and queries until then merge the events (same bars).
        self._index = engine.build_index(self.events, levels=False)
        self.levels_built = threading.Thread(target=self._index.build_levels, name="nbprofiler-lod-levels",
                                             daemon=True)
        self.dictionary = dictionary_of(self._index)
        dens = density(self._index)
        lo = float(dens["left"].min()) if len(dens) else 0.0
        hi = float(dens["right"].max()) if len(dens) else 1.0
        pad = max((hi - lo) * 0.01, 1.0)
        # the page says its moves of the axis in one message each (`_on_ask`), not as start and end
        self.x_range = Range1d(lo - pad, hi + pad, bounds=(lo - pad, hi + pad), name="timeline_x_range",
                               syncable=False)
        self.tracks = track_table(self.tracks_df)
        self._row_of = row_lookup(self.tracks)
        self._flows_prepared = prepare_flows(self.flows, self.tracks)
        self.held = (lo - pad, hi + pad, (hi - lo + 2 * pad) / width)
        self.plot = timeline_figure(self._query(*self.held), self.tracks_df, self.dictionary, self.x_range,
                                    flows_df=self.flows, width=width, flows_prepared=self._flows_prepared,
                                    min_width_us=self.held[2])
        # The models the view updates, taken from where `timeline_figure` puts them: a search of the layout
        # walks all its models (~25 ms each, and each a share of the tab's first open).
        self.fig, self._details = self.plot.children   # rendered as text, never HTML
        named = {r.data_source.name: r.data_source for r in self.fig.renderers}
        hover = next(t for t in self.fig.tools if isinstance(t, HoverTool))
        named["timeline_labels_src"] = hover.formatters["@y"].args["labels"]
        self.source = named["timeline_src"]
        self.source.tags = [*self.held, self.plot_px]
        self.marks = marks
        self._marks_src = None
        if marks is not None:   # drawn once, outlined over the bars (a few hundred at most: never re-queried)
            self._marks_src = ColumnDataSource(self._marks_data(), name="timeline_marks_src")
            self.fig.add_glyph(self._marks_src, HBar(y="y", left="left", right="right", height=0.95,
                                                     fill_color="color", fill_alpha=0.12, line_color="color",
                                                     line_width=2), name="timeline_marks")
        self.minimap = minimap_figure(dens, self.x_range, width=width)
        # The search results and the range statistics are hidden until they have rows: each table is built
        # when first filled (`matches_table`, `stats`), into this row.
        self._tables = row(sizing_mode="stretch_width")
        self._matches_table = self._stats = None
        # Shown by the browser the moment the time axis leaves what the page holds (top left of the
        # tracks), cleared by the re-query's answer: the feedback does not wait for the kernel.
        self.busy = Label(text="", name="timeline_busy", x=4, x_units="screen", y=-0.5, y_units="data",
                          text_baseline="top", text_font=theme.FONT, text_font_size="12px", text_color=theme.TEXT,
                          background_fill_color=theme.AXIS, background_fill_alpha=0.15, level="overlay",
                          visible=False)
        self.fig.add_layout(self.busy)
        # the page's questions (`_ASK_JS`): a source of no glyph, so that its change costs the page nothing
        self.ask = ColumnDataSource(data={}, name="timeline_ask")
        ask_args = dict(busy=self.busy, ask_src=self.ask, src=self.source, xr=self.x_range, fig=self.fig,
                        zoom=HELD_ZOOM)
        ask_js = CustomJS(args=ask_args, code=_ASK_JS)
        self.x_range.js_on_change("start", ask_js)
        self.x_range.js_on_change("end", ask_js)
        self.source.js_on_change("data", CustomJS(args=ask_args, code=_ANSWERED_JS))
        self.ask.on_change("tags", self._on_ask)
        self._counters = prepare_counters(frames.get("timeline_counters"))
        counters = counter_figure(self._counters, self.x_range, width=width, every_series=False)
        if counters is not None:  # the chosen series alone, sent again when another is chosen
            # the panel is column(select, figure), the figure's one renderer drawing the counters' source
            self._counter_select, counter_fig = counters.children
            self._counters_src = counter_fig.renderers[0].data_source
            self._counter_select.on_change("value", lambda attr, old, new: self._send_counters())
        self.layout = column(self.minimap, self.plot, *([counters] if counters is not None else []),
                             self._tables,
                             sizing_mode="stretch_width", name="timeline_layout")
        # (its own elements: a search of its models would reach the timeline's figure through the
        # callbacks of the time axis it shares, and style that figure again)
        theme.themed(self.minimap, theme.ui_elements(self.minimap))
        self._sources = {n: named.get(n) for n in
                         ("timeline_flows_src", "timeline_highlight_src", "timeline_current_src",
                          "timeline_labels_src")}
        self.source.selected.on_change("indices", self._on_tap)
        self.x_range.on_change("start", self._on_range)
        self.x_range.on_change("end", self._on_range)
        self.fig.on_event(SelectionGeometry, self._on_select)

        # the page's copy of the layout; a re-query's changes reach it as one message (`BokehWidget.batched`)
        self._bokeh = BokehWidget(self.layout)
        self.search_box = W.Text(placeholder="regex, e.g. MatMul|Conv", description="Search",
                                 continuous_update=False, layout=W.Layout(width="300px"))
        self.search_box.observe(lambda ch: self.search(ch["new"]), names="value")
        self.prev_button = W.Button(description="◂", tooltip="previous match", layout=W.Layout(width="34px"))
        self.next_button = W.Button(description="▸", tooltip="next match (Enter in the box searches again)",
                                    layout=W.Layout(width="34px"))
        self.prev_button.on_click(lambda _: self.next_match(-1))
        self.next_button.on_click(lambda _: self.next_match(1))
        self.pin_box = W.Dropdown(options=[("pin a track first…", _NO_PIN)] +
                                  [(str(lbl), int(t)) for lbl, t in zip(self.tracks["label"], self.tracks["track"])],
                                  value=_NO_PIN, layout=W.Layout(width="260px"))
        self.pin_box.observe(self._on_pin, names="value")
        self.unpin_button = W.Button(description="unpin all", layout=W.Layout(width="80px"))
        self.unpin_button.on_click(lambda _: self.pin_tracks([]))
        self.status = W.HTML()
        self.legend = W.HTML()
        self.source_panel = W.HTML("", layout=W.Layout(width="100%"))   # a tapped event's stack (`show_source`)
        self.widget = W.VBox([W.HBox([self.search_box, self.prev_button, self.next_button, self.pin_box,
                                      self.unpin_button], layout=W.Layout(flex_flow="row wrap")),
                              self.status, self.legend, self._bokeh, self.source_panel],
                             layout=W.Layout(width="100%"))
        self._set_status()
        self.levels_built.start()

    @property
    def matches_table(self) -> DataTable:
        """The search results' table (`matches_table`; hidden without matches), built on first use."""
        if self._matches_table is None:
            self._matches_table = theme.themed(matches_table(None, self.x_range, self.tracks))
            self._tables.children = [self._matches_table, *self._tables.children]
        return self._matches_table

    @property
    def stats(self) -> DataTable:
        """The selected range's statistics (`stats_table`; hidden without a range), built on first use."""
        if self._stats is None:
            self._stats = theme.themed(stats_table())
            self._tables.children = [*self._tables.children, self._stats]
        return self._stats

    # -- querying -----------------------------------------------------------------------------------
    def _query(self, h0: float, h1: float, px: float) -> dict:
        """The bars of [h0, h1] at ``px`` µs per pixel, as `lod_columns` arrays (no args: a click fetches
        the one event's, so a zoom ships less)."""
        pixels = max(int(round((h1 - h0) / px)), 1) if px > 0 else self.width
        budget = int(MAX_GLYPHS * max(pixels / self.plot_px, 1.0))
        lod = self._engine.lod_columns(self._index, h0, h1, pixels, max_glyphs=budget)
        # the engine keeps to about max_glyphs; this makes it a hard cap
        return {c: v[:budget] for c, v in lod.items()}

    def _held_for(self, t0: float, t1: float) -> tuple[float, float, float]:
        """What the page is sent for the window [t0, t1]: it and `NEIGHBOURS` widths each side (inside the
        axis bounds), at the window's µs per pixel."""
        span = max(t1 - t0, 1e-9)
        lo, hi = self.x_range.bounds if self.x_range.bounds else (t0 - NEIGHBOURS * span, t1 + NEIGHBOURS * span)
        return max(t0 - NEIGHBOURS * span, lo), min(t1 + NEIGHBOURS * span, hi), span / self.plot_px

    def covers(self, t0: float, t1: float) -> bool:
        """True when the page can draw [t0, t1] from what it holds: inside ``held``, at no more than
        `HELD_ZOOM` times its detail (the same rule the page applies to its busy note)."""
        if self.held is None:
            return False
        h0, h1, px = self.held
        return t0 >= h0 and t1 <= h1 and (t1 - t0) / self.plot_px * HELD_ZOOM >= px

    def requery(self, t0: float | None = None, t1: float | None = None) -> None:
        """Query the bars for the time window [t0, t1] (default: the time axis's) and its neighbours and
        push them with the flows, counters and highlights."""
        self._pending = None
        if t0 is None or t1 is None:
            t0, t1 = self._axis_window()
        held = self._held_for(t0, t1)
        lod = self._query(*held)
        self.queries += 1
        self.held = held
        with self._bokeh.batched():
            self.source.tags = [*held, self.plot_px]
            self.source.data = bar_data(lod, self.tracks, held[2], row_of=self._row_of)
            self._send_flows(t0, t1)
            self._send_counters()
            self._update_highlight()
        self._set_status(t0, t1)

    def _axis_window(self) -> tuple[float, float]:
        """The time axis's window as the kernel last heard of it (start, end; µs)."""
        return float(self.x_range.start), float(self.x_range.end)

    def _on_ask(self, attr, old, new) -> None:
        """The page moved the time axis (`_ASK_JS`: ``ask.tags`` = [start, end, n, the plot's width in px,
        need]; the axis itself is not synced from the page): the kernel's axis takes the window, and a window
        the page cannot draw (need 1) is answered at once, merged at the plot's own pixels; else the axis's
        rest sends its flows (`_on_range`). jupyter_bokeh calls back twice for each change the page makes:
        each is taken once."""
        if len(new) < 3 or tuple(new) == self._answered or not float(new[1]) > float(new[0]):
            return
        self._answered = tuple(new)
        if len(new) > 3 and float(new[3]) >= 1:   # the plot's width in the page: bars a pixel wide there
            self.plot_px = min(int(new[3]), self.width)
        t0, t1 = float(new[0]), float(new[1])
        need = len(new) < 5 or bool(new[4])
        self._setting_window = need       # answered below, not after the axis rests
        try:
            for attr_, value in (("start", t0), ("end", t1)):   # the page has it: not sent back
                self.x_range.lookup(attr_).__set__(self.x_range, value, setter=self._bokeh)
        finally:
            self._setting_window = False
        if need:
            self.requery(t0, t1)

    def refresh(self) -> None:
        """After the time axis moved: re-query when the page cannot draw the window from what it holds,
        else send only the window's flows and say what is shown."""
        self._pending = None
        window = self._axis_window()
        if window == self._shown:   # the page's question for this window was answered with it
            return
        if self.covers(*window):
            with self._bokeh.batched():
                self._send_flows()
            self._set_status()
        else:
            self.requery()

    def _send_flows(self, t0: float | None = None, t1: float | None = None) -> None:
        """The flows with an end in the window shown ([t0, t1], default the time axis's; not held around it:
        at most `MAX_FLOWS`, so a wide held range would leave the window's own flows out)."""
        if t0 is None or t1 is None:
            t0, t1 = self._axis_window()
        self._sources["timeline_flows_src"].data = flows_in_window(self._flows_prepared, t0, t1, texts=False)
        self._shown = (t0, t1)

    def _send_counters(self) -> None:
        """The chosen counter series' samples for the window held, at this width."""
        if self._counters is not None:
            h0, h1, px = self.held
            self._counters_src.data = counter_window(
                self._counters, h0, h1, counter_columns(max(int((h1 - h0) / px), 1) if px > 0 else self.width),
                self._counters["labels"].index(self._counter_select.value))

    def _on_range(self, attr, old, new) -> None:
        if self._setting_window:        # set_window re-queries once itself
            return
        if self.debounce_s <= 0:
            self.refresh()
            return
        if self._pending is not None:
            self._pending.cancel()
        try:
            import asyncio
            self._pending = asyncio.get_running_loop().call_later(self.debounce_s, self.refresh)
        except RuntimeError:          # no event loop (plain Python): a timer thread instead
            self._pending = threading.Timer(self.debounce_s, self.refresh)
            self._pending.start()

    def clamp(self, t0_us: float, t1_us: float) -> tuple[float, float]:
        """The window [t0_us, t1_us] kept inside the axis bounds, as the page would draw it (BokehJS clamps a
        range to its bounds): a window past one end is cut there."""
        if not self.x_range.bounds:
            return float(t0_us), float(t1_us)
        lo, hi = self.x_range.bounds
        return max(float(t0_us), float(lo)), min(float(t1_us), float(hi))

    def set_window(self, t0_us: float, t1_us: float) -> None:
        """Show the time window [t0_us, t1_us] (us relative to the profile origin; kept inside the axis
        bounds, `clamp`) and re-query now."""
        if not t1_us > t0_us:
            raise ValueError(f"empty window: {t0_us} .. {t1_us}")
        t0_us, t1_us = self.clamp(t0_us, t1_us)
        if not t1_us > t0_us:
            raise ValueError(f"window {t0_us} .. {t1_us} lies outside the timeline")
        if self._pending is not None:
            self._pending.cancel()
        self._setting_window = True
        with self._bokeh.batched():   # the new axis and its bars in one message
            try:
                self.x_range.update(start=float(t0_us), end=float(t1_us))
            finally:
                self._setting_window = False
            self.requery()

    def bars(self) -> pd.DataFrame:
        """The bars the page holds, with their names, op types, track labels and colours (`bar_table`)."""
        return bar_table(self.source.data, self.dictionary, self.tracks)

    def _marks_data(self) -> dict:
        """Column data of ``timeline_marks_src``: the ``marks`` on shown tracks (``y`` their rows)."""
        m = self.marks
        y = track_rows(self.tracks, m["track"].to_numpy(dtype=np.int64)) if len(m) else np.zeros(0, np.int32)
        keep = y >= 0
        start = m["start_us"].to_numpy(dtype=np.float64)[keep]
        # true lengths (the outline's 2 px line keeps a zero-length event visible at any zoom)
        return {"y": y[keep], "left": start, "right": start + m["dur_us"].to_numpy(np.float64)[keep],
                "color": m["color"].astype(str).to_numpy()[keep].tolist()}

    # -- tracks -------------------------------------------------------------------------------------
    def pin_tracks(self, track_ids: list[int]) -> None:
        """Put these tracks first, in this order; the others keep the trace's own order below them."""
        self.pinned = [int(t) for t in track_ids]
        self.tracks = track_table(self.tracks_df, self.pinned)
        self._row_of = row_lookup(self.tracks)
        self._flows_prepared = prepare_flows(self.flows, self.tracks)
        self.fig.yaxis.major_label_overrides = {int(r): str(lbl) for r, lbl in
                                                zip(self.tracks["row"], self.tracks["label"])}
        self._sources["timeline_labels_src"].data = {"label": [str(x) for x in self.tracks["label"]]}
        if self._marks_src is not None:
            self._marks_src.data = self._marks_data()
        self.requery()

    def _on_pin(self, change) -> None:
        if change["new"] == _NO_PIN:
            return
        self.pin_tracks([*[t for t in self.pinned if t != change["new"]], int(change["new"])])
        self.pin_box.value = _NO_PIN

    # -- search -------------------------------------------------------------------------------------
    def search(self, pattern: str) -> pd.DataFrame | None:
        """Find events whose name matches ``pattern`` (regex); list them (jump-to on row click) and
        outline those in the current window. An empty pattern clears the search. Returns the matches."""
        if not pattern:
            self.matches = None
        else:
            try:
                self.matches = search_events(self.events, pattern)
            except re.error as err:
                self.status.value = f"<span style='{theme.MUTED_CSS}'>invalid regex: {_esc(str(err))}</span>"
                return None
        fresh = matches_table(self.matches, self.x_range, self.tracks)
        self.matches_table.source.data = dict(fresh.source.data)
        self.matches_table.visible = bool(self.matches is not None and len(self.matches))
        self.match_index = None
        if self.matches is not None and len(self.matches):
            # the first match from the start of the current window on (or the first of all)
            later = np.flatnonzero(self.matches["start_us"].to_numpy() >= float(self.x_range.start))
            self._jump_to(int(later[0]) if len(later) else 0)
        else:
            self._update_highlight()
            self._set_status()
        return self.matches

    def next_match(self, step: int = 1) -> int | None:
        """Jump to the next match (``step=-1``: the previous one), wrapping around; returns its row."""
        if self.matches is None or not len(self.matches):
            return None
        i = 0 if self.match_index is None else (self.match_index + step) % len(self.matches)
        self._jump_to(i)
        return i

    def _jump_to(self, i: int) -> None:
        """Centre the view on match ``i``, zoomed so it is clearly visible but keeps its neighbours."""
        m = self.matches.iloc[i]
        self.match_index = i
        start, dur = float(m["start_us"]), max(float(m["dur_us"]), 0.0)
        width = float(self.x_range.end) - float(self.x_range.start)
        if width > 50 * max(dur, 1.0):  # the event would be a sliver: zoom in around it
            width = max(50 * dur, 20.0)
        mid = start + dur / 2
        self.set_window(mid - width / 2, mid + width / 2)

    def _update_highlight(self) -> None:
        src = self._sources["timeline_highlight_src"]
        current = self._sources["timeline_current_src"]
        empty = {"y": [], "left": [], "right": []}
        if self.matches is None or not len(self.matches):
            # only when they show something: every change is a message to the page (~3 ms each to make)
            for s in (src, current):
                if len(s.data["left"]):
                    s.data = empty
            return
        rows = dict(zip(self.tracks["track"].astype(int), self.tracks["row"].astype(int)))
        if self.match_index is not None and int(self.matches["track"].iloc[self.match_index]) in rows:
            c = self.matches.iloc[self.match_index]
            current.data = {"y": [rows[int(c["track"])]], "left": [float(c["start_us"])],
                            "right": [float(c["start_us"]) + float(c["dur_us"])]}
        else:
            current.data = empty
        t0, t1 = self.held[:2]
        m = self.matches
        m = m[(m["start_us"] + m["dur_us"] >= t0) & (m["start_us"] <= t1)]
        m = m[m["track"].astype(int).isin(rows.keys())]
        src.data = {"y": [rows[int(t)] for t in m["track"]], "left": m["start_us"].to_numpy(),
                    "right": (m["start_us"] + m["dur_us"]).to_numpy()}

    def _on_tap(self, attr, old, new) -> None:
        d = self.source.data
        if len(new) != 1 or d["count"][new[0]] != 1:
            return  # a merged bar is many events: nothing to link to
        i = new[0]
        label = self.tracks["label"].iloc[int(d["y"][i])] if 0 <= int(d["y"][i]) < len(self.tracks) else ""
        self.event = {"name": self.dictionary.name(int(d["name_code"][i])),
                      "op_type": self.dictionary.type(int(d["type_code"][i])), "track": str(label),
                      "start_us": float(d["left"][i]), "dur_us": float(d["dur_us"][i])}
        row = int(d["row"][i])
        if row >= 0 and self._prof is not None:
            ev = self.events.iloc[row]
            self.show_source(int(ev["track"]), float(ev["start_us"]), str(ev["name"]))
        if row >= 0 and "args" in self.events.columns:
            args = self.events["args"].iloc[row]
            if isinstance(args, str) and args:
                try:
                    args = json.dumps(json.loads(args), indent=2)
                except ValueError:
                    pass
                self._details.text = (f"{self.event['name']}\ntype: {self.event['op_type']}    track: "
                                      f"{self.event['track']}\nstart: {self.event['start_us']:.3f} us    duration: "
                                      f"{self.event['dur_us']:.3f} us\nargs: {args[:MAX_ARGS_CHARS]}")

    def show_source(self, track: int, start_us: float, name: str):
        """Show where the event (``track``, ``start_us``, ``name``) was called from in the Source panel below
        the timeline (`nbprofiler.analysis.source.event_source`, which it returns; None for a view of
        frames or of a cluster)."""
        if self._prof is None:
            return None
        from ..analysis.source import event_source
        from .source import source_html
        found = event_source(self._prof, track, start_us, name)
        self.source_panel.value = source_html(found)
        return found

    # -- range statistics ---------------------------------------------------------------------------
    def select_range(self, t0_us: float, t1_us: float) -> pd.DataFrame:
        """Per-track, per-op-type statistics of [t0_us, t1_us] into the statistics table; returns them
        (`nbprofiler.analysis.timeline.range_stats` with ``by_track``, plus ``track_label``)."""
        stats = self._engine.range_stats(self.events, t0_us, t1_us, by_track=True).rename(
            columns={"share_pct": "percent"})
        labels = dict(zip(self.tracks["track"].astype(int), self.tracks["label"]))
        stats.insert(1, "track_label", [labels.get(int(t), str(t)) for t in stats["track"]])
        self.stats.source.data = {c: stats[c].tolist() for c in ("track_label", "op_type", "count", "total_us",
                                                                  "avg_us", "percent")}
        self.stats.visible = bool(len(stats))
        self.selected_range = (float(t0_us), float(t1_us))
        return stats

    def _on_select(self, event) -> None:
        geometry = event.geometry or {}
        if getattr(event, "final", True) and "x0" in geometry and "x1" in geometry:
            self.select_range(min(geometry["x0"], geometry["x1"]), max(geometry["x0"], geometry["x1"]))

    # -- display ------------------------------------------------------------------------------------
    def _set_status(self, t0: float | None = None, t1: float | None = None) -> None:
        d = self.source.data
        if t0 is None or t1 is None:
            t0, t1 = self._axis_window()
        shown = np.flatnonzero((np.asarray(d["left"]) <= t1) & (np.asarray(d["right"]) >= t0))
        n = len(shown)
        merged = int(np.asarray(d["count"])[shown].sum()) if n else 0
        t0 = max(t0, 0.0)
        text = (f"{theme.format_time_us(t0, like=t1)} – {theme.format_time_us(t1)} from the start of the trace: "
                f"{merged:,} events as {n:,} bars; {len(self.events):,} events in {len(self.tracks)} tracks")
        if self.matches is not None:
            total = self.matches.attrs.get("total", len(self.matches))
            if self.match_index is not None:
                m = self.matches.iloc[self.match_index]
                text += (f"; match {self.match_index + 1:,} of {total:,}: {m['name']} at "
                         f"{theme.format_time_us(float(m['start_us']))}")
            else:
                text += f"; {total:,} matches"
        self.status.value = f"<span style='{theme.MUTED_CSS}'>{_esc(text)}</span>"
        self.legend.value = _legend_html(np.asarray(d["type_code"])[shown], np.asarray(d["count"])[shown],
                                         self.dictionary)


def _legend_html(type_code: np.ndarray, count: np.ndarray, dictionary: Dictionary) -> str:
    """The colours of the op types of the bars shown, the most events first (names escaped)."""
    if not len(type_code):
        return ""
    events = np.bincount(type_code.astype(np.int64) + 1, weights=count, minlength=len(dictionary.colors))
    present = np.flatnonzero(events > 0)
    top = present[np.argsort(-events[present], kind="stable")][:LEGEND_TYPES]
    items = "".join(f"<span style='display:inline-block;margin:0 12px 2px 0;white-space:nowrap'>"
                    f"<span style='color:{_esc(dictionary.colors[k])}'>■</span> "
                    f"{_esc(dictionary.type(int(k) - 1) or '(no type)')}</span>" for k in top)
    more = len(present) - len(top)
    rest = f"<span style='{theme.MUTED_CSS}'>and {more} more types</span>" if more > 0 else ""
    return f"<div style='font-size:12px;line-height:1.5'>{items}{rest}</div>"


def _esc(text: str) -> str:
    import html
    return html.escape(text)
