"""Pipeline bubbles (`nbprofiler.analysis.pipeline`): on synthetic pipelines with device timelines whose
schedule is known exactly, the measured bubble equals the schedule's; on the real legacy 4-rank pipeline and
the 16-rank msprof-analyze output, every number equals the one computed here from the files (csv/json
modules), and the conclusion (which stage idles, how much) is the files' own."""
from __future__ import annotations

import csv
import functools
import html
import json
import re
import statistics

import numpy as np
import pytest

from nbprofiler.analysis.pipeline import (pipeline_bubbles, pipeline_stages, pipeline_summary, stage_timeline,
                                          theoretical_bubble)
from nbprofiler.schema import ANALYSIS_FRAMES
from nbprofiler.synthetic.cluster import write_pipeline_cluster

from .conftest import DATA, load_quietly

LEGACY = "legacy/cluster_4rank_pipeline"
P, M, F_US, B_US = 4, 8, 1000.0, 2000.0


@pytest.fixture(scope="module")
def gpipe(tmp_path_factory):
    """4 stages, 8 micro-batches, GPipe, every transfer 50 µs."""
    root = write_pipeline_cluster(tmp_path_factory.mktemp("gpipe"), stages=P, micro_batches=M, steps=2,
                                  forward_us=F_US, backward_us=B_US, p2p_us=50.0, schedule="gpipe")
    return load_quietly(root)


@functools.cache
def _legacy():
    return load_quietly(LEGACY)


def _stages(p=P):
    return {s: [str(s)] for s in range(p)}


# -- synthetic: the exact schedule -------------------------------------------------------------------------
def test_gpipe_measured_bubble_is_the_exact_schedule(gpipe):
    c = 50.0
    frame = pipeline_bubbles(gpipe, stages=_stages(), micro_batches=M, schedule="gpipe")
    assert list(frame.columns) == ANALYSIS_FRAMES["pipeline_bubbles"].column_names
    assert sorted(frame["stage"].unique()) == list(range(P)) and sorted(frame["step"].unique()) == [1, 2]
    # every stage computes m (f + b); the pipeline's step adds p-1 forward and backward hops of f + b + 2c
    step_ms = (M * (F_US + B_US) + (P - 1) * (F_US + B_US + 2 * c)) / 1000.0
    idle_ms = (P - 1) * (F_US + B_US + 2 * c) / 1000.0
    theory = (P - 1) / (M + P - 1)
    np.testing.assert_allclose(frame["step_ms"], step_ms, atol=1e-6)
    np.testing.assert_allclose(frame["busy_ms"], M * (F_US + B_US) / 1000.0, atol=1e-6)
    np.testing.assert_allclose(frame["idle_ms"], idle_ms, atol=1e-6)
    np.testing.assert_allclose(frame["bubble_ratio"], idle_ms / step_ms, atol=1e-9)
    np.testing.assert_allclose(frame["theoretical_ratio"], theory)
    np.testing.assert_allclose(frame["gap_ms"], idle_ms - theory * step_ms, atol=1e-6)
    parts = frame[["busy_ms", "p2p_ms", "collective_ms", "free_ms"]].sum(axis=1)
    np.testing.assert_allclose(parts, frame["step_ms"], atol=1e-6)
    np.testing.assert_allclose(frame["p2p_ms"] + frame["free_ms"], frame["idle_ms"], atol=1e-9)
    assert (frame["p2p_ms"] > 0).all() and (frame["collective_ms"] == 0).all()
    # stage 0 only ever waits inside a receive (for the gradients); the last stage ends (p-1)(b+c) early
    # with nothing posted: idle, not send/receive
    first, last = frame[frame["stage"] == 0], frame[frame["stage"] == P - 1]
    assert (first["free_ms"] == 0).all()
    np.testing.assert_allclose(last["free_ms"], (P - 1) * (B_US + c) / 1000.0 - c / 1000.0, atol=1e-6)
    assert frame["source"].str.startswith("device timeline").all()
    assert frame["source"].str.endswith("stages: stages= given").all()


