"""Discovery of every Ascend layout as users have it: ``*_ascend_pt`` rank folders, several sessions /
schedule windows of one rank (each addressable by its key), database exports, folders without
measurements (metadata only, raw CANN data) labelled for what they are, with the command that parses them."""
from __future__ import annotations

import contextlib
import io
import json
import shutil

import pytest

import nbprofiler
from nbprofiler.faces import cli
from nbprofiler.errors import NoProfilerDataError

from .conftest import DATA, load_quietly

PT_TEXT = DATA / "npu/ascend_pt_text_2rank"
LENET = DATA / "mindspore2/lenet_pynative/vm_11535_20261121042531696_ascend_ms"


def _cli(*argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main([str(a) for a in argv]) == 0
    return out.getvalue()


def test_ascend_pt_ranks_are_found_like_ascend_ms():
    cluster = load_quietly(PT_TEXT)
    assert cluster.ranks == ["0", "1"] and cluster.generation == "mindspore2"
    for rank in ("0", "1"):
        prof = load_quietly(PT_TEXT, device=rank)
        assert prof.rank == rank and prof.session == f"rank{rank}_ascend_pt"
        assert prof.info["rank_id"] == rank
        assert len(prof.kernels) == 191 and not prof.step_trace.empty
        roles = set(prof.files["role"])
        assert {"kernel_details", "l2_cache", "operator_details", "npu_module_mem", "profiler_info"} <= roles
        s = prof.summary()
        assert s["devices_found"] == ["0", "1"] and s["device"] == rank and s["step_trace"] is not None
        assert s["session"]["other_sessions"] == []


def test_database_export_is_labelled_database():
    cluster = load_quietly(DATA / "npu/ascend_pt_db_2rank")
    assert cluster.ranks == ["0", "1"] and cluster.generation == "database"
    assert set(cluster["1"].files["role"]) == {"profiler_db", "analysis_db", "profiler_info"}
    assert load_quietly(DATA / "npu/msprof_db").generation == "database"
    assert "database         device=2 " in _cli("info", DATA / "npu/msprof_db")  # its device, as load() names it


@pytest.fixture()
def two_sessions(tmp_path):
    """Two sessions of rank 0 (as a schedule with two windows or two start/stop calls writes them)."""
    later = "vm_11535_20261121050000000_ascend_ms"
    shutil.copytree(LENET, tmp_path / LENET.name)
    shutil.copytree(LENET, tmp_path / later)
    return tmp_path, f"0@{later}"


def test_every_session_is_addressable(two_sessions):
    root, later = two_sessions
    first = load_quietly(root)  # one rank's sessions are not ranks: its first session, the others beside it
    assert isinstance(first, nbprofiler.Profile) and list(first.windows) == ["0", later]
    second = first.windows[later]
    assert first.session == LENET.name and second.key == later
    assert second.windows == first.windows and second.windows["0"] is first
    assert first.other_sessions == [later] and second.other_sessions == ["0"]
    prof = load_quietly(root, device=later)
    assert prof.session == later.split("@", 1)[1]
    s = prof.summary()
    assert s["devices_found"] == ["0", later]
    assert s["session"]["key"] == later and s["session"]["other_sessions"] == ["0"]
    assert "device=KEY" in s["session"]["how_to_pick"]
    assert load_quietly(root, device="0").session == LENET.name  # a bare rank: its first session
    # the command line lists and accepts the same keys
    assert f"device={later}" in _cli("info", root)
    js = json.loads(_cli("summary", root, "--device", later, "--json"))
    assert js["session"]["folder"] == later.split("@", 1)[1] and js["devices_found"] == ["0", later]
    assert "other sessions of this rank: 0@" in _cli("summary", root, "--device", "0")


def test_lab_sidebar_lists_each_session_with_its_key(two_sessions):
    from nbprofiler.faces.lab import list_runs
    root, later = two_sessions
    entries = list_runs(root, root)
    assert sorted(e["key"] for e in entries) == ["0", later]


def test_a_folder_with_only_profiler_info_is_metadata_not_minddata(tmp_path):
    shutil.copy(PT_TEXT / "rank0_ascend_pt/profiler_info_0.json", tmp_path)
    prof = load_quietly(tmp_path)
    assert prof.generation == "metadata"
    (problem,) = prof.problems
    assert "no measurements" in problem.error
    folder = tmp_path / "rank0_ascend_pt"
    folder.mkdir()
    shutil.copy(PT_TEXT / "rank0_ascend_pt/profiler_info_0.json", folder)
    prof = load_quietly(folder)
    assert prof.generation == "metadata" and prof.rank == "0"
    assert f"analyse('{folder}')" in prof.problems[0].error and "torch_npu" in prof.problems[0].error


def test_raw_cann_data_says_what_it_is_and_how_to_parse_it(tmp_path):
    prof_dir = tmp_path / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"
    src = DATA / "npu/cann_prof_2dev" / prof_dir.name / "device_0"
    (prof_dir / "device_0/data").mkdir(parents=True)
    for name in ("info.json.0", "start_info.0", "end_info.0"):
        shutil.copy(src / name, prof_dir / "device_0")
    (prof_dir / "device_0/data/ts_track.data.0.slice_0").write_bytes(b"\x00\x01raw")
    with pytest.raises(NoProfilerDataError) as e:
        nbprofiler.load(tmp_path)
    assert "never parsed" in str(e.value) and f"msprof --export=on --output={prof_dir}" in str(e.value)


def test_rank_from_profiler_metadata_when_profiler_info_is_missing(tmp_path):
    folder = tmp_path / "host_123_20250101000000000_ascend_pt"
    shutil.copytree(PT_TEXT / "rank1_ascend_pt", folder)
    (folder / "profiler_info_1.json").unlink()
    meta = json.loads((folder / "profiler_metadata.json").read_text())
    meta["distributed_args"] = {"rank": 1, "world_size": 2}  # as torch_npu writes it for a distributed run
    (folder / "profiler_metadata.json").write_text(json.dumps(meta))
    prof = load_quietly(tmp_path)
    assert prof.device == "1" and prof.key == "1" and len(prof.kernels) == 191


def test_an_ascend_ms_folder_whose_analysis_never_ran_names_the_command(tmp_path):
    folder = tmp_path / "vm_11535_20261121042531696_ascend_ms"
    raw = folder / "PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0/data"
    raw.mkdir(parents=True)
    (raw / "ts_track.data.0.slice_0").write_bytes(b"\x00raw")
    shutil.copy(PT_TEXT / "rank0_ascend_pt/profiler_info_0.json", folder)
    prof = load_quietly(tmp_path)
    assert prof.generation == "metadata" and prof.session == folder.name
    (problem,) = prof.problems
    assert "raw CANN data" in problem.error
    assert f"from mindspore import Profiler; Profiler.offline_analyse('{folder}')" in problem.error
    assert prof.summary()["problems"][0]["error"] == problem.error


def test_dynamic_profiling_windows_with_the_same_folder_name_get_distinct_keys(tmp_path):
    for window in ("rank0_start2_stop5", "rank0_start6_stop9"):
        shutil.copytree(LENET, tmp_path / window / LENET.name)
    prof = load_quietly(tmp_path)
    later = f"0@rank0_start6_stop9/{LENET.name}"
    assert list(prof.windows) == ["0", later] and prof.devices_found == ["0", later]
    assert load_quietly(tmp_path, device=later).root.parent.name == "rank0_start6_stop9"


def test_the_notebook_summary_names_the_session_and_the_others(two_sessions):
    from nbprofiler.views.repr import profile_facts
    root, later = two_sessions
    facts = dict(profile_facts(load_quietly(root, device=later)))
    assert facts["device"] == later and facts["other sessions"].startswith("0 (open one with")


def test_info_verbose_says_which_frames_each_file_feeds():
    out = _cli("info", PT_TEXT, "-v")
    assert "l2_cache.csv  -> l2_cache" in out and "kernel_details.csv  -> step_windows, op_types, ops, kernels" in out
