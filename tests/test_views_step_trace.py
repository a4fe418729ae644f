"""Step-trace view data preparation and figures on real profiles, checked against MindInsight's graphs."""
from __future__ import annotations

import pytest
from bokeh.embed import file_html
from bokeh.models import ColumnDataSource
from bokeh.resources import INLINE

from nbprofiler.views import step_trace as st
from .conftest import expected, load_quietly


@pytest.fixture(scope="module")
def widedeep():
    return load_quietly("legacy/run_1_widedeep")


@pytest.fixture(scope="module")
def widedeep_expected():
    return expected("legacy__run_1_widedeep__device1")["step_trace"]


def _graph_rows(graph):
    """MindInsight graph lines -> {name: (start, duration)} of named bars (stage lines and reduce events)."""
    return {bar["name"]: (bar["start"], bar["duration"]) for line in graph[1:] for bar in line if bar["name"]}


def test_average_selection_matches_mindinsight_graph(widedeep, widedeep_expected):
    seg = st.step_segments(widedeep.step_trace, widedeep.step_stages, widedeep.step_trace_average,
                           widedeep.step_trace_reduce, step=0)
    graph = widedeep_expected["graph_step0_average"]
    assert seg.loc[seg["row"] == "Total", "dur_ms"].item() == pytest.approx(graph[0][0]["duration"])
    want = _graph_rows(graph)
    stages = seg[seg["row"] == "Stages"].set_index("stage")
    for name in ("iteration_interval", "fp_and_bp", "tail"):
        assert stages.loc[f"{name}_ms", "start_ms"] == pytest.approx(want[name][0], abs=1e-4)
        assert stages.loc[f"{name}_ms", "dur_ms"] == pytest.approx(want[name][1], abs=1e-4)
    # Reduce bars of the average: means over steps 2..N (the file's average row is that mean).
    reduce = seg[seg["row"].str.startswith("stream ")].set_index("stage")
    assert len(reduce) == 11
    for name, (start, dur) in want.items():
        if name.startswith("stream_"):
            assert reduce.loc[name, "start_ms"] == pytest.approx(start, abs=2e-3)
            assert reduce.loc[name, "dur_ms"] == pytest.approx(dur, abs=2e-3)
    summary = widedeep_expected["summary"]
    assert stages.loc["fp_and_bp_ms", "percent"] == pytest.approx(float(summary["fp_and_bp_percent"].rstrip("%")))
    assert stages.loc["tail_ms", "percent"] == pytest.approx(float(summary["tail_percent"].rstrip("%")))


def test_step_1_selection_matches_mindinsight_graph(widedeep, widedeep_expected):
    seg = st.step_segments(widedeep.step_trace, widedeep.step_stages, widedeep.step_trace_average,
                           widedeep.step_trace_reduce, step=1)
    assert set(seg["sel"]) == {1}
    graph = widedeep_expected["graph_step1"]
    assert seg.loc[seg["row"] == "Total", "dur_ms"].item() == pytest.approx(graph[0][0]["duration"])
    got = {r.stage.removesuffix("_ms"): (r.start_ms, r.dur_ms) for r in seg.iloc[1:].itertuples()}
    for name, (start, dur) in _graph_rows(graph).items():
        # MindInsight subtracts rounded points; the loader rounds the difference: 1e-4 apart at most.
        assert got[name][0] == pytest.approx(start, abs=1.5e-4), name
        assert got[name][1] == pytest.approx(dur, abs=1.5e-4), name


def test_every_step_is_a_selection(widedeep):
    seg = st.step_segments(widedeep.step_trace, widedeep.step_stages, widedeep.step_trace_average,
                           widedeep.step_trace_reduce)
    assert sorted(set(seg["sel"])) == list(range(0, 323))
    totals = seg[seg["row"] == "Total"].set_index("sel")["dur_ms"]
    assert totals.loc[1:].to_numpy() == pytest.approx(widedeep.step_trace["total_ms"].to_numpy())


