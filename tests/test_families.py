"""The file families beside operators, steps and timelines: each has a frame, read from real files, and
``prof.files`` says which frame every file found feeds."""
from __future__ import annotations

import csv
import json
import shutil

import pytest

from nbprofiler.analysis import cluster as C

from .conftest import DATA, load_quietly

C16 = DATA / "npu/cluster_analysis_16rank"
PT_TEXT = DATA / "npu/ascend_pt_text_2rank"
PT_DB = DATA / "npu/ascend_pt_db_2rank"


def _links(obj):
    out = []
    for k1, v1 in obj.items():
        for k2, ops in v1.items():
            for op, links in ops.items():
                if op != "Total Op Info":
                    out += [(op, pair, link["Transport Type"], link["Bandwidth(GB/s)"]) for pair, link in links.items()]
    return out


def test_cluster_communication_matrix_feeds_the_cluster_analysis():
    cluster = load_quietly(C16)
    raw = _links(json.loads((C16 / "cluster_communication_matrix.json").read_text()))
    rows = [r for prof in cluster for r in prof.communication_matrix.itertuples()]
    assert len(rows) == len(raw)  # each link once, from the profile of its source rank
    assert sorted((r.op_name, f"{r.src}-{r.dst}", r.transport, r.bandwidth_gbps) for r in rows) == sorted(raw)
    m = C.communication_matrix(cluster).set_index(["src", "dst", "transport"])
    assert m.loc[("0", "8", "RDMA"), "time_ms"] == pytest.approx(0.86381540625)
    assert m.loc[("0", "8", "RDMA"), "bandwidth"] == pytest.approx(20.97152 / 0.86381540625)


def test_communication_groups():
    g = load_quietly(C16)["0"].communication_groups
    raw = json.loads((C16 / "communication_group.json").read_text())
    assert len(g) == sum(len(v) for v in raw.values())
    assert g.loc[(g["kind"] == "collective") & (g["group"] == 1), "ranks"].iloc[0] == ("0", "8")
    assert g["size"].max() == 16


