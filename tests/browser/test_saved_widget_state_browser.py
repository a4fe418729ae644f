"""Notebooks saved with their widget state (JupyterLab's "Save Widget State Automatically", which
nbprofiler's install turns on by default) and opened again, with the kernel still running and with a new one: the step-trace chart is titled as its step picker
says, and re-run compare and cluster outputs still find their widget models. Every wait is for a state
(the saved file, the picker's value, BokehJS models), never a fixed time. Screenshots:
test-output/screenshots/saved_state_*.png."""
from __future__ import annotations

import json
import re

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from helpers import REPO, open_and_run_all, open_notebook, run_all, save_screenshot, wait_painted, wait_stable, \
    write_notebook

DATA = (REPO.parent / "shared" / "data").resolve()
WIDEDEEP = DATA / "legacy" / "run_1_widedeep"
WIDGETS_PLUGIN = "/lab/api/settings/@jupyter-widgets/jupyterlab-manager:plugin"
STATE = "application/vnd.jupyter.widget-state+json"
VIEW = "application/vnd.jupyter.widget-view+json"
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"

# Titles of every BokehJS figure named ``name`` on the page.
_TITLES_JS = """(name) => (window.Bokeh ? Bokeh.documents : []).flatMap(d => {
    const f = d.get_model_by_name(name); return f && f.title ? [f.title.text] : []; })"""


def _save_widget_state(lab, on: bool | None) -> None:
    """Set the user's "Save Widget State Automatically"; None removes the user's setting (the default,
    which nbprofiler's install turns on: share/jupyter/lab/settings/overrides.d/nbprofiler.json)."""
    lab.api("PUT", WIDGETS_PLUGIN, {"raw": json.dumps({} if on is None else {"saveState": on})})


def test_notebooks_save_widget_state_by_default(lab):
    _save_widget_state(lab, None)
    settings = lab.api("GET", WIDGETS_PLUGIN)  # the server folds overrides.d into the schema's defaults
    assert settings["schema"]["properties"]["saveState"]["default"] is True and settings["settings"] == {}


def _saved(path) -> tuple[dict, list[str]] | None:
    """(saved widget state, model ids the outputs show) of the notebook on disk; None while it has none."""
    try:
        nb = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    state = nb.get("metadata", {}).get("widgets", {}).get(STATE, {}).get("state")
    ids = [o["data"][VIEW]["model_id"] for c in nb["cells"] for o in c.get("outputs", []) if VIEW in o.get("data", {})]
    return (state, ids) if state and ids else None


def _missing_models(state: dict) -> set[str]:
    """Ids of widget models the saved ``state`` refers to but does not hold: with any, a view that needs
    one cannot be drawn once no kernel has it."""
    return set(re.findall(r"IPY_MODEL_([0-9a-f]{32})", json.dumps(state))) - set(state)


def _save(page, path, check) -> tuple[dict, list[str]]:
    """Save the notebook and wait until the file on disk holds widget state passing ``check`` and complete
    (every model it refers to is in it)."""
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    return wait_stable(page, lambda: (s := _saved(path)) and check(*s) and not _missing_models(s[0]) and s,
                       "the notebook saved with its widget state")


def _next_day(page, lab) -> None:
    """As after the lab was closed and its server restarted: no page open, no session, no kernel. (Killing
    the kernel under an open page let that page's session start another kernel, whose arrival could clear
    the widget models while the reopened notebook was loading them from its saved state.)"""
    page.goto("about:blank")
    for session in lab.api("GET", "/api/sessions"):
        lab.api("DELETE", f"/api/sessions/{session['id']}")
    for kernel in lab.api("GET", "/api/kernels"):
        lab.api("DELETE", f"/api/kernels/{kernel['id']}")
    assert not lab.api("GET", "/api/sessions") and not lab.api("GET", "/api/kernels")


def _picker(page) -> str:
    """The step picker's shown choice (ipywidgets writes its labels with no-break spaces)."""
    return page.locator(f"{PANEL} .widget-dropdown select").first.evaluate(
        "s => s.selectedIndex >= 0 ? s.options[s.selectedIndex].textContent : ''").replace("\xa0", " ")


def _wait_picker_and_title(page, step_label: str) -> None:
    page.locator(f"{PANEL} .widget-dropdown select").first.wait_for()
    page.wait_for_function(f"(want) => ({_TITLES_JS})('step_trace_detail').some(t => t.startsWith(want + ':'))",
                           arg=step_label)
    wait_stable(page, lambda: _picker(page), "the step picker")
    assert _picker(page) == step_label
    titles = page.evaluate(_TITLES_JS, "step_trace_detail")
    assert titles and all(t.startswith(step_label + ":") for t in titles), titles


