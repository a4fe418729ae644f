"""``%%nbprofiler profile`` in a real JupyterLab kernel: a cell trains a small LeNet (MindSpore's CPU
build) with a MindData pipeline under the magic, and the dashboard of that run appears under the cell."""
from __future__ import annotations

from helpers import cell_errors, open_and_run_all, save_screenshot, wait_painted, write_notebook

from cellprof_cells import LENET_CELL


def test_profiled_cell_shows_its_dashboard(lab, page, tmp_path):
    out = tmp_path / "runs"
    write_notebook(lab.root / "cellprof.ipynb", [
        "%load_ext nbprofiler",
        f"%%nbprofiler profile --data-process --memory --output {out} --as lenet\nSTEPS = 6\n{LENET_CELL}",
        "print(len(lenet.host_queue), sorted(set(lenet.minddata_pipeline['op_type'])))"])
    cells = open_and_run_all(page, lab, "cellprof.ipynb", 3, timeout_ms=300_000)
    # no traceback (MindSpore's own log lines go to stderr; they are not errors)
    assert [e for e in cell_errors(page) if "Traceback" in e or "Error" in e.split(":")[0]] == []
    dash = cells.nth(1)
    dash.locator(".widget-tab").first.wait_for()
    assert dash.locator(".lm-TabBar-tab").all_inner_texts()[:3] == ["Overview", "Step trace", "Operators"]
    dash.locator(".lm-TabBar-tab", has_text="Operators").first.click()
    dash.locator("canvas").locator("visible=true").first.wait_for()
    # the numbers of that run: 6 steps through the host queue, the pipeline's three ops
    cells.nth(2).get_by_text("6 ['BatchOp', 'GeneratorOp', 'MapOp']").wait_for()
    wait_painted(page)
    save_screenshot(page, "cellprof_dashboard")
    assert not page.page_errors, page.page_errors
