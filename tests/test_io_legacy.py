"""Legacy loaders (step trace, reduce events, point info, FLOPs, HCCL, cluster analyse, timeline summary)
against the real folders in shared/data/legacy and MindInsight's numbers in expected/."""
from __future__ import annotations

import shutil
import warnings

import pytest

import nbprofiler
from nbprofiler.errors import MissingColumnError, ProfilerDataWarning, TruncatedFileError
from nbprofiler.io import legacy

from .conftest import DATA, expected

LEGACY = DATA / "legacy"
MY_FRAMES = ["step_trace", "step_trace_reduce", "flops", "hccl", "hccl_links", "cluster_analyse", "op_types", "ops"]
MY_DICTS = ["step_point_info", "flops_summary", "timeline_summary"]


def _profiles(rel: str):
    loaded = nbprofiler.load(LEGACY / rel)
    return [loaded] if isinstance(loaded, nbprofiler.Profile) else list(loaded)


@pytest.mark.parametrize("rel", ["run_1_widedeep", "run_2_lenet", "fixtures_mixed_ids", "cluster_4rank_pipeline",
                                 "minddata_variants"])
def test_every_legacy_folder_loads_my_frames_without_problems(rel):
    for prof in _profiles(rel):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ProfilerDataWarning)
            for name in MY_FRAMES + MY_DICTS:
                getattr(prof, name)
        assert prof.problems == []


# (expected file, folder, device)
STEP_CASES = [("legacy__run_1_widedeep__device1", "run_1_widedeep", "1"),
              ("legacy__fixtures_mixed_ids__device0", "fixtures_mixed_ids", "0"),
              ("legacy__cluster_4rank_pipeline__device0", "cluster_4rank_pipeline", "0"),
              ("legacy__cluster_4rank_pipeline__device3", "cluster_4rank_pipeline", "3"),
              ("legacy__run_2_lenet__device1", "run_2_lenet", "1")]


@pytest.mark.parametrize("name, rel, device", STEP_CASES)
def test_step_trace_matches_mindinsight_per_step_and_average(name, rel, device):
    exp = expected(name)["step_trace"]
    prof = nbprofiler.load(LEGACY / rel, device=device)
    steps = prof.step_trace
    assert len(steps) == exp["size"]
    assert steps["step"].tolist() == list(range(1, exp["size"] + 1))
    for stage, values in exp["per_step_ms"].items():
        ours = steps[f"{stage}_ms"].tolist()
        if isinstance(values, dict):  # long series: MindInsight's head/tail and aggregates
            assert ours[:8] == values["head"] and ours[-8:] == values["tail"]
            assert len(ours) == values["len"] and max(ours) == values["max"] and min(ours) == values["min"]
        else:
            assert ours == values
    summary = exp["summary"]
    assert prof.step_trace_average == {"iteration_interval_ms": summary["iteration_interval"],
                                       "fp_and_bp_ms": summary["fp_and_bp"], "tail_ms": summary["tail"],
                                       "total_ms": summary["total_time"]}
    for stage, means in exp["recomputed_means_ms"].items():
        assert steps.attrs["mean_all_steps"][f"{stage}_ms"] == means["mean_all_rows"]
        if means["mean_excluding_step1"] is None:
            assert steps.attrs["mean_excluding_step1"] is None
        else:
            assert steps.attrs["mean_excluding_step1"][f"{stage}_ms"] == means["mean_excluding_step1"]


def test_step_trace_rounding_follows_mindinsight_not_numpy():
    # 19378115 ticks = 193.78114999... ms: MindInsight shows 193.7811 (numpy's rint would give 193.7812).
    steps = nbprofiler.load(LEGACY / "run_1_widedeep").step_trace
    assert steps["fp_and_bp_ms"].iloc[0] == 193.7811
    assert legacy.ticks_to_ms([19378115])[0] == 193.7811


def test_single_step_file_keeps_its_odd_average_row_as_written():
    prof = nbprofiler.load(LEGACY / "run_2_lenet")
    # the last row is 0,0,0,0,0,0,1243211,0,0: MindInsight shows interval 12.4321 ms with total 0
    assert prof.step_trace_average == {"iteration_interval_ms": 12.4321, "fp_and_bp_ms": 0.0, "tail_ms": 0.0,
                                       "total_ms": 0.0}
    row = prof.step_trace.iloc[0]
    assert (row.total_ms, row.iteration_interval_ms, row.fp_and_bp_ms, row.tail_ms) == (23.7091, 0.0, 23.6681, 0.041)
    assert row.start_ms == 154907896.0687 and row.end_ms == 154907919.7778  # points rounded like the stages


