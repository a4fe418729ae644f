"""MindData rules: host/device queues, the pipeline's queue usage (MindInsight's proposer), MindSpore 2.x's
dataset summary rules (per-worker CPU, queue usage between ops) and the machine's CPU.

The MindSpore rules reproduce its BottleneckAnalyzer's texts and rounding exactly (its
``minddata_summary`` file), the MindInsight rules its proposer's texts, so a user who knows those tools
recognises them; the evidence adds the numbers and where they come from.
"""
from __future__ import annotations

import pandas as pd

from .. import minddata as md
from .model import Context, Evidence, Rule

# MindSpore 2.x's BottleneckAnalyzer thresholds (percent), shared by its rules below.
CPU_PER_WORKER_HIGH = 75.0
CPU_PER_WORKER_LOW = 20.0
IN_OUT_USAGE_DIFF_MAX = 50.0
# Ops MindSpore skips in its per-op analysis: they run on one thread.
SINGLE_THREADED_OPS = {"Barrier", "Concat", "EpochCtrl", "Rename", "Repeat", "Shuffle", "Skip", "Take", "Zip"}

_MI_TEXT = {
    "dataset_op": "For operator {ops}, you can try to increase or decrease the num_parallel_workers parameter.",
    "generator_op": "For operator {ops}, you can try to increase or decrease num_parallel_workers or optimize the "
                    "training script. If the performance is not optimized, you can replace the operator with the "
                    "MindRecordDataset operator.",
    "map_op": "For operator {ops}, you can try to increase or decrease the num_parallel_workers parameter. If the "
              "Python operator is used, you can optimize the training script.",
    "batch_op": "For operator {ops}, you can increase the prefetch_size value.",
}


def mindspore_name(op_type: str) -> str:
    """MindSpore's display name: ``BatchOp`` -> ``Batch`` (old files already write ``Batch``)."""
    return op_type[:-2] if op_type.endswith("Op") else op_type


def _op(i) -> str:
    return f"pipeline_op:{int(i)}"


# -- queues -----------------------------------------------------------------------------------------
def host_queue_empty(rule: Rule, ctx: Context):
    hq = ctx.queue_summary.get("host_queue")
    if not hq or not hq.get("steps"):
        return
    rate = hq["empty_steps"] / hq["steps"] * 100
    limit = rule.thresholds["empty_pct"]
    if not rate > limit:
        return
    ev = [Evidence("empty_pct", "Host queue empty", rate, "%", limit, ">",
                   detail=f"{hq['empty_steps']} of {hq['steps']} steps", frame="host_queue", column="size",
                   steps=_host_steps(ctx)),
          Evidence("full_steps", "Host queue full", int(hq["full_steps"]), "steps",
                   detail=f"of {hq['steps']} steps", frame="host_queue", column="size")]
    if hq.get("avg_get_ms") is not None:
        ev.append(Evidence("avg_get_ms", "Average time to get a batch from the pipeline", float(hq["avg_get_ms"]),
                           "ms", frame="host_queue", column="get_ms"))
    yield rule.suggestion("minddata.host_queue_empty",
                          f"The host queue was empty at {hq['empty_steps']} of {hq['steps']} steps ({rate:.0f}%, "
                          f"threshold {limit:g}%): data processing is slower than training consumes it.", ev,
                          cost_ms=_empty_wait_per_step(ctx))


def _empty_wait_per_step(ctx: Context) -> float | None:
    """The time the steps waited for a batch while the host queue was empty, spread over all its steps (ms)."""
    hq = ctx.host_queue
    if not ctx.has("host_queue") or "get_ms" not in hq or "size" not in hq:
        return None
    get = pd.to_numeric(hq["get_ms"], errors="coerce").fillna(0.0)
    return float(get[hq["size"] == 0].sum()) / len(hq)


def _host_steps(ctx: Context):
    s = ctx.host_queue["step"] if ctx.has("host_queue") and "step" in ctx.host_queue else None
    if s is None or s.dropna().empty:
        return None
    return int(s.min()), int(s.max())


def device_queue_empty(rule: Rule, ctx: Context):
    dq = ctx.queue_summary.get("device_queue")
    if not dq or not dq.get("steps") or not dq["empty_steps"] > rule.thresholds["empty_calls"]:
        return
    ev = [Evidence("empty_calls", "Device data queue empty", int(dq["empty_steps"]), "GetNext calls",
                   rule.thresholds["empty_calls"], ">", detail=f"of {dq['steps']} GetNext calls "
                   f"({dq['empty_steps'] / dq['steps'] * 100:.2f} %)", frame="device_queue", column="size")]
    yield rule.suggestion("minddata.device_queue_empty",
                          f"The device data queue was empty at {dq['empty_steps']} of {dq['steps']} GetNext calls: "
                          "data transmission to the device is a bottleneck.", ev)


