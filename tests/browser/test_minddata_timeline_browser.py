"""MindDataView and TimelineView in a real JupyterLab: click a queue, zoom the timeline, look at it."""
from __future__ import annotations

import pytest
from helpers import (bokeh_data, cell_errors, count_canvases, open_and_run_all, save_screenshot,
                     wait_painted, write_notebook)

from conftest import REPO

DATA = REPO.parent / "shared" / "data"

_SET_X_RANGE_JS = """([t0, t1]) => {
  for (const doc of Bokeh.documents) {
    const r = doc.get_model_by_name('timeline_x_range');
    if (r) { r.setv({start: t0, end: t1}); return true; }
  }
  return false; }"""


_BUSY_TEXT_JS = """() => Bokeh.documents.flatMap(d => { const b = d.get_model_by_name('timeline_busy');
  return b ? [b.text] : []; })"""
# a number that changes whenever the page's bars are replaced (their first left edge and count)
_SOURCE_DATA_JS = """() => { for (const d of Bokeh.documents) { const s = d.get_model_by_name('timeline_src');
  if (s) { const l = s.data instanceof Map ? s.data.get('left') : s.data.left; return l.length * 1e9 + (l[0] || 0); } }
  return -1; }"""


def test_minddata_and_timeline_views(lab, page):
    nb = write_notebook(lab.root / "minddata_timeline.ipynb", [
        "import nbprofiler\n"
        "from bokeh.io import output_notebook\n"
        "from bokeh.resources import INLINE\n"
        "output_notebook(resources=INLINE, hide_banner=True)\n"
        "from nbprofiler.views.minddata import MindDataView\n"
        "from nbprofiler.views.timeline import TimelineView",
        f"md = MindDataView(nbprofiler.load({str(DATA / 'minddata' / 'md_bottleneck_map')!r}))\nmd",
        f"tl = TimelineView(nbprofiler.load({str(DATA / 'legacy' / 'run_1_widedeep')!r}))\ntl",
    ])
    cells = open_and_run_all(page, lab, nb.name, 3)
    assert cell_errors(page) == []
    md_cell, tl_cell = cells.nth(1), cells.nth(2)
    md_cell.locator("canvas").first.wait_for(state="visible")
    tl_cell.locator("canvas").first.wait_for(state="visible")
    wait_painted(page)
    assert count_canvases(page) >= 6
    # every plot stretches to its cell: none reaches past the output area's right edge
    for cell in (md_cell, tl_cell):
        area = cell.locator(".jp-OutputArea").first.bounding_box()
        for canvas in cell.locator("canvas").all():
            b = canvas.bounding_box()
            if b and b["width"] > 0:
                assert b["x"] + b["width"] <= area["x"] + area["width"] + 1, (b, area)

    # --- MindData: the flagged queue (Queue_1, MapOp_1's output) is shown first; select Queue_2
    sizes = bokeh_data(page, "minddata_queue_src", "size")
    assert len(sizes) == 1 and max(sizes[0]) <= 1          # Queue_1 is nearly always empty
    md_cell.scroll_into_view_if_needed()
    save_screenshot(md_cell, "minddata_view_initial")
    page.evaluate("""() => { for (const d of Bokeh.documents) {
        const s = d.get_model_by_name('minddata_edges_src');
        if (s) { const q = s.data instanceof Map ? s.data.get('queue') : s.data.queue;
                 s.selected.indices = [Array.from(q).indexOf('Queue_2')]; } } }""")
    page.wait_for_function("""() => Bokeh.documents.some(d => { const m = d.get_model_by_name('minddata_queue_src');
        return m && Math.max(...(m.data instanceof Map ? m.data.get('size') : m.data.size)) === 16; })""")
    sizes = bokeh_data(page, "minddata_queue_src", "size")[0]
    assert sum(sizes) / len(sizes) > 15                    # Queue_2 is full: 98 % usage
    info = bokeh_data(page, "minddata_queue_info_src", "value")[0]
    assert info[:3] == ["Queue_2", "GeneratorOp_2", "MapOp_1"]
    # ... and the table on screen shows it (a same-length data swap used to leave the old rows drawn)
    page.wait_for_function("""() => { const out = []; const walk = r => {
        r.querySelectorAll('table.nbp-queue-info td').forEach(e => out.push(e.textContent.trim()));
        r.querySelectorAll('*').forEach(e => { if (e.shadowRoot) walk(e.shadowRoot); }); }; walk(document);
        return out.includes('GeneratorOp_2') && out.includes('98.3471') && !out.includes('BatchOp_0'); }""",
                           timeout=10_000)
    wait_painted(page)
    png = save_screenshot(md_cell, "minddata_view_queue2_selected")
    # the now unselected Queue_1 label keeps full contrast (it used to fade to Bokeh's 0.2 alpha)
    assert _darkest_in_box(png, md_cell, page, "Queue_1\n") < 150

    # --- Timeline: zoom by setting the x range in BokehJS; the kernel re-queries the LOD
    before = bokeh_data(page, "timeline_src", "left")[0]
    counts = bokeh_data(page, "timeline_src", "count")[0]
    assert 0 < len(before) <= 20_000 and max(counts) > 1   # full view: aggregate bars
    tl_cell.scroll_into_view_if_needed()
    save_screenshot(tl_cell, "timeline_view_full")
    first = min(before)
    assert page.evaluate(_SET_X_RANGE_JS, [first, first + 400.0])
    page.wait_for_function("""(t1) => Bokeh.documents.some(d => { const m = d.get_model_by_name('timeline_src');
        const l = m && (m.data instanceof Map ? m.data.get('left') : m.data.left);
        return l && l.length > 0 && Math.max(...l) <= t1; })""",
                           arg=first + 600.0, timeout=20_000)  # the window and half its width after it
    after_left = bokeh_data(page, "timeline_src", "left")[0]
    after_count = bokeh_data(page, "timeline_src", "count")[0]
    assert after_left != before and len(after_left) <= 3 * 20_000
    assert max(after_count) == 1                           # zoomed in: single events only
    wait_painted(page)
    save_screenshot(tl_cell, "timeline_view_zoomed")

    # --- a pan inside what the page holds (the window and half its width each side) is the page's own: it
    # asks nothing (the busy note, set by the page on the axis change, stays empty) and keeps its bars;
    # a pan past it asks for new bars, which arrive and clear the note
    held_data = page.evaluate(_SOURCE_DATA_JS)
    assert page.evaluate(_SET_X_RANGE_JS, [first + 200.0, first + 600.0])
    assert page.evaluate(_BUSY_TEXT_JS) == [""] and page.evaluate(_SOURCE_DATA_JS) == held_data
    # every text the note takes is recorded: it shows while the kernel is asked and is cleared by the new
    # bars, which on a busy machine can come before a later look at it
    page.evaluate("""() => { window.__busy_seen = []; for (const d of Bokeh.documents) {
        const b = d.get_model_by_name('timeline_busy');
        if (b) b.connect(b.properties.text.change, () => window.__busy_seen.push(b.text)); } }""")
    assert page.evaluate(_SET_X_RANGE_JS, [first + 2_000.0, first + 2_400.0])
    page.wait_for_function("() => window.__busy_seen.includes('loading detail…')")
    page.wait_for_function(f"() => JSON.stringify(({_BUSY_TEXT_JS})()) === JSON.stringify(['']) && "
                           f"({_SOURCE_DATA_JS})() !== {held_data}", timeout=20_000)
    h0, h1 = page.evaluate("""() => Bokeh.documents.flatMap(d => {
        const s = d.get_model_by_name('timeline_src'); return s ? [s.tags] : []; })[0]""")[:2]
    assert (h0, h1) == pytest.approx((first + 1_800.0, first + 2_600.0))  # the window and half a width each side
    left, right = bokeh_data(page, "timeline_src", "left")[0], bokeh_data(page, "timeline_src", "right")[0]
    assert left and all(r >= h0 and lo <= h1 for lo, r in zip(left, right))



