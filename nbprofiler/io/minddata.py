"""Parsers for the MindData (dataset pipeline) profiling files (FORMATS.md 2.3, 3.9-3.13, 4.7-4.8).

Every public builder takes a `RunFiles` (and ``read``, which gives a file parsed: `parse` by default; the
model passes one that parses each file once for the frames that share it) and returns the frame
`nbprofiler.schema` declares. The ``read_*`` functions take one path and are what the builders call;
they are public so a single file can be read on its own.

Files and what comes out of them:
- ``minddata_pipeline_raw_{id}.csv`` (MindSpore-derived, preferred) or ``pipeline_profiling_{id}.json``
  (raw; the csv is then derived exactly as MindSpore derives it) -> `pipeline`, `queues`;
- ``device_queue_profiling_{id}.txt`` (sink mode, preferred) or ``dataset_iterator_profiling_{id}.txt``
  -> `host_queue`;
- ``minddata_aicpu_{id}.txt`` (Ascend, us, preferred) or ``minddata_getnext_profiling_{id}.txt`` (GPU,
  ns) -> `device_queue`;
- ``minddata_cpu_utilization_{id}.json`` -> `cpu_utilization`, `op_cpu_utilization`;
- ``minddata_pipeline_summary_{id}.json`` (preferred) or ``.csv`` -> `summary_file` (a dict).

Malformed records in the line-oriented text files are skipped with one `warn_partial` warning that
names the first bad line; anything else that is wrong raises a `ProfilerDataError` naming the file
and the line or field.
"""
from __future__ import annotations

import csv
import io
import json
import math
from collections import deque
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import EmptyFileError, MalformedFileError, MissingColumnError, ProfilerDataError
from ._util import (BAD_ROW_LIMIT, cut_last_record, numeric, read_csv, read_json, read_text, too_many_bad,
                    warn_partial)
from .discover import RunFiles

PIPELINE_CSV_COLUMNS = ["op_id", "op_type", "num_workers", "output_queue_size", "output_queue_average_size",
                        "output_queue_length", "output_queue_usage_rate", "sample_interval", "parent_id",
                        "children_id"]
PIPELINE_COLUMNS = ["op_id", "op_type", "num_workers", "parent_id", "children_ids", "output_queue_length",
                    "output_queue_average_size", "output_queue_usage_rate", "sample_interval_ms"]

# minddata_cpu_utilization_*.json series -> frame column. The run-queue key changed between writers.
DEVICE_SERIES = {"user_utilization": "user_pct", "sys_utilization": "sys_pct", "io_utilization": "io_pct",
                 "idle_utilization": "idle_pct", "context_switch_count": "context_switches",
                 "runable_processes": "runnable_processes", "runnable_process": "runnable_processes"}
PROCESS_SERIES = {"user_utilization": "process_user_pct", "sys_utilization": "process_sys_pct"}
MEMORY_SERIES = {"process_memory_info": {"pss_mbytes": "process_pss_mb", "rss_mbytes": "process_rss_mb",
                                         "vss_mbytes": "process_vss_mb"},
                 "system_memory_info": {"total_sys_memory_mbytes": "sys_total_mb",
                                        "available_sys_memory_mbytes": "sys_available_mb",
                                        "used_sys_memory_mbytes": "sys_used_mb"}}


def parse(kind: str, path: Path):
    """The file ``path`` parsed by the reader `READERS` names for ``kind`` (``"csv"``: the pipeline CSV,
    ``"json"``: pipeline_profiling, ``"cpu"``: the CPU utilisation JSON, ``"queue"``: a host-queue file).
    Several frames read the same files: a builder's ``read`` argument has this signature, so the caller
    may share one parse between them."""
    return READERS[kind](path)


# -- pipeline ---------------------------------------------------------------------------------------
def pipeline(run: RunFiles, read=parse) -> pd.DataFrame | None:
    """The pipeline frame (the schema's `minddata_pipeline`): from minddata_pipeline_raw_*.csv, else derived
    from pipeline_profiling_*.json. ``attrs["source"]`` names the file used."""
    path = run.get("minddata_pipeline_raw")
    if path is not None:
        frame, _ = read("csv", path)
        return frame
    path = run.get("pipeline_profiling")
    if path is not None:
        doc = read("json", path)
        return derive_pipeline(doc, path)
    return None