def _events(graph_line):
    return {e["name"]: (e["start"], e["duration"]) for e in graph_line if e.get("name")}


@pytest.mark.parametrize("name, rel, device", STEP_CASES[:4])
def test_reduce_events_of_step_1_and_average_match_mindinsight_graph(name, rel, device):
    exp = expected(name)["step_trace"]
    reduce = nbprofiler.load(LEGACY / rel, device=device).step_trace_reduce
    step1 = reduce[reduce["step"] == 1]
    ours = {r.name: (r.start_ms, r.dur_ms) for r in step1.itertuples()}
    theirs = {}
    for line in exp["graph_step1"][2:]:
        theirs.update(_events(line))
    # MindInsight drops events with a negative start (a Receive beginning before the step's start point);
    # we keep them: every event MindInsight shows is ours with the same numbers.
    assert theirs and all(ours[k] == v for k, v in theirs.items())
    assert {k for k, (s, _) in ours.items() if s >= 0} == set(theirs)
    avg = {e["name"]: (e["start_ms"], e["dur_ms"]) for e in reduce.attrs["average"]}
    theirs_avg = {}
    for line in exp["graph_step0_average"][2:]:
        theirs_avg.update(_events(line))
    assert all(avg[k] == v for k, v in theirs_avg.items())


def test_reduce_columns_in_either_order_are_mapped_by_name():
    # fixtures: <p>_start_point,<p>_end_point,<p> ; cluster: <p>,<p>_start_point,<p>_end_point
    fx = nbprofiler.load(LEGACY / "fixtures_mixed_ids", device="0").step_trace_reduce
    first = fx[(fx.step == 1) & (fx.name == "stream_10_parallel_1")].iloc[0]
    # file: 45001048152,45001346254,298102 with step start 45000030081 (rounded points subtracted)
    assert (first["stream_id"], first["start_ms"], first["dur_ms"]) == (10, 10.1807, 2.981)
    cl = nbprofiler.load(LEGACY / "cluster_4rank_pipeline", device="0").step_trace_reduce
    recv = cl[(cl.step == 1) & (cl.name == "stream_48_0_Receive-op663")].iloc[0]
    # file: 5010767,1162411816566,... with step start 1162412079349: starts before the step
    assert (recv["stream_id"], recv["start_ms"], recv["dur_ms"]) == (48, -2.6278, 50.1077)
    # missing events (all 0 in step 40 of step_trace_raw_10) are dropped
    ten = nbprofiler.load(LEGACY / "fixtures_mixed_ids", device="10").step_trace_reduce
    assert 40 not in set(ten["step"]) and ten["step"].nunique() == 20


def test_step_point_info():
    assert nbprofiler.load(LEGACY / "run_1_widedeep").step_point_info == expected(
        "legacy__run_1_widedeep__device1")["step_trace"]["point_info_step0"]
    assert nbprofiler.load(LEGACY / "run_2_lenet").step_point_info == {
        "fp_start": "Default/EndOfSequence-op131", "bp_end": "Default/AssignAdd-op138"}
    assert nbprofiler.load(LEGACY / "fixtures_mixed_ids", device="0").step_point_info is None


def test_step_point_info_list_form_and_id_file_preferred(tmp_path):
    shutil.copy(LEGACY / "run_2_lenet/step_trace_raw_1_detail_time.csv", tmp_path)
    (tmp_path / "step_trace_point_info.json").write_text('{"fp_start": "A", "bp_end": "B"}')
    (tmp_path / "step_trace_point_info_1.json").write_text(
        '[{"fp_start": "Default/Cast-op1", "bp_end": "Default/Add-op2"}, {"fp_start": "X", "bp_end": "Y"}]')
    info = nbprofiler.load(tmp_path).step_point_info
    assert info[1] == {"fp_start": "X", "bp_end": "Y"} and len(info) == 2


def test_inference_step_trace_has_fp_column(tmp_path):
    # the real run_2_lenet row rewritten in the inference layout (fp = bp_point - fp_point, no tail)
    (tmp_path / "step_trace_raw_1_detail_time.csv").write_text(
        "step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,fp\n"
        "1,15490789606875,15490791977780,2370905,15490789606875,15490791973683,0,2366808\n"
        "-,15490789606875,15490791977780,2370905,15490789606875,15490791973683,0,2366808\n")
    prof = nbprofiler.load(tmp_path)
    assert prof.step_stages == ["iteration_interval_ms", "fp_ms"]
    assert prof.step_trace["fp_ms"].tolist() == [23.6681]
    assert prof.step_trace_average == {"iteration_interval_ms": 0.0, "fp_ms": 23.6681, "total_ms": 23.7091}


