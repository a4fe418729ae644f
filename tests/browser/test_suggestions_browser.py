"""Suggestions in a real JupyterLab: the overview's "why?" toggle shows the evidence with labels, units and
thresholds, and each evidence button opens what it cites: the MindData tab with the queue selected
(minddata/md_bottleneck_map), the operator table filtered to the type and the timeline at the step's window
(legacy/run_1_widedeep). Every wait is for the state it asserts; screenshots in
test-output/screenshots/suggestions_*.png."""
from __future__ import annotations

from helpers import REPO, open_and_run_all, save_screenshot, set_theme, write_notebook

DATA = REPO.parent / "shared" / "data"
BOTTLENECK = (DATA / "minddata" / "md_bottleneck_map").resolve()
WIDEDEEP = (DATA / "legacy" / "run_1_widedeep").resolve()

# The selected queue's op id in the MindData graph (null when none is selected), per document.
_QUEUE_JS = """() => (window.Bokeh ? Bokeh.documents : []).flatMap(d => {
    const m = d.get_model_by_name('minddata_edges_src'); if (!m) return [];
    const ids = m.data.get ? m.data.get('op_id') : m.data.op_id; const i = m.selected.indices[0];
    return [i === undefined ? null : Number(ids[i])]; })"""


def _current_tab(out) -> str:
    return out.locator(".lm-TabBar-tab.lm-mod-current").first.inner_text().strip()


def _wait_tab(page, out, name: str) -> None:
    page.wait_for_function("([el, name]) => { const t = el.querySelector('.lm-TabBar-tab.lm-mod-current');"
                           " return t && t.innerText.trim() === name; }", arg=[out.element_handle(), name])


def test_evidence_opens_the_cited_queue(lab, page):
    write_notebook(lab.root / "suggestions_md.ipynb", ["%load_ext nbprofiler", f"%nbprofiler {str(BOTTLENECK)!r}"])
    out = open_and_run_all(page, lab, "suggestions_md.ipynb", 2).nth(1)
    pipe = out.locator(".nbprofiler-suggestion[data-suggestion-id='minddata.pipeline']").first   # the overview's
    pipe.wait_for()
    assert _current_tab(out) == "Overview"
    # "why?": the rule and the numbers with labels, units and thresholds (no dict dumps, no document names)
    pipe.locator("summary", has_text="why?").click()
    why = pipe.locator("details.nbprofiler-why")
    page.wait_for_function("(d) => d.open", arg=why.element_handle())
    text = why.inner_text()
    assert "Input minus output queue usage of MapOp_1: 98.32 points (threshold > 10 points)" in text
    assert "Output queue usage of MapOp_1: 0.03 %" in text and "prof.minddata_pipeline[" in text
    assert "FORMATS" not in out.inner_text() and "{'" not in out.inner_text()
    save_screenshot(out, "suggestions_overview_why")

    # The evidence button of GeneratorOp_2's queue (the full input queue of MapOp_1): the MindData tab opens
    # with that queue selected in the graph (the graph starts on the flagged Queue_1).
    button = out.locator("button.nbprofiler-open-minddata-pipeline", has_text="GeneratorOp_2")
    button.click()
    _wait_tab(page, out, "MindData")
    page.wait_for_function(f"() => ({_QUEUE_JS})().some(q => q === 2)")
    assert page.evaluate(_QUEUE_JS) == [2]
    out.locator("canvas:visible").first.wait_for()
    save_screenshot(out, "suggestions_minddata_queue2")

    # Back on the overview, MapOp_1's button moves the selection back to Queue_1.
    out.locator(".lm-TabBar-tab", has_text="Overview").first.click()
    _wait_tab(page, out, "Overview")
    out.locator("button.nbprofiler-open-minddata-pipeline", has_text="MapOp_1").click()
    _wait_tab(page, out, "MindData")
    page.wait_for_function(f"() => ({_QUEUE_JS})().some(q => q === 1)")
    assert not page.page_errors, page.page_errors

    # The overview in the dark theme: the suggestion text follows JupyterLab's colours.
    out.locator(".lm-TabBar-tab", has_text="Overview").first.click()
    _wait_tab(page, out, "Overview")
    set_theme(page, "JupyterLab Dark", light=False)
    try:
        color = page.evaluate("(el) => getComputedStyle(el).color", pipe.element_handle())
        rgb = [int(v) for v in color[color.index("(") + 1:color.index(")")].split(",")[:3]]
        assert sum(rgb) / 3 > 150, color            # light text on the dark theme
        save_screenshot(out, "suggestions_overview_why_dark")
    finally:  # a saved setting of the session's server: restore it for the other tests
        set_theme(page, "JupyterLab Light", light=True)


