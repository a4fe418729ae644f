"""The dashboard's Memory, FLOPs and operators-per-step pages in a real JupyterLab: each renders, its main
interaction (a range dragged on the memory curve, a point clicked on the per-step chart) reaches the
kernel and moves the linked views (a step or a range chosen before the Timeline tab opens is the window
it opens on), and the numbers on screen are the frames'. Screenshots:
test-output/screenshots/dashboard_{memory,flops,op_steps}*.png."""
from __future__ import annotations

import pytest
from helpers import REPO, TIMELINE_X_RANGE_JS, bokeh_data, open_and_run_all, save_screenshot, write_notebook

import nbprofiler

DATA = (REPO.parent / "shared" / "data").resolve()

# The screen position of a named model's view and of data coordinates in it, via BokehJS's own scales.
_FIG_BOX_JS = """(name) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(name);
    if (!m) continue; const v = Bokeh.index.find_one(m); if (!v) continue;
    const c = v.canvas_view.el.getBoundingClientRect(); const f = v.frame;
    return {left: c.left + f.bbox.left, top: c.top + f.bbox.top, width: f.bbox.width, height: f.bbox.height}; }
  return null; }"""
_POINT_JS = """([fig, src, step, opType]) => { for (const d of Bokeh.documents) {
    const m = d.get_model_by_name(fig), s = d.get_model_by_name(src); if (!m || !s) continue;
    const v = Bokeh.index.find_one(m); if (!v) continue;
    const col = (k) => (s.data.get ? s.data.get(k) : s.data[k]);
    const steps = col('step'), types = col('op_type'), ms = col('time_ms');
    for (let i = 0; i < steps.length; i++) if (steps[i] === step && types[i] === opType) {
      const c = v.canvas_view.el.getBoundingClientRect();
      return [c.left + v.frame.x_scale.compute(steps[i]), c.top + v.frame.y_scale.compute(ms[i])]; } }
  return null; }"""

# Data x of a screen x on a named figure (its own scale, inverted).
_DATA_X_JS = """([name, px]) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(name);
    if (!m) continue; const v = Bokeh.index.find_one(m); if (!v) continue;
    const c = v.canvas_view.el.getBoundingClientRect(); return v.frame.x_scale.invert(px - c.left); }
  return null; }"""


def _tab(out, title):
    out.locator(".lm-TabBar-tab", has_text=title).first.click()


def _wait_model_shown(page, name):
    """Until the named model's view has a size on screen; returns its frame box."""
    page.wait_for_function(f"() => {{ const b = ({_FIG_BOX_JS})({name!r}); return b && b.width > 50; }}")
    return page.evaluate(_FIG_BOX_JS, name)


def test_memory_range_moves_the_timeline_and_the_figures_are_the_frames(lab, page):
    path = DATA / "mindspore2" / "lenet_pynative"
    write_notebook(lab.root / "memory.ipynb", ["%load_ext nbprofiler", f"%nbprofiler {str(path)!r} --as p"])
    out = open_and_run_all(page, lab, "memory.ipynb", 2).nth(1)
    out.locator(".widget-tab").first.wait_for()
    _tab(out, "Memory")
    box = _wait_model_shown(page, "memory_curve")
    prof = nbprofiler.load(path)
    from nbprofiler.analysis.memory import memory_peaks
    peak = float(memory_peaks(prof.memory)["peak_allocated_mb"].iloc[0])
    page.wait_for_function("(mb) => { const c = [].concat(...Bokeh.documents.map(d => { "
                           "const s = d.get_model_by_name('memory_peaks_src'); return s ? [s] : []; }));"
                           " return c.length && Math.abs(Math.max(...(c[0].data.get ? c[0].data.get('mb') "
                           ": c[0].data.mb)) - mb) < 1e-6; }", arg=peak)
    assert page.evaluate("() => Bokeh.documents.some(d => { const m = d.get_model_by_name('memory_figures');"
                         " return m && m.text.includes('Peak allocated'); })")
    save_screenshot(out, "dashboard_memory")
    # drag across the middle third of the curve: the box select is the chart's active drag
    y = box["top"] + box["height"] / 2
    x0, x1 = box["left"] + box["width"] / 3, box["left"] + 2 * box["width"] / 3
    want = (page.evaluate(_DATA_X_JS, ["memory_curve", x0]), page.evaluate(_DATA_X_JS, ["memory_curve", x1]))
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=5)
    page.mouse.move(x1, y, steps=5)
    page.mouse.up()
    _tab(out, "Timeline")
    page.wait_for_function(f"() => ({TIMELINE_X_RANGE_JS})().length > 0")
    total_us = float((prof.timeline["start_us"] + prof.timeline["dur_us"]).max())

    page.wait_for_function(f"(total) => {{ const r = ({TIMELINE_X_RANGE_JS})(); return r.length && "
                           "(r[0][1] - r[0][0]) < 0.6 * total; }", arg=total_us)
    start, end = page.evaluate(TIMELINE_X_RANGE_JS)[0]
    # the timeline shows the range dragged on the memory curve (both on the timeline's clock)
    assert (start, end) == pytest.approx(want, rel=0.02), (start, end, want)
    save_screenshot(out, "dashboard_memory_window_timeline")
    assert not page.page_errors, page.page_errors


