"""Dispatch rule: the device idles waiting for the host to launch its tasks (`nbprofiler.analysis.dispatch`)."""
from __future__ import annotations

import pandas as pd

from .model import Context, Evidence, Rule, format_us


def host_bound(rule: Rule, ctx: Context):
    d = ctx.dispatch
    if d is None or not d.available or d.steps.empty:
        return
    share = d.idle_share * 100
    limit = rule.thresholds["share_pct"]
    if share < limit:
        return
    per_step = d.host_idle_per_step_us
    steps = d.steps[d.steps["step"].notna()]
    span = (int(steps["step"].min()), int(steps["step"].max())) if len(steps) else None
    unit = "step" if len(steps) else "run"
    ev = [Evidence("idle_share_pct", f"Device idle waiting for the host: share of the {unit}", share, "%", limit,
                   ">=", detail=f"{format_us(d.steps['host_idle_us'].sum())} of {format_us(d.steps['step_us'].sum())}"
                   f" over {len(d.steps)} {unit}(s); steps from {d.step_source}", frame="dispatch",
                   column="host_idle_us", steps=span),
          Evidence("host_idle_us", f"Host-bound device idle per {unit}", per_step, "us", frame="dispatch",
                   column="host_idle_us", steps=span),
          Evidence("waited_tasks", "Device tasks that waited for their launch", d.waited_tasks,
                   detail=f"of {d.launched:,} launched tasks", frame="dispatch", column="waited")]
    worst = d.worst_step()
    known = not pd.isna(worst["step"])
    label = f"step {int(worst['step'])}" if known else "the run"
    ev.append(Evidence("worst_step_idle_us", f"Host-bound idle in {label}", float(worst["host_idle_us"]), "us",
                       frame="dispatch", column="host_idle_us", steps=(int(worst["step"]),) * 2 if known else None,
                       window_us=(float(worst["start_us"]), float(worst["end_us"]))))
    text = (f"The device sits idle {share:.0f}% of the {unit} waiting for the host to launch its next task "
            f"({format_us(per_step)} per {unit}): the host dispatches too slowly.")
    if len(d.ops):
        top = d.ops.iloc[0]
        ev.append(Evidence("top_op_idle_us", f"Idle after {top['responsible_op']}", float(top["host_idle_us"]), "us",
                           detail=f"{top['share_of_host_idle'] * 100:.0f}% of the host-bound idle, "
                           f"{int(top['waited_tasks'])} launches", frame="dispatch", column="responsible_op"))
        text += f" Most of the wait is for launches of {top['responsible_op']}."
    text += (" Removing it would save up to that idle: cut host work between launches (graph mode or a compiled "
             "graph, fewer small ops, operator fusion, no host syncs such as .item() in the step, a faster "
             "dispatch thread / task queue).")
    yield rule.suggestion("dispatch.host_bound", text, ev, subjects=["dispatch:host_bound"], cost_ms=per_step / 1000)


RULES = (
    # The host is the limiter when the device waits for launches this share of the step or more.
    Rule("dispatch.host_bound", "dispatch", "high", "The device waits for the host to launch its tasks",
         "nbprofiler", {"share_pct": 10.0}, host_bound),
)
