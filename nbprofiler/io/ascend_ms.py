"""Parsers for MindSpore 2.3+ / torch_npu ``ASCEND_PROFILER_OUTPUT`` files and msprof-analyze
``cluster_analysis_output`` files (FORMATS.md 2.2, 4.1-4.4, 4.9, 4.10, 4.13).

Every function takes a `RunFiles` (and, for the frames on the timeline's clock, the ``origin_us`` their
times count from) and returns the frame `nbprofiler.schema` declares. Columns are mapped by header name, never by position:
the writers (MindSpore, torch_npu, CANN versions, profiler levels) disagree on the column set.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import MalformedFileError, MissingColumnError, ProfilerDataError
from ..schema import STAGE_SETS
from ._util import line_of, numeric, read_csv, read_json, skipped_rows, snake, warn_partial
from . import shared
from .discover import RunFiles

# -- run metadata ---------------------------------------------------------------------------------


def run_info(run: RunFiles) -> dict:
    """profiler_info_*.json, profiler_metadata.json and the CANN info.json / start_info / end_info
    files merged into one dict. Absent files are simply missing keys; a broken one raises.

    Keys: the profiler_info keys as written (``ms_version``, ``profiler_parameters`` ...), plus
    ``"metadata"`` (profiler_metadata.json), ``"cann_info"``, ``"cann_start"``, ``"cann_end"`` (the CANN
    objects as written), and derived ``rank_id`` (str, where any file says it) and, from CANN start/end
    info, ``collection_start_us`` / ``collection_end_us`` (float, Unix epoch us) and
    ``monotonic_start_ns`` (int, the monotonic-raw clock at collection start: CANN timeline ``ts`` + this
    offset maps onto the wall clock).
    """
    info: dict = {}
    path = run.get("profiler_info")
    if path is not None:
        obj = read_json(path)
        if not isinstance(obj, dict):
            raise MalformedFileError(path, f"expected a JSON object, found {type(obj).__name__}")
        info.update(obj)
        m = re.fullmatch(r"profiler_info_(\d+)\.json", path.name)
        if "rank_id" in obj and str(obj["rank_id"]).lstrip("-").isdigit() and int(obj["rank_id"]) >= 0:
            info["rank_id"] = str(obj["rank_id"])
        elif m:
            info["rank_id"] = m.group(1)
    path = run.get("profiler_metadata")
    if path is not None:
        info["metadata"] = read_json(path)
    for role, key in (("cann_info", "cann_info"), ("cann_start_info", "cann_start"), ("cann_end_info", "cann_end")):
        path = run.get(role)
        if path is None:
            continue
        obj = read_json(path)
        if not isinstance(obj, dict):
            raise MalformedFileError(path, f"expected a JSON object, found {type(obj).__name__}")
        info[key] = obj
    cann = info.get("cann_info", {})
    if "rank_id" not in info and isinstance(cann.get("rank_id"), int):
        info["rank_id"] = str(max(cann["rank_id"], 0))  # MindInsight's msprof reader: -1 means rank 0
    for key, field, out in (("cann_start", "collectionTimeBegin", "collection_start_us"),
                            ("cann_end", "collectionTimeEnd", "collection_end_us")):
        if key in info and field in info[key]:
            info[out] = _number(info[key][field], run.get("cann_start_info" if key == "cann_start" else
                                                          "cann_end_info"), field)
    if run.has("profiler_db", "msprof_db"):
        from . import db
        for k, v in db.info(run).items():
            info.setdefault(k, v)
    if "cann_start" in info and "clockMonotonicRaw" in info["cann_start"]:
        info["monotonic_start_ns"] = int(_number(info["cann_start"]["clockMonotonicRaw"],
                                                 run.get("cann_start_info"), "clockMonotonicRaw"))
    return info


def _number(value, path: Path | None, field: str) -> float:
    try:
        return float(str(value).strip())
    except ValueError:
        raise MalformedFileError(path, f"not a number: {value!r}", field=field) from None


# -- kernel_details.csv ---------------------------------------------------------------------------

# Header synonyms across writers (FORMATS.md 4.2, quirk 7) -> nbprofiler column.
KERNEL_COLUMNS = {
    "Step Id": "step", "Step ID": "step",
    "Model ID": "model_id", "Model Id": "model_id",
    "Task ID": "task_id", "Task Id": "task_id",
    "Stream ID": "stream_id", "Stream Id": "stream_id",
    "Name": "name", "Op Name": "name",
    "Type": "type", "OP Type": "type",
    "Accelerator Core": "accelerator_core", "Task Type": "accelerator_core",
    "Start Time(us)": "start_us", "Task Start Time(us)": "start_us",
    "Duration(us)": "dur_us", "Task Duration(us)": "dur_us",
    "Wait Time(us)": "wait_us", "Task Wait Time(us)": "wait_us",
    "Block Dim": "block_dim", "Block Num": "block_dim",
    "Mix Block Dim": "mix_block_dim", "Mix Block Num": "mix_block_dim",
    "OP State": "op_state", "HF32 Eligible": "hf32_eligible", "Context ID": "context_id",
    "Model Name": "model_name",
}
KERNEL_INT_COLUMNS = ["step", "model_id", "task_id", "stream_id", "block_dim", "mix_block_dim"]
KERNEL_TEXT_COLUMNS = {"name", "type", "accelerator_core", "op_state", "hf32_eligible", "model_name",
                       "input_shapes", "input_data_types", "input_formats", "output_shapes",
                       "output_data_types", "output_formats", "context_id", "device_id"}
SHAPE_COLUMNS = ["input_shapes", "output_shapes"]


def kernels(run: RunFiles, origin_us: float | None = None) -> pd.DataFrame:
    """kernel_details.csv -> one row per device task (columns: see `nbprofiler.schema`).

    ``start_us`` counts from ``origin_us`` (absolute us), or from the file's own earliest start when it is
    None. The absolute earliest start is kept in ``attrs["origin_us"]``; ``attrs["origin_used_us"]`` is
    the origin ``start_us`` counts from.
    Relative starts are computed from the integer and fraction parts of the text separately, so the
    sub-microsecond digits survive (absolute epoch us in float64 keep only ~0.25 us).
    """
    path = run.get("kernel_details")
    df = read_csv(path)
    rename = {c: KERNEL_COLUMNS.get(c.strip(), None) or snake(c) for c in df.columns}
    df = df.rename(columns=rename)
    for col in ("name", "type", "start_us", "dur_us"):
        if col not in df.columns:
            raw = [k for k, v in KERNEL_COLUMNS.items() if v == col]
            raise MissingColumnError(path, f"missing column {raw[0]!r} (or a synonym {raw[1:]})", line=1,
                                     field=raw[0])
    df = _drop_bad_timestamps(df, path)
    out = pd.DataFrame(index=df.index)
    for col in KERNEL_INT_COLUMNS:
        if col in df.columns:
            out[col] = numeric(df, col, path).astype("Int64")
    if "step" not in out:
        out["step"] = pd.Series(pd.NA, index=df.index, dtype="Int64")
    for col in ("name", "type", "accelerator_core"):
        out[col] = df[col].astype(str).str.strip() if col in df.columns else ""
    from .trace import fill_kernel_types
    out["type"] = fill_kernel_types(out["name"], out["type"])
    int_part, frac_part = _split_timestamps(df["start_us"], path)
    o_int, o_frac = _abs_min(int_part, frac_part) if origin_us is None else _split(float(origin_us))
    out["start_us"] = (int_part - o_int).astype("float64") + (frac_part - o_frac)
    out["dur_us"] = numeric(df, "dur_us", path)
    out["wait_us"] = numeric(df, "wait_us", path) if "wait_us" in df.columns else np.nan
    for col in df.columns:
        if col in out.columns or col in ("start_us",):
            continue
        if col in SHAPE_COLUMNS:
            # tripled quotes in the file leave literal quotes after CSV unquoting: "81920,4096;8192,512"
            out[col] = df[col].str.strip().str.strip('"').replace({"N/A": "", ";": ""})
        elif col in KERNEL_TEXT_COLUMNS:
            out[col] = df[col].str.strip().replace({"N/A": ""})
        else:
            try:
                out[col] = numeric(df, col, path)
            except MalformedFileError:
                out[col] = df[col].str.strip()  # an unknown text column of a newer writer: keep as text
    m_int, m_frac = _abs_min(int_part, frac_part)
    out.attrs["origin_us"] = float(m_int) + m_frac
    out.attrs["origin_used_us"] = float(o_int) + o_frac
    out.attrs["path"] = str(path)
    return out.reset_index(drop=True)


def _drop_bad_timestamps(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Rows whose Start Time is not a timestamp are dropped with a warning naming their line (a row
    cannot be placed in time without it); too many and the file is rejected (`skipped_rows`)."""
    raw = df["start_us"].astype(str).str.strip().str.strip('"').str.strip()
    bad = ~raw.str.fullmatch(r"-?\d+(\.\d*)?").fillna(False).to_numpy(dtype=bool)
    if not bad.any():
        return df
    skipped_rows(path, [(line_of(df, int(i)), f"Start Time(us) {raw.iloc[int(i)]!r} is not a timestamp")
                        for i in np.flatnonzero(bad)], len(df))
    return df[~bad]


