"""Dashboard tabs, no-data panels, step linking and the compact HTML repr, on real profiles."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from nbprofiler.views import dashboard as D
from nbprofiler.views.repr import cluster_html, profile_html
from .conftest import DATA, REPO, load_quietly


def test_overview_shows_summary_and_suggestions():
    prof = load_quietly(DATA / "legacy/run_1_widedeep")
    db = D.Dashboard(prof)
    text = db._panels["Overview"].children[0].value
    assert "322 steps" in text and "205.3809 ms" in text          # MindInsight's average step
    assert "Forward + backward: <b>118.0540 ms</b> (57.48 %)" in text
    sugg = db._panels["Overview"].children[1]
    assert prof.summary()["suggestions"] and sugg is db.suggestions.widget
    assert "Suggestions" in sugg.children[0].value and "why?" in sugg.children[1].children[0].value
    assert db.views == {}   # a view is built when its tab is first opened, or by `prepare` once shown
    db.prepare()
    assert list(db.views) == ["Step trace"] and db.views["Step trace"] is not None and db.tab == "Overview"


def test_empty_tabs_say_which_files_were_looked_for():
    prof = load_quietly(DATA / "npu/kernel_details_591")
    db = D.Dashboard(prof)
    assert db.select("Step trace") is None
    assert db.select("MindData") is None
    html = db._panels["MindData"].children[0].value
    assert "No minddata data" in html and "pipeline_profiling_*.json" in html


def test_step_links_operator_table_where_kernels_have_steps():
    prof = load_quietly(DATA / "npu/kernel_details_591")
    steps = sorted(int(s) for s in prof.kernels["step"].dropna().unique())
    s = steps[0]
    assert D.step_window_us(prof, s) == pytest.approx(
        (prof.kernels.loc[prof.kernels["step"] == s, "start_us"].min(),
         (prof.kernels["start_us"] + prof.kernels["dur_us"])[prof.kernels["step"] == s].max()))


def test_legacy_step_selection_narrows_the_timeline_and_explains_the_operator_table():
    prof = load_quietly(DATA / "legacy/run_1_widedeep")
    db = D.Dashboard(prof)
    ops = db.select("Operators")
    tl = db.select("Timeline")
    queries = tl.queries
    assert "Step trace" not in db.views and (tl.x_range.start, tl.x_range.end) == tl.x_range.bounds  # the whole run
    db.select("Step trace").step = 5
    w = prof.step_windows.set_index("step").loc[5]
    assert D.step_window_us(prof, 5) == (w["start_us"], w["end_us"])
    assert "on the timeline" in db.link_note.value and "first AI Core op" in db.link_note.value
    assert tl.queries > queries
    # the AI Core operator files carry no step ids: the table says so instead of pretending to filter
    assert "no step ids" in ops.step_note.value
    # one note per tab: the operators tab shows its view's note, not the dashboard's timeline note
    assert [w for w in db._panels["Operators"].children if w is db.link_note] == []
    assert db._panels["Timeline"].children[0] is db.link_note and tl.widget in db._panels["Timeline"].children
    db.views["Step trace"].step = 0
    assert db.link_note.value == ""


def test_step_selection_without_shared_clock_is_explained():
    # device 0 of the mixed-ids folder: a step trace and a timeline excerpt, nothing to align them with
    prof = load_quietly(DATA / "legacy/fixtures_mixed_ids", device="0")
    db = D.Dashboard(prof)
    db.select("Timeline")
    db.select("Step trace").step = 5
    assert "do not share a clock" in db.link_note.value
    assert D.step_window_us(prof, 5) is None


def test_repr_escapes_file_system_strings(tmp_path):
    evil = tmp_path / "<script>alert(1)</script>"
    shutil.copytree(DATA / "minddata/md_fast", evil)
    prof = load_quietly(evil)
    html = profile_html(prof)
    assert "<script>" not in html and "&lt;script&gt;" in html
    db = D.Dashboard(prof)
    assert "<script>" not in db._panels["Overview"].children[0].value


def test_repr_profile_and_cluster():
    html = profile_html(load_quietly(DATA / "legacy/run_1_widedeep"))
    assert "322 steps" in html and "AI Core" in html
    cl = load_quietly(DATA / "legacy/cluster_4rank_pipeline")
    html = cluster_html(cl)
    assert "4 ranks" in html and html.count("<tr>") == 5


def test_memory_and_flops_tabs_show_their_views_and_a_memory_range_moves_the_timeline():
    from nbprofiler.views.flops import FlopsView
    from nbprofiler.views.memory import MemoryView
    prof = load_quietly(DATA / "mindspore2/lenet_pynative")
    db = D.Dashboard(prof)
    mem = db.select("Memory")
    assert isinstance(mem, MemoryView) and mem.widget in db._panels["Memory"].children
    assert db.select("FLOPs") is None and "flops_*.txt" in db._panels["FLOPs"].children[0].value
    tl = db.select("Timeline")
    queries = tl.queries
    mem.window = (1_000_000.0, 2_000_000.0)  # what a box selection on the memory curve sets
    assert tl.queries > queries
    widedeep = D.Dashboard(load_quietly(DATA / "legacy/run_1_widedeep"))
    assert isinstance(widedeep.select("FLOPs"), FlopsView)


def test_operators_per_step_fold_builds_on_open_and_a_clicked_step_selects_it_everywhere():
    prof = load_quietly(DATA / "legacy/run_1_widedeep")
    db = D.Dashboard(prof)
    db.select("Operators")
    fold = db._panels["Operators"].children[-1]
    assert fold.titles == ("Operators per step and by input shape",) and "Operators per step" not in db.views
    fold.selected_index = 0
    per_step = db.views["Operators per step"]
    points = per_step.layout.select_one({"name": "op_steps_points"})
    i = list(points.data["step"]).index(4)
    points.selected.indices = [i]  # a click on step 4's point
    assert per_step.step == 4 and db.views["Step trace"].step == 4
    assert db.link_note.value.count("Step 4:") == 1 and db.views["Operators"].step == 4


def test_an_average_row_that_contradicts_itself_is_said_so_with_the_steps_mean():
    """legacy/run_2_lenet's average row: total 0 ms, step interval 12.4321 ms (MindInsight shows it as
    written); the overviews say so and give the mean of the one recorded step, 23.7091 ms."""
    from nbprofiler.analysis.summary import inconsistent_average
    from nbprofiler.faces.report import report_layout
    prof = load_quietly(DATA / "legacy/run_2_lenet")
    bad = inconsistent_average(prof.summary()["step_trace"])
    assert bad["written_total_ms"] == 0.0 and bad["stages_sum_ms"] == pytest.approx(12.4321)
    assert bad["mean"]["total_ms"] == pytest.approx(23.7091)
    overview = D.overview_html(prof.summary(), root=prof.root)
    assert "average row says 0.0000 ms per step but its stages add up to 12.4321 ms" in overview
    assert "the 1 recorded step average 23.7091 ms" in overview
    report = report_layout(prof).select_one({"name": "report_overview"}).text
    assert "the 1 recorded step average 23.7091 ms" in report
    # a consistent average (widedeep: 205.3809 ms) gets no note
    assert inconsistent_average(load_quietly(DATA / "legacy/run_1_widedeep").summary()["step_trace"]) is None


def test_a_clicked_timeline_event_names_its_step_and_shows_its_operator_row():
    """npu/ascend_pt_text_2rank rank 0: a click on the Conv2D1 kernel's bar names step 50 (the kernels'
    own step id) and searches the NPU operator table for it."""
    prof = load_quietly(DATA / "npu/ascend_pt_text_2rank")
    prof = prof[prof.ranks[0]]
    db = D.Dashboard(prof)
    tl = db.select("Timeline")
    w = prof.step_windows.iloc[0]
    tl.set_window(w["start_us"], w["end_us"])
    bars = tl.bars()
    i = next(k for k, (n, c) in enumerate(zip(bars["name"], bars["count"])) if c == 1 and n == "Conv2D1")
    tl.source.selected.indices = [i]  # a click on that bar
    assert tl.event["name"] == "Conv2D1" and D.step_of_time(prof, tl.event["start_us"]) == 50
    assert "Conv2D1 (Conv2D1" in db.link_note.value and "step 50" in db.link_note.value
    assert "its row is shown in the Operators tab" in db.link_note.value
    ops = db.views["Operators"]
    assert ops.kind == "npu" and set(ops._model("op_table_src_npu").data["op_name"]) == {"Conv2D1"}


SHOW = """
import json, sys, warnings
warnings.simplefilter("ignore")
import IPython.display
import nbprofiler
from nbprofiler.views.dashboard import Dashboard
seen = []   # per output: what it is, its display id, and whether Bokeh was imported / a view built by then
def display(obj, raw=False, display_id=None):
    js = obj.get("application/javascript") if isinstance(obj, dict) else None
    what = type(obj).__name__ if js is None else "js:" + ("loader" if js else "empty")
    seen.append(["display", what, display_id, "bokeh" in sys.modules, list(dash.views)])
