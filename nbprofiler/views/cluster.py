"""Cluster view: per-rank stacked step bars (outlier ranks outlined), a rank x stage heatmap, the
slow-rank table, each rank's step breakdown (computing, communication overlapped and exposed, wait vs
transit, free, host-bound) and the communication per parallel dimension (TP, PP, DP, ...). Figure factories take the frames of `nbprofiler.analysis.cluster`."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
from bokeh.layouts import column, row
from bokeh.models import (ColorBar, ColumnDataSource, CustomJS, DataTable, Div, FactorRange, HoverTool,
                          LinearColorMapper, NumberFormatter, RadioButtonGroup, TableColumn)
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from .. import schema
from ..analysis.cluster import MAX_RANK_BINS
from ..analysis.diagnosis import LEGACY_BANDWIDTH_UNIT
from . import theme
from .base import LayoutView

# Past this many ranks a per-rank bar chart shows only the `TOP_RANKS` slowest ranks (the rest are in the
# heatmaps, binned past `MAX_RANK_BINS`, and in the search by rank).
RANK_BARS_MAX = 64
TOP_RANKS = 32
# Past this many ranks the communication matrix bins source and destination ranks (and merges transports).
COMM_MATRIX_MAX_RANKS = 64
# The links table lists at most this many links: the slowest (lowest bandwidth) first.
LINKS_TABLE_MAX = 500


def rank_bars_figure(rank_steps_df: pd.DataFrame, stages: list[str], slowest: str | None = None,
                     outliers: frozenset | set = frozenset()) -> figure:
    """Stacked bars, one per rank (``rank_steps_df``: `analysis.cluster.rank_steps`, indexed by rank),
    stages in display order. Only ``outliers`` (ranks `analysis.cluster.slow_ranks` flags) are outlined in
    red: the slowest rank is named in the title, and called an outlier there only when it is one."""
    from ..analysis.cluster import top_ranks
    df = rank_steps_df.reset_index()
    df["rank"] = df["rank"].astype(str)
    n = len(df)
    if n > RANK_BARS_MAX:  # one bar per rank would be a few pixels wide: the slowest ranks only
        keep = top_ranks(df.set_index("rank")["total_ms"], TOP_RANKS)
        df = df.set_index("rank").loc[keep].reset_index()
    stages = [s for s in stages if s in df.columns]
    df[stages] = df[stages].fillna(0.0)
    src = ColumnDataSource(df[["rank", "total_ms", *stages]], name="cluster_ranks_src")
    ranks = df["rank"].tolist()
    fig = figure(x_range=FactorRange(*ranks), height=320, sizing_mode="stretch_width",
                 title=("Average step per rank" if n <= RANK_BARS_MAX else
                        f"Average step of the {len(ranks)} slowest of {n:,} ranks, slowest first") +
                       (f" (slowest: rank {slowest}, "
                                                  f"{'an outlier' if slowest in outliers else 'not an outlier'})"
                                                  if slowest else ""),
                 x_axis_label="Rank", y_axis_label=theme.axis_label("Time", "ms"), tools="xpan,xwheel_zoom,reset,save",
                 name="cluster_ranks")
    if stages:
        fig.vbar_stack(stages, x="rank", width=0.8, source=src, color=[theme.stage_color(s) for s in stages],
                       legend_label=[theme.stage_label(s) for s in stages])
        # the outline is its own glyph (and source) so it frames the whole stack, not one segment
        hot = df.loc[df["rank"].isin({str(r) for r in outliers}), ["rank", "total_ms"]]
        fig.vbar(x="rank", top="total_ms", width=0.86, fill_alpha=0, line_color=theme.HIGHLIGHT, line_width=2.5,
                 source=ColumnDataSource(hot, name="cluster_slowest_src"))
        fig.add_tools(HoverTool(tooltips=[("rank", "@rank"), ("step", "@total_ms{0,0.000} ms")] +
                                [(theme.stage_label(s), f"@{s}{{0,0.000}} ms") for s in stages]))
        fig.legend.orientation = "horizontal"
        fig.add_layout(fig.legend[0], "below")
    if len(ranks) > 32:
        fig.xaxis.major_label_orientation = 1.2
    fig.y_range.start = 0
    return theme.style(fig)


def rank_stage_heatmap(matrix: pd.DataFrame) -> figure:
    """ranks x stages (``analysis.cluster.rank_stage_matrix``): colour = the stage's time relative to that
    stage's median over ranks (1 = typical), so a straggler stands out in any stage; hover gives ms."""
    m = matrix.copy()
    m.index = m.index.astype(str)
    if len(m) > MAX_RANK_BINS:
        return _binned_stage_heatmap(m)
    med = m.median().replace(0, np.nan)
    rel = (m / med).astype(float).fillna(1.0)
    long = m.stack().rename("ms").reset_index()
    long.columns = ["rank", "stage", "ms"]
    long["relative"] = [float(rel.at[r, s]) for r, s in zip(long["rank"], long["stage"])]
    long["stage_label"] = [theme.stage_label(s) for s in long["stage"]]
    src = ColumnDataSource(long, name="cluster_heatmap_src")
    hi = max(1.5, float(long["relative"].max()) if len(long) else 1.5)
    mapper = LinearColorMapper(palette=Viridis256, low=0.0, high=hi)
    stages = [theme.stage_label(s) for s in m.columns]
    fig = figure(x_range=FactorRange(*stages) if stages else FactorRange("-"),
                 y_range=FactorRange(*reversed(m.index.tolist())) if len(m) else FactorRange("-"),
                 height=max(220, min(900, 18 * len(m) + 120)), sizing_mode="stretch_width",
                 title="Rank x stage (relative to the stage's median)", tools="save", name="cluster_heatmap")
    fig.rect(x="stage_label", y="rank", width=1, height=1, source=src,
             fill_color={"field": "relative", "transform": mapper}, line_color=None)
    fig.add_layout(ColorBar(color_mapper=mapper, width=10), "right")
    if sum(len(s) for s in stages) > 48:  # long stage names side by side overlap: tilt them
        fig.xaxis.major_label_orientation = 0.5
    fig.add_tools(HoverTool(tooltips=[("rank", "@rank"), ("stage", "@stage_label"), ("time", "@ms{0,0.000} ms"),
                                      ("x median", "@relative{0.00}")]))
    return theme.style(fig)


def _binned_stage_heatmap(m: pd.DataFrame) -> figure:
    """`rank_stage_heatmap` past `MAX_RANK_BINS` ranks: consecutive ranks share a row
    (`analysis.cluster.binned_ranks`); a cell's colour is its slowest rank's time relative to the stage's
    median over all ranks, so a straggler still shows; hover gives the bin's ranks, max, mean and min."""
    from ..analysis.cluster import binned_ranks
    med = m.median().replace(0, np.nan)
    long = binned_ranks(m)
    long["relative"] = (long["max"] / long["column"].map(med)).astype(float).fillna(1.0)
    long["stage_label"] = [theme.stage_label(c) for c in long["column"]]
    per_bin = int(long["ranks"].max())
    src = ColumnDataSource(long, name="cluster_heatmap_src")
    bins = list(dict.fromkeys(long["bin"]))
    stages = [theme.stage_label(c) for c in m.columns]
    mapper = LinearColorMapper(palette=Viridis256, low=0.0, high=max(1.5, float(long["relative"].max())))
    fig = figure(x_range=FactorRange(*stages), y_range=FactorRange(*reversed(bins)), height=900,
                 sizing_mode="stretch_width", tools="save,ywheel_zoom,ypan,reset", name="cluster_heatmap",
                 title=f"Rank x stage, {len(m):,} ranks in {len(bins)} rows of {per_bin} consecutive ranks "
                       "(colour: the bin's slowest rank relative to the stage's median)")
    fig.rect(x="stage_label", y="bin", width=1, height=1, source=src,
             fill_color={"field": "relative", "transform": mapper}, line_color=None)
    fig.add_layout(ColorBar(color_mapper=mapper, width=10), "right")
    fig.yaxis.major_label_text_font_size = "7px"
    if sum(len(x) for x in stages) > 48:
        fig.xaxis.major_label_orientation = 0.5
    fig.add_tools(HoverTool(tooltips=[("ranks", "@bin (@ranks ranks)"), ("stage", "@stage_label"),
                                      ("slowest", "rank @max_rank: @max{0,0.000} ms (x@relative{0.00} median)"),
                                      ("mean", "@mean{0,0.000} ms"), ("fastest", "@min{0,0.000} ms")]))
    return theme.style(fig)


