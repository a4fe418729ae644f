"""Discovery on every layout in the shared data, and the errors for paths without profiler data."""
from __future__ import annotations

import time

import pytest

import nbprofiler
from nbprofiler.errors import NoProfilerDataError
from nbprofiler.io.discover import classify, discover, run_folder

from .conftest import DATA


@pytest.mark.parametrize("rel, expect", [
    ("legacy/run_1_widedeep", [("legacy", "1")]),
    ("legacy/run_2_lenet", [("legacy", "1")]),
    ("legacy/fixtures_mixed_ids", [("legacy", "0"), ("legacy", "1"), ("legacy", "10")]),
    ("legacy/cluster_4rank_pipeline", [("legacy", str(i)) for i in range(4)]),
    ("legacy/minddata_variants", [("minddata", str(i)) for i in range(4)]),
    ("mindspore2/lenet_pynative", [("mindspore2", "0")]),
    ("minddata/md_bottleneck_map", [("minddata", "0")]),
    ("npu/kernel_details_591", [("mindspore2", "0")]),
    ("npu/trace_view_torch_npu", [("mindspore2", "0")]),
    ("npu/cann_prof_2dev", [("cann", "0"), ("cann", "1")]),
    ("npu/cluster_8rank", [("cluster_analysis", "*")]),
])
def test_discover_layouts(rel, expect):
    runs = discover(DATA / rel)
    assert [(r.generation, r.device) for r in runs] == expect


def test_mixed_ids_group_files_by_id():
    runs = {r.device: r for r in discover(DATA / "legacy/fixtures_mixed_ids")}
    assert runs["10"].get("step_trace").name == "step_trace_raw_10_detail_time.csv"
    assert runs["0"].get("step_trace").name == "step_trace_raw_0_detail_time.csv"
    assert runs["1"].get("aicore_type").name == "aicore_intermediate_1_type.csv"
    assert not runs["0"].has("aicore_type")


def test_ascend_ms_folder_collects_framework_and_output_files_and_ignores_logs():
    (run,) = discover(DATA / "mindspore2/lenet_pynative")
    assert run.session == "vm_11535_20261121042531696_ascend_ms"
    assert run.get("trace_view").parent.name == "ASCEND_PROFILER_OUTPUT"
    assert run.get("cpu_op_type").parent.name == "FRAMEWORK"
    assert all("logs" not in p.parts for paths in run.files.values() for p in paths)


def test_single_trace_file():
    (run,) = discover(DATA / "npu/trace_view_torch_npu/trace_view.json")
    assert run.generation == "trace" and run.get("trace_view").name == "trace_view.json"


def test_whole_data_tree_finds_every_dataset():
    runs = discover(DATA)
    roots = {r.root.relative_to(DATA).parts[:2] for r in runs}
    assert {("legacy", "run_1_widedeep"), ("mindspore2", "lenet_pynative"), ("npu", "cann_prof_2dev"),
            ("minddata", "md_fast"), ("npu", "cluster_8rank")} <= roots


def test_classify_names():
    assert classify("step_trace_raw_10_detail_time.csv") == ("step_trace", "10")
    assert classify("ascend_cluster_analyse_pipeline-parallel_2_4_3.csv") == ("cluster_analyse", "3")
    assert classify("timeline_display_1.json") == ("timeline", "1")
    assert classify("kernel_details.csv") == ("kernel_details", None)
    assert classify("notes.txt") is None


def test_no_profiler_data_names_what_was_looked_for(tmp_path):
    (tmp_path / "readme.txt").write_text("hello")
    with pytest.raises(NoProfilerDataError) as e:
        nbprofiler.load(tmp_path)
    msg = str(e.value)
    assert str(tmp_path) in msg and "step_trace_raw_*_detail_time.csv" in msg and "_ascend_ms" in msg


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(NoProfilerDataError, match="no such file"):
        nbprofiler.load(tmp_path / "nope")


def test_unknown_device_lists_the_ones_found():
    with pytest.raises(NoProfilerDataError, match=r"\['0', '1', '10'\]"):
        nbprofiler.load(DATA / "legacy/fixtures_mixed_ids", device=7)


def test_load_returns_profile_or_cluster():
    assert isinstance(nbprofiler.load(DATA / "legacy/run_2_lenet"), nbprofiler.Profile)
    c = nbprofiler.load(DATA / "legacy/fixtures_mixed_ids")
    assert isinstance(c, nbprofiler.Cluster) and c.ranks == ["0", "1", "10"]
    assert c[10].device == "10" and c["0"].devices_found == ["0", "1", "10"]
    p = nbprofiler.load(DATA / "legacy/fixtures_mixed_ids", device="1")
    assert isinstance(p, nbprofiler.Profile) and p.device == "1"


def test_discovery_of_a_big_unrelated_tree_is_bounded(tmp_path):
    # 3000 unrelated files in nested folders, one real profile file deep inside.
    for i in range(30):
        d = tmp_path / f"dir{i}" / "sub" / "deeper"
        d.mkdir(parents=True)
        for j in range(100):
            (d / f"image_{j}.png").write_bytes(b"x")
    target = tmp_path / "dir7" / "sub" / "deeper"
    (target / "kernel_details.csv").write_bytes((DATA / "npu/kernel_details_591/kernel_details.csv").read_bytes())
    t0 = time.monotonic()
    runs = discover(tmp_path)
    assert time.monotonic() - t0 < 10
    assert [(r.generation, r.root) for r in runs] == [("mindspore2", target)]


def test_discovery_depth_limit(tmp_path):
    deep = tmp_path.joinpath(*[f"d{i}" for i in range(12)])
    deep.mkdir(parents=True)
    (deep / "kernel_details.csv").write_text("Name,Type\n")
    with pytest.raises(NoProfilerDataError):
        discover(tmp_path)


@pytest.mark.parametrize("file, run", [
    ("d/h_1_20231001000000000_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json", "d/h_1_20231001000000000_ascend_ms"),
    ("d/h_1_20231001000000000_ascend_ms/PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0/timeline/"
     "msprof_0_1.json", "d/h_1_20231001000000000_ascend_ms"),
    ("d/PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0/timeline/msprof_0_1.json",
     "d/PROF_000001_20230818142704322_COJGGGCANRMICFBC"),
    ("d/renamed_run/ASCEND_PROFILER_OUTPUT/trace_view.json", "d/renamed_run"),
    ("d/renamed_run/FRAMEWORK/x.txt", "d/renamed_run"),
    ("d/profiler/ascend_timeline_display_0.json", "d/profiler"),
])
def test_a_files_run_folder_is_the_whole_run_the_profiler_wrote(tmp_path, file, run):
    """What the cache guards as a profile: a ``*_ascend_ms`` run folder whole, not only the folder a file
    is in."""
    assert run_folder(tmp_path / file) == tmp_path / run
