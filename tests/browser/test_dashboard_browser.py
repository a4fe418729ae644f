"""The dashboard in a real JupyterLab: %load_ext + %nbprofiler on shared data, step selector, click an
operator type, zoom the timeline with the mouse wheel, then every tab in the dark theme; state checked in
BokehJS and the DOM, screenshots saved for review (test-output/screenshots/dashboard_*.png)."""
from __future__ import annotations

import time

from helpers import (REPO, bokeh_data, count_canvases, open_and_run_all, save_screenshot, set_theme, wait_painted,
                     wait_stable, write_notebook)

WIDEDEEP = (REPO.parent / "shared" / "data" / "legacy" / "run_1_widedeep").resolve()
MAX_GLYPHS = 20_000     # nbprofiler.views.timeline.MAX_GLYPHS

# Shadow roots included: Bokeh 3 renders every view into an open shadow root.
_DEEP_JS = """
const deep = (sel) => { const out = []; const walk = r => { r.querySelectorAll('*').forEach(e => {
    if (e.matches(sel)) out.push(e); if (e.shadowRoot) walk(e.shadowRoot); }); }; walk(document); return out; };
"""
# Colours of the visible Bokeh DataTable rows / header cells and Bokeh inputs (boxes with a size only).
_WIDGET_COLOURS_JS = "(sel) => {" + _DEEP_JS + """
  return deep(sel).filter(e => { const b = e.getBoundingClientRect(); return b.width > 0 && b.height > 0; })
    .map(e => { const s = getComputedStyle(e); return [s.backgroundColor, s.color]; }); }"""


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


def _rgb(css: str) -> tuple[int, int, int]:
    """(r, g, b) of a computed CSS colour ``rgb(...)`` / ``rgba(...)``."""
    return tuple(int(float(v)) for v in css[css.index("(") + 1:css.index(")")].split(",")[:3])


def _luminance(css: str) -> float:
    r, g, b = _rgb(css)
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def _timeline_plot(page, out):
    """The main timeline canvas (the tallest visible one in the dashboard's output)."""
    def pick():
        boxes = [(c, c.bounding_box()) for c in out.locator("canvas").all()]
        boxes = [(c, b) for c, b in boxes if b and b["height"] > 150]
        return max(boxes, key=lambda cb: cb[1]["height"]) if boxes else None
    return _poll(pick, what="timeline canvas")


