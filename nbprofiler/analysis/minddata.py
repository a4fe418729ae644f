"""MindData (dataset pipeline) analyses: pure functions on the frames of `nbprofiler.io.minddata`.

- `bottleneck_ops`: MindInsight's queue-usage rule over the pipeline (FORMATS.md 5.5);
- `queue_summary`: host/device queue counts and MindInsight's diagnosis (FORMATS.md 5.4);
- `cpu_summary`, `op_cpu_summary`: CPU averages as MindInsight and MindSpore compute them (5.7, 4.8);
- `pipeline_edges`: the queues as graph edges (child -> parent) for drawing the pipeline.

The suggestions built on these numbers (MindInsight's proposer, MindSpore 2.x's summary writer) are rules of
`nbprofiler.analysis.advisor`.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

# MindInsight's pipeline rule (minddata_pipeline analyser / proposer): [high, low] usage thresholds and
# the child-vs-op usage margin.
HIGH_USAGE = 0.8
LOW_USAGE = 0.6
CHILD_MARGIN = 0.1
# MindInsight's queue rule: more than 30 % of host-queue records empty means data processing is slow.
EMPTY_QUEUE_THRESHOLD = 0.3


def _present(frame) -> bool:
    return frame is not None and not frame.empty


# -- pipeline graph ---------------------------------------------------------------------------------
def pipeline_edges(pipeline: pd.DataFrame) -> pd.DataFrame:
    """One row per queue: the child op's output queue feeding its parent.

    Columns: ``child_id``, ``parent_id`` (int64), ``usage_rate`` (float64, 0..1, the child's average
    queue size / capacity), ``output_queue_length`` (Int64), ``output_queue_average_size`` (float64).
    The root has no parent queue and so no row."""
    cols = ["child_id", "parent_id", "usage_rate", "output_queue_length", "output_queue_average_size"]
    if not _present(pipeline):
        return pd.DataFrame({c: pd.Series(dtype="float64" if c in ("usage_rate", "output_queue_average_size")
                                          else "int64") for c in cols})
    rows = pipeline[pipeline["parent_id"].notna()]
    return pd.DataFrame({"child_id": rows["op_id"].astype("int64").to_numpy(),
                         "parent_id": rows["parent_id"].astype("int64").to_numpy(),
                         "usage_rate": rows["output_queue_usage_rate"].fillna(0.0).astype("float64").to_numpy(),
                         "output_queue_length": rows["output_queue_length"].astype("Int64").to_numpy(),
                         "output_queue_average_size": rows["output_queue_average_size"].astype("float64").to_numpy()})


@dataclasses.dataclass(frozen=True)
class Bottleneck:
    """Result of MindInsight's pipeline rule.

    ``op_ids``: suspect ops in the rule's order (ops whose input queue is fuller than their output
    queue by more than the margin, then slow leaves), root excluded. ``consumer_bound``: every non-root
    queue is at least ``high`` full, so the rule answers "the root" alone: the training step consumes
    slower than the pipeline produces (not a pipeline bottleneck). ``rule_result``: the op ids exactly
    as MindInsight's rule returns them (the root id when consumer bound)."""

    op_ids: list
    consumer_bound: bool
    rule_result: list
    thresholds: tuple = (HIGH_USAGE, LOW_USAGE, CHILD_MARGIN)


def bottleneck_ops(pipeline: pd.DataFrame, high: float = HIGH_USAGE, low: float = LOW_USAGE,
                   margin: float = CHILD_MARGIN) -> Bottleneck:
    """MindInsight's bottleneck filter (FORMATS.md 5.5), on the pipeline frame's rows in their order.

    For each non-root op: a child whose usage rate exceeds the op's by more than ``margin`` makes the op
    a suspect; a leaf below ``low`` is a suspect; if every non-root op is at or above ``high``, the
    answer is the root alone (``consumer_bound``). A queue-less op's usage counts as 0, as in
    MindInsight. A pipeline with only a root gives no suspects and is not called consumer bound."""
    if not _present(pipeline):
        return Bottleneck([], False, [])
    usage = dict(zip(pipeline["op_id"].astype(int), pipeline["output_queue_usage_rate"].fillna(0.0).astype(float)))
    root, leaves, suspects, all_high = None, [], [], True
    for op_id, parent, children in zip(pipeline["op_id"].astype(int), pipeline["parent_id"], pipeline["children_ids"]):
        if pd.isna(parent):
            root = op_id
            continue
        cur = usage[op_id]
        if cur < high:
            all_high = False
        children = list(children) if isinstance(children, (list, tuple, np.ndarray)) else []
        if not children:
            leaves.append(op_id)
            continue
        if any(usage[c] - cur > margin for c in children if c in usage) and op_id not in suspects:
            suspects.append(op_id)
    suspects += [op for op in leaves if usage[op] < low]
    has_non_root = len(pipeline) > (0 if root is None else 1)
    if all_high and has_non_root:
        return Bottleneck([], True, [root] if root is not None else [], (high, low, margin))
    return Bottleneck(suspects, False, suspects, (high, low, margin))