def test_evidence_opens_the_operator_filter_and_the_step_window(lab, page):
    write_notebook(lab.root / "suggestions_wd.ipynb", ["%load_ext nbprofiler", f"%nbprofiler {str(WIDEDEEP)!r} --as wd",
                                                       "from nbprofiler.views.suggestions import evidence_targets\n"
                                                       "s = {s.id: s for s in __import__('nbprofiler').analysis."
                                                       "advisor.advise_profile(wd)}\n"
                                                       "print(next(t.window_us for t in evidence_targets("
                                                       "s['step_trace.dominant.fp_and_bp']) if t.window_us))"])
    cells = open_and_run_all(page, lab, "suggestions_wd.ipynb", 3)
    out = cells.nth(1)
    printed = cells.nth(2).locator(".jp-OutputArea-output").first.inner_text().strip()
    t0, t1 = (float(v) for v in printed.strip("()").split(","))

    out.locator("button.nbprofiler-open-operators-ai_core-top_type", has_text="MatMul").click()
    _wait_tab(page, out, "Operators")
    page.wait_for_function("""() => Bokeh.documents.some(d => {
        const s = d.get_model_by_name('op_table_src_ai_core'); if (!s) return false;
        const t = Array.from(s.data.get ? s.data.get('op_type') : s.data.op_type);
        return t.length > 0 && t.every(x => x === 'MatMul'); })""")
    page.wait_for_function("""() => Bokeh.documents.some(d => { const f = d.get_model_by_name('op_type_filter_ai_core');
        return f && f.value === 'MatMul'; })""")
    out.locator("canvas:visible").first.wait_for()
    save_screenshot(out, "suggestions_operators_matmul")

    out.locator(".lm-TabBar-tab", has_text="Overview").first.click()
    _wait_tab(page, out, "Overview")
    out.locator("button.nbprofiler-open-step_trace-dominant-fp_and_bp", has_text="Timeline").click()
    _wait_tab(page, out, "Timeline")
    page.wait_for_function("""([t0, t1]) => Bokeh.documents.some(d => {
        const r = d.get_model_by_name('timeline_x_range');
        return r && Math.abs(r.start - t0) < 1 && Math.abs(r.end - t1) < 1; })""", arg=[t0, t1])
    save_screenshot(out, "suggestions_timeline_step_window")
    assert not page.page_errors, page.page_errors


def test_report_evidence_buttons_work_offline(browser, tmp_path):
    """The offline report (no kernel): a suggestion's button opens the MindData tab with the cited queue
    selected, by CustomJS alone."""
    import warnings

    import nbprofiler
    from helpers import open_offline
    from nbprofiler.faces.report import write_html_report
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = write_html_report(nbprofiler.load(BOTTLENECK), tmp_path / "md_report.html")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        assert open_offline(page, path) == []
        page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && "
                               "Bokeh.documents[0].get_model_by_name('report_tabs') !== null")
        button = page.locator("button:visible", has_text="Show MindData: GeneratorOp_2").first
        button.wait_for()
        button.click()
        page.wait_for_function("""() => { const d = Bokeh.documents[0]; const t = d.get_model_by_name('report_tabs');
            return t.tabs[t.active].title === 'MindData'; }""")
        page.wait_for_function(f"() => ({_QUEUE_JS})().some(q => q === 2)")
        # the queue's series follows the selection (the page's own CustomJS)
        page.wait_for_function("""() => Bokeh.documents[0].get_model_by_name('minddata_queue_fig').title.text
            .startsWith('Queue_2')""")
        page.locator("canvas:visible").first.wait_for()
        save_screenshot(page, "suggestions_report_queue2", full_page=True)
        # the MindData page's own suggestions: their buttons select the queue in the graph below them
        page.locator("button:visible", has_text="Show MindData: MapOp_1").last.click()
        page.wait_for_function(f"() => ({_QUEUE_JS})().some(q => q === 1)")
        page.wait_for_function("""() => Bokeh.documents[0].get_model_by_name('minddata_queue_fig').title.text
            .startsWith('Queue_1')""")
        assert not errors, errors
    finally:
        page.close()
