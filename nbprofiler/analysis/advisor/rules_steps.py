"""Step-trace rules: which stage dominates the average step, a long step interval, a slow first step.

The tuning method of MindSpore's guides starts here: the dominant stage says where to look next (the
MindData pipeline for the step interval, operators for forward and backward, communication for the tail).
"""
from __future__ import annotations

import pandas as pd

from ...schema import step_stages
from ..steps import legacy_stage_view, step_average
from .model import Context, Evidence, Rule

# What each stage is called in a suggestion, and what to do when it dominates the step.
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


def _steps(ctx: Context):
    """(average in the profile's own stage columns, where that average comes from, the steps with the three
    MindInsight stages, the stage columns) or None without a step trace."""
    steps = ctx.step_trace
    if not ctx.has("step_trace") or "total_ms" not in steps:
        return None
    stages = step_stages(steps)
    average = step_average(steps, stages, ctx.step_trace_average)  # the average the views show
    origin = ("the step-trace file's own average row" if average.written is not None
              else f"mean of {len(steps)} steps")
    return pd.Series(average.shown), origin, legacy_stage_view(steps), stages


def _step_range(view: pd.DataFrame) -> tuple[int, int] | None:
    if "step" not in view or view.empty:
        return None
    return int(view["step"].min()), int(view["step"].max())


def step_interval(rule: Rule, ctx: Context):
    got = _steps(ctx)
    if got is None:
        return
    avg, origin, view, _ = got
    limit = rule.thresholds["interval_ms"]
    interval = float(avg["iteration_interval_ms"]) if "iteration_interval_ms" in avg else 0.0
    if not interval > limit:
        return
    ev = [Evidence("average_interval_ms", "Average step interval", interval, "ms", limit, ">", detail=origin,
                   frame="step_trace", column="iteration_interval_ms", steps=_step_range(view))]
    if "step" in view and len(view) > 1 and view["iteration_interval_ms"].max() > limit:
        worst = view.loc[view["iteration_interval_ms"].idxmax()]
        step = int(worst["step"])
        ev.append(Evidence("longest_interval_ms", f"Longest step interval (step {step})",
                           float(worst["iteration_interval_ms"]), "ms", frame="step_trace",
                           column="iteration_interval_ms", steps=(step, step), window_us=ctx.step_window(step)))
    yield rule.suggestion("step_trace.iteration_interval",
                          f"The average step interval is {interval:.4g} ms (over {limit:g} ms): the device waits "
                          "for data between steps. Check the MindData queues and pipeline.", ev,
                          subjects=["stage:iteration_interval_ms"], cost_ms=interval)


def dominant_stage(rule: Rule, ctx: Context):
    got = _steps(ctx)
    if got is None:
        return
    avg, origin, view, stages = got
    total = float(avg.get("total_ms", 0.0))
    known = [c for c in stages if c in STAGES and c in avg]
    if not (total > 0 and known):
        return
    stage = max(known, key=lambda c: float(avg[c]))
    share = float(avg[stage]) / total * 100
    limit = rule.thresholds["share_pct"]
    if share < limit:
        return
    name, advice = STAGES[stage]
    ev = [Evidence("stage_share_pct", f"{name}: share of the average step", share, "%", limit, ">=",
                   detail=f"{float(avg[stage]):.4g} of {total:.4g} ms; {origin}", frame="step_trace", column=stage,
                   steps=_step_range(view)),
          Evidence("stage_ms", f"{name}: average", float(avg[stage]), "ms", frame="step_trace", column=stage),
          Evidence("total_ms", "Average step", total, "ms", frame="step_trace", column="total_ms")]
    steps = ctx.step_trace
    if "step" in steps and len(steps) > 1 and steps[stage].notna().any():
        worst = steps.loc[steps[stage].idxmax()]
        step = int(worst["step"])
        ev.append(Evidence("longest_stage_ms", f"{name}: longest (step {step})", float(worst[stage]), "ms",
                           frame="step_trace", column=stage, steps=(step, step), window_us=ctx.step_window(step)))
    yield rule.suggestion(f"step_trace.dominant.{stage[:-3]}",
                          f"{name} takes {share:.0f}% of the average step ({float(avg[stage]):.4g} of {total:.4g} "
                          f"ms): {advice}.", ev, subjects=[f"stage:{stage}"], cost_ms=float(avg[stage]))


def first_step_slow(rule: Rule, ctx: Context):
    got = _steps(ctx)
    if got is None:
        return
    _, _, view, _ = got
    if len(view) < rule.thresholds["min_steps"]:
        return
    first, rest = float(view["total_ms"].iloc[0]), view["total_ms"].iloc[1:]
    median = float(rest.median())
    factor = rule.thresholds["factor"]
    if not (median > 0 and first > factor * median):
        return
    step = int(view["step"].iloc[0]) if "step" in view else 1
    ev = [Evidence("first_step_ms", f"Step {step}", first, "ms", frame="step_trace", column="total_ms",
                   steps=(step, step), window_us=ctx.step_window(step)),
          Evidence("ratio", f"Step {step} against the median of the other steps", first / median, "x", factor, ">",
                   detail=f"median {median:.4g} ms over {len(rest)} steps", frame="step_trace", column="total_ms")]
    yield rule.suggestion("step_trace.first_step_slow",
                          f"Step {step} took {first:.4g} ms, {first / median:.1f}x the median of the other steps "
                          "(graph compilation and warm-up): exclude it when comparing runs.", ev,
                          cost_ms=(first - median) / len(view))


RULES = (
    # MindInsight's step-trace proposer: an average step interval above 0.5 ms means data waits can be optimised.
    Rule("step_trace.iteration_interval", "step_trace", "high", "Long step interval (waiting for data)",
         "MindInsight 2.3.1 step-trace proposer", {"interval_ms": 0.5}, step_interval),
    # A stage "dominates" when it takes at least this share of the average step.
    Rule("step_trace.dominant", "step_trace", "high", "One stage dominates the step", "nbprofiler",
         {"share_pct": 40.0}, dominant_stage),
    # Graph compilation makes step 1 slow; more than twice the median of the rest (with 3+ steps) is worth saying.
    Rule("step_trace.first_step_slow", "step_trace", "info", "Slow first step (compilation, warm-up)", "nbprofiler",
         {"factor": 2.0, "min_steps": 3}, first_step_slow),
)
