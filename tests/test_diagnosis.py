"""The diagnosis every face shows (`analysis.diagnosis`): the first sentence names what sets the step time,
in the run's own stage vocabulary, for runs and clusters; checked against numbers read from the files here."""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest

from nbprofiler.analysis.diagnosis import diagnose, diagnose_cluster, fmt_ms, rank_span
from nbprofiler.views.overview import overview_html

from .conftest import DATA, load_quietly

PT_RANK0 = DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt"


def _step_trace_time(path) -> dict:
    """The first step row of a step_trace_time.csv, in ms, read with the csv module."""
    with open(path, newline="") as f:
        row = next(csv.DictReader(f))
    return {k: float(v) / 1000 for k, v in row.items() if k != "Step"}


def test_new_format_run_names_exposed_communication_not_forward_backward():
    prof = load_quietly(PT_RANK0)
    row = _step_trace_time(PT_RANK0 / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv")
    stages = {"Computing": row["Computing"], "Communication(Not Overlapped)": row["Communication(Not Overlapped)"],
              "Free": row["Free"], "Preparing": row["Preparing"]}
    assert max(stages, key=stages.get) == "Communication(Not Overlapped)"
    step = row["Stage"] + row["Preparing"]
    d = diagnose(prof)
    assert d.limiter == "communication_not_overlapped_ms"
    assert d.headline.startswith(
        f"Communication not overlapped by computation sets the step time: {fmt_ms(row['Communication(Not Overlapped)'])}"
        f" of {fmt_ms(step)} ms per step ({row['Communication(Not Overlapped)'] / step * 100:.0f} %")
    assert f"computing {fmt_ms(row['Computing'])} ms" in d.headline
    # the Overview shows the same sentence first and the run's own stages, never MindInsight's mapping
    html = overview_html(prof.summary(), root=prof.root)
    assert "Forward + backward" not in html and "Computing" in html
    assert html.index("nbprofiler-diagnosis") < html.index("<table>")
    # the summary JSON keeps MindInsight's mapping, labelled, beside the run's own stages
    st = prof.summary()["step_trace"]
    assert "MindInsight" in st["mapping"]
    assert st["stages"]["computing_ms"] == pytest.approx(row["Computing"])


def test_every_face_says_the_same_first_sentence():
    prof = load_quietly(PT_RANK0)
    headline = diagnose(prof).headline
    cli = subprocess.run([sys.executable, "-m", "nbprofiler.faces.cli", "summary", str(PT_RANK0), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert json.loads(cli.stdout)["diagnosis"]["headline"] == headline
    text = subprocess.run([sys.executable, "-m", "nbprofiler.faces.cli", "summary", str(PT_RANK0)],
                          capture_output=True, text=True, timeout=300).stdout
    assert headline in text
    from bokeh.models import Div
    from nbprofiler.faces.report import report_layout
    report = " ".join(d.text for d in report_layout(prof).select({"type": Div}))
    from html import escape
    assert escape(headline) in report


def test_legacy_run_keeps_mindinsight_stages_and_names_forward_backward():
    prof = load_quietly(DATA / "legacy/run_1_widedeep")
    exp = json.loads((DATA / "expected/legacy__run_1_widedeep__device1.json").read_text())["step_trace"]["summary"]
    d = diagnose(prof)
    assert d.limiter == "fp_and_bp_ms"
    assert d.headline.startswith(f"Forward and backward sets the step time: {fmt_ms(exp['fp_and_bp'])} of "
                                 f"{fmt_ms(exp['total_time'])} ms")


def test_cpu_run_ranks_the_hotspot_above_dataset_advice_the_data_contradicts():
    prof = load_quietly(DATA / "mindspore2/lenet_pynative")
    d = diagnose(prof)
    hq = prof.host_queue.sort_values("step")["timestamp_ms"].to_numpy(float)
    step = (hq[-1] - hq[0]) / (len(hq) - 1)
    assert d.step_source == "host-queue batch timestamps" and d.step_ms == pytest.approx(step)
    top = prof.op_types.sort_values("total_time_us", ascending=False).iloc[0]
    assert top["op_type"] == "Conv2DBackpropFilter"
    assert f"{top['op_type']} alone {fmt_ms(top['total_time_us'] / 1000 / (len(hq) - 1))} ms" in d.headline
    # the hotspot comes first, with its time per step; num_parallel_workers advice is folded: the host
    # queue was empty at 1 of 300 steps
    assert d.findings[0].id == "operators.cpu.top_type"
    assert d.findings[0].cost_ms == pytest.approx(top["total_time_us"] / 1000 / (len(hq) - 1))
    assert not any(s.rule == "minddata.op_cpu" for s in d.findings)
    folded = {s.rule: why for s, why in d.folded}
    assert "minddata.op_cpu" in folded and "1 of 300 steps" in folded["minddata.op_cpu"]
    costs = [s.cost_ms for s in d.findings if s.cost_ms is not None]
    assert costs == sorted(costs, reverse=True)


def test_map_bound_pipeline_says_the_step_waits_for_data():
    d = diagnose(load_quietly(DATA / "minddata/md_bottleneck_map"))
    assert "for the next batch from the data pipeline" in d.headline and "62 of 62 steps" in d.headline
    assert not d.folded


def _cluster_csv(tmp_path, rows: list[dict]):
    """A cluster_step_trace_time.csv in the header msprof-analyze writes (the 16-rank sample's), with
    ``rows`` (ms) written in us."""
    src = DATA / "npu/cluster_analysis_16rank/cluster_step_trace_time.csv"
    with open(src, newline="") as f:
        header = next(csv.reader(f))
    out = tmp_path / "cluster_analysis_output"
    out.mkdir()
    with open(out / "cluster_step_trace_time.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i, r in enumerate(rows):
            comp, comm, free, pre = r["computing"], r["comm"], r["free"], r.get("preparing", 0.0)
            vals = {"Step": "", "Type": "rank", "Index": i, "Computing": comp * 1000,
                    "Communication(Not Overlapped)": comm * 1000, "Overlapped": 0.0, "Communication": comm * 1000,
                    "Free": free * 1000, "Stage": (comp + comm + free) * 1000, "Bubble": 0.0,
                    "Communication(Not Overlapped and Exclude Receive)": comm * 1000, "Preparing": pre * 1000}
            w.writerow([vals.get(h, 0.0) for h in header])
    return out


def test_cluster_names_the_work_imbalance_not_the_noise(tmp_path):
    # the shape of a real 4-rank job: ranks 2-3 compute ~400 ms, ranks 0-1 ~231 ms and wait 420-442 ms
    rows = [{"computing": 231.0, "comm": 442.0, "free": 137.0}, {"computing": 231.5, "comm": 420.0, "free": 158.0},
            {"computing": 400.0, "comm": 250.0, "free": 160.0}, {"computing": 399.0, "comm": 255.0, "free": 156.0}]
    c = load_quietly(_cluster_csv(tmp_path, rows))
    d = diagnose_cluster(c)
    assert [g.ranks for g in d.groups] and {g.ranks for g in d.groups} == {("0", "1"), ("2", "3")}
    imbalance = next(f for f in d.findings if f.id == "cluster.work_imbalance")
    slow, fast = (400.0 + 399.0) / 2, (231.0 + 231.5) / 2
    assert imbalance.ranks == ("2", "3") and imbalance.cost_ms == pytest.approx(slow - fast)
    assert f"{slow / fast:.2f}×" in imbalance.text and "ranks 0–1 wait meanwhile" in imbalance.text
    assert imbalance.text in d.headline
    costs = [f.cost_ms for f in d.findings if f.cost_ms is not None]
    assert costs == sorted(costs, reverse=True)


def test_a_difference_under_one_percent_of_the_step_is_never_an_outlier(tmp_path):
    # rank 3 idles 0.3 ms more than the others: a robust z far over 3.5, but 0.04 % of an 810 ms step
    rows = [{"computing": 300.0, "comm": 400.0, "free": f} for f in (109.99, 110.0, 110.01, 110.3)]
    c = load_quietly(_cluster_csv(tmp_path, rows))
    from nbprofiler.analysis import cluster as C
    slow = C.slow_ranks(C.rank_summary(c))
    row = slow[(slow["rank"] == "3") & (slow["stage"] == "free_ms")]
    assert len(row) == 1 and row["z"].iloc[0] > 3.5 and not row["flagged"].iloc[0]
    d = diagnose_cluster(c)
    assert not any(f.id.startswith("cluster.outlier") for f in d.findings)
    assert "outlier" not in d.headline
    from nbprofiler.views.cluster import ClusterView
    assert "an outlier" not in ClusterView(c).layout.select_one({"name": "cluster_ranks"}).title.text.replace(
        "not an outlier", "")


def test_sixteen_ranks_pipeline_bubble_on_the_second_group():
    path = DATA / "npu/cluster_analysis_16rank/cluster_step_trace_time.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    bubble = {int(r["Index"]): float(r["Bubble"]) / 1000 for r in rows if r["Type"] == "rank"}
    c = load_quietly(DATA / "npu/cluster_analysis_16rank")
    d = diagnose_cluster(c)
    assert {g.ranks for g in d.groups} == {tuple(str(i) for i in range(8)), tuple(str(i) for i in range(8, 16))}
    f = next(f for f in d.findings if f.id == "cluster.group.bubble")
    assert f.cost_ms == pytest.approx(sum(bubble[i] for i in range(8, 16)) / 8 - sum(bubble[i] for i in range(8)) / 8)
    assert "ranks 8–15" in d.headline and "pipeline bubble" in d.headline


def test_legacy_pipeline_cluster_groups_are_its_stages_and_mindinsight_proposals_stay():
    c = load_quietly(DATA / "legacy/cluster_4rank_pipeline")
    d = diagnose_cluster(c)
    assert {(g.ranks, g.named) for g in d.groups} == {(("0", "1"), "pipeline stage 1 of 2"),
                                                      (("2", "3"), "pipeline stage 2 of 2")}
    ids = [f.id for f in d.findings]
    assert "mindinsight.pipeline_flops" in ids and ids.index("mindinsight.pipeline_flops") > ids.index("cluster.limiter")
    link = next(f for f in d.findings if f.id.startswith("mindinsight.slow_link"))
    assert "74.26 %" in link.text and "GB/s" not in link.text  # hccl_raw names no bandwidth unit
    # the cluster page and the report open with the same sentence
    from nbprofiler.views.cluster import ClusterView
    assert ClusterView(c).diagnosis.headline == d.headline
    assert c.summary()["cluster"]["headline"] == d.headline


def test_rank_span_folds_consecutive_ranks():
    assert rank_span(["0", "1", "2", "5"]) == "ranks 0–2, 5"
    assert rank_span(["3"]) == "rank 3"


def test_cluster_of_copies_keeps_ranks_apart(tmp_path):
    # two copies of one rank's text export, as two ranks: no group of one rank is called a group
    for i in (0, 1):
        shutil.copytree(DATA / f"npu/ascend_pt_text_2rank/rank{i}_ascend_pt", tmp_path / f"rank{i}_ascend_pt")
    d = diagnose_cluster(load_quietly(tmp_path))
    assert d.groups == () and d.headline.startswith("Communication not overlapped by computation sets the step "
                                                    "time on every one of the 2 ranks")


def test_a_legacy_rank_with_only_a_flops_summary_gets_its_flops_everywhere():
    raw = json.loads((DATA / "legacy/cluster_4rank_pipeline/flops_summary_0.json").read_text())
    prof = load_quietly(DATA / "legacy/cluster_4rank_pipeline")["0"]
    assert prof.flops.empty and prof.flops_summary
    flops = prof.summary()["flops"]
    assert flops["total_mflops"] == pytest.approx(raw["cube_FLOPs"] + raw["vec_FLOPs"])
    assert flops["utilization_pct"] == pytest.approx(max(raw["cube_FLOPS_Utilization"], raw["vec_FLOPS_Utilization"]))
    from nbprofiler.views.dashboard import Dashboard
    assert Dashboard(prof).select("FLOPs") is not None
    from nbprofiler.faces.report import report_layout
    titles = [t.title for t in report_layout(prof).select_one({"name": "report_tabs"}).tabs]
    assert "FLOPs" in titles


def test_each_suggestion_says_the_time_it_is_ranked_by():
    from nbprofiler.views.suggestions import suggestion_html
    prof = load_quietly(DATA / "mindspore2/lenet_pynative")
    top = diagnose(prof).findings[0]
    assert "(at stake: 120.1 ms a step)" in suggestion_html(top)  # Conv2DBackpropFilter: 35.92 s over 299 steps


def test_compare_shows_each_runs_first_sentence():
    a, b = load_quietly(DATA / "legacy/run_1_widedeep"), load_quietly(PT_RANK0)
    import nbprofiler
    cmp = nbprofiler.compare(a, b)
    assert cmp.headlines == {"a": diagnose(a).headline, "b": diagnose(b).headline}
    # a legacy and a 2.x step trace share no stage: only their step totals are compared
    assert cmp.stage_set == [] and list(cmp.steps["stage"]) == ["total_ms"]
    from html import escape
    from nbprofiler.views.compare import compare_layout
    text = compare_layout(cmp).select_one({"name": "compare_verdict"}).text
    assert escape(diagnose(b).headline) in text and escape(diagnose(a).headline) in text
