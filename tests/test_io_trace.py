"""The fast trace loader on every real trace in shared/data, checked against a slow exact parse
(stdlib json + Decimal), plus damaged copies, the frame cache and the synthetic writer."""
from __future__ import annotations

import json
import shutil
import warnings
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import nbprofiler
from nbprofiler.errors import MalformedFileError, MissingColumnError, ProfilerDataWarning, TruncatedFileError
from nbprofiler.io import cache, trace
from nbprofiler.io.trace import counters as trace_counters
from nbprofiler.io.trace import memory as trace_memory
from nbprofiler.io.trace import parse as trace_parse
from nbprofiler.io.discover import discover
from nbprofiler.synthetic import write_trace

from .conftest import DATA

MS2 = DATA / "mindspore2/lenet_pynative/vm_11535_20261121042531696_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json"
TORCH = DATA / "npu/trace_view_torch_npu/trace_view.json"
WIDEDEEP = DATA / "legacy/run_1_widedeep/timeline_display_1.json"
LENET = DATA / "legacy/run_2_lenet/ascend_timeline_display_1.json"
GPU = DATA / "legacy/fixtures_mixed_ids/gpu_timeline_display_0.json"
CANN0 = DATA / "npu/cann_prof_2dev/PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0/timeline"


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))


def _reference(paths: list[Path]) -> tuple[pd.DataFrame, Decimal]:
    """Slow exact parse: every X event with Decimal timestamps relative to the earliest timed event."""
    events = [e for p in paths for e in json.loads(p.read_text())]
    timed = [Decimal(str(e["ts"])) for e in events if e.get("ph") != "M" and "ts" in e]
    origin = min(timed)
    rows = [(str(e.get("pid")), str(e.get("tid")), e.get("name", ""), float(Decimal(str(e["ts"])) - origin),
             float(e["dur"])) for e in events if e.get("ph") == "X"]
    df = pd.DataFrame(rows, columns=["pid", "tid", "name", "start_us", "dur_us"])
    if len(paths) > 1:
        df = df.drop_duplicates()
    return df, origin


def _fast(paths: list[Path]) -> tuple[pd.DataFrame, trace.TraceData]:
    data = trace.load_trace(paths, progress=False)
    tl = data.timeline.merge(data.tracks[["track", "pid", "tid"]], on="track")
    return tl, data


def _same(fast: pd.DataFrame, ref: pd.DataFrame):
    key = ["pid", "tid", "start_us", "dur_us", "name"]
    a = fast.assign(name=fast["name"].astype(str), start_us=fast["start_us"].round(3))[key]
    b = ref.assign(start_us=ref["start_us"].round(3))[key]
    a = a.sort_values(key).reset_index(drop=True)
    b = b.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False, atol=1e-6)


@pytest.mark.parametrize("path, n_x", [(MS2, 13801), (TORCH, 2212), (WIDEDEEP, 6359), (LENET, 112), (GPU, 2)])
def test_fast_path_equals_exact_parse(path, n_x):
    fast, data = _fast([path])
    ref, origin = _reference([path])
    assert len(fast) == len(ref) == n_x
    _same(fast, ref)
    assert data.origin_us == pytest.approx(float(origin), abs=1e-3)
    # the slow reference agrees with the module's own exact parser
    assert len(trace.exact_events(path)) == len(json.loads(path.read_text()))


def test_the_categorical_of_a_real_traces_names_equals_pandas_checked_one():
    """`trace.distinct_categorical` skips pandas' check that the categories are distinct: on the names of
    a real trace (and a missing value) it builds what the checked constructor builds, its codes narrowed
    to the categories' count the same way."""
    names = trace.load_trace(MS2, progress=False).timeline["name"]
    categories = pd.Index(names.cat.categories, dtype=str)
    read = names.cat.codes.to_numpy()
    for codes in (read.astype(np.int32), np.r_[read[:50], -1].astype(read.dtype)):
        fast = trace.distinct_categorical(codes, categories.tolist())
        checked = pd.Categorical.from_codes(codes, categories=categories)
        pd.testing.assert_extension_array_equal(fast, checked)
        assert fast.codes.dtype == checked.codes.dtype and fast.isna().sum() == (codes == -1).sum()


def test_cann_iterations_merge_and_dedupe():
    files = sorted(CANN0.glob("msprof_*.json"))
    fast, data = _fast(files)
    ref, _ = _reference(files)
    _same(fast, ref)
    names = data.tracks.set_index(["pid", "tid"])
    assert names.loc[("3", "2"), "thread"] == "Stream 2"
    assert names.loc[("3", "2"), "process"] == "Ascend Hardware"
    assert (data.tracks["process"] == "Ascend Hardware").sum() == 7  # 6 streams + step trace thread
    assert len(data.flows) == 10  # one s/t "Data_aug Bound" pair per iteration