def _split_timestamps(col: pd.Series, path: Path) -> tuple[pd.Series, pd.Series]:
    """'1736413971558972.912\\t' -> (1736413971558972, 0.912). Raises naming the first bad line."""
    raw = col.astype(str).str.strip().str.strip('"').str.strip()
    parts = raw.str.extract(r"^(-?\d+)(\.\d*)?$")
    bad = parts[0].isna()
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise MalformedFileError(path, f"not a timestamp: {raw.iloc[i]!r}", line=i + 2, field="Start Time(us)")
    int_part = parts[0].astype("int64")
    frac = pd.to_numeric("0" + parts[1].fillna(".0"), errors="coerce").astype("float64")
    return int_part, frac


def _abs_min(int_part: pd.Series, frac: pd.Series) -> tuple[int, float]:
    """The earliest start as (integer us, fraction): adding them in float64 would round to 0.25 us."""
    if int_part.empty:
        return 0, 0.0
    i = int(int_part.min())
    return i, float(frac[int_part == i].min())


def _split(origin: float) -> tuple[int, float]:
    """An absolute origin (us) as (integer us, fraction), the form `_abs_min` gives."""
    return math.floor(origin), origin - math.floor(origin)


# -- step_trace_time.csv / cluster_step_trace_time.csv -------------------------------------------

