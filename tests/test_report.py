"""Offline HTML reports (nbprofiler.faces.report) and the synthetic profiles they are tested on."""
from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

import nbprofiler
import nbprofiler.samples
from nbprofiler.faces.report import timeline_lod, write_html_report
from nbprofiler.synthetic.profile import write_profile

from tests.conftest import DATA, expected, load_quietly

PAYLOADS = ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "\"><svg onload=alert(3)>"]


@pytest.fixture(scope="module")
def widedeep_report(tmp_path_factory):
    prof = load_quietly(DATA / "legacy" / "run_1_widedeep")
    return write_html_report(prof, tmp_path_factory.mktemp("r") / "widedeep.html").read_text()


def test_report_is_one_offline_file_with_mindinsight_numbers(widedeep_report):
    text = widedeep_report
    assert len(text) < 6_000_000
    # BokehJS is inline: no script or stylesheet is fetched from anywhere
    assert not re.search(r"<script[^>]+src=", text)
    assert not re.search(r"<link[^>]+href=\"?https?:", text)
    # MindInsight's step-trace summary for this run, as the report's overview shows it
    mi = expected("legacy__run_1_widedeep__device1")["step_trace"]["summary"]
    for key in ("iteration_interval", "fp_and_bp", "tail", "total_time"):
        assert f"{mi[key]:,.4f} ms" in text, key
    for key in ("fp_and_bp_percent", "tail_percent"):
        assert f"({float(mi[key].rstrip('%')):.2f} %)" in text, key
    assert f"average of {mi['total_steps']:,} steps" in text
    for tab in ("Step trace", "Operators", "MindData", "Timeline"):
        assert f'"title":"{tab}"' in text.replace(": ", ":"), tab
    assert "MatMul" in text and "81.03 %" in text  # top AI Core type and its true share
    assert "6,359 events drawn as" in text  # the level-of-detail note


def test_timeline_lod_note_counts_merged_events():
    prof = load_quietly(DATA / "legacy" / "run_1_widedeep")
    bars, note, dictionary = timeline_lod(prof.timeline, 8000, 1600)
    assert len(bars) < len(prof.timeline) <= bars["count"].sum()
    merged = int(bars.loc[bars["count"] > 1, "count"].sum())
    assert merged > 0 and f"{merged:,} events too short" in note
    # the codes point into the dictionary the page is sent with them
    assert set(bars.loc[bars["count"] == 1, "name_code"]) <= set(range(len(dictionary.names)))
    assert {dictionary.name(int(c)) for c in bars.loc[bars["count"] == 1, "name_code"]} <= set(prof.timeline["name"])
    small, note_small, _ = timeline_lod(prof.timeline.head(5), 8000, 1600)
    assert len(small) <= 5


def test_hostile_operator_names_never_become_markup(tmp_path):
    root = write_profile(tmp_path / "evil", layout="legacy", steps=4, op_names=PAYLOADS)
    prof = load_quietly(root)
    assert any("<script>" in n for n in prof.ops["op_name"])  # the payload really is in the data
    out = write_html_report(prof, tmp_path / "evil.html", title="<script>alert('title')</script>")
    text = out.read_text()
    # Bokeh's own <script> blocks are fine; a payload must never appear as live markup
    for payload in PAYLOADS + ["<script>alert('title')</script>"]:
        assert payload not in text, payload
    assert "<img src=x" not in text and "<svg onload" not in text
    # it is there as escaped text (Div) or as JSON data (ColumnDataSource), so users still see it
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text or "\\u003cscript\\u003ealert(1)" in text


def test_cluster_report_has_rank_table(tmp_path):
    cluster = load_quietly(DATA / "legacy" / "cluster_4rank_pipeline")
    assert isinstance(cluster, nbprofiler.Cluster) and cluster.ranks == ["0", "1", "2", "3"]
    text = write_html_report(cluster, tmp_path / "cluster.html").read_text()
    assert "4 ranks; this report details rank 0" in text
    assert "report_ranks_table" in text and '"title":"Ranks"' in text.replace(": ", ":")
    assert "cluster_pipeline_ratio" in text and "Stage 0 (ranks 0, 1) idles most" in text  # a pipeline job


def test_report_page_is_styled_and_tables_have_human_headers(tmp_path):
    """The report page has its own margins and fonts (not the browser's 8 px default), its tabs come
    first after the header, and the Ranks table names stages as the views do."""
    from nbprofiler.faces.report import PAGE_CSS, column_title, report_layout, write_html_report
    cl = load_quietly(DATA / "legacy" / "cluster_4rank_pipeline")
    text = write_html_report(cl, tmp_path / "r.html").read_text()
    head = text[:text.index("<script")]  # before any script: a stylesheet the page applies
    assert f"<style>{PAGE_CSS}</style>" in head and "html body { margin: 0; padding: 20px 28px 40px" in PAGE_CSS
    layout = report_layout(cl)
    assert [c.name for c in layout.children] == ["report_header", "report_tabs"]
    titles = [c.title for c in layout.select_one({"name": "report_ranks_table"}).columns]
    assert titles[:2] == ["Rank", "Step interval (ms)"] and "Step total (ms)" in titles
    assert column_title("fp_and_bp_ms") == "Forward + backward (ms)" and column_title("wait_ratio") == "Wait ratio"


