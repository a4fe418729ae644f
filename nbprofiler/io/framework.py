"""Parsers for MindSpore's host-side (CPU) framework files: ``cpu_op_type_info_*.csv``,
``cpu_op_detail_info_*.csv``, ``cpu_op_execute_timestamp_*.txt`` and ``cpu_ms_memory_record_*.txt``.

They live in ``FRAMEWORK/`` of a MindSpore 2.x ``*_ascend_ms`` folder, or flat in a legacy CPU/GPU
profiler folder (FORMATS.md 3.16 and 4.12). Times in the CSVs are ms; the timestamp file has ns starts
and ms durations; the memory record has ns timestamps and byte sizes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import EmptyFileError, MalformedFileError, MissingColumnError, ProfilerDataError
from ._util import drop_impossible_times, numeric, read_csv, read_text, skipped_rows, warn_partial
from .discover import RunFiles

US_PER_MS = 1000.0
# MindSpore's memory viewer turns the allocator's bytes into "MB" as bytes / 1024 / 1000 (its
# KB_TO_MB = 1000), so these values equal the ones it writes into memory_record.csv.
BYTES_PER_MB = 1024 * 1000


def _short_type(name: str) -> str:
    """Operator type from a (full) op name: last scope component, minus the ``-opN`` suffix."""
    return name.rsplit("/", 1)[-1].split("-op", 1)[0]


def cpu_op_types(path: Path) -> pd.DataFrame:
    """``cpu_op_type_info_{id}.csv`` -> op_types rows of kind "cpu".

    Columns: ``op_type``, ``total_time_us`` (``total_compute_time`` ms x 1000), ``count``
    (``type_occurrences``: executions), ``avg_time_us`` (total/count), ``file_percent`` (the file's
    ``percent``, a fraction 0..1 in the shipped files, × 100 onto the 0..100 scale of every other
    writer), ``op_names`` (int64, the file's
    ``execution_frequency(per-step)``, which in the real files is the number of distinct op names of the
    type, not calls per step; FORMATS 4.12). A row whose time is impossible (negative, over
    `MAX_DURATION_US`) is skipped with a warning naming its line (`drop_impossible_times`).
    """
    df = read_csv(path, required=["op_type", "type_occurrences", "total_compute_time"])
    out = pd.DataFrame({"op_type": df["op_type"].str.strip(),
                        "total_time_us": numeric(df, "total_compute_time", path) * US_PER_MS,
                        "count": numeric(df, "type_occurrences", path, dtype=int, allow_missing=False)})
    out["avg_time_us"] = out["total_time_us"] / out["count"].replace(0, np.nan)
    out["file_percent"] = numeric(df, "percent", path) * 100 if "percent" in df else np.nan
    freq = next((c for c in df.columns if c.startswith("execution_frequency")), None)
    if freq is not None:
        out["op_names"] = numeric(df, freq, path, dtype=int)
    out = drop_impossible_times(out, df, path, {"total_time_us": ("total_compute_time", 1.0)})
    return out.reset_index(drop=True)


def cpu_ops(path: Path) -> pd.DataFrame:
    """``cpu_op_detail_info_{id}.csv`` -> ops rows of kind "cpu".

    Columns: ``op_name`` (``full_op_name``), ``short_name`` (``op_name``), ``op_type``,
    ``total_time_us`` (``op_total_time(ms)`` x 1000), ``count`` (``op_occurrences``), ``avg_time_us``
    (total/count), ``file_percent`` (``total_proportion``, a fraction, × 100), ``subgraph``.
    PyNative runs name some ops by their bare type (``MatMul``): op_name = short_name = op_type then.
    A row whose time is impossible is skipped with a warning, as in `cpu_op_types`.
    """
    df = read_csv(path, required=["op_type", "full_op_name", "op_occurrences"])
    total_col = next((c for c in df.columns if c.startswith("op_total_time")), None)
    if total_col is None:
        raise MissingColumnError(path, f"missing column 'op_total_time(ms)'; header is {list(df.columns)}",
                                 line=1, field="op_total_time(ms)")
    out = pd.DataFrame({"op_name": df["full_op_name"].str.strip(),
                        "op_type": df["op_type"].str.strip(),
                        "total_time_us": numeric(df, total_col, path) * US_PER_MS,
                        "count": numeric(df, "op_occurrences", path, dtype=int).astype("Int64")})
    out["avg_time_us"] = out["total_time_us"] / out["count"].astype("float64").replace(0, np.nan)
    out["short_name"] = df["op_name"].str.strip() if "op_name" in df else out["op_name"].map(
        lambda n: n.rsplit("/", 1)[-1])
    if "total_proportion" in df:
        out["file_percent"] = numeric(df, "total_proportion", path) * 100
    if "subgraph" in df:
        out["subgraph"] = df["subgraph"]
    out = drop_impossible_times(out, df, path, {"total_time_us": (total_col, 1.0)})
    return out.reset_index(drop=True)


def memory_record(run: RunFiles, origin_us: float = 0.0) -> pd.DataFrame:
    """``cpu_ms_memory_record_{id}.txt`` (a CSV: ``Timestamp(ns),Total Allocated(Byte),Total
    Reserved(Byte),Total Active(Byte)``) -> the ``memory`` frame.

    Columns: ``component`` ("MindSpore", as MindSpore labels these rows), ``time_us`` (float64, us from
    ``origin_us``: the profile's origin puts the records on the timeline's clock), ``allocated_mb``,
    ``reserved_mb``, ``active_mb`` (float64, bytes / 1024 / 1000 as MindSpore's memory_record.csv),
    ``device`` ("CPU:<id>", or "NPU:<id>" when the run has NPU kernels). The timestamps are Unix-epoch ns
    on the clock of the op timestamps and trace_view.json (MindSpore's own memory_record.csv writes them as
    ns / 1000 next to CANN's epoch us; FORMATS 4.9, 4.12). ``attrs``: ``origin_us`` (what ``time_us``
    counts from), ``first_us`` (the first record, absolute us), ``path``. Every record of the file is kept
    (`nbprofiler.model.derive.drop_repeats` drops those that repeat an earlier schedule window's).
    """
    path = run.get("cpu_memory_record")
    cols = {"Timestamp(ns)": "ts_ns", "Total Allocated(Byte)": "allocated", "Total Reserved(Byte)": "reserved",
            "Total Active(Byte)": "active"}
    df = read_csv(path, required=list(cols))
    # Integer ns (~1.8e18) do not fit float64 exactly: subtract the origin in int64 ns first, then convert
    # (the origin as float64 us is exact to 0.25 us; whole us and the fraction are split to keep that).
    ts = numeric(df, "Timestamp(ns)", path, dtype=int, allow_missing=False).to_numpy(dtype="int64")
    origin = float(origin_us)
    whole = int(np.floor(origin))
    origin_ns = whole * 1000 + int(round((origin - whole) * 1000))
    rel = ts - np.int64(origin_ns)
    out = pd.DataFrame({"component": "MindSpore",
                        "time_us": (rel // 1000).astype("float64") + (rel % 1000) / 1000.0})
    for col, name in (("Total Allocated(Byte)", "allocated_mb"), ("Total Reserved(Byte)", "reserved_mb"),
                      ("Total Active(Byte)", "active_mb")):
        out[name] = numeric(df, col, path).to_numpy() / BYTES_PER_MB
    device_kind = "NPU" if run.has("kernel_details", "cann_timeline") else "CPU"
    out["device"] = f"{device_kind}:{run.device}"
    first = int(ts.min()) if len(ts) else 0
    out.attrs.update(origin_us=origin, first_us=(first // 1000) + (first % 1000) / 1000.0, path=str(path))
    return out


def cpu_op_executions(run: RunFiles) -> pd.DataFrame | None:
    """Every host CPU op execution from ``cpu_op_execute_timestamp_{id}.txt``; None without the file.

    The file has one line per op: ``<full_op_name>;<category>;`` then space-separated triples
    ``<start_ns>,<dur_ms>,<n>`` (FORMATS 4.12). One row per triple, sorted by start:
    ``op_name`` (str, as written), ``op_type`` (str: from cpu_op_detail_info where the name is listed,
    else the name's last component without ``-opN``; the file's own category is the literal
    ``HostCpuOps``), ``start_us`` (float64, absolute Unix-epoch us = start_ns / 1000), ``dur_us``
    (float64, dur_ms x 1000), ``tid`` (int64, the triple's third field, used as thread id like MindInsight
    does). Used as the timeline source when a run has no trace_view.json. Lines without a valid
    ``name;category;`` prefix or with bad triples raise `MalformedFileError` naming the line; a last line
    cut in the middle of a triple keeps its complete triples and warns.
    """
    path = run.get("cpu_op_timestamp")
    if path is None:
        return None
    text = read_text(path)
    names, starts, durs, tids = [], [], [], []
    lines = text.splitlines()
    truncated = not text.endswith(("\n", "\r"))
    bad: list[tuple[int, str]] = []  # a malformed line or record costs itself only (see `skipped_rows`)
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split(";", 2)
        if len(parts) < 3 or not parts[0].strip():
            bad.append((lineno, f"{line[:40]!r} is not '<op name>;<category>;<start_ns>,<dur_ms>,<n> ...'"))
            continue
        name = parts[0].strip()
        triples = parts[2].split()
        for i, triple in enumerate(triples):
            fields = triple.split(",")
            try:
                if len(fields) != 3:
                    raise ValueError
                start_ns, dur_ms, tid = int(fields[0]), float(fields[1]), int(fields[2])
            except ValueError:
                if truncated and lineno == len(lines) and i == len(triples) - 1:
                    warn_partial(MalformedFileError(path, f"last execution record {triple!r} is cut off; "
                                                          "dropped", line=lineno))
                    break
                bad.append((lineno, f"bad execution record {triple!r} of {name!r} (expected "
                                    "<start_ns>,<dur_ms>,<n>)"))
                continue
            names.append(name)
            starts.append(start_ns)
            durs.append(dur_ms)
            tids.append(tid)
    skipped_rows(path, bad, len(names) + len(bad), what="execution record")
    if not names:
        raise EmptyFileError(path, "no execution records")
    types = {}
    detail = run.get("cpu_op_detail")
    if detail is not None:
        try:
            d = read_csv(detail, required=["full_op_name", "op_type"])
            types = dict(zip(d["full_op_name"].str.strip(), d["op_type"].str.strip()))
        except ProfilerDataError:
            types = {}  # the detail file's own loader reports it; fall back to names here
    start_ns = np.array(starts, dtype="int64")
    out = pd.DataFrame({"op_name": names,
                        "op_type": [types.get(n) or _short_type(n) for n in names],
                        # split before converting: ns as float64 would lose 256 ns, this keeps the
                        # nearest float64 of the exact us value (0.25 us spacing at 1.8e15 us)
                        "start_us": (start_ns // 1000).astype("float64") + (start_ns % 1000) / 1000.0,
                        "dur_us": np.array(durs, dtype="float64") * US_PER_MS,
                        "tid": np.array(tids, dtype="int64")})
    return out.sort_values("start_us", kind="stable").reset_index(drop=True)
