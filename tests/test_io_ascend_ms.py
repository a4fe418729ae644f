"""New-format loaders (nbprofiler.io.ascend_ms) on the real torch_npu / msprof-analyze files."""
from __future__ import annotations

import csv
import json
import shutil
from decimal import Decimal

import pandas as pd
import pytest

import nbprofiler
from nbprofiler.errors import (MissingColumnError, ProfilerDataWarning,
                               TruncatedFileError)
from nbprofiler.io import ascend_ms
from nbprofiler.io.discover import discover

from tests.conftest import DATA, load_quietly


def _run(path):
    runs = discover(path)
    assert len(runs) == 1
    return runs[0]


def _raw_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# -- kernel_details.csv -------------------------------------------------------------------------------
def test_kernels_591_rows_columns_and_na():
    k = ascend_ms.kernels(_run(DATA / "npu/kernel_details_591"))
    assert len(k) == 591
    assert k.shape[1] == 33
    assert set(k["accelerator_core"]) == {"AI_VECTOR_CORE", "MIX_AIV", "HCCL", "AI_CORE", "AI_CPU", "DSA_SQE"}
    assert (k["step"] == 1).all() and (k["model_id"] == 4294967295).all()
    hccl = k[k["accelerator_core"] == "HCCL"]
    assert len(hccl) > 0 and hccl["task_id"].isna().all() and hccl["stream_id"].isna().all()
    first = k.iloc[0]
    assert (first["name"], first["type"], first["dur_us"], first["block_dim"]) == ("ZerosLike46", "ZerosLike", 607.98, 48)
    assert first["input_shapes"] == "544404480"  # the tripled quotes are gone
    assert first["aiv_time_us"] == 587.05 and first["aiv_vector_fops"] == 137176320
    assert str(k["start_us"].dtype) == "float64" and str(k["task_id"].dtype) == "Int64"
    # the absolute origin is the earliest Start Time of the file; start_us counts from it
    starts = [float(r["Start Time(us)"]) for r in _raw_rows(DATA / "npu/kernel_details_591/kernel_details.csv")]
    assert k.attrs["origin_us"] == pytest.approx(min(starts), abs=1e-3)
    assert k["start_us"].min() == pytest.approx(0.0, abs=1e-6)
    assert first["start_us"] == pytest.approx(starts[0] - min(starts), abs=1e-3)


def test_kernels_newest_header_tabbed_start_times():
    path = DATA / "npu/kernel_details_newest/kernel_details.csv"
    assert not path.read_bytes().endswith(b"\n")  # the real file has no final newline
    k = ascend_ms.kernels(_run(path.parent))
    assert len(k) == 29 and k.shape[1] == 46
    assert (k["step"] == 19).all()
    assert set(k["accelerator_core"]) == {"AI_CORE", "MIX_AIC", "AI_VECTOR_CORE"}
    first = k.iloc[0]
    assert first["input_shapes"] == "81920,4096;8192,512" and first["output_shapes"] == "4096,512"
    assert first["input_data_types"] == "DT_BF16;DT_BF16"
    assert first["cube_utilization_pct"] == 79.295 and first["aic_mac_time_us"] == 151.425
    assert first["op_state"] == "dynamic" and first["hf32_eligible"] == "NO"
    # "1736413971558972.912\t" parsed; relative start keeps the sub-us digits exactly
    raw = [r["Start Time(us)"] for r in _raw_rows(path)]
    assert raw[0] == "1736413971558972.912\t"
    exact = [Decimal(s.strip()) for s in raw]
    assert k.attrs["origin_us"] == pytest.approx(float(min(exact)), abs=1e-3)
    assert first["start_us"] == pytest.approx(float(exact[0] - min(exact)), abs=1e-6)
    assert k["start_us"].min() == pytest.approx(0.0, abs=1e-9)


def test_kernels_synonym_headers(tmp_path):
    """MindSpore 2.10 writer spellings (Step ID, Block Num, Mix Block Num) map to the same columns."""
    src = (DATA / "npu/kernel_details_591/kernel_details.csv").read_text()
    head, rest = src.split("\n", 1)
    head = head.replace("Step Id", "Step ID").replace("Block Dim", "Block Num").replace("Mix Block Dim", "Mix Block Num")
    (tmp_path / "kernel_details.csv").write_text(head + "\n" + rest)
    k = ascend_ms.kernels(_run(tmp_path))
    assert {"step", "block_dim", "mix_block_dim"} <= set(k.columns)
    assert k["block_dim"].iloc[0] == 48 and len(k) == 591