def test_npu_module_mem_text_and_database_agree():
    t, d = load_quietly(PT_TEXT, device="0").npu_module_mem, load_quietly(PT_DB, device="0").npu_module_mem
    with open(PT_TEXT / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/npu_module_mem.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(t) == len(rows) and set(t["component"]) == {r["Component"] for r in rows}
    assert t["reserved_mb"].max() == pytest.approx(max(float(r["Total Reserved(MB)"]) for r in rows))
    # the database's ENUM_MODULE spells one module AMP where the text export wrote AML
    assert set(d["component"]) ^ set(t["component"]) == {"AMP", "AML"} and len(d) == len(t)


def test_operator_details_and_l2_cache():
    prof = load_quietly(PT_TEXT, device="1")
    out = PT_TEXT / "rank1_ascend_pt/ASCEND_PROFILER_OUTPUT"
    with open(out / "operator_details.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    od = prof.operator_details
    assert len(od) == len(rows) and od["name"].tolist() == [r["Name"] for r in rows]
    assert od["device_self_duration_us"].sum() == pytest.approx(
        sum(float(r["Device Self Duration(us)"]) for r in rows))
    assert "\n" in od["call_stack"].iloc[0]
    with open(out / "l2_cache.csv", newline="") as f:
        l2rows = list(csv.DictReader(f))
    l2 = prof.l2_cache
    assert len(l2) == len(l2rows) and str(l2["task_id"].dtype) == "Int64"
    assert l2["victim_rate"].mean() == pytest.approx(sum(float(r["Victim Rate"]) for r in l2rows) / len(l2rows))
    assert l2["hit_rate"].isna().all()  # written N/A: the metric was not collected


def test_cpu_framework_input_shapes_joined_to_ops():
    prof = load_quietly("mindspore2/lenet_pynative")
    shapes = prof.input_shapes.set_index("op_name")
    assert shapes.loc["Conv2D-op0", "input_shapes"] == "[32, 1, 32, 32];[6, 1, 5, 5]"
    assert shapes.loc["Conv2D-op0", "count"] == 300
    ops = prof.ops.set_index("op_name")
    assert ops.loc["Default/Conv2D-op1", "input_shapes"] == "[32, 6, 14, 14];[16, 6, 5, 5]"


@pytest.mark.parametrize("dataset", ["npu/ascend_pt_text_2rank", "npu/ascend_pt_db_2rank", "npu/cluster_analysis_16rank",
                                     "mindspore2/lenet_pynative", "npu/cann_prof_2dev", "npu/msprof_db"])
def test_every_file_found_feeds_a_frame(dataset):
    obj = load_quietly(dataset)
    for prof in (list(obj) if hasattr(obj, "ranks") else [obj]):
        files = prof.files
        assert len(files) and (files["feeds"] != "").all(), files[files["feeds"] == ""]
        assert "unrecognised" not in set(files["role"])


def test_cann_summaries_by_header_name(tmp_path):
    """api_statistic.csv, dataset.csv and data_preprocess.csv are not in the shipped data: these files
    follow the writers' exact headers (CANN's api_statistic assembler test row, FORMATS 4.3/4.6, CANN's
    aicpu summary header), each with a damaged cell that costs only that value."""
    out = tmp_path / "x_ascend_ms" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "api_statistic.csv").write_text(
        "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"
        "host,runtime,ContextCreate,0.001,1,0.001,0.001,0.001,0\n"
        "host,acl,aclrtMemcpy,900.0,3,300.0,250.0,350.0,100.0\n"
        "host,acl,aclrtLaunchKernel,200.0,2,100.0,95.0,105.0,25.0\n"
        + "".join(f"host,node,op{i},{i}.5,1,{i}.5,{i}.5,{i}.5,0\n" for i in range(8))
        + "host,acl,aclrtSynchronizeStream,1x0.0,1,150.0,150.0,150.0,0.0\n")
    (out / "dataset.csv").write_text("Operation,Stage,Occurrences,Avg. time (us),Custom Info\n"
                                     "GetNext,total,300,12.5,\nBatch,parse,300,3.25,batch=32\n")
    (out / "data_preprocess.csv").write_text(
        "Timestamp(us),Node,Compute_time(us),Memcpy_time(us),Task_time(us),Dispatch_time(us),Total_time(us)\n"
        "1736405443881410.3,GetNext,10.0,1.0,11.0,2.0,13.0\n")
    prof = load_quietly(tmp_path)
    api = prof.api_statistic
    assert api.columns.tolist()[:5] == ["device_id", "level", "api_name", "time_us", "count"]
    assert api.loc[api["api_name"] == "aclrtMemcpy", "avg_us"].item() == 300.0
    assert str(api["count"].dtype) == "Int64" and api["time_us"].isna().sum() == 1
    (problem,) = [p for p in prof.problems if p.file.endswith("api_statistic.csv")]
    assert problem.kind == "warning" and problem.line == 13 and problem.field == "Time(us)"
    ds = prof.dataset
    assert ds["avg_time_us"].tolist() == [12.5, 3.25] and ds["operation"].tolist() == ["GetNext", "Batch"]
    assert prof.data_preprocess["total_time_us"].item() == 13.0
    assert set(prof.files["feeds"]) >= {"api_statistic", "dataset", "data_preprocess"}


def test_a_deliverable_without_a_parser_is_listed_not_ignored(tmp_path):
    folder = tmp_path / "rank0_ascend_pt"
    shutil.copytree(PT_TEXT / "rank0_ascend_pt", folder)
    (folder / "ASCEND_PROFILER_OUTPUT/hbm.csv").write_text("Device_id,Metric,Read(MB/s),Write(MB/s)\n0,Average,1.0,2.0\n")
    files = load_quietly(folder).files.set_index("role")
    assert files.loc["unrecognised", "path"].endswith("hbm.csv") and files.loc["unrecognised", "feeds"] == ""


def test_a_database_beside_the_text_export_feeds_only_what_the_text_lacks(tmp_path):
    folder = tmp_path / "rank0_ascend_pt"
    shutil.copytree(PT_TEXT / "rank0_ascend_pt", folder)
    shutil.copy(PT_DB / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db", folder / "ASCEND_PROFILER_OUTPUT")
    prof = load_quietly(folder)
    assert prof.generation == "mindspore2"
    feeds = prof.files.set_index("role")["feeds"]
    assert feeds["profiler_db"] == "communication"  # the one frame this text export has no file for
    assert len(prof.kernels) == 191 and prof.kernels.attrs["path"].endswith("kernel_details.csv")
    assert len(prof.communication) == 4