def test_a_reopened_step_trace_is_titled_as_its_picker_says(lab, page):
    path = write_notebook(lab.root / "saved_step.ipynb", [
        "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler\n"
        "from nbprofiler.views.step_trace import StepTraceView",
        f"view = StepTraceView(nbprofiler.load({str(WIDEDEEP)!r}))\nview.display()"])
    _save_widget_state(lab, True)
    try:
        open_and_run_all(page, lab, "saved_step.ipynb", 2)
        _wait_picker_and_title(page, "Average")
        page.locator(f"{PANEL} .widget-dropdown select").first.select_option(label="Step 50")
        _wait_picker_and_title(page, "Step 50")
        _save(page, path, lambda state, ids: any('Step 50: total' in json.dumps(m) for m in state.values()))
        # the page reloaded, the kernel still running: the widgets come from the kernel
        page.reload()
        open_notebook(page, lab, "saved_step.ipynb")
        _wait_picker_and_title(page, "Step 50")
        wait_painted(page)
        save_screenshot(page, "saved_state_step_trace_reloaded")
        # the next day: no kernel; the widgets come from the state saved in the notebook
        _next_day(page, lab)
        open_notebook(page, lab, "saved_step.ipynb")
        _wait_picker_and_title(page, "Step 50")
        wait_painted(page)
        save_screenshot(page, "saved_state_step_trace_new_kernel")
    finally:
        _save_widget_state(lab, None)
    assert not page.page_errors, page.page_errors


def _widget_outputs_ok(page, cells: list[int]) -> None:
    """Each of ``cells`` shows its widgets (a canvas) and no cell says a model was not found."""
    out = page.locator(f"{PANEL} .jp-Notebook .jp-Cell")
    for i in cells:
        try:
            out.nth(i).locator("canvas").first.wait_for(state="attached")
        except PlaywrightTimeout:  # the page fixture screenshots a failed test (FAILED-<name>.png)
            raise AssertionError(f"cell {i} drew no canvas; it shows {out.nth(i).inner_text()[:2000]!r}; "
                                 f"console errors: {page.console_errors[-10:]}") from None
    texts = page.locator(f"{PANEL} .jp-OutputArea").all_inner_texts()
    assert not [t for t in texts if "model not found" in t.lower()], texts


def test_rerun_compare_and_cluster_outputs_find_their_models_after_a_reload(lab, page):
    a, b = DATA / "minddata" / "md_bottleneck_map", DATA / "minddata" / "md_fast"
    cluster = DATA / "npu" / "ascend_pt_text_2rank"
    path = write_notebook(lab.root / "saved_rerun.ipynb", [
        "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
        f"nbprofiler.compare(nbprofiler.load({str(a)!r}), nbprofiler.load({str(b)!r})).show()",
        f"nbprofiler.load({str(cluster)!r}).show()"])
    _save_widget_state(lab, None)  # as installed: nbprofiler's default saves widget state
    try:
        open_and_run_all(page, lab, "saved_rerun.ipynb", 3)
        first = wait_stable(page, lambda: (s := _saved_ids_on_page(page)) and s, "the first run's widgets")
        run_all(page, 3)      # run again: new widget models for the same outputs
        wait_stable(page, lambda: (s := _saved_ids_on_page(page)) and s != first and s, "the second run's widgets")
        _widget_outputs_ok(page, [1, 2])  # saved once drawn, as a user would: every model has arrived
        state, ids = _save(page, path, lambda state, ids: len(ids) == 2 and all(i in state for i in ids))
        page.reload()
        open_notebook(page, lab, "saved_rerun.ipynb")
        _widget_outputs_ok(page, [1, 2])
        _next_day(page, lab)
        open_notebook(page, lab, "saved_rerun.ipynb")
        _widget_outputs_ok(page, [1, 2])
        wait_painted(page)
        save_screenshot(page, "saved_state_rerun_new_kernel")
    finally:
        _save_widget_state(lab, None)
    assert not page.page_errors, page.page_errors


def _saved_ids_on_page(page) -> list[str]:
    """The widget model ids the open notebook's outputs show (from its model, as it would be saved)."""
    return page.evaluate("""() => { const nb = window.jupyterapp.shell.currentWidget.content.model;
        const ids = []; for (const cell of nb.cells) { if (!cell.outputs) continue;
          for (let i = 0; i < cell.outputs.length; i++) { const d = cell.outputs.get(i).data;
            const v = d['application/vnd.jupyter.widget-view+json']; if (v) ids.push(v.model_id); } }
        return ids; }""")
