"""Timeline view: tracks, level-of-detail bars, search, flows, range statistics on real traces."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import nbprofiler
from nbprofiler.analysis import timeline as engine
from nbprofiler.views import timeline as T
from nbprofiler.views import timeline_bars as B
from nbprofiler.views.theme import op_type_color

from .conftest import DATA


@pytest.fixture(scope="module")
def widedeep():
    return nbprofiler.load(DATA / "legacy" / "run_1_widedeep")


@pytest.fixture(scope="module")
def torch_npu():
    return nbprofiler.load(DATA / "npu" / "trace_view_torch_npu")


@pytest.fixture(scope="module")
def pynative():
    return nbprofiler.load(DATA / "mindspore2" / "lenet_pynative")


def test_tracks_grouped_by_process_in_trace_order(torch_npu):
    tracks = T.track_table(torch_npu.timeline_tracks)
    labels = list(tracks["label"])
    assert labels[0].startswith("Python / ") and "Ascend Hardware / Stream 3" in labels
    processes = [lbl.split(" / ")[0] for lbl in labels]
    # each process's threads are contiguous (grouped), processes in their sort-index order
    assert processes == sorted(processes, key=lambda p: processes.index(p))
    assert processes.index("CANN") < processes.index("Ascend Hardware") < processes.index("Overlap Analysis")
    pinned = T.track_table(torch_npu.timeline_tracks, order=[7, 8])
    assert list(pinned["track"][:2]) == [7, 8] and sorted(pinned["track"]) == sorted(tracks["track"])


def test_widedeep_full_window_fits_and_keeps_every_event(widedeep):
    events = widedeep.timeline
    assert len(events) == 6359                                  # 2817 device ops + 3542 reduce events
    t0, t1 = float(events["start_us"].min()), float((events["start_us"] + events["dur_us"]).max())
    index = engine.build_index(events)
    lod = engine.lod_query(index, t0, t1, 1100, codes=True)
    assert len(lod) < len(events) and lod["count"].sum() == len(events)
    tracks = T.track_table(widedeep.timeline_tracks)
    data = T.bar_data(lod, tracks)
    assert len(data["left"]) == len(lod) <= T.MAX_GLYPHS
    # numbers only: what the page gets as binary arrays
    assert all(np.asarray(v).dtype.kind in "if" for v in data.values())
    table = T.bar_table(data, T.dictionary_of(index), tracks)
    texts = engine.decode(index, lod)
    assert table["op_type"].tolist() == texts["op_type"].tolist()
    assert table["name"].tolist() == texts["name"].tolist()
    single = np.flatnonzero(np.asarray(data["count"]) == 1)
    assert single.size
    i = int(single[0])
    assert table["color"][i] == op_type_color(table["op_type"][i])
    # merged bars wear their dominant type's colour, as opaque as the run is busy, never faint
    agg = np.flatnonzero(np.asarray(data["count"]) > 1)
    assert agg.size
    assert all(table["color"][int(j)] == op_type_color(table["op_type"][int(j)]) for j in agg)
    alpha = np.asarray(data["alpha"])[agg]
    busy_share = np.asarray(data["busy_us"])[agg] / np.asarray(data["dur_us"])[agg]
    assert alpha.min() >= B.AGGREGATE_MIN_ALPHA and alpha.max() <= 1.0
    assert np.allclose(alpha, np.clip(busy_share, B.AGGREGATE_MIN_ALPHA, 1.0))
    assert (busy_share < B.AGGREGATE_MIN_ALPHA).any()       # the floor is needed on this trace


def test_largest_op_types_of_a_view_get_distinct_colours(widedeep, monkeypatch):
    from nbprofiler.views import theme
    monkeypatch.setattr(theme, "_OP_TYPE_ASSIGNED", {})     # a fresh session's colours
    events = widedeep.timeline
    dictionary = T.dictionary_of(engine.build_index(events))
    top = events.groupby("op_type", observed=True)["dur_us"].sum().sort_values(ascending=False).index[:8]
    colours = {t: dictionary.colors[dictionary.types.index(t) + 1] for t in top}
    assert len(set(colours.values())) == 8
    assert min(theme.color_distance(a, b) for i, a in enumerate(colours.values())
               for b in list(colours.values())[i + 1:]) > 25


def test_zoomed_window_shows_individual_events(widedeep):
    events = widedeep.timeline.sort_values("start_us")
    first = events.iloc[0]
    t0, t1 = float(first["start_us"]), float(first["start_us"]) + 200.0
    lod = engine.lod_query(engine.build_index(events), t0, t1, 1100)
    inside = events[(events["start_us"] + events["dur_us"] >= t0) & (events["start_us"] <= t1)]
    assert (lod["count"] == 1).all() and len(lod) == len(inside)
    assert set(lod["name"]) == set(inside["name"].astype(str))


def test_search_regex_and_stats(widedeep):
    m = T.search_events(widedeep.timeline, r"^MatMul-op\d+$")
    assert m.attrs["total"] == int(widedeep.timeline["name"].astype(str).str.match(r"^MatMul-op\d+$").sum()) > 0
    assert m["start_us"].is_monotonic_increasing
    with pytest.raises(Exception):
        T.search_events(widedeep.timeline, "(")
    ev = widedeep.timeline
    view = T.TimelineView(widedeep, debounce_s=0)
    stats = view.select_range(float(ev["start_us"].min()), float((ev["start_us"] + ev["dur_us"]).max()))
    assert stats["count"].sum() == len(ev)
    assert stats["total_us"].sum() == pytest.approx(ev["dur_us"].sum())
    per_track = pd.Series(view.stats.source.data["percent"]).groupby(view.stats.source.data["track_label"]).sum()
    assert len(per_track) == ev["track"].nunique() and per_track.to_numpy() == pytest.approx(100.0)
    assert view.stats.visible
    # the device-op durations add up to the writer's timeline summary total (us)
    summary = widedeep.timeline_summary
    if summary:
        device = ev[ev["track"].isin(widedeep.timeline_tracks.query("pid != '10000' and pid != 10000")["track"])]
        assert device["dur_us"].sum() == pytest.approx(summary["total_time"], rel=1e-6)


def test_search_jumps_to_each_match_and_says_which(widedeep):
    """A search centres the view on the first match from the window's start, filled in red; ▸/◂ walk the
    matches (wrapping); the status names the match and its time from the start of the trace."""
    view = T.TimelineView(widedeep, debounce_s=0)
    assert not view.matches_table.visible and not view.stats.visible  # no empty tables under the plot
    matches = view.search(r"^MatMul-op\d+$")
    assert view.matches_table.visible and view.match_index == 0
    first = matches.iloc[0]
    mid = float(first["start_us"]) + float(first["dur_us"]) / 2
    assert (view.x_range.start + view.x_range.end) / 2 == pytest.approx(mid)
    assert view.x_range.start <= first["start_us"] and view.x_range.end >= first["start_us"] + first["dur_us"]
    current = view.layout.select_one({"name": "timeline_current_src"}).data
    assert current["left"] == [pytest.approx(first["start_us"])]
    total = matches.attrs["total"]
    assert f"match 1 of {total:,}: {first['name']} at " in html.unescape(view.status.value)
    assert view.next_match() == 1 and view.next_match() == 2 and view.next_match(-1) == 1
    second = matches.iloc[1]
    assert (view.x_range.start + view.x_range.end) / 2 == pytest.approx(
        float(second["start_us"]) + float(second["dur_us"]) / 2)
    view.match_index = len(matches) - 1
    assert view.next_match() == 0  # wraps around
    assert view.search("") is None and view.match_index is None and not view.matches_table.visible


def test_status_in_readable_units_and_legend_of_types_in_view(widedeep):
    view = T.TimelineView(widedeep, debounce_s=0)
    status = html.unescape(view.status.value)
    assert "0.000 s – 66.836 s from the start of the trace" in status  # the padded start is not negative
    view.set_window(490_044.3, 693_767.9)
    assert "490.044 ms – 693.768 ms from the start of the trace" in html.unescape(view.status.value)
    legend = view.legend.value
    bars = view.bars()
    shown = bars[(bars["start_us"] <= 693_767.9) & (bars["start_us"] + bars["dur_us"] >= 490_044.3)]
    drawn = set(shown["op_type"])
    named = set(re.findall(r"</span> ([^<]+)</span>", html.unescape(legend)))
    assert named and named <= drawn
    assert len(named) == min(len(drawn), T.LEGEND_TYPES)


def test_flows_of_torch_npu_trace(torch_npu):
    flows = torch_npu.timeline_flows
    assert len(flows) == 713
    tracks = T.track_table(torch_npu.timeline_tracks)
    data = T.flow_data(flows, tracks, -1e12, 1e12)
    assert len(data["x0"]) == min(len(flows.dropna(subset=["start_track", "end_track"])), T.MAX_FLOWS)
    assert "HostToDevice" in set(data["cat"])
    # each head points along its flow: down to a lower row, up to a higher one
    y0, y1, angle = map(np.asarray, (data["y0"], data["y1"], data["angle"]))
    assert (angle[y1 > y0] == np.pi).all() and (angle[y1 < y0] == 0).all() and (y1 > y0).any()


def _flows_by_brute_force(flows: pd.DataFrame, tracks: pd.DataFrame, t0: float, t1: float) -> pd.DataFrame:
    """What `flows_in_window` shows, the slow way: every flow between shown tracks with an end in
    [t0, t1], in start order (ties in frame order), the first MAX_FLOWS."""
    row = dict(zip(tracks["track"].astype(int), tracks["row"].astype(int)))
    shown = flows[flows["start_track"].isin(row.keys()) & flows["end_track"].isin(row.keys())]
    shown = shown.sort_values("start_us", kind="stable")
    hit = shown["start_us"].between(t0, t1) | shown["end_us"].between(t0, t1)
    return shown[hit].head(T.MAX_FLOWS)


@pytest.mark.parametrize("chunks", [1, 7])
def test_the_flows_of_a_window_are_the_brute_force_ones(torch_npu, chunks):
    """Flows out of start order, going back in time, one spanning the whole trace, more than a search
    block and than MAX_FLOWS in a window, and text held in several Arrow chunks (a frame from the cache):
    every window shows what a scan of every flow shows."""
    rng = np.random.default_rng(7)
    real = torch_npu.timeline_flows.dropna(subset=["start_track", "end_track"])
    n = 3 * T._FLOW_BLOCK
    start = rng.uniform(0, 1e6, n)
    end = start + np.where(rng.random(n) < 0.1, -rng.uniform(0, 50, n), rng.uniform(0, 200, n))
    end[5] = 2e6  # one long flow: every window looks back to it
    pick = rng.integers(0, len(real), n)
    text = {c: real[c].astype(str).to_numpy()[pick] + "-" + np.arange(n).astype(str) for c in ("cat", "name")}
    as_str = pd.Series([], dtype=str).dtype
    flows = pd.DataFrame({
        **{c: pd.Series(as_str.__from_arrow__(pa.chunked_array(np.array_split(text[c], chunks)))) for c in text},
        "start_track": real["start_track"].to_numpy()[pick], "start_us": start,
        "end_track": real["end_track"].to_numpy()[pick], "end_us": end})
    tracks = T.track_table(torch_npu.timeline_tracks)
    prepared = T.prepare_flows(flows, tracks)
    for t0, t1 in [(-1e9, 1e9), (0, 1e6), (5e5, 5e5 + 10), (5e5, 5.3e5), (9.9e5, 1.5e6), (1.9e6, 2.1e6),
                   (3e6, 4e6), (-10, 0)] + [tuple(sorted(rng.uniform(-1e3, 1.1e6, 2))) for _ in range(20)]:
        got, want = T.flows_in_window(prepared, t0, t1), _flows_by_brute_force(flows, tracks, t0, t1)
        assert len(got["x0"]) == len(want), (t0, t1)
        np.testing.assert_array_equal(got["x0"], want["start_us"].to_numpy())
        np.testing.assert_array_equal(got["x1"], want["end_us"].to_numpy())
        assert got["name"] == want["name"].tolist() and got["cat"] == want["cat"].tolist()


def test_view_requeries_on_zoom_and_links(torch_npu):
    view = T.TimelineView(torch_npu, debounce_s=0)
    full = len(view.source.data["left"])
    before = view.queries
    ev = torch_npu.timeline
    hw = ev[ev["track"] == 7].sort_values("start_us")
    t0 = float(hw["start_us"].iloc[10])
    view.set_window(t0, t0 + 100.0)
    assert view.queries == before + 1
    zoomed = view.source.data
    # the window and half its width on each side, at the window's detail
    assert T.NEIGHBOURS == 0.5 and view.held == (t0 - 50.0, t0 + 150.0, 100.0 / view.width)
    assert 0 < len(zoomed["left"]) < full and all(c == 1 for c in zoomed["count"])
    assert min(zoomed["right"]) >= t0 - 50.0 and max(zoomed["left"]) <= t0 + 150.0
    inside = (np.asarray(zoomed["right"]) >= t0) & (np.asarray(zoomed["left"]) <= t0 + 100.0)
    assert inside.any() and not inside.all()
    # a pan and a 2x zoom inside what the page holds are drawn by the page: no query
    view.x_range.update(start=t0 - 50.0, end=t0 + 50.0)
    view.x_range.update(end=t0 + 75.0, start=t0 + 25.0)  # (each attribute calls back: end first here)
    assert view.queries == before + 1 and view.covers(t0 + 25.0, t0 + 75.0)
    assert not view.covers(t0 + 40.0, t0 + 60.0)  # 5x: new detail is asked for
    view.set_window(t0, t0 + 100.0)
    before += 1
    # a change of the axis made in Python goes through `_on_range` (the page says its own moves in `ask.tags`)
    view.x_range.start = t0 - 1000.0
    assert view.queries == before + 2
    matches = view.search("HostToDevice|aclnnAdd|Add")
    assert matches is not None and len(view.matches_table.source.data["name"]) == len(matches)
    view.pin_tracks([7])
    assert view.fig.yaxis.major_label_overrides[0] == "Ascend Hardware / Stream 3"


def test_the_pages_question_is_answered_for_its_window_whole(torch_npu):
    """The page says each move of the axis as one change (``ask.tags`` = [start, end, n, the plot's width
    in px, need]; the axis is not synced from the page): the kernel's axis takes the window at once, a
    window the page cannot draw (need 1) is answered at once with the bars held around it merged at that
    width, and nothing of it is sent back; each is taken once (jupyter_bokeh calls back twice), a question
    like the last one asked again is answered again. A window the page can draw (need 0) is answered after
    the axis rests, with its flows and no re-query."""
    view = T.TimelineView(torch_npu)   # the default debounce: only the question can answer at once
    assert view.x_range.syncable is False
    sent = []
    view._bokeh._send_patch = lambda events: sent.extend(events)
    ev = torch_npu.timeline
    hw = ev[ev["track"] == 7].sort_values("start_us")
    t0 = float(hw["start_us"].iloc[10])
    before = view.queries
    view.ask.tags = [t0, t0 + 100.0, 1, 800, 1]
    assert view.queries == before + 1 and (view.x_range.start, view.x_range.end) == (t0, t0 + 100.0)
    assert not any(getattr(e, "model", None) is view.x_range for e in sent)   # the page's own move
    assert any(getattr(e, "model", None) is view.source for e in sent)        # the answer
    assert view._pending is None                 # answered: nothing waits for the axis to rest
    assert view.plot_px == 800 and view.held == (t0 - 50.0, t0 + 150.0, 100.0 / 800)
    assert list(view.source.tags) == [t0 - 50.0, t0 + 150.0, 100.0 / 800, 800]   # what the page checks against
    left, right = np.asarray(view.source.data["left"]), np.asarray(view.source.data["right"])
    want = hw[(hw["start_us"] + hw["dur_us"] >= t0 - 50.0) & (hw["start_us"] <= t0 + 150.0)]
    assert len(want) and set(want["start_us"].round(3)) <= set(np.round(left, 3))
    assert right.min() >= t0 - 50.0 and left.max() <= t0 + 150.0
    shown = int(((left <= t0 + 100.0) & (right >= t0)).sum())
    assert f" as {shown:,} bars;" in view.status.value   # the status speaks of the window asked for
    assert view.covers(t0 + 25.0, t0 + 75.0) and not view.covers(t0 + 40.0, t0 + 60.0)
    view._on_ask("tags", [], [t0, t0 + 100.0, 1, 800, 1])   # the same question again (jupyter_bokeh's second call)
    assert view.queries == before + 1
    # a move the page draws itself: the axis follows, its flows go once it rests, no re-query
    flows = view._sources["timeline_flows_src"].data
    view.ask.tags = [t0 + 25.0, t0 + 75.0, 2, 800, 0]
    assert (view.x_range.start, view.x_range.end) == (t0 + 25.0, t0 + 75.0) and view._pending is not None
    view._pending.cancel()
    view.refresh()
    assert view.queries == before + 1 and view._sources["timeline_flows_src"].data is not flows
    assert view._shown == (t0 + 25.0, t0 + 75.0)
    view.ask.tags = [t0, t0 + 100.0, 3, 5000, 1]   # wider than the plot can be: its widest
    assert view.queries == before + 2 and view.plot_px == view.width
    view.ask.tags = [t0, t0, 4, 800, 1]   # an empty window: nothing to ask for
    assert view.queries == before + 2 and view.x_range.start == t0 and view.x_range.end == t0 + 100.0


_ASK_SCRIPT = """
const calls = [];
const model = (props) => Object.assign({setv(p) { Object.assign(this, p); }}, props);
const busy = model({text: '', visible: false});
const ask_src = model({tags: []});
const doc = {__nbprofilerPatched: undefined};
const src = model({tags: %(held)s});
const xr = model({start: 0, end: 0, document: doc});
const fig = {inner_width: 800};
const zoom = %(zoom)s;
const ask_cb = new Function('busy', 'ask_src', 'src', 'xr', 'fig', 'zoom', %(ask)s);
const answered_cb = new Function('busy', 'ask_src', 'src', 'xr', 'fig', 'zoom', %(answered)s);
const move = (start, end) => {   // as BokehJS moves a range: start set, its callback, end set, its callback
  xr.start = start; ask_cb(busy, ask_src, src, xr, fig, zoom);
  xr.end = end; ask_cb(busy, ask_src, src, xr, fig, zoom);
};
const state = (what) => calls.push([what, Array.from(ask_src.tags), busy.text, busy.visible]);
const tick = () => new Promise(r => setTimeout(r, 0));
(async () => {
  move(1100, 1400); await tick(); state('inside what is held');
  move(1100, 1200); await tick(); state('zoomed 3x past it');
  move(1200, 1300); await tick(); state('moved while asked');
  src.tags = [1050, 1250, 0.125, 800];   // the answer to 1100-1200: held 1050-1250 at 0.125 us a px
  answered_cb(busy, ask_src, src, xr, fig, zoom); await tick(); await tick(); state('answered');
  src.tags = [1150, 1350, 0.125, 800];   // the answer to 1200-1300
  answered_cb(busy, ask_src, src, xr, fig, zoom); await tick(); await tick(); state('answered again');
  move(1160, 1170); await tick(); state('zoomed past it again');
  move(1200, 1300); await tick(); state('moved back inside while asked');
  src.tags = [1155, 1175, 0.0125, 800];   // the answer to 1160-1170
  answered_cb(busy, ask_src, src, xr, fig, zoom); await tick(); await tick(); state('answered late');
  doc.__nbprofilerPatched = new Set(['x:start']);
  move(5000, 6000); await tick(); state('moved by the kernel');
  console.log(JSON.stringify(calls));
})();
"""


def test_the_page_says_each_move_once_and_asks_one_question_at_a_time():
    """The page's side (`_ASK_JS`, `_ANSWERED_JS`) run in node: each move is said once it is whole (BokehJS
    calls back for the start before it has set the end), with the plot's width: one inside what the page
    holds with need 0, one past it with need 1 and the busy label shown; a move past it while a question is
    on its way is said only when the answer comes, and only if the answer does not cover it; a move inside
    what is held is said at once even then; a move the kernel's own patch makes says nothing."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node")
    script = _ASK_SCRIPT % {"held": json.dumps([1000.0, 1600.0, 0.5, 800]), "zoom": T.HELD_ZOOM,
                            "ask": json.dumps(T._ASK_JS), "answered": json.dumps(T._ANSWERED_JS)}
    out = subprocess.run([node], input=script, capture_output=True, text=True, timeout=60, check=True).stdout
    calls = json.loads(out)
    assert calls == [
        ["inside what is held", [1100, 1400, 1, 800, 0], "", False],
        ["zoomed 3x past it", [1100, 1200, 2, 800, 1], "loading detail…", True],
        ["moved while asked", [1100, 1200, 2, 800, 1], "loading detail…", True],
        # 1200-1300 is not inside the 1050-1250 the answer holds: asked for when the answer came
        ["answered", [1200, 1300, 3, 800, 1], "loading detail…", True],
        ["answered again", [1200, 1300, 3, 800, 1], "", False],
        ["zoomed past it again", [1160, 1170, 4, 800, 1], "loading detail…", True],
        ["moved back inside while asked", [1200, 1300, 5, 800, 0], "", False],
        ["answered late", [1200, 1300, 5, 800, 0], "", False],
        ["moved by the kernel", [1200, 1300, 5, 800, 0], "", False],
    ]


