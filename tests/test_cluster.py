"""Cluster analysis on the real 4-rank legacy pipeline cluster and the 8-rank msprof-analyze output."""
from __future__ import annotations

import warnings

import pandas as pd
import pytest
from bokeh.embed import file_html
from bokeh.resources import INLINE

import nbprofiler
from nbprofiler.analysis import cluster as C
from nbprofiler.parallel import gather_rank_summaries, map_ranks
from nbprofiler.synthetic_cluster import write_legacy_cluster
from nbprofiler.views.cluster import ClusterView, cluster_layout

from .conftest import DATA, expected


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbprofiler.load(path)


@pytest.fixture(scope="module")
def pipeline4():
    cl = _load(DATA / "legacy/cluster_4rank_pipeline")
    return cl, C.rank_summary(cl, engine="serial")


@pytest.fixture(scope="module")
def npu8():
    cl = _load(DATA / "npu/cluster_8rank")
    return cl, C.rank_summary(cl, engine="serial")


def test_rank_averages_match_mindinsight(pipeline4):
    cl, s = pipeline4
    steps = C.rank_steps(s)
    assert steps.index.tolist() == ["0", "1", "2", "3"] and (steps["steps"] == 5).all()
    assert (steps["average_source"] == "file").all()
    for dev in ("0", "3"):
        summ = expected(f"legacy__cluster_4rank_pipeline__device{dev}")["step_trace"]["summary"]
        assert steps.at[dev, "total_ms"] == summ["total_time"]
        assert steps.at[dev, "iteration_interval_ms"] == summ["iteration_interval"]
        assert steps.at[dev, "fp_and_bp_ms"] == summ["fp_and_bp"] and steps.at[dev, "tail_ms"] == summ["tail"]
    m = C.rank_stage_matrix(s)
    assert list(m.columns) == ["iteration_interval_ms", "fp_and_bp_ms", "tail_ms"] and m.shape == (4, 3)


def test_mindinsight_cluster_proposers(pipeline4):
    cl, s = pipeline4
    mi = expected("legacy__cluster_4rank_pipeline__device0")["cluster"]["parallel_proposer"]
    prop = C.step_interval_proposal(s)
    assert (prop["rank_id"], prop["val"], prop["percent"]) == (str(mi["step_interval"]["rank_id"]),
                                                               mi["step_interval"]["val"], mi["step_interval"]["percent"])
    flops = C.pipeline_flops_imbalance(cl)
    ref = mi["parallel_strategy"]["pipeline_parallel_flops"]
    assert (flops["stage"], flops["val"], flops["percent"]) == (ref["stage"], ref["val"], ref["percent"])


def test_slow_ranks_and_steps(pipeline4):
    cl, s = pipeline4
    slow = C.slow_ranks(s)
    # the four averages differ by < 0.04 ms: nothing is an outlier; the slowest (rank 1) is listed anyway
    assert not slow["flagged"].any()
    assert slow.iloc[0]["rank"] == "1" and slow.iloc[0]["stage"] == "total_ms"
    assert C.slowest_rank(s) == "1"
    steps = C.slow_steps(s)
    # step 1 is the warm-up of ranks 1-3: 2376 ms on rank 3 against a median step of ~179 ms
    worst = steps.iloc[0]
    assert (worst["rank"], worst["step"], worst["stage"]) == ("3", 1, "fp_and_bp_ms")
    raw = cl["3"].step_trace.set_index("step")
    assert worst["total_ms"] == raw.at[1, "total_ms"] == pytest.approx(2376.1325)
    assert worst["median_ms"] == pytest.approx(raw["total_ms"].median())
    assert {("1", 1), ("2", 1), ("3", 1)} <= set(zip(steps["rank"], steps["step"]))


def test_robust_z():
    z = C.robust_z(pd.Series([10.0, 11.0, 9.0, 10.0, 30.0]))
    # median 10, MAD 1 -> 0.6745 * 20
    assert z.iloc[-1] == pytest.approx(0.6745 * 20) and z.iloc[0] == 0
    assert (C.robust_z(pd.Series([5.0, 5.0, 5.0])) == 0).all()


