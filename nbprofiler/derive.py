"""What joins several file families (the model side of the data flow): the profile's time origin (the
trace's earliest event, else the kernels' or the database's), a step's place on the timeline (step-trace
points or kernel step ids against the trace's clock) and the operators joined with their input shapes.
Each derivation is a function of frames; `Profile` calls the builder of the same name here instead of the
io builder (``nbprofiler.io`` never reads another frame of the profile for these).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import build as F
from .errors import ProfilerDataError
from .io.discover import RunFiles

# Processes of a legacy timeline that are not the device's own streams (AI CPU, communication, host).
NOT_DEVICE_PIDS = ("9000", "10000", "11000")


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


def origin_us(run: RunFiles, prof) -> float:
    """The absolute time (µs) every relative start of the profile counts from: the earliest event of the
    run's trace where it has one; else the earliest device task of kernel_details.csv; else the
    database's earliest task; else 0.0."""
    from .io import ascend_ms, db, trace
    has_trace = trace.trace_sources(run) is not None
    if has_trace or run.has("cpu_op_timestamp"):
        try:
            data = trace.trace_data(run, prof)
        except ProfilerDataError:
            data = None  # the timeline frame reports the error; the origin falls back below
        if data is not None:
            return data.origin_us
    if run.has("kernel_details"):
        try:
            # the kernels frame counts from this origin: with a (broken) trace the file is read on its own
            kernels = ascend_ms.kernels(run, None) if has_trace else prof.kernels
        except ProfilerDataError:
            return 0.0
        if kernels is not None and "origin_us" in kernels.attrs:
            return float(kernels.attrs["origin_us"])
    return db.origin_us(run) if db.has_db(run) else 0.0


# -- the builders `Profile` uses for these frames ------------------------------------------------------
def step_windows(run: RunFiles, prof) -> pd.DataFrame | None:
    """`place_steps` with the profile's kernels, step trace, timeline and clocks. The kernels decide
    alone where they carry step ids (the step trace and the timeline are not read then)."""
    from .io import legacy
    kernels = prof.kernels
    if kernels is not None and not kernels.empty and kernels["step"].notna().any():
        return place_steps(kernels, None, prof.timeline, None, prof.origin_us, prof.device, False, None)
    steps = prof.step_trace
    if steps is None or steps.empty or not {"start_ms", "end_ms"} <= set(steps.columns):
        return None
    cann = run.generation == "cann"
    return place_steps(None, steps, prof.timeline, None if cann else prof.timeline_tracks, prof.origin_us,
                       prof.device, cann, None if cann else legacy.timeline_device_origin_ms(run))


def ops(run: RunFiles, prof) -> pd.DataFrame | None:
    """The io builder's operators with ``input_shapes`` joined from the ``input_shapes`` frame (a bad
    FRAMEWORK file costs the shapes, not the operators)."""
    out = F.ops(run, prof)
    if run.has("cpu_framework") and out is not None:
        from .io._util import warn_partial
        from .io.families import join_input_shapes
        try:
            out = join_input_shapes(out, prof.input_shapes)
        except ProfilerDataError as err:
            warn_partial(err)
    return out
