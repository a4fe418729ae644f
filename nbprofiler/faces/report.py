"""Shareable reports: one self-contained, offline HTML file per profile (``nbprofiler report``).

`write_html_report(prof, path, title=None, compare_with=None)` writes a single HTML file with BokehJS
inline (no network needed to open it): a header, the overview numbers of ``prof.summary()``, the
advisor's suggestions, and one tab per page of `nbprofiler.views.pages.PAGES` that has data (each page's
report builder draws it with its view module's figure factories; the timeline opens on the whole run
reduced by level of detail to at most `TIMELINE_BUDGET` bars, with a note saying how many events were
merged or left out, and zooms into finer levels stored in the file, `nbprofiler.views.timeline_tiles`); the
overview names the pages left out and why. For a `Cluster` it
reports the first rank and adds a "Ranks" tab with one row per rank (and a pipeline-parallel job's pipeline
bubbles, `nbprofiler.views.pipeline`). For a rank with several sessions
(schedule windows: ``prof.windows``) it reports the one given and adds a "Windows" tab comparing them
all. With ``compare_with`` (a second run) it adds a "Compare" tab (`nbprofiler.analysis.compare.compare` drawn by
`nbprofiler.views.compare.compare_layout`) and the overview shows the comparison's verdict.

Everything that comes from the data (operator names, paths, titles) is either handed to Bokeh as data
(``ColumnDataSource``, rendered as text) or escaped with `html.escape` before it enters a ``Div``.
"""
from __future__ import annotations

import html
from pathlib import Path

import pandas as pd
from bokeh.embed import file_html
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, DataTable, Div, NumberFormatter, TableColumn, TabPanel, Tabs
from bokeh.resources import INLINE

from .. import schema
from ..io.discover import classify
from ..views import pages as P
from ..views import theme
from ..views.overview import overview_html
from ..views.pages import PAGES, Page
from ..views.timeline import TIMELINE_BUDGET, TIMELINE_WIDTH_PX, timeline_lod  # noqa: F401

# The page around the Bokeh layout: margins, the font and table styles of the notebook views.
# "html body" outranks the template's own "html, body { padding: 0 }", which follows this sheet.
PAGE_CSS = (f"html body {{ margin: 0; padding: 20px 28px 40px; font-family: {theme.FONT}; font-size: 14px; "
            "color: #222; background: #fff; }} "
            ".bk-Column[data-root-id], body > div {{ max-width: 1640px; margin: 0 auto; }} "
            "h1, h2, h3 {{ font-weight: 600; margin: 14px 0 6px; }} h3 {{ font-size: 15px; }} "
            "table {{ border-collapse: collapse; }} td, th {{ padding: 2px 10px 2px 0; text-align: left; }} "
            "ul {{ margin: 4px 0 8px; padding-left: 20px; }} "
            ".nbprofiler-note {{ color: #666; }}").replace("{{", "{").replace("}}", "}")


