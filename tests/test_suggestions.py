"""One suggestion, one evidence, everywhere: the summary JSON, the dashboard's overview, the MindData view
and the report show the advisor's suggestions with the same numbers, drawn by one renderer; evidence buttons
open the place they cite."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from nbprofiler.analysis.advisor import Evidence, Suggestion, advise_profile
from nbprofiler.views import suggestions as S

from .conftest import DATA, load_quietly

_cache: dict = {}


def _prof(rel, device=None):
    if (rel, device) not in _cache:
        _cache[rel, device] = load_quietly(rel, device=device)
    return _cache[rel, device]


def _blocks(html_text: str) -> dict[str, str]:
    """Each rendered suggestion's HTML by its data-suggestion-id."""
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"data-suggestion-id='([^']*)'", html_text)]
    return {sid: html_text[a:(starts[i + 1][0] if i + 1 < len(starts) else len(html_text))]
            for i, (a, sid) in enumerate(starts)}


def _named(layout, prefix: str, kind):
    """Models of type ``kind`` named ``prefix...`` reachable from ``layout``, in document order (``select``
    also walks into the models a CustomJS refers to, so other pages' widgets are filtered out by name)."""
    return [m for m in layout.select({"type": kind}) if (m.name or "").startswith(prefix)]


def _div_text(layout, name: str) -> str:
    """The HTML of the suggestion Divs of the column ``name``, in page order."""
    from bokeh.models import Div
    return "".join(c.text for c in layout.select_one({"name": name}).children if isinstance(c, Div))


def _faces(rel, device=None) -> tuple[dict, dict]:
    """The suggestions of ``nbprofiler summary DIR --json`` by id, and each face's rendered HTML of them by id:
    the dashboard's overview, the MindData view (when the run has MindData) and the report."""
    from nbprofiler.faces.report import report_layout
    from nbprofiler.views.dashboard import Dashboard
    from nbprofiler.views.minddata import MindDataView
    prof = _prof(rel, device)
    cli = subprocess.run([sys.executable, "-m", "nbprofiler.faces.cli", "summary", str(DATA / rel), "--json",
                          *(["--device", device] if device else [])], capture_output=True, text=True, timeout=300)
    summary = json.loads(cli.stdout)["suggestions"]
    # the summary lists the diagnosis's findings: the advisor's, most time per step first, minus the folded
    from nbprofiler.analysis.diagnosis import diagnose
    assert [s.to_dict() for s in diagnose(prof).findings] == summary
    folded = {s.id for s, _ in diagnose(prof).folded}
    assert {s.id for s in advise_profile(prof)} == {s["id"] for s in summary} | folded
    overview = "".join(w.children[0].value for w in Dashboard(prof).suggestions.widget.children[1:])
    faces = {"overview": _blocks(overview),
             "report": _blocks(_div_text(report_layout(prof), "report_suggestions_list"))}
    if not prof.minddata_pipeline.empty:
        faces["minddata"] = _blocks(_div_text(MindDataView(prof).layout, "minddata_suggestions"))
    return {s["id"]: s for s in summary}, faces


@pytest.mark.parametrize("rel,device", [("minddata/md_bottleneck_map", None), ("legacy/run_1_widedeep", None),
                                        ("mindspore2/lenet_pynative", None), ("npu/cann_prof_2dev", "0")])
def test_same_suggestions_and_evidence_in_summary_overview_minddata_view_and_report(rel, device):
    by_id, faces = _faces(rel, device)
    assert by_id
    assert list(faces["overview"]) == list(faces["report"]) == list(by_id)
    if "minddata" in faces:
        assert list(faces["minddata"]) == [i for i, s in by_id.items() if s["area"] == "minddata"]
    for sid, s in by_id.items():
        want = S.suggestion_html(s)
        want = want[want.index("data-suggestion-id"):]
        for face, blocks in faces.items():
            if sid in blocks:
                assert blocks[sid].startswith(want), (face, sid)


def test_the_map_bottleneck_reads_the_same_everywhere():
    by_id, faces = _faces("minddata/md_bottleneck_map")
    assert list(by_id) == ["minddata.host_queue_empty", "minddata.pipeline", "minddata.bottleneck", "minddata.cpu_busy"]
    assert by_id["minddata.host_queue_empty"]["evidence"]["empty_pct"] == {
        "label": "Host queue empty", "value": 100.0, "unit": "%", "threshold": 30.0, "compare": ">",
        "detail": "62 of 62 steps", "source": {"frame": "host_queue", "column": "size", "steps": [1, 62]}}
    pipe = faces["overview"]["minddata.pipeline"]
    assert "Output queue usage of MapOp_1: 0.03 %" in pipe
    assert "Input queue usage of MapOp_1 (output of GeneratorOp_2): 98.35 %" in pipe
    assert "Input minus output queue usage of MapOp_1: 98.32 points (threshold &gt; 10 points)" in pipe
    assert "<b>Also found</b> by MindSpore 2.x dataset summary: Map(id=1)&#x27;s input queue usage=98.38%" in pipe


