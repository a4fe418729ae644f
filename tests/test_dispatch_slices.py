"""Host dispatch (`nbprofiler.analysis.dispatch`) in slices: it walks the device's tasks, the host threads and
the flows ``chunk_rows`` at a time, so that its memory stays bounded on a timeline loaded on disk. Its frames
are the same whatever the slices, on real runs and on a synthetic trace forced on disk, where the device tasks,
the launches, the steps and the host-bound idle per step equal the numbers computed here from the file itself
(the json module, Decimal for its µs strings)."""
from __future__ import annotations

import json
import warnings
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

import nbprofiler
from nbprofiler import _memory
from nbprofiler.analysis import dispatch
from nbprofiler.analysis.dispatch import (NESTING_DEPTH, _Columns, _distinct, _HostThread, _innermost, _latency_stats,
                                           _Windows, host_dispatch)
from nbprofiler.analysis.op_steps import _place_in_steps
from nbprofiler.analysis.timeline import finite
from nbprofiler.io import cache
from nbprofiler.io.trace import disk as trace_disk
from nbprofiler.model.derive import profiler_step_windows
from nbprofiler.synthetic import write_trace

from .conftest import load_quietly
from .test_dispatch import _host_idle


def _frames(prof):
    return prof.timeline, prof.timeline_tracks, prof.timeline_flows, prof.step_windows


def _assert_same(a, b):
    assert a.why == b.why and json.dumps(a.to_dict()) == json.dumps(b.to_dict())
    for x, y in ((a.steps, b.steps), (a.ops, b.ops), (a.tasks, b.tasks)):
        pd.testing.assert_frame_equal(x, y, check_exact=True)


@pytest.mark.parametrize("run", ["npu/trace_view_torch_npu", "npu/ascend_pt_text_2rank/rank1_ascend_pt"])
def test_slices_of_any_size_give_the_same_frames_on_real_runs(run):
    frames = _frames(load_quietly(run))
    whole = host_dispatch(*frames)
    assert whole.available and whole.waited_tasks > 10 and len(whole.ops)   # waits to sum, ops to rank
    for rows in (1, 7, 50):
        _assert_same(host_dispatch(*frames, chunk_rows=rows), whole)


@pytest.fixture(scope="module")
def synthetic_on_disk(tmp_path_factory):
    """A small synthetic trace (`nbprofiler.synthetic`, 14 steps) loaded on disk, and the file's events."""
    root = tmp_path_factory.mktemp("dispatch_disk")
    path = root / "run" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    path.parent.mkdir(parents=True)
    write_trace(path, 2_500_000, seed=3)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(cache.ENV, str(root / "cache"))
        mp.setattr(cache, "MIN_BYTES", 0)
        mp.setenv(trace_disk.ENV_FORCE, "1")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prof = nbprofiler.load(root / "run")
            assert "store" in prof.timeline.attrs   # the columns are the store's mapped files
            _frames(prof)
    with open(path, encoding="utf-8") as f:
        return prof, json.load(f)


