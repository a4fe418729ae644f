"""The first sentence of the pages, as a user sees them: the dashboard's Overview and the cluster page open
with the diagnosis (`analysis.diagnosis`), in JupyterLab (light and dark) and in Jupyter Notebook 7, where
the dashboard, compare and cluster outputs must draw too. Screenshots: test-output/screenshots/
{overview_diagnosis_light,overview_diagnosis_dark,cluster_diagnosis,notebook7_outputs}.png."""
from __future__ import annotations

import warnings

from helpers import (REPO, _RUN_FINISHED_JS, bokeh_data, count_canvases, open_and_run_all, save_screenshot,
                     set_theme, wait_painted, watch_replies, write_notebook)

import nbprofiler
from nbprofiler.analysis.diagnosis import diagnose, diagnose_cluster

DATA = (REPO.parent / "shared" / "data").resolve()
PT_RANK0 = DATA / "npu" / "ascend_pt_text_2rank" / "rank0_ascend_pt"
CLUSTER16 = DATA / "npu" / "cluster_analysis_16rank"
QUIET = "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler"


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbprofiler.load(path, **kw)


def test_overview_opens_with_what_sets_the_step_time(lab, page):
    headline = diagnose(_load(PT_RANK0)).headline
    write_notebook(lab.root / "diagnosis.ipynb", [QUIET, f"prof = nbprofiler.load({str(PT_RANK0)!r})\nprof.show()"])
    out = open_and_run_all(page, lab, "diagnosis.ipynb", 2).nth(1)
    first = out.locator(".nbprofiler-diagnosis").first
    first.wait_for()
    assert first.inner_text().strip() == headline
    assert headline.startswith("Communication not overlapped by computation sets the step time")
    overview = out.locator(".nbprofiler-overview").first.inner_text()
    assert "Forward + backward" not in overview and "Computing" in overview
    wait_painted(page)
    save_screenshot(out, "overview_diagnosis_light")
    try:
        set_theme(page, "JupyterLab Dark", light=False)
        save_screenshot(out, "overview_diagnosis_dark")
    finally:  # the theme is a saved setting of the session's server: restore it for the other tests
        set_theme(page, "JupyterLab Light", light=True)
    assert not page.page_errors, page.page_errors


def test_cluster_page_opens_with_what_sets_the_step_time(lab, page):
    headline = diagnose_cluster(_load(CLUSTER16)).headline
    write_notebook(lab.root / "cluster_diag.ipynb", [QUIET, f"c = nbprofiler.load({str(CLUSTER16)!r})\nc.show()"])
    out = open_and_run_all(page, lab, "cluster_diag.ipynb", 2).nth(1)
    first = out.locator(".nbprofiler-cluster-diagnosis").first
    first.wait_for()
    assert first.inner_text().strip() == headline
    assert "ranks 8–15" in headline and "pipeline bubble" in headline
    first.evaluate("e => e.scrollIntoView({block: 'start'})")
    wait_painted(page)
    save_screenshot(page, "cluster_diagnosis")
    assert not page.page_errors, page.page_errors


def _open_and_run_all_nb7(page, server, name: str, n_cells: int) -> None:
    """Jupyter Notebook 7: open the notebook, wait for its kernel, run every cell, wait for the last prompt."""
    page.goto(server.url(name))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for()
    page.wait_for_function("() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
                           " const k = w && w.sessionContext && w.sessionContext.session"
                           " && w.sessionContext.session.kernel; return k && k.status === 'idle'; }")
    watch_replies(page)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(_RUN_FINISHED_JS, arg=n_cells, timeout=180_000)


def test_notebook7_draws_dashboard_compare_and_cluster(notebook7, page):
    a, b = DATA / "legacy" / "run_1_widedeep", DATA / "legacy" / "run_2_lenet"
    cells = [QUIET,
             f"prof = nbprofiler.load({str(PT_RANK0)!r})\nprof.show()",
             f"nbprofiler.compare({str(a)!r}, {str(b)!r}).show()",
             f"nbprofiler.load({str(CLUSTER16)!r}).show()"]
    write_notebook(notebook7.root / "nb7.ipynb", cells)
    _open_and_run_all_nb7(page, notebook7, "nb7.ipynb", len(cells))
    page.locator(".nbprofiler-diagnosis").first.wait_for()
    assert page.locator(".nbprofiler-diagnosis").first.inner_text().strip() == diagnose(_load(PT_RANK0)).headline
    page.locator(".nbprofiler-cluster-diagnosis").first.wait_for()
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.some(d => d.get_model_by_name('compare_steps_src'))")
    runs = bokeh_data(page, "compare_steps_src", "run")[0]
    assert set(runs) == {"run_1_widedeep (device 1)", "run_2_lenet (device 1)"}
    assert count_canvases(page) > 0
    assert page.get_by_text("Error displaying widget").count() == 0
    wait_painted(page)
    save_screenshot(page, "notebook7_outputs")
    # Notebook 7.6's own settings loader throws "reading 'schema'" on every page, with or without nbprofiler
    # (its top frame in /static/notebook/notebook_core); any other error fails the test
    ours = [stack for stack in page.page_error_stacks
            if not (stack.splitlines()[1:2] and "/static/notebook/notebook_core." in stack.splitlines()[1])]
    assert not ours, ours
