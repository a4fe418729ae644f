"""Cluster analysis on the real 4-rank legacy pipeline cluster and the 8-rank msprof-analyze output."""
from __future__ import annotations

import dataclasses
import multiprocessing
import threading
import warnings
from html import escape
from pathlib import Path

import pandas as pd
import pytest
from bokeh.embed import file_html
from bokeh.layouts import column
from bokeh.resources import INLINE

import nbprofiler
from nbprofiler.analysis import cluster as C
from nbprofiler.errors import ProfilerDataWarning
from nbprofiler.analysis.cluster_reduce import gather_rank_summaries
from nbprofiler.model.parallel import MIN_RANKS_FOR_PROCESSES, choose_engine, chunked, map_ranks
from nbprofiler.synthetic.cluster import write_legacy_cluster
from nbprofiler.views.cluster import ClusterView, cluster_layout

from .conftest import DATA, expected, load_quietly


@pytest.fixture(scope="module")
def pipeline4():
    cl = load_quietly(DATA / "legacy/cluster_4rank_pipeline")
    return cl, C.rank_summary(cl, engine="serial")


@pytest.fixture(scope="module")
def npu8():
    cl = load_quietly(DATA / "npu/cluster_8rank")
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
    # cluster_link: the 0->1 SDMA link 74.26 % below the mean SDMA bandwidth
    links = C.slow_links(cl)
    named = links[links["slowest"]]
    [ref] = mi["cluster_link"]
    assert len(named) == 1
    link = named.iloc[0]
    assert (int(link["src"]), int(link["dst"]), link["transport"]) == (ref["src_rank"], ref["des_rank"], ref["link_type"])
    assert round(link["bandwidth"], 4) == ref["val"] and round(link["below_mean_pct"], 2) == ref["percent"]
    # pipeline communication between stages (receive) and within the worst stage
    comm = C.pipeline_communication(cl)
    between = mi["parallel_strategy"]["pipeline_parallel_between_stage"]
    within = mi["parallel_strategy"]["pipeline_parallel_within_stage"]
    assert round(comm["between_stage_pct"], 2) == between["val"] and between["threshold"] == 100 * C.STAGE_COMMUNICATION_FRACTION
    assert comm["worst_stage"] == within["stage"] and round(comm["worst_stage_pct"], 2) == within["val"]


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
    root = write_legacy_cluster(tmp_path / "c", DATA, ranks=6, steps=12)
    cl = load_quietly(root)
    runs = [p.run for p in cl]
    serial = gather_rank_summaries(runs, engine="serial")
    procs = gather_rank_summaries(runs, engine="processes", max_workers=2)
    for key in ("steps", "step_totals", "op_types"):
        pd.testing.assert_frame_equal(serial[key], procs[key])
    assert serial["stages"] == procs["stages"] == ["iteration_interval_ms", "fp_and_bp_ms", "tail_ms"]
    assert serial["steps"]["rank"].tolist() == [str(i) for i in range(6)] and len(serial["step_totals"]) == 6 * 12
    # the synthetic straggler (last rank) is found, by its step interval: 3x the others' + 3 ms
    assert C.slowest_rank(serial) == "5"
    flagged = C.slow_ranks(serial)
    assert ("5", "iteration_interval_ms") in set(zip(flagged.loc[flagged["flagged"], "rank"],
                                                      flagged.loc[flagged["flagged"], "stage"]))
    # its file average (steps 2..12, as the writer computes it) is what the rank row shows
    avg = cl["5"].step_trace_average
    assert serial["steps"].set_index("rank").at["5", "total_ms"] == avg["total_ms"]
    assert map_ranks(str, ["a", "b", "c"], engine="processes", max_workers=2) == ["a", "b", "c"]
    assert map_ranks(str, ["a"], engine="serial") == ["a"]
    with pytest.raises(ValueError):
        map_ranks(str, [], engine="threads")


