"""The per-rank step breakdown (`nbprofiler.analysis.breakdown`) on real multi-rank data: the parts add up to
the step, and every part equals the number computed here from the files themselves (pandas/json on the text
files; sqlite3 on a copy of a database)."""
from __future__ import annotations

import functools
import json
import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest
from bokeh.embed import file_html
from bokeh.resources import INLINE

from nbprofiler.analysis.breakdown import PARTS, rank_breakdown, rank_medians, union_length
from nbprofiler.schema import ANALYSIS_FRAMES

from .conftest import DATA, load_quietly

DATASETS = ["npu/ascend_pt_text_2rank", "npu/ascend_pt_db_2rank", "npu/cluster_analysis_16rank",
            "npu/cluster_8rank", "legacy/cluster_4rank_pipeline"]
WAIT_NAMES = {"Notify Wait"}
MOVE_NAMES = {"SDMA", "RDMA", "Memcpy", "Reduce Inline"}


@functools.cache
def _loaded(name):
    cluster = load_quietly(name)
    return name, cluster, rank_breakdown(cluster)


@pytest.fixture(params=DATASETS)
def loaded(request):
    return _loaded(request.param)


def test_the_parts_add_up_to_the_step_on_every_dataset(loaded):
    name, cluster, bd = loaded
    assert list(bd.columns) == ANALYSIS_FRAMES["rank_breakdown"].column_names
    assert sorted(bd["rank"].unique(), key=int) == cluster.ranks and len(bd) > 0
    parts = bd[list(PARTS)].fillna(0.0).sum(axis=1)
    np.testing.assert_allclose(parts, bd["step_ms"], rtol=0, atol=1e-6)
    split = bd["wait_ms"].notna()
    np.testing.assert_allclose(bd.loc[split, "wait_ms"] + bd.loc[split, "transit_ms"],
                               bd.loc[split, "comm_exposed_ms"], atol=1e-6)
    assert (bd[["step_ms", "comm_exposed_ms"]].fillna(0) >= 0).all().all()
    assert (bd["computing_ms"] >= 0).all(), "Computing counts the overlapped communication: never below it"
    assert bd["source"].str.len().gt(0).all()


@pytest.mark.parametrize("dataset", ["npu/ascend_pt_text_2rank"])
def test_text_2rank_equals_step_trace_time_and_the_trace_tasks(dataset):
    name, cluster, bd = _loaded(dataset)
    for rank in cluster.ranks:
        root = DATA / name / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        csv = pd.read_csv(root / "step_trace_time.csv").set_index("Step") / 1000.0
        got = bd[bd["rank"] == rank].set_index("step")
        for step, f in csv.iterrows():
            g = got.loc[step]
            assert g["computing_ms"] == pytest.approx(f["Computing"] - f["Overlapped"])
            assert g["comm_overlapped_ms"] == pytest.approx(f["Overlapped"])
            assert g["comm_exposed_ms"] == pytest.approx(f["Communication(Not Overlapped)"])
            assert g["free_ms"] == pytest.approx(f["Free"]) and g["host_bound_ms"] == pytest.approx(f["Preparing"])
            assert g["step_ms"] == pytest.approx(f["Computing"] + f["Communication(Not Overlapped)"] + f["Free"]
                                                 + f["Preparing"])
        # wait share from the trace's HCCL tasks, one step in this run: union of Notify Wait vs data moves
        events = [e for e in json.loads((root / "trace_view.json").read_text()) if e.get("ph") == "X"]
        streams = {(e["pid"], e["tid"]) for e in events if e["name"] in WAIT_NAMES}
        on = [e for e in events if (e["pid"], e["tid"]) in streams]

        def cover(names):
            s = np.array([float(e["ts"]) for e in on if e["name"] in names])
            return union_length(s, s + np.array([float(e["dur"]) for e in on if e["name"] in names]))
        wait, move = cover(WAIT_NAMES), cover(MOVE_NAMES)
        assert wait > 0 and move > 0
        g = got.iloc[0]
        assert g["wait_share"] == pytest.approx(wait / (wait + move), rel=1e-4)
        assert g["wait_ms"] == pytest.approx(g["comm_exposed_ms"] * wait / (wait + move), rel=1e-4)
        assert "step_trace_time.csv" in g["source"] and "Notify Wait" in g["source"]


