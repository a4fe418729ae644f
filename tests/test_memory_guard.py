"""The memory guard: one table of measured factors (`_util.EXPANSION`) used by every caller, and the costly
shapes (a row wider than the header, a huge string in a trace) charged when they are seen, on copies of a
real profile with one file replaced by a hostile one."""
from __future__ import annotations

import ast
import inspect
import json
import shutil
import warnings
from pathlib import Path

import pytest

import nbprofiler
from nbprofiler.errors import FileTooLargeError
from nbprofiler.io import _util, trace
from nbprofiler.io.trace import memory as trace_memory
from nbprofiler.io.trace import parse as trace_parse

from .conftest import DATA

PACKAGE = Path(nbprofiler.__file__).parent
RUN = DATA / "mindspore2" / "lenet_pynative"


def _copy(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NBPROFILER_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copytree(RUN, tmp_path / "run", ignore=shutil.ignore_patterns("logs"))
    return tmp_path / "run"


def _available(monkeypatch, nbytes: float) -> None:
    """Pretend the machine has ``nbytes`` available (the guard allows `MEMORY_FRACTION` of it)."""
    monkeypatch.setattr(_util, "available_memory_bytes", lambda: int(nbytes))


def _allow(need: float) -> float:
    """The available memory at which a parse needing ``need`` bytes is just allowed."""
    return need / _util.MEMORY_FRACTION


def _load(run: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(run)
        frames = {name: getattr(prof, name) for name in ("timeline", "memory", "host_queue", "cpu_utilization",
                                                          "op_types")}
    return prof, frames


def _refused(prof) -> dict[str, str]:
    return {Path(p.file).name: p.error for p in prof.problems if p.error.startswith("FileTooLargeError")}


def _csv_of(run: Path, wide: bool) -> Path:
    """The run's memory record (a CSV, 1.5 MB) grown to twice its size with one row of commas (``wide``)
    or with a copy of its rows."""
    csv = next(run.rglob("cpu_ms_memory_record_0.txt"))
    data = csv.read_bytes()
    rows = data.split(b"\n", 1)[1]
    assert data.endswith(b"\n")
    with open(csv, "ab") as f:
        f.write(b"," * (len(rows) - 1) + b"\n" if wide else rows)
    return csv


@pytest.mark.parametrize("wide", [True, False])
def test_a_csv_row_wider_than_its_header_is_charged_the_careful_readers_factor(tmp_path, monkeypatch, wide):
    """A CSV whose size passes the fast path's factor but holds a 1.5 MB row of commas (the careful reader
    then builds a Python list of 1,500,000 fields) is refused before that reader runs, naming the file;
    the rest of the profile loads. The same size of rows as wide as the header loads."""
    run = _copy(tmp_path, monkeypatch)
    csv = _csv_of(run, wide)
    size = csv.stat().st_size
    assert size > 3_000_000
    # enough for the fast path (and every other file of the run), not for rows as Python lists
    _available(monkeypatch, _allow(size * (_util.EXPANSION["csv"] + _util.EXPANSION["csv_careful"]) / 2))
    prof, frames = _load(run)
    refused = _refused(prof)
    if wide:
        assert set(refused) == {csv.name}
        assert str(csv) in next(p.file for p in prof.problems if p.error.startswith("FileTooLargeError"))
        assert "csv_careful" in refused[csv.name]
        assert frames["memory"] is None or frames["memory"].empty
    else:
        assert not refused
        assert len(frames["memory"]) > 40_000
    assert not frames["timeline"].empty and not frames["host_queue"].empty and not frames["cpu_utilization"].empty


def test_a_huge_name_in_a_trace_is_charged_before_the_frames_are_built(tmp_path, monkeypatch):
    """A trace whose size passes the trace factor but holds a 4 MB event name (a name costs ~8 copies of
    itself in the frames) is refused naming the file; the rest of the profile loads."""
    run = _copy(tmp_path, monkeypatch)
    tv = next(run.rglob("trace_view.json"))
    data = tv.read_bytes().rstrip()
    assert data.endswith(b"]")
    big = 4_000_000
    tv.write_bytes(data[:-1] + b', {"ph": "X", "name": "' + b"N" * big + b'", "pid": 1, "tid": 0, '
                   b'"ts": "1795235132857961.486", "dur": 1.0}]')
    size = tv.stat().st_size
    plain = size * _util.EXPANSION["trace"]
    _available(monkeypatch, _allow(plain + big * _util.EXPANSION["trace_big_event"] / 2))
    prof, frames = _load(run)
    refused = _refused(prof)
    assert set(refused) == {"trace_view.json"}
    assert str(tv) in next(p.file for p in prof.problems if p.error.startswith("FileTooLargeError"))
    assert frames["timeline"].empty
    assert not frames["memory"].empty and not frames["host_queue"].empty and not frames["cpu_utilization"].empty


@pytest.mark.parametrize("name,family,frame", [
    ("minddata_cpu_utilization_0.json", "json", "cpu_utilization"),
    ("dataset_iterator_profiling_0.txt", "text", "host_queue"),
    ("cpu_ms_memory_record_0.txt", "csv", "memory"),
    ("trace_view.json", "trace_disk", "timeline"),
])
def test_each_family_is_refused_past_its_factor_and_the_rest_loads(tmp_path, monkeypatch, name, family, frame):
    """The file of each family is refused when its size x its table factor exceeds what is available
    (and not below it: the factor, not another number, decides); the other files load. A trace that does
    not fit in memory loads on disk (`nbprofiler.io.trace.disk`), so it is refused past that factor."""
    run = _copy(tmp_path, monkeypatch)
    path = next(run.rglob(name))
    need = path.stat().st_size * _util.EXPANSION[family]
    others = [p for p in run.rglob("*.*") if p != path and p.suffix in (".csv", ".txt", ".json")]
    _available(monkeypatch, _allow(need * 0.99))
    with pytest.raises(FileTooLargeError) as err:
        _util.check_size(path, family)
    assert err.value.path == path and str(path) in str(err.value)
    prof, frames = _load(run)
    assert name in _refused(prof)
    assert frames[frame] is None or frames[frame].empty
    loaded = [f for n, f in frames.items() if n != frame and f is not None and not f.empty]
    assert loaded, "the rest of the profile loads"
    _available(monkeypatch, _allow(need * 1.01 + max(p.stat().st_size for p in others) * 30))
    _util.check_size(path, family)


def test_every_check_size_caller_names_a_family_of_the_table():
    """No parser carries its own factor: every call of the guarded readers (check_size, read_bytes,
    read_text, read_json; called by name, as imported from io._util) in the package passes a family
    name of `EXPANSION` or nothing (the reader's default family), and check_size refuses a bare number."""
    guarded = {"check_size", "read_bytes", "read_text", "read_json"}
    seen: dict[str, list[str]] = {}
    for src in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(src.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in guarded):
                continue  # path.read_bytes() and the like are pathlib's, not the guard's
            name, where = node.func.id, f"{src.relative_to(PACKAGE)}:{node.lineno}"
            args = node.args[1:2] + [k.value for k in node.keywords if k.arg != "extra_bytes"]
            for a in args:
                if isinstance(a, ast.Constant):
                    assert isinstance(a.value, str) and a.value in _util.EXPANSION, \
                        f"{where}: {name} passes {a.value!r}, not a family of EXPANSION"
                else:  # a variable: only io._util's readers and the trace reader (in memory or on disk),
                    # passing their own ``family`` on
                    assert src.relative_to(PACKAGE).as_posix() in ("io/_util.py", "io/trace/parse.py") and isinstance(a, ast.Name) \
                        and a.id == "family", where
            seen.setdefault(name, []).append(where)
    assert len(seen["check_size"]) >= 5 and len(seen["read_json"]) >= 10 and len(seen["read_text"]) >= 5
    assert any(w.startswith("io/trace/memory.py") for w in seen["check_size"])
    assert any(w.startswith("io/trace/parse.py") for w in seen["check_size"])
    for fn in (_util.read_bytes, _util.read_text, _util.read_json):
        assert inspect.signature(fn).parameters["family"].default in _util.EXPANSION
    with pytest.raises(ValueError, match="unknown parser family"):
        _util.check_size(next(RUN.rglob("trace_view.json")), 3.0)


def test_trace_checks_use_the_trace_rows_of_the_table(tmp_path, monkeypatch):
    """The trace reader asks the guard for ``trace`` (and for ``trace_exact`` before the exact parse that
    locates an error), recorded by wrapping check_size."""
    asked = []
    real = _util.check_size

    def spy(path, family, **kw):
        asked.append((Path(path).name, family))
        return real(path, family, **kw)
    monkeypatch.setattr(_util, "check_size", spy)
    monkeypatch.setattr(trace_memory, "check_size", spy)
    monkeypatch.setattr(trace_parse, "check_size", spy)
    src = next(RUN.rglob("trace_view.json"))
    good = tmp_path / "trace_view.json"
    shutil.copy(src, good)
    trace.load_trace(good, progress=False)
    assert set(f for _, f in asked) == {"trace"}
    asked.clear()
    bad = tmp_path / "bad.json"
    bad.write_bytes(src.read_bytes().replace(b'"ph"', b'"ph" "', 1))
    with pytest.raises(nbprofiler.errors.MalformedFileError):
        trace.load_trace(bad, progress=False)
    assert "trace_exact" in {f for _, f in asked}


def test_factors_in_the_table_cover_the_measured_peaks_with_margin():
    """The table's numbers are the benchmark's measured worst cases x 1.25, rounded up to a tenth (the
    measured value is noted beside each entry in io/_util.py, and README's table lists them)."""
    text = inspect.getsource(_util)
    for key, factor in _util.EXPANSION.items():
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f'"{key}":'))
        measured = float(line.split("measured", 1)[1].split()[0])
        assert measured * 1.25 <= factor < measured * 1.25 + 0.1, key
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Memory guard", 1)[1].split("\n#", 1)[0]
    for key, factor in _util.EXPANSION.items():
        assert f"`{key}`" in section and f"{factor:g}" in section, key
    json.dumps(_util.EXPANSION)  # plain numbers


def test_available_memory_is_psutils_figure():
    """The guard reads the kernel's MemAvailable itself (psutil is its fallback on other platforms); psutil
    reports the same figure on Linux (the two read a moment apart: other processes move it a little)."""
    psutil = pytest.importorskip("psutil")
    if not Path("/proc/meminfo").exists():
        pytest.skip("no /proc/meminfo: the guard asks psutil")
    ours, theirs = _util.available_memory_bytes(), psutil.virtual_memory().available
    assert ours == pytest.approx(theirs, rel=0.05) and ours > 100 * 2**20
