"""The advisor: findings with the evidence that produced them, in the order an engineer should act.

Rules follow the tuning method of MindSpore's guides (step trace first: which stage dominates; then
the stage's own view: MindData queues and pipeline for the step interval, operators for forward and
backward, communication for the tail) and MindInsight's proposer thresholds (FORMATS.md 5.5). Each
suggestion is ``{"id": str, "text": str, "evidence": dict}``; ``text`` is plain text (views escape it).
"""
from __future__ import annotations

import pandas as pd

# MindInsight's proposer: an average step interval above 0.5 ms means data waits can be optimised.
STEP_INTERVAL_MS = 0.5
# A stage is "dominant" when it takes at least this share of the average step.
DOMINANT_SHARE = 0.4
# MindInsight's host-queue rule: more than 30 % of steps with an empty queue means data processing is slow.
EMPTY_QUEUE_RATE = 0.3
# MindInsight's CPU proposer: machine CPU use above 80 % may slow data processing.
CPU_BUSY_PCT = 80.0

# Each stage a step trace can have: what it is called, and what to do when it dominates the step.
STAGES = {
    "iteration_interval_ms": ("The step interval", "the device waits for data: speed up data loading (more "
                              "num_parallel_workers for slow map ops, a larger prefetch, sink mode)"),
    "fp_and_bp_ms": ("Forward and backward", "look at the slowest operator types (mixed precision for "
                     "MatMul/Conv, fused operators)"),
    "fp_ms": ("Forward", "look at the slowest operator types (mixed precision, fused operators)"),
    "tail_ms": ("The step tail", "gradient aggregation (AllReduce) and the parameter update: tune AllReduce "
                "fusion / split points so communication overlaps backward"),
    "preparing_ms": ("Preparing (host work before the first device task)", "the host is slow to launch "
                     "the step: check data loading and graph dispatch"),
    "computing_ms": ("Computing", "look at the slowest kernels and operator types"),
    "communication_not_overlapped_ms": ("Communication not overlapped by computation", "tune communication "
                                        "fusion and overlap, and check the slow links"),
    "free_ms": ("Free time (the device idles)", "the device waits for the host, for data or for other ranks: "
                "look at host-side dispatch, the data pipeline and synchronisation"),
}
KIND_NAMES = {"ai_core": "AI Core", "ai_cpu": "AI CPU", "cpu": "host CPU", "gpu": "GPU", "npu": "NPU",
              "communication": "communication (HCCL)"}


def format_us(us: float) -> str:
    """A duration in the unit a person reads it in: 812 us, 35.9 ms, 35.92 s."""
    us = float(us)
    if abs(us) >= 1e6:
        return f"{us / 1e6:.4g} s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.4g} ms"
    return f"{us:.4g} us"


def suggestions(prof) -> list[dict]:
    from .summary import legacy_stage_view
    out: list[dict] = []
    steps = prof.step_trace
    if steps is not None and not steps.empty and "total_ms" in steps:
        view = legacy_stage_view(steps)
        src = prof.step_trace_average
        out += _step_trace_findings(pd.Series(src) if src else steps.mean(numeric_only=True),
                                    prof.step_stages, view)
    out += _operator_findings(prof)
    out += _minddata_findings(prof)
    return out