# -- MindInsight's pipeline rule --------------------------------------------------------------------
def _usage(ctx: Context) -> dict[int, float]:
    p = ctx.minddata_pipeline
    return dict(zip(p["op_id"].astype(int), p["output_queue_usage_rate"].fillna(0.0).astype(float)))


def _labels(ctx: Context) -> dict[int, str]:
    p = ctx.minddata_pipeline
    return {int(i): f"{t}_{int(i)}" for i, t in zip(p["op_id"], p["op_type"])}


def _types(ctx: Context) -> dict[int, str]:
    p = ctx.minddata_pipeline
    return {int(i): str(t) for i, t in zip(p["op_id"], p["op_type"])}


def pipeline_bottleneck(rule: Rule, ctx: Context):
    if not ctx.has("minddata_pipeline"):
        return
    b = ctx.bottleneck
    if b.consumer_bound or not b.op_ids:
        return
    usage, label, types = _usage(ctx), _labels(ctx), _types(ctx)
    rows = ctx.minddata_pipeline.set_index(ctx.minddata_pipeline["op_id"].astype(int))
    groups: dict[str, list[int]] = {"dataset_op": [], "generator_op": [], "map_op": [], "batch_op": []}
    for op in b.op_ids:
        op_type, children = str(rows.at[op, "op_type"]), rows.at[op, "children_ids"]
        if children is None or len(children) == 0:
            groups["dataset_op"].append(op)
        elif op_type in ("MapOp", "GeneratorOp", "BatchOp"):
            groups[op_type[:-2].lower() + "_op"].append(op)
    # MindInsight joins the names in reverse rule order (= the script's order of the ops).
    names = "/".join(label[o] for o in b.op_ids[::-1])
    text = [f"The {names} operator in the pipeline may have performance bottlenecks."]
    text += [_MI_TEXT[k].format(ops="/".join(label[o] for o in ops[::-1])) for k, ops in groups.items() if ops]
    low, margin = rule.thresholds["low_pct"], rule.thresholds["margin_pct"]
    ev = []
    for op in b.op_ids:
        children = [int(c) for c in (rows.at[op, "children_ids"] or [])]
        if children:
            ev.append(Evidence(f"op{op}_usage_pct", f"Output queue usage of {label[op]}", usage[op] * 100, "%",
                               frame="minddata_pipeline", column="output_queue_usage_rate",
                               op_id=op, op_type=types[op]))
            for c in children:
                if c in usage and (usage[c] - usage[op]) * 100 > margin:
                    ev.append(Evidence(f"op{c}_usage_pct", f"Input queue usage of {label[op]} (output of {label[c]})",
                                       usage[c] * 100, "%", frame="minddata_pipeline",
                                       column="output_queue_usage_rate", op_id=c, op_type=types[c]))
                    ev.append(Evidence(f"op{op}_input{c}_drop_pct", f"Input minus output queue usage of {label[op]}",
                                       (usage[c] - usage[op]) * 100, "points", margin, ">",
                                       frame="minddata_pipeline", column="output_queue_usage_rate",
                                       op_id=op, op_type=types[op]))
        else:
            ev.append(Evidence(f"op{op}_usage_pct", f"Output queue usage of source op {label[op]}", usage[op] * 100,
                               "%", low, "<", frame="minddata_pipeline", column="output_queue_usage_rate",
                               op_id=op, op_type=types[op]))
    hq = ctx.queue_summary.get("host_queue")
    if hq and hq.get("steps"):
        limit = md.EMPTY_QUEUE_THRESHOLD * 100
        ev.append(Evidence("shown_by_mindinsight", f"MindInsight shows this (host queue empty at more than {limit:g} "
                           "% of steps)", bool(hq["empty_steps"] > hq["steps"] * md.EMPTY_QUEUE_THRESHOLD), "bool",
                           detail=f"empty at {hq['empty_steps']} of {hq['steps']} steps", frame="host_queue",
                           column="size"))
    yield rule.suggestion("minddata.pipeline", " ".join(text), ev, subjects=[_op(o) for o in b.op_ids],
                          cost_ms=ctx.data_wait_ms)