def _copy_step_trace(tmp_path, cut):
    src = (LEGACY / "fixtures_mixed_ids/step_trace_raw_0_detail_time.csv").read_bytes()
    (tmp_path / "step_trace_raw_0_detail_time.csv").write_bytes(cut(src))
    return nbprofiler.load(tmp_path)


def test_truncated_step_trace_warns_how_many_steps_were_dropped(tmp_path):
    lines = (LEGACY / "fixtures_mixed_ids/step_trace_raw_0_detail_time.csv").read_bytes().splitlines(True)
    # keep steps 1..19 and half of step 20's row (the average row is gone too)
    prof = _copy_step_trace(tmp_path, lambda b: b"".join(lines[:20]) + lines[20][:40])
    with pytest.warns(ProfilerDataWarning, match="1 step dropped"):
        steps = prof.step_trace
    assert len(steps) == 19 and steps["step"].iloc[-1] == 19
    assert prof.step_trace_average is None
    (problem,) = prof.problems
    assert problem.kind == "warning" and "TruncatedFileError" in problem.error and "19 complete steps" in problem.error
    assert problem.file.endswith("step_trace_raw_0_detail_time.csv")


def test_step_trace_cut_inside_average_row_keeps_all_steps(tmp_path):
    lines = (LEGACY / "fixtures_mixed_ids/step_trace_raw_0_detail_time.csv").read_bytes().splitlines(True)
    prof = _copy_step_trace(tmp_path, lambda b: b"".join(lines[:21]) + lines[21][:30])
    with pytest.warns(ProfilerDataWarning, match="average row was cut off"):
        assert len(prof.step_trace) == 20
    assert prof.step_trace_average is None


def test_step_trace_missing_column_is_a_typed_error_naming_it(tmp_path):
    def drop_tail(b: bytes) -> bytes:
        rows = [r.split(b",") for r in b.splitlines()]
        i = rows[0].index(b"tail")
        return b"\n".join(b",".join(r[:i] + r[i + 1:]) for r in rows) + b"\n"
    prof = _copy_step_trace(tmp_path, drop_tail)
    with pytest.warns(ProfilerDataWarning):
        assert prof.step_trace.empty
    (problem,) = prof.problems
    assert problem.kind == "error" and problem.field == "tail" and problem.line == 1
    assert "MissingColumnError" in problem.error
    with pytest.raises(MissingColumnError, match="tail"):
        legacy.step_trace(prof.run)


def test_step_trace_bad_number_names_line_and_field(tmp_path):
    def damage(b: bytes) -> bytes:
        lines = b.split(b"\n")
        fields = lines[1].split(b",")
        fields[1] = b"4500oops"
        lines[1] = b",".join(fields)
        return b"\n".join(lines)
    prof = _copy_step_trace(tmp_path, damage)
    with pytest.warns(ProfilerDataWarning):
        prof.step_trace
    (problem,) = prof.problems
    assert (problem.line, problem.field) == (2, "start_point")


def test_flops_mapped_by_header_name():
    fx1 = nbprofiler.load(LEGACY / "fixtures_mixed_ids", device="1").flops
    assert list(fx1.columns) == ["op_name", "mflops_cube", "gflops_cube", "utilization_cube_pct", "mflops_vector",
                                 "gflops_vector", "utilization_vector_pct"]
    # MindInsight shows the first four values as "MFLOPs cube, GFLOPS cube, MFLOPs vector, GFLOPS vector":
    # 333, 333, 33, 333 — the third is really the cube utilisation (its mislabel).
    shown = expected("legacy__fixtures_mixed_ids__device1")["operators"]["aicore_detail"]["first_page"][0]
    row = fx1[fx1.op_name == shown[0]].iloc[0]
    assert shown[5:9] == [row.mflops_cube, row.gflops_cube, row.utilization_cube_pct, row.mflops_vector]
    wd = nbprofiler.load(LEGACY / "run_1_widedeep").flops
    assert list(wd.columns) == ["op_name", "mflops", "gflops", "utilization_pct"] and len(wd) > 100


@pytest.mark.parametrize("name, rel, device", [("legacy__cluster_4rank_pipeline__device0", "cluster_4rank_pipeline", "0"),
                                               ("legacy__fixtures_mixed_ids__device0", "fixtures_mixed_ids", "0")])
def test_flops_summary_as_written(name, rel, device):
    assert nbprofiler.load(LEGACY / rel, device=device).flops_summary == \
        expected(name)["memory_and_flops"]["flops_summary"]


