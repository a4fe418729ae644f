"""Every notebook in notebooks/ runs top to bottom (nbclient), and the report template works with papermill
parameters and exports to HTML that needs no network for its figures."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.kernels import ipc_kernel_manager

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def _run(nb_path: Path, cwd: Path):
    nb = nbformat.read(nb_path, as_version=4)
    NotebookClient(nb, km=ipc_kernel_manager(), timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def _text(nb) -> str:
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            out.append(o.get("text", ""))
            out.extend(str(v) for k, v in o.get("data", {}).items() if k.startswith("text/"))
    return "\n".join(out)


def test_all_notebooks_are_here():
    names = {p.name for p in NOTEBOOKS}
    assert {"quickstart.ipynb", "report_template.ipynb", "tuning_1_data_pipeline.ipynb",
            "tuning_2_operators.ipynb", "tuning_3_allreduce.ipynb"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(nb_path, tmp_path):
    # run from notebooks/ (the walk-throughs find ../shared/data from there); outputs are not saved
    nb = _run(nb_path, nb_path.parent)
    text = _text(nb)
    assert "Traceback" not in text
    if nb_path.stem == "tuning_1_data_pipeline":
        assert "md_bottleneck_map: bottleneck ops [1]" in text and "md_fast: bottleneck ops []" in text
    if nb_path.stem == "tuning_2_operators":
        assert "average step 205.3809 ms: forward+backward 118.0540 ms (57.48 %)" in text  # MindInsight's
    if nb_path.stem == "tuning_3_allreduce":
        assert "tail 87.1231 ms on average" in text


@pytest.mark.slow
def test_report_template_with_papermill_exports_offline_html(tmp_path):
    import papermill
    from nbconvert import HTMLExporter
    out = tmp_path / "report.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / "report_template.ipynb"), str(out),
                               parameters={"path": str(REPO.parent / "shared" / "data" / "legacy" / "run_2_lenet"),
                                           "title": "lenet <b>report</b>"},
                               kernel_name="python3", progress_bar=False, cwd=str(tmp_path),
                               km=ipc_kernel_manager())
    nb = nbformat.read(out, as_version=4)
    assert "legacy profile, device 1" in _text(nb)
    html_text, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    # the figures are plain Bokeh output with BokehJS inline: no external script is needed for them
    srcs = re.findall(r"<script[^>]+src=\"([^\"]+)\"", html_text)
    assert all("require" in s or "mathjax" in s.lower() for s in srcs), srcs
    assert "Bokeh.embed.embed_items" in html_text or "embed_items_notebook" in html_text
    assert "lenet <b>report</b>" not in html_text  # the title parameter is escaped


DASHBOARD_CELLS = [
    "import warnings; warnings.simplefilter('ignore')\nimport nbprofiler\nprof = nbprofiler.load({path!r})",
    # build every tab before the widget state is saved: an exported file is a snapshot, no kernel
    "from nbprofiler.views.dashboard import Dashboard, TABS\ndash = Dashboard(prof)\nfor t in TABS[1:]:\n"
    "    dash.select(t)\ndash.select('Step trace')\ndash",
]


def executed_dashboard_notebook(profile_path, out: Path) -> Path:
    """Run a two-cell notebook showing the dashboard of ``profile_path`` (widget state saved) into ``out``."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c.format(path=str(profile_path))) for c in DASHBOARD_CELLS]
    NotebookClient(nb, km=ipc_kernel_manager(), timeout=300, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(out.parent)}}).execute()
    nbformat.write(nb, out)
    return out


@pytest.mark.slow
def test_export_offline_inlines_every_script(tmp_path):
    """`nbprofiler export` (and the nbconvert exporter) write one file: require.js, jupyter_bokeh's bundle
    as a named AMD module and embed-amd.js inline, no script or stylesheet from a URL."""
    import subprocess
    import sys
    from nbprofiler.faces.cli import main
    from nbprofiler.faces.nbconvert_offline import EMBED_AMD_JS, REQUIRE_JS, asset_path
    nb_path = executed_dashboard_notebook(REPO.parent / "shared" / "data" / "legacy" / "run_2_lenet",
                                          tmp_path / "dash.ipynb")
    state = nbformat.read(nb_path, as_version=4).metadata["widgets"]["application/vnd.jupyter.widget-state+json"]
    models = {m["model_name"] for m in state["state"].values()}
    assert {"TabModel", "BokehModel", "HTMLModel"} <= models
    out = tmp_path / "dash.html"
    assert main(["export", str(nb_path), "-o", str(out)]) == 0
    text = out.read_text()
    assert re.findall(r"<script[^>]+src=", text) == []
    assert not re.search(r"<link[^>]+href=\"?https?:", text)
    assert asset_path(REQUIRE_JS).read_text()[:2000].replace("</script", "<\\/script") in text
    assert 'define("@bokeh/jupyter_bokeh",' in text
    assert 'id="nbprofiler-embed-amd-src"' in text and "URL.createObjectURL(new Blob(" in text
    assert asset_path(EMBED_AMD_JS).read_text()[-300:].replace("</script", "<\\/script") in text
    assert "application/vnd.jupyter.widget-state+json" in text
    # same output through nbconvert's own command line (exporter given by import path)
    run = subprocess.run([sys.executable, "-m", "nbconvert", "--to",
                          "nbprofiler.faces.nbconvert_offline.OfflineHTMLExporter", str(nb_path), "--output",
                          "dash2"], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    via = (tmp_path / "dash2.html").read_text()  # equal but for the random output-area ids of each export
    assert re.findall(r"<script[^>]+src=", via) == [] and 'define("@bokeh/jupyter_bokeh",' in via
    assert 'id="nbprofiler-embed-amd-src"' in via and abs(len(via) - len(text)) < 100


def test_export_refuses_a_tampered_asset(tmp_path, monkeypatch):
    """A cached JS file that is not the pinned release is refused, not inlined into reports."""
    from nbprofiler.faces.nbconvert_offline import JS_DIR_ENV, REQUIRE_JS, OfflineAssetError, asset_path
    monkeypatch.setenv(JS_DIR_ENV, str(tmp_path))
    (tmp_path / "require.js").write_text("alert('not require.js')")
    with pytest.raises(OfflineAssetError, match="SHA-256 differs"):
        asset_path(REQUIRE_JS)
    (tmp_path / "require.js").unlink()
    with pytest.raises(OfflineAssetError, match="missing"):
        asset_path(REQUIRE_JS, fetch=False)


def test_export_cli_reports_bad_notebooks(tmp_path, capsys):
    from nbprofiler.faces.cli import main
    bad = tmp_path / "truncated.ipynb"
    bad.write_text('{"cells": [')
    assert main(["export", str(bad), "-o", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert "truncated.ipynb" in err and "JSON" in err
    assert not (tmp_path / "x.html").exists()
