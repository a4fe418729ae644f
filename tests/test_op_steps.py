"""Operators per step and by input shape, against brute-force recomputation on real profiles."""
from __future__ import annotations

import pandas as pd
import pytest

import nbprofiler
from nbprofiler.analysis import op_steps as S
from nbprofiler.views.op_steps import OpStepsView, has_op_steps

from .conftest import DATA


def frames(prof) -> dict:
    return {"step_windows": prof.step_windows, "kernels": prof.kernels, "timeline": prof.timeline,
            "tracks": prof.timeline_tracks}


@pytest.fixture(scope="module")
def widedeep():
    return nbprofiler.load(DATA / "legacy/run_1_widedeep")


@pytest.fixture(scope="module")
def kernels591():
    return nbprofiler.load(DATA / "npu/kernel_details_591")


def test_timeline_ops_placed_in_step_windows_equal_a_brute_force_count(widedeep):
    by_step = S.op_time_by_step(**frames(widedeep))
    assert "aligned on the first AI Core op" in by_step.attrs["source"]
    # the trace's device ops cover the first 14 of 322 steps whole and stop early in step 15
    assert sorted(by_step["step"].unique()) == list(range(1, 15))
    tracks = widedeep.timeline_tracks
    device = tracks.loc[tracks["process"].str.startswith("Ascend Device"), "track"]
    tl = widedeep.timeline
    for step in (1, 3, 14):
        w = widedeep.step_windows.set_index("step").loc[step]
        ev = tl[tl["track"].isin(device) & (tl["start_us"] >= w.start_us) & (tl["start_us"] < w.end_us)]
        want = ev.groupby("op_type", observed=True)["dur_us"].agg(["sum", "size"])
        got = by_step[by_step["step"] == step].set_index("op_type")
        assert set(got.index) == set(want.index.astype(str))
        for op_type, row in want.iterrows():
            assert got.loc[op_type, "total_time_us"] == pytest.approx(row["sum"])
            assert got.loc[op_type, "count"] == row["size"]
    step3 = by_step[by_step["step"] == 3]
    assert step3["op_type"].iloc[0] == "UnsortedSegmentSum"
    assert step3["total_time_us"].iloc[0] == pytest.approx(44594.89)
    assert by_step.dtypes["count"] == "Int64" and by_step.dtypes["step"] == "int64"


def test_step_operators_are_one_steps_longest_executions(widedeep):
    ops = S.step_operators(**frames(widedeep), step=3)
    assert set(ops["step"]) == {3}
    assert ops["dur_us"].is_monotonic_decreasing
    assert ops["name"].iloc[0] == "GatherV2-op55" and ops["dur_us"].iloc[0] == pytest.approx(42223.33)
    by_step = S.op_time_by_step(**frames(widedeep))
    assert ops["dur_us"].sum() == pytest.approx(by_step[by_step["step"] == 3]["total_time_us"].sum())
    capped = S.step_operators(**frames(widedeep), per_step=5)
    assert capped.groupby("step").size().max() == 5 and capped["step"].nunique() == 14


def test_cann_step_trace_places_every_step_including_the_first_and_last():
    prof = nbprofiler.load(DATA / "npu/cann_prof_2dev")
    prof = prof[prof.ranks[0]]
    by_step = S.op_time_by_step(**frames(prof))
    assert by_step.attrs["source"].startswith("timeline device operators placed in their step")
    assert sorted(by_step["step"].unique()) == list(range(1, 11)) == sorted(prof.step_windows["step"])
    tracks = prof.timeline_tracks
    ops = tracks[(tracks["process"] == "Ascend Hardware") & ~tracks["thread"].str.startswith("Step Trace")]
    tl = prof.timeline[prof.timeline["track"].isin(ops["track"])]
    assert by_step["total_time_us"].sum() == pytest.approx(tl["dur_us"].sum())  # every op is in a step


def test_kernel_step_ids_win_over_the_timeline_and_shapes_come_along(kernels591):
    by_step = S.op_time_by_step(**frames(kernels591))
    assert by_step.attrs["source"].startswith("step ids written with each kernel")
    k = kernels591.kernels
    assert by_step["total_time_us"].sum() == pytest.approx(k["dur_us"].sum())
    assert int(by_step["count"].sum()) == len(k) == 591
    ops = S.step_operators(**frames(kernels591), step=1)
    assert ops["input_shapes"].notna().sum() == (k["input_shapes"].astype(str) != "").sum()