# -- queues -----------------------------------------------------------------------------------------
def queue_summary(host_queue: pd.DataFrame | None, device_queue: pd.DataFrame | None,
                  threshold: float = EMPTY_QUEUE_THRESHOLD) -> dict:
    """Queue counts and MindInsight's diagnosis (FORMATS.md 5.4).

    Keys: ``host_queue`` ({"steps", "empty_steps", "full_steps", "avg_get_ms"} or None),
    ``device_queue`` ({"steps", "empty_steps"} or None), ``diagnosis`` ("data_process": the host queue
    was empty at more than ``threshold`` of its records, data processing is slow; "data_transmission":
    host fine but the device queue ran empty; "device_queue_warning": data is fine, look at GetNext and
    the network; None without a host queue), ``threshold``, and extras ``host_empty_rate_pct``
    (MindInsight's ceil(empty/total*100)), ``host_avg_push_ms``, ``host_avg_batch_ms``,
    ``device_avg_get_next_ms``. "Empty" = size 0, "full" = size == capacity. Averages divide by the
    number of batch-time records, as MindInsight does."""
    out = {"host_queue": None, "device_queue": None, "diagnosis": None, "threshold": threshold,
           "host_empty_rate_pct": None, "host_avg_push_ms": None, "host_avg_batch_ms": None,
           "device_avg_get_next_ms": None}
    if _present(host_queue):
        size = pd.to_numeric(host_queue["size"], errors="coerce")
        cap = pd.to_numeric(host_queue["capacity"], errors="coerce")
        known = size.notna()
        steps = int(known.sum())
        n_batch = int(pd.to_numeric(host_queue["batch_ms"], errors="coerce").notna().sum())

        def avg(col):
            return float(pd.to_numeric(host_queue[col], errors="coerce").sum()) / n_batch if n_batch else None
        empty = int((size[known] == 0).sum())
        out["host_queue"] = {"steps": steps, "empty_steps": empty, "full_steps": int((size[known] == cap[known]).sum()),
                             "avg_get_ms": avg("get_ms")}
        out["host_avg_push_ms"], out["host_avg_batch_ms"] = avg("push_ms"), avg("batch_ms")
        out["host_empty_rate_pct"] = math.ceil(empty / steps * 100) if steps else None
    if _present(device_queue):
        size = pd.to_numeric(device_queue["size"], errors="coerce").dropna()
        out["device_queue"] = {"steps": int(len(size)), "empty_steps": int((size == 0).sum())}
        t = pd.to_numeric(device_queue["get_next_ms"], errors="coerce").dropna()
        out["device_avg_get_next_ms"] = float(t.mean()) if len(t) else None
    hq, dq = out["host_queue"], out["device_queue"]
    if hq is not None:
        if hq["empty_steps"] > hq["steps"] * threshold:
            out["diagnosis"] = "data_process"
        elif dq is not None and dq["empty_steps"] > 0:
            out["diagnosis"] = "data_transmission"
        else:
            out["diagnosis"] = "device_queue_warning"
    return out


# -- CPU --------------------------------------------------------------------------------------------
CPU_COLUMNS = {"user_pct": "device_user_pct", "sys_pct": "device_sys_pct", "idle_pct": "device_idle_pct",
               "io_pct": "device_io_pct", "context_switches": "context_switches",
               "runnable_processes": "runnable_processes", "process_user_pct": "process_user_pct",
               "process_sys_pct": "process_sys_pct"}


