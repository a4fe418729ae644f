"""Pipeline bubbles on the cluster page: the stage x time chart of one step (one row per stage, its compute,
send/receive, collective and idle bars on one clock) where the ranks have timelines, and each stage's bubble
ratio against the schedule's theoretical one. Figures take the frames of `nbprofiler.analysis.pipeline`."""
from __future__ import annotations

import html

import pandas as pd
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, Div, FactorRange, HoverTool, Legend, LegendItem, Span
from bokeh.plotting import figure

from . import theme

# The chart's bar kinds (`analysis.pipeline.step_segments`), in legend order; each quantity in the colour
# the rest of the cluster page gives it (`theme`).
SEGMENTS = {"compute": ("Computing", theme.COMPUTING),
            "p2p": ("Send/receive (waiting for a neighbour)", theme.BUBBLE),
            "collective": ("Collective communication (not overlapped)", theme.COMM_EXPOSED),
            "free": ("Idle (nothing running)", theme.FREE)}


def _stage_label(stage, rank) -> str:
    return f"stage {int(stage)} (rank {rank})"


def stage_time_figure(segments: pd.DataFrame):
    """The stage x time chart (``segments``: `analysis.pipeline.stage_timeline`): one row per stage, first
    stage on top, a bar per interval coloured by what the stage does."""
    labels = [_stage_label(s, r) for s, r in segments.drop_duplicates("stage")[["stage", "rank"]].itertuples(index=False)]
    df = segments.assign(label=[_stage_label(s, r) for s, r in zip(segments["stage"], segments["rank"])],
                         what=[SEGMENTS[k][0] for k in segments["kind"]],
                         color=[SEGMENTS[k][1] for k in segments["kind"]],
                         ms=segments["end_ms"] - segments["start_ms"])
    step = segments.attrs.get("step")
    fig = figure(y_range=FactorRange(*reversed(labels)), height=max(180, 46 * len(labels) + 90),
                 sizing_mode="stretch_width", x_axis_label=theme.axis_label("Time from the step's start", "ms"),
                 title=f"Pipeline stages over step {step} (one clock)", tools="xpan,xwheel_zoom,reset,save",
                 name="cluster_pipeline_chart")
    items = []
    for kind, (label, color) in SEGMENTS.items():
        part = df[df["kind"] == kind]
        if part.empty:
            continue
        r = fig.hbar(y="label", left="start_ms", right="end_ms", height=0.7, color=color,
                     source=ColumnDataSource(part[["label", "start_ms", "end_ms", "what", "ms"]],
                                             name=f"cluster_pipeline_{kind}_src"))
        items.append(LegendItem(label=label, renderers=[r]))
    fig.add_layout(Legend(items=items, orientation="horizontal"), "below")
    fig.add_tools(HoverTool(tooltips=[("stage", "@label"), ("", "@what"), ("from", "@start_ms{0,0.000} ms"),
                                      ("to", "@end_ms{0,0.000} ms"), ("length", "@ms{0,0.000} ms")]))
    return theme.style(fig)


def bubble_ratio_figure(digest: dict):
    """A bar per stage of its median bubble ratio (`analysis.pipeline.pipeline_summary`), with the
    schedule's theoretical ratio as a dashed line where it is known."""
    stages = digest["stages"]
    labels = [f"stage {s['stage']}" for s in stages]
    data = {"label": labels, "ratio": [s["bubble_ratio"] or 0.0 for s in stages],
            "idle_ms": [s["idle_ms"] for s in stages], "step_ms": [s["step_ms"] for s in stages],
            "ranks": [", ".join(s["ranks"]) for s in stages]}
    fig = figure(x_range=FactorRange(*labels), height=260, sizing_mode="stretch_width",
                 title="Bubble ratio per stage (median over its ranks' steps)", y_axis_label="idle / step",
                 tools="save", name="cluster_pipeline_ratio")
    fig.vbar(x="label", top="ratio", width=0.6, color=theme.BUBBLE,
             source=ColumnDataSource(data, name="cluster_pipeline_ratio_src"))
    theory = digest.get("theoretical")
    if theory:
        fig.add_layout(Span(location=theory["ratio"], dimension="width", line_dash="dashed", line_width=2,
                            line_color="#000000", name="cluster_pipeline_theory"))
        fig.title.text += f"; dashed: the schedule's {theory['ratio'] * 100:.1f} %"
    fig.y_range.start = 0
    fig.add_tools(HoverTool(tooltips=[("", "@label (ranks @ranks)"), ("bubble", "@ratio{0.0%}"),
                                      ("idle", "@idle_ms{0,0.000} ms of @step_ms{0,0.000} ms")]))
    return theme.style(fig)


def pipeline_layout(cluster, stages: dict | None = None, micro_batches: int | None = None,
                    schedule: str = "1f1b", chunks: int = 1):
    """The pipeline-bubble section (`analysis.pipeline`): its finding, the identity and sources, the stage x
    time chart of a representative step where the ranks have timelines, and the bubble ratio per stage;
    None when the job is not pipeline-parallel."""
    from ..analysis.pipeline import IDENTITY, pipeline_bubbles, pipeline_summary, stage_timeline
    frame = pipeline_bubbles(cluster, stages=stages, micro_batches=micro_batches, schedule=schedule, chunks=chunks)
    digest = pipeline_summary(frame)
    if digest is None:
        return None
    text = (f'<div style="{theme.PANEL_CSS}"><p style="margin:4px 0">{html.escape(digest["finding"])}</p>'
            f'<div style="{theme.MUTED_CSS}">{html.escape(IDENTITY)}. Stages: {html.escape(digest["stages_from"])}. '
            f'Sources: {html.escape(" | ".join(digest["sources"]))}.</div></div>')
    parts = [Div(text=text, sizing_mode="stretch_width", name="cluster_pipeline_finding")]
    segments = stage_timeline(cluster, frame)
    if len(segments):
        parts.append(stage_time_figure(segments))
    parts.append(bubble_ratio_figure(digest))
    return column(*parts, sizing_mode="stretch_width", name="cluster_pipeline_layout")


__all__ = ["stage_time_figure", "bubble_ratio_figure", "pipeline_layout", "SEGMENTS"]
