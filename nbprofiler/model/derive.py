"""What joins several file families (the model side of the data flow), each a function of explicit values
(frames, numbers, the run's files), never of a `Profile`:

- the profile's time origin (`time_origin`: the trace's earliest event, else the kernels', else the
  database's) and which kernels count from it (`KERNELS_ON_TIMELINE`);
- a memory record without the rows MindSpore repeats from earlier schedule windows (`drop_repeats`,
  `repeating_schedule`, `records_before`);
- a step's place on the timeline (`place_steps`; `profiler_step_windows` where only the trace's
  ``ProfilerStep#N`` events mark the steps);
- the operators joined with their input shapes (`join_input_shapes`).

`nbprofiler.model.build` gathers these inputs from a `Profile` (whose cache memoises every parse) and calls them.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._memory import release_pages, row_slices
from ..errors import MalformedFileError, ProfilerDataError
from ..io._util import warn_partial

# Processes of a legacy timeline that are not the device's own streams (AI CPU, communication, host).
NOT_DEVICE_PIDS = ("9000", "10000", "11000")

# Kernels count from the profile's origin when the run has one of these timelines; else from their own
# earliest start (the profile's origin is then the kernels' own, see `time_origin`).
KERNELS_ON_TIMELINE = ("trace_view", "timeline", "cann_timeline")

# Memory records this much earlier than the first traced event are "before the timeline" (`records_before`).
WINDOW_SLACK_US = 1000.0

# The columns that make two memory records the same record (every column the files write).
MEMORY_RECORD_KEYS = ["component", "time_us", "allocated_mb", "reserved_mb", "active_mb"]


# -- the time origin ------------------------------------------------------------------------------------
def time_origin(*, trace: Callable[[], float | None] | None = None,
                kernels: Callable[[], pd.DataFrame | None] | None = None,
                database: Callable[[], float] | None = None, memory: Callable[[], float | None] | None = None) -> float:
    """The absolute time (µs) every relative start of the profile counts from: the earliest event of the
    run's trace (``trace()``, None when the trace cannot be read), else the earliest device task of
    kernel_details.csv (``kernels()``'s ``attrs["origin_us"]``; 0.0 when the file cannot be read), else
    the database's earliest task (``database()``), else the first memory record (``memory()``: a run whose
    only timed data is its memory record counts from it, as before its frame was on the timeline's clock),
    else 0.0. Each argument is None when the run has no such source, and is called only when the ones
    before it give nothing (a trace is costly to read)."""
    if trace is not None:
        origin = trace()
        if origin is not None:
            return origin
    if kernels is not None:
        try:
            frame = kernels()
        except ProfilerDataError:
            return 0.0
        if frame is not None and "origin_us" in frame.attrs:
            return float(frame.attrs["origin_us"])
    if database is not None:
        return database()
    if memory is not None:
        origin = memory()
        if origin is not None:
            return float(origin)
    return 0.0


# -- the profiling window ---------------------------------------------------------------------------------
def repeating_schedule(info: dict) -> bool:
    """True when the run metadata (``prof.info``) says the run used a schedule with several windows
    (``repeat`` 0 = until the end, or more than 1): this session folder is one window even when loaded
    alone."""
    for holder in (info.get("config", {}).get("common_config", {}) if isinstance(info.get("config"), dict) else {},
                   info.get("profiler_parameters", {}) if isinstance(info.get("profiler_parameters"), dict) else {},
                   info):
        sched = holder.get("schedule") if isinstance(holder, dict) else None
        if isinstance(sched, dict) and "repeat" in sched:
            try:
                repeat = int(sched["repeat"])
            except (TypeError, ValueError):
                return False
            return repeat != 1
    return False


def drop_repeats(mem: pd.DataFrame, earlier: list[tuple[str, pd.DataFrame]], path) -> pd.DataFrame:
    """``mem`` without the records MindSpore copied into it from earlier schedule windows.

    With the schedule API MindSpore writes one session folder per window, and each later window's memory
    record (``path``) starts with the records of every earlier window copied verbatim (FORMATS 6, quirk
    18; in a real two-window recording the second file held the first file's 216 records, then its own
    216). A record is such a copy only when the evidence says so: the same record (every column of
    `MEMORY_RECORD_KEYS`, timestamps read with the same origin) is in the memory file of an earlier window
    of the same rank. ``earlier``: (folder name, memory frame read with the same parser and origin as
    ``mem``) for each earlier session of the rank beside this one. Records that are merely early
    (allocations before the window's first traced event, a separate run's own records) are never dropped.
    The dropped rows are reported in a warning naming the folders they repeat; ``attrs["repeated_rows"]``
    counts them."""
    if mem.empty or not earlier:
        return mem
    mine = pd.util.hash_pandas_object(mem[MEMORY_RECORD_KEYS], index=False).to_numpy()
    repeated = np.zeros(len(mem), dtype=bool)
    sources = []
    for name, frame in earlier:
        if frame is None or frame.empty or not set(MEMORY_RECORD_KEYS) <= set(frame.columns):
            continue
        hit = np.isin(mine, pd.util.hash_pandas_object(frame[MEMORY_RECORD_KEYS], index=False).to_numpy())
        if hit.any():
            sources.append(name)
            repeated |= hit
    if not repeated.any():
        return mem
    n = int(repeated.sum())
    warn_partial(MalformedFileError(
        path, f"{n} of {len(mem)} memory records are copies of the records of earlier schedule windows of this "
              f"rank ({', '.join(sources)}: same records, same timestamps); MindSpore repeats them in every "
              "later window's file, so they were dropped", line=int(np.flatnonzero(repeated)[0]) + 2))
    kept = mem.loc[~repeated].reset_index(drop=True)
    kept.attrs = dict(mem.attrs, repeated_rows=n)
    return kept


def records_before(mem: pd.DataFrame, slack_us: float = WINDOW_SLACK_US) -> int:
    """How many memory records (``time_us`` on the timeline's clock) precede the timeline's first event by
    more than ``slack_us``."""
    return 0 if mem is None or mem.empty else int((mem["time_us"].to_numpy(float) < -slack_us).sum())


# -- steps on the timeline ----------------------------------------------------------------------------------
# The host's step markers a torch_npu / MindSpore 2.x trace writes around each profiled step: the prefix, then
# the step's number (an RE2 pattern: Arrow's string kernels test the distinct names with it).
PROFILER_STEP_PREFIX = "ProfilerStep#"
PROFILER_STEP_EVENT = r"^ProfilerStep#[0-9]+$"
PROFILER_STEP_SOURCE = "ProfilerStep#N events"


def profiler_step_windows(timeline: pd.DataFrame | None) -> pd.DataFrame | None:
    """The `step_windows` frame from the timeline's ``ProfilerStep#N`` events (each step's span as the
    host marked it), or None without them. The names are tested once each, as distinct texts (a
    categorical's categories); the events are found through their codes (``Categorical.codes``, a view, where
    ``.cat.codes`` is a new Series)."""
    if timeline is None or timeline.empty or "name" not in timeline:
        return None
    col = timeline["name"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        name_codes, names = col.array.codes, col.cat.categories
    else:
        name_codes, names = pd.factorize(col)
    # Arrow's kernels over the distinct names (tens of thousands on a large trace): the prefix first, then
    # the pattern over the names that have it, then the numbers after the prefix
    text = pa.array(pd.Index(names).astype(str), type=pa.large_string())
    hit = np.flatnonzero(pc.starts_with(text, PROFILER_STEP_PREFIX).to_numpy(zero_copy_only=False))
    if len(hit):
        ok = pc.match_substring_regex(text.take(pa.array(hit)), PROFILER_STEP_EVENT)
        hit = hit[ok.to_numpy(zero_copy_only=False)]
    if not len(hit):
        return None
    step_of = np.full(len(names) + 1, -1, dtype=np.int64)   # the last entry: code −1
    digits = pc.utf8_slice_codeunits(text.take(pa.array(hit)), len(PROFILER_STEP_PREFIX))
    step_of[hit] = pc.cast(digits, pa.int64()).to_numpy()
    # slice by slice through a table of flags (np.take: half the time of indexing by the int32 codes): no
    # temporary as long as the timeline, and a timeline on disk lets each slice's pages of the codes go
    is_step, found = step_of >= 0, []
    for p in row_slices(len(name_codes)):
        found.append(p.start + np.flatnonzero(np.take(is_step, name_codes[p])))
        release_pages(timeline)
    rows = np.concatenate(found)
    start = timeline["start_us"].to_numpy(float)[rows]
    out = pd.DataFrame({"step": step_of[name_codes[rows]], "start_us": start,
                        "end_us": start + np.nan_to_num(timeline["dur_us"].to_numpy(float)[rows]),
                        "source": PROFILER_STEP_SOURCE})
    return out.drop_duplicates("step").sort_values("start_us", kind="stable").reset_index(drop=True)


def place_steps(*, origin_us: float, device: str, kernels: pd.DataFrame | None = None,
                steps: pd.DataFrame | None = None, timeline: pd.DataFrame | None = None,
                tracks: pd.DataFrame | None = None, cann_clock: bool = False,
                first_device_op_ms: float | None = None) -> pd.DataFrame | None:
    """The `step_windows` frame: each step's span on the timeline's clock. From the kernels' step ids where
    they exist; else from the step trace's points: a CANN step trace (``cann_clock``) shares the timeline's
    monotonic clock (``origin_us`` away), legacy points (device ticks) are shifted by the device time of the
    first AI Core op (``first_device_op_ms``, from ``min_cycle_counter_*`` or ``output_timeline_data_*``)
    against that op on the timeline. None when the clocks cannot be matched, or when the result does not
    overlap the timeline at all."""
    if kernels is not None and not kernels.empty and kernels["step"].notna().any():
        k = kernels.dropna(subset=["step"])
        g = (k.assign(end_us=k["start_us"] + k["dur_us"]).groupby("step")
             .agg(start_us=("start_us", "min"), end_us=("end_us", "max")).reset_index())
        out = g.assign(step=g["step"].astype("int64"), source="kernel step ids")
    else:
        if steps is None or steps.empty or not {"start_ms", "end_ms"} <= set(steps.columns):
            return None
        if cann_clock:
            shift_us, source = origin_us, "CANN step trace (the timeline's clock)"
        else:
            # The earliest AI Core op on the device clock (ms) is the earliest event of the device's own
            # stream tracks on the timeline; the difference of the two maps device time to timeline time.
            anchor_us = first_device_event_us(timeline, tracks, device)
            if first_device_op_ms is None or anchor_us is None:
                return None
            shift_us = first_device_op_ms * 1000.0 - anchor_us
            source = "step-trace points aligned on the first AI Core op"
        out = pd.DataFrame({"step": steps["step"].astype("int64"),
                            "start_us": steps["start_ms"].astype(float) * 1000.0 - shift_us,
                            "end_us": steps["end_ms"].astype(float) * 1000.0 - shift_us,
                            "source": source})
    if timeline is None or timeline.empty:
        return out
    t0 = float(timeline["start_us"].min())
    t1 = float((timeline["start_us"] + timeline["dur_us"].fillna(0)).max())
    overlaps = (out["end_us"] > t0) & (out["start_us"] < t1)
    return out if bool(np.any(overlaps)) else None


def first_device_event_us(timeline: pd.DataFrame | None, tracks: pd.DataFrame | None, device: str) -> float | None:
    """Start (relative us) of the earliest event on the device's own stream tracks of a legacy timeline
    (pid = the device id; not the AI CPU 9000, communication 10000 or host 11000 processes)."""
    if tracks is None or tracks.empty or timeline is None or timeline.empty:
        return None
    own = tracks.loc[tracks["pid"].astype(str) == str(device), "track"]
    if own.empty:
        own = tracks.loc[~tracks["pid"].astype(str).isin(NOT_DEVICE_PIDS), "track"]
    starts = timeline.loc[timeline["track"].isin(own), "start_us"]
    return float(starts.min()) if len(starts) else None


# -- operators and their input shapes ---------------------------------------------------------------------
def join_input_shapes(ops: pd.DataFrame, shapes: pd.DataFrame | None) -> pd.DataFrame:
    """``ops`` with ``input_shapes`` (distinct shapes of the op, `` | ``-joined) where the op's short name
    (or name) is in ``shapes`` (the ``input_shapes`` frame)."""
    if shapes is None or shapes.empty or ops is None or ops.empty:
        return ops
    per_op = shapes.groupby("op_name", sort=False)["input_shapes"].agg(lambda s: " | ".join(dict.fromkeys(s)))
    key = ops["short_name"] if "short_name" in ops else ops["op_name"]
    joined = key.map(per_op)
    if joined.isna().all():
        joined = ops["op_name"].map(per_op)
    out = ops.copy()
    out["input_shapes"] = joined.where(joined.notna(), None)
    return out