def test_averages_as_written_and_recomputed(widedeep, widedeep_expected):
    df = st.average_frame(widedeep.step_trace, widedeep.step_stages, widedeep.step_trace_average)
    summary, means = widedeep_expected["summary"], widedeep_expected["recomputed_means_ms"]
    assert df.loc["as written (MindInsight)", "total_ms"] == pytest.approx(summary["total_time"])
    assert df.loc["as written (MindInsight)", "fp_and_bp_ms"] == pytest.approx(summary["fp_and_bp"])
    for stage in ("iteration_interval", "fp_and_bp", "tail", "total"):
        assert df.loc["mean of all steps", f"{stage}_ms"] == pytest.approx(means[stage]["mean_all_rows"], abs=1e-4)
        assert df.loc["mean excluding step 1", f"{stage}_ms"] == pytest.approx(
            means[stage]["mean_excluding_step1"], abs=1e-4)


def test_zero_total_average_gives_zero_percent_not_nan():
    """run_2_lenet's average row is 0,…,1243211,0,0: MindInsight shows interval 12.4321 ms, total 0."""
    prof = load_quietly("legacy/run_2_lenet")
    seg = st.step_segments(prof.step_trace, prof.step_stages, prof.step_trace_average, None, step=0)
    stages = seg[seg["row"] == "Stages"].set_index("stage")
    assert stages.loc["iteration_interval_ms", "dur_ms"] == pytest.approx(12.4321)
    assert (seg["percent"] == 0).all()


def test_step_percent_frame_adds_up(widedeep):
    df = st.step_percent_frame(widedeep.step_trace, widedeep.step_stages)
    assert len(df) == 322
    share = df[["iteration_interval_pct", "fp_and_bp_pct", "tail_pct"]].sum(axis=1)
    assert share.to_numpy() == pytest.approx(100.0, abs=0.02)


def test_figure_builds_standalone_html_with_named_sources(widedeep):
    lay = st.step_trace_figure(widedeep.step_trace, widedeep.step_stages, widedeep.step_trace_average,
                               step=5, reduce_df=widedeep.step_trace_reduce)
    names = {m.name for m in lay.select({"type": ColumnDataSource})}
    assert {"step_trace_selected_src", "step_trace_steps_src", "step_trace_all_segments_src"} <= names
    sel = next(iter(lay.select({"name": "step_trace_selected_src"})))
    assert set(sel.data["sel"]) == {5}
    assert next(iter(lay.select({"name": "step_select"}))).value == "5"
    page = file_html(lay, INLINE, "step trace")
    assert "step_trace_steps_src" in page and "cdn.bokeh.org" not in page


def test_widget_step_traitlet_refills_sources(widedeep):
    view = st.StepTraceView(widedeep)
    src = view._sources["step_trace_selected_src"]
    assert set(src.data["sel"]) == {0}
    view.step = 7
    assert set(src.data["sel"]) == {7}
    assert view.selector.value == 7
    assert src.data["dur_ms"][0] == pytest.approx(widedeep.step_trace.set_index("step").loc[7, "total_ms"])
    view.selector.value = 0
    assert view.step == 0 and set(src.data["sel"]) == {0}
    with pytest.raises(Exception):
        view.step = 999
    assert view.step_window_ms(7)[1] > view.step_window_ms(7)[0]


def test_cluster_ranks_and_slowest_legacy():
    cluster = load_quietly("legacy/cluster_4rank_pipeline")
    df = st.rank_frame(cluster, 0)
    assert df["rank"].tolist() == ["0", "1", "2", "3"]
    # Each rank's average is its file's average row as written: rank 2's interval is the 2.4318 ms
    # MindInsight's step-interval proposer names.
    prop = expected("legacy__cluster_4rank_pipeline__device0")["cluster"]["parallel_proposer"]["step_interval"]
    assert df.set_index("rank").loc[str(prop["rank_id"]), "iteration_interval_ms"] == pytest.approx(prop["val"])
    assert df["slowest"].sum() == 1
    assert df.loc[df["slowest"], "total_ms"].item() == df["total_ms"].max()
    one = st.rank_frame(cluster, 2)
    assert one.loc[one["slowest"], "rank"].item() == "0"
    fig = st.cluster_step_figure(one, step=2)
    assert "slowest: rank 0" in fig.title.text


def test_cluster_new_format_stages():
    cluster = load_quietly("npu/cluster_8rank")
    df = st.rank_frame(cluster, 0)
    assert len(df) == 8
    assert df.attrs["stages"] == cluster[cluster.ranks[0]].step_stages
    assert "computing_ms" in df.attrs["stages"]
    view = st.StepTraceView(cluster)
    assert view._rank_model is not None


