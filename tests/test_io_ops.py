"""Operator tables (op_types, ops) for every device kind against the real files and MindInsight's
numbers in expected/*.json ("operators" sections)."""
from __future__ import annotations

import csv
import json
import shutil

import pandas as pd
import pytest

import nbprofiler
from nbprofiler.errors import ProfilerDataWarning

from .conftest import DATA, expected

LEGACY = DATA / "legacy"


def _kind(frame, kind):
    return frame[frame["kind"] == kind].set_index("op_type" if "op_name" not in frame else "op_name")


@pytest.mark.parametrize("name, rel", [("legacy__run_2_lenet__device1", "run_2_lenet"),
                                       ("legacy__run_1_widedeep__device1", "run_1_widedeep"),
                                       ("legacy__fixtures_mixed_ids__device1", "fixtures_mixed_ids")])
def test_ai_core_types_match_mindinsight(name, rel):
    shown = expected(name)["operators"]["aicore_type"]
    types = _kind(nbprofiler.load(LEGACY / rel, device="1").op_types, "ai_core")
    assert len(types) == shown["size"]
    for op_type, total_us, count, _mi_percent, avg_us in shown["rows"]:
        row = types.loc[op_type]
        assert row.total_time_us == pytest.approx(total_us, abs=5e-4)  # MindInsight rounds to 3/6 decimals
        assert row["count"] == count
        assert row.avg_time_us == pytest.approx(avg_us, rel=1e-5, abs=5e-4)
    assert types["percent"].sum() == pytest.approx(100.0)
    # sorted by total time descending, as MindInsight's default
    assert types.index.tolist()[:5] == shown["pie_top5"]


def test_run_2_lenet_matmul_percent_file_mindinsight_and_ours():
    """The x100 bug: the 1.x type file already holds percent (89.47); MindInsight 2.3.1 multiplies by 100."""
    row = _kind(nbprofiler.load(LEGACY / "run_2_lenet").op_types, "ai_core").loc["MatMul"]
    file_value = row.file_percent
    mindinsight = dict((r[0], r[3]) for r in expected("legacy__run_2_lenet__device1")["operators"]["aicore_type"]["rows"])
    assert file_value == 89.47                       # the file, as written (0..100 already)
    assert mindinsight["MatMul"] == 8947.0           # what MindInsight shows (file x 100)
    assert mindinsight["MatMul"] == pytest.approx(file_value * 100)
    # ours: MatMul's share recomputed from the times listed in the file (20.65774 ms of their sum)
    with open(LEGACY / "run_2_lenet/aicore_intermediate_1_type.csv") as f:
        listed_ms = sum(float(r["execution_time"]) for r in csv.DictReader(f))
    assert row.percent == pytest.approx(20.65774 / listed_ms * 100, rel=1e-12)
    assert round(row.percent, 2) == 89.47


def test_percent_differs_from_file_where_the_file_counts_unlisted_time():
    # run_1_widedeep: percents sum to 71.1, shares of a larger total than the listed types (FORMATS 3.3)
    types = _kind(nbprofiler.load(LEGACY / "run_1_widedeep").op_types, "ai_core")
    assert types["file_percent"].sum() == pytest.approx(71.1, abs=0.01)
    assert types.loc["MatMul", "file_percent"] == 57.60
    assert types.loc["MatMul", "percent"] == pytest.approx(81.03, abs=0.01)


@pytest.mark.parametrize("name, rel", [("legacy__run_1_widedeep__device1", "run_1_widedeep"),
                                       ("legacy__fixtures_mixed_ids__device1", "fixtures_mixed_ids")])
def test_ai_core_detail_matches_mindinsight_first_page(name, rel):
    shown = expected(name)["operators"]["aicore_detail"]
    ops = nbprofiler.load(LEGACY / rel, device="1").ops
    core = ops[ops.kind == "ai_core"]
    assert len(core) == shown["size"]
    by_name = core.set_index("op_name")
    for op_name, short, op_type, avg_us, count, *flops, op_info in shown["first_page"]:
        row = by_name.loc[op_name]
        assert (row.short_name, row.op_type, row["count"]) == (short, op_type, count)
        assert row.avg_time_us == pytest.approx(avg_us, rel=1e-5, abs=5e-4)
        assert row.total_time_us == pytest.approx(row.avg_time_us * count)
        assert json.loads(row.op_info) == op_info
    # MindInsight's default order: avg time descending
    ours = core.sort_values("avg_time_us", ascending=False)["op_name"].head(len(shown["first_page"])).tolist()
    assert ours == [r[0] for r in shown["first_page"]]