STEP_TRACE_COLUMNS = {
    "Computing": "computing_ms",
    "Communication(Not Overlapped)": "communication_not_overlapped_ms",
    "Overlapped": "overlapped_ms",
    "Communication": "communication_ms",
    "Free": "free_ms",
    "Stage": "stage_ms",
    "Bubble": "bubble_ms",
    "Communication(Not Overlapped and Exclude Receive)": "communication_not_overlapped_exclude_receive_ms",
    "Preparing": "preparing_ms",
}
STACKED = list(STAGE_SETS[2])  # the stages of step_trace_time.csv that stack up to the step (schema)


def _step_trace_frame(df: pd.DataFrame, path: Path, first_data_line: int = 2) -> pd.DataFrame:
    """us columns -> ms, ``step`` int64, ``total_ms`` = the stacked stages present."""
    out = pd.DataFrame(index=df.index)
    if "Step" in df.columns:
        steps = df["Step"].astype(str).str.strip()
        # No step() in the profiled script: msprof-analyze leaves Step empty, MindSpore writes step 0
        # for its one pseudo step covering everything; use 0 for both.
        out["step"] = numeric(df.assign(Step=steps.where(steps != "", "0")), "Step", path,
                              allow_missing=False).astype("int64")
    else:
        out["step"] = np.arange(len(df), dtype="int64")
    for raw, col in STEP_TRACE_COLUMNS.items():
        if raw in df.columns:
            out[col] = numeric(df, raw, path) / 1000.0
    stacked = [c for c in STACKED if c in out.columns]
    if "computing_ms" not in out.columns:
        raise MissingColumnError(path, "missing column 'Computing'", line=1, field="Computing")
    out["total_ms"] = out[stacked].fillna(0.0).sum(axis=1)
    return out


