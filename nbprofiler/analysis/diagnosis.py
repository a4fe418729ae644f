"""What sets a run's step time, and what to do about it first: the one diagnosis every face shows.

`diagnose(prof)` reads a Profile's frames (through the analyses that own each number: `steps` for the step
times and stages, the advisor for the findings) and returns a `Diagnosis`: the step time and where it comes
from, the run's stages in its own vocabulary (a MindSpore 2.x / Ascend ``step_trace_time.csv`` has
Computing, Communication (not overlapped), Free and Preparing; a legacy step trace MindInsight's step
interval, forward+backward and tail), a first sentence that names the stage that sets the step time, and the
advisor's findings ranked by the time per step they concern (`Suggestion.cost_ms`). The Overview, the report,
the summary JSON (``diagnosis``), the CLI and compare all show this object; none recomputes it.

Findings whose premise the data contradicts are folded, not dropped: a MindData pipeline tuning rule says
"the device waits for data"; where the host queue was almost never empty and the step interval is a small
share of the step, the rule's advice is kept under ``folded`` with the reason.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..schema import STAGE_LABELS
from .steps import STEP_TRACE_SOURCE, profile_step_average, step_times

# A stage "sets the step time" when it is the largest of the stages that stack up to the step.
# The MindData rules' premise (the device waits for data) is contradicted when the host queue was empty at
# no more than this share of the steps and the stages that wait for data take less than this share of the step.
DATA_WAIT_CONTRADICTED_PCT = 2.0

# What each stage means for the engineer, in the run's own vocabulary: (the sentence's subject, what it says
# about the step, where to look). Legacy stages are MindInsight's.
STAGE_MEANING = {
    "computing_ms": ("Computing", "device compute (kernels, including the part overlapped by communication)",
                     "the slowest operator types and kernels (Operators)"),
    "communication_not_overlapped_ms": ("Communication not overlapped by computation",
                                        "collectives the device waits for with nothing to compute",
                                        "communication overlap and fusion, and the other ranks' step (Cluster)"),
    "free_ms": ("Free time", "the device idles with neither compute nor communication",
                "host-side dispatch, the data pipeline and synchronisation (Timeline)"),
    "preparing_ms": ("Preparing", "host work before the step's first device task",
                     "data loading and graph dispatch (MindData, Timeline)"),
    "iteration_interval_ms": ("The step interval", "the device waits for the next batch between steps",
                              "the MindData queues and pipeline (MindData)"),
    "fp_and_bp_ms": ("Forward and backward", "the step's compute, with the communication inside it",
                     "the slowest operator types (Operators)"),
    "fp_ms": ("Forward", "the step's compute", "the slowest operator types (Operators)"),
    "tail_ms": ("The step tail", "gradient aggregation and the parameter update after backward",
                "AllReduce fusion and split points (Step trace)"),
}
# Stages in which the device waits for the data pipeline.
DATA_WAIT_STAGES = ("iteration_interval_ms", "preparing_ms")


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """``step_ms`` (the average step, or None), ``step_source`` (`steps.StepTimes.source`), ``steps``
    (how many), ``stages`` (the run's own stages: column -> average ms, stacking up to the step),
    ``stage_set`` ("own": the run's stage columns; "none"), ``limiter`` (the stage that sets the step, or
    None), ``headline`` (the first sentence every face shows), ``findings`` (advisor `Suggestion`s, most
    time per step first) and ``folded`` ((suggestion, why it is folded) whose premise the data contradicts)."""

    step_ms: float | None
    step_source: str | None
    steps: int
    stages: dict
    limiter: str | None
    headline: str
    findings: tuple = ()
    folded: tuple = ()

    def to_dict(self) -> dict:
        total = self.step_ms or 0.0
        return {"headline": self.headline, "step_ms": self.step_ms, "step_source": self.step_source,
                "steps": self.steps,
                "stages": [{"stage": k, "label": STAGE_LABELS.get(k, k), "ms": v,
                            "percent": round(v / total * 100, 2) if total else None}
                           for k, v in self.stages.items()],
                "limiter": self.limiter,
                "findings": [s.id for s in self.findings],
                "folded": [{"id": s.id, "why": why} for s, why in self.folded]}


def fmt_ms(ms: float) -> str:
    """A duration in ms as a sentence prints it: 0.279, 8.83, 81.5, 1,484."""
    ms = float(ms)
    if abs(ms) >= 100:
        return f"{ms:,.0f}"
    if abs(ms) >= 10:
        return f"{ms:.1f}"
    return f"{ms:.3g}"


def own_stages(prof) -> dict:
    """The run's stage averages in its own vocabulary (columns that stack up to ``total_ms``), from the
    comparable average of `steps` (the file's own average row where it is a real step, else the mean)."""
    stages = list(prof.step_stages or [])
    if not stages:
        return {}
    avg = profile_step_average(prof).comparable
    return {s: float(avg[s]) for s in stages if s in avg and np.isfinite(avg[s])}


def stage_sentence(stages: dict, step_ms: float, steps: int, source: str) -> tuple[str | None, str]:
    """(the limiting stage, the sentence naming it) for ``stages`` (column -> ms) of an average step."""
    if not stages or not step_ms or step_ms <= 0:
        return None, f"The average step takes {fmt_ms(step_ms or 0)} ms ({steps:,} steps, from the {source})."
    limiter = max(stages, key=stages.get)
    name, meaning, look = STAGE_MEANING.get(limiter, (STAGE_LABELS.get(limiter, limiter), "", ""))
    share = stages[limiter] / step_ms * 100
    others = ", ".join(f"{STAGE_LABELS.get(k, k).lower()} {fmt_ms(v)} ms" for k, v in
                       sorted(stages.items(), key=lambda kv: -kv[1]) if k != limiter)
    text = (f"{name} sets the step time: {fmt_ms(stages[limiter])} of {fmt_ms(step_ms)} ms per step "
            f"({share:.0f} %, {meaning})" + (f"; {others}" if others else "") + f". Look at {look}.")
    return limiter, text


def _data_wait_contradicted(prof, stages: dict, step_ms: float | None) -> str | None:
    """Why the MindData rules' premise (the device waits for data) does not hold here, or None."""
    from .minddata import queue_summary
    hq = queue_summary(prof.host_queue, prof.device_queue).get("host_queue")
    if not hq or not hq.get("steps"):
        return None
    empty_pct = hq["empty_steps"] / hq["steps"] * 100
    wait = sum(stages.get(s, 0.0) for s in DATA_WAIT_STAGES)
    wait_pct = wait / step_ms * 100 if step_ms else 0.0
    if empty_pct <= DATA_WAIT_CONTRADICTED_PCT and wait_pct <= DATA_WAIT_CONTRADICTED_PCT * 5:
        return (f"the host queue was empty at only {hq['empty_steps']:,} of {hq['steps']:,} steps "
                f"({empty_pct:.1f} %)" + (f" and the device waited {wait_pct:.1f} % of the step for data"
                                          if stages and any(s in stages for s in DATA_WAIT_STAGES) else "")
                + ": the pipeline rarely holds training back")
    return None


# The MindData rules whose advice assumes the device waits for data.
_DATA_PREMISE_RULES = ("minddata.pipeline", "minddata.bottleneck", "minddata.queue_usage", "minddata.op_cpu",
                       "minddata.host_queue_empty", "minddata.device_queue_empty", "minddata.cpu_busy")


def diagnose(prof) -> Diagnosis:
    """The run's diagnosis (memoised on the Profile). See `Diagnosis`."""
    return prof.cached("diagnosis", lambda: _diagnose(prof))


def _diagnose(prof) -> Diagnosis:
    from .advisor import advise_profile
    times = step_times(prof)
    stages = own_stages(prof) if times.source == STEP_TRACE_SOURCE else {}
    step_ms = times.average_ms
    if times.source is None or not stages:
        limiter, headline = None, operator_sentence(prof, step_ms, times.count, times.source)
    else:
        limiter, headline = stage_sentence(stages, step_ms, times.count, times.source)
    suggestions = advise_profile(prof)
    why = _data_wait_contradicted(prof, stages, step_ms)
    kept, folded = [], []
    for s in suggestions:
        if why and s.rule in _DATA_PREMISE_RULES:
            folded.append((s, why))
        else:
            kept.append(s)
    return Diagnosis(step_ms, times.source, times.count, stages, limiter, headline, tuple(rank_by_cost(kept)),
                     tuple(folded))


def rank_by_cost(suggestions) -> list:
    """Most time per step first; findings without an estimate after those with one, by severity."""
    from .advisor import SEVERITIES
    return sorted(suggestions, key=lambda s: (s.cost_ms is None, -(s.cost_ms or 0.0),
                                              SEVERITIES.index(s.severity)))


def operator_sentence(prof, step_ms: float | None, steps: int, source: str | None) -> str:
    """The first sentence of a run without stages (CPU and PyNative runs, MindData-only runs): its step time
    where it has one, and the operator time of its busiest device kind, per step where steps are known."""
    if source is None:
        head = "No step timing was recorded (no step trace, no host-queue timestamps)"
    else:
        head = f"The average step takes {fmt_ms(step_ms)} ms ({steps:,} steps, from the {source})"
    wait = _data_wait_clause(prof, step_ms)
    if wait:
        return f"{head}: {wait}"
    t = prof.op_types
    if t is None or not len(t):
        return head + "; no operator times were recorded."
    by_kind = t[t["kind"] != "communication"].groupby("kind", sort=False)["total_time_us"].sum()
    if not len(by_kind) or not by_kind.max() > 0:
        return head + "."
    kind = by_kind.idxmax()
    kind_ms = float(by_kind.max()) / 1000
    top = t[t["kind"] == kind].sort_values("total_time_us", ascending=False, kind="stable").iloc[0]
    top_ms = float(top["total_time_us"]) / 1000
    label = kind_label(kind)
    if steps and step_ms:
        per, top_per = kind_ms / steps, top_ms / steps
        return (f"{head}: {label} operators run {fmt_ms(per)} ms of it ({per / step_ms * 100:.0f} %), "
                f"{top['op_type']} alone {fmt_ms(top_per)} ms ({top_per / step_ms * 100:.0f} %). "
                "Look at the slowest operator types (Operators).")
    return (f"{head}; of {fmt_ms(kind_ms)} ms of {label} operator time, {top['op_type']} takes "
            f"{top_ms / kind_ms * 100:.0f} %.")


def _data_wait_clause(prof, step_ms: float | None) -> str | None:
    """"it waits N ms (P %) for the next batch ..." where the host queue's get time is most of the step."""
    from .minddata import queue_summary
    hq = queue_summary(prof.host_queue, prof.device_queue).get("host_queue")
    if not step_ms or not hq or hq.get("avg_get_ms") is None:
        return None
    share = hq["avg_get_ms"] / step_ms * 100
    if share < 50:
        return None
    return (f"it waits {fmt_ms(hq['avg_get_ms'])} ms of it ({share:.0f} %) for the next batch from the data "
            f"pipeline (the host queue was empty at {hq['empty_steps']:,} of {hq['steps']:,} steps). Look at the "
            "MindData pipeline (MindData).")


def kind_label(kind: str) -> str:
    from ..schema import KIND_LABELS
    return KIND_LABELS.get(kind, kind)


__all__ = ["Diagnosis", "diagnose", "own_stages", "stage_sentence", "rank_by_cost", "fmt_ms", "STAGE_MEANING",
           "DATA_WAIT_CONTRADICTED_PCT"]
