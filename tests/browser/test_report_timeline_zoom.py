"""The offline report's timeline zooms without a kernel: with every network request blocked, setting the
time axis to the span of one op makes the page draw the stored tiles of that window, every bar in view a
single event, the op's among them, and the level note names the level shown; back to the whole run it
draws the whole-run level again."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from helpers import REPO, bokeh_data, open_offline, save_screenshot, wait_painted

import nbprofiler
from nbprofiler.faces.report import write_html_report

SAMPLE = REPO / "nbprofiler" / "samples" / "lenet_pynative"
_SET_RANGE_JS = """([a, b]) => { const r = Bokeh.documents[0].get_model_by_name('timeline_fig').x_range;
  r.setv({start: a, end: b}); }"""
_NOTE_JS = "() => Bokeh.documents[0].get_model_by_name('timeline_level_note').text"
_IN_VIEW_JS = """([a, b]) => { const s = Bokeh.documents[0].get_model_by_name('timeline_src');
  const col = (c) => Array.from(s.data.get ? s.data.get(c) : s.data[c]);
  const left = col('left'), right = col('right'), count = col('count'), out = [];
  for (let i = 0; i < left.length; i++) if (left[i] <= b && right[i] >= a) out.push([left[i], count[i]]);
  return out; }"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(SAMPLE)
        return prof, write_html_report(prof, tmp_path_factory.mktemp("zoom") / "lenet_pynative.html")


def test_report_timeline_zooms_to_single_ops_offline(report, browser):
    prof, path = report
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    assert open_offline(page, path) == []
    page.locator(".bk-tab", has_text="Timeline").first.click()
    page.wait_for_function("() => Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name('timeline_fig'))"
                           ".el.checkVisibility({visibilityProperty: true})")
    whole = sum(bokeh_data(page, "timeline_src", "count")[0])
    assert whole == len(prof.timeline)
    note0 = page.evaluate(_NOTE_JS)
    assert note0.startswith("Level 0 of ") and "zoom in for finer levels" in note0
    # the op of the longest track at its middle, with a little room each side
    tl = prof.timeline
    busiest = tl["track"].value_counts().index[0]
    ops = tl[(tl["track"] == busiest) & (tl["dur_us"] > 0)].sort_values("start_us")
    op = ops.iloc[len(ops) // 2]
    start, end = float(op["start_us"]), float(op["start_us"] + op["dur_us"])
    a, b = start + 0.05 * (end - start), end - 0.05 * (end - start)   # inside the op: only it on its track
    page.evaluate(_SET_RANGE_JS, [a, b])
    page.wait_for_function(f"() => ({_NOTE_JS})() !== {note0!r}")
    wait_painted(page)
    note = page.evaluate(_NOTE_JS)
    level = int(note.split()[1])
    assert level > 0 and note.startswith(f"Level {level} of ")
    shown = page.evaluate(_IN_VIEW_JS, [a, b])
    assert shown and all(count == 1 for _, count in shown), shown
    assert any(left == pytest.approx(start) for left, _ in shown)
    # every event of the profile that meets the view, and no more, is drawn once
    s, e = tl["start_us"].to_numpy(), (tl["start_us"] + tl["dur_us"].clip(lower=0)).to_numpy()
    assert len(shown) == int(np.sum((s <= b) & (e >= a)))
    page.locator(".bk-tab", has_text="Timeline").first.scroll_into_view_if_needed()
    shot = save_screenshot(page, "report_lenet_pynative_timeline_one_op", full_page=True)
    assert shot.stat().st_size > 0
    # back to the whole run: the whole-run level again
    page.evaluate(_SET_RANGE_JS, [float(tl["start_us"].min()), float(e.max())])
    page.wait_for_function(f"() => ({_NOTE_JS})().startsWith('Level 0 of ')")
    assert sum(bokeh_data(page, "timeline_src", "count")[0]) == len(prof.timeline)
    assert not errors, errors
    context.close()
