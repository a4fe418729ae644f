"""Traces larger than memory (`nbprofiler.io.trace.disk`): the frames built on disk equal the in-memory
build's on every real trace and on the shapes that take its slow paths (many batches, tracks going back in
time across batches, B/E pairs, skipped events, flows, counters, the object form); the store is reused,
never written beside the profile, and chosen when the in-memory build would not fit."""
from __future__ import annotations

import json
import mmap
import os
import shutil
import threading
import warnings
import weakref
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import nbprofiler
from nbprofiler import _memory
from nbprofiler.io import _util, cache, json_slice, trace
from nbprofiler.io.trace import disk as trace_disk
from nbprofiler.io.trace import flows as trace_flows
from nbprofiler.io.trace import parse as trace_parse

from .conftest import DATA

REAL = [
    DATA / "mindspore2/lenet_pynative/vm_11535_20261121042531696_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json",
    DATA / "npu/trace_view_torch_npu/trace_view.json",
    DATA / "npu/ascend_pt_text_2rank/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",
    DATA / "legacy/run_1_widedeep/timeline_display_1.json",
    DATA / "legacy/run_2_lenet/ascend_timeline_display_1.json",
    DATA / "legacy/fixtures_mixed_ids/gpu_timeline_display_0.json",
]

# Every slow path at once: the object form, a B/E pair and an unmatched B, an impossible dur, a ts that is
# not a number, a missing pid and an empty one (the same track), a track that goes back in time, a flow
# and a counter with two series.
EDGE = {"otherData": {"v": 1}, "traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "P"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "T2"}},
    {"ph": "X", "name": "a", "pid": 1, "tid": 2, "ts": "10.5", "dur": 3, "args": {"type": "Conv2D"}},
    {"ph": "B", "name": "bb", "pid": 1, "tid": 2, "ts": "9", "args": {"k": 1}},
    {"ph": "E", "pid": 1, "tid": 2, "ts": "20"},
    {"ph": "X", "name": "b", "pid": 1, "tid": 2, "ts": "11", "dur": -5, "args": {}},
    {"ph": "X", "name": "c", "pid": 1, "tid": 3, "ts": "12", "dur": 1, "args": {}},
    {"ph": "X", "name": "c", "pid": 1, "tid": 3, "ts": "x12", "dur": 1, "args": {}},
    {"ph": "X", "name": "d", "tid": 3, "ts": "5", "dur": 1, "cat": "kk", "args": {}},
    {"ph": "X", "name": "e", "pid": "", "tid": 3, "ts": "6", "dur": 1, "args": {}},
    {"ph": "X", "name": "c", "pid": 1, "tid": 3, "ts": "8", "dur": 1, "args": {}},
    {"ph": "s", "name": "fl", "cat": "c1", "id": 7, "pid": 1, "tid": 2, "ts": "10.5"},
    {"ph": "f", "cat": "c1", "id": 7, "pid": 1, "tid": 3, "ts": "12", "bp": "e"},
    {"ph": "C", "name": "mem", "pid": 1, "ts": "13", "args": {"used": 5, "free": "3"}},
    {"ph": "B", "name": "lonely", "pid": 1, "tid": 2, "ts": "30"},
]}


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "MIN_BYTES", 0)


def _both(path: Path, tmp_path: Path, legacy: bool = False):
    """(in-memory data, its warnings, on-disk data, its warnings)."""
    with warnings.catch_warnings(record=True) as w_mem:
        warnings.simplefilter("always")
        mem = trace.load_trace([path], legacy=legacy, progress=False)
    store = tmp_path / "store"
    shutil.rmtree(store, ignore_errors=True)
    with warnings.catch_warnings(record=True) as w_disk:
        warnings.simplefilter("always")
        trace_disk.build(path, store, legacy=legacy, progress=False)
    disk = trace_disk._open(store)
    assert disk is not None
    return mem, [str(w.message) for w in w_mem], disk, [str(w.message) for w in w_disk]


def _assert_same(mem, disk):
    """The frames of both builds are equal; the store's timeline has its scope layers marked already, as
    `mark_scope_layers` marks the in-memory one."""
    assert disk.origin_us == mem.origin_us
    assert "is_scope" in disk.timeline.columns
    for name in trace.TRACE_FRAMES:
        if name == "timeline":
            pd.testing.assert_frame_equal(disk.timeline, trace.mark_scope_layers(mem.timeline, mem.tracks),
                                          check_categorical=True)
        else:
            pd.testing.assert_frame_equal(getattr(disk, name), getattr(mem, name), check_categorical=True)


