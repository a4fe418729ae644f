"""Reader hardening (issue 37, items 6, 7, 8, 12), on damaged copies of real profiles in tmp_path:

- JSON past the standard parser's limits (nested 10,000 deep, a number of 5,000 digits) is a typed
  `MalformedFileError` naming the file and line, in bounded time, and the rest of the profile loads;
- a trace that grows while it is read is read no further than the size the memory guard checked;
- an impossible operator time (negative, or over `MAX_DURATION_US`) in the op-type/detail CSVs costs its
  row, with the trace readers' wording;
- a text file cut in its last record warns of the truncation, and a row of nothing but empty/``nan``
  fields is dropped with a warning (never an operator named "nan").
"""
from __future__ import annotations

import csv
import io
import shutil
import threading
import time
import warnings
from pathlib import Path

import pytest

import nbprofiler
from nbprofiler.errors import MalformedFileError, ProfilerDataError, ProfilerDataWarning
from nbprofiler.io import _util, trace
from nbprofiler.io.trace import exact
from nbprofiler.io.trace import parse as trace_parse

from .conftest import DATA

MS2 = DATA / "mindspore2" / "lenet_pynative"
WIDEDEEP = DATA / "legacy" / "run_1_widedeep"
LENET = DATA / "legacy" / "run_2_lenet"
SECONDS = 20  # every damaged load here takes well under a second on the real files


def _copy(src: Path, tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("NBPROFILER_CACHE_DIR", str(tmp_path / "cache"))
    dest = tmp_path / "run"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("logs"))
    return dest


def _load(run: Path, *frames: str):
    """The profile of ``run`` with ``frames`` built (warnings recorded in prof.problems), and the seconds taken."""
    t0 = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(run)
        built = {name: getattr(prof, name) for name in frames}
    return prof, built, time.monotonic() - t0


def _problems(prof, path: Path, text: str) -> list:
    return [p for p in prof.problems if p.file == str(path) and text in p.error]


# -- item 6: JSON past the parser's limits --------------------------------------------------------------
def test_a_trace_of_10000_nested_brackets_is_a_typed_error_and_the_rest_loads(tmp_path, monkeypatch):
    run = _copy(MS2, tmp_path, monkeypatch)
    path = next(run.rglob("trace_view.json"))
    path.write_bytes(b"[" * 10_000)
    prof, built, took = _load(run, "timeline", "op_types", "memory")
    found = _problems(prof, path, "nested deeper than it can be read")
    assert len(found) == 1 and found[0].kind == "error" and found[0].line == 1, prof.problems
    assert found[0].error.startswith("MalformedFileError")
    assert built["op_types"] is not None and len(built["op_types"]) and len(built["memory"])
    assert took < SECONDS


def test_a_trace_number_of_5000_digits_is_a_typed_error_naming_its_line(tmp_path, monkeypatch):
    run = _copy(WIDEDEEP, tmp_path, monkeypatch)
    path = next(run.rglob("timeline_display_1.json"))
    data = path.read_bytes().rstrip()
    event = b'{"ph": "X", "name": "HUGE", "pid": 1, "tid": 1, "ts": ' + b"9" * 5000 + b', "dur": 1}'
    # the number on line 3; data after the array sends the file through the exact parse
    path.write_bytes(b"[\n\n" + event + b",\n" + data[1:] + b"\ngarbage\n")
    prof, built, took = _load(run, "timeline", "op_types", "step_trace")
    found = _problems(prof, path, "a JSON number of 5,000 digits")
    assert len(found) == 1 and found[0].line == 3, prof.problems
    assert found[0].error.startswith("MalformedFileError")
    assert len(built["op_types"]) and len(built["step_trace"])
    assert took < SECONDS


@pytest.mark.parametrize("damage,text,line", [
    (lambda d: d.replace(b"{", b'{\n"deep": ' + b"[" * 10_000, 1), "nested deeper than it can be read", 2),
    (lambda d: d.replace(b"{", b'{\n"big": ' + b"7" * 5000 + b",", 1), "a JSON number of 5,000 digits", 2),
])
def test_a_json_file_past_the_parsers_limits_is_a_typed_error(tmp_path, damage, text, line):
    path = tmp_path / "timeline_summary_1.json"
    path.write_bytes(damage((WIDEDEEP / "timeline_summary_1.json").read_bytes()))
    t0 = time.monotonic()
    with pytest.raises(MalformedFileError, match=text) as err:
        _util.read_json(path)
    assert err.value.path == path and err.value.line == line
    assert time.monotonic() - t0 < SECONDS


