"""Operators per step (MindInsight's "operator time by iteration") and operators grouped by input shape
(MindStudio Insight's shape grouping). Pure functions over frames, no file access.

Where each step's operators come from, best first:

1. ``kernels`` rows that carry a step id (``kernel_details.csv`` written with a schedule or ``step()``);
2. device-op events of the ``timeline`` placed in ``step_windows`` by their start time (legacy step
   points aligned on the first AI Core op, CANN step traces, ``ProfilerStep#N`` spans).

The result says which one it used (``attrs["source"]``), because the two are not equally exact: a kernel's
step id is written by the profiler, a timeline event's step is inferred from when it started.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ..model.derive import PROFILER_STEP_SOURCE
from .timeline import events_end

# Timeline processes whose events are device (or CPU) operator executions, as the trace writers name
# them; host API, communication, overlap-analysis and step-marker tracks are not operators.
DEVICE_OP_PROCESS = re.compile(r"^(Ascend Hardware|Ascend Device|GPU|CPU OP)\b")
NOT_OP_THREAD = re.compile(r"^Step Trace")
# A step counts as traced when the device operators span at least this share of its window.
COVERED_FRACTION = 0.9

BY_STEP_COLUMNS = {"step": "int64", "op_type": "string", "total_time_us": "float64", "count": "Int64"}
SHAPE_COLUMNS = {"op_type": "string", "input_shapes": "string", "count": "Int64", "total_time_us": "float64",
                 "avg_time_us": "float64", "percent": "float64"}
STEP_OP_COLUMNS = {"step": "int64", "name": "string", "op_type": "string", "start_us": "float64",
                   "dur_us": "float64", "input_shapes": "string"}


def _empty(columns: dict, source: str | None = None) -> pd.DataFrame:
    out = pd.DataFrame({c: pd.Series(dtype=t) for c, t in columns.items()})
    out.attrs["source"] = source
    return out


def _kernels_with_steps(kernels: pd.DataFrame | None) -> pd.DataFrame | None:
    if kernels is None or kernels.empty or "step" not in kernels:
        return None
    with_step = kernels[kernels["step"].notna()]
    return with_step if len(with_step) else None


def _device_op_events(timeline: pd.DataFrame | None, tracks: pd.DataFrame | None) -> pd.DataFrame | None:
    if timeline is None or timeline.empty or tracks is None or tracks.empty:
        return None
    is_op = (tracks["process"].astype(str).str.match(DEVICE_OP_PROCESS)
             & ~tracks["thread"].astype(str).str.match(NOT_OP_THREAD))
    op_tracks = tracks.loc[is_op, "track"].to_numpy()
    pos = np.flatnonzero((timeline["track"].isin(op_tracks) & (timeline["ph"] == "X")).to_numpy())
    # without the args text (read from disk, where it is looked at, on a trace larger than memory): the
    # rows' positions fetch it for the rows kept
    events = timeline.iloc[pos][["name", "op_type", "start_us", "dur_us"]].assign(_pos=pos)
    return events if len(events) else None


def _place_in_steps(start_us: np.ndarray, windows: pd.DataFrame, with_start: bool = False):
    """The step of each start time (−1 outside every window); windows may not overlap. ``with_start``:
    also the start of each one's window (NaN outside every window)."""
    w = windows.sort_values("start_us", kind="stable")
    starts, ends, steps = (w["start_us"].to_numpy(float), w["end_us"].to_numpy(float),
                           w["step"].to_numpy(np.int64))
    at = np.searchsorted(starts, start_us, side="right") - 1
    inside = (at >= 0) & (start_us < ends[np.clip(at, 0, None)])
    step = np.where(inside, steps[np.clip(at, 0, None)], -1)
    return (step, np.where(inside, starts[np.clip(at, 0, None)], np.nan)) if with_start else step


def _step_rows(kernels, timeline, tracks, step_windows) -> tuple[pd.DataFrame | None, str | None]:
    """One row per operator execution with ``step``, ``name``, ``op_type``, ``start_us``, ``dur_us``
    (and ``input_shapes`` where the source has them, or ``_pos``: the row's position in the timeline, whose
    args may hold them), and the source's description."""
    k = _kernels_with_steps(kernels)
    if k is not None:
        rows = pd.DataFrame({"step": k["step"].astype("int64").to_numpy(), "name": k["name"].astype(str).to_numpy(),
                             "op_type": k["type"].astype(str).to_numpy(), "start_us": k["start_us"].to_numpy(float),
                             "dur_us": k["dur_us"].to_numpy(float)})
        if "input_shapes" in k:
            # kernel_details.csv writes "" where an operator has no inputs; that is "no shapes", not a shape
            rows["input_shapes"] = k["input_shapes"].astype("string").replace("", pd.NA).to_numpy()
        return rows, "step ids written with each kernel (kernel_details.csv)"
    events = _device_op_events(timeline, tracks)
    if events is None or step_windows is None or step_windows.empty:
        return None, None
    # Only steps the trace covers: a trace that stops mid-step would show that step's operators as a sudden
    # drop in time that never happened. Steps placed from another file (a step trace's points) are covered
    # where the device operators span them: a step starts a little before its first operator and ends a
    # little after its last, hence the slack. Steps the trace marks itself (ProfilerStep#N) are its own
    # events, recorded whole: every event's span covers them (a host-bound step's device work starts late).
    if "source" in step_windows and (step_windows["source"] == PROFILER_STEP_SOURCE).all():
        start = timeline["start_us"].to_numpy(float)
        first, last = float(np.nanmin(start)), events_end(start, timeline["dur_us"].to_numpy(float))
    else:
        first, last = float(events["start_us"].min()), float((events["start_us"] + events["dur_us"]).max())
    slack = (1 - COVERED_FRACTION) * (step_windows["end_us"] - step_windows["start_us"])
    step_windows = step_windows[(step_windows["start_us"] + slack >= first) & (step_windows["end_us"] - slack <= last)]
    if step_windows.empty:
        return None, None
    steps = _place_in_steps(events["start_us"].to_numpy(float), step_windows)
    keep = steps >= 0
    events = events[keep]
    rows = pd.DataFrame({"step": steps[keep], "name": events["name"].astype(str).to_numpy(),
                         "op_type": events["op_type"].astype(str).to_numpy(),
                         "start_us": events["start_us"].to_numpy(float), "dur_us": events["dur_us"].to_numpy(float),
                         "_pos": events["_pos"].to_numpy()})
    how = str(step_windows["source"].iloc[0]) if "source" in step_windows else "step windows"
    return rows, f"timeline device operators placed in their step by start time ({how}; steps the trace covers)"


