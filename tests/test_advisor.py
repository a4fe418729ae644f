"""The advisor on real profiles: its findings against what MindInsight's proposers and MindSpore's dataset
summary said on the same runs, its evidence (numbers and where they come from), and one suggestion per
problem."""
from __future__ import annotations

import json

import pytest

from nbprofiler.analysis import advisor as A
from nbprofiler.analysis.advisor import format_number, format_us

from .conftest import expected, load_quietly

_cache: dict = {}


def _prof(rel, device=None):
    if (rel, device) not in _cache:
        _cache[rel, device] = load_quietly(rel, device=device)
    return _cache[rel, device]


def _findings(rel, device=None):
    return {s.id: s for s in A.advise_profile(_prof(rel, device))}


def _raw(rel, device=None, prefix=""):
    """Every rule's findings before folding, in rule order."""
    return [s for s in A.run_rules(**A.profile_frames(_prof(rel, device))) if s.id.startswith(prefix)]


def test_step_interval_rule_matches_mindinsight_proposer():
    # MindInsight's step_trace-iter_interval proposer fired for run_2_lenet (average interval 12.4321 ms)
    raw = expected("legacy__run_2_lenet__device1")["proposals"]["per_proposer_raw"]["step_trace"]
    assert "step_trace-iter_interval" in raw
    f = _findings("legacy/run_2_lenet")["step_trace.iteration_interval"]
    ev = f.get("average_interval_ms")
    assert ev.value == pytest.approx(12.4321) and ev.threshold == 0.5 and ev.compare == ">"
    assert (ev.frame, ev.column, ev.unit) == ("step_trace", "iteration_interval_ms", "ms")
    assert "12.43 ms" in f.text and f.severity == "high"
    # ... and not for run_1_widedeep, whose average interval is 0.2038 ms (< 0.5 ms)
    assert "step_trace.iteration_interval" not in _findings("legacy/run_1_widedeep")


def test_dominant_stage_and_top_operator_type():
    f = _findings("legacy/run_1_widedeep")
    dom = f["step_trace.dominant.fp_and_bp"]
    assert dom.get("stage_share_pct").value == pytest.approx(118.054 / 205.3809 * 100, rel=1e-4)
    top = f["operators.ai_core.top_type"]
    assert top.get("count").value == 25 and top.get("percent").op_type == "MatMul"
    assert top.get("total_time_us").value == pytest.approx(2807.82, abs=0.01)
    assert (top.get("percent").frame, top.get("percent").kind) == ("op_types", "ai_core")


def test_host_queue_and_pipeline_findings_match_mindinsight():
    e = expected("minddata__md_bottleneck_map__device0")["proposals"]["per_proposer_raw"]
    empty, total = e["minddata"]["minddata_device_queue"][:2]   # MindInsight: empty 62 of 62 host records
    f = _findings("minddata/md_bottleneck_map")
    hq = f["minddata.host_queue_empty"].get("empty_pct")
    assert hq.detail == f"{empty} of {total} steps" == "62 of 62 steps"
    assert hq.value == 100.0 and hq.threshold == 30.0 and hq.steps == (1, 62)
    assert e["minddata_pipeline"]["minddata_pipeline-general"] == ["MapOp_1"]
    pipe = f["minddata.pipeline"]
    assert pipe.text.startswith("The MapOp_1 operator in the pipeline may have performance bottlenecks. For operator "
                                "MapOp_1, you can try to increase")
    assert pipe.get("op1_usage_pct").value == pytest.approx(0.025826446280991736)
    assert pipe.get("op2_usage_pct").value == pytest.approx(98.34710743801653)
    assert pipe.get("op2_usage_pct").op_id == 2 and pipe.get("op1_input2_drop_pct").threshold == 10.0
    assert pipe.get("shown_by_mindinsight").value is True
    # the machine CPU proposer: MindInsight reports 87 % busy
    assert f["minddata.cpu_busy"].get("busy_pct").value == pytest.approx(e["minddata"]["minddata_cpu_utilization"][0])


