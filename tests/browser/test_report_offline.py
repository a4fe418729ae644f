"""Generated HTML reports open in headless Chromium with every network request blocked. Each report
opens on its first tab (a tab with data); clicking every tab changes the BokehJS Tabs model's ``active``
index, shows that tab's own section and figures (BokehJS views of named models become visible, every
other section's views are hidden), its data sources hold MindInsight's numbers, and its screenshot
differs from every other tab's. The search box filters the operator table; nothing is fetched; no page
errors."""
from __future__ import annotations

import json
import warnings

import pytest
from PIL import Image

from helpers import REPO, bokeh_data, open_offline, pixel_diff, save_screenshot, wait_painted

import nbprofiler
from nbprofiler.faces.report import write_html_report

DATA = REPO.parent / "shared" / "data"
EXPECTED = DATA / "expected"
CASES = {  # report name -> profile path
    "widedeep": DATA / "legacy" / "run_1_widedeep",
    "lenet_pynative": REPO / "nbprofiler" / "samples" / "lenet_pynative",
    "cluster4": DATA / "legacy" / "cluster_4rank_pipeline",
    "compare_md": DATA / "minddata" / "md_bottleneck_map",
    "runs": DATA / "minddata" / "md_bottleneck_map",
}
COMPARE_WITH = {"compare_md": DATA / "minddata" / "md_fast",
                "runs": [DATA / "minddata" / "md_fast", REPO / "nbprofiler" / "samples" / "lenet_pynative"]}
# report name -> its tabs in order: (title, section key, named models that tab draws). Views without data
# are left out (lenet_pynative has no step trace; the cluster files hold step traces only).
OVERVIEW = ("Overview", "summary", ["report_overview", "report_suggestions"])
TABS = {
    "widedeep": [OVERVIEW,
                 ("Step trace", "step_trace", ["step_trace_detail", "step_trace_bars", "step_trace_trend"]),
                 ("Operators", "operators", ["op_pie_ai_core", "op_table_ai_core"]),
                 ("Operators per step", "op_steps", ["op_steps_chart", "op_steps_table", "op_steps_source"]),
                 ("MindData", "minddata", ["minddata_graph", "minddata_usage_chart"]),
                 ("FLOPs", "flops", ["flops_figures", "flops_icicle", "flops_ops_table"]),
                 ("Timeline", "timeline", ["timeline_fig", "timeline_lod_note"])],
    "lenet_pynative": [OVERVIEW, ("Operators", "operators", ["op_pie_cpu", "op_table_cpu"]),
                       ("MindData", "minddata", ["minddata_graph", "host_queue_fig", "cpu_fig"]),
                       ("Memory", "memory", ["memory_figures", "memory_curve"]),
                       ("Timeline", "timeline", ["timeline_fig", "timeline_lod_note"])],
    "cluster4": [OVERVIEW, ("Ranks", "ranks", ["report_ranks_table"]),
                 ("Step trace", "step_trace", ["step_trace_detail", "step_trace_bars"]),
                 ("FLOPs", "flops", ["flops_figures"])],
    "compare_md": [OVERVIEW,
                   ("Compare", "compare", ["compare_verdict", "report_compare_minddata", "report_compare_queues"]),
                   ("MindData", "minddata", ["minddata_graph", "minddata_usage_chart"])],
    "runs": [OVERVIEW, ("Runs", "runs", ["runs_verdicts", "runs_headline_table", "runs_trend_host_queue_empty_pct"]),
             ("MindData", "minddata", ["minddata_graph", "minddata_usage_chart"])],
}
SIZES = REPO / "test-output" / "report_sizes.json"
# Canvases on screen (ipywidgets hides inactive tabs with display:none; Bokeh Tabs with visibility:hidden).
_VISIBLE_CANVASES_JS = """() => { let n = 0; const walk = r => r.querySelectorAll('*').forEach(e => {
    if (e.tagName === 'CANVAS') { const b = e.getBoundingClientRect();
      if (b.width > 0 && b.height > 0 && e.checkVisibility({visibilityProperty: true})) n++; }
    if (e.shadowRoot) walk(e.shadowRoot); }); walk(document); return n; }"""

# For each named model: is its BokehJS view on screen? (visibility:hidden counts as hidden: Bokeh keeps
# inactive tab panels laid out but hidden, so bounding boxes alone cannot tell the tabs apart.)
_VIEWS_SHOWN_JS = """(names) => { const d = Bokeh.documents[0]; const out = {};
  for (const name of names) { const m = d.get_model_by_name(name); const v = m && Bokeh.index.find_one(m);
    if (!v || !v.el) { out[name] = null; continue; }
    const b = v.el.getBoundingClientRect();
    out[name] = v.el.checkVisibility({visibilityProperty: true}) && b.width > 0 && b.height > 0; }
  return out; }"""