def consumer_bound(rule: Rule, ctx: Context):
    if not ctx.has("minddata_pipeline") or not ctx.bottleneck.consumer_bound:
        return
    usage, label, types = _usage(ctx), _labels(ctx), _types(ctx)
    high = rule.thresholds["high_pct"]
    p = ctx.minddata_pipeline
    queued = [int(i) for i, parent in zip(p["op_id"], p["parent_id"]) if pd.notna(parent)]
    ev = [Evidence(f"op{i}_usage_pct", f"Output queue usage of {label[i]}", usage[i] * 100, "%", high, ">=",
                   frame="minddata_pipeline", column="output_queue_usage_rate", op_id=i, op_type=types[i])
          for i in sorted(queued, key=lambda i: usage[i])]
    yield rule.suggestion("minddata.consumer_bound",
                          f"Every queue of the data pipeline is at least {high:g}% full on average: the pipeline "
                          "produces batches faster than training consumes them, so data loading is not the "
                          "bottleneck; look at the step's computation instead.", ev)


# -- MindSpore 2.x's dataset summary rules ----------------------------------------------------------
class _MsOps:
    """The per-op numbers MindSpore's BottleneckAnalyzer works on, with its rounding."""

    def __init__(self, ctx: Context):
        ops = ctx.minddata_pipeline.sort_values("op_id")
        self.ids = [int(i) for i in ops["op_id"]]
        self.types = {i: str(t) for i, t in zip(self.ids, ops["op_type"])}
        self.name = {i: mindspore_name(t) for i, t in self.types.items()}
        self.label = {i: f"{self.name[i]}(id={i})" for i in self.ids}
        self.workers = {i: (int(w) if pd.notna(w) else None) for i, w in zip(self.ids, ops["num_workers"])}
        self.children = {i: list(c) if c is not None else [] for i, c in zip(self.ids, ops["children_ids"])}
        # MindSpore rounds the average size to 2 decimals before taking the percentage; -1 = no queue.
        self.pct = {}
        for i, avg, length in zip(self.ids, ops["output_queue_average_size"], ops["output_queue_length"]):
            ok = pd.notna(avg) and pd.notna(length) and int(length)
            self.pct[i] = round(100 * round(float(avg), 2) / int(length), 2) if ok else -1
        self.cpu = {}
        s = ctx.op_cpu_summary
        if s is not None:
            for i, c, w in zip(s["op_id"], s["avg_cpu_pct"], s["num_workers"]):
                if int(i) in self.name and pd.notna(c) and pd.notna(w) and w:
                    self.cpu[int(i)] = round(round(float(c), 2) / int(w), 2)
        self.empty_freq = {}
        if ctx.has("minddata_queues"):
            for i, g in ctx.minddata_queues.groupby("op_id"):
                self.empty_freq[int(i)] = (round(100 * float((g["size"] == 0).mean()), 2), int(len(g)),
                                           int((g["size"] == 0).sum()))

    def input_op(self, i):
        kids = self.children.get(i) or []
        return kids[0] if kids and kids[0] in self.pct else None

    def cpu_ev(self, i, threshold=None, compare=None) -> Evidence:
        return Evidence(f"op{i}_cpu_per_worker_pct", f"CPU per worker of {self.label[i]}", self.cpu[i], "%",
                        threshold, compare, detail=f"{self.workers[i]} workers", frame="op_cpu_utilization",
                        column="user_pct + sys_pct", op_id=i, op_type=self.types[i])

    def queue_ev(self, i, consumer=None, threshold=None, compare=None) -> Evidence:
        """The usage of op ``i``'s output queue, as MindSpore computes it; with ``consumer``, called the
        input queue of that op."""
        label = (f"Input queue usage of {self.label[consumer]} (output of {self.label[i]})" if consumer is not None
                 else f"Output queue usage of {self.label[i]}")
        return Evidence(f"op{i}_queue_pct", label, self.pct[i], "%", threshold, compare, frame="minddata_pipeline",
                        column="output_queue_average_size / output_queue_length", op_id=i, op_type=self.types[i])


def _ms(ctx: Context) -> _MsOps | None:
    if not ctx.has("minddata_pipeline"):
        return None
    if "_ms_ops" not in ctx.__dict__:
        ctx.__dict__["_ms_ops"] = _MsOps(ctx)
    return ctx.__dict__["_ms_ops"]