def test_one_suggestion_per_problem():
    """MindSpore's "Map(id=1)'s input queue usage=98.38% ..." is the finding MindInsight's rule makes about
    MapOp_1: it is folded into that suggestion (with its own evidence), not shown as a second one; the same for
    Batch(id=0)'s low CPU under MindSpore's verdict about Batch(id=0)."""
    f = _findings("minddata/md_bottleneck_map")
    assert [a.id for a in f["minddata.pipeline"].also] == ["minddata.queue_in_out.1"]
    assert f["minddata.pipeline"].also[0].get("op2_queue_pct").value == 98.38
    assert [a.id for a in f["minddata.bottleneck"].also] == ["minddata.op_cpu_low.0"]
    texts = [s.text for s in A.advise_profile(_prof("minddata/md_bottleneck_map"))]
    assert len(texts) == len(set(texts)) == 4
    for rel, dev in (("legacy/run_2_lenet", None), ("mindspore2/lenet_pynative", None), ("npu/cluster_8rank", "0")):
        subjects = [x for s in A.advise_profile(_prof(rel, dev)) for x in s.subjects]
        assert len(subjects) == len(set(subjects)), rel


def test_fast_pipeline_reports_the_consumer_not_a_pipeline_op():
    f = _findings("minddata/md_fast")
    bound = f["minddata.consumer_bound"]
    assert "minddata.pipeline" not in f and "minddata.host_queue_empty" not in f
    assert [e.op_id for e in bound.evidence] == [1, 2]          # least full queue first
    assert all(e.value >= 80 and e.compare == ">=" for e in bound.evidence)
    assert bound.severity == "info"


@pytest.mark.parametrize("folder", ["minddata/md_bottleneck_map", "minddata/md_fast", "mindspore2/lenet_pynative"])
def test_rules_reproduce_mindspore_dataset_summary(folder):
    """Texts and numbers of MindSpore 2.x's own minddata summary file, rule by rule (before folding)."""
    prof = _prof(folder, "0")
    ms = prof.minddata_summary
    cpu = [s.text for s in _raw(folder, "0", "minddata.op_cpu_")]
    assert cpu == ms.get("cpu_analysis_details", [])
    queue = [s.text for s in _raw(folder, "0") if s.rule == "minddata.queue_usage"]
    assert queue == ms.get("queue_analysis_details", [])
    verdict = _raw(folder, "0", "minddata.bottleneck")
    assert [s.text for s in verdict] == ms.get("bottleneck_suggestion", [])
    assert [s.evidence[0].label.removeprefix("CPU per worker of ") for s in verdict] == ms.get("bottleneck_warning", [])


@pytest.mark.parametrize("folder,device,exp", [
    ("minddata/md_bottleneck_map", "0", "minddata__md_bottleneck_map__device0"),
    ("minddata/md_fast", "0", "minddata__md_fast__device0"),
    ("mindspore2/lenet_pynative", "0", "mindspore2__lenet_pynative__device0"),
    ("legacy/run_2_lenet", "1", "legacy__run_2_lenet__device1"),
    ("legacy/fixtures_mixed_ids", "0", "legacy__fixtures_mixed_ids__device0"),
    ("legacy/run_1_widedeep", "1", "legacy__run_1_widedeep__device1")])
def test_pipeline_rule_carries_mindinsight_proposer(folder, device, exp):
    from nbprofiler.analysis import minddata as md
    prof = _prof(folder, device)
    mine = {s.id: s for s in A.advise_profile(prof)}
    proposals = expected(exp)["proposals"]["per_proposer_raw"]["minddata_pipeline"] or {}
    for label, (ops,) in proposals.items():
        assert ops in mine["minddata.pipeline"].text
    if not proposals:  # MindInsight reports nothing: every queue full -> the consumer is the slow part
        assert "minddata.pipeline" not in mine
        assert ("minddata.consumer_bound" in mine) == md.bottleneck_ops(prof.minddata_pipeline).consumer_bound
    else:
        flagged = {int(s.split(":")[1]) for s in mine["minddata.pipeline"].subjects if s.startswith("pipeline_op")}
        assert set(md.bottleneck_ops(prof.minddata_pipeline).op_ids) <= flagged