def step_trace_time(run: RunFiles) -> pd.DataFrame:
    """step_trace_time.csv (us) -> one row per step in ms (columns: the schema's `step_trace`)."""
    path = run.get("step_trace_time")
    df = read_csv(path, required=["Step", "Computing"])
    out = _step_trace_frame(df, path).reset_index(drop=True)
    out.attrs["path"] = str(path)
    return out


def cluster_step_trace(path: Path) -> pd.DataFrame:
    """The whole cluster_step_trace_time.csv: ``step``, ``type`` ("rank"/"stage"), ``index`` (str: the
    rank id, or the stage's ranks as written, e.g. ``"(0, 1, 2, 3)"``), ``ranks`` (tuple of str) and the
    step-trace columns in ms."""
    df = read_csv(path, required=["Type", "Index", "Computing"])
    out = _step_trace_frame(df, path)
    out.insert(1, "type", df["Type"].str.strip().str.lower())
    out.insert(2, "index", df["Index"].str.strip())
    out.insert(3, "ranks", [tuple(re.findall(r"\d+", s)) for s in out["index"]])
    unknown = ~out["type"].isin(["rank", "stage"])
    if unknown.any():
        i = int(np.flatnonzero(unknown.to_numpy())[0])
        raise MalformedFileError(path, f"Type {df['Type'].iloc[i]!r} is neither 'rank' nor 'stage'",
                                 line=i + 2, field="Type")
    out.attrs["path"] = str(path)
    return out.reset_index(drop=True)


def cluster_step_trace_rank(run: RunFiles) -> pd.DataFrame:
    """The rows of cluster_step_trace_time.csv for this run's rank (``Type`` rank, ``Index`` ==
    ``run.device``), as a step-trace frame."""
    path = run.get("cluster_step_trace_time")
    rows = shared.rows_of(path, "cluster_step_trace", lambda: cluster_step_trace(path), "index", str(run.device))
    out = rows[rows["type"] == "rank"].drop(columns=["type", "index", "ranks"]).reset_index(drop=True)
    out.attrs["path"] = str(path)
    return out


def cluster_step_trace_stages(run: RunFiles) -> pd.DataFrame:
    """The pipeline-stage rows of cluster_step_trace_time.csv (per-column maxima over the stage's ranks):
    ``step``, ``index`` (as written), ``ranks`` (tuple of str) and the ms columns."""
    path = run.get("cluster_step_trace_time")
    full, _ = shared.whole(path, "cluster_step_trace", lambda: cluster_step_trace(path), "index")
    return full[full["type"] == "stage"].drop(columns=["type"]).reset_index(drop=True)


def cluster_ranks(run: RunFiles) -> list[str]:
    """Rank ids listed in cluster_step_trace_time.csv (``Type`` rank) or, failing that,
    cluster_communication.json; numeric order. Unreadable files give [] here (the frame reports them)."""
    ranks: set[str] = set()
    path = run.get("cluster_step_trace_time")
    if path is not None:
        try:
            full, _ = shared.whole(path, "cluster_step_trace", lambda: cluster_step_trace(path), "index")
            ranks.update(full.loc[full["type"] == "rank", "index"])
        except ProfilerDataError:
            pass  # reported when the step-trace frame of a rank is built
    if not ranks:
        path = run.get("cluster_communication")
        if path is not None:
            try:
                ranks.update(rec[3] for rec in _cluster_comm_records(path, read_json(path)))
            except ProfilerDataError:
                pass
    if not ranks and run.has("cluster_analysis_db"):
        from . import db
        try:
            ranks.update(db.cluster_ranks(run))
        except ProfilerDataError:
            pass
    return sorted(ranks, key=lambda r: (0, int(r)) if r.isdigit() else (1, r))


# -- memory -----------------------------------------------------------------------------------------