def mindinsight_sample_range(cpu_utilization: pd.DataFrame, start_step: int = 1,
                             end_step: int | None = None) -> slice:
    """The rows MindInsight averages for a step range (its cpu-utilisation analyser's filter).

    MindInsight maps every sample but the first to a step and slices the series with the positions of
    that shifted list, so row i is kept by the step of sample i + 1; rows whose (shifted) step is in
    ``[start_step, end_step]`` (``end_step`` default = the number of host-queue records) are kept.
    Without steps (no host-queue file) every row is kept."""
    steps = cpu_utilization["step"] if "step" in cpu_utilization else None
    if steps is None or steps.isna().all() or len(steps) < 2:
        return slice(0, len(cpu_utilization))
    shifted = steps.iloc[1:].to_numpy(dtype="float64", na_value=np.nan)
    if end_step is None:
        end_step = cpu_utilization.attrs.get("step_total") or int(np.nanmax(shifted))
    left, right = 0, len(shifted) - 1
    while left <= right and not shifted[left] >= start_step:
        left += 1
    while left <= right and not shifted[right] <= end_step:
        right -= 1
    return slice(left, right + 1)


def cpu_summary(cpu_utilization: pd.DataFrame, start_step: int = 1, end_step: int | None = None) -> dict:
    """Machine and process CPU averages over MindInsight's samples (`mindinsight_sample_range`).

    For each series: ``<name>_avg`` = MindInsight's value, ``round(mean)`` (Python rounding, an int),
    and ``<name>_mean`` = the exact mean (float), with <name> in ``device_user_pct``,
    ``device_sys_pct``, ``device_idle_pct``, ``device_io_pct``, ``context_switches``,
    ``runnable_processes``, ``process_user_pct``, ``process_sys_pct`` (None when the series is absent).
    Also ``samples`` (rows averaged), ``first_sample``/``last_sample`` and ``machine_busy_pct``
    (100 - the idle average: MindInsight's proposer warns above 80)."""
    rng = mindinsight_sample_range(cpu_utilization, start_step, end_step)
    part = cpu_utilization.iloc[rng]
    out: dict = {"samples": int(len(part)),
                 "first_sample": int(part["sample"].iloc[0]) if len(part) else None,
                 "last_sample": int(part["sample"].iloc[-1]) if len(part) else None}
    for col, name in CPU_COLUMNS.items():
        vals = pd.to_numeric(part[col], errors="coerce").dropna() if col in part else pd.Series(dtype="float64")
        if len(vals):
            mean = float(vals.sum()) / len(vals)
            out[f"{name}_avg"], out[f"{name}_mean"] = round(mean), mean
        else:
            out[f"{name}_avg"] = out[f"{name}_mean"] = None
    idle = out["device_idle_pct_avg"]
    out["machine_busy_pct"] = 100 - idle if idle is not None else None
    return out


def op_cpu_summary(op_cpu_utilization: pd.DataFrame, pipeline: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per pipeline op (op -1 dropped), over all samples, as MindSpore's summary writer computes it.

    Columns: ``op_id`` (int64), ``user_pct_mean``, ``sys_pct_mean`` (float64), ``avg_cpu_pct`` (mean
    of user + sys per sample, percent of one core), ``num_workers`` (Int64, from ``pipeline``),
    ``avg_cpu_pct_per_worker`` (avg_cpu_pct / num_workers; NaN without workers)."""
    cols = ["op_id", "user_pct_mean", "sys_pct_mean", "avg_cpu_pct", "num_workers", "avg_cpu_pct_per_worker"]
    if not _present(op_cpu_utilization):
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    df = op_cpu_utilization[op_cpu_utilization["op_id"] != -1]
    both = pd.to_numeric(df["user_pct"], errors="coerce") + pd.to_numeric(df["sys_pct"], errors="coerce")
    g = df.assign(both=both).groupby("op_id", sort=True)
    out = pd.DataFrame({"user_pct_mean": g["user_pct"].mean(), "sys_pct_mean": g["sys_pct"].mean(),
                        "avg_cpu_pct": g["both"].mean()}).reset_index()
    out["op_id"] = out["op_id"].astype("int64")
    workers = dict(zip(pipeline["op_id"], pipeline["num_workers"])) if _present(pipeline) else {}
    out["num_workers"] = pd.array([workers.get(i) for i in out["op_id"]], dtype="Int64")
    w = out["num_workers"].astype("float64")
    out["avg_cpu_pct_per_worker"] = (out["avg_cpu_pct"] / w.where(w > 0)).astype("float64")
    return out[cols]
