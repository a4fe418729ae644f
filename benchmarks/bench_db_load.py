"""Database export: the first open of each frame a torch_npu database gives, the timeline alone and the
dashboard, against a floor measured in the same run: sqlite3 reading the same columns of the same tables
into Arrow.

    python benchmarks/bench_db_load.py --quick            # ~100 MB, one run of each method
    python benchmarks/bench_db_load.py --sizes 1000 5000  # MB, --repeat 3 interleaved runs

The databases are written by `benchmarks/db_export.py` (the real export's schema, generated rows) into
``--scratch`` (default ``.cache/bench/db`` in the repository, ignored by git); a database of 5 GB or more
is deleted after its runs unless ``--keep``.

Methods, each in a fresh process (its own CPU time and peak RSS), interleaved, the run of median time
reported:
  floor          per frame, the tables and columns nbprofiler's reader takes for it, through sqlite3
                 (``mode=ro&immutable=1``) a batch of rows at a time into Arrow arrays, the text ids
                 decoded against STRING_IDS (read once) and PYTORCH_API's text times cast to integers:
                 the read alone, no frame.
  nbprofiler     ``nbprofiler.load(path)`` then every frame the database gives, in turn, each timed.
  floor_timeline / timeline   the same for the timeline frame alone (what the Timeline tab waits for).
  dashboard      ``nbprofiler.load(path)`` and the dashboard's construction (`Dashboard(prof)`: the
                 frames its overview needs), no display; compared with the whole floor.

Prints each run as it ends (stderr), one JSON object per size and a Markdown table: seconds, CPU seconds,
peak RSS, the ratios of time and CPU time to the floor (on a busy machine the CPU ratio is the steadier) and
the 1-minute load average. A frame the memory guard refuses (`FileTooLargeError`: the profile gives an
empty frame and a problem) is reported with the guard's message. ``--methods`` runs some of the methods;
``--profile DIR`` writes a cProfile of each nbprofiler run there.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.db_export import ensure_run  # noqa: E402

# The frames of a torch_npu database, in the order they are opened, and what nbprofiler reads for each
# (nbprofiler/io/db.py): (table, columns, text-id columns) per query. Row counts must match the frames'.
_SHAPES = "c.inputShapes, c.inputDataTypes, c.inputFormats, c.outputShapes, c.outputDataTypes, c.outputFormats"
FLOOR = {
    "kernels": [
        ("SELECT t.startNs, t.endNs, t.modelId, t.taskId, t.streamId, t.deviceId, c.name, c.opType, t.taskType, "
         f"c.taskType AS ctype, c.blockDim, c.mixBlockDim, {_SHAPES} "
         "FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId",
         ["name", "opType", "taskType", "ctype", "inputShapes", "inputDataTypes", "inputFormats", "outputShapes",
          "outputDataTypes", "outputFormats"], True),
        ("SELECT startNs, endNs, opName, opType FROM COMMUNICATION_OP", ["opName", "opType"], True),
        ("SELECT id, startNs, endNs FROM STEP_TIME", [], False),
    ],
    "timeline": [
        ("SELECT t.startNs, t.endNs, t.streamId, c.name, c.opType, t.taskType, t.connectionId "
         "FROM TASK t LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId",
         ["name", "opType", "taskType"], True),
        ("SELECT startNs, endNs, groupName, opName FROM COMMUNICATION_OP", ["groupName", "opName"], True),
        ("SELECT startNs, endNs, globalTid, name, type, connectionId FROM CANN_API", ["name"], True),
        ("SELECT startNs, endNs, globalTid, name, type FROM PYTORCH_API", ["name"], True),
    ],
    "memory": [
        ("SELECT component, timestamp, totalAllocated, totalReserved, totalActive, deviceId FROM MEMORY_RECORD",
         ["component"], True),
        ("SELECT timestampNs, ddr, hbm, deviceId FROM NPU_MEM "
         "WHERE type = (SELECT id FROM STRING_IDS WHERE value = 'app')", [], True),
    ],
    "operator_memory": [("SELECT * FROM OP_MEMORY", ["name"], True)],
    "npu_module_mem": [("SELECT m.moduleId, m.timestampNs, m.totalReserved, m.deviceId, e.name FROM NPU_MODULE_MEM m "
                        "LEFT JOIN ENUM_MODULE e ON e.id = m.moduleId", [], True)],
    "communication": [("SELECT opName, groupName, opType, startNs, endNs FROM COMMUNICATION_OP",
                       ["opName", "groupName", "opType"], True),
                      ("SELECT id, startNs, endNs FROM STEP_TIME", [], False)],
    "step_trace": [("SELECT id, startNs, endNs FROM STEP_TIME", [], True)],
}
FRAMES = list(FLOOR)
BIG_MB = 5000  # databases of this size or more are deleted after their runs

CHILD = r"""
import json, os, resource, sys, time, warnings
method, path, cache_dir, profile = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
os.environ["NBPROFILER_CACHE_DIR"] = cache_dir
warnings.simplefilter("ignore")
import numpy as np, pandas as pd, pyarrow as pa  # imports are not timed: a notebook has them loaded
from benchmarks.bench_db_load import FLOOR, FRAMES, floor_frame
if not method.startswith("floor"):
    import nbprofiler
    from nbprofiler.errors import FileTooLargeError
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def peak_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out = {"method": method, "load_1min": os.getloadavg()[0], "base_rss_mb": peak_mb(), "frames": {}}
prof_ = None
if profile != "-":
    import cProfile
    prof_ = cProfile.Profile()
    prof_.enable()