def test_profile_to_html(tmp_path):
    prof = load_quietly(nbprofiler.samples.path("md_bottleneck_map"))
    out = prof.to_html(tmp_path / "md.html")
    text = out.read_text()
    # the only view with data is MindData; the others are named in the overview with the reason
    assert '"title":"MindData"' in text.replace(": ", ":") and '"title":"Step trace"' not in text.replace(": ", ":")
    assert "Not in this report (no data)" in text
    assert "pipeline bottleneck" in text


def _tab_titles(layout):
    tabs = layout.select_one({"name": "report_tabs"})
    return [t.title for t in tabs.tabs], tabs.active


def _missing_items(layout) -> dict:
    """{view title: reason} from the overview's list of views left out for lack of data."""
    overview = layout.select_one({"name": "report_overview"}).text
    block = re.search(r"<ul class='nbprofiler-missing'>(.*?)</ul>", overview)
    return dict(re.findall(r"<li><b>(.*?)</b>: (.*?)</li>", block.group(1))) if block else {}


def test_report_opens_on_a_tab_with_data_and_names_the_views_left_out():
    """A CPU-only PyNative run has no step trace: the report starts on Operators (tab order kept) and
    the overview says the step trace is missing and which files would have held it."""
    from nbprofiler.faces.report import report_layout
    layout = report_layout(load_quietly(nbprofiler.samples.path("lenet_pynative")))
    assert _tab_titles(layout) == (["Overview", "Operators", "MindData", "Memory", "Timeline"], 0)
    missing = _missing_items(layout)
    assert list(missing) == ["Step trace", "Operators per step", "FLOPs", "Host dispatch"]
    assert "none of its files was found" in missing["Step trace"]
    # its timeline is there: the page says why it has no host dispatch (a CPU run launches no device tasks)
    assert missing["Host dispatch"].startswith("the timeline has no device streams")
    assert "step_trace_raw_*_detail_time.csv" in missing["Step trace"]
    # the tab order is kept; a run without memory records says so
    full = report_layout(load_quietly(DATA / "legacy" / "run_1_widedeep"))
    assert _tab_titles(full) == (["Overview", "Step trace", "Operators", "Operators per step", "MindData", "FLOPs",
                                  "Timeline"], 0)
    assert list(_missing_items(full)) == ["Memory", "Host dispatch"]


def test_cluster_report_leaves_out_views_its_files_do_not_have():
    from nbprofiler.faces.report import report_layout
    layout = report_layout(load_quietly(DATA / "legacy" / "cluster_4rank_pipeline"))
    # rank 0 holds a step trace and flops_summary_0.json (107,146.763 MFLOPs, as MindInsight shows)
    assert _tab_titles(layout) == (["Overview", "Ranks", "Step trace", "FLOPs"], 0)
    assert list(_missing_items(layout)) == ["Operators", "Operators per step", "MindData", "Memory", "Timeline",
                                            "Host dispatch"]


def test_missing_view_reason_names_the_file_that_failed(tmp_path):
    """A step-trace file that cannot be read: the reason names it instead of saying none was found."""
    from nbprofiler.faces.report import report_layout
    run = tmp_path / "run_2_lenet"
    shutil.copytree(DATA / "legacy" / "run_2_lenet", run)
    (run / "step_trace_raw_1_detail_time.csv").write_text("step_num,start_point\n1,abc\n")
    prof = load_quietly(run)
    layout = report_layout(prof)
    assert [Path(p.file).name for p in prof.problems] == ["step_trace_raw_1_detail_time.csv"]
    assert _tab_titles(layout) == (["Overview", "Operators", "MindData", "Timeline"], 0)
    missing = _missing_items(layout)
    assert missing["Step trace"] == ("step_trace_raw_1_detail_time.csv could not be read (see the problems "
                                     "listed above)")
    assert missing["Operators per step"] == missing["Step trace"]  # its steps come from that file
    # the undamaged original has the tab
    assert _tab_titles(report_layout(load_quietly(DATA / "legacy" / "run_2_lenet")))[0][1] == "Step trace"