_ACTIVE_JS = "() => Bokeh.documents[0].get_model_by_name('report_tabs').active"
_TITLES_JS = "() => Bokeh.documents[0].get_model_by_name('report_tabs').tabs.map(t => t.title)"
# Scroll so the tab bar is at the top of the viewport: every tab's screenshot has the same size and frame.
_SCROLL_TO_TABS_JS = """() => { const m = Bokeh.documents[0].get_model_by_name('report_tabs');
  Bokeh.index.find_one(m).el.scrollIntoView({block: 'start'}); }"""


def _mi(name: str) -> dict:
    return json.loads((EXPECTED / f"{name}.json").read_text())


def _col(page, source: str, column: str) -> list:
    """The column of the one BokehJS source named ``source`` in the report's document."""
    cols = bokeh_data(page, source, column)
    assert len(cols) == 1, (source, column, cols)
    return cols[0]


def _queue_usage(page) -> dict:
    return dict(zip(_col(page, "minddata_usage_src", "queue"), _col(page, "minddata_usage_src", "usage_pct")))


def _check_widedeep(page, title, prof):
    mi = _mi("legacy__run_1_widedeep__device1")
    if title == "Step trace":
        st = mi["step_trace"]["per_step_ms"]
        fp_bp = _col(page, "step_trace_steps_src", "fp_and_bp_ms")
        assert len(fp_bp) == st["fp_and_bp"]["len"] == 322
        assert fp_bp[:8] == pytest.approx(st["fp_and_bp"]["head"], abs=1e-4)
        assert _col(page, "step_trace_steps_src", "total_ms")[-8:] == pytest.approx(st["total"]["tail"], abs=1e-4)
    elif title == "Operators":
        assert _col(page, "op_types_src_ai_core", "op_type")[:5] == mi["operators"]["aicore_type"]["pie_top5"]
        assert len(_col(page, "op_table_src_ai_core", "op_name")) == mi["operators"]["aicore_detail"]["size"]
    elif title == "MindData":
        assert _queue_usage(page) == pytest.approx(
            {q["queue"]: q["usage_pct"] for q in mi["minddata_pipeline"]["queue_chart"]}, abs=1e-3)
    elif title == "Operators per step":
        from nbprofiler.analysis.op_steps import op_time_by_step
        by_step = op_time_by_step(prof.step_windows, kernels=prof.kernels, timeline=prof.timeline,
                                  tracks=prof.timeline_tracks).set_index(["step", "op_type"])
        drawn = zip(_col(page, "op_steps_points", "step"), _col(page, "op_steps_points", "op_type"),
                    _col(page, "op_steps_points", "time_ms"))
        for step, op_type, ms in drawn:
            want = by_step["total_time_us"].get((step, op_type), 0.0) / 1000
            assert ms == pytest.approx(want), (step, op_type)
        _click_op_step_point(page, step=3, op_type="UnsortedSegmentSum")
        page.get_by_text("Step 3: its longest operator executions").first.wait_for()
    elif title == "FLOPs":
        names = _col(page, "flops_ops_src", "op")
        assert len(names) == prof.flops["op_name"].nunique()
        assert max(_col(page, "flops_ops_src", "mflops")) == pytest.approx(prof.flops["mflops"].max())
    elif title == "Timeline":
        assert sum(_col(page, "timeline_src", "count")) == len(prof.timeline) == 6_359


# Where a point of the per-step chart is on screen: BokehJS's own scales map data to the canvas.
_POINT_XY_JS = """([step, opType]) => { const d = Bokeh.documents[0];
  const src = d.get_model_by_name('op_steps_points'); const fig = d.get_model_by_name('op_steps_chart');
  const col = (k) => (src.data.get ? src.data.get(k) : src.data[k]);
  const steps = col('step'), types = col('op_type'), ms = col('time_ms');
  let i = -1; for (let k = 0; k < steps.length; k++) if (steps[k] === step && types[k] === opType) i = k;
  const v = Bokeh.index.find_one(fig); const f = v.frame;
  const canvas = v.canvas_view.el.getBoundingClientRect();
  return [canvas.left + f.x_scale.compute(steps[i]), canvas.top + f.y_scale.compute(ms[i])]; }"""


def _click_op_step_point(page, step: int, op_type: str) -> None:
    """Scroll the chart into view and click the point of (step, type) with the tap tool."""
    page.evaluate("() => Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name('op_steps_chart'))"
                  ".el.scrollIntoView({block: 'center'})")
    x, y = page.evaluate(_POINT_XY_JS, [step, op_type])
    page.mouse.click(x, y)


