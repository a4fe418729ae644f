"""MindData loaders against the real files in ../shared/data and MindInsight's numbers in expected/."""
from __future__ import annotations

import shutil
import warnings

import numpy as np
import pandas as pd
import pytest

import nbprofiler
from nbprofiler.errors import (EmptyFileError, MalformedFileError, ProfilerDataWarning, TruncatedFileError)
from nbprofiler.io import minddata as md
from nbprofiler.io.discover import discover

from .conftest import DATA, expected

LENET = DATA / "mindspore2/lenet_pynative/vm_11535_20261121042531696_ascend_ms"

# (dataset folder, device, expected file)
WITH_PIPELINE = [
    ("minddata/md_bottleneck_map", "0", "minddata__md_bottleneck_map__device0"),
    ("minddata/md_fast", "0", "minddata__md_fast__device0"),
    ("mindspore2/lenet_pynative", "0", "mindspore2__lenet_pynative__device0"),
    ("legacy/run_2_lenet", "1", "legacy__run_2_lenet__device1"),
    ("legacy/fixtures_mixed_ids", "0", "legacy__fixtures_mixed_ids__device0"),
    ("legacy/run_1_widedeep", "1", "legacy__run_1_widedeep__device1"),
]


def load(folder: str, device: str):
    return nbprofiler.load(DATA / folder, device=device)


@pytest.mark.parametrize("folder,device,exp", WITH_PIPELINE)
def test_pipeline_rows_match_mindinsight(folder, device, exp):
    frame = load(folder, device).minddata_pipeline
    rows = expected(exp)["minddata_pipeline"]["ui_query"]["rows"]
    assert list(frame["op_id"]) == [r[0] for r in rows]  # breadth-first order as in the file
    for r, (_, mine) in zip(rows, frame.iterrows()):
        op_id, op_type, avg, length, usage, interval, parent, children = r
        assert mine["op_type"] == op_type
        assert (np.isnan(mine["output_queue_average_size"]) if avg is None
                else mine["output_queue_average_size"] == pytest.approx(avg, rel=1e-12))
        assert (pd.isna(mine["output_queue_length"]) if length is None else mine["output_queue_length"] == length)
        assert mine["output_queue_usage_rate"] == pytest.approx(usage or 0.0, rel=1e-12)
        assert mine["sample_interval_ms"] == interval
        assert (pd.isna(mine["parent_id"]) if parent is None else mine["parent_id"] == parent)
        assert mine["children_ids"] == (children or [])
    assert frame["op_id"].dtype == "int64" and frame["parent_id"].dtype == "Int64"
    assert frame["output_queue_usage_rate"].dtype == "float64"


def test_pipeline_csv_quirks_bfs_order_and_empty_vs_zero_root():
    # minddata_variants: rows in BFS order 0,4,1,2,3; root usage written empty (files 1, 3) or 0 (0, 2);
    # old op names without the Op suffix
    for i, root_cell in [(0, "0"), (1, ""), (2, "0"), (3, "")]:
        path = DATA / f"legacy/minddata_variants/minddata_pipeline_raw_{i}.csv"
        assert path.read_text().splitlines()[1].split(",")[6] == root_cell
        frame, sizes = md.read_pipeline_csv(path)
        assert list(frame["op_id"]) == [0, 4, 1, 2, 3]
        assert list(frame["op_type"]) == ["Batch", "Shuffle", "Shuffle", "TFReader", "TFReader"]
        assert frame["output_queue_usage_rate"].iloc[0] == 0.0
        assert np.isnan(frame["output_queue_average_size"].iloc[0]) and pd.isna(frame["output_queue_length"].iloc[0])
        assert frame["children_ids"].tolist() == [[4], [1], [2, 3], [], []]
        assert 0 not in sizes and len(sizes[2]) == 4


