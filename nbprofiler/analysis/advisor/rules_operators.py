"""Operator rules: the operator type that takes the largest share of a device kind's time."""
from __future__ import annotations

from .model import Context, Evidence, Rule, format_us

KIND_NAMES = {"ai_core": "AI Core", "ai_cpu": "AI CPU", "cpu": "host CPU", "gpu": "GPU", "npu": "NPU",
              "communication": "communication (HCCL)"}


def top_type(rule: Rule, ctx: Context):
    if not ctx.has("op_types"):
        return
    limit = rule.thresholds["share_pct"]
    for kind, g in ctx.op_types.groupby("kind", sort=False):
        if kind == "communication":
            continue  # collectives are not operators to optimise one by one: the step-trace rules cover them
        g = g.sort_values("total_time_us", ascending=False, kind="stable")
        top = g.iloc[0]
        share, op_type = float(top["percent"]), str(top["op_type"])
        if share < limit:
            continue
        kind_name = KIND_NAMES.get(kind, kind)
        per_step = ctx.per_step_ms(float(top["total_time_us"]))
        ev = [Evidence("percent", f"{op_type}: share of {kind_name} operator time", share, "%", limit, ">=",
                       frame="op_types", column="percent", op_type=op_type, kind=str(kind)),
              Evidence("total_time_us", f"{op_type}: total time", float(top["total_time_us"]), "us",
                       detail=f"of {format_us(g['total_time_us'].sum())} for all {len(g)} {kind_name} types",
                       frame="op_types", column="total_time_us", op_type=op_type, kind=str(kind)),
              Evidence("count", f"{op_type}: executions", int(top["count"]), "", frame="op_types", column="count",
                       op_type=op_type, kind=str(kind))]
        yield rule.suggestion(f"operators.{kind}.top_type",
                              f"{op_type} operators take {share:.1f}% of {kind_name} operator time "
                              f"({format_us(top['total_time_us'])} over {int(top['count'])} executions): start "
                              "optimising there (data type, shapes, fusion).", ev, cost_ms=per_step)


RULES = (
    # An operator type worth starting with: at least a fifth of its kind's time.
    Rule("operators.top_type", "operators", "medium", "One operator type takes a large share", "nbprofiler",
         {"share_pct": 20.0}, top_type),
)
