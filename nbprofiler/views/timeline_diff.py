"""The event-level diff of two runs (`nbprofiler.analysis.timeline_diff`): the first sentence, the
operators and op types whose time in the step changed most, and both timelines stacked in one
`TimelineView` on the step-aligned clock, the changed operators outlined (orange: slower in the new run,
green: faster). Clicking an operator's row zooms the timeline to its execution in both runs.

Figure factories take the `TimelineDiff`'s frames; `TimelineDiffView` wraps them in a widget. Nothing here
computes a number: every value shown is a column of the diff's frames."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
from bokeh.layouts import row
from bokeh.models import ColumnDataSource, DataTable, HTMLTemplateFormatter, NumberFormatter, TableColumn

from . import theme
from .base import View
from .theme import GAIN, LOSS
from .timeline import MAX_WIDTH_PX, DEBOUNCE_S, TimelineView

TABLE_ROWS = 50          # operators listed (ranked by |change|; the flagged ones first)
# Around an operator's two executions when its row is clicked: this much of their span on each side, at least
# `MIN_PAD_US` (a 10 µs kernel shown with its neighbours).
PAD_FRACTION = 0.5
MIN_PAD_US = 20.0


def mark_frame(highlights: pd.DataFrame) -> pd.DataFrame:
    """The `TimelineView` ``marks`` of a diff's ``highlights``: each flagged execution with a known track,
    orange where the operator is slower in the new run, green where faster."""
    h = highlights[highlights["track"] >= 0]
    return pd.DataFrame({"track": h["track"].to_numpy(np.int64), "start_us": h["start_us"].to_numpy(float),
                         "dur_us": h["dur_us"].to_numpy(float),
                         "color": np.where(h["delta_us"].to_numpy(float) > 0, LOSS, GAIN)})


def _ms(us: pd.Series) -> list:
    return (us.astype(float) / 1000.0).tolist()


def ops_table(ops: pd.DataFrame, labels: tuple[str, str], rows: int = TABLE_ROWS) -> DataTable:
    """The ``rows`` operators whose time changed most (``timeline_diff_ops``), flagged ones marked ●:
    name, occurrence, type, both runs' ms, change in ms and %, executions in each run (``timeline_diff_ops_src``)."""
    df = ops.head(rows)
    data = {"mark": ["●" if f else "" for f in df["flagged"]], "op_name": df["op_name"].astype(str).tolist(),
            "occurrence": df["occurrence"].astype(int).tolist(), "op_type": df["op_type"].astype(str).tolist(),
            "a_ms": _ms(df["a_time_us"]), "b_ms": _ms(df["b_time_us"]), "delta_ms": _ms(df["delta_us"]),
            "delta_pct": df["delta_pct"].astype(float).tolist(),
            "counts": [f"{a}/{b}" for a, b in zip(df["a_count"], df["b_count"])],
            "color": [LOSS if d > 0 else GAIN for d in df["delta_us"]]}
    return _table(data, "timeline_diff_ops", [
        TableColumn(field="mark", title="", width=18),
        TableColumn(field="op_name", title="operator", width=300),
        TableColumn(field="occurrence", title="#", width=30),
        TableColumn(field="op_type", title="type", width=140)], labels)


def op_types_table(op_types: pd.DataFrame, labels: tuple[str, str]) -> DataTable:
    """Every op type's time in the step of both runs and its change (``timeline_diff_op_types``), largest
    change first (``timeline_diff_op_types_src``)."""
    data = {"op_type": op_types["op_type"].astype(str).tolist(), "a_ms": _ms(op_types["a_time_us"]),
            "b_ms": _ms(op_types["b_time_us"]), "delta_ms": _ms(op_types["delta_us"]),
            "delta_pct": op_types["delta_pct"].astype(float).tolist(),
            "counts": [f"{a}/{b}" for a, b in zip(op_types["a_count"], op_types["b_count"])],
            "color": [LOSS if d > 0 else GAIN for d in op_types["delta_us"]]}
    return _table(data, "timeline_diff_op_types", [TableColumn(field="op_type", title="op type", width=180)], labels)


