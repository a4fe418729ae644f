"""Database export: what the op-type table costs when it is aggregated inside SQLite (only one row per
type and core leaves the file) against building the kernels frame and grouping it in pandas, in the same
run on the same file.

    python benchmarks/bench_db.py --quick     # the real torch_npu database x 200 (~110k device tasks)
    python benchmarks/bench_db.py             # x 2000 (~1.1M device tasks)

The database is the real ``ascend_pt_db_2rank`` rank-0 file with its TASK / COMPUTE_TASK_INFO rows
repeated (new task ids, shifted times), written into a scratch folder. Prints JSON: seconds and peak
traced memory (MB) of both ways, their ratios, and that both give the same counts.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import tempfile
import time
import tracemalloc
from pathlib import Path

from nbprofiler.io import db
from nbprofiler.io.discover import RunFiles
from nbprofiler.io.ops import npu_types_from_kernels

SOURCE = (Path(__file__).resolve().parents[1].parent / "shared/data/npu/ascend_pt_db_2rank/rank0_ascend_pt/"
          "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db")


def scaled_copy(dest: Path, repeat: int) -> Path:
    target = dest / SOURCE.name
    shutil.copy(SOURCE, target)
    con = sqlite3.connect(target)
    with con:
        shift = con.execute("SELECT max(globalTaskId) + 1 FROM TASK").fetchone()[0]
        span = con.execute("SELECT max(endNs) - min(startNs) + 1 FROM TASK").fetchone()[0]
        tcols = [r[1] for r in con.execute("PRAGMA table_info(TASK)")]
        ccols = [r[1] for r in con.execute("PRAGMA table_info(COMPUTE_TASK_INFO)")]
        con.execute("CREATE TEMP TABLE t0 AS SELECT * FROM TASK")
        con.execute("CREATE TEMP TABLE c0 AS SELECT * FROM COMPUTE_TASK_INFO")
        for k in range(1, repeat):
            sel_t = ", ".join(f"globalTaskId + {k * shift}" if c == "globalTaskId" else
                              f"{c} + {k * span}" if c in ("startNs", "endNs") else c for c in tcols)
            sel_c = ", ".join(f"globalTaskId + {k * shift}" if c == "globalTaskId" else c for c in ccols)
            con.execute(f"INSERT INTO TASK SELECT {sel_t} FROM t0")
            con.execute(f"INSERT INTO COMPUTE_TASK_INFO SELECT {sel_c} FROM c0")
    con.close()
    return target


def measure(fn):
    """(result, seconds, peak traced MB): timed untraced (tracing slows allocation-heavy code), then traced."""
    t = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return out, seconds, peak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    repeat = 200 if args.quick else 2000
    with tempfile.TemporaryDirectory() as scratch:
        path = scaled_copy(Path(scratch), repeat)
        run = RunFiles("database", Path(scratch), "0")
        run.add("profiler_db", path)
        sql, sql_s, sql_mb = measure(lambda: db.op_type_totals(run))
        frame, frame_s, frame_mb = measure(lambda: npu_types_from_kernels(db.kernels(run)))
        tasks = sqlite3.connect(path).execute("SELECT count(*) FROM TASK").fetchone()[0]
    key = ["kind", "op_type"]
    same = (sql.sort_values(key)["count"].tolist() == frame.sort_values(key)["count"].tolist())
    print(json.dumps({"device_tasks": tasks, "sql_aggregate_s": round(sql_s, 3), "sql_peak_mb": round(sql_mb, 1),
                      "kernels_frame_s": round(frame_s, 3), "kernels_peak_mb": round(frame_mb, 1),
                      "time_ratio_sql_vs_frame": round(sql_s / frame_s, 3),
                      "memory_ratio_sql_vs_frame": round(sql_mb / frame_mb, 4), "same_counts": same}, indent=1))


if __name__ == "__main__":
    main()