def op_cpu(rule: Rule, ctx: Context):
    ms = _ms(ctx)
    if ms is None:
        return
    high, low = rule.thresholds["high_pct"], rule.thresholds["low_pct"]
    for i in ms.ids:
        if ms.name[i] in SINGLE_THREADED_OPS or i not in ms.cpu:
            continue
        per_worker, w, lbl = ms.cpu[i], ms.workers[i], ms.label[i]
        if per_worker > high:
            yield rule.suggestion(f"minddata.op_cpu_high.{i}", f"{lbl} is using {per_worker}% CPU per worker. Setting "
                                  f"num_parallel_workers>{w} might bring extra performance.",
                                  [ms.cpu_ev(i, high, ">")], subjects=[_op(i)], cost_ms=ctx.data_wait_ms)
        elif per_worker < low and (w or 0) > 1:
            yield rule.suggestion(f"minddata.op_cpu_low.{i}", f"{lbl} is using {per_worker}% CPU per worker. Using "
                                  f"num_parallel_workers={w} might not bring as much benefit due to low CPU usage per "
                                  "worker.", [ms.cpu_ev(i, low, "<")], subjects=[_op(i)], cost_ms=ctx.data_wait_ms)


def queue_usage(rule: Rule, ctx: Context):
    """MindSpore's queue analysis: a leaf op's output queue, an op's input against its output queue, the
    device queue op's input queue; in op id order as MindSpore lists them."""
    ms = _ms(ctx)
    if ms is None:
        return
    leaf_max, diff_max, dq_empty_max = (rule.thresholds[k] for k in ("leaf_usage_max_pct", "in_out_diff_max_pct",
                                                                      "device_queue_input_empty_max_pct"))
    for i in ms.ids:
        if ms.name[i] in SINGLE_THREADED_OPS or ms.name[i] == "Batch":
            continue
        child, out_q, lbl, w = ms.input_op(i), ms.pct[i], ms.label[i], ms.workers[i]
        if child is None and out_q != -1:
            if out_q < leaf_max:
                yield rule.suggestion(f"minddata.queue_leaf.{i}", f"Leaf op {lbl} is using {out_q}% of its output "
                                      f"queue. Setting num_parallel_workers>{w} might speed up I/O.",
                                      [ms.queue_ev(i, None, leaf_max, "<")], subjects=[_op(i)], cost_ms=ctx.data_wait_ms)
        elif ms.name[i] == "DeviceQueue" and child is not None:
            if child in ms.empty_freq and ms.empty_freq[child][0] > dq_empty_max:
                f, n, empty = ms.empty_freq[child]
                ev = Evidence(f"op{child}_empty_pct", f"Input queue of {lbl} (output of {ms.label[child]}) empty", f,
                              "%", dq_empty_max, ">", detail=f"{empty} of {n} samples", frame="minddata_queues",
                              column="size", op_id=child, op_type=ms.types[child])
                yield rule.suggestion(f"minddata.device_queue_input_empty.{i}",
                                      f"{lbl}'s input queue is empty {f}% of the time. This might indicate dataset "
                                      f"bottlenecks. Hence host cannot keep up with the device {f}% of the time. "
                                      "Device waits whenever input queue is empty.", [ev], subjects=[_op(i)], cost_ms=ctx.data_wait_ms)
        elif child is not None and out_q != -1:
            in_q = ms.pct[child]
            if in_q != -1 and in_q - out_q > diff_max:
                ev = [ms.queue_ev(child, consumer=i), ms.queue_ev(i),
                      Evidence(f"op{i}_in_minus_out_pct", f"Input minus output queue usage of {lbl}",
                               round(in_q - out_q, 2), "points", diff_max, ">", frame="minddata_pipeline",
                               column="output_queue_average_size / output_queue_length", op_id=i, op_type=ms.types[i])]
                yield rule.suggestion(f"minddata.queue_in_out.{i}",
                                      f"{lbl}'s input queue usage={in_q}% is greater than output queue usage={out_q}%. "
                                      f"This indicates child op {ms.label[child]} might be producing faster than its "
                                      f"parent {lbl} can consume. If this op has low CPU utilization, try increasing "
                                      "prefetch_size or increasing num_workers.", ev, subjects=[_op(i)], cost_ms=ctx.data_wait_ms)