def _table(data: dict, name: str, key_columns: list, labels: tuple[str, str]) -> DataTable:
    ms = NumberFormatter(format="0,0.000")
    # the change coloured like the outlines (the template escapes the value: it is a number)
    delta = HTMLTemplateFormatter(template='<span style="color:<%= color %>"><%= (value > 0 ? "+" : "") + '
                                           'value.toFixed(3) %></span>')
    cols = key_columns + [
        TableColumn(field="a_ms", title=f"{labels[0]} (ms)", formatter=ms, width=110),
        TableColumn(field="b_ms", title=f"{labels[1]} (ms)", formatter=ms, width=110),
        TableColumn(field="delta_ms", title="Δ ms", formatter=delta, width=80),
        TableColumn(field="delta_pct", title="Δ %", formatter=NumberFormatter(format="+0.0"), width=60),
        TableColumn(field="counts", title="executions a/b", width=90)]
    return DataTable(source=ColumnDataSource(data, name=f"{name}_src"), columns=cols, name=name, height=260,
                     sizing_mode="stretch_width", min_width=400, index_position=None, reorderable=False)


def headline_html(diff) -> str:
    """The first sentence, escaped, and what the numbers are of (which steps, where the operators come from)."""
    pair = diff.step_pair
    aligned = len(diff.steps)
    how = (f"each of the {aligned} step numbers both runs have starts at the same moment"
           if aligned > 1 else f"step {int(pair['b_step'])} of B starts where step {int(pair['a_step'])} of A starts")
    note = (f"A = {diff.a_label}, B = {diff.b_label}; times are of step {int(pair['a_step'])} (A) and "
            f"{int(pair['b_step'])} (B); {how}. Outlined: the {int(diff.ops['flagged'].sum())} operators whose "
            f"time changed most (orange: slower in B, green: faster)")
    if diff.source:
        note += f"; operators from {diff.source}"
    return (f"<div style='{theme.PANEL_CSS}'><b>{html.escape(diff.headline)}</b>"
            f"<div style='{theme.MUTED_CSS};font-size:12px'>{html.escape(note)}.</div></div>")


class TimelineDiffView(View):
    """Widget for a `TimelineDiff` (or two runs: ``TimelineDiffView(a, b, step=..., b_step=...)``):
    ``.widget``, ``.display()``. ``timeline`` is the `TimelineView` of the stacked runs, opened on the
    compared step; ``select_op(i)`` (a click on row ``i`` of the operators' table) zooms it to that
    operator's executions in both runs."""

    def __init__(self, diff_or_a, b=None, width: int = MAX_WIDTH_PX, debounce_s: float = DEBOUNCE_S, **kwargs):
        import ipywidgets as W
        from jupyter_bokeh import BokehModel
        if b is not None:
            from ..analysis.timeline_diff import timeline_diff
            diff_or_a = timeline_diff(diff_or_a, b, **kwargs)
        self.diff = diff = diff_or_a
        labels = ("A", "B")
        self.marks = mark_frame(diff.highlights)
        self.timeline = TimelineView(diff.frames, width=width, debounce_s=debounce_s, marks=self.marks)
        self.timeline.set_window(*diff.window())
        self.ops = ops_table(diff.ops, labels)
        self.op_types = op_types_table(diff.op_types, labels)
        self.ops.source.selected.on_change("indices", self._on_select)
        self.headline = W.HTML(headline_html(diff))
        tables = theme.themed(row(self.ops, self.op_types, sizing_mode="stretch_width", name="timeline_diff_tables"))
        self.widget = W.VBox([self.headline, BokehModel(tables), self.timeline.widget], layout=W.Layout(width="100%"))

    def op_window(self, i: int) -> tuple[float, float]:
        """The time window (shared clock, µs) showing row ``i`` of ``diff.ops`` in both runs, padded."""
        r = self.diff.ops.iloc[int(i)]
        starts = [float(r[c]) for c in ("a_start_us", "b_start_us") if pd.notna(r[c])]
        ends = [float(r[s]) + float(r[d]) for s, d in (("a_start_us", "a_time_us"), ("b_start_us", "b_time_us"))
                if pd.notna(r[s])]
        lo, hi = min(starts), max(ends)
        pad = max((hi - lo) * PAD_FRACTION, MIN_PAD_US)
        return lo - pad, hi + pad

    def select_op(self, i: int) -> tuple[float, float]:
        """Zoom the timeline to row ``i`` of the operators' table (`op_window`); returns the window."""
        window = self.op_window(i)
        self.timeline.set_window(*window)
        return window

    def _on_select(self, attr, old, new) -> None:
        if len(new) == 1:
            self.select_op(new[0])


__all__ = ["TimelineDiffView", "mark_frame", "ops_table", "op_types_table", "headline_html"]