def test_slices_give_the_same_frames_on_a_synthetic_trace_on_disk(synthetic_on_disk):
    prof, events = synthetic_on_disk
    whole = host_dispatch(*_frames(prof))
    # from the file: the device's tasks, the HostToDevice launches into them, the ProfilerStep windows
    hw = next(e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"
              and e["args"]["name"] == "Ascend Hardware")
    device = [e for e in events if e["ph"] == "X" and e["pid"] == hw]
    tails = {e["id"]: Decimal(e["ts"]) for e in events if e["ph"] == "s" and e["cat"] == "HostToDevice"}
    launch_of = {Decimal(e["ts"]): tails[e["id"]] for e in events if e["ph"] == "f" and e["cat"] == "HostToDevice"}
    windows = {int(e["name"].split("#")[1]): (Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"]))
               for e in events if e["ph"] == "X" and e["name"].startswith("ProfilerStep#")}
    idle = _host_idle([(Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(str(e["dur"]))) for e in device],
                      launch_of, windows)
    assert whole.device_tasks == len(device) and whole.launched == len(launch_of) == len(tails)
    assert list(whole.steps["step"]) == sorted(windows) and len(windows) >= 10
    assert whole.steps["host_idle_us"].tolist() == pytest.approx([float(idle[k]) for k in sorted(windows)],
                                                                 abs=1e-3)
    assert whole.waited_tasks > 0 and whole.ops["responsible_op"].iloc[0] == "AscendCL@aclopCompileAndExecute"
    for rows in (3, 100, 1000):
        _assert_same(host_dispatch(*_frames(prof), chunk_rows=rows), whole)


@pytest.mark.parametrize("run", ["npu/trace_view_torch_npu", "npu/ascend_pt_text_2rank/rank1_ascend_pt", None])
def test_the_ops_and_steps_are_the_frames_own(run, synthetic_on_disk):
    """The summary finds the ops behind the waits alone; the frame, the op behind every launched task. Per
    op (of the waits in a step): its idle and waits, most idle first, ties in the order of their first wait;
    per step: the op behind most idle (ties by name)."""
    prof = synthetic_on_disk[0] if run is None else load_quietly(run)
    d = host_dispatch(*_frames(prof))
    tasks = d.tasks
    assert d.waited_tasks > 10 and tasks["waited"].sum() == d.waited_tasks < len(tasks)
    # the frame's rows are in start order: a wait's row is its number among the waits
    waits = tasks[tasks["waited"] & tasks["step"].notna()].reset_index(drop=True)
    per_op = waits.groupby("responsible_op", sort=False).agg(
        host_idle_us=("host_idle_us", "sum"), waited_tasks=("host_idle_us", "size"))
    want = per_op.sort_values("host_idle_us", ascending=False, kind="stable")
    assert list(d.ops["responsible_op"]) == list(want.index)
    assert d.ops["host_idle_us"].to_numpy() == pytest.approx(want["host_idle_us"].to_numpy(), rel=1e-12)
    assert d.ops["waited_tasks"].tolist() == want["waited_tasks"].tolist()
    for step, rows in waits.groupby("step"):
        idle = rows.groupby("responsible_op")["host_idle_us"].sum()
        top = idle[idle == idle.max()].index.min()
        assert d.steps.loc[d.steps["step"] == step, "top_op"].item() == top


def test_the_step_scan_in_slices_finds_the_same_steps(synthetic_on_disk, monkeypatch):
    prof, events = synthetic_on_disk
    whole = profiler_step_windows(prof.timeline)
    assert len(whole) == sum(e["ph"] == "X" and e["name"].startswith("ProfilerStep#") for e in events)
    monkeypatch.setattr(_memory, "PASS_ROWS", 97)
    pd.testing.assert_frame_equal(profiler_step_windows(prof.timeline), whole, check_exact=True)


@pytest.mark.parametrize("rows", [None, 5])
def test_the_longest_waits_are_the_frames_own_without_the_frame(synthetic_on_disk, rows):
    prof, _ = synthetic_on_disk
    kw = {} if rows is None else {"chunk_rows": rows}
    d = host_dispatch(*_frames(prof), **kw)
    longest = {n: d.longest_waits(n) for n in (1, 30, d.waited_tasks + 5)}
    assert callable(d.table)   # made from the longest waits' rows alone
    frame = d.tasks
    for n, rows_ in longest.items():
        want = frame[frame["host_idle_us"] > 0].nlargest(n, "host_idle_us")
        assert len(rows_) == min(n, d.waited_tasks)
        pd.testing.assert_frame_equal(rows_, want, check_exact=True, check_index_type=False)
    assert longest[1]["host_idle_us"].iloc[0] == frame["host_idle_us"].max() > 0


def test_rows_of_a_stream_that_are_not_complete_events_are_no_tasks():
    """A device stream's rows that are not X events (here every third of one stream, marked B) are not tasks:
    the analysis, whole or in slices, equals the one of the timeline without them."""
    tl, tracks, flows, windows = _frames(load_quietly("npu/trace_view_torch_npu"))
    stream = tracks.loc[tracks["process"] == "Ascend Hardware", "track"].iloc[0]
    rows = np.flatnonzero(tl["track"].to_numpy() == stream)[::3]
    assert len(rows) > 10
    marked = tl.copy()
    marked["ph"] = marked["ph"].cat.add_categories(["B"])
    marked.loc[marked.index[rows], "ph"] = "B"
    without = tl.drop(index=tl.index[rows]).reset_index(drop=True)
    want = host_dispatch(without, tracks, flows, windows)
    assert want.device_tasks == host_dispatch(tl, tracks, flows, windows).device_tasks - len(rows)
    for chunk in (None, 4):
        kw = {} if chunk is None else {"chunk_rows": chunk}
        _assert_same(host_dispatch(marked, tracks, flows, windows, **kw), want)


def _random_times(rng, n, span=100.0):
    """``n`` times on a coarse grid (ties), some NaN, -0.0 among them."""
    t = np.round(rng.uniform(-5, span, n) * 4) / 4
    t[rng.random(n) < 0.05] = np.nan
    t[rng.random(n) < 0.02] = -0.0
    return t


def test_tasks_are_placed_in_the_steps_as_op_steps_places_them():
    """`_Windows.place` (a search per window) gives each sorted time the window `_place_in_steps` (a search per
    time) gives it: windows touching, of no length, with equal starts, times on their edges, NaN."""
    rng = np.random.default_rng(7)
    for trial in range(300):
        n_win = int(rng.integers(0, 12))
        edges = np.sort(np.round(rng.uniform(0, 100, 2 * n_win) * 2) / 2)
        starts, ends = edges[0::2], edges[1::2]
        if n_win and rng.random() < 0.3:
            ends[:-1] = starts[1:]   # touching windows
        windows = pd.DataFrame({"step": rng.permutation(n_win) + 3, "start_us": starts, "end_us": ends})
        windows = windows.sample(frac=1, random_state=trial)   # in no order
        keys = _distinct(windows["step"].to_numpy(np.int64), np.array([-1]))
        times = np.sort(np.concatenate([_random_times(rng, int(rng.integers(1, 80))), starts, ends]))
        win = _Windows.of(windows, keys)
        at = win.place(times)
        want = _place_in_steps(times, windows) if n_win else np.full(len(times), -1)
        assert (win.step[at] == want).all()
        if n_win:
            _, want_start = _place_in_steps(times, windows, with_start=True)
            got_start = win.start[at]
            assert np.array_equal(got_start, want_start, equal_nan=True)


@pytest.mark.parametrize("compiled", [True, False])
def test_the_innermost_event_is_the_latest_enclosing_start(monkeypatch, compiled):
    """`_innermost`, compiled (``_dispatch.c``, a cursor galloping from time to time) or in numpy, equals the
    latest start among the `NESTING_DEPTH` events starting at or before each time whose end reaches it, looked
    for event by event: nesting deeper than that, missing and infinite durations, starts missing at the end
    (where numpy sorts them), times on the edges, sorted, shuffled and missing."""
    if compiled:
        assert dispatch._COMPILED is not None   # the package's own build
    else:
        monkeypatch.setattr(dispatch, "_COMPILED", None)
    rng = np.random.default_rng(17)
    for trial in range(300):
        n = int(rng.integers(0, 90))
        start = np.sort(np.round(rng.uniform(0, 100, n) * 2) / 2)
        if trial % 3 == 0 and n > NESTING_DEPTH + 5:   # a stack deeper than the search looks
            start[:NESTING_DEPTH + 5] = 10.0 + np.arange(NESTING_DEPTH + 5) * 0.01
            start = np.sort(start)
        dur = np.round(rng.exponential(rng.choice([1.0, 10.0, 200.0]), n) * 2) / 2
        dur[rng.random(n) < 0.1] = rng.choice([np.nan, np.inf, -np.inf])
        if rng.random() < 0.2:
            start[n - int(rng.integers(0, 3)):] = np.nan
        end = start + np.nan_to_num(dur)
        t = np.concatenate([rng.uniform(-5, 110, int(rng.integers(1, 60))), start, end, [np.nan]])
        if rng.random() < 0.5:
            t = np.sort(t)
        else:
            rng.shuffle(t)

        def latest(x):
            known = int(np.sum(start <= x))   # the starts at or before x (a missing one never is)
            return next((i for i in range(known - 1, max(known - NESTING_DEPTH, 0) - 1, -1) if end[i] >= x), -1)
        want = np.array([latest(x) for x in t], dtype=np.int64)
        for chunk in (1, 7, 1000):
            assert (_innermost(start, dur, t, chunk) == want).all(), (trial, chunk)


@pytest.mark.parametrize("run", ["npu/trace_view_torch_npu", "npu/ascend_pt_text_2rank/rank1_ascend_pt", None])
def test_the_compiled_search_gives_numpys_frames(run, synthetic_on_disk, monkeypatch):
    """The whole analysis with the compiled kernels (the flows' join and the walk) and with numpy's: the same
    steps, ops, summary and frame, on two real runs and on the synthetic trace on disk; and with the flows
    numbered in int64 (a run of 2**31 flows or more) as in int32."""
    prof = load_quietly(run) if run else synthetic_on_disk[0]
    compiled = host_dispatch(*_frames(prof))
    assert compiled.available and compiled.launched > 100
    with monkeypatch.context() as m:
        m.setattr(dispatch, "_index_type", lambda n: np.int64)
        _assert_same(host_dispatch(*_frames(prof)), compiled)
    monkeypatch.setattr(dispatch, "_COMPILED", None)
    _assert_same(host_dispatch(*_frames(prof)), compiled)


def _random_run(rng):
    """Frames of a small random run: a host thread of nested calls, device streams whose tasks tie across
    streams, lack or overflow a duration and (last on a stream) a start, launch and framework flows into some
    of them (and into no task), and step windows that touch, overlap or are missing."""
    host_n, n_streams = int(rng.integers(1, 40)), int(rng.integers(1, 4))
    host_start = np.sort(np.round(rng.uniform(0, 100, host_n) * 2) / 2)
    host_dur = np.round(rng.exponential(8.0, host_n) * 2) / 2
    parts = [pd.DataFrame({"track": 0, "start_us": host_start, "dur_us": host_dur,
                           "name": rng.choice(["aclopLaunch", "aten::add", ""], host_n)})]
    flows, n_flow = [], 0
    for k in range(1, n_streams + 1):
        n = int(rng.integers(0, 60))
        start = np.sort(np.round(rng.uniform(0, 110, n) * 2) / 2)
        dur = np.round(rng.exponential(rng.choice([0.5, 3.0]), n) * 2) / 2
        dur[rng.random(n) < 0.08] = rng.choice([np.nan, np.inf])
        if n and rng.random() < 0.2:
            start[-1] = np.nan
        parts.append(pd.DataFrame({"track": k, "start_us": start, "dur_us": dur,
                                   "name": rng.choice(["MatMul", "Add", "Cast"], n)}))
        for i in np.flatnonzero(rng.random(n) < 0.8):
            for cat in rng.choice(["HostToDevice", "async_npu"], int(rng.integers(1, 3)), replace=False):
                head = start[i] + rng.choice([0.0, 0.25, 50.0])   # at the task's start, inside it, or past it
                flows.append((cat, str(n_flow), f"{cat}{n_flow}", 0, float(rng.uniform(-10, 110)), k, head))
                n_flow += 1
    timeline = pd.concat(parts, ignore_index=True).astype({"track": np.int32, "name": "category"})
    tracks = pd.DataFrame({"track": np.arange(n_streams + 1, dtype=np.int32),
                           "process": ["CANN"] + ["Ascend Hardware"] * n_streams,
                           "thread": ["Thread 1"] + [f"Stream {k}" for k in range(1, n_streams + 1)]})
    flows = pd.DataFrame(flows, columns=["cat", "id", "name", "start_track", "start_us", "end_track", "end_us"])
    flows = flows.astype({"start_track": np.int32, "end_track": np.int32})
    n_win = int(rng.integers(0, 6))
    edges = np.sort(np.round(rng.uniform(0, 110, 2 * n_win) * 2) / 2)
    windows = pd.DataFrame({"step": np.arange(n_win) + 1, "start_us": edges[0::2], "end_us": edges[1::2]})
    if n_win > 1 and rng.random() < 0.3:
        windows.loc[0, "end_us"] = windows.loc[1, "start_us"] + 1.0   # overlapping windows
    return timeline, tracks, flows, windows


def test_the_compiled_walk_gives_numpys_frames_on_random_runs(monkeypatch):
    """On random runs (`_random_run`), in slices of any size: the compiled kernels' frames are numpy's."""
    rng = np.random.default_rng(23)
    checked = 0
    for trial in range(80):
        frames = _random_run(rng)
        for chunk in (None, 3):
            kw = {} if chunk is None else {"chunk_rows": chunk}
            compiled = host_dispatch(*frames, **kw)
            with monkeypatch.context() as m:
                m.setattr(dispatch, "_COMPILED", None)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")   # an empty median of no known latency
                    _assert_same(host_dispatch(*frames, **kw), compiled)
            checked += compiled.available and compiled.waited_tasks > 0
    assert checked > 50


def test_the_outermost_host_call_is_the_earliest_enclosing_event():
    """`_HostThread.outermost` (a running maximum of the ends kept per block, the times taken in order) equals
    the earliest-starting event that encloses each time, looked for event by event: nested and overlapping
    events, missing durations, times on the events' edges, in any order, blocks of a few rows."""
    rng = np.random.default_rng(11)
    for trial in range(200):
        n = int(rng.integers(0, 60))
        start = np.sort(np.round(rng.uniform(0, 100, n) * 2) / 2)
        dur = np.round(rng.exponential(rng.choice([1.0, 10.0, 40.0]), n) * 2) / 2
        dur[rng.random(n) < 0.1] = np.nan
        before = int(rng.integers(0, 5))   # rows of another track before this one
        frame = pd.DataFrame({"track": np.r_[np.zeros(before, np.int32), np.ones(n, np.int32)],
                              "start_us": np.r_[np.zeros(before), start], "dur_us": np.r_[np.ones(before), dur]})
        t = np.concatenate([_random_times(rng, int(rng.integers(1, 50)), 110.0), start, start + np.nan_to_num(dur)])
        rng.shuffle(t)
        end = start + np.nan_to_num(dur)
        want = np.array([next((before + i for i in range(n) if start[i] <= x <= end[i]), -1) for x in t])
        for chunk in (1, 3, 1000):
            cols = _Columns.of(frame, chunk)
            assert (_HostThread(cols, *cols.span(1)).outermost(t) == want).all(), (trial, chunk)


def test_latency_stats_are_the_series_own():
    """`_latency_stats` (numpy on the array) gives a Series' median, quantile(0.9), max and count of negatives to
    the bit: NaN skipped, infinities, both zeros, ties, odd and even counts, nothing known."""
    rng = np.random.default_rng(5)
    for trial in range(500):
        n = int(rng.integers(1, 40))
        x = np.round(rng.standard_normal(n) * rng.choice([1.0, 1e-3, 1e6]), int(rng.integers(0, 3)))
        if rng.random() < 0.3:
            x[rng.random(n) < rng.choice([0.3, 1.0])] = np.nan
        if rng.random() < 0.3:
            x[rng.random(n) < 0.3] = rng.choice([np.inf, -np.inf, 0.0, -0.0])
        s = pd.Series(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # inf − inf between two order statistics, an empty median
            want = [float(s.median()), float(s.quantile(0.9)), float(s.max()), int((s < 0).sum())]
            got = _latency_stats(x)
        assert np.array(list(got.values())).tobytes() == np.array(want).tobytes(), (trial, x)


def test_finite_is_nan_to_num():
    x = np.array([1.5, -0.0, 0.0, np.nan, np.inf, -np.inf, -3.0, 1e308])
    assert finite(x).tobytes() == np.nan_to_num(x).tobytes()
    assert finite(x[[0, 1, 6]]).tobytes() == x[[0, 1, 6]].tobytes()