@pytest.mark.parametrize("batch_rows", [None, 97])
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.parent.name if p.name == "trace_view.json" else p.name)
def test_on_disk_frames_equal_the_in_memory_ones_on_real_traces(path, batch_rows, tmp_path, monkeypatch):
    """Small batches make many runs per track, and tracks that go back in time across batches (these
    files are not written in time order) take the per-track sort."""
    if batch_rows:
        monkeypatch.setattr(trace_parse, "_BATCH_ROWS", batch_rows)
        monkeypatch.setattr(trace_parse, "_MIN_BATCH_ROWS", batch_rows)
    mem, w_mem, disk, w_disk = _both(path, tmp_path, legacy="timeline_display" in path.name)
    _assert_same(mem, disk)
    assert w_disk == w_mem
    assert len(disk.timeline) > 0


@pytest.mark.parametrize("batch_rows", [None, 1, 2, 3])
def test_on_disk_frames_equal_the_in_memory_ones_on_every_slow_path(batch_rows, tmp_path, monkeypatch):
    if batch_rows:
        monkeypatch.setattr(trace_parse, "_BATCH_ROWS", batch_rows)
        monkeypatch.setattr(trace_parse, "_MIN_BATCH_ROWS", batch_rows)
    path = tmp_path / "edge.json"
    path.write_text(json.dumps(EDGE))
    mem, w_mem, disk, w_disk = _both(path, tmp_path)
    _assert_same(mem, disk)
    assert w_disk == w_mem and len(w_disk) == 3  # the impossible dur, the bad ts, the unmatched B
    tl = disk.timeline
    assert tl["name"].astype(str).tolist() == ["d", "e", "bb", "a", "c", "c"]
    assert tl["ph"].astype(str).tolist() == ["X", "X", "B", "X", "X", "X"]
    assert tl.loc[tl["name"] == "bb", "dur_us"].tolist() == [11.0]
    assert disk.tracks["events"].tolist() == [2, 2, 2]  # "" and a missing pid are one track
    assert len(disk.flows) == 1 and sorted(disk.counters["series"]) == ["free", "used"]


def test_a_synthetic_trace_in_many_batches(tmp_path, monkeypatch):
    """A trace written in time order, read in ~70 batches: every track is the concatenation of its runs."""
    from nbprofiler.synthetic import write_trace
    path = tmp_path / "trace_view.json"
    write_trace(path, 3_000_000, seed=7)
    monkeypatch.setattr(trace_parse, "_BATCH_ROWS", 256)
    monkeypatch.setattr(trace_parse, "_MIN_BATCH_ROWS", 256)
    sorted_tracks = []
    real = trace_disk._sorted_track
    monkeypatch.setattr(trace_disk, "_sorted_track", lambda *a: sorted_tracks.append(1) or real(*a))
    mem, _, disk, _ = _both(path, tmp_path)
    _assert_same(mem, disk)
    assert not sorted_tracks and len(disk.timeline) > 9000
    # the args text is written once: every slice of the column is of the spilled runs' file, kept by the
    # store, and the spill's other columns are gone
    store = tmp_path / "store"
    index = np.load(store / trace_disk._ARGS_INDEX)
    assert set(index[:, 0].tolist()) == {0} and len(index) > 70
    assert pa.ipc.open_file(store / trace_disk._ARGS_FILES[1]).num_record_batches == 0
    assert not [p.name for p in store.iterdir() if "spill" in p.name]
    # the scope layers are marked once, by the build: an open maps is_scope and the marked op types, and
    # marking the frame again is no pass over its events
    scope = disk.timeline["is_scope"]
    assert scope.any() and not scope.to_numpy().flags.owndata
    assert (disk.timeline.loc[scope, "op_type"] == trace.SCOPE_LAYER_TYPE).all()
    assert trace.mark_scope_layers(disk.timeline, disk.tracks) is disk.timeline