def slow_rank_table(slow_df: pd.DataFrame, height: int = 200) -> DataTable:
    """The slow-rank findings (``analysis.cluster.slow_ranks``) as a table."""
    df = slow_df.copy()
    df["rank"] = df["rank"].astype(str)
    df["stage"] = [theme.stage_label(s) for s in df["stage"]]
    df["flagged"] = df["flagged"].map({True: "yes", False: "no"})
    src = ColumnDataSource(df, name="cluster_slow_src")
    num = NumberFormatter(format="0,0.000")
    cols = [TableColumn(field="rank", title="Rank"), TableColumn(field="stage", title="Stage"),
            TableColumn(field="value_ms", title="Time (ms)", formatter=num),
            TableColumn(field="median_ms", title="Median (ms)", formatter=num),
            TableColumn(field="excess_ms", title="Excess (ms)", formatter=num),
            TableColumn(field="z", title="Robust z", formatter=NumberFormatter(format="0.00")),
            TableColumn(field="flagged", title="Outlier")]
    return DataTable(source=src, columns=cols, height=height, sizing_mode="stretch_width", index_position=None,
                     name="cluster_slow_table")


def findings_div(diagnosis, slow_steps_df: pd.DataFrame | None = None) -> Div:
    """The cluster's diagnosis (`analysis.diagnosis.diagnose_cluster`): its first sentence, then every finding
    with the time per step it concerns, most first (MindInsight's proposals among them), then the slowest
    steps of single ranks. Escaped."""
    items = []
    for f in diagnosis.findings:
        cost = f" <i>({html.escape(f'{f.cost_ms:,.3f}')} ms a step)</i>" if f.cost_ms is not None else ""
        items.append(f"<li data-finding-id='{html.escape(f.id, quote=True)}'>{html.escape(f.text)}{cost}</li>")
    if slow_steps_df is not None and len(slow_steps_df):
        for r in slow_steps_df.head(3).itertuples():
            items.append("<li>" + html.escape(
                f"rank {r.rank} step {r.step}: {r.total_ms:,.3f} ms vs its median {r.median_ms:,.3f} ms "
                f"(robust z {r.z:.1f}; {theme.stage_label(r.stage)} +{r.stage_excess_ms:,.3f} ms)") + "</li>")
    body = "".join(items)
    return Div(text=f'<div style="{theme.PANEL_CSS}"><p class="nbprofiler-cluster-diagnosis" style="font-size:1.1em;'
                    f'margin:4px 0">{html.escape(diagnosis.headline)}</p><div style="{theme.MUTED_CSS}">Findings, '
                    f'most time a step first:</div><ul style="margin:4px 0">{body}</ul></div>',
               name="cluster_findings", sizing_mode="stretch_width")


def cluster_layout(summary: dict, diagnosis=None):
    """All cluster figures from `analysis.cluster.rank_summary(...)`'s result, under ``diagnosis`` (the
    cluster's `ClusterDiagnosis`: its first sentence and ranked findings)."""
    from ..analysis import cluster as C
    steps = C.rank_steps(summary)
    if "total_ms" not in steps.columns or steps["total_ms"].isna().all():
        return column(Div(text=f'<div style="{theme.PANEL_CSS}">No rank of this cluster has a step trace '
                               "(step_trace_raw_*, step_trace_time.csv or cluster_step_trace_time.csv), so there "
                               "is nothing to compare across ranks.</div>"),
                      sizing_mode="stretch_width", name="cluster_layout")
    summary = {**summary, "steps": summary["steps"][summary["steps"]["total_ms"].notna()]}
    steps = C.rank_steps(summary)
    slow = C.slow_ranks(summary)
    parts = [findings_div(diagnosis, C.slow_steps(summary))] if diagnosis is not None else []
    return column(*parts,
                  rank_bars_figure(steps, summary["stages"], C.slowest_rank(summary),
                                   set(slow.loc[slow["flagged"], "rank"].astype(str))),
                  row(rank_stage_heatmap(C.rank_stage_matrix(summary)), slow_rank_table(slow),
                      sizing_mode="stretch_width"),
                  sizing_mode="stretch_width", name="cluster_layout")


MEASURES = {"bandwidth": "Bandwidth", "time_ms": "Time", "size": "Size"}


def communication_figure(matrix: pd.DataFrame, measure: str = "bandwidth"):
    """Source rank x destination rank, one cell per link and transport, coloured by ``measure``
    (``bandwidth``, ``time_ms`` or ``size``) from `analysis.cluster.communication_matrix`; hover gives all
    three, and a toggle above (``cluster_comm_measure``, CustomJS: works in the offline report too) colours
    by another. Source ``cluster_comm_matrix_src``."""
    df = matrix.copy()
    df["src"], df["dst"] = df["src"].astype(str), df["dst"].astype(str)
    ranks = sorted(set(df["src"]) | set(df["dst"]), key=lambda r: (len(r), r))
    binned = len(ranks) > COMM_MATRIX_MAX_RANKS
    if binned:
        df = _binned_links(df, ranks)
        ranks = sorted(set(df["src"]) | set(df["dst"]), key=_bin_order)
    df["link"] = df["src"] + "→" + df["dst"]
    transports = sorted(df["transport"].astype(str).unique())
    df["dst_label"] = df["dst"] + " · " + df["transport"].astype(str)
    present = set(df["dst_label"])
    ys = [f"{r} · {t}" for r in ranks for t in transports if f"{r} · {t}" in present]
    mapper = LinearColorMapper(palette=Viridis256, low=float(df[measure].min()), high=float(df[measure].max()))
    fig = figure(x_range=FactorRange(*ranks), y_range=FactorRange(*reversed(ys)),
                 height=min(900, max(200, 40 * len(ys) + 90)) if binned else max(200, 40 * len(ys) + 90),
                 sizing_mode="stretch_width", title=f"Communication matrix: {measure.replace('_', ' ')} per link"
                 + (f" ({matrix['src'].nunique():,} source ranks binned into {df['src'].nunique()} ranges of "
                    "consecutive ranks; time and size summed over a bin's links, transports merged)" if binned else ""),
                 x_axis_label="Source rank" + ("s" if binned else ""),
                 y_axis_label="Destination ranks" if binned else "Destination rank · transport",
                 tools="save,wheel_zoom,pan,reset" if binned else "save", name="cluster_comm_matrix")
    if binned:
        fig.xaxis.major_label_orientation = 1.2
        fig.xaxis.major_label_text_font_size = fig.yaxis.major_label_text_font_size = "7px"
    src = ColumnDataSource(df[["src", "dst", "dst_label", "transport", "time_ms", "size", "bandwidth", "link"]],
                           name="cluster_comm_matrix_src")
    fig.rect(x="src", y="dst_label", width=0.95, height=0.95, source=src,
             fill_color={"field": measure, "transform": mapper}, line_color=None)
    fig.add_tools(HoverTool(tooltips=[("link", "@link (@transport)"), ("time", "@time_ms{0,0.000} ms"),
                                      ("size", "@size{0,0.0}"), ("bandwidth", "@bandwidth{0,0.0}")]))
    fig.add_layout(ColorBar(color_mapper=mapper, width=10), "right")
    keys = list(MEASURES)
    toggle = RadioButtonGroup(labels=list(MEASURES.values()), active=keys.index(measure),
                              name="cluster_comm_measure")
    toggle.js_on_change("active", CustomJS(args=dict(glyph=fig.renderers[0].glyph, mapper=mapper, src=src,
                                                     title=fig.title, keys=keys), code=_MEASURE_JS))
    return column(toggle, theme.style(fig, legend=False), sizing_mode="stretch_width",
                  name="cluster_comm_matrix_panel")


