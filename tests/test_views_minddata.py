"""MindData view: data preparation for the pipeline graph, queues and CPU, on the real shared data."""
from __future__ import annotations

import math

import pytest
from bokeh.embed import file_html
from bokeh.resources import INLINE

import nbprofiler
from nbprofiler.views import minddata as V

from .conftest import DATA, expected


@pytest.fixture(scope="module")
def bottleneck():
    return nbprofiler.load(DATA / "minddata" / "md_bottleneck_map")


@pytest.fixture(scope="module")
def lenet_legacy():
    return nbprofiler.load(DATA / "legacy" / "run_2_lenet")


@pytest.fixture(scope="module")
def pynative():
    return nbprofiler.load(DATA / "mindspore2" / "lenet_pynative")


def _source(model, name):
    src = model.select_one({"name": name})
    assert src is not None, f"no Bokeh model named {name}"
    return src


def test_layout_chain_flows_left_to_right(bottleneck):
    lay = V.pipeline_layout(bottleneck.minddata_pipeline).set_index("op_id")
    # GeneratorOp_2 -> MapOp_1 -> BatchOp_0 (root at the right), all on one row
    assert lay.loc[2, "x"] < lay.loc[1, "x"] < lay.loc[0, "x"]
    assert lay.loc[0, "depth"] == 0 and lay.loc[2, "depth"] == 2
    assert set(lay["y"]) == {0.0}


def test_layout_branching_pipeline_centres_parent():
    prof = nbprofiler.load(DATA / "legacy" / "minddata_variants", device=0)
    pipe = prof.minddata_pipeline
    lay = V.pipeline_layout(pipe).set_index("op_id")
    kids = [int(i) for i in pipe.loc[pipe["parent_id"] == 1, "op_id"]]
    assert len(kids) == 2, pipe
    # the two leaves of op 1 get their own rows and op 1 sits between them
    assert lay.loc[kids[0], "y"] != lay.loc[kids[1], "y"]
    assert lay.loc[1, "y"] == pytest.approx((lay.loc[kids[0], "y"] + lay.loc[kids[1], "y"]) / 2)
    assert lay.loc[kids[0], "x"] == lay.loc[kids[1], "x"] < lay.loc[1, "x"] < lay.loc[4, "x"] < lay.loc[0, "x"]


@pytest.mark.parametrize("dataset,name", [("minddata/md_bottleneck_map", "minddata__md_bottleneck_map__device0"),
                                          ("minddata/md_fast", "minddata__md_fast__device0"),
                                          ("mindspore2/lenet_pynative", "mindspore2__lenet_pynative__device0"),
                                          ("legacy/run_2_lenet", "legacy__run_2_lenet__device1")])
def test_queue_edges_match_mindinsight_queue_chart(dataset, name):
    prof = nbprofiler.load(DATA / dataset)
    queues = V.pipeline_queues(prof.minddata_pipeline).set_index("queue")
    chart = expected(name)["minddata_pipeline"]["queue_chart"]
    assert sorted(queues.index) == sorted(q["queue"] for q in chart)
    for q in chart:
        assert queues.loc[q["queue"], "usage_pct"] == pytest.approx(q["usage_pct"], abs=5e-5)
        assert queues.loc[q["queue"], "average_size"] == pytest.approx(q["avg_size"])
        assert queues.loc[q["queue"], "capacity"] == q["length"]


def test_graph_flags_the_map_op_queue(bottleneck):
    fig = V.pipeline_graph(bottleneck.minddata_pipeline, bottleneck_ids=[1])
    edges = _source(fig, "minddata_edges_src").data
    by_queue = dict(zip(edges["queue"], edges["flagged"]))
    assert by_queue == {"Queue_1": True, "Queue_2": False}
    nodes = _source(fig, "minddata_nodes_src").data
    assert sorted(nodes["label"]) == ["BatchOp_0", "GeneratorOp_2", "MapOp_1"]