MEMORY_COLUMNS = {"Component": "component", "Timestamp(us)": "time_us", "Total Allocated(MB)": "allocated_mb",
                  "Total Reserved(MB)": "reserved_mb", "Total Active(MB)": "active_mb",
                  "Device Type": "device", "Device": "device"}


def memory_record(run: RunFiles, origin_us: float = 0.0) -> pd.DataFrame:
    """memory_record.csv -> ``component``, ``time_us`` (relative to ``origin_us``), ``allocated_mb``,
    ``reserved_mb``, ``active_mb`` (float64 MB), ``device`` (str); ``attrs["origin_us"]``."""
    path = run.get("memory_record")
    df = read_csv(path, required=["Component", "Timestamp(us)"])
    out = pd.DataFrame({"component": df["Component"].str.strip()})
    origin = float(origin_us)
    out["time_us"] = numeric(df, "Timestamp(us)", path, allow_missing=False) - origin
    for raw in ("Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)"):
        out[MEMORY_COLUMNS[raw]] = numeric(df, raw, path) if raw in df.columns else np.nan
    dev = "Device Type" if "Device Type" in df.columns else "Device" if "Device" in df.columns else None
    out["device"] = df[dev].str.strip() if dev else ""
    out.attrs["origin_us"] = origin
    out.attrs["path"] = str(path)
    return out


def operator_memory(run: RunFiles, origin_us: float = 0.0) -> pd.DataFrame:
    """operator_memory.csv -> ``name``, ``size_kb``, ``alloc_us``, ``release_us``, ``dur_us`` (times
    relative to ``origin_us``; release NaN for never-freed blocks) and the other columns snake_cased."""
    path = run.get("operator_memory")
    df = read_csv(path, required=["Name", "Size(KB)"])
    origin = float(origin_us)
    rename = {"Name": "name", "Size(KB)": "size_kb", "Allocation Time(us)": "alloc_us",
              "Release Time(us)": "release_us", "Duration(us)": "dur_us",
              "Active Release Time(us)": "active_release_us", "Active Duration(us)": "active_dur_us"}
    out = pd.DataFrame({"name": df["Name"].str.strip()})
    for raw in df.columns:
        if raw == "Name":
            continue
        col = rename.get(raw, snake(raw))
        if raw in ("Stream Ptr", "Device Type"):
            out[col] = df[raw].str.strip()
            continue
        out[col] = numeric(df, raw, path)
        if col in ("alloc_us", "release_us", "active_release_us"):
            out[col] = out[col] - origin
    out.attrs["origin_us"] = origin
    out.attrs["path"] = str(path)
    return out


# -- communication ----------------------------------------------------------------------------------

TIME_INFO = {"Start Timestamp(us)": "start_us", "Elapse Time(ms)": "elapse_ms", "Transit Time(ms)": "transit_ms",
             "Wait Time(ms)": "wait_ms", "Synchronization Time(ms)": "sync_ms", "Idle Time(ms)": "idle_ms",
             "Idel Time(ms)": "idle_ms", "Wait Time Ratio": "wait_ratio",
             "Synchronization Time Ratio": "sync_ratio"}
LINK_INFO = {"Transit Size(MB)": "size_mb", "Transit Time(ms)": "transit_ms", "Bandwidth(GB/s)": "bandwidth_gbps",
             "Large Packet Ratio": "large_packet_ratio"}
COMM_KEYS = ["step", "group", "kind", "op_name", "rank"]
COMM_COLUMNS = COMM_KEYS + ["start_us", "elapse_ms", "transit_ms", "wait_ms", "sync_ms", "idle_ms",
                            "wait_ratio", "sync_ratio"]
LINK_COLUMNS = COMM_KEYS + ["transport", "size_mb", "transit_ms", "bandwidth_gbps", "large_packet_ratio",
                            "packets"]

# A record: (step, group, kind, rank, op_name, info dict, where-in-file for errors)