def test_communication_matrix_legacy(pipeline4):
    cl, _ = pipeline4
    m = C.communication_matrix(cl)
    assert set(m["transport"]) == {"SDMA"}
    row = m[(m["src"] == "1") & (m["dst"] == "0")].iloc[0]
    links = cl["0"].hccl_links
    sel = links[(links["src"] == 1) & (links["dst"] == 0)]
    # summed over the profiled steps of the rank that recorded the most time for this link
    assert row["time_ms"] >= sel["time_ms"].sum() - 1e-9
    assert row["bandwidth"] == pytest.approx(row["size"] / row["time_ms"])


def test_npu8_cluster(npu8):
    cl, s = npu8
    steps = C.rank_steps(s)
    assert steps.index.tolist() == [str(i) for i in range(8)]
    assert steps.at["5", "communication_not_overlapped_ms"] == pytest.approx(756.37486)
    assert "stage_ms" in steps.columns and "bubble_ms" in steps.columns
    assert s["stages"] == ["computing_ms", "communication_not_overlapped_ms", "free_ms"]
    # rank 0 has the longest step (1754.6 ms = its Stage); not an outlier at 3.5 robust SDs
    assert C.slowest_rank(s) == "0"
    slow = C.slow_ranks(s)
    assert not slow["flagged"].any() and slow.iloc[0]["value_ms"] == pytest.approx(1754.646, abs=1e-3)
    bw = C.link_bandwidth(cl)
    assert set(bw["rank"]) == {"0", "1"} and set(bw["transport"]) == {"HCCS", "PCIE", "SDMA"}
    h = bw[(bw["rank"] == "0") & (bw["transport"] == "HCCS")].iloc[0]
    assert h["bandwidth_gbps"] == pytest.approx(h["size_mb"] / h["transit_ms"]) and h["ops"] == 2
    comm = C.communication_by_rank(cl).set_index("rank")
    assert comm.at["1", "idle_ms"] == pytest.approx(20.782182390624996 + 17.367396, rel=1e-6)


def test_engines_agree(tmp_path):
    root = write_legacy_cluster(tmp_path / "c", DATA, ranks=4, steps=12)
    cl = _load(root)
    runs = [p.run for p in cl]
    serial = gather_rank_summaries(runs, engine="serial")
    procs = gather_rank_summaries(runs, engine="processes", max_workers=2)
    pd.testing.assert_frame_equal(serial["steps"], procs["steps"])
    # the synthetic straggler (last rank) is found
    assert C.slowest_rank(serial) == "3"
    assert map_ranks(str, ["a"], engine="serial") == ["a"]
    with pytest.raises(ValueError):
        map_ranks(str, [], engine="threads")


@pytest.mark.slow
def test_dask_engine(tmp_path):
    pytest.importorskip("dask")
    root = write_legacy_cluster(tmp_path / "c", DATA, ranks=3, steps=6)
    cl = _load(root)
    out = C.rank_summary(cl, engine="dask")
    assert C.rank_steps(out).index.tolist() == ["0", "1", "2"]


def test_cluster_view_html(pipeline4, npu8):
    for cl, s in (pipeline4, npu8):
        html = file_html(cluster_layout(s), INLINE, "cluster")
        for name in ("cluster_ranks_src", "cluster_heatmap_src", "cluster_slow_src", "cluster_slowest_src"):
            assert name in html
    view = ClusterView(pipeline4[0], engine="serial")
    assert view.layout.name == "cluster_layout" and C.slowest_rank(view.summary) == "1"


@pytest.mark.slow
def test_benchmark_quick_mode():
    """benchmarks/bench_cluster.py --quick runs every engine and they agree on the straggler."""
    import subprocess
    import sys
    from .conftest import REPO
    out = subprocess.run([sys.executable, str(REPO / "benchmarks/bench_cluster.py"), "--quick", "--ranks", "4"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "x serial" in out.stdout and "legacy       4 serial" in out.stdout