def test_selected_queue_does_not_fade_labels_or_edges(bottleneck):
    from bokeh.models import GlyphRenderer
    fig = V.pipeline_graph(bottleneck.minddata_pipeline, bottleneck_ids=[1])
    edges = _source(fig, "minddata_edges_src")
    on_edges = [r for r in fig.select(GlyphRenderer) if r.data_source is edges]
    assert len(on_edges) == 2                            # the edges (polylines through the boxes), the boxes
    for r in on_edges:
        # no nonselection glyph: BokehJS draws the unselected items with (a copy of) the glyph itself
        assert r.nonselection_glyph is None, r.glyph
        for prop in ("line_alpha", "fill_alpha"):
            if hasattr(r.glyph, prop):
                assert getattr(r.glyph, prop) == 1.0, (r.glyph, prop)
    boxes = fig.select_one({"name": "minddata_queue_boxes"})     # the clicked queue: an orange outline
    assert boxes.selection_glyph.line_color == V.SELECTED_COLOR and boxes.selection_glyph.line_width == 4
    assert boxes.selection_glyph.fill_color == boxes.glyph.fill_color
    # the labels are an annotation (never faded by a selection), below the box (the y axis points down),
    # not over its yellow fill
    label = fig.select_one({"name": "minddata_queue_labels"})
    assert label.source is edges and label.y == "label_y" and label.text == "text"
    assert list(edges.data["label_y"]) == pytest.approx([y + V.QUEUE_H / 2 for y in edges.data["ym"]])


def test_layout_stretches_to_the_cell(bottleneck):
    from bokeh.models import Plot
    layout = V.minddata_layout({k: getattr(bottleneck, k) for k in V._FRAMES})
    plots = list(layout.select({"type": Plot}))
    wide = [p for p in plots if p.name not in ("minddata_usage_chart", "minddata_graph")]
    assert wide and all(p.sizing_mode == "stretch_width" and p.min_width <= 640 for p in wide)
    # the graph is drawn to scale (its labels must fit), in a plot area no wider than a notebook cell
    graph = layout.select_one({"name": "minddata_graph"})
    assert graph.frame_width <= V.GRAPH_MAX_FRAME_PX


def test_panel_starts_on_flagged_queue_with_its_series(bottleneck):
    panel = V.pipeline_panel(bottleneck.minddata_pipeline, bottleneck.minddata_queues, bottleneck_ids=[1])
    edges = _source(panel, "minddata_edges_src")
    assert [edges.data["op_id"][i] for i in edges.selected.indices] == [1]
    series = _source(panel, "minddata_queue_src").data
    q1 = bottleneck.minddata_queues[bottleneck.minddata_queues["op_id"] == 1]
    assert list(series["size"]) == list(q1["size"])
    # the mean of the plotted series is MindInsight's average size of Queue_1
    assert sum(series["size"]) / len(series["size"]) == pytest.approx(0.004132231404958678)
    # all queues ride along for the click handler (static HTML has no kernel)
    assert len(_source(panel, "minddata_queues_all_src").data["op_id"]) == len(bottleneck.minddata_queues)
    info = dict(zip(*_source(panel, "minddata_queue_info_src").data.values()))
    assert info["from op"] == "MapOp_1" and info["to op"] == "BatchOp_0" and info["capacity"] == "16"
    shown = _source(panel, "minddata_queue_info").text     # the same facts, as an HTML table
    assert "<td" in shown and "MapOp_1" in shown and "BatchOp_0" in shown and ">16<" in shown


def test_queue_info_escapes_op_names(bottleneck):
    pipe = bottleneck.minddata_pipeline.copy()
    pipe["op_type"] = pipe["op_type"].astype(object)
    pipe.loc[pipe["op_id"] == 1, "op_type"] = "<img src=x onerror=alert(1)>"
    panel = V.pipeline_panel(pipe, bottleneck.minddata_queues, bottleneck_ids=[1])
    shown = _source(panel, "minddata_queue_info").text
    assert "<img" not in shown and "&lt;img src=x onerror=alert(1)&gt;_1" in shown
    cb = _source(panel, "minddata_edges_src").selected.js_property_callbacks["change:indices"][0]
    assert "esc(" in cb.code and cb.args["table"] is _source(panel, "minddata_queue_info")