def _bin_order(label: str):
    first = label.split("-", 1)[0]
    return (0, int(first)) if first.isdigit() else (1, label)


def _binned_links(df: pd.DataFrame, ranks: list[str]) -> pd.DataFrame:
    """The links of `communication_figure` past `COMM_MATRIX_MAX_RANKS` ranks: source and destination ranks
    binned (`analysis.cluster.rank_bins`, at most `MAX_RANK_BINS` bins), transports merged ("all"), time and
    size summed over the bin pair's links, bandwidth = size / time."""
    from ..analysis.cluster import rank_bins
    bins = rank_bins(ranks, MAX_RANK_BINS)
    g = df.assign(src=df["src"].map(bins), dst=df["dst"].map(bins)).groupby(["src", "dst"], as_index=False).agg(
        time_ms=("time_ms", "sum"), size=("size", "sum"), links=("time_ms", "size"))
    g["bandwidth"] = np.where(g["time_ms"] > 0, g["size"] / g["time_ms"].where(g["time_ms"] > 0), np.nan)
    g["transport"] = "all"
    return g


# Colour the matrix by the chosen measure: the glyph's field, the mapper's range and the title.
_MEASURE_JS = """
const key = keys[this.active];
const col = src.data.get ? src.data.get(key) : src.data[key];
const vals = Array.from(col).filter(v => Number.isFinite(v));
mapper.low = vals.length ? Math.min(...vals) : 0; mapper.high = vals.length ? Math.max(...vals) : 1;
glyph.fill_color = {field: key, transform: mapper};
title.text = 'Communication matrix: ' + key.replace('_ms', '').replace('_', ' ') + ' per link';
"""


def rank_communication_figure(by_rank: pd.DataFrame):
    """Per rank, its communication time split into transit, wait and idle (stacked, ms; from
    `analysis.cluster.communication_by_rank`): a rank that waits far longer than the others waits for a slow
    peer. None without communication data. Source ``cluster_rank_comm_src``."""
    if by_rank is None or by_rank.empty:
        return None
    parts = [c for c in ("transit_ms", "wait_ms", "idle_ms") if by_rank[c].fillna(0).abs().sum() > 0]
    if not parts:
        return None
    from ..analysis.cluster import top_ranks
    df = by_rank.assign(rank=by_rank["rank"].astype(str)).fillna({c: 0.0 for c in parts})
    n = len(df)
    if n > RANK_BARS_MAX:  # the ranks that spend longest communicating, most first
        keep = top_ranks(df.set_index("rank")["elapse_ms"], TOP_RANKS)
        df = df.set_index("rank").loc[keep].reset_index()
        ranks = keep
    else:
        ranks = sorted(df["rank"], key=_rank_order)
    src = ColumnDataSource(df, name="cluster_rank_comm_src")
    labels = {"transit_ms": "Transit", "wait_ms": "Wait", "idle_ms": "Idle"}
    colors = {"transit_ms": theme.COMM_TRANSIT, "wait_ms": theme.COMM_WAIT, "idle_ms": theme.COMM_IDLE}
    fig = figure(x_range=FactorRange(*ranks), height=280, sizing_mode="stretch_width", tools="save",
                 title="Communication per rank: " + " + ".join(labels[p].lower() for p in parts) +
                       (f" (the {len(ranks)} of {n:,} ranks that communicate longest, longest first)"
                        if n > RANK_BARS_MAX else ""),
                 x_axis_label="Rank", y_axis_label=theme.axis_label("Time", "ms"), name="cluster_rank_comm")
    fig.vbar_stack(parts, x="rank", width=0.7, source=src, color=[colors[p] for p in parts],
                   legend_label=[labels[p] for p in parts])
    fig.legend.orientation = "horizontal"
    fig.add_layout(fig.legend[0], "below")  # never over the bars
    fig.add_tools(HoverTool(tooltips=[("rank", "@rank"), ("elapsed", "@elapse_ms{0,0.000} ms"),
                                      ("transit", "@transit_ms{0,0.000} ms"), ("wait", "@wait_ms{0,0.000} ms"),
                                      ("of which sync", "@sync_ms{0,0.000} ms"), ("idle", "@idle_ms{0,0.000} ms")]))
    return theme.style(fig)


def _rank_order(rank: str):
    return (0, int(rank)) if rank.isdigit() else (1, rank)


def links_div(slow: pd.DataFrame, pipeline: dict | None, flops: dict | None = None) -> Div:
    """MindInsight's cluster findings on communication and pipeline balance: the slow link per transport,
    the pipeline stages' communication shares and the heaviest stage by FLOPs; every number from
    `analysis.cluster`, escaped."""
    items = []
    for r in slow[slow["slowest"]].itertuples():
        items.append(f"link {r.src}→{r.dst} ({html.escape(str(r.transport))}, recorded by rank "
                     f"{html.escape(str(r.recorded_by))}): bandwidth {r.bandwidth:,.1f}, {r.below_mean_pct:.2f} % "
                     f"below the mean of its transport ({r.mean_bandwidth:,.1f}), in {LEGACY_BANDWIDTH_UNIT}")
    if pipeline:
        items.append(f"pipeline: receiving between stages takes {pipeline['between_stage_pct']:.2f} % of "
                     "computation + communication")
        if pipeline["worst_stage"] is not None:
            items.append(f"stage {pipeline['worst_stage']}: communication within the stage (receive excluded) "
                         f"is {pipeline['worst_stage_pct']:.2f} % of its computation + communication")
    if flops:
        items.append(f"pipeline stage {flops['stage']} carries {flops['percent']:.2f} % more cube FLOPs than "
                     f"the mean of the stages ({flops['val']:,.4f} MFLOPs per rank)")
    if not items:
        items.append("no link more than 20 % below its transport's mean bandwidth")
    lis = "".join(f"<li>{i}</li>" for i in items)
    return Div(text=f'<div style="{theme.PANEL_CSS}"><b>Communication</b><ul style="margin:4px 0">{lis}</ul></div>',
               name="cluster_links_findings", sizing_mode="stretch_width")


def communication_layout(cluster):
    """The cluster's communication: findings, per-rank transit/wait/idle, the matrix heatmap (hccl_raw link
    data, or the new-format communication matrix) and the links table; None when the files hold no
    communication data."""
    from ..analysis import cluster as C
    matrix = C.communication_matrix(cluster)
    per_rank = rank_communication_figure(C.communication_by_rank(cluster))
    slow = C.slow_links(cluster)
    findings = links_div(slow, C.pipeline_communication(cluster), C.pipeline_flops_imbalance(cluster))
    if matrix is None or matrix.empty:
        return None if per_rank is None else column(findings, per_rank, sizing_mode="stretch_width",
                                                    name="cluster_communication")
    # the links MindInsight's proposal flags (over 20 % below their transport's mean bandwidth) say so
    flagged = {(str(r.src), str(r.dst), str(r.transport)): f"{r.below_mean_pct:.2f} % below its transport's mean"
               for r in slow.itertuples()}
    rows = matrix.assign(src=matrix["src"].astype(str), dst=matrix["dst"].astype(str))
    capped = len(rows) > LINKS_TABLE_MAX
    if capped:  # the slowest links, where a problem shows
        rows = rows.sort_values("bandwidth", kind="stable", na_position="last").head(LINKS_TABLE_MAX)
    rows["slow"] = [flagged.get((a, b, str(t)), "") for a, b, t in zip(rows["src"], rows["dst"], rows["transport"])]
    note = Div(text=f'<div style="{theme.MUTED_CSS}">The {LINKS_TABLE_MAX} slowest of {len(matrix):,} links '
                    "(lowest bandwidth first).</div>", name="cluster_links_note") if capped else None
    table = DataTable(source=ColumnDataSource(rows, name="cluster_links_src"),
                      columns=[TableColumn(field="src", title="Source"), TableColumn(field="dst", title="Destination"),
                               TableColumn(field="transport", title="Transport"),
                               TableColumn(field="time_ms", title="Time (ms)", formatter=NumberFormatter(format="0,0.000")),
                               TableColumn(field="size", title=f"Size ({matrix.attrs.get('size_unit', '?')})",
                                           formatter=NumberFormatter(format="0,0.0")),
                               TableColumn(field="bandwidth", title=f"Bandwidth ({matrix.attrs.get('bandwidth_unit', '?')})",
                                           width=160, formatter=NumberFormatter(format="0,0.0")),
                               TableColumn(field="steps", title="Steps"),
                               TableColumn(field="slow", title="Slow link", width=220)],
                      height=min(400, 30 * len(rows) + 40), sizing_mode="stretch_width", index_position=None,
                      name="cluster_links_table")
    return column(findings, *([per_rank] if per_rank is not None else []), communication_figure(matrix),
                  *([note] if note is not None else []), table, sizing_mode="stretch_width",
                  name="cluster_communication")