def test_ai_core_detail_times_sum_to_type_totals():
    prof = nbprofiler.load(LEGACY / "run_1_widedeep")
    core = prof.ops[prof.ops.kind == "ai_core"]
    per_type = core.groupby("op_type")["total_time_us"].sum()
    types = _kind(prof.op_types, "ai_core")["total_time_us"]
    pd.testing.assert_series_equal(per_type.sort_index(), types.sort_index(), check_names=False, atol=1e-6,
                                   check_index_type=False)


def test_legacy_1x_detail_counts_from_timeline_and_framework_join():
    ops = nbprofiler.load(LEGACY / "run_2_lenet").ops
    core = ops[ops.kind == "ai_core"].set_index("op_name")
    assert len(core) == 105
    # execution_time is the average per call: AssignAdd-op142 ran twice (0.0031 + 0.00128 ms)
    row = core.loc["Default/AssignAdd-op142"]
    assert (row["count"], row.avg_time_us) == (2, pytest.approx(2.19))
    assert row.total_time_us == pytest.approx(4.38)
    assert (row.short_name, row.op_type, row.stream_id, row.task_id, row.block_dim) == (
        "AssignAdd-op142", "AssignAdd", 519, 4, 1)
    assert '"input_0"' in row.op_info


def test_ai_cpu_matches_mindinsight():
    prof = nbprofiler.load(LEGACY / "run_2_lenet")
    exp = expected("legacy__run_2_lenet__device1")["operators"]
    types = _kind(prof.op_types, "ai_cpu")
    for op_type, total_us, count, percent in exp["aicpu_type"]["rows"]:
        assert (types.loc[op_type, "total_time_us"], types.loc[op_type, "count"]) == (total_us, count)
        assert round(types.loc[op_type, "percent"], 2) == percent
    detail = _kind(prof.ops, "ai_cpu")
    for name, op_type, avg_us, dispatch_us, count in exp["aicpu_detail"]["first_page"]:
        row = detail.loc[name]
        assert (row.op_type, row["count"]) == (op_type, count)
        assert (row.avg_time_us, row.dispatch_time_us) == (pytest.approx(avg_us), pytest.approx(dispatch_us))


CPU = "mindspore2__lenet_pynative__device0"


def test_cpu_types_and_ops_match_mindinsight():
    prof = nbprofiler.load(DATA / "mindspore2/lenet_pynative")
    exp = expected(CPU)["operators"]
    types = _kind(prof.op_types, "cpu")
    assert len(types) == exp["cpu_op_type"]["size"]
    for op_type, occurrences, _freq, total_us, avg_us, _pct in exp["cpu_op_type"]["rows"]:
        row = types.loc[op_type]
        assert row["count"] == occurrences
        assert row.total_time_us == pytest.approx(total_us, rel=1e-9)
        # MindInsight shows the file's avg (6 significant digits, then rounded to 3 decimals); ours is total/count
        assert row.avg_time_us == pytest.approx(avg_us, rel=1e-5, abs=5e-4)
    # the file's percent is a fraction; ours the recomputed 0..100 share
    # the file writes a fraction (0.214118): file_percent is on the 0..100 scale of every other writer
    assert types.loc["Conv2DBackpropInput", "file_percent"] == pytest.approx(21.4118)
    assert types.loc["Conv2DBackpropInput", "percent"] == pytest.approx(21.41, abs=0.01)
    ops = _kind(prof.ops, "cpu")
    assert len(ops) == exp["cpu_op_info"]["size"]
    for side, op_type, short, full, occurrences, total_us, avg_us, proportion, subgraph in exp["cpu_op_info"]["first_page"]:
        row = ops.loc[full]
        assert (row.op_type, row.short_name, row["count"], row.subgraph) == (op_type, short, occurrences, subgraph)
        assert row.total_time_us == pytest.approx(total_us)
        # MindInsight shows the file's fraction rounded to 6 decimals; file_percent is that fraction x 100
        assert row.file_percent == pytest.approx(proportion * 100, abs=5e-5)
    # PyNative bare names: op_name = short name = type
    assert ops.loc["MatMul", "count"] == 2700 and ops.loc["MatMul", "op_type"] == "MatMul"


