"""LOD, search, range statistics and density against brute-force references, on real and generated
timelines."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import nbprofiler
from nbprofiler.analysis.timeline import build_index, density, lod_query, range_stats, search

from .conftest import DATA


def _frame(track, start, dur, types=None):
    n = len(start)
    types = types if types is not None else [f"T{i % 3}" for i in range(n)]
    df = pd.DataFrame({"track": np.asarray(track, dtype=np.int32), "name": pd.Categorical([f"ev{i}" for i in range(n)]),
                       "op_type": pd.Categorical(types), "start_us": np.asarray(start, float),
                       "dur_us": np.asarray(dur, float)})
    return df.sort_values(["track", "start_us"], kind="stable").reset_index(drop=True)


def _check_lod(events: pd.DataFrame, t0: float, t1: float, width: int, max_glyphs: int = 20_000):
    """Every event intersecting [t0, t1] is drawn or counted in exactly one bar; nothing else is."""
    idx = build_index(events)
    bars = lod_query(idx, t0, t1, width, max_glyphs=max_glyphs)
    start = events["start_us"].to_numpy()
    end = start + events["dur_us"].to_numpy()
    inside = (start <= t1) & (end >= t0)
    assert int(bars["count"].sum()) == int(inside.sum())
    singles = bars[bars["row"] >= 0]
    assert singles["row"].is_unique
    assert inside[singles["row"].to_numpy()].all()
    # each aggregate bar covers exactly the intersecting events of its track that lie within its extent
    # and are not drawn as singles
    drawn = np.zeros(len(events), dtype=bool)
    drawn[singles["row"].to_numpy()] = True
    for trk, grp in bars.groupby("track"):
        on_track = inside & (events["track"].to_numpy() == trk) & ~drawn
        agg = grp[grp["row"] < 0]
        covered = np.zeros(len(events), dtype=int)
        for s, e in zip(agg["start_us"], agg["end_us"]):
            covered += on_track & (start >= s) & (end <= e)
        assert (covered[on_track] == 1).all()
        assert int(agg["count"].sum()) == int(on_track.sum())
    assert len(bars) <= max_glyphs * 1.05 + len(bars["track"].unique())
    busy = events["dur_us"].to_numpy()[inside].sum()
    assert bars["busy_us"].sum() == pytest.approx(busy, rel=1e-9, abs=1e-6)
    return bars


@pytest.fixture(scope="module")
def widedeep():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbprofiler.load(DATA / "legacy" / "run_1_widedeep").timeline


@pytest.fixture(scope="module")
def torch_npu():
    return nbprofiler.load(DATA / "npu" / "trace_view_torch_npu").timeline


def test_lod_real_widedeep_full_and_zoomed(widedeep):
    end = float((widedeep.start_us + widedeep.dur_us).max())
    full = _check_lod(widedeep, 0.0, end, 800)
    assert len(full) < len(widedeep)  # 6359 events merge into fewer bars at 800 px
    assert (full["count"] > 1).any()
    zoom = _check_lod(widedeep, end * 0.4, end * 0.401, 1600)
    assert (zoom["count"] == 1).all()  # a 0.1% window of the run shows every event as itself


def test_lod_real_torch_npu_nested_events(torch_npu):
    # Python threads nest aten ops inside ProfilerStep#1 (14 ms): long events starting before t0
    t0, t1 = 5000.0, 5200.0
    bars = _check_lod(torch_npu, t0, t1, 1000)
    step = bars[bars["name"] == "ProfilerStep#1"]
    assert len(step) == 1 and step["start_us"].iloc[0] == 0.0


def test_lod_glyph_cap_and_empty_window(torch_npu):
    end = float((torch_npu.start_us + torch_npu.dur_us).max())
    capped = _check_lod(torch_npu, 0, end, 5000, max_glyphs=50)
    assert len(capped) <= 60
    empty = lod_query(build_index(torch_npu), end + 10, end + 20, 100)
    assert empty.empty and list(empty.columns)[:4] == ["track", "start_us", "end_us", "count"]


def test_lod_dominant_type_and_aggregate_name():
    ev = _frame([0] * 5, [0, 1, 2, 3, 100], [0.5, 0.5, 0.5, 0.2, 0.1], types=["A", "B", "B", "A", "C"])
    bars = lod_query(build_index(ev), 0, 200, 10)  # 20 us per pixel: the first four merge
    agg = bars.iloc[0]
    assert agg["count"] == 4 and agg["op_type"] == "B" and agg["name"] == "4 events"
    assert agg["busy_us"] == pytest.approx(1.7) and agg["end_us"] == pytest.approx(3.2)
    assert bars.iloc[1]["count"] == 1 and bars.iloc[1]["name"] == "ev4"


def test_long_events_beyond_the_index_reserve_are_found():
    # more long events than the per-track reserve: they must still be cut exactly
    rng = np.random.default_rng(5)
    start = np.sort(rng.uniform(0, 1e6, 3000))
    dur = np.where(np.arange(3000) % 7 == 0, rng.uniform(1e4, 5e5, 3000), rng.uniform(0, 10, 3000))
    ev = _frame(np.zeros(3000), start, dur)
    for t0 in (1e3, 4e5, 9.9e5):
        _check_lod(ev, t0, t0 + 500, 700)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 1000), st.one_of(st.floats(0, 5), st.floats(0, 600))),
                min_size=1, max_size=120),
       st.floats(-50, 1100), st.floats(0, 800), st.integers(1, 400))
def test_lod_matches_brute_force(evs, t0, span, width):
    track, start, dur = zip(*evs)
    ev = _frame(track, start, dur)
    _check_lod(ev, t0, t0 + span, width)


def test_search_regex_on_real_names(widedeep):
    hits = search(widedeep, r"^Adam-op1\d\d$")
    brute = widedeep[[bool(re.search(r"^Adam-op1\d\d$", n, re.I)) for n in widedeep["name"].astype(str)]]
    assert len(hits) == len(brute) > 0 and (hits.index == brute.index).all()
    assert len(search(widedeep, "matmul", column="op_type")) == int((widedeep["op_type"] == "MatMul").sum())


def test_range_stats_clips_to_window(widedeep):
    t0, t1 = 100_000.0, 400_000.0
    stats = range_stats(widedeep, t0, t1)
    s = widedeep["start_us"].to_numpy()
    e = s + widedeep["dur_us"].to_numpy()
    m = (s <= t1) & (e >= t0)
    assert stats["count"].sum() == m.sum()
    clipped = np.minimum(e, t1) - np.maximum(s, t0)
    assert stats["total_us"].sum() == pytest.approx(clipped[m].sum())
    assert stats["share_pct"].sum() == pytest.approx(100.0)
    mul = stats.set_index("op_type").loc["Mul"]
    sel = m & (widedeep["op_type"] == "Mul").to_numpy()
    assert mul["count"] == sel.sum() and mul["total_us"] == pytest.approx(clipped[sel].sum())
    # an event straddling t0 counts only its part inside
    one = _frame([0], [0.0], [10.0], types=["X"])
    assert range_stats(one, 4.0, 100.0)["total_us"].iloc[0] == pytest.approx(6.0)


def test_range_stats_per_track_keeps_mirrored_tracks_apart():
    """On npu/cann_prof_2dev every NOTIFY_WAIT task of a hardware stream is recorded again as Notify_Wait on
    an HCCL plane: all tracks together count 1,400 of each; per track, each stream's and each plane's
    own tasks, with shares of that track's busy time."""
    prof = nbprofiler.load(DATA / "npu/cann_prof_2dev")
    prof = prof[prof.ranks[0]]
    tl, tracks = prof.timeline, prof.timeline_tracks.set_index("track")
    whole = range_stats(tl, 0, 1e12).set_index("op_type")
    assert whole.at["NOTIFY_WAIT", "count"] == whole.at["Notify_Wait", "count"] == 1400
    per = range_stats(tl, 0, 1e12, by_track=True)
    assert list(per.columns) == ["track", "op_type", "count", "total_us", "share_pct", "avg_us"]
    assert per["track"].is_monotonic_increasing
    for track, group in per.groupby("track"):
        assert group["share_pct"].sum() == pytest.approx(100.0)
        on_track = tl[tl["track"] == track]
        assert group["count"].sum() == len(on_track)
    waits = per[per["op_type"].str.lower() == "notify_wait"]
    where = {tracks.at[t, "process"] for t in waits["track"]}
    assert where == {"Ascend Hardware", "HCCL"} and waits["count"].sum() == 2800
    stream13 = per[(per["track"] == tracks.index[tracks["thread"] == "Stream 13"][0])].set_index("op_type")
    assert stream13.at["NOTIFY_WAIT", "count"] == 380