def test_in_memory_a_sorted_track_leaves_no_batch_text_held_for_the_others(tmp_path, monkeypatch):
    """In memory, a thread going back in time is sorted (its args copied): the runs left of each batch are
    copied out of its text, so the frame holds each args text once."""
    monkeypatch.setattr(trace_parse, "_BATCH_ROWS", 64)
    monkeypatch.setattr(trace_parse, "_MIN_BATCH_ROWS", 64)
    events = []
    for i in range(400):   # thread 1 in time order, small args; thread 2 back in time each batch, large args
        events.append({"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": str(10 * i), "dur": 1, "args": {"i": i}})
        events.append({"ph": "X", "name": "b", "pid": 1, "tid": 2, "ts": str(10_000 - 10 * i), "dur": 1,
                       "args": {"i": i, "pad": "x" * 200}})
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps({"traceEvents": events}))
    mem, _, disk, _ = _both(path, tmp_path)
    _assert_same(mem, disk)
    tl = mem.timeline
    assert [json.loads(a)["i"] for a in tl.loc[tl["name"] == "a", "args"]] == list(range(400))
    assert [json.loads(a)["i"] for a in tl.loc[tl["name"] == "b", "args"]] == list(range(399, -1, -1))
    held, size = {}, {}
    chunks = tl["args"].array.__arrow_array__().chunks   # as held: large_string
    assert len(chunks) > 10
    for chunk in chunks:
        _, offsets, data = chunk.buffers()
        at = np.frombuffer(offsets, np.int64)[[chunk.offset, chunk.offset + len(chunk)]]
        held[data.address] = held.get(data.address, 0) + int(at[1] - at[0])
        size[data.address] = data.size
    text = sum(len(a) for a in tl["args"])
    assert sum(held.values()) == text
    assert all(2 * held[b] >= size[b] for b in size), "a batch's text is held for less than half of it"
    assert sum(size.values()) < 1.5 * text


def test_the_store_is_mapped_not_read_and_reused(tmp_path, monkeypatch):
    """A second open maps the store from the user cache without parsing; the timeline's columns are
    views of the mapped files (read-only), its args read where they are looked at."""
    src = tmp_path / "run"
    shutil.copytree(REAL[1].parent, src)
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    monkeypatch.setenv(trace_disk.ENV_FORCE, "1")
    first = trace.trace_data(nbprofiler.io.discover.discover(src)[0])
    assert "store" in first.timeline.attrs
    store = Path(first.timeline.attrs["store"])
    assert (tmp_path / "cache") in store.parents
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before  # nothing beside the profile
    monkeypatch.setattr(trace_disk, "build", lambda *a, **k: pytest.fail("parsed again"))
    again = trace.trace_data(nbprofiler.io.discover.discover(src)[0])
    _assert_same(first, again)
    start = again.timeline["start_us"].to_numpy()
    assert not start.flags.writeable and not start.flags.owndata
    assert again.timeline["args"].iloc[5] == first.timeline["args"].iloc[5]