def op_time_by_step(step_windows: pd.DataFrame | None = None, *, kernels: pd.DataFrame | None = None,
                    timeline: pd.DataFrame | None = None, tracks: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each operator type's time in each step: ``step`` (int64), ``op_type``, ``total_time_us``,
    ``count`` (Int64), sorted by step then time. ``attrs["source"]`` says where the steps come from
    (None when the profile cannot place operators in steps: then the frame is empty)."""
    rows, source = _step_rows(kernels, timeline, tracks, step_windows)
    if rows is None or rows.empty:
        return _empty(BY_STEP_COLUMNS, source)
    out = (rows.groupby(["step", "op_type"], sort=False, observed=True)
           .agg(total_time_us=("dur_us", "sum"), count=("dur_us", "size")).reset_index()
           .sort_values(["step", "total_time_us"], ascending=[True, False], kind="stable")
           .reset_index(drop=True))
    out = out.astype(BY_STEP_COLUMNS)
    out.attrs["source"] = source
    return out


def top_types_over_steps(by_step: pd.DataFrame, n: int = 8) -> list[str]:
    """The ``n`` types with the most time over all steps (the lines worth drawing)."""
    totals = by_step.groupby("op_type", observed=True)["total_time_us"].sum().sort_values(ascending=False,
                                                                                         kind="stable")
    return [str(t) for t in totals.index[:n]]


def _shapes_from_args(args) -> str | pd.NA:
    """``Input Shapes`` / ``input_shapes`` from a trace event's args JSON, where the writer put them."""
    if not isinstance(args, str) or "hape" not in args:
        return pd.NA
    try:
        data = json.loads(args)
    except ValueError:
        return pd.NA
    for key, value in data.items() if isinstance(data, dict) else ():
        if key.lower().replace(" ", "_") == "input_shapes":
            return str(value)
    return pd.NA


def step_operators(step_windows: pd.DataFrame | None = None, *, kernels: pd.DataFrame | None = None,
                   timeline: pd.DataFrame | None = None, tracks: pd.DataFrame | None = None,
                   step: int | None = None, per_step: int | None = None) -> pd.DataFrame:
    """Operator executions placed in steps, each step's longest first: ``step``, ``name``, ``op_type``,
    ``start_us``, ``dur_us``, ``input_shapes`` (NA where the files hold no shapes). ``step`` keeps one
    step; ``per_step`` keeps each step's longest ``per_step`` executions."""
    rows, source = _step_rows(kernels, timeline, tracks, step_windows)
    if rows is None:
        return _empty(STEP_OP_COLUMNS, source)
    args = timeline["args"] if timeline is not None and "args" in timeline else None
    if step is not None:
        rows = rows[rows["step"] == int(step)]
    rows = rows.sort_values(["step", "dur_us"], ascending=[True, False], kind="stable")
    if per_step is not None:
        rows = rows.groupby("step", sort=False).head(per_step)
    rows = rows.copy()
    if "input_shapes" not in rows:
        # Shapes from the args JSON are parsed only for the rows kept, never for a whole trace.
        rows["input_shapes"] = [_shapes_from_args(a) for a in args.iloc[rows["_pos"].to_numpy()]] \
            if args is not None and "_pos" in rows else pd.NA
    out = rows[list(STEP_OP_COLUMNS)].reset_index(drop=True).astype(STEP_OP_COLUMNS)
    out.attrs["source"] = source
    return out


def ops_by_input_shape(kernels: pd.DataFrame | None) -> pd.DataFrame:
    """Kernels grouped by type and input shapes: ``op_type``, ``input_shapes``, ``count``,
    ``total_time_us``, ``avg_time_us``, ``percent`` (of all kernels' time, 0–100), most time first.
    Empty where the kernels carry no shapes."""
    if kernels is None or kernels.empty or "input_shapes" not in kernels:
        return _empty(SHAPE_COLUMNS)
    k = kernels.assign(input_shapes=kernels["input_shapes"].astype("string").fillna(""),
                       type=kernels["type"].astype(str))
    out = (k.groupby(["type", "input_shapes"], sort=False, observed=True)
           .agg(count=("dur_us", "size"), total_time_us=("dur_us", "sum")).reset_index()
           .rename(columns={"type": "op_type"}))
    out["avg_time_us"] = out["total_time_us"] / out["count"]
    total = float(k["dur_us"].sum())
    out["percent"] = out["total_time_us"] / total * 100 if total > 0 else np.nan
    out = out.sort_values("total_time_us", ascending=False, kind="stable").reset_index(drop=True)
    return out[list(SHAPE_COLUMNS)].astype(SHAPE_COLUMNS)


__all__ = ["op_time_by_step", "top_types_over_steps", "step_operators", "ops_by_input_shape"]