@pytest.mark.parametrize("dataset,name", [("minddata/md_bottleneck_map", "minddata__md_bottleneck_map__device0"),
                                          ("minddata/md_fast", "minddata__md_fast__device0"),
                                          ("mindspore2/lenet_pynative", "mindspore2__lenet_pynative__device0"),
                                          ("legacy/run_2_lenet", "legacy__run_2_lenet__device1")])
def test_host_queue_states_match_mindinsight_counts(dataset, name):
    prof = nbprofiler.load(DATA / dataset)
    states = V.host_queue_states(prof.host_queue)
    summary = expected(name)["queues"]["device_queue"]["summary"]["queue_summary"]   # MindInsight: host side
    assert int((states["state"] == "empty").sum()) == summary["empty_queue"]
    assert int((states["state"] == "full").sum()) == summary["full_queue"]
    fig = V.queue_figure(prof.host_queue, prof.device_queue)
    src = _source(fig, "host_queue_src").data
    assert list(src["size"]) == list(prof.host_queue["size"])
    assert src["color"][list(src["state"]).index("empty")] == V.EMPTY_COLOR if summary["empty_queue"] else True


def test_device_queue_series(lenet_legacy):
    fig = V.queue_figure(lenet_legacy.host_queue, lenet_legacy.device_queue)
    dev = _source(fig, "device_queue_src").data
    assert list(dev["size"]) == expected("legacy__run_2_lenet__device1")["queues"]["get_next_queue"]["info"]["queue"]
    assert list(dev["step"]) == [1, 2, 3]
    assert "empty 0/3" in fig.select_one({"name": "device_queue_fig"}).title.text


def test_cpu_samples_drop_the_interleaved_zero_samples(pynative):
    cpu = pynative.cpu_utilization
    kept = V.cpu_samples(cpu)
    shares = cpu[["user_pct", "sys_pct", "io_pct", "idle_pct"]].fillna(0).sum(axis=1)
    assert len(kept) == int((shares > 0).sum())
    assert 0 < len(kept) < len(cpu)          # MindSpore 2.10 writes all-zero samples in between
    assert (kept[["user_pct", "sys_pct", "io_pct", "idle_pct"]].sum(axis=1) > 0).all()
    assert kept["t_s"].iloc[0] >= 0 and kept["t_s"].is_monotonic_increasing
    fig = V.cpu_figure(cpu, pynative.op_cpu_utilization, pynative.minddata_pipeline)
    assert len(_source(fig, "cpu_src").data["t_s"]) == len(kept)
    op0 = _source(fig, "op_cpu_src_0").data
    ops = pynative.op_cpu_utilization
    want = ops.loc[ops["op_id"] == 0, ["user_pct", "sys_pct"]].fillna(0).sum(axis=1)
    assert list(op0["cpu_pct"]) == pytest.approx(list(want))


def test_verdict_escapes_user_strings():
    from nbprofiler.analysis.advisor import Evidence, Suggestion
    hostile = Suggestion("minddata.<b>", "minddata.pipeline", "high", "minddata",
                         "Op <script>alert(1)</script> is slow",
                         (Evidence("usage", "Output queue of <i>x</i>", 0.5, "%", frame="minddata_pipeline",
                                   op_id=3, op_type="<svg onload=alert(1)>"),))
    text = V.verdict_html(["<img src=x onerror=alert(1)>_3"], [hostile],
                          {"host_queue": {"steps": 62, "empty_steps": 62, "full_steps": 0}})
    assert "<script>" not in text and "<img" not in text and "<i>x</i>" not in text and "<svg" not in text
    assert "&lt;script&gt;" in text and "&lt;img src=x onerror=alert(1)&gt;_3" in text
    assert "host queue empty at 62/62 steps" in text and "0.5 %" in text