def _check_lenet_pynative(page, title, prof):
    mi = _mi("mindspore2__lenet_pynative__device0")
    if title == "Operators":
        rows = mi["operators"]["cpu_op_type"]["rows"]  # op_type, occurrences, frequency, total us, avg, %
        drawn = dict(zip(_col(page, "op_types_src_cpu", "op_type"), _col(page, "op_types_src_cpu", "total_time_us")))
        assert drawn == pytest.approx({r[0]: r[3] for r in rows}, rel=1e-6)
        assert len(_col(page, "op_table_src_cpu", "op_name")) == mi["operators"]["cpu_op_info"]["size"] == 29
    elif title == "MindData":
        assert _queue_usage(page) == pytest.approx(
            {q["queue"]: q["usage_pct"] for q in mi["minddata_pipeline"]["queue_chart"]}, abs=1e-3)
        sizes = _col(page, "host_queue_src", "size")
        queue = mi["queues"]["device_queue"]["info"]["queue"]
        assert len(sizes) == queue["len"] and sizes[:8] == queue["head"] and sum(sizes) == queue["sum"]
    elif title == "Memory":
        from nbprofiler.analysis.memory import memory_peaks
        peak = memory_peaks(prof.memory)["peak_allocated_mb"].iloc[0]
        text = page.evaluate("() => Bokeh.documents[0].get_model_by_name('memory_figures').text")
        assert "Peak allocated" in text
        assert max(_col(page, "memory_peaks_src", "mb")) == pytest.approx(peak)
    elif title == "Timeline":
        assert sum(_col(page, "timeline_src", "count")) == len(prof.timeline) == 13_801


def _check_cluster4(page, title, prof):
    if title == "Ranks":
        ranks = _col(page, "report_ranks_table_src", "rank")
        total = dict(zip(map(str, ranks), _col(page, "report_ranks_table_src", "total_ms")))
        assert sorted(total) == ["0", "1", "2", "3"]
        for rank in ("0", "3"):
            mi = _mi(f"legacy__cluster_4rank_pipeline__device{rank}")["step_trace"]["summary"]
            assert total[rank] == pytest.approx(mi["total_time"], abs=1e-4), rank
    elif title == "Step trace":  # the report details rank 0
        mi = _mi("legacy__cluster_4rank_pipeline__device0")["step_trace"]["per_step_ms"]
        assert _col(page, "step_trace_steps_src", "total_ms") == pytest.approx(mi["total"], abs=1e-4)
    elif title == "FLOPs":  # rank 0's flops_summary_0.json alone: 107,146.763 cube MFLOPs
        raw = json.loads((DATA / "legacy" / "cluster_4rank_pipeline" / "flops_summary_0.json").read_text())
        text = page.evaluate("() => Bokeh.documents[0].get_model_by_name('flops_figures').text")
        assert f"{raw['cube_FLOPs'] + raw['vec_FLOPs']:,.3f}" in text


def _check_compare_md(page, title, prof):
    if title == "Compare":
        # neither run has a step trace or operators: the step chart holds the host queue's timing (mean time
        # between batches, 148.8 -> 41.7 ms), no empty op-type chart
        assert _col(page, "compare_steps_src", "total_ms") == pytest.approx([148.836066, 41.668342], rel=1e-6)
        assert bokeh_data(page, "compare_op_types_src", "op_type") == []
        assert _col(page, "report_compare_queues_src", "a_empty_rate") == [1.0]  # empty at every step
        change = dict(zip(_col(page, "report_compare_minddata_src", "op_id"),
                          _col(page, "report_compare_minddata_src", "change")))
        assert change[1] == "resolved"  # md_bottleneck_map's slow MapOp is gone in md_fast
    elif title == "MindData":
        mi = _mi("minddata__md_bottleneck_map__device0")
        assert _queue_usage(page) == pytest.approx(
            {q["queue"]: q["usage_pct"] for q in mi["minddata_pipeline"]["queue_chart"]}, abs=1e-3)


def _check_runs(page, title, prof):
    if title == "Runs":
        from nbprofiler.analysis.runs import compare_many
        runs = [prof, *(nbprofiler.load(p) for p in COMPARE_WITH["runs"])]
        headline = compare_many(runs).headline
        assert _col(page, "runs_headline_src", "host_queue_empty_pct") == pytest.approx(
            headline["host_queue_empty_pct"].tolist())
        assert _col(page, "runs_trend_host_queue_empty_pct_src", "value")[0] == 100.0