def test_kernels_damaged(tmp_path):
    src = (DATA / "npu/kernel_details_591/kernel_details.csv").read_text()
    lines = src.splitlines(keepends=True)
    # a bad start time on data line 5 (file line 6) names the line and field
    bad = lines[:5] + [lines[5].replace("1699529623107140.5", "16995x9623107140.5", 1)] + lines[6:]
    (tmp_path / "kernel_details.csv").write_text("".join(bad))
    with pytest.warns(ProfilerDataWarning, match=r"kernel_details.csv, line 6: Start Time\(us\) '16995x9623107140.5'"):
        k = ascend_ms.kernels(_run(tmp_path))
    assert len(k) == 590  # that row is lost, not the file
    # a run killed mid-write: the last row is dropped with a warning, the rest loads
    (tmp_path / "kernel_details.csv").write_text(src[: src.rindex("1699529623307499,1.34,") + 22])
    with pytest.warns(ProfilerDataWarning, match="last row"):
        k = ascend_ms.kernels(_run(tmp_path))
    assert len(k) == 590
    # no Name column at all
    (tmp_path / "kernel_details.csv").write_text(src.replace("Step Id,Model ID,Task ID,Stream ID,Name,", "Step Id,Model ID,Task ID,Stream ID,Nom,", 1))
    with pytest.raises(MissingColumnError) as e:
        ascend_ms.kernels(_run(tmp_path))
    assert e.value.field == "Name"


# -- cluster_analysis_output ------------------------------------------------------------------------
CLUSTER = DATA / "npu/cluster_8rank"


def test_cluster_ranks_and_load():
    run = _run(CLUSTER)
    assert ascend_ms.cluster_ranks(run) == [str(i) for i in range(8)]
    cluster = nbprofiler.load(CLUSTER)
    assert isinstance(cluster, nbprofiler.Cluster) and cluster.ranks == [str(i) for i in range(8)]


def test_cluster_step_trace_rank_and_stage_rows():
    run = _run(CLUSTER)
    run.device = "0"
    r0 = ascend_ms.cluster_step_trace_rank(run)
    assert len(r0) == 1 and r0["step"].iloc[0] == 0  # Step is empty: no step() in the profiled script
    row = r0.iloc[0]
    assert row["computing_ms"] == pytest.approx(80.30968717187493)
    assert row["communication_not_overlapped_ms"] == pytest.approx(683.7312897031249)
    assert row["free_ms"] == pytest.approx(990.6051042031233)
    assert row["stage_ms"] == pytest.approx(1754.64575)
    # the stacked stages add up to the step (= Stage here, as the file shows)
    assert row["total_ms"] == pytest.approx(row["stage_ms"], abs=1e-3)
    # Communication = Overlapped + Communication(Not Overlapped) holds in the real file
    assert row["communication_ms"] == pytest.approx(row["overlapped_ms"] + row["communication_not_overlapped_ms"])
    stages = ascend_ms.cluster_step_trace_stages(run)
    assert len(stages) == 1 and stages["ranks"].iloc[0] == tuple(str(i) for i in range(8))
    full = ascend_ms.cluster_step_trace(run.get("cluster_step_trace_time"))
    ranks = full[full["type"] == "rank"]
    # stage rows are the per-column maxima over the stage's ranks
    for col in ("computing_ms", "communication_not_overlapped_ms", "free_ms", "stage_ms"):
        assert stages[col].iloc[0] == pytest.approx(ranks[col].max())


def test_cluster_communication_filtered_to_rank():
    run = _run(CLUSTER)
    run.device = "1"
    comm = ascend_ms.communication(run)
    assert len(comm) == 2 and set(comm["rank"]) == {"1"} and set(comm["group"]) == {"(0, 1)"}
    b = comm.set_index("op_name").loc["hcom_broadcast__501_0@6297232067196334501"]
    assert b["start_us"] == 1695054582707330.2 and b["elapse_ms"] == pytest.approx(20.798642234375)
    assert b["idle_ms"] == pytest.approx(20.782182390624996)
    run.device = "0"
    links = ascend_ms.communication_links(run)
    assert set(links["transport"]) == {"RDMA", "HCCS", "PCIE", "SDMA"}
    hccs = links[(links["transport"] == "HCCS") & links["op_name"].str.startswith("hcom_broadcast__501_0")].iloc[0]
    assert hccs["size_mb"] == pytest.approx(0.06393599999999998) and hccs["bandwidth_gbps"] == 2.7012
    assert hccs["packets"] == 18 + 2 + 1
    run.device = "5"  # a rank without communication data: an empty frame, not an error
    assert ascend_ms.communication(run).empty


def test_communication_json_per_rank_idel_spelling(tmp_path):
    """A per-rank communication.json ({step: {collective|p2p: {op: info}}}) built from the real cluster
    entry of rank 0, written with MindSpore's tutorial spelling "Idel Time(ms)"."""
    cluster = json.loads((CLUSTER / "cluster_communication.json").read_text())
    op = "hcom_broadcast__501_0@6297232067196334501"
    info = json.loads(json.dumps(cluster["(0, 1)"]["step"][op]["0"]))
    info["Communication Time Info"]["Idel Time(ms)"] = info["Communication Time Info"].pop("Idle Time(ms)")
    d = tmp_path / "x_1_20260101000000000_ascend_ms" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    (d / "communication.json").write_text(json.dumps({"step1": {"collective": {op: info, "Total Op Info": info}}}))
    (d.parent / "profiler_info_3.json").write_text(json.dumps({"ms_version": "2.10.0"}))
    run = _run(tmp_path)
    assert run.device == "3"
    comm = ascend_ms.communication(run)
    assert len(comm) == 1  # "Total Op Info" is an aggregate, not an op
    row = comm.iloc[0]
    assert (row["step"], row["kind"], row["rank"], row["group"]) == ("step1", "collective", "3", "6297232067196334501")
    assert row["idle_ms"] == pytest.approx(5.768242375)
    assert ascend_ms.run_info(run) == {"ms_version": "2.10.0", "rank_id": "3"}


