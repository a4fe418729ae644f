"""The JupyterLab extension (labextension/) and its server side (nbprofiler/faces/lab.py).

The first group tests the server-side rules directly on copies of the shared data (fast, no server):
where a report notebook goes, what it contains, which runs discovery lists. The second group runs in a
real JupyterLab (``lab``/``page`` fixtures of conftest.py) with the extension installed as a user gets
it (``pip install -e .`` + ``jupyter labextension develop``, see scripts/test.sh).
"""
from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
import sys
import urllib.error
from pathlib import Path

import nbformat
import pytest
from helpers import cell_errors, count_canvases, save_screenshot, wait_painted, wait_stable

from nbprofiler.faces import lab as _lab
from nbprofiler.model.profile import Profile

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
MS2_SESSION = "vm_11535_20261121042531696_ascend_ms"


def copy_data(dest: Path, *names: str) -> None:
    """Copy shared datasets (e.g. "minddata", "mindspore2") under ``dest``, keeping file times."""
    for name in names:
        shutil.copytree(DATA / name, dest / name, copy_function=shutil.copy2)


def snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.fixture
def tree(tmp_path) -> Path:
    """A Jupyter root holding ``proj/minddata`` and ``proj/mindspore2`` (copies of the shared data)."""
    copy_data(tmp_path / "proj", "minddata", "mindspore2")
    return tmp_path.resolve()


# -- server-side rules, no server -----------------------------------------------------------------------

def test_list_runs_finds_the_runs_of_the_shared_data(tree):
    runs = _lab.list_runs(tree, tree / "proj")
    assert [(r["name"], r["generation"], r["device"]) for r in runs] == [
        ("minddata/md_bottleneck_map", "minddata", "0"),
        ("minddata/md_fast", "minddata", "0"),
        (f"mindspore2/lenet_pynative/{MS2_SESSION}", "mindspore2", "0"),
    ]
    ms2 = runs[2]
    assert ms2["path"] == f"proj/mindspore2/lenet_pynative/{MS2_SESSION}"
    assert ms2["session"] == MS2_SESSION
    # the date is when it was profiled: the UTC start time in its folder's name, shown in local time
    utc = datetime.datetime(2026, 11, 21, 4, 25, 31, 696000, tzinfo=datetime.timezone.utc)
    assert ms2["date"] == utc.astimezone().replace(tzinfo=None).isoformat(timespec="seconds")
    assert ms2["date_source"] == "folder name"
    # MindData files say nothing of when: their newest file's time, labelled as such
    newest = max(p.stat().st_mtime for p in (tree / runs[0]["path"]).rglob("*") if p.is_file())
    assert runs[0]["date"] == datetime.datetime.fromtimestamp(newest).isoformat(timespec="seconds")
    assert runs[0]["date_source"] == "file time"
    assert ms2["files"] == 12
    assert json.dumps(runs)  # the handler sends it as JSON as is


def _local(utc: datetime.datetime) -> str:
    return utc.astimezone().replace(tzinfo=None).isoformat(timespec="seconds")


def test_runs_are_dated_by_when_they_were_profiled_not_by_their_files(tmp_path):
    """Copies (a checkout, a download) get new file times; the sidebar dates each run from what the run
    itself says: its folder name, its profiler_info, its database, its CANN start_info."""
    utc = datetime.timezone.utc
    for name in ("mindspore2", "npu/ascend_pt_text_2rank", "npu/msprof_db", "npu/cann_prof_2dev", "minddata"):
        shutil.copytree(DATA / name, tmp_path / name)   # copytree's copy2 keeps times: touch them all
    for p in tmp_path.rglob("*"):
        if p.is_file():
            p.touch()
    root = tmp_path.resolve()
    runs = {r["name"]: r for r in _lab.list_runs(root, root)}
    dated = {name: (r["date"], r["date_source"]) for name, r in runs.items()}
    assert dated[f"mindspore2/lenet_pynative/{MS2_SESSION}"] == (
        _local(datetime.datetime(2026, 11, 21, 4, 25, 31, 696000, tzinfo=utc)), "folder name")
    # torch_npu's profiler_info_0.json: its end (collectionTimeEnd, ns) less the session's monotonic length
    begin_ns = 1736405444130566220 - (168724372147450 - 168723724831520)
    assert dated["npu/ascend_pt_text_2rank/rank0_ascend_pt"] == (
        _local(datetime.datetime.fromtimestamp(begin_ns / 1e9, tz=utc)), "profiler_info")
    # msprof's database: SESSION_TIME_INFO.startTimeNs
    assert dated["npu/msprof_db"] == (_local(datetime.datetime.fromtimestamp(1698220811.352526, tz=utc)), "database")
    # a CANN PROF_* device: start_info's collectionTimeBegin (us)
    prof = next(n for n in dated if n.endswith("/device_0"))
    assert dated[prof] == (_local(datetime.datetime.fromtimestamp(1692340024.324979, tz=utc)), "start_info")
    # nothing in the run says when: the files' time, and the entry says that is what it is
    now = datetime.datetime.now().isoformat(timespec="minutes")
    assert dated["minddata/md_fast"][1] == "file time" and dated["minddata/md_fast"][0].startswith(now[:13])
    assert all(d[0] and not d[0].startswith(now[:10]) for n, d in dated.items() if d[1] != "file time")


