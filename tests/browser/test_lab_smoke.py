"""Self-test of the browser fixtures: a tiny jupyter_bokeh notebook renders and reacts in real JupyterLab."""
from __future__ import annotations

from helpers import (bokeh_data, count_canvases, open_and_run_all, pixel_diff, save_screenshot,
                     wait_bokeh_data, wait_painted, write_notebook)

CELLS = [
    "import ipywidgets as W\n"
    "from bokeh.io import output_notebook, show\n"
    "from bokeh.models import ColumnDataSource\n"
    "from bokeh.plotting import figure\n"
    "from bokeh.resources import INLINE\n"
    "from jupyter_bokeh import BokehModel\n"
    "output_notebook(resources=INLINE, hide_banner=True)",
    "cats = list('abcd')\n"
    "src = ColumnDataSource(data=dict(x=cats, top=[1, 2, 3, 4]), name='bar_src')\n"
    "p = figure(x_range=cats, y_range=(0, 45), title='scale=1', name='bar_fig', toolbar_location=None,\n"
    "           width=400, height=250)\n"
    "p.vbar(x='x', top='top', source=src, width=0.8)\n"
    "slider = W.IntSlider(value=1, min=1, max=10, description='scale')\n"
    "status = W.Label(value='sum=10')\n"
    "def update(change):\n"
    "    s = slider.value\n"
    "    src.data = dict(x=cats, top=[s * v for v in (1, 2, 3, 4)])\n"
    "    p.title.text = f'scale={s}'\n"
    "    status.value = f'sum={10 * s}'\n"
    "slider.observe(update, names='value')\n"
    "W.VBox([slider, BokehModel(p), status])",
]


def test_bokeh_widget_renders_and_reacts(lab, page):
    write_notebook(lab.root / "smoke.ipynb", CELLS)
    cells = open_and_run_all(page, lab, "smoke.ipynb", 2)
    box = cells.nth(1).locator(".widget-vbox").first
    box.locator("canvas").first.wait_for(state="visible")
    wait_bokeh_data(page, "bar_src", "top", [1, 2, 3, 4])
    wait_painted(page)
    # every view of the figure shows the kernel's data (a re-rendered output makes a second document)
    assert all(c == [1, 2, 3, 4] for c in bokeh_data(page, "bar_src", "top"))
    assert count_canvases(page) >= 1
    before = save_screenshot(box, "lab_smoke_before")

    # The last reply of Run All moves focus to the notebook; once the kernel is idle that has happened,
    # and each key is sent to the focused handle and its effect awaited before the next one.
    page.locator("#jp-main-statusbar >> text=Idle").first.wait_for()
    handle = box.locator(".widget-slider .noUi-handle")
    for scale in range(2, 6):
        handle.press("ArrowRight")
        page.locator(f".widget-label:has-text('sum={10 * scale}')").wait_for()
    wait_bokeh_data(page, "bar_src", "top", [5, 10, 15, 20])
    wait_painted(page)
    assert all(c == [5, 10, 15, 20] for c in bokeh_data(page, "bar_src", "top"))
    after = save_screenshot(box, "lab_smoke_after")
    assert pixel_diff(before, after) > 0.01
    save_screenshot(page, "lab_smoke_page")
    assert not page.page_errors, page.page_errors


def test_kernel_starts_through_rest(lab):
    kid = lab.start_kernel()
    assert any(k["id"] == kid for k in lab.api("GET", "/api/kernels"))
    lab.api("DELETE", f"/api/kernels/{kid}")
