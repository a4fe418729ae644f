"""Peak memory per byte of input, per parser family and file shape: the numbers behind the memory guard's
`nbprofiler.io._util.EXPANSION` table.

Every case is a profile folder holding one generated file of about ``--mb`` MB (written to a scratch dir,
default ``$TMPDIR/nbprofiler-bench-guard``, never to the repository). Each one is loaded in a fresh
subprocess through the public path (``nbprofiler.load(folder)``, then the frame that reads the file);
its peak RSS (``ru_maxrss`` of that process) minus the peak of an import-only subprocess, divided by the
file's size, is the case's factor. The guard is patched off in the children (``available_memory_bytes``
returns 2**62) so that the measured load runs whatever the table says.

    python benchmarks/bench_memory_guard.py            # every case, 100 MB files
    python benchmarks/bench_memory_guard.py --mb 50 --only csv

Prints one line per case and, at the end, a Markdown table: family, shape, file MB, peak MB over the
baseline, measured factor, the table's factor for that shape and whether it covers the measurement.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, os, resource, sys, warnings
folder, frame, cache_dir = sys.argv[1], sys.argv[2], sys.argv[3]
os.environ["NBPROFILER_CACHE_DIR"] = cache_dir
import duckdb, numpy, pandas, pyarrow  # the baseline imports these too
import nbprofiler
from nbprofiler.io import _util, cache, trace
_util.available_memory_bytes = lambda: 1 << 62  # measure the load itself, whatever the guard says
out = {}
if frame != "-":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(folder)
        df = getattr(prof, frame)
        out["rows"] = None if df is None else len(df)
        out["problems"] = [p.error[:160] for p in prof.problems]
    cache.wait()
out["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(out))
"""


# -- file shapes ------------------------------------------------------------------------------------
def _fill(f, target: int, make_line) -> None:
    """Write lines from ``make_line(i)`` until ``target`` bytes, in 4 MB blocks."""
    written, i, buf, n = 0, 0, [], 0
    while written < target:
        line = make_line(i)
        buf.append(line)
        n += len(line)
        i += 1
        if n >= 4 << 20 or written + n >= target:
            f.write("".join(buf))
            written += n
            buf, n = [], 0


def _events_array(path: Path, size: int) -> None:
    from nbprofiler.synthetic import write_trace
    write_trace(path, size)


def trace_array_events(d: Path, size: int) -> Path:
    p = d / "trace_view.json"
    _events_array(p, size)
    return p


def trace_object_events(d: Path, size: int) -> Path:
    tmp = d / "events.tmp"
    _events_array(tmp, size)
    p = d / "trace_view.json"
    with open(p, "w") as out, open(tmp) as src:
        out.write('{"traceEvents": ')
        shutil.copyfileobj(src, out, 8 << 20)
        out.write(', "displayTimeUnit": "ns"}')
    tmp.unlink()
    return p


_META = ('{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "CPU OP"}}, '
         '{"ph": "X", "name": "Add", "pid": 1, "tid": 0, "ts": "1000.000", "dur": 2.0, "args": {"type": "Add"}}')


def _one_string_events(size: int, where: str) -> str:
    n = max(1, size - 300)
    if where == "name":
        big = '{"ph": "X", "name": "' + "A" * n + '", "pid": 1, "tid": 0, "ts": "1002.000", "dur": 1.0}'
    else:
        big = '{"ph": "X", "name": "Big", "pid": 1, "tid": 0, "ts": "1002.000", "dur": 1.0, "args": {"k": "' + \
              "A" * n + '"}}'
    return "[" + _META + ", " + big + "]"


def trace_array_one_string(d: Path, size: int) -> Path:
    p = d / "trace_view.json"
    p.write_text(_one_string_events(size, "name"))
    return p


def trace_array_one_string_args(d: Path, size: int) -> Path:
    p = d / "trace_view.json"
    p.write_text(_one_string_events(size, "args"))
    return p


LONG_NAME = 20_000_000


def trace_events_one_long_name(d: Path, size: int) -> Path:
    """Many small events and one 20 MB name: read by the first pass (events up to ~32 MB are), then
    charged by the guard for the long value (``trace`` x the file + ``trace_big_event`` x the value)."""
    p = d / "trace_view.json"
    _events_array(p, max(1, size - LONG_NAME))
    data = p.read_bytes().rstrip()
    p.write_bytes(data[:-1] + b', {"ph": "X", "name": "' + b"A" * LONG_NAME + b'", "pid": 1, "tid": 0, '
                  b'"ts": "1002.000", "dur": 1.0}]')
    return p


