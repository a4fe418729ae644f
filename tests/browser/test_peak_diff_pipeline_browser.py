"""What is alive at the memory peak, the event-level diff of two runs, the pipeline bubbles and the ranks'
clock alignment, in a real JupyterLab: each renders, says what the analysis computed (the numbers
checked here against the files, read with the csv module), and its main interaction reaches its state.
Screenshots: test-output/screenshots/{memory_peak,timeline_diff,timeline_diff_op,cluster_pipeline,
cluster_timeline_aligned}.png."""
from __future__ import annotations

import csv

from helpers import (
    REPO, TIMELINE_X_RANGE_JS, bokeh_data, bokeh_texts, open_and_run_all, save_screenshot, scroll_to_model,
    wait_bokeh_filled, wait_painted, write_notebook)

DATA = (REPO.parent / "shared" / "data").resolve()
TEXT_2RANK = DATA / "npu" / "ascend_pt_text_2rank"


def test_memory_tab_shows_what_is_alive_at_the_peak(lab, page):
    """The Memory tab's peak panel names the peak the memory record holds (its PTA+GE allocated curve's
    maximum, read here) and draws the curve split by component."""
    rec = TEXT_2RANK / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv"
    with rec.open(newline="") as f:
        peak = max(float(r["Total Allocated(MB)"]) for r in csv.DictReader(f) if r["Component"] == "PTA+GE")
    write_notebook(lab.root / "memory_peak.ipynb", [
        "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
        "from nbprofiler.views.dashboard import Dashboard\n"
        f"dash = Dashboard(nbprofiler.load({str(TEXT_2RANK)!r}, device='0'))\ndash.select('Memory')\ndash.display()"])
    open_and_run_all(page, lab, "memory_peak.ipynb", 2)
    wait_bokeh_filled(page, "memory_categories_src", "t")
    text = bokeh_texts(page, "memory_peak")[0]
    assert f"{peak:,.2f} MB" in text and "not explained by operator allocations" in text, text
    scroll_to_model(page, "memory_categories")
    wait_painted(page)
    save_screenshot(page, "memory_peak")
    assert not page.page_errors, page.page_errors


def test_timeline_diff_outlines_the_changed_operators_and_a_row_click_zooms_to_one(lab, page):
    """Rank 1 against rank 0: the headline is the diff's, the outlined bars are its flagged operators,
    and a click on the first row of the operators' table moves the timeline to that operator."""
    write_notebook(lab.root / "timeline_diff.ipynb", [
        "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
        f"a = nbprofiler.load({str(TEXT_2RANK)!r}, device='0'); b = nbprofiler.load({str(TEXT_2RANK)!r}, device='1')\n"
        "view = nbprofiler.compare(a, b).timeline()\nview.display()",
        "print(view.diff.headline); print(int(view.diff.ops['flagged'].sum())); print(*view.timeline.clamp(*view.op_window(0)))"])
    out = open_and_run_all(page, lab, "timeline_diff.ipynb", 3)
    wait_bokeh_filled(page, "timeline_marks_src", "left")
    headline, flagged, window = out.nth(2).locator(".jp-OutputArea-output").inner_text().strip().splitlines()
    want = [float(x) for x in window.split()]
    assert "(device 1)'s step" in headline and "faster than" in headline, headline
    assert out.nth(1).get_by_text(headline).count() >= 1
    assert len(bokeh_data(page, "timeline_marks_src", "left")[0]) >= int(flagged) > 0
    wait_painted(page)
    save_screenshot(out.nth(1), "timeline_diff")
    out.nth(1).locator(".slick-row").first.locator(".slick-cell").nth(1).click()
    page.wait_for_function("() => Bokeh.documents.some(d => { const s = d.get_model_by_name('timeline_diff_ops_src');"
                           " return s && s.selected.indices.length === 1 && s.selected.indices[0] === 0; })")
    # the timeline moves to the row's operator in both runs (`TimelineDiffView.op_window`, inside the axis)
    page.wait_for_function(f"(w) => {{ const r = ({TIMELINE_X_RANGE_JS})(); return r.length && "
                           "Math.abs(r[0][0] - w[0]) < 1e-3 && Math.abs(r[0][1] - w[1]) < 1e-3; }", arg=want)
    wait_painted(page)
    save_screenshot(out.nth(1), "timeline_diff_op")
    assert not page.page_errors, page.page_errors


def test_cluster_page_pipeline_bubbles_of_each_stage(lab, page):
    """The legacy 4-rank pipeline job: a bar per stage whose median bubble ratio is the receive-alone time
    over the step of the pipeline-parallel csvs (computed here), under a finding naming the idlest stage."""
    import statistics
    path = DATA / "legacy" / "cluster_4rank_pipeline"
    ratios = {}
    for rank in range(4):
        with next(path.glob(f"ascend_cluster_analyse_pipeline-parallel_*_{rank}.csv")).open(newline="") as f:
            rows = list(csv.DictReader(f))
        # the step: computation + communication not overlapped (the file gives no idle time apart)
        ratios[rank] = [float(r["receive_alone_time"]) / (float(r["computation_time"])
                                                          + float(r["communication_alone_time"])) for r in rows]
    stage_ratio = [statistics.median(ratios[0] + ratios[1]), statistics.median(ratios[2] + ratios[3])]
    write_notebook(lab.root / "pipeline.ipynb", [
        "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
        f"nbprofiler.load({str(path)!r}).show()"])
    open_and_run_all(page, lab, "pipeline.ipynb", 2)
    wait_bokeh_filled(page, "cluster_pipeline_ratio_src", "label")
    labels = bokeh_data(page, "cluster_pipeline_ratio_src", "label")[0]
    shown = bokeh_data(page, "cluster_pipeline_ratio_src", "ratio")[0]
    assert labels == ["stage 0", "stage 1"]
    for got, want in zip(shown, stage_ratio):
        assert abs(got - want) < 0.02, (shown, stage_ratio)
    idlest = "Stage 0 (ranks 0, 1) idles most" if stage_ratio[0] > stage_ratio[1] else "Stage 1 (ranks 2, 3) idles most"
    assert idlest in bokeh_texts(page, "cluster_pipeline_finding")[0]
    scroll_to_model(page, "cluster_pipeline_ratio")
    wait_painted(page)
    save_screenshot(page, "cluster_pipeline")
    assert not page.page_errors, page.page_errors


def test_cluster_timeline_aligned_on_collectives_states_its_residual(lab, page):
    """Choosing the collectives alignment on the cluster page re-draws the ranks' timeline and says how
    many collectives it matched and the residual misalignment it could not remove."""
    write_notebook(lab.root / "cluster_align.ipynb", [
        "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler",
        f"cluster = nbprofiler.load({str(TEXT_2RANK)!r})\ncluster.show()"])
    out = open_and_run_all(page, lab, "cluster_align.ipynb", 2).nth(1)
    fold = out.get_by_text("Timeline of ranks 0, 1 on one clock").first
    fold.wait_for()
    fold.click()
    note = out.get_by_text("Ranks on the hosts' clocks; not checked.").first
    note.wait_for()
    out.locator("select").filter(has_text="aligned on the collectives they share").first.select_option(
        label="aligned on the collectives they share")
    aligned = out.get_by_text("Ranks aligned on 4 shared collectives").first
    aligned.wait_for()
    assert "residual misalignment median" in aligned.inner_text()
    wait_bokeh_filled(page, "timeline_src", "left")
    aligned.scroll_into_view_if_needed()
    wait_painted(page)
    save_screenshot(page, "cluster_timeline_aligned")
    assert not page.page_errors, page.page_errors