def test_folder_name_times_are_utc_starts():
    assert _lab.info_time(None) is None
    assert _lab.folder_time("host_123_20250109065043483_ascend_pt") == datetime.datetime(
        2025, 1, 9, 6, 50, 43, 483000, tzinfo=datetime.timezone.utc)
    assert _lab.folder_time("rank0_ascend_pt") is None and _lab.folder_time("run_1_widedeep") is None


def test_profiler_info_start_and_legacy_stop_times(tmp_path):
    begin = tmp_path / "profiler_info_0.json"
    begin.write_text(json.dumps({"start_info": {"collectionTimeBegin": "1692340024324979"}}))
    assert _lab.info_time(begin) == datetime.datetime.fromtimestamp(1692340024.324979, tz=datetime.timezone.utc)
    legacy = tmp_path / "profiler_info_1.json"
    legacy.write_text(json.dumps({"rank_id": "1", "profiling_stop_time": "2023-05-16 17:17:17"}))
    assert _lab.info_time(legacy) == datetime.datetime(2023, 5, 16, 17, 17, 17)
    broken = tmp_path / "profiler_info_2.json"
    broken.write_text("{not json")
    assert _lab.info_time(broken) is None


def test_list_runs_keeps_devices_that_share_a_folder():
    root = DATA.resolve()
    runs = _lab.list_runs(root, root / "legacy" / "fixtures_mixed_ids")
    assert [r["device"] for r in runs] == ["0", "1", "10"]
    assert all(r["devices_in_folder"] == ["0", "1", "10"] and r["name"] == "." for r in runs)
    assert all(r["path"] == "legacy/fixtures_mixed_ids" and r["generation"] == "legacy" for r in runs)