@pytest.mark.parametrize("dataset", ["npu/ascend_pt_db_2rank"])
def test_db_2rank_equals_the_database_copy(dataset, tmp_path):
    name, cluster, bd = _loaded(dataset)
    for rank in cluster.ranks:
        root = DATA / name / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        got = bd[bd["rank"] == rank].set_index("step")
        shutil.copy(root / "analysis.db", tmp_path / "analysis.db")
        with sqlite3.connect(tmp_path / "analysis.db") as con:
            st = pd.read_sql("SELECT * FROM StepTraceTime", con)
        for f in st.itertuples():
            g = got.loc[int(f.step)]
            assert g["computing_ms"] == pytest.approx((f.computing - f.overlapped) / 1000)
            assert g["comm_overlapped_ms"] == pytest.approx(f.overlapped / 1000)
            assert g["comm_exposed_ms"] == pytest.approx(f.communication_not_overlapped / 1000)
            assert g["free_ms"] == pytest.approx(f.free / 1000)
            assert g["host_bound_ms"] == pytest.approx(f.preparing / 1000)
        db = next(root.glob("ascend_pytorch_profiler_*.db"))
        shutil.copy(db, tmp_path / "prof.db")
        with sqlite3.connect(tmp_path / "prof.db") as con:
            tasks = pd.read_sql("SELECT s.value AS name, t.startNs AS s, t.endNs AS e FROM COMMUNICATION_TASK_INFO c "
                                "JOIN TASK t ON t.globalTaskId = c.globalTaskId JOIN STRING_IDS s ON s.id = t.taskType",
                                con)

        def cover(names):
            t = tasks[tasks["name"].isin(names)]
            return union_length(t["s"].to_numpy(float), t["e"].to_numpy(float))
        wait, move = cover(WAIT_NAMES), cover(MOVE_NAMES)
        assert wait > 0 and move > 0
        assert got.iloc[0]["wait_share"] == pytest.approx(wait / (wait + move), rel=1e-4)


@pytest.mark.parametrize("dataset", ["npu/cluster_analysis_16rank", "npu/cluster_8rank"])
def test_cluster_analysis_files_equal_the_csv_and_the_communication_json(dataset):
    name, cluster, bd = _loaded(dataset)
    csv = pd.read_csv(DATA / name / "cluster_step_trace_time.csv")
    csv = csv[csv["Type"] == "rank"]
    for f in csv.itertuples(index=False):
        rank = str(int(f.Index))
        rows = bd[bd["rank"] == rank]
        g = rows.iloc[0] if pd.isna(f.Step) else rows.set_index("step").loc[int(f.Step)]
        assert g["computing_ms"] == pytest.approx((f.Computing - f.Overlapped) / 1000)
        assert g["comm_overlapped_ms"] == pytest.approx(f.Overlapped / 1000)
        assert g["comm_exposed_ms"] == pytest.approx(f[4] / 1000)  # Communication(Not Overlapped)
        assert g["free_ms"] == pytest.approx(f.Free / 1000)
        assert np.isnan(g["host_bound_ms"]), "cluster_step_trace_time.csv has no Preparing"
        assert g["step_ms"] == pytest.approx((f.Computing + f[4] + f.Free) / 1000)
    wait, transit = {}, {}
    for group in json.loads((DATA / name / "cluster_communication.json").read_text()).values():
        for ops in group.values():
            for op_name, op in ops.items():
                if op_name == "Total Op Info":  # the sum of the ops beside it
                    continue
                for rank, info in op.items():
                    t = info["Communication Time Info"]
                    wait[rank] = wait.get(rank, 0.0) + t["Wait Time(ms)"]
                    transit[rank] = transit.get(rank, 0.0) + t["Transit Time(ms)"]
    for rank in cluster.ranks:
        g = bd[bd["rank"] == rank].iloc[0]
        if rank in wait and wait[rank] + transit[rank] > 0:
            assert g["wait_share"] == pytest.approx(wait[rank] / (wait[rank] + transit[rank]))
            assert g["wait_ms"] == pytest.approx(g["comm_exposed_ms"] * g["wait_share"])
        else:
            assert np.isnan(g["wait_ms"]) and "no file" in g["source"]