def test_density_counts_every_event(widedeep):
    d = density(widedeep, bins=50)
    assert len(d) == 50 * widedeep["track"].nunique()
    assert d["count"].sum() == len(widedeep)
    per_track = d.groupby("track")["count"].sum()
    assert (per_track == widedeep.groupby("track").size()).all()


def test_minimap_density_from_the_index_is_a_histogram_of_the_starts(widedeep):
    """The minimap's counts come from searches of the index's sorted starts; they must be the histogram of
    the events' starts over the run (np.histogram's bins: half open, the last one closed)."""
    edges, counts = build_index(widedeep).density(50)
    start = widedeep["start_us"].to_numpy(float)
    assert edges[0] == start.min() and edges[-1] == (start + widedeep["dur_us"].to_numpy(float)).max()
    np.testing.assert_array_equal(counts, np.histogram(start, bins=edges)[0])
    assert counts.sum() == len(widedeep)


def test_benchmark_lod_quick_mode():
    """benchmarks/bench_lod.py --quick runs and stays within the glyph budget (timings are reported by
    the benchmark itself, not asserted here)."""
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(
        "bench_lod", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_lod.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.main(["--quick"])
    assert out["events"] == 500_000
    for key in ("window_1pct", "window_0.01pct", "full"):
        assert 0 < out[key]["max_glyphs"] <= 20_000


def _same_bars(events: pd.DataFrame, t0: float, t1: float, width: int, **kw):
    """The bars merged from a coarse level equal those merged from the events themselves."""
    idx = build_index(events)
    fast = lod_query(idx, t0, t1, width, **kw)
    slow = lod_query(idx, t0, t1, width, levels=False, **kw)
    key = ["track", "start_us", "end_us", "count", "name", "op_type", "row"]
    pd.testing.assert_frame_equal(fast[key].reset_index(drop=True), slow[key].reset_index(drop=True))
    assert fast["busy_us"].to_numpy() == pytest.approx(slow["busy_us"].to_numpy(), rel=1e-9, abs=1e-9)
    return idx, fast


def test_coarse_levels_give_the_bars_of_the_events(widedeep, monkeypatch):
    """Every track gets levels here (threshold 0): wide, edge-crossing and narrow windows of the real
    widedeep timeline, and windows that force the glyph cap to coarsen the pixel, equal the merge of the
    events themselves."""
    import nbprofiler.analysis.timeline as T
    monkeypatch.setattr(T, "LEVEL_MIN_EVENTS", 0)
    end = float((widedeep.start_us + widedeep.dur_us).max())
    idx, full = _same_bars(widedeep, 0.0, end, 800)
    assert idx.levels and (full["count"] > 1).any()
    for a, b, w in ((0.1, 0.9, 1600), (0.33, 0.41, 400), (0.5, 0.5004, 1600), (-0.1, 1.2, 50)):
        _same_bars(widedeep, end * a, end * b, w)
    _same_bars(widedeep, 0.0, end, 4000, max_glyphs=300)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 1000), st.one_of(st.floats(0, 5), st.floats(0, 600))),
                min_size=1, max_size=150),
       st.floats(-50, 1100), st.floats(0, 1200), st.integers(1, 400), st.sampled_from([(4, 64), (16,), (2, 8, 32)]))
