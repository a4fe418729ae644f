"""Object-form traces ({"traceEvents": [...], ...}) read through the byte range of their event array:
the range is exact whatever surrounds it, and the frames equal those of the same events as a bare array."""
from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from nbprofiler.io import json_slice

from .conftest import DATA, load_quietly

REAL_TRACES = {
    "lenet_pynative": next((DATA / "mindspore2" / "lenet_pynative").rglob("trace_view.json"), None),
    "ascend_pt": DATA / "npu" / "ascend_pt_text_2rank" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json",
}
AROUND = {"schemaVersion": 1, "distributedInfo": {"backend": "hccl", "rank": 0, "world_size": 2},
          "deviceProperties": [{"id": 0, "name": "Ascend910B ]}[{\"", "totalGlobalMem": 68719476736}],
          "traceName": "rank0 \"]}\\"}
# Non-ASCII text before the array: the offsets are byte offsets, not character offsets.
AROUND_UTF8 = {**AROUND, "deviceProperties": [{"id": 0, "name": "昇腾910B ]}[{\"é"}]}


def _wrap(events_text: str, array_at: str, indent: bool, around: dict = AROUND) -> str:
    around = json.dumps(around, indent=1 if indent else None, ensure_ascii=False)[1:-1].strip()
    sep = ",\n " if indent else ", "
    if array_at == "first":
        return '{"traceEvents": ' + events_text + sep + around + "}"
    return "{" + around + sep + '"traceEvents": ' + events_text + "\n}\n"


def _run_dir(root, text: str):
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "trace_view.json").write_text(text)
    return root


@pytest.mark.parametrize("name", list(REAL_TRACES))
@pytest.mark.parametrize("array_at", ["first", "last"])
@pytest.mark.parametrize("indent", [False, True])
@pytest.mark.parametrize("around", [AROUND, AROUND_UTF8], ids=["ascii", "utf8"])
def test_span_is_exactly_the_event_array(tmp_path, name, array_at, indent, around):
    events = REAL_TRACES[name].read_text()
    path = tmp_path / "t.json"
    path.write_text(_wrap(events.strip(), array_at, indent, around), encoding="utf-8")
    start, end = json_slice.array_span(path)
    data = path.read_bytes()
    assert json.loads(data[start:end]) == json.loads(events)
    rest = json.loads(data[:start] + b"[]" + data[end:])
    assert rest == {**around, "traceEvents": []}


def _read_through(monkeypatch, how: str) -> list:
    """Make object-form reads go through ``how``: "native" (the compiled reader, reading the array in
    place), or duckdb through "copy" (`ArrayCopy`), "slice" (no copy can be made) or "failed copy" (the copy
    fails midway); returns the list of copies started."""
    started = []
    if how != "native":
        monkeypatch.setenv("NBPROFILER_NO_SCAN", "1")
    real_start = json_slice.ArrayCopy.start

    def start(*args, **kwargs):
        if how == "slice":
            return None
        copy = real_start(*args, **kwargs)
        started.append(copy)
        return copy
    monkeypatch.setattr(json_slice.ArrayCopy, "start", start)
    if how == "failed copy":
        def fail(self, path, start, end):
            self._error = OSError(28, "No space left on device")
        monkeypatch.setattr(json_slice.ArrayCopy, "_copy", fail)
    return started


@pytest.mark.parametrize("name", list(REAL_TRACES))
@pytest.mark.parametrize("array_at", ["first", "last"])
@pytest.mark.parametrize("how", ["native", "copy", "slice", "failed copy"])
def test_object_form_frames_equal_the_array_forms(tmp_path, monkeypatch, name, array_at, how):
    events = REAL_TRACES[name].read_text().strip()
    bare = load_quietly(_run_dir(tmp_path / "bare", events))
    assert len(bare.timeline) > 1000  # built first: an array file's read copies its checked bytes too
    started = _read_through(monkeypatch, how)
    wrapped = load_quietly(_run_dir(tmp_path / "wrapped", _wrap(events, array_at, indent=False)))
    pd.testing.assert_frame_equal(wrapped.timeline, bare.timeline)
    pd.testing.assert_frame_equal(wrapped.timeline_tracks, bare.timeline_tracks)
    assert wrapped.problems == bare.problems == []
    assert len(started) == (0 if how in ("slice", "native") else 1)


def test_small_and_empty_arrays_and_what_is_not_an_object_trace(tmp_path):
    path = tmp_path / "t.json"
    for doc in ({"traceEvents": []}, {"traceEvents": [{"ph": "X", "name": "a]\"}", "ts": 1, "dur": 2}]},
                {"meta": [1, {"k": "]"}], "traceEvents": [{"ph": "i", "name": "[", "ts": 0}]}):
        path.write_text(json.dumps(doc))
        start, end = json_slice.array_span(path)
        assert json.loads(path.read_bytes()[start:end]) == doc["traceEvents"]
    for text in ('[{"ph": "X"}]', '{"traceEvents": {"a": 1}}', '{"traceEvents": [1, 2]', '{"x": "traceEvents"}',
                 '{"traceEvents": [1]} trailing'):
        path.write_text(text)
        assert json_slice.array_span(path) is None, text