@pytest.mark.parametrize("dataset", ["legacy/cluster_4rank_pipeline"])
def test_legacy_pipeline_equals_the_step_trace_cluster_analyse_and_hccl_files(dataset):
    name, cluster, bd = _loaded(dataset)
    root = DATA / name
    for rank in cluster.ranks:
        st = pd.read_csv(root / f"step_trace_raw_{rank}_detail_time.csv")
        st = st[st["step_num"].astype(str) != "-"]
        ca = pd.read_csv(next(root.glob(f"ascend_cluster_analyse_pipeline-parallel_*_{rank}.csv")))
        ca = ca.iloc[:-1]  # the last row is the file's average
        hccl = pd.read_csv(root / f"hccl_raw_{rank}.csv")
        hccl = hccl[hccl["step_num"].astype(str) != "-"]
        hccl.index = hccl["step_num"].astype(int)
        got = bd[bd["rank"] == rank].set_index("step")
        for i, f in enumerate(st.itertuples(index=False)):
            step = int(f.step_num)
            g = got.loc[step]
            # the reader keeps ms to 4 decimals (0.1 µs), as MindInsight shows them
            assert g["step_ms"] == pytest.approx(f.total / 1e5, abs=1e-4)
            assert g["host_bound_ms"] == pytest.approx(f.iteration_interval / 1e5, abs=1e-4)
            alone = float(ca.iloc[i, 1])  # communication_alone_time, read by position as MindInsight does
            assert g["comm_exposed_ms"] == pytest.approx(alone)
            # computing is the rest; it differs from the file's computation_time minus the step interval by at
            # most the gap between the two files' step times
            gap = abs(f.total / 1e5 - (float(ca.iloc[i, 0]) + alone))
            assert abs(g["computing_ms"] - (float(ca.iloc[i, 0]) - f.iteration_interval / 1e5)) \
                <= gap + f.iteration_interval / 1e5 + 1e-6
            if step in hccl.index:
                h = hccl.loc[step]
                share = h["wait_cost"] / (h["wait_cost"] + h["communication_cost"])
                assert g["wait_ms"] == pytest.approx(alone * share)
                assert g["transit_ms"] == pytest.approx(alone * (1 - share))
            else:
                assert np.isnan(g["wait_ms"])