# The breakdown's stacked segments: the disjoint parts of a step, the exposed communication split where the
# files give the split ("exposed_unsplit_ms" where they do not).
BREAKDOWN_SEGMENTS = {"computing_ms": ("Computing (alone)", theme.COMPUTING),
                      "comm_overlapped_ms": ("Communication overlapped", theme.COMM_OVERLAPPED),
                      "wait_ms": ("Exposed: waiting for other ranks", theme.COMM_WAIT),
                      "transit_ms": ("Exposed: moving data", theme.COMM_TRANSIT),
                      "exposed_unsplit_ms": ("Exposed communication (no wait/transit split)", theme.COMM_EXPOSED),
                      "free_ms": ("Free (device idle)", theme.FREE),
                      "host_bound_ms": ("Host-bound (device waits for dispatch)", theme.HOST_BOUND)}
# Above this many ranks the bars show the slowest ones only, and a rank x part heatmap shows them all.
BREAKDOWN_TOP_RANKS = 32


def _breakdown_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Per rank (slowest first): the segments of `BREAKDOWN_SEGMENTS` (NaN -> 0), ``step_ms``."""
    df = frame.copy()
    split = df["wait_ms"].notna()
    df["exposed_unsplit_ms"] = np.where(split, 0.0, df["comm_exposed_ms"])
    for c in BREAKDOWN_SEGMENTS:
        df[c] = df[c].astype(float).fillna(0.0)
    df["rank"] = df["rank"].astype(str)
    return df.sort_values("step_ms", ascending=False, kind="stable", ignore_index=True)


def _breakdown_data(rows: pd.DataFrame, groups: dict, group_order: list, top: int) -> tuple[dict, list]:
    """The bars' data of the ``top`` slowest ``rows`` (`_breakdown_rows`), each with its ``group`` label (only
    for those: a group's label names its ranks and can be long, and thousands of copies of it are not)."""
    rows = rows.head(top)
    rows = rows.assign(group=[groups.get(r, "") for r in rows["rank"]])
    if group_order:
        rows = rows.assign(_g=rows["group"].map({g: i for i, g in enumerate(group_order)}).fillna(len(group_order)))
        rows = rows.sort_values(["_g", "step_ms"], ascending=[True, False], kind="stable")
        factors = [(g or "other ranks", r) for g, r in zip(rows["group"], rows["rank"])]
    else:
        factors = rows["rank"].tolist()
    data = {"x": factors, "rank": rows["rank"].tolist(), "group": rows["group"].tolist(),
            "step_ms": rows["step_ms"].tolist(), **{c: rows[c].tolist() for c in BREAKDOWN_SEGMENTS}}
    return data, factors


def breakdown_figure(frame: pd.DataFrame, groups: dict | None = None, group_order: list | None = None,
                     top: int = BREAKDOWN_TOP_RANKS):
    """Stacked bars of each rank's step split into its parts (``frame``: `analysis.breakdown.rank_breakdown`),
    slowest rank first (within its rank group where ``groups`` maps rank -> group label), and a step picker:
    the median over the steps (`analysis.breakdown.rank_medians`) or one step. Only the ``top`` slowest ranks get a
    bar. Returns (figure, picker)."""
    from bokeh.models import Select

    from ..analysis.breakdown import rank_medians
    groups, group_order = groups or {}, group_order or []
    choices = {"median": _breakdown_rows(rank_medians(frame))}
    for step, g in frame.groupby("step"):
        choices[f"step {int(step)}"] = _breakdown_rows(g)
    datasets, ranges = {}, {}
    for k, rows in choices.items():
        datasets[k], ranges[k] = _breakdown_data(rows, groups, group_order, top)
    src = ColumnDataSource(datasets["median"], name="cluster_breakdown_src")
    nested = bool(group_order)
    n = len(choices["median"])
    fig = figure(x_range=FactorRange(*ranges["median"]), height=340, sizing_mode="stretch_width",
                 title="Step breakdown per rank, slowest first" + (f" (the {top} slowest of {n} ranks)" if n > top
                                                                   else ""),
                 x_axis_label="Rank", y_axis_label=theme.axis_label("Time", "ms"),
                 tools="xpan,xwheel_zoom,reset,save", name="cluster_breakdown")
    segs = [c for c in BREAKDOWN_SEGMENTS if any(any(v) for v in (d[c] for d in datasets.values()))]
    if segs:
        fig.vbar_stack(segs, x="x", width=0.8, source=src, color=[BREAKDOWN_SEGMENTS[c][1] for c in segs],
                       legend_label=[BREAKDOWN_SEGMENTS[c][0] for c in segs])
        fig.legend.orientation = "horizontal"
        fig.add_layout(fig.legend[0], "below")
    fig.add_tools(HoverTool(tooltips=[("rank", "@rank"), *([("group", "@group")] if nested else []),
                                      ("step", "@step_ms{0,0.000} ms")] +
                                     [(BREAKDOWN_SEGMENTS[c][0], f"@{c}{{0,0.000}} ms") for c in segs]))
    if min(n, top) > 24:
        fig.xaxis.major_label_orientation = 1.2
    fig.y_range.start = 0
    picker = Select(title="Steps", value="median", options=list(choices), width=220, name="cluster_breakdown_step")
    picker.js_on_change("value", CustomJS(args={"src": src, "xr": fig.x_range, "data": datasets, "ranges": ranges},
                                          code="xr.factors = ranges[cb_obj.value]; "
                                               "src.data = Object.assign({}, data[cb_obj.value]);"))
    return theme.style(fig), picker


def breakdown_heatmap(frame: pd.DataFrame):
    """Every rank x part (median ms over the steps), slowest rank on top: the aggregated form for many ranks."""
    from ..analysis.breakdown import rank_medians
    med = rank_medians(frame)
    rows = _breakdown_rows(med)
    parts = [c for c in BREAKDOWN_SEGMENTS if rows[c].any()]
    if len(rows) > MAX_RANK_BINS:
        return _binned_breakdown_heatmap(rows, parts)
    long = rows.melt(id_vars=["rank"], value_vars=parts, var_name="part", value_name="ms")
    long["part_label"] = [BREAKDOWN_SEGMENTS[p][0] for p in long["part"]]
    long["share"] = long["ms"] / long["rank"].map(rows.set_index("rank")["step_ms"])
    mapper = LinearColorMapper(palette=Viridis256, low=0.0, high=1.0)
    labels = [BREAKDOWN_SEGMENTS[p][0] for p in parts]
    fig = figure(x_range=FactorRange(*labels) if labels else FactorRange("-"),
                 y_range=FactorRange(*reversed(rows["rank"].tolist())), height=max(220, min(900, 14 * len(rows) + 140)),
                 sizing_mode="stretch_width", title="Rank x part (share of the rank's median step)", tools="save",
                 name="cluster_breakdown_heatmap")
    fig.rect(x="part_label", y="rank", width=1, height=1,
             source=ColumnDataSource(long, name="cluster_breakdown_heat_src"),
             fill_color={"field": "share", "transform": mapper}, line_color=None)
    fig.add_layout(ColorBar(color_mapper=mapper, width=10), "right")
    fig.xaxis.major_label_orientation = 0.5
    fig.add_tools(HoverTool(tooltips=[("rank", "@rank"), ("part", "@part_label"), ("time", "@ms{0,0.000} ms"),
                                      ("share", "@share{0.0%}")]))
    return theme.style(fig)


