"""Issue 8.4: no string from the data (operator names and types, MindData op types, trace event names and
args, folder names) reaches HTML as markup, in any surface nbprofiler renders: the notebook reprs, the
dashboard and every view's HTML widgets and Bokeh Divs, the offline HTML report and an exported notebook.

The hostile data is a copy of real runs (md_bottleneck_map, mindspore2 lenet_pynative, legacy run_2_lenet)
under a folder whose name is itself a payload, with real names rewritten to carry payloads. Bokeh
``ColumnDataSource`` data is JSON drawn as text by BokehJS, so it is allowed to hold the payloads; what
must never happen is a payload inside HTML (a Div/HTML widget value, a ``{safe}`` tooltip, an
HTMLTemplateFormatter, the page source outside escaped JSON).
"""
from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import ipywidgets as W
import pytest
from bokeh.models import Div, HoverTool, HTMLTemplateFormatter, Model

import nbprofiler
from nbprofiler.faces.report import write_html_report

from tests.conftest import DATA, load_quietly

PAYLOADS = ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "\"><svg onload=alert(3)>"]
# what a payload looks like when it survived as markup
MARKERS = ["<script>alert", "<img src=x onerror", "<svg onload"]
FOLDER = "evil\"><svg onload=alert(4)><img src=x onerror=alert(5)>"
# real names in the three runs -> the same name with a payload appended
REWRITE = {"MatMul": "MatMul" + PAYLOADS[0], "Conv2D": "Conv2D" + PAYLOADS[1], "ReLU": "ReLU" + PAYLOADS[2],
           "MapOp": "MapOp" + PAYLOADS[0], "BatchOp": "BatchOp" + PAYLOADS[1], "Generator": "Generator" + PAYLOADS[2]}
SESSION = "vm_11535_20261121042531696_ascend_ms"
EVIL_SESSION = "vm<img src=x onerror=alert(6)>_ascend_ms"


def _poison(s: str) -> str:
    for old, new in REWRITE.items():
        s = s.replace(old, new)
    return s


def _walk_json(x):
    if isinstance(x, str):
        return _poison(x)
    if isinstance(x, list):
        return [_walk_json(v) for v in x]
    if isinstance(x, dict):
        return {k: _walk_json(v) for k, v in x.items()}
    return x


def _poison_file(path: Path) -> bool:
    """Rewrite names in a CSV/JSON copy, keeping it valid in its format. Returns True if it changed."""
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        new = _walk_json(data)
        path.write_text(json.dumps(new))
        return new != data
    if path.suffix == ".csv":
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh))
        new = [[_poison(c) for c in r] for r in rows]
        with open(path, "w", newline="") as fh:
            csv.writer(fh).writerows(new)
        return new != rows
    return False


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / FOLDER
    shutil.copytree(DATA / "minddata" / "md_bottleneck_map", root / "md_bottleneck_map")
    shutil.copytree(DATA / "mindspore2" / "lenet_pynative" / SESSION, root / "lenet_pynative" / EVIL_SESSION)
    shutil.copytree(DATA / "legacy" / "run_2_lenet", root / "run_2_lenet")
    changed = [p for p in root.rglob("*") if p.is_file() and _poison_file(p)]
    # the payloads really are in operator, trace and MindData files of every run
    assert {p.relative_to(root).parts[0] for p in changed} == {"md_bottleneck_map", "lenet_pynative", "run_2_lenet"}
    return root


@pytest.fixture(scope="module")
def hostile_cluster(tmp_path_factory):
    """legacy/cluster_4rank_pipeline (4 ranks, step traces on all) under a payload folder; its HCCL
    operator names (JSON inside CSV cells) carry a payload without quotes, so both layers stay valid."""
    root = tmp_path_factory.mktemp("hostile_cluster") / FOLDER / "cluster_4rank_pipeline"
    shutil.copytree(DATA / "legacy" / "cluster_4rank_pipeline", root)
    for p in root.glob("hccl_raw_*.csv"):
        text = p.read_text()
        assert "AllReduce" in text
        p.write_text(text.replace("AllReduce", "AllReduce" + PAYLOADS[1]))
    cluster = load_quietly(root)
    assert cluster.ranks == ["0", "1", "2", "3"]
    return cluster


