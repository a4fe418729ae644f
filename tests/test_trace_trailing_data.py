"""Data after the end of a trace's JSON document (after the ``]`` of an array trace, the ``}`` of an object
one): the document's events load, the rest is ignored, and a warning names the file, the byte offset and
the line where that data starts (copies of real traces with data appended)."""
from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import pytest

import nbprofiler
from nbprofiler.errors import MalformedFileError, TruncatedFileError
from nbprofiler.io import trace

from .conftest import DATA

EXTRA = b'{"ph": "X", "name": "EXTRA_AFTER_END", "pid": 1, "tid": 1, "ts": "1", "dur": 1}'
LEGACY = DATA / "legacy" / "run_1_widedeep"
MS2 = DATA / "mindspore2" / "lenet_pynative"


def _copy(src: Path, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NBPROFILER_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copytree(src, tmp_path / "run", ignore=shutil.ignore_patterns("logs"))
    return tmp_path / "run"


def _load(run: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(run)
        return prof, prof.timeline


def _trailing(prof, path: Path) -> list:
    return [p for p in prof.problems if p.file == str(path) and "after the end of the JSON document" in p.error]


@pytest.mark.parametrize("src,name,tail", [
    (LEGACY, "timeline_display_1.json", b"\ngarbage written after the array\n"),
    (LEGACY, "timeline_display_1.json", b"]"),
    (MS2, "trace_view.json", b"[" + EXTRA + b"]"),
    (MS2, "trace_view.json", b"\n\n," + EXTRA + b"]\n"),
])
def test_data_after_the_array_is_ignored_with_a_warning(tmp_path, monkeypatch, src, name, tail):
    run = _copy(src, tmp_path, monkeypatch)
    path = next(run.rglob(name))
    clean = path.read_bytes().rstrip()
    assert clean.endswith(b"]")
    expected = len(trace.load_trace(path, progress=False).timeline)
    path.write_bytes(clean + tail)
    at = len(clean) + len(tail) - len(tail.lstrip())
    line = clean.count(b"\n") + 1 + tail[:len(tail) - len(tail.lstrip())].count(b"\n")
    prof, timeline = _load(run)
    assert len(timeline) == expected
    assert "EXTRA_AFTER_END" not in set(timeline["name"])
    found = _trailing(prof, path)
    assert len(found) == 1, prof.problems
    assert found[0].kind == "warning" and found[0].line == line
    assert re.search(rf"at byte {at:,}\b", found[0].error), found[0].error
    assert not [p for p in prof.problems if p.file == str(path) and p.kind == "error"]


def _object_form(path: Path) -> bytes:
    doc = b'{"traceEvents": ' + path.read_bytes().rstrip() + b', "displayTimeUnit": "ms"}'
    path.write_bytes(doc)
    return doc


@pytest.mark.parametrize("tail", [b'\n{"traceEvents": [' + EXTRA + b"]}\n", b"}", b" trailing text"])
def test_data_after_an_object_form_trace_is_ignored_with_a_warning(tmp_path, monkeypatch, tail):
    """An object-form trace followed by a second document (which duckdb would read too), a stray brace
    or text."""
    run = _copy(MS2, tmp_path, monkeypatch)
    path = next(run.rglob("trace_view.json"))
    doc = _object_form(path)
    expected = len(trace.load_trace(path, progress=False).timeline)
    path.write_bytes(doc + tail)
    at = len(doc) + len(tail) - len(tail.lstrip())
    prof, timeline = _load(run)
    assert len(timeline) == expected
    assert "EXTRA_AFTER_END" not in set(timeline["name"])
    found = _trailing(prof, path)
    assert len(found) == 1, prof.problems
    assert f"at byte {at:,}" in found[0].error and found[0].kind == "warning"


def test_a_complete_trace_with_blank_space_after_it_warns_nothing(tmp_path, monkeypatch):
    run = _copy(MS2, tmp_path, monkeypatch)
    path = next(run.rglob("trace_view.json"))
    path.write_bytes(path.read_bytes().rstrip() + b"\n\r\n  \t\n")
    prof, timeline = _load(run)
    assert not timeline.empty
    assert not [p for p in prof.problems if p.file == str(path)]


def test_a_truncated_trace_is_still_an_error(tmp_path):
    path = tmp_path / "trace_view.json"
    data = next(MS2.rglob("trace_view.json")).read_bytes().rstrip()
    path.write_bytes(data[:-40])
    with pytest.raises(TruncatedFileError):
        trace.load_trace(path, progress=False)


def test_the_exact_reference_parse_still_rejects_data_after_the_array(tmp_path):
    path = tmp_path / "trace_view.json"
    path.write_bytes(next(LEGACY.rglob("timeline_display_1.json")).read_bytes().rstrip() + b"\nxyz")
    with pytest.raises(MalformedFileError, match="after the end of the document"):
        trace.exact_events(path)