def test_list_runs_of_a_folder_without_profiler_data_is_empty(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("nothing to see")
    assert _lab.list_runs(tmp_path.resolve(), tmp_path.resolve()) == []


def test_report_goes_next_to_the_folder_never_inside_profiler_output(tree):
    before = snapshot(tree / "proj")
    md_before = snapshot(tree / "proj" / "minddata" / "md_fast")
    session_before = snapshot(tree / "proj" / "mindspore2" / "lenet_pynative" / MS2_SESSION)
    # a plain folder holding runs: beside it
    assert _lab.create_report(tree, "proj/mindspore2")[0] == "proj/mindspore2-nbprofiler.ipynb"
    # a MindData profiler folder: beside it, in its parent
    nb_path, _, rel = _lab.create_report(tree, "proj/minddata/md_fast")
    assert (nb_path, rel) == ("proj/minddata/md_fast-nbprofiler.ipynb", "md_fast")
    # a folder inside a *_ascend_ms run, and a trace file in it: beside the whole run folder
    session = f"proj/mindspore2/lenet_pynative/{MS2_SESSION}"
    nb_path, _, rel = _lab.create_report(tree, f"{session}/ASCEND_PROFILER_OUTPUT")
    assert nb_path == "proj/mindspore2/lenet_pynative/ASCEND_PROFILER_OUTPUT-nbprofiler.ipynb"
    assert rel == f"{MS2_SESSION}/ASCEND_PROFILER_OUTPUT"
    nb_path, _, rel = _lab.create_report(tree, f"{session}/ASCEND_PROFILER_OUTPUT/trace_view.json")
    assert nb_path == "proj/mindspore2/lenet_pynative/trace_view-nbprofiler.ipynb"
    assert rel == f"{MS2_SESSION}/ASCEND_PROFILER_OUTPUT/trace_view.json"
    # a folder at the root: in the root
    assert _lab.create_report(tree, "proj")[0] == "proj-nbprofiler.ipynb"
    # create_report only reserves each notebook's name (an empty file, created exclusively) beside the
    # profiler folders; nothing in them changes
    new = set(snapshot(tree / "proj")) - set(before)
    assert new == {"mindspore2-nbprofiler.ipynb", "minddata/md_fast-nbprofiler.ipynb",
                   "mindspore2/lenet_pynative/ASCEND_PROFILER_OUTPUT-nbprofiler.ipynb",
                   "mindspore2/lenet_pynative/trace_view-nbprofiler.ipynb"}, new
    assert all((tree / "proj" / n).stat().st_size == 0 for n in new)
    assert (tree / "proj-nbprofiler.ipynb").stat().st_size == 0
    assert snapshot(tree / "proj" / "minddata" / "md_fast") == md_before
    assert snapshot(tree / "proj" / "mindspore2" / "lenet_pynative" / MS2_SESSION) == session_before


def test_report_in_a_chosen_folder_and_refusals(tree):
    (tree / "reports").mkdir()
    nb_path, _, rel = _lab.create_report(tree, "proj/minddata/md_fast", dir_api_path="reports")
    assert (nb_path, rel) == ("reports/md_fast-nbprofiler.ipynb", "../proj/minddata/md_fast")
    with pytest.raises(_lab.PathError) as err:  # a chosen folder that is profiler output
        _lab.create_report(tree, "proj/minddata/md_fast", dir_api_path="proj/minddata/md_bottleneck_map")
    assert err.value.status == 409
    assert str(err.value).startswith("'proj/minddata/md_bottleneck_map' is profiler output;")
    session = f"proj/mindspore2/lenet_pynative/{MS2_SESSION}"
    with pytest.raises(_lab.PathError) as err:  # deeper inside: the message names the run folder
        _lab.create_report(tree, "proj/minddata/md_fast", dir_api_path=f"{session}/ASCEND_PROFILER_OUTPUT")
    assert err.value.status == 409
    assert f"is inside the profiler output folder '{session}'" in str(err.value)
    with pytest.raises(_lab.PathError) as err:
        _lab.create_report(tree, "proj/minddata/md_fast", dir_api_path="proj/minddata/md_fast/nope")
    assert err.value.status == 404
    with pytest.raises(_lab.PathError) as err:
        _lab.create_report(tree, "../../etc")
    assert err.value.status == 403
    with pytest.raises(_lab.PathError) as err:
        _lab.create_report(tree, "proj/nope")
    assert err.value.status == 404
    # a root that is itself profiler output leaves no place to write: the user must choose one
    run_root = (tree / "proj" / "minddata" / "md_fast").resolve()
    with pytest.raises(_lab.PathError) as err:
        _lab.create_report(run_root, "")
    assert err.value.status == 409 and "never writes into profiler directories" in str(err.value)


def test_suggested_report_dir_is_where_create_report_writes(tree):
    session = f"proj/mindspore2/lenet_pynative/{MS2_SESSION}"
    for api_path, folder in [("proj/minddata/md_fast", "proj/minddata"), ("proj/minddata", "proj"),
                             ("proj", ""), (f"{session}/ASCEND_PROFILER_OUTPUT/trace_view.json",
                                            "proj/mindspore2/lenet_pynative")]:
        assert _lab.suggested_report_dir(tree, api_path) == folder
        assert _lab.create_report(tree, api_path)[0].rpartition("/")[0] == folder
    with pytest.raises(_lab.PathError) as err:
        _lab.suggested_report_dir((tree / "proj" / "minddata" / "md_fast").resolve(), "")
    assert err.value.status == 409


def test_report_names_never_overwrite(tree):
    (tree / "proj" / "mindspore2-nbprofiler.ipynb").write_text("{}")
    (tree / "proj" / "mindspore2-nbprofiler-2.ipynb").write_text("{}")
    assert _lab.create_report(tree, "proj/mindspore2")[0] == "proj/mindspore2-nbprofiler-3.ipynb"


def _injected(nb) -> str:
    """Source of the papermill-style parameters cell that the report notebook adds to the template."""
    return next(c["source"] for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", []))


def _run_load_cells(nb, namespace: dict) -> None:
    """Execute the injected parameters and the template's loading cell, as the kernel would. The cell's
    ``output_notebook()`` publishes display data, which creates an IPython shell singleton outside a kernel;
    it is cleared again so later tests can create the shell they need."""
    from IPython.core.interactiveshell import InteractiveShell
    had_shell = InteractiveShell.initialized()
    exec(compile(_injected(nb), "parameters", "exec"), namespace)
    load = next(c["source"] for c in nb["cells"] if c["cell_type"] == "code" and "nbprofiler.load(" in c["source"])
    try:
        exec(compile(load, "load", "exec"), namespace)
    finally:
        if not had_shell and InteractiveShell.initialized():
            InteractiveShell.clear_instance()


def test_report_notebook_is_the_template_with_its_parameters_set():
    template = nbformat.read(_lab.report_template_path(), as_version=4)
    nb = nbformat.from_dict(_lab.report_notebook("../runs/md_fast", device="0"))
    nbformat.validate(nb)
    template_sources = [c.source for c in template.cells]
    assert [c.source for c in nb.cells if c.id not in ("nbprofiler-parameters", "nbprofiler-dashboard-title",
                                                        "nbprofiler-dashboard")] == template_sources
    assert _injected(nb) == "path = '../runs/md_fast'\ndevice = '0'\ntitle = None"
    assert nb.cells[-1].source == "prof.show()"  # the interactive dashboard after the static report


def test_report_notebook_loads_the_profile_even_with_hostile_names(tmp_path, monkeypatch):
    """The path goes into code as a literal: quotes, HTML and newlines in a folder name stay data."""
    root = tmp_path.resolve()
    odd = "it's \"odd\" <img src=x onerror=alert(1)>\n%run"
    shutil.copytree(DATA / "minddata" / "md_fast", root / odd, copy_function=shutil.copy2)
    nb_path, nb, rel = _lab.create_report(root, odd)
    assert nb_path == f"{odd}-nbprofiler.ipynb" and rel == odd
    node = nbformat.from_dict(nb)
    nbformat.validate(node)
    assert all(odd not in c.source for c in node.cells if c.cell_type == "markdown")  # markdown renders as HTML
    monkeypatch.chdir(root)  # the kernel's working directory is the notebook's folder
    namespace: dict = {}
    _run_load_cells(nb, namespace)
    prof = namespace["prof"]
    assert isinstance(prof, Profile) and prof.generation == "minddata"
    assert Path(prof.root).resolve() == (root / odd).resolve()


def test_report_notebook_picks_the_device_of_a_shared_folder(monkeypatch):
    root = DATA.resolve()
    _, nb, rel = _lab.create_report(root, "legacy/fixtures_mixed_ids", device="10")
    assert "device = '10'" in _injected(nb)
    monkeypatch.chdir(root / "legacy")
    namespace: dict = {}
    _run_load_cells(nb, namespace)
    assert namespace["prof"].device == "10"


# -- packaging ------------------------------------------------------------------------------------------

def _installed_labextensions() -> str:
    out = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                         text=True, timeout=60)
    return re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)  # drop the colour codes