@pytest.mark.parametrize("rel,device", [("minddata/md_bottleneck_map", None), ("legacy/run_2_lenet", None),
                                        ("mindspore2/lenet_pynative", None), ("npu/cluster_8rank", "0")])
def test_rendered_suggestions_read_like_a_tool(rel, device):
    sugg = advise_profile(_prof(rel, device))
    html_text = S.suggestions_html(sugg)
    assert "FORMATS" not in html_text and "{" not in html_text and "': " not in html_text   # no dict dumps
    assert html_text.count("<details class='nbprofiler-why'") == len(sugg) == len({s.text for s in sugg})
    assert not re.search(r"\d\.\d{3,}%", html_text.replace("<", " <"))   # no 31.2500% style numbers
    for s in sugg:
        for e in s.evidence:
            assert S.evidence_text(e) in html_text.replace("&gt;", ">").replace("&lt;", "<").replace("&#x27;", "'")


def test_evidence_lines_have_human_labels_units_and_thresholds():
    e = Evidence("empty", "Queue empty", 31.25, "%", 10.0, ">", detail="5 of 16 samples", frame="minddata_queues",
                 column="size", op_id=2, op_type="MapOp")
    assert S.evidence_text(e) == "Queue empty: 31.25 % (5 of 16 samples; threshold > 10 %)"
    assert S.source_text(e) == "prof.minddata_queues[size], pipeline op MapOp_2"
    assert S.format_value(148.548, "ms") == "148.5 ms" and S.format_value(35_924_200.0, "us") == "35.92 s"
    assert S.format_value(True, "bool") == "yes" and S.format_value(62, "steps") == "62 steps"


def test_hostile_operator_names_are_escaped():
    bad = "<img src=x onerror=alert(1)>"
    s = Suggestion("operators.cpu.top_type", "operators.top_type", "medium", "operators", f"{bad} takes 50%",
                   (Evidence("percent", f"{bad}: share", 50.0, "%", 20.0, ">=", frame="op_types", op_type=bad,
                             kind="cpu"),))
    text = S.suggestion_html(s) + S.suggestions_html([s.to_dict()])
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert S.evidence_targets(s)[0] == S.Target("Operators", f"Operators: {bad}", kind="cpu", op_type=bad)
    widget = S.SuggestionsWidget([s], on_open=lambda t: None)
    assert widget.buttons[s.id][0].description == f"Show Operators: {bad}"   # a button label is text, not HTML


def test_the_suggestions_widgets_share_their_layouts():
    """Each widget model is one more message to the page and one more view there: the suggestions' boxes,
    texts and buttons share one Layout per kind (and the buttons one style)."""
    import ipywidgets as W
    s = advise_profile(_prof("legacy/run_2_lenet"))
    widget = S.SuggestionsWidget(s, on_open=lambda t: None)
    buttons = [b for bs in widget.buttons.values() for b in bs]
    assert len(S.unique(s)) >= 5 and len(buttons) >= 5

    def walk(w):
        yield w
        for child in getattr(w, "children", ()):
            yield from walk(child)
    shown = list(walk(widget.widget))
    assert len(shown) == 1 + 1 + 3 * len(S.unique(s)) + len(buttons)   # box, title, (box, text, row) each
    layouts = {id(w.layout): type(w).__name__ for w in shown}
    assert sorted(layouts.values()) == ["Button", "HBox", "HTML", "VBox"]
    assert len({id(b.style) for b in buttons}) == 1
    # the shared layouts are the ones drawn: buttons as wide as their label, the row of buttons indented
    assert (buttons[0].layout.width, buttons[0].layout.height) == ("auto", "24px")
    assert next(w for w in shown if isinstance(w, W.HBox)).layout.margin == "0 0 0 64px"


def test_repeated_suggestions_are_shown_once():
    s = advise_profile(_prof("minddata/md_bottleneck_map"))
    assert S.suggestions_html(s + s).count("nbprofiler-suggestion'") == len(s)


def test_evidence_buttons_open_the_place_they_cite():
    from nbprofiler.views.dashboard import Dashboard
    db = Dashboard(_prof("minddata/md_bottleneck_map"))
    targets = {sid: [t.label for t in S.evidence_targets(s)] for sid, s in
               ((s.id, s) for s in db.suggestions.suggestions)}
    assert targets["minddata.pipeline"] == ["MindData: MapOp_1", "MindData: GeneratorOp_2"]
    db.suggestions.buttons["minddata.pipeline"][1].click()
    view = db.views["MindData"]
    assert db.tab == "MindData" and db.widget.selected_index == 3
    assert view.queue == view.selected_queue == 2 and db.evidence["queue"] == 2
    db.suggestions.buttons["minddata.bottleneck"][0].click()          # Batch(id=0) is the root: its input queue
    assert view.queue == 1

    db = Dashboard(_prof("legacy/run_1_widedeep"))
    top = db.suggestions.buttons["operators.ai_core.top_type"][0]
    assert top.description == "Show Operators: MatMul"
    top.click()
    ops = db.views["Operators"]
    assert db.tab == "Operators" and ops.kind == "ai_core" and ops.type_filter == "MatMul"
    assert set(ops.visible_ops()["op_type"]) == {"MatMul"}