def test_cluster_files_damaged(tmp_path):
    shutil.copy(CLUSTER / "cluster_communication.json", tmp_path)
    text = (CLUSTER / "cluster_step_trace_time.csv").read_text()
    (tmp_path / "cluster_step_trace_time.csv").write_text(text.replace(",rank,3,80077.", ",rank,3,8x077.", 1))
    run = _run(tmp_path)
    run.device = "3"
    with pytest.warns(ProfilerDataWarning) as w:
        st = ascend_ms.cluster_step_trace_rank(run)
    (err,) = [x.message.error for x in w]
    assert err.line == 5 and err.field == "Computing" and st["computing_ms"].isna().sum() == 1
    # one bad value does not cost the step-trace file its ranks
    assert ascend_ms.cluster_ranks(run) == [str(r) for r in range(8)]
    # ranks still come from the communication file when the step-trace file is broken
    (tmp_path / "cluster_step_trace_time.csv").write_text(text.replace(",rank,", ",ronk,"))
    assert ascend_ms.cluster_ranks(run) == ["0", "1"]
    raw = (CLUSTER / "cluster_communication.json").read_text()
    (tmp_path / "cluster_communication.json").write_text(raw[: len(raw) // 2])
    with pytest.raises(TruncatedFileError) as e:
        ascend_ms.communication(run)
    assert "cluster_communication.json" in str(e.value)


def test_step_trace_time_and_memory_files(tmp_path):
    """step_trace_time.csv and memory_record.csv / operator_memory.csv are not in the shipped data: these
    files follow the exact headers of FORMATS.md 4.4 / 4.9, with the values of rank 0's real row."""
    out = tmp_path / "ASCEND_PROFILER_OUTPUT"
    out.mkdir()
    (out / "step_trace_time.csv").write_text(
        "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
        "Communication(Not Overlapped and Exclude Receive),Preparing\n"
        "1,80309.687,683731.290,5524.545,689255.834,990605.104,1754645.750,0.000,683731.290,12.500\n")
    (out / "memory_record.csv").write_text(
        "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Device Type\n"
        "MindSpore,1699529622790614.8,0.57,1024.0,0.57,NPU:0\nGE,1699529622790714.8,12.5,64.0,12.5,NPU:0\n")
    (out / "operator_memory.csv").write_text(
        "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),Active Duration(us),"
        "Allocation Total Allocated(MB),Allocation Total Reserved(MB),Allocation Total Active(MB),Release Total Allocated(MB),"
        "Release Total Reserved(MB),Release Total Active(MB),Stream Ptr,Device Type\n"
        "Conv2D-op1,588.0,1699529622790624.8,,,,,0.57,1024.0,0.57,,,,94720,NPU:0\n")
    run = _run(tmp_path)
    st = ascend_ms.step_trace_time(run)
    assert st["step"].tolist() == [1]
    assert st["total_ms"].iloc[0] == pytest.approx(0.0125 + 80.309687 + 683.73129 + 990.605104)
    mem = ascend_ms.memory_record(run)  # no Profile: times stay absolute (origin 0)
    assert mem["component"].tolist() == ["MindSpore", "GE"] and mem["allocated_mb"].tolist() == [0.57, 12.5]
    assert mem["time_us"].diff().iloc[1] == pytest.approx(100.0)
    opm = ascend_ms.operator_memory(run)
    assert opm["size_kb"].iloc[0] == 588.0 and pd.isna(opm["release_us"].iloc[0])


def test_kernels_the_file_types_n_a_are_typed_by_their_names():
    # torch_npu at profiler level 0 writes Type N/A for every kernel: one "N/A" type at 100 % says nothing
    import csv
    path = DATA / "npu/ascend_pt_text_2rank/rank0_ascend_pt"
    with open(path / "ASCEND_PROFILER_OUTPUT/kernel_details.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["Type"] for r in rows} == {"N/A"}
    matmul = [r for r in rows if r["Name"].startswith("aclnn") and r["Name"].rsplit("_", 1)[-1] == "MatMulV2"]
    prof = load_quietly(path)
    types = prof.op_types.set_index(["kind", "op_type"])
    assert "N/A" not in set(prof.op_types["op_type"])
    assert types.loc[("npu", "MatMulV2"), "count"] == len(matmul) == 8
    assert types.loc[("npu", "MatMulV2"), "total_time_us"] == pytest.approx(sum(float(r["Duration(us)"]) for r in matmul))