def test_default_engine_rule(monkeypatch):
    assert choose_engine(MIN_RANKS_FOR_PROCESSES - 1) == "serial"
    monkeypatch.setattr("nbprofiler.model.parallel.usable_cpus", lambda: 2)
    assert choose_engine(MIN_RANKS_FOR_PROCESSES) == "processes" and choose_engine(512) == "processes"
    monkeypatch.setattr("nbprofiler.model.parallel.usable_cpus", lambda: 1)
    assert choose_engine(512) == "serial"  # one CPU: workers only add start-up and pickling
    assert choose_engine(3, "dask") == "dask"
    with pytest.raises(ValueError, match="engine must be one of"):
        choose_engine(3, "threads")


def test_default_engine_times_a_first_chunk_before_starting_a_pool(tmp_path, monkeypatch):
    """engine=None reduces one chunk here, then starts a pool only when cores were free meanwhile and
    the rest is worth it; either way the result equals the serial one, in rank order."""
    from nbprofiler.model import parallel
    root = write_legacy_cluster(tmp_path / "c", DATA, ranks=MIN_RANKS_FOR_PROCESSES, steps=4)
    runs = [p.run for p in load_quietly(root)]
    serial = gather_rank_summaries(runs, engine="serial")
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)
    for t in threading.enumerate():
        if t.name == "nbprofiler-pool-feeder":
            t.join()  # an earlier test's pool, still starting, would note its start-up over the one set here
    monkeypatch.setattr(parallel, "last_pool_start_s", 0.0)  # a pool that starts at once
    pools = []
    real = parallel._map_alongside_pool
    monkeypatch.setattr(parallel, "_map_alongside_pool", lambda *a: pools.append(a[1:]) or real(*a))
    monkeypatch.setattr(parallel, "free_cores_between", lambda *a: 0.1)  # another process has the other core
    busy = gather_rank_summaries(runs)
    assert parallel.last_decision["helpers"] == 0 and parallel.last_decision["free_cores"] == 0.1
    monkeypatch.setattr(parallel, "free_cores_between", lambda *a: 1.0)  # the other core idled
    pooled = gather_rank_summaries(runs)
    chunks = parallel.chunked(runs, 2)
    assert parallel.last_decision["ranks_left"] == len(runs) - len(chunks[0])
    assert len(pools) == 1 and pools[0][0] == chunks[1:] and pools[0][1] == 1  # one worker, every chunk but the first
    for got in (busy, pooled):
        for key in ("steps", "step_totals", "op_types"):
            pd.testing.assert_frame_equal(got[key], serial[key])


def test_a_first_pools_start_up_is_kept_for_the_next_process(tmp_path, monkeypatch):
    """The default engine reckons a process's first pool to start as fast as the last first pool measured on
    the machine (kept in the cache root), else `POOL_COLD_START_S`; a later pool of the same process does
    not replace that figure (it forks from the running server)."""
    import functools
    import time

    from nbprofiler.io import cache
    from nbprofiler.model import parallel

    def wait_for_feeders():
        for t in threading.enumerate():
            if t.name == "nbprofiler-pool-feeder":
                t.join()
    wait_for_feeders()  # an earlier test's pool, still starting, would note its start-up here
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    assert parallel.cold_start_s() == parallel.POOL_COLD_START_S  # nothing measured yet
    monkeypatch.setattr(parallel, "last_pool_start_s", None)  # this process has started no pool
    naps = functools.partial(parallel._apply_each, time.sleep)
    # 4 s of naps: the pool is up long before this process could take them all
    done = parallel.map_chunks(naps, [0.25] * 16, engine="processes")
    assert [out for chunk in done for out in chunk] == [None] * 16
    wait_for_feeders()
    measured = parallel.last_pool_start_s
    assert measured is not None and parallel.cold_start_s() == pytest.approx(measured)
    parallel.map_chunks(naps, [0.05] * 4, engine="processes")  # a second pool: warm, not kept
    wait_for_feeders()
    assert parallel.cold_start_s() == pytest.approx(measured)
    # what is not a start-up is not used
    for text in ("{", '{"seconds": -1}', '{"seconds": "soon"}', "[]"):
        (tmp_path / "cache" / parallel.COLD_START_FILE).write_text(text)
        assert parallel.cold_start_s() == parallel.POOL_COLD_START_S
    monkeypatch.setenv(cache.ENV, "off")
    assert parallel.cold_start_s() == parallel.POOL_COLD_START_S
    # a cache root inside profiler output is not written to: the user cache directory is used instead
    inside = tmp_path / "p" / "rank0_ascend_ms" / "cache"
    inside.mkdir(parents=True)
    monkeypatch.setenv(cache.ENV, str(inside))
    import platformdirs
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda *a, **k: str(tmp_path / "user"))
    parallel._keep_cold_start(0.5)
    assert not any(inside.iterdir()) and parallel.cold_start_s() == 0.5
    assert (tmp_path / "user" / parallel.COLD_START_FILE).is_file()