def test_extension_is_installed_and_enabled():
    listing = _installed_labextensions()
    assert "nbprofiler v0.1.0 enabled" in listing and "OK" in listing, (
        "the nbprofiler lab extension is not installed: `pip install -e .` then "
        f"`jupyter labextension develop --overwrite .` (scripts/test.sh does both)\n{listing}")
    out = subprocess.run([sys.executable, "-m", "jupyter", "server", "extension", "list"],
                         capture_output=True, text=True, timeout=60)
    assert "nbprofiler enabled" in re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)


# -- in a real JupyterLab -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lab_tree(lab) -> Path:
    """``lab.root/runs`` with copies of the shared minddata and mindspore2 data."""
    target = lab.root / "runs"
    if not target.exists():
        copy_data(target, "minddata", "mindspore2")
    return target


def wait_for_extension(page, lab) -> None:
    logs: list[str] = []
    page.on("console", lambda m: logs.append(m.text))
    page.goto(lab.url())
    page.locator("#jp-main-statusbar").wait_for()
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.commands.hasCommand("
                           "'nbprofiler:open-in-nbprofiler')")
    page.wait_for_function("() => document.querySelector('#nbprofiler-runs') !== null")
    # the layout restored: until then the shell may still activate (and focus) the widgets it restores
    page.evaluate("() => window.jupyterapp.restored.then(() => true)")
    assert "nbprofiler extension activated" in logs