@pytest.mark.parametrize("json_path,csv_path", [
    (DATA / "minddata/md_bottleneck_map/pipeline_profiling_0.json", DATA / "minddata/md_bottleneck_map/minddata_pipeline_raw_0.csv"),
    (DATA / "minddata/md_fast/pipeline_profiling_0.json", DATA / "minddata/md_fast/minddata_pipeline_raw_0.csv"),
    (LENET / "FRAMEWORK/pipeline_profiling_0.json", LENET / "ASCEND_PROFILER_OUTPUT/minddata_pipeline_raw_0.csv"),
    # legacy: ops listed leaf first, an EpochCtrlOp (op 4) above the root, "metrics": null
    (DATA / "legacy/run_2_lenet/pipeline_profiling_1.json", DATA / "legacy/run_2_lenet/minddata_pipeline_raw_1.csv"),
    # queue-less op 4 between op 1 and op 3: op 3 is promoted to be op 1's child, op 4 dropped
    (DATA / "legacy/run_1_widedeep/pipeline_profiling_1.json", DATA / "legacy/run_1_widedeep/minddata_pipeline_raw_1.csv"),
])
def test_pipeline_derived_from_json_equals_mindspore_csv(json_path, csv_path):
    derived = md.derive_pipeline(md.read_pipeline_json(json_path), json_path)
    written, sizes = md.read_pipeline_csv(csv_path)
    pd.testing.assert_frame_equal(derived, written, check_exact=False, rtol=1e-12)
    doc = md.read_pipeline_json(json_path)
    for op_id, s in sizes.items():
        assert doc["op_info"][op_id]["queue"][0] == s


def test_pipeline_falls_back_to_json_when_no_csv():
    # fixtures_mixed_ids has pipeline_profiling_1.json but no minddata_pipeline_raw_1.csv
    prof = load("legacy/fixtures_mixed_ids", "1")
    frame = prof.minddata_pipeline
    assert frame.attrs["source"].endswith("pipeline_profiling_1.json")
    assert list(frame["op_id"]) == [0, 1, 2, 3]
    assert frame["children_ids"].tolist() == [[1], [2, 3], [], []]
    assert frame["output_queue_usage_rate"].tolist() == [0.0, 0.3125, 0.3125, 0.3125]
    assert prof.problems == []


def test_queues_long_form_with_cpu_timestamps():
    prof = load("minddata/md_bottleneck_map", "0")
    q = prof.minddata_queues
    assert q.groupby("op_id").size().to_dict() == {0: 242, 1: 242, 2: 242}
    stamps = prof.cpu_utilization["time_ms"].to_numpy()
    np.testing.assert_array_equal(q[q["op_id"] == 2]["time_ms"].to_numpy(), stamps)
    exp = expected("minddata__md_bottleneck_map__device0")["minddata_pipeline"]["ops"][2]["output_queue_size"]
    sizes = q[q["op_id"] == 2]["size"]
    assert int(sizes.sum()) == exp["sum"] and sizes.head(8).tolist() == exp["head"]
    assert (q["length"] == 16).all()
    # legacy: 2 queue samples but 3 cpu time stamps -> no times
    q = load("legacy/run_2_lenet", "1").minddata_queues
    assert len(q) == 8 and q["time_ms"].isna().all()


def test_queues_from_csv_lists_when_no_json():
    runs = discover(DATA / "legacy/minddata_variants")
    run = next(r for r in runs if r.device == "1")
    q = md.queues(run)
    assert sorted(q["op_id"].unique()) == [1, 2, 3, 4]
    assert q[q["op_id"] == 2]["size"].tolist() == [60, 60, 60, 60]


@pytest.mark.parametrize("folder,device,exp", WITH_PIPELINE[:5])
def test_host_queue_counts_match_mindinsight(folder, device, exp):
    prof = load(folder, device)
    hq = prof.host_queue
    info = expected(exp)["queues"]
    assert hq.attrs["source"] + "_profiling_" + device + ".txt" == info["device_queue_file"]
    summary = info["process_summary"]["device_queue_info"]["summary"]
    assert len(hq) == summary["total_batch"]
    assert int((hq["size"] == 0).sum()) == summary["empty_batch_count"]
    assert int((hq["size"] == hq["capacity"]).sum()) == summary["full_batch_count"]
    assert hq["step"].is_monotonic_increasing
    costs = info["device_queue_time_ms"]["info"]
    get = costs["get_cost"]
    got = hq["get_ms"].tolist()
    assert (got == get) if isinstance(get, list) else (got[:8] == get["head"] and sum(got) == get["sum"])


def test_host_queue_four_field_records():
    # run_2_lenet/dataset_iterator_profiling_1.txt is the single old-style line "1 64 1 3"
    recs = md.read_queue_records(DATA / "legacy/run_2_lenet/dataset_iterator_profiling_1.txt")
    hq = md.host_queue_frame(recs)
    assert hq[["step", "size", "capacity"]].values.tolist() == [[1, 3, 64]]
    assert hq["timestamp_ms"].isna().all() and hq["get_ms"].isna().all()