def test_pool_decision_from_rank_cost_free_cores_and_start_up():
    """Inputs as bench_cluster.py measures them on 2 cores: a legacy rank of 300 steps reduces in ~0.06 s
    (0.12 s with the machine busy), a first pool starts in ~1.2 s, a later one in ~0.03 s."""
    from nbprofiler.model.parallel import POOL_COLD_START_S, pool_estimate_s, pool_helpers
    # 64 ranks, the other core idle: the pool (one worker beside this process) pays even from cold
    assert pool_helpers(0.06, 56, free_cores=0.95, start_s=POOL_COLD_START_S, max_helpers=1) == 1
    # 16 ranks: the rest (0.84 s) is over before a cold pool would help; a warm one pays
    assert pool_helpers(0.06, 14, free_cores=0.95, start_s=POOL_COLD_START_S, max_helpers=1) == 0
    assert pool_helpers(0.06, 14, free_cores=0.95, start_s=0.03, max_helpers=1) == 1
    # a busy machine (a busy loop on the other core): serial however long the work
    assert pool_helpers(0.12, 56, free_cores=0.05, start_s=0.03, max_helpers=1) == 0
    assert pool_helpers(0.12, 504, free_cores=0.6, start_s=0.03, max_helpers=1) == 0
    # 8 CPUs of which ~3 idle: three workers, not seven
    assert pool_helpers(0.06, 504, free_cores=2.9, start_s=POOL_COLD_START_S, max_helpers=7) == 3
    # short work: serial with every core free when the pool starts cold, seven workers once it is warm
    assert pool_helpers(0.01, 20, free_cores=7.0, start_s=POOL_COLD_START_S, max_helpers=7) == 0
    assert pool_helpers(0.01, 20, free_cores=7.0, start_s=0.03, max_helpers=7) == 7
    # the estimate: 4 s of work, one helper from 1 s on -> both busy until 2.5 s; no gain once start >= work
    assert pool_estimate_s(4.0, 1, 1.0) == 2.5 and pool_estimate_s(0.8, 1, 1.2) == 0.8
    assert pool_estimate_s(4.0, 0, 0.0) == 4.0


def test_free_cores_from_cpu_ticks_else_the_load_average():
    from nbprofiler.model.parallel import cpu_ticks, free_cores_between, usable_cpus
    # 0.3 s on 2 CPUs (30 ticks each): this process kept one busy, the other idled 28 ticks
    assert free_cores_between((1000, 5000, 2), (1028, 5060, 2), usable=2) == pytest.approx(28 / 30)
    # a busy loop on the other core: 1 idle tick of 60
    assert free_cores_between((1000, 5000, 2), (1001, 5060, 2), usable=2) < 0.1
    # a window too short to read (4 ticks a CPU), or no /proc/stat: the load average decides
    assert free_cores_between((1000, 5000, 2), (1007, 5008, 2), usable=2, loadavg=0.3) == pytest.approx(0.7)
    assert free_cores_between(None, None, usable=2, loadavg=2.5) == 0.0
    assert free_cores_between(None, None, usable=8, loadavg=2.0) == 5.0
    ticks = cpu_ticks()
    if ticks is not None:  # Linux: one row per CPU this process may use
        assert ticks[2] == usable_cpus() and 0 <= ticks[0] <= ticks[1]