def test_view_on_bottleneck_run_is_standalone_html(bottleneck, tmp_path):
    view = V.MindDataView(bottleneck)
    assert view.selected_queue == view.queue == 1         # MapOp_1's output queue is the flagged one
    verdict = view.layout.select_one({"name": "minddata_verdict"}).text
    assert "MapOp_1" in verdict and "62/62" in verdict
    from bokeh.models import Div
    page = "".join(d.text for d in view.layout.select({"type": Div}))
    assert "FORMATS" not in page and "{'" not in page and "rule=" not in page   # no document names, no dict dumps
    view.select_queue(2)
    assert view.selected_queue == view.queue == 2
    assert view.select_op(0) == 1 and view.selected_queue == 1   # the root's queue is its input queue
    with pytest.raises(ValueError):
        view.select_queue(0)                              # the root has no output queue edge
    html_text = file_html(view.layout, INLINE, "minddata")
    assert "minddata_queue_src" in html_text and "cdn.bokeh.org" not in html_text
    assert not math.isnan(len(html_text))


# -- the graph fits its nodes and labels ----------------------------------------------------------------
_CHAIN = ["DeviceQueueOp", "EpochCtrlOp", "RepeatOp", "BatchOp", "ShuffleOp", "MapOp", "MapOp", "MapOp",
          "ConcatOp", "MapOp", "ShuffleOp", "MapOp", "BatchOp", "MapOp", "ProjectOp", "RenameOp", "MapOp",
          "TakeOp", "SkipOp", "ImageFolderOp"]


def _pipeline_of(tmp_path, n_ops: int, branch: bool = False):
    """A copy of a real pipeline_profiling_0.json (md_bottleneck_map's) grown to an ``n_ops`` chain, root
    op 0, each op's output queue sampled as in the real file; ``branch``: the last op gets a sibling."""
    import json
    src = json.loads((DATA / "minddata" / "md_bottleneck_map" / "pipeline_profiling_0.json").read_text())
    real = src["op_info"]
    ops = []
    for i in range(n_ops):
        like = real[min(i, len(real) - 1)]
        op = {"op_id": i, "op_type": _CHAIN[i] if i < n_ops - 1 else "GeneratorOp",
              "num_workers": like["num_workers"], "metrics": json.loads(json.dumps(like["metrics"]))}
        if i < n_ops - 1:
            op["children"] = [i + 1]
        ops.append(op)
    if branch:
        ops[-2]["children"].append(n_ops)
        ops.append({"op_id": n_ops, "op_type": "MindRecordOp", "num_workers": 4,
                    "metrics": json.loads(json.dumps(real[-1]["metrics"]))})
    run = tmp_path / f"md_{n_ops}{'_branch' if branch else ''}"
    run.mkdir()
    (run / "pipeline_profiling_0.json").write_text(json.dumps({**src, "op_info": ops}))
    prof = nbprofiler.load(run)
    assert len(prof.minddata_pipeline) == len(ops)
    return prof.minddata_pipeline


def _inside(fig, x0, x1, y0, y1, what, margin_px=2.0):
    """The box [x0, x1] x [y0, y1] (data units) lies inside the figure's ranges, ``margin_px`` clear of
    their edges (the y axis points down: y_range.start > y_range.end)."""
    xr, yr = fig.x_range, fig.y_range
    ux = fig.frame_width / (xr.end - xr.start)           # pixels per data unit
    uy = fig.frame_height / (yr.start - yr.end)
    m_x, m_y = margin_px / ux, margin_px / uy
    assert xr.start + m_x <= x0 and x1 <= xr.end - m_x, (what, x0, x1, xr.start, xr.end)
    assert yr.end + m_y <= y0 and y1 <= yr.start - m_y, (what, y0, y1, yr.end, yr.start)


def _text_px(text, font_px):
    # a wide sans-serif estimate, independent of the view's: 0.62 em per character of the longest line
    return max(len(line) for line in text.split("\n")) * 0.62 * font_px


