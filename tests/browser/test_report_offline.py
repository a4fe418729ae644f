"""Generated HTML reports open in headless Chromium with every network request blocked: each tab renders
(its canvases appear), the search box filters the operator table, nothing is fetched, no page errors."""
from __future__ import annotations

import json
import warnings

import pytest

from helpers import REPO, bokeh_data, count_canvases, open_offline, save_screenshot

import nbprofiler
from nbprofiler.report import write_html_report

DATA = REPO.parent / "shared" / "data"
CASES = {  # report name -> profile path
    "widedeep": DATA / "legacy" / "run_1_widedeep",
    "lenet_pynative": REPO / "nbprofiler" / "samples" / "lenet_pynative",
    "cluster4": DATA / "legacy" / "cluster_4rank_pipeline",
    "compare_md": DATA / "minddata" / "md_bottleneck_map",
}
COMPARE_WITH = {"compare_md": DATA / "minddata" / "md_fast"}
TABS = {"widedeep": ["Step trace", "Operators", "MindData", "Timeline"],
        "lenet_pynative": ["Step trace", "Operators", "MindData", "Timeline"],
        "cluster4": ["Ranks", "Step trace", "Operators", "MindData", "Timeline"],
        # MindData-only runs: no step trace or timeline (those tabs hold a note, no canvas)
        "compare_md": ["Compare", "MindData"]}
_VISIBLE_CANVASES_JS = """() => { let n = 0; const walk = r => r.querySelectorAll('*').forEach(e => {
    if (e.tagName === 'CANVAS') { const b = e.getBoundingClientRect(); if (b.width > 0 && b.height > 0) n++; }
    if (e.shadowRoot) walk(e.shadowRoot); }); walk(document); return n; }"""
SIZES = REPO / "test-output" / "report_sizes.json"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: write_html_report(nbprofiler.load(p), out / f"{name}.html", compare_with=COMPARE_WITH.get(name))
                for name, p in CASES.items()}


@pytest.fixture
def offline_page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.page_errors = []
    page.on("pageerror", lambda e: page.page_errors.append(str(e)))
    yield page
    context.close()


def _tab(page, title):
    return page.locator(".bk-tab", has_text=title).first


@pytest.mark.parametrize("name", list(CASES))
def test_report_renders_offline(reports, offline_page, name):
    page = offline_page
    path = reports[name]
    blocked = open_offline(page, path)
    assert blocked == [], f"the report tried to fetch {blocked}"
    assert page.evaluate("() => window.Bokeh && Bokeh.version") == "3.9.2"
    record = {"bytes": path.stat().st_size, "canvases": {}, "visible_canvases": {}}
    for title in TABS[name]:
        _tab(page, title).click()
        page.wait_for_timeout(700)  # layout + paint of the newly shown panel
        record["canvases"][title] = count_canvases(page)
        record["visible_canvases"][title] = page.evaluate(_VISIBLE_CANVASES_JS)
        save_screenshot(page, f"report_{name}_{title.replace(' ', '_')}", full_page=True)
    # hidden tab panels are display:none, so visible canvases belong to the tab just opened
    plots = {t: n for t, n in record["visible_canvases"].items() if t != "Ranks"}
    assert all(n >= 1 for n in plots.values()), record
    assert not page.page_errors, page.page_errors
    SIZES.parent.mkdir(parents=True, exist_ok=True)
    sizes = json.loads(SIZES.read_text()) if SIZES.exists() else {}
    sizes[name] = record
    SIZES.write_text(json.dumps(sizes, indent=1))


def test_compare_report_shows_verdict_offline(reports, offline_page):
    page = offline_page
    assert open_offline(page, reports["compare_md"]) == []
    # the overview's verdict is rendered as text (escaped markup shown as HTML, not as source)
    page.get_by_text("MapOp_1 no longer the bottleneck").first.wait_for()
    _tab(page, "Compare").click()
    page.wait_for_timeout(700)
    assert page.evaluate(_VISIBLE_CANVASES_JS) >= 2  # step bars + op-type deltas
    assert bokeh_data(page, "compare_steps_src", "run") == [["a", "b"]]
    save_screenshot(page, "report_compare_md_verdict", full_page=True)
    assert not page.page_errors, page.page_errors


def test_operator_search_filters_offline(reports, offline_page):
    page = offline_page
    assert open_offline(page, reports["widedeep"]) == []
    _tab(page, "Operators").click()
    page.wait_for_timeout(500)
    before = bokeh_data(page, "op_table_src_ai_core", "op_name")[0]
    box = page.locator("input[placeholder^='search operator']").first
    box.fill("MatMul")
    box.press("Enter")
    page.wait_for_timeout(500)
    after = bokeh_data(page, "op_table_src_ai_core", "op_name")[0]
    assert 0 < len(after) < len(before)
    assert all("matmul" in n.lower() for n in after) or all(
        "matmul" in t.lower() for t in bokeh_data(page, "op_table_src_ai_core", "op_type")[0])
    save_screenshot(page, "report_widedeep_operator_search")


# -- executed notebooks with the ipywidgets dashboard, exported by nbprofiler.nbconvert_offline -------
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
    from nbprofiler.nbconvert_offline import export_offline_html
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
    blocked = open_offline(page, exported_dashboard, settle_ms=4000)
    assert blocked == [], f"the exported notebook tried to fetch {blocked}"
    assert page.evaluate("() => window.Bokeh && Bokeh.version") == "3.9.2"
    tabs = page.locator(".widget-tab .lm-TabBar-tab")
    assert tabs.all_inner_texts() == ["Overview", "Step trace", "Operators", "MindData", "Timeline"]
    visible = {}
    for title in ("Step trace", "Operators", "MindData", "Timeline"):
        page.locator(".widget-tab .lm-TabBar-tab", has_text=title).first.click()
        page.wait_for_timeout(1000)
        visible[title] = page.evaluate(_VISIBLE_CANVASES_JS)
        save_screenshot(page, f"exported_dashboard_{title.replace(' ', '_')}", full_page=True)
    assert all(n >= 1 for n in visible.values()), visible
    # the step-trace table of the snapshot holds run_2_lenet's one step (MindInsight: 23.7091 ms)
    page.locator(".widget-tab .lm-TabBar-tab", has_text="Step trace").first.click()
    page.get_by_text("23.7091").first.wait_for()
    page.locator(".widget-tab .lm-TabBar-tab", has_text="Overview").first.click()
    page.get_by_text("Suggestions").first.wait_for()
    assert not page.page_errors, page.page_errors
