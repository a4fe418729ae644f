"""NPU operators by accelerator core and the ranks' timeline of a cluster page, in a real JupyterLab: each
renders, its main interaction (a core's tab clicked, the timeline fold opened) reaches its state, and the
numbers on screen are the frames'. Screenshots: test-output/screenshots/{operators_npu_cores,
cluster_timeline}.png."""
from __future__ import annotations

from helpers import REPO, bokeh_data, open_and_run_all, save_screenshot, wait_bokeh_filled, wait_painted, write_notebook

import nbprofiler

DATA = (REPO.parent / "shared" / "data").resolve()


def test_npu_operator_tabs_by_core(lab, page):
    path = DATA / "npu" / "kernel_details_591"
    cells = ["import warnings; warnings.simplefilter('ignore')\nimport nbprofiler\n"
             "from nbprofiler.views.operators import OperatorsView",
             f"view = OperatorsView(nbprofiler.load({str(path)!r}))\nview.display()"]
    write_notebook(lab.root / "cores.ipynb", cells)
    out = open_and_run_all(page, lab, "cores.ipynb", 2).nth(1)
    tab = out.get_by_text("NPU · AI Core", exact=True).first
    tab.wait_for()
    for title in ("NPU · AI Vector Core", "NPU · AI CPU", "NPU · MIX AIV", "Communication"):
        assert out.get_by_text(title, exact=True).count() >= 1, title
    tab.click()
    wait_bokeh_filled(page, "op_table_src_npu_ai_core", "op_name")
    prof = nbprofiler.load(path)
    k = prof.kernels
    counts = bokeh_data(page, "op_table_src_npu_ai_core", "count")[0]
    assert sum(counts) == int((k["accelerator_core"] == "AI_CORE").sum()) == 13
    wait_painted(page)
    save_screenshot(out, "operators_npu_cores")
    assert not page.page_errors, page.page_errors


def test_cluster_page_timeline_of_ranks(lab, page):
    path = DATA / "npu" / "ascend_pt_text_2rank"
    cells = ["import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
             f"cluster = nbprofiler.load({str(path)!r})\ncluster.show()"]
    write_notebook(lab.root / "cluster_tl.ipynb", cells)
    out = open_and_run_all(page, lab, "cluster_tl.ipynb", 2).nth(1)
    fold = out.get_by_text("Timeline of ranks 0, 1 on one clock").first
    fold.wait_for()
    fold.click()
    wait_bokeh_filled(page, "timeline_src", "left")
    # both ranks' tracks are offered to pin, each named after its rank
    # (ipywidgets writes the labels with no-break spaces)
    options = [o.replace("\xa0", " ") for o in
               out.locator("select option").evaluate_all("els => els.map(e => e.textContent)")]
    assert any(o.startswith("rank 0 · ") for o in options) and any(o.startswith("rank 1 · ") for o in options)
    prof1 = nbprofiler.load(path, device="1")
    assert sum(o.startswith("rank 1 · ") for o in options) == len(prof1.timeline_tracks)
    out.locator(".jp-OutputArea").first.evaluate("e => e.scrollIntoView({block: 'end'})")
    wait_painted(page)
    save_screenshot(page, "cluster_timeline")
    assert not page.page_errors, page.page_errors


def test_cluster_communication_matrix_measure_toggle(lab, page):
    path = DATA / "legacy" / "cluster_4rank_pipeline"
    cells = ["import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
             f"cluster = nbprofiler.load({str(path)!r})\ncluster.show()"]
    write_notebook(lab.root / "cluster_comm.ipynb", cells)
    out = open_and_run_all(page, lab, "cluster_comm.ipynb", 2).nth(1)
    wait_bokeh_filled(page, "cluster_rank_comm_src", "rank")
    assert sorted(bokeh_data(page, "cluster_rank_comm_src", "rank")[0]) == ["0", "1", "2", "3"]
    out.get_by_text("Time", exact=True).first.click()
    page.wait_for_function("() => Bokeh.documents.some(d => { const f = d.get_model_by_name('cluster_comm_matrix');"
                           " return f && f.title.text === 'Communication matrix: time per link'; })")
    field = page.evaluate("() => Bokeh.documents.flatMap(d => { const f = d.get_model_by_name('cluster_comm_matrix');"
                          " return f ? [f.renderers[0].glyph.fill_color.field] : []; })")[0]
    assert field == "time_ms"
    page.evaluate("() => { for (const d of Bokeh.documents) { const m = d.get_model_by_name('cluster_comm_matrix');"
                  " if (m) Bokeh.index.find_one(m).el.scrollIntoView({block: 'center'}); } }")
    wait_painted(page)
    save_screenshot(page, "cluster_communication_time")
    assert not page.page_errors, page.page_errors


def test_cluster_page_breakdown_of_each_ranks_step(lab, page):
    """The per-rank breakdown draws in JupyterLab: one stacked bar per rank, slowest first, with the
    parts the files give (checked against step_trace_time.csv, read here), under its finding."""
    import pandas as pd
    path = DATA / "npu" / "ascend_pt_text_2rank"
    want = {}
    for rank in ("0", "1"):
        csv = next(path.glob(f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"))
        t = pd.read_csv(csv)
        want[rank] = float(t["Communication(Not Overlapped)"].median()) / 1000.0  # the file's us -> ms
    cells = ["import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
             f"cluster = nbprofiler.load({str(path)!r})\ncluster.show()"]
    write_notebook(lab.root / "cluster_breakdown.ipynb", cells)
    out = open_and_run_all(page, lab, "cluster_breakdown.ipynb", 2).nth(1)
    wait_bokeh_filled(page, "cluster_breakdown_src", "rank")
    ranks = bokeh_data(page, "cluster_breakdown_src", "rank")[0]
    steps = bokeh_data(page, "cluster_breakdown_src", "step_ms")[0]
    exposed = [a + b + c for a, b, c in zip(*(bokeh_data(page, "cluster_breakdown_src", k)[0]
                                                for k in ("wait_ms", "transit_ms", "exposed_unsplit_ms")))]
    assert sorted(ranks) == ["0", "1"] and steps == sorted(steps, reverse=True)  # slowest first
    for r, e in zip(ranks, exposed):
        assert abs(e - want[r]) < 1e-6, (r, e, want[r])
    finding = out.get_by_text("On the slowest rank").first
    finding.wait_for()
    assert "communication exposed" in finding.inner_text()
    finding.scroll_into_view_if_needed()
    wait_painted(page)
    save_screenshot(page, "cluster_breakdown")
    assert not page.page_errors, page.page_errors