def _step_trace_findings(avg: pd.Series, stages: list[str], view: pd.DataFrame) -> list[dict]:
    """``avg``: the average step in the profile's own stage columns (ms); ``view``: the steps with the
    three MindInsight stages (for the step-interval rule and the first-step check)."""
    out = []
    total = float(avg.get("total_ms", 0.0))
    interval = float(avg["iteration_interval_ms"]) if "iteration_interval_ms" in avg else 0.0
    if interval > STEP_INTERVAL_MS:
        out.append({"id": "step_trace.iteration_interval",
                    "text": (f"The average step interval is {interval:.4g} ms (over {STEP_INTERVAL_MS} ms): the "
                             "device waits for data between steps. Check the MindData queues and pipeline."),
                    "evidence": {"iteration_interval_ms": interval, "threshold_ms": STEP_INTERVAL_MS,
                                 "total_ms": total}})
    known = [c for c in stages if c in STAGES and c in avg]
    if total > 0 and known:
        stage = max(known, key=lambda c: float(avg[c]))
        share = float(avg[stage]) / total
        if share >= DOMINANT_SHARE:
            name, advice = STAGES[stage]
            out.append({"id": f"step_trace.dominant.{stage[:-3]}",
                        "text": f"{name} takes {share:.0%} of the average step ({float(avg[stage]):.4g} of "
                                f"{total:.4g} ms): {advice}.",
                        "evidence": {"stage": stage, "share": share, "stage_ms": float(avg[stage]),
                                     "total_ms": total}})
    if len(view) >= 3:
        first, rest = float(view["total_ms"].iloc[0]), view["total_ms"].iloc[1:]
        if rest.median() > 0 and first > 2 * rest.median():
            out.append({"id": "step_trace.first_step_slow",
                        "text": f"Step 1 took {first:.4g} ms, {first / rest.median():.1f}x the median of the other "
                                "steps (graph compilation and warm-up): exclude it when comparing runs.",
                        "evidence": {"first_step_ms": first, "median_other_ms": float(rest.median())}})
    return out


def _operator_findings(prof) -> list[dict]:
    types = prof.op_types
    if types is None or types.empty:
        return []
    out = []
    for kind, g in types.groupby("kind", sort=False):
        g = g.sort_values("total_time_us", ascending=False)
        top = g.iloc[0]
        share = float(top["percent"])
        if share >= 20:
            out.append({"id": f"operators.{kind}.top_type",
                        "text": f"{top['op_type']} operators take {share:.1f}% of {KIND_NAMES.get(kind, kind)} operator "
                                f"time ({format_us(top['total_time_us'])} over {int(top['count'])} executions): "
                                "start optimising there (data type, shapes, fusion).",
                        "evidence": {"kind": kind, "op_type": str(top["op_type"]), "percent": share,
                                     "total_time_us": float(top["total_time_us"]), "count": int(top["count"])}})
    return out


def _minddata_findings(prof) -> list[dict]:
    from . import minddata as md
    out = []
    host, device = prof.host_queue, prof.device_queue
    q = md.queue_summary(host, device)
    hq = q.get("host_queue")
    if hq and hq.get("steps"):
        rate = hq["empty_steps"] / hq["steps"]
        if rate > EMPTY_QUEUE_RATE:
            out.append({"id": "minddata.host_queue_empty",
                        "text": f"The host queue was empty at {hq['empty_steps']} of {hq['steps']} steps "
                                f"({rate:.0%}, threshold {EMPTY_QUEUE_RATE:.0%}): data processing is slower than "
                                "training consumes it.",
                        "evidence": {**hq, "empty_rate": rate, "threshold": EMPTY_QUEUE_RATE}})
    dq = q.get("device_queue")
    if dq and dq.get("steps") and dq.get("empty_steps"):
        out.append({"id": "minddata.device_queue_empty",
                    "text": f"The device data queue was empty at {dq['empty_steps']} of {dq['steps']} GetNext calls: "
                            "data transmission to the device is a bottleneck.",
                    "evidence": dict(dq)})
    pipeline = prof.minddata_pipeline
    if pipeline is not None and not pipeline.empty:
        out += md.pipeline_advice(pipeline, prof.op_cpu_utilization)
    cpu = prof.cpu_utilization
    if cpu is not None and not cpu.empty:
        c = md.cpu_summary(cpu)
        busy = 100.0 - float(c["device_idle_pct_avg"])
        if busy > CPU_BUSY_PCT:
            out.append({"id": "minddata.cpu_busy",
                        "text": f"The whole machine's CPU was {busy:.0f}% busy on average (over "
                                f"{CPU_BUSY_PCT:.0f}%): data processing may be CPU-starved.",
                        "evidence": {"cpu_busy_pct": busy, "threshold_pct": CPU_BUSY_PCT}})
    return out