def test_summary_and_sql_agree_with_the_frame(loaded):
    name, cluster, bd = loaded
    whole = cluster.summary()["cluster"]
    summary = whole["breakdown"]
    json.dumps(whole)
    # the same summary's pipeline bubbles: the analysis's digest, or None and why (not pipeline-parallel)
    from nbprofiler.analysis.pipeline import pipeline_bubbles, pipeline_summary
    bubbles = pipeline_bubbles(cluster)
    assert whole["pipeline_bubbles"] == pipeline_summary(bubbles)
    assert whole["pipeline_bubbles_unavailable"] == (bubbles.attrs["reason"] or None)
    assert (whole["pipeline_bubbles"] is None) == (name not in ("legacy/cluster_4rank_pipeline",
                                                                "npu/cluster_analysis_16rank"))
    med = rank_medians(bd).set_index("rank")
    assert [r["rank"] for r in summary["ranks"]] == med.index.tolist()
    for r in summary["ranks"]:
        for c in ("step_ms", *PARTS, "wait_ms", "transit_ms"):
            want = med.at[r["rank"], c]
            assert (r[c] is None and pd.isna(want)) or r[c] == pytest.approx(want)
    for c in ("step_ms", *PARTS):  # the medians over each rank's steps, straight from the frame
        direct = bd.groupby("rank")[c].median()
        assert all((r[c] is None and pd.isna(direct[r["rank"]])) or r[c] == pytest.approx(direct[r["rank"]])
                   for r in summary["ranks"])
    slow = summary["largest"]
    assert slow["rank"] == med.index[0] and slow["part"] in PARTS
    assert slow["ms"] == max(med.loc[slow["rank"], list(PARTS)].dropna())
    assert summary["finding"].startswith(f"On the slowest rank ({slow['rank']}")
    got = cluster.sql("SELECT rank, step, step_ms, comm_exposed_ms, wait_ms FROM rank_breakdown ORDER BY rank, step")
    want = bd[["rank", "step", "step_ms", "comm_exposed_ms", "wait_ms"]].sort_values(["rank", "step"],
                                                                                   ignore_index=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_the_cluster_page_shows_the_breakdown(loaded):
    from nbprofiler.views.cluster import ClusterView, breakdown_heatmap
    name, cluster, bd = loaded
    view = ClusterView(cluster)
    fig = view.layout.select_one({"name": "cluster_breakdown"})
    src = view.layout.select_one({"name": "cluster_breakdown_src"})
    assert fig is not None and src is not None
    med = rank_medians(bd)
    shown = pd.Series(src.data["step_ms"], index=src.data["rank"])
    assert set(shown.index) == set(med["rank"])
    assert shown.to_dict() == pytest.approx(med.set_index("rank")["step_ms"].to_dict())
    if view.diagnosis.groups:  # bars grouped as the diagnosis groups the ranks, slowest first inside a group
        factors = list(fig.x_range.factors)
        for g in view.diagnosis.groups:
            mine = [i for i, (label, _) in enumerate(factors) if label == (g.named or g.label)]
            assert {factors[i][1] for i in mine} == {str(r) for r in g.ranks}
            assert mine == list(range(mine[0], mine[-1] + 1))
            steps = [shown[factors[i][1]] for i in mine]
            assert steps == sorted(steps, reverse=True)
    picker = view.layout.select_one({"name": "cluster_breakdown_step"})
    assert picker.options[0] == "median" and len(picker.options) == 1 + bd["step"].nunique()
    file_html(view.layout, INLINE, name)
    # the aggregated form for many ranks: every rank a row, each part its share of the rank's median step
    heat = breakdown_heatmap(bd)
    heat_src = heat.select_one({"name": "cluster_breakdown_heat_src"})
    assert set(heat_src.data["rank"]) == set(med["rank"])
    assert all(0 <= v <= 1 + 1e-9 for v in heat_src.data["share"])


def test_a_large_cluster_does_not_read_every_timeline_for_the_wait_split(monkeypatch):
    """Above TIMELINE_SPLIT_MAX_RANKS the summary's breakdown does not parse each rank's trace: the exposed
    communication stays whole, and the source says why; asked for, the split is made as before."""
    from nbprofiler.analysis import breakdown
    monkeypatch.setattr(breakdown, "TIMELINE_SPLIT_MAX_RANKS", 1)
    cluster = load_quietly("npu/ascend_pt_text_2rank")
    plain = rank_breakdown(cluster)
    assert plain["wait_ms"].isna().all() and plain["comm_exposed_ms"].notna().all()
    assert plain["source"].str.contains("not split").all()
    assert not any("timeline" in p._cache for p in cluster.profiles.values())  # no trace was parsed for it
    split = rank_breakdown(cluster, timelines=True)
    assert split["wait_ms"].notna().all()
    np.testing.assert_allclose(split["wait_ms"] + split["transit_ms"], split["comm_exposed_ms"])