def go_to_folder(page, folder: str) -> None:
    page.evaluate("(p) => window.jupyterapp.commands.execute('filebrowser:go-to-path', {path: p})", folder)
    page.locator(".jp-FileBrowser .jp-BreadCrumbs").get_by_text(folder.split("/")[-1]).first.wait_for()


# code cells of a report notebook: the template's, the injected parameters and the dashboard
REPORT_CODE_CELLS = sum(c["cell_type"] == "code" for c in _lab.report_notebook(".")["cells"])


def wait_report_ran(page, nb_name: str, n_code_cells: int = REPORT_CODE_CELLS, timeout_ms: float = 180_000):
    """The report notebook is the current tab and all its code cells have run."""
    page.locator(f'.lm-TabBar-tab[data-type="document-title"]:has-text("{nb_name}")').first.wait_for()
    page.wait_for_function("""(n) => { const p = Array.from(document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell.jp-CodeCell .jp-InputPrompt'));
      return p.length === n && p.every(e => /^\\[\\d+\\]:$/.test(e.textContent.trim())); }""",
                           arg=n_code_cells, timeout=timeout_ms)
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")


def load_cell(cells):
    """The report notebook's cell that loads the profile (its output is the profile's summary)."""
    return cells.filter(has_text="nbprofiler.load(").first


def show_tab(cell, tab: str = "Step trace") -> None:
    """Open a tab of the dashboard in ``cell`` and wait for its Bokeh canvases to be drawn."""
    cell.locator(".widget-tab").first.wait_for()
    cell.locator(".lm-TabBar-tab", has_text=tab).first.click()
    cell.locator("canvas").locator("visible=true").first.wait_for(timeout=120_000)
    cell.scroll_into_view_if_needed()
    wait_painted(cell.page)


def test_runs_endpoint_and_report_endpoint(lab, lab_tree):
    answer = lab.api("GET", "/nbprofiler/runs?path=runs")
    assert answer["path"] == "runs"
    assert [(r["name"], r["generation"]) for r in answer["runs"]] == [
        ("minddata/md_bottleneck_map", "minddata"), ("minddata/md_fast", "minddata"),
        (f"mindspore2/lenet_pynative/{MS2_SESSION}", "mindspore2")]
    with pytest.raises(urllib.error.HTTPError) as err:
        lab.api("GET", "/nbprofiler/runs?path=../..")
    assert err.value.code == 403
    before = snapshot(lab_tree / "minddata" / "md_bottleneck_map")
    with pytest.raises(urllib.error.HTTPError) as err:
        lab.api("POST", "/nbprofiler/report", {"path": "runs/minddata/md_fast",
                                               "dir": "runs/minddata/md_bottleneck_map"})
    assert err.value.code == 409
    assert snapshot(lab_tree / "minddata" / "md_bottleneck_map") == before


def test_context_menu_creates_runs_and_renders_the_report(lab, lab_tree, page):
    run_folder = lab_tree / "mindspore2" / "lenet_pynative" / MS2_SESSION
    before = snapshot(run_folder)
    wait_for_extension(page, lab)
    go_to_folder(page, "runs/mindspore2/lenet_pynative")
    item = page.locator(f'.jp-DirListing-item[data-isdir="true"]:has-text("{MS2_SESSION}")')
    item.click(button="right")
    entry = page.locator('.lm-Menu-item[data-command="nbprofiler:open-in-nbprofiler"]')
    entry.wait_for(state="visible")
    save_screenshot(page, "labext_context_menu")
    entry.click()
    nb_name = f"{MS2_SESSION}-nbprofiler.ipynb"
    cells = wait_report_ran(page, nb_name)
    nb_file = lab_tree / "mindspore2" / "lenet_pynative" / nb_name
    assert nb_file.exists(), "the report notebook must sit next to the run folder"
    assert snapshot(run_folder) == before  # nothing written inside the profiler folder
    model = lab.api("GET", f"/api/contents/runs/mindspore2/lenet_pynative/{nb_name}?content=1")["content"]
    assert f"path = {MS2_SESSION!r}" in _injected(model)
    assert not cell_errors(page)
    # the loading cell shows the profile; the last cell the dashboard with its Bokeh canvases
    assert "mindspore2" in load_cell(cells).locator(".jp-OutputArea").inner_text()
    show_tab(cells.last, tab="Operators")  # a CPU run: no step trace, CPU operators
    assert count_canvases(page) > 0
    save_screenshot(page, "labext_report_from_context_menu")
    assert not page.page_errors, page.page_errors