def test_an_op_info_cell_past_the_parsers_limits_costs_that_cell(tmp_path, monkeypatch):
    run = _copy(WIDEDEEP, tmp_path, monkeypatch)
    path = run / "framework_raw_1.csv"
    rows = list(csv.reader(io.StringIO(path.read_text(), newline="")))
    rows[3][rows[0].index("op_info")] = "[" * 10_000  # line 4
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())
    prof, built, took = _load(run, "ops")
    found = _problems(prof, path, "op_info is not JSON")
    assert len(found) == 1 and found[0].line == 4 and found[0].kind == "warning", prof.problems
    assert len(built["ops"]) and took < SECONDS


# -- item 7: every read of a trace bounded by the size checked --------------------------------------------
def _bytes_read() -> int:
    for line in open("/proc/self/io"):
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


class _Growth:
    """Blank space appended to ``path`` 1 MB at a time by a thread, up to ``cap`` bytes, until stopped."""

    def __init__(self, path: Path, cap: int):
        self.path, self.cap, self.written = path, cap, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._grow)

    def _grow(self):
        with open(self.path, "ab") as f:
            while not self.stop.is_set() and self.written < self.cap:
                f.write(b" " * (1 << 20))
                f.flush()
                self.written += 1 << 20

    def start_once(self):
        if not self.thread.is_alive() and not self.stop.is_set():
            self.thread.start()