def _binned_breakdown_heatmap(rows: pd.DataFrame, parts: list[str]):
    """`breakdown_heatmap` past `MAX_RANK_BINS` ranks: consecutive ranks share a row
    (`analysis.cluster.binned_ranks` of each part's share of the rank's median step); a cell's colour is the
    largest share in the bin, hover names that rank and the bin's mean and smallest share."""
    from ..analysis.cluster import binned_ranks
    shares = rows.set_index("rank")[parts].div(rows.set_index("rank")["step_ms"].replace(0, np.nan), axis=0)
    long = binned_ranks(shares)
    long["part_label"] = [BREAKDOWN_SEGMENTS[p][0] for p in long["column"]]
    bins = list(dict.fromkeys(long["bin"]))
    labels = [BREAKDOWN_SEGMENTS[p][0] for p in parts]
    mapper = LinearColorMapper(palette=Viridis256, low=0.0, high=1.0)
    fig = figure(x_range=FactorRange(*labels), y_range=FactorRange(*reversed(bins)), height=900,
                 sizing_mode="stretch_width", tools="save,ywheel_zoom,ypan,reset", name="cluster_breakdown_heatmap",
                 title=f"Rank x part, {len(rows):,} ranks in {len(bins)} rows of {int(long['ranks'].max())} "
                       "consecutive ranks (colour: the largest share of a rank's median step in the bin)")
    fig.rect(x="part_label", y="bin", width=1, height=1, source=ColumnDataSource(long, name="cluster_breakdown_heat_src"),
             fill_color={"field": "max", "transform": mapper}, line_color=None)
    fig.add_layout(ColorBar(color_mapper=mapper, width=10), "right")
    fig.xaxis.major_label_orientation = 0.5
    fig.yaxis.major_label_text_font_size = "7px"
    fig.add_tools(HoverTool(tooltips=[("ranks", "@bin (@ranks ranks)"), ("part", "@part_label"),
                                      ("largest", "rank @max_rank: @max{0.0%}"), ("mean", "@mean{0.0%}"),
                                      ("smallest", "@min{0.0%}")]))
    return theme.style(fig)


def breakdown_layout(cluster, diagnosis=None):
    """The per-rank step breakdown (`analysis.breakdown`): the sentence naming what costs the slowest rank
    most, the identity the parts obey and each rank's sources, the stacked bars with a step picker, and past
    `BREAKDOWN_TOP_RANKS` ranks a rank x part heatmap; None when no rank has a step trace."""
    from ..analysis.breakdown import IDENTITY, breakdown_summary, rank_breakdown
    frame = rank_breakdown(cluster)
    if frame.empty:
        return None
    digest = breakdown_summary(frame)
    groups, order = {}, []
    for g in getattr(diagnosis, "groups", ()) or ():
        label = g.named or g.label
        order.append(label)
        groups.update({str(r): label for r in g.ranks})
    fig, picker = breakdown_figure(frame, groups, order)
    sources = sorted(frame["source"].unique())
    text = (f'<div style="{theme.PANEL_CSS}"><p style="margin:4px 0">{html.escape(digest["finding"] or "")}</p>'
            f'<div style="{theme.MUTED_CSS}">{html.escape(IDENTITY)}. Sources: '
            f'{html.escape(" | ".join(sources))}.</div></div>')
    parts = [Div(text=text, sizing_mode="stretch_width", name="cluster_breakdown_finding"), picker, fig]
    if frame["rank"].nunique() > BREAKDOWN_TOP_RANKS:
        parts.append(breakdown_heatmap(frame))
    return column(*parts, sizing_mode="stretch_width", name="cluster_breakdown_layout")


def alignment_note(alignment: dict) -> str:
    """The words under a cluster timeline saying how its ranks were put on one clock and how well
    (``alignment``: `analysis.cluster_timeline.Alignment.as_dict`, the timeline's ``attrs["alignment"]``):
    the collectives matched and the residual misalignment that analysis measured, or why not aligned."""
    if alignment["method"] == "clock":
        return "Ranks on the hosts' clocks; not checked."
    unaligned = alignment["unaligned"]
    why = "; ".join(unaligned.values())
    counts = sorted({n for r, n in alignment["collectives"].items()
                     if r != alignment["reference"] and r not in unaligned})
    if not counts:
        return (f"Ranks not aligned: {why}; they stay on the hosts' clocks." if unaligned
                else "One rank: nothing to align.")
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    plural = "" if counts[-1] == 1 else "s"
    anchor = alignment["anchor"]
    if anchor is not None:
        pinned = anchor[0] if isinstance(anchor, (tuple, list)) else anchor
        run = f" (run {int(anchor[1]) + 1})" if isinstance(anchor, (tuple, list)) else ""
        head = f"Ranks aligned on {pinned}{run}, pinned, among {n} shared collective{plural}"
        over = "over the other collectives "
    else:
        head, over = f"Ranks aligned on {n} shared collective{plural}", ""
    if np.isnan(alignment["max_us"]):
        tail = "residual misalignment not measured (no other shared collective to measure it on)"
    else:
        tail = (f"residual misalignment {over}median {alignment['median_us']:,.2f} µs, "
                f"max {alignment['max_us']:,.2f} µs (rank {alignment['max_rank']})")
    rest = f"; not aligned: {why}" if unaligned else ""
    return f"{head}; {tail}{rest}."
# One colour per parallel dimension (Okabe-Ito hues; unknown and world in greys).
DIMENSION_COLORS = {"TP": "#0072B2", "PP": "#E69F00", "DP": "#009E73", "EP": "#CC79A7", "CP": "#56B4E9",
                    "world": "#777777", "unknown": "#BBBBBB", "stage": "#F0E442", "single": "#DDDDDD"}


def dimension_bars_figure(digest: dict, field: str, title: str, unit: str, name: str):
    """One bar per parallel dimension that carries communication (``digest``:
    `analysis.parallel_groups.dimension_summary`): ``field`` per measured rank-step, and the exposed part
    beside it when ``field`` is the time and the files give the exposed share."""
    dims = [d for d in digest["dimensions"] if (d["time_ms"] or 0) > 0 or (d["exposed_ms"] or 0) > 0]
    labels = [d["dimension"] for d in dims]
    n = max(int(digest["rank_steps"]), 1)
    timed = field == "ms_per_step"
    exposed_only = timed and all(d["ms_per_step"] is None for d in dims)  # legacy: the exposed time alone
    value = [(d["exposed_ms_per_step" if exposed_only else field] or 0.0) / (1 if timed else n) for d in dims]
    data = {"dimension": labels, "label": [d["label"] for d in dims], "value": value,
            "groups": [d["groups"] for d in dims], "color": [DIMENSION_COLORS[x] for x in labels],
            "exposed": [d["exposed_ms_per_step"] if d["exposed_ms_per_step"] is not None else float("nan")
                        for d in dims],
            "share": [d["share_of_step"] if d["share_of_step"] is not None else float("nan") for d in dims]}
    fig = figure(x_range=FactorRange(*labels) if labels else FactorRange("-"), height=260,
                 sizing_mode="stretch_width", title=title, x_axis_label="Parallel dimension",
                 y_axis_label=theme.axis_label(title.split(" per ")[0], unit), tools="save", name=name)
    src = ColumnDataSource(data, name=f"{name}_src")
    fig.vbar(x="dimension", top="value", width=0.6, color="color", source=src,
             legend_label="exposed" if exposed_only else "elapsed" if timed else "moved")
    tips = [("dimension", "@label"), ("groups", "@groups"), (title.split(" per ")[0], f"@value{{0,0.000}} {unit}")]
    if timed and not exposed_only and any(v == v for v in data["exposed"]):
        fig.vbar(x="dimension", top="exposed", width=0.3, color="#D55E00", source=src, legend_label="exposed")
        tips += [("exposed", "@exposed{0,0.000} ms"), ("share of the step", "@share{0.0%}")]
    fig.add_tools(HoverTool(tooltips=tips))
    fig.y_range.start = 0
    fig.legend.location = "top_right"
    return theme.style(fig)


