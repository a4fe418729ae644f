"""Step averages and stage mappings, computed once for every view, the summary, compare and the cluster.

Two averages exist and both are shown somewhere, so the choice between them lives here:

- ``written``: the step-trace file's own average row, as written. MindInsight shows it (and so do the
  summary and the step-trace view's "Average"), even where it contradicts itself (legacy/run_2_lenet: total
  0 ms beside a 12.4321 ms step interval).
- ``comparable``: what numbers across runs and ranks are computed from (compare, the cluster reduce): the
  written row where it is a real step (it covers the stages and its total is above 0), else the mean of the
  recorded steps. `StepAverage.note` says which, in words a view can print.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

# MindInsight's three stages; every generation's stage set maps onto them (`legacy_stage_view`).
STAGE_KEYS = ("iteration_interval_ms", "fp_and_bp_ms", "tail_ms")


def legacy_stage_view(steps: pd.DataFrame) -> pd.DataFrame:
    """Step frame with the three MindInsight stages. New-format stage sets are mapped: step interval =
    ``preparing_ms`` (the gap before the first device task), forward+backward = ``computing_ms`` +
    ``communication_not_overlapped_ms``, tail = ``free_ms``; inference files: ``fp_ms`` is fp_and_bp."""
    df = pd.DataFrame({"step": steps["step"]}) if "step" in steps else pd.DataFrame(index=steps.index)
    col = lambda c: steps[c].astype(float) if c in steps else pd.Series(0.0, index=steps.index)  # noqa: E731
    if "fp_and_bp_ms" in steps or "fp_ms" in steps:
        df["iteration_interval_ms"] = col("iteration_interval_ms")
        df["fp_and_bp_ms"] = col("fp_and_bp_ms") if "fp_and_bp_ms" in steps else col("fp_ms")
        df["tail_ms"] = col("tail_ms")
    else:
        df["iteration_interval_ms"] = col("preparing_ms")
        df["fp_and_bp_ms"] = col("computing_ms") + col("communication_not_overlapped_ms")
        df["tail_ms"] = col("free_ms")
    df["total_ms"] = steps["total_ms"].astype(float) if "total_ms" in steps else df[list(STAGE_KEYS)].sum(axis=1)
    return df


@dataclasses.dataclass(frozen=True)
class StepAverage:
    """``written`` (the file's average row for ``columns``, or None), ``mean`` (of the recorded steps),
    ``comparable`` (the written row where it is a real step, else the mean) and ``source`` of the latter
    ("file" or "mean"). Values in ms, keyed by the stage columns and ``total_ms``."""

    columns: tuple[str, ...]
    written: dict[str, float] | None
    mean: dict[str, float]
    comparable: dict[str, float]
    source: str

    @property
    def shown(self) -> dict[str, float]:
        """What MindInsight shows as the average: the written row where there is one, else the mean."""
        return self.written if self.written is not None else self.mean

    @property
    def note(self) -> str:
        if self.source == "file":
            return "the step-trace file's own average row"
        if self.written is not None:
            return "the mean of the recorded steps (the file's average row is not a real step)"
        return "the mean of the recorded steps"


def step_average(steps: pd.DataFrame, stages: list[str], written: dict | None,
                 extras: tuple[str, ...] = ()) -> StepAverage:
    """The averages of ``steps`` (a step_trace frame) over ``stages`` + ``total_ms`` (+ ``extras`` where
    present), given the file's average row ``written`` (``prof.step_trace_average``)."""
    columns = tuple(c for c in (*stages, "total_ms", *extras) if c in steps.columns or (written and c in written))
    mean = {c: float(pd.to_numeric(steps[c], errors="coerce").mean()) for c in columns
            if c in steps.columns and len(steps)}
    row = {c: float(written.get(c) or 0.0) for c in columns if c in written} if written else None
    real = bool(row) and all(s in row for s in stages) and row.get("total_ms", 0.0) > 0
    comparable = {**mean, **row} if real else mean
    return StepAverage(columns, row, mean, comparable, "file" if real else "mean")


def profile_step_average(prof, extras: tuple[str, ...] = ()) -> StepAverage:
    """`step_average` of a Profile's step trace (memoised on it)."""
    return prof.cached(f"step_average{extras}", lambda: step_average(
        prof.step_trace, prof.step_stages, prof.step_trace_average, extras))


HOST_QUEUE_SOURCE = "host-queue batch timestamps"
STEP_TRACE_SOURCE = "step trace"
PROFILER_STEP_SPANS_SOURCE = "timeline's ProfilerStep#N spans"


@dataclasses.dataclass(frozen=True)
class StepTimes:
    """A run's step times from its one source (the same for the summary, `check`, `compare`, the
    diagnosis and the views): ``frame`` (``step``, ``total_ms`` plus the stage columns where the source
    has them), ``source`` (`STEP_TRACE_SOURCE`, `HOST_QUEUE_SOURCE`, `PROFILER_STEP_SPANS_SOURCE` or None),
    ``average_ms`` (the step
    trace's comparable average, else the mean; None without steps)."""

    frame: pd.DataFrame
    source: str | None
    average_ms: float | None

    @property
    def count(self) -> int:
        return int(len(self.frame))

    def to_dict(self) -> dict | None:
        if self.source is None:
            return None
        t = pd.to_numeric(self.frame["total_ms"], errors="coerce")
        return {"source": self.source, "steps": self.count, "average_ms": self.average_ms,
                "median_ms": float(t.median()), "p90_ms": float(t.quantile(0.9)),
                "max_ms": float(t.max())}


def host_queue_steps(host_queue: pd.DataFrame | None) -> pd.DataFrame:
    """``step``, ``total_ms``: the time between consecutive batches the host queue handed to the step
    (its records' ``timestamp_ms``), for runs without a step trace (CPU runs); empty without timestamps."""
    hq = host_queue
    if hq is None or len(hq) < 2 or "timestamp_ms" not in hq.columns:
        return pd.DataFrame(columns=["step", "total_ms"])
    hq = hq.sort_values("step")
    t = pd.to_numeric(hq["timestamp_ms"], errors="coerce").to_numpy(float)
    out = pd.DataFrame({"step": hq["step"].to_numpy()[1:], "total_ms": np.diff(t)}).dropna()
    return out[out["total_ms"] >= 0].reset_index(drop=True)


def profiler_step_spans(step_windows: pd.DataFrame | None) -> pd.DataFrame:
    """``step``, ``total_ms``: the spans of the trace's ``ProfilerStep#N`` events (``step_windows`` whose
    source is `model.derive.PROFILER_STEP_SOURCE`), for runs whose only step marks are in the timeline (a
    torch_npu trace, a trace without its step-trace file); empty otherwise."""
    from ..model.derive import PROFILER_STEP_SOURCE
    w = step_windows
    if w is None or not len(w) or "source" not in w or str(w["source"].iloc[0]) != PROFILER_STEP_SOURCE:
        return pd.DataFrame(columns=["step", "total_ms"])
    return pd.DataFrame({"step": w["step"].to_numpy(), "total_ms": (w["end_us"] - w["start_us"]).to_numpy(float)
                         / 1000.0}).sort_values("step", kind="stable").reset_index(drop=True)


def step_frame(step_trace: pd.DataFrame | None, host_queue: pd.DataFrame | None,
               step_windows=None) -> tuple[pd.DataFrame, str | None]:
    """(the run's steps, their source): the step trace where it has one, else the gaps between the batches
    the host queue handed out (`host_queue_steps`), else the trace's ``ProfilerStep#N`` spans
    (`profiler_step_spans` of ``step_windows``: the frame, or a function returning it, called only then),
    else no steps and None."""
    if step_trace is not None and len(step_trace) and "total_ms" in step_trace.columns:
        return step_trace, STEP_TRACE_SOURCE
    hq = host_queue_steps(host_queue)
    if len(hq):
        return hq, HOST_QUEUE_SOURCE
    spans = profiler_step_spans(step_windows() if callable(step_windows) else step_windows)
    if len(spans):
        return spans, PROFILER_STEP_SPANS_SOURCE
    return pd.DataFrame(columns=["step", "total_ms"]), None


def step_times(prof) -> StepTimes:
    """The run's step times (memoised on the Profile), from `step_frame`; the average of a step trace is its
    comparable one."""
    def build():
        frame, source = step_frame(prof.step_trace, prof.host_queue, lambda: prof.step_windows)
        if source == STEP_TRACE_SOURCE:
            return StepTimes(frame, source, profile_step_average(prof).comparable.get("total_ms"))
        return StepTimes(frame, source, float(frame["total_ms"].mean()) if source else None)
    return prof.cached("step_times", build)