def read_pipeline_csv(path: Path) -> tuple[pd.DataFrame, dict[int, list[int]]]:
    """``minddata_pipeline_raw_*.csv`` -> (pipeline frame, {op_id: sampled output-queue sizes}).

    Rows stay in the file's breadth-first order. Empty cells mean None (root parent, leaf children,
    queue fields of queue-less ops); a queue-less op's usage rate is 0.0 whether the file wrote it
    empty or ``0`` (MindInsight reads empty as 0). List cells are JSON/Python list literals."""
    df = read_csv(path, required=PIPELINE_CSV_COLUMNS)
    lines = df.index.to_numpy() + 2
    children = [_list_cell(v, path, int(ln), "children_id") for v, ln in zip(df["children_id"], lines)]
    sizes = {}
    op_ids = numeric(df, "op_id", path, dtype=int, allow_missing=False)
    for op_id, v, ln in zip(op_ids, df["output_queue_size"], lines):
        if v.strip():
            sizes[int(op_id)] = _list_cell(v, path, int(ln), "output_queue_size")
    frame = pd.DataFrame({
        "op_id": op_ids.astype("int64"),
        "op_type": df["op_type"].str.strip(),
        "num_workers": numeric(df, "num_workers", path, dtype=int).astype("Int64"),
        "parent_id": numeric(df, "parent_id", path, dtype=int).astype("Int64"),
        "children_ids": children,
        "output_queue_length": numeric(df, "output_queue_length", path, dtype=int).astype("Int64"),
        "output_queue_average_size": numeric(df, "output_queue_average_size", path),
        "output_queue_usage_rate": numeric(df, "output_queue_usage_rate", path).fillna(0.0),
        "sample_interval_ms": numeric(df, "sample_interval", path),
    })
    if not frame["num_workers"].isna().any():
        frame["num_workers"] = frame["num_workers"].astype("int64")
    dup = frame["op_id"].duplicated()
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise MalformedFileError(path, f"op_id {frame['op_id'].iloc[i]} appears twice", line=i + 2, field="op_id")
    frame = frame.reset_index(drop=True)
    frame.attrs["source"] = str(path)
    return frame, sizes


def _list_cell(text: str, path: Path, line: int, field: str) -> list[int]:
    text = text.strip()
    if not text:
        return []
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or past the parser's limits
        raise MalformedFileError(path, f"not a list literal: {text[:40]!r}", line=line, field=field) from None
    if not isinstance(value, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                              and math.isfinite(x) for x in value):
        raise MalformedFileError(path, f"expected a list of numbers, found {text[:40]!r}", line=line, field=field)
    return [int(x) for x in value]


