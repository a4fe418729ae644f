"""BokehJS is the page's, not the kernel's: every display path draws its plots after a page reload with the
kernel still running, in a second tab, in a notebook restored from disk with a new kernel, and in a fresh
notebook (`compare(a, b).show()`, `cluster.show()`, a view's own `display()`). Plots are counted as
rendered canvases; a missing BokehJS shows jupyter_bokeh's "javascript error" instead, and raises in the
page."""
from __future__ import annotations

import nbformat
from conftest import guard_page
from helpers import REPO, open_and_run_all, open_notebook, run_all, save_screenshot, wait_stable, write_notebook

DATA = (REPO.parent / "shared" / "data").resolve()
WIDEDEEP = DATA / "legacy" / "run_1_widedeep"

# Canvases inside the output area of the notebook shown (Bokeh renders into open shadow roots).
_OUTPUT_CANVASES_JS = """() => { let n = 0;
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return 0;
  const walk = r => r.querySelectorAll('*').forEach(e => { if (e.tagName === 'CANVAS') n++;
    if (e.shadowRoot) walk(e.shadowRoot); });
  panel.querySelectorAll('.jp-OutputArea').forEach(walk); return n; }"""


def _wait_plots(page, at_least: int) -> int:
    """Until the notebook's outputs hold ``at_least`` canvases; returns how many."""
    page.wait_for_function(f"() => ({_OUTPUT_CANVASES_JS})() >= {at_least}")
    return page.evaluate(_OUTPUT_CANVASES_JS)


def _saved_outputs(path) -> int | None:
    """Outputs of the notebook's second cell on disk (None while the file is missing them or being written)."""
    try:
        return len(nbformat.read(str(path), as_version=4).cells[1].outputs) or None
    except Exception:  # noqa: BLE001 - a file half written by the server reads as not saved yet
        return None


def _no_bokeh_errors(page) -> None:
    text = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea").all_inner_texts()
    assert not any("javascript error" in t.lower() for t in text), text
    errors = [e for e in page.page_errors if "require" in e or "Bokeh" in e]
    assert not errors, errors


def test_dashboard_draws_after_a_reload_and_in_a_second_tab(lab, page):
    write_notebook(lab.root / "reload.ipynb", ["%load_ext nbprofiler", f"%nbprofiler {str(WIDEDEEP)!r} --as wd"])
    open_and_run_all(page, lab, "reload.ipynb", 2)
    first = _wait_plots(page, 1)
    _no_bokeh_errors(page)
    # a reload: the kernel keeps running (and keeps nbprofiler imported); the page starts without Bokeh
    page.reload()
    open_notebook(page, lab, "reload.ipynb")
    run_all(page, 2)
    assert _wait_plots(page, first) >= first
    _no_bokeh_errors(page)
    save_screenshot(page, "bokehjs_after_reload")
    # a second tab on the same notebook and kernel
    second = page.context.new_page()
    guard_page(second)
    open_notebook(second, lab, "reload.ipynb")
    run_all(second, 2)
    assert _wait_plots(second, first) >= first
    _no_bokeh_errors(second)
    second.close()


def test_a_restored_notebook_draws_when_run_again(lab, page):
    """The next day: the notebook was saved with its outputs, its kernel is gone, JupyterLab opens it
    from disk. Its old outputs must not break the page, and running it again draws every plot."""
    path = write_notebook(lab.root / "restored.ipynb", ["%load_ext nbprofiler",
                                                        f"%nbprofiler {str(WIDEDEEP)!r} --as wd"])
    open_and_run_all(page, lab, "restored.ipynb", 2)
    first = _wait_plots(page, 1)
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    wait_stable(page, lambda: _saved_outputs(path), "the notebook saved with its outputs")
    for kernel in lab.api("GET", "/api/kernels"):
        lab.api("DELETE", f"/api/kernels/{kernel['id']}")
    open_notebook(page, lab, "restored.ipynb")  # a new kernel; the outputs are the saved ones
    restored = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").nth(1)
    restored.locator(".jp-OutputArea-output").first.wait_for(state="attached")
    _no_bokeh_errors(page)
    run_all(page, 2)
    assert _wait_plots(page, first) >= first
    _no_bokeh_errors(page)
    save_screenshot(page, "bokehjs_restored_notebook")


def test_fresh_notebook_compare_cluster_and_a_view_draw(lab, page):
    a, b = DATA / "minddata" / "md_bottleneck_map", DATA / "minddata" / "md_fast"
    cluster = DATA / "legacy" / "cluster_4rank_pipeline"
    cells = ["import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
             f"nbprofiler.compare(nbprofiler.load({str(a)!r}), nbprofiler.load({str(b)!r})).show()",
             f"nbprofiler.load({str(cluster)!r}).show()",
             "from nbprofiler.views.step_trace import StepTraceView\n"
             f"StepTraceView(nbprofiler.load({str(WIDEDEEP)!r})).display()"]
    write_notebook(lab.root / "fresh.ipynb", cells)
    out = open_and_run_all(page, lab, "fresh.ipynb", len(cells))
    for i in (1, 2, 3):  # each display path's own output holds its plots, exactly once
        cell = out.nth(i)
        cell.locator("canvas").first.wait_for(state="attached")
        assert cell.locator(".jp-OutputArea-output").count() >= 1
    _wait_plots(page, 3)
    _no_bokeh_errors(page)
    save_screenshot(page, "bokehjs_fresh_compare_cluster")


def test_server_serves_only_the_installed_bokehjs_bundles(lab):
    import urllib.error
    import urllib.request

    from nbprofiler.views.bokehjs import bundle_path, bundles, version
    VERSION = version()

    def get(path, token=True):
        headers = {"Authorization": f"token {lab.token}"} if token else {}
        req = urllib.request.Request(lab.base + path, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.headers.get("Content-Type"), resp.read()
        except urllib.error.HTTPError as err:
            return err.code, None, b""

    for bundle in bundles():
        status, kind, body = get(f"/nbprofiler/bokehjs/{VERSION}/{bundle}.min.js")
        assert status == 200 and kind.startswith("application/javascript")
        assert body == bundle_path(VERSION, bundle).read_bytes()
    assert get("/nbprofiler/bokehjs/0.0.1/bokeh.min.js")[0] == 404          # another version
    assert get(f"/nbprofiler/bokehjs/{VERSION}/compiler.min.js")[0] == 404   # a file that is not a bundle
    assert get(f"/nbprofiler/bokehjs/{VERSION}/..%2F..%2Fserver.min.js")[0] == 404
    status, kind, body = get(f"/nbprofiler/bokehjs/{VERSION}/bokeh.min.js", token=False)  # the login page
    assert body != bundle_path(VERSION, "bokeh").read_bytes() and not (kind or "").startswith("application/javascript")