CHECKS = {"widedeep": _check_widedeep, "lenet_pynative": _check_lenet_pynative, "cluster4": _check_cluster4,
          "compare_md": _check_compare_md, "runs": _check_runs}


@pytest.fixture(scope="module")
def profiles():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: nbprofiler.load(p) for name, p in CASES.items()}


@pytest.fixture(scope="module")
def reports(profiles, tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: write_html_report(prof, out / f"{name}.html", compare_with=COMPARE_WITH.get(name))
                for name, prof in profiles.items()}


@pytest.fixture
def offline_page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.page_errors = []
    page.on("pageerror", lambda e: page.page_errors.append(str(e)))
    yield page
    context.close()


SPARSE_TABS = {("cluster4", "FLOPs")}


def _tab(page, title):
    return page.locator(".bk-tab", has_text=title).first


def _ink(path, top_px: int = 40) -> float:
    """Fraction of non-white pixels below the tab bar (the first ``top_px`` rows) of a screenshot."""
    img = Image.open(path).convert("L")
    body = img.crop((0, top_px, img.width, img.height))
    return 1 - body.point(lambda v: 255 if v > 245 else 0).histogram()[255] / (body.width * body.height)


def _shown_sections(page, name):
    """{section key: its view is on screen} for every tab of report ``name``."""
    shown = page.evaluate(_VIEWS_SHOWN_JS, [f"report_{key}" for _, key, _ in TABS[name]])
    return {k[len("report_"):]: v for k, v in shown.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_every_tab_renders_its_own_content_offline(reports, profiles, offline_page, name):
    page = offline_page
    path = reports[name]
    blocked = open_offline(page, path)
    assert blocked == [], f"the report tried to fetch {blocked}"
    assert page.evaluate("() => window.Bokeh && Bokeh.version") == "3.9.2"
    tabs = TABS[name]
    assert page.evaluate(_TITLES_JS) == [t for t, _, _ in tabs]
    # the report opens on its first tab, which has data: its figures are on screen before any click
    assert page.evaluate(_ACTIVE_JS) == 0
    shots = {}
    for i, (title, key, models) in enumerate(tabs):
        if i:
            _tab(page, title).click()
            page.wait_for_function(f"() => ({_ACTIVE_JS})() === {i}")
        page.wait_for_function(f"(names) => Object.values(({_VIEWS_SHOWN_JS})(names)).every(v => v === true)",
                               arg=[f"report_{key}", *models])
        shown = _shown_sections(page, name)
        assert shown == {k: k == key for _, k, _ in tabs}, (title, shown)
        CHECKS[name](page, title, profiles[name])
        page.evaluate(_SCROLL_TO_TABS_JS)
        wait_painted(page)
        shots[title] = save_screenshot(page, f"report_{name}_{title.replace(' ', '_')}")
        # a rank with only flops_summary_N.json has four figures and a note on its FLOPs tab: little ink
        least = 0.002 if (name, title) in SPARSE_TABS else 0.01
        assert _ink(shots[title]) > least, f"{title}: the tab's panel looks blank"
    # each tab looks different from every other; the same tab, shown again, looks the same
    titles = list(shots)
    diffs = {(a, b): pixel_diff(shots[a], shots[b]) for i, a in enumerate(titles) for b in titles[i + 1:]}
    assert all(d > 0.01 for d in diffs.values()), diffs
    _tab(page, titles[0]).click()
    page.wait_for_function(f"() => ({_ACTIVE_JS})() === 0")
    page.evaluate(_SCROLL_TO_TABS_JS)
    page.mouse.move(0, 999)  # no hover highlight on the tab bar
    wait_painted(page)
    again = save_screenshot(page, f"report_{name}_{titles[0].replace(' ', '_')}_again")
    assert pixel_diff(shots[titles[0]], again) < 0.005
    assert not page.page_errors, page.page_errors
    SIZES.parent.mkdir(parents=True, exist_ok=True)
    sizes = json.loads(SIZES.read_text()) if SIZES.exists() else {}
    sizes[name] = {"bytes": path.stat().st_size, "tabs": titles,
                   "pixel_diff_between_tabs": {f"{a} / {b}": round(d, 4) for (a, b), d in diffs.items()}}
    SIZES.write_text(json.dumps(sizes, indent=1))


def test_compare_report_shows_verdict_offline(reports, offline_page):
    page = offline_page
    assert open_offline(page, reports["compare_md"]) == []
    # the overview's verdict is rendered as text (escaped markup shown as HTML, not as source)
    page.get_by_text("MapOp_1 no longer the bottleneck").first.wait_for()
    # the report opens on the Overview; Compare is the next tab
    assert page.evaluate(_ACTIVE_JS) == 0
    _tab(page, "Compare").click()
    page.wait_for_function(f"(names) => Object.values(({_VIEWS_SHOWN_JS})(names)).every(v => v === true)",
                           arg=["compare_verdict", "report_compare_minddata"])
    save_screenshot(page, "report_compare_md_verdict", full_page=True)
    assert not page.page_errors, page.page_errors


def test_operator_search_filters_offline(reports, offline_page):
    page = offline_page
    assert open_offline(page, reports["widedeep"]) == []
    _tab(page, "Operators").click()
    page.wait_for_function(f"(names) => Object.values(({_VIEWS_SHOWN_JS})(names)).every(v => v === true)",
                           arg=["op_table_ai_core"])
    before = bokeh_data(page, "op_table_src_ai_core", "op_name")[0]
    box = page.locator("input[placeholder^='search operator']").first
    box.fill("MatMul")
    box.press("Enter")
    page.wait_for_function("(n) => { const d = Bokeh.documents[0].get_model_by_name('op_table_src_ai_core');"
                           " const c = d.data.get ? d.data.get('op_name') : d.data.op_name; return c.length < n; }",
                           arg=len(before))
    after = bokeh_data(page, "op_table_src_ai_core", "op_name")[0]
    assert 0 < len(after) < len(before)
    assert all("matmul" in n.lower() for n in after) or all(
        "matmul" in t.lower() for t in bokeh_data(page, "op_table_src_ai_core", "op_type")[0])
    wait_painted(page)
    save_screenshot(page, "report_widedeep_operator_search")


# -- executed notebooks with the ipywidgets dashboard, exported by nbprofiler.faces.nbconvert_offline -
_DASHBOARD_NB = [
    "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler\nprof = nbprofiler.load({path!r})",
    # build every tab before the widget state is saved: the exported file is a snapshot, no kernel
    "from nbprofiler.views.dashboard import Dashboard, TABS\ndash = Dashboard(prof)\nfor t in TABS[1:]:\n"
    "    dash.select(t)\ndash.select('Step trace')\ndash",
]


@pytest.fixture(scope="module")
def exported_dashboard(tmp_path_factory):
    import nbformat
    from nbclient import NotebookClient
    from nbprofiler.faces.nbconvert_offline import export_offline_html
    out = tmp_path_factory.mktemp("exported")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c.format(path=str(DATA / "legacy" / "run_2_lenet"))) for c in _DASHBOARD_NB]
    NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(out)}}).execute()
    nbformat.write(nb, out / "dashboard.ipynb")
    return export_offline_html(out / "dashboard.ipynb", out / "dashboard.html")