def read_pipeline_json(path: Path) -> dict:
    """``pipeline_profiling_*.json`` validated: ``{"sampling_interval", "op_info": {op_id: op}}`` where
    each op has ``op_type``, ``num_workers``, ``children`` (list, [] when absent or null) and ``queue``
    (``(sizes, capacity)`` or None for a queue-less op; legacy ``"metrics": null`` included)."""
    obj = read_json(path)
    if not isinstance(obj, dict):
        raise MalformedFileError(path, f"expected a JSON object, found {type(obj).__name__}")
    if "op_info" not in obj:
        raise MissingColumnError(path, "missing key 'op_info'", field="op_info")
    if not isinstance(obj["op_info"], list) or not obj["op_info"]:
        raise MalformedFileError(path, "'op_info' must be a non-empty list", field="op_info")
    ops: dict[int, dict] = {}
    for i, item in enumerate(obj["op_info"]):
        where = f"op_info[{i}]"
        if not isinstance(item, dict):
            raise MalformedFileError(path, f"expected an object, found {type(item).__name__}", field=where)
        op_id = item.get("op_id")
        if not _is_int(op_id):
            raise MalformedFileError(path, f"op_id must be an integer, found {op_id!r}", field=f"{where}.op_id")
        if op_id in ops:
            raise MalformedFileError(path, f"op_id {op_id} appears twice", field=f"{where}.op_id")
        children = item.get("children") or []
        if not isinstance(children, list) or not all(_is_int(c) for c in children):
            raise MalformedFileError(path, f"children must be a list of op ids, found {children!r}",
                                     field=f"{where}.children")
        workers = item.get("num_workers")
        if workers is not None and not _is_int(workers):
            raise MalformedFileError(path, f"num_workers must be an integer, found {workers!r}",
                                     field=f"{where}.num_workers")
        queue = None
        metrics = item.get("metrics")
        if metrics is not None and not isinstance(metrics, dict):
            raise MalformedFileError(path, "metrics must be an object or null", field=f"{where}.metrics")
        out_q = (metrics or {}).get("output_queue")
        if out_q:
            if not isinstance(out_q, dict):
                raise MalformedFileError(path, "output_queue must be an object", field=f"{where}.metrics.output_queue")
            sizes, length = out_q.get("size"), out_q.get("length")
            if not isinstance(sizes, list) or not all(_is_number(s) for s in sizes):
                raise MalformedFileError(path, "output_queue.size must be a list of numbers",
                                         field=f"{where}.metrics.output_queue.size")
            if not _is_int(length) or length <= 0:
                raise MalformedFileError(path, f"output_queue.length must be a positive integer, found {length!r}",
                                         field=f"{where}.metrics.output_queue.length")
            queue = ([int(s) for s in sizes], int(length))
        ops[op_id] = {"op_type": str(item.get("op_type", "")), "num_workers": workers, "children": list(children),
                      "queue": queue}
    interval = obj.get("sampling_interval")
    if interval is not None and not _is_number(interval):
        raise MalformedFileError(path, f"sampling_interval must be a number, found {interval!r}",
                                 field="sampling_interval")
    return {"sampling_interval": interval, "op_info": ops}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    """A finite JSON number (Python's json accepts NaN and Infinity, which no profiler writes)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _numbers(v: list) -> bool:
    """Whether every item of ``v`` is `_is_number`: the items' types checked at once, then their finiteness in
    one numpy pass (a CPU file holds tens of thousands of samples); item by item where that cannot say."""
    if set(map(type, v)) <= {int, float}:
        try:
            return bool(np.isfinite(np.array(v, dtype=np.float64)).all())
        except OverflowError:   # an int beyond float's range: as `_is_number` treats it
            pass
    return all(_is_number(x) for x in v)


def derive_pipeline(doc: dict, path: Path) -> pd.DataFrame:
    """The minddata_pipeline_raw csv that MindSpore would write for this pipeline JSON, as a frame.

    Breadth-first from op 0 (an ``EpochCtrlOp`` above it is not part of the walk); a child without an
    output queue is skipped and its own children are promoted in its place; children ids that name no
    op are dropped. Average = mean of the samples, usage = average / capacity (0.0 without a queue)."""
    ops = doc["op_info"]
    if 0 not in ops:
        raise MalformedFileError(path, "no op with op_id 0 (the pipeline root)", field="op_info")
    rows = []
    seen = {0}
    todo = deque([(0, None)])
    while todo:
        op_id, parent = todo.popleft()
        op = ops[op_id]
        children = _queued_children(op_id, ops)
        queue = op["queue"]
        avg = float(np.mean(queue[0])) if queue and queue[0] else np.nan
        rows.append({"op_id": op_id, "op_type": op["op_type"], "num_workers": op["num_workers"],
                     "parent_id": parent, "children_ids": children,
                     "output_queue_length": queue[1] if queue else None,
                     "output_queue_average_size": avg,
                     "output_queue_usage_rate": avg / queue[1] if queue and queue[0] else 0.0,
                     "sample_interval_ms": doc["sampling_interval"]})
        for c in children:
            if c not in seen:  # a malformed graph with a cycle or a shared child must not loop forever
                seen.add(c)
                todo.append((c, op_id))
    frame = pd.DataFrame(rows, columns=PIPELINE_COLUMNS)
    frame["op_id"] = frame["op_id"].astype("int64")
    frame["num_workers"] = frame["num_workers"].astype("Int64")
    if not frame["num_workers"].isna().any():
        frame["num_workers"] = frame["num_workers"].astype("int64")
    frame["parent_id"] = frame["parent_id"].astype("Int64")
    frame["output_queue_length"] = frame["output_queue_length"].astype("Int64")
    for c in ("output_queue_average_size", "output_queue_usage_rate", "sample_interval_ms"):
        frame[c] = frame[c].astype("float64")
    frame.attrs["source"] = str(path)
    return frame


def _queued_children(op_id: int, ops: dict) -> list[int]:
    out, todo, seen = [], deque(ops[op_id]["children"]), set()
    while todo:
        c = todo.popleft()
        if c not in ops or c in seen:
            continue
        seen.add(c)
        if ops[c]["queue"] is None:
            todo.extend(ops[c]["children"])
        else:
            out.append(c)
    return out


def queues(run: RunFiles, read=parse) -> pd.DataFrame | None:
    """Sampled output-queue sizes (the schema's `minddata_queues`), from pipeline_profiling_*.json (every
    sample as recorded), else from the csv's ``output_queue_size`` lists. ``time_ms`` is the CPU
    utilisation ``time_stamp`` of the same sample index when both have the same length."""
    json_path = run.get("pipeline_profiling")
    csv_path = run.get("minddata_pipeline_raw")
    if json_path is not None:
        doc = read("json", json_path)
        series = {op_id: op["queue"] for op_id, op in doc["op_info"].items() if op["queue"] is not None}
    elif csv_path is not None:
        frame, sizes = read("csv", csv_path)
        lengths = dict(zip(frame["op_id"], frame["output_queue_length"]))
        series = {op_id: (s, int(lengths[op_id])) for op_id, s in sizes.items() if pd.notna(lengths.get(op_id))}
    else:
        return None
    stamps = None
    cpu_path = run.get("minddata_cpu_utilization")
    if cpu_path is not None:
        try:
            stamps = read("cpu", cpu_path)["time_stamp"]
        except ProfilerDataError:
            stamps = None  # the cpu file's own builder reports it; queue sizes stand without times
    parts = []
    for op_id in sorted(series):
        sizes, length = series[op_id]
        n = len(sizes)
        times = np.asarray(stamps, dtype="float64") if stamps is not None and len(stamps) == n \
            else np.full(n, np.nan)
        parts.append(pd.DataFrame({"op_id": np.full(n, op_id, dtype="int64"), "sample": np.arange(n, dtype="int64"),
                                   "time_ms": times, "size": np.asarray(sizes, dtype="int64"),
                                   "length": np.full(n, length, dtype="int64")}))
    if not parts:
        return pd.DataFrame({"op_id": pd.Series(dtype="int64"), "sample": pd.Series(dtype="int64"),
                             "time_ms": pd.Series(dtype="float64"), "size": pd.Series(dtype="int64"),
                             "length": pd.Series(dtype="int64")})
    return pd.concat(parts, ignore_index=True)


# -- host queue (device_queue_profiling / dataset_iterator_profiling) -------------------------------
def host_queue(run: RunFiles, read=parse) -> pd.DataFrame | None:
    """The host-side queue per step (the schema's `host_queue`). Sink-mode ``device_queue_profiling_*`` is
    preferred over ``dataset_iterator_profiling_*``, as MindInsight and MindSpore choose."""
    for role, source in (("device_queue", "device_queue"), ("dataset_iterator", "dataset_iterator")):
        path = run.get(role)
        if path is not None:
            records = read("queue", path)
            frame = host_queue_frame(records)
            frame.attrs["source"] = source
            frame.attrs["path"] = str(path)
            return frame
    return None


def read_queue_records(path: Path) -> pd.DataFrame:
    """Every record of a device_queue/dataset_iterator profiling file, in file order.

    Columns: ``line`` (int64, 1-based), ``kind`` (0 = time record, 1 = connector/queue record),
    ``sub`` (kind 0: 0 get, 1 push, 2 batch/total; kind 1: the queue capacity), ``step`` (as written,
    may not start at 1), ``value`` (kind 0: cost ms; kind 1: queue size), ``timestamp_ms`` (float64,
    NaN for 4-field records). Malformed lines are skipped with one warning naming the first; a last line
    cut off (no final newline) with a truncation warning."""
    text = read_text(path)
    rows, bad = [], []
    for ln, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields:
            continue
        try:
            nums = [int(f) for f in fields]
        except ValueError:
            bad.append((ln, raw))
            continue
        if len(nums) not in (4, 5) or nums[0] not in (0, 1) or (nums[0] == 0 and nums[1] not in (0, 1, 2)):
            bad.append((ln, raw))
            continue
        rows.append((ln, *nums[:4], float(nums[4]) if len(nums) == 5 else np.nan))
    bad = cut_last_record(path, text, bad)
    if not rows:
        if bad:
            raise MalformedFileError(path, f"no valid record; expected 4 or 5 integers per line, found "
                                           f"{bad[0][1][:60]!r}", line=bad[0][0])
        raise EmptyFileError(path, "file holds no records")
    if too_many_bad(len(bad), len(rows) + len(bad)):
        raise MalformedFileError(path, f"{len(bad)} of {len(rows) + len(bad)} records are malformed (past the "
                                       f"{BAD_ROW_LIMIT:.0%} limit); first: {bad[0][1][:60]!r}", line=bad[0][0])
    if bad:
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        warn_partial(MalformedFileError(path, f"skipped a malformed record {bad[0][1][:60]!r}{more} "
                                              "(expected 4 or 5 integers: type sub step value [timestamp])",
                                        line=bad[0][0]))
    df = pd.DataFrame(rows, columns=["line", "kind", "sub", "step", "value", "timestamp_ms"])
    for c in ("line", "kind", "sub", "step", "value"):
        df[c] = df[c].astype("int64")
    df.attrs["path"] = str(path)
    return df


def host_queue_frame(records: pd.DataFrame) -> pd.DataFrame:
    """One row per connector (queue) record, sorted by step (stable, as MindInsight sorts), with the
    step's get/push/batch costs joined in; steps that only have time records get a row with <NA> size
    (``size``/``capacity`` then become Int64)."""
    conn = records[records["kind"] == 1]
    hq = pd.DataFrame({"step": conn["step"].to_numpy(), "size": conn["value"].to_numpy(),
                       "capacity": conn["sub"].to_numpy(), "timestamp_ms": conn["timestamp_ms"].to_numpy()})
    times = records[records["kind"] == 0]
    costs = (times.drop_duplicates(["step", "sub"]).pivot(index="step", columns="sub", values="value")
             .reindex(columns=[0, 1, 2]).astype("float64"))
    costs.columns = ["get_ms", "push_ms", "batch_ms"]
    only_time = costs.index.difference(pd.Index(hq["step"]))
    if len(only_time):
        ts = times.groupby("step")["timestamp_ms"].first()
        extra = pd.DataFrame({"step": only_time.to_numpy(), "size": pd.NA, "capacity": pd.NA,
                              "timestamp_ms": ts.reindex(only_time).to_numpy()})
        hq = pd.concat([hq.astype({"size": "Int64", "capacity": "Int64"}),
                        extra.astype({"size": "Int64", "capacity": "Int64"})], ignore_index=True)
    hq = hq.merge(costs, left_on="step", right_index=True, how="left")
    hq = hq.sort_values("step", kind="stable").reset_index(drop=True)
    hq["step"] = hq["step"].astype("int64")
    hq["timestamp_ms"] = hq["timestamp_ms"].astype("float64")
    return hq[["step", "size", "capacity", "get_ms", "push_ms", "batch_ms", "timestamp_ms"]]


# -- device queue (GetNext) -------------------------------------------------------------------------
def device_queue(run: RunFiles) -> pd.DataFrame | None:
    """The device-side data queue (the schema's `device_queue`). Ascend ``minddata_aicpu_*`` (us) is preferred
    over GPU ``minddata_getnext_profiling_*`` (ns), as MindInsight chooses."""
    for role, ns in (("minddata_aicpu", False), ("minddata_getnext", True)):
        path = run.get(role)
        if path is not None:
            return read_getnext(path, nanoseconds=ns)
    return None


def read_getnext(path: Path, nanoseconds: bool) -> pd.DataFrame:
    """``<name> <start> <end> [<queue_size>]`` lines; only names starting with ``GetNext`` are records
    (other lines are other AI CPU kernels and are ignored, as MindInsight ignores them)."""
    text = read_text(path)
    rows, bad = [], []
    for ln, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or not fields[0].startswith("GetNext"):
            continue
        try:
            start, end = float(fields[1]), float(fields[2])
            size = int(fields[3]) if len(fields) > 3 else None
        except (IndexError, ValueError):
            bad.append((ln, raw))
            continue
        rows.append((fields[0], start, end, size))
    bad = cut_last_record(path, text, bad)
    if bad:
        if not rows or too_many_bad(len(bad), len(rows) + len(bad)):
            raise MalformedFileError(path, f"{len(bad)} of {len(rows) + len(bad)} GetNext records are malformed; "
                                           f"first: {bad[0][1][:60]!r}", line=bad[0][0])
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        warn_partial(MalformedFileError(path, f"skipped a malformed GetNext record {bad[0][1][:60]!r}{more} "
                                              "(expected: name start end [queue_size])", line=bad[0][0]))
    to_us = 1e-3 if nanoseconds else 1.0
    names = [r[0] for r in rows]
    start = np.array([r[1] for r in rows], dtype="float64")
    end = np.array([r[2] for r in rows], dtype="float64")
    frame = pd.DataFrame({"index": np.arange(len(rows), dtype="int64"), "name": pd.Series(names, dtype=object),
                          "start_us": start * to_us, "end_us": end * to_us,
                          "get_next_ms": (end - start) * to_us / 1e3,
                          "size": pd.array([r[3] for r in rows], dtype="Int64")})
    frame.attrs["source"] = "minddata_getnext" if nanoseconds else "minddata_aicpu"
    frame.attrs["path"] = str(path)
    return frame


# -- CPU utilisation --------------------------------------------------------------------------------
def read_cpu_json(path: Path) -> dict:
    """``minddata_cpu_utilization_*.json`` validated; series are lists of numbers, kept as written."""
    obj = read_json(path)
    if not isinstance(obj, dict):
        raise MalformedFileError(path, f"expected a JSON object, found {type(obj).__name__}")
    for key in ("time_stamp", "device_info"):
        if key not in obj:
            raise MissingColumnError(path, f"missing key {key!r}", field=key)
    _check_series(obj["time_stamp"], path, "time_stamp")
    for group in ("device_info", "process_info", *MEMORY_SERIES):
        block = obj.get(group)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise MalformedFileError(path, f"{group} must be an object", field=group)
        for k, v in block.items():
            _check_series(v, path, f"{group}.{k}")
    ops = obj.get("op_info") or []
    if not isinstance(ops, list):
        raise MalformedFileError(path, "op_info must be a list", field="op_info")
    for i, op in enumerate(ops):
        if not isinstance(op, dict) or not _is_int(op.get("op_id")):
            raise MalformedFileError(path, "each op_info entry needs an integer op_id", field=f"op_info[{i}].op_id")
        metrics = op.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise MalformedFileError(path, "metrics must be an object", field=f"op_info[{i}].metrics")
        for k, v in metrics.items():
            _check_series(v, path, f"op_info[{i}].metrics.{k}")
    return obj


def _check_series(v, path: Path, field: str) -> None:
    if not isinstance(v, list) or not _numbers(v):
        bad = next((x for x in v if not _is_number(x)), v) if isinstance(v, list) else v
        raise MalformedFileError(path, f"expected a list of numbers, found {str(bad)[:40]}", field=field)


def _fit(values, n: int) -> np.ndarray:
    """A series aligned by index to ``n`` samples: truncated, or padded with NaN."""
    out = np.full(n, np.nan)
    m = min(n, len(values))
    out[:m] = np.asarray(values[:m], dtype="float64")
    return out


def cpu_utilization(run: RunFiles, read=parse) -> pd.DataFrame | None:
    """Whole-machine and process CPU use per sample (the schema's `cpu_utilization`), plus:

    - memory columns where the file has them (``process_pss_mb``, ``process_rss_mb``,
      ``process_vss_mb``, ``sys_total_mb``, ``sys_available_mb``, ``sys_used_mb``, float64 MB);
    - ``step`` (Int64): the training step MindInsight assigns to the sample (FORMATS.md 5.7): the
      host-queue records' steps rebased so the file's first line is step 1; 0 before the first queue
      record; <NA> when there is no host-queue file (or it has no timestamps).
    ``attrs``: ``sampling_interval_ms``, ``cpu_processor_num``, ``series_lengths`` (raw length of every
    series, keyed ``group.key``), ``step_total`` (number of host-queue records, MindInsight's total
    steps, or None) and ``path``."""
    path = run.get("minddata_cpu_utilization")
    if path is None:
        return None
    obj = read("cpu", path)
    stamps = obj["time_stamp"]
    n = len(stamps)
    cols = {"sample": np.arange(n, dtype="int64"), "time_ms": np.asarray(stamps, dtype="float64")}
    lengths = {"time_stamp": n}
    for group, mapping in (("device_info", DEVICE_SERIES), ("process_info", PROCESS_SERIES), *MEMORY_SERIES.items()):
        for key, values in (obj.get(group) or {}).items():
            lengths[f"{group}.{key}"] = len(values)
            if key in mapping:
                cols[mapping[key]] = _fit(values, n)
    first = ["sample", "time_ms", "user_pct", "sys_pct", "io_pct", "idle_pct", "context_switches",
             "runnable_processes", "process_user_pct", "process_sys_pct"]
    for col in first[2:]:
        cols.setdefault(col, np.full(n, np.nan))
    frame = pd.DataFrame(cols)
    frame = frame[first + [c for c in frame.columns if c not in first]]
    records, step_total = _host_records(run, read)
    frame["step"] = pd.array(mindinsight_steps(stamps, records), dtype="Int64")
    frame.attrs.update({"sampling_interval_ms": obj.get("sampling_interval"),
                        "cpu_processor_num": obj.get("cpu_processor_num"), "series_lengths": lengths,
                        "step_total": step_total, "path": str(path)})
    return frame


def _host_records(run: RunFiles, read):
    """(records, number of connector records) of the host-queue file, or (None, None)."""
    path = run.get("device_queue") or run.get("dataset_iterator")
    if path is None:
        return None, None
    try:
        records = read("queue", path)
    except ProfilerDataError:
        return None, None  # the host_queue builder reports the file; CPU samples stand without steps
    return records, int((records["kind"] == 1).sum())


def mindinsight_steps(stamps, records: pd.DataFrame | None) -> list:
    """MindInsight's step for each CPU sample time (its cpu-utilisation analyser, FORMATS.md 5.7).

    Queue records' steps are rebased so the first line's step is 1. A sample earlier than the first
    queue record is step 0; otherwise it takes the step of the first record whose timestamp is >= the
    sample when equal, else of the record before it (the last record at or before the sample); after
    the last record, the last step. Records without a timestamp (4-field files) give no steps."""
    n = len(stamps)
    if records is None or records.empty:
        return [None] * n
    conn = records[records["kind"] == 1]
    if conn.empty or conn["timestamp_ms"].isna().any():
        return [None] * n
    offset = int(records["step"].iloc[0]) - 1
    q_steps = (conn["step"].to_numpy() - offset).tolist()
    q_times = conn["timestamp_ms"].to_numpy().tolist()
    out, left, right = [], 0, 0
    for t in stamps:
        t = float(t)
        if t < q_times[0]:
            out.append(0)
            continue
        while right < len(q_times):
            if t <= q_times[right]:
                out.append(q_steps[left] if t < q_times[right] else q_steps[right])
                break
            left = right
            right += 1
        if right == len(q_times):
            out.append(q_steps[-1])
    return out


def op_cpu_utilization(run: RunFiles, read=parse) -> pd.DataFrame | None:
    """Per-op CPU use (the schema's `op_cpu_utilization`), long form, one row per op and sample, series aligned
    by index to ``time_stamp``. An ``op_id`` -1 entry (CPU of the engine's threads outside any op) is
    kept as written; MindInsight and MindSpore ignore it, and so do the analyses."""
    path = run.get("minddata_cpu_utilization")
    if path is None:
        return None
    obj = read("cpu", path)
    stamps = np.asarray(obj["time_stamp"], dtype="float64")
    parts = []
    for op in obj.get("op_info") or []:
        metrics = op.get("metrics") or {}
        user, sys_ = metrics.get("user_utilization", []), metrics.get("sys_utilization", [])
        m = max(len(user), len(sys_))
        times = _fit(stamps, m)
        parts.append(pd.DataFrame({"op_id": np.full(m, op["op_id"], dtype="int64"),
                                   "sample": np.arange(m, dtype="int64"), "time_ms": times,
                                   "user_pct": _fit(user, m), "sys_pct": _fit(sys_, m)}))
    if not parts:
        return pd.DataFrame({"op_id": pd.Series(dtype="int64"), "sample": pd.Series(dtype="int64"),
                             "time_ms": pd.Series(dtype="float64"), "user_pct": pd.Series(dtype="float64"),
                             "sys_pct": pd.Series(dtype="float64")})
    frame = pd.concat(parts, ignore_index=True)
    frame.attrs["path"] = str(path)
    return frame


# -- MindSpore's own summary ------------------------------------------------------------------------
def summary_file(run: RunFiles) -> dict | None:
    """MindSpore's ``minddata_pipeline_summary_*`` as a dict of lists (JSON preferred, else the CSV)."""
    path = run.get("minddata_pipeline_summary_json")
    if path is not None:
        obj = read_json(path)
        if not isinstance(obj, dict):
            raise MalformedFileError(path, f"expected a JSON object, found {type(obj).__name__}")
        return check_summary_shape(obj, path)
    path = run.get("minddata_pipeline_summary_csv")
    if path is not None:
        return check_summary_shape(read_summary_csv(path), path)
    return None


# The writer's shape (MindSpore's ``MinddataProfilingAnalyzer``): every value is a list; these hold one
# entry per pipeline op, in ``op_ids`` order.
_PER_OP_NUMBERS = ("num_workers", "queue_average_size", "queue_utilization_pct", "queue_empty_freq_pct",
                   "parent_id", "avg_cpu_pct", "avg_cpu_pct_per_worker")
_PER_OP_TEXTS = ("op_names", "pipeline_ops")
_ONE_NUMBER = ("per_pipeline_time", "per_push_queue_time", "per_batch_time")


def check_summary_shape(obj: dict, path: Path) -> dict:
    """``obj`` when it has the pipeline summary's shape, else `MalformedFileError` naming the first key
    that does not: a summary whose lists disagree on the number of ops would pair one op's numbers
    with another op's name."""
    def bad(key, why):
        raise MalformedFileError(path, f"not a pipeline summary: {key!r} {why}", field=str(key))

    for key, value in obj.items():
        if not isinstance(value, list):
            bad(key, f"is a {type(value).__name__}, not a list")
    ids = obj.get("op_ids")
    if ids is not None and not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        bad("op_ids", "holds a value that is not an op id")
    n_ops = None if ids is None else len(ids)
    for key in (*_PER_OP_NUMBERS, *_PER_OP_TEXTS, "children_ids"):
        value = obj.get(key)
        if value is None:
            continue
        if n_ops is not None and len(value) != n_ops:
            bad(key, f"has {len(value)} entries for {n_ops} ops")
        if key in _PER_OP_NUMBERS and not all(_is_number(v) for v in value):
            bad(key, "holds a value that is not a number")
        if key in _PER_OP_TEXTS and not all(isinstance(v, str) for v in value):
            bad(key, "holds a value that is not text")
        if key == "children_ids" and not all(isinstance(c, list) and all(isinstance(i, int) for i in c)
                                             for c in value):
            bad(key, "holds a value that is not a list of op ids")
    for key in _ONE_NUMBER:
        value = obj.get(key)
        if value is not None and (len(value) != 1 or not _is_number(value[0])):
            bad(key, "is not one number")
    return obj


def read_summary_csv(path: Path) -> dict:
    """The ragged summary CSV: each row is a key followed by its values (any number of them). Cells
    become int, float, a list (``[1]``, ``[]``) or stay text (sentences), as in the JSON twin."""
    text = read_text(path)
    out: dict = {}
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as e:
        raise MalformedFileError(path, f"not a readable CSV: {e}") from None
    for ln, row in enumerate(rows, start=1):
        if not row or not any(c.strip() for c in row):
            continue
        key = row[0].strip()
        if not key:
            raise MalformedFileError(path, "row without a key in its first cell", line=ln)
        out[key] = [_summary_cell(c) for c in row[1:]]
    if not out:
        raise EmptyFileError(path, "file holds no rows")
    return out


def _summary_cell(cell: str):
    s = cell.strip()
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    if s.startswith("[") and s.endswith("]"):
        try:
            return json.loads(s)
        except (ValueError, RecursionError):
            pass
    return cell


READERS = {"csv": read_pipeline_csv, "json": read_pipeline_json, "cpu": read_cpu_json,
           "queue": read_queue_records}