def test_dashboard_step_operator_timeline(lab, page):
    write_notebook(lab.root / "dashboard.ipynb", ["%load_ext nbprofiler", f"%nbprofiler {str(WIDEDEEP)!r} --as wd"])
    cells = open_and_run_all(page, lab, "dashboard.ipynb", 2)
    out = cells.nth(1)
    tabs = out.locator(".widget-tab").first
    tabs.wait_for()
    # The step-trace view is built once the overview is shown (`Dashboard.prepare`), so its canvases exist
    # even while the overview is shown.
    out.locator(".lm-TabBar-tab", has_text="Step trace").first.click()
    out.locator("canvas").first.wait_for(state="visible")
    wait_painted(page)
    shown = count_canvases(page)
    assert shown >= 2   # the selection's chart and the stages per step; the trends are folded below
    assert set(bokeh_data(page, "step_trace_selected_src", "sel")[0]) == {0}
    save_screenshot(out, "dashboard_step_trace_average")
    # the fold of the per-stage trends: built and drawn when opened
    out.get_by_text("Each stage across steps").first.click()
    _poll(lambda: bokeh_data(page, "step_trace_trend_src", "step"), what="the trends' source")
    _poll(lambda: count_canvases(page) > shown or None, what="the trends' charts")
    wait_painted(page)
    save_screenshot(out, "dashboard_step_trace_trends")

    out.locator(".widget-dropdown select").first.select_option(label="Step 5")
    _poll(lambda: any(c and set(c) == {5} for c in bokeh_data(page, "step_trace_selected_src", "sel")),
          what="step 5 in step_trace_selected_src")
    totals = bokeh_data(page, "step_trace_selected_src", "dur_ms")[0]
    assert abs(totals[0] - 205.8227) < 0.5  # step 5's total, about the 205 ms average
    wait_painted(page)
    save_screenshot(out, "dashboard_step_trace_step5")

    # --- Operators: one step note (the view's own), pie legend with swatches, click filters the table
    out.locator(".lm-TabBar-tab", has_text="Operators").first.click()
    _poll(lambda: bokeh_data(page, "op_table_src_ai_core", "op_type"), what="operator table")
    all_types = bokeh_data(page, "op_table_src_ai_core", "op_type")[0]
    assert len(set(all_types)) > 5
    notes = [t for t in out.locator(".widget-html").all_inner_texts() if "Step 5" in t]
    assert len(notes) == 1 and "no step ids" in notes[0], notes
    # Canvases of hidden tabs have no box; the first visible one is the pie (the toggle is HTML).
    box = _poll(lambda: next((b for c in out.locator("canvas").all() if (b := c.bounding_box())
                              and b["height"] > 200), None), what="pie canvas")
    wait_painted(page)
    pie_png = save_screenshot(out, "dashboard_operators_pie")
    _assert_legend_swatches(pie_png, out, box)
    # MatMul holds 81 % of AI Core time: its wedge runs clockwise from 12 o'clock past 9 o'clock, so a
    # point left of the pie's centre (300 px frame below a ~25 px title) lies on it.
    page.mouse.click(box["x"] + 80, box["y"] + 185)
    _poll(lambda: any(c and set(c) == {"MatMul"} for c in bokeh_data(page, "op_table_src_ai_core", "op_type")),
          what="table filtered to MatMul")
    page.mouse.move(box["x"] + box["width"] + 200, box["y"] - 40)     # no tooltip over the legend
    wait_painted(page)
    _assert_legend_swatches(save_screenshot(out, "dashboard_operators_matmul"), out, box)  # kept after a click

    # --- Timeline: fits the cell, zooms with a real mouse wheel, the kernel re-queries the bars
    out.locator(".lm-TabBar-tab", has_text="Timeline").first.click()
    before = _poll(lambda: _x_range(page), what="timeline x range")[0]
    wait_painted(page)
    b = wait_stable(page, lambda: _timeline_plot(page, out)[1], what="timeline canvas box")
    cell = out.locator(".jp-OutputArea").first.bounding_box()
    assert b["x"] >= cell["x"] - 1 and b["x"] + b["width"] <= cell["x"] + cell["width"] + 1, (b, cell)
    active = page.evaluate("""() => Bokeh.documents.flatMap(d => { const f = d.get_model_by_name('timeline_fig');
        const s = f && f.toolbar.active_scroll; return s ? [s.type + ':' + s.dimensions] : []; })""")
    assert active == ["WheelZoomTool:width"], active
    bars_before = bokeh_data(page, "timeline_src", "left")[0]
    counts_before = bokeh_data(page, "timeline_src", "count")[0]
    assert max(counts_before) > 1          # the whole run: merged bars
    page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2)
    for _ in range(5):
        page.mouse.wheel(0, -300)
    _poll(lambda: [r for r in _x_range(page) if (r[1] - r[0]) < (before[1] - before[0]) * 0.6],
          what="timeline zoomed in by the wheel")
    # the kernel re-queried the level of detail: the page holds new bars around the final window (held from
    # it, or from a window of the gesture it still covers at no more than twice coarser detail), all
    # touching the held range
    def requeried():
        left = bokeh_data(page, "timeline_src", "left")[0]
        right = bokeh_data(page, "timeline_src", "right")[0]
        h0, h1, px, width = page.evaluate("""() => Bokeh.documents.flatMap(d => {
            const s = d.get_model_by_name('timeline_src'); return s ? [s.tags] : []; })[0]""")
        t0, t1 = _x_range(page)[0]
        return (left != bars_before and left and h0 <= t0 and t1 <= h1 and (t1 - t0) / width * 2 >= px
                and all(r >= h0 - 1 and lo <= h1 + 1 for lo, r in zip(left, right)))
    _poll(requeried, what="timeline_src re-queried for the zoomed window")
    left = bokeh_data(page, "timeline_src", "left")[0]
    assert 0 < len(left) <= 3 * MAX_GLYPHS
    # the status names the window the kernel queried, in the unit of its end, from the start of the trace
    from nbprofiler.views.theme import format_time_us
    final = wait_stable(page, lambda: _x_range(page)[0], what="zoomed range")
    want = f"{format_time_us(max(final[0], 0.0), like=final[1])} – {format_time_us(final[1])}"
    out.locator(".widget-html", has_text=want).first.wait_for()
    page.wait_for_function("() => Bokeh.documents.every(d => { const b = d.get_model_by_name('timeline_busy');"
                           " return !b || b.text === ''; })")  # the re-query indicator is gone
    wait_painted(page)
    save_screenshot(out, "dashboard_timeline_zoomed")
    save_screenshot(page, "dashboard_page")

    # --- Dark theme: every tab readable (no white Bokeh tables/inputs, light text)
    set_theme(page, "JupyterLab Dark", light=False)
    try:
        for tab in ("Overview", "Step trace", "Operators", "MindData", "Timeline"):
            out.locator(".lm-TabBar-tab", has_text=tab).first.click()
            if tab == "MindData":  # it opens on the verdict and the pipeline graph (its tables are folded)
                page.wait_for_function("() => Bokeh.documents.some(d => d.get_model_by_name('minddata_graph'))")
            out.scroll_into_view_if_needed()
            wait_painted(page)
            save_screenshot(out, f"dashboard_dark_{tab.replace(' ', '_').lower()}")
            html_text = page.evaluate("""(el) => [...el.querySelectorAll('.widget-html-content')]
                .filter(e => e.offsetParent && e.innerText.trim()).map(e => getComputedStyle(e.firstElementChild
                || e).color)""", out.element_handle())
            assert all(_luminance(c) > 0.5 for c in html_text), (tab, html_text)
            assert html_text or tab in ("Step trace", "MindData"), tab   # those tabs have no HTML panel
            if tab == "Timeline":  # its tables show once they hold rows: search to fill the matches
                box = out.locator("input[placeholder^='regex']").first
                box.fill("MatMul")
                box.press("Enter")
                page.wait_for_function("() => Bokeh.documents.some(d => { const t = d.get_model_by_name("
                                       "'timeline_matches'); return t && t.visible; })")
                wait_painted(page)
            if tab in ("Operators", "Timeline"):
                # SlickGrid lays its rows out once its tab has a size: wait for them
                page.wait_for_function(f"(sel) => ({_WIDGET_COLOURS_JS})(sel).length > 0",
                                       arg=".slick-row, .slick-header-column")
                cells_ = page.evaluate(_WIDGET_COLOURS_JS, ".slick-row, .slick-header-column")
                assert cells_, tab
                assert all(_luminance(bg) < 0.35 for bg, _ in cells_), (tab, cells_[:4])
                assert all(_luminance(fg) > 0.5 for _, fg in cells_), (tab, cells_[:4])
            if tab == "Operators":
                inputs = page.evaluate(_WIDGET_COLOURS_JS, "input.bk-input, select.bk-input")
                assert inputs and all(_luminance(bg) < 0.35 and _luminance(fg) > 0.5 for bg, fg in inputs), inputs
    finally:  # the theme is a saved setting of the session's server: restore it for the other tests
        set_theme(page, "JupyterLab Light", light=True)
    assert not page.page_errors, page.page_errors


def _assert_legend_swatches(png, out, pie_box):
    """The pie legend (right of the 300 px pie frame) shows a coloured swatch per row: count strongly
    coloured pixels in the legend's swatch column of the screenshot."""
    from PIL import Image
    img = Image.open(png).convert("RGB")
    ob = out.bounding_box()
    x0 = int(pie_box["x"] - ob["x"]) + 300
    y0, y1 = int(pie_box["y"] - ob["y"]), int(pie_box["y"] - ob["y"] + pie_box["height"])
    rows = set()
    for y in range(max(y0, 0), min(y1, img.height)):
        for x in range(x0, min(x0 + 120, img.width)):
            r, g, b = img.getpixel((x, y))
            if max(r, g, b) - min(r, g, b) > 60:      # saturated: a swatch, not grey legend text
                rows.add(y // 12)
                break
    assert len(rows) >= 10, f"legend swatches on only {len(rows)} rows"
