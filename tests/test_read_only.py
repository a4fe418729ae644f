"""Profiler directories are read-only to nbprofiler: loading, summarising, the dashboard, reports and the
parsed-frame cache must not change or add a single file under any dataset."""
from __future__ import annotations

import hashlib
import warnings

import pytest

import nbprofiler

from .conftest import DATA

DATASETS = ["legacy/run_1_widedeep", "legacy/run_2_lenet", "legacy/fixtures_mixed_ids",
            "legacy/cluster_4rank_pipeline", "mindspore2/lenet_pynative", "minddata/md_bottleneck_map",
            "npu/trace_view_torch_npu", "npu/kernel_details_591", "npu/cann_prof_2dev", "npu/cluster_8rank"]


def _tree_state(root):
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()} | \
           {str(p.relative_to(root)) + "/": None for p in root.rglob("*") if p.is_dir()}


@pytest.mark.parametrize("rel", DATASETS)
def test_nothing_changes_or_appears_in_the_profiler_directory(rel, tmp_path, monkeypatch):
    monkeypatch.setenv("NBPROFILER_CACHE_DIR", str(tmp_path / "cache"))
    root = DATA / rel
    before = _tree_state(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obj = nbprofiler.load(root)
        for prof in (obj if isinstance(obj, nbprofiler.Cluster) else [obj]):
            prof.load_all()
            prof.summary()
            prof._repr_html_()
            from nbprofiler.views.dashboard import Dashboard
            dash = Dashboard(prof)
            for tab in dash.tabs[1:]:   # every view's figures and widgets, built without a frontend
                dash.select(tab)
            prof.to_html(tmp_path / f"report_{prof.device}.html")
            # a second load hits the parsed-frame cache (created on the first)
            again = nbprofiler.load(root, device=prof.device)
            again.load_all()
    assert _tree_state(root) == before
