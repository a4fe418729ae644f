"""Table headers are never cut: every column of the many-runs table (12+ columns, wider than a cell) and
of the operators table is at least as wide as its title, checked on the built DataTables and, in a real
JupyterLab, on the header cells SlickGrid draws (no text overflowing its cell). Screenshot:
test-output/screenshots/runs_headline_table.png."""
from __future__ import annotations

import warnings

from helpers import REPO, open_and_run_all, save_screenshot, wait_painted, write_notebook

import nbprofiler
from nbprofiler.views import theme
from nbprofiler.views.operators import operators_layout
from nbprofiler.views.runs import headline_table

DATA = (REPO.parent / "shared" / "data").resolve()
RUNS = [DATA / "minddata" / "md_bottleneck_map", DATA / "minddata" / "md_fast", DATA / "legacy" / "run_2_lenet"]

# Header cells of every Bokeh table on the page (open shadow roots included): [title, cut], cut when the
# title's text runs past the cell's content box (SlickGrid hides the rest). The title is an inline span:
# its own box is as wide as its text.
_CUT_HEADERS_JS = """(root) => { const out = []; const walk = r => r.querySelectorAll('*').forEach(e => {
    if (e.classList && e.classList.contains('slick-header-column')) {
      const name = e.querySelector('.slick-column-name');
      const box = e.getBoundingClientRect();
      if (name && box.width > 0) {
        const pad = parseFloat(getComputedStyle(e).paddingRight) || 0;
        out.push([name.textContent, name.getBoundingClientRect().right > box.right - pad + 0.5]);
      }
    }
    if (e.shadowRoot) walk(e.shadowRoot); });
  walk(root); return out; }"""


def _runset():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbprofiler.compare_many([str(p) for p in RUNS], labels=["map", "fast", "lenet"])


def test_the_built_tables_make_room_for_their_titles():
    rs = _runset()
    table = headline_table(rs.headline, rs.change_pct)
    titles = {c.title: c.width for c in table.columns}
    assert "Host queue empty (% of steps)" in titles
    assert all(w >= theme.header_width(t) for t, w in titles.items()), titles
    assert table.autosize_mode == "none"      # kept at those widths: the table scrolls sideways
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = nbprofiler.load(DATA / "legacy" / "run_1_widedeep")
    lay = operators_layout(prof.op_types, prof.ops)
    table = next(iter(lay.select({"name": "op_table_ai_core"})))
    assert all(c.width >= theme.header_width(c.title) for c in table.columns)


def test_no_header_is_cut_in_jupyterlab(lab, page):
    # the third cell: the same titles squeezed into a narrow table as before the fix, where the check
    # must see them cut
    squeeze = ("from bokeh.models import ColumnDataSource, DataTable, TableColumn\n"
               "from jupyter_bokeh import BokehModel\n"
               "titles = ['Host queue empty (% of steps)', 'Device queue empty (% of steps)'] * 4\n"
               "BokehModel(DataTable(source=ColumnDataSource({'x': [1]}), width=500, autosize_mode='force_fit',"
               " columns=[TableColumn(field='x', title=t, width=150) for t in titles]))")
    cells = ["import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
             f"nbprofiler.compare_many({[str(p) for p in RUNS]!r}, labels=['map', 'fast', 'lenet']).show()",
             squeeze]
    write_notebook(lab.root / "headers.ipynb", cells)
    cells = open_and_run_all(page, lab, "headers.ipynb", 3)
    out, squeezed = cells.nth(1), cells.nth(2)
    out.locator(".jp-OutputArea").wait_for()
    page.wait_for_function(f"(el) => ({_CUT_HEADERS_JS})(el).length >= 10", arg=out.element_handle())
    page.wait_for_function(f"(el) => ({_CUT_HEADERS_JS})(el).length >= 8", arg=squeezed.element_handle())
    wait_painted(page)
    headers = page.evaluate(_CUT_HEADERS_JS, out.element_handle())
    names = [h for h, _ in headers]
    assert "Host queue empty (% of steps)" in names, names
    assert not [h for h, cut in headers if cut], headers
    save_screenshot(out, "runs_headline_table")
    squeezed_headers = page.evaluate(_CUT_HEADERS_JS, squeezed.element_handle())
    assert all(cut for name, cut in squeezed_headers if name != "#"), squeezed_headers
    assert not page.page_errors, page.page_errors