def _darkest_in_box(png, cell, page, text_prefix):
    """Darkest grey level (0..255) of the canvas pixels where the graph draws a label starting with
    ``text_prefix`` (its screen position from BokehJS: label x, y + offset below the queue box)."""
    from PIL import Image
    pos = page.evaluate("""(prefix) => { for (const d of Bokeh.documents) {
        const fig = d.get_model_by_name('minddata_graph'); if (!fig) continue;
        const view = Bokeh.index.find_one(fig);
        const s = d.get_model_by_name('minddata_edges_src');
        const col = c => Array.from(s.data instanceof Map ? s.data.get(c) : s.data[c]);
        const i = col('text').findIndex(t => t.startsWith(prefix));
        if (!view || i < 0) return null;
        const sx = view.frame.x_scale.compute(col('xm')[i]), sy = view.frame.y_scale.compute(col('label_y')[i]);
        const r = view.el.getBoundingClientRect();
        return [r.left + sx, r.top + sy]; } return null; }""", text_prefix)
    assert pos, f"no label {text_prefix!r} on the graph"
    img = Image.open(png).convert("L")
    cb = cell.bounding_box()
    x, y = int(pos[0] - cb["x"]), int(pos[1] - cb["y"])
    region = img.crop((x - 40, y + 2, x + 40, y + 16))
    return min(region.getdata())