def test_every_suggestion_is_typed_and_serialises():
    for rel, dev in (("legacy/run_2_lenet", None), ("mindspore2/lenet_pynative", None),
                     ("legacy/fixtures_mixed_ids", "0"), ("minddata/md_bottleneck_map", None)):
        sugg = A.advise_profile(_prof(rel, dev))
        assert sugg
        for s in sugg:
            assert s.rule in A.RULES_BY_ID and s.severity in A.SEVERITIES and s.text and s.evidence
            for e in s.evidence:
                assert e.label and e.frame and isinstance(e.value, (int, float, str, bool))
            d = json.loads(json.dumps(s.to_dict()))        # plain JSON, and back to the same suggestion
            assert A.Suggestion.from_dict(d).to_dict() == d


def test_advise_is_pure_over_frames():
    """The same frames give the same suggestions whether they come from a Profile or a dict."""
    prof = _prof("minddata/md_bottleneck_map")
    frames = {k: getattr(prof, k) for k in A.FRAMES}
    assert A.advise(**frames) == A.advise_profile(prof)
    assert A.advise() == []
    with pytest.raises(TypeError, match="unknown frames"):
        A.advise(kernelz=None)


def test_thresholds_are_named_once_on_the_rules():
    from nbprofiler.analysis import minddata as md
    r = A.RULES_BY_ID
    assert r["minddata.host_queue_empty"].thresholds["empty_pct"] == md.EMPTY_QUEUE_THRESHOLD * 100 == 30
    assert r["minddata.pipeline"].thresholds == {"high_pct": 80.0, "low_pct": 60.0, "margin_pct": 10.0}
    assert r["step_trace.iteration_interval"].thresholds["interval_ms"] == 0.5
    assert r["minddata.op_cpu"].thresholds["low_pct"] == r["minddata.bottleneck"].thresholds["cpu_per_worker_low_pct"]


def test_human_numbers():
    assert format_us(812) == "812 us"
    assert format_us(35_924_200) == "35.92 s"
    assert format_us(2807.82) == "2.808 ms"
    assert format_number(31.25) == "31.25" and format_number(100.0) == "100" and format_number(1234.5) == "1,234.5"
    assert format_number(0.025826) == "0.03" and format_number(0.0012) == "0.0012" and format_number(True) == "yes"


def test_new_format_steps_are_judged_by_their_own_stages():
    # msprof-analyze's 8-rank cluster: Free (device idle) is 990.6 of 1754.6 ms in rank 0's step
    f = _findings("npu/cluster_8rank", device="0")
    free = f["step_trace.dominant.free"]
    assert free.get("stage_ms").value == pytest.approx(990605.1042031233 / 1000, rel=1e-6)  # Free column, us
    assert free.get("stage_ms").column == "free_ms"
    assert "device idles" in free.text and "AllReduce" not in free.text
    assert not any(k.startswith("step_trace.dominant.tail") for k in f)


def test_thresholds_can_be_changed_per_run():
    """md_fast's host queue was empty at 1 of 200 steps (0.5 %): quiet at MindInsight's 30 %, reported at 0.1 %."""
    prof = _prof("minddata/md_fast")
    assert "minddata.host_queue_empty" not in _findings("minddata/md_fast")
    strict = [r.with_thresholds(empty_pct=0.1) if r.id == "minddata.host_queue_empty" else r for r in A.RULES]
    found = {s.id: s for s in A.advise_profile(prof, strict)}["minddata.host_queue_empty"]
    assert found.get("empty_pct").value == 0.5 and found.get("empty_pct").threshold == 0.1
    with pytest.raises(KeyError, match="no threshold"):
        A.RULES_BY_ID["minddata.cpu_busy"].with_thresholds(empty_pct=1)
    table = A.rules_frame()
    assert len(table) == len(A.RULES) and table.set_index("rule").at["minddata.cpu_busy", "thresholds"] == {
        "busy_pct": 80.0}