def test_a_long_value_after_the_array_is_not_mistaken_for_it(tmp_path):
    """A trailing value longer than SMALL_VALUE_BYTES is taken for the array; the read then fails and the
    file is read as one document, with the same frames."""
    events = REAL_TRACES["lenet_pynative"].read_text().strip()
    big = [{"id": i, "name": "x" * 100} for i in range(2 * json_slice.SMALL_VALUE_BYTES // 100)]
    text = '{"traceEvents": ' + events + ', "deviceProperties": ' + json.dumps(big) + "}"
    path = tmp_path / "t.json"
    path.write_text(text)
    start, end = json_slice.array_span(path)
    assert path.read_bytes()[end - 1:end] == b"]" and end > len(text) - len(json.dumps(big)) - 5  # the wrong ]
    bare = load_quietly(_run_dir(tmp_path / "bare", events))
    wrapped = load_quietly(_run_dir(tmp_path / "wrapped", text))
    pd.testing.assert_frame_equal(wrapped.timeline, bare.timeline)


def test_slices_are_read_only_and_released():
    url = json_slice.slice_url(REAL_TRACES["lenet_pynative"], 0, 10)
    fs = json_slice._filesystem()
    with fs.open(url, "rb") as f:
        assert f.read() == REAL_TRACES["lenet_pynative"].read_bytes()[:10]
    with pytest.raises(PermissionError):
        fs.open(url, "wb")
    json_slice.release(url)
    with pytest.raises(KeyError):
        fs.open(url, "rb")


def test_an_array_copy_is_the_exact_range_and_leaves_nothing_behind(tmp_path):
    source = REAL_TRACES["ascend_pt"]
    data = source.read_bytes()
    start, end = 1000, len(data) - 777
    (tmp_path / "copies").mkdir()
    copy = json_slice.ArrayCopy.start(source, start, end, directory=tmp_path / "copies")
    with open(copy.path(), "rb") as f:
        assert f.read() == data[start:end]
    assert list((tmp_path / "copies").iterdir()) == []  # unnamed while it exists
    held = os.stat(copy.path())
    copy.close()
    # closed with its descriptor: its path names nothing, or (the number reused by another thread of this
    # process opening a file meanwhile) another file
    try:
        now = os.stat(copy.path())
    except OSError:
        pass
    else:
        assert (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino)
    assert json_slice.ArrayCopy.start(source, 0, json_slice.COPY_MAX_BYTES + 1, directory=tmp_path) is None

    trimmed = json_slice.ArrayCopy.start(source, start, len(data), directory=tmp_path / "copies")
    trimmed.trim(end)  # the end became known while it copied
    with open(trimmed.path(), "rb") as f:
        assert f.read() == data[start:end]
    trimmed.close()


def test_the_copied_span_is_the_event_array(tmp_path):
    events = REAL_TRACES["ascend_pt"].read_text().strip()
    path = tmp_path / "t.json"
    path.write_text(_wrap(events, "first", indent=True, around=AROUND_UTF8), encoding="utf-8")
    span, copy = json_slice.copied_span(path, directory=tmp_path)
    assert span == json_slice.array_span(path)
    with open(copy.path(), "rb") as f:
        assert json.loads(f.read()) == json.loads(events)
    copy.close()
    path.write_text('{"traceEvents": [1, 2]')  # no end: no span, and the copy started is dropped
    assert json_slice.copied_span(path, directory=tmp_path) == (None, None)


def test_the_copy_is_never_made_in_the_profile_folder(tmp_path, monkeypatch):
    """A cache directory set inside the trace's folder is not used for the copy either (nor created there):
    the copy goes to the user cache directory, as the cache's own entries do. (duckdb's read: the compiled
    reader reads the array in place, without a copy.)"""
    import platformdirs
    monkeypatch.setenv("NBPROFILER_NO_SCAN", "1")
    events = REAL_TRACES["lenet_pynative"].read_text().strip()
    run = _run_dir(tmp_path / "wrapped", _wrap(events, "last", indent=False))
    monkeypatch.setenv("NBPROFILER_CACHE_DIR", str(run / "ASCEND_PROFILER_OUTPUT" / "cache"))
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda *a, **k: str(tmp_path / "user-cache"))
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    started = []
    real_start = json_slice.ArrayCopy.start

    def start(path, begin, end, directory=None):
        started.append(directory)
        return real_start(path, begin, end, directory)
    monkeypatch.setattr(json_slice.ArrayCopy, "start", start)
    assert len(load_quietly(run).timeline) > 1000
    assert started == [(tmp_path / "user-cache").resolve()]
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before