def test_processes_engine_does_every_chunk_here_when_the_pool_cannot_start(monkeypatch):
    """A pool that cannot start (here: its processes cannot be created) costs nothing but the attempt:
    this process does every chunk."""
    import time
    from nbprofiler.model import parallel
    attempts = []

    class NoProcesses:
        real = multiprocessing.get_context("spawn")

        def Process(self, *a, **k):
            attempts.append(1)
            raise OSError("no processes here")

        def __getattr__(self, name):
            return getattr(self.real, name)

    monkeypatch.setattr(parallel, "_process_context", lambda: NoProcesses())
    # 20 ranks of 20 ms: long enough for the feeder thread to try while this process works
    assert map_ranks(time.sleep, [0.02] * 20, engine="processes", max_workers=2) == [None] * 20
    assert attempts


def test_ranks_travel_in_ordered_chunks():
    ranks = list(range(10))
    chunks = chunked(ranks, workers=2)  # ~2 workers x 4 chunks each
    assert [r for c in chunks for r in c] == ranks and len(chunks) == 5 and {len(c) for c in chunks} == {2}
    assert chunked(list(range(3)), workers=8) == [[0], [1], [2]] and chunked([], 2) == []


def test_wide_step_trace_reads_only_step_columns_and_still_detects_a_cut_row(tmp_path):
    """The pipeline-parallel step trace has 1056 columns; the step frame skips the 1047 stream_* ones
    but must equal a full read, and a cut last row (no final newline) must still be reported."""
    from nbprofiler.io import legacy
    from nbprofiler.io._util import numeric, read_csv
    src = DATA / "legacy/cluster_4rank_pipeline/step_trace_raw_2_detail_time.csv"
    full = read_csv(src)
    assert len(full.columns) == 1056
    steps = load_quietly(DATA / "legacy/cluster_4rank_pipeline")["2"].step_trace
    assert steps["total_ms"].tolist() == legacy.ticks_to_ms(numeric(full, "total", src).iloc[:-1]).tolist()
    lines = src.read_bytes().splitlines(True)
    # the average row cut inside its stream_* columns: every step is kept, the average is reported lost
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / src.name).write_bytes(b"".join(lines[:-1]) + lines[-1][:200])
    prof = load_quietly(tmp_path / "a")
    with pytest.warns(ProfilerDataWarning, match="average row was cut off"):
        assert len(prof.step_trace) == 5
    # step 5 cut inside its tail value (all nine step columns present, one of them partial)
    (tmp_path / "b").mkdir()
    row5 = lines[5].decode()
    cut = len(",".join(row5.split(",")[:9])) - 2
    (tmp_path / "b" / src.name).write_bytes(b"".join(lines[:5]) + lines[5][:cut])
    prof = load_quietly(tmp_path / "b")
    with pytest.warns(ProfilerDataWarning, match="1 step dropped"):
        assert prof.step_trace["step"].tolist() == [1, 2, 3, 4]


def test_npu_op_types_from_two_columns_equal_the_kernels_frame(tmp_path):
    # kernel_details_591 ends with a newline: two columns are read; kernel_details_newest does not (its
    # last row may be cut anywhere), so its whole rows are read, still without building the kernels
    # frame (whose start times would need the trace's origin)
    for rel in ("npu/kernel_details_591", "npu/kernel_details_newest"):
        lean = load_quietly(DATA / rel)
        lean_types = lean.op_types
        assert "kernels" not in lean._cache
        full = load_quietly(DATA / rel)
        full.kernels  # noqa: B018
        pd.testing.assert_frame_equal(lean_types, full.op_types)
    types = load_quietly(DATA / "npu/kernel_details_591").op_types.set_index("op_type")
    # the two hcom_broadcast_ tasks of the real file: 308926.68 + 62.94 us
    assert types.at["hcom_broadcast_", "count"] == 2
    assert types.at["hcom_broadcast_", "total_time_us"] == pytest.approx(308989.62)
    assert types["count"].sum() == 591
    # cut inside the last row: whole rows are read, and the dropped row is reported with the types
    text = (DATA / "npu/kernel_details_591/kernel_details.csv").read_bytes()
    (tmp_path / "kernel_details.csv").write_bytes(text.rstrip(b"\n")[:-30])
    cut = load_quietly(tmp_path)
    with pytest.warns(ProfilerDataWarning):
        assert cut.op_types["count"].sum() == 590
    assert any("kernel_details.csv" in p.file for p in cut.problems)