def test_coarse_levels_match_the_events_on_any_timeline(evs, t0, span, width, bins):
    import nbprofiler.analysis.timeline as T
    track, start, dur = zip(*evs)
    ev = _frame(track, start, dur, types=[f"T{i % 3}" for i in range(len(evs))])
    old = (T.LEVEL_MIN_EVENTS, T.LEVEL_BINS)
    T.LEVEL_MIN_EVENTS, T.LEVEL_BINS = 0, bins
    try:
        _same_bars(ev, t0, t0 + span, width)
        _check_lod(ev, t0, t0 + span, width)
    finally:
        T.LEVEL_MIN_EVENTS, T.LEVEL_BINS = old


def _bars_of_events(events: pd.DataFrame, t0: float, t1: float, px: float) -> list[tuple]:
    """The bars of [t0, t1] at ``px`` us per pixel, from the events one by one: per track, the events that
    intersect the window, those at least a pixel long as they are, the others in start order joined while
    an event begins at most a pixel after every earlier one ended; a run's type is the one with the most
    summed duration (+1e-12 per event; ties: the first in sorted order). (track, start, end, count, type)."""
    out = []
    for trk, grp in events.groupby("track", sort=True):
        grp = grp.sort_values("start_us", kind="stable")
        start, dur = grp["start_us"].to_numpy(), grp["dur_us"].to_numpy()
        types = grp["op_type"].astype(str).to_numpy()
        bars = []
        run = None
        for s, d, ty in zip(start, dur, types):
            if not (s <= t1 and s + d >= t0):
                continue
            if d >= px:
                bars.append((s, s + d, 1, {ty: d}))
                continue
            if run is not None and s - run[1] <= px:
                run[1], run[2] = max(run[1], s + d), run[2] + 1
                run[3][ty] = run[3].get(ty, 0.0) + d + 1e-12
            else:
                run = [s, s + d, 1, {ty: d + 1e-12}]
                bars.append(run)
        for s, e, n, votes in bars:
            best = max(votes.values())
            out.append((int(trk), float(s), float(e), int(n), min(t for t, w in votes.items() if w == best)))
    return sorted(out, key=lambda b: (b[0], b[1]))