def _comm_records(path: Path, obj, rank: str):
    """communication.json: {step: {"collective"|"p2p": {op: info}}} (one rank)."""
    if not isinstance(obj, dict):
        raise MalformedFileError(path, f"expected a JSON object, found {type(obj).__name__}")
    for step, kinds in obj.items():
        if not isinstance(kinds, dict):
            raise MalformedFileError(path, "expected an object of 'collective'/'p2p' groups", field=step)
        for kind, ops in kinds.items():
            if not isinstance(ops, dict):
                raise MalformedFileError(path, "expected an object of operators", field=f"{step}.{kind}")
            for op, info in ops.items():
                if op == "Total Op Info":
                    continue  # an aggregate of the ops listed beside it
                group = op.rsplit("@", 1)[1] if "@" in op else ""
                yield step, group, kind, rank, op, info, f"{step}.{kind}.{op}"


def _cluster_comm_records(path: Path, obj):
    """cluster_communication.json: {group: {step: {op: {rank: info}}}} (all ranks)."""
    if not isinstance(obj, dict):
        raise MalformedFileError(path, f"expected a JSON object, found {type(obj).__name__}")
    for group, steps in obj.items():
        if not isinstance(steps, dict):
            raise MalformedFileError(path, "expected an object of steps", field=group)
        for step, ops in steps.items():
            if not isinstance(ops, dict):
                raise MalformedFileError(path, "expected an object of operators", field=f"{group}.{step}")
            for op, ranks in ops.items():
                if op == "Total Op Info" or not isinstance(ranks, dict):
                    continue
                for rank, info in ranks.items():
                    yield step, group, "", str(rank), op, info, f"{group}.{step}.{op}.{rank}"


def _records(run: RunFiles):
    """(path, records) of this run: its communication.json, else cluster_communication.json filtered to
    ``run.device`` (``"*"`` = all ranks)."""
    path = run.get("communication")
    if path is not None:
        rank = run.info.get("rank_id", run.device)
        return path, list(_comm_records(path, read_json(path), str(rank)))
    path = run.get("cluster_communication")
    if path is not None:
        recs = list(_cluster_comm_records(path, read_json(path)))
        if run.device != "*":
            recs = [r for r in recs if r[3] == str(run.device)]
        return path, recs
    return None, []


def whole_cluster(run: RunFiles) -> RunFiles:
    """``run`` read for every rank of its cluster file (device ``"*"``)."""
    every = RunFiles(run.generation, run.root, "*", files=run.files, session=run.session)
    every.info = dict(run.info)
    return every


def _value(path, info: dict, key: str, where: str) -> float:
    v = info.get(key)
    if v is None:
        return np.nan
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise MalformedFileError(path, f"expected a number, found {type(v).__name__}", field=f"{where}.{key}")
    try:
        return float(v)
    except ValueError:
        raise MalformedFileError(path, f"not a number: {v!r}", field=f"{where}.{key}") from None


def communication(run: RunFiles) -> pd.DataFrame | None:
    """Per communication op and rank (columns: the schema's `communication`, plus ``kind``: "collective" /
    "p2p" from communication.json, "" from the cluster file). ``start_us`` stays absolute (Unix epoch
    us) so ranks can be compared; ``Idel Time`` (MindSpore's tutorial spelling) is read as idle."""
    cluster_file = run.get("communication") is None and run.get("cluster_communication") is not None
    if cluster_file and run.device != "*":
        # every rank's rows from one parse of the cluster file
        path = run.get("cluster_communication")
        return shared.rows_of(path, "communication", lambda: communication(whole_cluster(run)), "rank", str(run.device))
    path, recs = _records(run)
    if path is None:
        return None
    rows = []
    for step, group, kind, rank, op, info, where in recs:
        t = info.get("Communication Time Info") if isinstance(info, dict) else None
        if not isinstance(t, dict):
            raise MissingColumnError(path, "missing 'Communication Time Info'", field=where)
        row = {"step": step, "group": group, "kind": kind, "op_name": op, "rank": rank}
        for raw, col in TIME_INFO.items():
            if raw in t:
                row[col] = _value(path, t, raw, where)
        rows.append(row)
    out = pd.DataFrame(rows, columns=COMM_COLUMNS)
    for c in COMM_COLUMNS[5:]:
        out[c] = out[c].astype("float64")
    out.attrs["path"] = str(path)
    return out