def test_details_and_hover_never_render_html(pynative):
    view = T.TimelineView(pynative, debounce_s=0)
    details = view.layout.select_one({"name": "timeline_details"})
    assert details.render_as_text is True
    from bokeh.models import HoverTool
    for hover in view.fig.select(HoverTool):
        assert all("{safe}" not in field for _, field in hover.tooltips)
    assert len(view.source.data["left"]) <= T.MAX_GLYPHS


_HOVER_SCRIPT = """
let decoded = 0;   // JSON.parse or String.split calls: the names' text decoded
const parse = JSON.parse, split = String.prototype.split;
JSON.parse = function (text) { decoded += 1; return parse(text); };
String.prototype.split = function (...a) { decoded += 1; return split.apply(this, a); };
const args = %(args)s;
const src = (data) => ({data: new Map(Object.entries(data))});
const names = src(args.names);
const types = src({type: args.types}), labels = src({label: args.labels});
const hover = new Function('names', 'value', 'format', 'special_vars', %(name_js)s);
const out = {hover: args.codes.map((c) => hover(names, c, null, {}))};
out.decoded = decoded;
const bars = src(args.bars);
const details = {text: ''};
const click = new Function('src', 'details', 'names', 'types', 'labels', %(details_js)s);
out.details = [];
for (const i of [0, 1]) {
  bars.selected = {indices: [i]};
  click(bars, details, names, types, labels);
  out.details.push(details.text);
}
out.decoded_after_clicks = decoded;
const sep = names.data.get('sep')[0];   // a new text: decoded again
names.data.set('text', [sep === '' ? JSON.stringify(['other']) : 'other' + sep + 'x']);
out.after_new_text = hover(names, 0, null, {});
out.decoded_at_end = decoded;
process.stdout.write(JSON.stringify(out));
"""