def test_step_chosen_before_the_timeline_opens_is_the_window_it_shows(lab, page):
    """legacy/run_1_widedeep, Step 3 chosen on the step-trace tab, then the Timeline tab opened: its
    time axis is step 3's window (490.044-693.768 ms), not the whole 66 s run."""
    path = DATA / "legacy" / "run_1_widedeep"
    write_notebook(lab.root / "step3.ipynb", ["%load_ext nbprofiler", f"%nbprofiler {str(path)!r} --as wd"])
    out = open_and_run_all(page, lab, "step3.ipynb", 2).nth(1)
    out.locator(".widget-tab").first.wait_for()
    _tab(out, "Step trace")
    out.locator(".widget-dropdown select").first.select_option(label="Step 3")
    page.wait_for_function("() => Bokeh.documents.some(d => { const s = d.get_model_by_name("
                           "'step_trace_selected_src'); if (!s) return false;"
                           " const v = s.data.get ? s.data.get('sel') : s.data.sel;"
                           " return v.length && Array.from(v).every(x => x === 3); })")
    _tab(out, "Timeline")
    page.wait_for_function(f"() => {{ const r = ({TIMELINE_X_RANGE_JS})(); return r.length === 1 && "
                           "Math.abs(r[0][0] - 490044.3) < 1 && Math.abs(r[0][1] - 693767.9) < 1; }")
    _wait_model_shown(page, "timeline_fig")
    save_screenshot(page, "dashboard_step3_timeline")
    assert not page.page_errors, page.page_errors


def test_flops_page_and_operators_per_step_click_select_the_step(lab, page):
    path = DATA / "legacy" / "run_1_widedeep"
    write_notebook(lab.root / "pages.ipynb", ["%load_ext nbprofiler", f"%nbprofiler {str(path)!r} --as wd"])
    out = open_and_run_all(page, lab, "pages.ipynb", 2).nth(1)
    out.locator(".widget-tab").first.wait_for()
    prof = nbprofiler.load(path)

    _tab(out, "FLOPs")
    _wait_model_shown(page, "flops_icicle")
    page.wait_for_function("(n) => Bokeh.documents.some(d => { const s = d.get_model_by_name('flops_ops_src');"
                           " return s && (s.data.get ? s.data.get('op') : s.data.op).length === n; })",
                           arg=int(prof.flops["op_name"].nunique()))
    figures = page.evaluate("() => Bokeh.documents.flatMap(d => { const m = d.get_model_by_name('flops_figures');"
                            " return m ? [m.text] : []; })")[0]
    from nbprofiler.analysis.flops import summary_figures
    total = summary_figures(prof.flops_summary, prof.flops)["total_mflops"]
    assert f"{total:,.3f} MFLOPs" in figures
    save_screenshot(out, "dashboard_flops")

    _tab(out, "Operators")
    fold = out.locator(".jupyter-widget-Collapse-header, .widget-accordion .lm-AccordionPanel-title, "
                       ".jupyter-widget-Accordion .p-Collapse-header", has_text="Operators per step").first
    fold.click()
    _wait_model_shown(page, "op_steps_chart")
    out.locator(".jp-OutputArea").first.evaluate("e => e.scrollIntoView({block: 'end'})")
    page.evaluate("() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('op_steps_chart');"
                  " if (m) Bokeh.index.find_one(m).el.scrollIntoView({block: 'center'}); } }")
    _wait_model_shown(page, "op_steps_chart")
    xy = page.evaluate(_POINT_JS, ["op_steps_chart", "op_steps_points", 4, "UnsortedSegmentSum"])
    assert xy is not None
    page.mouse.click(*xy)
    # the click reaches the kernel: the step-trace view's selection becomes step 4
    page.wait_for_function("() => Bokeh.documents.some(d => { const s = d.get_model_by_name("
                           "'step_trace_selected_src'); if (!s) return false;"
                           " const v = s.data.get ? s.data.get('sel') : s.data.sel;"
                           " return v.length && Array.from(v).every(x => x === 4); })")
    page.get_by_text("Step 4: its longest operator executions").first.wait_for()
    ops = bokeh_data(page, "op_steps_ops", "step")[0]
    assert 4 in ops
    save_screenshot(page, "dashboard_op_steps_step4")
    assert not page.page_errors, page.page_errors