def test_a_trace_too_large_for_memory_loads_on_disk(tmp_path, monkeypatch):
    """With less memory than the in-memory build needs (the guard's ``trace`` factor) but enough for
    the on-disk one, the profile loads from disk with the same frames, and nothing is refused."""
    run = tmp_path / "run"
    shutil.copytree(DATA / "mindspore2/lenet_pynative", run, ignore=shutil.ignore_patterns("logs"))
    tv = next(run.rglob("trace_view.json"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = nbprofiler.load(run).timeline
    size = tv.stat().st_size
    monkeypatch.setattr(_util, "TRACE_DISK_BASE_BYTES", 0)  # a small file: only the per-byte factors decide
    monkeypatch.setattr(_util, "available_memory_bytes",
                        lambda: int(size * (_util.EXPANSION["trace"] * 0.9) / _util.MEMORY_FRACTION))
    assert trace_disk.wanted([tv])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(run)
        timeline = prof.timeline
    assert "store" in timeline.attrs and not prof.problems
    pd.testing.assert_frame_equal(timeline, expected)
    assert np.isclose(prof.summary()["timeline"]["events"], len(expected))


def test_a_multi_file_source_never_loads_on_disk(monkeypatch):
    monkeypatch.setenv(trace_disk.ENV_FORCE, "1")
    assert not trace_disk.wanted([REAL[0], REAL[1]])
    assert trace_disk.wanted([REAL[0]])


def test_with_the_cache_off_the_files_go_to_a_temporary_folder(tmp_path, monkeypatch):
    """No cache dir: the timeline's files are written under the temp dir (removed at exit), never beside
    the profile, and the frames are the same."""
    monkeypatch.setenv(cache.ENV, "off")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    src = tmp_path / "run"
    shutil.copytree(REAL[1].parent, src)
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    monkeypatch.setenv(trace_disk.ENV_FORCE, "1")
    data = trace.trace_data(nbprofiler.io.discover.discover(src)[0])
    store = Path(data.timeline.attrs["store"])
    assert (tmp_path / "tmp") in store.parents
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before
    monkeypatch.delenv(trace_disk.ENV_FORCE)
    _assert_same(trace.load_trace([REAL[1]], progress=False), data)


def test_flows_pair_in_memory_as_the_sql_pairs_them_on_disk():
    """`trace_flows.pair_flows` (in memory) and `trace_flows.FLOW_SQL` (on disk) apply one rule: first s, then the
    first f or else the last t, ordered by start, cat, id. Random events with repeated and missing ends,
    start-time ties and the null-as-"" strings."""
    rng = np.random.default_rng(3)
    n = 4000
    kind = rng.choice([trace_parse.KIND_S, trace_parse.KIND_F, trace_parse.KIND_T], n, p=[0.45, 0.3, 0.25])
    fl = pa.table({"kind": pa.array(kind.astype(np.int8)),
                   "cat": pa.array(rng.choice(["", "a", "HostToDevice", "ab"], n)),
                   "id": pa.array(rng.integers(0, 900, n).astype(str)),
                   "name": pa.array(rng.choice(["", "x", "flow y"], n)),
                   "seq": pa.array(rng.permutation(n * 3)[:n].astype(np.int64)),
                   "track": pa.array(rng.integers(0, 7, n).astype(np.int32)),
                   "us": pa.array(rng.integers(0, 50, n).astype(np.float64))})  # many ties in the start times
    sql = trace_parse.query(trace_flows.FLOW_SQL.format(s=trace_parse.KIND_S, f=trace_parse.KIND_F, t=trace_parse.KIND_T),
                       fl=fl).to_pandas()
    mem = trace_flows.pair_flows(fl).to_pandas()
    assert 300 < len(mem) < 900
    pd.testing.assert_frame_equal(mem.astype(sql.dtypes.to_dict()), sql)
    assert trace_flows.pair_flows(fl.slice(0, 0)).num_rows == 0


def test_flows_with_ids_of_every_form_pair_alike_in_memory_and_on_disk(tmp_path, monkeypatch):
    """The in-memory build keys a batch's flows by integer ids when every id of the batch is one written
    canonically, and by their text otherwise; read in small batches, some batches take each way. On disk the
    events are spread over many files by their flow: an id hashes alike in either form."""
    monkeypatch.setattr(trace_flows, "_TRACE_BYTES_PER_PART", 512)
    monkeypatch.setattr(trace_parse, "_BATCH_ROWS", 16)
    monkeypatch.setattr(trace_parse, "_MIN_BATCH_ROWS", 16)
    rng = np.random.default_rng(5)
    numbers = [7, "7", "07", "007", 8, "9", -3, "-3"]  # each reads as an integer; "07" is not the id 7
    # ids not written as integers ("-0", ""), and large ones: int64's least, 10 ** 17 and 2 ** 62 as JSON numbers
    any_form = numbers + ["+7", "x8", "-0", "", "1704161511422904204", str(-2 ** 63), 2 ** 62, 10 ** 17, None]
    events = [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": "0", "dur": 1}]
    for i in range(480):
        event = {"ph": str(rng.choice(["s", "f", "t"])), "name": f"fl{i % 5}", "pid": 1, "tid": int(rng.integers(1, 4)),
                 "ts": str(int(rng.integers(0, 60))), "cat": str(rng.choice(["a", "b", ""]))}
        forms = [int(rng.integers(0, 30))] if i < 160 else numbers if i < 320 else any_form
        flow_id = forms[int(rng.integers(0, len(forms)))]
        if flow_id is not None:
            event["id"] = flow_id
        events.append(event)
    path = tmp_path / "flows.json"
    path.write_text(json.dumps(events))
    mem, _, disk, _ = _both(path, tmp_path)
    _assert_same(mem, disk)
    assert len(mem.flows) > 20 and {"07", "007", "+7", "x8", "-0", "1704161511422904204", str(-2 ** 63),
                                    str(10 ** 17)} <= set(mem.flows["id"])


def test_an_id_is_an_integer_only_as_the_integer_prints():
    """`integer_ids`: the same answer for an id whether its batch's ids all cast (Arrow's cast) or not (id by
    id), at int64's ends too."""
    cases = {"7": 7, "07": None, "+7": None, "-0": None, "0": 0, "-3": -3, str(2 ** 63 - 1): 2 ** 63 - 1,
             str(2 ** 63): None, str(-2 ** 63): -2 ** 63, str(-2 ** 63 - 1): None, "7.0": None, "1e3": None,
             " 7": None, "x": None, "": None}
    ids = pa.array(list(cases))
    ok, number = trace_flows.integer_ids(ids)
    assert dict(zip(cases, (int(n) if k else None for k, n in zip(ok, number)))) == cases
    for text, value in cases.items():   # alone, a castable id takes Arrow's path
        ok, number = trace_flows.integer_ids(pa.array([text]))
        assert (int(number[0]) if ok[0] else None) == value, text
    for ids in (["7", None], ["7", None, "x"]):   # no id is no integer, on either path
        assert trace_flows.integer_ids(pa.array(ids))[0].tolist() == [True] + [False] * (len(ids) - 1)
    assert trace_flows.flow_ids(pa.array(["7", "12"])).tolist() == [7, 12]
    assert trace_flows.flow_ids(pa.array(["7", "012"])).to_pylist() == ["7", "012"]
    # a text batch hashes its integer ids as a batch of integers does
    cat = np.array([1, 1], np.int32)
    assert (trace_flows.flow_hash(cat, pa.array(["7", "x"]))[0] == trace_flows.flow_hash(cat, np.array([7, 8]))[0])


@pytest.mark.parametrize("source", ["generated", "torch_npu", "torch_npu as one document"])
def test_spilled_flows_spread_over_many_files_pair_as_in_memory(tmp_path, monkeypatch, source):
    """On disk the flow events are spilled to files by their flow, each paired alone, and the pairs cut by start
    time, each part ordered alone: with a file per ~2 KB of trace and a part per 5 pairs, many of each, the
    frame is the in-memory one, row for row (ties in the start times across the parts' edges included). Also
    where the events are read from the whole JSON document (its array cannot be read alone: a long value
    follows it)."""
    monkeypatch.setattr(trace_flows, "_TRACE_BYTES_PER_PART", 2048)
    monkeypatch.setattr(trace_flows, "_PAIRS_PER_RANGE", 5)
    monkeypatch.setattr(trace_flows, "_SAMPLE_EVERY", 1)
    if source == "torch_npu":
        path = REAL[1]
    elif source == "torch_npu as one document":
        events = json.loads(REAL[1].read_text())
        events = events["traceEvents"] if isinstance(events, dict) else events
        big = [{"id": i, "name": "x" * 100} for i in range(2 * json_slice.SMALL_VALUE_BYTES // 100)]
        path = tmp_path / "trace_view.json"
        path.write_text(json.dumps({"traceEvents": events, "deviceProperties": big}))
        documents = []
        real_stream = trace_parse._stream

        def stream(*args, **kwargs):
            out = real_stream(*args, **kwargs)
            documents.append(kwargs["stats"].get("docs"))
            return out
        monkeypatch.setattr(trace_parse, "_stream", stream)
    else:
        rng = np.random.default_rng(11)
        events = [{"ph": "X", "name": "k", "pid": 1, "tid": t, "ts": "0", "dur": 100} for t in (1, 2, 3)]
        for i in range(600):
            event = {"ph": str(rng.choice(["s", "f", "t"], p=[0.45, 0.35, 0.2])), "name": f"fl{i % 4}", "pid": 1,
                     "tid": int(rng.integers(1, 4)), "ts": str(int(rng.integers(0, 40))),  # many equal starts
                     "cat": str(rng.choice(["a", "b", ""])), "id": int(rng.integers(0, 120))}
            events.append(event)
        path = tmp_path / "flows.json"
        path.write_text(json.dumps(events))
    used = {"events": set(), "pairs": set()}   # the files of events and of pairs the build wrote
    real_add = trace_flows._Buckets.add

    def add(self, table, bucket, n):
        used["pairs" if self.prefix.name.endswith("-pairs") else "events"].update(np.unique(bucket).tolist())
        return real_add(self, table, bucket, n)
    monkeypatch.setattr(trace_flows._Buckets, "add", add)
    mem, _, disk, _ = _both(path, tmp_path)
    if source == "torch_npu as one document":
        assert documents == [1, 1]   # both builds read the whole document
    assert len(used["events"]) >= 8 and len(used["pairs"]) >= 8, used
    assert len(mem.flows) >= 40
    _assert_same(mem, disk)
    # the spilled files are gone: the store holds its own files only
    assert not [p.name for p in (tmp_path / "store").iterdir() if "spill" in p.name or "-flows" in p.name]


def test_passes_over_a_timeline_on_disk_release_its_pages(tmp_path, monkeypatch):
    """The timeline index's passes over every event drop the pages of the store's mapped files (its columns,
    flows, tracks, counters) from resident memory afterwards (madvise), so one pass's pages do not add up with
    the next one's; in memory, nothing to do."""
    from nbprofiler.analysis.timeline import TimelineIndex
    store = tmp_path / "store"
    trace_disk.build(REAL[0], store, legacy=False, progress=False)
    disk = trace_disk._open(store)
    advised = []

    class Recorder:
        def __init__(self, real):
            self.real = real

        def madvise(self, option, *args):
            advised.append(option)
            return self.real.madvise(option, *args)

    # the timeline's columns and is_scope, then the tracks, flows and counters files (a map no frame's column
    # holds, as an empty frame's, is gone)
    maps = _memory.mapped(store)
    columns = len(trace_disk._COLUMNS) + 1
    assert len(maps) == columns + 3 and all(m is not None for m in maps[:columns])
    maps = [m for m in maps if m is not None]
    recorders = [Recorder(getattr(m, "_mmap", m)) for m in maps]
    monkeypatch.setitem(_memory._MAPS, str(store), [weakref.ref(r) for r in recorders])
    index = TimelineIndex(disk.timeline)
    assert len(advised) >= len(maps) and set(advised) == {mmap.MADV_DONTNEED}
    assert len(index.levels) and index.n == len(disk.timeline)
    mem = trace.load_trace([REAL[0]], progress=False)
    _memory.release_pages(mem.timeline)  # no store: nothing to release, no error


def _resident_share(path: Path) -> float:
    """The share of ``path``'s pages in the page cache (mincore on a private map of it)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    page = mmap.PAGESIZE
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    try:
        n = (len(mm) + page - 1) // page
        vec = (ctypes.c_ubyte * n)()
        base = ctypes.c_char.from_buffer(mm)
        try:
            if libc.mincore(ctypes.c_void_p(ctypes.addressof(base)), ctypes.c_size_t(len(mm)), vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
        finally:
            del base
        return sum(v & 1 for v in vec) / n
    finally:
        mm.close()


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise to empty the page cache")
def test_opening_a_store_reads_a_page_or_two_of_each_args_batch_not_the_text(tmp_path):
    """The store's args column is made of slices of its batches, each found from its metadata and its
    validity bitmap: the open reads those pages, not the kernel's read-around of each (up to the device's
    readahead), which read the whole file (2.7 GB at 10 GB)."""
    store = tmp_path / "store"
    store.mkdir()
    rng = np.random.default_rng(3)
    texts = []
    path = store / trace_disk._ARGS_FILES[0]
    with pa.ipc.new_file(str(path), trace_disk._ARGS_SCHEMA) as writer:
        for b in range(24):   # 24 batches of ~1.6 MB, some args missing (a validity bitmap)
            batch = [None if i % 7 == 0 else f'{{"batch": {b}, "i": {i}, "pad": "{"x" * int(rng.integers(40, 80))}"}}'
                     for i in range(25_000)]
            texts.append(batch)
            writer.write_batch(pa.record_batch([pa.array(batch, pa.large_string())], schema=trace_disk._ARGS_SCHEMA))
    index = np.array([[0, b, lo, hi] for b in range(24) for lo, hi in ((0, 10_000), (10_000, 25_000))], np.int64)
    np.save(store / trace_disk._ARGS_INDEX, index)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if _resident_share(path) > 0.05:
        pytest.skip("this file system keeps the file in memory: nothing to measure")
    args = trace_disk._store_args(store)
    assert args.num_chunks == len(index)
    assert _resident_share(path) < 0.25
    assert args.to_pylist() == [t for batch in texts for t in batch]


def test_the_spilled_args_leave_the_page_cache_two_chunks_behind_the_end(tmp_path, monkeypatch):
    """`ColdFile.written` starts the writeback of each whole chunk once and drops the pages of the one two
    before it, wherever the writes fall; what was written reads back whole."""
    advised = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, lo, n, advice: advised.append((lo, n, advice)))
    monkeypatch.setattr(_util.ColdFile, "CHUNK", 1 << 20)
    cold = _util.ColdFile(tmp_path / "args.arrow")
    rows = []
    with pa.ipc.new_file(cold.file, trace_disk._ARGS_SCHEMA) as writer:
        for k in range(60):   # ~105 KB per batch: ~6.3 MB in all
            batch = [f"{k}-{i}-" + "y" * 90 for i in range(1000)]
            rows += batch
            writer.write_batch(pa.record_batch([pa.array(batch, pa.large_string())], schema=trace_disk._ARGS_SCHEMA))
            cold.written()
    cold.close()
    mb, dontneed = 1 << 20, os.POSIX_FADV_DONTNEED
    whole = (tmp_path / "args.arrow").stat().st_size // mb
    assert whole >= 4  # whole chunks, then a part of one
    # chunk k's writeback is started (a DONTNEED of dirty pages), then chunk k - 2's pages are dropped
    expected = []
    for k in range(whole):
        expected += [(k * mb, mb, dontneed)] + ([((k - 2) * mb, mb, dontneed)] if k >= 2 else [])
    assert advised == expected
    assert pa.ipc.open_file(tmp_path / "args.arrow").read_all().column(0).to_pylist() == rows


def test_a_failed_read_lets_go_of_what_it_kept(tmp_path, monkeypatch):
    """A read that fails part-way (here a dur that is not a number: the retry reads dur as text) discards
    what its sink kept before the retry runs, so the two are never in memory together (duckdb's read: the
    compiled reader's own is in test_trace_scan)."""
    from nbprofiler.synthetic import write_trace
    monkeypatch.setenv("NBPROFILER_NO_SCAN", "1")
    path = tmp_path / "trace.json"
    write_trace(path, 40_000_000, seed=3)  # past duckdb's first read buffer, so batches arrive before the error
    text = path.read_text().rstrip()
    path.write_text(text[:-1] + ', {"ph": "X", "name": "late", "pid": 1, "tid": 1, "ts": "1", "dur": "n/a"}]')
    discarded = []
    real = trace_disk._Sink.discard

    def discard(sink):
        discarded.append(len(sink.kept))
        real(sink)
        assert not sink.kept and not sink.flows.batches
    monkeypatch.setattr(trace_disk._Sink, "discard", discard)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        data = trace.load_trace([path], progress=False)
    assert discarded and discarded[0] >= 4  # the first read had kept several batches when it failed
    assert "late" not in set(data.timeline["name"].astype(str)) and len(data.timeline) > 100_000


def test_a_build_that_fails_while_its_flows_are_paired_leaves_nothing(tmp_path, monkeypatch):
    """The flows are paired on a thread while the timeline's columns are written: when writing the columns
    fails, the error is the user's, and the build's directory goes only once the pairing is done with it (no
    file of it is left, nor written into a removed directory)."""
    monkeypatch.setattr(trace_flows, "_TRACE_BYTES_PER_PART", 2048)   # many files to pair
    paired, started = [], threading.Event()
    real_pair = trace_flows.SpilledFlows.pair

    def pair(self, *args):
        started.set()
        out = real_pair(self, *args)
        paired.append(out)
        return out
    monkeypatch.setattr(trace_flows.SpilledFlows, "pair", pair)

    def write_filled(self):
        assert started.wait(60)   # the pairing is under way when the columns' write fails
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(trace_disk._ColumnFiles, "_write_filled", write_filled)
    dest = tmp_path / "cache" / "store"
    with pytest.raises(OSError, match="No space left"):
        trace_disk.build(REAL[1], dest, legacy=False, progress=False)
    assert paired == [True]   # the pairing ran to its end before the directory was removed
    assert not list((tmp_path / "cache").iterdir())


def test_a_digest_that_fails_never_leaves_the_reader_waiting(monkeypatch):
    """The digest fails once the reader has read every batch and waits to hand over its end with the
    queue full: the load raises the digest's error and the reader ends (it stops handing over what
    nobody takes), instead of both waiting on each other for ever."""
    import queue
    import threading
    import time
    monkeypatch.setattr(trace_parse, "_BATCH_ROWS", 512)
    monkeypatch.setattr(trace_parse, "_MIN_BATCH_ROWS", 512)
    path = REAL[0]
    total = len(trace_parse.parse_chunks(path))
    assert total > 8
    queues = []

    class Watched(queue.Queue):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            queues.append(self)
    monkeypatch.setattr(queue, "Queue", Watched)
    taken = []

    def digest(batch, offset):
        taken.append(offset)
        if len(taken) == total - queues[0].maxsize:  # the rest of the batches fill the queue
            deadline = time.monotonic() + 60
            while not queues[0].full() and time.monotonic() < deadline:
                time.sleep(0.001)
            raise RuntimeError("digest failed")
        return trace_parse.digest_batch(batch, offset)
    outcome = []

    def load():
        try:
            trace_parse.parse_chunks(path, make_digest=lambda: digest)
        except RuntimeError as e:
            outcome.append(str(e))
    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "the load hung"
    assert outcome == ["digest failed"]
    assert not any(t.name == "nbprofiler-trace-reader" for t in threading.enumerate())


def test_frames_on_disk_can_be_edited_in_place_without_writing_the_files(tmp_path):
    """The store's columns are read-only maps: an in-place edit copies the column first, the files keep
    what was loaded, and a re-open reads the original values."""
    store = tmp_path / "store"
    trace_disk.build(REAL[1], store, legacy=False, progress=False)  # torch_npu: it has flows
    files = {p.name: p.read_bytes() for p in store.iterdir()}
    data = trace_disk._open(store)
    tl, flows = data.timeline, data.flows
    first_start, first_name = float(tl["start_us"].iloc[0]), str(tl["name"].iloc[0])
    tl.loc[0, "start_us"] = -1.0
    tl.iloc[1, tl.columns.get_loc("dur_us")] = 5.0
    tl.loc[0, "name"] = tl["name"].iloc[7]
    flows.loc[0, "end_us"] = -2.0
    assert tl["start_us"].iloc[0] == -1.0 and tl["dur_us"].iloc[1] == 5.0 and flows["end_us"].iloc[0] == -2.0
    assert {p.name: p.read_bytes() for p in store.iterdir()} == files
    again = trace_disk._open(store)
    assert again.timeline["start_us"].iloc[0] == first_start and str(again.timeline["name"].iloc[0]) == first_name


@pytest.mark.parametrize("pids, tids", [(3, 5), (1, 1), (2, 70_000)])  # the last: more cells than the table holds
def test_distinct_pairs_are_what_np_unique_gives(pids, tids):
    rng = np.random.default_rng(0)
    pid = rng.integers(0, pids, 2000).astype(np.int32)
    tid = rng.integers(0, tids, 2000).astype(np.int32)
    keys, index = trace_disk._distinct_pairs(pid, tid)
    want_keys, want_index = np.unique((pid.astype(np.int64) << 32) | tid, return_inverse=True)
    assert np.array_equal(keys, want_keys) and np.array_equal(index, want_index)


@pytest.mark.parametrize("fold", [1, 3, 100])
@pytest.mark.parametrize("with_empty", [True, False])
def test_names_coded_per_batch_get_the_running_dictionarys_codes(fold, with_empty, monkeypatch):
    """The names are coded against each batch's own dictionary and unified `_FOLD` batches at a time: every
    batch's codes mapped to the global ones, the counts and the final values are those of `_Codes`, the
    running dictionary that looks each value up as it comes, and the op types are numbered in the order they
    first appear among the final values."""
    from nbprofiler.io.trace.naming import op_types_of
    monkeypatch.setattr(trace_disk, "_FOLD", fold)
    rng = np.random.default_rng(fold)
    words = [f"Default/net/Conv2D-op{i}" for i in range(40)] + ["MatMul", "ProfilerStep#1"] + \
        ([""] if with_empty else [])
    running, per_batch = trace_disk._Codes(), trace_disk._BatchNames(op_types_of)
    local, want_counts = [], np.zeros(len(words) + 1, np.int64)
    for _ in range(10):
        values = [None if rng.random() < 0.1 else words[i] for i in rng.integers(0, len(words), 50)]
        arr = pc.dictionary_encode(pa.array(values, pa.string()))
        want = running.of(arr)
        codes = per_batch.local(arr)
        per_batch.use(codes)
        np.add.at(want_counts, want, 1)
        local.append((per_batch.batches - 1, codes, want))
    counts = per_batch.used()
    for batch, codes, want in local:
        assert np.array_equal(per_batch.global_of[batch][codes], want)
    assert np.array_equal(counts[:len(want_counts)], want_counts[:len(counts)]) and counts.sum() == 500
    for got, want in zip(per_batch.final(), running.final()):
        assert got.equals(want) if isinstance(got, pa.Array) else np.array_equal(got, want)
    got_of, got_results = per_batch.final_derived()
    types = op_types_of(running.final()[1]).to_pylist()
    want_results = list(dict.fromkeys(types))
    assert got_results == want_results and got_of.tolist() == [want_results.index(t) for t in types]


@pytest.mark.parametrize("batch_rows", [None, 2])
def test_equal_starts_on_one_track_of_two_pids_keep_their_file_order(batch_rows, tmp_path, monkeypatch):
    """A missing pid and an empty one are one track: its events of equal start, interleaved between the
    two in the file, keep their file order on disk as in memory."""
    if batch_rows:
        monkeypatch.setattr(trace_parse, "_BATCH_ROWS", batch_rows)
        monkeypatch.setattr(trace_parse, "_MIN_BATCH_ROWS", batch_rows)
    events = [{"ph": "X", "name": name, **pid, "tid": 3, "ts": "5", "dur": 1, "args": {"i": i}}
              for i, (name, pid) in enumerate((("p", {}), ("q", {"pid": ""}), ("r", {}), ("s", {"pid": ""}),
                                               ("t", {})))]
    path = tmp_path / "equal.json"
    path.write_text(json.dumps({"traceEvents": events}))
    mem, _, disk, _ = _both(path, tmp_path)
    _assert_same(mem, disk)
    assert disk.timeline["name"].astype(str).tolist() == ["p", "q", "r", "s", "t"]
    assert [json.loads(a)["i"] for a in disk.timeline["args"]] == [0, 1, 2, 3, 4]
