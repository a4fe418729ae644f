"""The dashboard in a real JupyterLab: %load_ext + %nbprofiler on shared data, step selector, click an
operator type, zoom the timeline; state checked in BokehJS, screenshots saved for review."""
from __future__ import annotations

import time

from helpers import (REPO, bokeh_data, count_canvases, open_and_run_all, save_screenshot,
                     wait_bokeh_data, write_notebook)

WIDEDEEP = (REPO.parent / "shared" / "data" / "legacy" / "run_1_widedeep").resolve()


def _poll(fn, timeout_s=30.0, what=""):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = fn()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _x_range(page):
    return page.evaluate("""() => (window.Bokeh ? Bokeh.documents : []).flatMap(d => {
        const r = d.get_model_by_name('timeline_x_range'); return r ? [[r.start, r.end]] : []; })""")


def test_dashboard_step_operator_timeline(lab, page):
    write_notebook(lab.root / "dashboard.ipynb", ["%load_ext nbprofiler", f"%nbprofiler {str(WIDEDEEP)!r} --as wd"])
    cells = open_and_run_all(page, lab, "dashboard.ipynb", 2)
    out = cells.nth(1)
    tabs = out.locator(".widget-tab").first
    tabs.wait_for()
    # The step-trace tab is built at once, so its canvases exist even while the overview is shown.
    out.locator(".lm-TabBar-tab", has_text="Step trace").first.click()
    out.locator("canvas").first.wait_for(state="visible")
    page.wait_for_timeout(500)
    assert count_canvases(page) >= 3
    assert set(bokeh_data(page, "step_trace_selected_src", "sel")[0]) == {0}
    save_screenshot(out, "dashboard_step_trace_average")

    out.locator(".widget-dropdown select").first.select_option(label="Step 5")
    _poll(lambda: any(c and set(c) == {5} for c in bokeh_data(page, "step_trace_selected_src", "sel")),
          what="step 5 in step_trace_selected_src")
    totals = bokeh_data(page, "step_trace_selected_src", "dur_ms")[0]
    assert abs(totals[0] - 205.8227) < 0.5  # step 5's total, about the 205 ms average
    page.wait_for_timeout(400)
    save_screenshot(out, "dashboard_step_trace_step5")

    out.locator(".lm-TabBar-tab", has_text="Operators").first.click()
    _poll(lambda: bokeh_data(page, "op_table_src_ai_core", "op_type"), what="operator table")
    all_types = bokeh_data(page, "op_table_src_ai_core", "op_type")[0]
    assert len(set(all_types)) > 5
    # Canvases of hidden tabs have no box; the first visible one is the pie (the toggle is HTML).
    box = _poll(lambda: next((b for c in out.locator("canvas").all() if (b := c.bounding_box())
                              and b["height"] > 200), None), what="pie canvas")
    page.wait_for_timeout(500)
    # MatMul holds 81 % of AI Core time: its wedge runs clockwise from 12 o'clock past 9 o'clock, so a
    # point left of the pie's centre (300 px frame below a ~25 px title) lies on it.
    page.mouse.click(box["x"] + 80, box["y"] + 185)
    _poll(lambda: any(c and set(c) == {"MatMul"} for c in bokeh_data(page, "op_table_src_ai_core", "op_type")),
          what="table filtered to MatMul")
    page.wait_for_timeout(300)
    save_screenshot(out, "dashboard_operators_matmul")

    out.locator(".lm-TabBar-tab", has_text="Timeline").first.click()
    before = _poll(lambda: _x_range(page), what="timeline x range")[0]
    plot = _poll(lambda: [c for c in out.locator("canvas").all() if (c.bounding_box() or {}).get("height", 0) > 150],
                 what="timeline canvas")[-1]
    b = plot.bounding_box()
    page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2)
    for _ in range(5):
        page.mouse.wheel(0, -300)
        page.wait_for_timeout(100)
    after = _poll(lambda: [r for r in _x_range(page) if (r[1] - r[0]) < (before[1] - before[0]) * 0.95],
                  what="timeline zoomed in")[0]
    assert after[1] - after[0] < before[1] - before[0]
    page.wait_for_timeout(800)
    save_screenshot(out, "dashboard_timeline_zoomed")
    save_screenshot(page, "dashboard_page")
    assert not page.page_errors, page.page_errors