def test_exported_dashboard_notebook_renders_offline(exported_dashboard, offline_page):
    """The ipywidgets Tab of `prof.show()` and the jupyter_bokeh figures inside it render from the saved
    widget state with every request blocked (stock nbconvert output leaves this cell blank)."""
    page = offline_page
    # the widget manager renders the saved state after DOMContentLoaded: ready when the Tab bar is there
    blocked = open_offline(page, exported_dashboard,
                           ready_js="() => document.querySelectorAll('.widget-tab .lm-TabBar-tab').length > 0")
    assert blocked == [], f"the exported notebook tried to fetch {blocked}"
    assert page.evaluate("() => window.Bokeh && Bokeh.version") == "3.9.2"
    tabs = page.locator(".widget-tab .lm-TabBar-tab")
    assert tabs.all_inner_texts() == ["Overview", "Step trace", "Operators", "MindData", "Memory", "FLOPs",
                                      "Timeline"]
    visible = {}
    for title in ("Step trace", "Operators", "MindData", "Timeline"):
        page.locator(".widget-tab .lm-TabBar-tab", has_text=title).first.click()
        page.wait_for_function(f"() => ({_VISIBLE_CANVASES_JS})() > 0")
        wait_painted(page)
        visible[title] = page.evaluate(_VISIBLE_CANVASES_JS)
        save_screenshot(page, f"exported_dashboard_{title.replace(' ', '_')}", full_page=True)
    assert all(n >= 1 for n in visible.values()), visible
    # the step-trace table of the snapshot holds run_2_lenet's one step (MindInsight: 23.7091 ms)
    page.locator(".widget-tab .lm-TabBar-tab", has_text="Step trace").first.click()
    page.get_by_text("23.7091").locator("visible=true").first.wait_for()
    page.locator(".widget-tab .lm-TabBar-tab", has_text="Overview").first.click()
    page.get_by_text("Suggestions").first.wait_for()
    assert not page.page_errors, page.page_errors
