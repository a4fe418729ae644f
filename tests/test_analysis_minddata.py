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


@pytest.mark.parametrize("folder", ["minddata/md_bottleneck_map", "minddata/md_fast", "mindspore2/lenet_pynative"])
def test_op_cpu_and_advice_reproduce_mindspore_summary(folder):
    prof = load(folder, "0")
    ms = prof.minddata_summary
    ops = an.op_cpu_summary(prof.op_cpu_utilization, prof.minddata_pipeline)
    assert [round(x, 2) for x in ops["avg_cpu_pct"]] == ms["avg_cpu_pct"]
    assert ops["num_workers"].tolist() == ms["num_workers"]
    advice = an.pipeline_advice(prof.minddata_pipeline, prof.op_cpu_utilization, prof.host_queue, prof.minddata_queues)
    by_id: dict = {}
    for a in advice:
        by_id.setdefault(a["id"], []).append(a)
        assert set(a) == {"id", "text", "evidence"} and a["evidence"]["rule"]
    cpu_texts = [a["text"] for a in by_id.get("minddata.op_cpu_low", []) + by_id.get("minddata.op_cpu_high", [])]
    assert cpu_texts == ms.get("cpu_analysis_details", [])
    queue_texts = [a["text"] for k in ("minddata.queue_leaf", "minddata.queue_in_out") for a in by_id.get(k, [])]
    assert queue_texts == ms.get("queue_analysis_details", [])
    verdict = [a for a in by_id.get("minddata.bottleneck", [])]
    assert [a["evidence"]["op"] for a in verdict] == ms.get("bottleneck_warning", [])
    assert [a["text"] for a in verdict] == ms.get("bottleneck_suggestion", [])


@pytest.mark.parametrize("folder,device,exp", DATASETS + [
    ("legacy/run_1_widedeep", "1", "legacy__run_1_widedeep__device1")])
def test_advice_carries_mindinsight_proposer(folder, device, exp):
    prof = load(folder, device)
    advice = an.pipeline_advice(prof.minddata_pipeline, prof.op_cpu_utilization, prof.host_queue)
    proposals = expected(exp)["proposals"]["per_proposer_raw"]["minddata_pipeline"] or {}
    mine = {a["id"]: a for a in advice}
    for label, (ops,) in proposals.items():
        kind = label.split("-", 1)[1]
        assert ops in mine[f"minddata.pipeline.{kind}"]["text"]
    if not proposals:  # MindInsight reports nothing: every queue full -> the consumer is the slow part
        assert not any(k.startswith("minddata.pipeline.") for k in mine)
        assert ("minddata.consumer_bound" in mine) == an.bottleneck_ops(prof.minddata_pipeline).consumer_bound
    if "minddata.pipeline.general" in mine:
        ev = mine["minddata.pipeline.general"]["evidence"]
        host = an.queue_summary(prof.host_queue, None)["host_queue"]
        assert ev["shown_by_mindinsight"] == (None if host is None else host["empty_steps"] > 0.3 * host["steps"])


def test_advice_texts_for_the_map_bottleneck():
    prof = load("minddata/md_bottleneck_map", "0")
    advice = {a["id"]: a for a in an.pipeline_advice(prof.minddata_pipeline, prof.op_cpu_utilization)}
    assert advice["minddata.pipeline.general"]["text"] == \
        "The MapOp_1 operator in the pipeline may have performance bottlenecks."
    assert advice["minddata.pipeline.map_op"]["text"].startswith("For operator MapOp_1, you can try to increase")
    ev = advice["minddata.pipeline.general"]["evidence"]
    assert ev["usage_rates"]["1"] == pytest.approx(0.00025826446280991736)
    assert ev["children_usage_rates"]["1"]["2"] == pytest.approx(0.9834710743801653)


def test_pipeline_edges_are_the_queue_chart():
    exp = expected("minddata__md_bottleneck_map__device0")["minddata_pipeline"]["queue_chart"]
    edges = an.pipeline_edges(load("minddata/md_bottleneck_map", "0").minddata_pipeline)
    assert edges[["child_id", "parent_id"]].values.tolist() == [[1, 0], [2, 1]]
    chart = {int(c["queue"].split("_")[1]): c["usage_pct"] for c in exp}
    for child, rate in zip(edges["child_id"], edges["usage_rate"]):
        assert round(100 * rate, 4) == chart[child]
    assert an.pipeline_edges(None).empty


def test_empty_inputs_give_empty_answers():
    assert an.bottleneck_ops(None).op_ids == [] and an.pipeline_advice(None) == []
    assert an.op_cpu_summary(None).empty
    assert math.isclose(an.HIGH_USAGE, 0.8) and an.EMPTY_QUEUE_THRESHOLD == 0.3