@pytest.mark.parametrize("layout", ["legacy", "mindspore2"])
@pytest.mark.parametrize("bottleneck,dominant", [("data", 0), ("compute", 1), ("communication", -1)])
def test_synthetic_profiles_load_cleanly_and_show_their_bottleneck(tmp_path, layout, bottleneck, dominant):
    prof = load_quietly(write_profile(tmp_path, layout=layout, bottleneck=bottleneck, steps=12, seed=3))
    assert prof.problems == []
    st = prof.step_trace
    assert len(st) == 12 and len(prof.minddata_pipeline) == 3 and len(prof.host_queue) == 12
    means = st[prof.step_stages].iloc[1:].mean()
    if layout == "legacy" or bottleneck != "communication":
        assert means.idxmax() == prof.step_stages[dominant]
    else:  # 2.x: the not-overlapped communication stage carries the AllReduce tail
        assert means["communication_not_overlapped_ms"] > 15
    if layout == "legacy":
        avg = prof.step_trace_average
        assert avg is not None and avg["total_ms"] == pytest.approx(st["total_ms"].iloc[1:].mean(), abs=1e-3)
    if bottleneck == "data":
        assert prof.summary()["minddata"]["bottleneck_op_ids"] == [1]  # the slow MapOp


def test_synthetic_is_deterministic(tmp_path):
    a = write_profile(tmp_path / "a", layout="mindspore2", seed=7, steps=5)
    b = write_profile(tmp_path / "b", layout="mindspore2", seed=7, steps=5)
    for f in sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file()):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_report_compare_tab_and_verdict(tmp_path):
    """`nbprofiler report A --compare B`: a Compare tab and the verdict in the overview (the MapOp
    bottleneck of md_bottleneck_map is gone in md_fast; its host queue was empty at every step)."""
    from nbprofiler.faces.cli import main
    out = tmp_path / "cmp.html"
    assert main(["report", str(DATA / "minddata" / "md_bottleneck_map"), "--compare",
                 str(DATA / "minddata" / "md_fast"), "-o", str(out)]) == 0
    text = out.read_text()
    assert '"title":"Compare"' in text.replace(": ", ":")
    # MindData-only runs: verdict, the step chart from the host queue's timing, tables; no empty op-type chart
    assert "compare_verdict" in text and "report_compare_minddata" in text
    assert "compare_op_types" not in text and "compare_steps" in text
    # file_html stores the document as HTML-escaped JSON: unescape once to see the Div's markup
    overview = re.search(r"Compared with md_fast \(device 0\).*?</ul>", html.unescape(text))
    assert overview, "the overview shows the verdict"
    assert "<li>MapOp_1 no longer the bottleneck</li>" in overview.group(0)
    assert "<li>host queue empty at 100% -&gt; 0% of steps</li>" in overview.group(0)


def test_report_compare_with_profile_object(tmp_path):
    a, b = load_quietly(DATA / "minddata" / "md_bottleneck_map"), load_quietly(DATA / "minddata" / "md_fast")
    from nbprofiler.faces.report import report_layout
    layout = report_layout(a, compare_with=b)
    tabs = layout.select_one({"name": "report_tabs"})
    # md_bottleneck_map has MindData files only: the other views are left out of the tabs
    assert [t.title for t in tabs.tabs] == ["Overview", "Compare", "MindData"] and tabs.active == 0
    verdict = layout.select_one({"name": "compare_verdict"}).text
    assert "MapOp_1 no longer the bottleneck" in verdict
    md = layout.select_one({"name": "report_compare_minddata_src"}).data
    change = dict(zip(md["op_id"], md["change"]))
    assert change[1] == "resolved" and set(change.values()) == {"resolved", ""}
    q = layout.select_one({"name": "report_compare_queues_src"}).data
    assert list(q["queue"]) == ["host"]
    assert q["a_empty"][0] == q["a_steps"][0] == 62  # empty at every step: "100%"
    assert (q["b_empty"][0], q["b_steps"][0], q["b_empty_rate"][0]) == (1, 200, 0.005)  # md_fast: 1 of 200


def test_report_compare_draws_step_and_op_charts_when_runs_have_them():
    from nbprofiler.faces.report import report_layout
    a, b = load_quietly(DATA / "legacy" / "run_1_widedeep"), load_quietly(DATA / "legacy" / "run_2_lenet")
    layout = report_layout(a, compare_with=b)
    steps = layout.select_one({"name": "compare_steps_src"}).data
    assert list(steps["run"]) == ["run_1_widedeep (device 1)", "run_2_lenet (device 1)"]  # labels, never a/b
    # the stacked stages of each bar add up to MindInsight's average step of that run
    stacked = [sum(steps[c][i] for c in ("iteration_interval_ms", "fp_and_bp_ms", "tail_ms")) for i in (0, 1)]
    mi_a = expected("legacy__run_1_widedeep__device1")["step_trace"]["summary"]["total_time"]
    # run_2_lenet has one step (MindInsight's average row for it is all zeros): that step's total
    (mi_b,) = expected("legacy__run_2_lenet__device1")["step_trace"]["per_step_ms"]["total"]
    assert stacked == pytest.approx([mi_a, mi_b], abs=2e-4)
    assert len(layout.select_one({"name": "compare_op_types_src"}).data["op_type"]) > 0