def test_the_stage_by_time_chart_draws_the_schedule(gpipe):
    c = 50.0
    frame = pipeline_bubbles(gpipe, stages=_stages(), micro_batches=M, schedule="gpipe")
    seg = stage_timeline(gpipe, frame)
    step_ms = frame["step_ms"].iloc[0]
    for stage, g in seg.groupby("stage"):
        g = g.sort_values("start_ms")
        # the bars tile the step: no gap, no overlap, from 0 to its end
        assert g["start_ms"].iloc[0] == pytest.approx(0.0, abs=1e-6)
        assert g["end_ms"].max() == pytest.approx(step_ms, abs=1e-6)
        assert (g["end_ms"] - g["start_ms"]).sum() == pytest.approx(step_ms, abs=1e-6)
        compute = g[g["kind"] == "compute"]
        # stage s starts computing when the first activation has crossed s hops of f + c
        assert compute["start_ms"].min() == pytest.approx(stage * (F_US + c) / 1000.0, abs=1e-6)
        row = frame[(frame["stage"] == stage) & (frame["step"] == seg.attrs["step"])].iloc[0]
        assert (compute["end_ms"] - compute["start_ms"]).sum() == pytest.approx(row["busy_ms"], abs=1e-6)


def test_one_f_one_b_without_transfer_cost_has_the_theoretical_bubble(tmp_path):
    p, m = 3, 4
    root = write_pipeline_cluster(tmp_path, stages=p, micro_batches=m, steps=1, p2p_us=0.0, schedule="1f1b")
    frame = pipeline_bubbles(load_quietly(root), stages=_stages(p), micro_batches=m)
    np.testing.assert_allclose(frame["bubble_ratio"], (p - 1) / (m + p - 1), atol=1e-9)
    np.testing.assert_allclose(frame["gap_ms"], 0.0, atol=1e-6)
    digest = pipeline_summary(frame)
    assert digest["bubble_ratio"] == pytest.approx(2 / 6) and digest["gap_ms"] == pytest.approx(0.0, abs=1e-6)
    assert "measured − theoretical = +0.0 points" in digest["finding"]


def test_without_step_ids_the_whole_timeline_is_one_step(tmp_path):
    p, m = 2, 3
    root = write_pipeline_cluster(tmp_path, stages=p, micro_batches=m, steps=1, p2p_us=0.0, schedule="gpipe")
    for kernels in root.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"):
        kernels.unlink()  # no step ids: the trace's device ops alone
    for trace in root.glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json"):   # nor the host's step marks
        events = [e for e in json.loads(trace.read_text()) if not str(e.get("name")).startswith("ProfilerStep#")]
        trace.write_text(json.dumps(events))
    frame = pipeline_bubbles(load_quietly(root), stages=_stages(p), micro_batches=m, schedule="gpipe")
    assert frame["step"].tolist() == [0, 0]
    np.testing.assert_allclose(frame["step_ms"], (m + p - 1) * (F_US + B_US) / 1000.0, atol=1e-6)
    np.testing.assert_allclose(frame["bubble_ratio"], (p - 1) / (m + p - 1), atol=1e-9)


def test_theoretical_bubble_and_bad_arguments(gpipe):
    assert theoretical_bubble(4, 8, "gpipe") == theoretical_bubble(4, 8, "1f1b") == pytest.approx(3 / 11)
    assert theoretical_bubble(4, 8, "interleaved", chunks=2) == pytest.approx(3 / 19)
    with pytest.raises(ValueError, match="schedule"):
        theoretical_bubble(4, 8, "zero-bubble")
    with pytest.raises(ValueError, match="at least 1"):
        theoretical_bubble(4, 0)
    with pytest.raises(ValueError, match=r"ranks the cluster does not have: \['9'\]"):
        pipeline_bubbles(gpipe, stages={0: ["0", "1"], 1: ["9"]})
    with pytest.raises(ValueError, match=r"ranks \['1'\] in more than one stage"):
        pipeline_bubbles(gpipe, stages={0: ["0", "1"], 1: ["1", "2"]})


# -- real legacy 4-rank pipeline ---------------------------------------------------------------------------
def _legacy_csv_rows():
    """rank -> [(step, computation, communication_alone, receive_alone, collective_alone)] and the file
    name's (stages, ranks), read with the csv module (the last row is the writer's average: left out)."""
    out, shape = {}, None
    for path in sorted((DATA / LEGACY).glob("ascend_cluster_analyse_pipeline-parallel_*.csv")):
        stages, size, rank = map(int, re.search(r"_(\d+)_(\d+)_(\d+)\.csv$", path.name).groups())
        shape = (stages, size)
        rows = list(csv.DictReader(path.open()))[:-1]
        out[str(rank)] = [(i + 1, float(r["computation_time"]), float(r["communication_alone_time"]),
                           float(r["receive_alone_time"]), float(r["collective_communication_alone_time"]))
                          for i, r in enumerate(rows)]
    return out, shape


