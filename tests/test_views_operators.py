"""Operators view data preparation, figures and widget linking on real profiles."""
from __future__ import annotations


import pytest
from bokeh.embed import file_html
from bokeh.resources import INLINE

from nbprofiler.views import operators as O
from nbprofiler.views import theme
from .conftest import expected, load_quietly


@pytest.fixture(scope="module")
def lenet_cpu():
    return load_quietly("mindspore2/lenet_pynative")


@pytest.fixture(scope="module")
def widedeep():
    return load_quietly("legacy/run_1_widedeep")


def test_top_types_fold_rest_and_match_mindinsight(widedeep):
    exp = expected("legacy__run_1_widedeep__device1")["operators"]["aicore_type"]
    top = O.top_types(widedeep.op_types, "ai_core", 5)
    assert top["op_type"].tolist() == exp["pie_top5"] + ["Other"]
    assert len(exp["rows"]) == 24
    rows = {r[0]: r for r in exp["rows"]}
    for r in top.iloc[:5].itertuples():
        assert r.total_time_us == pytest.approx(rows[r.op_type][1])
        assert r.count == rows[r.op_type][2]
    other = top.iloc[5]
    assert other.total_time_us == pytest.approx(sum(r[1] for r in exp["rows"][5:]), rel=1e-9)
    assert other["count"] == sum(r[2] for r in exp["rows"][5:])
    assert top["percent"].sum() == pytest.approx(100.0)


def test_pie_angles_cover_the_circle_and_colours_are_stable(lenet_cpu, monkeypatch):
    # a fresh session's colour assignments (other tests in this process have taken palette slots)
    monkeypatch.setattr(theme, "_OP_TYPE_ASSIGNED", {})
    df = O.pie_angles(O.top_types(lenet_cpu.op_types, "cpu", 20))
    assert len(df) == 16  # 16 CPU op types in the LeNet run, none folded
    span = (df["start_angle"] - df["end_angle"]).sum()
    assert span == pytest.approx(2 * 3.141592653589793)
    assert df["color"].tolist() == [theme.op_type_color(t) for t in df["op_type"]]
    assert len(set(df["color"])) == 16  # distinct while the palette lasts
    # the largest types are clearly distinct (Category20's slots gave two pinks to the top two)
    top = df["color"].tolist()[:10]
    assert min(theme.color_distance(a, b) for i, a in enumerate(top) for b in top[i + 1:]) > 30
    conv = dict(zip(df["op_type"], df["color"]))
    assert theme.color_distance(conv["Conv2DBackpropFilter"], conv["Conv2D"]) > 40
    # a type keeps its colour in later views of the session, whatever else they show
    again = O.pie_angles(O.top_types(lenet_cpu.op_types, "cpu", 3))
    assert dict(zip(again["op_type"], again["color"]))["Conv2D"] == conv["Conv2D"]


def test_pie_legend_has_a_swatch_per_type(lenet_cpu):
    fig = O.op_type_chart(lenet_cpu.op_types, "cpu", 5)
    legend = fig.legend[0]
    assert legend.glyph_width >= 10 and legend.glyph_height >= 10
    # one entry per type (top 5 + Other), drawn from a source of its own (a click selects wedges, and
    # BokehJS drops the swatches of a renderer whose source has a selection)
    item = legend.items[0]
    assert item.label.field == "label"
    legend_src = item.renderers[0].data_source
    wedges = fig.select_one({"name": "op_pie_wedges_cpu"}).data_source
    assert legend_src is not wedges
    assert legend_src.data["label"] == list(wedges.data["label"]) and len(legend_src.data["label"]) == 6
    assert legend_src.data["color"] == list(wedges.data["color"])


def test_filter_is_case_insensitive_substring_over_name_and_type(lenet_cpu):
    ops = lenet_cpu.ops[lenet_cpu.ops["kind"] == "cpu"]
    by_name = O.filter_ops(ops, "conv2dbackprop")
    assert len(by_name) > 0
    assert by_name["op_type"].str.startswith("Conv2DBackprop").all()
    by_type = O.filter_ops(ops, op_type="MaxPool")
    assert set(by_type["op_type"]) == {"MaxPool"} and len(by_type) == 2
    top = O.top_types(lenet_cpu.op_types, "cpu", 3)["op_type"].tolist()
    rest = O.filter_ops(ops, op_type="Other", top=top)
    assert len(rest) == (~ops["op_type"].isin(top)).sum()