@pytest.mark.parametrize("n_ops,branch", [(7, False), (7, True), (12, False), (20, False), (3, False)])
def test_graph_fits_every_node_and_label(tmp_path, n_ops, branch):
    from bokeh.models import GlyphRenderer, Rect
    pipe = _pipeline_of(tmp_path, n_ops, branch)
    fig = V.pipeline_graph(pipe, bottleneck_ids=[1])
    xr, yr = fig.x_range, fig.y_range
    assert fig.frame_width <= V.GRAPH_MAX_FRAME_PX and fig.frame_height > 0
    assert fig.frame_align is False    # in a page, not shifted to line up with the charts below (cut its right)
    ux = fig.frame_width / (xr.end - xr.start)
    uy = fig.frame_height / (yr.start - yr.end)
    assert ux == pytest.approx(uy)                          # drawn to scale: boxes keep their shape
    nodes = _source(fig, "minddata_nodes_src").data
    edges = _source(fig, "minddata_edges_src").data
    assert len(nodes["op_id"]) == len(pipe) and len(edges["op_id"]) == len(pipe) - 1
    renderers = list(fig.select(GlyphRenderer))
    node_box = next(r.glyph for r in renderers if isinstance(r.glyph, Rect) and r.data_source.name == "minddata_nodes_src")
    queue_box = next(r.glyph for r in renderers if isinstance(r.glyph, Rect) and r.data_source.name == "minddata_edges_src")
    node_text = fig.select_one({"name": "minddata_node_labels"})
    queue_text = fig.select_one({"name": "minddata_queue_labels"})
    assert node_text.source.name == "minddata_nodes_src" and queue_text.source.name == "minddata_edges_src"
    node_font, queue_font = (float(t.text_font_size.rstrip("px")) for t in (node_text, queue_text))
    for x, y, label in zip(nodes["x"], nodes["y"], nodes["label"]):
        _inside(fig, x - node_box.width / 2, x + node_box.width / 2, y - node_box.height / 2, y + node_box.height / 2,
                f"box of {label}")
        half = _text_px(label, node_font) / ux / 2
        assert half * 2 <= node_box.width, f"{label} is wider than its box"
        _inside(fig, x - half, x + half, y - node_font / uy / 2, y + node_font / uy / 2, f"label {label}")
    for xm, ym, label_y, text in zip(edges["xm"], edges["ym"], edges["label_y"], edges["text"]):
        _inside(fig, xm - queue_box.width / 2, xm + queue_box.width / 2, ym - queue_box.height / 2,
                ym + queue_box.height / 2, f"box of {text}")
        half = _text_px(text, queue_font) / ux / 2
        lines = len(text.split("\n"))
        top = label_y + abs(queue_text.y_offset) / uy    # a few pixels below the box
        _inside(fig, xm - half, xm + half, top, top + lines * 1.3 * queue_font / uy, f"label {text!r}")
    # no two op boxes overlap (a wrapped pipeline's bands too)
    boxes = sorted(zip(nodes["y"], nodes["x"]))
    for i, (y1, x1) in enumerate(boxes):
        for y2, x2 in boxes[i + 1:]:
            assert abs(x1 - x2) >= node_box.width or abs(y1 - y2) >= node_box.height, (x1, y1, x2, y2)


def test_long_pipeline_wraps_into_bands(tmp_path):
    pipe = _pipeline_of(tmp_path, 20)
    flat = V.pipeline_layout(pipe).set_index("op_id")
    assert set(flat["y"]) == {0.0} and flat["x"].max() == 19 * V.COL_SPACING   # one row unwrapped
    nodes = _source(V.pipeline_graph(pipe), "minddata_nodes_src").data
    by_id = dict(zip(nodes["op_id"], zip(nodes["x"], nodes["y"])))
    assert len(set(nodes["y"])) > 1                     # wrapped into several bands
    # sources on the first band's left, data flowing left to right within a band, the root in the last band
    assert by_id[19] == (0.0, 0.0) and by_id[0][1] == max(nodes["y"])
    for op in range(19):
        (xc, yc), (xp, yp) = by_id[op + 1], by_id[op]
        assert (yp == yc and xp == xc + V.COL_SPACING) or (yp > yc and xp == 0.0)