@pytest.fixture(scope="module")
def profiles(hostile):
    profs = {"md": load_quietly(hostile / "md_bottleneck_map"), "pynative": load_quietly(hostile / "lenet_pynative"),
             "legacy": load_quietly(hostile / "run_2_lenet")}
    # the payloads reached the frames the views draw (else this test would prove nothing)
    assert any(PAYLOADS[0] in t for t in profs["md"].minddata_pipeline["op_type"])
    assert any(PAYLOADS[1] in t for t in profs["pynative"].op_types["op_type"])
    assert any(PAYLOADS[0] in n for n in profs["legacy"].ops["op_name"])
    assert any(PAYLOADS[2] in n for n in profs["legacy"].timeline["name"])
    assert FOLDER in str(profs["legacy"].root) and EVIL_SESSION in str(profs["pynative"].root)
    return profs


def _leaks(text: str) -> list[str]:
    return [m for m in MARKERS if m in text]


def _bokeh_html(model: Model) -> list[tuple[str, str]]:
    """(where, html) for every place in a Bokeh document that BokehJS renders as HTML."""
    out = []
    for m in model.references():
        if isinstance(m, Div) and not m.render_as_text:
            out.append((f"Div {m.name}", m.text))
        if isinstance(m, HoverTool) and m.tooltips:
            tips = m.tooltips if isinstance(m.tooltips, str) else " ".join(str(v) for _, v in m.tooltips)
            # {safe} makes BokehJS insert a column's value unescaped; a string tooltip is an HTML template
            assert "{safe}" not in tips, f"HoverTool {m.name} inserts data unescaped: {tips}"
            if isinstance(m.tooltips, str):
                out.append((f"HoverTool {m.name}", tips))
        assert not isinstance(m, HTMLTemplateFormatter), f"HTMLTemplateFormatter in {m}"
    return out


def _widget_html(widget, where="") -> list[tuple[str, str]]:
    """(where, html) for every HTML value in an ipywidgets tree, Bokeh documents inside it included."""
    out = []
    if isinstance(widget, (W.HTML, W.HTMLMath)):
        out.append((f"{where}/{type(widget).__name__}", widget.value))
    if getattr(widget, "description_allow_html", False):
        out.append((f"{where}/description", widget.description))
    model = getattr(widget, "_model", None)  # jupyter_bokeh.BokehModel
    if isinstance(model, Model):
        out += [(f"{where}/{w}", t) for w, t in _bokeh_html(model)]
    for i, child in enumerate(getattr(widget, "children", ()) or ()):
        out += _widget_html(child, f"{where}/{type(widget).__name__}[{i}]")
    return out


def _assert_clean(pieces: list[tuple[str, str]]):
    bad = [(where, _leaks(text), text[:300]) for where, text in pieces if _leaks(text)]
    assert not bad, bad


def test_reprs(profiles, hostile, hostile_cluster):
    for prof in profiles.values():
        _assert_clean([("repr", prof._repr_html_())])
    _assert_clean([("4-rank cluster repr", hostile_cluster._repr_html_())])
    cluster = load_quietly(hostile)
    assert isinstance(cluster, nbprofiler.Cluster) and len(cluster) >= 2
    html = cluster._repr_html_()
    assert "&lt;svg onload=alert(4)&gt;" in html  # the folder name is shown, as text
    _assert_clean([("cluster repr", html)])


@pytest.mark.parametrize("name", ["md", "pynative", "legacy"])
def test_dashboard_and_every_view(profiles, name):
    from nbprofiler.views.dashboard import TABS, Dashboard
    dash = Dashboard(profiles[name])
    for tab in TABS[1:]:
        dash.select(tab)
    built = {t: v for t, v in dash.views.items() if v is not None}
    expect = {"md": {"MindData"}, "pynative": {"Operators", "MindData", "Timeline"},
              "legacy": {"Step trace", "Operators", "MindData", "Timeline"}}[name]
    assert expect <= set(built), (name, dash.views)
    pieces = _widget_html(dash.widget, "dashboard")
    assert any("Overview" in w or "HTML" in w for w, _ in pieces)
    _assert_clean(pieces)
    # the step selection's notes, and the timeline search status with a payload as the query
    st, tl = built.get("Step trace"), built.get("Timeline")
    if st is not None:
        st.step = 1
        _assert_clean(_widget_html(dash.widget, "dashboard after step 1"))
    if tl is not None:
        tl.search_box.value = PAYLOADS[1]
        _assert_clean(_widget_html(tl.widget, "timeline after search"))


def test_compare_and_cluster_views(profiles, hostile_cluster):
    from nbprofiler.views.cluster import ClusterView
    from nbprofiler.views.compare import CompareView
    cmp = nbprofiler.compare(profiles["md"], load_quietly(DATA / "minddata" / "md_fast"))
    assert any(PAYLOADS[0] in s for s in cmp.verdict)  # "MapOp<script>…_1 no longer the bottleneck"
    _assert_clean([("comparison repr", cmp._repr_html_())] + _bokeh_html(CompareView(cmp).layout))
    cmp2 = nbprofiler.compare(profiles["legacy"], load_quietly(DATA / "legacy" / "run_1_widedeep"))
    _assert_clean(_bokeh_html(CompareView(cmp2).layout))
    view = ClusterView(hostile_cluster)
    _assert_clean(_widget_html(view.widget, "cluster") + _bokeh_html(view.layout))