def rank_dimension_figure(comm: pd.DataFrame):
    """Stacked bars, one per rank, of its communication per step in each dimension (``comm``:
    `analysis.parallel_groups.parallel_communication`), mean over the rank's steps: the elapsed time, or the
    exposed time where the files give that alone (legacy pipeline runs)."""
    from ..analysis.parallel_groups import DIMENSIONS
    field = "elapse_ms" if comm["elapse_ms"].notna().any() else "exposed_ms"
    steps = comm.groupby("rank", sort=False)["step"].nunique(dropna=False)
    per = comm.pivot_table(index="rank", columns="dimension", values=field, aggfunc="sum", sort=False)
    per = per.div(steps.reindex(per.index).clip(lower=1), axis=0).fillna(0.0)
    dims = [d for d in DIMENSIONS if d in per.columns]
    per.index = per.index.astype(str)
    title = "Communication per step of each rank, by parallel dimension"
    if len(per) > RANK_BARS_MAX:  # thousands of bars are unreadable: the ranks that communicate most
        title = f"Communication per step of the {TOP_RANKS} ranks (of {len(per):,}) that communicate most, by dimension"
        per = per.iloc[np.argsort(-per.to_numpy(dtype=float).sum(axis=1), kind="stable")[:TOP_RANKS]]
    ranks = sorted(per.index, key=lambda r: (0, int(r)) if r.isdigit() else (1, r))
    per = per.loc[ranks]
    src = ColumnDataSource({"rank": ranks, **{d: per[d].tolist() for d in dims}}, name="cluster_parallel_ranks_src")
    fig = figure(x_range=FactorRange(*ranks), height=300, sizing_mode="stretch_width",
                 title=title, x_axis_label="Rank",
                 y_axis_label=theme.axis_label("Elapsed" if field == "elapse_ms" else "Exposed", "ms"),
                 tools="xpan,xwheel_zoom,reset,save",
                 name="cluster_parallel_ranks")
    if dims:
        fig.vbar_stack(dims, x="rank", width=0.8, source=src, color=[DIMENSION_COLORS[d] for d in dims],
                       legend_label=dims)
        fig.legend.orientation = "horizontal"
        fig.add_layout(fig.legend[0], "below")
    fig.add_tools(HoverTool(tooltips=[("rank", "@rank")] + [(d, f"@{{{d}}}{{0,0.000}} ms") for d in dims]))
    if len(ranks) > 32:
        fig.xaxis.major_label_orientation = 1.2
    fig.y_range.start = 0
    return theme.style(fig)


def parallel_layout(cluster):
    """The parallel-strategy section (`analysis.parallel_groups`): the sentence naming the dimension whose
    communication costs most and how the dimensions were inferred, time and bytes per dimension, each
    rank's communication by dimension, and the groups with their inferred dimension; a "not available"
    line (with why) when the files hold no group and no communication op."""
    from ..analysis.parallel_groups import dimension_summary, parallel_communication, parallel_groups
    digest = dimension_summary(cluster)
    if not digest["available"]:
        return Div(text=f'<div style="{theme.PANEL_CSS}"><b>Parallel dimensions</b>: not available '
                        f'({html.escape(digest["why"])}).</div>', sizing_mode="stretch_width",
                   name="cluster_parallel_layout")
    groups, comm = parallel_groups(cluster), parallel_communication(cluster)
    text = (f'<div style="{theme.PANEL_CSS}"><p style="margin:4px 0">{html.escape(digest["finding"])}</p>'
            f'<div style="{theme.MUTED_CSS}">Groups from communication_group.json (its p2p lists are the pipeline '
            f'stages), else from the communication files (legacy pipeline runs: the stages of the '
            f'ascend_cluster_analyse file name); ms per step are means over the rank-steps with records; the '
            f'exposed part is each rank-step\'s not-overlapped share of its communication.</div></div>')
    parts = [Div(text=text, sizing_mode="stretch_width", name="cluster_parallel_finding")]
    if len(comm):
        bars = [dimension_bars_figure(digest, "ms_per_step", "Communication per step and rank", "ms",
                                      "cluster_parallel_time")]
        if comm["size_mb"].notna().any():
            bars.append(dimension_bars_figure(digest, "size_mb", "Data moved per step and rank", "MB",
                                              "cluster_parallel_bytes"))
        parts.append(row(*bars, sizing_mode="stretch_width"))
        parts.append(rank_dimension_figure(comm))
    table = DataTable(source=ColumnDataSource({c: groups[c].tolist() for c in groups.columns},
                                              name="cluster_parallel_groups_src"),
                      columns=[TableColumn(field="group", title="Group", width=170),
                               TableColumn(field="kind", title="Kind", width=80),
                               TableColumn(field="ranks", title="Ranks", width=160),
                               TableColumn(field="dimension", title="Dimension", width=80),
                               TableColumn(field="inferred_from", title="Inferred from", width=420),
                               TableColumn(field="ops", title="Ops", width=50),
                               TableColumn(field="time_ms", title="Time (ms)", width=90,
                                           formatter=NumberFormatter(format="0,0.000"))],
                      height=min(360, 28 * len(groups) + 40), sizing_mode="stretch_width", index_position=None,
                      name="cluster_parallel_groups")
    parts.append(table)
    return column(*parts, sizing_mode="stretch_width", name="cluster_parallel_layout")


def slow_rank_layout(cluster):
    """Why the slow ranks are slow (`analysis.slow_rank_cause`): per slow rank its causes, leading cause
    first, each with the ms a step it explains, its evidence and the view that shows it; what could not be
    looked at (operator data not loaded, no link data); then the links below their transport's median
    bandwidth with the ranks they hold back and what they cost. None when no rank has a cause and there is
    no link data. Sources ``cluster_slow_causes_src``, ``cluster_slow_links_src``."""
    from ..analysis.slow_rank_cause import SLOW_LINK_SHARE, link_speeds, slow_rank_causes
    causes = slow_rank_causes(cluster)
    links = link_speeds(cluster)
    if causes.empty and links.empty:
        return None
    num = NumberFormatter(format="0,0.000")
    parts = []
    notes = [f"rank {html.escape(r)}: {html.escape(n)}" for r, n in causes.attrs.get("notes", {}).items() if n]
    head = ('<b>Why the slow ranks are slow</b><div style="' + theme.MUTED_CSS + '">Each cause against the '
            "median over the ranks, in ms a step; a stage is listed with what its op types or links leave "
            "unexplained." + ("".join(f"<br>{n}" for n in notes)) + "</div>")
    parts.append(Div(text=f'<div style="{theme.PANEL_CSS}">{head}</div>', sizing_mode="stretch_width",
                     name="cluster_slow_causes_head"))
    if len(causes):
        df = causes.assign(outlier=causes["outlier"].map({True: "outlier", False: "slowest, not an outlier"}))
        cols = [TableColumn(field="rank", title="Rank", width=50), TableColumn(field="outlier", title="Rank is"),
                TableColumn(field="order", title="#", width=30), TableColumn(field="label", title="Cause", width=220),
                TableColumn(field="ms", title="ms a step", formatter=num),
                TableColumn(field="value_ms", title="Rank (ms)", formatter=num),
                TableColumn(field="median_ms", title="Median (ms)", formatter=num),
                TableColumn(field="view", title="Shown in"), TableColumn(field="evidence", title="Evidence", width=420)]
        parts.append(DataTable(source=ColumnDataSource(df, name="cluster_slow_causes_src"), columns=cols,
                               height=min(320, 28 * len(df) + 40), sizing_mode="stretch_width", index_position=None,
                               name="cluster_slow_causes_table"))
    slow = links[links["slow"]]
    expected = links.drop_duplicates("transport")
    medians = ", ".join(f"{html.escape(str(r.transport))} {r.expected_gbps:,.3f} GB/s" for r in expected.itertuples()
                        if r.expected_gbps == r.expected_gbps)
    text = (f"<b>Slow links</b>: below {SLOW_LINK_SHARE * 100:.0f} % of their transport's expected bandwidth, the "
            "median over the cluster's links of that transport" + (f" ({medians})" if medians else "") + ". ")
    if links.empty:
        text += "The files give no link data."
    else:
        text += (f"None of the {len(links)} links is" if slow.empty else f"{len(slow)} of the {len(links)} links") + \
            f"; source: {html.escape(str(links['source'].iloc[0]))}."
    parts.append(Div(text=f'<div style="{theme.PANEL_CSS}">{text}</div>', sizing_mode="stretch_width",
                     name="cluster_slow_links_head"))
    if len(slow):
        gb = NumberFormatter(format="0,0.000")
        cols = [TableColumn(field="src", title="Source", width=60), TableColumn(field="dst", title="Destination", width=80),
                TableColumn(field="transport", title="Transport", width=80),
                TableColumn(field="bandwidth_gbps", title="GB/s", formatter=gb),
                TableColumn(field="expected_gbps", title="Expected GB/s", formatter=gb),
                TableColumn(field="ratio", title="Of expected", formatter=NumberFormatter(format="0.0%")),
                TableColumn(field="held_back", title="Ranks held back", width=200),
                TableColumn(field="extra_ms", title="ms a step", formatter=NumberFormatter(format="0,0.0000"))]
        parts.append(DataTable(source=ColumnDataSource(slow, name="cluster_slow_links_src"), columns=cols,
                               height=min(300, 28 * len(slow) + 40), sizing_mode="stretch_width", index_position=None,
                               name="cluster_slow_links_table"))
    return column(*parts, sizing_mode="stretch_width", name="cluster_slow_rank_layout")