def test_mindspore2_profile_frames():
    prof = nbprofiler.load(DATA / "mindspore2/lenet_pynative")
    tl = prof.timeline
    assert len(tl) == 13801 and prof.problems == []
    for col in ("name", "op_type", "cat", "ph"):
        assert isinstance(tl[col].dtype, pd.CategoricalDtype)
    assert tl["start_us"].dtype == np.float64 and tl["track"].dtype == np.int32
    assert tl["start_us"].min() == 0.0
    # origin = the Scope Layer "Default" bar, ts "1795235132515481.674"; first op 1795235132857961.486
    assert prof.origin_us == pytest.approx(1795235132515481.674, abs=0.25)
    first_op = tl[tl["name"] == "Default/SparseSoftmaxCrossEntropyWithLogits-op1"]["start_us"].min()
    assert first_op == pytest.approx(342479.812, abs=1e-6)  # exact to the ns despite epoch-us inputs
    tracks = prof.timeline_tracks
    assert list(tracks["process"]) == ["CPU OP", "Scope Layer"] and list(tracks["events"]) == [13800, 1]
    # op types derived from the names where args.type is the generic "HostCpuOps"; counts per type
    # equal the occurrences in cpu_op_type_info_0.csv
    types = pd.read_csv(DATA / "mindspore2/lenet_pynative/vm_11535_20261121042531696_ascend_ms/FRAMEWORK/"
                               "cpu_op_type_info_0.csv").set_index("op_type")["type_occurrences"]
    counts = tl[tl["track"] == 0].groupby("op_type", observed=True).size()
    assert counts.sort_index().to_dict() == types.sort_index().to_dict()


def test_torch_npu_flows_and_tracks():
    prof = nbprofiler.load(DATA / "npu/trace_view_torch_npu")
    flows = prof.timeline_flows
    assert len(flows) == 713
    assert set(flows["cat"]) == {"HostToDevice", "async_npu", "async_task_queue", "fwdbwd"}
    tracks = prof.timeline_tracks.set_index("track")
    h2d = flows[flows["cat"] == "HostToDevice"]
    assert (tracks.loc[h2d["start_track"], "process"] == "CANN").all()
    assert (tracks.loc[h2d["end_track"], "thread"] == "Stream 3").all()
    # the int id 1704161511422904204 (beyond float precision) survives as text
    assert "1704161511422904204" in set(flows["id"])
    # as written: some HostToDevice flows end (device clock) before they start (host clock)
    one = flows[flows["id"] == "47244640255"].iloc[0]
    origin = Decimal(repr(prof.origin_us))
    assert one["start_us"] == pytest.approx(float(Decimal("1704161511422926.436") - origin), abs=0.3)
    assert one["end_us"] - one["start_us"] == pytest.approx(-9.172, abs=1e-6)
    assert prof.timeline_counters.empty


def test_legacy_naming_and_mindinsight_counts():
    prof = nbprofiler.load(DATA / "legacy/run_2_lenet")
    tl = prof.timeline
    assert len(tl) == 112  # MindInsight's display_events for this folder
    tracks = prof.timeline_tracks
    assert set(zip(tracks["process"], tracks["thread"])) == {("Ascend Device 1", "Stream 519"), ("AI CPU", "Stream 0")}
    wd = nbprofiler.load(DATA / "legacy/run_1_widedeep").timeline
    tr = nbprofiler.load(DATA / "legacy/run_1_widedeep").timeline_tracks
    dev = wd[wd["track"].isin(tr[tr["pid"] == "1"]["track"])]
    # timeline_summary_1.json: 2817 executions of 199 ops on 11 streams, total 1771382.85 us
    assert len(dev) == 2817 and dev["name"].nunique() == 199 and dev["track"].nunique() == 11
    assert dev["dur_us"].sum() == pytest.approx(1771382.849999995, rel=1e-9)
    assert (tr[tr["pid"] == "10000"]["process"] == "Communication").all()


def test_special_legacy_threads_and_counters(tmp_path):
    events = [{"name": "1", "ph": "X", "pid": 1, "tid": 100000, "ts": 0, "dur": 50},
              {"name": "Default", "ph": "X", "pid": 1, "tid": 100001, "ts": 0, "dur": 40, "scope_level": 0},
              {"name": "Conv2D-op1", "ph": "X", "pid": 1, "tid": "7", "ts": "1.5", "dur": "2.25",
               "args": {"type": "Conv2D"}},
              {"name": "Kern", "ph": "B", "pid": 1, "tid": "7", "ts": 10},
              {"name": "Kern", "ph": "E", "pid": 1, "tid": "7", "ts": 14.5},
              {"name": "freq", "ph": "C", "pid": 5, "ts": 3, "args": {"MHz": 1000, "util": "0.5"}}]
    p = tmp_path / "ascend_timeline_display_1.json"
    p.write_text(json.dumps({"traceEvents": events}))
    data = trace.load_trace([p], progress=False)
    tr = data.tracks
    assert list(tr["thread"]) == ["Steps", "Scope Name", "Stream 7"]
    assert list(tr["thread_sort"][:2]) == [-4, -3]
    tl = data.timeline
    kern = tl[tl["name"] == "Kern"].iloc[0]
    assert kern["ph"] == "B" and kern["dur_us"] == pytest.approx(4.5)
    assert tl.loc[tl["name"] == "Conv2D-op1", "op_type"].iloc[0] == "Conv2D"
    c = data.counters
    assert sorted(c["series"]) == ["MHz", "util"] and sorted(c["value"]) == [0.5, 1000.0]


