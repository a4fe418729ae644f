"""The offline report's zoomable timeline (nbprofiler.views.timeline_tiles): every tile's bars stand for
exactly the events that meet its span, the page's walk picks tiles that cover the view at its pixel,
the file stays within its byte budget, and the level note says what is shown."""
from __future__ import annotations

import json

import numpy as np
import pytest

import nbprofiler.samples
from nbprofiler.analysis.timeline import build_index
from nbprofiler.faces.report import write_html_report
from nbprofiler.views.timeline import track_table
from nbprofiler.views.timeline_tiles import (TILE_BUDGET_BYTES, level_note, lod_tiles, select_tiles,
                                             stored_bytes, tile_store)

from tests.conftest import DATA, REPO, load_quietly

RUNS = {"widedeep": DATA / "legacy" / "run_1_widedeep", "lenet_pynative": nbprofiler.samples.path("lenet_pynative")}
WIDTH = 1600


@pytest.fixture(scope="module", params=list(RUNS))
def tiled(request):
    prof = load_quietly(RUNS[request.param])
    index = build_index(prof.timeline)
    tiles, bars = lod_tiles(index, index.t_min, index.t_max, WIDTH)
    return request.param, prof, index, tiles, bars


def _meeting(prof, t0, t1) -> int:
    s = prof.timeline["start_us"].to_numpy()
    e = s + np.maximum(np.nan_to_num(prof.timeline["dur_us"].to_numpy()), 0)
    return int(np.sum((s <= t1) & (e >= t0)))


def test_every_tile_stands_for_the_events_of_its_span(tiled):
    name, prof, index, tiles, bars = tiled
    assert tiles["level"].max() >= 5, name   # the zoom goes well past the whole run
    # within the budget every tile is split until its bars are single events
    assert (tiles.loc[tiles["child"] < 0, "hidden"] == 0).all(), name
    for (_, r), b in zip(tiles.iterrows(), bars):
        assert int(b["count"].sum()) == _meeting(prof, r["t0"], r["t1"]), (name, r["level"], r["tile"])
        assert r["hidden"] == int(b.loc[b["count"] > 1, "count"].sum())
    # a split tile's two children are next to each other and halve it
    for _, r in tiles[tiles["child"] >= 0].iterrows():
        a, b = tiles.iloc[int(r["child"])], tiles.iloc[int(r["child"]) + 1]
        assert a["level"] == b["level"] == r["level"] + 1
        assert (a["t0"], a["t1"], b["t1"]) == pytest.approx((r["t0"], (r["t0"] + r["t1"]) / 2, r["t1"]))
    # every complete level (each of its tiles stored) covers every event of the run
    for level, g in tiles.groupby("level"):
        if len(g) == 2 ** level:
            assert g["t0"].min() == index.t_min and g["t1"].max() == pytest.approx(index.t_max)
            covered = sum(int(bars[i]["count"].sum()) for i in g.index)
            assert covered >= len(prof.timeline), (name, level)


def test_the_walk_covers_the_view_at_its_pixel_and_reaches_single_ops(tiled):
    name, prof, index, tiles, bars = tiled
    _, tree = tile_store(tiles, bars, track_table(prof.timeline_tracks))
    assert select_tiles(tree, index.t_min, index.t_max, WIDTH) == [0]
    tl = prof.timeline
    op = tl[tl["dur_us"] > 0].sort_values("start_us").iloc[len(tl) // 3]
    a, b = float(op["start_us"]), float(op["start_us"] + op["dur_us"])
    shown = select_tiles(tree, a, b, WIDTH)
    # disjoint, in time order, together spanning the view
    spans = [(tree["t0"][i], tree["t1"][i]) for i in shown]
    assert all(x[1] <= y[0] + 1e-9 for x, y in zip(spans, spans[1:]))
    assert spans[0][0] <= a and spans[-1][1] >= b
    # where the finest tiles reach, each is at least as fine as the view's pixel; the bars in view are the
    # events meeting it, one bar each
    if all(tree["child"][i] >= 0 or tree["hidden"][i] == 0 for i in shown):
        view = [bars[i][(bars[i]["start_us"] <= b) & (bars[i]["end_us"] >= a)] for i in shown]
        single = {(int(t), float(s)) for v in view for t, s in zip(v["track"], v["start_us"])}
        assert all((v["count"] == 1).all() for v in view)
        assert len(single) == _meeting(prof, a, b)


def test_report_file_stays_within_its_budget(tiled, tmp_path):
    name, prof, index, tiles, bars = tiled
    stored = tiles.attrs["bytes"]
    assert sum(stored_bytes(b) for b in bars) < stored <= TILE_BUDGET_BYTES
    path = write_html_report(prof, tmp_path / f"{name}.html")
    size = path.stat().st_size
    assert size <= 8_000_000, size
    out = REPO / "test-output" / "report_tile_sizes.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    sizes = json.loads(out.read_text()) if out.exists() else {}
    sizes[name] = {"html_bytes": size, "tiles": len(tiles), "levels": int(tiles["level"].max()),
                   "tile_bars": int(sum(len(b) for b in bars)), "tile_bytes": round(stored)}
    out.write_text(json.dumps(sizes, indent=1))
    text = path.read_text()
    assert "timeline_tiles_src" in text and "timeline_level_note" in text


def test_a_small_budget_stops_early_and_the_note_says_so():
    prof = load_quietly(RUNS["lenet_pynative"])
    index = build_index(prof.timeline)
    budget = 400_000
    tiles, bars = lod_tiles(index, index.t_min, index.t_max, WIDTH, budget_bytes=budget)
    assert sum(stored_bytes(b) for b in bars) < tiles.attrs["bytes"] <= budget
    _, tree = tile_store(tiles, bars, track_table(prof.timeline_tracks))
    deepest = int(tiles["level"].max())
    assert level_note(tree, [0], index.t_min, index.t_max, WIDTH, len(bars[0])) == \
        f"Level 0 of {deepest}: {len(bars[0]):,} bars; zoom in for finer levels."
    # a leaf that still merges events: zoomed past it, the note says the bars stay as they are
    leaf = tiles[(tiles["child"] < 0) & (tiles["hidden"] > 0)].iloc[0]
    a = float(leaf["t0"]) + (leaf["t1"] - leaf["t0"]) * 0.4
    b = a + (leaf["t1"] - leaf["t0"]) * 0.01
    shown = select_tiles(tree, a, b, WIDTH)
    assert shown == [int(leaf.name)]
    assert level_note(tree, shown, a, b, WIDTH, 123) == (
        f"Level {int(leaf['level'])} of {deepest}: 123 bars; finest level stored: zoom further shows the same "
        f"bars ({int(leaf['hidden']):,} events stay merged; open the profile in a notebook for them).")


def test_the_page_gets_the_names_its_bars_use_and_they_decode_the_same(tiled):
    from nbprofiler.views.timeline import dictionary_of
    from nbprofiler.views.timeline_tiles import names_in_use
    name, prof, index, tiles, bars = tiled
    full = dictionary_of(index)
    kept, small = names_in_use(bars, full)
    assert len(small.names) <= len(full.names)
    for before, after in zip(bars, kept):
        single = (before["count"] == 1).to_numpy()
        assert ([full.names[c] for c in before["name_code"][single]]
                == [small.names[c] for c in after["name_code"][single]])
        assert (before["name_code"][~single] == after["name_code"][~single]).all()
        assert small.types == full.types and small.colors == full.colors
