"""Helpers for browser tests in a real JupyterLab (selectors and waits from STACK_NOTES.md 2.4-2.6)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
from playwright.sync_api import TimeoutError as PlaywrightTimeout

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-output" / "screenshots"

# Bokeh 3 renders into open shadow roots, which document.querySelectorAll does not enter.
_COUNT_CANVASES_JS = """() => { let n = 0; const walk = r => r.querySelectorAll('*').forEach(e => {
    if (e.tagName === 'CANVAS') n++; if (e.shadowRoot) walk(e.shadowRoot); });
  walk(document); return n; }"""

# ColumnDataSource.data is a Map in BokehJS 3; one list per Bokeh document holding the named source.
_BOKEH_DATA_JS = """([name, column]) => (window.Bokeh ? Bokeh.documents : []).flatMap(d => {
    const m = d.get_model_by_name(name);
    if (!m || !m.data) return [];
    const col = m.data.get ? m.data.get(column) : m.data[column];
    return col === undefined ? [] : [Array.from(col)]; })"""

# Counts the open notebook's execute replies from now on (its kernel's ``anyMessage`` signal): a run is over
# when every cell it ran has its reply. Prompts alone cannot say so: the moment Run All is clicked, a re-run
# still shows the last run's ``[k]:``, and a new kernel numbers its cells from 1 again.
_WATCH_REPLIES_JS = """() => { const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const w = window.__nbpReplies; if (w) w.kernel.anyMessage.disconnect(w.on);
  const watch = {kernel: k, n: 0, on: (_, m) => { if (m.direction === 'recv'
      && m.msg.header.msg_type === 'execute_reply') watch.n += 1; }};
  k.anyMessage.connect(watch.on); window.__nbpReplies = watch; }"""
_RUN_FINISHED_JS = """(n) => { const p = Array.from(document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell.jp-CodeCell .jp-InputPrompt'));
  return window.__nbpReplies.n >= n && p.length === n
    && p.every(e => /^\\[\\d+\\]:$/.test(e.textContent.trim())); }"""

# What a run that did not end left on the page: replies counted, the kernel's status, each cell's prompt and
# the end of its outputs.
_RUN_STATE_JS = """() => { const panel = window.jupyterapp.shell.currentWidget;
  return {replies: window.__nbpReplies ? window.__nbpReplies.n : null,
    kernel: panel && panel.sessionContext ? panel.sessionContext.kernelDisplayStatus : null,
    cells: Array.from(document.querySelectorAll(
      '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell.jp-CodeCell')).map(c => ({
        prompt: (c.querySelector('.jp-InputPrompt') || {}).textContent,
        outputs: Array.from(c.querySelectorAll('.jp-OutputArea-output')).map(o => o.innerText).join('\\n')
          .slice(-1500)}))}; }"""


def watch_replies(page) -> None:
    """Count the open notebook's execute replies from now on (`_RUN_FINISHED_JS` waits for them)."""
    page.evaluate(_WATCH_REPLIES_JS)


def write_notebook(path, cells, kernel: str = "python3") -> Path:
    """Write an nbformat 4 notebook. ``cells``: code strings, or ``("markdown", text)`` /
    ``("code", text)`` tuples. Returns the path."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": "Python 3", "language": "python"}
    for c in cells:
        kind, src = c if isinstance(c, tuple) else ("code", c)
        nb.cells.append(nbformat.v4.new_markdown_cell(src) if kind == "markdown" else nbformat.v4.new_code_cell(src))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def code_cell_count(path) -> int:
    return sum(c.cell_type == "code" for c in nbformat.read(str(path), as_version=4).cells)


def open_notebook(page, lab, nb_name: str) -> None:
    """Open ``nb_name`` (relative to ``lab.root``) and wait until its kernel is idle."""
    # "reset": start from an empty workspace, or JupyterLab restores the notebooks earlier tests of this
    # server opened, as hidden tabs whose cells would match the locators below.
    page.goto(lab.url(nb_name) + "&reset")
    panel = ".jp-NotebookPanel:not(.lm-mod-hidden)"
    page.locator(f"{panel} .jp-Notebook .jp-Cell").first.wait_for()
    # The toolbar can read idle before the kernel is connected; the status bar is the reliable one.
    page.locator(f'{panel} .jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator[data-status="idle"]').first.wait_for()
    page.locator("#jp-main-statusbar >> text=Idle").first.wait_for()


def run_all(page, n_code_cells: int, timeout_ms: float = 120_000) -> None:
    """Run ▸ Run All Cells, then wait until every cell's execution has replied and every input prompt shows
    ``[n]:`` (none ``[*]:``)."""
    watch_replies(page)
    page.click('.lm-MenuBar-itemLabel:text-is("Run")')
    page.click('.lm-Menu-item[data-command="runmenu:run-all"]')
    try:
        page.wait_for_function(_RUN_FINISHED_JS, arg=n_code_cells, timeout=timeout_ms)
    except PlaywrightTimeout as err:   # say what the notebook showed
        raise AssertionError(f"the run of {n_code_cells} cells did not end within {timeout_ms / 1000:.0f} s; "
                             f"the notebook showed {json.dumps(page.evaluate(_RUN_STATE_JS), indent=1)}") from err


def open_and_run_all(page, lab, nb_name: str, n_code_cells: int | None = None, timeout_ms: float = 120_000):
    """Open a notebook in ``lab``, run all cells, wait for the end. Returns the cells locator."""
    if n_code_cells is None:
        n_code_cells = code_cell_count(lab.root / nb_name)
    open_notebook(page, lab, nb_name)
    run_all(page, n_code_cells, timeout_ms)
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")


def cell_errors(page) -> list[str]:
    """Texts of error outputs (tracebacks) in the open notebook."""
    return page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"], '
                        ".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']").all_inner_texts()


def bokeh_data(page, source_name: str, column: str) -> list[list]:
    """Column ``column`` of every BokehJS ColumnDataSource named ``source_name`` (one list per document)."""
    return page.evaluate(_BOKEH_DATA_JS, [source_name, column])


def wait_bokeh_data(page, source_name: str, column: str, expected: list, timeout_ms: float = 30_000) -> None:
    """Wait until some BokehJS source named ``source_name`` has ``column`` equal to ``expected``."""
    page.wait_for_function(f"(arg) => ({_BOKEH_DATA_JS})(arg).some(c => JSON.stringify(c) === arg[2])",
                           arg=[source_name, column, json.dumps(expected, separators=(",", ":"))],
                           timeout=timeout_ms)


def wait_bokeh_filled(page, source_name: str, column: str, timeout_ms: float = 30_000) -> None:
    """Wait until some BokehJS source named ``source_name`` has a non-empty ``column``."""
    page.wait_for_function(f"(arg) => ({_BOKEH_DATA_JS})(arg).some(c => c.length > 0)",
                           arg=[source_name, column], timeout=timeout_ms)


def bokeh_texts(page, name: str) -> list[str]:
    """The ``text`` of every BokehJS model named ``name`` (a Div, a Paragraph), one per document."""
    return page.evaluate("""(name) => (window.Bokeh ? Bokeh.documents : []).flatMap(d => {
        const m = d.get_model_by_name(name); return m ? [m.text] : []; })""", name)


def scroll_to_model(page, name: str) -> None:
    """Scroll the view of the BokehJS model named ``name`` to the middle of the window."""
    page.evaluate("(n) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(n);"
                  " if (m) Bokeh.index.find_one(m).el.scrollIntoView({block: 'center'}); } }", name)


# [start, end] of each timeline's x range on the page (the named Range1d), one per document
TIMELINE_X_RANGE_JS = """() => (window.Bokeh ? Bokeh.documents : []).flatMap(d => {
    const r = d.get_model_by_name('timeline_x_range'); return r ? [[r.start, r.end]] : []; })"""


def bokeh_model_names(page) -> list[str]:
    """Names of all named models in all BokehJS documents on the page."""
    return page.evaluate("""() => (window.Bokeh ? Bokeh.documents : []).flatMap(d =>
        Array.from(d.all_models).map(m => m.name).filter(n => n))""")


def count_canvases(page) -> int:
    """Number of <canvas> elements on the page, shadow roots included."""
    return page.evaluate(_COUNT_CANVASES_JS)


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "screenshot"


def save_screenshot(target, name: str, full_page: bool = False) -> Path:
    """Screenshot a page or a locator into test-output/screenshots/<name>.png; returns the path.

    Pages are captured at viewport size: JupyterLab scrolls inside its own panels, so ``full_page``
    would not show more (STACK_NOTES 2.6.7); scroll the cell into view or pass a locator instead.
    ``full_page`` (pages only) captures a whole scrolling document, e.g. a standalone HTML report.
    """
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{_safe_name(name)}.png"
    if full_page:
        target.screenshot(path=str(path), full_page=True)
    else:
        target.screenshot(path=str(path))
    return path


def pixel_diff(a: Path, b: Path, threshold: int = 16) -> float:
    """Fraction of pixels that differ by more than ``threshold`` (0..1); a size mismatch counts as 1.0."""
    from PIL import Image, ImageChops
    ia, ib = Image.open(a).convert("RGB"), Image.open(b).convert("RGB")
    if ia.size != ib.size:
        return 1.0
    mask = ImageChops.difference(ia, ib).convert("L").point(lambda v: 255 if v > threshold else 0)
    return mask.histogram()[255] / (ia.size[0] * ia.size[1])


# Every BokehJS document on the page has rendered all its roots (BokehJS's own idle state).
BOKEH_IDLE_JS = "() => !!window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents.every(d => d.is_idle)"
_TWO_FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def wait_painted(page, bokeh: bool = True) -> None:
    """Until BokehJS is idle (``bokeh``) and the browser has presented two more frames: what is on screen
    is what the page's state says (for screenshots after an interaction)."""
    if bokeh:
        page.wait_for_function(BOKEH_IDLE_JS)
    page.evaluate(_TWO_FRAMES_JS)


def wait_stable(page, fn, what: str = "", timeout_s: float = 30.0, interval_s: float = 0.1):
    """Poll ``fn()`` until it returns the same truthy value twice in a row ``interval_s`` apart (a layout
    or a value that has stopped changing); returns it."""
    import time
    end = time.monotonic() + timeout_s
    last = object()
    while time.monotonic() < end:
        value = fn()
        if value and value == last:
            return value
        last = value
        page.wait_for_timeout(interval_s * 1000)  # the polling interval, not a wait for a state
    raise AssertionError(f"{what or fn} did not settle in {timeout_s:.0f} s (last: {last!r})")


def open_offline(page, path, ready_js: str | None = BOKEH_IDLE_JS) -> list[str]:
    """Open a local HTML file with every non-``file:``/``data:``/``blob:`` request aborted
    (STACK_NOTES 3.5), then wait until ``ready_js`` holds (default: every BokehJS document rendered) and
    the page has painted. Returns the list of blocked URLs (an offline report should block none)."""
    blocked: list[str] = []

    def handler(route):
        url = route.request.url
        if url.startswith(("file:", "data:", "blob:")):
            route.continue_()
        else:
            blocked.append(url)
            route.abort()

    page.route("**/*", handler)
    page.goto(Path(path).resolve().as_uri(), wait_until="load")
    if ready_js:
        page.wait_for_function(ready_js)
    wait_painted(page, bokeh=False)
    return blocked


def set_theme(page, name: str, light: bool) -> None:
    """Switch JupyterLab's theme (``"JupyterLab Dark"`` / ``"JupyterLab Light"``) and wait until it is
    applied, its loading splash has gone and the page has painted it. The theme is a saved setting of the
    session's server: a test that changes it restores it."""
    page.evaluate(f"() => window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{name}'}})")
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{str(light).lower()}'")
    page.wait_for_function("() => !document.querySelector('#jupyterlab-splash')")
    wait_painted(page)
