"""The entry points: which files of a run hold its trace (`trace_sources`), its frames from the cache or
parsed (`trace_data`), a parse of given files (`load_trace`), and the FRAMEWORK fallback (a run with no
trace JSON but its ``cpu_op_execute_timestamp`` records)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import cache
from .._util import arrow_memory
from ..discover import RunFiles
from . import disk, memory
from .counters import counter_frame
from .flows import flow_frame
from .frames import TRACE_FRAMES, TraceData
from .naming import as_int

# Roles that hold Chrome-trace JSON, in order of preference.
TRACE_ROLES = ("trace_view", "timeline", "cann_timeline", "cann_task_time", "cann_hccl")


def trace_sources(run: RunFiles) -> tuple[str, list[Path]] | None:
    """(role, files) of the timeline source of ``run``, or None when it has no trace JSON."""
    if run.has("trace_view"):
        return "trace_view", [run.get("trace_view")]
    if run.has("timeline"):
        files = run.all("timeline")
        # A folder may hold an Ascend and a GPU display file for one id (fixtures_mixed_ids): they are
        # different runs on different clocks, so take one, preferring the Ascend file.
        ascend = [p for p in files if not p.name.startswith("gpu_")]
        return "timeline", [(ascend or files)[0]]
    if run.has("cann_timeline"):
        return "cann_timeline", run.all("cann_timeline")
    if run.has("cann_task_time", "cann_hccl"):
        return "cann_task_time", run.all("cann_task_time") + run.all("cann_hccl")
    return None


def trace_data(run: RunFiles) -> TraceData | None:
    """The parsed trace of ``run``: from the frame cache, else parsed (in memory, or on disk when the file
    would not fit, `nbprofiler.io.trace.disk`); None when the run has no trace."""
    src = trace_sources(run)
    if src is None:
        if run.has("cpu_op_timestamp"):
            return _from_cpu_ops(run)
        return None
    role, paths = src
    if disk.wanted(paths):
        return disk.load(paths[0], legacy=(role == "timeline"))
    key = cache.key_for("trace", paths)
    cached = cache.load(key, paths)
    if cached is not None and "origin_us" in cached[1] and set(cached[0]) == set(TRACE_FRAMES):
        frames, meta = cached
        return TraceData(origin_us=float(meta["origin_us"]), **frames)
    data = load_trace(paths, legacy=(role == "timeline"))
    # the entry is written by a background thread: the frames are ready now, the cache is for later
    cache.store(key, paths, data.frames_to_cache(), {"origin_us": data.origin_us}, background=True)
    return data


@arrow_memory()
def load_trace(paths: list[Path] | Path, legacy: bool | None = None, progress: bool = True) -> TraceData:
    """Parse one or more Chrome-trace JSON files into `TraceData` (several files are merged and their
    repeated metadata deduplicated). ``legacy``: name tracks by the legacy conventions where no ``M``
    event names them (default: when the file name is a ``*timeline_display_*``)."""
    paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if legacy is None:
        legacy = any("timeline_display" in p.name for p in paths)
    if len(paths) == 1:
        # one file: the build that codes and sorts each batch as it is read (`disk`), in memory
        return disk.build_in_memory(paths[0], legacy=legacy, progress=progress)
    return memory.load_merged(paths, legacy=legacy, progress=progress)


def _from_cpu_ops(run: RunFiles) -> TraceData | None:
    try:
        from ..framework import cpu_op_executions
    except ImportError:
        return None
    ex = cpu_op_executions(run)
    if ex is None or ex.empty:
        return None
    origin = float(ex["start_us"].min())
    tids = ex["tid"].astype(str)
    uniq = sorted(tids.unique(), key=lambda t: (as_int(t) is None, as_int(t) or 0, t))
    tracks = pd.DataFrame({"track": np.arange(len(uniq), dtype=np.int32), "pid": "0", "tid": uniq,
                           "process": "CPU OP", "thread": [f"Thread {t}" for t in uniq],
                           "process_sort": np.int64(0), "thread_sort": np.arange(len(uniq), dtype=np.int64)})
    track = tids.map({t: i for i, t in enumerate(uniq)}).to_numpy(dtype=np.int32)
    start = ex["start_us"].to_numpy(dtype=np.float64) - origin
    order = np.lexsort((start, track))
    sub = ex.iloc[order]
    timeline = pd.DataFrame({
        "track": track[order], "name": pd.Categorical(sub["op_name"].astype(str)),
        "op_type": pd.Categorical(sub["op_type"].astype(str)),
        "ph": pd.Categorical(np.full(len(order), "X", dtype=object)), "cat": pd.Categorical(np.full(len(order), "")),
        "start_us": start[order], "dur_us": sub["dur_us"].to_numpy(dtype=np.float64),
        "args": pd.Series([None] * len(order), dtype=object)})
    tracks["events"] = np.bincount(timeline["track"], minlength=len(tracks)).astype(np.int64)
    return TraceData(origin_us=origin, timeline=timeline, tracks=tracks,
                     flows=flow_frame(None), counters=counter_frame(None, 0))