def test_panel_builds_standalone_html(lenet_cpu):
    lay = O.operators_layout(lenet_cpu.op_types, lenet_cpu.ops)
    assert [t.title for t in lay.tabs] == ["CPU"]
    table_src = next(iter(lay.select({"name": "op_table_src_cpu"})))
    assert len(table_src.data["op_name"]) == 29
    assert list(table_src.data["total_time_us"]) == sorted(table_src.data["total_time_us"], reverse=True)
    page = file_html(lay, INLINE, "operators")
    assert "op_types_src_cpu" in page and "cdn.bokeh.org" not in page


def test_one_tab_per_kind(_=None):
    prof = load_quietly("legacy/run_2_lenet")
    lay = O.operators_layout(prof.op_types, prof.ops)
    assert [t.title for t in lay.tabs] == ["AI Core", "AI CPU"]


def test_widget_type_filter_and_top_n(lenet_cpu):
    view = O.OperatorsView(lenet_cpu)
    src = view._model("op_table_src_cpu")
    view.set_type_filter("Conv2D")
    assert set(src.data["op_type"]) == {"Conv2D"} and len(src.data["op_type"]) == 2
    assert view._model("op_type_filter_cpu").value == "Conv2D"
    # A click in the browser arrives as a change of the type select (jupyter_bokeh sync).
    view._model("op_type_filter_cpu").value = "MatMul"
    assert view.type_filter == "MatMul" and set(src.data["op_type"]) == {"MatMul"}
    view.set_type_filter(None)
    assert len(src.data["op_type"]) == 29
    view.top_n = 3
    assert view._model("op_types_src_cpu").data["op_type"].tolist()[-1] == "Other"
    assert view._model("op_types_legend_src_cpu").data["label"][-1].startswith("Other ")
    assert len(view._model("op_types_src_cpu").data["op_type"]) == 4


def test_set_step_uses_kernel_steps_where_present():
    prof = load_quietly("npu/kernel_details_591")
    view = O.OperatorsView(prof)
    steps = prof.kernels["step"].dropna().unique()
    assert len(steps) >= 1
    s = int(steps[0])
    view.set_step(s)
    k = prof.kernels[prof.kernels["step"] == s]
    for core in ("AI_CORE", "AI_VECTOR_CORE"):  # each core's tab: that core's tasks of the step
        src = view._model(f"op_table_src_{O.core_kind(core)}")
        mine = k[k["accelerator_core"] == core]
        assert sum(src.data["count"]) == len(mine) > 0
        assert sum(src.data["total_time_us"]) == pytest.approx(mine["dur_us"].sum())


def test_npu_operators_have_a_tab_per_accelerator_core_and_communication_apart():
    """kernel_details_591 ran on five cores (520 AI Vector Core tasks, 25 MIX AIV, 13 AI Core, 7 AI CPU,
    7 DSA SQE) plus 19 HCCL tasks: one tab per core, busiest first, the collectives in their own tab."""
    prof = load_quietly("npu/kernel_details_591")
    view = O.OperatorsView(prof)
    titles = [t.title for t in view._model("operators_tabs").tabs]
    assert titles[0] == "NPU · AI Vector Core" and titles[-1] == "Communication"
    assert set(titles) == {"NPU · AI Vector Core", "NPU · AI Core", "NPU · DSA SQE", "NPU · AI CPU",
                           "NPU · MIX AIV", "Communication"}
    k = prof.kernels
    for core in ("AI_VECTOR_CORE", "AI_CORE", "AI_CPU", "MIX_AIV", "DSA_SQE"):
        kind = O.core_kind(core)
        table = view._model(f"op_table_src_{kind}").data
        assert sum(table["count"]) == (k["accelerator_core"] == core).sum()
        types = view._model(f"op_types_src_{kind}").data  # the chart: that core's types, shares of its time
        assert sum(types["percent"]) == pytest.approx(100.0)
    assert sum(view._model("op_table_src_communication").data["count"]) == 19
    view.select_kind("npu")  # the advisor's evidence names the kind: the busiest core's tab opens
    assert view.kind == "npu_ai_vector_core"
    # one core only (the database run): one NPU tab as before
    assert [t.title for t in O.OperatorsView(load_quietly("npu/msprof_db"))._model("operators_tabs").tabs] == ["NPU"]


def test_set_step_without_step_ids_says_so(lenet_cpu):
    view = O.OperatorsView(lenet_cpu)
    view.set_step(3)
    assert "no step ids" in view.step_note.value
    assert len(view._model("op_table_src_cpu").data["op_name"]) == 29


