"""Every notebook in notebooks/ runs top to bottom (nbclient), and the report template works with papermill
parameters and exports to HTML that needs no network for its figures."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def _run(nb_path: Path, cwd: Path):
    nb = nbformat.read(nb_path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
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
                               kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    nb = nbformat.read(out, as_version=4)
    assert "legacy profile, device 1" in _text(nb)
    html_text, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    # the figures are plain Bokeh output with BokehJS inline: no external script is needed for them
    srcs = re.findall(r"<script[^>]+src=\"([^\"]+)\"", html_text)
    assert all("require" in s or "mathjax" in s.lower() for s in srcs), srcs
    assert "Bokeh.embed.embed_items" in html_text or "embed_items_notebook" in html_text
    assert "lenet <b>report</b>" not in html_text  # the title parameter is escaped
