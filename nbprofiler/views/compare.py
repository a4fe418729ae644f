"""The comparison of two runs: side-by-side stacked step bars, a diverging chart of op-type deltas, the
memory peak's change by operator alive at it, and the verdict. Figure factories take the `Comparison`'s DataFrames; `CompareView` wraps them in a widget.

Runs are named by their labels everywhere on screen (`run_labels`: the folder name and device, or the
``labels=`` given to `compare`), never by the frames' ``a``/``b`` column prefixes."""
from __future__ import annotations

import html

import pandas as pd
from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, Div, FactorRange, HoverTool
from bokeh.plotting import figure

from . import theme
from .base import LayoutView

GAIN, LOSS = theme.GAIN, theme.LOSS   # time saved / added in the new run (b)
# Axis labels longer than this are drawn at an angle (two bars share a 360 px wide plot).
LONG_LABEL = 20


def run_labels(cmp) -> tuple[str, str]:
    """The two runs' display names: the `Comparison`'s labels (folder name and device, or the ``labels=``
    given to `compare`); where both are the same, " (baseline)" / " (new)" tell them apart (a category
    axis needs distinct names)."""
    a, b = str(cmp.a_label), str(cmp.b_label)
    if a == b:
        a, b = f"{a} (baseline)", f"{b} (new)"
    return a, b


def step_compare_figure(steps_df: pd.DataFrame, labels: tuple[str, str]) -> figure:
    """Two stacked bars (baseline run, new run) of the average step, one segment per stage, on an axis
    naming the runs by ``labels`` (see `run_labels`). ``steps_df``: the `Comparison.steps` frame
    (``stage``, ``a_ms``, ``b_ms``; the ``total_ms`` row is drawn only when no stage has values: runs
    timed by the host queue have step totals, not stages)."""
    labels = tuple(str(x) for x in labels)
    if len(labels) != 2 or labels[0] == labels[1]:
        raise ValueError(f"two distinct run labels are needed, not {labels!r}")
    vals = steps_df.set_index("stage")
    stages = [s for s in steps_df["stage"] if s != "total_ms" and vals.loc[s, ["a_ms", "b_ms"]].notna().any()]
    if not stages and "total_ms" in vals.index and vals.loc["total_ms", ["a_ms", "b_ms"]].notna().any():
        stages = ["total_ms"]  # step totals without stages (timing from the host queue): one bar each
    data = {"run": list(labels)}
    for s in stages:
        data[s] = [float(vals.at[s, "a_ms"]) if pd.notna(vals.at[s, "a_ms"]) else 0.0,
                   float(vals.at[s, "b_ms"]) if pd.notna(vals.at[s, "b_ms"]) else 0.0]
    src = ColumnDataSource(data, name="compare_steps_src")
    fig = figure(x_range=FactorRange(*labels), height=320, width=360, title="Average step",
                 y_axis_label=theme.axis_label("Time", "ms"), tools="save", name="compare_steps")
    if stages:
        fig.vbar_stack(stages, x="run", width=0.6, source=src, color=[theme.stage_color(s) for s in stages],
                       legend_label=[theme.stage_label(s) for s in stages])
        fig.add_tools(HoverTool(tooltips=[("run", "@run")] + [(theme.stage_label(s), f"@{s}{{0,0.000}} ms")
                                                                for s in stages]))
        fig.add_layout(fig.legend[0], "below")
    fig.y_range.start = 0
    if max(map(len, labels)) > LONG_LABEL:
        fig.xaxis.major_label_orientation = 0.5  # radians: long run names at an angle, never overlapping
    return theme.style(fig)