def test_hccl_steps_average_and_links():
    prof = nbprofiler.load(LEGACY / "cluster_4rank_pipeline", device="0")
    h = prof.hccl
    assert h["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert h.iloc[0].communication_cost_ms == 2.60018 and h.iloc[0].wait_cost_ms == 270.25055999999995
    assert h.attrs["average"] == {"communication_cost_ms": 2.2688550000000003, "wait_cost_ms": 231.59947499999998}
    links = prof.hccl_links
    first = links[(links.step == 1) & (links.src == 1) & (links.dst == 0)].iloc[0]
    assert (first["transport"], first["time_ms"], first["size"], first["bandwidth"]) == (
        "SDMA", 2.5209099999999998, 52706.81599999999, 217031150.47579023)
    assert set(links["step"]) == set(range(1, 7))
    ranks23 = nbprofiler.load(LEGACY / "cluster_4rank_pipeline", device="3").hccl
    assert ranks23["step"].tolist() == [1, 2]


def test_cluster_analyse_pipeline_and_data_parallel():
    ca = nbprofiler.load(LEGACY / "cluster_4rank_pipeline", device="0").cluster_analyse
    assert ca["step"].tolist() == [1, 2, 3, 4, 5]
    assert ca.iloc[0].to_dict() == {"step": 1, "computation_time_ms": 13.8202, "communication_alone_time_ms": 164.476,
                                    "stage_time_ms": 121.8989, "receive_alone_time_ms": 56.3973,
                                    "collective_communication_alone_time_ms": 108.0787}
    assert ca.attrs["average"]["stage_time_ms"] == 122.4961
    assert (ca.attrs["parallel_mode"], ca.attrs["stage_num"], ca.attrs["rank_size"]) == ("pipeline-parallel", 2, 4)
    # data-parallel: ticks with spaces in the header, one row = step 1 = the step trace's step 1
    prof = nbprofiler.load(LEGACY / "run_2_lenet")
    dp = prof.cluster_analyse
    st = prof.step_trace.iloc[0]
    assert dp.iloc[0][["iteration_interval_ms", "fp_and_bp_ms", "tail_ms"]].tolist() == [
        st.iteration_interval_ms, st.fp_and_bp_ms, st.tail_ms]


@pytest.mark.parametrize("name, rel, device", [("legacy__run_2_lenet__device1", "run_2_lenet", "1"),
                                               ("legacy__fixtures_mixed_ids__device0", "fixtures_mixed_ids", "0")])
def test_timeline_summary(name, rel, device):
    ours = nbprofiler.load(LEGACY / rel, device=device).timeline_summary
    theirs = expected(name)["timeline"]["ascend"]["summary"]
    # MindInsight adds max_scope_name_num = 0 when the file lacks it; we keep the file as written
    assert {**{"max_scope_name_num": 0}, **ours} == theirs
    assert nbprofiler.load(LEGACY / "run_1_widedeep").timeline_summary["op_exe_times"] == 2817


def test_truncated_flops_summary_is_typed(tmp_path):
    (tmp_path / "flops_summary_0.json").write_text('{"FLOPs": 8167.743, "FLOPS": 98')
    shutil.copy(LEGACY / "fixtures_mixed_ids/step_trace_raw_0_detail_time.csv", tmp_path)
    prof = nbprofiler.load(tmp_path)
    with pytest.warns(ProfilerDataWarning):
        assert prof.flops_summary is None
    assert "TruncatedFileError" in prof.problems[0].error
    with pytest.raises(TruncatedFileError):
        legacy.flops_summary(prof.run)


def test_repeated_and_shuffled_steps_are_reported_not_counted_twice(tmp_path):
    src = DATA / "legacy/fixtures_mixed_ids/step_trace_raw_0_detail_time.csv"
    lines = src.read_text().splitlines()
    header, steps, average = lines[0], lines[1:-1], lines[-1]
    assert len(steps) == 20
    damaged = [header, *steps[:5], steps[2], *reversed(steps[5:]), average]  # step 3 twice, 6..20 reversed
    d = tmp_path / "run"
    d.mkdir()
    (d / src.name).write_text("\n".join(damaged) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(d)
        steps_df = prof.step_trace
    assert steps_df["step"].tolist() == list(range(1, 21))
    good = nbprofiler.load(DATA / "legacy/fixtures_mixed_ids", device="0").step_trace
    assert steps_df["total_ms"].tolist() == good["total_ms"].tolist()
    errors = [p.error for p in prof.problems]
    assert any("step 3 written more than once: 1 repeated row(s) dropped, the first at line 7" in e for e in errors)
    assert any("out of order" in e for e in errors)