def write_html_report(prof, path, title: str | None = None, compare_with=None) -> Path:
    """Write the offline HTML report of ``prof`` (a `Profile` or a `Cluster`) to ``path``; returns it.

    ``compare_with``: a second run (`Profile`, `Cluster` or path) to compare against; ``prof`` is the
    baseline (a) and ``compare_with`` the new run (b), as in `nbprofiler.compare(a, b)`. A list of two or
    more runs adds a "Runs" tab instead: ``prof`` and those runs side by side, ``prof`` the baseline, as
    in `nbprofiler.compare(a, b, c, ...)`."""
    path = Path(path)
    layout = report_layout(prof, title, compare_with=compare_with)
    doc_title = title or _default_title(_primary(prof))
    # After the <title>, at the top of <head>: later on, "</head>" also occurs inside the inlined BokehJS.
    text = file_html(layout, resources=INLINE, title=doc_title).replace("</title>", f"</title><style>{PAGE_CSS}</style>", 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def report_layout(prof, title: str | None = None, compare_with=None):
    """The report as one Bokeh layout (what `write_html_report` embeds): the header, then the tabs
    (``report_tabs``), the first "Overview" (``report_summary``: the overview and the suggestions); each
    other panel's child is named ``report_<section>``. With ``compare_with`` the second tab is "Compare"
    (``report_compare``) and the overview starts with the verdict; with a list of runs it is "Runs"
    (``report_runs``)."""
    main = _primary(prof)
    summary = main.summary()
    comparison = runset = None
    if isinstance(compare_with, (list, tuple)):
        compare_with = list(compare_with)
        if len(compare_with) == 1:
            compare_with = compare_with[0]
        elif compare_with:
            from ..analysis.runs import compare_many
            runset = compare_many([prof, *compare_with])
            compare_with = None
    if compare_with is not None:
        from ..analysis.compare import compare
        if isinstance(compare_with, (str, Path)):
            from ..model.loader import load
            compare_with = load(compare_with)
        # a Cluster on either side: compare the ranks the report details (the smallest ids)
        comparison = compare(main, _primary(compare_with))
    # Views without data are left out (not shown as empty tabs); the overview says which and why, so the
    # reader lands on a tab with content and still learns what the profile lacks.
    panels, missing = [], []
    for page in P.PAGES:
        content = page.report(main)
        if content is None:
            missing.append((page.title, missing_reason(main, page)))
        else:
            panels.append(TabPanel(child=_section(page.key, content), title=page.title))
    if _is_cluster(prof):
        panels.insert(0, TabPanel(child=_section("ranks", _ranks(prof)), title="Ranks"))
    if comparison is not None:
        panels.insert(0, TabPanel(child=_section("compare", _compare(comparison)), title="Compare"))
    if runset is not None:
        from ..views.runs import runs_layout
        panels.insert(0, TabPanel(child=_section("runs", runs_layout(runset)), title="Runs"))
    elif len(getattr(main, "windows", ())) > 1:  # the rank's schedule windows / sessions side by side
        panels.insert(0, TabPanel(child=_section("windows", _windows(main)), title="Windows"))
    header = Div(text=header_html(main, summary, title, prof if _is_cluster(prof) else None),
                 sizing_mode="stretch_width", name="report_header")
    overview = Div(text=overview_html(summary, comparison=comparison, runset=runset, missing=missing,
                                      problems=False),  # the header lists the problems
                   sizing_mode="stretch_width", name="report_overview")
    # The overview and the suggestions are the first tab, so every tab is at the top of the page and a
    # click on one visibly changes what is shown.
    summary_panel = TabPanel(child=column(sizing_mode="stretch_width", name="report_summary"), title="Overview")
    panels.insert(0, summary_panel)
    tabs = Tabs(tabs=panels, active=0, sizing_mode="stretch_width", name="report_tabs")
    summary_panel.child.children = [overview, report_suggestions(summary.get("suggestions") or [], panels, tabs)]
    _link_dispatch(panels, tabs)
    return column(header, tabs, sizing_mode="stretch_width", name="report")


def _link_dispatch(panels: list, tabs) -> None:
    """A click on the Host dispatch tab's step bars or waits opens the Timeline tab at that window."""
    titles = [p.title for p in panels]
    if "Host dispatch" not in titles or "Timeline" not in titles:
        return
    from ..views.dispatch import link_to_timeline

    def find(name):
        return next((m for p in panels for m in p.child.select({"name": name})), None)
    x_range = find("timeline_x_range")
    if x_range is not None:
        link_to_timeline(find, x_range, tabs, titles.index("Timeline"))


# -- pieces of HTML (every data value escaped) --------------------------------------------------------
def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _default_title(prof) -> str:
    return f"nbprofiler report: {Path(str(prof.source)).name or prof.source} (device {getattr(prof, 'key', prof.device)})"


def header_html(prof, summary: dict, title: str | None, cluster=None) -> str:
    rows = [("Source", prof.source), ("Generation", prof.generation), ("Device / rank", prof.device),
            ("Devices found", ", ".join(map(str, summary.get("devices_found") or []))),
            *((("Session", f"{ses['key']} ({ses['folder'] or ''}); other sessions: "
                           f"{', '.join(ses['other_sessions']) or 'none'} (pick with --device KEY)"),)
              if (ses := summary.get("session")) else ()),
            ("nbprofiler", summary.get("nbprofiler_version", ""))]
    if cluster is not None:
        rows.insert(3, ("Cluster", f"{len(cluster)} ranks; this report details rank {prof.device}, "
                                   f"the Ranks tab compares them"))
    body = "".join(f"<tr><th style='text-align:left;padding:0 12px 0 0'>{_e(k)}</th><td>{_e(v)}</td></tr>"
                   for k, v in rows)
    problems = summary.get("problems") or []
    probs = ""
    if problems:
        items = "".join(f"<li><code>{_e(p['file'])}</code>: {_e(p['error'])}</li>" for p in problems)
        probs = f"<details><summary>{len(problems)} file(s) could not be read fully</summary><ul>{items}</ul></details>"
    first = ""
    if cluster is not None:  # the cluster's diagnosis leads: what sets the step time across its ranks
        from ..analysis.diagnosis import diagnose_cluster
        first = (f"<p class='nbprofiler-cluster-diagnosis' style='font-size:1.1em;margin:4px 0'>"
                 f"{_e(diagnose_cluster(cluster).headline)}</p>")
    return (f"<div style=\"{theme.PANEL_CSS}\"><h1 style='margin:0 0 6px 0'>{_e(title or _default_title(prof))}</h1>"
            f"{first}<table>{body}</table>{probs}</div>")


def report_suggestions(suggestions: list[dict], panels: list, tabs):
    """The summary's suggestions, drawn by the renderer the dashboard and the MindData view use, each with
    buttons that open what its evidence cites in this page (the tab, and there the queue, the operator type
    filter or the timeline window; CustomJS, no kernel needed). Named ``report_suggestions``."""
    from ..views.suggestions import suggestions_layout
    titles = [p.title for p in panels]

    def find(name):
        return next((m for p in panels for m in p.child.select({"name": name})), None)
    head = Div(text=f"<div style=\"{theme.PANEL_CSS}\"><h2 style='margin:0'>Suggestions</h2></div>",
               sizing_mode="stretch_width")
    body = suggestions_layout(suggestions, find, tab_of=lambda t: titles.index(t) if t in titles else None,
                              tabs=tabs, name="report_suggestions_list")
    return column(head, body, sizing_mode="stretch_width", name="report_suggestions")


def _windows(prof):
    """The rank's sessions compared (`compare_many`, the first the baseline), as the dashboard's window
    picker labels them."""
    from ..analysis.runs import compare_many
    from ..views.runs import runs_layout
    from ..views.windows import window_labels
    labels = window_labels(prof.windows)
    return runs_layout(compare_many(list(prof.windows.values()), labels=list(labels.values())))


def _section(name: str, child):
    return column(child, sizing_mode="stretch_width", name=f"report_{name}")


# -- sections: the pages of `nbprofiler.views.pages.PAGES` (each page's has-data rule and report builder) --
SECTIONS = PAGES  # kept for callers of earlier versions: the report's sections are the pages


def missing_reason(prof, page: Page) -> str:
    """Why ``prof`` has no data for ``page`` (a page of `PAGES`): its files failed to load (named), were
    found but hold no records, or were not written at all (which files would have fed it)."""
    failed = sorted({Path(p.file).name for p in prof.problems
                     if p.kind == "error" and (classify(Path(p.file).name) or (None,))[0] in page.roles})
    if failed:
        return f"{', '.join(failed)} could not be read (see the problems listed above)"
    own = P.resolve(page.why_empty)(prof) if page.why_empty is not None else None
    if own:
        return own
    if prof.has(*page.roles):
        return "its files were found but hold no records"
    note = f"; {page.note}" if page.note else ""
    return f"none of its files was found ({', '.join(page.files)}){note}"


def _compare(cmp):
    """The comparison's verdict and the charts that have data (step bars when either run has steps,
    op-type deltas when either has operators, the memory peak's change when both runs have one), then its
    MindData, queue and memory-by-operator frames as tables. Runs with only dataset-pipeline data get no
    empty chart frames."""
    from ..views.compare import (compare_layout, memory_delta_figure, op_type_delta_figure, run_labels,
                                 step_compare_figure, verdict_div)
    has_steps = bool(cmp.steps[["a_ms", "b_ms"]].notna().to_numpy().any())
    has_ops = len(cmp.op_types) > 0
    labels = run_labels(cmp)   # the runs by their names, as the notebook's comparison names them
    if has_steps and has_ops:
        parts = [compare_layout(cmp)]
    else:
        memory = memory_delta_figure(cmp.memory, runs=labels)
        charts = ([step_compare_figure(cmp.steps, labels)] if has_steps else []) + (
            [op_type_delta_figure(cmp.op_types, runs=labels)] if has_ops else []) + (
            [memory] if memory is not None else [])
        parts = [verdict_div(cmp.verdict, labels), *charts]
    memory_ops = cmp.memory.operators if cmp.memory is not None and cmp.memory.available else None
    for name, df in (("minddata", cmp.minddata), ("queues", cmp.queues), ("memory", memory_ops)):
        if df is not None and len(df):
            # each run's columns (a_*, b_*) headed by the run's name, wide enough to read whole
            titles = {c: f"{labels[c[0] == 'b']}: {column_title(c[2:]).lower()}" for c in df.columns
                      if c[:2] in ("a_", "b_")}
            parts.append(theme.fit_headers(_table(df, f"report_compare_{name}", titles)))
    return column(*parts, sizing_mode="stretch_width")


def column_title(column: str) -> str:
    """A frame column as a table header: stages by their labels, units in brackets ("total_ms" ->
    "Step total (ms)", "fp_and_bp_ms" -> "Forward + backward (ms)", "rank" -> "Rank")."""
    if column == "total_ms":
        return "Step total (ms)"
    if column in theme.STAGE_LABELS:
        return f"{theme.STAGE_LABELS[column]} (ms)"
    for suffix, unit in (("_ms", "ms"), ("_us", "us"), ("_pct", "%"), ("_mb", "MB")):
        if column.endswith(suffix):
            return f"{column[:-len(suffix)].replace('_', ' ').capitalize()} ({unit})"
    return column.replace("_", " ").capitalize()


def _table(df: pd.DataFrame, name: str, titles: dict[str, str] | None = None) -> DataTable:
    """A read-only DataTable of ``df`` (floats with 4 decimals, headers by `column_title` unless ``titles``
    names them); cells are rendered as text by Bokeh."""
    src = ColumnDataSource(df, name=f"{name}_src")
    num = NumberFormatter(format="0,0.0000")
    titles = titles or {}
    cols = [TableColumn(field=c, title=titles.get(c) or column_title(c), formatter=num)
            if pd.api.types.is_float_dtype(df[c]) else TableColumn(field=c, title=titles.get(c) or column_title(c))
            for c in df.columns]
    return DataTable(source=src, columns=cols, sizing_mode="stretch_width", height=min(60 + 28 * len(df), 600),
                     index_position=None, name=name)


def _ranks(cluster):
    from ..views.cluster import communication_layout, slow_rank_layout
    from ..views.step_trace import rank_frame
    from ..analysis.diagnosis import diagnose_cluster
    from ..views.cluster import findings_div
    from ..views.pipeline import pipeline_layout
    parts = [findings_div(diagnose_cluster(cluster)), _table(rank_frame(cluster), "report_ranks_table"),
             pipeline_layout(cluster), slow_rank_layout(cluster), communication_layout(cluster),
             _ranks_timeline(cluster)]
    parts = [p for p in parts if p is not None]
    return parts[0] if len(parts) == 1 else column(*parts, sizing_mode="stretch_width")


def _ranks_timeline(cluster):
    """The cluster page's timeline of ranks, static: the first ranks with timelines stacked on their
    clocks (`analysis.cluster_timeline`), the whole run at `TIMELINE_BUDGET` bars; None with fewer than
    two such ranks."""
    from ..analysis.cluster_timeline import stacked_timeline
    from ..views.cluster import TIMELINE_RANKS, alignment_note
    from ..views.timeline import timeline_figure
    roles = schema.FRAMES["timeline"].roles
    ranks = [r for r in cluster.ranks if cluster[r].has(*roles)][:TIMELINE_RANKS]
    if len(ranks) < 2:
        return None
    frames = stacked_timeline(cluster, ranks)
    if frames["timeline"].empty:
        return None
    lod, note, dictionary = timeline_lod(frames["timeline"], TIMELINE_BUDGET, TIMELINE_WIDTH_PX)
    fig = timeline_figure(lod, frames["timeline_tracks"], dictionary, width=TIMELINE_WIDTH_PX)
    said = alignment_note(frames["timeline"].attrs["alignment"])
    head = Div(text=f"<h3>Timeline of ranks {_e(', '.join(ranks))} on one clock</h3><p>{_e(said)} {_e(note)}</p>",
               sizing_mode="stretch_width", name="report_ranks_timeline_note")
    return column(head, fig, sizing_mode="stretch_width", name="report_ranks_timeline")


def _is_cluster(obj) -> bool:
    from ..model.profile import Cluster
    return isinstance(obj, Cluster)


def _primary(prof):
    return prof[prof.ranks[0]] if _is_cluster(prof) else prof