def test_npu_kind_from_kernel_details():
    prof = nbprofiler.load(DATA / "npu/kernel_details_591")
    kernels = prof.kernels
    types, comm = _kind(prof.op_types, "npu"), _kind(prof.op_types, "communication")
    assert types["count"].sum() + comm["count"].sum() == len(kernels) == 591
    assert types["total_time_us"].sum() + comm["total_time_us"].sum() == pytest.approx(kernels["dur_us"].sum())
    # HCCL broadcasts are communication, not 77.9 % of the operator pie
    assert "hcom_broadcast_" not in types.index and comm.loc["hcom_broadcast_", "count"] == 2
    assert comm.loc["hcom_broadcast_", "accelerator_core"] == "HCCL"
    assert set(types["accelerator_core"]) == {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIV", "DSA_SQE"}
    assert types["percent"].sum() == pytest.approx(100.0) and types["percent"].max() < 50
    ops = _kind(prof.ops, "communication")
    assert ops.loc["hcom_broadcast__445_0", "total_time_us"] == 308926.68
    assert ops.loc["hcom_broadcast__445_0", "accelerator_core"] == "HCCL"
    assert not _kind(prof.ops, "npu").index.str.startswith("hcom_").any()


def test_npu_op_statistic_preferred_for_types(tmp_path):
    shutil.copy(DATA / "npu/kernel_details_591/kernel_details.csv", tmp_path)
    # CANN op_statistic header (FORMATS 4.3); rows: the 591-kernel run's MatMul and ZerosLike aggregates
    k = nbprofiler.load(DATA / "npu/kernel_details_591").kernels
    rows = []
    for t in ("MatMul", "ZerosLike"):
        d = k[k.type == t]["dur_us"]
        rows.append(f"{t},AI_CORE,{len(d)},{d.sum()},{d.min()},{d.mean()},{d.max()},{d.sum() / k.dur_us.sum() * 100}")
    (tmp_path / "op_statistic.csv").write_text(
        "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n" + "\n".join(rows) + "\n")
    types = _kind(nbprofiler.load(tmp_path).op_types, "npu")
    assert set(types.index) == {"MatMul", "ZerosLike"}
    # op_statistic.csv leaves communication out; the HCCL kernels still give the communication kind
    assert set(_kind(nbprofiler.load(tmp_path).op_types, "communication").index) == {"hcom_broadcast_", "hcom_allReduce_"} \
        or "hcom_broadcast_" in _kind(nbprofiler.load(tmp_path).op_types, "communication").index
    assert types.loc["MatMul", "total_time_us"] == pytest.approx(14070.56)
    assert types.loc["MatMul", "count"] == 9 and types.loc["MatMul", "file_percent"] > 0


def test_frames_are_sorted_by_kind_then_total_and_typed():
    prof = nbprofiler.load(LEGACY / "run_2_lenet")
    t = prof.op_types
    assert t["kind"].drop_duplicates().tolist() == ["ai_core", "ai_cpu"]
    for _, g in t.groupby("kind"):
        assert g["total_time_us"].is_monotonic_decreasing
    assert str(t["count"].dtype) == "Int64" and str(prof.ops["count"].dtype) == "Int64"  # one dtype per idea
    assert prof.op_kinds == ["ai_core", "ai_cpu"]


def test_bad_aicpu_file_skips_that_kind_only(tmp_path):
    for f in ("aicore_intermediate_1_type.csv", "aicore_intermediate_1_detail.csv", "framework_raw_1.csv"):
        shutil.copy(LEGACY / "run_2_lenet" / f, tmp_path)
    text = (LEGACY / "run_2_lenet/aicpu_intermediate_1.csv").read_text().replace("0.888", "0.8x8")
    (tmp_path / "aicpu_intermediate_1.csv").write_text(text)
    prof = nbprofiler.load(tmp_path)
    with pytest.warns(ProfilerDataWarning, match="0.8x8"):
        assert set(prof.op_types["kind"]) == {"ai_core", "ai_cpu"}  # one value lost, not the AI CPU file
    (problem,) = prof.problems
    assert (problem.kind, problem.line, problem.field) == ("warning", 3, "total_time")


def test_missing_type_column_names_it(tmp_path):
    (tmp_path / "aicore_intermediate_1_type.csv").write_text("total_time,execution_frequency,percent\n1.0,2,50\n")
    prof = nbprofiler.load(tmp_path)
    with pytest.warns(ProfilerDataWarning):
        assert prof.op_types.empty
    (problem,) = prof.problems
    assert problem.kind == "error" and problem.field == "op_type" and "MissingColumnError" in problem.error


def test_operators_of_a_device_run_do_not_parse_its_trace():
    """The operator tables need the device tasks' durations, not their place on the timeline: reading
    ``ops`` and ``op_types`` leaves trace_view.json unread (its origin is what kernels' start_us needs)."""
    prof = nbprofiler.load(DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt")
    ops, types = prof.ops, prof.op_types
    assert len(ops) and len(types) and "trace_data" not in prof._cache and "kernels" not in prof._cache
    # the same totals as from the kernels frame, whose start times are on the trace's clock
    again = nbprofiler.load(DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt")
    again.kernels
    assert again.ops[["op_name", "total_time_us", "count"]].equals(ops[["op_name", "total_time_us", "count"]])