def test_context_menu_in_a_chosen_folder_and_the_refusal(lab, lab_tree, page):
    """"Open in nbprofiler in…": the folder picker starts at the suggested folder; a profiler folder is
    refused with the server's message and another pick is offered; the report then runs in the chosen one."""
    chosen = lab.root / "my reports"
    chosen.mkdir(exist_ok=True)
    profiler_folders = [lab_tree / "minddata" / "md_fast", lab_tree / "minddata" / "md_bottleneck_map"]
    before = [snapshot(f) for f in profiler_folders]
    wait_for_extension(page, lab)
    go_to_folder(page, "runs/minddata")
    page.locator('.jp-DirListing-item[data-isdir="true"]:has-text("md_fast")').click(button="right")
    menu = page.locator(".lm-Menu-content").last
    entry = menu.locator('.lm-Menu-item[data-command="nbprofiler:open-in-nbprofiler-in"]')
    entry.wait_for(state="visible")
    labels = menu.locator(".lm-Menu-itemLabel").all_inner_texts()
    assert labels.index("Open in nbprofiler in…") == labels.index("Open in nbprofiler") + 1
    save_screenshot(page, "labext_context_menu_in")
    entry.click()

    picker = page.locator(".jp-Dialog")
    # starts in the suggested folder (the parent of md_fast), listing folders only
    picker.locator('.jp-DirListing-item:has-text("md_bottleneck_map")').wait_for()
    assert "Folder for the report notebook of /runs/minddata/md_fast" in picker.locator(
        ".jp-Dialog-body").inner_text()
    assert sorted(picker.locator(".jp-DirListing-itemText").all_inner_texts()) == ["md_bottleneck_map",
                                                                                   "md_fast"]
    picker.locator('.jp-DirListing-item:has-text("md_bottleneck_map")').click()
    save_screenshot(page, "labext_choose_folder_dialog")
    picker.locator(".jp-mod-accept").click()

    refusal = page.locator(".jp-Dialog", has_text="choose another folder for the report")
    refusal.wait_for()
    assert refusal.locator(".jp-Dialog-body").inner_text() == (
        "'runs/minddata/md_bottleneck_map' is profiler output; nbprofiler never writes into profiler "
        "directories. Choose a folder outside it.")
    save_screenshot(page, "labext_choose_folder_refused")
    refusal.locator(".jp-mod-accept", has_text="Choose another folder").click()

    picker = page.locator(".jp-Dialog")
    picker.locator('.jp-DirListing-item:has-text("md_fast")').wait_for()
    picker.locator(".jp-BreadCrumbs-home").click()
    picker.locator('.jp-DirListing-item:has-text("my reports")').click()
    picker.locator(".jp-mod-accept").click()
    cells = wait_report_ran(page, "md_fast-nbprofiler.ipynb")
    assert (chosen / "md_fast-nbprofiler.ipynb").exists()
    model = lab.api("GET", "/api/contents/my%20reports/md_fast-nbprofiler.ipynb?content=1")["content"]
    assert "path = '../runs/minddata/md_fast'" in _injected(model)
    assert "minddata" in load_cell(cells).locator(".jp-OutputArea").inner_text()
    assert not cell_errors(page)
    assert [snapshot(f) for f in profiler_folders] == before  # nothing written into profiler output
    show_tab(cells.last, tab="MindData")
    save_screenshot(page, "labext_report_in_chosen_folder")
    assert not page.page_errors, page.page_errors