@pytest.mark.slow
def test_dask_engine(tmp_path):
    pytest.importorskip("dask")
    root = write_legacy_cluster(tmp_path / "c", DATA, ranks=3, steps=6)
    cl = load_quietly(root)
    out = C.rank_summary(cl, engine="dask")  # no client in scope: dask's local processes
    assert C.rank_steps(out).index.tolist() == ["0", "1", "2"]
    serial = gather_rank_summaries([p.run for p in cl], engine="serial")
    pd.testing.assert_frame_equal(out["step_totals"], serial["step_totals"])


@pytest.mark.slow
def test_dask_engine_uses_the_client_in_scope(tmp_path):
    distributed = pytest.importorskip("distributed")
    root = write_legacy_cluster(tmp_path / "c", DATA, ranks=5, steps=6)
    cl = load_quietly(root)
    runs = [p.run for p in cl]
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        with distributed.get_task_stream(client) as stream:
            out = gather_rank_summaries(runs, engine="dask", max_workers=2)
    # 5 ranks on 2 workers: chunks of one rank, each a task on the client
    assert len(stream.data) == len(chunked(runs, 2)) == 5
    pd.testing.assert_frame_equal(out["steps"], gather_rank_summaries(runs, engine="serial")["steps"])


def test_cluster_view_html(pipeline4, npu8):
    for cl, s in (pipeline4, npu8):
        html = file_html(cluster_layout(s), INLINE, "cluster")
        for name in ("cluster_ranks_src", "cluster_heatmap_src", "cluster_slow_src", "cluster_slowest_src"):
            assert name in html
    view = ClusterView(pipeline4[0], engine="serial")
    assert view.layout.name == "cluster_page" and C.slowest_rank(view.summary) == "1"
    assert view.layout.select_one({"name": "cluster_layout"}) is not None
    assert view.layout.select_one({"name": "cluster_communication"}) is not None
    # a pipeline-parallel job: the pipeline bubbles' section, its finding the analysis's own sentence
    from nbprofiler.analysis.pipeline import pipeline_bubbles, pipeline_summary
    finding = view.layout.select_one({"name": "cluster_pipeline_finding"})
    sentence = pipeline_summary(pipeline_bubbles(pipeline4[0]))["finding"]
    assert finding is not None and escape(sentence) in finding.text


