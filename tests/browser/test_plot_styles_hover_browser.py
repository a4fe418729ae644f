"""Two of the loader's changes to how BokehJS draws a moving plot (`nbprofiler.views.bokehjs`):

- ``sameCss``: a renderer rewrites its position's style sheet at every paint; a rewrite with the same text
  is skipped (each made the page's styles stale, and every text the plot then drew recomputed them). A zoom
  then writes no style sheet at all, where BokehJS's own code writes many; a plot whose size changes still
  gets its new sheets.
- ``hoverAtRest``: with the pointer resting on the plot, the tooltip follows the bar under it once the
  plot has stopped moving, not inside every frame of the move; a move of the pointer still shows the bar
  under it at once."""
from __future__ import annotations

import pandas as pd
from bokeh.io import save
from bokeh.resources import INLINE
from helpers import open_offline, save_screenshot

from nbprofiler.views import bokehjs
from nbprofiler.views import timeline as T

_DOC = "Bokeh.documents[0]"
_VIEW = f"Bokeh.index.find_one({_DOC}.get_model_by_name('timeline_fig'))"
_PAINTED_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"

# records each write of a style sheet inside a shadow root of the page (BokehJS's views live in them): its
# text before and after (setting a <style>'s text replaces its text node)
_WATCH_STYLES_JS = """() => { window.__styleWrites = []; const seen = new Set();
  const text = (nodes) => Array.from(nodes).map(n => n.textContent).join('');
  const watch = (root) => { if (seen.has(root)) return; seen.add(root);
    new MutationObserver(records => records.forEach(r => { if (r.target.nodeName === 'STYLE')
      window.__styleWrites.push([text(r.removedNodes), text(r.addedNodes)]); }))
      .observe(root, {subtree: true, childList: true});
    root.querySelectorAll('*').forEach(e => { if (e.shadowRoot) watch(e.shadowRoot); }); };
  document.querySelectorAll('*').forEach(e => { if (e.shadowRoot) watch(e.shadowRoot); });
  return seen.size; }"""
_WRITES_JS = "() => window.__styleWrites.splice(0)"
# BokehJS's own writes (plain = true) or the loader's (false)
_SWAP_WRITE_JS = """(plain) => { const proto = Bokeh.require('core/dom').InlineStyleSheet.prototype;
  if (!proto.__nbprofilerWrite) return 'not patched';
  if (!window.__sameCss) window.__sameCss = proto._update;
  proto._update = plain ? proto.__nbprofilerWrite : window.__sameCss;
  return 'ok'; }"""
_SET_WINDOW_JS = f"([t0, t1]) => {_DOC}.get_model_by_name('timeline_x_range').setv({{start: t0, end: t1}})"
_AT_JS = f"""([t, row]) => {{ const v = {_VIEW}; const c = v.canvas_view.el.getBoundingClientRect();
  return [c.x + v.frame.x_scale.compute(t), c.y + v.frame.y_scale.compute(row)]; }}"""
_TOOLTIP_JS = """() => { const out = []; const walk = r => {
  r.querySelectorAll('.bk-tooltip-row-label, .bk-tooltip-row-value').forEach(e => out.push(e.textContent.trim()));
  r.querySelectorAll('*').forEach(e => { if (e.shadowRoot) walk(e.shadowRoot); }); };
  walk(document); const shown = {}; for (let i = 0; i + 1 < out.length; i += 2) shown[out[i]] = out[i + 1];
  return shown['name:'] || null; }"""
_REST_JS = """(ms) => { Bokeh.require('models/tools/inspectors/hover_tool').HoverToolView.prototype
  .__nbprofilerHoverRest = ms; }"""