def trace_object_one_string(d: Path, size: int) -> Path:
    p = d / "trace_view.json"
    p.write_text('{"traceEvents": ' + _one_string_events(size, "name") + ', "displayTimeUnit": "ns"}')
    return p


def trace_object_document(d: Path, size: int) -> Path:
    """An object whose event array cannot be placed by json_slice (2 MB of other keys before it): read
    by duckdb as one document."""
    tmp = d / "events.tmp"
    _events_array(tmp, size)
    p = d / "trace_view.json"
    with open(p, "w") as out, open(tmp) as src:
        out.write('{"otherData": "' + "x" * (2 << 20) + '", "traceEvents": ')
        shutil.copyfileobj(src, out, 8 << 20)
        out.write("}")
    tmp.unlink()
    return p


def trace_object_invalid(d: Path, size: int) -> Path:
    """The object form of `trace_array_invalid`: the exact parse decodes the whole document."""
    p = trace_array_invalid(d, size)
    data = p.read_bytes()
    p.write_bytes(b'{"traceEvents": ' + data + b"}")
    return p


def trace_array_trailing(d: Path, size: int) -> Path:
    """Valid events followed by other data: the exact parse places the end of the array, then the array
    alone is read."""
    p = d / "trace_view.json"
    _events_array(p, size)
    with open(p, "ab") as f:
        f.write(b"\n[garbage after the array]\n")
    return p


def trace_array_invalid(d: Path, size: int) -> Path:
    """Events with a syntax error 90 % into the file: duckdb rejects it, the exact (stdlib json) parse
    then finds the error's line."""
    p = d / "trace_view.json"
    _events_array(p, size)
    with open(p, "r+b") as f:
        f.seek(int(p.stat().st_size * 0.9))
        chunk = f.read(4096)
        k = chunk.index(b", {")
        f.seek(int(p.stat().st_size * 0.9) + k)
        f.write(b"; ")
    return p


_KERNEL_SRC = Path("/work/shared/data/npu/kernel_details_591/kernel_details.csv")


def _kernel_rows() -> tuple[str, list[list[str]]]:
    import csv
    with open(_KERNEL_SRC, newline="") as f:
        rows = list(csv.reader(f))
    return ",".join(rows[0]) + "\n", rows[1:]


