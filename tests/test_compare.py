"""nbprofiler.compare on real runs: two legacy Ascend runs, and a MindData bottleneck that vanished."""
from __future__ import annotations

import warnings

import pytest
from bokeh.embed import file_html
from bokeh.resources import INLINE

import nbprofiler
from nbprofiler.views.compare import CompareView, compare_layout, verdict_div

from .conftest import DATA, expected, load_quietly


@pytest.fixture(scope="module")
def lenet_vs_widedeep():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbprofiler.compare(DATA / "legacy/run_2_lenet", DATA / "legacy/run_1_widedeep")


@pytest.fixture(scope="module")
def map_vs_fast():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbprofiler.compare(DATA / "minddata/md_bottleneck_map", DATA / "minddata/md_fast")


def test_step_stages(lenet_vs_widedeep):
    c = lenet_vs_widedeep
    st = c.steps.set_index("stage")
    assert c.stage_set == ["iteration_interval_ms", "fp_and_bp_ms", "tail_ms"]
    # run_2_lenet's average row has total 0 (no real step), so its one step stands in: 23.7091 ms
    lenet = expected("legacy__run_2_lenet__device1")["step_trace"]
    assert st.at["total_ms", "a_ms"] == pytest.approx(lenet["per_step_ms"]["total"][0])
    # run_1_widedeep: MindInsight's average (the file's row, steps 2..N)
    wide = expected("legacy__run_1_widedeep__device1")["step_trace"]["summary"]
    assert st.at["total_ms", "b_ms"] == pytest.approx(wide["total_time"])
    assert st.at["fp_and_bp_ms", "b_ms"] == pytest.approx(wide["fp_and_bp"])
    assert st.at["total_ms", "b_steps"] == 322 and st.at["total_ms", "a_steps"] == 1
    assert st.at["total_ms", "delta_ms"] == pytest.approx(wide["total_time"] - 23.7091)
    # the per-step distributions are over the real steps (all 322, step 1 included)
    per = expected("legacy__run_1_widedeep__device1")["step_trace"]["recomputed_means_ms"]["total"]
    assert st.at["total_ms", "b_mean_ms"] == pytest.approx(per["mean_all_rows"], abs=1e-3)
    assert st.at["total_ms", "b_median_ms"] <= st.at["total_ms", "b_p90_ms"]
    assert c.verdict[0].startswith("step time +766% (23.7 -> 205 ms)")


def test_op_types_and_top_ops(lenet_vs_widedeep):
    c = lenet_vs_widedeep
    t = c.op_types.set_index(["kind", "op_type"])
    mm = t.loc[("ai_core", "MatMul")]
    assert mm["status"] == "both" and mm["a_count"] == 9 and mm["b_count"] == 25
    assert mm["a_time_us"] == pytest.approx(20657.74) and mm["b_time_us"] == pytest.approx(2807.82)
    assert mm["delta_us"] == pytest.approx(2807.82 - 20657.74)
    assert c.op_types.iloc[0]["op_type"] == "MatMul"  # the largest |change| first
    # AI CPU ops exist only in lenet; ApplyMomentumD only in widedeep
    assert t.loc[("ai_cpu", "InitData"), "status"] == "vanished"
    assert t.loc[("ai_core", "ApplyMomentumD"), "status"] == "new"
    assert "MatMul -17.8 ms (-86%), the largest op-type change" in c.verdict
    top = c.top_ops
    assert (top["a_rank"] <= 10).sum() == 10 and (top["b_rank"] <= 10).sum() == 10
    assert top.iloc[0]["a_rank"] == 1 and top.iloc[0]["op_type"] == "MatMul"


def test_bottleneck_vanished(map_vs_fast):
    c = map_vs_fast
    md = c.minddata.set_index("op_id")
    # MindData's own summaries agree: the map op is the bottleneck in md_bottleneck_map only
    assert md.at[1, "op_type"] == "MapOp"
    assert bool(md.at[1, "a_bottleneck"]) and not bool(md.at[1, "b_bottleneck"]) and md.at[1, "change"] == "resolved"
    assert not md["b_bottleneck"].any()
    assert md.at[1, "a_usage_rate"] < 0.01 and md.at[1, "b_usage_rate"] > 0.8
    assert "MapOp_1 no longer the bottleneck" in c.verdict
    assert expected("minddata__md_bottleneck_map__device0")["minddata_pipeline"] is not None
    q = c.queues.set_index("queue").loc["host"]
    assert (q["a_steps"], q["a_empty"]) == (62, 62) and (q["b_steps"], q["b_empty"]) == (200, 1)
    assert "host queue empty at 100% -> 0% of steps" in c.verdict


def test_compare_view_standalone_html(map_vs_fast, lenet_vs_widedeep):
    for c in (map_vs_fast, lenet_vs_widedeep):
        html = file_html(compare_layout(c), INLINE, "compare")
        assert "compare_op_types_src" in html and "compare_steps_src" in html
    # verdict text is escaped in HTML
    c = lenet_vs_widedeep
    c.verdict.append("<script>alert(1)</script> op")
    html = file_html(compare_layout(c), INLINE, "compare")
    assert "<script>alert(1)</script>" not in html and "alert(1)" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; op" in verdict_div(c.verdict).text
    assert "<script>alert" not in c._repr_html_()
    c.verdict.pop()
    view = CompareView(c)
    assert view.layout.name == "compare_layout"