@pytest.mark.parametrize("extra", ["", "\x00", "\x00\x1f", "\x00\x1f\x1e"])
def test_hover_and_click_read_the_names_from_one_text_split_once(pynative, extra):
    """``timeline_names_src`` carries the names as one text: the hover (`_NAME_JS`) and the click's details
    (`_DETAILS_JS`), run in node on the sources a view of lenet_pynative sends, give each bar's own name as
    text (markup, quotes and non-ASCII kept as they are; a name holding a separator: the next one, or JSON
    when it holds them all), "<n> events" for a merged bar, and split the text once however many bars are
    hovered or clicked."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node")
    view = T.TimelineView(pynative, debounce_s=0)
    hover = next(t for t in view.fig.tools if isinstance(t, T.HoverTool))
    names_src = hover.formatters["@name_code"].args["names"]
    assert names_src.name == "timeline_names_src" and sorted(names_src.data) == ["sep", "text"]
    assert names_src.data["text"][0].split(names_src.data["sep"][0]) == view.dictionary.names
    # names as a trace may hold them: markup, quotes, backslashes, non-ASCII, control characters
    names = [*view.dictionary.names, "<b>x</b> & \"q\" \\ \u00b5s \u7b97\u5b50" + extra]
    text, sep = T.names_text(names)
    assert sep == {"": "\x00", "\x00": "\x1f", "\x00\x1f": "\x1e", "\x00\x1f\x1e": ""}[extra]
    d = view.source.data
    one = int(np.flatnonzero(np.asarray(d["count"]) == 1)[0])
    codes = [int(d["name_code"][one]), len(names) - 1, -37, -1]
    bars = {"name_code": [int(d["name_code"][one]), -5], "type_code": [int(d["type_code"][one]), -1],
            "y": [int(d["y"][one]), 0], "left": [1.5, 2.0], "dur_us": [2.25, 3.0], "count": [1, 5]}
    args = {"names": {"text": [text], "sep": [sep]}, "types": ["", *view.dictionary.types],
            "labels": [str(x) for x in view.tracks["label"]], "codes": codes, "bars": bars}
    script = _HOVER_SCRIPT % {"args": json.dumps(args), "name_js": json.dumps(T._NAME_JS),
                              "details_js": json.dumps(T._DETAILS_JS)}
    out = json.loads(subprocess.run([node], input=script, capture_output=True, text=True, timeout=60,
                                    check=True).stdout)
    first = view.dictionary.names[codes[0]]
    assert out["hover"] == [first, names[-1], "37 events (zoom in)", ""]
    assert out["decoded"] == 1 and out["decoded_after_clicks"] == 1
    label = str(view.tracks["label"].iloc[int(d["y"][one])])
    assert out["details"][0] == (f"{first}\ntype: {view.dictionary.type(int(d['type_code'][one]))}    track: "
                                 f"{label}\nstart: 1.500 us    duration: 2.250 us")
    assert out["details"][1].startswith("5 events\ntype:     track: ")
    assert out["details"][1].endswith("events merged: 5")
    assert out["after_new_text"] == "other" and out["decoded_at_end"] == 2


def test_pin_dropdown_puts_tracks_first_in_the_order_chosen(widedeep):
    view = T.TimelineView(widedeep, debounce_s=0)
    labels = dict(zip(view.tracks["track"], view.tracks["label"]))
    last, other = int(view.tracks["track"].iloc[-1]), int(view.tracks["track"].iloc[-2])
    view.pin_box.value = last
    view.pin_box.value = other
    assert view.pinned == [last, other] and view.pin_box.value == T._NO_PIN
    assert view.fig.yaxis.major_label_overrides[0] == labels[last]
    assert view.fig.yaxis.major_label_overrides[1] == labels[other]
    view.unpin_button.click()
    assert view.pinned == []


def test_counters_are_drawn_under_the_timeline_one_series_at_a_time():
    """npu/ascend_pt_text_2rank holds 5,952 counter samples (HBM, LLC, memory, QoS ...): they are drawn
    under the timeline on its time axis, the select lists every series, and the first is the one shown."""
    prof = nbprofiler.load(DATA / "npu" / "ascend_pt_text_2rank")
    prof = prof[prof.ranks[0]]
    view = T.TimelineView(prof, debounce_s=0)
    panel = view.layout.select_one({"name": "timeline_counters_panel"})
    fig = panel.select_one({"name": "timeline_counters"})
    assert fig.x_range is view.x_range  # zooming the timeline zooms the counters
    select = panel.select_one({"name": "timeline_counter_select"})
    c = prof.timeline_counters
    assert len(select.options) == c.groupby(["name", "series"]).ngroups
    assert fig.renderers[0].view.filter.group == 0 and select.value == select.options[0] == fig.title.text
    # no series has 4 samples a column: all 5,952 go to a standalone page, the chosen series' to the view
    standalone = T.counter_figure(T.prepare_counters(c), view.x_range)
    standalone = standalone.select_one({"name": "timeline_counters_src"}).data
    assert len(standalone["value"]) == len(c)
    src = panel.select_one({"name": "timeline_counters_src"}).data
    assert set(src["series"]) == {0} and len(src["value"]) == (standalone["series"] == 0).sum()
    assert T.prepare_counters(nbprofiler.load(DATA / "legacy" / "run_1_widedeep").timeline_counters) is None
    assert T.counter_figure(None, view.x_range) is None


def test_a_zoom_draws_the_counters_a_line_that_wide_draws():
    """On a real trace's counters cut in a few columns: per series, the samples of a window are the one
    it opens on, the one after it, and per column the first, lowest, highest and last of all samples in
    it; a zoom of the view sends the new window's, of the series chosen, and choosing another sends its."""
    prof = nbprofiler.load(DATA / "npu" / "ascend_pt_text_2rank")
    prof = prof[prof.ranks[0]]
    prepared = T.prepare_counters(prof.timeline_counters)
    x, v, bounds = prepared["start_us"], prepared["value"], prepared["bounds"]
    lo, hi = float(x.min()), float(x.max())
    for t0, t1, columns in [(lo, hi, 20), (lo + (hi - lo) * 0.3, lo + (hi - lo) * 0.6, 7), (lo - 5, hi + 5, 1000)]:
        got = T.counter_window(prepared, t0, t1, columns)
        for code in range(len(prepared["labels"])):
            xs, vs = x[bounds[code]:bounds[code + 1]], v[bounds[code]:bounds[code + 1]]
            first = max(int(np.searchsorted(xs, t0, side="right")) - 1, 0)
            last = min(int(np.searchsorted(xs, t1, side="right")), len(xs) - 1)
            xs, vs = xs[first:last + 1], vs[first:last + 1]
            mine = got["series"] == code
            kept = pd.DataFrame({"x": got["start_us"][mine], "v": got["value"][mine]})
            if len(xs) <= 4 * columns:
                assert kept["x"].tolist() == xs.tolist()
                continue
            assert len(kept) <= 4 * (columns + 2) and kept["x"].is_monotonic_increasing
            col = np.clip(np.floor((xs - t0) * columns / (t1 - t0)), -1, columns)
            everything = pd.DataFrame({"x": xs, "v": vs, "col": col})
            kept["col"] = np.clip(np.floor((kept["x"] - t0) * columns / (t1 - t0)), -1, columns)
            want = everything.groupby("col")["v"].agg(["first", "last", "min", "max"])
            have = kept.groupby("col")["v"].agg(["first", "last", "min", "max"])
            pd.testing.assert_frame_equal(have, want)
    view = T.TimelineView(prof, debounce_s=0, width=30 * T.COUNTER_COLUMN_PX)
    src = view.layout.select_one({"name": "timeline_counters_src"})
    t0, t1 = lo + (hi - lo) * 0.3, lo + (hi - lo) * 0.6
    view.set_window(t0, t1)
    every = T.counter_window(prepared, t0, t1, 30)
    np.testing.assert_array_equal(src.data["start_us"], every["start_us"][every["series"] == 0])
    view.layout.select_one({"name": "timeline_counter_select"}).value = prepared["labels"][2]  # another series
    np.testing.assert_array_equal(src.data["value"], every["value"][every["series"] == 2])
    assert set(src.data["series"]) == {2}