t, c = time.perf_counter(), cpu()
try:
    if method.startswith("floor"):
        db = next(iter(__import__("pathlib").Path(path).glob("ASCEND_PROFILER_OUTPUT/*.db")))
        for name in (["timeline"] if method == "floor_timeline" else FRAMES):
            f = time.perf_counter()
            rows = floor_frame(db, name)
            out["frames"][name] = {"s": time.perf_counter() - f, "rows": rows}
    else:
        p = nbprofiler.load(path)
        out["frames"]["load"] = {"s": time.perf_counter() - t, "rows": None}
        if method == "dashboard":
            from nbprofiler.views.dashboard import Dashboard
            f = time.perf_counter()
            dash = Dashboard(p)
            out["frames"]["dashboard"] = {"s": time.perf_counter() - f, "rows": None}
        else:
            for name in (["timeline"] if method == "timeline" else FRAMES):
                f = time.perf_counter()
                df = getattr(p, name)
                out["frames"][name] = {"s": time.perf_counter() - f, "rows": None if df is None else len(df)}
        # a frame the memory guard refuses is an empty frame and a problem of the profile
        refused = [q.error for q in p.problems if "FileTooLargeError" in q.error or "refused before" in q.error]
        if refused:
            out["refused"] = refused[0]
            out["refusals"] = refused
except Exception as e:
    if method.startswith("floor") or not isinstance(e, FileTooLargeError):
        raise
    out["refused"] = f"{type(e).__name__}: {e}"
out["s"] = time.perf_counter() - t
out["cpu_s"] = cpu() - c
out["peak_rss_mb"] = peak_mb()
if prof_ is not None:
    prof_.disable()
    prof_.dump_stats(profile)
print(json.dumps(out))
"""


def floor_frame(db: Path, name: str, batch: int = 65536) -> int:
    """The floor of one frame: its queries' rows through sqlite3 into Arrow, a batch at a time, the text
    ids decoded against STRING_IDS; returns the frame's row count (the sum of its row-producing queries)."""
    import sqlite3
    import urllib.parse

    import pyarrow as pa
    import pyarrow.compute as pc
    con = sqlite3.connect("file:" + urllib.parse.quote(str(db.resolve())) + "?mode=ro&immutable=1", uri=True)
    strings = _strings(con)
    rows = 0
    tables = []
    for sql, text_cols, counted in FLOOR[name]:
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        batches = []
        while chunk := cur.fetchmany(batch):
            cols = list(zip(*chunk))
            arrays = []
            for col, values in zip(names, cols):
                arr = pa.array(values)
                if col in ("startNs", "endNs") and pa.types.is_string(arr.type):  # PYTORCH_API's text times
                    arr = pc.cast(arr, pa.int64())
                if col in text_cols and not pa.types.is_null(arr.type):
                    arr = pc.take(strings.column("value"), pc.index_in(arr, value_set=strings.column("id")))
                arrays.append(arr)
            batches.append(pa.table(arrays, names=names))
        table = pa.concat_tables(batches) if batches else None
        tables.append(table)
        if counted and table is not None:
            rows += table.num_rows
    con.close()
    return rows


_string_table: dict = {}


def _strings(con):
    """STRING_IDS as an Arrow table, read once per process (every frame decodes against it)."""
    import pyarrow as pa
    if "t" not in _string_table:
        ids, values = zip(*con.execute("SELECT id, value FROM STRING_IDS").fetchall())
        _string_table["t"] = pa.table({"id": pa.array(ids, pa.int64()), "value": pa.array(values, pa.string())})
    return _string_table["t"]