def test_legacy_pipeline_rows_equal_the_pipeline_parallel_csv():
    cluster = _legacy()
    files, (n, size) = _legacy_csv_rows()
    frame = pipeline_bubbles(cluster)
    stages, origin = pipeline_stages(cluster)
    assert stages == {s: [str(r) for r in range(size) if r // (size // n) == s] for s in range(n)} == \
        {0: ["0", "1"], 1: ["2", "3"]}
    assert origin == "ascend_cluster_analyse_pipeline-parallel_2_4 file name"
    assert len(frame) == sum(len(v) for v in files.values())
    for rank, rows in files.items():
        got = frame[frame["rank"] == rank].set_index("step")
        assert (got["stage"] == int(rank) // 2).all()
        for step, comp, alone, recv, coll in rows:
            r = got.loc[step]
            assert r["step_ms"] == pytest.approx(comp + alone, abs=1e-9)
            assert r["busy_ms"] == pytest.approx(comp) and r["p2p_ms"] == pytest.approx(recv)
            assert r["collective_ms"] == pytest.approx(coll) and np.isnan(r["free_ms"])
            assert r["idle_ms"] == pytest.approx(recv)
            assert r["bubble_ratio"] == pytest.approx(recv / (comp + alone))
    assert frame["theoretical_ratio"].isna().all() and frame["gap_ms"].isna().all()
    assert frame["source"].str.startswith("ascend_cluster_analyse_pipeline-parallel_*.csv").all()


def test_legacy_conclusion_the_first_stage_waits_a_third_of_its_step():
    files, _ = _legacy_csv_rows()
    by_stage = {0: [r for k in ("0", "1") for r in files[k]], 1: [r for k in ("2", "3") for r in files[k]]}
    med_idle = {s: statistics.median(r[3] for r in rows) for s, rows in by_stage.items()}
    med_ratio = {s: statistics.median(r[3] / (r[1] + r[2]) for r in rows) for s, rows in by_stage.items()}
    med_step = {s: statistics.median(r[1] + r[2] for r in rows) for s, rows in by_stage.items()}
    theory = 1 / (4 + 1)  # 2 stages, 4 micro-batches (4 Receive ops a step in each rank's step trace)
    digest = pipeline_summary(pipeline_bubbles(_legacy(), micro_batches=4))
    worst = digest["worst"]
    assert worst["stage"] == 0 and worst["ranks"] == ["0", "1"]
    assert worst["idle_ms"] == pytest.approx(med_idle[0]) and worst["bubble_ratio"] == pytest.approx(med_ratio[0])
    assert 0.30 < med_ratio[0] < 0.33 and med_ratio[1] < 0.02  # the last stage barely waits
    assert digest["bubble_ratio"] == pytest.approx((med_ratio[0] + med_ratio[1]) / 2)
    assert digest["theoretical"]["ratio"] == pytest.approx(theory)
    gaps = {s: statistics.median(r[3] - theory * (r[1] + r[2]) for r in rows) for s, rows in by_stage.items()}
    assert digest["gap_ms"] == pytest.approx((gaps[0] + gaps[1]) / 2)
    assert [s["gap_ms"] for s in digest["stages"]] == pytest.approx([gaps[0], gaps[1]])
    assert worst["gap_ms"] == pytest.approx(gaps[0]) and 19 < gaps[0] < 21  # stage 0 idles 20 ms beyond the schedule
    assert f"(stage 0: {gaps[0]:+,.3f} ms)" in digest["finding"]
    assert digest["finding"].startswith(
        f"Stage 0 (ranks 0, 1) idles most: {med_idle[0]:,.3f} ms a step (median; bubble ratio "
        f"{med_ratio[0] * 100:.1f} % of its median {med_step[0]:,.3f} ms step)")
    assert "(1F1B, 2 stages, 4 micro-batches) is 20.0 %" in digest["finding"]


# -- real 16-rank msprof-analyze output: stages from the p2p groups, the Bubble column -----------------------
def test_cluster_analysis_16rank_stages_from_p2p_groups_and_the_bubble_column():
    root = DATA / "npu/cluster_analysis_16rank"
    groups = json.loads((root / "communication_group.json").read_text())["p2p"]
    rows = [r for r in csv.DictReader((root / "cluster_step_trace_time.csv").open()) if r["Type"] == "rank"]
    cluster = load_quietly("npu/cluster_analysis_16rank")
    frame = pipeline_bubbles(cluster)
    stages, origin = pipeline_stages(cluster)
    assert origin == "p2p groups of communication_group.json"
    assert stages == {i: [str(r) for r in sorted(g)] for i, g in enumerate(sorted(groups, key=min))}
    for r in rows:
        got = frame[frame["rank"] == r["Index"]].iloc[0]
        bubble, exposed = float(r["Bubble"]) / 1000, float(r["Communication(Not Overlapped)"]) / 1000
        idle = bubble + float(r["Free"]) / 1000
        step = float(r["Computing"]) / 1000 + exposed + float(r["Free"]) / 1000
        assert got["p2p_ms"] == pytest.approx(bubble) and got["idle_ms"] == pytest.approx(idle)
        assert got["collective_ms"] == pytest.approx(exposed - bubble)
        assert got["bubble_ratio"] == pytest.approx(idle / step, rel=1e-6)
    digest = pipeline_summary(frame)
    receivers = [r for r in rows if float(r["Bubble"]) > 0]
    assert {r["Index"] for r in receivers} == {str(x) for x in max(groups, key=min)}  # the stage that receives
    assert digest["worst"]["stage"] == 1
    assert digest["worst"]["idle_ms"] == pytest.approx(
        statistics.median((float(r["Bubble"]) + float(r["Free"])) / 1000 for r in receivers))


# -- not pipeline-parallel; the faces (the summary and ClusterView: tests/test_breakdown.py, test_cluster.py) ------
def test_a_job_without_stages_says_why():
    frame = pipeline_bubbles(load_quietly("npu/ascend_pt_text_2rank"))
    assert frame.empty and list(frame.columns) == ANALYSIS_FRAMES["pipeline_bubbles"].column_names
    assert "no p2p groups" in frame.attrs["reason"]
    assert pipeline_summary(frame) is None


def test_sql_and_the_pipeline_section_show_the_analysis_numbers(gpipe):
    from nbprofiler.views.pipeline import pipeline_layout
    cluster = _legacy()
    digest = pipeline_summary(pipeline_bubbles(cluster))
    got = cluster.sql("SELECT stage, median(idle_ms) AS idle FROM pipeline_bubbles GROUP BY stage ORDER BY stage")
    assert got["idle"].tolist() == pytest.approx([s["idle_ms"] for s in digest["stages"]])
    section = pipeline_layout(cluster)
    ratio = section.select_one({"name": "cluster_pipeline_ratio_src"})
    assert ratio.data["ratio"] == pytest.approx([s["bubble_ratio"] for s in digest["stages"]])
    assert section.select_one({"name": "cluster_pipeline_chart"}) is None  # no timelines: the ratio bars only
    assert html.escape(digest["finding"]) in section.select_one({"name": "cluster_pipeline_finding"}).text
    timed = pipeline_layout(gpipe, stages=_stages(), micro_batches=M, schedule="gpipe")
    assert timed.select_one({"name": "cluster_pipeline_chart"}) is not None
    assert timed.select_one({"name": "cluster_pipeline_theory"}).location == pytest.approx(3 / 11)
    assert timed.select_one({"name": "cluster_pipeline_chart"}).title.text.startswith("Pipeline stages over step")
    assert "(GPipe, 4 stages, 8 micro-batches) is 27.3 %" in timed.select_one({"name": "cluster_pipeline_finding"}).text
    computed = timed.select_one({"name": "cluster_pipeline_compute_src"}).data
    frame = pipeline_bubbles(gpipe, stages=_stages(), micro_batches=M, schedule="gpipe")
    busy = frame[frame["step"] == frame["step"].min()].groupby("stage")["busy_ms"].first()
    lengths = np.asarray(computed["end_ms"]) - np.asarray(computed["start_ms"])
    assert lengths.sum() == pytest.approx(busy.sum())