def test_reduce_captions_never_run_into_the_next_event_on_their_row():
    # rank 0 of the pipeline cluster: 97 reduce events, many in tight runs of 8 on one stream
    p = load_quietly("legacy/cluster_4rank_pipeline")["0"]
    seg = st.step_segments(p.step_trace, p.step_stages, p.step_trace_average, p.step_trace_reduce, step=0)
    events = seg[~seg["row"].isin([st.TOTAL_ROW, st.STAGES_ROW])].sort_values(["row", "start_ms"])
    span = seg["end_ms"].max()
    width = events["text"].str.len() * st.CAPTION_PX_PER_CHAR / st.NOMINAL_PLOT_PX * span
    next_start = events.groupby("row")["start_ms"].shift(-1)
    captioned = events["text"] != ""
    assert not (captioned & (next_start < events["end_ms"] + width)).any()
    # every stream keeps the caption of its last event
    assert set(events.loc[captioned, "row"]) == set(events["row"])


def test_captions_stay_inside_their_bar_and_the_plot(widedeep):
    """A stage caption fits its bar (else it is shortened to the duration, else left out); a reduce
    caption that would pass the right edge sits before its bar, right-aligned."""
    p = load_quietly("legacy/cluster_4rank_pipeline")["0"]
    for prof in (widedeep, p):
        seg = st.step_segments(prof.step_trace, prof.step_stages, prof.step_trace_average, prof.step_trace_reduce)
        span = seg.groupby("sel")["end_ms"].transform("max")
        width = seg["text"].str.len() * st.CAPTION_PX_PER_CHAR / st.NOMINAL_PLOT_PX * span
        stages = seg[seg["row"] == st.STAGES_ROW]
        assert (width[stages.index] <= 0.95 * stages["dur_ms"] + 1e-9).all()
        events = seg[~seg["row"].isin([st.TOTAL_ROW, st.STAGES_ROW])]
        right = events[events["text_align"] == "left"]
        assert (right["text_x"] + width[right.index] <= span[right.index] + 1e-9).all()
        left = events[events["text_align"] == "right"]
        assert (left["text_x"] == left["start_ms"]).all() and (left["text_dx"] < 0).all()
    # widedeep's average: the wide stages keep label and duration
    avg = st.step_segments(widedeep.step_trace, widedeep.step_stages, widedeep.step_trace_average, step=0)
    texts = set(avg.loc[avg["row"] == st.STAGES_ROW, "text"])
    assert "Forward + backward: 118.0540 ms" in texts


def test_one_trend_per_stage_on_its_own_scale_with_whole_steps(widedeep):
    layout = st.step_trace_figure(widedeep.step_trace, widedeep.step_stages, widedeep.step_trace_average)
    figs = {s: layout.select_one({"name": f"step_trace_trend_{s}"}) for s in widedeep.step_stages}
    assert all(f is not None for f in figs.values())
    assert len({id(f.y_range) for f in figs.values()}) == len(figs)  # each its own y scale
    bars = layout.select_one({"name": "step_trace_bars"})
    assert all(f.x_range is bars.x_range for f in figs.values())  # zooming one zooms all
    assert bars.xaxis[0].ticker.min_interval == 1
    assert all(f.xaxis[0].ticker.min_interval == 1 for f in figs.values())


def test_fp_start_and_bp_end_operators_are_shown_as_mindinsight_does(widedeep):
    """MindInsight shows 'FP start operator: Default/Cast-op6  BP termination operator:
    Default/TransData-op7' above run_1_widedeep's step trace; run_2_lenet's file names other operators."""
    layout = st.step_trace_figure(widedeep.step_trace, widedeep.step_stages, widedeep.step_trace_average,
                                  point_info=widedeep.step_point_info)
    text = layout.select_one({"name": "step_trace_points"}).text
    assert "FP start operator: Default/Cast-op6" in text and "BP end operator: Default/TransData-op7" in text
    lenet = load_quietly("legacy/run_2_lenet")
    exp = expected("legacy__run_2_lenet__device1")["step_trace"]["point_info_step0"]
    view = st.StepTraceView(lenet)
    assert view._points.text == (f"FP start operator: {exp['fp_start']}    BP end operator: {exp['bp_end']}")
    assert st.point_info_text([{"fp_start": "a", "bp_end": "b"}, {"fp_start": "c", "bp_end": "d"}], 2).startswith(
        "FP start operator: c")
    assert st.point_info_text(None) == ""


