"""The timeline's bars carry codes; the page turns them into names, op types and track labels from the
dictionaries sent once. Hovering a bar shows the event's own texts, as text (a hostile name stays text)."""
from __future__ import annotations

import pandas as pd
from bokeh.io import save
from bokeh.resources import INLINE
from helpers import open_offline, save_screenshot

from nbprofiler.views import timeline as T

EVIL = "<img src=x onerror=window.pwned=1>"

_HOVER_AT_JS = """([t, row]) => { const d = Bokeh.documents[0]; const fig = d.get_model_by_name('timeline_fig');
  const view = Bokeh.index.find_one(fig); const c = view.canvas_view.el.getBoundingClientRect();
  return [c.x + view.frame.x_scale.compute(t), c.y + view.frame.y_scale.compute(row)]; }"""

_TOOLTIP_JS = """() => { const out = []; const walk = r => {
  r.querySelectorAll('.bk-tooltip-row-label, .bk-tooltip-row-value').forEach(e => out.push(e.textContent.trim()));
  r.querySelectorAll('*').forEach(e => { if (e.shadowRoot) walk(e.shadowRoot); }); };
  walk(document); return out; }"""


def test_hover_shows_the_events_texts_from_the_dictionaries_as_text(page, tmp_path):
    events = pd.DataFrame({"track": [0, 0, 1], "name": pd.Categorical([EVIL, "MatMul-op1", "AllReduce-op7"]),
                           "op_type": pd.Categorical([EVIL, "MatMul", "AllReduce"]),
                           "start_us": [0.0, 500.0, 100.0], "dur_us": [400.0, 100.0, 300.0]})
    tracks = pd.DataFrame({"track": [0, 1], "process": ["Ascend " + EVIL, "HCCL"], "thread": ["Stream 2", "Group 0"]})
    view = T.TimelineView({"timeline": events, "timeline_tracks": tracks, "timeline_flows": None})
    path = tmp_path / "timeline.html"
    save(view.plot, path, resources=INLINE, title="timeline")
    assert open_offline(page, path) == []
    for (t, row), want in (((550.0, 0), ["MatMul-op1", "MatMul", "Ascend " + EVIL + " / Stream 2"]),
                           ((250.0, 1), ["AllReduce-op7", "AllReduce", "HCCL / Group 0"]),
                           ((200.0, 0), [EVIL, EVIL, "Ascend " + EVIL + " / Stream 2"])):
        page.mouse.move(*page.evaluate(_HOVER_AT_JS, [t, row]))
        page.wait_for_function(f"() => ({_TOOLTIP_JS})().includes({want[0]!r})")
        rows = page.evaluate(_TOOLTIP_JS)
        shown = dict(zip(rows[::2], rows[1::2]))
        assert [shown["name:"], shown["type:"], shown["track:"]] == want, shown
    save_screenshot(page, "timeline_hover_hostile_name")
    assert page.evaluate("() => window.pwned") is None and not page.page_errors, page.page_errors