def test_steps_not_starting_at_one_are_rebased_for_cpu_alignment(tmp_path):
    src = DATA / "minddata/md_bottleneck_map"
    for f in ("pipeline_profiling_0.json", "minddata_cpu_utilization_0.json"):
        shutil.copy(src / f, tmp_path / f)
    lines = (src / "dataset_iterator_profiling_0.txt").read_text().splitlines()
    shifted = []
    for line in lines:
        f = line.split()
        f[2] = str(int(f[2]) + 100)  # profiling started at step 101
        shifted.append(" ".join(f))
    (tmp_path / "dataset_iterator_profiling_0.txt").write_text("\n".join(shifted) + "\n")
    prof = nbprofiler.load(tmp_path)
    assert prof.host_queue["step"].iloc[0] == 101
    original = load("minddata/md_bottleneck_map", "0").cpu_utilization["step"]
    pd.testing.assert_series_equal(prof.cpu_utilization["step"], original)


def test_device_queue_ascend_us_and_gpu_ns(tmp_path):
    dq = load("legacy/run_2_lenet", "1").device_queue
    q = expected("legacy__run_2_lenet__device1")["queues"]
    assert dq["size"].tolist() == q["get_next_queue"]["info"]["queue"]
    np.testing.assert_allclose(dq["get_next_ms"], q["get_next_time"]["info"]["get_next"])
    assert dq["start_us"].iloc[0] == 154907895305.0 and dq.attrs["source"] == "minddata_aicpu"
    # the same records written by the GPU profiler in ns, plus an unrelated kernel line and no size column
    src = (DATA / "legacy/run_2_lenet/minddata_aicpu_1.txt").read_text().splitlines()
    gpu = [f"GetNext {int(s) * 1000} {int(e) * 1000}" for _, s, e, _ in (l.split() for l in src)]
    (tmp_path / "minddata_getnext_profiling_0.txt").write_text("\n".join(["Other 1 2 3", *gpu]) + "\n")
    g = md.read_getnext(tmp_path / "minddata_getnext_profiling_0.txt", nanoseconds=True)
    np.testing.assert_allclose(g["get_next_ms"], dq["get_next_ms"])
    np.testing.assert_allclose(g["start_us"], dq["start_us"])
    assert g["size"].isna().all() and len(g) == 3


def test_cpu_utilization_unequal_series_lengths():
    cpu = load("mindspore2/lenet_pynative", "0").cpu_utilization
    assert len(cpu) == 1484
    lengths = cpu.attrs["series_lengths"]
    assert lengths["device_info.idle_utilization"] == 2968 and lengths["process_info.user_utilization"] == 1483
    assert lengths["device_info.runnable_process"] == 2968
    assert cpu["process_user_pct"].isna().sum() == 1 and np.isnan(cpu["process_user_pct"].iloc[-1])
    assert cpu["runnable_processes"].notna().all() and cpu["idle_pct"].notna().all()
    assert cpu.attrs["sampling_interval_ms"] == 20 and cpu.attrs["step_total"] == 300
    assert cpu["step"].iloc[0] == 0 and cpu["step"].iloc[-1] == 300
    # legacy key spelling
    legacy = load("legacy/run_2_lenet", "1").cpu_utilization
    assert legacy["runnable_processes"].tolist() == [10.0, 20.0, 30.0]


def test_op_cpu_utilization_long_form():
    op = load("mindspore2/lenet_pynative", "0").op_cpu_utilization
    assert op.groupby("op_id").size().to_dict() == {0: 1484, 1: 1484, 2: 1484, 3: 1484}
    assert list(op.columns) == ["op_id", "sample", "time_ms", "user_pct", "sys_pct"]


@pytest.mark.parametrize("folder", [DATA / "minddata/md_bottleneck_map", DATA / "minddata/md_fast",
                                    LENET / "ASCEND_PROFILER_OUTPUT"])
def test_summary_csv_ragged_rows_parse_like_the_json(folder):
    from_csv = md.read_summary_csv(folder / "minddata_pipeline_summary_0.csv")
    prof_summary = nbprofiler.load(folder).minddata_summary
    assert from_csv == prof_summary  # JSON preferred by the Profile; the CSV twin says the same


