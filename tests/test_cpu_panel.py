"""The MindData CPU panel: machine and process apart, legends beside the plots, the averages MindInsight
shows (over its sample range) and a step range that changes them."""
from __future__ import annotations

import html

import pytest

from nbprofiler.analysis.minddata import cpu_summary
from nbprofiler.views.minddata import MindDataView, _frames_of, cpu_figure, minddata_layout

from .conftest import expected, load_quietly


@pytest.fixture(scope="module")
def lenet():
    return load_quietly("mindspore2/lenet_pynative")


def test_machine_and_process_on_their_own_axes_with_legends_outside(lenet):
    panel = cpu_figure(lenet.cpu_utilization, lenet.op_cpu_utilization, lenet.minddata_pipeline)
    machine = panel.select_one({"name": "cpu_fig"})
    process = panel.select_one({"name": "process_cpu_fig"})
    assert machine.yaxis[0].axis_label == "CPU, % of all cores"
    assert process.yaxis[0].axis_label == "CPU, % of one core"
    assert process.x_range is machine.x_range  # one time axis: zooming one zooms both
    assert [i.label["value"] for i in machine.legend[0].items] == ["user", "sys", "io wait", "idle"]
    assert [i.label["value"] for i in process.legend[0].items] == ["user", "sys"]
    assert machine.legend[0] in machine.right and process.legend[0] in process.right  # beside, not over
    assert max(lenet.cpu_utilization["process_user_pct"]) > 100  # why the process has its own axis


def test_averages_are_mindinsights_and_follow_a_step_range(lenet):
    mi = expected("mindspore2__lenet_pynative__device0")["cpu_utilization"]["device_info"]
    text = html.unescape(cpu_figure(lenet.cpu_utilization).select_one({"name": "cpu_averages"}).text)
    whole = cpu_summary(lenet.cpu_utilization)
    assert whole["device_user_pct_avg"] == mi["user_utilization"]["avg_value"] == 37
    assert whole["device_sys_pct_avg"] == mi["sys_utilization"]["avg_value"]
    assert whole["samples"] == mi["user_utilization"]["n"] == 1483
    assert f"machine user<br><b>{whole['device_user_pct_mean']:.2f} %" in text
    assert "steps 1–300, 1,483 samples" in text
    view = MindDataView(lenet)
    assert view.cpu_steps.value == (1, 300)
    view.cpu_steps.value = (100, 200)
    part = cpu_summary(lenet.cpu_utilization, 100, 200)
    text = html.unescape(view.section("cpu").select_one({"name": "cpu_averages"}).text)   # built folded
    assert f"steps 100–200, {part['samples']:,} samples" in text and part["samples"] < whole["samples"]
    assert f"process user<br><b>{part['process_user_pct_mean']:.2f} %" in text
    view.cpu_steps.value = (1, 50)                      # the section is built: the change reaches it at once
    text = html.unescape(view.section("cpu").select_one({"name": "cpu_averages"}).text)
    assert "steps 1–50" in text


def test_report_page_has_the_same_panel(lenet):
    layout = minddata_layout(_frames_of(lenet))
    assert layout.select_one({"name": "cpu_averages"}) is not None
    assert layout.select_one({"name": "process_cpu_fig"}) is not None