def test_bars_ship_without_args_and_a_click_fetches_the_events(torch_npu):
    """A re-query sends no args (the longest strings of a trace); a click on one event puts its args,
    from the frame, into the details below the plot."""
    view = T.TimelineView(torch_npu, debounce_s=0)
    ev = torch_npu.timeline
    hw = ev[ev["track"] == 7].sort_values("start_us")
    t0 = float(hw["start_us"].iloc[10])
    view.set_window(t0, t0 + 100.0)
    d = view.source.data
    assert "args" not in d and len(d["row"]) == len(d["left"])
    i = next(k for k, (c, r) in enumerate(zip(d["count"], d["row"])) if c == 1 and r >= 0
             and isinstance(ev["args"].iloc[r], str) and ev["args"].iloc[r])
    view.source.selected.indices = [i]
    details = view.plot.select_one({"name": "timeline_details"})
    args = json.loads(ev["args"].iloc[int(d["row"][i])])
    key = next(iter(args))
    assert details.render_as_text and view.bars()["name"][i] in details.text and f'"{key}"' in details.text


def test_colours_go_to_the_op_types_with_the_most_busy_time(monkeypatch):
    """`dictionary_of` sums each op type's busy time a block at a time (events without a type apart): the
    colours are ranked as one np.bincount of every event ranks the types."""
    import nbprofiler.views.timeline_bars as TB
    monkeypatch.setattr(TB, "BLOCK_ROWS", 7)
    rng = np.random.default_rng(3)
    n = 1_000
    types = pd.Categorical(rng.choice(["A", "B", "C", None], n), categories=["A", "B", "C"])
    events = pd.DataFrame({"track": np.zeros(n, np.int32), "name": pd.Categorical(["x"] * n), "op_type": types,
                           "start_us": np.arange(n, dtype=float), "dur_us": rng.uniform(0, 3, n)})
    index = engine.build_index(events, levels=False)
    dictionary = TB.dictionary_of(index)
    busy = np.bincount(index.type_codes.astype(np.int64) + 1, weights=index.dur, minlength=4)
    by_busy = np.argsort(-busy[1:], kind="stable")
    ranked = TB.theme.op_type_colors([dictionary.types[k] for k in by_busy])
    assert [dictionary.colors[k + 1] for k in by_busy] == ranked and dictionary.colors[0] == TB.theme.AXIS
    assert (index.type_codes == -1).any()