def op_type_delta_figure(op_types_df: pd.DataFrame, top_n: int = 15,
                         runs: tuple[str, str] = ("baseline", "new run")) -> figure:
    """Horizontal diverging bars: the ``top_n`` op types with the largest |b - a| time (ms), savings in
    green left of zero, additions in orange right of it; the title and hover name the runs by ``runs``
    (see `run_labels`). ``op_types_df``: `Comparison.op_types`."""
    df = op_types_df.head(top_n).copy()
    df["label"] = [f"{t} ({theme.kind_label(k)})" for k, t in zip(df["kind"], df["op_type"])]
    df = df.drop_duplicates("label")
    df["delta_ms"] = df["delta_us"] / 1000.0
    df["color"] = [LOSS if d > 0 else GAIN for d in df["delta_ms"]]
    df["a_ms"] = df["a_time_us"] / 1000.0
    df["b_ms"] = df["b_time_us"] / 1000.0
    cols = ["label", "op_type", "kind", "status", "delta_ms", "a_ms", "b_ms", "color"]
    # plain lists: an empty frame would give float arrays, which BokehJS rejects as colours
    src = ColumnDataSource({c: df[c].tolist() for c in cols}, name="compare_op_types_src")
    labels = list(reversed(df["label"].tolist())) or ["(no operator data)"]
    fig = figure(y_range=FactorRange(*labels), height=max(200, 24 * len(labels) + 80), sizing_mode="stretch_width",
                 title=f"Op-type time change: {runs[1]} vs {runs[0]}",
                 x_axis_label=theme.axis_label("Change", "ms"), tools="save", name="compare_op_types")
    fig.hbar(y="label", left=0, right="delta_ms", height=0.7, color="color", source=src)
    fig.add_tools(HoverTool(tooltips=[("op type", "@op_type"), ("status", "@status"),
                                      (runs[0], "@a_ms{0,0.000} ms"), (runs[1], "@b_ms{0,0.000} ms"),
                                      ("change", "@delta_ms{+0,0.000} ms")]))
    return theme.style(fig)


def memory_delta_figure(memory, top_n: int = 15, runs: tuple[str, str] = ("baseline", "new run")):
    """What explains the memory peak's change (``memory``: `Comparison.memory`, a `MemoryDiff`): one
    horizontal bar per operator whose size alive at the peak changed most (the ``top_n`` largest |b - a|,
    MB), then one bar for the part no operator allocation explains; the title gives both peaks. Freed
    memory in green left of zero, added in orange right of it. Named ``compare_memory``; None when the runs'
    peaks cannot be compared."""
    if memory is None or not memory.available:
        return None
    from ..analysis.memory_peak import ONE_BYTE_MB, mb_text
    ops = memory.operators
    ops = ops[ops["delta_mb"].abs() >= ONE_BYTE_MB].head(top_n)
    labels = [str(n) for n in ops["name"]] + ["not explained by operator allocations"]
    deltas = [float(d) for d in ops["delta_mb"]] + [float(memory.unexplained_delta_mb)]
    a_mb = [float(x) for x in ops["a_alive_mb"]] + [float(memory.a.unexplained_mb)]
    b_mb = [float(x) for x in ops["b_alive_mb"]] + [float(memory.b.unexplained_mb)]
    src = ColumnDataSource({"label": labels, "delta_mb": deltas, "a_mb": a_mb, "b_mb": b_mb,
                            "color": [LOSS if d > 0 else GAIN for d in deltas]}, name="compare_memory_src")
    fig = figure(y_range=FactorRange(*reversed(labels)), height=max(180, 24 * len(labels) + 90),
                 sizing_mode="stretch_width", name="compare_memory", tools="save",
                 title=(f"Memory peak ({memory.a.curve} allocated): {runs[0]} {mb_text(memory.a.peak_mb)}, "
                        f"{runs[1]} {mb_text(memory.b.peak_mb)}; change alive at the peak"),
                 x_axis_label=theme.axis_label("Change", "MB"))
    fig.hbar(y="label", left=0, right="delta_mb", height=0.7, color="color", source=src)
    fig.add_tools(HoverTool(tooltips=[("operator", "@label"), (runs[0], "@a_mb{0,0.000} MB"),
                                      (runs[1], "@b_mb{0,0.000} MB"), ("change", "@delta_mb{+0,0.000} MB")]))
    return theme.style(fig)