# The search box's rows: (column of `rank_lookup`, label).
def _lookup_labels(table: pd.DataFrame) -> list[tuple[str, str]]:
    labels = []
    for c in table.columns:
        if c == "rank":
            continue
        if c.startswith("breakdown:"):
            part = c.split(":", 1)[1]
            label = "Median step (breakdown)" if part == "step_ms" else \
                "Breakdown: " + BREAKDOWN_SEGMENTS.get(part, (part,))[0].lower()
        elif c.startswith("comm:"):
            label = "Communication " + c.split(":", 1)[1].replace("_ms", "") + " (summed over ops)"
        else:
            label = "Average step" if c == "total_ms" else "Average " + theme.stage_label(c).lower()
        labels.append((c, label + " (ms)"))
    return labels


def rank_lookup(steps: pd.DataFrame, stages: list[str], medians: pd.DataFrame | None = None,
                by_rank: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per rank of what the search box shows: the step-trace averages (``steps``:
    `analysis.cluster.rank_steps`), the breakdown's medians (``medians``: `analysis.breakdown.rank_medians`,
    columns ``breakdown:<part>``) and the communication totals (``by_rank``:
    `analysis.cluster.communication_by_rank`, columns ``comm:<time>``), ranks in numeric order."""
    cols = [c for c in [*stages, "total_ms"] if c in steps.columns]
    out = steps[cols].astype(float).copy()
    out.index = out.index.astype(str)
    if medians is not None and len(medians):
        m = medians.assign(rank=medians["rank"].astype(str)).set_index("rank")
        for c in ("step_ms", "computing_ms", "comm_overlapped_ms", "comm_exposed_ms", "wait_ms", "transit_ms",
                  "free_ms", "host_bound_ms"):
            if c in m and m[c].notna().any():
                out[f"breakdown:{c}"] = m[c].reindex(out.index).astype(float)
    if by_rank is not None and len(by_rank):
        b = by_rank.assign(rank=by_rank["rank"].astype(str)).set_index("rank")
        for c in ("elapse_ms", "transit_ms", "wait_ms"):
            if c in b and b[c].notna().any():
                out[f"comm:{c}"] = b[c].reindex(out.index).astype(float)
    return out.rename_axis("rank").reset_index()


def rank_search_html(table: pd.DataFrame, rank: str) -> str:
    """The search box's answer for ``rank`` (escaped): its row of `rank_lookup` as a two-column table, or
    that the cluster has no such rank. `_SEARCH_JS` writes the same in the browser."""
    rank = str(rank).strip()
    if not rank:
        return ""
    hit = table.index[table["rank"] == rank]
    if not len(hit):
        return f'<div style="{theme.MUTED_CSS}">No rank {html.escape(rank)} in this cluster.</div>'
    row = table.loc[hit[0]]
    cells = "".join(f"<tr><td>{html.escape(label)}</td><td style='text-align:right'>"
                    f"{'-' if pd.isna(row[c]) else format(float(row[c]), ',.3f')}</td></tr>"
                    for c, label in _lookup_labels(table))
    return f"<b>Rank {html.escape(rank)}</b><table class='nbprofiler-rank-search'>{cells}</table>"


# The search box in the browser: the typed rank's row of the lookup source, as `rank_search_html` writes it.
_SEARCH_JS = """
const q = String(cb_obj.value || '').trim();
const esc = s => String(s).replace(/[&<>"']/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
const col = k => (src.data.get ? src.data.get(k) : src.data[k]);
if (!q) { out.text = ''; return; }
const i = Array.from(col('rank')).indexOf(q);
if (i < 0) { out.text = '<div style="' + muted + '">No rank ' + esc(q) + ' in this cluster.</div>'; return; }
let cells = '';
for (const [k, label] of labels) {
  const v = col(k)[i];
  const txt = (v === null || !Number.isFinite(v)) ? '-' :
      v.toLocaleString('en-US', {minimumFractionDigits: 3, maximumFractionDigits: 3});
  cells += "<tr><td>" + esc(label) + "</td><td style='text-align:right'>" + txt + "</td></tr>";
}
out.text = '<b>Rank ' + esc(q) + "</b><table class='nbprofiler-rank-search'>" + cells + '</table>';
"""


def rank_search(table: pd.DataFrame, rank: str | None = None):
    """A search by rank: a text box (``cluster_rank_search``) and below it the typed rank's values
    (``cluster_rank_search_result``) from the source ``cluster_rank_lookup_src`` (`rank_lookup`), answered in
    the browser (CustomJS: the offline report too); ``rank`` is shown first (default: none)."""
    from bokeh.models import TextInput
    src = ColumnDataSource(table, name="cluster_rank_lookup_src")
    out = Div(text=rank_search_html(table, rank or ""), name="cluster_rank_search_result",
              sizing_mode="stretch_width")
    box = TextInput(title=f"Find a rank (any of {len(table):,}: its averages, breakdown and communication)",
                    value=str(rank or ""), placeholder="rank id, e.g. 0", width=360, name="cluster_rank_search")
    box.js_on_change("value", CustomJS(args={"src": src, "out": out, "labels": _lookup_labels(table),
                                             "muted": theme.MUTED_CSS}, code=_SEARCH_JS))
    return column(box, out, sizing_mode="stretch_width", name="cluster_rank_search_panel")


# The ranks a cluster page's timeline stacks at first (their tracks fit a screen); any others with
# TimelineView(cluster, ranks=[...]).
TIMELINE_RANKS = 8


class ClusterView(LayoutView):
    """``ClusterView(cluster, engine=None).display()``: per-rank bars, heatmap and slow-rank table, the
    communication matrix and links; past `RANK_BARS_MAX` ranks the bars show the `TOP_RANKS` slowest, the
    heatmaps and the matrix bin ranks (at most `MAX_RANK_BINS` rows) and a search box (`rank_search`,
    ``.lookup`` its table) shows any rank's values; and (where the ranks have timelines) a folded timeline of
    the first `TIMELINE_RANKS` ranks stacked on one clock, built when unfolded (``.timeline``, a
    `TimelineView`; ``align`` and ``anchor`` its alignment when it opens, as `TimelineView` takes them),
    with a choice of alignment (their own clocks, or the collectives they share, optionally pinned on one)
    and, above it, how they were aligned and the residual misalignment (`alignment_note`) and the offsets
    used. For a pipeline-parallel job, the pipeline bubbles (`views.pipeline.pipeline_layout`); ``pipeline``:
    its keyword arguments (``stages``, ``micro_batches``, ``schedule``, ``chunks``) where the files do not
    give the stages or the schedule."""

    def __init__(self, cluster, engine: str | None = None, align: str = "clock", anchor=None,
                 pipeline: dict | None = None):
        from ..analysis.cluster import rank_summary
        from ..analysis.cluster_timeline import check_alignment
        from ..analysis.diagnosis import diagnose_cluster
        from .pipeline import pipeline_layout
        check_alignment(align, anchor)  # now: the timeline of ranks is built only when unfolded
        self.cluster = cluster
        self._align, self._anchor = align, anchor
        self.summary = rank_summary(cluster, engine=engine)
        self.diagnosis = diagnose_cluster(cluster)
        self.layout = cluster_layout(self.summary, self.diagnosis)
        self.timeline = None
        more = [p for p in (slow_rank_layout(cluster), breakdown_layout(cluster, self.diagnosis),
                            parallel_layout(cluster), pipeline_layout(cluster, **(pipeline or {})),
                            communication_layout(cluster)) if p is not None]
        if len(more) == 1 and isinstance(more[0], Div):
            more = []  # only the parallel section's "not available": the page already says the ranks hold no data
        search = self._search()
        if search is not None:
            more.insert(0, search)
        if more:
            self.layout = column(self.layout, *more, sizing_mode="stretch_width", name="cluster_page")

    def _search(self):
        """The search by rank (`rank_search`) past `RANK_BARS_MAX` ranks, where the bars show only the slowest
        ranks, opened on the slowest rank; None for fewer ranks or without step traces."""
        from ..analysis import cluster as C
        from ..analysis.breakdown import rank_breakdown, rank_medians
        steps = C.rank_steps(self.summary)
        if len(steps) <= RANK_BARS_MAX or "total_ms" not in steps:
            return None
        frame = rank_breakdown(self.cluster)
        self.lookup = rank_lookup(steps, self.summary["stages"], rank_medians(frame) if len(frame) else None,
                                  C.communication_by_rank(self.cluster))
        return rank_search(self.lookup, C.slowest_rank(self.summary))

    @property
    def widget(self):
        if self._widget is None:
            import ipywidgets as W
            from jupyter_bokeh import BokehModel
            parts = [BokehModel(self.layout)]
            roles = schema.FRAMES["timeline"].roles
            ranks = [r for r in self.cluster.ranks if self.cluster[r].has(*roles)][:TIMELINE_RANKS]
            if len(ranks) > 1:
                holder = W.VBox([])
                fold = W.Accordion(children=[holder], selected_index=None, layout=W.Layout(width="100%"),
                                   titles=(f"Timeline of ranks {', '.join(ranks)} on one clock",))
                align = W.Dropdown(options=[("on the ranks' own clocks", "clock"),
                                            ("aligned on the collectives they share", "communication")],
                                   value=self._align, description="Ranks", layout=W.Layout(width="420px"))
                # "" (not None: a Dropdown shows None as no choice at all) stands for no pinned collective
                anchor = W.Dropdown(options=[("every shared collective (median)", "")], value="",
                                    description="Pin", layout=W.Layout(width="420px"))
                offsets = W.HTML()
                listing = {"done": False, "missed": ""}

                def list_anchors():
                    """The collectives to pin on, listed once (it reads every rank's timeline); the anchor
                    the page was opened with chosen among them."""
                    from ..analysis.cluster_timeline import shared_collectives
                    shared = shared_collectives({r: self.cluster[r] for r in ranks})
                    wanted = self._anchor
                    match = next((k for k in shared if k == wanted or (not isinstance(wanted, tuple)
                                                                        and k[0] == str(wanted))), None)
                    listing.update(done=True, missed="" if wanted is None or match else
                                   f"{wanted!r} is not a collective ranks {', '.join(ranks)} all ran; not pinned. ")
                    anchor.options = [*anchor.options, *((f"{name} (run {run + 1})", (name, run))
                                                         for name, run in shared)]
                    anchor.value = match or ""

                def build(_=None):
                    from .timeline import TimelineView
                    if not listing["done"]:
                        list_anchors()  # its value change calls build again, which draws
                        if anchor.value:
                            return
                    anchor.disabled = align.value == "clock"
                    pin = (anchor.value or None) if align.value == "communication" else None
                    self.timeline = TimelineView(self.cluster, ranks=ranks, align=align.value, anchor=pin)
                    attrs = self.timeline.events.attrs
                    used = attrs.get("offsets_us", {})
                    offsets.value = (f"<div>{html.escape(listing['missed'])}"
                                     f"{html.escape(alignment_note(attrs['alignment']))}</div>"
                                     f"<span style='{theme.MUTED_CSS}'>offsets: " + ", ".join(
                                         f"rank {html.escape(str(r))} {v:+,.2f} µs" for r, v in used.items())
                                     + "</span>")
                    holder.children = [W.HBox([align, anchor]), offsets, self.timeline.widget]
                fold.observe(lambda ch: build() if ch["new"] == 0 and not holder.children else None,
                             names="selected_index")
                align.observe(build, names="value")
                anchor.observe(build, names="value")
                parts.append(fold)
            parts.append(self._rank_fold(W))
            self._widget = W.VBox(parts, layout=W.Layout(width="100%"))
        return self._widget

    def _rank_fold(self, W):
        """A folded "one rank's dashboard": a rank picker (``.rank_picker``) and, built when opened, that
        rank's dashboard, with its own window picker where the rank was profiled in several windows
        (`views.windows.WindowsDashboard`): each rank picks its window. ``.rank_view`` is the view shown."""
        windows = {r: len(getattr(self.cluster[r], "windows", {}) or {}) for r in self.cluster.ranks}
        label = {r: f"rank {r}" + (f" ({n} windows)" if n > 1 else "") for r, n in windows.items()}
        self.rank_picker = W.Dropdown(options=[(label[r], r) for r in self.cluster.ranks],
                                      value=self.cluster.ranks[0], description="Rank",
                                      layout=W.Layout(width="auto", min_width="240px"))
        holder = W.VBox([])
        several = sum(n > 1 for n in windows.values())
        title = "One rank's dashboard" + (f" ({several} ranks have several windows: pick one per rank)"
                                          if several else "")
        fold = W.Accordion(children=[W.VBox([self.rank_picker, holder])], selected_index=None,
                           titles=(title,), layout=W.Layout(width="100%"))
        self.rank_view = None

        def build(_=None):
            prof = self.cluster[self.rank_picker.value]
            if len(getattr(prof, "windows", {}) or {}) > 1:
                from .windows import WindowsDashboard
                self.rank_view = WindowsDashboard(prof)
            else:
                from .dashboard import Dashboard
                self.rank_view = Dashboard(prof)
            holder.children = [self.rank_view.widget]
            self.rank_view.prepare()   # once its overview is on its way to the page
        fold.observe(lambda ch: build() if ch["new"] == 0 and not holder.children else None, names="selected_index")
        self.rank_picker.observe(lambda ch: build() if fold.selected_index == 0 else None, names="value")
        self.rank_fold = fold
        return fold


__all__ = ["rank_bars_figure", "rank_stage_heatmap", "slow_rank_table", "findings_div", "cluster_layout",
           "communication_figure", "rank_communication_figure", "links_div", "communication_layout", "breakdown_figure",
           "breakdown_heatmap", "breakdown_layout", "dimension_bars_figure", "rank_dimension_figure",
           "parallel_layout", "slow_rank_layout", "rank_lookup", "rank_search", "rank_search_html", "ClusterView",
           "RANK_BARS_MAX", "TOP_RANKS", "COMM_MATRIX_MAX_RANKS", "LINKS_TABLE_MAX"]