def test_track_ids_as_integers_or_floats_find_the_same_rows():
    """`rows_of` reads integer ids as they are and float ids (NaN: none) as before: an id off the table,
    negative, missing or not a shown track has row -1."""
    tracks = B.track_table(pd.DataFrame({"track": [4, 1, 7], "process": ["b", "a", "c"]}))
    row_of = B.row_lookup(tracks)
    ids = np.array([1, 4, 7, 0, 2, 8, 9, 1_000, -1, -5], np.int32)
    want = np.array([0, 1, 2, -1, -1, -1, -1, -1, -1, -1], np.int32)
    for a in (ids, ids.astype(np.int64), ids.astype(float)):
        got = B.rows_of(row_of, a)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(B.rows_of(row_of, np.array([np.nan, 4.0])), [-1, 1])


def test_time_axis_ticks_read_in_one_unit_from_the_largest_tick():
    """The time axis's tick formatter (`theme._TIME_US_TICKS_JS`), run in node as BokehJS runs it (a function
    of tick, index, ticks, bound to one object per formatting of the axis): every tick of one formatting in
    the unit of the largest (s, ms or us), grouped by thousands, trailing zeros dropped."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node")
    from nbprofiler.views import theme
    cases = [[0, 500_000, 1_000_000, 1_500_000], [1_000, 2_500, 4_000], [0, 250, 812.5],
             [-2_000_000, 0, 1_234_567_000], [0.1234, 0.5]]
    script = (f"const f = new Function('tick', 'index', 'ticks', {json.dumps(theme._TIME_US_TICKS_JS)});"
              f"for (const ticks of {json.dumps(cases)}) {{ const self = {{}};"
              "console.log(JSON.stringify(ticks.map((t, i) => f.call(self, t, i, ticks)))); }")
    out = subprocess.run([node], input=script, capture_output=True, text=True, timeout=60, check=True).stdout
    assert [json.loads(line) for line in out.splitlines()] == [
        ["0 s", "0.5 s", "1 s", "1.5 s"], ["1 ms", "2.5 ms", "4 ms"], ["0 us", "250 us", "812.5 us"],
        ["-2 s", "0 s", "1,234.567 s"], ["0.123 us", "0.5 us"]]