def test_sidebar_lists_runs_and_opens_one(lab, lab_tree, page):
    wait_for_extension(page, lab)
    go_to_folder(page, "runs")
    page.locator('.lm-TabBar-tab[data-id="nbprofiler-runs"]').click()
    panel = page.locator("#nbprofiler-runs")
    panel.locator(".jp-nbprofiler-Run").nth(2).wait_for()
    assert panel.get_attribute("data-state") == "done"
    names = panel.locator(".jp-nbprofiler-Run-name").all_inner_texts()
    assert names == ["minddata/md_bottleneck_map", "minddata/md_fast",
                     f"mindspore2/lenet_pynative/{MS2_SESSION}"]
    metas = panel.locator(".jp-nbprofiler-Run-meta").all_inner_texts()
    assert metas[0].startswith("minddata · device 0 · files modified 20") and metas[0].endswith("6 files")
    # the MindSpore session is dated by its profiling start (its folder name), in local time
    profiled = _local(datetime.datetime(2026, 11, 21, 4, 25, 31, tzinfo=datetime.timezone.utc))
    assert metas[2] == f"mindspore2 · device 0 · profiled {profiled.replace('T', ' ')[:16]} · 12 files"
    title = panel.locator(".jp-nbprofiler-Run-open").nth(2).get_attribute("title")
    assert title.endswith("(from the folder name)"), title
    save_screenshot(page, "labext_sidebar")
    panel.locator('.jp-nbprofiler-Run-open[data-path="runs/minddata/md_fast"]').click()
    cells = wait_report_ran(page, "md_fast-nbprofiler.ipynb")
    assert (lab_tree / "minddata" / "md_fast-nbprofiler.ipynb").exists()
    assert "minddata" in load_cell(cells).locator(".jp-OutputArea").inner_text()
    assert not cell_errors(page)
    show_tab(cells.last, tab="MindData")
    save_screenshot(page, "labext_report_from_sidebar")
    assert not page.page_errors, page.page_errors


def test_launcher_card_and_palette(lab, lab_tree, page):
    wait_for_extension(page, lab)
    go_to_folder(page, "runs/minddata")
    page.evaluate("() => window.jupyterapp.commands.execute('launcher:create')")
    card = page.locator('.jp-MainAreaWidget:not(.lm-mod-hidden) .jp-LauncherCard:has-text("New profiler report")')
    card.wait_for(state="visible")
    save_screenshot(page, "labext_launcher")
    card.click()
    dialog = page.locator(".jp-Dialog")
    body = dialog.locator(".jp-nbprofiler-PathDialog")
    field, save_in = body.locator("input.jp-nbprofiler-PathDialog-path"), body.locator(
        "input.jp-nbprofiler-PathDialog-dir")
    assert field.input_value() == "runs/minddata"  # defaults to the file browser's folder
    page.wait_for_function("() => document.querySelector('.jp-nbprofiler-PathDialog')"
                           ".dataset.suggestedFor === 'runs/minddata'")
    assert save_in.input_value() == "runs"  # beside the folder typed above
    field.fill("runs/minddata/md_bottleneck_map")
    # "Save report in" follows the path: beside the profiler folder, never inside it
    page.wait_for_function("() => document.querySelector('.jp-nbprofiler-PathDialog')"
                           ".dataset.suggestedFor === 'runs/minddata/md_bottleneck_map'")
    assert save_in.input_value() == "runs/minddata"
    save_screenshot(page, "labext_new_report_dialog")
    # a chosen folder inside profiler output: the server's refusal is shown, nothing is written
    before = snapshot(lab_tree / "minddata" / "md_fast")
    save_in.fill("runs/minddata/md_fast")
    dialog.locator(".jp-mod-accept").click()
    refusal = page.locator(".jp-Dialog", has_text="choose another folder for the report")
    refusal.wait_for()
    assert "'runs/minddata/md_fast' is profiler output" in refusal.locator(".jp-Dialog-body").inner_text()
    refusal.locator(".jp-mod-reject").click()
    assert snapshot(lab_tree / "minddata" / "md_fast") == before
    # the same dialog with a folder of the user's own
    # not awaited: the command resolves only once the report has run
    page.evaluate("() => { window.jupyterapp.commands.execute('nbprofiler:new-report', {cwd: 'runs/minddata'}); }")
    dialog = page.locator(".jp-Dialog")
    dialog.locator("input.jp-nbprofiler-PathDialog-path").fill("/runs/minddata/md_bottleneck_map")
    dialog.locator("input.jp-nbprofiler-PathDialog-dir").fill("/launcher reports/")
    (lab.root / "launcher reports").mkdir(exist_ok=True)
    dialog.locator(".jp-mod-accept").click()
    wait_report_ran(page, "md_bottleneck_map-nbprofiler.ipynb")
    assert (lab.root / "launcher reports" / "md_bottleneck_map-nbprofiler.ipynb").exists()

    page.keyboard.press("Control+Shift+C")
    page.locator(".lm-CommandPalette-input").fill("profiler report")
    items = page.locator(".lm-CommandPalette-item")
    assert items.filter(has_text="New profiler report").count() == 1
    assert items.filter(has_text="Open profiler report…").count() == 1
    items.filter(has_text="Open profiler report…").click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator('.jp-DirListing-item:has-text("md_fast")').click()
    save_screenshot(page, "labext_open_report_dialog")
    dialog.locator(".jp-mod-accept").click()
    wait_report_ran(page, "md_fast-nbprofiler")
    assert not page.page_errors, page.page_errors


