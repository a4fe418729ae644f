"""MindDataView and TimelineView in a real JupyterLab: click a queue, zoom the timeline, look at it."""
from __future__ import annotations

from helpers import (bokeh_data, cell_errors, count_canvases, open_and_run_all, save_screenshot,
                     write_notebook)

from conftest import REPO

DATA = REPO.parent / "shared" / "data"

_SET_X_RANGE_JS = """([t0, t1]) => {
  for (const doc of Bokeh.documents) {
    const r = doc.get_model_by_name('timeline_x_range');
    if (r) { r.setv({start: t0, end: t1}); return true; }
  }
  return false; }"""


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
    page.wait_for_timeout(800)
    assert count_canvases(page) >= 6

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
    save_screenshot(md_cell, "minddata_view_queue2_selected")

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
                           arg=first + 400.0, timeout=20_000)
    after_left = bokeh_data(page, "timeline_src", "left")[0]
    after_count = bokeh_data(page, "timeline_src", "count")[0]
    assert after_left != before and len(after_left) <= 20_000
    assert max(after_count) == 1                           # zoomed in: single events only
    page.wait_for_timeout(500)
    save_screenshot(tl_cell, "timeline_view_zoomed")