def test_ops_by_input_shape_groups_kernels_by_type_and_shapes(kernels591):
    k = kernels591.kernels
    shapes = S.ops_by_input_shape(k)
    assert int(shapes["count"].sum()) == 591
    assert shapes["percent"].sum() == pytest.approx(100.0)
    adam = shapes[(shapes["op_type"] == "ApplyAdamW")]
    want = k[k["type"] == "ApplyAdamW"].groupby(k["input_shapes"].astype(str))["dur_us"].agg(["sum", "size"])
    assert len(adam) == len(want)
    for _, row in adam.iterrows():
        assert row["total_time_us"] == pytest.approx(want.loc[row["input_shapes"], "sum"])
        assert row["count"] == want.loc[row["input_shapes"], "size"]


def test_profiles_without_steps_or_shapes_give_typed_empty_frames():
    prof = nbprofiler.load(DATA / "mindspore2/lenet_pynative")
    by_step = S.op_time_by_step(**frames(prof))
    assert by_step.empty and by_step.attrs["source"] is None
    assert list(by_step.columns) == list(S.BY_STEP_COLUMNS) and by_step.dtypes["count"] == "Int64"
    assert S.ops_by_input_shape(prof.kernels).empty
    assert not has_op_steps(prof)
    with pytest.raises(ValueError, match="no operator can be placed in a step"):
        OpStepsView(prof)


def test_view_ships_each_steps_ops_and_a_click_sets_the_step(widedeep):
    view = OpStepsView(widedeep)
    assert has_op_steps(widedeep)
    points = view.layout.select_one({"name": "op_steps_points"})
    ops = view.layout.select_one({"name": "op_steps_ops"}).data
    by_step = S.op_time_by_step(**frames(widedeep))
    top = S.top_types_over_steps(by_step, 8)
    assert sorted(set(points.data["op_type"])) == sorted(top)
    i = [k for k, (s, t) in enumerate(zip(points.data["step"], points.data["op_type"]))
         if s == 3 and t == "UnsortedSegmentSum"][0]
    assert points.data["time_ms"][i] == pytest.approx(44.59489)
    assert max(pd.Series(ops["step"]).value_counts()) <= 50
    points.selected.indices = [i]
    assert view.step == 3


def test_op_names_reach_the_page_as_data_not_html(widedeep):
    view = OpStepsView(widedeep)
    source = view.layout.select_one({"name": "op_steps_source"})
    assert "&lt;" not in source.text and "aligned on the first AI Core op" in source.text


def test_a_host_bound_step_marked_by_the_trace_holds_all_its_device_tasks():
    """trace_view_torch_npu: no kernels, no step trace; its one step is its ProfilerStep#1 event, whose device
    work starts late (the host is the limiter). Every Ascend Hardware task in the step's span, counted from
    the file with the json module, is in that step."""
    import json
    from collections import Counter
    prof = nbprofiler.load(DATA / "npu/trace_view_torch_npu")
    with open(DATA / "npu/trace_view_torch_npu/trace_view.json", encoding="utf-8") as f:
        events = json.load(f)
    hw = {e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
          and e["args"]["name"] == "Ascend Hardware"}
    [step] = [e for e in events if e.get("ph") == "X" and e["name"] == "ProfilerStep#1"]
    t0, t1 = float(step["ts"]), float(step["ts"]) + float(step["dur"])
    tasks = [e for e in events if e.get("ph") == "X" and e["pid"] in hw and t0 <= float(e["ts"]) < t1]
    first_task = min(float(e["ts"]) for e in tasks)
    assert (first_task - t0) / (t1 - t0) > 0.1   # the device's work starts late in the step
    assert has_op_steps(prof)
    by_step = S.op_time_by_step(**frames(prof))
    assert set(by_step["step"]) == {1} and int(by_step["count"].sum()) == len(tasks)
    assert by_step["total_time_us"].sum() == pytest.approx(sum(float(e["dur"]) for e in tasks), abs=1e-3)
    assert "ProfilerStep#N events" in by_step.attrs["source"]
    assert Counter(S.step_operators(**frames(prof), per_step=10_000)["name"]) == Counter(e["name"] for e in tasks)
