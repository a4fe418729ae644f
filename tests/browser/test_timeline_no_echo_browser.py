"""A re-query's bars reach the page once and stay there: the page does not send the kernel's own changes
back (jupyter_bokeh's view passes on every change of its document, a kernel patch's included: each
re-query's bars went back to the kernel gzipped and base64-encoded, ~0.2 s of the page's time for 10,000
bars). The kernel records every message the page sends the timeline's widget; the page zooms past what it
holds (the kernel re-queries and sends new bars), then moves the axis once more, a change the kernel must
get; when that has come, nothing of the bars' source may have come before it. Each move came as one
message (``ask.tags``: start, end, n, the plot's width, need), none as the axis's start and end."""
from __future__ import annotations

import json

from helpers import REPO, open_and_run_all, save_screenshot, wait_bokeh_filled, wait_stable, write_notebook

DATA = (REPO.parent / "shared" / "data").resolve()

_DOC = "Bokeh.documents.find(d => d.get_model_by_name('timeline_src'))"
_TAGS_JS = f"() => Array.from({_DOC}.get_model_by_name('timeline_src').tags)"
_SET_JS = f"([t0, t1]) => {_DOC}.get_model_by_name('timeline_x_range').setv({{start: t0, end: t1}})"


def _log(path) -> list[list]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_the_page_does_not_send_a_requerys_bars_back(lab, page):
    log = lab.root / "from_page.jsonl"
    write_notebook(lab.root / "no_echo.ipynb", [
        "import json, warnings; warnings.simplefilter('ignore')\nimport nbprofiler\n"
        "from nbprofiler.views.timeline import TimelineView\n"
        f"view = TimelineView(nbprofiler.load({str(DATA / 'mindspore2' / 'lenet_pynative')!r}))\n"
        "names = {view.source.id: 'timeline_src', view.x_range.id: 'timeline_x_range', view.ask.id: 'timeline_ask'}\n"
        "def record(widget, content, buffers):\n"
        f"    with open({str(log)!r}, 'a') as f:\n"
        "        f.write(json.dumps([names.get((content.get('model') or {}).get('id'), ''), content.get('attr'),\n"
        "                            content.get('new') if content.get('attr') in ('start', 'end', 'tags')\n"
        "                            else None]) + '\\n')\n"
        "view._bokeh.on_msg(record)\n"
        "view"])
    open_and_run_all(page, lab, "no_echo.ipynb", 1)
    wait_bokeh_filled(page, "timeline_src", "left")
    h0, h1, _, _ = page.evaluate(_TAGS_JS)
    # a window of 2 % in the middle: far finer than the whole run the page holds, so the kernel re-queries
    mid, span = (h0 + h1) / 2, (h1 - h0) * 0.02
    page.evaluate(_SET_JS, [mid - span / 2, mid + span / 2])
    page.wait_for_function(f"(old) => ({_TAGS_JS})()[0] !== old", arg=h0, timeout=60_000)
    new_h0, new_h1, _, _ = page.evaluate(_TAGS_JS)
    assert new_h0 > h0 and new_h1 < h1   # the new bars are in: held around the 2 % window
    # one more move inside what the page holds: its start is the marker the kernel must receive
    marker = mid - span / 4
    page.evaluate(_SET_JS, [marker, marker + span / 2])

    def moved(rows):
        return any(r[:2] == ["timeline_ask", "tags"] and r[2][:2] == [marker, marker + span / 2] for r in rows)
    got = wait_stable(page, lambda: (rows := _log(log)) and moved(rows) and rows, "the kernel's record of the move")
    assert [r for r in got if r[0] in ("timeline_src", "timeline_x_range")] == [], got
    asked = [r[2] for r in got if r[:2] == ["timeline_ask", "tags"]]
    # the question for the 2 % window (need 1), then the move inside it (need 0), each once
    assert [a[:2] + a[4:] for a in asked] == [[mid - span / 2, mid + span / 2, 1], [marker, marker + span / 2, 0]]
    save_screenshot(page, "timeline_no_echo")
    assert not page.page_errors, page.page_errors