@pytest.mark.parametrize("cut, error", [(0.5, TruncatedFileError), (0.999, TruncatedFileError)])
def test_truncated_trace_names_the_line(tmp_path, cut, error):
    data = WIDEDEEP.read_bytes()
    p = tmp_path / "timeline_display_1.json"
    p.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(error) as ei:
        trace.load_trace([p], progress=False)
    assert ei.value.path == p and ei.value.line is not None and ei.value.line >= 1


def test_malformed_trace_names_the_line(tmp_path):
    text = TORCH.read_text()
    lines = text.replace("}, {", "},\n{").splitlines()
    lines[1000] = lines[1000].replace('"ph":', '"ph"', 1)  # a missing colon on line 1001
    p = tmp_path / "trace_view.json"
    p.write_text("\n".join(lines))
    with pytest.raises(MalformedFileError) as ei:
        trace.load_trace([p], progress=False)
    assert ei.value.line == 1001
    q = tmp_path / "obj.json"
    q.write_text('{"events": []}')
    with pytest.raises(MissingColumnError):
        trace.load_trace([q], progress=False)


def test_bad_timestamps_are_skipped_with_a_warning(tmp_path):
    events = json.loads(TORCH.read_text())
    events[7]["ts"] = "not a time"
    p = tmp_path / "trace_view.json"
    p.write_text(",\n".join(["["] + [json.dumps(e) for e in events]).replace("[,", "[") + "]")
    with pytest.warns(ProfilerDataWarning) as rec:
        data = trace.load_trace([p], progress=False)
    err = rec[0].message.error
    assert err.field == "ts" and err.line == 9
    assert len(data.timeline) == 2211


def test_damaged_trace_is_a_problem_not_a_crash(tmp_path):
    root = tmp_path / "run"
    shutil.copytree(TORCH.parent, root)
    (root / "trace_view.json").write_bytes(TORCH.read_bytes()[:100_000])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(root)
        assert prof.timeline.empty and prof.timeline_tracks.empty
    assert len(prof.problems) == 1 and "TruncatedFileError" in prof.problems[0].error


def test_frame_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    src = tmp_path / "src"
    shutil.copytree(TORCH.parent, src)
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    run = discover(src)[0]
    first = trace.trace_data(run)
    cache.wait()  # the entry is written in the background
    entries = list((tmp_path / "cache").iterdir())
    assert len(entries) == 1 and sorted(p.relative_to(src) for p in src.rglob("*")) == before
    assert sorted(p.name for p in entries[0].iterdir()) == ["counters.arrow", "flows.arrow", "meta.json",
                                                            "timeline.arrow", "tracks.arrow"]
    from nbprofiler.io import _util
    read, pools = pa.ipc.open_file, []

    def watched(*a, memory_pool=None, **k):  # decompressed into the pool a build allocates from
        pools.append(memory_pool.backend_name)
        return read(*a, memory_pool=memory_pool, **k)
    monkeypatch.setattr(pa.ipc, "open_file", watched)
    again = trace.trace_data(run)
    monkeypatch.setattr(pa.ipc, "open_file", read)
    assert pools == [_util.jemalloc_pool().backend_name] * 4
    for name, df in first.frames().items():
        pd.testing.assert_frame_equal(df, again.frames()[name])
    assert again.origin_us == first.origin_us
    # a changed file is a new key; caching can be switched off
    (src / "trace_view.json").write_text(TORCH.read_text().replace("aten::empty", "aten::EMPTY"))
    changed = trace.trace_data(discover(src)[0])
    assert "aten::EMPTY" in set(changed.timeline["name"].astype(str))
    monkeypatch.setenv(cache.ENV, "off")
    assert cache.cache_dir() is None