@pytest.mark.parametrize("cut_entries", [3, 10 ** 9])
def test_level_bars_are_those_of_their_events(monkeypatch, cut_entries):
    """A ladder of levels 2x apart over bursts of events at every time scale: windows whose edges cut runs
    that span many finer levels (cut through the finer levels' entries, or with ``cut_entries`` huge from
    the events themselves) give, bar by bar, the span, count and type of the events they stand for."""
    import nbprofiler.analysis.timeline as T
    monkeypatch.setattr(T, "LEVEL_MIN_EVENTS", 0)
    monkeypatch.setattr(T, "LEVEL_BINS", tuple(16 * 2 ** k for k in range(11)))
    monkeypatch.setattr(T, "CUT_ENTRIES", cut_entries)
    rng = np.random.default_rng(38)
    track, start, dur = [], [], []
    for trk in range(3):
        gaps = rng.choice([0.5, 3.0, 20.0, 150.0, 900.0], p=[0.6, 0.2, 0.1, 0.07, 0.03], size=3000)
        s = np.cumsum(gaps * rng.uniform(0.5, 1.5, 3000))
        d = np.where(rng.uniform(size=3000) < 0.03, rng.uniform(20, 400, 3000), rng.uniform(0, 1.5, 3000))
        track += [trk] * 3000
        start += list(s)
        dur += list(d)
    ev = _frame(track, start, dur, types=[f"T{k}" for k in rng.integers(0, 4, len(start))])
    idx = build_index(ev)
    end = float((ev["start_us"] + ev["dur_us"]).max())
    assert len(idx.levels) == 11
    for _ in range(12):
        width = float(end * rng.choice([0.03, 0.1, 0.3, 0.8]))
        t0 = float(rng.uniform(-0.05 * end, end - width))
        pixels = int(rng.integers(50, 300))
        px = width / pixels
        bars = lod_query(idx, t0, t0 + width, pixels, max_glyphs=10 ** 6)
        assert any(p <= px for p, _ in idx.levels)  # served by a level
        got = sorted(zip(bars["track"].astype(int), bars["start_us"], bars["end_us"], bars["count"].astype(int),
                         bars["op_type"]), key=lambda b: (b[0], b[1]))
        assert got == _bars_of_events(ev, t0, t0 + width, px)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 1000), st.one_of(st.floats(0, 5), st.floats(0, 600))),
                min_size=1, max_size=120),
       st.floats(-50, 1100), st.floats(0, 800), st.integers(1, 400))
