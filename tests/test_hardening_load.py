"""Loading hostile copies of real profiles: each ends with a typed error or warning naming the file, and
the rest of the profile loads (symlink loops, FIFOs and devices named like profiler files, JSON nested
10,000 levels deep, a CSV header with a million fields)."""
from __future__ import annotations

import os
import shutil
import time
import warnings

import pytest

import nbprofiler
from nbprofiler.errors import MalformedFileError, ProfilerDataWarning
from nbprofiler.io._util import MAX_CSV_COLUMNS, read_csv

from .conftest import DATA


def _copy(tmp_path, rel: str):
    dst = tmp_path / rel.replace("/", "_")
    shutil.copytree(DATA / rel, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    return dst


def test_symlink_loops_and_special_files_are_skipped_with_a_warning(tmp_path):
    run = _copy(tmp_path, "minddata/md_bottleneck_map")
    os.symlink("loop_b", run / "loop_a")
    os.symlink("loop_a", run / "loop_b")
    os.symlink(run, run / "self")                     # a folder loop
    os.mkfifo(run / "minddata_pipeline_raw_7.csv")      # would block a reader forever
    os.symlink("/dev/zero", run / "pipeline_profiling_9.json")
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prof = nbprofiler.load(run)
        summary = prof.summary()
    assert time.monotonic() - start < 60
    said = [str(w.message) for w in caught if issubclass(w.category, ProfilerDataWarning)]
    assert any("loop_a" in m and "cannot be read" in m for m in said), said
    assert any("minddata_pipeline_raw_7.csv" in m and "not a regular file" in m for m in said), said
    assert any("pipeline_profiling_9.json" in m and "not a regular file" in m for m in said), said
    # the real files still load: MapOp_1 (op 1) is still the bottleneck
    assert summary["minddata"]["bottleneck_op_ids"] == [1] and len(prof.host_queue) == 62
    # and each entry discovery saw but could not read is a problem of the profile, not only a warning
    skipped = {os.path.basename(p.file) for p in prof.problems if p.kind == "warning"}
    assert {"loop_a", "minddata_pipeline_raw_7.csv", "pipeline_profiling_9.json"} <= skipped


def test_an_unreadable_framework_folder_is_a_problem_and_the_rest_loads(tmp_path, monkeypatch):
    """A FRAMEWORK folder that cannot be listed (no read permission: simulated, the tests may run as root)
    costs its files, named in ``prof.problems``; the session's other files load."""
    run = _copy(tmp_path, "mindspore2/lenet_pynative")
    framework = next(run.rglob("FRAMEWORK"))
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path) == os.fspath(framework):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.warns(ProfilerDataWarning, match="FRAMEWORK: folder cannot be listed"):
        prof = nbprofiler.load(run)
    problem = next(p for p in prof.problems if p.file == str(framework))
    assert problem.kind == "warning" and "Permission denied" in problem.error
    assert prof.ops.empty and len(prof.timeline) == 13801  # trace_view.json (ASCEND_PROFILER_OUTPUT) still loads


def test_json_nested_10000_levels_is_a_typed_error_naming_the_file(tmp_path):
    run = _copy(tmp_path, "minddata/md_bottleneck_map")
    (run / "pipeline_profiling_0.json").write_text("[" * 10_000 + "]" * 10_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(run)
        prof.summary()
        prof.load_all()
    bad = [p for p in prof.problems if p.file.endswith("pipeline_profiling_0.json")]
    assert bad and "nested deeper" in bad[0].error and bad[0].error.startswith("MalformedFileError")
    assert len(prof.host_queue) > 0  # the rest of the profile loaded


def test_a_million_field_csv_header_is_refused_at_once(tmp_path):
    path = tmp_path / "cpu_op_detail_info_0.csv"
    path.write_text(",".join(f"c{i}" for i in range(1_000_000)) + "\n" + "1," * 999_999 + "1\n")
    start = time.monotonic()
    with pytest.raises(MalformedFileError, match="1,000,000 fields") as err:
        read_csv(path)
    assert time.monotonic() - start < 10 and err.value.line == 1
    assert f"{MAX_CSV_COLUMNS:,}" in str(err.value)


def test_impossible_durations_are_skipped_with_a_warning_naming_the_line(tmp_path):
    """dur = -1e6 or 1e300 in a copy of a real trace: those events are dropped (the timeline keeps its
    real end) and a warning names the file, the line and the value."""
    import json
    src = DATA / "npu" / "trace_view_torch_npu" / "trace_view.json"
    events = json.loads(src.read_text())
    run = tmp_path / "run" / "ASCEND_PROFILER_OUTPUT"
    run.mkdir(parents=True)
    good = nbprofiler.load(src.parent)
    real_end = float((good.timeline["start_us"] + good.timeline["dur_us"]).max())
    xs = [i for i, e in enumerate(events) if e.get("ph") == "X"]
    events[xs[3]]["dur"] = -1e6
    events[xs[5]]["dur"] = 1e300
    (run / "trace_view.json").write_text(json.dumps(events, indent=0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prof = nbprofiler.load(run.parent)
        tl = prof.timeline
    said = [str(w.message) for w in caught if issubclass(w.category, ProfilerDataWarning)]
    assert any("2 event(s) with an impossible 'dur'" in m and "-1000000.0" in m for m in said), said
    assert len(tl) == len(good.timeline) - 2
    assert float((tl["start_us"] + tl["dur_us"]).max()) <= real_end + 1e-6
    assert prof.summary()["timeline"]


def test_a_file_that_grows_while_it_is_read_is_read_only_as_far_as_it_was_checked(tmp_path, monkeypatch):
    """The memory guard checked a smaller file than the one read (a profiler still writing it): a CSV is
    read up to the checked size, with a warning; a trace stops with an error naming the file, instead of
    reading on (a trace appended to during a load once grew to 5 GB)."""
    from nbprofiler.errors import ProfilerDataError
    from nbprofiler.io import _util, trace
    from nbprofiler.io.trace import parse as trace_parse
    src = DATA / "mindspore2" / "lenet_pynative"
    csv = next(src.rglob("cpu_op_type_info_0.csv"))
    real = _util.check_size
    monkeypatch.setattr(_util, "check_size", lambda path, family, **kw: real(path, family, **kw) - 20)
    with pytest.warns(ProfilerDataWarning, match="grew while it was read"):
        data = _util.read_bytes(csv)
    assert data == csv.read_bytes()[:-20]
    monkeypatch.setattr(trace_parse, "check_size", lambda path, family, **kw: real(path, family, **kw) - 1000)
    with pytest.raises(ProfilerDataError, match="grew while it was read") as err:
        trace.load_trace(next(src.rglob("trace_view.json")), progress=False)
    assert err.value.path.name == "trace_view.json"