def update_display(obj, raw=False, display_id=None):
    seen.append(["update", "js:loader" if "nbprofiler/bokehjs/" in obj["application/javascript"] else "js:?",
                 display_id, "bokeh" in sys.modules, list(dash.views)])
IPython.display.display, IPython.display.update_display = display, update_display
prof = nbprofiler.load(sys.argv[1])
dash = Dashboard(prof)
built = "bokeh" in sys.modules
dash.display()
print(json.dumps({"built": built, "seen": seen, "views": list(dash.views),
                  "after": "bokeh.plotting" in sys.modules and "jupyter_bokeh" in sys.modules}))
"""


def test_a_shown_dashboard_sends_its_overview_before_importing_the_chart_modules(tmp_path):
    """`Dashboard.display` shows the overview first, then imports Bokeh (what the chart tabs draw with), fills
    the output kept before the widget with the BokehJS loader and builds the step trace's view: the overview
    waits for none of it, and the loader still precedes every Bokeh model. In a fresh interpreter, as a
    kernel starts."""
    env = dict(os.environ, NBPROFILER_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", SHOW, str(DATA / "legacy/run_2_lenet")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert not out["built"]
    (kept, tab, loader) = out["seen"]
    # an empty output kept for the loader, then the dashboard's Tab widget: Bokeh not imported yet
    assert kept[:2] == ["display", "js:empty"] and kept[2] and not kept[3]
    assert tab[:2] == ["display", "Tab"] and not tab[3]
    # then that output filled with the loader, before any view (Bokeh models) is built
    assert loader == ["update", "js:loader", kept[2], True, []]
    assert out["after"] and out["views"] == ["Step trace"]


def test_a_dashboard_shown_with_a_view_built_sends_the_loader_first(monkeypatch):
    """A dashboard whose widget holds Bokeh models already (a tab opened before it is shown) is shown as every
    view is: the BokehJS loader, then the widget, nothing left to fill later."""
    import IPython.display
    seen = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False, display_id=None: seen.append(obj))
    monkeypatch.setattr(IPython.display, "update_display", lambda *a, **kw: seen.append("update"))
    dash = D.Dashboard(load_quietly(DATA / "legacy/run_2_lenet"))
    dash.select("Operators")
    assert dash.has_charts
    dash.display()
    loader, tab = seen
    assert "nbprofiler/bokehjs/" in loader["application/javascript"] and tab is dash.widget


def test_the_overview_is_the_summary_without_what_it_does_not_show():
    """The dashboard's summary is `prof.summary()`, value for value, less the timeline's totals per op type
    and scope layer, the host dispatch's per-step rows and the memory peak, which the overview does not
    show."""
    prof = load_quietly(DATA / "npu/trace_view_torch_npu")
    full, shown = prof.summary(), D.Dashboard(prof).summary
    assert full["timeline"]["by_type"] and set(full["timeline"]) - set(shown["timeline"]) == {"by_type", "scope_layers"}
    assert full["dispatch"]["per_step"] and set(full["dispatch"]) - set(shown["dispatch"]) == {"per_step"}
    full["timeline"] = {k: v for k, v in full["timeline"].items() if k not in ("by_type", "scope_layers")}
    del full["dispatch"]["per_step"]
    assert json.dumps(shown) == json.dumps(full)

    # a run with a memory record: read (its problems are the overview's), its peak left to the full summary
    prof = load_quietly(DATA / "mindspore2/lenet_pynative")
    full, shown = prof.summary(), D.Dashboard(prof).summary
    assert full["memory"]["peak"]["peak_mb"] > 0 and shown["memory"] == {}
    for section in ("timeline", "dispatch", "memory"):
        del full[section], shown[section]
    assert json.dumps(shown) == json.dumps(full)