def verdict_div(verdict: list[str], labels: tuple[str, str] = ("baseline", "new run"),
                headlines: dict | None = None) -> Div:
    """The verdict as an escaped HTML list under "<baseline> → <new run>" (``labels``, see `run_labels`),
    after what sets each run's step time (``headlines``: `Comparison.headlines`)."""
    items = "".join(f"<li>{html.escape(s)}</li>" for s in verdict)
    head = f"<b>{html.escape(labels[0])}</b> &rarr; <b>{html.escape(labels[1])}</b>"
    if headlines:
        head += "".join(f"<div class='nbprofiler-compare-diagnosis' style='margin:2px 0'><b>{html.escape(lab)}</b>: "
                        f"{html.escape(headlines[k])}</div>" for k, lab in zip(("a", "b"), labels) if headlines.get(k))
    return Div(text=f'<div style="{theme.PANEL_CSS}">{head}<ul style="margin:4px 0">{items}</ul></div>',
               name="compare_verdict", sizing_mode="stretch_width")


def compare_layout(cmp):
    """The whole comparison as one Bokeh layout (notebook or `file_html`)."""
    labels = run_labels(cmp)
    parts = [verdict_div(cmp.verdict, labels, getattr(cmp, "headlines", None)),
             row(step_compare_figure(cmp.steps, labels), op_type_delta_figure(cmp.op_types, runs=labels),
                 sizing_mode="stretch_width")]
    memory = memory_delta_figure(getattr(cmp, "memory", None), runs=labels)
    if memory is not None:
        parts.append(memory)
    return column(*parts, sizing_mode="stretch_width", name="compare_layout")


class CompareView(LayoutView):
    """Widget for a `Comparison` (or two runs: ``CompareView(a, b)``): ``.widget``, ``.display()``. Where
    the comparison holds its two runs, a button under it opens their timeline diff (`TimelineDiffView`:
    the two timelines on one step-aligned clock), built on the click (``open_timeline_diff``)."""

    def __init__(self, cmp_or_a, b=None, **kwargs):
        if b is not None:
            from ..analysis.compare import compare
            cmp_or_a = compare(cmp_or_a, b, **kwargs)
        self.comparison = cmp_or_a
        self.layout = compare_layout(cmp_or_a)
        self.timeline_diff = None   # the TimelineDiffView, once opened

    @property
    def widget(self):
        if self._widget is None:
            import ipywidgets as W
            from jupyter_bokeh import BokehModel
            parts = [BokehModel(self.layout)]
            if getattr(self.comparison, "a", None) is not None and getattr(self.comparison, "b", None) is not None:
                self._diff_button = W.Button(description="Compare the timelines step by step",
                                             layout=W.Layout(width="280px"))
                self._diff_button.on_click(lambda _: self.open_timeline_diff())
                self._diff_note = W.HTML()
                self._diff_box = W.VBox([W.HBox([self._diff_button, self._diff_note])])
                parts.append(self._diff_box)
            self._widget = W.VBox(parts, layout=W.Layout(width="100%"))
        return self._widget

    def open_timeline_diff(self):
        """Build the two runs' `TimelineDiffView` under the comparison; where their steps cannot be placed
        on their timelines, say why instead. Returns the view, or None."""
        from .timeline_diff import TimelineDiffView
        self.widget  # noqa: B018 - the box the diff goes into
        try:
            self.timeline_diff = TimelineDiffView(self.comparison.timeline_diff())
        except ValueError as err:
            self._diff_note.value = (f"<span style='{theme.MUTED_CSS}'>timeline diff not available: "
                                     f"{html.escape(str(err))}</span>")
            return None
        self._diff_button.disabled = True
        self._diff_box.children = [*self._diff_box.children, self.timeline_diff.widget]
        return self.timeline_diff


__all__ = ["run_labels", "step_compare_figure", "op_type_delta_figure", "memory_delta_figure", "verdict_div",
           "compare_layout", "CompareView"]