def test_compare_rejects_a_cluster():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match="several devices"):
            nbprofiler.compare(DATA / "legacy/cluster_4rank_pipeline", DATA / "legacy/run_2_lenet")


def test_runs_without_a_step_trace_compare_their_host_queue_timing():
    """md_bottleneck_map vs md_fast: neither has a step trace; each step is the time between batches the
    host queue handed out (62 and 200 records), and the verdict says where the numbers come from."""
    import numpy as np
    import nbprofiler
    from nbprofiler.analysis.compare import HOST_QUEUE_SOURCE
    a = load_quietly(DATA / "minddata" / "md_bottleneck_map")
    b = load_quietly(DATA / "minddata" / "md_fast")
    c = nbprofiler.compare(a, b)
    assert c.step_sources == {"a": HOST_QUEUE_SOURCE, "b": HOST_QUEUE_SOURCE}
    tot = c.steps.set_index("stage").loc["total_ms"]
    for k, p in (("a", a), ("b", b)):
        t = p.host_queue.sort_values("step")["timestamp_ms"].to_numpy(float)
        assert tot[f"{k}_steps"] == len(t) - 1 and tot[f"{k}_ms"] == pytest.approx(np.diff(t).mean())
    assert c.verdict[0].startswith("step time -72% (149 -> 41.7 ms), from the host-queue batch timestamps")
    # a run with a step trace keeps it as its source
    wd = nbprofiler.compare(load_quietly(DATA / "legacy" / "run_1_widedeep"), load_quietly(DATA / "legacy" / "run_2_lenet"))
    assert wd.step_sources == {"a": "step trace", "b": "step trace"} and "from the" not in wd.verdict[0]


def _hover_labels(fig) -> list[str]:
    from bokeh.models import HoverTool
    return [label for tool in fig.select({"type": HoverTool}) for label, _ in tool.tooltips]


def test_the_compare_view_names_runs_by_their_labels_never_a_and_b(map_vs_fast):
    c = map_vs_fast
    names = ("md_bottleneck_map (device 0)", "md_fast (device 0)")
    assert (c.a_label, c.b_label) == names   # the folder names, as `compare` labels the runs
    layout = compare_layout(c)
    steps = layout.select_one({"name": "compare_steps"})
    assert tuple(steps.x_range.factors) == names
    assert tuple(layout.select_one({"name": "compare_steps_src"}).data["run"]) == names
    ops = layout.select_one({"name": "compare_op_types"})
    assert ops.title.text == "Op-type time change: md_fast (device 0) vs md_bottleneck_map (device 0)"
    assert set(names) <= set(_hover_labels(ops))
    verdict = layout.select_one({"name": "compare_verdict"}).text
    assert "<b>md_bottleneck_map (device 0)</b> &rarr; <b>md_fast (device 0)</b>" in verdict
    every_label = [*steps.x_range.factors, *_hover_labels(steps), *_hover_labels(ops), ops.title.text, verdict]
    assert not [s for s in every_label if s.strip() in ("a", "b") or s.startswith(("a:", "b:"))]


def test_the_compare_view_uses_the_labels_given_and_tells_equal_ones_apart():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        given = nbprofiler.compare(DATA / "minddata/md_bottleneck_map", DATA / "minddata/md_fast",
                                   labels=("before: workers=1", "after: workers=8"))
        same = nbprofiler.compare(DATA / "minddata/md_bottleneck_map", DATA / "minddata/md_fast",
                                  labels=("nightly", "nightly"))
    steps = compare_layout(given).select_one({"name": "compare_steps"})
    assert tuple(steps.x_range.factors) == ("before: workers=1", "after: workers=8")
    steps = compare_layout(same).select_one({"name": "compare_steps"})
    assert tuple(steps.x_range.factors) == ("nightly (baseline)", "nightly (new)")


def test_the_reports_compare_tab_names_the_runs_too(map_vs_fast):
    """md_bottleneck_map vs md_fast has no operators: the report draws the step bars alone, named by the runs."""
    from nbprofiler.faces.report import _compare
    section = _compare(map_vs_fast)
    steps = section.select_one({"name": "compare_steps"})
    assert tuple(steps.x_range.factors) == ("md_bottleneck_map (device 0)", "md_fast (device 0)")
    assert "<b>md_bottleneck_map (device 0)</b> &rarr;" in section.select_one({"name": "compare_verdict"}).text
    # its MindData and queue tables head each run's columns with the run's name, never "A"/"B"
    for name in ("report_compare_minddata", "report_compare_queues"):
        titles = [c.title for c in section.select_one({"name": name}).columns]
        assert "md_bottleneck_map (device 0): steps" in titles or "md_bottleneck_map (device 0): usage rate" in titles
        assert not [t for t in titles if t.split()[0] in ("A", "B")], titles