# -- damaged input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("damage,field", [
    (lambda s: {**s, "op_names": s["op_names"][:-1]}, "op_names"),          # one name lost: names shift
    (lambda s: {**s, "num_workers": 2}, "num_workers"),                     # a scalar, not a list
    (lambda s: {**s, "avg_cpu_pct": ["high"] * len(s["op_ids"])}, "avg_cpu_pct"),
    (lambda s: {**s, "children_ids": [1] * len(s["op_ids"])}, "children_ids"),
    (lambda s: {**s, "per_batch_time": [1.0, 2.0]}, "per_batch_time"),
])
def test_pipeline_summary_of_the_wrong_shape_is_refused_and_the_rest_loads(tmp_path, damage, field):
    """A summary whose lists disagree would pair one op's numbers with another's name: refused with the
    key named, while the pipeline, queues and CPU frames of the same folder still load."""
    import json
    src = DATA / "minddata/md_bottleneck_map"
    folder = tmp_path / "md"
    shutil.copytree(src, folder)
    good = json.loads((src / "minddata_pipeline_summary_0.json").read_text())
    (folder / "minddata_pipeline_summary_0.json").write_text(json.dumps(damage(good)))
    with pytest.raises(MalformedFileError) as err:
        md.summary_file(next(r for r in discover(folder) if r.device == "0"))
    assert err.value.field == field and "minddata_pipeline_summary_0.json" in str(err.value)
    prof = nbprofiler.load(folder)
    with pytest.warns(ProfilerDataWarning, match=field):
        assert prof.minddata_summary is None
    assert len(prof.minddata_pipeline) == len(good["op_ids"])


def test_pipeline_summary_csv_of_the_wrong_shape_is_refused(tmp_path):
    text = (DATA / "minddata/md_fast/minddata_pipeline_summary_0.csv").read_text()
    path = tmp_path / "minddata_pipeline_summary_0.csv"
    path.write_text(text.replace("num_workers,2,1,1", "num_workers,2,1"))
    with pytest.raises(MalformedFileError, match="2 entries for 3 ops"):
        md.check_summary_shape(md.read_summary_csv(path), path)


def test_truncated_pipeline_json_names_the_line(tmp_path):
    text = (DATA / "legacy/fixtures_mixed_ids/pipeline_profiling_1.json").read_text()
    (tmp_path / "pipeline_profiling_0.json").write_text(text[: len(text) // 2])
    with pytest.raises(TruncatedFileError) as err:
        md.read_pipeline_json(tmp_path / "pipeline_profiling_0.json")
    assert err.value.line == text[: len(text) // 2].count("\n") + 1
    with pytest.warns(ProfilerDataWarning):
        prof = nbprofiler.load(tmp_path)
        frame = prof.minddata_pipeline
    assert frame.empty and prof.problems[0].line == err.value.line
    assert "TruncatedFileError" in prof.problems[0].error


def test_queue_file_with_bad_line_loads_the_rest_and_warns(tmp_path):
    lines = (DATA / "minddata/md_fast/dataset_iterator_profiling_0.txt").read_text().splitlines()
    lines[9] = "0 2 x3 7 728652"
    (tmp_path / "dataset_iterator_profiling_0.txt").write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prof = nbprofiler.load(tmp_path)
        hq = prof.host_queue
    assert len(hq) == 200 and np.isnan(hq.loc[hq["step"] == 3, "batch_ms"].iloc[0])
    msgs = [str(w.message) for w in caught if issubclass(w.category, ProfilerDataWarning)]
    assert any("line 10" in m for m in msgs)
    assert prof.problems[0].kind == "warning" and prof.problems[0].line == 10


def test_bad_list_cell_and_empty_queue_file(tmp_path):
    text = (DATA / "legacy/run_2_lenet/minddata_pipeline_raw_1.csv").read_text().replace('"[0, 2]"', '"[0, 2"')
    (tmp_path / "minddata_pipeline_raw_1.csv").write_text(text)
    with pytest.raises(MalformedFileError) as err:
        md.read_pipeline_csv(tmp_path / "minddata_pipeline_raw_1.csv")
    assert err.value.line == 2 and err.value.field == "output_queue_size"
    (tmp_path / "device_queue_profiling_1.txt").write_text("")
    with pytest.raises(EmptyFileError):
        md.read_queue_records(tmp_path / "device_queue_profiling_1.txt")
    (tmp_path / "pipeline_profiling_1.json").write_text('{"sampling_interval": 10, "op_info": '
                                                        '[{"op_id": 1, "op_type": "MapOp", "num_workers": 1}]}')
    with pytest.raises(MalformedFileError, match="op_id 0"):
        md.derive_pipeline(md.read_pipeline_json(tmp_path / "pipeline_profiling_1.json"),
                           tmp_path / "pipeline_profiling_1.json")
