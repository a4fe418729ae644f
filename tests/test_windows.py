"""Issue 33 item 3: schedule windows / sessions of one rank are not ranks, and a rank folder's rank is the one
its own metadata writes, whatever the folder is called. Layouts are copies of the real Ascend PyTorch
profiler output (npu/ascend_pt_text_2rank, npu/ascend_pt_db_2rank) renamed and regrouped as users have them."""
from __future__ import annotations

import csv
import shutil

import ipywidgets as W
import pytest

import nbprofiler
from nbprofiler.views.dashboard import Dashboard
from nbprofiler.views.windows import WindowsDashboard

from .conftest import DATA, load_quietly

PT_TEXT = DATA / "npu/ascend_pt_text_2rank"
PT_DB = DATA / "npu/ascend_pt_db_2rank"
WINDOWS = ["host_1_20250101000000000_ascend_pt", "host_1_20250101000100000_ascend_pt",
           "host_1_20250101000200000_ascend_pt"]
LATER = [f"0@{w}" for w in WINDOWS[1:]]


def _as_rank0(folder):
    """Relabel a copied rank-1 folder as rank 0 (its profiler_info_1.json replaced by rank 0's)."""
    (folder / "profiler_info_1.json").unlink()
    shutil.copy(PT_TEXT / "rank0_ascend_pt/profiler_info_0.json", folder)


@pytest.fixture()
def three_windows(tmp_path):
    """Three schedule windows of rank 0, recorded one minute apart. The second holds the other rank's
    recording (relabelled rank 0), so its numbers differ from the first and third."""
    root = tmp_path / "windows"
    shutil.copytree(PT_TEXT / "rank0_ascend_pt", root / WINDOWS[0])
    shutil.copytree(PT_TEXT / "rank1_ascend_pt", root / WINDOWS[1])
    _as_rank0(root / WINDOWS[1])
    shutil.copytree(PT_TEXT / "rank0_ascend_pt", root / WINDOWS[2])
    return root