def test_an_edit_during_the_background_write_does_not_reach_the_cache(tmp_path, monkeypatch):
    """The frames are returned before their entry is written: the user's in-place edits meanwhile stay
    theirs (the writer is held until they are done)."""
    import threading
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    go = threading.Event()
    write = cache._write
    monkeypatch.setattr(cache, "_write", lambda *a: go.wait(30) and write(*a))
    run = discover(TORCH.parent)[0]
    first = trace.trace_data(run)
    loaded = first.timeline.copy()
    first.timeline.loc[first.timeline.index[0], "start_us"] = -1.0
    first.timeline.loc[first.timeline.index[0], "name"] = first.timeline["name"].iloc[-1]
    first.timeline["dur_us"] *= 2
    go.set()
    cache.wait()
    again = trace.trace_data(run)
    assert again.timeline is not first.timeline and len(list((tmp_path / "cache").iterdir())) == 1
    pd.testing.assert_frame_equal(again.timeline, loaded)


def test_a_load_returns_before_its_flows_are_paired(tmp_path, monkeypatch):
    """The flows of a one-file trace are paired on a thread of their own once the timeline is built: the
    load returns without them, reading them waits for them, and the cache entry holds them as they were
    paired (an in-place edit once they are read stays the user's)."""
    import threading
    from concurrent.futures import Future

    from nbprofiler.io.trace import disk as trace_disk
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    run = discover(TORCH.parent)[0]
    go = threading.Event()
    trace_disk._PAIRING.submit(go.wait, 30)  # the pairing thread is busy until the test lets it go
    try:
        first = trace.trace_data(run)
        pending = first._flows
        assert isinstance(pending, Future) and not pending.done()
        assert len(first.timeline) and len(first.tracks)  # the other frames are there
    finally:
        go.set()
    flows = first.flows
    assert pending.done() and first._flows is flows
    assert len(flows) == 713 and set(flows["cat"]) == {"HostToDevice", "async_npu", "async_task_queue", "fwdbwd"}
    # the same flows as the build of several files (here the file twice, its repeated events merged), which
    # pairs them before it returns
    pd.testing.assert_frame_equal(trace.load_trace([TORCH, TORCH], progress=False).flows, flows)
    paired = flows.copy()
    flows.loc[flows.index[0], "start_us"] = -1.0
    flows["end_us"] *= 2
    cache.wait()
    again = trace.trace_data(run)
    assert not isinstance(again._flows, Future)  # read from the cache entry
    pd.testing.assert_frame_equal(again.flows, paired)


def test_cache_never_inside_profiler_dir(tmp_path, monkeypatch):
    """NBPROFILER_CACHE_DIR pointing into the run folder (beside the trace's own folder too), at it, or at a
    folder above it: the entry goes to the user cache directory instead, with a warning; nothing appears
    beside the profiler files."""
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    run = tmp_path / "profiles" / "host_1_20231001000000000_ascend_pt"
    src = run / "ASCEND_PROFILER_OUTPUT"
    shutil.copytree(TORCH.parent, src)
    before = sorted(p.relative_to(tmp_path / "profiles") for p in (tmp_path / "profiles").rglob("*"))
    for target in (src / "cache", src, run / "cache", run, tmp_path / "profiles"):
        monkeypatch.setenv(cache.ENV, str(target))
        with pytest.warns(UserWarning, match="lies in or above profiler output"):
            trace.trace_data(discover(src)[0])
        cache.wait()
        assert sorted(p.relative_to(tmp_path / "profiles") for p in (tmp_path / "profiles").rglob("*")) == before
    assert list((tmp_path / "user-cache").rglob("meta.json"))


