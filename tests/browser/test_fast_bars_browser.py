"""The page draws plain bars (no outline, hatch or rounded corners: the timeline's) as filled rectangles
instead of BokehJS's path per bar (`nbprofiler.views.bokehjs`, ``fastBars``): the same picture. A real
run's timeline, its whole run (merged bars of many alphas) and a zoomed window, is drawn both ways in one
page and the two screenshots compared pixel by pixel: they differ only where a bar's edge falls inside a
pixel, which a filled rectangle anti-aliases a few levels differently from a filled path."""
from __future__ import annotations

import io

import numpy as np

from bokeh.io import save
from bokeh.resources import INLINE
from helpers import REPO, open_offline, save_screenshot

import nbprofiler
from nbprofiler.views import bokehjs
from nbprofiler.views import timeline as T

DATA = (REPO.parent / "shared" / "data").resolve()

_SWAP_JS = """(plain) => { const proto = Bokeh.require('models/glyphs/lrtb').LRTBView.prototype;
  if (!proto.__nbprofilerFastBars) return 'not patched';
  if (!window.__fastPaint) window.__fastPaint = proto._paint;
  proto._paint = plain ? proto.__nbprofilerPlainPaint : window.__fastPaint;
  window.__painted = 0;
  const view = Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name('timeline_fig'));
  view.request_paint();
  return 'ok'; }"""
_PAINTED_JS = """() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"""
_SET_WINDOW_JS = """([t0, t1]) => Bokeh.documents[0].get_model_by_name('timeline_x_range').setv({start: t0, end: t1})"""


def _pixels(page, box, name):
    from PIL import Image
    page.evaluate(_PAINTED_JS)
    png = page.screenshot(clip=box)
    (REPO / "test-output" / "screenshots").mkdir(parents=True, exist_ok=True)
    (REPO / "test-output" / "screenshots" / f"{name}.png").write_bytes(png)
    return Image.open(io.BytesIO(png)).convert("RGB")


def test_fast_bars_draw_the_pixels_bokehjs_draws(page, tmp_path):
    from PIL import ImageChops
    view = T.TimelineView(nbprofiler.load(DATA / "legacy" / "run_1_widedeep"))
    path = tmp_path / "timeline.html"
    view.stats   # a table in the layout: the file then carries every bundle the loader looks for
    save(view.layout, path, resources=INLINE, title="timeline")
    assert open_offline(page, path) == []
    page.add_script_tag(content=bokehjs.loader_js())   # what `bokehjs.show` puts before a widget
    canvas = page.locator("canvas").first
    canvas.wait_for()
    box = page.evaluate("""() => { const v = Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name(
        'timeline_fig')); const r = v.canvas_view.el.getBoundingClientRect();
        return {x: r.x, y: r.y, width: r.width, height: r.height}; }""")
    drawn = 0
    for label, window in (("whole run", None), ("zoomed", (0.0, 3_000_000.0))):
        if window:
            page.evaluate(_SET_WINDOW_JS, list(window))
        assert page.evaluate(_SWAP_JS, True) == "ok"
        plain = _pixels(page, box, f"fast_bars_{label.replace(' ', '_')}_bokehjs")
        assert page.evaluate(_SWAP_JS, False) == "ok"
        fast = _pixels(page, box, f"fast_bars_{label.replace(' ', '_')}_fast")
        diff = np.asarray(ImageChops.difference(plain, fast)).max(axis=2)
        # edges only: a bar missing, moved or recoloured would differ by far more, over whole bars
        assert (diff > 8).mean() < 0.01 and (diff > 32).mean() < 1e-4, (label, (diff > 8).mean(), (diff > 32).sum())
        # the frame is not empty: the bars' colours are there
        drawn += len(np.unique(np.asarray(fast).reshape(-1, 3), axis=0))
    assert drawn > 20
    save_screenshot(page, "fast_bars_page")