def test_view_opens_with_the_pipeline_and_folds_the_rest(bottleneck):
    """The tab opens on the verdict and the pipeline panel; the queue usage, queues per step and CPU sections
    are folded and built when opened."""
    view = V.MindDataView(bottleneck)
    assert view.layout.select_one({"name": "minddata_graph"}) is not None
    assert view.layout.select_one({"name": "host_queue_fig"}) is None and not view._sections
    titles = [f.get_title(0) for f in view.folds]
    assert titles[0].startswith("Queue usage") and "host queue empty at 62/62 steps" in titles[0]
    view.folds[0].selected_index = 0                    # opening the fold builds its section
    queues = view.section("queues")
    assert queues.select_one({"name": "minddata_usage_chart"}) is not None
    assert queues.select_one({"name": "host_queue_src"}) is not None
    assert len(view.folds[0].children[0].children) == 1  # one BokehModel, shown once
    view.folds[0].selected_index = None
    view.folds[0].selected_index = 0
    assert len(view.folds[0].children[0].children) == 1
    with pytest.raises(ValueError):
        view.section("nope")


def test_folds_follow_the_frames(bottleneck):
    """A fold only for what the frames hold: the usage bars need queues between ops, the per-step figures a
    host or device queue, the CPU panel CPU samples."""
    pipe = bottleneck.minddata_pipeline
    titles = lambda frames: [f.get_title(0) for f in V.MindDataView(frames).folds]  # noqa: E731
    assert titles({"minddata_pipeline": pipe.iloc[:1]}) == []                 # a root alone: no queue
    assert titles({"minddata_pipeline": pipe}) == ["Queue usage"]
    only_host = titles({"host_queue": bottleneck.host_queue})
    assert only_host == ["Queues and data transmission per step (host queue empty at 62/62 steps)"]
    assert titles({"cpu_utilization": bottleneck.cpu_utilization}) == ["CPU utilisation"]


@pytest.mark.parametrize("run", ["bottleneck", "lenet_legacy"])
def test_view_themes_every_ui_element_it_shows(run, request):
    """The view finds its UI elements without searching every model (`theme.ui_elements`): each element a
    search finds, in the top and in each folded section, has the theme's sheet, once."""
    from bokeh.models import InlineStyleSheet, UIElement
    from nbprofiler.views import theme
    view = V.MindDataView(request.getfixturevalue(run))
    for layout in (view.layout, view.section("queues"), view.section("cpu")):
        found = list(layout.select({"type": UIElement}))
        assert {id(m) for m in theme.ui_elements(layout)} == {id(m) for m in found}
        for m in found:
            sheets = [s for s in m.stylesheets if isinstance(s, InlineStyleSheet) and s.css == theme.BOKEH_CSS]
            assert len(sheets) == 1, (layout.name, m)


def test_ui_elements_searches_what_it_does_not_know():
    """Tabs, tables and a hover tool's tooltip model (here holding a button) are searched as `select` does;
    rows, columns, plots, Divs and buttons are followed through the properties that hold UI elements."""
    from bokeh.layouts import column, row
    from bokeh.models import Button, ColumnDataSource, DataTable, Div, HoverTool, TabPanel, Tabs, UIElement
    from bokeh.models.dom import Div as DOMDiv
    from bokeh.plotting import figure
    from nbprofiler.views import theme
    fig = figure()
    fig.add_tools(HoverTool(tooltips=DOMDiv(children=[Button(label="in the tooltip")])))
    table = DataTable(source=ColumnDataSource({"a": [1]}))
    tabs = Tabs(tabs=[TabPanel(child=column(figure(), table), title="t")])
    layout = column(row(fig, Div(text="x")), Button(label="b"), tabs)
    found = {id(m) for m in layout.select({"type": UIElement})}
    assert {id(m) for m in theme.ui_elements(layout)} == found and len(found) >= 12