@pytest.mark.slow
def test_benchmark_quick_mode():
    """benchmarks/bench_cluster.py --quick runs every engine and they agree on the straggler."""
    import subprocess
    import sys
    from .conftest import REPO
    out = subprocess.run([sys.executable, str(REPO / "benchmarks/bench_cluster.py"), "--quick", "--ranks", "4"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "x serial" in out.stdout and f"{'legacy':16} {4:>6} quiet  serial" in out.stdout


def test_several_sessions_of_one_rank_keep_their_own_rows():
    # the bundled samples: three runs that all call themselves device 0 (one with no step trace at all);
    # `load` makes them one rank's windows, a Cluster built from them keeps one row each
    import nbprofiler.samples
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root = Path(nbprofiler.samples.__file__).parent
        cl = nbprofiler.Cluster(list(nbprofiler.load(root).windows.values()), source=root)
        summary = C.rank_summary(cl, engine="serial")
        view = ClusterView(cl, engine="serial")
    assert len(cl) == 3 and sorted(summary["steps"]["rank"]) == sorted(cl.ranks)
    assert summary["op_types"]["rank"].nunique() == 1  # only the LeNet session has operators
    assert "No rank of this cluster has a step trace" in view.layout.children[0].text


def test_ranks_without_a_step_trace_are_left_out_of_the_rank_figures():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # four clusters' worth of runs, some with no step trace; `load` makes the runs that share a rank id
        # that rank's windows, a Cluster built from them all keeps each as a rank
        cl = nbprofiler.Cluster([w for p in nbprofiler.load(DATA / "legacy") for w in p.windows.values()],
                                source=DATA / "legacy")
        summary = C.rank_summary(cl, engine="serial")
    layout = cluster_layout(summary)
    bars = next(iter(layout.select({"name": "cluster_ranks_src"})))
    with_steps = summary["steps"].loc[summary["steps"]["total_ms"].notna(), "rank"]
    assert sorted(bars.data["rank"]) == sorted(with_steps) and 0 < len(with_steps) < len(cl)


def test_only_outlier_ranks_are_outlined(pipeline4, tmp_path):
    """legacy/cluster_4rank_pipeline: rank 1 is slowest by 0.016 ms over the median (robust z 0.7): named
    as slowest, 'not an outlier', and not outlined. A synthetic straggler (3x step interval) is outlined."""
    cl, s = pipeline4
    layout = cluster_layout(s)
    bars = layout.select_one({"name": "cluster_ranks"})
    assert "slowest: rank 1, not an outlier" in bars.title.text
    assert layout.select_one({"name": "cluster_slowest_src"}).data["rank"].tolist() == []
    root = write_legacy_cluster(tmp_path / "c", DATA, ranks=6, steps=12)
    straggler = C.rank_summary(load_quietly(root), engine="serial")
    flagged = C.slow_ranks(straggler)
    assert set(flagged.loc[flagged["flagged"], "rank"]) == {"5"}
    layout = cluster_layout(straggler)
    assert layout.select_one({"name": "cluster_slowest_src"}).data["rank"].tolist() == ["5"]
    assert "slowest: rank 5, an outlier" in layout.select_one({"name": "cluster_ranks"}).title.text


def test_cluster_page_shows_the_links_and_mindinsights_findings(pipeline4):
    from nbprofiler.faces.report import report_layout
    from nbprofiler.views.cluster import communication_layout
    cl, _ = pipeline4
    page = communication_layout(cl)
    text = page.select_one({"name": "cluster_links_findings"}).text
    assert "link 0→1 (SDMA, recorded by rank 1): bandwidth 107,910,491.9, 74.26 % below" in text
    assert "hccl_raw&#x27;s own bandwidth unit" in text or "hccl_raw's own bandwidth unit" in text  # never a bare number
    assert "receiving between stages takes 25.82 %" in text and "stage 1: communication within the stage" in text
    assert "60.30 %" in text
    drawn = page.select_one({"name": "cluster_comm_matrix_src"}).data
    matrix = C.communication_matrix(cl)
    assert list(drawn["bandwidth"]) == pytest.approx(matrix["bandwidth"].tolist())
    ranks = report_layout(cl).select_one({"name": "report_ranks"})
    assert ranks.select_one({"name": "cluster_links_findings"}) is not None
    # MindInsight's pipeline FLOPs proposal (expected/: stage 2, 50.94 %) is on the page too
    assert "pipeline stage 2 carries 50.94 % more cube FLOPs than the mean of the stages" in text
    # per rank, communication and waiting from hccl_raw, two separate times (legacy: no idle, no op count)
    by_rank = C.communication_by_rank(cl).set_index("rank")
    assert by_rank.attrs["source"] == "hccl_raw_*.csv" and set(by_rank.index) == {"0", "1", "2", "3"}
    for rank in ("0", "1", "2", "3"):
        h = cl[rank].hccl
        assert by_rank.at[rank, "transit_ms"] == pytest.approx(h["communication_cost_ms"].sum())
        assert by_rank.at[rank, "wait_ms"] == pytest.approx(h["wait_cost_ms"].sum()) and h["wait_cost_ms"].sum() > 0
    assert cl["0"].hccl["wait_cost_ms"].iloc[0] == pytest.approx(270.25056)  # step 1 as written
    drawn_ranks = page.select_one({"name": "cluster_rank_comm_src"}).data
    assert sorted(drawn_ranks["rank"]) == ["0", "1", "2", "3"]
    # the matrix is coloured by bandwidth, time or size as the toggle says (CustomJS, offline too)
    links = page.select_one({"name": "cluster_links_src"}).data
    marks = {(a, b, t): m for a, b, t, m in zip(links["src"], links["dst"], links["transport"], links["slow"]) if m}
    # every link over 20 % below its transport's mean is marked; MindInsight names the slowest (0→1)
    assert marks == {("0", "1", "SDMA"): "74.26 % below its transport's mean",
                     ("1", "0", "SDMA"): "55.15 % below its transport's mean"}
    toggle = page.select_one({"name": "cluster_comm_measure"})
    assert toggle.labels == ["Bandwidth", "Time", "Size"] and toggle.active == 0


def test_cluster_page_without_a_matrix_still_shows_communication_per_rank():
    """npu/cluster_8rank has cluster_communication.json but no matrix: the per-rank transit/wait/idle
    chart is drawn from it (rank 0 waits 143.06 ms of its 148.84 ms)."""
    from nbprofiler.views.cluster import communication_layout
    cl = load_quietly(DATA / "npu/cluster_8rank")
    page = communication_layout(cl)
    assert page is not None and page.select_one({"name": "cluster_comm_matrix"}) is None
    data = page.select_one({"name": "cluster_rank_comm_src"}).data
    i = list(data["rank"]).index("0")
    assert data["wait_ms"][i] == pytest.approx(143.057281, abs=1e-6)
    assert data["transit_ms"][i] + data["wait_ms"][i] + data["idle_ms"][i] == pytest.approx(data["elapse_ms"][i])


def test_a_rank_that_raises_is_left_out_and_reported_or_raised(monkeypatch):
    from nbprofiler.analysis import cluster_reduce as R
    cl = load_quietly(DATA / "legacy" / "cluster_4rank_pipeline")
    real = R._reduce_rank

    def broken(run):
        if str(run.info.get("label")) == "2":
            raise OSError("disk went away")
        return real(run)
    monkeypatch.setattr(R, "_reduce_rank", broken)
    runs = [dataclasses.replace(p.run, info={**p.run.info, "label": k}) for k, p in cl.profiles.items()]
    out = R.gather_rank_summaries(runs, engine="serial")
    assert sorted(out["steps"]["rank"]) == ["0", "1", "3"]
    assert any("rank 2 left out of the cluster: OSError: disk went away" in p["error"] for p in out["problems"])
    with pytest.raises(OSError, match="disk went away"):
        R.gather_rank_summaries(runs, engine="serial", failure=R.FailureHandling.RAISE)


def test_one_quantity_has_one_colour_across_the_cluster_pages_figures(npu8):
    """The stage bars, the per-rank breakdown and the communication per rank name the same quantities in
    their own words: each quantity is drawn in one colour on all three, and no colour means two things
    (the stage bars' exposed communication is not the colour of one of its parts, wait or transit)."""
    from nbprofiler.analysis.diagnosis import diagnose_cluster
    from nbprofiler.views.cluster import breakdown_layout, communication_layout
    cl, summary = npu8
    diagnosis = diagnose_cluster(cl)
    page = column(cluster_layout(summary, diagnosis), breakdown_layout(cl, diagnosis), communication_layout(cl))
    same = {"Communication (not overlapped)": "exposed", "Exposed communication (no wait/transit split)": "exposed",
            "Wait": "wait", "Exposed: waiting for other ranks": "wait",
            "Transit": "transit", "Exposed: moving data": "transit",
            "Computing": "computing", "Computing (alone)": "computing",
            "Free": "free", "Free (device idle)": "free", "Preparing": "host", "Host-bound (device waits for dispatch)": "host",
            "Communication overlapped": "overlapped", "Idle": "communication idle"}
    colours: dict[str, set] = {}
    for name in ("cluster_ranks", "cluster_rank_comm", "cluster_breakdown"):
        for item in page.select_one({"name": name}).legend[0].items:
            label = item.label.value if hasattr(item.label, "value") else item.label["value"]
            colours.setdefault(item.renderers[0].glyph.fill_color, set()).add(same[label])
    assert all(len(q) == 1 for q in colours.values()), colours
    quantities = [q for qs in colours.values() for q in qs]
    assert len(quantities) == len(set(quantities)) and {"exposed", "wait", "transit"} <= set(quantities)