def test_html_reports(profiles, hostile_cluster, tmp_path):
    cases = {"legacy": (profiles["legacy"], None), "pynative": (profiles["pynative"], None),
             "md_vs_fast": (profiles["md"], DATA / "minddata" / "md_fast"),
             "cluster": (hostile_cluster, None)}
    for name, (prof, other) in cases.items():
        text = write_html_report(prof, tmp_path / f"{name}.html", title=f"{name} {PAYLOADS[0]}",
                                 compare_with=other).read_text()
        assert not _leaks(text), (name, _leaks(text))
        # the names are there, as escaped text or JSON, so the reader still sees them
        assert "\\u003cscript\\u003ealert(1)" in text or "&lt;script&gt;alert(1)" in text, name


@pytest.mark.slow
def test_exported_notebook(profiles, tmp_path):
    import nbformat
    from nbclient import NotebookClient
    from nbprofiler.faces.nbconvert_offline import export_offline_html
    from tests.kernels import ipc_kernel_manager
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# report"),
                nbformat.v4.new_code_cell("import warnings; warnings.simplefilter('ignore')\nimport nbprofiler\n"
                                          f"prof = nbprofiler.load({str(profiles['legacy'].source)!r})\nprof"),
                nbformat.v4.new_code_cell("from nbprofiler.views.dashboard import Dashboard, TABS\n"
                                          "dash = Dashboard(prof)\nfor t in TABS[1:]:\n    dash.select(t)\ndash"),
                nbformat.v4.new_code_cell("prof.ops[['op_name', 'op_type']].head()")]
    NotebookClient(nb, km=ipc_kernel_manager(), timeout=300, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert not any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))
    nbformat.write(nb, tmp_path / "evil.ipynb")
    text = export_offline_html(tmp_path / "evil.ipynb", tmp_path / "evil.html").read_text()
    page, blocks = _split_data_blocks(text)
    # outside the data blocks (cell sources, text outputs, the DataFrame table, the repr): escaped
    assert not _leaks(page), [(m, page[page.find(m) - 200:page.find(m) + 50]) for m in _leaks(page)]
    # inside them the names are JSON data that cannot close its block ("</" is written "<\/"), and the
    # widget values html-manager renders as HTML (HTML widgets, Bokeh Divs) hold them escaped
    (state,) = [json.loads(b) for kind, b in blocks if kind == "application/vnd.jupyter.widget-state+json"]
    pieces = _widget_state_html(state["state"])
    assert sum("/Div " in w for w, _ in pieces) >= 4 and any("&lt;script&gt;alert(1)" in t for _, t in pieces)
    _assert_clean(pieces)


_DATA_BLOCK = re.compile(r'<script type="(application/vnd\.jupyter\.widget-(?:state|view)\+json|application/json|'
                         r'text/plain)"[^>]*>(.*?)</script>', re.S)


def _split_data_blocks(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The page without its non-executed data blocks, and the blocks as (type, content). A payload that
    closed its block early would end the match there and leave its rest in the page, where it is seen."""
    blocks = []
    page = _DATA_BLOCK.sub(lambda m: blocks.append((m.group(1), m.group(2))) or "", text)
    return page, blocks


def _widget_state_html(state: dict) -> list[tuple[str, str]]:
    """(where, html) of every saved widget value rendered as HTML: HTML widgets, Bokeh Divs in BokehModels."""
    out = []

    def divs(x, where):
        if isinstance(x, dict):
            attrs = x.get("attributes") or {}
            if x.get("type") == "object" and x.get("name") == "Div" and not attrs.get("render_as_text"):
                out.append((f"{where}/Div {attrs.get('name')}", str(attrs.get("text", ""))))
            for v in x.values():
                divs(v, where)
        elif isinstance(x, list):
            for v in x:
                divs(v, where)
    for mid, m in state.items():
        if m["model_name"] in ("HTMLModel", "HTMLMathModel"):
            out.append((f"{m['model_name']} {mid}", m["state"].get("value", "")))
        elif m["model_name"] == "BokehModel":  # its Bokeh document is a JSON string inside the state
            divs(json.loads(m["state"]["render_bundle"])["docs_json"], f"BokehModel {mid}")
    return out
