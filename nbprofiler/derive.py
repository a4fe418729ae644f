"""What joins several file families (the model side of the data flow), each a function of explicit values
(frames, numbers, the run's files), never of a `Profile`:

- the profile's time origin (`time_origin`: the trace's earliest event, else the kernels', else the
  database's) and which kernels count from it (`KERNELS_ON_TIMELINE`);
- a memory record clipped to this session's profiling window (`clip_to_window`, `repeating_schedule`);
- a step's place on the timeline (`place_steps`);
- the operators joined with their input shapes (`join_input_shapes`).

`nbprofiler.build` gathers these inputs from a `Profile` (whose cache memoises every parse) and calls them.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from .errors import MalformedFileError, ProfilerDataError
from .io._util import warn_partial

# Processes of a legacy timeline that are not the device's own streams (AI CPU, communication, host).
NOT_DEVICE_PIDS = ("9000", "10000", "11000")

# Kernels count from the profile's origin when the run has one of these timelines; else from their own
# earliest start (the profile's origin is then the kernels' own, see `time_origin`).
KERNELS_ON_TIMELINE = ("trace_view", "timeline", "cann_timeline")

# Rows this much earlier than the window's first traced event belong to an earlier window.
WINDOW_SLACK_US = 1000.0


# -- the time origin ------------------------------------------------------------------------------------
def time_origin(trace: Callable[[], float | None] | None, kernels: Callable[[], pd.DataFrame | None] | None,
                database: Callable[[], float] | None) -> float:
    """The absolute time (µs) every relative start of the profile counts from: the earliest event of the
    run's trace (``trace()``, None when the trace cannot be read), else the earliest device task of
    kernel_details.csv (``kernels()``'s ``attrs["origin_us"]``; 0.0 when the file cannot be read), else
    the database's earliest task (``database()``), else 0.0. Each argument is None when the run has no
    such source, and is called only when the ones before it give nothing (a trace is costly to read)."""
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
    return database() if database is not None else 0.0


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


def clip_to_window(mem: pd.DataFrame, window_start_us: float, path, rebase: bool = True) -> pd.DataFrame:
    """With the schedule API (or several start/stop calls) MindSpore writes one session folder per
    window, and each window's memory record (``path``) repeats the rows of every earlier window. Rows
    earlier than the window's first traced event (``window_start_us``, absolute; by more than
    `WINDOW_SLACK_US`) are those repeats: they are dropped with a warning saying why, and (``rebase``: a
    frame counting from its own first row) ``time_us`` counts from the first row kept.
    ``mem.attrs["origin_us"]`` is the absolute time ``time_us`` counts from. Call it for a run that is one
    of several sessions of its rank (or whose metadata names a `repeating_schedule`) and has a timeline."""
    if mem.empty:
        return mem
    window_start = float(window_start_us)
    first = float(mem.attrs["origin_us"])
    early = (first + mem["time_us"].to_numpy()) < window_start - WINDOW_SLACK_US
    if not early.any():
        return mem
    n = int(early.sum())
    warn_partial(MalformedFileError(
        path, f"{n} of {len(mem)} memory records precede this window's timeline by up to "
              f"{(window_start - first - float(mem['time_us'].min())) / 1e6:.3f} s: MindSpore repeats the "
              "records of earlier schedule windows in every window's file, so they were dropped (this "
              "session's window starts at its first traced event)", line=int(np.flatnonzero(early)[0]) + 2))
    kept = mem.loc[~early].reset_index(drop=True)
    shift = float(kept["time_us"].iloc[0]) if len(kept) and rebase else 0.0
    kept["time_us"] = kept["time_us"] - shift
    kept.attrs = dict(mem.attrs, origin_us=first + shift, clipped_rows=n)
    return kept


# -- steps on the timeline ----------------------------------------------------------------------------------
def place_steps(kernels: pd.DataFrame | None, steps: pd.DataFrame | None, timeline: pd.DataFrame | None,
                tracks: pd.DataFrame | None, origin_us: float, device: str, cann_clock: bool,
                first_device_op_ms: float | None) -> pd.DataFrame | None:
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