def _saved_titles(bokeh_widget) -> list[str]:
    """The chart titles in a jupyter_bokeh widget's state: what a notebook saved with its widget state
    keeps of it, and draws again when it is reopened."""
    import json
    from bokeh.models import Title
    state = json.loads(json.dumps(bokeh_widget.render_bundle, default=str))
    refs = [r for doc in state["docs_json"].values() for r in _walk(doc)]
    return [r["attributes"]["text"] for r in refs if r.get("name") == Title.__qualname__
            and "text" in r.get("attributes", {})]


def _walk(node):
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_the_saved_widget_state_of_the_chart_follows_the_step_picker(widedeep):
    """A notebook saved with its widget state keeps each widget's state: the picker's value, and the
    chart's snapshot. Before, the snapshot was taken once (the average) while the picker said "Step 50"."""
    view = st.StepTraceView(widedeep)
    head = view._head_model
    assert view.selector.value == 0 and view.detail_title.startswith("Average: total")
    assert [t for t in _saved_titles(head) if ": total" in t] == [view.detail_title]
    view.selector.value = 50          # the user picks a step in the dropdown
    assert view.step == 50 and view.detail_title.startswith("Step 50: total")
    assert [t for t in _saved_titles(head) if ": total" in t] == [view.detail_title]
    # its bars too: the snapshot holds step 50's segments, not the average's
    assert json_sel(head) == {50}
    view.step = 0
    assert view.selector.value == 0 and [t for t in _saved_titles(head) if ": total" in t][0].startswith("Average")
    # a view opened on a step is saved on it
    opened = st.StepTraceView(widedeep, step=7)
    assert opened.selector.value == 7 and _saved_titles(opened._head_model)[0].startswith("Step 7: total")


def json_sel(bokeh_widget) -> set:
    """The ``sel`` values of the selection's source in a jupyter_bokeh widget's saved state."""
    import base64
    import gzip
    import numpy as np
    for r in _walk(bokeh_widget.render_bundle["docs_json"]):
        attrs = r.get("attributes", {})
        if attrs.get("name") == "step_trace_selected_src":
            col = dict(attrs["data"]["entries"])["sel"]
            raw = col["array"]["data"]
            raw = raw if isinstance(raw, (bytes, bytearray)) else base64.b64decode(raw)
            if raw[:2] == b"\x1f\x8b":
                raw = gzip.decompress(raw)
            return set(np.frombuffer(raw, dtype=col["dtype"]).tolist())
    return set()


def test_the_view_folds_the_trends_until_opened(widedeep):
    """The tab opens on the selection's chart, the averages and the stages per step; the per-stage trends
    wait in a fold named after them, built when it is first opened, one chart per stage as in the report."""
    view = st.StepTraceView(widedeep)
    shown = {m.name for w in view.widget.children if hasattr(w, "render_bundle") for m in w._model.references()}
    assert {"step_trace_detail", "step_trace_bars", "step_trace_averages"} <= shown
    assert not any(n and n.startswith("step_trace_trend") for n in shown)
    labels = [st.theme.stage_label(s) for s in widedeep.step_stages]
    assert view.trend_fold.get_title(0) == f"Each stage across steps ({', '.join(labels)})"
    assert view._trends is None and not view._trend_holder.children
    view.trend_fold.selected_index = 0     # the fold opened
    (model,) = view._trend_holder.children
    figs = {s: model._model.select_one({"name": f"step_trace_trend_{s}"}) for s in widedeep.step_stages}
    assert all(f is not None for f in figs.values())
    assert len({id(f.x_range) for f in figs.values()}) == 1   # zooming one zooms all
    src = next(iter(figs.values())).renderers[0].data_source
    assert list(src.data["step"]) == widedeep.step_trace["step"].tolist()
    view.trend_fold.selected_index = None
    view.trend_fold.selected_index = 0     # opened again: the same charts, not a second copy
    assert view._trend_holder.children == (model,)