def _kernel_line(rows, i: int) -> str:
    import csv
    import io
    r = list(rows[i % len(rows)])
    r[7] = f"{1699529622790614.8 + i * 3.7:.1f}"  # unique start times, as in a real file
    r[0] = str(1 + i // 5000)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(r)
    return buf.getvalue()


def csv_rows(d: Path, size: int) -> Path:
    header, rows = _kernel_rows()
    p = d / "kernel_details.csv"
    with open(p, "w") as f:
        f.write(header)
        _fill(f, size, lambda i: _kernel_line(rows, i))
    return p


def csv_rows_one_bad(d: Path, size: int) -> Path:
    """Typical rows and one row with a missing field: the careful (Python csv) reader reads it."""
    header, rows = _kernel_rows()
    p = d / "kernel_details.csv"
    with open(p, "w") as f:
        f.write(header)
        _fill(f, size // 2, lambda i: _kernel_line(rows, i))
        f.write(_kernel_line(rows, 0).rsplit(",", 1)[0] + "\n")
        _fill(f, size - size // 2, lambda i: _kernel_line(rows, i + 10 ** 7))
    return p


def csv_short_fields(d: Path, size: int) -> Path:
    """memory_record.csv: short numeric fields (the densest real CSV)."""
    p = d / "memory_record.csv"
    with open(p, "w") as f:
        f.write("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,"
                "Device Type\n")
        _fill(f, size, lambda i: f"APP,{1736405443756384.1 + i * 20.5:.1f},{i % 4096 / 8},2109.6,{i % 977},"
                                 f"{i % 7},NPU:0\n")
    return p


def csv_one_field(d: Path, size: int) -> Path:
    header, rows = _kernel_rows()
    p = d / "kernel_details.csv"
    with open(p, "w") as f:
        f.write(header)
        r = _kernel_line(rows, 0).split(",")
        r[4] = "A" * max(1, size - 1000)
        f.write(",".join(r))
        f.write(_kernel_line(rows, 1))
    return p


def csv_row_of_commas(d: Path, size: int) -> Path:
    header, rows = _kernel_rows()
    p = d / "kernel_details.csv"
    with open(p, "w") as f:
        f.write(header)
        for i in range(20):
            f.write(_kernel_line(rows, i))
        f.write("," * max(1, size - 20_000) + "\n")
    return p


def _cpu_util(d: Path, size: int, extra: str = "") -> Path:
    p = d / "minddata_cpu_utilization_0.json"
    n = size // 60  # ~60 bytes per sample over the 8 series below
    rng = random.Random(0)
    series = {k: [rng.randrange(100000) for _ in range(n)] for k in ("user_utilization", "sys_utilization",
                                                                    "io_utilization", "idle_utilization")}
    proc = {k: [rng.randrange(100) for _ in range(n)] for k in ("user_utilization", "sys_utilization")}
    doc = {"cpu_processor_num": 2, "device_info": {**series, "context_switch_count": [rng.randrange(2000)
                                                                                     for _ in range(n)]},
           "process_info": proc, "sampling_interval": 10,
           "time_stamp": [1700000000000 + 10 * i for i in range(n)]}
    text = json.dumps(doc, separators=(",", ":"))
    if extra:
        text = text[:-1] + ',"note":"' + extra + '"}'
    p.write_text(text)
    return p


def json_numbers(d: Path, size: int) -> Path:
    return _cpu_util(d, size)


def json_one_string(d: Path, size: int) -> Path:
    return _cpu_util(d, 100_000, extra="A" * size)


def json_objects(d: Path, size: int) -> Path:
    """communication.json with many ops (real op records from cluster_communication.json): nested objects,
    the densest real JSON."""
    src = json.loads(Path("/work/shared/data/npu/cluster_8rank/cluster_communication.json").read_text())
    ops = next(iter(src.values()))["step"]
    tmpl = [json.dumps(info, separators=(", ", ": ")) for ranks in ops.values() for info in ranks.values()]
    p = d / "communication.json"
    with open(p, "w") as f:
        f.write('{"step1": {"collective": {')
        _fill(f, size, lambda i: ("" if i == 0 else ", ") + f'"hcom_allReduce__{i}_0@{i}": ' + tmpl[i % len(tmpl)])
        f.write("}}}")
    return p


def text_short_lines(d: Path, size: int) -> Path:
    """dataset_iterator_profiling_*.txt: one short record per line (host queue): per step, the get, push
    and batch times (``0 <sub> <step> <ms> <timestamp>``) and the queue size (``1 <capacity> <step> <size>
    <timestamp>``)."""
    p = d / "dataset_iterator_profiling_0.txt"
    with open(p, "w") as f:
        _fill(f, size, lambda i: (f"0 {i % 4} {1 + i // 4} {7 + i % 5} " if i % 4 < 3 else f"1 16 {1 + i // 4} 16 ")
              + f"{728570 + i * 41}\n")
    return p


def text_one_line(d: Path, size: int) -> Path:
    p = d / "dataset_iterator_profiling_0.txt"
    with open(p, "w") as f:
        for i in range(40):
            f.write(f"0 1 {i + 1} 7 {728570 + i}\n")
        _fill(f, size, lambda i: f"{728570 + i} ")
        f.write("\n")
    return p


def text_op_records(d: Path, size: int) -> Path:
    """FRAMEWORK/cpu_op_execute_timestamp_*.txt: the timeline of a run without a trace."""
    p = d / "cpu_op_execute_timestamp_0.txt"
    names = [f"Default/network/Conv2D-op{i}" for i in range(50)]

    def line(i):
        t = 1795235132857961449 + i * 1_000_003 * 64
        return names[i % 50] + ";HostCpuOps;" + " ".join(f"{t + k * 1_000_003},0.0{k % 9 + 1}{i % 97},0"
                                                         for k in range(64)) + "\n"
    with open(p, "w") as f:
        _fill(f, size, line)
    return p


# family, shape, builder, the frame that reads the file, the guard's key in _util.EXPANSION for that shape
# (or (key, bytes of a long value the guard charges ``trace_big_event`` times on top))
CASES = [
    ("trace", "array, many small events", trace_array_events, "timeline", "trace"),
    ("trace", "object, many small events", trace_object_events, "timeline", "trace"),
    ("trace", "array, one giant name string", trace_array_one_string, "timeline", "trace_big_event"),
    ("trace", "array, one giant args string", trace_array_one_string_args, "timeline", "trace_big_event"),
    ("trace", "object, one giant name string", trace_object_one_string, "timeline", "trace_big_event"),
    ("trace", "events + one 20 MB name (first read)", trace_events_one_long_name, "timeline",
     ("trace", LONG_NAME)),
    ("trace", "object, array not placeable (one document)", trace_object_document, "timeline", "trace_document"),
    ("trace", "array, invalid JSON at 90 % (exact parse)", trace_array_invalid, "timeline", "trace_exact"),
    ("trace", "object, invalid JSON at 90 % (exact parse)", trace_object_invalid, "timeline", "trace_exact"),
    ("trace", "array, data after it (exact parse, then a read)", trace_array_trailing, "timeline", "trace_exact"),
    ("csv", "kernel_details rows", csv_rows, "kernels", "csv"),
    ("csv", "kernel_details rows, one bad row", csv_rows_one_bad, "kernels", "csv_careful"),
    ("csv", "memory_record short fields", csv_short_fields, "memory", "csv"),
    ("csv", "one giant field", csv_one_field, "kernels", "csv"),
    ("csv", "one row of commas", csv_row_of_commas, "kernels", "csv_careful"),
    ("json", "arrays of numbers (cpu utilization)", json_numbers, "cpu_utilization", "json"),
    ("json", "nested objects (cluster communication)", json_objects, "communication", "json"),
    ("json", "one giant string", json_one_string, "cpu_utilization", "json"),
    ("text", "short records (dataset iterator)", text_short_lines, "host_queue", "text"),
    ("text", "one giant line of numbers", text_one_line, "host_queue", "text"),
    ("text", "op execution records", text_op_records, "timeline", "text"),
]


def _run(folder: str, frame: str, cache_dir: str) -> tuple[dict, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD, folder, frame, cache_dir], capture_output=True, text=True,
                       env=env)
    if r.returncode != 0:
        raise RuntimeError(f"child failed on {folder}:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1]), time.perf_counter() - t


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100, help="size of each generated file (MB)")
    ap.add_argument("--only", default="", help="run only the cases whose family or shape contains this")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "nbprofiler-bench-guard"))
    args = ap.parse_args(argv)
    from nbprofiler.io import _util
    table = getattr(_util, "EXPANSION", {})
    size = int(args.mb * 1e6)
    scratch = Path(args.dir)
    scratch.mkdir(parents=True, exist_ok=True)
    base, _ = _run("-", "-", str(scratch / "cache"))
    base_kb = base["maxrss_kb"]
    print(f"baseline (imports only): {base_kb / 1024:.0f} MB", flush=True)
    results = []
    for family, shape, build, frame, key in CASES:
        if args.only and args.only not in family and args.only not in shape:
            continue
        d = scratch / build.__name__
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        try:
            path = build(d, size)
            nbytes = path.stat().st_size
            cache_dir = scratch / "cache"
            shutil.rmtree(cache_dir, ignore_errors=True)
            out, secs = _run(str(d), frame, str(cache_dir))
        finally:
            shutil.rmtree(d, ignore_errors=True)
        peak = (out["maxrss_kb"] - base_kb) * 1024
        key, long_value = key if isinstance(key, tuple) else (key, 0)
        used = table.get(key)
        if used is not None and long_value:  # the guard's need as a factor of this file's size
            used = round(used + long_value * table["trace_big_event"] / nbytes, 2)
            key += " + long value"
        row = {"family": family, "shape": shape, "file_mb": nbytes / 1e6, "peak_mb": peak / 1e6,
               "factor": peak / nbytes, "key": key, "used": used, "secs": secs, "rows": out.get("rows"),
               "problems": out.get("problems")}
        results.append(row)
        print(json.dumps(row), flush=True)
    print()
    print("| family | shape | file MB | peak over baseline MB | measured factor | factor used | covered |")
    print("|---|---|---:|---:|---:|---:|---|")
    for r in results:
        used = "" if r["used"] is None else f"{r['used']:g} ({r['key']})"
        ok = "" if r["used"] is None else ("yes" if r["used"] >= r["factor"] else "NO")
        print(f"| {r['family']} | {r['shape']} | {r['file_mb']:.0f} | {r['peak_mb']:.0f} | {r['factor']:.2f} | "
              f"{used} | {ok} |")


if __name__ == "__main__":
    main()
