"""Many runs compared (`nbprofiler.compare(a, b, c)` / `compare_many`) on three real recordings: the
map-bound pipeline, the same pipeline fixed, and the LeNet run with its own MindData pipeline."""
from __future__ import annotations

import html
import warnings

import pytest

import nbprofiler
from nbprofiler.analysis.compare import compare
from nbprofiler.analysis.runs import compare_many
from nbprofiler.views.runs import RunSetView

from .conftest import DATA, load_quietly

RUNS = ["minddata/md_bottleneck_map", "minddata/md_fast", "mindspore2/lenet_pynative"]
LABELS = ["map-bound", "fast", "lenet"]


@pytest.fixture(scope="module")
def profiles():
    return [load_quietly(r) for r in RUNS]


@pytest.fixture(scope="module")
def runset(profiles):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nbprofiler.compare(*profiles, labels=LABELS)


def test_headline_numbers_are_each_runs_summary(runset, profiles):
    head = runset.headline.set_index("run")
    assert list(head.index) == LABELS and head["baseline"].tolist() == [True, False, False]
    for label, prof in zip(LABELS, profiles):
        s = prof.summary()
        q = s["minddata"]["host_queue"]
        assert head.at[label, "host_queue_empty_pct"] == pytest.approx(100 * q["empty_steps"] / q["steps"])
        assert head.at[label, "host_get_ms"] == pytest.approx(q["avg_get_ms"])
    # md_bottleneck_map: every one of 62 steps found the host queue empty; the map op is the bottleneck
    assert head.at["map-bound", "host_queue_empty_pct"] == 100.0
    assert head.at["map-bound", "bottleneck_ops"] == "MapOp_1"
    assert head.at["lenet", "top_op_type"] == "Conv2DBackpropFilter"
    # the MindData-only runs have no timeline; LeNet's spans the whole training
    assert head["timeline_span_ms"].isna().tolist() == [True, True, False]


def test_change_against_the_baseline(runset, profiles):
    head, change = runset.headline.set_index("run"), runset.change_pct.set_index("run")
    base = head.at["map-bound", "host_get_ms"]
    assert change.at["fast", "host_get_ms"] == pytest.approx(100 * (head.at["fast", "host_get_ms"] - base) / base)
    assert change.at["map-bound", "host_get_ms"] == 0.0
    # none has a step trace: every run is timed from its host queue's batch timestamps, as compare and
    # check time them (one step-time source), and "Steps" counts those steps, never 0
    for label, prof in zip(LABELS, profiles):
        t = _host_queue_gaps(prof)
        assert head.at[label, "step_ms"] == pytest.approx(t.mean())
        assert head.at[label, "steps"] == len(t)
    assert change.at["fast", "step_ms"] == pytest.approx(100 * (head.at["fast", "step_ms"] - head.at["map-bound", "step_ms"])
                                                         / head.at["map-bound", "step_ms"])


def _host_queue_gaps(prof):
    """The gaps between consecutive batch timestamps of the run's host queue (ms), from its frame."""
    import numpy as np
    return np.diff(prof.host_queue.sort_values("step")["timestamp_ms"].to_numpy(float))


def test_verdicts_are_the_pairwise_comparisons(runset, profiles):
    verdicts = dict(zip(runset.verdicts["run"], runset.verdicts["verdict"]))
    assert set(verdicts) == {"fast", "lenet"}
    assert verdicts["fast"] == compare(profiles[0], profiles[1]).text
    assert "MapOp_1 no longer the bottleneck" in verdicts["fast"]
    # LeNet's pipeline has no MapOp_1: nothing was resolved, the verdict says it cannot compare
    assert "no longer the bottleneck" not in verdicts["lenet"]
    assert "MapOp_1 was the bottleneck; b's pipeline has no such op (not comparable)" in verdicts["lenet"]


def test_baseline_by_label_and_bad_arguments(profiles):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rs = nbprofiler.compare_many(profiles, baseline="fast", labels=LABELS)
        assert rs.baseline == "fast" and set(rs.comparisons) == {"map-bound", "lenet"}
        dup = nbprofiler.compare_many(profiles[:2] + profiles[:1])
        assert len(set(dup.labels)) == 3
        with pytest.raises(ValueError, match="not one of the runs"):
            nbprofiler.compare_many(profiles, baseline="nope", labels=LABELS)
        with pytest.raises(ValueError, match="at least two"):
            nbprofiler.compare_many(profiles[:1])
        with pytest.raises(ValueError, match="2 labels for 3 runs"):
            nbprofiler.compare_many(profiles, labels=LABELS[:2])


def test_view_draws_the_headline_numbers(runset):
    layout = RunSetView(runset).layout
    table_src = layout.select_one({"name": "runs_headline_src"})
    assert table_src.data["run"] == ["map-bound (baseline)", "fast", "lenet"]
    assert table_src.data["host_queue_empty_pct"] == runset.headline["host_queue_empty_pct"].tolist()
    trend = layout.select_one({"name": "runs_trend_host_get_ms_src"})
    assert trend.data["value"] == pytest.approx(runset.headline["host_get_ms"].tolist())
    # charts only for numbers some run holds: the step time from the host queues, no stage without step traces
    assert layout.select_one({"name": "runs_trend_step_ms"}) is not None
    assert layout.select_one({"name": "runs_trend_computing_ms"}) is None
    assert "&lt;" not in layout.select_one({"name": "runs_verdicts"}).text  # nothing double-escaped


def test_run_labels_reach_html_escaped(profiles):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rs = nbprofiler.compare_many(profiles, labels=["<img src=x onerror=alert(1)>", "fast", "lenet"])
    text = RunSetView(rs).layout.select_one({"name": "runs_verdicts"}).text
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "<img" not in rs._repr_html_()


def test_report_with_several_runs_has_a_runs_tab(tmp_path, profiles):
    """`nbprofiler report A --compare B C`: a Runs tab first (headline table, trends, verdicts) and each
    run's verdict against A in the overview, the same numbers and verdicts as compare_many."""
    from nbprofiler.faces.cli import main
    from nbprofiler.faces.report import report_layout
    out = tmp_path / "runs.html"
    dirs = [str(DATA / p) for p in RUNS]
    assert main(["report", dirs[0], "--compare", *dirs[1:], "-o", str(out)]) == 0
    text = html.unescape(out.read_text())
    assert '"title":"Runs"' in text.replace(": ", ":") and "runs_headline_table" in text
    layout = report_layout(profiles[0], compare_with=profiles[1:])
    tabs = layout.select_one({"name": "report_tabs"})
    assert [t.title for t in tabs.tabs[:2]] == ["Overview", "Runs"] and tabs.active == 0
    runset = compare_many(profiles)
    drawn = layout.select_one({"name": "runs_headline_src"}).data
    for col in ("host_queue_empty_pct", "host_get_ms"):
        assert drawn[col] == pytest.approx(runset.headline[col].tolist())
    assert drawn["host_queue_empty_pct"][0] == 100.0  # the map-bound pipeline's queue was always empty
    overview = layout.select_one({"name": "report_overview"}).text
    assert f"3 runs, against the baseline {html.escape(runset.baseline)}" in overview
    for r in runset.verdicts.itertuples():
        assert f"<b>{html.escape(r.run)}</b>: {html.escape(r.verdict)}" in overview
    # one other run: the pairwise Compare tab, as before
    pair = report_layout(profiles[0], compare_with=[profiles[1]])
    assert pair.select_one({"name": "report_tabs"}).tabs[1].title == "Compare"