def _page_with_timeline(page, tmp_path):
    events = pd.DataFrame({"track": [0, 0, 0], "name": pd.Categorical(["first-op", "second-op", "third-op"]),
                           "op_type": pd.Categorical(["MatMul", "Add", "Cast"]),
                           "start_us": [0.0, 500.0, 1100.0], "dur_us": [400.0, 500.0, 400.0]})
    tracks = pd.DataFrame({"track": [0], "process": ["Ascend"], "thread": ["Stream 1"]})
    view = T.TimelineView({"timeline": events, "timeline_tracks": tracks, "timeline_flows": None})
    path = tmp_path / "timeline.html"
    view.stats   # a table in the layout: the file then carries every bundle the loader looks for
    save(view.layout, path, resources=INLINE, title="timeline")
    assert open_offline(page, path) == []
    page.add_script_tag(content=bokehjs.loader_js())   # what `bokehjs.show` puts before a widget
    page.locator("canvas").first.wait_for()
    page.evaluate(_PAINTED_JS)


def test_a_zoom_rewrites_only_the_style_sheets_it_changes(page, tmp_path):
    _page_with_timeline(page, tmp_path)
    assert page.evaluate(_WATCH_STYLES_JS) > 0
    writes = {}
    for label, plain, window in (("bokehjs", True, (100.0, 900.0)), ("loader", False, (200.0, 800.0))):
        assert page.evaluate(_SWAP_WRITE_JS, plain) == "ok"
        page.evaluate(_WRITES_JS)
        page.evaluate(_SET_WINDOW_JS, list(window))
        page.evaluate(_PAINTED_JS)
        writes[label] = page.evaluate(_WRITES_JS)
    same = {label: sum(before == after for before, after in w) for label, w in writes.items()}
    # BokehJS rewrote sheets with their own text; the loader wrote only those the zoom changed
    assert same["bokehjs"] > 5 and same["loader"] == 0, (same, {k: len(w) for k, w in writes.items()})
    assert len(writes["loader"]) < len(writes["bokehjs"])
    # a plot made narrower: its renderers' sheets get the new size, and the canvas follows
    page.evaluate(f"() => {{ {_DOC}.get_model_by_name('timeline_fig').setv({{sizing_mode: 'fixed', width: 500}}); }}")
    page.wait_for_function(f"() => Math.abs({_VIEW}.canvas_view.el.getBoundingClientRect().width - 500) < 2")
    assert any("500px" in after for _, after in page.evaluate(_WRITES_JS))
    save_screenshot(page, "plot_styles_resized")
    assert not page.page_errors, page.page_errors


def test_the_tooltip_follows_the_bar_under_a_resting_pointer_once_the_plot_rests(page, tmp_path):
    _page_with_timeline(page, tmp_path)
    page.evaluate(_REST_JS, 600_000)   # a rest longer than the test
    # a move of the pointer shows the bar under it at once, whatever the rest
    for t, name in ((1200.0, "third-op"), (200.0, "first-op")):
        page.mouse.move(*page.evaluate(_AT_JS, [t, 0]))
        page.wait_for_function(f"() => ({_TOOLTIP_JS})() === {name!r}")
    # the plot moves under the resting pointer so that the second op is under it: while the plot has not
    # rested, the tooltip is the one shown before the move
    lo, hi = page.evaluate(f"() => {{ const r = {_DOC}.get_model_by_name('timeline_x_range'); return [r.start, r.end]; }}")
    at = (200.0 - lo) / (hi - lo)          # the pointer's place on the axis, as a fraction of it
    width = (hi - lo) / 4
    page.evaluate(_SET_WINDOW_JS, [700.0 - at * width, 700.0 + (1 - at) * width])
    page.evaluate(_PAINTED_JS)
    page.evaluate(_PAINTED_JS)
    assert page.evaluate(_TOOLTIP_JS) == "first-op"
    # once it rests, the tooltip is the bar's now under the pointer
    page.evaluate(_REST_JS, 0)
    page.evaluate(f"() => {_VIEW}.request_paint()")
    page.wait_for_function(f"() => ({_TOOLTIP_JS})() === 'second-op'")
    save_screenshot(page, "tooltip_after_rest")
    assert not page.page_errors, page.page_errors
