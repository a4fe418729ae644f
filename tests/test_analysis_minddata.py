"""MindData analyses against MindInsight's numbers (expected/) and MindSpore's own summary files."""
from __future__ import annotations

import math

import pytest

import nbprofiler
from nbprofiler.analysis import minddata as an
from nbprofiler.io import minddata as md

from .conftest import DATA, expected

DATASETS = [
    ("minddata/md_bottleneck_map", "0", "minddata__md_bottleneck_map__device0"),
    ("minddata/md_fast", "0", "minddata__md_fast__device0"),
    ("mindspore2/lenet_pynative", "0", "mindspore2__lenet_pynative__device0"),
    ("legacy/run_2_lenet", "1", "legacy__run_2_lenet__device1"),
    ("legacy/fixtures_mixed_ids", "0", "legacy__fixtures_mixed_ids__device0"),
]
_cache: dict = {}


def load(folder: str, device: str):
    if (folder, device) not in _cache:
        _cache[folder, device] = nbprofiler.load(DATA / folder, device=device)
    return _cache[folder, device]


@pytest.mark.parametrize("folder,device,exp", DATASETS + [
    ("legacy/run_1_widedeep", "1", "legacy__run_1_widedeep__device1")])
def test_bottleneck_ops_match_mindinsight(folder, device, exp):
    flagged = expected(exp)["minddata_pipeline"]["threshold_0.8_0.6_ops_flagged"]
    b = an.bottleneck_ops(load(folder, device).minddata_pipeline)
    assert b.rule_result == [f["op_id"] for f in flagged]  # MindInsight's own answer, in its order
    assert b.op_ids == [f["op_id"] for f in flagged if f["parent_id"] is not None]
    assert b.consumer_bound == (len(flagged) == 1 and flagged[0]["parent_id"] is None)


@pytest.mark.parametrize("variant,thresholds,suspects,consumer_bound", [
    # MindInsight's own unit tests on these files (test_minddata_pipeline_analyser, query_success_5..8)
    (0, (0.8, 0.2), [4], False), (1, (0.8, 0.6), [1], False), (2, (0.8, 0.6), [], True),
    (3, (0.8, 0.2), [2, 3], False),
    # the default thresholds: input queue fuller than output (op 4), then slow leaves 2 and 3
    (0, (0.8, 0.6), [4, 2, 3], False), (3, (0.8, 0.6), [2, 3], False),
])
def test_bottleneck_rule_on_hand_made_variants(variant, thresholds, suspects, consumer_bound):
    frame, _ = md.read_pipeline_csv(DATA / f"legacy/minddata_variants/minddata_pipeline_raw_{variant}.csv")
    b = an.bottleneck_ops(frame, high=thresholds[0], low=thresholds[1])
    assert (b.op_ids, b.consumer_bound) == (suspects, consumer_bound)
    assert b.rule_result == ([0] if consumer_bound else suspects)


@pytest.mark.parametrize("folder,device,exp", DATASETS)
def test_queue_summary_matches_mindinsight(folder, device, exp):
    prof = load(folder, device)
    q = an.queue_summary(prof.host_queue, prof.device_queue)
    mi = expected(exp)["queues"]
    summary = mi["process_summary"]
    host = summary["device_queue_info"]["summary"]
    assert q["host_queue"]["steps"] == host["total_batch"]
    assert q["host_queue"]["empty_steps"] == host["empty_batch_count"]
    assert q["host_queue"]["full_steps"] == host["full_batch_count"]
    assert q["host_queue"]["avg_get_ms"] == pytest.approx(mi["device_queue_time_ms"]["summary"]["time_summary"]["get_cost"])
    assert q["host_avg_batch_ms"] == pytest.approx(mi["device_queue_time_ms"]["summary"]["time_summary"]["avg_cost"])
    warned = [k for k, v in summary.items() if isinstance(v, dict) and v.get("status") == "warning"]
    assert warned == [q["diagnosis"]]
    if "get_next_queue_info" in summary:
        dev = summary["get_next_queue_info"]["summary"]
        assert q["device_queue"] == {"steps": dev["total_batch"], "empty_steps": dev["empty_batch_count"]}
        assert q["device_avg_get_next_ms"] == pytest.approx(float(mi["get_next_time"]["summary"]["time_summary"]["avg_cost"]))
    else:
        assert q["device_queue"] is None
    proposer = expected(exp)["proposals"]["per_proposer_raw"]["minddata"]
    empty, total, full, _ = proposer["minddata_device_queue"]
    assert (q["host_queue"]["empty_steps"], q["host_queue"]["steps"], q["host_queue"]["full_steps"]) == (empty, total, full)
    if "minddata_device_queue_rate" in proposer:
        assert q["host_empty_rate_pct"] == proposer["minddata_device_queue_rate"]["empty_rate"]


