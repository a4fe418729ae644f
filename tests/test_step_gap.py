"""The step-gap figures (data transmission and GetNext per step) against MindInsight's numbers."""
from __future__ import annotations

import pytest

from nbprofiler.analysis.minddata import queue_summary
from nbprofiler.views.minddata import minddata_layout, _frames_of
from nbprofiler.views.step_gap import step_gap_figures

from .conftest import DATA, expected, load_quietly


def _gap(prof):
    return step_gap_figures(prof.host_queue, prof.device_queue, queue_summary(prof.host_queue, prof.device_queue))


@pytest.mark.parametrize("run, name", [("mindspore2/lenet_pynative", "mindspore2__lenet_pynative__device0"),
                                       ("minddata/md_bottleneck_map", "minddata__md_bottleneck_map__device0")])
def test_transfer_per_step_and_averages_are_mindinsights(run, name):
    prof = load_quietly(DATA / run)
    mi = expected(name)["queues"]["device_queue_time_ms"]
    fig = _gap(prof).select_one({"name": "step_gap_transfer_fig"})
    data = fig.select_one({"name": "step_gap_transfer_src"}).data
    for col, key in (("batch_ms", "total_cost"), ("get_ms", "get_cost"), ("push_ms", "push_cost")):
        info = mi["info"][key]
        assert len(data[col]) == info["len"]
        assert list(data[col][:8]) == pytest.approx(info["head"])
        assert sum(data[col]) == pytest.approx(info["sum"])
    avg = mi["summary"]["time_summary"]
    assert f"average total {avg['avg_cost']:,.3f} ms" in fig.title.text
    assert f"get {avg['get_cost']:,.3f} ms, push {avg['push_cost']:,.3f} ms" in fig.title.text
    assert _gap(prof).select_one({"name": "step_gap_get_next_fig"}) is None  # no device queue recorded


def test_get_next_per_step_is_mindinsights_on_a_sink_run():
    prof = load_quietly(DATA / "legacy/run_2_lenet")
    mi = expected("legacy__run_2_lenet__device1")["queues"]
    layout = minddata_layout(_frames_of(prof))
    fig = layout.select_one({"name": "step_gap_get_next_fig"})
    src = fig.select_one({"name": "step_gap_get_next_src"}).data
    assert list(src["get_next_ms"]) == pytest.approx(mi["get_next_time"]["info"]["get_next"])
    assert list(src["step"]) == [1, 2, 3]
    assert f"average {float(mi['get_next_time']['summary']['time_summary']['avg_cost']):,.3f} ms" in fig.title.text
    transfer = layout.select_one({"name": "step_gap_transfer_src"}).data
    assert list(transfer["push_ms"]) == mi["device_queue_time_ms"]["info"]["push_cost"] == [4.0]