def _load_while_growing(path: Path, growth: _Growth) -> tuple[ProfilerDataError, int]:
    """Load ``path`` while ``growth`` appends to it: the error the load must end in, and the bytes read."""
    before = _bytes_read()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ProfilerDataError, match="grew while it was read") as err:
                trace.load_trace(path, progress=False)
    finally:
        growth.stop.set()
        growth.thread.join()
    return err.value, _bytes_read() - before


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts bytes read with /proc/self/io")
@pytest.mark.parametrize("object_form", [False, True])
def test_a_trace_that_grows_while_it_is_read_is_read_no_further_than_checked(tmp_path, monkeypatch, object_form):
    """Blank space appended after the closing bracket while the trace is read (it once read 1-3 GB of a
    2 MB file): the reader stops with a typed error naming the file; bytes read stay near the file's size."""
    monkeypatch.setenv("NBPROFILER_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "timeline_display_1.json"
    data = (WIDEDEEP / "timeline_display_1.json").read_bytes()
    path.write_bytes(b'{"traceEvents": ' + data + b"}" if object_form else data)
    size = path.stat().st_size
    growth = _Growth(path, 256 << 20)
    real = trace_parse.check_size

    def check_then_grow(p, family, **kw):
        checked = real(p, family, **kw)
        if not growth.thread.is_alive() and not growth.stop.is_set():
            # the file grows from the moment the memory guard has checked it: 64 MB at once, then on
            with open(path, "ab") as f:
                f.write(b" " * (64 << 20))
            growth.written += 64 << 20
            growth.start_once()
        return checked

    monkeypatch.setattr(trace_parse, "check_size", check_then_grow)
    t0 = time.monotonic()
    err, read = _load_while_growing(path, growth)
    assert err.path == path and f"from {size:,} bytes" in str(err)
    assert growth.written >= 64 << 20  # it did grow, far past what was read
    assert read < 4 * size + (16 << 20), (read, growth.written)
    assert time.monotonic() - t0 < SECONDS


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts bytes read with /proc/self/io")
def test_a_trace_that_grows_only_once_its_read_has_begun_is_stopped_too(tmp_path, monkeypatch):
    """The growth starts when duckdb opens the file, after every size check before the read: blank space
    after the closing bracket makes no batch to stop at, so the read is watched between batches."""
    monkeypatch.setenv("NBPROFILER_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "timeline_display_1.json"
    data = (WIDEDEEP / "timeline_display_1.json").read_bytes()
    path.write_bytes(data)
    growth = _Growth(path, 1 << 30)
    real = trace_parse._connection

    def connect_then_grow():
        growth.start_once()
        return real()

    monkeypatch.setattr(trace_parse, "_connection", connect_then_grow)
    err, read = _load_while_growing(path, growth)
    assert err.path == path and f"from {len(data):,} bytes" in str(err)
    # stopped, not read to the end of a growth that goes on to 1 GB (it once read all of it): at most what
    # was there when it stopped (18-50 MB on a quiet machine; on a busy one the growth may have written
    # only a MB or two by then), never a quarter of the growth
    assert read <= len(data) + growth.written + (16 << 20) and read < 256 << 20, (read, growth.written)


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts bytes read with /proc/self/io")
def test_the_exact_parse_reads_no_further_than_the_size_checked(tmp_path):
    path = tmp_path / "timeline_display_1.json"
    data = (WIDEDEEP / "timeline_display_1.json").read_bytes()
    path.write_bytes(data + b" " * (4 << 20))  # grown after its reader checked len(data)
    with pytest.warns(ProfilerDataWarning, match=f"grew while it was read.*first {len(data):,} bytes"):
        events = exact.exact_check(path, keep=True, size=len(data))
    assert len(events) == len(exact.exact_events(WIDEDEEP / "timeline_display_1.json"))
    with pytest.warns(ProfilerDataWarning, match="grew while it was read"):
        assert exact.document_end(path, size=len(data)) is None


def test_a_trace_whose_growth_cut_its_document_is_said_to_have_grown(tmp_path, monkeypatch):
    """Checked while it was shorter (the profiler still writing its events): the checked bytes end in the
    middle of the document, and the error says the file grew rather than that it is broken."""
    path = tmp_path / "timeline_display_1.json"
    shutil.copy(WIDEDEEP / "timeline_display_1.json", path)
    real = trace_parse.check_size
    monkeypatch.setattr(trace_parse, "check_size", lambda p, family, **kw: real(p, family, **kw) // 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ProfilerDataError, match="grew while it was read") as err:
            trace.load_trace(path, progress=False)
    assert err.value.path == path


# -- item 8: impossible operator times --------------------------------------------------------------------
def _set_cell(path: Path, line: int, column: str, value: str) -> str:
    """Set ``column`` of file line ``line`` (1-based) to ``value``; returns the row's first cell."""
    lines = path.read_text().splitlines(True)
    header = lines[0].rstrip("\r\n").split(",")
    cells = lines[line - 1].rstrip("\r\n").split(",")
    cells[header.index(column)] = value
    lines[line - 1] = ",".join(cells) + "\n"
    path.write_text("".join(lines))
    return cells[0]


IMPOSSIBLE = "negative, not finite or over 3e+12 us) skipped (the first is shown)"


@pytest.mark.parametrize("value,us", [("-0.554", "-554.0"), ("1e300", "1e+303")])
def test_an_impossible_cpu_op_type_time_costs_that_row(tmp_path, monkeypatch, value, us):
    run = _copy(MS2, tmp_path, monkeypatch)
    path = next(run.rglob("cpu_op_type_info_0.csv"))
    op_type = _set_cell(path, 3, "total_compute_time", value)
    full = _load(MS2, "op_types")[1]["op_types"]
    prof, built, took = _load(run, "op_types", "ops", "timeline")
    types = built["op_types"]
    cpu = types[types["kind"] == "cpu"]
    assert op_type not in set(cpu["op_type"]) and len(cpu) == (full["kind"] == "cpu").sum() - 1
    assert cpu["percent"].max() < 100
    found = _problems(prof, path, f"1 row(s) with an impossible 'total_compute_time' ({us} us: {IMPOSSIBLE}")
    assert len(found) == 1 and found[0].line == 3 and found[0].field == "total_compute_time", prof.problems
    assert found[0].kind == "warning" and len(built["ops"]) and len(built["timeline"]) and took < SECONDS


def test_an_impossible_cpu_op_detail_time_costs_that_row(tmp_path, monkeypatch):
    run = _copy(MS2, tmp_path, monkeypatch)
    path = next(run.rglob("cpu_op_detail_info_0.csv"))
    lines = path.read_text().splitlines()
    name = lines[4].split(",")[3]
    _set_cell(path, 5, "op_total_time(ms)", "1e300")
    prof, built, _ = _load(run, "ops")
    assert name not in set(built["ops"]["op_name"])
    found = _problems(prof, path, "with an impossible 'op_total_time(ms)' (1e+303 us")
    assert len(found) == 1 and found[0].line == 5, prof.problems


def test_impossible_ai_core_and_ai_cpu_times_cost_their_rows(tmp_path, monkeypatch):
    run = _copy(LENET, tmp_path, monkeypatch)
    aicpu = run / "aicpu_intermediate_1.csv"
    aicore = run / "aicore_intermediate_1_type.csv"
    _set_cell(aicpu, 2, "total_time", "-3")
    kernel_type = _set_cell(aicore, 4, "execution_time", "-0.5")
    prof, built, _ = _load(run, "op_types", "ops")
    types = built["op_types"]
    assert kernel_type not in set(types.loc[types["kind"] == "ai_core", "op_type"])
    assert len(_problems(prof, aicpu, "with an impossible 'total_time' (-3000.0 us")) == 1, prof.problems
    assert [p.line for p in _problems(prof, aicore, "with an impossible 'execution_time' (-500.0 us")] == [4]


def test_mostly_impossible_times_reject_the_file(tmp_path):
    path = tmp_path / "cpu_op_type_info_0.csv"
    lines = next(MS2.rglob("cpu_op_type_info_0.csv")).read_text().splitlines(True)
    path.write_text("".join(lines))
    for line in range(2, 8):
        _set_cell(path, line, "total_compute_time", "-1")
    from nbprofiler.io import framework
    with pytest.raises(MalformedFileError, match="rows with an impossible 'total_compute_time'") as err:
        framework.cpu_op_types(path)
    assert err.value.line == 2


# -- item 12: a text file cut mid-record; rows of nothing -------------------------------------------------
def test_a_queue_file_cut_in_its_last_record_warns_of_the_truncation(tmp_path, monkeypatch):
    run = _copy(MS2, tmp_path, monkeypatch)
    path = next(run.rglob("dataset_iterator_profiling_0.txt"))
    data = path.read_bytes().rstrip(b"\n")
    last = data.rsplit(b"\n", 1)[1]
    path.write_bytes(data[:len(data) - len(last)] + last.rsplit(b" ", 2)[0])  # 2 of its fields left
    n_lines = data.count(b"\n") + 1
    prof, built, took = _load(run, "host_queue")
    found = _problems(prof, path, "the file ends in the middle of its last record")
    assert len(found) == 1 and found[0].line == n_lines and found[0].error.startswith("TruncatedFileError"), \
        prof.problems
    assert not _problems(prof, path, "malformed")
    assert len(built["host_queue"]) and took < SECONDS


def test_a_getnext_file_cut_in_its_last_record_warns_of_the_truncation(tmp_path):
    from nbprofiler.io import minddata
    path = tmp_path / "minddata_aicpu_1.txt"
    data = (LENET / "minddata_aicpu_1.txt").read_bytes().rstrip(b"\n")
    last = data.rsplit(b"\n", 1)[1]
    assert last.startswith(b"GetNext")
    path.write_bytes(data[:len(data) - len(last)] + last.split(b" ")[0] + b" 15")
    with pytest.warns(ProfilerDataWarning, match="ends in the middle of its last record") as caught:
        frame = minddata.read_getnext(path, nanoseconds=False)
    assert caught[0].message.error.line == data.count(b"\n") + 1
    assert len(frame) == len([ln for ln in data.splitlines() if ln.startswith(b"GetNext")]) - 1


def test_a_csv_cut_in_its_last_row_warns_of_the_truncation(tmp_path, monkeypatch):
    run = _copy(MS2, tmp_path, monkeypatch)
    path = next(run.rglob("cpu_op_type_info_0.csv"))
    data = path.read_bytes().rstrip(b"\n")
    path.write_bytes(data[:data.rindex(b",", 0, data.rindex(b",") - 1)])
    prof, built, _ = _load(run, "op_types")
    found = _problems(prof, path, "last row has")
    assert len(found) == 1 and found[0].line == data.count(b"\n") + 1
    assert found[0].error.startswith("TruncatedFileError") and len(built["op_types"])


@pytest.mark.parametrize("row", ["nan,nan,nan,nan,nan,nan", ",,,,,", " nan , NaN ,,N/A,-, None"])
def test_a_row_of_nothing_is_dropped_with_a_warning_never_an_operator_named_nan(tmp_path, monkeypatch, row):
    run = _copy(MS2, tmp_path, monkeypatch)
    path = next(run.rglob("cpu_op_type_info_0.csv"))
    lines = path.read_text().splitlines(True)
    lines.insert(4, row + "\n")
    path.write_text("".join(lines))
    prof, built, _ = _load(run, "op_types")
    cpu = built["op_types"][built["op_types"]["kind"] == "cpu"]
    assert not {"nan", "", "NaN"} & set(cpu["op_type"])
    assert len(cpu) == len(lines) - 2
    found = _problems(prof, path, "every field is empty or 'nan' (no record); row skipped")
    assert len(found) == 1 and found[0].line == 5 and found[0].kind == "warning", prof.problems


def test_a_detail_row_of_nothing_is_not_an_operator(tmp_path, monkeypatch):
    run = _copy(WIDEDEEP, tmp_path, monkeypatch)
    path = run / "aicore_intermediate_1_detail.csv"
    lines = path.read_text().splitlines(True)
    width = lines[0].count(",") + 1
    lines.insert(2, ",".join(["nan"] * width) + "\n")
    path.write_text("".join(lines))
    prof, built, _ = _load(run, "ops")
    assert "nan" not in set(built["ops"]["op_name"].astype(str))
    assert [p.line for p in _problems(prof, path, "every field is empty or 'nan'")] == [3]