def pipeline_verdict(rule: Rule, ctx: Context):
    """MindSpore's bottleneck verdict: the last match from the highest op id down (the lowest id wins)."""
    ms = _ms(ctx)
    if ms is None:
        return
    high, low, in_min, diff_max = (rule.thresholds[k] for k in ("cpu_per_worker_high_pct", "cpu_per_worker_low_pct",
                                                                 "input_queue_min_pct", "out_minus_in_max_pct"))
    verdict = None
    for i in reversed(ms.ids):
        if ms.name[i] in SINGLE_THREADED_OPS or ms.name[i] == "DeviceQueue" or i not in ms.cpu:
            continue
        per_worker, child, out_q, lbl = ms.cpu[i], ms.input_op(i), ms.pct[i], ms.label[i]
        if per_worker > high:
            verdict = (f"{lbl} has high CPU utilization per worker of {per_worker}%. Try increasing "
                       f"num_parallel_workers above {ms.workers[i]}.", [ms.cpu_ev(i, high, ">")], i)
        elif per_worker < low and child is not None:
            in_q = ms.pct[child]
            if in_q < in_min or out_q - in_q > diff_max:
                ev = [ms.cpu_ev(i, low, "<"),
                      ms.queue_ev(child, i, in_min if in_q < in_min else None, "<" if in_q < in_min else None),
                      ms.queue_ev(i)]
                if not in_q < in_min:
                    ev.append(Evidence(f"op{i}_out_minus_in_pct", f"Output minus input queue usage of {lbl}",
                                       round(out_q - in_q, 2), "points", diff_max, ">", frame="minddata_pipeline",
                                       column="output_queue_average_size / output_queue_length", 
                                       op_id=i, op_type=ms.types[i]))
                verdict = (f"{lbl} has low CPU utilization per worker of {per_worker}% and abnormal queue usage. "
                           "Try increasing prefetch_size.", ev, i)
    if verdict is not None:
        text, ev, i = verdict
        yield rule.suggestion("minddata.bottleneck", text, ev, subjects=[_op(i)], cost_ms=ctx.data_wait_ms)


# -- CPU --------------------------------------------------------------------------------------------
def cpu_busy(rule: Rule, ctx: Context):
    c = ctx.cpu_summary
    if not c or c.get("machine_busy_pct") is None:
        return
    busy, limit = float(c["machine_busy_pct"]), rule.thresholds["busy_pct"]
    if not busy > limit:
        return
    ev = [Evidence("busy_pct", "Machine CPU busy (100 % minus idle, average)", busy, "%", limit, ">",
                   detail=f"{c['samples']} samples", frame="cpu_utilization", column="idle_pct")]
    yield rule.suggestion("minddata.cpu_busy", f"The whole machine's CPU was {busy:.0f}% busy on average (over "
                          f"{limit:g}%): data processing may be CPU-starved.", ev)


RULES = (
    # MindInsight's queue rule: the host queue empty at more than 30 % of steps means data processing is slow.
    Rule("minddata.host_queue_empty", "minddata", "high", "Host queue often empty (training waits for data)",
         "MindInsight 2.3.1 queue proposer", {"empty_pct": md.EMPTY_QUEUE_THRESHOLD * 100}, host_queue_empty),
    Rule("minddata.device_queue_empty", "minddata", "high", "Device data queue ran empty",
         "MindInsight 2.3.1 queue proposer", {"empty_calls": 0}, device_queue_empty),
    # MindInsight's pipeline rule (`analysis.minddata.bottleneck_ops` holds its thresholds).
    Rule("minddata.pipeline", "minddata", "high", "A pipeline op produces slower than its consumer needs",
         "MindInsight 2.3.1 pipeline proposer", {"high_pct": md.HIGH_USAGE * 100, "low_pct": md.LOW_USAGE * 100,
                                                 "margin_pct": md.CHILD_MARGIN * 100}, pipeline_bottleneck),
    Rule("minddata.consumer_bound", "minddata", "info", "Every pipeline queue nearly full (training is the slow side)",
         "MindInsight 2.3.1 pipeline rule", {"high_pct": md.HIGH_USAGE * 100}, consumer_bound),
    Rule("minddata.bottleneck", "minddata", "medium", "MindSpore's pipeline bottleneck verdict",
         "MindSpore 2.x dataset summary", {"cpu_per_worker_high_pct": CPU_PER_WORKER_HIGH,
                                           "cpu_per_worker_low_pct": CPU_PER_WORKER_LOW, "input_queue_min_pct": 10.0,
                                           "out_minus_in_max_pct": IN_OUT_USAGE_DIFF_MAX}, pipeline_verdict),
    Rule("minddata.queue_usage", "minddata", "medium", "Queue usage between pipeline ops",
         "MindSpore 2.x dataset summary", {"leaf_usage_max_pct": 50.0, "in_out_diff_max_pct": IN_OUT_USAGE_DIFF_MAX,
                                           "device_queue_input_empty_max_pct": 60.0}, queue_usage),
    Rule("minddata.op_cpu", "minddata", "medium", "CPU per worker of pipeline ops", "MindSpore 2.x dataset summary",
         {"high_pct": CPU_PER_WORKER_HIGH, "low_pct": CPU_PER_WORKER_LOW}, op_cpu),
    # MindInsight's CPU proposer: machine CPU use above 80 % may slow data processing.
    Rule("minddata.cpu_busy", "minddata", "medium", "Machine CPU busy", "MindInsight 2.3.1 CPU proposer",
         {"busy_pct": 80.0}, cpu_busy),
)