def test_cache_entries_that_do_not_match_their_meta_are_not_served(tmp_path, monkeypatch):
    """An incomplete meta, another frame's table under a frame's name, or a same-size edit of the source
    that kept its mtime: each time the trace is parsed again, never served wrong or raising."""
    import os
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    src = tmp_path / "src"
    shutil.copytree(TORCH.parent, src)
    run = discover(src)[0]
    first = trace.trace_data(run)
    cache.wait()
    [entry] = list((tmp_path / "cache").iterdir())
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["schema"]["timeline"] == {"columns": list(first.timeline.columns), "rows": len(first.timeline)}
    # another frame's table in timeline.arrow: not served
    shutil.copy(entry / "flows.arrow", entry / "timeline.arrow")
    again = trace.trace_data(run)
    pd.testing.assert_frame_equal(again.timeline, first.timeline)
    cache.wait()
    # valid JSON, but incomplete: not served, no KeyError
    [entry] = list((tmp_path / "cache").iterdir())
    (entry / "meta.json").write_text(json.dumps({"frames": ["timeline"]}))
    pd.testing.assert_frame_equal(trace.trace_data(run).timeline, first.timeline)
    cache.wait()
    # a same-size edit with the old mtime put back: a new key (the inode's ctime moved)
    path = src / "trace_view.json"
    st = path.stat()
    text = path.read_text()
    path.write_text(text.replace("aten::empty", "aten::EMPTY"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert "aten::EMPTY" in set(trace.trace_data(discover(src)[0]).timeline["name"].astype(str))


def test_synthetic_trace_is_seeded_and_shaped_like_real(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    stats = write_trace(a, 2_000_000, seed=7)
    write_trace(b, 2_000_000, seed=7)
    assert a.read_bytes() == b.read_bytes() and stats["bytes"] >= 2_000_000
    fast, data = _fast([a])
    ref, _ = _reference([a])
    _same(fast, ref)
    assert len(data.flows) == stats["flows"]
    assert set(data.tracks["process"]) >= {"MindSpore", "CPU OP", "Scope Layer", "CANN", "Ascend Hardware",
                                           "HCCL", "Overlap Analysis"}
    assert set(data.counters["series"]) == {"MHz", "Read(MB/s)", "Write(MB/s)"}


def test_benchmark_quick_mode(tmp_path):
    """benchmarks/bench_trace_load.py --quick: the loader agrees with the baseline on the event count,
    and the cached re-open reads the same events back."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "bench_trace_load", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_trace_load.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (row,) = bench.main(["--quick", "--scratch", str(tmp_path)])
    assert row["nbprofiler"]["events"] == row["baseline_json_pandas"]["events"] > 30_000
    assert row["nbprofiler"]["mb_per_s"] > 0 and row["speedup_vs_baseline"] > 0
    assert row["cached_reopen_s"] > 0
    if "memory" in row:  # Linux: the peak's own data and the code paged in, both parts of the peak
        mem = row["memory"]
        assert 0 < mem["anon_added_mb"] and 0 < mem["code_paged_in_mb"]
        assert mem["anon_added_mb"] + mem["code_paged_in_mb"] < row["nbprofiler"]["peak_rss_mb"]


def _frames(paths):
    data = trace.load_trace(paths, progress=False)
    return data.origin_us, data.frames()


@pytest.mark.parametrize("path", [TORCH, MS2, WIDEDEEP])
def test_batched_parse_equals_one_batch(path, monkeypatch):
    """The reader hands over batches; the timeline is assembled track by track from the batches' own
    sorted runs (a track that goes back in time across batches is sorted alone). Small batches (many runs,
    tracks going back in time across batches in these real files) give the same frames as one batch, and
    as the global sort of every event that several merged files take (`trace_memory.build`)."""
    one = _frames([path])
    monkeypatch.setattr(trace_parse, "_BATCH_ROWS", 97)
    small = _frames([path])
    legacy = "timeline_display" in path.name
    data = trace_memory.build(trace_parse.parse_chunks(path), [path], legacy=legacy, gpu=path.name.startswith("gpu_"))
    forced = data.origin_us, data.frames()
    for other in (small, forced):
        assert other[0] == one[0]
        for name, df in one[1].items():
            pd.testing.assert_frame_equal(other[1][name], df)
    assert len(one[1]["timeline"]) == {TORCH: 2212, MS2: 13801, WIDEDEEP: 6359}[path]


def test_presorted_runs_are_used_for_time_ordered_files(tmp_path, monkeypatch):
    """A synthetic trace is written in time order per track: with many batches every track is the
    concatenation of the batches' runs (no track is sorted), and the timeline equals the exact parse."""
    from nbprofiler.io.trace import disk as trace_disk
    p = tmp_path / "trace_view.json"
    write_trace(p, 300_000, seed=3)
    monkeypatch.setattr(trace_parse, "_BATCH_ROWS", 500)
    batches, sorted_tracks = [], []
    real_sink, real_sort = trace_disk._Sink.__call__, trace_disk._sorted_track
    monkeypatch.setattr(trace_disk._Sink, "__call__", lambda self, *a: batches.append(1) or real_sink(self, *a))
    monkeypatch.setattr(trace_disk, "_sorted_track", lambda *a: sorted_tracks.append(1) or real_sort(*a))
    fast, _ = _fast([p])
    assert len(batches) > 5 and not sorted_tracks
    _same(fast, _reference([p])[0])


def test_event_larger_than_the_first_read_limit(tmp_path, monkeypatch):
    """duckdb's read buffer grows to maximum_object_size, so the first read uses a modest limit; an
    event above it makes the loader re-read with no practical limit, with the same result."""
    expected = _frames([TORCH])
    monkeypatch.setattr(trace_parse, "_MAX_EVENT", 64)
    again = _frames([TORCH])
    for name, df in expected[1].items():
        pd.testing.assert_frame_equal(again[1][name], df)


def test_progress_moves_with_the_bytes_parsed(tmp_path, monkeypatch):
    """The load's bar advances batch by batch, by about the bytes each batch was read from, not once
    per file at the end (MindSpore-shaped synthetic trace: 10 MB, several record batches)."""
    from nbprofiler.io import trace
    from nbprofiler.io.trace import parse as trace_parse
    from nbprofiler.io.trace import progress as trace_progress
    from nbprofiler.synthetic import write_trace
    path = tmp_path / "trace_view.json"
    size = write_trace(path, 10_000_000, seed=3)["bytes"]
    steps = []
    monkeypatch.setattr(trace_progress.Progress, "advance", lambda self, n: steps.append(n))
    monkeypatch.setattr(trace_parse, "_MIN_BATCH_ROWS", 4096)  # about 12 batches for 10 MB, as 1 GB has
    trace.load_trace(path, progress=False)
    parse_steps = steps[:-2]  # the batches; then the file's remainder and the frame-building share
    assert len(parse_steps) >= 4
    assert sum(steps) == pytest.approx(size)
    # each batch's estimate is close to its real share: together within 10 % of the parsing share
    assert sum(parse_steps) == pytest.approx(0.8 * size, rel=0.1)
    assert max(parse_steps) < 0.5 * size


def test_args_type_is_read_as_json_reads_it(tmp_path):
    """``args.type`` (the op type where it is specific) of X and B events: read off duckdb's compact text
    where it is the first key, else by json_extract; equal to what json.loads finds, escapes included."""
    args = [{"type": "Conv2D"}, {"fullname": "a/b", "type": "MatMul"}, {"type": 5}, {"type": None}, {},
            {"input": {"type": "nested"}}, {"type": "quote\"d"}, {"type": "uni\u00e9"}, {"type": ""},
            {"type": "first", "type_2": "x"}, {"a": {"b": 1, "type": "deep"}}, {"a": {"type": "in"}, "type": "out"},
            {"note": 'a,"type":b'}]
    events = [{"ph": ph, "name": f"e{i}", "pid": 1, "tid": 1, "ts": str(i), "dur": 1, "args": a}
              for i, a in enumerate(args) for ph in ("X", "B", "C")]
    text = json.dumps(events)
    text = text.replace('{"type": "Conv2D"}', '{"ty\\u0070e": "Conv2D"}', 1)  # an escaped key, the first time
    path = tmp_path / "trace.json"
    path.write_text(text)
    chunks = trace_parse.parse_chunks(path)
    got = pa.chunked_array([c.codes["arg_type"] for c in chunks]).cast(pa.string()).to_pylist()
    kinds = np.concatenate([c.kind for c in chunks])
    want = []
    for e, kind in zip(json.loads(text), kinds):
        value = e["args"].get("type") if kind in (trace_parse.KIND_X, trace_parse.KIND_B) else None
        want.append(None if value is None else value if isinstance(value, str) else json.dumps(value))
    assert got == want and "Conv2D" in got and 'quote"d' in got and "uni\u00e9" in got and "out" in got


def test_the_text_search_finds_a_needle_in_each_value_only():
    """`trace_parse._holds`: one search of the whole text buffer, mapped back to values; a match across two
    values is not one, and sliced, null and large-string arrays map right."""
    values = ['{"type":1}', None, '"ty', 'pe"', "", 'x"type"', '"type"', '{"a":"type"}', "no"]
    want = [('"type"' in v) if v is not None else False for v in values]
    arr = pa.array(["pad"] + values)
    for texts in (arr.slice(1), pa.array(values, pa.large_string()), pa.array(values)):
        assert trace_parse._holds(texts, b'"type"').tolist() == want
    assert not trace_parse._holds(pa.array([None, None], pa.string()), b'"type"').any()


def test_ts_text_is_cast_as_duckdb_casts_it():
    """`trace_parse._ts_decimal` casts a batch's ts text with Arrow where Arrow takes every value, else with
    duckdb's TRY_CAST: either way the values are duckdb's (exponents, signs, a fourth decimal rounded, blanks,
    what is not a number as null)."""
    def duckdb_cast(values):
        return trace_parse.query("SELECT TRY_CAST(ts AS DECIMAL(38, 3)) AS ts FROM b",
                                 b=pa.table({"ts": pa.array(values, pa.string())})).column("ts").to_pylist()
    plain = ["1795235132857963.000", "1795235132857963.25", "1.5e3", "+12", ".5", "5.", "1E+2", "00012.5", "-7.125",
             None, "0"]
    odd = plain + [" 12", "1.2345", "-0.0005", "0x10", "NaN", "", "-", "1_000"]
    for values in (plain, odd):
        got = trace_parse._ts_decimal(pa.array(values, pa.string()))
        assert got.type == pa.decimal128(38, 3) and got.to_pylist() == duckdb_cast(values)
    assert trace_parse._ts_decimal(pa.array(odd, pa.string())).to_pylist()[len(plain):len(plain) + 3] == [
        Decimal("12.000"), Decimal("1.235"), Decimal("-0.001")]


def test_counters_are_ordered_as_an_arrow_sort_by_their_text_orders_them():
    """`trace_counters.counter_frame` sorts the text keys by their ranks among the distinct values: the same
    order as Arrow's sort by (pid, name, series, time, file order), with ties in every key, "" and non-ASCII
    text, over several chunks."""
    rng = np.random.default_rng(7)
    n = 3000
    words = ["", "HBM", "AI Core Freq", "Höhe", "héllo", "a", "B", "10", "9", "z" * 30]
    t = pa.table({"pid": rng.choice(words[:5], n), "name": rng.choice(words, n), "series": rng.choice(words[3:], n),
                  "ts_ns": rng.integers(0, 40, n), "row": rng.permutation(n).astype(np.int64), "value": rng.random(n)})
    t = pa.Table.from_batches(t.to_batches(max_chunksize=700))
    want = t.sort_by([(c, "ascending") for c in trace_counters.COUNTER_ORDER])
    got = trace_counters.counter_frame(t, 10)
    assert got["series"].tolist() == want.column("series").to_pylist()
    assert got["pid"].tolist() == want.column("pid").to_pylist() and got["name"].tolist() == want.column("name").to_pylist()
    assert got["value"].tolist() == want.column("value").to_pylist()
    assert np.array_equal(got["start_us"].to_numpy(), (want.column("ts_ns").to_numpy() - 10) / 1000.0)


def test_flat_counter_args_are_split_as_json_each_splits_them():
    """`trace_counters.counter_samples` splits flat {"key":number,...} args with Arrow string kernels and sends the
    others to duckdb's json_each: every shape gives what json_each alone gives."""
    args = ['{"MHz":1800}', '{"Read(MB/s)":1.5,"Write(MB/s)":0}', '{"a,b":-2.5e-3,"c:d":1E2,"":7}',
            '{"x":1,"x":2}', '{"big":18446744073709551615,"bigger":123456789012345678901234567890}',
            '{"huge":1e400}', '{"s":"12"}', '{"n":null}', '{"t":true}', '{"o":{"p":1}}', '{"l":[1,2]}',
            '{"q\\"k":1}', '{"u":"\\u00e9"}', '{}', '[1,2]', '5', '{ "spaced" : 1 }', None,
            '{"neg":-0,"frac":0.000001}']
    events = pa.table({"row": np.arange(len(args), dtype=np.int64), "pid": ["7"] * (len(args) - 1) + [None],
                       "name": ["Freq"] * len(args), "args": pa.array(args, pa.string()),
                       "ts_ns": np.arange(len(args), dtype=np.int64) * 1000})
    by_json_each = trace_parse.query(trace_counters.COUNTER_SQL, c=events)

    def ordered(t):
        return t.select(["pid", "name", "series", "ts_ns", "row", "value"]).sort_by(
            [(c, "ascending") for c in trace_counters.COUNTER_ORDER] + [("value", "ascending")]).to_pylist()
    got = trace_counters.counter_samples(events)
    assert ordered(got) == ordered(by_json_each)
    assert {"MHz", "Read(MB/s)", "a,b", "c:d", ""} <= set(got.column("series").to_pylist())
    # only the flat ones take the Arrow path (one of them: json_each is not asked at all)
    flat = events.filter(pa.array([a is not None and a.startswith('{"MHz"') for a in args]))
    assert ordered(trace_counters.counter_samples(flat)) == ordered(trace_parse.query(trace_counters.COUNTER_SQL, c=flat))


def test_text_sizes_are_what_arrow_measures():
    """The progress estimate and the longest value, read off the offsets, are Arrow's lengths of the values
    (nulls, sliced batches, large strings, JSON-typed args)."""
    text = pa.array(["a", None, "", "héllo wörld", "x" * 300, None, "{}"])
    batch = pa.record_batch({"name": text, "args": text.cast(pa.large_string()), "dur": np.arange(7.0)})
    for b in (batch, batch.slice(1, 4), batch.slice(3)):
        total, longest = trace_parse._text_sizes(b)
        lengths = [pc.binary_length(c) for c in (b.column("name"), b.column("args"))]
        assert total == b.num_rows * (trace_parse._EVENT_SYNTAX_BYTES + 8) + sum(
            pc.sum(n).as_py() or 0 for n in lengths)
        assert longest == max(pc.max(n).as_py() or 0 for n in lengths)
    assert trace_parse._text_sizes(batch)[1] == 300


def test_a_build_allocates_from_jemalloc_and_restores_the_default(monkeypatch):
    """mimalloc (pyarrow's default on Linux) is swapped for jemalloc (the system allocator where pyarrow has
    no jemalloc) while a build runs, on its reading, digesting and side threads alike, and put back after
    (once the flows, which a load does not wait for, are paired), also when builds overlap on several
    threads; a default the user chose is not touched."""
    from concurrent.futures import ThreadPoolExecutor

    from nbprofiler.io import _util
    from nbprofiler.io.trace import disk as trace_disk
    cache.wait()  # an earlier test's entry, written in the background, holds the switch until it is done
    trace_disk._PAIRING.submit(lambda: None).result()  # and so do the flows it left to be paired
    seen = set()
    digest = trace_disk._Sink.__call__

    def watched(self, batch, offset):
        seen.add(pa.default_memory_pool().backend_name)
        return digest(self, batch, offset)
    monkeypatch.setattr(trace_disk._Sink, "__call__", watched)
    before = pa.default_memory_pool()
    try:
        pa.set_memory_pool(pa.mimalloc_memory_pool())
        with ThreadPoolExecutor(3) as pool:
            frames = list(pool.map(lambda p: trace.load_trace([p], progress=False), [MS2, TORCH, WIDEDEEP] * 2))
        assert [len(d.timeline) for d in frames] == [13801, 2212, 6359] * 2
        assert [len(d.flows) for d in frames] == [0, 713, 0] * 2  # waits for their pairing
        build = _util.jemalloc_pool().backend_name
        assert seen == {build} and build in ("jemalloc", "system")
        assert pa.default_memory_pool().backend_name == "mimalloc"
        # a failed build restores it too
        with pytest.raises(TruncatedFileError):
            with _util.arrow_memory():
                assert pa.default_memory_pool().backend_name == build
                raise TruncatedFileError(MS2, "cut")
        assert pa.default_memory_pool().backend_name == "mimalloc"
        pa.set_memory_pool(pa.system_memory_pool())
        seen.clear()
        assert len(trace.load_trace([TORCH], progress=False).timeline) == 2212
        assert seen == {"system"}
        assert pa.default_memory_pool().backend_name == "system"
    finally:
        pa.set_memory_pool(before)


_HEAP_LEFT = """
import ctypes, sys
import nbprofiler
from nbprofiler.io import cache
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
prof = nbprofiler.load(sys.argv[1])
events, flows = len(prof.timeline), len(prof.timeline_flows)
cache.wait()
before = rss()
ctypes.CDLL("libc.so.6").malloc_trim(0)
print(events, flows, before - rss())
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="glibc's malloc_trim, the resident size in /proc")
def test_a_load_gives_its_temporaries_heap_back(tmp_path):
    """Once a trace is loaded in memory, its flows paired and its cache entry written, the C heap holds
    no freed temporaries worth giving back: glibc keeps the pages of arrays under its mmap threshold once
    they are freed (on a 20 MB trace, 9.5 MB of them, on a 1 GB one 390 MB), so the load trims the heap
    once its timeline is built and again once its flows are. A fresh process, the trace synthetic."""
    import os
    import subprocess
    import sys
    trace_path = tmp_path / "trace" / "trace_view.json"
    trace_path.parent.mkdir()
    counts = write_trace(trace_path, 20_000_000)
    out = subprocess.run([sys.executable, "-c", _HEAP_LEFT, str(trace_path)], capture_output=True, text=True,
                         env={**os.environ, cache.ENV: str(tmp_path / "cache")}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    events, flows, given_back = map(int, out.stdout.split())
    assert events >= counts["x_events"] and flows == counts["flows"]
    assert given_back < 3 << 20, f"a trim after the load gave back {given_back / 2**20:.1f} MB"


def test_op_types_of_names_in_arrow_are_what_op_type_of_gives_each_name():
    from nbprofiler.io.trace.naming import op_type_of, op_types_of
    names = ["Default/net/Conv2D-op12", "AllReduce-op534_0", "HostToDevice38654705663", "Iteration 3",
             "trans_TransData_33", "GatherV2", "Conv3D", "a-op1-op2", "a-op1__2", "x-op_1", "a/b/", " /a ", "/a/",
             "//", "/", "", "  ", "123", "_1", "#7 ", "Step #12", "Default/ Add-op3 ",
             # not printable ASCII: Python's own reading (its blanks and digits are Unicode's)
             "Conv2D-op\u0663", "tab\tname_12", "Add\x1c", "Déconv 12", "Mul\u00a0"]
    assert op_types_of(pa.array(names)).to_pylist() == [op_type_of(n) for n in names]
    assert op_types_of(pa.array([], pa.string())).to_pylist() == []
    # names made of the pieces the rules look for, at random
    rng = np.random.default_rng(7)
    pieces = [*"/-_ #op0123456789AaBxyz.\t", "op", "-op", "__", "Default/", "\u0663", "é", "\u00a0"]
    names = ["".join(rng.choice(pieces, size=rng.integers(0, 14))) for _ in range(5000)]
    assert op_types_of(pa.array(names)).to_pylist() == [op_type_of(n) for n in names]