def test_a_window_read_in_place_gives_the_bars_of_the_window_gathered(evs, t0, span, width):
    """A track whose window opens before its first event is merged from slices of the index's arrays
    (`TimelineIndex.cut`), a block of events at a time: the same bars, to the bit, as its events' positions
    from `TimelineIndex.window`, with runs inside a block and across blocks of a few events."""
    import nbprofiler.analysis.timeline as T
    track, start, dur = zip(*evs)
    idx = build_index(_frame(track, start, dur), levels=False)
    tracks = sorted(idx.tracks)
    px = span / width
    gathered = T._merge(idx, [], tracks, [idx.window(t, t0, t0 + span) for t in tracks], px, t0, t0 + span)
    block = T.BLOCK_ROWS
    try:
        for T.BLOCK_ROWS in (1, 3, 16, block):
            cut = T._merge(idx, [], tracks, [idx.cut(t, t0, t0 + span) for t in tracks], px, t0, t0 + span)
            for c in T.LOD_CODE_COLUMNS:
                assert cut[c].dtype == gathered[c].dtype
                np.testing.assert_array_equal(cut[c], gathered[c])
    finally:
        T.BLOCK_ROWS = block


def test_the_whole_run_is_merged_from_slices_with_the_bars_of_its_events(widedeep):
    """widedeep's whole run at 800 px: every track's window opens before its first event, so each is read in
    place (a slice), and the bars equal the merge of the gathered positions."""
    import nbprofiler.analysis.timeline as T
    idx = build_index(widedeep, levels=False)
    t0, t1 = idx.t_min - 1.0, idx.t_max + 1.0
    tracks = sorted(idx.tracks)
    assert all(isinstance(idx.cut(t, t0, t1), slice) for t in tracks)
    assert not isinstance(idx.cut(tracks[0], idx.t_max * 0.5, t1), slice)
    bars = T.lod_columns(idx, t0, t1, 800)
    gathered = T._merge(idx, [], tracks, [idx.window(t, t0, t1) for t in tracks], (t1 - t0) / 800, t0, t1)
    assert (bars["count"] > 1).any()
    for c in T.LOD_CODE_COLUMNS:
        np.testing.assert_array_equal(bars[c], gathered[c])


@pytest.mark.parametrize("n, kind", [(300, "uniform"), (40_000, "uniform"), (40_000, "ties"), (40_000, "equal"),
                                     (200_000, "heavy")])
def test_a_tracks_longest_events_are_its_longest(n, kind):
    """`_longest` (a threshold from every 64th duration, then a partition of those above it) gives k of the
    longest durations and the longest of the others, as a partition of every duration does, with many
    equal durations too."""
    import nbprofiler.analysis.timeline as T
    rng = np.random.default_rng(n)
    d = {"uniform": rng.uniform(0, 10, n), "ties": rng.integers(0, 5, n).astype(float),
         "equal": np.full(n, 2.5), "heavy": rng.pareto(1.5, n)}[kind]
    k = 256
    long, short_max = T._longest(d, k)
    assert long.dtype == np.int64 and len(long) == k and (np.diff(long) > 0).all()
    np.testing.assert_array_equal(np.sort(d[long]), np.sort(d)[-k:])
    assert short_max == np.sort(d)[-k - 1]
    assert (np.delete(d, long) <= short_max).all()


@pytest.mark.parametrize("pass_rows", [3, 1000])
def test_track_count_and_end_are_the_straightforward_ones(monkeypatch, pass_rows):
    """The summary's track count (read off where sorted ids change, else a bincount) and `events_end` (its
    NaN/inf replacement skipped where every duration is finite) against a bincount and np.nan_to_num, pass by
    pass, sorted ids or not, finite durations or not."""
    from nbprofiler.analysis import timeline as T
    from nbprofiler.analysis.summary import _track_count
    monkeypatch.setattr(T, "_PASS_ROWS", pass_rows)
    rng = np.random.default_rng(3)
    for _ in range(100):
        n = int(rng.integers(1, 40))
        track = rng.integers(0, 9, n).astype(np.int32)
        if rng.random() < 0.5:
            track = np.sort(track)
        assert _track_count(track) == (np.bincount(track) > 0).sum()
        start, dur = rng.uniform(0, 100, n), rng.exponential(5, n)
        if rng.random() < 0.5:
            dur[rng.random(n) < 0.2] = rng.choice([np.nan, np.inf, -np.inf])
        assert T.events_end(start, dur) == (start + np.nan_to_num(dur)).max()
