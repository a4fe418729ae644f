"""An operator's source one click away, where the device waited for the host, and the cluster page's
parallel dimensions and slow-rank causes, in a real JupyterLab: each renders, says what its analysis
computed (checked here against the files, read with json/csv), and its main interaction reaches its state.
Screenshots: test-output/screenshots/{source_panel,source_opened,dispatch_fold,cluster_parallel,
cluster_slow_rank}.png."""
from __future__ import annotations

import csv
import json
import shutil

from helpers import (
    REPO, bokeh_data, bokeh_texts, open_and_run_all, save_screenshot, scroll_to_model, wait_bokeh_filled,
    wait_painted, write_notebook)

DATA = (REPO.parent / "shared" / "data").resolve()
RANK0 = DATA / "npu" / "ascend_pt_text_2rank" / "rank0_ascend_pt"
RECORDED_SCRIPT = "/home/z30057886/imagenet_script/main.py"   # where the recorded job's script was


def test_open_link_of_an_operators_source_opens_its_script_at_the_line(lab, page):
    """A copy of rank 0 whose call stacks name a script under the server's root: the Source panel of
    aten::conv2d shows its stack with the user frame, and its Open link opens that script in JupyterLab's
    editor with the cursor on the frame's line (the line the trace's own stack gives, read here)."""
    run = lab.root / "stack_run" / "rank0_ascend_pt"
    shutil.copytree(RANK0, run)
    script = lab.root / "imagenet_script" / "main.py"
    script.parent.mkdir()
    script.write_text("".join(f"line_{i} = {i}\n" for i in range(1, 601)))
    trace = run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    trace.write_text(trace.read_text().replace(RECORDED_SCRIPT, str(script)))
    # the trace's own stack of aten::conv2d: its innermost main.py frame
    events = json.loads(trace.read_text())
    stacks = [e["args"]["Call stack"] for e in events if e.get("name") == "aten::conv2d"
              and "Call stack" in e.get("args", {})]
    frame = next(f for f in stacks[0].replace("\r\n", "").split(";") if f.startswith(str(script)))
    line = int(frame[len(str(script)) + 1:frame.index(")")])
    write_notebook(lab.root / "source.ipynb", [
        "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler\n"
        "from nbprofiler.views.operators import OperatorsView",
        f"view = OperatorsView(nbprofiler.load({str(run)!r}))\nview.display()",
        "found = view.show_source('aten::conv2d'); print(found.user_frame['line'])"])
    cells = open_and_run_all(page, lab, "source.ipynb", 3)
    assert cells.nth(2).locator(".jp-OutputArea-output").inner_text().strip() == str(line)
    link = cells.nth(1).locator("a.nbprofiler-open-source").first
    link.wait_for()
    assert link.get_attribute("data-line") == str(line)
    assert cells.nth(1).get_by_text("Source of aten::conv2d").count() >= 1
    link.scroll_into_view_if_needed()
    wait_painted(page, bokeh=False)
    save_screenshot(page, "source_panel")
    link.click()
    page.wait_for_function("(want) => { const w = window.jupyterapp.shell.currentWidget;"
                           " if (!w || !w.context || !w.context.path.endsWith('imagenet_script/main.py')) return false;"
                           " const e = w.content && w.content.editor; return !!e && "
                           "e.getCursorPosition().line === want - 1; }", arg=line)
    wait_painted(page, bokeh=False)
    save_screenshot(page, "source_opened")
    assert not page.page_errors, page.page_errors


def test_timeline_tab_folds_where_the_device_waited_for_the_host(lab, page):
    """The torch_npu trace: the fold under the Timeline tab opens on the host-bound idle per step and the
    host ops responsible, its sentence the analysis's; the tasks it counts are the trace's HostToDevice
    flows (read here)."""
    path = DATA / "npu" / "trace_view_torch_npu"
    trace = next(path.glob("*.json"))
    flows = {e["id"] for e in json.loads(trace.read_text()) if e.get("cat") == "HostToDevice" and e.get("ph") == "s"}
    write_notebook(lab.root / "dispatch.ipynb", [
        "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler\n"
        "from nbprofiler.views.dashboard import Dashboard",
        f"prof = nbprofiler.load({str(path)!r})\ndash = Dashboard(prof)\ndash.select('Timeline')\ndash.display()",
        "d = prof.dispatch; print(d.sentence()); print(len(d.tasks))"])
    cells = open_and_run_all(page, lab, "dispatch.ipynb", 3)
    sentence, tasks = cells.nth(2).locator(".jp-OutputArea-output").inner_text().strip().splitlines()
    assert 0 < int(tasks) <= len(flows)
    fold = cells.nth(1).get_by_text("Where the device waited for the host", exact=True).first   # the fold's title, not the first sentence naming it
    fold.wait_for()
    fold.click()
    wait_bokeh_filled(page, "dispatch_ops_src", "op")
    shown = bokeh_texts(page, "dispatch_headline")[0]
    assert sentence.split(";")[0].replace("&", "&amp;") in shown, (sentence, shown)
    scroll_to_model(page, "dispatch_steps_fig")
    wait_painted(page)
    save_screenshot(page, "dispatch_fold")
    assert not page.page_errors, page.page_errors


def test_cluster_page_parallel_dimensions_and_slow_rank_causes(lab, page):
    """The 16-rank msprof-analyze output: the groups table holds every group of communication_group.json
    (read here) with its dimension, and the slow-rank section explains the rank whose step (from
    cluster_step_trace_time.csv, read here) is the longest."""
    path = DATA / "npu" / "cluster_analysis_16rank"
    groups = json.loads((path / "communication_group.json").read_text())
    with (path / "cluster_step_trace_time.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Type"] == "rank"]
    step = {}
    for r in rows:
        step.setdefault(r["Index"], []).append(float(r["Computing"]) + float(r["Communication(Not Overlapped)"])
                                               + float(r["Free"]))
    slowest = max(step, key=lambda k: sum(step[k]) / len(step[k]))
    write_notebook(lab.root / "cluster16.ipynb", [
        "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
        f"nbprofiler.load({str(path)!r}).show()"])
    out = open_and_run_all(page, lab, "cluster16.ipynb", 2).nth(1)
    wait_bokeh_filled(page, "cluster_parallel_groups_src", "group")
    # every group of communication_group.json, under its place in the file
    shown = bokeh_data(page, "cluster_parallel_groups_src", "group")[0]
    assert sorted(g for g in shown if g.startswith(("collective[", "p2p["))) == sorted(
        [f"collective[{i}]" for i in range(len(groups["collective"]))] + [f"p2p[{i}]" for i in range(len(groups["p2p"]))])
    dims = set(bokeh_data(page, "cluster_parallel_groups_src", "dimension")[0])
    assert {"TP", "PP", "stage"} <= dims, dims
    assert "costs most" in bokeh_texts(page, "cluster_parallel_finding")[0] or \
        "cost most" in bokeh_texts(page, "cluster_parallel_finding")[0]
    scroll_to_model(page, "cluster_parallel_ranks")
    wait_painted(page)
    save_screenshot(page, "cluster_parallel")
    wait_bokeh_filled(page, "cluster_slow_causes_src", "rank")
    assert set(bokeh_data(page, "cluster_slow_causes_src", "rank")[0]) == {slowest}
    scroll_to_model(page, "cluster_slow_causes_table")
    wait_painted(page)
    save_screenshot(page, "cluster_slow_rank")
    assert out.get_by_text("Why the slow ranks are slow").count() >= 1
    assert not page.page_errors, page.page_errors