def test_table_shows_the_operator_end_a_percent_and_one_unit():
    """lenet_pynative's CPU operators: the distinguishing end of each name in its own column (the scope
    apart), the share of the kind's time, and totals and averages in the page's one unit, ms (its largest
    total 33,138.9 ms, its averages up to 110 ms)."""
    prof = load_quietly("mindspore2/lenet_pynative")
    lay = O.operators_layout(prof.op_types, prof.ops)
    src = next(iter(lay.select({"name": "op_table_src_cpu"}))).data
    table = next(iter(lay.select({"name": "op_table_cpu"})))
    titles = [c.title for c in table.columns]
    assert titles[:2] == ["Operator", "Type"] and "Total time (ms)" in titles and "%" in titles
    assert titles[-1] == "Scope"
    for name, op, scope in zip(src["op_name"], src["op"], src["scope"]):
        assert (f"{scope}/{op}" if scope else op) == name and "/" not in op
    cpu = prof.ops[prof.ops["kind"] == "cpu"]
    assert max(src["total_time"]) == pytest.approx(cpu["total_time_us"].max() / 1e3)
    assert "Average time (ms)" in titles
    assert max(src["avg_time"]) == pytest.approx(cpu["avg_time_us"].max() / 1e3)
    assert sum(src["percent"]) == pytest.approx(100.0)
    assert max(src["total_time_us"]) == pytest.approx(cpu["total_time_us"].max())  # the frame's us kept


def _time_units(layout) -> dict[str, set[str]]:
    """Every unit a time is shown in on an operators page: table headers, hover lines, axis labels."""
    import re
    from bokeh.models import Axis, DataTable, HoverTool
    found: dict[str, set[str]] = {"table": set(), "hover": set(), "axis": set()}
    unit = re.compile(r"\((us|ms|s)\)|\} (us|ms|s)$")
    for t in layout.select({"type": DataTable}):
        found["table"] |= {m.group(1) for c in t.columns if (m := unit.search(c.title))}
    for h in layout.select({"type": HoverTool}):
        found["hover"] |= {m.group(2) for _, v in h.tooltips if (m := unit.search(v))}
    for a in layout.select({"type": Axis}):
        found["axis"] |= {m.group(1) for m in [unit.search(a.axis_label or "")] if m}
    return found


@pytest.mark.parametrize("data", ["mindspore2/lenet_pynative", "legacy/run_1_widedeep", "npu/kernel_details_591"])
def test_one_time_unit_on_the_whole_operators_page(data):
    """Totals of 33 s and averages of 2 us on one page: every time the page shows (table columns of every
    tab, hover, bar axis) is in ms, the number behind it the frame's us / 1000."""
    prof = load_quietly(data)
    view = O.OperatorsView(prof)
    for kind in view.kinds:  # every tab shown and its bar chart too (each built when first shown)
        view.select_kind(kind)
        view._named[f"op_chart_mode_{kind}"].active = 1
    units = _time_units(view.layout)
    assert units == {"table": {"ms"}, "hover": {"ms"}, "axis": {"ms"}}, units
    for kind in view.kinds:
        types = view._model(f"op_types_src_{kind}").data
        assert list(types["total_time"]) == pytest.approx([t / 1e3 for t in types["total_time_us"]])
        bar = view._model(f"op_bar_{kind}")
        assert bar.renderers[0].glyph.right == "total_time"
    # the values a step or a filter puts into the table stay in that unit
    view.set_type_filter(view._model(f"op_table_src_{view.kind}").data["op_type"][0])
    shown = view._model(f"op_table_src_{view.kind}").data
    assert list(shown["avg_time"]) == pytest.approx([t / 1e3 for t in shown["avg_time_us"]])


def test_type_filter_is_shown_with_a_button_that_clears_it():
    prof = load_quietly("legacy/run_1_widedeep")
    view = O.OperatorsView(prof)
    view.set_type_filter("MatMul")
    clear = view._model("op_type_clear_ai_core")
    assert clear is not None and clear.label == "✕ all types"
    assert {r for r in view._model("op_table_src_ai_core").data["op_type"]} == {"MatMul"}
    # percent stays the share of the whole kind, not of the filtered rows
    shown = view._model("op_table_src_ai_core").data
    total = prof.ops.loc[prof.ops["kind"] == "ai_core", "total_time_us"].sum()
    assert list(shown["percent"]) == pytest.approx([t / total * 100 for t in shown["total_time_us"]])