def _step_trace_csv(folder) -> dict:
    """The one step of a window's step_trace_time.csv, read here with the csv module, in ms."""
    with open(folder / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    ms = {k: float(v) / 1000.0 for k, v in row.items() if k != "Step"}
    ms["step"] = int(row["Step"])
    ms["total"] = ms["Computing"] + ms["Communication(Not Overlapped)"] + ms["Free"] + ms["Preparing"]
    return ms


def _shown_step(dashboard: Dashboard) -> dict:
    """What the dashboard's Step trace tab draws for the step: its bars' source."""
    data = dashboard.select("Step trace")._sources["step_trace_steps_src"].data
    (i,) = range(len(data["step"]))
    return {c: float(data[c][i]) for c in ("step", "computing_ms", "communication_not_overlapped_ms", "free_ms",
                                          "preparing_ms", "total_ms")}


def _same(shown: dict, written: dict) -> None:
    assert shown["step"] == written["step"]
    assert shown["computing_ms"] == pytest.approx(written["Computing"])
    assert shown["communication_not_overlapped_ms"] == pytest.approx(written["Communication(Not Overlapped)"])
    assert shown["free_ms"] == pytest.approx(written["Free"])
    assert shown["preparing_ms"] == pytest.approx(written["Preparing"])
    assert shown["total_ms"] == pytest.approx(written["total"])


# -- the rank comes from the profiler's own metadata ------------------------------------------------------
def test_a_renamed_rank_folder_alone_is_one_profile_of_its_written_rank(tmp_path):
    folder = tmp_path / "test_rank_1"
    shutil.copytree(PT_TEXT / "rank1_ascend_pt", folder)
    prof = load_quietly(folder)
    assert isinstance(prof, nbprofiler.Profile)
    assert (prof.rank, prof.key, prof.devices_found, prof.session) == ("1", "1", ["1"], "test_rank_1")
    assert len(prof.kernels) == 191 and not prof.step_trace.empty and prof.generation == "mindspore2"
    assert {"profiler_info", "profiler_metadata", "kernel_details", "trace_view"} <= set(prof.files["role"])
    # its ASCEND_PROFILER_OUTPUT loaded alone: the rank written beside it
    assert load_quietly(folder / "ASCEND_PROFILER_OUTPUT").rank == "1"


def test_a_parent_of_renamed_rank_folders_is_a_cluster_of_both_ranks(tmp_path):
    for rank in ("0", "1"):
        shutil.copytree(PT_TEXT / f"rank{rank}_ascend_pt", tmp_path / f"test_rank_{rank}")
    cluster = load_quietly(tmp_path)
    assert isinstance(cluster, nbprofiler.Cluster) and cluster.ranks == ["0", "1"]
    for rank in ("0", "1"):
        prof = cluster[rank]
        assert prof.root.name == f"test_rank_{rank}" and prof.windows == {rank: prof}
        assert len(prof.kernels) == 191 and len(prof.step_trace) == 1 and len(prof.memory)
    assert cluster["1"].step_trace["computing_ms"].iloc[0] == pytest.approx(
        _step_trace_csv(PT_TEXT / "rank1_ascend_pt")["Computing"])


def test_the_rank_id_inside_profiler_info_counts_without_the_number_in_its_name(tmp_path):
    folder = tmp_path / "somewhere"
    shutil.copytree(PT_TEXT / "rank1_ascend_pt", folder)
    (folder / "profiler_info_1.json").rename(folder / "profiler_info.json")  # the single-card name
    assert load_quietly(tmp_path).rank == "1"


def test_the_database_export_says_its_rank(tmp_path):
    folder = tmp_path / "test_rank_1"
    shutil.copytree(PT_DB / "rank1_ascend_pt", folder)
    (folder / "profiler_info_1.json").unlink()
    assert load_quietly(tmp_path).rank == "1"  # ascend_pytorch_profiler_1.db
    db = folder / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_1.db"
    db.rename(db.with_name("ascend_pytorch_profiler.db"))
    prof = load_quietly(tmp_path)
    assert prof.rank == "1" and prof.generation == "database"  # its RANK_DEVICE_MAP
    assert not prof.step_trace.empty


# -- one rank's windows are one Profile ----------------------------------------------------------------
def test_one_ranks_windows_load_as_its_first_windows_profile(three_windows):
    prof = load_quietly(three_windows)
    assert isinstance(prof, nbprofiler.Profile)
    assert (prof.key, prof.rank, prof.session) == ("0", "0", WINDOWS[0])
    assert list(prof.windows) == ["0", *LATER] and prof.other_sessions == LATER
    assert prof.devices_found == ["0", *LATER]
    assert [p.session for p in prof.windows.values()] == WINDOWS
    # a window picked by its key: that window, with the same windows beside it
    second = load_quietly(three_windows, device=LATER[0])
    assert second.session == WINDOWS[1] and list(second.windows) == ["0", *LATER]
    assert second.windows[LATER[0]] is second
    assert load_quietly(three_windows, device=0).session == WINDOWS[0]
    # each window's own numbers
    _same({"step": second.step_trace["step"].iloc[0], **second.step_trace.iloc[0].to_dict()},
          _step_trace_csv(three_windows / WINDOWS[1]))


def test_the_bundled_samples_are_one_devices_windows_not_a_cluster():
    import nbprofiler.samples
    from pathlib import Path
    prof = load_quietly(Path(nbprofiler.samples.__file__).parent)
    assert isinstance(prof, nbprofiler.Profile) and prof.key == "0" and len(prof.windows) == 3
    assert not prof.step_trace.empty or not prof.timeline.empty


def test_a_cluster_of_ranks_with_several_windows_each_picks_per_rank(tmp_path):
    for rank in ("0", "1"):
        for t in ("20250101000000000", "20250101000100000"):
            shutil.copytree(PT_TEXT / f"rank{rank}_ascend_pt", tmp_path / f"host_{rank}_{t}_ascend_pt")
    cluster = load_quietly(tmp_path)
    assert isinstance(cluster, nbprofiler.Cluster) and cluster.ranks == ["0", "1"] and len(cluster) == 2
    later = "1@host_1_20250101000100000_ascend_pt"
    assert list(cluster["1"].windows) == ["1", later]
    assert cluster[later] is cluster["1"].windows[later] and cluster[later].session == later.split("@")[1]
    assert [p.key for p in cluster] == ["0", "1"]
    with pytest.raises(KeyError):
        cluster["2"]
    # the cluster page: one rank's dashboard at a time, each with its own window picker
    from nbprofiler.views.cluster import ClusterView
    from nbprofiler.views.windows import WindowsDashboard
    view = ClusterView(cluster, engine="serial")
    view.widget
    assert [o[0] for o in view.rank_picker.options] == ["rank 0 (2 windows)", "rank 1 (2 windows)"]
    view.rank_fold.selected_index = 0
    view.rank_picker.value = "1"
    assert isinstance(view.rank_view, WindowsDashboard) and list(view.rank_view.picker.options)[1][1] == later
    view.rank_view.window = later
    assert view.rank_view.dashboard.prof is cluster[later]


# -- the dashboard of a rank's windows --------------------------------------------------------------
def test_the_dashboard_of_three_windows_shows_the_first_with_a_picker(three_windows):
    prof = load_quietly(three_windows)
    view = WindowsDashboard(prof)
    assert isinstance(view.picker, W.Dropdown) and view.window == "0" and view.picker.value == "0"
    assert [k for _, k in view.picker.options] == ["0", *LATER]
    assert view.widget.children[0].children[0] is view.picker and view.widget.children[-1] is view.dashboard.widget
    db = view.dashboard
    assert db.prof is prof and list(db.widget.titles)[:3] == ["Overview", "Step trace", "Operators"]
    # every tab with data: the overview's numbers, the step trace, operators, memory and timeline views
    assert db.summary["step_trace"]["average"]["total_ms"] == pytest.approx(_step_trace_csv(three_windows / WINDOWS[0])["total"])
    assert "No " not in db._panels["Overview"].children[0].value[:200]
    for tab in ("Step trace", "Operators", "Memory", "Timeline"):
        assert db.select(tab) is not None, tab
        assert db.views[tab].widget in db._panels[tab].children
    _same(_shown_step(db), _step_trace_csv(three_windows / WINDOWS[0]))
    db.select("Timeline")
    # switching the picker rebuilds the dashboard for that window, on the tab that was open
    view.picker.value = LATER[0]
    assert view.window == LATER[0] and view.dashboard is not db and view.dashboard.prof.session == WINDOWS[1]
    assert view.widget.children[-1] is view.dashboard.widget and view.dashboard.tab == "Timeline"
    _same(_shown_step(view.dashboard), _step_trace_csv(three_windows / WINDOWS[1]))
    assert view.dashboard.summary["step_trace"]["average"]["total_ms"] == pytest.approx(
        _step_trace_csv(three_windows / WINDOWS[1])["total"])
    assert LATER[0] in view.note.value
    # the traitlet drives the picker too
    view.window = LATER[1]
    assert view.picker.value == LATER[1]
    _same(_shown_step(view.dashboard), _step_trace_csv(three_windows / WINDOWS[2]))
    with pytest.raises(Exception):
        view.window = "7"


def test_the_windows_are_compared_where_several_exist(three_windows):
    view = WindowsDashboard(load_quietly(three_windows))
    assert view.compare_fold.selected_index is None and not view._holder.children  # built when opened
    view.compare_fold.selected_index = 0
    (shown,) = view._holder.children
    runs = view.comparison
    assert len(runs.labels) == 3 and runs.labels[0].startswith("1: ") and WINDOWS[1] in runs.labels[1]
    totals = [_step_trace_csv(three_windows / w)["total"] for w in WINDOWS]
    assert runs.headline["step_ms"].tolist() == pytest.approx(totals)
    assert set(runs.comparisons) == set(runs.labels[1:])
    assert shown is not None


def test_show_and_the_magic_put_the_picker_over_the_dashboard(three_windows, monkeypatch):
    import types

    from nbprofiler.faces import magics
    from nbprofiler.views import bokehjs
    shown = []
    monkeypatch.setattr(bokehjs, "show", shown.append)
    monkeypatch.setattr(bokehjs, "show_loader_later", lambda widget: shown.append(widget) or (lambda: None))
    shell = types.SimpleNamespace(user_ns={})  # the magic binds into its shell's namespace, nothing else
    magics.nbprofiler_magic(f"{three_windows} --as win", ipython=shell)
    assert isinstance(shell.user_ns["win"], nbprofiler.Profile) and len(shell.user_ns["win"].windows) == 3
    (widget,) = shown
    picker = widget.children[0].children[0]
    assert isinstance(picker, W.Dropdown) and picker.value == "0"
    tabs = widget.children[-1]
    assert isinstance(tabs, W.Tab) and {"Overview", "Step trace", "Operators", "Memory", "Timeline"} <= set(tabs.titles)
    # one window alone: the plain dashboard
    shown.clear()
    load_quietly(PT_TEXT, device="1").show()
    assert isinstance(shown[0], W.Tab)


def test_the_report_of_three_windows_has_every_tab_and_compares_the_windows(three_windows):
    from nbprofiler.faces.report import report_layout
    layout = report_layout(load_quietly(three_windows))
    titles = [p.title for p in layout.select_one({"name": "report_tabs"}).tabs]
    assert titles[:2] == ["Overview", "Windows"]
    assert {"Step trace", "Operators", "Memory", "Timeline"} <= set(titles)
    head = layout.select_one({"name": "runs_headline_src"}).data
    assert list(head["step_ms"]) == pytest.approx([_step_trace_csv(three_windows / w)["total"] for w in WINDOWS])
    steps = layout.select_one({"name": "step_trace_steps_src"}).data
    assert steps["computing_ms"][0] == pytest.approx(_step_trace_csv(three_windows / WINDOWS[0])["Computing"])