def communication_links(run: RunFiles) -> pd.DataFrame | None:
    """Per op, rank and transport (RDMA/HCCS/PCIE/SDMA/SIO): ``size_mb``, ``transit_ms``,
    ``bandwidth_gbps``, ``large_packet_ratio`` (float64), ``packets`` (int64, the count summed over the
    Size Distribution) and the keys of `communication`. Transports with nothing transferred (size 0 and
    time 0) are kept: "this link was idle" is an answer too."""
    cluster_file = run.get("communication") is None and run.get("cluster_communication") is not None
    if cluster_file and run.device != "*":
        path = run.get("cluster_communication")
        return shared.rows_of(path, "communication_links", lambda: communication_links(whole_cluster(run)), "rank",
                              str(run.device))
    path, recs = _records(run)
    if path is None:
        return None
    rows = []
    for step, group, kind, rank, op, info, where in recs:
        bw = info.get("Communication Bandwidth Info", {}) if isinstance(info, dict) else {}
        if not isinstance(bw, dict):
            raise MalformedFileError(path, "expected an object of transports",
                                     field=f"{where}.Communication Bandwidth Info")
        for transport, link in bw.items():
            if not isinstance(link, dict):
                raise MalformedFileError(path, "expected an object", field=f"{where}.{transport}")
            row = {"step": step, "group": group, "kind": kind, "op_name": op, "rank": rank,
                   "transport": transport}
            for raw, col in LINK_INFO.items():
                row[col] = _value(path, link, raw, f"{where}.{transport}")
            dist = link.get("Size Distribution") or {}
            try:
                row["packets"] = int(sum(v[0] for v in dist.values())) if isinstance(dist, dict) else 0
            except (TypeError, IndexError, ValueError):
                raise MalformedFileError(path, "Size Distribution values must be [count, time_ms]",
                                         field=f"{where}.{transport}.Size Distribution") from None
            rows.append(row)
    out = pd.DataFrame(rows, columns=LINK_COLUMNS)
    for c in ("size_mb", "transit_ms", "bandwidth_gbps", "large_packet_ratio"):
        out[c] = out[c].astype("float64")
    out["packets"] = out["packets"].astype("int64")
    out.attrs["path"] = str(path)
    return out


def communication_matrix(path: Path) -> pd.DataFrame:
    """(cluster_)communication_matrix.json -> ``step``, ``kind``, ``op_name``, ``src``, ``dst`` (str
    ranks), ``transport``, ``size_mb``, ``transit_ms``, ``bandwidth_gbps`` (float64)."""
    obj = read_json(path)
    if not isinstance(obj, dict):
        raise MalformedFileError(path, f"expected a JSON object, found {type(obj).__name__}")
    rows = []

    def walk(node, keys):
        # Links are the leaves keyed "src-dst"; the levels above (step, group/kind, op) vary by writer.
        for k, v in node.items():
            if re.fullmatch(r"\d+-\d+", k) and isinstance(v, dict):
                src, dst = k.split("-")
                where = ".".join(keys + [k])
                rows.append({"step": keys[0] if keys else "", "kind": keys[1] if len(keys) > 2 else "",
                             "op_name": keys[-1] if keys else "", "src": src, "dst": dst,
                             "transport": str(v.get("Transport Type", "")),
                             "size_mb": _value(path, v, "Transit Size(MB)", where),
                             "transit_ms": _value(path, v, "Transit Time(ms)", where),
                             "bandwidth_gbps": _value(path, v, "Bandwidth(GB/s)", where)})
            elif isinstance(v, dict):
                walk(v, keys + [k])

    walk(obj, [])
    return pd.DataFrame(rows, columns=["step", "kind", "op_name", "src", "dst", "transport", "size_mb",
                                       "transit_ms", "bandwidth_gbps"])


__all__ = ["run_info", "kernels", "step_trace_time", "whole_cluster", "cluster_step_trace", "cluster_step_trace_rank",
           "cluster_step_trace_stages", "cluster_ranks", "memory_record", "operator_memory", "communication",
           "communication_links", "communication_matrix", "warn_partial"]