def measure(method: str, run: Path, profile: str = "-") -> dict:
    with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-cache-", dir=run.parent) as cache:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        out = subprocess.run([sys.executable, "-c", CHILD, method, str(run), cache, profile], capture_output=True,
                             text=True, env=env, cwd=REPO)
    if out.returncode:
        raise RuntimeError(f"{method} on {run}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


METHODS = ["floor", "nbprofiler", "floor_timeline", "timeline", "dashboard"]


def run_size(mb: int, scratch: Path, repeat: int, profile: Path | None = None, methods=METHODS) -> dict:
    run = ensure_run(scratch, mb)
    db = next(run.glob("ASCEND_PROFILER_OUTPUT/*.db"))
    runs: dict[str, list[dict]] = {m: [] for m in methods}
    for r in range(repeat):
        for m in methods:
            prof = str(profile / f"{m}_{mb}MB_{r}.prof") if profile and not m.startswith("floor") else "-"
            runs[m].append(measure(m, run, prof))
            print(json.dumps(runs[m][-1]), file=sys.stderr, flush=True)  # each run as it ends
    out = {"size_mb": mb, "file_mb": round(db.stat().st_size / 1e6, 1), "path": str(run)}
    with __import__("sqlite3").connect(f"file:{db}?mode=ro&immutable=1", uri=True) as con:
        out["table_rows"] = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                             for t in ("TASK", "COMPUTE_TASK_INFO", "COMMUNICATION_OP", "COMMUNICATION_TASK_INFO",
                                       "CANN_API", "PYTORCH_API", "MEMORY_RECORD", "OP_MEMORY", "STRING_IDS",
                                       "STEP_TIME")}
    for m, rs in runs.items():
        med = sorted(rs, key=lambda x: x["s"])[len(rs) // 2]
        med["runs_s"] = [round(x["s"], 3) for x in rs]
        med["median_frames_s"] = {f: round(statistics.median(x["frames"][f]["s"] for x in rs), 3)
                                  for f in med["frames"] if all(f in x["frames"] for x in rs)}
        out[m] = med
    for m, base in (("nbprofiler", "floor"), ("timeline", "floor_timeline"), ("dashboard", "floor")):
        if m in out and base in out and "refused" not in out[m]:
            out[m]["x_floor"] = round(out[m]["s"] / out[base]["s"], 2)
            out[m]["x_floor_cpu"] = round(out[m]["cpu_s"] / out[base]["cpu_s"], 2)
    if "floor" in out and "nbprofiler" in out:
        nb, fl = out["nbprofiler"]["median_frames_s"], out["floor"]["median_frames_s"]
        out["frame_x_floor"] = {f: round(nb[f] / fl[f], 2) for f in FRAMES if f in nb and fl[f] > 0}
        out["rows"] = {f: {"floor": out["floor"]["frames"][f]["rows"],
                           "nbprofiler": out["nbprofiler"]["frames"].get(f, {}).get("rows")} for f in FRAMES}
    return out


def _cell(m: dict | None) -> str:
    if m is None:
        return "–"
    if "refused" in m:
        why = m["refused"].split("Error: ", 1)[-1].split("; refused")[0]
        return f"{m['s']:.2f} s, {m['peak_rss_mb']:.0f} MB, refused by the memory guard ({why})"
    ratio = f"; {m['x_floor']:.2f}× the floor, CPU {m['x_floor_cpu']:.2f}×" if "x_floor" in m else ""
    return f"{m['s']:.2f} s (CPU {m['cpu_s']:.2f} s{ratio}), {m['peak_rss_mb']:.0f} MB"


def markdown(results: list[dict]) -> str:
    lines = ["| database | tasks | timeline rows | floor (all frames) | nbprofiler first open (all frames) | "
             "floor, timeline | timeline | dashboard | load avg |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        loads = [r[m]["load_1min"] for m in METHODS if m in r]
        events = sum(r["table_rows"][t] for t in ("TASK", "COMMUNICATION_OP", "CANN_API", "PYTORCH_API"))
        lines.append(f"| {r['file_mb'] / 1000:.2f} GB | {r['table_rows']['TASK']:,} | {events:,} | "
                     + " | ".join(_cell(r.get(m)) for m in METHODS) + f" | {min(loads):.1f}-{max(loads):.1f} |")
    lines += ["", "| database | " + " | ".join(FRAMES) + " |", "|---|" + "---|" * len(FRAMES)]
    for r in results:
        if "frame_x_floor" not in r:
            continue
        nb, fl = r["nbprofiler"]["median_frames_s"], r["floor"]["median_frames_s"]
        lines.append(f"| {r['file_mb'] / 1000:.2f} GB | " + " | ".join(
            f"{nb[f]:.2f} s / {fl[f]:.2f} s ({r['frame_x_floor'][f]:.2f}×)" if f in r["frame_x_floor"] else "–"
            for f in FRAMES) + " |")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one ~100 MB database, one run of each method")
    ap.add_argument("--sizes", type=int, nargs="*", help="database sizes in MB (default 1000 5000; --quick: 100)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scratch", type=Path, default=REPO / ".cache" / "bench" / "db")
    ap.add_argument("--keep", action="store_true", help="keep the databases of 5 GB or more")
    ap.add_argument("--profile", type=Path, help="write a cProfile of each nbprofiler run into this folder")
    ap.add_argument("--methods", nargs="*", choices=METHODS, default=METHODS)
    args = ap.parse_args(argv)
    sizes = args.sizes or ([100] if args.quick else [1000, 5000])
    repeat = 1 if args.quick else args.repeat
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    results = []
    for mb in sizes:
        try:
            r = run_size(mb, args.scratch, repeat, args.profile, args.methods)
        finally:
            if mb >= BIG_MB and not args.keep:
                import shutil
                shutil.rmtree(args.scratch / f"db_{mb}MB", ignore_errors=True)
        results.append(r)
        print(json.dumps(r), flush=True)
    print(markdown(results))
    return results


if __name__ == "__main__":
    main()