def _chart_colours(layout, kind):
    return list(next(iter(layout.select({"name": f"op_types_legend_src_{kind}"}))).data["color"])


def test_the_types_on_one_chart_have_distinct_colours_whatever_came_before():
    """Colours left over by earlier views of the session (the issue: three pinks for a chart's three
    types, and repeats once 38 types had taken every colour): every chart's legend colours are unique,
    its first nine types nine hues, its "Other" grey."""
    names = ["legacy/run_1_widedeep", "legacy/run_2_lenet", "mindspore2/lenet_pynative", "npu/kernel_details_591"]
    profs = [load_quietly(n) for n in names]
    # a long session: every type of every run coloured before, in another order
    theme.op_type_colors(sorted({t for p in profs for t in p.op_types["op_type"].astype(str)}))
    for prof in profs:
        types, ops = O.split_by_core(prof.op_types, prof.ops)
        lay = O.operators_layout(types, ops)
        for kind in O.panel_kinds(types, ops):
            labels = next(iter(lay.select({"name": f"op_types_legend_src_{kind}"}))).data["label"]
            colours = [c for c, label in zip(_chart_colours(lay, kind), labels) if not label.startswith("Other ")]
            assert len(set(colours)) == len(colours), (prof.source, kind, colours)
            hues = [theme._FAMILY_OF[c] for c in colours[:len(theme.OP_TYPE_FAMILIES)]]
            assert len(set(hues)) == len(hues), (prof.source, kind, hues)
            assert theme.OTHER not in colours


def test_a_fresh_chart_takes_the_palette_in_its_order_and_types_keep_their_colours():
    saved = dict(theme._OP_TYPE_ASSIGNED)
    try:
        theme._OP_TYPE_ASSIGNED.clear()
        first = theme.op_type_colors(["MatMul", "Conv2D", "Add", "Other"])
        assert first == [*theme.OP_TYPE_PALETTE[:3], theme.OTHER]
        # the same types in another view keep their colours; a new one takes the next free colour
        assert theme.op_type_colors(["Conv2D", "Relu", "MatMul"]) == [first[1], theme.OP_TYPE_PALETTE[3], first[0]]
        assert theme.op_type_color("MatMul") == first[0]
        # a type whose colour repeats a hue already on the chart moves to a free hue, and keeps it
        theme._OP_TYPE_ASSIGNED["Cast"] = theme.OP_TYPE_FAMILIES["blue"][1]   # light blue, beside MatMul's blue
        colours = theme.op_type_colors(["MatMul", "Cast"])
        assert theme._FAMILY_OF[colours[1]] != "blue" and theme.op_type_color("Cast") == colours[1]
        # 27 types on one chart: 27 colours
        many = theme.op_type_colors([f"T{i}" for i in range(len(theme.OP_TYPE_PALETTE))])
        assert len(set(many)) == len(theme.OP_TYPE_PALETTE)
    finally:
        theme._OP_TYPE_ASSIGNED.clear()
        theme._OP_TYPE_ASSIGNED.update(saved)


def test_the_view_builds_each_tab_and_the_bar_chart_when_first_shown():
    """The first open builds the first tab's pie and table; another tab is built when clicked, the bar chart
    when the toggle asks for it, each as the report's layout draws it."""
    prof = load_quietly("npu/kernel_details_591")
    view = O.OperatorsView(prof)
    first, second = view.kinds[:2]
    names = {m.name for m in view.layout.references()}
    assert {f"op_pie_{first}", f"op_table_{first}"} <= names
    assert f"op_bar_{first}" not in names and f"op_table_{second}" not in names
    view.layout.active = 1   # a click on the second tab
    assert view.kind == second
    names = {m.name for m in view.layout.references()}
    assert {f"op_pie_{second}", f"op_table_{second}"} <= names
    report = {m.name: m for m in O.operators_layout(prof.op_types, prof.ops).references() if m.name}
    for src in (f"op_table_src_{second}", f"op_types_src_{second}"):
        assert list(view._named[src].data["op_type"]) == list(report[src].data["op_type"])
    toggle = view._named[f"op_chart_mode_{second}"]
    toggle.active = 1        # the bar chart, built now
    bar, pie = view._named[f"op_bar_{second}"], view._named[f"op_pie_{second}"]
    assert bar.visible and not pie.visible
    assert list(bar.y_range.factors) == list(report[f"op_bar_{second}"].y_range.factors)
    assert bar in view._named[f"op_panel_{second}"].children
    toggle.active = 0
    assert pie.visible and not bar.visible