def test_queue_summary_without_frames():
    q = an.queue_summary(None, None)
    assert q["host_queue"] is None and q["device_queue"] is None and q["diagnosis"] is None


@pytest.mark.parametrize("folder,device,exp", DATASETS)
def test_cpu_summary_matches_mindinsight(folder, device, exp):
    cpu = load(folder, device).cpu_utilization
    c = an.cpu_summary(cpu)
    mi = expected(exp)["cpu_utilization"]
    names = {"user_utilization": "device_user_pct", "sys_utilization": "device_sys_pct",
             "idle_utilization": "device_idle_pct", "io_utilization": "device_io_pct",
             "context_switch_count": "context_switches", "runnable_process": "runnable_processes",
             "runable_processes": "runnable_processes"}
    for key, value in mi["device_info"].items():
        assert c[names[key] + "_avg"] == value["avg_value"], key
        assert c["samples"] == value["n"]
        assert abs(c[names[key] + "_mean"] - value["avg_value"]) <= 0.5
    for key, value in mi["process_info"].items():
        assert c["process_" + key.split("_")[0] + "_pct_avg"] == value["avg_value"]
    assert c["machine_busy_pct"] == 100 - mi["idle_utilization_avg_(proposer)"]
    # the samples MindInsight maps to steps: same first/last steps as its step_info
    steps = cpu["step"].iloc[1:].astype(int).astype(str).tolist()[c["first_sample"]:c["last_sample"] + 1]
    info = mi["step_info"]
    assert steps == info if isinstance(info, list) else (steps[:8] == info["head"] and steps[-8:] == info["tail"])


def test_cpu_summary_step_range():
    cpu = load("minddata/md_bottleneck_map", "0").cpu_utilization
    part = an.cpu_summary(cpu, start_step=10, end_step=20)
    steps = cpu["step"].iloc[1:].to_numpy()[part["first_sample"]:part["last_sample"] + 1]
    assert steps.min() == 10 and steps.max() == 20
    assert part["samples"] < an.cpu_summary(cpu)["samples"]


def test_pipeline_edges_are_the_queue_chart():
    exp = expected("minddata__md_bottleneck_map__device0")["minddata_pipeline"]["queue_chart"]
    edges = an.pipeline_edges(load("minddata/md_bottleneck_map", "0").minddata_pipeline)
    assert edges[["child_id", "parent_id"]].values.tolist() == [[1, 0], [2, 1]]
    chart = {int(c["queue"].split("_")[1]): c["usage_pct"] for c in exp}
    for child, rate in zip(edges["child_id"], edges["usage_rate"]):
        assert round(100 * rate, 4) == chart[child]
    assert an.pipeline_edges(None).empty


def test_empty_inputs_give_empty_answers():
    assert an.bottleneck_ops(None).op_ids == []
    assert an.op_cpu_summary(None).empty
    assert math.isclose(an.HIGH_USAGE, 0.8) and an.EMPTY_QUEUE_THRESHOLD == 0.3