def test_an_answer_that_arrives_in_the_folder_field_does_not_join_what_is_typed(lab, lab_tree, page):
    """"Save report in" shows the server's folder for the path, unless the user is in that field: there,
    what they type is the folder (not the answer with their typing after it); leaving it untouched shows
    the answer again."""
    wait_for_extension(page, lab)
    held = []
    page.route("**/nbprofiler/report-dir**", lambda route: held.append(route))   # answered when the test says
    form = ".jp-nbprofiler-PathDialog"

    def focused(field):
        page.wait_for_function(f"() => document.activeElement?.classList.contains('jp-nbprofiler-PathDialog-{field}')")

    def open_dialog():
        page.evaluate("() => { window.jupyterapp.commands.execute('nbprofiler:new-report', "
                      "{cwd: 'runs/minddata'}); }")
        # the dialog puts the focus in its first field once shown: a click before that would lose it again
        focused("path")
        return page.locator(f"{form} input.jp-nbprofiler-PathDialog-path"), \
            page.locator(f"{form} input.jp-nbprofiler-PathDialog-dir")

    def answer():
        wait_stable(page, lambda: len(held), "the dialog's request for its folder")
        held.pop().continue_()
        page.wait_for_function(f"() => document.querySelector('{form}').dataset.suggestedFor === 'runs/minddata'")

    path, save_in = open_dialog()
    save_in.click()          # the user is in the folder field when the answer ('runs') arrives
    focused("dir")
    answer()
    assert save_in.input_value() == ""
    page.keyboard.type("/launcher reports/")
    assert save_in.input_value() == "/launcher reports/"
    page.locator(".jp-Dialog .jp-mod-reject").click()
    page.locator(form).wait_for(state="detached")

    path, save_in = open_dialog()
    save_in.click()
    focused("dir")
    answer()
    page.unroute("**/nbprofiler/report-dir**")
    path.click()             # left without an edit: the folder for the path is shown
    page.wait_for_function(f"() => document.querySelector('{form} input.jp-nbprofiler-PathDialog-dir')"
                           ".value === 'runs'")
    page.locator(".jp-Dialog .jp-mod-reject").click()
    page.locator(form).wait_for(state="detached")


def test_dark_theme_sidebar(lab, lab_tree, page):
    wait_for_extension(page, lab)
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', "
                  "{theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    go_to_folder(page, "runs")
    page.locator('.lm-TabBar-tab[data-id="nbprofiler-runs"]').click()
    panel = page.locator("#nbprofiler-runs")
    panel.locator(".jp-nbprofiler-Run").first.wait_for()
    try:
        colors = page.evaluate("""() => { const p = document.querySelector('#nbprofiler-runs');
            const n = p.querySelector('.jp-nbprofiler-Run-name');
            return [getComputedStyle(p).backgroundColor, getComputedStyle(n).color]; }""")
        bg, fg = ([int(v) for v in c[c.index("(") + 1:c.index(")")].split(",")[:3]] for c in colors)
        assert sum(bg) < 3 * 100 and sum(fg) > 3 * 150, colors  # dark background, light text
        save_screenshot(page, "labext_sidebar_dark")
    finally:  # the theme is a saved setting of the session's server: restore it for the other tests
        page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', "
                      "{theme: 'JupyterLab Light'})")
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'")