def test_step_evidence_opens_the_step_window_on_the_timeline():
    from nbprofiler.views.dashboard import Dashboard, step_window_us
    prof = _prof("legacy/run_1_widedeep")
    e = {s.id: s for s in advise_profile(prof)}["step_trace.dominant.fp_and_bp"].get("longest_stage_ms")
    assert e.steps[0] == e.steps[1] == int(prof.step_trace.loc[prof.step_trace["fp_and_bp_ms"].idxmax(), "step"])
    assert tuple(e.window_us) == step_window_us(prof, e.steps[0])
    db = Dashboard(prof)
    db.open_target(S.evidence_target(e))
    tl = db.views["Timeline"]
    assert db.tab == "Timeline" and (tl.x_range.start, tl.x_range.end) == pytest.approx(e.window_us)
    assert db.evidence["window_us"] == pytest.approx(e.window_us)


def test_a_stage_named_by_two_rules_is_one_suggestion():
    """cann_prof_2dev: the step interval is both over MindInsight's 0.5 ms and the dominant stage; one
    suggestion says it, the dominant-stage finding is folded into it."""
    sugg = {s.id: s for s in advise_profile(_prof("npu/cann_prof_2dev", "0"))}
    assert "step_trace.dominant.iteration_interval" not in sugg
    assert [a.id for a in sugg["step_trace.iteration_interval"].also] == ["step_trace.dominant.iteration_interval"]


def test_static_pages_carry_the_evidence_buttons():
    """The report and the MindData page (no kernel): each cited place is a Bokeh button whose CustomJS
    opens the report tab and sets the queue, the operator filter or the timeline window."""
    from bokeh.models import Button
    from nbprofiler.faces.report import report_layout
    from nbprofiler.views.minddata import minddata_layout, _FRAMES
    prof = _prof("minddata/md_bottleneck_map")
    layout = report_layout(prof)
    tabs = layout.select_one({"name": "report_tabs"})
    buttons = {b.label: b for b in _named(layout, "report_suggestions_list_", Button)}
    assert set(buttons) >= {"Show MindData", "Show MindData: MapOp_1", "Show MindData: GeneratorOp_2"}
    cb = buttons["Show MindData: GeneratorOp_2"].js_event_callbacks["button_click"][0]
    assert cb.args["tabs"] is tabs and tabs.tabs[cb.args["tab"]].title == "MindData" and cb.args["queue"] == 2
    assert cb.args["edges"] is layout.select_one({"name": "minddata_edges_src"})

    page = minddata_layout({k: getattr(prof, k) for k in _FRAMES})
    labels = [b.label for b in _named(page, "minddata_suggestions_", Button)]
    assert "Show MindData" not in labels and "Show MindData: GeneratorOp_2" in labels   # the page itself: no tab

    wd = report_layout(_prof("legacy/run_1_widedeep"))
    buttons = {b.label: b for b in _named(wd, "report_suggestions_list_", Button)}
    op = buttons["Show Operators: MatMul"].js_event_callbacks["button_click"][0].args
    assert op["type_filter"] is wd.select_one({"name": "op_type_filter_ai_core"}) and op["op_type"] == "MatMul"
    tl = next(b for label, b in buttons.items() if label.startswith("Show Timeline: step"))
    args = tl.js_event_callbacks["button_click"][0].args
    assert args["x_range"] is wd.select_one({"name": "timeline_x_range"}) and args["t1"] > args["t0"]


def test_cli_text_summary_lists_suggestions_with_their_evidence():
    out = subprocess.run([sys.executable, "-m", "nbprofiler.faces.cli", "summary", str(DATA / "minddata/md_bottleneck_map")],
                         capture_output=True, text=True, timeout=300).stdout
    assert "- [high] The host queue was empty at 62 of 62 steps" in out
    assert "\n    Host queue empty: 100 % (62 of 62 steps; threshold > 30 %)\n" in out
    assert out.count("- [") == 4


def test_step_evidence_without_a_timeline_opens_the_step_in_the_step_trace():
    """legacy/cluster_4rank_pipeline holds step traces only: the longest step interval is cited by its step,
    and its button selects that step in the step-trace view."""
    from nbprofiler.views.dashboard import Dashboard
    prof = _prof("legacy/cluster_4rank_pipeline", "0")
    s = {s.id: s for s in advise_profile(prof)}["step_trace.iteration_interval"]
    e = s.get("longest_interval_ms")
    st = prof.step_trace
    assert e.steps[0] == int(st.loc[st["iteration_interval_ms"].idxmax(), "step"]) and e.window_us is None
    target = S.evidence_target(e)
    assert target == S.Target("Step trace", f"Step trace: step {e.steps[0]}", step=e.steps[0])
    db = Dashboard(prof)
    db.open_target(target)
    assert db.tab == "Step trace" and db.views["Step trace"].step == e.steps[0]
